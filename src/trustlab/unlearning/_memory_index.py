"""Vector stores of the kNN memory: an exact NumPy index, FAISS flat and FAISS IVF.

Every store maps int64 *keys* (the memory's internal slots, never reused) to float32
vectors, searches the ``k`` nearest keys of each query and deletes keys for good: a
removed vector is erased from the store's arrays (FAISS ``remove_ids`` compacts the flat
storage or the inverted lists; the NumPy store compacts its array), so it cannot be
returned by any later search. Distances are ``1 - <q, v>`` for ``"cosine"`` (vectors
are L2-normalised by the caller) and the Euclidean distance for ``"euclidean"``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab.errors import MissingDependencyError

_QUERY_BLOCK = 1 << 24  # distance-matrix cells per block of the NumPy search


def import_faiss() -> Any:
    """Import faiss or raise MissingDependencyError naming the extra."""
    try:
        import faiss
    except ImportError:  # pragma: no cover - exercised by monkeypatching in the tests
        raise MissingDependencyError(
            "this kNN memory needs faiss (backend='faiss' or index='ivf'); install it with "
            "`pip install trustlab[unlearning]` (or `pip install faiss-cpu`), or use backend='numpy' "
            "with index='flat'.",
            argument="backend",
        ) from None
    return faiss


def faiss_available() -> bool:
    """Whether faiss imports."""
    try:
        import_faiss()
    except MissingDependencyError:
        return False
    return True


class NumpyFlatIndex:
    """Exact brute-force search over a compacted float32 array (capacity doubling)."""

    kind = "flat"
    backend = "numpy"

    def __init__(self, dim: int, metric: str) -> None:
        self.dim, self.metric = dim, metric
        self._vectors = np.empty((0, dim), dtype=np.float32)
        self._keys = np.empty(0, dtype=np.int64)
        self._n = 0

    @property
    def ntotal(self) -> int:
        return self._n

    def train(self, vectors: np.ndarray) -> None:
        return None

    def add(self, vectors: np.ndarray, keys: np.ndarray) -> None:
        need = self._n + len(keys)
        if need > self._vectors.shape[0]:
            cap = max(need, 2 * self._vectors.shape[0], 16)
            grown = np.zeros((cap, self.dim), dtype=np.float32)
            grown[: self._n] = self._vectors[: self._n]
            kg = np.full(cap, -1, dtype=np.int64)
            kg[: self._n] = self._keys[: self._n]
            self._vectors, self._keys = grown, kg
        self._vectors[self._n : need] = vectors
        self._keys[self._n : need] = keys
        self._n = need

    def remove(self, keys: np.ndarray) -> int:
        live = self._keys[: self._n]
        drop = np.isin(live, keys)
        removed = int(drop.sum())
        if removed:
            keep = ~drop
            m = int(keep.sum())
            self._vectors[:m] = self._vectors[: self._n][keep]
            self._keys[:m] = live[keep]
            self._vectors[m : self._n] = 0.0  # erase the tail: no copy of a removed vector survives
            self._keys[m : self._n] = -1
            self._n = m
        return removed

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        n_q = queries.shape[0]
        k = min(k, self._n)
        dist = np.empty((n_q, k), dtype=np.float64)
        keys = np.empty((n_q, k), dtype=np.int64)
        if k == 0:
            return dist, keys
        vecs = self._vectors[: self._n]
        norms = np.einsum("ij,ij->i", vecs, vecs)
        step = max(1, _QUERY_BLOCK // max(self._n, 1))
        for start in range(0, n_q, step):
            q = queries[start : start + step]
            sims = q @ vecs.T
            if self.metric == "cosine":
                d = 1.0 - sims.astype(np.float64)
            else:
                qn = np.einsum("ij,ij->i", q, q)
                d = np.sqrt(np.maximum(qn[:, None] - 2.0 * sims + norms[None, :], 0.0)).astype(np.float64)
            if k < self._n:
                part = np.argpartition(d, k - 1, axis=1)[:, :k]
            else:
                part = np.broadcast_to(np.arange(self._n), (d.shape[0], self._n))
            dp = np.take_along_axis(d, part, axis=1)
            kp = self._keys[part]
            order = np.lexsort((kp, dp), axis=1)
            dist[start : start + step] = np.take_along_axis(dp, order, axis=1)
            keys[start : start + step] = np.take_along_axis(kp, order, axis=1)
        return dist, keys

    def memory_bytes(self) -> int:
        return int(self._vectors.nbytes + self._keys.nbytes)

    def contents(self) -> tuple[np.ndarray, np.ndarray]:
        """Every stored (vector, key) pair."""
        return self._vectors[: self._n], self._keys[: self._n]


class FaissIndex:
    """FAISS ``IndexIDMap(IndexFlat*)`` (exact) or ``IndexIVFFlat`` (approximate) with int64 keys."""

    backend = "faiss"

    def __init__(
        self, dim: int, metric: str, kind: str, n_lists: int | None = None, n_probe: int = 8
    ) -> None:
        faiss = import_faiss()
        self.dim, self.metric, self.kind = dim, metric, kind
        self.n_lists, self.n_probe = n_lists, n_probe
        faiss_metric = faiss.METRIC_INNER_PRODUCT if metric == "cosine" else faiss.METRIC_L2
        if kind == "flat":
            flat = faiss.IndexFlatIP(dim) if metric == "cosine" else faiss.IndexFlatL2(dim)
            self._index = faiss.IndexIDMap(flat)
        else:
            quantizer = faiss.IndexFlatIP(dim) if metric == "cosine" else faiss.IndexFlatL2(dim)
            self._index = faiss.IndexIVFFlat(quantizer, dim, int(n_lists or 1), faiss_metric)
            self._index.nprobe = int(n_probe)

    @property
    def ntotal(self) -> int:
        return int(self._index.ntotal)

    def train(self, vectors: np.ndarray) -> None:
        if not self._index.is_trained:
            self._index.train(np.ascontiguousarray(vectors, dtype=np.float32))

    def add(self, vectors: np.ndarray, keys: np.ndarray) -> None:
        self._index.add_with_ids(
            np.ascontiguousarray(vectors, dtype=np.float32), np.ascontiguousarray(keys, dtype=np.int64)
        )

    def remove(self, keys: np.ndarray) -> int:
        faiss = import_faiss()
        sel = faiss.IDSelectorBatch(np.ascontiguousarray(keys, dtype=np.int64))
        return int(self._index.remove_ids(sel))

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.ntotal)
        if k == 0:
            return np.empty((queries.shape[0], 0)), np.empty((queries.shape[0], 0), dtype=np.int64)
        sims, keys = self._index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        sims = sims.astype(np.float64)
        dist = 1.0 - sims if self.metric == "cosine" else np.sqrt(np.maximum(sims, 0.0))
        dist[keys < 0] = np.inf
        return dist, keys

    def memory_bytes(self) -> int:
        n, d = self.ntotal, self.dim
        total = n * (4 * d + 8)  # vectors and their int64 ids
        if self.kind == "ivf":
            total += int(self._index.nlist) * 4 * d  # the coarse centroids
        return total

    def contents(self) -> tuple[np.ndarray, np.ndarray]:
        """Every stored (vector, key) pair, read from the flat storage or the inverted lists."""
        faiss = import_faiss()
        if self.kind == "flat":
            keys = faiss.vector_to_array(self._index.id_map).astype(np.int64)
            flat = faiss.downcast_index(self._index.index)
            vectors = faiss.rev_swig_ptr(flat.get_xb(), keys.size * self.dim)
            return np.array(vectors, dtype=np.float32).reshape(keys.size, self.dim), keys
        invlists = self._index.invlists
        parts_v, parts_k = [], []
        for lst in range(invlists.nlist):
            size = invlists.list_size(lst)
            if size == 0:
                continue
            codes = faiss.rev_swig_ptr(invlists.get_codes(lst), size * invlists.code_size)
            ids = faiss.rev_swig_ptr(invlists.get_ids(lst), size)
            parts_v.append(np.frombuffer(bytes(codes), dtype=np.float32).reshape(size, self.dim))
            parts_k.append(np.array(ids, dtype=np.int64))
        if not parts_k:
            return np.empty((0, self.dim), dtype=np.float32), np.empty(0, dtype=np.int64)
        return np.concatenate(parts_v), np.concatenate(parts_k)

    def __getstate__(self) -> dict[str, Any]:
        faiss = import_faiss()
        state = dict(self.__dict__)
        state["_index"] = faiss.serialize_index(self._index)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        faiss = import_faiss()
        state = dict(state)
        state["_index"] = faiss.deserialize_index(state["_index"])
        self.__dict__.update(state)
        if self.kind == "ivf":
            self._index.nprobe = int(self.n_probe)


def default_n_lists(n: int) -> int:
    """FAISS's rule of thumb, capped so every list is trained on at least 39 points."""
    return int(max(1, min(round(4 * math.sqrt(n)), n // 39)))


_RECALL_QUERIES = 200  # memory rows used as queries to measure the IVF's recall


def calibrate_ivf(
    store: FaissIndex, vectors: np.ndarray, k: int, n_probe: int | None, target: float, rng: Any
) -> tuple[int, float]:
    """Choose the IVF's ``n_probe`` from a target recall@k measured on the memory itself.

    ``vectors`` are the rows stored under keys ``0..n-1``. Up to 200 of them are the
    queries; their exact ``k`` nearest other rows (FAISS brute force) are compared with
    the IVF's answer, a returned row counting when its distance is at most the exact
    ``k``-th distance (so distance ties do not count as misses). With ``n_probe=None``,
    ``1, 2, 4, ...`` probes are tried up to all lists and the first reaching ``target``
    is kept; else the given ``n_probe`` is only measured. Returns ``(n_probe, recall)``
    and leaves the store searching with that ``n_probe``.
    """
    faiss = import_faiss()
    n = vectors.shape[0]
    n_lists = int(store._index.nlist)
    kk = min(k, n - 1)
    if kk < 1:
        chosen = int(n_probe or 1)
        store.n_probe = store._index.nprobe = chosen
        return chosen, 1.0
    q = np.sort(rng.choice(n, min(n, _RECALL_QUERIES), replace=False))
    queries = np.ascontiguousarray(vectors[q], dtype=np.float32)
    cosine = store.metric == "cosine"
    metric = faiss.METRIC_INNER_PRODUCT if cosine else faiss.METRIC_L2
    sims, idx = faiss.knn(queries, np.ascontiguousarray(vectors, dtype=np.float32), kk + 1, metric=metric)
    exact = 1.0 - sims.astype(np.float64) if cosine else np.sqrt(np.maximum(sims.astype(np.float64), 0.0))
    kth = _without_self(exact, idx, q, kk)[:, kk - 1]
    slack = 1e-6 * (1.0 + np.abs(kth))

    def recall(probe: int) -> float:
        store._index.nprobe = int(probe)
        dist, keys = store.search(queries, kk + 1)
        found = _without_self(dist, keys, q, kk)
        return float(np.mean(found <= (kth + slack)[:, None]))

    candidates = [int(n_probe)] if n_probe is not None else _doublings(n_lists)
    chosen, reached = candidates[-1], 0.0
    for probe in candidates:
        reached = recall(probe)
        chosen = probe
        if reached >= target:
            break
    store.n_probe = store._index.nprobe = chosen
    return chosen, reached


def _doublings(n_lists: int) -> list[int]:
    out, p = [], 1
    while p < n_lists:
        out.append(p)
        p *= 2
    return [*out, n_lists]


def _without_self(dist: np.ndarray, keys: np.ndarray, own: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` distances of each row without the query's own key (or the last one)."""
    self_hit = keys == own[:, None]
    drop = np.where(self_hit.any(axis=1), self_hit.argmax(axis=1), keys.shape[1] - 1)
    keep = np.ones(keys.shape, dtype=bool)
    keep[np.arange(keys.shape[0]), drop] = False
    return dist[keep].reshape(keys.shape[0], keys.shape[1] - 1)[:, :k]
