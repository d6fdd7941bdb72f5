"""JointExp: the exponential mechanism over ordered tuples of grid points (private module).

The forward pass runs in log space with blocked exponential filters (no FFT, no
floor, nothing subtracted); the backward pass draws each level with exact
Gumbel-max (:func:`~trustlab.privacy.samplers.exponential_select`) and the point
inside the chosen interval with exact uniform integers
(:func:`~trustlab.privacy.samplers.uniform_int`). See
:func:`trustlab.privacy.quantiles.dp_quantiles` for the guarantee.

References
----------
Gillenwater, Joseph, Kulesza. "Differentially Private Quantiles". ICML 2021.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab.privacy._grid import DEFAULT_RESOLUTION, FineEdges, GridCounts, QuantileGrid, default_jitter
from trustlab.privacy._inputs import check_neighbouring
from trustlab.privacy.samplers import exponential_select, uniform_int

__all__ = ["joint_exp_ranks", "jointexp_sensitivity", "jointexp_values", "pick", "transition"]

# Ranks whose tuples weigh less than exp(-MARGIN_NATS - epsilon) relative to the total
# are left out of the computation (see joint_exp_ranks); exp(-1400) is far below the
# smallest positive float64 (about exp(-744.4)).
MARGIN_NATS = 1400.0
# Blocked log-space filters: at most this many nats of kernel decay inside one block.
_BLOCK_NATS = 32.0


def jointexp_sensitivity(levels: Any, neighbouring: str = "replace") -> float:
    """Sensitivity of JointExp's utility ``-sum_j |gap_j - (q_j - q_{j-1}) n|``.

    Replacing one record moves it from one gap to another: sensitivity 2. Adding a
    record adds 1 to one gap count and ``(q_j - q_{j-1})`` to every target, at most
    ``2 (1 - min_j (q_j - q_{j-1}))`` with ``q_0 = 0`` and ``q_{m+1} = 1``.

    Parameters
    ----------
    levels : array-like of float
        The increasing quantile levels ``q_1 < ... < q_m`` in (0, 1).
    neighbouring : {"replace", "add_remove"}, default="replace"
        The neighbouring relation.

    Returns
    -------
    float
        The utility's sensitivity.

    Examples
    --------
    >>> from trustlab.privacy.quantiles import jointexp_sensitivity
    >>> jointexp_sensitivity([0.5]), jointexp_sensitivity([0.25, 0.5], "add_remove")
    (2.0, 1.5)

    References
    ----------
    Gillenwater, Joseph, Kulesza. "Differentially Private Quantiles". ICML 2021.
    """
    check_neighbouring(neighbouring)
    if neighbouring == "replace":
        return 2.0
    gaps = np.diff(np.concatenate([[0.0], np.asarray(levels, dtype=float), [1.0]]))
    return float(2.0 * (1.0 - gaps.min()))


# --------------------------------------------------------------------------------------
# Exact-in-log-space exponential filters (no subtraction, no floor)


def _block_size(a: float, length: int) -> int:
    """Block length: kernel decay ``a * B <= 32`` nats and at most ``~sqrt(length)`` steps."""
    cap = max(256, math.isqrt(max(length, 1)) + 1)
    by_decay = int(_BLOCK_NATS / a) if a > 0 and _BLOCK_NATS / a < cap else cap
    return max(1, min(by_decay, cap, max(length, 1)))


def _decay_filter(x: np.ndarray, a: float) -> np.ndarray:
    """``y[r, k] = log sum_{p <= k} exp(x[r, p] - a (k - p))`` along the rows of ``x``.

    Computed in blocks: inside a block ``logaddexp.accumulate`` runs on
    ``x[p] + a (p - block start)`` (at most 32 nats of offset, so the values keep
    their precision), and the carry from one block to the next is combined in a
    loop over blocks. Every term is added, none subtracted, so each output has a
    relative error of a few ulps of its own logarithm times the number of steps;
    ``-inf`` entries are exact zeros.
    """
    rows, length = x.shape
    if length == 0:
        return x.copy()
    b = _block_size(a, length)
    nb = -(-length // b)
    padded = np.full((rows, nb * b), -np.inf)
    padded[:, :length] = x
    blocks = padded.reshape(rows, nb, b)
    off = a * np.arange(b)
    acc = np.logaddexp.accumulate(blocks + off, axis=2)
    carries = np.empty((rows, nb))
    carry = np.full(rows, -np.inf)
    tail = a * (b - 1)
    for c in range(nb):
        carries[:, c] = carry
        carry = np.logaddexp(acc[:, c, -1], carry - a) - tail
    out = np.logaddexp(acc, (carries - a)[:, :, None]) - off
    return out.reshape(rows, nb * b)[:, :length]


def _decay_prefix(x: np.ndarray, a: float) -> np.ndarray:
    """``y[r, e] = log sum_{p <= e} exp(x[r, p] - a p)`` along the rows of ``x`` (blocked)."""
    rows, length = x.shape
    if length == 0:
        return x.copy()
    b = _block_size(a, length)
    nb = -(-length // b)
    padded = np.full((rows, nb * b), -np.inf)
    padded[:, :length] = x
    blocks = padded.reshape(rows, nb, b)
    acc = np.logaddexp.accumulate(blocks - a * np.arange(b), axis=2)
    carries = np.empty((rows, nb))
    carry = np.full(rows, -np.inf)
    for c in range(nb):
        carries[:, c] = carry
        carry = np.logaddexp(carry, acc[:, c, -1] - a * c * b)
    out = np.logaddexp(carries[:, :, None], acc - (a * b * np.arange(nb))[None, :, None])
    return out.reshape(rows, nb * b)[:, :length]


def transition(prev: np.ndarray, plo: int, lo: int, hi: int, a: float, target: float) -> np.ndarray:
    """``log sum_{p < r} exp(prev[p - plo] - a |r - p - target|)`` for ``r = lo .. hi``.

    ``p`` runs over ``plo .. plo + len(prev) - 1``. The kernel is split at ``d = r - p``:
    for ``d > target`` it is ``exp(-a (d - target))``, a causal exponential filter; for
    ``1 <= d <= floor(target)`` it is ``exp(-a (target - d))`` on a window of fixed
    width ``w = floor(target)``, computed van Herk / Gil-Werman style (blocks of ``w``:
    a window is a block suffix plus the next block's prefix), so nothing is subtracted.
    """
    width = prev.size
    phi = plo + width - 1
    r = np.arange(lo, hi + 1)
    out = np.full(r.size, -np.inf)
    peak = prev.max() if width else -np.inf
    if not np.isfinite(peak):
        return out
    p = prev - peak
    d_far = math.floor(target) + 1
    # d >= d_far: sum_{p <= k} exp(P - a (k - p)), k = r - d_far
    filt = _decay_filter(p[None, :], a)[0]
    k = r - d_far
    ok = k >= plo
    kk = np.minimum(k[ok], phi)
    out[ok] = filt[kk - plo] - a * (k[ok] - kk) - a * (d_far - target)
    w = d_far - 1
    if w >= 1:
        bs = min(w, width)
        nseg = -(-width // bs)
        flat = np.full(nseg * bs, -np.inf)
        flat[:width] = p
        segs = flat.reshape(nseg, bs)
        suf = _decay_filter(segs[:, ::-1], a)[:, ::-1].ravel()[:width]
        pre = _decay_prefix(segs, a).ravel()[:width]
        s = r - w  # window start: p in [s, s + w - 1]
        near = np.full(r.size, -np.inf)
        left = (s < plo) & (s + w - 1 >= plo)
        e = np.minimum(s[left] + w - 1, phi)
        near[left] = pre[e - plo] - a * (plo - s[left])
        mid = (s >= plo) & (s <= phi)
        sl = s[mid] - plo
        el = np.minimum(s[mid] + w - 1, phi) - plo
        seg_end = np.minimum((sl // bs + 1) * bs - 1, width - 1)
        val = suf[sl]
        two = el > seg_end
        nxt = (sl[two] // bs + 1) * bs
        val[two] = np.logaddexp(val[two], pre[el[two]] - a * (nxt - sl[two]))
        near[mid] = val
        out = np.logaddexp(out, near - a * (target - w))
    return out + peak


# --------------------------------------------------------------------------------------
# JointExp


def _logsumexp(x: np.ndarray) -> float:
    top = float(np.max(x)) if x.size else -math.inf
    if not math.isfinite(top):
        return top
    return top + math.log(float(np.sum(np.exp(x - top))))


def joint_exp_ranks(fine: FineEdges, levels: np.ndarray, epsilon: float, sensitivity: float) -> list[int]:
    """Sample interval indices ``r_1 <= ... <= r_m`` from JointExp's distribution.

    Interval ``r`` holds the fine positions with ``r`` records strictly below. A tuple
    has weight ``prod_runs len^k / k! * exp(-a * sum_{j=1}^{m+1} |r_j - r_{j-1} - t_j|)``
    with ``a = epsilon / (2 * sensitivity)``, ``r_0 = 0``, ``r_{m+1} = n`` and
    ``t_j = (q_j - q_{j-1}) n``: the exponential mechanism over ``m``-tuples of fine
    positions with the utility of their sorted version (``len^k / k!`` counts the
    tuples whose sorted version puts a run of ``k`` levels in one interval, up to the
    common factor ``m!``).

    Level ``j`` is restricted to ranks within ``half`` of ``q_j n``. Every tuple left
    out has utility below ``-(half + 1)``, so its weight is below
    ``exp(-a (half + 1))``; their total is at most ``N**m / m! * exp(-a (half + 1))``
    (``N`` fine positions). The window is widened until that bound is below
    ``exp(-1400 - epsilon)`` times the computed total: no output's probability moves
    by more than that in absolute terms (far below the smallest float64), and the
    mechanism is ``(epsilon, delta)``-DP with ``delta <= exp(-1400)``.
    """
    n = fine.n
    m = levels.size
    a = epsilon / (2.0 * sensitivity)
    margin = MARGIN_NATS + epsilon
    log_n_fine = math.log(fine.total)
    targets = np.diff(np.concatenate([[0.0], levels, [1.0]])) * n  # t_1 .. t_{m+1}
    centres = levels * n
    reach = (margin + m * log_n_fine) / a + m
    half = n + 1 if reach >= n + 1 else math.ceil(reach)
    while True:
        lo = [max(0, math.floor(c) - half) for c in centres]
        hi = [min(n, math.ceil(c) + half) for c in centres]
        # Runs that skip gaps of total target above half + 1 have utility below -(half + 1):
        # they are part of the dropped tuples bounded below (and only exist when truncating).
        fwd = _Forward(fine, lo, hi, targets, a, run_cap=None if half > n else half + 1)
        final = [
            (k, st, w - a * np.abs(n - np.arange(st, st + w.size) - targets[m]))
            for k, st, w in fwd.rows(m - 1)
        ]
        flat = np.concatenate([w for _, _, w in final])
        truncated = fwd.capped or any(v > 0 for v in lo) or any(v < n for v in hi)
        if truncated:
            dropped = m * log_n_fine - math.lgamma(m + 1) - a * (half + 1)
            if _logsumexp(flat) - dropped < margin:
                half = min(2 * half + 1, n + 1)
                continue
        break
    return _sample_backward(fwd, final, flat)


class _Forward:
    """JointExp's log forward weights on the windows ``lo[j] .. hi[j]`` (ranks) of each level.

    ``alpha1[j][r]`` is the log total weight of the levels ``1 .. j`` with level ``j`` in
    interval ``r`` and level ``j - 1`` strictly below it. A run of ``k`` levels
    ``s .. j`` (``s = j - k + 1``) in one interval ``r`` weighs
    ``alpha1[s][r] + (k - 1) log len(r) - log k! - a (t_{s+1} + ... + t_j)``
    (the ``1 / k!`` makes the sorted uniform points of a run an exponential mechanism
    over ordered outputs); these rows are formed when needed, so memory is
    ``O(m * width)``. With ``run_cap``, runs whose skipped gaps have targets summing
    above it are left out (their utility is below ``-run_cap``).
    """

    def __init__(
        self,
        fine: FineEdges,
        lo: list[int],
        hi: list[int],
        targets: np.ndarray,
        a: float,
        run_cap: float | None = None,
    ) -> None:
        self.lo, self.hi, self.targets, self.a = lo, hi, targets, a
        self.run_cap = math.inf if run_cap is None else run_cap
        self.capped = False
        m = len(lo)
        self.cum = np.concatenate([[0.0], np.cumsum(targets[1:m])])  # t_2 + ... + t_{j+1}
        self.loglen = [fine.log_lengths(lo[j], hi[j]) for j in range(m)]
        self.alpha1: list[np.ndarray] = []
        for j in range(m):
            if j == 0:
                self.alpha1.append(self.loglen[0] - a * np.abs(np.arange(lo[0], hi[0] + 1) - targets[0]))
                continue
            total = np.full(hi[j - 1] - lo[j - 1] + 1, -np.inf)
            for _, start, arr in self.rows(j - 1):
                seg = slice(start - lo[j - 1], start - lo[j - 1] + arr.size)
                total[seg] = np.logaddexp(total[seg], arr)
            conv = transition(total, lo[j - 1], lo[j], hi[j], a, float(targets[j]))
            self.alpha1.append(self.loglen[j] + conv)

    def rows(self, j: int) -> list[tuple[int, int, np.ndarray]]:
        """``(k, start, log weights)`` of runs of ``k`` levels ending at level ``j``."""
        lo, hi = self.lo, self.hi
        out = [(1, lo[j], self.alpha1[j])]
        for k in range(2, j + 2):
            s = j - k + 1
            start, stop = lo[j], hi[s]  # windows move up with the level: the intersection
            if start > stop:
                break
            if self.cum[j] - self.cum[s] > self.run_cap:  # utility below -run_cap: dropped
                self.capped = True
                break
            base = self.alpha1[s][start - lo[s] : stop - lo[s] + 1]
            ll = self.loglen[j][start - lo[j] : stop - lo[j] + 1]
            shift = math.lgamma(k + 1) + self.a * (self.cum[j] - self.cum[s])
            out.append((k, start, base + (k - 1) * ll - shift))
        return out


def pick(parts: list[tuple[int, int, np.ndarray]], flat: np.ndarray) -> tuple[int, int]:
    """Draw ``(run length, rank)`` with probability proportional to ``exp(flat)``."""
    i = exponential_select(flat)
    for k, start, w in parts:
        if i < w.size:
            return k, start + i
        i -= w.size
    raise AssertionError("index out of range")  # pragma: no cover


def _sample_backward(fwd: _Forward, final: list[tuple[int, int, np.ndarray]], flat: np.ndarray) -> list[int]:
    m = len(fwd.lo)
    ranks = [0] * m
    k, r = pick(final, flat)
    ranks[m - 1] = r
    for j in range(m - 1, 0, -1):
        if k > 1:  # level j - 1 is in the same interval (a run)
            ranks[j - 1] = r
            k -= 1
            continue
        parts = []
        for kk, start, arr in fwd.rows(j - 1):
            stop = min(start + arr.size, r)  # p < r
            if stop > start:
                p = np.arange(start, stop)
                parts.append((kk, start, arr[: stop - start] - fwd.a * np.abs(r - p - fwd.targets[j])))
        k, r = pick(parts, np.concatenate([w for _, _, w in parts]))
        ranks[j - 1] = r
    return ranks


def jointexp_values(
    z_sorted: Any,
    bounds: tuple[float, float],
    levels: np.ndarray,
    epsilon: float,
    neighbouring: str,
    *,
    resolution: int = DEFAULT_RESOLUTION,
    _jitter: int | None = None,
) -> np.ndarray:
    """JointExp on sorted ``z`` (values outside ``bounds`` are clipped); sorted grid values.

    ``z_sorted`` is either the sorted values or their grid indices in run-length form
    (a :class:`~trustlab.privacy._grid.GridCounts` on the same grid, e.g. merged from
    the partitions of a table): the mechanism reads nothing else, so both give the
    same output distribution. ``_jitter`` (tests only) sets the number of
    tie-breaking sub-positions per grid point.
    """
    grid = QuantileGrid(bounds, resolution)
    jitter = default_jitter(grid.resolution) if _jitter is None else int(_jitter)
    if isinstance(z_sorted, GridCounts):
        runs = z_sorted
    else:
        runs = GridCounts.from_sorted(np.clip(np.asarray(z_sorted, dtype=float), *bounds), grid)
    fine = FineEdges(runs, grid, jitter)
    sens = jointexp_sensitivity(levels, neighbouring)
    ranks = joint_exp_ranks(fine, np.asarray(levels, dtype=float), epsilon, sens)
    points = []
    for r in ranks:
        fine.ensure(r, r + 1)
        left, right = int(fine.edges[r]), int(fine.edges[r + 1])
        points.append(left + 1 + int(uniform_int(right - left, 1)[0]))
    cells = np.sort(np.asarray(points, dtype=np.int64)) // jitter
    return grid.values(cells)
