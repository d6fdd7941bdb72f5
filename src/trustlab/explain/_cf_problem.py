"""A counterfactual problem: checked inputs, distances, bounds, and the result it returns."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, Options
from trustlab._validation import check_choice, check_positive
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.explain._cf_model import CounterfactualModel, check_model
from trustlab.explain._cf_result import CounterfactualResult
from trustlab.explain._inputs import MAX_MAGNITUDE, check_instance
from trustlab.explain.scm import AdditiveNoiseSCM, LinearSCM

__all__ = [
    "SEARCH_PARAMETERS",
    "SOLVERS",
    "Problem",
    "check_scm",
    "infeasible_result",
    "make_result",
    "method_name",
    "setup_problem",
]

SOLVERS = ("auto", "exact", "penalty", "search")

SEARCH_PARAMETERS: dict[str, list[Any]] = {
    "solver": [Options(SOLVERS)],
    "tau": [Interval(numbers.Real, 0, None, closed="left")],
    "time_limit": [Interval(numbers.Real, 0, None, closed="neither")],
    "random_state": ["random_state"],
}
"""Constraints of the search options shared by :func:`brace` and :func:`causal_recourse`."""
_MIN_SCALE = 1e-50
_MAX_LAM = 1e12


def check_scm(scm: Any) -> AdditiveNoiseSCM:
    """``scm`` when it is a fitted :class:`~trustlab.explain.scm.AdditiveNoiseSCM`, else a clear error."""
    if not isinstance(scm, AdditiveNoiseSCM):
        raise ParameterError(
            f"scm must be a fitted LinearSCM or AdditiveNoiseSCM from trustlab.explain.scm, "
            f"got {type(scm).__name__}.",
            argument="scm",
        )
    if not hasattr(scm, "mechanisms_"):
        raise NotFittedError("scm is not fitted; call scm.fit(X_train) first.", argument="scm")
    return scm


def _check_x(x: Any, scm: AdditiveNoiseSCM) -> np.ndarray:
    names = [str(n) for n in scm.feature_names_in_]
    return check_instance(x, len(names), names, exact=True)


def _mutable_mask(immutable: Any, scm: AdditiveNoiseSCM) -> np.ndarray:
    d = scm.n_features_in_
    mask = np.ones(d, dtype=bool)
    if immutable is None:
        return mask
    items = [immutable] if isinstance(immutable, str) else immutable
    if not isinstance(items, Iterable):
        raise ParameterError(
            f"immutable must be a list of feature names, got {immutable!r}.", argument="immutable"
        )
    for f in items:
        mask[scm.feature_index(f, "immutable")] = False
    if not mask.any():
        raise ParameterError(
            "immutable lists every feature; leave at least one mutable.", argument="immutable"
        )
    return mask


def _scales(scales: Any, default: np.ndarray, name: str) -> np.ndarray:
    if scales is None:
        return np.asarray(default, dtype=float)
    try:
        arr = np.asarray(scales, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be positive numbers, one per feature.", argument=name) from None
    if arr.shape != default.shape or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ParameterError(
            f"{name} must hold {default.shape[0]} finite numbers > 0 (one per feature, e.g. their standard "
            f"deviations), got {scales!r}.",
            argument=name,
        )
    return _scale_range(arr, name)


def _scale_range(arr: np.ndarray, name: str) -> np.ndarray:
    """Scales within ``[1e-50, 1e100]``: scaled distances of data up to 1e100 in size stay finite."""
    if np.any(arr < _MIN_SCALE) or np.any(arr > MAX_MAGNITUDE):
        raise DataError(
            f"{name} {arr.tolist()[:10]} lie outside [{_MIN_SCALE:.0e}, {MAX_MAGNITUDE:.0e}]: scaled "
            "distances would overflow; rescale the features (other units) or pass scales of a sensible size.",
            argument=name,
        )
    return arr


def _check_lam(lam: Any) -> float:
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or math.isnan(lam) or lam < 0:
        raise ParameterError(
            f"lam must be a number >= 0 (0: Wachter, inf: deep backtracking; the paper uses 1), got {lam!r}.",
            argument="lam",
        )
    if math.isfinite(lam) and float(lam) > _MAX_LAM:
        raise ParameterError(
            f"lam={lam!r} is beyond {_MAX_LAM:.0e}, where lam * d_U overflows; pass numpy.inf for deep "
            "backtracking (the limit of large lam).",
            argument="lam",
        )
    return float(lam)


def _check_bounds(bounds: Any, scm: AdditiveNoiseSCM) -> tuple[np.ndarray, np.ndarray]:
    """``bounds = {feature: (low, high)}`` (None for an open side) -> full-length ``(lo, hi)`` arrays."""
    d = scm.n_features_in_
    lo, hi = np.full(d, -np.inf), np.full(d, np.inf)
    if bounds is None:
        return lo, hi
    if not isinstance(bounds, Mapping):
        raise ParameterError(
            f"bounds must be a mapping from feature name to (low, high), e.g. {{'age': (18, 75)}} "
            f"(None for an open side), got {type(bounds).__name__}.",
            argument="bounds",
        )
    for f, pair in bounds.items():
        j = scm.feature_index(f, "bounds")
        if isinstance(pair, str | bytes) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise ParameterError(
                f"bounds[{f!r}] must be a pair (low, high) with None for an open side, got {pair!r}.",
                argument="bounds",
            )
        vals = []
        for side, v in zip(("low", "high"), pair, strict=True):
            if v is None:
                vals.append(-np.inf if side == "low" else np.inf)
                continue
            if (
                isinstance(v, bool)
                or not isinstance(v, numbers.Real)
                or not math.isfinite(float(v))
                or abs(float(v)) > MAX_MAGNITUDE
            ):
                raise ParameterError(
                    f"bounds[{f!r}]: {side} must be a finite number within +-{MAX_MAGNITUDE:.0e} or None "
                    f"(open), got {v!r}.",
                    argument="bounds",
                )
            vals.append(float(v))
        if vals[0] > vals[1]:
            raise ParameterError(
                f"bounds[{f!r}]: low {vals[0]} is above high {vals[1]}; pass (low, high) with low <= high.",
                argument="bounds",
            )
        lo[j], hi[j] = vals
    return lo, hi


def _check_target(target: Any, m: CounterfactualModel, x: np.ndarray) -> tuple[Any, int]:
    if target is not None and (np.ndim(target) != 0 or isinstance(target, pd.DataFrame | dict)):
        raise ParameterError(
            f"target must be one class label of the model {list(m.classes)} or None, got "
            f"{type(target).__name__}.",
            argument="target",
        )
    if target is None:
        current = m.predict(x)[0]
        target = m.classes[0] if current == m.classes[1] else m.classes[1]
    hits = [i for i, c in enumerate(m.classes) if c == target or str(c) == str(target)]
    if not hits:
        raise ParameterError(
            f"target {target!r} is not a class of the model {list(m.classes)}; pass one of them or None "
            "(the class the model does not predict at x).",
            argument="target",
        )
    return m.classes[hits[0]], hits[0]


@dataclass
class Problem:
    """One counterfactual query, checked: the model, the SCM, the factual and what may change.

    ``sx`` and ``su`` are the per-feature scales of ``d_X`` and ``d_U``; ``lo`` and
    ``hi`` the box bounds (infinite where open); ``tau`` the exact solver's margin.
    """

    model: CounterfactualModel
    scm: AdditiveNoiseSCM
    x: np.ndarray
    u: np.ndarray
    target: Any
    target_index: int
    mutable: np.ndarray
    sx: np.ndarray
    su: np.ndarray
    lam: float
    tau: float
    lo: np.ndarray
    hi: np.ndarray

    @property
    def bounded(self) -> bool:
        return bool(np.any(np.isfinite(self.lo)) or np.any(np.isfinite(self.hi)))

    def inside(self, X: np.ndarray) -> np.ndarray:
        """Rows within the bounds (to a relative 1e-9)."""
        X = np.atleast_2d(X)
        tol_lo = 1e-9 * (1 + np.abs(np.where(np.isfinite(self.lo), self.lo, 0.0)))
        tol_hi = 1e-9 * (1 + np.abs(np.where(np.isfinite(self.hi), self.hi, 0.0)))
        return np.all((X >= self.lo - tol_lo) & (X <= self.hi + tol_hi), axis=1)

    def immutable_outside(self) -> list[str]:
        """Immutable features whose factual value lies outside their bounds (no counterfactual can exist)."""
        names = [str(n) for n in self.scm.feature_names_in_]
        bad = ~self.mutable & ~self.inside_each(self.x)
        return [names[j] for j in np.flatnonzero(bad)]

    def inside_each(self, x: np.ndarray) -> np.ndarray:
        return (x >= self.lo) & (x <= self.hi)

    def d_x(self, X: np.ndarray) -> np.ndarray:
        return np.abs((np.atleast_2d(X) - self.x)[:, self.mutable] / self.sx[self.mutable]).sum(axis=1)

    def d_u(self, U: np.ndarray) -> np.ndarray:
        return np.sqrt(
            (((np.atleast_2d(U) - self.u)[:, self.mutable] / self.su[self.mutable]) ** 2).sum(axis=1)
        )

    def objective(self, dx: Any, du: Any) -> Any:
        if math.isinf(self.lam):
            return du
        return dx + self.lam * du if self.lam > 0 else dx

    def valid(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(np.atleast_2d(X)) == self.target)

    @property
    def sign(self) -> float:
        """+1 when the target is ``classes[1]`` (score must rise above 0), else -1."""
        return 1.0 if self.target_index == 1 else -1.0

    def margin_gap(self, w: np.ndarray, b: float) -> float:
        """How far the signed score ``sign (w . x + b)`` must rise to reach the margin ``tau``."""
        return self.tau - self.sign * (float(w @ self.x) + b)

    def scaled_box(self) -> tuple[np.ndarray, np.ndarray]:
        """The bounds as limits on the scaled change ``y = (x'_m - x_m) / sx_m`` of the mutable features."""
        m = self.mutable
        return (self.lo[m] - self.x[m]) / self.sx[m], (self.hi[m] - self.x[m]) / self.sx[m]

    def noise_map(self) -> np.ndarray:
        """``G`` with ``d_U = ||G y||_2`` for the scaled change ``y`` of the mutable features (LinearSCM)."""
        assert isinstance(self.scm, LinearSCM)
        m = self.mutable
        K = (np.eye(len(self.x)) - self.scm.B_)[np.ix_(m, m)]
        return (K / self.su[m][:, None]) * self.sx[m][None, :]


def setup_problem(
    model: Any,
    scm: Any,
    x: Any,
    target: Any,
    lam: Any,
    immutable: Any,
    scales: Any,
    noise_scales: Any,
    tau: Any,
    bounds: Any = None,
) -> Problem:
    """Check every input of a counterfactual query and abduct the factual noise."""
    scm = check_scm(scm)
    m = check_model(model, scm)
    xa = _check_x(x, scm)
    lam_f = _check_lam(lam)
    mutable = _mutable_mask(immutable, scm)
    sx = _scales(scales, scm.feature_scale_, "scales")
    if isinstance(noise_scales, str):
        check_choice(noise_scales, "noise_scales", ("feature", "noise"))  # or an array
        su = (
            sx
            if noise_scales == "feature"
            else _scale_range(np.asarray(scm.noise_scale_, float), "noise_scales")
        )
    else:
        su = _scales(noise_scales, scm.noise_scale_, "noise_scales")
    tau_f = check_positive(tau, "tau", allow_zero=True)  # the decision margin
    lo, hi = _check_bounds(bounds, scm)
    tgt, ti = _check_target(target, m, xa)
    return Problem(m, scm, xa, scm.abduct(xa), tgt, ti, mutable, sx, su, lam_f, tau_f, lo, hi)


def make_result(
    p: Problem, x_cf: np.ndarray, method: str, solver: str, status: str, calls: int, **kw: Any
) -> CounterfactualResult:
    """The result for ``x_cf``: distances, validity (inside the bounds too) and the status it earns."""
    u_cf = p.scm.abduct(x_cf)
    dx = float(p.d_x(x_cf)[0])
    du = float(p.d_u(u_cf)[0])
    valid = bool(p.valid(x_cf)[0])
    if status != "already_target" and not bool(p.inside(x_cf)[0]):
        valid = False
    if not valid and status in ("optimal", "approximate"):
        status = "not_found"
    return CounterfactualResult(
        x=p.x.copy(),
        x_cf=x_cf,
        u=p.u.copy(),
        u_cf=u_cf,
        d_x=dx,
        d_u=du,
        objective=float(p.objective(dx, du)),
        valid=valid,
        lam=p.lam,
        method=method,
        solver=solver,
        status=status,
        target=p.target,
        feature_names=tuple(str(n) for n in p.scm.feature_names_in_),
        n_solver_calls=calls,
        **kw,
    )


def infeasible_result(p: Problem, method: str, solver: str, calls: int, **kw: Any) -> CounterfactualResult:
    """No counterfactual within the bounds (proved): the factual, ``valid=False``, ``status="infeasible"``."""
    outside = p.immutable_outside()
    note = (
        f"immutable features outside their bounds: {outside}"
        if outside
        else "no point within the bounds reaches the target class"
    )
    return make_result(p, p.x.copy(), method, solver, "infeasible", calls, notes=(note,), **kw)


def method_name(lam: float) -> str:
    """The method ``lam`` amounts to: ``"wachter"`` (0), ``"deep_backtracking"`` (inf) or ``"brace"``."""
    return "wachter" if lam == 0 else "deep_backtracking" if math.isinf(lam) else "brace"
