"""Pairwise judgements: parsing, item indexing and the comparison graph (private)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from trustlab.errors import DataError, DataTypeError

_NAME = "judgements"


@dataclass(frozen=True)
class Judgements:
    """Judgements as integer item indices: ``p[k]`` is the probability that ``a[k]`` wins."""

    items: tuple[Any, ...]
    a: np.ndarray
    b: np.ndarray
    p: np.ndarray

    @property
    def n_items(self) -> int:
        return len(self.items)

    def pair_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per unordered pair ``i < j``: ``(i, j, wins_i, n)`` with ``wins_i`` summed probabilities."""
        lo = np.minimum(self.a, self.b)
        hi = np.maximum(self.a, self.b)
        win_lo = np.where(self.a == lo, self.p, 1.0 - self.p)
        key = lo.astype(np.int64) * self.n_items + hi
        uniq, inv = np.unique(key, return_inverse=True)
        wins = np.bincount(inv, weights=win_lo, minlength=len(uniq))
        n = np.bincount(inv, minlength=len(uniq)).astype(float)
        return uniq // self.n_items, uniq % self.n_items, wins, n

    def components(self) -> list[list[Any]]:
        """Connected components of the comparison graph, largest first, as item labels."""
        m = self.n_items
        adj = coo_matrix((np.ones(len(self.a)), (self.a, self.b)), shape=(m, m))
        k, labels = connected_components(adj, directed=False)
        groups = [np.flatnonzero(labels == c) for c in range(k)]
        groups.sort(key=len, reverse=True)
        return [[self.items[i] for i in g] for g in groups]

    def require_connected(self, method: str) -> None:
        comps = self.components()
        if len(comps) > 1:
            shown = "; ".join(
                "{" + ", ".join(map(repr, c[:5])) + (", ..." if len(c) > 5 else "") + f"}} ({len(c)} items)"
                for c in comps[:4]
            )
            more = f" and {len(comps) - 4} more" if len(comps) > 4 else ""
            raise DataError(
                f"{_NAME}: the comparison graph is disconnected ({len(comps)} components: {shown}{more}); "
                f"{method} scores are only defined up to a separate shift per component. Add judgements "
                "that link the components, or score each component separately.",
                argument=_NAME,
            )


def _frame(judgements: Any) -> pd.DataFrame:
    if isinstance(judgements, pd.DataFrame):
        return judgements
    if isinstance(judgements, str | bytes) or not isinstance(judgements, Sequence | np.ndarray):
        raise DataTypeError(
            f"{_NAME} must be a DataFrame with columns item_a, item_b and winner (or p_a), or a "
            f"sequence of (item_a, item_b, winner) triples; got {type(judgements).__name__}.",
            argument=_NAME,
        )
    rows = list(judgements)
    if rows and not all(
        isinstance(r, Sequence | np.ndarray) and not isinstance(r, str) and len(r) == 3 for r in rows
    ):
        raise DataError(
            f"{_NAME}: every row must be a triple (item_a, item_b, winner); fix or drop the others.",
            argument=_NAME,
        )
    return pd.DataFrame(rows, columns=["item_a", "item_b", "winner"])


def parse_judgements(judgements: Any, items: Any = None) -> Judgements:
    """Validate judgements and map item labels to indices ``0..m-1``."""
    df = _frame(judgements)
    if len(df) == 0:
        raise DataError(f"{_NAME} is empty; at least one pairwise judgement is needed.", argument=_NAME)
    missing = [c for c in ("item_a", "item_b") if c not in df.columns]
    has_w, has_p = "winner" in df.columns, "p_a" in df.columns
    if missing or has_w == has_p:
        raise DataError(
            f"{_NAME} must have columns item_a, item_b and exactly one of winner / p_a; "
            f"it has {list(map(str, df.columns))}.",
            argument=_NAME,
        )
    ia, ib = df["item_a"].to_numpy(object), df["item_b"].to_numpy(object)
    if pd.isna(ia).any() or pd.isna(ib).any():
        raise DataError(f"{_NAME}: item_a/item_b hold missing values; drop those rows.", argument=_NAME)
    same = np.flatnonzero(ia == ib)
    if len(same):
        raise DataError(
            f"{_NAME}: row {int(same[0])} compares item {ia[same[0]]!r} with itself "
            f"({len(same)} such rows); drop them.",
            argument=_NAME,
        )
    if has_p:
        try:
            p = df["p_a"].to_numpy(dtype=float)
        except (TypeError, ValueError):
            raise DataTypeError(f"{_NAME}: p_a must hold probabilities (floats).", argument=_NAME) from None
        bad = np.flatnonzero(~((p >= 0) & (p <= 1)))
        if len(bad):
            raise DataError(
                f"{_NAME}: p_a must lie in [0, 1] (probability that item_a wins); row {int(bad[0])} "
                f"has {p[bad[0]]!r} ({len(bad)} such rows).",
                argument=_NAME,
            )
    else:
        w = df["winner"].to_numpy(object)
        is_a, is_b = w == ia, w == ib
        bad = np.flatnonzero(~(is_a | is_b))
        if len(bad):
            raise DataError(
                f"{_NAME}: winner must be item_a or item_b of its row; row {int(bad[0])} names "
                f"{w[bad[0]]!r} for the pair ({ia[bad[0]]!r}, {ib[bad[0]]!r}) ({len(bad)} such rows). "
                "For ties give a p_a column of probabilities (0.5 for a tie) instead.",
                argument=_NAME,
            )
        p = is_a.astype(float)
    seen = pd.unique(np.concatenate([ia, ib]))
    if items is None:
        try:
            labels = tuple(sorted(seen))
        except TypeError:
            labels = tuple(seen)
    else:
        if isinstance(items, str | bytes) or not isinstance(items, Sequence | np.ndarray | pd.Index):
            raise DataTypeError(
                f"items must be a sequence of item labels; got {type(items).__name__}.", argument="items"
            )
        labels = tuple(items)
        if len(set(labels)) != len(labels):
            raise DataError("items holds duplicated labels; list each item once.", argument="items")
        if not labels:
            raise DataError("items is empty; list the items being ranked.", argument="items")
    index = pd.Index(labels, dtype=object)
    a = index.get_indexer(pd.Index(ia, dtype=object))
    b = index.get_indexer(pd.Index(ib, dtype=object))
    if (a < 0).any() or (b < 0).any():
        unknown = list(pd.unique(np.concatenate([ia[a < 0], ib[b < 0]])))
        raise DataError(
            f"{_NAME} name {len(unknown)} item(s) not in items: {unknown[:10]!r}; add them to items "
            "or drop those judgements.",
            argument=_NAME,
        )
    a, b = a.astype(np.int64), b.astype(np.int64)
    return Judgements(labels, a, b, p)
