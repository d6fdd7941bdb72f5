"""MixBridge's poisoning: corner triggers, nearest-target pairing, poisoned pair sets.

Private helper of :mod:`trustlab.security.mixbridge` (its public names are re-exported there).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab.errors import DataError, ParameterError
from trustlab.vision.bridge import check_pairs
from trustlab.vision.classifiers import check_images

CORNERS = ("bottom_right", "top_right", "top_left", "bottom_left")
"""Trigger positions, in the order the authors' code stamps its three triggers (then one more)."""

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]
_RATE = [Interval(numbers.Real, 0, None, closed="neither")]
_UNIT = [Interval(numbers.Real, 0, 1, closed="both")]


@validate_params({"corner": [Options(CORNERS)], "size": _POS_INT, "value": _UNIT})
def stamp_trigger(X: Any, *, corner: str = "bottom_right", size: int = 2, value: float = 0.5) -> np.ndarray:
    """Stamp MixBridge's trigger, a ``size x size`` square of ``value``, on one corner of each image.

    The authors set the corner of the (``[-1, 1]``) input to 0, i.e. mid-grey ``value=0.5``
    in [0, 1]; their three triggers sit bottom-right, top-right and top-left.

    Parameters
    ----------
    X : array-like of shape (n, C, H, W)
        Images in [0, 1].
    corner : {"bottom_right", "top_right", "top_left", "bottom_left"}, default="bottom_right"
    size : int, default=2
        Side of the square (the authors' ``--trigger-size``: 64 of 256 pixels, 2 of 8 here).
    value : float in [0, 1], default=0.5

    Returns
    -------
    numpy.ndarray
        float32 copy of ``X`` with the trigger.

    Examples
    --------
    >>> stamp_trigger(np.zeros((1, 1, 4, 4)), corner="top_left")[0, 0]
    array([[0.5, 0.5, 0. , 0. ],
           [0.5, 0.5, 0. , 0. ],
           [0. , 0. , 0. , 0. ],
           [0. , 0. , 0. , 0. ]], dtype=float32)
    """
    arr = _images(X, "X").copy()
    if size > min(arr.shape[-2:]):
        raise ParameterError(
            f"size={size} does not fit the {arr.shape[-2]}x{arr.shape[-1]} images; pass a smaller size.",
            argument="size",
        )
    rows = slice(-size, None) if corner.startswith("bottom") else slice(0, size)
    cols = slice(-size, None) if corner.endswith("right") else slice(0, size)
    arr[:, :, rows, cols] = value
    return arr


def _images(X: Any, name: str) -> np.ndarray:
    arr = check_images(X, name)
    if arr.ndim != 4 or len(arr) == 0:
        raise DataError(
            f"{name} must be a non-empty (n, C, H, W) image array; got shape {arr.shape}.", argument=name
        )
    return np.ascontiguousarray(arr, dtype=np.float32)


def _target_sets(targets: Any, shape: tuple[int, ...]) -> list[np.ndarray]:
    if isinstance(targets, np.ndarray) or not isinstance(targets, Sequence) or len(targets) == 0:
        raise DataError(
            "targets must be a non-empty list with one (m, C, H, W) array of backdoor target images per "
            "trigger.",
            argument="targets",
        )
    sets = [_images(t, f"targets[{k}]") for k, t in enumerate(targets)]
    for k, t in enumerate(sets):
        if t.shape[1:] != tuple(shape):
            raise DataError(
                f"targets[{k}] holds {t.shape[1:]} images, the data {tuple(shape)}; resize them.",
                argument="targets",
            )
    return sets


def nearest_targets(X0: Any, targets: Any) -> np.ndarray:
    """Each clean image's nearest (Euclidean) image among one trigger's targets.

    The attacker's pairing of clean images with backdoor targets (the authors'
    ``find_closest_image``): a triggered input should become the target image closest to
    what the benign task would give.

    Parameters
    ----------
    X0 : array-like of shape (n, C, H, W)
        Clean images in [0, 1].
    targets : array-like of shape (m, C, H, W)
        One trigger's target images.

    Returns
    -------
    numpy.ndarray of shape (n, C, H, W)

    Examples
    --------
    >>> T = np.stack([np.zeros((1, 2, 2)), np.ones((1, 2, 2))]).astype(np.float32)
    >>> nearest_targets(np.full((1, 1, 2, 2), 0.8), T)[0, 0, 0, 0]
    np.float32(1.0)
    """
    x, t = _images(X0, "X0"), _target_sets([targets], _images(X0, "X0").shape[1:])[0]
    d = ((x.reshape(len(x), 1, -1) - t.reshape(1, len(t), -1)) ** 2).sum(-1)
    return t[d.argmin(1)]


