"""BRACE backtracking counterfactual explanations, with Wachter, deep-backtracking and recourse baselines.

Given a classifier ``h``, an instance ``x`` and a structural causal model (SCM,
:mod:`trustlab.explain.scm`) with noise ``u = F^{-1}(x)``, BRACE (Fatemi,
Sharifian, Yassaee, ICML 2025) returns the counterfactual

    x_cf = F(u_cf),  u_cf = argmin_{u'} d_X(x, F(u')) + lam * d_U(u, u')  s.t.  h(F(u')) = target,

with ``d_X`` the l1 distance and ``d_U`` the l2 distance, both over the mutable
features and divided by per-feature scales (the features' standard deviations by
default). Immutable features are held at their factual values. ``lam = 0`` is
Wachter's counterfactual (causal structure ignored), ``lam -> inf`` is deep
backtracking (Kladny et al., 2024), and interventional causal recourse (Karimi et
al., 2021; :func:`causal_recourse`) is one backtracking solution (Theorem 5.1) that
BRACE dominates for a suitable ``lam`` (Theorem 6.1).

Solvers
-------
``"exact"``
    :class:`~trustlab.explain.scm.LinearSCM` and a linear classifier (scikit-learn
    ``LinearClassifierMixin``: ``LogisticRegression``, ``LinearSVC``,
    ``SGDClassifier``, ``RidgeClassifier``, ``Perceptron``; optionally in a
    ``Pipeline`` after ``StandardScaler``). The problem is a convex program with
    one half-space constraint, solved in closed form for ``lam = 0`` and
    ``lam = inf`` and, in between, by SLSQP followed by an exact KKT polish on the
    active face (the returned ``status`` is ``"optimal"`` when the KKT conditions
    hold to 1e-9).
``"penalty"``
    The paper's method for differentiable models: Adam on
    ``d_X + lam d_U + beta * cross-entropy`` with ``beta = 1, 10, 100, ...`` (at most 8
    rounds of 500 steps) until a valid iterate appears, for a LinearSCM and a linear
    classifier or a binary ``MLPClassifier`` (optionally after ``StandardScaler``).
    Approximate; used only when asked for.
``"search"``
    Any binary classifier with ``predict`` and any fitted SCM: growing spheres
    in the scaled noise space, then line search towards the factual,
    sparsification and a shrinking local search, under a per-row ``time_limit``
    (default 10 s) that returns the best counterfactual found so far. Approximate.

Bounds
------
Every method takes ``bounds={"age": (18, 75), "loan": (None, 20000)}``: per-feature
box constraints ``low <= x_cf_j <= high`` (None leaves a side open) that the
counterfactual must satisfy. The exact solver stays exact (an LP for ``lam = 0``;
otherwise SLSQP with the box, then the stationarity equations solved on the optimal
face and the KKT conditions checked), the penalty solver projects its steps onto the
box and the search rejects points outside it. When no point in the box reaches the
target (proved by the exact solver, or an immutable feature lies outside its bounds)
the result has ``status="infeasible"`` and ``valid=False``; a search that finds
nothing inside the box reports ``status="not_found"``.
"""

from __future__ import annotations

import itertools
import math
import numbers
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import linprog, minimize

from trustlab._validation import check_array, check_choice, check_positive, check_random_state
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.explain._inputs import check_instance
from trustlab.explain.scm import AdditiveNoiseSCM, LinearSCM

__all__ = [
    "CounterfactualResult",
    "brace",
    "brace_path",
    "causal_recourse",
    "counterfactual_metrics",
    "counterfactuals",
    "deep_backtracking",
    "wachter",
]

_SOLVERS = ("auto", "exact", "penalty", "search")
_SUPPORTED = (
    "any fitted binary classifier with predict (solver='search'); the exact solver needs a LinearSCM and a "
    "linear scikit-learn classifier (LogisticRegression, LinearSVC, SGDClassifier, RidgeClassifier, "
    "Perceptron), optionally in a Pipeline after StandardScaler"
)


@dataclass(frozen=True, eq=False)
class CounterfactualResult:
    """One counterfactual explanation and how far it moved the features and the noise.

    Attributes
    ----------
    x, x_cf : ndarray of shape (d,)
        Factual and counterfactual features (the SCM's column order).
    u, u_cf : ndarray of shape (d,)
        Their exogenous noises; ``x_cf == scm.generate(u_cf)``.
    d_x, d_u : float
        Scaled l1 feature distance and scaled l2 noise distance (mutable features).
    objective : float
        ``d_x + lam * d_u`` (``d_u`` alone for ``lam = inf``).
    valid : bool
        Whether the model predicts ``target`` at ``x_cf``.
    lam : float
    method : str
        ``"brace"``, ``"wachter"``, ``"deep_backtracking"`` or ``"causal_recourse"``.
    solver : str
        ``"exact"``, ``"penalty"``, ``"search"`` (or ``"none"`` when ``x`` already has the target).
    status : str
        ``"optimal"``, ``"approximate"`` (search finished), ``"time_limit"``
        (search stopped by the time limit: best found so far), ``"already_target"``,
        ``"not_found"`` or ``"infeasible"`` (proved: no counterfactual within ``bounds``).
    target : object
        The desired class.
    feature_names : tuple of str
    intervened : tuple of str
        Causal recourse only: the intervened feature set ``A``.
    n_solver_calls : int
        Optimisation problems solved (exact) or model evaluations (search).
    """

    x: np.ndarray
    x_cf: np.ndarray
    u: np.ndarray
    u_cf: np.ndarray
    d_x: float
    d_u: float
    objective: float
    valid: bool
    lam: float
    method: str
    solver: str
    status: str
    target: Any
    feature_names: tuple[str, ...]
    intervened: tuple[str, ...] = ()
    n_solver_calls: int = 0
    notes: tuple[str, ...] = field(default=())

    def to_frame(self) -> pd.DataFrame:
        """Factual and counterfactual side by side (rows ``x``, ``x_cf``, ``change``)."""
        return pd.DataFrame(
            [self.x, self.x_cf, self.x_cf - self.x],
            index=["x", "x_cf", "change"],
            columns=list(self.feature_names),
        )


# --------------------------------------------------------------------------- input checks
def _check_scm(scm: Any) -> AdditiveNoiseSCM:
    if not isinstance(scm, AdditiveNoiseSCM):
        raise ParameterError(
            f"scm must be a fitted LinearSCM or AdditiveNoiseSCM from trustlab.explain.scm, "
            f"got {type(scm).__name__}.",
            argument="scm",
        )
    if not hasattr(scm, "mechanisms_"):
        raise NotFittedError("scm is not fitted; call scm.fit(X_train) first.", argument="scm")
    return scm


