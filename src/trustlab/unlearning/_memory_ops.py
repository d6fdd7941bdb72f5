"""Editing operations of :class:`~trustlab.unlearning.memory.KNNMemory`: remove, prune, intervene."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, check_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.unlearning._memory_records import as_array, check_ids
from trustlab.unlearning._memory_results import PruneResult

_PRUNE = {
    "mode": [Options({"hard", "soft"})],
    "top_k": [None, Interval(numbers.Integral, 1, None, closed="left")],
    "threshold": [None, Interval(numbers.Integral, 1, None, closed="left")],
    "numerator": [Interval(numbers.Real, 0, None, closed="neither")],
}


def _id_list(ids: Any) -> np.ndarray:
    if ids is None or isinstance(ids, str | bytes):
        raise DataError("ids must be an int or an array of integer ids.", argument="ids")
    arr = as_array(ids, "ids")
    return check_ids(arr.reshape(-1) if arr.ndim <= 1 else arr, arr.size)


class MemoryOpsMixin:
    """Remove, exclude, reweight, block sources and prune (mixed into KNNMemory)."""

    # attributes provided by KNNMemory
    _records: Any
    _store: Any
    classes_: np.ndarray
    _source_codes: dict[Any, int]
    _source_weight: np.ndarray
    _source_blocked: np.ndarray

    def _check_fitted(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def remove(self, ids: Any) -> Any:
        """Delete records for good (exact unlearning): their vectors leave the index.

        The result equals a memory built without them (exact index): later searches
        cannot return them, and an id removed and added again is a new record.

        Parameters
        ----------
        ids : int or array-like of int
            Ids in the memory.

        Returns
        -------
        KNNMemory
            ``self``.

        Raises
        ------
        DataError
            Naming the ids that are not in the memory (nothing is removed then).
        """
        self._check_fitted()
        id_arr = _id_list(ids)
        keys = self._records.keys_of(id_arr)
        removed = self._store.remove(keys)
        if removed != keys.size:  # pragma: no cover - an index out of step with the records
            raise RuntimeError(f"the index removed {removed} of {keys.size} records")
        self._records.wipe(keys)
        return self

    def remove_class(self, label: Any) -> Any:
        """Remove every record of one class (its column stays in ``classes_``).

        Parameters
        ----------
        label : Any
            A label in ``classes_``.

        Returns
        -------
        KNNMemory
            ``self``.
        """
        self._check_fitted()
        hits = np.flatnonzero(self.classes_ == label) if np.ndim(label) == 0 else np.empty(0)
        if hits.size == 0:
            raise DataError(
                f"label {label!r} is not one of classes_ {self.classes_.tolist()}.", argument="label"
            )
        rec = self._records
        keys = rec.live_keys()
        keys = keys[rec.labels[keys] == hits[0]]
        if keys.size:
            self.remove(rec.ids[keys])
        return self

    def exclude(self, ids: Any) -> Any:
        """Skip these records at retrieval (reversible with :meth:`include`); the rest re-rank.

        Parameters
        ----------
        ids : int or array-like of int
            Ids in the memory.

        Returns
        -------
        KNNMemory
            ``self``.
        """
        self._check_fitted()
        self._records.set(self._records.keys_of(_id_list(ids)), excluded=True)
        return self

    def include(self, ids: Any) -> Any:
        """Undo :meth:`exclude` for these records.

        Parameters
        ----------
        ids : int or array-like of int
            As in :meth:`exclude`.

        Returns
        -------
        KNNMemory
            ``self``.
        """
        self._check_fitted()
        self._records.set(self._records.keys_of(_id_list(ids)), excluded=False)
        return self

    def set_weights(self, ids: Any, weights: Any) -> Any:
        """Set the vote weight of records (an intervention; 0 silences a record).

        Parameters
        ----------
        ids : int or array-like of int
            Ids in the memory.
        weights : float or array-like of float
            Non-negative weights (one, or one per id).

        Returns
        -------
        KNNMemory
            ``self``.
        """
        self._check_fitted()
        id_arr = _id_list(ids)
        w_in = as_array(weights, "weights")
        w = check_numeric_array(
            np.broadcast_to(w_in, id_arr.shape) if w_in.ndim == 0 else w_in, "weights", ndim=1
        )
        if w.shape != id_arr.shape or np.any(w < 0):
            raise DataError(
                f"weights must be one non-negative number or {id_arr.size} of them.", argument="weights"
            )
        self._records.set(self._records.keys_of(id_arr), weights=w)
        return self

    def _code(self, source: Any) -> int:
        try:
            code = self._source_codes.get(source)
        except TypeError:
            code = None
        if code is None:
            known = ", ".join(repr(s) for s in list(self._source_codes)[:10])
            raise DataError(f"source {source!r} is not in the memory (known: {known}).", argument="source")
        return code

    def set_source_weight(self, source: Any, weight: float) -> Any:
        """Multiply the votes of every record of a source by ``weight`` (an intervention).

        Parameters
        ----------
        source : Any
            A source given to ``fit``/``add``.
        weight : float
            Non-negative factor (1 restores the default).

        Returns
        -------
        KNNMemory
            ``self``.
        """
        self._check_fitted()
        check_params(
            {"weight": weight},
            {"weight": [Interval(numbers.Real, 0, None, closed="left")]},
            "set_source_weight",
        )
        self._source_weight[self._code(source)] = float(weight)
        return self

    def block_source(self, source: Any) -> Any:
        """Exclude every record of a source from retrieval (an intervention).

        Parameters
        ----------
        source : Any
            A source given to ``fit``/``add``.

        Returns
        -------
        KNNMemory
            ``self``.
        """
        self._check_fitted()
        self._source_blocked[self._code(source)] = True
        return self

    def unblock_source(self, source: Any) -> Any:
        """Undo :meth:`block_source`.

        Parameters
        ----------
        source : Any
            A blocked source.

        Returns
        -------
        KNNMemory
            ``self``.
        """
        self._check_fitted()
        self._source_blocked[self._code(source)] = False
        return self

    def prune(
        self,
        mode: str = "hard",
        *,
        top_k: int | None = None,
        threshold: int | None = None,
        numerator: float = 1.75,
    ) -> PruneResult:
        """Prune records that other labels' queries keep retrieving (replaces any earlier pruning).

        Every live record queries the memory; with the self match dropped, each record
        among its ``top_k`` neighbours whose label differs gets ``n_wrong += 1``. Hard
        pruning excludes records with ``n_wrong >= threshold`` (defaults: ``top_k=100``,
        ``threshold=128``, the paper's ImageNet setting: set them for small memories);
        soft pruning gives them the weight ``numerator / (1 + n_wrong)`` when
        ``n_wrong > 0`` (defaults ``top_k=10``, ``numerator=1.75``).

        Parameters
        ----------
        mode : {"hard", "soft"}, default "hard"
            Exclude or down-weight.
        top_k : int, optional
            Neighbours per self-query.
        threshold : int, optional
            Hard pruning's exclusion count.
        numerator : float, default 1.75
            Soft pruning's ``b``.

        Returns
        -------
        PruneResult
            The counts and what changed.
        """
        self._check_fitted()
        check_params(
            {"mode": mode, "top_k": top_k, "threshold": threshold, "numerator": numerator}, _PRUNE, "prune"
        )
        top_k = int(top_k if top_k is not None else (100 if mode == "hard" else 10))
        threshold = int(threshold if threshold is not None else 128)
        rec = self._records
        live = rec.live_keys()
        rec.set(live, pruned=False, prune_weights=1.0)
        counts = np.zeros(rec.n_keys, dtype=np.int64)
        store = self._store
        fetch = min(top_k + 1, store.ntotal)
        batch = max(1, (1 << 22) // max(store.ntotal, 1))
        vectors = self._stored_vectors(live)
        for start in range(0, live.size, batch):
            q_keys = live[start : start + batch]
            _, keys = store.search(vectors[start : start + batch], fetch)
            not_self = keys != q_keys[:, None]
            # drop one entry per row: the self match, or the last one when self was not retrieved
            drop_last = not_self.all(axis=1)
            not_self[drop_last, -1] = False
            valid = not_self & (keys >= 0)
            wrong = valid & (rec.labels[np.where(valid, keys, 0)] != rec.labels[q_keys][:, None])
            counts += np.bincount(keys[wrong], minlength=rec.n_keys)
        n_wrong = counts[live]
        if mode == "hard":
            hit = n_wrong >= threshold
            rec.set(live[hit], pruned=True)
            weights = np.ones(live.size)
        else:
            hit = n_wrong > 0
            weights = np.where(hit, float(numerator) / (1.0 + n_wrong), 1.0)
            rec.set(live, prune_weights=weights)
        return PruneResult(
            mode=mode,
            top_k=top_k,
            ids=rec.ids[live].copy(),
            n_wrong=n_wrong,
            pruned_ids=rec.ids[live[hit]].copy(),
            weights=weights,
        )

    def _stored_vectors(self, keys: np.ndarray) -> np.ndarray:
        """The stored embeddings of ``keys`` (for self-queries)."""
        vectors, stored = self._store.contents()
        order = np.argsort(stored)
        return np.ascontiguousarray(vectors[order[np.searchsorted(stored, keys, sorter=order)]])

    @property
    def n_records_(self) -> int:
        """Number of records in the memory."""
        self._check_fitted()
        return int(self._store.ntotal)

    @property
    def ids_(self) -> np.ndarray:
        """Ids of the records in the memory, sorted."""
        self._check_fitted()
        rec = self._records
        return np.sort(rec.ids[rec.live_keys()])

    @property
    def memory_bytes_(self) -> int:
        """Bytes held: the index (vectors, ids, IVF centroids) plus the per-record metadata."""
        self._check_fitted()
        return int(self._store.memory_bytes() + self._records.nbytes())
