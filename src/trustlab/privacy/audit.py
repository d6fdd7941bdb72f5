"""Empirical privacy auditing: a statistical lower bound on a mechanism's epsilon.

Run a mechanism many times on two neighbouring inputs, pick a threshold event on
half of the runs, and on the other half bound ``P[M(D) in E]`` from below and
``P[M(D') in E]`` from above with Clopper-Pearson intervals. Then
``epsilon >= log((p_low - delta) / p_high)`` holds with confidence ``1 - alpha``
for any mechanism that is ``(epsilon, delta)``-DP. A lower bound above the
claimed epsilon is evidence of a bug (e.g. noise scaled for the wrong sensitivity).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import beta

from trustlab._param_validation import DELTA, Interval, Options, validate_params
from trustlab.errors import ParameterError

__all__ = ["EVENT_KINDS", "AuditResult", "audit_epsilon", "clopper_pearson"]


@dataclass(frozen=True)
class AuditResult:
    """The outcome of an empirical audit.

    Attributes
    ----------
    epsilon_lower : float
        Lower bound on epsilon holding with confidence ``1 - alpha`` (0 if none).
    event : str
        The event used, e.g. ``"output > 0.31"``.
    hits : tuple of int
        Event counts on the two inputs in the evaluation half.
    n_trials : int
        Runs per input in the evaluation half.
    alpha : float
        One minus the confidence level.
    delta : float
        The delta subtracted in the bound.

    See Also
    --------
    audit_epsilon : Runs the audit and builds this result.
    """

    epsilon_lower: float
    event: str
    hits: tuple[int, int]
    n_trials: int
    alpha: float
    delta: float


_ALPHA = Interval(numbers.Real, 0, 1, closed="neither")


@validate_params(
    {
        "k": [Interval(numbers.Integral, 0, None, closed="left")],
        "n": [Interval(numbers.Integral, 1, None, closed="left")],
        "alpha": [_ALPHA],
    }
)
def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Two one-sided ``1 - alpha/2`` Clopper-Pearson bounds on a binomial proportion.

    Exact (beta-quantile) bounds: ``P[p < lo] <= alpha / 2`` and ``P[p > hi] <= alpha / 2``,
    so ``[lo, hi]`` covers the true proportion with probability at least ``1 - alpha``.
    ``lo`` is 0 when ``k == 0`` and ``hi`` is 1 when ``k == n``.

    Parameters
    ----------
    k : int
        Number of successes, ``0 <= k <= n``.
    n : int
        Number of trials, ``>= 1``.
    alpha : float
        One minus the two-sided confidence level, in ``(0, 1)``.

    Returns
    -------
    tuple of float
        ``(lo, hi)``, the lower and upper bounds on the proportion.

    References
    ----------
    Clopper, Pearson. "The Use of Confidence or Fiducial Limits Illustrated in the
    Case of the Binomial". Biometrika 1934.

    Examples
    --------
    >>> lo, hi = clopper_pearson(0, 10, 0.05)
    >>> lo, round(hi, 4)
    (0.0, 0.3085)
    >>> lo, hi = clopper_pearson(50, 100, 0.05)
    >>> lo < 0.5 < hi
    True
    """
    if k > n:
        raise ParameterError(f"k must be <= n (successes among n trials), got k={k}, n={n}.", argument="k")
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def _bound(k0: int, k1: int, n: int, alpha: float, delta: float) -> float:
    p0_lo, _ = clopper_pearson(k0, n, alpha)
    _, p1_hi = clopper_pearson(k1, n, alpha)
    if p0_lo - delta <= 0 or p1_hi <= 0:
        return 0.0
    return max(0.0, math.log((p0_lo - delta) / p1_hi))


def _scalar(out: Any) -> float:
    arr = np.asarray(out, dtype=float).ravel()
    if arr.size != 1:
        raise ParameterError(
            "the mechanism must return one number; pass statistic= to reduce its output.",
            argument="statistic",
        )
    return float(arr[0])


EVENT_KINDS = ("threshold", "value", "low_bits")


def _candidate_events(select: np.ndarray, kinds: tuple[Any, ...], n_thresholds: int) -> list[tuple[str, Any]]:
    """Events chosen from the selection half: (description, outputs -> bool mask)."""
    pooled = np.concatenate(select)
    events: list[tuple[str, Any]] = []
    for kind in kinds:
        if callable(kind):
            events.append((getattr(kind, "__name__", "custom event"), kind))
        elif kind == "threshold":
            for t in np.unique(np.quantile(pooled, np.linspace(0.01, 0.99, n_thresholds))):
                events.append((f"output > {t:.6g}", lambda o, t=t: o > t))
                events.append((f"output < {t:.6g}", lambda o, t=t: o < t))
        elif kind == "value":
            values, counts = np.unique(pooled, return_counts=True)
            for v in values[np.argsort(-counts, kind="stable")][:n_thresholds]:
                events.append((f"output == {float(v)!r}", lambda o, v=v: o == v))
        else:  # low bits of the float64 representation
            bits = pooled.view(np.uint64)
            for b in (1, 2, 4, 8, 12):
                mask = np.uint64((1 << b) - 1)
                vals, counts = np.unique(bits & mask, return_counts=True)
                for c in vals[np.argsort(-counts, kind="stable")][:4]:
                    events.append(
                        (
                            f"lowest {b} bits of the output == {int(c)}",
                            lambda o, m=mask, c=c: (np.ascontiguousarray(o).view(np.uint64) & m) == c,
                        )
                    )
    return events