@dataclass
class _Model:
    """A binary classifier, how to call it on rows in the SCM's column order, and its linear form."""

    model: Any
    classes: np.ndarray
    perm: np.ndarray | None  # SCM column order -> model column order
    columns: list[str] | None

    def frame(self, X: np.ndarray) -> Any:
        Z = X if self.perm is None else X[:, self.perm]
        return pd.DataFrame(Z, columns=self.columns) if self.columns is not None else Z

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict(self.frame(np.atleast_2d(X))))

    def _final_estimator(self) -> Any:
        from sklearn.pipeline import Pipeline

        return self.model[-1] if isinstance(self.model, Pipeline) else self.model

    def _standardisation(self, d: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(mean, scale)`` of the ``StandardScaler`` steps before the final estimator, composed
        (``z = (x - mean) / scale`` in the model's column order), or None when another step precedes it.
        """
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import StandardScaler

        mean, scale = np.zeros(d), np.ones(d)
        steps = [step for _, step in self.model.steps[:-1]] if isinstance(self.model, Pipeline) else []
        for step in steps:
            if step is None or step == "passthrough":
                continue
            if not isinstance(step, StandardScaler):
                return None
            m = step.mean_ if step.with_mean else np.zeros(d)
            sc = step.scale_ if step.with_std and step.scale_ is not None else np.ones(d)
            mean, scale = mean + m * scale, scale * sc
        return mean, scale

    def differentiable(self) -> Callable[[np.ndarray], tuple[float, np.ndarray]] | None:
        """``x -> (logit of classes[1], its gradient)`` in SCM column order, or None.

        Linear classifiers and binary ``MLPClassifier`` s, optionally after a
        ``StandardScaler`` in a ``Pipeline``.
        """
        lin = self.linear()
        if lin is not None:
            w, b = lin
            return lambda x: (float(w @ x + b), w)
        from sklearn.neural_network import MLPClassifier

        est = self._final_estimator()
        if not isinstance(est, MLPClassifier) or est.n_outputs_ != 1 or est.out_activation_ != "logistic":
            return None
        standardise = self._standardisation(len(est.coefs_[0]))
        if standardise is None:
            return None
        mean, scale = standardise
        perm = self.perm
        acts: dict[
            str, tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray, np.ndarray], np.ndarray]]
        ]
        acts = {
            "relu": (lambda z: np.maximum(z, 0), lambda z, a: (z > 0).astype(float)),
            "tanh": (np.tanh, lambda z, a: 1 - a * a),
            "logistic": (lambda z: 1 / (1 + np.exp(-z)), lambda z, a: a * (1 - a)),
            "identity": (lambda z: z, lambda z, a: np.ones_like(z)),
        }
        if est.activation not in acts:
            return None
        act, dact = acts[est.activation]
        W, B = est.coefs_, est.intercepts_

        def f(x: np.ndarray) -> tuple[float, np.ndarray]:
            xm = x if perm is None else x[perm]
            a = (xm - mean) / scale
            derivs = []
            for Wi, bi in zip(W[:-1], B[:-1], strict=True):
                z = a @ Wi + bi
                a = act(z)
                derivs.append(dact(z, a))
            logit = float(a @ W[-1][:, 0] + B[-1][0])
            g = W[-1][:, 0]
            for Wi, di in zip(reversed(W[:-1]), reversed(derivs), strict=True):
                g = Wi @ (g * di)
            g = g / scale
            if perm is not None:
                out = np.empty_like(g)
                out[perm] = g
                g = out
            return logit, g

        return f

    def linear(self) -> tuple[np.ndarray, float] | None:
        """``(w, b)`` in SCM column order with ``w . x + b > 0`` <=> class ``classes[1]``, or None."""
        from sklearn.linear_model._base import LinearClassifierMixin

        est = self._final_estimator()
        if not isinstance(est, LinearClassifierMixin) or np.shape(est.coef_)[0] != 1:
            return None
        w = np.asarray(est.coef_, dtype=float).ravel()
        b = float(np.ravel(est.intercept_)[0]) if np.ndim(est.intercept_) else float(est.intercept_)
        standardise = self._standardisation(w.size)
        if standardise is None:
            return None
        mean, scale = standardise
        w = w / scale  # w . (x - mean) / scale + b
        b = b - float(w @ mean)
        if self.perm is not None:
            inv = np.empty_like(self.perm)
            inv[self.perm] = np.arange(len(self.perm))
            w = w[inv]
        return w, b


def _check_model(model: Any, scm: AdditiveNoiseSCM) -> _Model:
    if not hasattr(model, "predict"):
        raise ModelError(f"model has no predict method; supported: {_SUPPORTED}.", argument="model")
    classes = getattr(model, "classes_", None)
    if classes is None:
        raise ModelError(
            f"model must be a fitted classifier with classes_ ({type(model).__name__} has none); "
            f"supported: {_SUPPORTED}.",
            argument="model",
        )
    classes = np.asarray(classes)
    if len(classes) != 2:
        raise ModelError(
            f"model must be a binary classifier, got {len(classes)} classes; supported: {_SUPPORTED}.",
            argument="model",
        )
    names = [str(n) for n in scm.feature_names_in_]
    model_names = getattr(model, "feature_names_in_", None)
    if model_names is not None:
        mn = [str(n) for n in model_names]
        if sorted(mn) != sorted(names):
            raise DataError(
                f"the SCM's nodes {names} differ from the model's features {mn}; build the SCM's graph "
                "over exactly the model's input columns.",
                argument="scm",
            )
        perm = np.array([names.index(n) for n in mn])
        return _Model(model, classes, None if np.all(perm == np.arange(len(perm))) else perm, mn)
    n_in = getattr(model, "n_features_in_", len(names))
    if n_in != len(names):
        raise DataError(
            f"the model takes {n_in} features but the SCM has {len(names)} nodes {names}; build the SCM "
            "over exactly the model's input columns (in the model's order).",
            argument="scm",
        )
    return _Model(model, classes, None, None)


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
        mask[scm._feature_index(f, "immutable")] = False
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
    return arr


def _check_lam(lam: Any) -> float:
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or math.isnan(lam) or lam < 0:
        raise ParameterError(
            f"lam must be a number >= 0 (0: Wachter, inf: deep backtracking; the paper uses 1), got {lam!r}.",
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
        j = scm._feature_index(f, "bounds")
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
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
                raise ParameterError(
                    f"bounds[{f!r}]: {side} must be a finite number or None (open), got {v!r}.",
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


def _check_target(target: Any, m: _Model, x: np.ndarray) -> tuple[Any, int]:
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
class _Problem:
    model: _Model
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


def _setup(
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
) -> _Problem:
    scm = _check_scm(scm)
    m = _check_model(model, scm)
    xa = _check_x(x, scm)
    lam_f = _check_lam(lam)
    mutable = _mutable_mask(immutable, scm)
    sx = _scales(scales, scm.feature_scale_, "scales")
    if isinstance(noise_scales, str):
        check_choice(noise_scales, "noise_scales", ("feature", "noise"))  # or an array
        su = sx if noise_scales == "feature" else np.asarray(scm.noise_scale_, dtype=float)
    else:
        su = _scales(noise_scales, scm.noise_scale_, "noise_scales")
    tau_f = check_positive(tau, "tau", allow_zero=True)  # the decision margin
    lo, hi = _check_bounds(bounds, scm)
    tgt, ti = _check_target(target, m, xa)
    return _Problem(m, scm, xa, scm.abduct(xa), tgt, ti, mutable, sx, su, lam_f, tau_f, lo, hi)


def _result(
    p: _Problem, x_cf: np.ndarray, method: str, solver: str, status: str, calls: int, **kw: Any
) -> CounterfactualResult:
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


# --------------------------------------------------------------------------- exact solver
@dataclass
class _Linear:
    """The exact problem in scaled coordinates ``y = dx_m / sx_m``:

    min ||y||_1 + lam ||G y||_2  s.t.  a . y >= r.
    """

    G: np.ndarray
    a: np.ndarray
    r: float


def _linear_problem(p: _Problem) -> tuple[_Linear, np.ndarray] | None:
    if not isinstance(p.scm, LinearSCM):
        return None
    lin = p.model.linear()
    if lin is None:
        return None
    w, b = lin
    sign = 1.0 if p.target_index == 1 else -1.0
    m = p.mutable
    K = (np.eye(len(p.x)) - p.scm.B_)[np.ix_(m, m)]
    G = (K / p.su[m][:, None]) * p.sx[m][None, :]
    a = sign * w[m] * p.sx[m]
    r = p.tau - sign * (float(w @ p.x) + b)
    return _Linear(G, a, r), m


def _norm_obj(y: np.ndarray, G: np.ndarray, lam: float) -> float:
    if math.isinf(lam):
        return float(np.linalg.norm(G @ y))
    return float(np.abs(y).sum() + lam * np.linalg.norm(G @ y))


def _solve_wachter(L: _Linear) -> np.ndarray:
    j = int(np.argmax(np.abs(L.a)))
    y = np.zeros_like(L.a)
    y[j] = L.r / L.a[j]
    return y


def _solve_min_du(L: _Linear) -> np.ndarray:
    h = np.linalg.solve(L.G.T, L.a)
    v = L.r * h / float(h @ h)
    return np.linalg.solve(L.G, v)


def _polish(L: _Linear, y: np.ndarray, lam: float) -> np.ndarray | None:
    """Solve the KKT system on ``y``'s face exactly; None when it does not certify optimality."""
    scale = np.abs(y).max()
    J = np.abs(y) > 1e-7 * scale
    s = np.sign(y[J])
    GJ = L.G[:, J]
    H = GJ.T @ GJ
    try:
        Ha = np.linalg.solve(H, L.a[J])
        Hs = np.linalg.solve(H, s)
    except np.linalg.LinAlgError:
        return None
    qa, qs, ss = float(L.a[J] @ Ha), float(L.a[J] @ Hs), float(s @ Hs)
    disc = qs * qs - qa * (ss - lam * lam)
    if qa <= 0 or disc < 0:
        return None
    for mu in ((qs + math.sqrt(disc)) / qa, (qs - math.sqrt(disc)) / qa):
        v = mu * Ha - Hs  # H^{-1}(mu a - s)
        av = float(L.a[J] @ v)
        if av <= 0:
            continue
        rho = lam * L.r / av
        yJ = rho * v / lam
        if np.any(np.sign(yJ) != s):
            continue
        cand = np.zeros_like(y)
        cand[J] = yJ
        Gy = L.G @ cand
        grad = mu * L.a - lam * (L.G.T @ Gy) / np.linalg.norm(Gy)
        if np.all(np.abs(grad[~J]) <= 1 + 1e-9) and np.allclose(grad[J], s, atol=1e-7):
            return cand
    return None


def _solve_linear(L: _Linear, lam: float) -> tuple[np.ndarray, str, int]:
    if lam == 0:
        return _solve_wachter(L), "optimal", 1
    if math.isinf(lam):
        return _solve_min_du(L), "optimal", 1
    starts = [_solve_wachter(L), _solve_min_du(L)]
    best = min(starts, key=lambda y: _norm_obj(y, L.G, lam))
    n = len(L.a)

    def f(z: np.ndarray) -> tuple[float, np.ndarray]:
        y = z[:n] - z[n:]
        Gy = L.G @ y
        nrm = float(np.linalg.norm(Gy))
        g = L.G.T @ Gy / max(nrm, 1e-300)
        return float(z.sum() + lam * nrm), np.concatenate([1 + lam * g, 1 - lam * g])

    z0 = np.concatenate([np.maximum(best, 0), np.maximum(-best, 0)])
    cons = {
        "type": "eq",
        "fun": lambda z: float(L.a @ (z[:n] - z[n:]) - L.r),
        "jac": lambda z: np.r_[L.a, -L.a],
    }
    res = minimize(
        f,
        z0,
        jac=True,
        method="SLSQP",
        bounds=[(0, None)] * (2 * n),
        constraints=[cons],
        options={"ftol": 1e-14, "maxiter": 500},
    )
    y = res.x[:n] - res.x[n:]
    y = y * (L.r / float(L.a @ y)) if float(L.a @ y) > 0 else best
    polished = _polish(L, y, lam)
    if polished is not None:
        return polished, "optimal", 2
    cands = [y, *starts]
    return min(cands, key=lambda c: _norm_obj(c, L.G, lam)), "approximate", 2


def _box_max(a: np.ndarray, ly: np.ndarray, hy: np.ndarray) -> float:
    """``max a . y`` over the box ``ly <= y <= hy`` (may be inf)."""
    with np.errstate(invalid="ignore"):
        top = np.where(a > 0, a * hy, np.where(a < 0, a * ly, 0.0))
    return float(np.sum(top))


def _kkt_bounded(
    L: _Linear, y: np.ndarray, lam: float, ly: np.ndarray, hy: np.ndarray, tol: float = 1e-8
) -> bool:
    """KKT conditions of ``min ||y||_1 + lam ||G y||_2`` (``||G y||^2`` for ``lam = inf``) subject to
    ``a . y >= r`` and ``ly <= y <= hy`` at ``y``: is there a multiplier ``mu >= 0`` that certifies it?"""
    scale = 1.0 + float(np.abs(y).max())
    if np.any(y < ly - 1e-9 * scale) or np.any(y > hy + 1e-9 * scale):
        return False
    slack = float(L.a @ y) - L.r
    if slack < -1e-9 * (1 + abs(L.r)):
        return False
    Gy = L.G @ y
    nrm = float(np.linalg.norm(Gy))
    if nrm == 0:
        return False
    l1 = not math.isinf(lam)
    grad = lam * (L.G.T @ Gy) / nrm if l1 else L.G.T @ Gy
    at_lo = np.abs(y - ly) <= 1e-9 * scale
    at_hi = np.abs(y - hy) <= 1e-9 * scale
    zero = np.abs(y) <= 1e-9 * scale
    mlo, mhi = 0.0, (0.0 if slack > 1e-9 * (1 + abs(L.r)) else math.inf)
    for j in range(len(y)):
        if at_lo[j] and at_hi[j]:
            continue
        if not l1:
            smin = smax = 0.0
        elif zero[j]:
            smin, smax = -1.0, 1.0
        else:
            smin = smax = float(np.sign(y[j]))
        # c_j = grad_j - mu a_j must lie in [cl, cu]
        if at_hi[j]:
            cl, cu = -math.inf, -smin
        elif at_lo[j]:
            cl, cu = -smax, math.inf
        else:
            cl, cu = -smax, -smin
        g, aj = float(grad[j]), float(L.a[j])
        t = tol * (1 + abs(g))
        if abs(aj) <= 1e-300:
            if not cl - t <= g <= cu + t:
                return False
            continue
        # cl <= g - mu aj <= cu  <=>  mu in [(g - cu)/aj, (g - cl)/aj] (aj > 0), reversed for aj < 0
        lo_m, hi_m = (g - cu - t) / aj, (g - cl + t) / aj
        if aj < 0:
            lo_m, hi_m = hi_m, lo_m
        mlo, mhi = max(mlo, lo_m), min(mhi, hi_m)
    return mlo <= mhi + tol * (1 + abs(mlo))


def _newton_face(L: _Linear, y: np.ndarray, lam: float, ly: np.ndarray, hy: np.ndarray) -> np.ndarray | None:
    """Solve the stationarity equations on ``y``'s face (coordinates at a bound or zero held fixed)."""
    scale = 1.0 + float(np.abs(y).max())
    y = y.copy()
    at_lo = np.abs(y - ly) <= 1e-7 * scale
    at_hi = np.abs(y - hy) <= 1e-7 * scale
    y[at_lo] = ly[at_lo]
    y[at_hi] = hy[at_hi]
    l1 = not math.isinf(lam)
    fixed = at_lo | at_hi
    if l1:
        zero = (np.abs(y) <= 1e-7 * scale) & ~fixed
        y[zero] = 0.0
        fixed |= zero
    J = np.flatnonzero(~fixed)
    active = float(L.a @ y) - L.r <= 1e-7 * (1 + abs(L.r))
    if len(J) == 0:
        return y
    s = np.sign(y[J]) if l1 else np.zeros(len(J))
    GJ, aJ = L.G[:, J], L.a[J]
    H = GJ.T @ GJ
    if not l1:  # min ||G y||^2: linear KKT system on the face
        k = len(J)
        rhs = -(GJ.T @ (L.G[:, fixed] @ y[fixed]))
        if active:
            M = np.block([[H, -aJ[:, None]], [aJ[None, :], np.zeros((1, 1))]])
            rhs = np.r_[rhs, L.r - float(L.a[fixed] @ y[fixed])]
        else:
            M = H
        try:
            sol = np.linalg.solve(M, rhs)
        except np.linalg.LinAlgError:
            return None
        y[J] = sol[:k]
        return y
    mu = 0.0
    for _ in range(60):
        Gy = L.G @ y
        n = float(np.linalg.norm(Gy))
        if not 0 < n < 1e150 or not math.isfinite(mu):
            return None  # Newton diverged from this start
        gJ = GJ.T @ Gy
        F1 = s + lam * gJ / n - mu * aJ
        D = lam * (H / n - np.outer(gJ, gJ) / (n * n * n))
        if active:
            F = np.r_[F1, float(L.a @ y) - L.r]
            M = np.block([[D, -aJ[:, None]], [aJ[None, :], np.zeros((1, 1))]])
        else:
            F, M = F1, D
        if float(np.abs(F).max()) < 1e-14 * scale:
            break
        try:
            step = np.linalg.solve(M, -F)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(step)):
            return None
        y[J] += step[: len(J)]
        if active:
            mu += float(step[-1])
    return y


def _solve_linear_bounded(
    L: _Linear, lam: float, ly: np.ndarray, hy: np.ndarray
) -> tuple[np.ndarray | None, str, int]:
    """The exact problem with the box ``ly <= y <= hy`` (scaled feature changes); None when infeasible.

    ``lam = 0``: one LP (HiGHS). Otherwise SLSQP with the box, then the stationarity equations solved
    on the optimal face (Newton; a linear system for ``lam = inf``) and the KKT conditions checked.
    """
    n = len(L.a)
    if _box_max(L.a, ly, hy) < L.r - 1e-12 * (1 + abs(L.r)):
        return None, "infeasible", 0
    box: list[tuple[float | None, float | None]] = [
        (float(lo) if math.isfinite(lo) else None, float(hi) if math.isfinite(hi) else None)
        for lo, hi in zip(ly, hy, strict=True)
    ]
    c = np.r_[np.zeros(n), np.ones(n)]
    eye = np.eye(n)
    A_ub = np.block([[eye, -eye], [-eye, -eye], [-L.a[None, :], np.zeros((1, n))]])
    b_ub = np.r_[np.zeros(2 * n), -L.r]
    lp = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=box + [(0, None)] * n, method="highs")
    if lp.status == 2:
        return None, "infeasible", 1
    if lp.status != 0:
        return None, "not_found", 1
    y0 = np.clip(lp.x[:n], ly, hy)
    if lam == 0:
        return y0, "optimal", 1
    cons = [{"type": "ineq", "fun": lambda y: float(L.a @ y - L.r), "jac": lambda y: L.a}]
    if math.isinf(lam):
        res = minimize(
            lambda y: (float((L.G @ y) @ (L.G @ y)), 2 * L.G.T @ (L.G @ y)),
            y0,
            jac=True,
            method="SLSQP",
            bounds=box,
            constraints=cons,
            options={"ftol": 1e-15, "maxiter": 1000},
        )
        y1 = np.clip(res.x, ly, hy)
    else:

        def f(z: np.ndarray) -> tuple[float, np.ndarray]:
            Gy = L.G @ z[:n]
            nrm = float(np.linalg.norm(Gy))
            g = L.G.T @ Gy / max(nrm, 1e-300)
            return float(z[n:].sum() + lam * nrm), np.r_[lam * g, np.ones(n)]

        cons += [
            {"type": "ineq", "fun": lambda z: z[n:] - z[:n], "jac": lambda z: np.c_[-eye, eye]},
            {"type": "ineq", "fun": lambda z: z[n:] + z[:n], "jac": lambda z: np.c_[eye, eye]},
        ]
        cons[0] = {
            "type": "ineq",
            "fun": lambda z: float(L.a @ z[:n] - L.r),
            "jac": lambda z: np.r_[L.a, 0 * L.a],
        }
        res = minimize(
            f,
            np.r_[y0, np.abs(y0)],
            jac=True,
            method="SLSQP",
            bounds=box + [(0, None)] * n,
            constraints=cons,
            options={"ftol": 1e-15, "maxiter": 1000},
        )
        y1 = np.clip(res.x[:n], ly, hy)

    def obj(y: np.ndarray) -> float:
        return float((L.G @ y) @ (L.G @ y)) if math.isinf(lam) else _norm_obj(y, L.G, lam)

    cands = [y for y in (y1, y0) if float(L.a @ y) >= L.r - 1e-12 * (1 + abs(L.r))]
    for y in list(cands):
        # the face SLSQP found, then its neighbours (one coordinate moved to zero, a bound or either sign)
        eps = 1e-5 * (1.0 + float(np.abs(y).max()))
        starts = [y]
        for j in range(n):
            for v in (0.0, ly[j], hy[j], eps, -eps):
                if math.isfinite(v) and ly[j] <= v <= hy[j] and v != y[j]:
                    z = y.copy()
                    z[j] = v
                    starts.append(z)
        for z in starts:
            polished = _newton_face(L, z, lam, ly, hy)
            if polished is not None and _kkt_bounded(L, polished, lam, ly, hy):
                return np.clip(polished, ly, hy), "optimal", 2
    if not cands:
        return y0, "approximate", 2
    return min(cands, key=obj), "approximate", 2


