"""FastPD's tree side: leaves grouped by path length, binning, and the per-leaf game tables.

:func:`extract_leaves` walks the trees once; :func:`rank_intervals` turns every leaf
constraint into integer ranks of cut points, so that :func:`bins` and :func:`codes`
compare rows as small integers. :class:`LeafTables` holds the fitted tables (the
background shares ``p_l(K)`` and the Shapley table of every leaf game) and sums them
into predictions, PD functions, SHAP values and components (Liu et al., ICML 2025).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from trustlab.explain._fastpd_moebius import mobius_terms, popcount, transform
from trustlab.explain._trees import TreeArrays, TreeEnsemble

__all__ = ["LeafGroup", "LeafTables", "bins", "codes", "extract_leaves", "rank_intervals", "transform"]

# Working-set size (number of array elements) for one vectorised block.
BLOCK = 1 << 22
# Count by tree cells when a tree's occupied cells are at most this share of the rows:
# 300,000 rows of the audit benchmark in 100,000-row chunks took 40 s coding every row,
# 16 s with cells below half the rows and 12 s below 90% (busy 2-core machine).
_CELL_SHARE = 0.9


@dataclass
class LeafGroup:
    """All leaves (across trees) with the same number ``k`` of distinct path features."""

    k: int
    value: np.ndarray  # (L,) leaf value times the tree weight
    feat: np.ndarray  # (L, k) feature index of each slot
    lo: np.ndarray  # (L, k) interval lower end
    hi: np.ndarray  # (L, k) interval upper end
    nan_ok: np.ndarray  # (L, k) a missing value satisfies the slot
    ratio: np.ndarray  # (L, k) product of child/parent cover ratios on the slot's splits
    lo_r: np.ndarray | None = None  # (L, k) rank of ``lo`` among the feature's cut points
    width: np.ndarray | None = None  # (L, k) rank(hi) - rank(lo): bins inside the interval
    P: np.ndarray | None = None  # (L, 2^k) p_l(K), K indexed by slot bitmask
    shap_table: np.ndarray | None = None  # (L * 2^k, k) Shapley value of each slot per code
    cat: np.ndarray | None = None  # (L, k) row of ``catsets`` of a categorical slot, else -1
    catsets: np.ndarray | None = None  # (n_sets, n_bins) allowed category bins of a slot
    tree: np.ndarray | None = None  # (L,) index of the leaf's tree


def sub_group(g: LeafGroup, idx: Any) -> LeafGroup:
    """The leaves ``idx`` (a slice or index array) of ``g``, with their bin ranks (no tables)."""
    return LeafGroup(
        g.k,
        g.value[idx],
        g.feat[idx],
        g.lo[idx],
        g.hi[idx],
        g.nan_ok[idx],
        g.ratio[idx],
        lo_r=None if g.lo_r is None else g.lo_r[idx],
        width=None if g.width is None else g.width[idx],
        cat=None if g.cat is None else g.cat[idx],
        catsets=g.catsets,
    )


def extract_leaves(trees: Sequence[TreeArrays], weight: float) -> tuple[dict[int, LeafGroup], float]:
    """Walk every tree once; return leaves grouped by path-feature count, and constants.

    A leaf's constraint on a numerical feature is an interval; on a categorical
    feature it is the set of category bins that every categorical split of the path
    sends the leaf's way (the intersection of the left sets or their complements).
    """
    rows: dict[int, list[tuple[float, list[int], list[Any], list[Any], list[Any], list[Any], list[Any], int]]]
    rows = {}
    constant = 0.0
    for t_index, tree in enumerate(trees):
        stack: list[tuple[int, dict[int, list[Any]]]] = [(0, {})]
        while stack:
            node, cons = stack.pop()
            if tree.left[node] == -1:
                val = float(tree.value[node]) * weight
                if not cons:
                    constant += val
                    continue
                feats = sorted(cons)
                rows.setdefault(len(feats), []).append(
                    (val, feats, *([cons[f][i] for f in feats] for i in range(5)), t_index)  # type: ignore[arg-type]
                )
                continue
            f = int(tree.feature[node])
            t = float(tree.threshold[node])
            cover = float(tree.cover[node])
            cat_left = tree.cat_left.get(node)
            for child, go_left in ((int(tree.left[node]), True), (int(tree.right[node]), False)):
                new = {key: list(v) for key, v in cons.items()}
                lo, hi, nan_ok, ratio, allowed = new.get(f, [-np.inf, np.inf, True, 1.0, None])
                if cat_left is not None:
                    side = cat_left if go_left else ~cat_left
                    allowed = side if allowed is None else allowed & side
                elif go_left:
                    hi = min(hi, t)
                else:
                    lo = max(lo, t)
                nan_ok = nan_ok and (bool(tree.nan_left[node]) == go_left)
                r = float(tree.cover[child]) / cover if cover > 0 else 0.0
                new[f] = [lo, hi, nan_ok, ratio * r, allowed]
                stack.append((child, new))
    groups = {}
    for k, items in rows.items():
        g = LeafGroup(
            k=k,
            value=np.array([it[0] for it in items], dtype=np.float64),
            feat=np.array([it[1] for it in items], dtype=np.int64),
            lo=np.array([it[2] for it in items], dtype=np.float64),
            hi=np.array([it[3] for it in items], dtype=np.float64),
            nan_ok=np.array([it[4] for it in items], dtype=bool),
            ratio=np.array([it[5] for it in items], dtype=np.float64),
            tree=np.array([it[7] for it in items], dtype=np.int64),
        )
        sets = [a for it in items for a in it[6] if a is not None]
        if sets:
            width = max(len(a) for a in sets)
            catsets = np.zeros((len(sets), width), dtype=bool)
            cat = np.full((len(items), k), -1, dtype=np.int64)
            i = 0
            for li, it in enumerate(items):
                for j, a in enumerate(it[6]):
                    if a is not None:
                        catsets[i, : len(a)] = a
                        cat[li, j] = i
                        i += 1
            g.cat, g.catsets = cat, catsets
        groups[k] = g
    return groups, constant


def rank_intervals(groups: dict[int, LeafGroup], n_features: int) -> list[np.ndarray]:
    """Sorted cut points per feature; store each interval as integer ranks of its ends.

    With ``b(x)`` the number of cut points below ``x`` (``<= x`` for XGBoost's
    strict rule), ``x`` lies in the interval ``(lo, hi]`` (``[lo, hi)``) exactly when
    ``rank(lo) <= b(x) < rank(hi)``, so rows are compared as small integers.
    """
    cuts = []
    for f in range(n_features):
        vals = [g.lo[g.feat == f] for g in groups.values()]
        vals += [g.hi[g.feat == f] for g in groups.values()]
        allv = np.concatenate(vals) if vals else np.empty(0)
        cuts.append(np.unique(allv[np.isfinite(allv)]))
    for g in groups.values():
        lo_r = np.zeros(g.lo.shape, dtype=np.int64)
        hi_r = np.zeros(g.hi.shape, dtype=np.int64)
        for f in np.unique(g.feat):
            sel = g.feat == f
            u = cuts[f]
            lo, hi = g.lo[sel], g.hi[sel]
            # an infinite bound is not a cut: -inf admits every value and +inf none from below
            # (HistGradientBoosting stores threshold +inf for a split that sends only missing
            # values right; its right child's lower bound +inf admits no finite value)
            top = len(u) + 1
            lo_r[sel] = np.where(np.isfinite(lo), np.searchsorted(u, lo) + 1, np.where(lo > 0, top, 0))
            hi_r[sel] = np.where(np.isfinite(hi), np.searchsorted(u, hi) + 1, np.where(hi > 0, top, 0))
        g.lo_r = lo_r.astype(np.int32)
        g.width = np.maximum(hi_r - lo_r, 0).astype(np.uint32)
    return cuts


def bins(X: np.ndarray, cuts: list[np.ndarray], ens: TreeEnsemble) -> np.ndarray:
    """Transposed bin matrix ``(n_features, n)``: cut points below each value; NaN is -1.

    A categorical feature's bin is its category bin (``ens.encode``); -1 marks a
    value that takes the missing-value direction.
    """
    B = np.empty((X.shape[1], X.shape[0]), dtype=np.int32)
    for f, u in enumerate(cuts):
        col = X[:, f]
        if f in ens.categorical and ens.encode is not None:
            B[f] = ens.encode(f, col)
            continue
        B[f] = np.searchsorted(u, col, side="right" if ens.strict else "left")
        nan = np.isnan(col)
        if nan.any():
            B[f, nan] = -1
    return B


def codes(BT: np.ndarray, g: LeafGroup, has_nan: bool) -> np.ndarray:
    """Codes of shape (L, n): bit ``j`` says the row meets leaf ``l``'s slot-``j`` constraint.

    ``has_nan`` says whether ``BT`` holds -1 (values taking the missing direction).
    """
    assert g.lo_r is not None and g.width is not None
    dt = np.uint8 if g.k <= 8 else np.uint16 if g.k <= 16 else np.uint32
    codes = np.zeros((len(g.value), BT.shape[1]), dtype=dt)
    for j in range(g.k):
        rows = np.take(BT, g.feat[:, j], axis=0)  # (L, n)
        diff = (rows - g.lo_r[:, j, None]).view(np.uint32)  # negative -> huge
        sat = diff < g.width[:, j, None]
        if g.cat is not None and g.catsets is not None:
            sel = np.nonzero(g.cat[:, j] >= 0)[0]
            if len(sel):
                r = rows[sel]
                sat[sel] = g.catsets[g.cat[sel, j, None], np.maximum(r, 0)] & (r >= 0)
        if has_nan:
            sat |= (rows == -1) & g.nan_ok[:, j, None]
        codes |= sat.astype(dt) << dt(j)
    return codes


def shap_table(g: LeafGroup) -> np.ndarray:
    r"""Shapley values of each slot for every possible query code of every leaf game.

    For a leaf game ``v(s) = c * 1[s ⊆ code] * P(s)`` the Shapley value of slot
    ``j`` is ``c * sum_{s ⊆ code \ j} w(|s|) (P(s ∪ j) - P(s))`` when ``j`` is in the
    code and ``-c * sum_{s ⊆ code} w(|s|) P(s)`` otherwise: subset sums, done with
    ``O(k 2^k)`` transforms.
    """
    assert g.P is not None
    k, m = g.k, 1 << g.k
    pc = popcount(k)
    w = np.array(
        [math.factorial(p) * math.factorial(k - p - 1) / math.factorial(k) if p < k else 0.0 for p in pc]
    )
    P = g.P
    c = g.value[:, None]
    masks = np.arange(m)
    table = np.empty((len(g.value), m, k))
    zb = transform(w * P, k, "sub")
    for j in range(k):
        bit = 1 << j
        without = (masks & bit) == 0
        a = np.zeros_like(P)
        a[:, without] = w[without] * (P[:, masks[without] | bit] - P[:, without])
        z = transform(a, k, "sub")
        table[:, :, j] = np.where(~without, c * z[:, masks ^ bit], -c * zb)
    return table.reshape(len(g.value) * m, k)


def row_step(width: int) -> int:
    """Rows per block so that a block of ``width`` leaves holds about :data:`BLOCK` elements."""
    return max(1, BLOCK // max(width, 1))


class LeafTables:
    """The leaves of an ensemble with their background tables: the engine behind :class:`FastPD`.

    Parameters
    ----------
    ens : TreeEnsemble
        The parsed model.
    """

    def __init__(self, ens: TreeEnsemble) -> None:
        self.ens = ens
        self.groups, self.constant = extract_leaves(ens.trees, ens.tree_weight)
        self.cuts = rank_intervals(self.groups, ens.n_features)
        self.n_leaves = int(sum(len(g.value) for g in self.groups.values()))

    def bin(self, Xc: np.ndarray) -> tuple[np.ndarray, bool]:
        """Rows' bin codes per split feature, and whether any value is missing (code < 0)."""
        BT = bins(Xc, self.cuts, self.ens)
        return BT, bool((BT < 0).any())

    def fingerprint(self) -> str:
        """A digest of the leaves and cut points: equal for two parses of the same model."""
        h = hashlib.sha256()
        h.update(repr((self.ens.n_features, self.ens.strict, self.layout(), self.constant)).encode())
        for u in self.cuts:
            h.update(np.ascontiguousarray(u, dtype=np.float64).tobytes())
        for g in self.groups.values():
            for a in (g.value, g.feat, g.lo, g.hi, g.nan_ok, g.cat, g.catsets):
                if a is not None:
                    h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()

    def layout(self) -> tuple[tuple[int, int], ...]:
        """``(k, L)`` of every leaf group, in the order of :meth:`background_counts`."""
        return tuple((k, len(g.value)) for k, g in self.groups.items())

    def background_counts(self, Xc: np.ndarray) -> list[np.ndarray]:
        """The background statistic FastPD reads: per leaf group, counts of rows by leaf code.

        Entry ``[l, c]`` of group ``k``'s ``(L, 2^k)`` int64 array counts the rows of ``Xc``
        whose code on leaf ``l`` is ``c`` (bit ``j``: the row meets the path's constraint on
        slot ``j``). A sum over rows: the counts of two row sets add up to those of their union.

        Computed tree by tree on *cells*: a leaf's constraints compare a row's bin only with
        the bounds of its own tree's leaves, so rows in the same cell of the tree's grid
        (:meth:`_tree_plans`) have the same code on every leaf of the tree; each occupied
        cell is coded once (at one of its rows) and counted with its number of rows.
        """
        BT, has_nan = self.bin(Xc)
        n = len(Xc)
        out = [np.zeros((len(g.value), 1 << g.k), dtype=np.int64) for g in self.groups.values()]
        if not n:
            return out
        groups = list(self.groups.values())
        for feats, luts, radix, members in self._tree_plans():
            reps, weight = _cells(BT, feats, luts, radix)
            if reps is None:  # about one row per cell: code every row
                reps, weight = np.arange(n), None
            BTr = BT[:, reps]
            for gi, idx in members:
                _add_counts(out[gi], idx, sub_group(groups[gi], idx), BTr, weight, has_nan)
        return out

    def _tree_plans(
        self,
    ) -> list[tuple[list[int], list[np.ndarray], list[int], list[tuple[int, np.ndarray]]]]:
        """Per tree: its features, the lookup from a row's bin to its cell coordinate, and its leaves.

        A numerical feature's coordinate is the number of the tree's leaf bounds (as bin
        ranks) at or below the row's bin, plus one slot for a missing value; a categorical
        feature's is its category bin (missing: the last slot).
        """
        if hasattr(self, "_plans"):
            return self._plans  # type: ignore[has-type]
        members: dict[int, list[tuple[int, np.ndarray]]] = {}
        bounds: dict[int, dict[int, set[int]]] = {}
        for gi, g in enumerate(self.groups.values()):
            assert g.tree is not None and g.lo_r is not None and g.width is not None
            for t in np.unique(g.tree):
                idx = np.nonzero(g.tree == t)[0]
                members.setdefault(int(t), []).append((gi, idx))
                per = bounds.setdefault(int(t), {})
                for j in range(g.k):
                    for f in np.unique(g.feat[idx, j]):
                        sel = idx[g.feat[idx, j] == f]
                        lo = g.lo_r[sel, j].astype(np.int64)
                        per.setdefault(int(f), set()).update(lo.tolist(), (lo + g.width[sel, j]).tolist())
        plans = []
        for t, per in sorted(bounds.items()):
            feats, luts, radix = [], [], []
            for f, ranks in sorted(per.items()):
                if f in self.ens.categorical:
                    n_bins = int(self.ens.categorical[f])
                    lut = np.arange(n_bins + 1, dtype=np.int64)  # bin b -> b; -1 (missing) -> n_bins
                else:
                    top = len(self.cuts[f]) + 1
                    r = np.sort(np.fromiter(ranks, dtype=np.int64))
                    lut = np.append(np.searchsorted(r, np.arange(top), side="right"), len(r) + 1)
                feats.append(f)
                luts.append(lut)
                radix.append(int(lut.max()) + 1)
            plans.append((feats, luts, radix, members[t]))
        self._plans = plans
        return plans

    def fit(self, Xc: np.ndarray, weights: str) -> float:
        """Compute every leaf's ``p_l(K)`` and Shapley table; return ``v_empty`` without the offset.

        ``weights="empirical"``: shares of the background rows ``Xc`` (FastPD);
        ``"path"``: products of the training cover ratios (path-dependent TreeSHAP).
        """
        counts = self.background_counts(Xc) if weights == "empirical" else None
        return self.fit_counts(counts, len(Xc), weights)

    def fit_counts(self, counts: list[np.ndarray] | None, n_b: int, weights: str) -> float:
        """:meth:`fit` from :meth:`background_counts` (of one table, or merged over partitions)."""
        for i, g in enumerate(self.groups.values()):
            m = 1 << g.k
            L = len(g.value)
            if weights == "empirical":
                assert counts is not None
                sup = transform(counts[i].astype(np.float64), g.k, "sup")
                g.P = sup[:, ::-1] / n_b  # p_l(K) = share satisfying the slots outside K
            else:
                masks = np.arange(m)
                P = np.ones((L, m))
                for j in range(g.k):
                    outside = (masks & (1 << j)) == 0
                    P[:, outside] *= g.ratio[:, j : j + 1]
                g.P = P
            g.shap_table = shap_table(g)
        return self.constant + sum(
            float(g.value @ g.P[:, 0]) for g in self.groups.values() if g.P is not None
        )

    def tree_sum(self, Xc: np.ndarray) -> np.ndarray:
        """Sum of the parsed trees at the rows of ``Xc`` (the prediction without its offset)."""
        out = np.full(len(Xc), self.constant)
        BT, has_nan = self.bin(Xc)
        for g in self.groups.values():
            full = (1 << g.k) - 1
            step = row_step(len(g.value))
            for s in range(0, len(Xc), step):
                c = codes(BT[:, s : s + step], g, has_nan)
                out[s : s + step] += g.value @ (c == full)
        return out

    def pd(
        self, Xc: np.ndarray, wanted: list[tuple[int, ...]], base: float
    ) -> dict[tuple[int, ...], np.ndarray]:
        """``v_S`` at the rows of ``Xc`` for each subset ``S`` in ``wanted`` (``base`` is the offset)."""
        out: dict[tuple[int, ...], np.ndarray] = {}
        code_cache: dict[int, list[np.ndarray]] = {}
        BT, has_nan = self.bin(Xc)
        for S in wanted:
            res = np.full(len(Xc), base + self.constant)
            for k, g in self.groups.items():
                assert g.P is not None
                bits = (np.isin(g.feat, S) @ (1 << np.arange(k))).astype(np.int64)
                const = g.value * g.P[np.arange(len(g.value)), bits]
                if not S:
                    res += const.sum()
                    continue
                step = row_step(len(g.value))
                if k not in code_cache:
                    code_cache[k] = [
                        codes(BT[:, s : s + step], g, has_nan).astype(np.int64)
                        for s in range(0, len(Xc), step)
                    ]
                for i, c in enumerate(code_cache[k]):
                    sl = slice(i * step, i * step + c.shape[1])
                    res[sl] += const @ ((c & bits[:, None]) == bits[:, None])
            out[S] = res
        return out

    def shap(self, Xc: np.ndarray) -> np.ndarray:
        """Interventional SHAP values at the rows of ``Xc``, shape ``(n, d)``."""
        d = self.ens.n_features
        out = np.zeros((d, len(Xc)))
        BT, has_nan = self.bin(Xc)
        for g in self.groups.values():
            assert g.shap_table is not None
            L, k, m = len(g.value), g.k, 1 << g.k
            # table by slot: (k, L * m), so that one flat index serves every slot
            by_slot = np.ascontiguousarray(g.shap_table.reshape(L * m, k).T)
            onehots = [
                sparse.csr_matrix((np.ones(L), (g.feat[:, j], np.arange(L))), shape=(d, L)) for j in range(k)
            ]
            offsets = (np.arange(L, dtype=np.int64) * m)[:, None]
            step = row_step(L)
            for s in range(0, len(Xc), step):
                flat = codes(BT[:, s : s + step], g, has_nan) + offsets
                for j in range(k):
                    out[:, s : s + step] += onehots[j] @ np.take(by_slot[j], flat)
        return out.T.copy()

    def components(self, Xc: np.ndarray, order: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Components ``m_S`` at the rows of ``Xc`` for every subset up to ``order`` (None: all).

        Returns the subsets as rows of feature indices padded with ``d`` (shape
        ``(n_components, width)``) and the values (shape ``(n, n_components)``).
        """
        d = self.ens.n_features
        width = max([min(k, order or k) for k in self.groups] or [1])
        plans = []
        keys = []
        for k, g in self.groups.items():
            pc = popcount(k)
            masks = np.nonzero((pc >= 1) & (pc <= (order or k)))[0]
            L = len(g.value)
            key = np.full((L, len(masks), width), d, dtype=np.int64)
            for mi, mask in enumerate(masks):
                slots = [j for j in range(k) if mask >> j & 1]
                key[:, mi, : len(slots)] = np.sort(g.feat[:, slots], axis=1)
            keys.append(key.reshape(-1, width))
            plans.append((g, masks))
        if not keys:
            return np.zeros((0, width), dtype=np.int64), np.zeros((len(Xc), 0))
        uniq, inverse = np.unique(np.concatenate(keys), axis=0, return_inverse=True)
        inverse = inverse.ravel()
        out = np.zeros((len(Xc), len(uniq)))
        BT, has_nan = self.bin(Xc)
        start = 0
        for g, masks in plans:
            n_sel = len(masks)
            cols = inverse[start : start + len(g.value) * n_sel]
            start += len(g.value) * n_sel
            _add_components(out, g, masks, cols, len(uniq), BT, has_nan)
        return uniq, out


def _add_components(
    out: np.ndarray,
    g: LeafGroup,
    masks: np.ndarray,
    cols: np.ndarray,
    n_cols: int,
    BT: np.ndarray,
    has_nan: bool,
) -> None:
    """Add the Moebius coefficients of one leaf group's games to ``out`` (columns ``cols``)."""
    assert g.P is not None and g.lo_r is not None and g.width is not None
    k, m, L = g.k, 1 << g.k, len(g.value)
    codes_all = np.arange(m)
    sub = (codes_all[:, None] & codes_all[None, :]) == codes_all[None, :]
    n_sel = len(masks)
    # Inclusion-exclusion over each selected set's subsets costs sum 2^|S| per code, the full
    # transform k 2^k: low orders (the audit asks for order <= 2) take the former.
    terms = mobius_terms(masks, max_terms=k * m)
    lc = max(1, BLOCK // (m * (m if terms is None else len(terms[0]))))
    for l0 in range(0, L, lc):
        sl = slice(l0, min(L, l0 + lc))
        Lc = sl.stop - sl.start
        if terms is None:
            G = g.value[sl, None, None] * sub[None] * g.P[sl, None, :]
            mob = transform(G, k, "mob")[:, :, masks]
        else:
            T, signs = terms
            mob = (g.value[sl, None, None] * sub[None, :, T] * g.P[sl, None, T]) @ signs
        mob = mob.reshape(Lc * m, n_sel)
        onehot = sparse.csr_matrix(
            (np.ones(Lc * n_sel), (np.arange(Lc * n_sel), cols[l0 * n_sel : sl.stop * n_sel])),
            shape=(Lc * n_sel, n_cols),
        )
        part = sub_group(g, sl)
        offsets = (np.arange(Lc, dtype=np.int64) * m)[:, None]
        step = row_step(Lc * n_sel)
        for s in range(0, BT.shape[1], step):
            c = codes(BT[:, s : s + step], part, has_nan) + offsets
            vals = mob[c].transpose(1, 0, 2).reshape(c.shape[1], Lc * n_sel)
            out[s : s + step] += np.asarray(vals @ onehot)


def _cells(
    BT: np.ndarray, feats: list[int], luts: list[np.ndarray], radix: list[int]
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """One row of each occupied cell and the cell's row count; ``(None, None)`` when cells do not pay.

    Cells pay when they are fewer than :data:`_CELL_SHARE` of the rows; their ids are mixed-radix numbers
    of the coordinates, counted with a bincount when the grid is small, a hash table otherwise.
    """
    n = BT.shape[1]
    size = math.prod(radix)
    if n < 64 or size >= 1 << 62:
        return None, None
    cell = np.zeros(n, dtype=np.int64)
    stride = 1
    for f, lut, r in zip(feats, luts, radix, strict=True):
        cell += np.take(lut * stride, BT[f])  # bin -1 (missing) takes the lookup's last slot
        stride *= r
    if size <= max(4 * n, 1 << 16):
        counts = np.bincount(cell, minlength=size)
        occupied = np.nonzero(counts)[0]
        if len(occupied) > _CELL_SHARE * n:
            return None, None
        first = np.empty(size, dtype=np.int64)
        first[cell[::-1]] = np.arange(n - 1, -1, -1)  # the last write is a cell's first row
        return first[occupied], counts[occupied]
    labels, uniques = pd.factorize(cell, sort=False)  # a hash table: linear in the rows
    if len(uniques) > _CELL_SHARE * n:
        return None, None
    first = np.empty(len(uniques), dtype=np.int64)
    first[labels[::-1]] = np.arange(n - 1, -1, -1)
    return first, np.bincount(labels, minlength=len(uniques))


def _add_counts(
    out: np.ndarray, idx: np.ndarray, g: LeafGroup, BT: np.ndarray, weight: np.ndarray | None, has_nan: bool
) -> None:
    """Add the codes of the rows (columns of ``BT``, each counted ``weight`` times) of leaves ``idx``."""
    L, m = len(g.value), 1 << g.k
    counts = np.zeros(L * m, dtype=np.int64)
    offsets = (np.arange(L, dtype=np.int64) * m)[:, None]
    step = row_step(L)
    for s in range(0, BT.shape[1], step):
        flat = (codes(BT[:, s : s + step], g, has_nan) + offsets).ravel()
        if weight is None:
            counts += np.bincount(flat, minlength=L * m)
        else:  # integer weights below 2**53 are summed exactly in float64
            w = np.broadcast_to(weight[s : s + step], (L, min(step, BT.shape[1] - s))).ravel()
            counts += np.bincount(flat, weights=w, minlength=L * m).astype(np.int64)
    out[idx] += counts.reshape(L, m)
