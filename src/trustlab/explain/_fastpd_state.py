"""FastPD's background as a mergeable state: counts of rows by leaf code, and a hash sample.

FastPD's estimate reads the background only through, per leaf ``l`` of every tree,
the number of background rows whose *code* on the leaf is ``c`` (bit ``j`` of ``c``:
the row meets the path's constraint on the leaf's ``j``-th distinct feature); the
shares ``p_l(K)`` are a superset-sum of those counts divided by the row count
(:meth:`~trustlab.explain._fastpd_leaves.LeafTables.fit_counts`). The counts are a sum
over rows, so the counts of partitions add up to those of the whole table, exactly.

Besides the counts the state keeps a small sample of rows, the same whatever the
partitioning: the ``n_sample`` rows with the smallest hash of their values (ties broken
by the values), and up to :data:`N_MISSING` rows with a missing value chosen the same
way. FastPD uses them where ``fit`` uses individual background rows: the default grid of
:meth:`~trustlab.explain.FastPD.pd_curve` and the probe that measures the model's offset
and checks its routing of missing values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab.errors import DataError
from trustlab.explain._fastpd_inputs import background_codes, finite_input
from trustlab.explain._fastpd_leaves import LeafTables

__all__ = [
    "N_MISSING",
    "FastPDBackgroundState",
    "check_state",
    "empty_state",
    "merge_states",
    "partial_state",
]

N_MISSING = 64  # rows with a missing value kept to probe the model's missing-value routing


@dataclass(frozen=True, eq=False)
class FastPDBackgroundState:
    """The background statistics FastPD reads, mergeable over partitions of the rows.

    Built by :class:`trustlab.compute.trees.FastPDBackground` (per partition, then
    merged) and read by :meth:`trustlab.explain.FastPD.fit_background_state`.

    Attributes
    ----------
    n_rows : int
        Background rows counted.
    counts : tuple of numpy.ndarray of int64
        One ``(n_leaves_k, 2**k)`` array per group of leaves with ``k`` distinct path
        features: rows counted by their code on each leaf (a sum over rows).
    layout : tuple of (int, int)
        ``(k, n_leaves_k)`` of each group, in the order of ``counts``.
    fingerprint : str
        Digest of the model's leaves and cut points; FastPD refuses a state computed
        for another model.
    feature_names : tuple of str or None
        Column names of the rows given (None for arrays).
    sample, sample_hash : numpy.ndarray
        The ``n_sample`` rows (as the trees read them: string categories as codes) with
        the smallest row hash, sorted by hash, and their hashes.
    missing, missing_hash : numpy.ndarray
        Up to :data:`N_MISSING` rows with a missing value, chosen the same way.
    sample_frame, missing_frame : pandas.DataFrame or None
        The same rows as given, when the model was fitted on string categories.
    n_missing : int
        Rows with a missing value.
    n_sample : int
        The sample's size limit.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from trustlab.compute.trees import FastPDBackground
    >>> X = np.random.default_rng(0).normal(size=(100, 2))
    >>> model = GradientBoostingRegressor(n_estimators=5, max_depth=2).fit(X, X[:, 0])
    >>> stat = FastPDBackground(model)
    >>> state = stat.merge(stat.partial(X[:60]), stat.partial(X[60:]))
    >>> state.n_rows, state.sample.shape
    (100, (100, 2))
    """

    n_rows: int
    counts: tuple[np.ndarray, ...]
    layout: tuple[tuple[int, int], ...]
    fingerprint: str
    feature_names: tuple[str, ...] | None
    sample: np.ndarray
    sample_hash: np.ndarray
    missing: np.ndarray
    missing_hash: np.ndarray
    sample_frame: pd.DataFrame | None
    missing_frame: pd.DataFrame | None
    n_missing: int
    n_sample: int

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays (what a partial state costs to keep and to send)."""
        arrays = [*self.counts, self.sample, self.sample_hash, self.missing, self.missing_hash]
        return int(sum(a.nbytes for a in arrays))


def _row_hash(Xb: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's values (as the trees read them): the same in any partition."""
    if not len(Xb):
        return np.zeros(0, dtype=np.uint64)
    frame = pd.DataFrame(np.where(Xb == 0, 0.0, Xb))  # -0.0 and 0.0 are one value
    return pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype=np.uint64)