def _scaled_box(p: _Problem) -> tuple[np.ndarray, np.ndarray]:
    """The bounds as limits on the scaled change ``y = (x'_m - x_m) / sx_m`` of the mutable features."""
    m = p.mutable
    return (p.lo[m] - p.x[m]) / p.sx[m], (p.hi[m] - p.x[m]) / p.sx[m]


def _exact_cf(p: _Problem, L: _Linear, mask: np.ndarray, lam: float) -> tuple[np.ndarray | None, str, int]:
    if p.bounded:
        ly, hy = _scaled_box(p)
        yb, status, calls = _solve_linear_bounded(L, lam, ly, hy)
        if yb is None:
            return None, status, calls
        y = yb
    else:
        y, status, calls = _solve_linear(L, lam)
    x_cf = p.x.copy()
    x_cf[mask] += y * p.sx[mask]
    if p.bounded:
        x_cf[mask] = np.clip(x_cf[mask], p.lo[mask], p.hi[mask])
    return x_cf, status, calls


# --------------------------------------------------------------------------- penalty solver
def _penalty_cf(
    p: _Problem, f: Callable[[np.ndarray], tuple[float, np.ndarray]], deadline: float
) -> tuple[np.ndarray, str, int]:
    """The paper's penalty method: Adam on ``d_X + lam d_U + beta CE(h(x'), target)``.

    Over the scaled mutable feature change ``y`` of a LinearSCM (``u'`` follows linearly), from
    ``y = 0`` (``u' = u``); ``|.|`` smoothed by ``sqrt(z^2 + 1e-8)``; ``beta = 1, 10, 100, ...``
    (at most 8 rounds of 500 steps) until a valid iterate appears; returns the valid iterate
    with the lowest objective.
    """
    assert isinstance(p.scm, LinearSCM)
    m = p.mutable
    K = (np.eye(len(p.x)) - p.scm.B_)[np.ix_(m, m)]
    G = (K / p.su[m][:, None]) * p.sx[m][None, :]
    sign = 1.0 if p.target_index == 1 else -1.0
    lam = p.lam
    ly, hy = _scaled_box(p)
    y = np.clip(np.zeros(int(m.sum())), ly, hy)  # projected onto the bounds
    mom, vel = np.zeros_like(y), np.zeros_like(y)
    lr, b1, b2 = 0.01, 0.9, 0.999
    best, best_f, steps, t = None, math.inf, 0, 0
    x = p.x.copy()
    for round_ in range(8):
        beta = 10.0**round_
        for _ in range(500):
            x[m] = p.x[m] + y * p.sx[m]
            logit, gx = f(x)
            steps += 1
            Gy = G @ y
            nl1 = float(np.abs(y).sum())
            nl2 = float(np.linalg.norm(Gy))
            if sign * logit > 0:
                obj = nl2 if math.isinf(lam) else nl1 + lam * nl2
                if obj < best_f:
                    best, best_f = x.copy(), obj
            margin = -sign * logit
            g_ce = -sign / (1 + math.exp(-margin)) * gx[m] * p.sx[m] if margin > -700 else 0.0 * y
            g_l2 = G.T @ Gy / math.sqrt(nl2 * nl2 + 1e-8)
            if math.isinf(lam):
                g = g_l2 + beta * g_ce
            else:
                g = y / np.sqrt(y * y + 1e-8) + lam * g_l2 + beta * g_ce
            t += 1
            mom = b1 * mom + (1 - b1) * g
            vel = b2 * vel + (1 - b2) * g * g
            y = np.clip(y - lr * (mom / (1 - b1**t)) / (np.sqrt(vel / (1 - b2**t)) + 1e-8), ly, hy)
            if time.perf_counter() > deadline:
                return (best if best is not None else p.x.copy()), "time_limit", steps
        if best is not None:
            break
    if best is None:
        return p.x.copy(), "not_found", steps
    return best, "approximate", steps


