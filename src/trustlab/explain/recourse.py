"""Confined regions: certify recourse for linear classifiers, or describe who has none.

A linear classifier ``h(x) = 1[w^T x + b > 0]`` can give some people a *fixed*
negative prediction: no action ``a`` they are allowed to take (an
:class:`~trustlab.explain.recourse_actions.ActionSet`) reaches a positive score.
Pointwise audits (:func:`has_recourse`) check the people in a dataset one by one
and miss people not in it. :class:`ConfinedRegionFinder` implements ReVer
(Lawless, Weng, Ustun, Udell, ICML 2025): it finds *confined regions*, axis-aligned
boxes of feature space in which every individual is fixed, or proves that the
population region holds none, which certifies recourse for everyone in it,
including out-of-sample individuals.

The mixed-integer quadratically constrained program (population mode)
---------------------------------------------------------------------
For a box ``[l, u]`` the joint system in ``(x, a)``, written ``G x + H a <= g(l, u)``,
holds the box rows ``x <= u``, ``-x <= -l``, the action bounds, the feasible-outcome
rows ``lb <= x + a <= ub``, the action set's joint constraints, and a last row
``-w^T (x + a) <= b`` (the action reaches a non-negative score). By Farkas' lemma
and LP duality, a multiplier ``y >= 0`` with ``G^T y = 0``, ``H^T y = 0``,
``y_last = 1`` and ``g(l, u)^T y <= 0`` certifies ``max w^T (x + a) + b <= 0`` over
the box and the feasible actions. ``g(l, u)^T y`` holds the bilinear terms
``y_(u_j) u_j - y_(l_j) l_j``; maximising the normalised width
``sum_j (u_j - l_j) / (PU_j - PL_j + 1)`` under these constraints, the valid
inequality ``sum_j max(w_j, 0) u_j + min(w_j, 0) l_j <= -b`` and a witness point
in the box, is the MIQCP solved here with SCIP (through PySCIPOpt), which handles
the non-convex bilinear constraint by spatial branch and bound. Disjoint further
boxes come from re-solving with big-M disjunctions; an infeasible first solve
certifies recourse.

References
----------
.. [1] Lawless, C., Weng, T., Ustun, B., Udell, M. "Understanding Fixed Predictions
   via Confined Regions". Proceedings of the 42nd International Conference on
   Machine Learning (ICML 2025), PMLR 267:32649-32674.
.. [2] Kothari, A., Ustun, B., et al. "Prediction without Preclusion: Recourse
   Verification with Reachable Sets". ICLR 2024 (pointwise verification).
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from trustlab._validation import check_array, check_choice, check_positive, check_positive_int
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.explain.recourse_actions import ActionSet, DirectionalLinkage, OneHot, Thermometer

__all__ = [
    "ActionSet",
    "Box",
    "ConfinedRegionFinder",
    "ConfinedRegions",
    "DirectionalLinkage",
    "OneHot",
    "Thermometer",
    "has_recourse",
    "max_reachable_score",
]

# Tolerance on the verified maximum reachable score of a box: SCIP solves to a
# feasibility tolerance of 1e-9 (the reference code's Gurobi setting); every box is
# re-checked by an LP and kept "verified" only when its maximum score is <= _TOL.
_TOL = 1e-6


# --------------------------------------------------------------------------------------
# model and input checks
# --------------------------------------------------------------------------------------
def linear_model_params(model: Any, intercept: Any = None) -> tuple[np.ndarray, float]:
    """Return ``(w, b)`` of a binary linear classifier, or of ``coef`` and ``intercept``.

    Accepts a fitted scikit-learn-style linear classifier (``coef_`` of shape
    ``(1, d)`` or ``(d,)`` and ``intercept_``), or a coefficient vector together with
    an explicit ``intercept``.
    """
    if hasattr(model, "coef_") and not isinstance(model, np.ndarray | list | tuple):
        if intercept is not None:
            raise ParameterError(
                "pass intercept only with a coefficient vector; a fitted model carries its own.",
                argument="intercept",
            )
        coef = np.asarray(model.coef_, dtype=float)
        classes = getattr(model, "classes_", None)
        if (coef.ndim == 2 and coef.shape[0] != 1) or (classes is not None and len(classes) != 2):
            raise ModelError(
                f"model must be a binary linear classifier; {type(model).__name__} has "
                f"coef_ of shape {coef.shape}.",
                argument="model",
            )
        b = np.ravel(np.asarray(getattr(model, "intercept_", 0.0), dtype=float))
        coef, intercept = coef.ravel(), float(b[0]) if b.size else 0.0
    elif isinstance(model, np.ndarray | list | tuple):
        if intercept is None:
            raise ParameterError(
                "with a coefficient vector, pass the intercept too: fit(coef, intercept).",
                argument="intercept",
            )
        coef = check_array(model, "coef", ndim=1)
    elif type(model).__name__ == "Pipeline":
        raise ModelError(
            "model is a Pipeline; pass its final linear step and an action set on the "
            "features it sees (model[-1]), or use trustlab.explain.recourse_audit.linearize "
            "to express it in the raw columns.",
            argument="model",
        )
    else:
        raise ModelError(
            f"model must be a fitted linear classifier with coef_ and intercept_ (e.g. "
            f"LogisticRegression, LinearSVC) or a coefficient vector; got {type(model).__name__}. "
            "Confined regions are defined for linear classifiers only.",
            argument="model",
        )
    if isinstance(intercept, bool) or not isinstance(intercept, numbers.Real) or not math.isfinite(intercept):
        raise ParameterError(f"intercept must be a finite number, got {intercept!r}.", argument="intercept")
    if not np.all(np.isfinite(coef)):
        raise ModelError("the model's coefficients contain NaN or inf.", argument="model")
    return coef.astype(float), float(intercept)


def _check_action_set(action_set: Any, d: int | None = None) -> ActionSet:
    if not isinstance(action_set, ActionSet):
        raise ParameterError(
            "action_set must be an ActionSet (e.g. ActionSet.from_data(X)), got "
            f"{type(action_set).__name__}.",
            argument="action_set",
        )
    if d is not None and len(action_set) != d:
        raise DataError(
            f"the action set has {len(action_set)} features but the model has {d} coefficients.",
            argument="action_set",
        )
    return action_set


def _rows(X: Any, names: Sequence[str], name: str, *, allow_nan: bool = False) -> np.ndarray:
    """``X`` (rows, one row, or a DataFrame holding the named columns) as an ``(n, len(names))`` array."""
    if isinstance(X, pd.DataFrame):
        missing = [n for n in names if n not in X.columns]
        if missing:
            raise DataError(f"{name}: unknown column(s) {missing} missing from the data.", argument=name)
        X = X[list(names)]
    arr = check_array(X, name, allow_nan=allow_nan)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != len(names):
        raise DataError(
            f"{name} must have shape (n, {len(names)}) (one column per feature), got {arr.shape}.",
            argument=name,
        )
    return arr


def _check_points(X: Any, A: ActionSet, name: str = "X") -> np.ndarray:
    arr = _rows(X, A.names, name)
    tol = 1e-9 * (1 + np.abs(A.ub - A.lb))
    out = (arr < A.lb - tol) | (arr > A.ub + tol)
    if out.any():
        j = int(np.flatnonzero(out.any(axis=0))[0])
        raise DataError(
            f"{name}: values of feature {A.names[j]!r} lie outside the action set's range "
            f"[{A.lb[j]:g}, {A.ub[j]:g}]; widen it (bounds=...) or drop those rows.",
            argument=name,
        )
    return arr


# --------------------------------------------------------------------------------------
# pointwise verification (the baseline)
# --------------------------------------------------------------------------------------
def max_reachable_score(
    X: Any, model: Any, action_set: ActionSet, *, intercept: Any = None, method: str = "auto"
) -> np.ndarray:
    """Highest score ``w^T (x + a) + b`` each individual can reach with allowed actions.

    Integer and boolean features take integer actions. Without joint constraints on
    actionable features the maximum is separable and computed in closed form for
    all rows at once; otherwise one integer program per row is solved with HiGHS
    (``scipy.optimize.milp``).

    Parameters
    ----------
    X : array-like of shape (n, d) or DataFrame
        Individuals, in the action set's feature order (or a DataFrame with those columns).
    model : fitted linear classifier or array of shape (d,)
    action_set : ActionSet
    intercept : float, optional
        Needed when ``model`` is a coefficient vector.
    method : {"auto", "ilp"}, default "auto"
        ``"ilp"`` solves one integer program per row even when the closed form applies.

    Returns
    -------
    numpy.ndarray of shape (n,)
        ``> 0``: recourse exists; ``<= 0``: the prediction is fixed.
    """
    check_choice(method, "method", ("auto", "ilp"))
    w, b = linear_model_params(model, intercept)
    A = _check_action_set(action_set, len(w))
    Xa = _check_points(X, A)
    lo = np.maximum(A.step_lb, A.lb - Xa)
    hi = np.minimum(A.step_ub, A.ub - Xa)
    integral = np.array([t != "float" for t in A.dtype])
    lo = np.where(integral, np.ceil(lo - 1e-9), lo)
    hi = np.where(integral, np.floor(hi + 1e-9), hi)
    if A.separable and method == "auto":
        a = np.where(w > 0, hi, np.where(w < 0, lo, 0.0))
        return (Xa + a) @ w + b
    G, H, g = A.constraint_rows()
    out = np.empty(len(Xa))
    for i, x in enumerate(Xa):
        res = milp(
            -w,
            constraints=[LinearConstraint(H, -np.inf, g - G @ x)],
            bounds=Bounds(lo[i], hi[i]),
            integrality=integral.astype(int),
        )
        if res.status != 0 or res.x is None:
            raise DataError(
                f"X: row {i} violates the action set's joint constraints (e.g. a one-hot group "
                "that does not sum to 1), so no action is feasible for it.",
                argument="X",
            )
        out[i] = float(w @ (x + res.x) + b)
    return out


def has_recourse(
    X: Any, model: Any, action_set: ActionSet, *, intercept: Any = None, method: str = "auto"
) -> np.ndarray:
    """Pointwise recourse verification: can each individual reach a positive prediction?

    ``True`` where some allowed action ``a`` gives ``w^T (x + a) + b > 0`` (individuals
    already predicted positive have recourse with ``a = 0``); ``False`` marks a fixed
    prediction. This is the pointwise audit the paper compares confined regions with.
    See :func:`max_reachable_score` for the parameters.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.recourse_actions import ActionSet
    >>> A = ActionSet(["age", "savings"], [18, 0], [80, 10], dtype=["int", "int"],
    ...               actionable=np.array([False, True]), step_ub=[0, 3])
    >>> has_recourse([[30, 3], [30, 9], [70, 0]], np.array([-0.1, 1.0]), A, intercept=-2.0)
    array([ True,  True, False])

    References
    ----------
    .. [1] Lawless, C., Weng, T., Ustun, B., Udell, M. "Understanding Fixed Predictions
       via Confined Regions". ICML 2025.
    """
    return max_reachable_score(X, model, action_set, intercept=intercept, method=method) > 0


# --------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Box:
    """A confined region: every individual with ``lower <= x <= upper`` has a fixed prediction.

    Attributes
    ----------
    names : tuple of str
    lower, upper : numpy.ndarray of shape (d,)
    population_lower, population_upper : numpy.ndarray
        The population region the box was searched in (for the description).
    objective : float
        Normalised width ``sum_j (u_j - l_j) / (PU_j - PL_j + 1)``.
    max_score : float
        The highest score any individual in the box reaches with an allowed action,
        re-computed by an LP over the continuous relaxation (an upper bound); ``<= 0``
        (up to 1e-6) confirms the box.
    solve_time : float
        Seconds SCIP spent on the solve that found the box.
    """

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    population_lower: np.ndarray = field(repr=False)
    population_upper: np.ndarray = field(repr=False)
    objective: float
    max_score: float
    solve_time: float

    @property
    def verified(self) -> bool:
        """Whether the LP re-check confirms that nobody in the box can reach a positive score."""
        return self.max_score <= _TOL

    @property
    def restricted(self) -> np.ndarray:
        """Boolean mask of the features on which the box is narrower than the population region."""
        return (self.lower > self.population_lower + 1e-9) | (self.upper < self.population_upper - 1e-9)

    @property
    def n_conditions(self) -> int:
        """Description size: number of features the box restricts."""
        return int(self.restricted.sum())

    def contains(self, X: Any) -> np.ndarray:
        """Boolean mask of the rows of ``X`` (shape (n, d) or a DataFrame) inside the box."""
        arr = _rows(X, self.names, "X", allow_nan=True)
        tol = 1e-9 * (1 + np.abs(self.population_upper - self.population_lower))
        return np.all((arr >= self.lower - tol) & (arr <= self.upper + tol), axis=1)

    def to_frame(self, *, all_features: bool = False) -> pd.DataFrame:
        """The box as a table (``lower``, ``upper``), by default only the restricted features."""
        mask = np.ones(len(self.names), bool) if all_features else self.restricted
        return pd.DataFrame(
            {"lower": self.lower[mask], "upper": self.upper[mask]},
            index=pd.Index([n for n, m in zip(self.names, mask, strict=True) if m], name="feature"),
        )

    def describe(self, digits: int = 4) -> str:
        """A one-line description such as ``"age in [20, 30] and debt in [0, 3]"``."""
        parts = [
            f"{n} in [{lo:.{digits}g}, {hi:.{digits}g}]"
            for n, lo, hi, m in zip(self.names, self.lower, self.upper, self.restricted, strict=True)
            if m
        ]
        return " and ".join(parts) if parts else "the whole population region"


@dataclass(frozen=True)
class ConfinedRegions:
    """The outcome of :meth:`ConfinedRegionFinder.enumerate`.

    Attributes
    ----------
    boxes : tuple of Box
        The confined regions found, largest first, pairwise disjoint.
    status : str
        ``"certified"``: the first MIQCP is infeasible, so no confined box exists in
        the population region and every individual in it has recourse (for the
        continuous relaxation of the actions; see the docs). ``"exhausted"``: after
        the boxes listed no further disjoint box exists. ``"max_regions"``: stopped at
        ``max_regions``. ``"time_limit"``: stopped by the time limit (the boxes found
        are still confined; nothing is certified).
    solve_times : tuple of float
        Seconds per MIQCP solve, including the last (infeasible) one.
    """

    boxes: tuple[Box, ...]
    status: str
    solve_times: tuple[float, ...]

    @property
    def certified(self) -> bool:
        """True when recourse is certified for the whole population region."""
        return self.status == "certified"

    def contains(self, X: Any) -> np.ndarray:
        """Boolean mask of the rows of ``X`` inside any box."""
        if not self.boxes:
            return np.zeros(len(check_array(X, "X", allow_nan=True, ndim=2)), dtype=bool)
        return np.any([b.contains(X) for b in self.boxes], axis=0)

    def to_frame(self) -> pd.DataFrame:
        """All boxes as one table (``region``, ``feature``, ``lower``, ``upper``)."""
        frames = [b.to_frame().reset_index().assign(region=k) for k, b in enumerate(self.boxes)]
        if not frames:
            return pd.DataFrame(columns=["region", "feature", "lower", "upper"])
        return pd.concat(frames, ignore_index=True)[["region", "feature", "lower", "upper"]]


# --------------------------------------------------------------------------------------
# the MIQCP
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _System:
    """``G x + H a <= g``; region rows have their right-hand side in u/l (row indices)."""

    G: np.ndarray
    H: np.ndarray
    g: np.ndarray  # NaN on region rows
    row_u: np.ndarray
    row_l: np.ndarray


def _system(A: ActionSet, w: np.ndarray, b: float) -> _System:
    d = len(A)
    eye = np.eye(d)
    zero = np.zeros((d, d))
    blocks_G = [eye, -eye, zero, zero, eye, -eye]
    blocks_H = [zero, zero, eye, -eye, eye, -eye]
    blocks_g = [np.full(d, np.nan), np.full(d, np.nan), A.step_ub, -A.step_lb, A.ub, -A.lb]
    Gc, Hc, gc = A.constraint_rows()
    G = np.vstack([*blocks_G, Gc, -w[None, :]])
    H = np.vstack([*blocks_H, Hc, -w[None, :]])
    g = np.concatenate([*blocks_g, gc, [b]])
    return _System(G, H, g, np.arange(d), np.arange(d, 2 * d))


def _milp_applies(A: ActionSet) -> bool:
    """Whether the exact MILP applies: joint constraints only on immutable one-hot groups."""
    idx = A.index
    return all(
        isinstance(c, OneHot) and not any(A.actionable[idx[n]] for n in c.names) for c in A.constraints
    ) and len({n for c in A.constraints for n in c.names}) == sum(len(c.names) for c in A.constraints)


def _box_max_score(A: ActionSet, w: np.ndarray, b: float, lower: np.ndarray, upper: np.ndarray) -> float:
    """max w^T (x + a) + b over x in the box and the feasible (continuous) actions, by LP."""
    d = len(A)
    Gc, Hc, gc = A.constraint_rows()
    eye = np.eye(d)
    A_ub = np.vstack([np.hstack([eye, eye]), np.hstack([-eye, -eye]), np.hstack([Gc, Hc])])
    b_ub = np.concatenate([A.ub, -A.lb, gc])
    bounds = list(zip(lower, upper, strict=True)) + list(zip(A.step_lb, A.step_ub, strict=True))
    res = linprog(-np.concatenate([w, w]), A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        return -math.inf  # no feasible (x, a) in the box: vacuously confined
    return float(-res.fun + b)


class ConfinedRegionFinder:
    """Find confined regions of a linear classifier, or certify recourse (ReVer).

    Parameters
    ----------
    action_set : ActionSet
        Feature types, feasible ranges, allowed actions, joint constraints and the
        population region searched.
    solver : {"auto", "scip", "highs"}, default "auto"
        ``"scip"``: the paper's MIQCP, solved by SCIP through PySCIPOpt (the paper's
        code used Gurobi; SCIP is the open-source solver that handles non-convex
        bilinear constraints). ``"highs"``: an exact MILP reformulation, solved by
        HiGHS (``scipy.optimize.milp``), valid when the action set is separable
        (joint constraints only on immutable one-hot groups); there the largest
        reachable score of a box has a closed form, piecewise linear in ``(l, u)``.
        ``"auto"``: ``"highs"`` where it applies, else ``"scip"``.
    mip_gap : float, default 0.0
        Relative optimality gap of each solve (0: the largest box; the reference
        code's ``verify`` uses 0.1). Any box returned is confined whatever the gap.
    time_limit : float, optional
        Seconds for one call of :meth:`enumerate` (all its solves together).
    gap : float, default 1.0
        Separation between enumerated boxes, in feature units (the reference code's 1).
    dual_bound : float, optional
        Upper bound on the Farkas multipliers ``y`` (SCIP needs bounded variables in
        bilinear terms). Default ``10 * (1 + sum |w|) * max(1, |linkage scales|)``; any
        box found is confined whatever the bound, and the bound is loose enough for the
        optimal duals of separable and one-hot action sets.

    Attributes
    ----------
    coef_ : numpy.ndarray of shape (d,)
    intercept_ : float
    n_features_in_ : int
    feature_names_in_ : numpy.ndarray of str

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.recourse_actions import ActionSet
    >>> A = ActionSet(["age", "savings"], [18, 0], [80, 10], dtype=["int", "int"],
    ...               actionable=np.array([False, True]), step_ub=[0, 3])
    >>> finder = ConfinedRegionFinder(A).fit(np.array([-0.1, 1.0]), -2.0)
    >>> box = finder.largest_region()
    >>> box.describe(), box.verified
    ('age in [20, 80] and savings in [0, 1]', True)
    >>> regions = finder.enumerate(max_regions=3)
    >>> regions.status, [b.describe() for b in regions.boxes[1:]]
    ('max_regions', ['age in [30, 80] and savings in [2, 2]', 'age in [80, 80] and savings in [3, 10]'])
    >>> bool(regions.contains([[75, 1]])[0]), bool(has_recourse([[75, 1]], finder.coef_, A,
    ...                                                         intercept=finder.intercept_)[0])
    (True, False)

    References
    ----------
    .. [1] Lawless, C., Weng, T., Ustun, B., Udell, M. "Understanding Fixed Predictions
       via Confined Regions". Proceedings of the 42nd International Conference on
       Machine Learning (ICML 2025), PMLR 267:32649-32674.
    """

    def __init__(
        self,
        action_set: ActionSet,
        *,
        solver: str = "auto",
        mip_gap: float = 0.0,
        time_limit: float | None = None,
        gap: float = 1.0,
        dual_bound: float | None = None,
    ) -> None:
        self.action_set = action_set
        self.solver = solver
        self.mip_gap = mip_gap
        self.time_limit = time_limit
        self.gap = gap
        self.dual_bound = dual_bound

    # -- fitting ---------------------------------------------------------------------------
    def _check_params(self) -> None:
        _check_action_set(self.action_set)
        check_choice(self.solver, "solver", ("auto", "scip", "highs"))
        if self.solver == "highs" and not _milp_applies(self.action_set):
            raise ParameterError(
                "solver='highs' needs a separable action set (joint constraints only on "
                "immutable one-hot groups); use solver='scip' (the MIQCP) for this one.",
                argument="solver",
            )
        check_positive(self.mip_gap, "mip_gap", allow_zero=True)
        check_positive(self.gap, "gap")
        for name in ("time_limit", "dual_bound"):  # None: no limit, no bound
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name)

    def fit(self, model: Any, intercept: Any = None) -> ConfinedRegionFinder:
        """Load the linear classifier: a fitted model, or ``coef`` and ``intercept``.

        Parameters
        ----------
        model : fitted linear classifier (``coef_``, ``intercept_``) or array of shape (d,)
        intercept : float, optional
            Needed when ``model`` is a coefficient vector.

        Returns
        -------
        self
        """
        self._check_params()
        w, b = linear_model_params(model, intercept)
        _check_action_set(self.action_set, len(w))
        self.coef_ = w
        self.intercept_ = b
        self.n_features_in_ = len(w)
        self.feature_names_in_ = np.array(self.action_set.names, dtype=object)
        self.system_ = _system(self.action_set, w, b)
        return self

    def _fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFittedError(
                "this ConfinedRegionFinder is not fitted; call fit(model) first.", argument="fit"
            )

    def _dual_bound(self) -> float:
        if self.dual_bound is not None:
            return float(self.dual_bound)
        scale = max(
            [1.0]
            + [
                abs(k)
                for c in self.action_set.constraints
                if isinstance(c, DirectionalLinkage)
                for k in c.scales
            ]
        )
        return 10.0 * (1.0 + float(np.abs(self.coef_).sum())) * scale

    # -- the MIQCP ---------------------------------------------------------------------------
    @property
    def solver_(self) -> str:
        """The solver :meth:`enumerate` uses (``"scip"`` or ``"highs"``)."""
        if self.solver == "auto":
            return "highs" if _milp_applies(self.action_set) else "scip"
        return self.solver

    def _solve(self, previous: list[Box], time_left: float | None) -> tuple[str, Box | None, float]:
        if self.solver_ == "highs":
            return self._solve_milp(previous, time_left)
        return self._solve_miqcp(previous, time_left)

    def _make_box(self, lv: np.ndarray, uv: np.ndarray, elapsed: float) -> Box:
        A, w, b = self.action_set, self.coef_, self.intercept_
        PL, PU = A.population_lb, A.population_ub
        integral = np.array([t != "float" for t in A.dtype])
        lv = np.clip(np.where(integral, np.round(lv), lv), PL, PU)
        uv = np.clip(np.where(integral, np.round(uv), uv), PL, PU)
        uv = np.maximum(uv, lv)
        return Box(
            names=tuple(A.names),
            lower=lv,
            upper=uv,
            population_lower=PL.copy(),
            population_upper=PU.copy(),
            objective=float(np.sum((uv - lv) / (PU - PL + 1.0))),
            max_score=_box_max_score(A, w, b, lv, uv),
            solve_time=elapsed,
        )

    def _disjoint_rows(self, previous: list[Box]) -> list[list[tuple[str, int, float, float, float]]] | None:
        """Per earlier box, big-M alternatives ``(kind, j, bound, big)``; None if impossible."""
        A = self.action_set
        PL, PU = A.population_lb, A.population_ub
        out = []
        for box in previous:
            alts = []
            for j in range(len(A)):
                if box.upper[j] + self.gap <= PU[j] + 1e-9:  # new box above: l_j >= u_j^k + gap
                    alts.append(("l", j, box.upper[j] + self.gap, box.upper[j] + self.gap - PL[j], 0.0))
                if box.lower[j] - self.gap >= PL[j] - 1e-9:  # new box below: u_j <= l_j^k - gap
                    alts.append(("u", j, box.lower[j] - self.gap, PU[j] - box.lower[j] + self.gap, 0.0))
            if not alts:
                return None
            out.append(alts)
        return out

    def _solve_milp(self, previous: list[Box], time_left: float | None) -> tuple[str, Box | None, float]:
        """Exact MILP for separable action sets (HiGHS through scipy.optimize.milp).

        For a box ``[l, u]`` and separable actions, the largest reachable score is
        ``b + sum_j V_j`` with ``V_j = w_j min(ub_j, u_j + step_ub_j)`` (``w_j > 0``),
        ``w_j max(lb_j, l_j + step_lb_j)`` (``w_j < 0``), and for an immutable one-hot
        group the largest coefficient among the levels the box allows. Each ``V_j`` is
        the minimum of two linear functions, so ``c_j >= V_j`` is one binary
        disjunction; confinement is ``b + sum_j c_j <= 0``.
        """
        A, w, b = self.action_set, self.coef_, self.intercept_
        d = len(A)
        PL, PU = A.population_lb, A.population_ub
        idx = A.index
        grouped = {idx[n] for c in A.constraints for n in c.names}
        n_var = 2 * d
        lbs = list(PL) + list(PL)
        ubs = list(PU) + list(PU)
        integ = [0 if t == "float" else 1 for t in A.dtype] * 2
        rows: list[tuple[dict[int, float], float, float]] = []  # (coefs, lo, hi)

        def new_var(lo: float, hi: float, integer: bool) -> int:
            nonlocal n_var
            lbs.append(lo)
            ubs.append(hi)
            integ.append(1 if integer else 0)
            n_var += 1
            return n_var - 1

        for j in range(d):  # u_j >= l_j
            rows.append(({j: 1.0, d + j: -1.0}, 0.0, np.inf))
        conf: dict[int, float] = {}
        const = b
        for j in range(d):
            if j in grouped or w[j] == 0:
                continue
            if w[j] > 0:  # V = min(w U, w (u + aub)) over u in [PL, PU]
                var, f2, shift = j, w[j] * A.ub[j], w[j] * A.step_ub[j]
            else:  # V = min(w L, w (l + alb))
                var, f2, shift = d + j, w[j] * A.lb[j], w[j] * A.step_lb[j]
            f1_lo = min(w[j] * PL[j], w[j] * PU[j]) + shift
            f1_hi = max(w[j] * PL[j], w[j] * PU[j]) + shift
            if f1_lo >= f2 - 1e-12:  # always reaches the bound
                const += f2
            elif f1_hi <= f2 + 1e-12:  # never reaches it: linear
                conf[var] = conf.get(var, 0.0) + w[j]
                const += shift
            else:
                c = new_var(-np.inf, np.inf, False)
                z = new_var(0.0, 1.0, True)
                m1, m2 = f1_hi - f2, f2 - f1_lo
                rows.append(({c: 1.0, var: -w[j], z: m1}, shift, np.inf))  # c >= f1 - m1 z
                rows.append(({c: 1.0, z: -m2}, f2 - m2, np.inf))  # c >= f2 - m2 (1 - z)
                conf[c] = 1.0
        for con in A.constraints:  # immutable one-hot groups
            members = [idx[n] for n in con.names]
            wk = w[members]
            c = new_var(float(wk.min()), np.inf, False)
            for k in members:
                rows.append(({c: 1.0, k: -(w[k] - wk.min())}, float(wk.min()), np.inf))
            rows.append(({k: 1.0 for k in members}, 1.0, np.inf))  # some level allowed
            rows.append(({d + k: 1.0 for k in members}, -np.inf, 1.0))  # at most one fixed
            for k in members:
                for j in members:
                    if j != k:
                        rows.append(({d + k: 1.0, j: 1.0}, -np.inf, 1.0))
            conf[c] = conf.get(c, 0.0) + 1.0
        rows.append((conf, -np.inf, -const))
        alts = self._disjoint_rows(previous)
        if alts is None:
            return "infeasible", None, 0.0
        for box_alts in alts:
            zs = []
            for kind, j, bound, big, _ in box_alts:
                z = new_var(0.0, 1.0, True)
                zs.append(z)
                if kind == "l":  # l_j - big z >= bound - big
                    rows.append(({d + j: 1.0, z: -big}, bound - big, np.inf))
                else:  # u_j + big z <= bound + big
                    rows.append(({j: 1.0, z: big}, -np.inf, bound + big))
            rows.append(({z: 1.0 for z in zs}, 1.0, np.inf))
        mat = np.zeros((len(rows), n_var))
        lo_r = np.empty(len(rows))
        hi_r = np.empty(len(rows))
        for r, (coefs, lo_v, hi_v) in enumerate(rows):
            for k, v in coefs.items():
                mat[r, k] += v
            lo_r[r], hi_r[r] = lo_v, hi_v
        obj = np.zeros(n_var)
        inv = 1.0 / (PU - PL + 1.0)
        obj[:d] = -inv
        obj[d : 2 * d] = inv
        options: dict[str, Any] = {"mip_rel_gap": float(self.mip_gap) if self.mip_gap > 0 else 1e-9}
        if time_left is not None:
            options["time_limit"] = max(float(time_left), 0.01)
        t0 = time.perf_counter()
        res = milp(
            obj,
            constraints=[LinearConstraint(mat, lo_r, hi_r)],
            bounds=Bounds(np.array(lbs), np.array(ubs)),
            integrality=np.array(integ),
            options=options,
        )
        elapsed = time.perf_counter() - t0
        if res.x is None:
            return ("infeasible" if res.status == 2 else "time_limit"), None, elapsed
        box = self._make_box(res.x[d : 2 * d], res.x[:d], elapsed)
        return ("found" if res.status == 0 else "time_limit"), box, elapsed

    def _solve_miqcp(self, previous: list[Box], time_left: float | None) -> tuple[str, Box | None, float]:
        from pyscipopt import Model, quicksum

        A, S, w, b = self.action_set, self.system_, self.coef_, self.intercept_
        d = len(A)
        PL, PU = A.population_lb, A.population_ub
        vt = ["C" if t == "float" else "I" for t in A.dtype]
        m = Model("confined_region")
        m.hideOutput()
        m.setParam("numerics/feastol", 1e-9)
        m.setParam("limits/gap", float(self.mip_gap))
        if time_left is not None:
            m.setParam("limits/time", max(time_left, 0.01))
        u = [m.addVar(f"u{j}", vtype=vt[j], lb=PL[j], ub=PU[j]) for j in range(d)]
        lo = [m.addVar(f"l{j}", vtype=vt[j], lb=PL[j], ub=PU[j]) for j in range(d)]
        for j in range(d):
            m.addCons(u[j] >= lo[j])
        n_rows = len(S.g)
        M = self._dual_bound()
        y = [m.addVar(f"y{i}", lb=0.0, ub=M) for i in range(n_rows - 1)]
        # Farkas conditions; the last row's multiplier is fixed to 1.
        for mat in (S.G, S.H):
            for j in range(d):
                col = mat[:, j]
                nz = np.flatnonzero(col[:-1])
                m.addCons(quicksum(float(col[i]) * y[i] for i in nz) + float(col[-1]) == 0)
        const = [i for i in range(n_rows - 1) if np.isfinite(S.g[i])]
        m.addCons(
            quicksum(y[S.row_u[j]] * u[j] - y[S.row_l[j]] * lo[j] for j in range(d))
            + quicksum(float(S.g[i]) * y[i] for i in const if S.g[i] != 0)
            + b
            <= 0
        )
        # Valid inequality: the box lies in the negative half-space.
        m.addCons(
            quicksum(float(max(w[j], 0)) * u[j] + float(min(w[j], 0)) * lo[j] for j in range(d) if w[j] != 0)
            <= -b
        )
        # A witness point in the box that satisfies the population (encoding) constraints.
        xb = [m.addVar(f"x{j}", vtype=vt[j], lb=PL[j], ub=PU[j]) for j in range(d)]
        for j in range(d):
            m.addCons(xb[j] >= lo[j])
            m.addCons(xb[j] <= u[j])
        Gc, _, gc = A.constraint_rows()
        for row, rhs in zip(Gc, gc, strict=True):
            nz = np.flatnonzero(row)
            if nz.size:
                m.addCons(quicksum(float(row[j]) * xb[j] for j in nz) <= float(rhs))
        # A box never fixes one level of a one-hot group and allows another.
        for con in A.constraints:
            if isinstance(con, OneHot):
                members = [A.index[n] for n in con.names]
                for k in members:
                    for j in members:
                        if j != k:
                            m.addCons(lo[k] + u[j] <= 1)
        # Disjoint from the boxes found before (big-M from the population bounds).
        alts = self._disjoint_rows(previous)
        if alts is None:
            return "infeasible", None, 0.0
        for box_alts in alts:
            zs = []
            for kind, j, bound, big, _ in box_alts:
                z = m.addVar(vtype="B")
                zs.append(z)
                if kind == "l":
                    m.addCons(lo[j] >= bound - big * (1 - z))
                else:
                    m.addCons(u[j] <= bound + big * (1 - z))
            m.addCons(quicksum(zs) >= 1)
        width = PU - PL + 1.0
        m.setObjective(quicksum((u[j] - lo[j]) * (1.0 / width[j]) for j in range(d)), "maximize")
        t0 = time.perf_counter()
        m.optimize()
        elapsed = time.perf_counter() - t0
        status = m.getStatus()
        if m.getNSols() == 0:
            return ("infeasible" if status == "infeasible" else "time_limit"), None, elapsed
        sol = m.getBestSol()
        lv = np.array([m.getSolVal(sol, v) for v in lo])
        uv = np.array([m.getSolVal(sol, v) for v in u])
        box = self._make_box(lv, uv, elapsed)
        return ("time_limit" if status == "timelimit" else "found"), box, elapsed

    # -- public queries ---------------------------------------------------------------------
    def enumerate(self, max_regions: int = 10) -> ConfinedRegions:
        """Find up to ``max_regions`` disjoint confined regions, largest first.

        Stops early when no further disjoint box exists (``status="exhausted"``, or
        ``"certified"`` when none exists at all) or at ``time_limit``.

        Returns
        -------
        ConfinedRegions
        """
        self._fitted()
        max_regions = check_positive_int(max_regions, "max_regions")
        boxes: list[Box] = []
        times: list[float] = []
        start = time.perf_counter()
        status = "max_regions"
        while len(boxes) < max_regions:
            left = None if self.time_limit is None else self.time_limit - (time.perf_counter() - start)
            if left is not None and left <= 0:
                status = "time_limit"
                break
            st, box, t = self._solve(boxes, left)
            times.append(t)
            if box is not None:
                boxes.append(box)
            if st == "infeasible":
                status = "exhausted" if boxes else "certified"
                break
            if st == "time_limit":
                status = "time_limit"
                break
        return ConfinedRegions(tuple(boxes), status, tuple(times))

    def largest_region(self) -> Box | None:
        """The confined region of largest normalised width, or None when there is none.

        None also results when ``time_limit`` ran out before any box was found; use
        :meth:`certify` to tell the two apart.
        """
        res = self.enumerate(max_regions=1)
        return res.boxes[0] if res.boxes else None

    def certify(self) -> ConfinedRegions:
        """Try to certify recourse for the population region: one MIQCP solve.

        ``result.certified`` is True when no confined region exists; otherwise
        ``result.boxes[0]`` is a counterexample region (or the status says the time
        limit ran out).
        """
        return self.enumerate(max_regions=1)

    def find_fixed_individual(self) -> np.ndarray | None:
        """One individual in the population region with a fixed prediction (individual mode).

        Solves the MIQCP whose variable is the point ``x`` itself: ``w^T x + b <= 0``
        and a Farkas multiplier ``y`` with ``H^T y = 0``, ``y_last = 1`` and
        ``sum_i y_i (g_i - G_i x) <= 0``. Returns None when there is none (or the time
        limit ran out first).
        """
        from pyscipopt import Model, quicksum

        self._fitted()
        A, S, w, b = self.action_set, self.system_, self.coef_, self.intercept_
        d = len(A)
        vt = ["C" if t == "float" else "I" for t in A.dtype]
        m = Model("fixed_individual")
        m.hideOutput()
        m.setParam("numerics/feastol", 1e-9)
        if self.time_limit is not None:
            m.setParam("limits/time", float(self.time_limit))
        x = [m.addVar(f"x{j}", vtype=vt[j], lb=A.population_lb[j], ub=A.population_ub[j]) for j in range(d)]
        keep = [i for i in range(len(S.g) - 1) if np.isfinite(S.g[i])]  # region rows drop out
        M = self._dual_bound()
        y = {i: m.addVar(f"y{i}", lb=0.0, ub=M) for i in keep}
        for j in range(d):
            rows_j = [i for i in keep if S.H[i, j] != 0]
            m.addCons(quicksum(float(S.H[i, j]) * y[i] for i in rows_j) + float(S.H[-1, j]) == 0)
        terms = []
        for i in keep:
            cols = np.flatnonzero(S.G[i])
            terms.append(float(S.g[i]) * y[i] - quicksum(float(S.G[i, j]) * y[i] * x[j] for j in cols))
        m.addCons(quicksum(terms) + b + quicksum(float(w[j]) * x[j] for j in range(d)) <= 0)
        m.addCons(quicksum(float(w[j]) * x[j] for j in range(d)) <= -b)
        Gc, _, gc = A.constraint_rows()
        for row, rhs in zip(Gc, gc, strict=True):
            nz = np.flatnonzero(row)
            if nz.size:
                m.addCons(quicksum(float(row[j]) * x[j] for j in nz) <= float(rhs))
        m.optimize()
        if m.getNSols() == 0:
            return None
        sol = m.getBestSol()
        xv = np.array([m.getSolVal(sol, v) for v in x])
        integral = np.array([t != "float" for t in A.dtype])
        return np.where(integral, np.round(xv), xv)
