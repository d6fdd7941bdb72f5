"""Strategic classification with classifier-induced feature markets (Sommer et al., ICML 2025).

Users rejected by a deployed linear classifier buy features to cross its boundary; the
prices they pay are not fixed but set by the sellers of the features the classifier
rewards. :func:`market_equilibrium` computes the paper's revenue-maximising market
price (prices proportional to the weights; one scalar found by a sorted sweep) and the
users' response, :func:`fixed_cost_response` is the standard strategic-classification
response with an exogenous cost (Hardt et al., ITCS 2016), and
:class:`MarketAwareClassifier` learns a linear classifier with the paper's market-aware
strategic classification (MASC: a market hinge loss through a differentiable price),
beside the paper's naive and fixed-price ("Strat") baselines. See
docs/fairness/strategic.md for the model written out and the measured results.
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
from trustlab.fairness._strategic_inputs import _budgets, _check_population, _per_feature
from trustlab.fairness._strategic_learn import hinge_at_price, train_masc

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
    unit_price : float
        Cost of moving one unit of distance towards the boundary (the paper's ``rho``:
        crossing costs ``unit_price * u`` at distance ``u``); ``inf`` when nothing is
        sold, ``nan`` for the quadratic fixed cost.
    prices : numpy.ndarray
        Per-unit price of each feature (revenue market: ``unit_price * w / ||w||``;
        clearing market: ``lam * w_j`` for features with positive weight; fixed cost:
        the given unit costs).
    moved : numpy.ndarray
        Boolean mask of the users who bought features.
    X_response : numpy.ndarray
        Features after the response.
    accepted : numpy.ndarray
        Boolean mask of the users the classifier accepts after the response.
    demand : float
        Units of distance bought per user (mean over all users).
    revenue : float
        The sellers' revenue per user (``unit_price * demand``; 0 for a fixed cost).

    See Also
    --------
    market_equilibrium, fixed_cost_response
    """

    unit_price: float
    prices: np.ndarray
    moved: np.ndarray
    X_response: np.ndarray
    accepted: np.ndarray
    demand: float
    revenue: float