def _smallest(h: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` rows with the smallest hash (ties by the values), in that order."""
    if len(h) > k:  # only rows whose hash is at most the k-th smallest can be kept
        cand = np.nonzero(h <= np.partition(h, k - 1)[k - 1])[0]
    else:
        cand = np.arange(len(h))
    keys = [rows[cand, j] for j in range(rows.shape[1] - 1, -1, -1)]
    order = np.lexsort((*keys, h[cand])) if len(cand) else np.zeros(0, dtype=np.int64)
    return cand[order[:k]]


def _take(frame: pd.DataFrame | None, idx: np.ndarray) -> pd.DataFrame | None:
    return None if frame is None else frame.iloc[idx].reset_index(drop=True)


def empty_state(leaves: LeafTables, names: tuple[str, ...] | None, n_sample: int) -> FastPDBackgroundState:
    """The state of no rows (an empty partition)."""
    d = leaves.ens.n_features
    frame = None
    if leaves.ens.categories:
        frame = pd.DataFrame({c: pd.Series([], dtype=object) for c in (names or range(d))})
    return FastPDBackgroundState(
        n_rows=0,
        counts=tuple(np.zeros((L, 1 << k), dtype=np.int64) for k, L in leaves.layout()),
        layout=leaves.layout(),
        fingerprint=leaves.fingerprint(),
        feature_names=names,
        sample=np.zeros((0, d)),
        sample_hash=np.zeros(0, dtype=np.uint64),
        missing=np.zeros((0, d)),
        missing_hash=np.zeros(0, dtype=np.uint64),
        sample_frame=frame,
        missing_frame=frame,
        n_missing=0,
        n_sample=n_sample,
    )


def partial_state(
    leaves: LeafTables, X: Any, *, n_sample: int, model: str, name: str = "data"
) -> FastPDBackgroundState:
    """The state of the rows ``X`` (validated as :meth:`FastPD.fit` validates its background)."""
    if hasattr(X, "shape") and len(getattr(X, "shape", ())) == 2 and X.shape[0] == 0:
        empty_names = tuple(map(str, X.columns)) if isinstance(X, pd.DataFrame) else None
        if X.shape[1] != leaves.ens.n_features:
            raise DataError(
                f"{name} has {X.shape[1]} columns; the model has {leaves.ens.n_features} features.",
                argument=name,
            )
        return empty_state(leaves, empty_names, n_sample)
    Xb, frame, names = background_codes(X, leaves.ens, name)
    Xc = finite_input(Xb, leaves.ens, name, nan_ok=True, model=model)
    counts = leaves.background_counts(Xc)
    h = _row_hash(Xb)
    keep = _smallest(h, Xb, n_sample)
    has_nan = np.isnan(Xb).any(axis=1)
    nan_idx = np.nonzero(has_nan)[0]
    keep_nan = nan_idx[_smallest(h[nan_idx], Xb[nan_idx], N_MISSING)]
    return FastPDBackgroundState(
        n_rows=len(Xb),
        counts=tuple(counts),
        layout=leaves.layout(),
        fingerprint=leaves.fingerprint(),
        feature_names=None if names is None else tuple(names),
        sample=Xb[keep],
        sample_hash=h[keep],
        missing=Xb[keep_nan],
        missing_hash=h[keep_nan],
        sample_frame=_take(frame, keep),
        missing_frame=_take(frame, keep_nan),
        n_missing=int(has_nan.sum()),
        n_sample=n_sample,
    )


def _merge_rows(
    ha: np.ndarray, ra: np.ndarray, fa: pd.DataFrame | None, hb: np.ndarray, rb: np.ndarray, fb: Any, k: int
) -> tuple[np.ndarray, np.ndarray, pd.DataFrame | None]:
    h = np.concatenate([ha, hb])
    rows = np.concatenate([ra, rb])
    keep = _smallest(h, rows, k)
    frame = None
    if fa is not None and fb is not None:
        frame = pd.concat([fa, fb], ignore_index=True).iloc[keep].reset_index(drop=True)
    return h[keep], rows[keep], frame


def merge_states(a: FastPDBackgroundState, b: FastPDBackgroundState) -> FastPDBackgroundState:
    """The state of the union of two row sets (counts added; samples of the union)."""
    if a.fingerprint != b.fingerprint or a.n_sample != b.n_sample:
        raise DataError(
            "cannot merge FastPD background states of different models (or sample sizes); "
            "compute every partition with the same FastPDBackground.",
            argument="state",
        )
    if a.n_rows and b.n_rows and a.feature_names != b.feature_names:
        raise DataError(
            f"partitions have different columns ({list(a.feature_names or [])[:10]} vs "
            f"{list(b.feature_names or [])[:10]}); give every partition the model's columns.",
            argument="data",
        )
    sh, s, sf = _merge_rows(
        a.sample_hash, a.sample, a.sample_frame, b.sample_hash, b.sample, b.sample_frame, a.n_sample
    )
    mh, m, mf = _merge_rows(
        a.missing_hash, a.missing, a.missing_frame, b.missing_hash, b.missing, b.missing_frame, N_MISSING
    )
    return FastPDBackgroundState(
        n_rows=a.n_rows + b.n_rows,
        counts=tuple(x + y for x, y in zip(a.counts, b.counts, strict=True)),
        layout=a.layout,
        fingerprint=a.fingerprint,
        feature_names=a.feature_names if a.n_rows else b.feature_names,
        sample=s,
        sample_hash=sh,
        missing=m,
        missing_hash=mh,
        sample_frame=sf,
        missing_frame=mf,
        n_missing=a.n_missing + b.n_missing,
        n_sample=a.n_sample,
    )


def check_state(state: Any, leaves: LeafTables) -> FastPDBackgroundState:
    """``state`` if it is a consistent background state of this model; DataError/ParameterError otherwise."""
    from trustlab.errors import ParameterError

    if not isinstance(state, FastPDBackgroundState):
        raise ParameterError(
            f"state must be a FastPDBackgroundState (the result of "
            f"trustlab.compute.compute(FastPDBackground(model), data)), got {type(state).__name__}.",
            argument="state",
        )
    fingerprint, layout = state.fingerprint, state.layout
    layout_ok = isinstance(layout, tuple) and all(
        isinstance(e, tuple) and len(e) == 2 and all(isinstance(v, int) for v in e) for e in layout
    )
    if not isinstance(fingerprint, str) or not layout_ok:
        raise DataError(
            "state is inconsistent (no model fingerprint or leaf layout); build it with "
            "FastPDBackground's partial and merge only.",
            argument="state",
        )
    if fingerprint != leaves.fingerprint() or layout != leaves.layout():
        raise DataError(
            "state was computed for another model (its leaves differ from this model's); compute "
            "FastPDBackground with the model being explained.",
            argument="state",
        )
    d = leaves.ens.n_features
    ok = (
        isinstance(state.n_rows, int | np.integer)
        and state.n_rows > 0
        and isinstance(state.counts, tuple)
        and len(state.counts) == len(state.layout)
        and all(
            isinstance(c, np.ndarray)
            and c.dtype == np.int64
            and c.shape == (L, 1 << k)
            and bool((c >= 0).all())
            and bool((c.sum(axis=1) == state.n_rows).all())
            for c, (k, L) in zip(state.counts, state.layout, strict=False)
        )
        and all(
            isinstance(r, np.ndarray) and r.ndim == 2 and r.shape[1] == d and r.dtype.kind == "f"
            for r in (state.sample, state.missing)
        )
        and len(state.sample) >= 1
        and isinstance(state.n_missing, int | np.integer)
        and 0 <= state.n_missing <= state.n_rows
        and (state.n_missing == 0) == (len(state.missing) == 0)
    )
    if not ok:
        raise DataError(
            "state is inconsistent (counts of the wrong shape or total, no sample rows, or no "
            "background rows); build it with FastPDBackground's partial and merge only.",
            argument="state",
        )
    for rows in (state.sample, state.missing):
        if np.isinf(rows).any():
            raise DataError("state holds infinite sample values; rebuild it.", argument="state")
    if leaves.ens.categories:
        for rows, frame in ((state.sample, state.sample_frame), (state.missing, state.missing_frame)):
            if not isinstance(frame, pd.DataFrame) or len(frame) != len(rows) or frame.shape[1] != d:
                raise DataError(
                    "state lacks the sample rows' values (the model takes string categories).",
                    argument="state",
                )
    return state
