"""Per-key participation counters, vectorised (a two-level sorted-array store)."""

from __future__ import annotations

import numpy as np


class ParticipationStore:
    """Counts per 64-bit key hash: a large sorted level and a small recent one (LSM-style).

    Lookups and charges are vectorised (``searchsorted``); new keys go to the small level,
    which is merged into the large one once it holds more than an eighth of it, so a
    query costs O(n log N) plus amortised O(n) for insertion.
    """

    def __init__(self) -> None:
        empty_k, empty_c = np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
        self._levels = [[empty_k, empty_c], [empty_k.copy(), empty_c.copy()]]

    def __len__(self) -> int:
        return sum(level[0].size for level in self._levels)

    def _locate(self, h: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for keys, _ in self._levels:
            idx = np.searchsorted(keys, h)
            found = idx < keys.size
            found[found] = keys[idx[found]] == h[found]
            out.append((idx, found))
        return out

    def get(self, h: np.ndarray) -> np.ndarray:
        """Counts of the (sorted, distinct) hashes ``h`` (0 when unseen)."""
        counts = np.zeros(h.size, dtype=np.int64)
        for (idx, found), (_, cnt) in zip(self._locate(h), self._levels, strict=True):
            counts[found] = cnt[idx[found]]
        return counts

    def charge(self, h: np.ndarray) -> np.ndarray:
        """Add one participation to each of the sorted, distinct hashes ``h``; new counts."""
        located = self._locate(h)
        seen = np.zeros(h.size, dtype=bool)
        new_counts = np.ones(h.size, dtype=np.int64)
        for (idx, found), level in zip(located, self._levels, strict=True):
            level[1][idx[found]] += 1
            new_counts[found] = level[1][idx[found]]
            seen |= found
        fresh = h[~seen]
        if fresh.size:
            small_k, small_c = self._levels[1]
            pos = np.searchsorted(small_k, fresh)
            self._levels[1] = [
                np.insert(small_k, pos, fresh),
                np.insert(small_c, pos, np.ones(fresh.size, dtype=np.int64)),
            ]
            if self._levels[1][0].size > max(1 << 14, self._levels[0][0].size // 8):
                keys = np.concatenate([self._levels[0][0], self._levels[1][0]])
                cnts = np.concatenate([self._levels[0][1], self._levels[1][1]])
                order = np.argsort(keys, kind="stable")
                self._levels[0] = [keys[order], cnts[order]]
                self._levels[1] = [np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)]
        return new_counts