@validate_params(
    {
        "X": ["array-like"],
        "coef": ["array-like"],
        "intercept": [numbers.Real],
        "budgets": ["array-like"],
        "pricing": [Options({"revenue", "clearing"})],
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
    pricing: str = "revenue",
    supply_slope: Any = 1.0,
    marginal_cost: Any = 0.0,
) -> StrategicResponse:
    """Market price a linear classifier induces for features, and the users' response.

    ``pricing="revenue"`` is the paper's market: feature prices are proportional to the
    weights, ``p = rho * w / ||w||``, so a rejected user at distance ``u`` from the
    boundary can cross for ``rho * u`` and does iff that is at most its budget; the
    sellers choose ``rho`` to maximise their revenue ``rho * sum(u of the buyers)``
    (the maximiser is one of the users' reservation prices ``B / u``: a sorted sweep,
    ``O(n log n)``). Buyers move straight to the boundary (along ``w``).
    ``pricing="clearing"`` is an alternative this module keeps: a competitive market with
    linear supply ``supply_slope * max(p - marginal_cost, 0)`` per feature, cleared at
    the least price where supply meets demand (docs/fairness/strategic.md).

    Parameters
    ----------
    X : array-like of shape (n_users, n_features)
        The users' features before they respond.
    coef, intercept : array-like of shape (n_features,), float
        The deployed classifier: accept iff ``X @ coef + intercept >= 0``.
    budgets : array-like of shape (n_users,)
        What each user can pay to be accepted (>= 0).
    pricing : {"revenue", "clearing"}, default "revenue"
        The paper's revenue-maximising sellers, or a competitive clearing market.
    supply_slope : float or array-like of shape (n_features,), default 1.0
        ``pricing="clearing"`` only: units of feature ``j`` supplied per user per unit of
        price above its marginal cost; > 0 for at least one feature.
    marginal_cost : float or array-like of shape (n_features,), default 0.0
        ``pricing="clearing"`` only: the sellers' marginal cost of each feature.

    Returns
    -------
    StrategicResponse
        Unit price, feature prices, who moved and the responded features.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[-1.0, 0.0], [-0.5, 0.0], [1.0, 0.0]])
    >>> r = market_equilibrium(X, [1.0, 0.0], 0.0, [0.4, 0.4, 0.0])
    >>> round(r.unit_price, 3), r.moved.tolist(), r.accepted.tolist()
    (0.4, [True, True, False], [True, True, True])
    >>> r = market_equilibrium(X, [1.0, 0.0], 0.0, [0.2, 0.4, 0.0])
    >>> round(r.unit_price, 3), r.moved.tolist()
    (0.8, [False, True, False])

    References
    ----------
    Y. Sommer, I. Hikri, L. Amit, N. Rosenfeld. Learning Classifiers That Induce
    Markets. ICML 2025 (PMLR 267).
    """
    X, w, b, B = _check_population(X, coef, intercept, budgets)
    if pricing == "revenue":
        u = _mk.distances(X, w, b)
        rho, revenue, moved = _mk.revenue_price(u, B)
        norm = float(np.linalg.norm(w))
        direction = w / norm if norm > 0 else np.zeros_like(w)
        X_new = X + np.where(moved, u, 0.0)[:, None] * direction[None, :]
        prices = rho * direction if np.isfinite(rho) else np.full(w.size, np.inf)
        demand = float(np.sum(u[moved]) / X.shape[0])
        return StrategicResponse(
            unit_price=float(rho),
            prices=prices,
            moved=moved,
            X_response=X_new,
            accepted=(np.where(moved, 0.0, X @ w + b) >= 0),
            demand=demand,
            revenue=revenue,
        )
    slope = _per_feature(supply_slope, "supply_slope", X.shape[1], positive=True)
    cost = _per_feature(marginal_cost, "marginal_cost", X.shape[1], positive=False)
    lam = _mk.clearing_price(X, w, b, B, slope, cost)
    shares = _mk.supply_shares(lam, w, slope, cost)
    X_new, moved = _mk.respond(X, w, b, B, lam, shares)
    norm = float(np.linalg.norm(w))
    g = _mk.gaps(X, w, b)
    prices = (
        np.where(w > 0, lam * np.maximum(w, 0.0), np.nan) if np.isfinite(lam) else np.full(w.size, np.inf)
    )
    demand = float(np.sum(g[moved]) / X.shape[0]) / norm if norm > 0 else 0.0
    return StrategicResponse(
        unit_price=float(lam * norm),
        prices=prices,
        moved=moved,
        X_response=X_new,
        accepted=(np.where(moved, 0.0, X @ w + b) >= 0),
        demand=demand,
        revenue=float(lam * norm * demand) if np.isfinite(lam) else 0.0,
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
        ``unit_price`` is the cost of one unit of distance to the boundary for the
        linear cost (``nan`` for the quadratic cost, whose cost is not linear in the
        distance); ``revenue`` is 0.

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
    norm = float(np.linalg.norm(w))
    return StrategicResponse(
        unit_price=lam * norm if np.isfinite(lam) else lam,
        prices=c.copy(),
        moved=moved,
        X_response=X_new,
        accepted=(np.where(moved, 0.0, X @ w + b) >= 0),
        demand=float(np.sum(g[moved]) / X.shape[0]) / norm if norm > 0 else 0.0,
        revenue=0.0,
    )


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "inequality": [Interval(numbers.Real, 1, 2.0**60, closed="both")],
        "budget_label_correlation": [Interval(numbers.Real, 0, 1, closed="both")],
        "random_state": ["random_state"],
    }
)
def make_feature_market(
    n_samples: int = 2000,
    *,
    inequality: float = 64.0,
    budget_label_correlation: float = 0.5,
    random_state: Any = None,
) -> tuple[np.ndarray, ...]:
    """Synthetic loan-style population with budgets of a given inequality.

    Two features, labels ``y ~ Bernoulli(1/2)``, ``x = N(0, I) + (2y - 1) * (0.6, 0.3)``.
    Budgets span ``[1, inequality]`` (the paper's budget-inequality scale
    ``b_max / b_min``): ``B = inequality ** z`` with
    ``z = (1 - c) U + c y``, ``U`` uniform on [0, 1] and ``c`` the
    ``budget_label_correlation`` (as the Adult data's capital gain, the paper's budget
    proxy, rises with the income label; ``c = 0``: budgets independent of the label).

    Parameters
    ----------
    n_samples : int, default 2000
        Number of users.
    inequality : float, default 64
        ``b_max / b_min`` in [1, 2**60]; 1 gives every user the same budget.
    budget_label_correlation : float, default 0.5
        ``c`` in [0, 1].
    random_state : int, numpy Generator or None
        Seed of the draw.

    Returns
    -------
    X : numpy.ndarray of shape (n_samples, 2)
    y : numpy.ndarray of shape (n_samples,)
    budgets : numpy.ndarray of shape (n_samples,)

    Examples
    --------
    >>> X, y, budgets = make_feature_market(5, random_state=0)
    >>> X.shape, y.shape, bool(budgets.min() >= 1 and budgets.max() <= 64)
    ((5, 2), (5,), True)
    """
    rng = make_generator(random_state)
    y = rng.integers(0, 2, n_samples)
    X = rng.normal(size=(n_samples, 2)) + np.outer(2 * y - 1, [0.6, 0.3])
    c = float(budget_label_correlation)
    z = (1.0 - c) * rng.uniform(size=n_samples) + c * y
    budgets = float(inequality) ** z
    return X, y, budgets


