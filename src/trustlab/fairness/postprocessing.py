"""Hardt-Price-Srebro randomized group thresholds, solved as a linear program (HiGHS).

Given a score ``s(x)`` (an ensemble's mean probability, a model's decision
function, ...), each group ``a`` can reach any (FPR, TPR) operating point inside the
convex hull of its ROC curve by randomizing between thresholds. The post-processor
picks one operating point per group minimising expected cost subject to a fairness
constraint between groups; both are linear in the mixing weights of the hull
vertices, so the whole problem is one LP (Hardt, Price and Srebro, NeurIPS 2016),
here with a tolerance ``eps`` (``eps = 0`` is the original exact LP; ``eps > 0`` is
the relaxation of Cruz and Hardt used by Schweighofer et al., ICML 2025).
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from scipy.optimize import linprog
from scipy.spatial import ConvexHull
from sklearn.base import BaseEstimator, ClassifierMixin, clone

from trustlab._param_validation import HasMethods, Interval, Options, ParamsValidationMixin
from trustlab._validation import make_generator
from trustlab.errors import DataError, ModelError, NotFittedError
from trustlab.fairness._inputs import binary_labels, group_codes, scores_1d

__all__ = ["HardtPostProcessor", "SmallGroupWarning"]

CONSTRAINTS = ("equalized_odds", "equal_opportunity", "demographic_parity")
# The audit's size rule (trustlab.audit.prediction_table.MIN_GROUP and MIN_CLASS, a test keeps
# them equal): a group's TPR and FPR are compared only with at least this many rows, positives
# and negatives. Below it a rate's standard error reaches 0.16 (10 positives at TPR 0.5).
MIN_ROWS = 30
MIN_CLASS = 10


class SmallGroupWarning(UserWarning):
    """A group has too few positives or negatives for its TPR / FPR to be estimated."""


def _roc_hull(scores: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Upper convex hull of the ROC curve of ``predict 1 iff score >= threshold``.

    Returns ``(fpr, tpr, thresholds)`` of the hull vertices, from (0, 0) (threshold
    +inf) to (1, 1) (threshold -inf).
    """
    order = np.argsort(-scores, kind="stable")
    s, t = scores[order], y[order]
    last_of_tie = np.r_[s[1:] != s[:-1], True]
    tp = np.cumsum(t)[last_of_tie].astype(float)
    fp = np.cumsum(1 - t)[last_of_tie].astype(float)
    fpr = np.r_[0.0, fp / fp[-1]]
    tpr = np.r_[0.0, tp / tp[-1]]
    thr = np.r_[np.inf, s[last_of_tie]]
    thr[-1] = -np.inf  # the (1, 1) vertex accepts every score, also unseen lower ones
    # The upper hull is the hull of the ROC points and the corner (1, 0), less that corner:
    # (0, 0) -> (1, 0) -> (1, 1) closes the lower side, so every other vertex is on the upper chain.
    pts = np.column_stack([np.r_[fpr, 1.0], np.r_[tpr, 0.0]])
    vertices = ConvexHull(pts).vertices
    vertices = vertices[vertices < fpr.size]
    idx = vertices[np.lexsort((tpr[vertices], fpr[vertices]))]
    return fpr[idx], tpr[idx], thr[idx]