# --------------------------------------------------------------------------- search solver
def _search(
    gen: Callable[[np.ndarray], np.ndarray],
    score: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    k: int,
    rng: np.random.Generator,
    deadline: float,
    *,
    batch: int = 256,
    step: float = 0.1,
    max_radius: float = 20.0,
) -> tuple[np.ndarray | None, float, int, bool]:
    """Growing spheres in a scaled k-dim parameter space, then polish.

    ``gen(P)`` maps parameters (n, k) to feature rows; ``score(P, X)`` returns
    (objective, valid). Returns (best parameters or None, objective, evaluations, timed_out).
    """
    evals = 0
    best: np.ndarray | None = None
    best_f = math.inf

    def consider(P: np.ndarray) -> bool:
        nonlocal best, best_f, evals
        X = gen(P)
        f, ok = score(P, X)
        evals += len(P)
        if not ok.any():
            return False
        f = np.where(ok, f, np.inf)
        i = int(np.argmin(f))
        if f[i] < best_f:
            best, best_f = P[i].copy(), float(f[i])
            return True
        return False

    # 1. growing spheres: uniform samples in shells [lo, hi] of the scaled space
    lo = 0.0
    while best is None and lo < max_radius:
        if time.perf_counter() > deadline:
            return best, best_f, evals, True
        hi = lo + step
        D = rng.standard_normal((batch, k))
        D /= np.linalg.norm(D, axis=1, keepdims=True)
        R = (lo**k + rng.random(batch) * (hi**k - lo**k)) ** (1.0 / k)
        consider(D * R[:, None])
        lo = hi
        step *= 1.1
    if best is None:
        return None, math.inf, evals, False
    # 2. polish: line search to the factual, sparsify, shrinking local search
    radius = 0.5 * float(np.linalg.norm(best)) + 1e-12
    stall = 0
    while radius > 1e-5 * (1 + float(np.linalg.norm(best))) and stall < 40:
        if time.perf_counter() > deadline:
            return best, best_f, evals, True
        t = np.linspace(0.0, 1.0, 33)[1:, None]
        improved = consider(t * best[None, :])
        Z = np.repeat(best[None, :], k, axis=0)
        Z[np.arange(k), np.arange(k)] = 0.0
        improved |= consider(Z)
        E = rng.standard_normal((batch, k)) * radius / math.sqrt(k)
        improved |= consider(best[None, :] + E)
        if improved:
            stall = 0
        else:
            radius *= 0.6
            stall += 1
    return best, best_f, evals, False


