"""Strategic classification with classifier-induced feature markets (Sommer et al., ICML 2025).

Users who are rejected by a deployed linear classifier buy features to cross its
boundary; the prices they pay are not fixed but set by a market that the classifier
itself creates (demand for the features it rewards meets the sellers' supply).
:func:`market_equilibrium` computes the clearing prices and the users' response,
:func:`fixed_cost_response` is the standard strategic-classification response with an
exogenous cost (Hardt et al., ITCS 2016), and :class:`MarketAwareClassifier` learns a
linear classifier through a differentiable model of either response (or of none).
See docs/fairness/strategic.md for the model written out and the measured results.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, NotFittedError
from trustlab.fairness import _strategic_market as _mk
from trustlab.fairness._inputs import binary_labels
from trustlab.fairness._strategic_learn import train_linear

__all__ = [
    "DEMO_SUPPLY",
    "MarketAwareClassifier",
    "StrategicResponse",
    "fixed_cost_response",
    "make_feature_market",
    "market_equilibrium",
]

_ANTICIPATE = ("market", "fixed", "none")


@dataclass(frozen=True)
class StrategicResponse:
    """How a population responds to a deployed linear classifier.

    Attributes
    ----------
    score_price : float
        Price of one unit of score (``inf`` when no feature can be bought).
    prices : numpy.ndarray
        Per-unit price of each feature (market: ``score_price * w_j`` for features with
        positive weight; fixed cost: the given unit costs).
    moved : numpy.ndarray
        Boolean mask of the users who bought features.
    X_response : numpy.ndarray
        Features after the response.
    accepted : numpy.ndarray
        Boolean mask of the users the classifier accepts after the response.
    demand : float
        Units of score bought per user.
    supply : float
        Units of score the sellers supply per user at ``score_price`` (market only;
        equals ``demand`` up to the rationing of users whose cost equals their budget).

    See Also
    --------
    market_equilibrium, fixed_cost_response
    """

    score_price: float
    prices: np.ndarray
    moved: np.ndarray
    X_response: np.ndarray
    accepted: np.ndarray
    demand: float
    supply: float


def _check_population(
    X: Any, coef: Any, intercept: Any, budgets: Any
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    X = check_numeric_array(X, "X", ndim=2)
    if X.shape[1] == 0:
        raise DataError("X has no columns; pass one column per feature.", argument="X")
    w = check_numeric_array(coef, "coef", ndim=1)
    if w.size != X.shape[1]:
        raise DataError(
            f"coef has {w.size} entries but X has {X.shape[1]} columns; pass one weight per feature.",
            argument="coef",
        )
    b = check_numeric_array(np.atleast_1d(intercept), "intercept", ndim=1)
    if b.size != 1:
        raise DataError("intercept must be one number.", argument="intercept")
    B = _budgets(budgets, X.shape[0])
    return X, w, float(b[0]), B


def _budgets(budgets: Any, n: int) -> np.ndarray:
    B = check_numeric_array(budgets, "budgets", ndim=1)
    if B.size != n:
        raise DataError(
            f"budgets has {B.size} entries but X has {n} rows; pass one per user.", argument="budgets"
        )
    if (B < 0).any():
        raise DataError("budgets must be >= 0 (what each user can pay to be accepted).", argument="budgets")
    return B


def _per_feature(value: Any, name: str, d: int, *, positive: bool) -> np.ndarray:
    if np.ndim(value) == 0:
        value = np.full(d, value, dtype=float) if isinstance(value, numbers.Real) else [value]
    arr = check_numeric_array(value, name, ndim=1)
    if arr.size != d:
        raise DataError(
            f"{name} has {arr.size} entries but there are {d} features; pass one per feature.", argument=name
        )
    if (arr < 0).any() or (positive and not (arr > 0).any()):
        need = "> 0 for at least one feature and >= 0 for all" if positive else ">= 0"
        raise DataError(f"{name} must be {need}; got {arr.tolist()[:5]}.", argument=name)
    return arr


@validate_params(
    {
        "X": ["array-like"],
        "coef": ["array-like"],
        "intercept": [numbers.Real],
        "budgets": ["array-like"],
        "supply_slope": ["array-like", Interval(numbers.Real, 0, None, closed="neither")],
        "marginal_cost": ["array-like", Interval(numbers.Real, 0, None, closed="left")],
    }
)
def market_equilibrium(
    X: Any,
    coef: Any,
    intercept: float,
    budgets: Any,
    *,
    supply_slope: Any = 1.0,
    marginal_cost: Any = 0.0,
) -> StrategicResponse:
    """Clearing prices of the feature market a linear classifier induces, and the response.

    Parameters
    ----------
    X : array-like of shape (n_users, n_features)
        The users' features before they respond.
    coef, intercept : array-like of shape (n_features,), float
        The deployed classifier: accept iff ``X @ coef + intercept >= 0``.
    budgets : array-like of shape (n_users,)
        What each user is willing to pay to be accepted (>= 0).
    supply_slope : float or array-like of shape (n_features,), default 1.0
        Units of feature ``j`` supplied per user per unit of price above its marginal
        cost (linear supply ``slope_j * max(p_j - marginal_cost_j, 0)``); > 0 for at
        least one feature.
    marginal_cost : float or array-like of shape (n_features,), default 0.0
        The sellers' marginal cost of each feature (the price below which none is sold).

    Returns
    -------
    StrategicResponse
        Clearing score price, feature prices, who moved and the responded features.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-1.0, 0.0], [-0.5, 0.0], [1.0, 0.0]])
    >>> r = market_equilibrium(X, [1.0, 0.0], 0.0, [0.4, 0.4, 0.0], supply_slope=[1.0, 1.0])
    >>> round(r.score_price, 3), r.moved.tolist()
    (0.4, [False, True, False])
    >>> r.accepted.tolist()
    [False, True, True]

    References
    ----------
    Y. Sommer, I. Hikri, L. Amit, N. Rosenfeld. Learning Classifiers That Induce
    Markets. ICML 2025.
    """
    X, w, b, B = _check_population(X, coef, intercept, budgets)
    slope = _per_feature(supply_slope, "supply_slope", X.shape[1], positive=True)
    cost = _per_feature(marginal_cost, "marginal_cost", X.shape[1], positive=False)
    lam = _mk.clearing_price(X, w, b, B, slope, cost)
    shares = _mk.supply_shares(lam, w, slope, cost)
    X_new, moved = _mk.respond(X, w, b, B, lam, shares)
    g = _mk.gaps(X, w, b)
    prices = (
        np.where(w > 0, lam * np.maximum(w, 0.0), np.nan) if np.isfinite(lam) else np.full(w.size, np.inf)
    )
    return StrategicResponse(
        score_price=float(lam),
        prices=prices,
        moved=moved,
        X_response=X_new,
        accepted=(np.where(moved, 0.0, X @ w + b) >= 0),
        demand=float(np.sum(g[moved]) / X.shape[0]),
        supply=_mk.score_supply(lam, w, slope, cost) if np.isfinite(lam) else 0.0,
    )


@validate_params(
    {
        "X": ["array-like"],
        "coef": ["array-like"],
        "intercept": [numbers.Real],
        "budgets": ["array-like"],
        "unit_costs": ["array-like", Interval(numbers.Real, 0, None, closed="neither")],
        "cost": [Options({"linear", "quadratic"})],
    }
)
def fixed_cost_response(
    X: Any,
    coef: Any,
    intercept: float,
    budgets: Any,
    *,
    unit_costs: Any = 1.0,
    cost: str = "linear",
) -> StrategicResponse:
    """Best response to a linear classifier under a fixed, exogenous cost (Hardt et al. 2016).

    Parameters
    ----------
    X : array-like of shape (n_users, n_features)
        The users' features before they respond.
    coef, intercept : array-like of shape (n_features,), float
        The deployed classifier: accept iff ``X @ coef + intercept >= 0``.
    budgets : array-like of shape (n_users,)
        What each user is willing to pay to be accepted (>= 0).
    unit_costs : float or array-like of shape (n_features,), default 1.0
        ``cost="linear"``: the cost per unit of each feature (separable linear cost
        ``sum_j c_j * max(x'_j - x_j, 0)``; users buy the feature with the least
        ``c_j / w_j``). ``cost="quadratic"``: a single scale ``c`` of the cost
        ``c * ||x' - x||^2`` (the first entry is used).
    cost : {"linear", "quadratic"}, default "linear"
        The cost family.

    Returns
    -------
    StrategicResponse
        ``score_price`` is the cost of one unit of score for the linear cost (``nan``
        for the quadratic cost, whose cost is not linear in the gap); ``supply`` is 0.

    Examples
    --------
    >>> X = [[-1.0, 0.0], [-0.5, 0.0], [1.0, 0.0]]
    >>> r = fixed_cost_response(X, [1.0, 0.0], 0.0, [0.8, 0.8, 0.0], unit_costs=1.0)
    >>> r.moved.tolist(), r.accepted.tolist()
    ([False, True, False], [False, True, True])

    References
    ----------
    M. Hardt, N. Megiddo, C. Papadimitriou, M. Wootters. Strategic Classification.
    ITCS 2016.
    """
    X, w, b, B = _check_population(X, coef, intercept, budgets)
    c = _per_feature(unit_costs, "unit_costs", X.shape[1], positive=True)
    if (c <= 0).any():
        raise DataError("unit_costs must be > 0 for every feature.", argument="unit_costs")
    g = _mk.gaps(X, w, b)
    if cost == "quadratic":
        norm2 = float(w @ w)
        moved = (g > 0) & (c[0] * g * g / max(norm2, 1e-300) <= B) if norm2 > 0 else np.zeros(g.size, bool)
        X_new = X + np.where(moved, g / max(norm2, 1e-300), 0.0)[:, None] * w[None, :]
        lam = float("nan")
    else:
        lam = _mk.fixed_cost_price(w, c)
        ratio = np.where(w > 0, c / np.where(w > 0, w, 1.0), np.inf)
        shares = (ratio == ratio.min()).astype(float) if np.isfinite(lam) else np.zeros(w.size)
        shares /= max(shares.sum(), 1.0)
        X_new, moved = _mk.respond(X, w, b, B, lam, shares)
    return StrategicResponse(
        score_price=lam,
        prices=c.copy(),
        moved=moved,
        X_response=X_new,
        accepted=(np.where(moved, 0.0, X @ w + b) >= 0),
        demand=float(np.sum(g[moved]) / X.shape[0]),
        supply=0.0,
    )


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_feature_market(n_samples: int = 2000, *, random_state: Any = None) -> tuple[np.ndarray, ...]:
    """Synthetic loan-style population for feature-market experiments.

    Three features, labels ``y ~ Bernoulli(1/2)``, ``x = N(0, I) + (2y - 1) * mu / 2``
    with ``mu = (1, 1, 0.6)``, budgets uniform on ``[0, 1]``. The supply used with it in
    the docs and tests (:data:`DEMO_SUPPLY`): feature 0 abundant (slope 4), feature 1
    scarce (slope 0.2), feature 2 in between (slope 1), marginal cost 0.05 each.

    Parameters
    ----------
    n_samples : int, default 2000
        Number of users.
    random_state : int, numpy Generator or None
        Seed of the draw.

    Returns
    -------
    X : numpy.ndarray of shape (n_samples, 3)
    y : numpy.ndarray of shape (n_samples,)
    budgets : numpy.ndarray of shape (n_samples,)

    Examples
    --------
    >>> X, y, budgets = make_feature_market(5, random_state=0)
    >>> X.shape, y.shape, budgets.shape
    ((5, 3), (5,), (5,))
    """
    rng = make_generator(random_state)
    y = rng.integers(0, 2, n_samples)
    X = rng.normal(size=(n_samples, 3)) + np.outer(2 * y - 1, [1.0, 1.0, 0.6]) * 0.5
    budgets = rng.uniform(0.0, 1.0, n_samples)
    return X, y, budgets


DEMO_SUPPLY = {"supply_slope": np.array([4.0, 0.2, 1.0]), "marginal_cost": np.array([0.05, 0.05, 0.05])}


class MarketAwareClassifier(ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """Linear classifier trained to be accurate after users respond to it.

    ``anticipate="market"`` is the paper's market-aware learner: it differentiates
    through the clearing price its own weights induce. ``"fixed"`` is the standard
    strategic learner with an exogenous cost (``fixed_costs``, Hardt et al. 2016), and
    ``"none"`` the naive learner that ignores the response. All three share the
    smoothed objective of docs/fairness/strategic.md; evaluate them with
    :meth:`score_strategic`, which lets the population respond at the market prices
    the deployed classifier induces.

    Parameters
    ----------
    anticipate : {"market", "fixed", "none"}, default "market"
        The response the learner models.
    supply_slope, marginal_cost : float or array-like of shape (n_features,)
        The feature market (see :func:`market_equilibrium`); used by ``"market"`` in
        training and by every learner in :meth:`respond` / :meth:`score_strategic`.
    fixed_costs : float or array-like of shape (n_features,), default 1.0
        Per-unit costs the ``"fixed"`` learner assumes (for ``fixed_cost="quadratic"``
        the scale of ``c * ||x' - x||^2``).
    fixed_cost : {"linear", "quadratic"}, default "linear"
        Cost family of the ``"fixed"`` learner.
    temperature : float, default 0.05
        Smoothing of the sigmoids in training (> 0).
    max_iter : int, default 400
        Adam steps.
    learning_rate : float, default 0.05
        Adam step size (> 0).

    Attributes
    ----------
    coef_ : numpy.ndarray of shape (n_features,)
        Unit-norm weights.
    intercept_ : float
        Intercept.
    loss_curve_ : list of float
        Training loss per step.
    classes_ : numpy.ndarray
        ``[0, 1]``.

    Examples
    --------
    >>> X, y, budgets = make_feature_market(1000, random_state=0)
    >>> clf = MarketAwareClassifier(max_iter=50, **DEMO_SUPPLY).fit(X, y, budgets)
    >>> 0.5 < clf.score_strategic(X, y, budgets) <= 1.0
    True

    References
    ----------
    Y. Sommer, I. Hikri, L. Amit, N. Rosenfeld. Learning Classifiers That Induce
    Markets. ICML 2025.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "anticipate": [Options(set(_ANTICIPATE))],
        "supply_slope": ["array-like", Interval(numbers.Real, 0, None, closed="neither")],
        "marginal_cost": ["array-like", Interval(numbers.Real, 0, None, closed="left")],
        "fixed_costs": ["array-like", Interval(numbers.Real, 0, None, closed="neither")],
        "fixed_cost": [Options({"linear", "quadratic"})],
        "temperature": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
    }

    def __init__(
        self,
        anticipate: str = "market",
        *,
        supply_slope: Any = 1.0,
        marginal_cost: Any = 0.0,
        fixed_costs: Any = 1.0,
        fixed_cost: str = "linear",
        temperature: float = 0.05,
        max_iter: int = 400,
        learning_rate: float = 0.05,
    ) -> None:
        self.anticipate = anticipate
        self.supply_slope = supply_slope
        self.marginal_cost = marginal_cost
        self.fixed_costs = fixed_costs
        self.fixed_cost = fixed_cost
        self.temperature = temperature
        self.max_iter = max_iter
        self.learning_rate = learning_rate

    def fit(self, X: Any, y: Any, budgets: Any = None) -> MarketAwareClassifier:
        """Learn the weights under the anticipated response.

        Parameters
        ----------
        X : array-like of shape (n_users, n_features)
            Training features (before any response).
        y : array-like of shape (n_users,)
            True labels in {0, 1}; both must occur.
        budgets : array-like of shape (n_users,), optional
            Each user's budget (>= 0); default 1 for every user.

        Returns
        -------
        MarketAwareClassifier
            ``self``, fitted.
        """
        self._validate_params()
        X = check_numeric_array(X, "X", ndim=2)
        y = binary_labels(y, "y", n=X.shape[0])
        B = np.ones(X.shape[0]) if budgets is None else _budgets(budgets, X.shape[0])
        d = X.shape[1]
        slope = _per_feature(self.supply_slope, "supply_slope", d, positive=True)
        cost = _per_feature(self.marginal_cost, "marginal_cost", d, positive=False)
        fixed = _per_feature(self.fixed_costs, "fixed_costs", d, positive=True)
        if self.anticipate == "fixed" and (fixed <= 0).any():
            raise DataError("fixed_costs must be > 0 for every feature.", argument="fixed_costs")
        lr = LogisticRegression().fit(X, y)
        w, b, losses = train_linear(
            X,
            y.astype(float),
            B,
            anticipate=self.anticipate,
            slope=slope,
            cost=cost,
            fixed_costs=fixed,
            cost_kind=self.fixed_cost,
            tau=float(self.temperature),
            max_iter=int(self.max_iter),
            learning_rate=float(self.learning_rate),
            init=(lr.coef_[0].astype(float), float(lr.intercept_[0])),
        )
        self.coef_, self.intercept_, self.loss_curve_ = w, b, losses
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = d
        return self

    def _check_fitted(self, X: Any) -> np.ndarray:
        if not hasattr(self, "coef_"):
            raise NotFittedError("MarketAwareClassifier is not fitted; call fit(X, y, budgets) first.")
        X = check_numeric_array(X, "X", ndim=2)
        if X.shape[1] != self.n_features_in_:
            raise DataError(
                f"X has {X.shape[1]} columns but the classifier was fitted on {self.n_features_in_}.",
                argument="X",
            )
        return X

    def decision_function(self, X: Any) -> np.ndarray:
        """Score ``X @ coef_ + intercept_`` of features as given (no response).

        Parameters
        ----------
        X : array-like of shape (n_users, n_features)
            Features.

        Returns
        -------
        numpy.ndarray of shape (n_users,)
            The scores.
        """
        X = self._check_fitted(X)
        return X @ self.coef_ + self.intercept_

    def predict(self, X: Any) -> np.ndarray:
        """Labels of features as given (no response): 1 iff the score is >= 0.

        Parameters
        ----------
        X : array-like of shape (n_users, n_features)
            Features.

        Returns
        -------
        numpy.ndarray of shape (n_users,)
            Predicted labels in {0, 1}.
        """
        return (self.decision_function(X) >= 0).astype(np.int64)

    def respond(self, X: Any, budgets: Any) -> StrategicResponse:
        """The population's response at the market prices this classifier induces.

        Parameters
        ----------
        X : array-like of shape (n_users, n_features)
            The users' features before they respond.
        budgets : array-like of shape (n_users,)
            Each user's budget.

        Returns
        -------
        StrategicResponse
            See :func:`market_equilibrium`.
        """
        X = self._check_fitted(X)
        return market_equilibrium(
            X,
            self.coef_,
            self.intercept_,
            budgets,
            supply_slope=self.supply_slope,
            marginal_cost=self.marginal_cost,
        )

    def score_strategic(self, X: Any, y: Any, budgets: Any) -> float:
        """Accuracy after the population responds at the induced market prices.

        Parameters
        ----------
        X : array-like of shape (n_users, n_features)
            Features before the response.
        y : array-like of shape (n_users,)
            True labels (they do not change when features are bought).
        budgets : array-like of shape (n_users,)
            Each user's budget.

        Returns
        -------
        float
            Fraction of users classified correctly after the response.
        """
        X = self._check_fitted(X)
        y = binary_labels(y, "y", n=X.shape[0], both_classes=False)
        return float(np.mean(self.respond(X, budgets).accepted == (y == 1)))