class HardtPostProcessor(ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """Randomized per-group thresholds for equalized odds, equal opportunity or demographic parity.

    A scikit-learn meta-estimator in the manner of fairlearn's ``ThresholdOptimizer``:
    ``fit(X, y, *, sensitive_features)`` on a held-out split, then
    ``predict(X, *, sensitive_features)``. Without ``estimator``, ``X`` is the score
    itself (shape ``(n,)`` or ``(n, 1)``), e.g. an ensemble's mean probability.

    For each group ``a`` the fit computes the upper convex hull ``V_a`` of the ROC
    curve, then solves with HiGHS the LP over mixing weights ``lambda_{a,v} >= 0``,
    ``sum_v lambda_{a,v} = 1``, operating point ``(f_a, t_a) = sum_v lambda_{a,v} V_{a,v}``::

        minimise  sum_a P(a) [cost_fp P(y=0|a) f_a + cost_fn P(y=1|a) (1 - t_a)]

    subject to, for every pair of groups ``a, b``: ``|t_a - t_b| <= eps`` (equal
    opportunity); that and ``|f_a - f_b| <= eps`` (equalized odds, ``norm="linf"``) or
    ``|t_a - t_b| + |f_a - f_b| <= eps`` (``norm="l1"``); ``|r_a - r_b| <= eps`` with
    ``r_a = P(y=1|a) t_a + P(y=0|a) f_a`` (demographic parity). A row of group ``a``
    with score ``s`` is predicted 1 with probability
    ``sum_v lambda_{a,v} [s >= threshold_v]``; the mixture of vertex thresholds
    realises any point of the hull's region exactly (also points strictly inside
    it, which equalized odds often needs).

    Randomized predictions: ``random_state`` (here or in :meth:`predict`) seeds the
    draw that turns these probabilities into labels; :meth:`predict_proba` returns
    the probabilities themselves, with no randomness.

    Parameters
    ----------
    estimator : estimator, optional
        A classifier whose score is post-processed. ``None``: ``X`` is the score.
    constraint : {"equalized_odds", "equal_opportunity", "demographic_parity"}, default "equalized_odds"
        The fairness constraint between groups.
    tolerance : float in [0, 1], default 0.0
        Allowed disparity ``eps``; 0 is Hardt et al.'s exact parity. Schweighofer et
        al. use the members' mean validation violation, or 0.05.
    norm : {"linf", "l1"}, default "linf"
        How equalized odds combines the TPR and FPR gaps (ignored otherwise).
    cost_fp, cost_fn : float > 0, default 1.0
        Costs of a false positive and a false negative (1, 1: the error rate).
    prefit : bool, default False
        Use ``estimator`` as fitted (else a clone is fitted on ``X, y``).
    predict_method : {"auto", "predict_proba", "decision_function", "predict"}, default "auto"
        How the score is read from ``estimator``; "auto" tries them in this order.
    random_state : int, numpy.random.Generator or None
        Seed of the randomized predictions (not of the fit, which is deterministic).

    Attributes
    ----------
    groups_ : list
        Group labels seen in ``fit`` (sorted).
    operating_points_ : pandas.DataFrame
        Per group: ``fpr``, ``tpr``, ``selection_rate``, ``base_rate``, ``share`` on the fitting
        data, its ``rows``, ``positives`` and ``negatives``, and ``estimable``: whether it has
        at least 30 rows, 10 positives and 10 negatives (the audit's size rule).
    small_groups_ : list
        Groups that fail that rule. Each gets a :class:`SmallGroupWarning` at ``fit``: their
        rates are too noisy for exact parity to carry over to new data (measured: exact
        equalized odds with a 171-row group made held-out equalized-odds difference worse,
        0.122 -> 0.165, and cost 5 points of accuracy, in trustlab and fairlearn alike).
        Merge such a group, fit on more rows, or use ``tolerance > 0``.
    thresholds_ : dict
        Group -> thresholds of the hull vertices used (decreasing).
    mix_probs_ : dict
        Group -> probability of using each of those thresholds.
    expected_cost_ : float
        LP objective: expected cost on the fitting data.
    estimator_ : estimator or None
        The fitted estimator.

    References
    ----------
    M. Hardt, E. Price, N. Srebro, "Equality of Opportunity in Supervised Learning",
    NeurIPS 2016. K. Schweighofer, A. Arnaiz-Rodriguez, S. Hochreiter, N. Oliver, "The
    Disparate Benefits of Deep Ensembles", ICML 2025. A. F. Cruz, M. Hardt, "Unprocessing
    Seven Years of Algorithmic Fairness", ICLR 2024 (the relaxed LP).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a = rng.integers(0, 2, 4000); y = rng.integers(0, 2, 4000)
    >>> s = 1 / (1 + np.exp(-(2 * y - 1) * (1 + a) - rng.normal(size=4000)))
    >>> post = HardtPostProcessor(constraint="equal_opportunity", random_state=0)
    >>> post = post.fit(s, y, sensitive_features=a)
    >>> tpr = post.operating_points_["tpr"]
    >>> bool(abs(tpr[1] - tpr[0]) < 1e-9)
    True
    >>> post.predict_proba(s[:2], sensitive_features=a[:2]).shape
    (2, 2)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "estimator": [None, HasMethods(["fit"])],
        "constraint": [Options(CONSTRAINTS)],
        "tolerance": [Interval(numbers.Real, 0, 1, closed="both")],
        "norm": [Options({"linf", "l1"})],
        "cost_fp": [Interval(numbers.Real, 0, None, closed="neither")],
        "cost_fn": [Interval(numbers.Real, 0, None, closed="neither")],
        "prefit": ["boolean"],
        "predict_method": [Options({"auto", "predict_proba", "decision_function", "predict"})],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        estimator: Any = None,
        *,
        constraint: str = "equalized_odds",
        tolerance: float = 0.0,
        norm: str = "linf",
        cost_fp: float = 1.0,
        cost_fn: float = 1.0,
        prefit: bool = False,
        predict_method: str = "auto",
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.constraint = constraint
        self.tolerance = tolerance
        self.norm = norm
        self.cost_fp = cost_fp
        self.cost_fn = cost_fn
        self.prefit = prefit
        self.predict_method = predict_method
        self.random_state = random_state

    # -- scores -----------------------------------------------------------------
    def _score(self, estimator: Any, X: Any) -> np.ndarray:
        if estimator is None:
            return scores_1d(X, "X")
        methods = (
            ("predict_proba", "decision_function", "predict")
            if self.predict_method == "auto"
            else (self.predict_method,)
        )
        for method in methods:
            fn = getattr(estimator, method, None)
            if callable(fn):
                out = np.asarray(fn(X), dtype=float)
                if method == "predict_proba":
                    if out.ndim != 2 or out.shape[1] != 2:
                        raise ModelError(
                            "estimator.predict_proba must return shape (n, 2) for a binary task, "
                            f"got {out.shape}.",
                            argument="estimator",
                        )
                    out = out[:, 1]
                return scores_1d(out, f"estimator.{method}(X)")
        raise ModelError(
            f"estimator has none of the methods {methods}; pass predict_method= one it has.",
            argument="estimator",
        )

    # -- fit --------------------------------------------------------------------
    def fit(self, X: Any, y: Any, *, sensitive_features: Any) -> HardtPostProcessor:
        """Fit the group thresholds on ``(X, y)`` (a split the model was not trained on).

        Parameters
        ----------
        X : array-like
            Scores of shape ``(n,)``/``(n, 1)`` without ``estimator``, else the estimator's input.
        y : array-like of shape (n_samples,)
            Labels, 0 or 1.
        sensitive_features : array-like of shape (n_samples,)
            The group of each row; every group needs positives and negatives.

        Returns
        -------
        HardtPostProcessor
            The fitted post-processor.
        """
        self._validate_params()
        if self.estimator is None:
            self.estimator_ = None
        elif self.prefit:
            self.estimator_ = self.estimator
        else:
            yy = binary_labels(y, "y")
            self.estimator_ = clone(self.estimator).fit(X, yy)
        s = self._score(self.estimator_, X)
        yv = binary_labels(y, "y", n=s.size)
        codes, labels = group_codes(sensitive_features, s.size)
        n_groups = len(labels)
        hulls = []
        shares, base = np.zeros(n_groups), np.zeros(n_groups)
        counts = np.zeros((n_groups, 3), dtype=np.int64)  # rows, positives, negatives
        for g, lab in enumerate(labels):
            m = codes == g
            n_pos = int(yv[m].sum())
            counts[g] = (int(m.sum()), n_pos, int(m.sum()) - n_pos)
            if n_pos == 0 or n_pos == int(m.sum()):
                raise DataError(
                    f"group {lab!r} of sensitive_features has "
                    f"{'no positive' if n_pos == 0 else 'no negative'} labels in y; its TPR/FPR are "
                    "undefined. Merge it with another group or fit on more data.",
                    argument="sensitive_features",
                )
            hulls.append(_roc_hull(s[m], yv[m]))
            shares[g] = m.mean()
            base[g] = yv[m].mean()
        self.groups_ = labels
        self.classes_ = np.array([0, 1])
        self._solve(hulls, shares, base)
        estimable = (counts[:, 0] >= MIN_ROWS) & (counts[:, 1] >= MIN_CLASS) & (counts[:, 2] >= MIN_CLASS)
        self.operating_points_["rows"] = counts[:, 0]
        self.operating_points_["positives"] = counts[:, 1]
        self.operating_points_["negatives"] = counts[:, 2]
        self.operating_points_["estimable"] = estimable
        self.small_groups_ = [lab for lab, ok in zip(labels, estimable, strict=True) if not ok]
        if self.small_groups_:
            shown = ", ".join(
                f"{lab!r} ({r} rows, {p} positives, {q} negatives)"
                for lab, (r, p, q), ok in zip(labels, counts.tolist(), estimable, strict=True)
                if not ok
            )
            warnings.warn(
                f"HardtPostProcessor: group(s) {shown} have fewer than {MIN_ROWS} rows or {MIN_CLASS} "
                "positives or negatives in the fitting data, so their TPR/FPR cannot be estimated and "
                f"parity fitted to them may not hold on new data (it can make the {self.constraint} gap "
                "worse and cost accuracy). Merge small groups, fit on more rows, or set tolerance > 0; "
                "see operating_points_['estimable'].",
                SmallGroupWarning,
                stacklevel=2,
            )
        return self

    def _solve(
        self, hulls: list[tuple[np.ndarray, np.ndarray, np.ndarray]], shares: np.ndarray, base: np.ndarray
    ) -> None:
        sizes = [h[0].size for h in hulls]
        starts = np.r_[0, np.cumsum(sizes)]
        n_lam = int(starts[-1])
        n_groups = len(hulls)
        pairs = [(a, b) for a in range(n_groups) for b in range(a + 1, n_groups)]
        eps = float(self.tolerance)
        use_l1 = self.constraint == "equalized_odds" and self.norm == "l1"
        n_var = n_lam + (2 * len(pairs) if use_l1 else 0)

        def row(kind: str, g: int) -> np.ndarray:
            """Coefficients of t_g ('t'), f_g ('f') or r_g ('r') in the lambda variables."""
            fpr, tpr, _ = hulls[g]
            r = np.zeros(n_var)
            sl = slice(starts[g], starts[g + 1])
            if kind == "t":
                r[sl] = tpr
            elif kind == "f":
                r[sl] = fpr
            else:
                r[sl] = base[g] * tpr + (1 - base[g]) * fpr
            return r

        c = np.zeros(n_var)
        for g in range(n_groups):
            c += shares[g] * (
                self.cost_fp * (1 - base[g]) * row("f", g) - self.cost_fn * base[g] * row("t", g)
            )
        const = float(np.sum(shares * self.cost_fn * base))
        a_ub, b_ub = [], []
        kinds = {"equal_opportunity": ("t",), "equalized_odds": ("t", "f"), "demographic_parity": ("r",)}[
            self.constraint
        ]
        for p, (a, b) in enumerate(pairs):
            if use_l1:
                for j, kind in enumerate(("t", "f")):
                    d = row(kind, a) - row(kind, b)
                    aux = np.zeros(n_var)
                    aux[n_lam + 2 * p + j] = 1.0
                    a_ub += [d - aux, -d - aux]  # |d| <= aux
                    b_ub += [0.0, 0.0]
                total = np.zeros(n_var)
                total[n_lam + 2 * p : n_lam + 2 * p + 2] = 1.0
                a_ub.append(total)
                b_ub.append(eps)
            else:
                for kind in kinds:
                    d = row(kind, a) - row(kind, b)
                    a_ub += [d, -d]
                    b_ub += [eps, eps]
        a_eq = np.zeros((n_groups, n_var))
        for g in range(n_groups):
            a_eq[g, starts[g] : starts[g + 1]] = 1.0
        res = linprog(
            c,
            A_ub=np.asarray(a_ub) if a_ub else None,
            b_ub=np.asarray(b_ub) if b_ub else None,
            A_eq=a_eq,
            b_eq=np.ones(n_groups),
            bounds=[(0, None)] * n_var,
            method="highs",
        )
        if res.status != 0:  # pragma: no cover - (0,0) for every group is always feasible
            raise RuntimeError(f"the post-processing LP failed: {res.message}")
        lam = np.clip(res.x[:n_lam], 0.0, None)
        self.thresholds_, self.mix_probs_ = {}, {}
        rows = []
        for g, lab in enumerate(self.groups_):
            fpr, tpr, thr = hulls[g]
            w = lam[starts[g] : starts[g + 1]]
            w = w / w.sum()
            keep = w > 1e-12
            self.thresholds_[lab] = thr[keep]
            self.mix_probs_[lab] = w[keep] / w[keep].sum()
            f, t = float(w @ fpr), float(w @ tpr)
            rows.append(
                {
                    "fpr": f,
                    "tpr": t,
                    "selection_rate": base[g] * t + (1 - base[g]) * f,
                    "base_rate": base[g],
                    "share": shares[g],
                }
            )
        self.operating_points_ = pd.DataFrame(rows, index=pd.Index(self.groups_, name="group"))
        self.expected_cost_ = float(res.fun + const)

    # -- predict ----------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "operating_points_"):
            raise NotFittedError(
                "This HardtPostProcessor is not fitted yet; call fit(X, y, sensitive_features=...) first.",
                argument="self",
            )

    def _positive_prob(self, X: Any, sensitive_features: Any) -> np.ndarray:
        self._check_fitted()
        s = self._score(self.estimator_, X)
        codes, labels = group_codes(sensitive_features, s.size)
        unknown = [lab for lab in labels if lab not in self.thresholds_]
        if unknown:
            raise DataError(
                f"sensitive_features has groups {unknown} not seen in fit ({self.groups_}); "
                "fit on data that contains every group.",
                argument="sensitive_features",
            )
        out = np.empty(s.size)
        for g, lab in enumerate(labels):
            m = codes == g
            thr = self.thresholds_[lab][::-1]  # increasing
            cum = np.r_[0.0, np.cumsum(self.mix_probs_[lab][::-1])]
            out[m] = cum[np.searchsorted(thr, s[m], side="right")]
        return np.clip(out, 0.0, 1.0)

    def predict_proba(self, X: Any, *, sensitive_features: Any) -> np.ndarray:
        """Probability of each label under the randomized rule (deterministic).

        Parameters
        ----------
        X : array-like
            Scores (without ``estimator``) or the estimator's input.
        sensitive_features : array-like of shape (n_samples,)
            The group of each row (groups seen in ``fit``).

        Returns
        -------
        numpy.ndarray of shape (n_samples, 2)
            ``[P(yhat=0), P(yhat=1)]`` per row.
        """
        p = self._positive_prob(X, sensitive_features)
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any, *, sensitive_features: Any, random_state: Any = None) -> np.ndarray:
        """Randomized fair predictions.

        Parameters
        ----------
        X : array-like
            Scores (without ``estimator``) or the estimator's input.
        sensitive_features : array-like of shape (n_samples,)
            The group of each row (groups seen in ``fit``).
        random_state : int, numpy.random.Generator or None
            Seed of the randomization (default: the estimator's ``random_state``).

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
            Labels 0/1.
        """
        p = self._positive_prob(X, sensitive_features)
        rng = make_generator(self.random_state if random_state is None else random_state, "random_state")
        return (rng.random(p.size) < p).astype(np.int64)