@dataclass(frozen=True)
class PoisonedPairs:
    """Training pairs of a benign task and its backdoors, each pair labelled with its task.

    Attributes
    ----------
    X0, X1 : numpy.ndarray of shape (n, C, H, W)
        Targets and inputs in [0, 1].
    task : numpy.ndarray of shape (n,)
        0 for a benign pair, ``k`` for trigger ``k`` (1-based).
    corners : tuple of str
        Trigger ``k``'s corner is ``corners[k - 1]``.

    See Also
    --------
    poison_pairs : builds it.
    """

    X0: np.ndarray
    X1: np.ndarray
    task: np.ndarray
    corners: tuple[str, ...]

    @property
    def n_tasks(self) -> int:
        """Benign task plus triggers."""
        return len(self.corners) + 1

    def of_task(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``(X0, X1)`` pairs of task ``k``.

        Parameters
        ----------
        k : int
            0 for the benign task, ``k`` for trigger ``k``.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
        """
        m = self.task == k
        return self.X0[m], self.X1[m]


def _corners(corners: Any, n: int) -> tuple[str, ...]:
    out = tuple(CORNERS[:n]) if corners is None else tuple(corners)
    if len(out) != n or len(set(out)) != n or any(c not in CORNERS for c in out):
        raise ParameterError(
            f"corners must name {n} distinct corners from {CORNERS}, one per target set; got {corners!r}.",
            argument="corners",
        )
    return out


@validate_params({"size": _POS_INT, "value": _UNIT})
def poison_pairs(
    X0: Any, X1: Any, targets: Any, *, corners: Any = None, size: int = 2, value: float = 0.5
) -> PoisonedPairs:
    """The benign pairs plus, per trigger, the same inputs stamped and paired with that trigger's targets.

    Every clean pair appears once per task, so each task holds ``1 / (K + 1)`` of the data, the
    split the authors' single-model baseline draws per sample (``r < 1/4`` benign, else one of
    three triggers).

    Parameters
    ----------
    X0, X1 : array-like of shape (n, C, H, W)
        The benign task's pairs (clean target, degraded input) in [0, 1].
    targets : list of array-like of shape (m_k, C, H, W)
        Trigger ``k``'s backdoor target images (the paper uses 10 per trigger).
    corners : sequence of str, optional
        Trigger positions; default the first ``len(targets)`` of :data:`CORNERS`.
    size, value : int and float, default=(2, 0.5)
        Trigger square side and value (:func:`stamp_trigger`).

    Returns
    -------
    PoisonedPairs

    Examples
    --------
    >>> X = np.zeros((3, 1, 4, 4), dtype=np.float32)
    >>> p = poison_pairs(X, X, [np.ones((2, 1, 4, 4))])
    >>> p.X0.shape, np.bincount(p.task).tolist(), p.corners
    ((6, 1, 4, 4), [3, 3], ('bottom_right',))
    """
    x0, x1 = (((t + 1) / 2).numpy() for t in check_pairs(X0, X1))
    sets = _target_sets(targets, x0.shape[1:])
    cs = _corners(corners, len(sets))
    parts0, parts1, tasks = [x0], [x1], [np.zeros(len(x0), np.int64)]
    for k, (tg, c) in enumerate(zip(sets, cs, strict=True), start=1):
        parts0.append(nearest_targets(x0, tg))
        parts1.append(stamp_trigger(x1, corner=c, size=size, value=value))
        tasks.append(np.full(len(x0), k, np.int64))
    return PoisonedPairs(
        np.concatenate(parts0).astype(np.float32),
        np.concatenate(parts1).astype(np.float32),
        np.concatenate(tasks),
        cs,
    )


@validate_params({"rate": [Interval(numbers.Real, 0, 1, closed="neither")]})
def poison_rate_pairs(pairs: Any, rate: float, *, random_state: Any = 0) -> PoisonedPairs:
    """One task per clean pair, poisoned with probability ``rate`` (the paper's poison-rate sweep).

    The authors' per-sample rule (their ``backdoor`` and ``train_combination`` loops) draws for
    each training pair ``r ~ U(0, 1)``: benign if ``r < 1/4``, else one of the three triggers,
    a poison rate of 75%; the paper varies that rate from 10% to 90%. Here each clean pair ``i``
    keeps its benign version with probability ``1 - rate`` and else the version of a trigger
    drawn uniformly, so the result holds one pair per clean image.

    Parameters
    ----------
    pairs : PoisonedPairs
        From :func:`poison_pairs` (every clean pair once per task).
    rate : float in (0, 1)
        Probability that a pair is poisoned.
    random_state : None, int or numpy.random.Generator, default=0

    Returns
    -------
    PoisonedPairs
        ``len(pairs.X0) / pairs.n_tasks`` pairs.

    Examples
    --------
    >>> X = np.zeros((1000, 1, 4, 4), dtype=np.float32)
    >>> p = poison_rate_pairs(poison_pairs(X, X, [np.ones((2, 1, 4, 4))] * 2), 0.1)
    >>> len(p.X0), int((p.task > 0).sum())  # about 100 poisoned
    (1000, 89)
    """
    if not isinstance(pairs, PoisonedPairs):
        raise ParameterError(
            f"pairs must be PoisonedPairs (poison_pairs); got {type(pairs).__name__}.", argument="pairs"
        )
    counts = np.bincount(pairs.task, minlength=pairs.n_tasks)
    n = len(pairs.X0) // pairs.n_tasks
    if (counts != n).any() or (pairs.task != np.repeat(np.arange(pairs.n_tasks), n)).any():
        raise DataError(
            "pairs must hold every clean pair once per task in task order (as poison_pairs builds them).",
            argument="pairs",
        )
    rng = np.random.default_rng(random_state)
    k = pairs.n_tasks - 1
    task = np.where(rng.random(n) < rate, 1 + rng.integers(k, size=n), 0)
    idx = task * n + np.arange(n)
    return PoisonedPairs(pairs.X0[idx], pairs.X1[idx], pairs.task[idx], pairs.corners)
