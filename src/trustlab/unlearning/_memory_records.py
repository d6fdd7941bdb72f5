"""Per-record metadata of the kNN memory, stored by internal key (slot).

Keys are consecutive integers handed out on add and never reused, so a key the index
returns always names the record it was added as. ``id`` is the user's int64 id;
lookups from ids to keys go through a sorted array rebuilt lazily after adds and
removals. A removed record's metadata is wiped (id -1, label -1, source -1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.errors import DataError

_FIELDS = {
    "ids": (np.int64, -1),
    "labels": (np.int64, -1),
    "sources": (np.int64, -1),
    "weights": (np.float64, 1.0),
    "prune_weights": (np.float64, 1.0),
    "excluded": (np.bool_, False),
    "pruned": (np.bool_, False),
    "alive": (np.bool_, False),
}


class Records:
    """Growable aligned arrays, one entry per key ever handed out."""

    def __init__(self) -> None:
        self.n_keys = 0
        self.next_id = 0
        self.arrays: dict[str, np.ndarray] = {
            f: np.full(0, fill, dtype=t) for f, (t, fill) in _FIELDS.items()
        }
        self._lookup: tuple[np.ndarray, np.ndarray] | None = None

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name][: self.__dict__["n_keys"]]
        raise AttributeError(name)

    def new_keys(self, n: int) -> np.ndarray:
        need = self.n_keys + n
        cap = next(iter(self.arrays.values())).size
        if need > cap:
            cap = max(need, 2 * cap, 16)
            for f, (t, fill) in _FIELDS.items():
                grown: np.ndarray = np.full(cap, fill, dtype=t)
                grown[: self.n_keys] = self.arrays[f][: self.n_keys]
                self.arrays[f] = grown
        keys = np.arange(self.n_keys, need, dtype=np.int64)
        self.n_keys = need
        return keys

    def set(self, keys: np.ndarray, **values: Any) -> None:
        for f, v in values.items():
            self.arrays[f][keys] = v
        if "ids" in values or "alive" in values:
            self._lookup = None

    def wipe(self, keys: np.ndarray) -> None:
        for f, (_, fill) in _FIELDS.items():
            self.arrays[f][keys] = fill
        self._lookup = None

    def live_keys(self) -> np.ndarray:
        return np.flatnonzero(self.alive)

    def keys_of(self, ids: np.ndarray, argument: str = "ids") -> np.ndarray:
        """Keys of the live records with these ids; DataError naming the ids not in memory."""
        if self._lookup is None:
            live = self.live_keys()
            order = np.argsort(self.ids[live], kind="stable")
            self._lookup = (self.ids[live][order], live[order])
        sorted_ids, sorted_keys = self._lookup
        pos = np.searchsorted(sorted_ids, ids)
        pos_c = np.minimum(pos, max(sorted_ids.size - 1, 0))
        found = (
            (pos < sorted_ids.size) & (sorted_ids[pos_c] == ids)
            if sorted_ids.size
            else np.zeros(ids.size, bool)
        )
        if not np.all(found):
            missing = np.unique(ids[~found])
            shown = ", ".join(str(int(i)) for i in missing[:10]) + (" ..." if missing.size > 10 else "")
            raise DataError(
                f"{argument}: {missing.size} id(s) are not in the memory: {shown}. Check memory.ids_ "
                "(removed ids are gone for good).",
                argument=argument,
            )
        return sorted_keys[pos]

    def contains(self, ids: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``ids`` are live in the memory."""
        if self._lookup is None:
            live = self.live_keys()
            order = np.argsort(self.ids[live], kind="stable")
            self._lookup = (self.ids[live][order], live[order])
        sorted_ids = self._lookup[0]
        if sorted_ids.size == 0:
            return np.zeros(ids.size, dtype=bool)
        pos = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
        return sorted_ids[pos] == ids

    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.arrays.values()))


def as_array(value: Any, argument: str) -> np.ndarray:
    """``np.asarray(value)``, with a ragged or unconvertible input reported as a DataError."""
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise DataError(f"{argument} must be a rectangular array ({exc}).", argument=argument) from None


def check_ids(ids: Any, n: int, argument: str = "ids") -> np.ndarray:
    """Return ``ids`` as a 1-D int64 array of length ``n`` (no duplicates)."""
    if isinstance(ids, str | bytes) or ids is None:
        raise DataError(f"{argument} must be an array of integer ids.", argument=argument)
    arr = as_array(ids, argument)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size != n:
        raise DataError(f"{argument} must be 1-D with {n} entries, got shape {arr.shape}.", argument=argument)
    if arr.size and not (np.issubdtype(arr.dtype, np.integer) and not np.issubdtype(arr.dtype, np.bool_)):
        if arr.dtype == object or np.issubdtype(arr.dtype, np.floating):
            try:
                as_float = arr.astype(np.float64)
            except (TypeError, ValueError):
                raise DataError(f"{argument} must be integers.", argument=argument) from None
            if not (np.all(np.isfinite(as_float)) and np.all(as_float == np.round(as_float))):
                raise DataError(f"{argument} must be whole numbers.", argument=argument)
            if np.any(np.abs(as_float) >= 2.0**62):
                raise DataError(f"{argument} must lie in (-2**62, 2**62).", argument=argument)
            arr = as_float.astype(np.int64)
        else:
            raise DataError(f"{argument} must be integers, got dtype {arr.dtype}.", argument=argument)
    try:
        arr = arr.astype(np.int64, casting="safe") if arr.size else arr.astype(np.int64)
    except TypeError:
        raise DataError(f"{argument} must fit in int64.", argument=argument) from None
    if arr.size and (arr.min() <= -(2**62) or arr.max() >= 2**62):
        raise DataError(f"{argument} must lie in (-2**62, 2**62).", argument=argument)
    if np.unique(arr).size != arr.size:
        raise DataError(f"{argument} must not repeat an id.", argument=argument)
    return arr