@validate_params(
    {
        "mechanism": [callable],
        "n_trials": [Interval(numbers.Integral, 20, None, closed="left")],
        "statistic": [None, callable],
        "alpha": [_ALPHA],
        "delta": [DELTA],
        "n_thresholds": [Interval(numbers.Integral, 1, None, closed="left")],
        "events": [Options(EVENT_KINDS), callable, tuple, list],
    }
)
def audit_epsilon(
    mechanism: Callable[[Any], Any],
    data: Any,
    neighbour: Any,
    *,
    n_trials: int = 2000,
    statistic: Callable[[Any], float] | None = None,
    alpha: float = 0.05,
    delta: float = 0.0,
    n_thresholds: int = 50,
    events: Any = ("threshold",),
) -> AuditResult:
    """Estimate a lower bound on epsilon from runs on two neighbouring inputs.

    Parameters
    ----------
    mechanism : callable
        ``mechanism(data) -> output``; randomness must be fresh on every call.
    data, neighbour : any
        Two neighbouring inputs (e.g. one record replaced).
    n_trials : int, default 2000
        Runs per input; half choose the event, half evaluate it.
    statistic : callable, optional
        Maps an output to a number (e.g. ``lambda r: r.value``); default: the output
        itself, which must be a number or a one-element array.
    alpha : float, default 0.05
        The bound holds with confidence ``1 - alpha``.
    delta : float, default 0
        The mechanism's claimed delta.
    n_thresholds : int, default 50
        Candidate thresholds (quantiles of the pooled selection outputs), and the
        number of most frequent values tried by ``"value"`` events.
    events : sequence, default ("threshold",)
        The families of events searched on the selection half: ``"threshold"``
        (output above or below a value), ``"value"`` (output exactly equal to one of
        the most frequent values: catches releases that return a data point or a
        clamp), ``"low_bits"`` (the lowest 1-12 bits of the float64 output equal a
        value: catches floating-point leaks, Mironov 2012), or callables mapping an
        array of statistics to a boolean mask (a mechanism-specific event).

    Returns
    -------
    AuditResult

    References
    ----------
    Jagielski, Ullman, Oprea. "Auditing Differentially Private Machine Learning:
    How Private is Private SGD?". NeurIPS 2020. Ding, Wang, Wang, Zhang, Kifer.
    "Detecting Violations of Differential Privacy". CCS 2018. Mironov. "On
    Significance of the Least Significant Bits for Differential Privacy". CCS 2012.

    Examples
    --------
    >>> from trustlab.privacy.samplers import add_laplace
    >>> res = audit_epsilon(lambda d: add_laplace(d, 1.0, k=-20)[()], 0.0, 1.0, n_trials=400, alpha=1e-4)
    >>> res.epsilon_lower <= 1.0
    True
    """
    n_trials, alpha, delta, n_thresholds = int(n_trials), float(alpha), float(delta), int(n_thresholds)
    kinds = (events,) if isinstance(events, str) or callable(events) else tuple(events)
    if not kinds or any(not callable(k) and k not in EVENT_KINDS for k in kinds):
        raise ParameterError(
            f"events must name families among {EVENT_KINDS} or be callables, got {events!r}.",
            argument="events",
        )
    stat = statistic or _scalar
    half = n_trials // 2
    runs = np.array([[stat(mechanism(d)) for _ in range(2 * half)] for d in (data, neighbour)], dtype=float)
    if not np.isfinite(runs).all():
        raise ParameterError("the statistic returned NaN or inf.", argument="statistic")
    select, evaluate = runs[:, :half], runs[:, half:]
    best: tuple[float, str, Any, int] = (-1.0, "", None, 0)
    for name, event in _candidate_events(select, kinds, n_thresholds):
        k = np.asarray(event(select), dtype=bool).sum(axis=1)
        for first in (0, 1):
            score = _bound(int(k[first]), int(k[1 - first]), half, alpha, delta)
            if score > best[0]:
                best = (score, name, event, first)
    _, name, event, first = best
    k = np.asarray(event(evaluate), dtype=bool).sum(axis=1)
    eps = _bound(int(k[first]), int(k[1 - first]), half, alpha, delta)
    return AuditResult(
        epsilon_lower=eps,
        event=name + (" (data vs neighbour)" if first == 0 else " (neighbour vs data)"),
        hits=(int(k[first]), int(k[1 - first])),
        n_trials=half,
        alpha=alpha,
        delta=delta,
    )