DEMO_SUPPLY = {"supply_slope": np.array([4.0, 0.2]), "marginal_cost": np.array([0.05, 0.05])}
"""A competitive supply for ``market_equilibrium(..., pricing="clearing", **DEMO_SUPPLY)`` on
:func:`make_feature_market` data: feature 0 abundant (slope 4), feature 1 scarce (0.2)."""


class MarketAwareClassifier(ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """Linear classifier trained to be accurate after users buy features at the prices it induces.

    ``anticipate="market"`` is the paper's market-aware strategic classification
    (MASC): the market hinge loss ``max(0, 1 - y (w.x + b + (B / rho) ||w||))`` with
    the revenue-maximising price ``rho`` made differentiable (SoftSort of the users'
    reservation prices, softmax over the revenue), plus ``regularization * ||w||^2``,
    by Adam from the naive fit. ``"fixed"`` is the paper's "Strat" baseline: the naive
    weights, the price the naive classifier induces on the training users (or
    ``fixed_price``) held fixed, and the intercept that minimises the market hinge at
    that price (a grid on [-3, 3], the authors' line search). ``"none"`` is the naive
    learner (logistic regression, blind to the response). Evaluate all three with
    :meth:`score_strategic`: the test population responds at the price the deployed
    classifier induces on it (the paper's "long-term" accuracy).

    Parameters
    ----------
    anticipate : {"market", "fixed", "none"}, default "market"
        The learner.
    fixed_price : float or None, default None
        ``"fixed"`` only: the price per unit of distance the learner assumes; ``None``:
        the price the naive classifier induces on the training users.
    regularization : float, default 0.01
        Weight of ``||w||^2`` in the MASC objective (>= 0).
    sort_temperature : float, default 0.1
        SoftSort temperature (> 0; smaller is closer to a hard sort; the authors' 0.1).
    price_temperature : float, default 2.0
        Softmax temperature over the revenues (> 0; larger is closer to the argmax; the
        authors' 2).
    max_iter : int, default 100
        Epochs of Adam.
    learning_rate : float, default 0.01
        Adam step size (> 0).
    batch_size : int, default 256
        Users per mini-batch; the price is computed per batch, as in the authors' code
        (SoftSort costs ``batch_size ** 2``; the paper's batch size was not readable).
    random_state : int, default 0
        Seed of the mini-batch order.

    Attributes
    ----------
    coef_ : numpy.ndarray of shape (n_features,)
        Weights.
    intercept_ : float
        Intercept.
    train_price_ : float
        The price the fitted classifier induces on the training users.
    loss_curve_ : list of float
        Training loss per epoch (``"market"``), per grid point (``"fixed"``), empty
        (``"none"``).
    classes_ : numpy.ndarray
        ``[0, 1]``.

    Examples
    --------
    >>> X, y, budgets = make_feature_market(1000, random_state=0)
    >>> clf = MarketAwareClassifier(max_iter=5).fit(X, y, budgets)
    >>> 0.5 < clf.score_strategic(X, y, budgets) <= 1.0
    True

    References
    ----------
    Y. Sommer, I. Hikri, L. Amit, N. Rosenfeld. Learning Classifiers That Induce
    Markets. ICML 2025 (PMLR 267).
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "anticipate": [Options(set(_ANTICIPATE))],
        "fixed_price": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "regularization": [Interval(numbers.Real, 0, None, closed="left")],
        "sort_temperature": [Interval(numbers.Real, 0, None, closed="neither")],
        "price_temperature": [Interval(numbers.Real, 0, None, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 2, None, closed="left")],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        anticipate: str = "market",
        *,
        fixed_price: float | None = None,
        regularization: float = 0.01,
        sort_temperature: float = 0.1,
        price_temperature: float = 2.0,
        max_iter: int = 100,
        learning_rate: float = 0.01,
        batch_size: int = 256,
        random_state: int = 0,
    ) -> None:
        self.anticipate = anticipate
        self.fixed_price = fixed_price
        self.regularization = regularization
        self.sort_temperature = sort_temperature
        self.price_temperature = price_temperature
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.random_state = random_state

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
        if X.shape[1] == 0:
            raise DataError("X has no columns; pass one column per feature.", argument="X")
        y = binary_labels(y, "y", n=X.shape[0])
        B = np.ones(X.shape[0]) if budgets is None else _budgets(budgets, X.shape[0])
        lr = LogisticRegression().fit(X, y)
        w, b = lr.coef_[0].astype(float), float(lr.intercept_[0])
        losses: list[float] = []
        if self.anticipate == "market":
            w, b, losses = train_masc(
                X,
                y.astype(float),
                B,
                init=(w, b),
                regularization=float(self.regularization),
                sort_tau=float(self.sort_temperature),
                price_tau=float(self.price_temperature),
                max_iter=int(self.max_iter),
                learning_rate=float(self.learning_rate),
                batch_size=int(self.batch_size),
                seed=int(self.random_state),
            )
        elif self.anticipate == "fixed":
            rho = self.fixed_price
            if rho is None:
                rho, _, _ = _mk.revenue_price(_mk.distances(X, w, b), B)
            grid = np.linspace(-3.0, 3.0, 100)
            losses = [hinge_at_price(X, y.astype(float), B, w, float(c), float(rho)) for c in grid]
            b = float(grid[int(np.argmin(losses))])
        self.coef_, self.intercept_, self.loss_curve_ = w, b, losses
        self.train_price_ = _mk.revenue_price(_mk.distances(X, w, b), B)[0]
        self.classes_ = np.array([0, 1])
        self.n_features_in_ = X.shape[1]
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
        """The population's response at the market price this classifier induces on it.

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
        return market_equilibrium(X, self.coef_, self.intercept_, budgets)

    def score_strategic(self, X: Any, y: Any, budgets: Any) -> float:
        """Accuracy after the population responds at the price the classifier induces on it.

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
