"""ReVer (Lawless et al., ICML 2025): find confined regions of a linear classifier, or certify recourse."""

from __future__ import annotations

import numbers
import time
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab._validation import check_positive_int
from trustlab.errors import NotFittedError, ParameterError
from trustlab.explain._rec_inputs import check_action_set, check_score_range, linear_model_params
from trustlab.explain._rec_regions import TOL, Box, ConfinedRegions
from trustlab.explain._rec_solvers import (
    box_max_score,
    find_fixed_individual_miqcp,
    linear_system,
    milp_applies,
    solve_milp,
    solve_miqcp,
)
from trustlab.explain.recourse_actions import ActionSet, DirectionalLinkage

__all__ = ["ConfinedRegionFinder"]

_SCALE_RANGE = (1e-2, 1e4)  # score ranges solved as they are


class ConfinedRegionFinder(ParamsValidationMixin):
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
    >>> from trustlab.explain.recourse import ActionSet, ConfinedRegionFinder, has_recourse
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
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "action_set": "no_validation",  # checked by check_action_set, with its own message
        "solver": [Options(("auto", "scip", "highs"))],
        "mip_gap": [Interval(numbers.Real, 0, None, closed="left")],
        "time_limit": [None, Interval(numbers.Real, 0, None, closed="neither")],
        "gap": [Interval(numbers.Real, 0, None, closed="neither")],
        "dual_bound": [None, Interval(numbers.Real, 0, None, closed="neither")],
    }

    def _check_params(self) -> None:
        check_action_set(self.action_set)
        self._validate_params()
        if self.solver == "highs" and not milp_applies(self.action_set):
            raise ParameterError(
                "solver='highs' needs a separable action set (joint constraints only on "
                "immutable one-hot groups); use solver='scip' (the MIQCP) for this one.",
                argument="solver",
            )

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
        check_action_set(self.action_set, len(w))
        top = check_score_range(w, b, self.action_set)
        self.coef_ = w
        self.intercept_ = b
        self.n_features_in_ = len(w)
        self.feature_names_in_ = np.array(self.action_set.names, dtype=object)
        self.system_ = linear_system(self.action_set, w, b)
        # When its scores over the feature ranges are extreme (beyond 1e-2..1e4 in size) the solvers
        # see the classifier scaled so that they are at most 1 (the same classifier): their
        # tolerances are absolute, so huge or tiny coefficients would otherwise decide the answer.
        # Ordinary classifiers are left as they are: scaling them down makes SCIP's bilinear
        # certificate much slower (a 2-feature certify: 1.9 s unscaled, 38 s scaled by 40).
        # Box.verified is relative to the scale used.
        self._scale = top if top > 0 and not (_SCALE_RANGE[0] <= top <= _SCALE_RANGE[1]) else 1.0
        terms = np.abs(w) * np.maximum(np.abs(self.action_set.lb), np.abs(self.action_set.ub))
        # a term below double precision of the largest score changes no score: drop it exactly
        self._w = np.divide(w, self._scale, out=np.zeros_like(w), where=terms > 1e-15 * self._scale)
        self._b = b / self._scale
        self._system = linear_system(self.action_set, self._w, self._b)
        return self

    def _fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFittedError(
                "this ConfinedRegionFinder is not fitted; call fit(model) first.", argument="fit"
            )

    def _dual_bound(self) -> float:
        if self.dual_bound is not None:
            return float(self.dual_bound) / self._scale  # the multipliers scale with the classifier
        scale = max(
            [1.0]
            + [
                abs(k)
                for c in self.action_set.constraints
                if isinstance(c, DirectionalLinkage)
                for k in c.scales
            ]
        )
        return 10.0 * (1.0 + float(np.abs(self._w).sum())) * scale

    # -- the MIQCP ---------------------------------------------------------------------------
    @property
    def solver_(self) -> str:
        """The solver :meth:`enumerate` uses (``"scip"`` or ``"highs"``)."""
        if self.solver == "auto":
            return "highs" if milp_applies(self.action_set) else "scip"
        return self.solver

    def _solve(self, previous: list[Box], time_left: float | None) -> tuple[str, Box | None, float]:
        A, w, b = self.action_set, self._w, self._b
        if self.solver_ == "highs":
            status, bounds, elapsed = solve_milp(
                A, w, b, previous, gap=self.gap, mip_gap=self.mip_gap, time_left=time_left
            )
        else:
            status, bounds, elapsed = solve_miqcp(
                A,
                self._system,
                w,
                b,
                previous,
                gap=self.gap,
                mip_gap=self.mip_gap,
                dual_bound=self._dual_bound(),
                time_left=time_left,
            )
        return status, None if bounds is None else self._make_box(*bounds, elapsed), elapsed

    def _make_box(self, lv: np.ndarray, uv: np.ndarray, elapsed: float) -> Box:
        A, w, b = self.action_set, self._w, self._b
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
            max_score=self._scale * box_max_score(A, w, b, lv, uv),  # in the model's units
            tolerance=TOL * self._scale,
            solve_time=elapsed,
        )

    def enumerate(self, max_regions: int = 10) -> ConfinedRegions:
        """Find up to ``max_regions`` disjoint confined regions, largest first.

        Stops early when no further disjoint box exists (``status="exhausted"``, or
        ``"certified"`` when none exists at all) or at ``time_limit``.

        Parameters
        ----------
        max_regions : int, default 10

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

        Returns
        -------
        Box or None
        """
        res = self.enumerate(max_regions=1)
        return res.boxes[0] if res.boxes else None

    def certify(self) -> ConfinedRegions:
        """Try to certify recourse for the population region: one MIQCP solve.

        ``result.certified`` is True when no confined region exists; otherwise
        ``result.boxes[0]`` is a counterexample region (or the status says the time
        limit ran out).

        Returns
        -------
        ConfinedRegions
        """
        return self.enumerate(max_regions=1)

    def find_fixed_individual(self) -> np.ndarray | None:
        """One individual in the population region with a fixed prediction (individual mode).

        Solves the MIQCP whose variable is the point ``x`` itself: ``w^T x + b <= 0``
        and a Farkas multiplier ``y`` with ``H^T y = 0``, ``y_last = 1`` and
        ``sum_i y_i (g_i - G_i x) <= 0``.

        Returns
        -------
        numpy.ndarray of shape (d,) or None
            None when there is none (or the time limit ran out first).
        """
        self._fitted()
        return find_fixed_individual_miqcp(
            self.action_set,
            self._system,
            self._w,
            self._b,
            dual_bound=self._dual_bound(),
            time_limit=self.time_limit,
        )
