"""Continued training: the convex bound's rate cut for extending a WSD run, measured on MLPs.

Schaipp et al. (ICML 2025, Section 5.1, Figures 8-10) extend a run tuned for ``T`` (constant rate
``gamma``, then a linear cooldown over the last 20 %) to ``k T``: restart from the checkpoint taken
before the cooldown, train on at ``rho * gamma`` and cool down over the last 20 % of ``k T``. The
bound picks ``rho`` so that the extended schedule's optimal base rate is the ``gamma`` already
used (the authors' ``scripts/horizon_transfer.py``, schedule ``wssd``): ``rho`` about 0.54 for
``2T`` and 0.38 for ``4T``. :func:`continuation_factor` computes it, :func:`continuation_schedule`
builds the schedule, and :func:`mlp_continuation_study` measures the best ``rho`` on small MLPs.
See ``docs/theory/lr-schedules.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.theory._lr_mlp import STUDY_CONSTRAINTS
from trustlab.theory.lr_schedules import schedule, schedule_bound

__all__ = ["MLPContinuationStudy", "continuation_factor", "continuation_schedule", "mlp_continuation_study"]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_STEPS = Interval(numbers.Integral, 5, None, closed="left")
_FACTOR = Interval(numbers.Real, 1, None, closed="neither")
_POS = Interval(numbers.Real, 0, None, closed="neither")
_FRAC = Interval(numbers.Real, 0, 1, closed="neither")


@validate_params({"steps": [_STEPS], "factor": [_FACTOR], "rho": [_POS], "cooldown": [_FRAC]})
def continuation_schedule(steps: int, factor: float, rho: float, *, cooldown: float = 0.2) -> np.ndarray:
    """Shape of a WSD run for ``T`` extended to ``k T`` with the rate cut by ``rho``.

    ``1`` for the first ``floor((1 - cooldown) T)`` steps (the short run before its cooldown),
    ``rho`` up to the last ``round(cooldown * k T)`` steps, then linear from ``rho`` to
    ``rho / (T_c + 1)`` as in :func:`~trustlab.theory.lr_schedules.schedule` ``"cooldown"``.

    Parameters
    ----------
    steps : int
        The short horizon ``T`` (>= 5).
    factor : float
        ``k > 1``; the extended horizon is ``round(k T)``.
    rho : float
        Rate multiplier after the short run's stable phase (> 0; 1 keeps the rate).
    cooldown : float, default 0.2
        Cooldown fraction of both runs (the paper's 0.2).

    Returns
    -------
    numpy.ndarray
        ``round(k T)`` multipliers.

    References
    ----------
    F. Schaipp, A. Hagele, A. Taylor, U. Simsekli and F. Bach, "The Surprising Agreement
    Between Convex Optimization Theory and Learning-Rate Scheduling for Large Model Training",
    ICML 2025, Section 5.1 (Figures 8 and 22).

    Examples
    --------
    >>> continuation_schedule(5, 2, 0.5, cooldown=0.2).round(2).tolist()
    [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.33, 0.17]
    """
    long = round(factor * steps)
    s = np.ones(long)
    s[int((1 - cooldown) * steps) :] = rho
    n_cool = max(round(cooldown * long), 1)
    t0 = long - n_cool
    tail = np.arange(t0 + 1, long + 1, dtype=float)
    s[t0:] = rho * (long + 1 - tail) / (n_cool + 1)
    return s


@validate_params({"steps": [_STEPS], "factor": [_FACTOR], "cooldown": [_FRAC]})
def continuation_factor(steps: int, factor: float, *, cooldown: float = 0.2) -> float:
    """The bound's rate cut ``rho`` for extending a WSD run from ``T`` to ``k T``.

    The ``rho`` for which the optimal base rate ``gamma*`` of :func:`continuation_schedule` (the
    bound of :func:`~trustlab.theory.lr_schedules.schedule_bound`) equals that of the short run's
    ``schedule("cooldown", T)``: the base rate already used stays optimal. Free of ``D`` and ``G``.

    Parameters
    ----------
    steps : int
        ``T`` (>= 5).
    factor : float
        ``k > 1``.
    cooldown : float, default 0.2

    Returns
    -------
    float
        ``rho`` in ``(0, 1)``.

    References
    ----------
    F. Schaipp et al., ICML 2025, Section 5.1 and the authors' ``scripts/horizon_transfer.py``
    (the ``wssd`` transfer: one decreasing factor after ``(1 - c) T_1`` steps).

    Examples
    --------
    >>> round(continuation_factor(4000, 2), 2), round(continuation_factor(4000, 4), 2)
    (0.53, 0.38)
    """
    target = math.log(schedule_bound(schedule("cooldown", steps, cooldown=cooldown)).optimal_gamma)

    def gap(rho: float) -> float:
        shape = continuation_schedule(steps, factor, rho, cooldown=cooldown)
        return math.log(schedule_bound(shape).optimal_gamma) - target

    lo, hi = 1e-3, 1.0  # gamma* falls as rho rises; at rho = 1 it is below the short run's
    if gap(hi) >= 0:
        return 1.0
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if gap(mid) > 0 else (lo, mid)
    return math.sqrt(lo * hi)


@dataclass(frozen=True)
class MLPContinuationStudy:
    """Final losses of MLPs extended from ``T`` to ``k T`` per rate cut ``rho`` and seed.

    Attributes
    ----------
    steps : int
        The short horizon ``T``.
    gamma : float
        The base rate of the short run, kept for its first ``(1 - cooldown) T`` steps.
    factors : numpy.ndarray
    rhos : numpy.ndarray
    loss : numpy.ndarray
        ``(len(factors), len(rhos), n_seeds)`` final excess population loss.
    optimal_rho : numpy.ndarray
        Per factor, the vertex of a least-squares parabola in ``log rho`` through the seed-mean
        loss at the grid minimum and up to two neighbours each side.
    at_edge : numpy.ndarray
        Per factor, ``True`` where the grid minimum is an end of the grid.
    rho_interval : numpy.ndarray
        ``(len(factors), 2)`` 2.5 and 97.5 % seed-bootstrap percentiles of ``optimal_rho``.
    predicted_rho : numpy.ndarray
        Per factor, :func:`continuation_factor`.
    keep_loss, predicted_loss : numpy.ndarray
        Per factor, the seed-mean loss at ``rho = 1`` (keep the rate: the paper's grey curves) and
        of a separate run at the predicted ``rho`` (the paper's green curves).
    gain_interval : numpy.ndarray
        ``(len(factors), 2)`` seed-bootstrap percentiles of ``keep_loss - predicted_loss``.

    See Also
    --------
    mlp_continuation_study : computes it.
    """

    steps: int
    gamma: float
    factors: np.ndarray
    rhos: np.ndarray
    loss: np.ndarray
    optimal_rho: np.ndarray
    at_edge: np.ndarray
    rho_interval: np.ndarray
    predicted_rho: np.ndarray
    keep_loss: np.ndarray
    predicted_loss: np.ndarray
    gain_interval: np.ndarray


@validate_params(
    {
        "gamma": [_POS],
        "steps": [_STEPS],
        "factors": ["array-like"],
        "rhos": ["array-like", None],
    }
    | STUDY_CONSTRAINTS
)
def mlp_continuation_study(
    gamma: float,
    steps: int = 500,
    *,
    factors: Any = (2, 4),
    rhos: Any = None,
    n_seeds: int = 16,
    width: int = 32,
    dimension: int = 16,
    teacher_width: int = 128,
    decay: float = 1.0,
    batch_size: int = 1,
    noise: float = 1.0,
    n_bootstrap: int = 1000,
    random_state: int = 0,
) -> MLPContinuationStudy:
    """Extend MLP runs from ``T`` to ``k T`` with a sweep of rate cuts; compare with the bound's.

    Trains the students of :func:`~trustlab.theory.lr_extension.mlp_extension_study` (same
    teachers, inits and data streams for the same ``random_state`` and settings) with
    :func:`continuation_schedule` ``(steps, k, rho)`` at base rate ``gamma`` for every ``rho`` and
    seed: because a seed's data and init are shared, every run equals the short run up to its
    cooldown and a continuation from that checkpoint after it. Requires ``torch``.

    Parameters
    ----------
    gamma : float
        Base rate of the short run (its tuned rate, e.g. ``mlp_extension_study``'s
        ``optimal_gamma[0]`` for ``"cooldown"``).
    steps : int, default 500
    factors : array-like, default (2, 4)
        Extension factors ``k > 1``.
    rhos : array-like, optional
        Rate cuts (> 0), a log grid; default ``geomspace(0.125, 1.414, 8)`` (step ``sqrt 2``).
    n_seeds, width, dimension, teacher_width, decay, batch_size, noise, random_state
        As in :func:`~trustlab.theory.lr_extension.mlp_extension_study`.
    n_bootstrap : int, default 1000

    Returns
    -------
    MLPContinuationStudy

    Raises
    ------
    DataError
        If a factor is not > 1 or a rate cut not > 0, or fewer than 3 cuts are given.

    References
    ----------
    F. Schaipp, A. Hagele, A. Taylor, U. Simsekli and F. Bach, "The Surprising Agreement
    Between Convex Optimization Theory and Learning-Rate Scheduling for Large Model Training",
    ICML 2025, Section 5.1 (Figure 10: cutting the rate after the short run's stable phase).

    Examples
    --------
    >>> st = mlp_continuation_study(0.01, 20, factors=(2,), rhos=[0.3, 0.6, 1.0], n_seeds=2,
    ...                             n_bootstrap=10)
    >>> st.loss.shape, st.predicted_rho.round(2).tolist()
    ((1, 3, 2), [0.54])
    """
    ks = check_numeric_array(factors, "factors", ndim=1)
    if np.any(ks <= 1):
        raise DataError(f"factors must all be > 1, got {ks.tolist()}.", argument="factors")
    r = np.geomspace(0.125, 2**0.5, 8) if rhos is None else check_numeric_array(rhos, "rhos", ndim=1)
    if np.any(r <= 0) or len(r) < 3:
        raise DataError(f"rhos must be at least 3 cuts, all > 0, got {r.tolist()}.", argument="rhos")
    r = np.sort(r)
    from trustlab.theory._lr_mlp import train_students
    from trustlab.theory.lr_extension import _loss_vertex

    predicted = np.array([continuation_factor(steps, float(k)) for k in ks])
    loss = np.empty((len(ks), len(r), int(n_seeds)))
    at_pred = np.empty((len(ks), int(n_seeds)))
    at_one = np.empty((len(ks), int(n_seeds)))
    for i, k in enumerate(ks.tolist()):
        cuts = [*r.tolist(), float(predicted[i]), 1.0]
        shapes = np.stack([continuation_schedule(steps, k, c) for c in cuts])
        out = train_students(
            shapes,
            np.array([float(gamma)]),
            n_seeds=int(n_seeds),
            width=int(width),
            dimension=int(dimension),
            batch_size=int(batch_size),
            noise=float(noise),
            teacher_width=int(teacher_width),
            decay=float(decay),
            random_state=int(random_state),
        )[:, 0]
        loss[i], at_pred[i], at_one[i] = out[:-2], out[-2], out[-1]
    with np.errstate(invalid="ignore"):
        mean = loss.mean(axis=-1)
    opt = np.array([_loss_vertex(r, m) for m in mean])
    rng = np.random.default_rng(int(random_state))
    boot = np.empty((int(n_bootstrap), len(ks)))
    gains = np.empty((int(n_bootstrap), len(ks)))
    for b in range(int(n_bootstrap)):
        idx = rng.integers(0, int(n_seeds), int(n_seeds))
        with np.errstate(invalid="ignore"):
            m = loss[..., idx].mean(axis=-1)
        boot[b] = [_loss_vertex(r, row)[0] for row in m]
        gains[b] = (at_one[:, idx] - at_pred[:, idx]).mean(axis=-1)
    return MLPContinuationStudy(
        steps=int(steps),
        gamma=float(gamma),
        factors=ks,
        rhos=r,
        loss=loss,
        optimal_rho=opt[:, 0],
        at_edge=opt[:, 1].astype(bool),
        rho_interval=np.percentile(boot, [2.5, 97.5], axis=0).T,
        predicted_rho=predicted,
        keep_loss=at_one.mean(axis=-1),
        predicted_loss=at_pred.mean(axis=-1),
        gain_interval=np.percentile(gains, [2.5, 97.5], axis=0).T,
    )