def _search_cf(
    p: _Problem, lam: float, rng: np.random.Generator, deadline: float
) -> tuple[np.ndarray, str, int]:
    m = p.mutable
    imm = np.flatnonzero(~m)
    scm = p.scm

    # lam = 0 (Wachter) searches the scaled feature space, where its l1 objective is sparse;
    # otherwise the scaled noise space of the mutable features (immutables fixed by intervention).
    in_x = lam == 0

    def gen(P: np.ndarray) -> np.ndarray:
        if in_x:
            X = np.repeat(p.x[None, :], len(P), axis=0)
            X[:, m] += P * p.sx[m]
            return X
        U = np.repeat(p.u[None, :], len(P), axis=0)
        U[:, m] += P * p.su[m]
        return scm.intervene(U, list(imm), np.repeat(p.x[None, imm], len(P), axis=0))

    def score(P: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ok = p.valid(X) & p.inside(X) if p.bounded else p.valid(X)
        if in_x:
            return np.abs(P).sum(axis=1), ok
        dx = p.d_x(X)
        du = np.linalg.norm(P, axis=1)
        return p.objective(dx, du), ok

    best, _, evals, timed_out = _search(gen, score, int(m.sum()), rng, deadline)
    if best is None:
        return p.x.copy(), ("time_limit" if timed_out else "not_found"), evals
    return gen(best[None, :])[0], ("time_limit" if timed_out else "approximate"), evals


def _infeasible(p: _Problem, method: str, solver: str, calls: int, **kw: Any) -> CounterfactualResult:
    """No counterfactual within the bounds (proved): the factual, ``valid=False``, ``status="infeasible"``."""
    outside = p.immutable_outside()
    note = (
        f"immutable features outside their bounds: {outside}"
        if outside
        else "no point within the bounds reaches the target class"
    )
    return _result(p, p.x.copy(), method, solver, "infeasible", calls, notes=(note,), **kw)


# --------------------------------------------------------------------------- public API
def _check_time(time_limit: Any) -> float:
    if isinstance(time_limit, bool) or not isinstance(time_limit, numbers.Real) or not float(time_limit) > 0:
        raise ParameterError(
            f"time_limit must be a number of seconds > 0 (default 10), got {time_limit!r}.",
            argument="time_limit",
        )
    return float(time_limit)


def _method_name(lam: float) -> str:
    return "wachter" if lam == 0 else "deep_backtracking" if math.isinf(lam) else "brace"


def brace(
    model: Any,
    scm: AdditiveNoiseSCM,
    x: Any,
    target: Any = None,
    *,
    lam: float = 1.0,
    immutable: Sequence[Any] = (),
    scales: Any = None,
    noise_scales: Any = "feature",
    solver: str = "auto",
    tau: float = 1e-6,
    time_limit: float = 10.0,
    random_state: Any = 0,
    bounds: Mapping[Any, tuple[float | None, float | None]] | None = None,
) -> CounterfactualResult:
    """BRACE backtracking counterfactual: trade feature distance against noise distance with ``lam``.

    Solves ``min_{u'} d_X(x, F(u')) + lam * d_U(u, u')`` subject to
    ``model(F(u')) = target`` and the immutable features fixed (paper eq. 8-10),
    with ``d_X = sum_i |x_i - x'_i| / s_i`` and
    ``d_U = sqrt(sum_i (u_i - u'_i)^2 / s_i^2)`` over the mutable features (paper
    Section 7).

    Parameters
    ----------
    model : fitted binary classifier
        Anything with ``predict`` and ``classes_``; see the module docstring for
        which models the exact solver takes.
    scm : fitted LinearSCM or AdditiveNoiseSCM
        Over exactly the model's input features.
    x : array of shape (d,), Series or one-row DataFrame
        The factual instance (a Series/DataFrame is matched by name).
    target : class label, optional
        The desired class; default: the class the model does not predict at ``x``.
    lam : float, default 1.0
        Weight of the noise distance (the paper reports 1 and 1.2). 0 gives
        Wachter's counterfactual, ``numpy.inf`` deep backtracking.
    immutable : sequence of str or int
        Features held at their factual values.
    scales : array of shape (d,), optional
        ``s_i`` of ``d_X``; default the features' standard deviations on the SCM's
        fit data (``scm.feature_scale_``).
    noise_scales : {"feature", "noise"} or array, default "feature"
        ``s_i`` of ``d_U``: the same feature scales (paper eq. 25 as read by this
        library), the SCM's noise standard deviations, or your own.
    solver : {"auto", "exact", "penalty", "search"}
        ``"auto"`` takes the exact solver when it applies, else the search;
        ``"penalty"`` is the paper's gradient penalty method (see the module docstring).
    tau : float, default 1e-6
        Decision margin of the exact solver (``w . x' + b >= tau``), avoiding ties.
    time_limit : float, default 10
        Seconds for the search and penalty solvers; on expiry the best counterfactual found so
        far is returned with ``status="time_limit"``.
    random_state : int, Generator or None
        Seeds the search solver.
    bounds : mapping of feature name to (low, high), optional
        Box constraints ``low <= x_cf[name] <= high`` the counterfactual must satisfy, e.g.
        ``{"age": (18, 75)}``; None leaves a side open. Honoured by every solver; when no
        counterfactual exists within them the result has ``status="infeasible"`` and
        ``valid=False`` (the factual ``x`` itself is not checked when it already has the target).

    Returns
    -------
    CounterfactualResult

    References
    ----------
    Fatemi, P., Sharifian, E., Yassaee, M. H. "A New Approach to Backtracking
    Counterfactual Explanations: A Unified Causal Framework for Efficient Model
    Interpretability". ICML 2025, PMLR 267:16273-16285.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=1000)
    >>> b = a + 0.5 * rng.normal(size=1000)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> x = pd.Series({"a": -1.0, "b": -1.0})
    >>> cf = brace(clf, scm, x, target=1)
    >>> cf.valid, cf.status, cf.solver
    (True, 'optimal', 'exact')
    >>> bool(np.allclose(scm.generate(cf.u_cf), cf.x_cf))
    True
    >>> w = wachter(clf, scm, x, target=1)
    >>> bool(w.d_x <= cf.d_x and cf.d_u <= w.d_u)
    True
    >>> boxed = brace(clf, scm, x, target=1, bounds={"a": (None, -0.5)})
    >>> boxed.status, bool(boxed.x_cf[0] <= -0.5)
    ('optimal', True)
    >>> brace(clf, scm, x, target=1, bounds={"a": (None, -1.0), "b": (None, -1.0)}).status
    'infeasible'
    """
    p = _setup(model, scm, x, target, lam, immutable, scales, noise_scales, tau, bounds)
    solver = check_choice(solver, "solver", _SOLVERS)
    limit = _check_time(time_limit)
    rng = check_random_state(random_state)
    method = _method_name(p.lam)
    if p.valid(p.x)[0]:
        return _result(p, p.x.copy(), method, "none", "already_target", 0)
    if p.immutable_outside():
        return _infeasible(p, method, "none", 0)
    lp = _linear_problem(p) if solver in ("auto", "exact") else None
    if solver == "exact" and lp is None:
        raise ModelError(
            f"solver='exact' needs a LinearSCM and a linear classifier; got {type(p.scm).__name__} and "
            f"{type(model).__name__}. Use solver='search' (supported: {_SUPPORTED}).",
            argument="solver",
        )
    if lp is not None:
        L, mask = lp
        if not np.any(L.a != 0):
            return _result(
                p,
                p.x.copy(),
                method,
                "exact",
                "not_found",
                0,
                notes=("the model does not depend on any mutable feature",),
            )
        x_opt, status, calls = _exact_cf(p, L, mask, p.lam)
        if x_opt is None:
            return _infeasible(p, method, "exact", calls)
        return _result(p, x_opt, method, "exact", status, calls)
    if solver == "penalty":
        f = p.model.differentiable() if isinstance(p.scm, LinearSCM) else None
        if f is None:
            raise ModelError(
                "solver='penalty' needs a LinearSCM and a differentiable model (a linear classifier or a "
                f"binary MLPClassifier, optionally after StandardScaler); got {type(p.scm).__name__} and "
                f"{type(model).__name__}. Use solver='search'.",
                argument="solver",
            )
        x_cf, status, calls = _penalty_cf(p, f, time.perf_counter() + limit)
        return _result(p, x_cf, method, "penalty", status, calls)
    x_cf, status, calls = _search_cf(p, p.lam, rng, time.perf_counter() + limit)
    notes = (
        ("no valid counterfactual found within the bounds",) if p.bounded and status == "not_found" else ()
    )
    return _result(p, x_cf, method, "search", status, calls, notes=notes)


def wachter(
    model: Any, scm: AdditiveNoiseSCM, x: Any, target: Any = None, **kwargs: Any
) -> CounterfactualResult:
    """Wachter et al.'s counterfactual: :func:`brace` with ``lam = 0`` (minimum ``d_X``, no causal term).

    Keyword arguments (``immutable``, ``bounds``, ``solver``, ...) go to :func:`brace`.

    References
    ----------
    Wachter, S., Mittelstadt, B., Russell, C. "Counterfactual explanations without opening
    the black box". Harvard JOLT 2018. As a special case of BRACE: Fatemi, P., Sharifian, E.,
    Yassaee, M. H., ICML 2025.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500); b = a + 0.5 * rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> w = wachter(clf, scm, [-1.0, -1.0], target=1)
    >>> w.method, w.lam, int(np.count_nonzero(w.x_cf != w.x))
    ('wachter', 0.0, 1)
    """
    if "lam" in kwargs:
        raise ParameterError("wachter fixes lam = 0; call brace(..., lam=...) instead.", argument="lam")
    return brace(model, scm, x, target, lam=0.0, **kwargs)


def deep_backtracking(
    model: Any, scm: AdditiveNoiseSCM, x: Any, target: Any = None, **kwargs: Any
) -> CounterfactualResult:
    """Deep backtracking (Kladny et al., 2024): :func:`brace` with ``lam = inf`` (minimum ``d_U``).

    Keyword arguments (``immutable``, ``bounds``, ``solver``, ...) go to :func:`brace`.

    References
    ----------
    Kladny, K.-R., von Kügelgen, J., Schölkopf, B., Muehlebach, M. "Deep backtracking
    counterfactuals for causally compliant explanations". TMLR 2024. As a limit of BRACE:
    Fatemi, P., Sharifian, E., Yassaee, M. H., ICML 2025.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500); b = a + 0.5 * rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> db = deep_backtracking(clf, scm, [-1.0, -1.0], target=1)
    >>> db.method, db.valid, bool(db.d_u <= brace(clf, scm, [-1.0, -1.0], target=1).d_u)
    ('deep_backtracking', True, True)
    """
    if "lam" in kwargs:
        raise ParameterError(
            "deep_backtracking fixes lam = inf; call brace(..., lam=...) instead.", argument="lam"
        )
    return brace(model, scm, x, target, lam=math.inf, **kwargs)


def brace_path(
    model: Any, scm: AdditiveNoiseSCM, x: Any, lams: Iterable[float], target: Any = None, **kwargs: Any
) -> list[CounterfactualResult]:
    """BRACE over a grid of ``lam`` values (the feature/noise distance trade-off curve).

    Keyword arguments (``immutable``, ``bounds``, ``solver``, ...) go to :func:`brace`.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500); b = a + 0.5 * rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> path = brace_path(clf, scm, [-1.0, -1.0], [0, 1, 10, np.inf], target=1)
    >>> d_u = [r.d_u for r in path]
    >>> bool(all(np.diff(d_u) <= 1e-9))
    True
    """
    lam_list = list(lams) if isinstance(lams, Iterable) and not isinstance(lams, str) else []
    if not lam_list:
        raise ParameterError(
            f"lams must hold at least one value of lam (e.g. [0, 1, np.inf]), got {lams!r}.", argument="lams"
        )
    return [brace(model, scm, x, target, lam=lam, **kwargs) for lam in lam_list]


def causal_recourse(
    model: Any,
    scm: AdditiveNoiseSCM,
    x: Any,
    target: Any = None,
    *,
    immutable: Sequence[Any] = (),
    scales: Any = None,
    noise_scales: Any = "feature",
    max_subset_size: int | None = None,
    solver: str = "auto",
    tau: float = 1e-6,
    time_limit: float = 10.0,
    random_state: Any = 0,
    bounds: Mapping[Any, tuple[float | None, float | None]] | None = None,
) -> CounterfactualResult:
    """Interventional causal recourse (Karimi et al., 2021) as BRACE's paper states it.

    For every non-empty subset ``A`` of the mutable features (up to
    ``max_subset_size``), intervene ``do(X_A = x_A + theta)``, recompute the
    descendants with the factual noise, and minimise ``d_X(x_cf, x)`` subject to
    validity and the immutable features unchanged; keep the best subset. The
    returned ``u_cf = F^{-1}(F_A(u))`` makes it a backtracking counterfactual
    (the paper's Theorem 5.1). Exact (one LP per subset) for a LinearSCM and a
    linear classifier; otherwise a search per subset sharing ``time_limit``.
    ``bounds`` (as in :func:`brace`) constrain the counterfactual ``x + T theta`` (LP rows
    in the exact case, rejection in the search); ``status="infeasible"`` when every
    subset's LP is infeasible.

    Returns
    -------
    CounterfactualResult
        With ``method="causal_recourse"``, ``intervened`` the chosen set and
        ``n_solver_calls`` the number of subsets tried.

    References
    ----------
    Karimi, A.-H., Schölkopf, B., Valera, I. "Algorithmic recourse: from
    counterfactual explanations to interventions". FAccT 2021.
    Fatemi, P., Sharifian, E., Yassaee, M. H. ICML 2025 (Section 5).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500); b = a + 0.5 * rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> r = causal_recourse(clf, scm, [-1.0, -1.0], target=1)
    >>> r.valid, r.intervened, r.n_solver_calls
    (True, ('a', 'b'), 3)
    """
    p = _setup(model, scm, x, target, 0.0, immutable, scales, noise_scales, tau, bounds)
    solver = check_choice(solver, "solver", _SOLVERS)
    limit = _check_time(time_limit)
    rng = check_random_state(random_state)
    if max_subset_size is not None and (
        isinstance(max_subset_size, bool)
        or not isinstance(max_subset_size, numbers.Integral)
        or max_subset_size < 1
    ):
        raise ParameterError(
            f"max_subset_size must be None or an integer >= 1, got {max_subset_size!r}.",
            argument="max_subset_size",
        )
    if p.valid(p.x)[0]:
        return _result(p, p.x.copy(), "causal_recourse", "none", "already_target", 0)
    if p.immutable_outside():
        return _infeasible(p, "causal_recourse", "none", 0)
    names = [str(n) for n in p.scm.feature_names_in_]
    mut = [int(j) for j in np.flatnonzero(p.mutable)]
    top = len(mut) if max_subset_size is None else min(int(max_subset_size), len(mut))
    subsets = [s for k in range(1, top + 1) for s in itertools.combinations(mut, k)]
    lin = p.model.linear() if isinstance(p.scm, LinearSCM) and solver in ("auto", "exact") else None
    if solver == "exact" and lin is None:
        raise ModelError(
            f"solver='exact' needs a LinearSCM and a linear classifier; use solver='search' "
            f"(supported: {_SUPPORTED}).",
            argument="solver",
        )
    best: tuple[float, np.ndarray, tuple[int, ...]] | None = None
    n_infeasible = 0
    deadline = time.perf_counter() + limit
    timed_out = False
    d = len(p.x)
    if lin is not None:
        assert isinstance(p.scm, LinearSCM)
        w, b = lin
        sign = 1.0 if p.target_index == 1 else -1.0
        r = p.tau - sign * (float(w @ p.x) + b)
        imm = np.flatnonzero(~p.mutable)
        for A in subsets:
            Bt = p.scm.B_.copy()
            Bt[list(A), :] = 0.0
            T = np.linalg.inv(np.eye(d) - Bt)[:, list(A)]  # dx = T theta
            k = len(A)
            Tm = T[p.mutable] / p.sx[p.mutable][:, None]
            nm = Tm.shape[0]
            c = np.r_[np.zeros(k), np.ones(nm)]
            A_ub = np.block(
                [[Tm, -np.eye(nm)], [-Tm, -np.eye(nm)], [-(sign * w @ T)[None, :], np.zeros((1, nm))]]
            )
            b_ub = np.r_[np.zeros(2 * nm), -r]
            fin_hi, fin_lo = np.isfinite(p.hi), np.isfinite(p.lo)
            if fin_hi.any() or fin_lo.any():  # lo <= x + T theta <= hi
                A_ub = np.vstack(
                    [
                        A_ub,
                        np.c_[T[fin_hi], np.zeros((int(fin_hi.sum()), nm))],
                        np.c_[-T[fin_lo], np.zeros((int(fin_lo.sum()), nm))],
                    ]
                )
                b_ub = np.r_[b_ub, (p.hi - p.x)[fin_hi], (p.x - p.lo)[fin_lo]]
            A_eq = np.c_[T[imm], np.zeros((len(imm), nm))] if len(imm) else None
            b_eq = np.zeros(len(imm)) if len(imm) else None
            res = linprog(
                c,
                A_ub=A_ub,
                b_ub=b_ub,
                A_eq=A_eq,
                b_eq=b_eq,
                bounds=[(None, None)] * (k + nm),
                method="highs",
            )
            if res.status != 0:
                n_infeasible += res.status == 2
                continue
            x_cf = p.x + T @ res.x[:k]
            cost = float(p.d_x(x_cf)[0])
            if best is None or cost < best[0] - 1e-12:
                best = (cost, x_cf, A)
        solver_used = "exact"
    else:
        for A in subsets:
            Ai = list(A)

            def gen(P: np.ndarray, Ai: list[int] = Ai) -> np.ndarray:
                U = np.repeat(p.u[None, :], len(P), axis=0)
                return p.scm.intervene(U, Ai, p.x[Ai] + P * p.sx[Ai])

            def score(P: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
                keep = np.all(
                    np.abs(X[:, ~p.mutable] - p.x[~p.mutable]) <= 1e-9 * (1 + np.abs(p.x[~p.mutable])), axis=1
                )
                return p.d_x(X), p.valid(X) & keep & p.inside(X)

            P, f, _, to = _search(gen, score, len(Ai), rng, deadline)
            timed_out |= to
            if P is not None and (best is None or f < best[0]):
                best = (f, gen(P[None, :])[0], A)
            if to:
                break
        solver_used = "search"
    status = "time_limit" if timed_out else ("optimal" if solver_used == "exact" else "approximate")
    if best is None:
        if solver_used == "exact" and p.bounded and n_infeasible == len(subsets):
            return _infeasible(p, "causal_recourse", solver_used, len(subsets))
        notes = ("no valid counterfactual found within the bounds",) if p.bounded else ()
        return _result(p, p.x.copy(), "causal_recourse", solver_used, "not_found", len(subsets), notes=notes)
    return _result(
        p,
        best[1],
        "causal_recourse",
        solver_used,
        status,
        len(subsets),
        intervened=tuple(names[j] for j in best[2]),
    )


def counterfactuals(
    model: Any, scm: AdditiveNoiseSCM, X: Any, *, method: str = "brace", target: Any = None, **kwargs: Any
) -> list[CounterfactualResult]:
    """One counterfactual per row of ``X`` (``method``: brace, wachter, deep_backtracking, causal_recourse).

    Keyword arguments go to the method (e.g. ``immutable``, ``bounds``, ``lam``); ``time_limit``
    applies per row.

    References
    ----------
    Fatemi, P., Sharifian, E., Yassaee, M. H. "A New Approach to Backtracking
    Counterfactual Explanations: A Unified Causal Framework for Efficient Model
    Interpretability". ICML 2025, PMLR 267:16273-16285.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500); b = a + 0.5 * rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> rejected = X[clf.predict(X) == 0].iloc[:3]
    >>> results = counterfactuals(clf, scm, rejected, lam=1.0)
    >>> [r.valid for r in results]
    [True, True, True]
    """
    funcs: dict[str, Callable[..., CounterfactualResult]] = {
        "brace": brace,
        "wachter": wachter,
        "deep_backtracking": deep_backtracking,
        "causal_recourse": causal_recourse,
    }
    method = check_choice(method, "method", sorted(funcs))
    scm = _check_scm(scm)
    if isinstance(X, pd.DataFrame):
        rows: list[Any] = [X.iloc[[i]] for i in range(len(X))]
    else:
        arr = check_array(X, "X", ndim=2)
        rows = list(arr)
    if not rows:
        raise DataError("X has no rows.", argument="X")
    return [funcs[method](model, scm, row, target, **kwargs) for row in rows]


def counterfactual_metrics(
    model: Any, scm: AdditiveNoiseSCM, results: Sequence[CounterfactualResult]
) -> pd.DataFrame:
    """Validity, proximity, plausibility and causal consistency of counterfactuals.

    Columns, one row per result:

    - ``validity``: the model predicts the target at ``x_cf`` (re-evaluated).
    - ``proximity``: ``d_X`` (scaled l1 distance over the mutable features; lower is closer).
    - ``noise_distance``: ``d_U`` (how much the world must differ).
    - ``plausibility``: root-mean-square z-score of the counterfactual's noise
      under the SCM, ``sqrt(mean(((u_cf - mean_U) / sd_U)^2))``; about 1 for a
      typical individual, larger is less plausible.
    - ``causal_residual``: with ``C`` the changed features (plus a recourse result's
      intervened set, which may hold some features fixed), the scaled l1 distance
      between ``x_cf`` and ``F_{do(X_C = x_cf_C)}(u)``, i.e. how far the unchanged
      features sit from what the SCM says they become once ``C`` changes;
      ``causally_consistent`` is ``causal_residual <= 1e-6``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500); b = a + 0.5 * rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + 3 * b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> res = [brace(clf, scm, [-1.0, -1.0], target=1, lam=lam) for lam in (0.0, 1.0)]
    >>> counterfactual_metrics(clf, scm, res)[["method", "validity", "causally_consistent"]]
        method  validity  causally_consistent
    0  wachter      True                 True
    1    brace      True                 True
    """
    scm = _check_scm(scm)
    results = list(results)
    if not results or not all(isinstance(r, CounterfactualResult) for r in results):
        raise ParameterError("results must be a non-empty list of CounterfactualResult.", argument="results")
    m = _check_model(model, scm)
    rows = []
    for r in results:
        if len(r.x) != scm.n_features_in_:
            raise DataError(
                "results were computed with a different SCM (feature count differs).", argument="results"
            )
        pred = m.predict(r.x_cf)[0]
        u_cf = scm.abduct(r.x_cf)
        z = (u_cf - scm.noise_mean_) / scm.noise_scale_
        moved = np.abs(r.x_cf - r.x) > 1e-9 * (1 + np.abs(r.x))
        moved |= np.isin(scm.feature_names_in_.astype(str), list(r.intervened))
        changed = np.flatnonzero(moved)
        x_do = scm.intervene(scm.abduct(r.x), list(changed), r.x_cf[changed])
        resid = float(np.abs((x_do - r.x_cf) / scm.feature_scale_).sum())
        rows.append(
            {
                "method": r.method,
                "lam": r.lam,
                "validity": bool(pred == r.target),
                "proximity": r.d_x,
                "noise_distance": r.d_u,
                "plausibility": float(np.sqrt(np.mean(z * z))),
                "causal_residual": resid,
                "causally_consistent": resid <= 1e-6,
                "status": r.status,
            }
        )
    return pd.DataFrame(rows)
