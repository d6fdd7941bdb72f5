"""The Error analysis section: the held-out slices where the model errs most, each with an interval.

A shallow decision tree (depth :data:`DEPTH`) learns where the model's decisions
(threshold 0.5) are wrong, from the features and the sensitive columns of one half of
the held-out rows (the *search* half, a keyed hash of each row's values); each leaf is
a slice described by its conditions. The slices' error rates are then measured on the
other half (the *estimate* half), which the search never saw, with a 95% Wilson
interval: selecting the worst slices and measuring them on the same rows would
overstate their error (the winner's curse). A slice with fewer than
:data:`MIN_SLICE` rows of the estimate half is listed as too small to judge.

This follows the error-analysis view of the Responsible AI Toolbox (a tree over the
features to find cohorts with high error), with trustlab's intervals and a held-apart
half for the estimates. Raw mode only: the tree reads individual rows.

References
----------
Nushi, Kamar, Horvitz. "Towards Accountable AI: Hybrid Human-Machine Analyses for
Characterizing System Failure." HCOMP 2018.
Chung, Kraska, Polyzotis, Tae, Whang. "Slice Finder: Automated Data Slicing for Model
Validation." ICDE 2019.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from trustlab._stats import wilson
from trustlab.audit.html import notes_list, table
from trustlab.audit.section import AuditContext, Section, SectionResult
from trustlab.audit.split import row_hash, split_from_hash

__all__ = ["DEPTH", "MIN_SLICE", "ErrorAnalysisSection"]

DEPTH = 3
"""Depth of the slice tree (at most 8 slices, each described by at most 3 conditions)."""
MIN_SLICE = 30
"""Fewest estimate-half rows a slice needs to be judged."""
MAX_LEVELS = 20
"""Levels of a text column the tree may split on (the most frequent; the rest are 'other')."""
MAX_ROWS = 200_000
_KEY = 0xE7707  # added to the audit's seed: the halves' own public key


def _encode(frame: pd.DataFrame) -> tuple[np.ndarray, list[tuple[str, Any, str]], dict[str, list[str]]]:
    """Numbers as they are (missing as NaN); each frequent level of a text column as an indicator.

    Returns the matrix, per matrix column ``(column, level or None, kind)``, and each
    text column's levels (all of them when there are at most two).
    """
    parts, meta = [], []
    levels: dict[str, list[str]] = {}
    for col in frame.columns:
        v = frame[col]
        if pd.api.types.is_numeric_dtype(v) and not pd.api.types.is_bool_dtype(v):
            parts.append(v.to_numpy(dtype=float, na_value=np.nan))
            meta.append((str(col), None, "number"))
            continue
        text = v.astype(object).where(v.notna(), "(missing)").astype(str)
        levels[str(col)] = [str(x) for x in text.value_counts().index]
        for level in text.value_counts().index[:MAX_LEVELS]:
            parts.append((text == level).to_numpy(dtype=float))
            meta.append((str(col), level, "level"))
    return (np.column_stack(parts) if parts else np.zeros((len(frame), 0))), meta, levels


_Condition = tuple[str, str, Any]  # (column, "<=" | ">" | "=" | "!=", value)


def _simplify(path: list[_Condition], levels: dict[str, list[str]]) -> list[str]:
    """A leaf's conditions in words: the tightest bound per number, '= b' for '!= a' of a two-level column."""
    out: list[str] = []
    seen: set[str] = set()
    for col, _, _ in path:
        if col in seen:
            continue
        seen.add(col)
        mine = [(op, v) for c, op, v in path if c == col]
        if col not in levels:
            upper = min((v for op, v in mine if op == "<="), default=None)
            lower = max((v for op, v in mine if op == ">"), default=None)
            if lower is not None and upper is not None:
                out.append(f"{lower:.4g} < {col} ≤ {upper:.4g}")
            elif upper is not None:
                out.append(f"{col} ≤ {upper:.4g}")
            else:
                out.append(f"{col} > {lower:.4g}")
            continue
        equal = [v for op, v in mine if op == "="]
        if equal:
            out.append(f"{col} = {equal[0]}")
            continue
        unequal = [str(v) for op, v in mine if op == "!="]
        rest = [lv for lv in levels[col] if lv not in unequal]
        if len(rest) == 1:
            out.append(f"{col} = {rest[0]}")
        else:
            out.append(f"{col} ∉ {{{', '.join(unequal)}}}" if len(unequal) > 1 else f"{col} ≠ {unequal[0]}")
    return out


def _leaves(tree: Any, meta: list[tuple[str, Any, str]]) -> dict[int, list[_Condition]]:
    """Each leaf's conditions, from the root."""
    t = tree.tree_
    out: dict[int, list[_Condition]] = {}
    stack: list[tuple[int, list[_Condition]]] = [(0, [])]
    while stack:
        node, path = stack.pop()
        if t.children_left[node] < 0:
            out[node] = path
            continue
        (col, level, kind), thr = meta[t.feature[node]], float(t.threshold[node])
        left: _Condition = (col, "!=", level) if kind == "level" else (col, "<=", thr)
        right: _Condition = (col, "=", level) if kind == "level" else (col, ">", thr)
        stack.append((t.children_left[node], [*path, left]))
        stack.append((t.children_right[node], [*path, right]))
    return out


def error_slices(
    frame: pd.DataFrame, wrong: np.ndarray, search: np.ndarray, *, seed: int = 0
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Slices of a shallow tree fitted on the ``search`` rows, measured on the others.

    Parameters
    ----------
    frame : pandas.DataFrame
        The held-out rows' features and sensitive columns.
    wrong : numpy.ndarray of bool
        Whether the model's decision is wrong on each row.
    search : numpy.ndarray of bool
        The rows the tree learns from; the slices are measured on the rest.
    seed : int
        The tree's random state.

    Returns
    -------
    (list of dict, dict)
        One dict per slice, worst first (``conditions``, ``rows``, ``errors``,
        ``error_rate``, ``interval``, ``judged``); and the estimate half's overall
        ``rows``, ``error_rate`` and ``interval``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=4000), "g": rng.choice(["a", "b"], 4000)})
    >>> wrong = rng.random(4000) < np.where(df["x"] > 1, 0.6, 0.1)
    >>> slices, overall = error_slices(df, wrong, rng.random(4000) < 0.5)
    >>> slices[0]["conditions"][0].startswith("1.015 < x"), slices[0]["error_rate"] > 0.4
    (True, True)
    """
    from sklearn.tree import DecisionTreeClassifier

    X, meta, levels = _encode(frame)
    wrong = np.asarray(wrong, dtype=bool)
    est = ~search
    n_est, k_est = int(est.sum()), int(wrong[est].sum())
    overall: dict[str, Any] = {
        "rows": n_est,
        "errors": k_est,
        "error_rate": k_est / n_est if n_est else float("nan"),
        "interval": list(wilson(k_est, n_est)),
    }
    if X.shape[1] == 0 or search.sum() < 2 * MIN_SLICE or len(np.unique(wrong[search])) < 2:
        return [], overall
    leaf_min = max(MIN_SLICE, int(0.02 * search.sum()))
    tree = DecisionTreeClassifier(max_depth=DEPTH, min_samples_leaf=leaf_min, random_state=seed)
    tree.fit(X[search], wrong[search])
    paths = _leaves(tree, meta)
    leaf = tree.apply(X[est])
    slices: list[dict[str, Any]] = []
    for node, conditions in paths.items():
        sel = leaf == node
        n, k = int(sel.sum()), int(wrong[est][sel].sum())
        lo, hi = wilson(k, n)
        slices.append(
            {
                "conditions": _simplify(conditions, levels) or ["all rows"],
                "rows": n,
                "errors": k,
                "error_rate": k / n if n else float("nan"),
                "interval": [lo, hi],
                "judged": n >= MIN_SLICE,
            }
        )
    slices.sort(key=lambda s: (not s["judged"], -float(s["error_rate"] if s["rows"] else -1.0)))
    return slices, overall


class ErrorAnalysisSection(Section):
    """Where the model errs most: slices of the held-out rows with their error rates and intervals.

    See the module notes for the method. Slices whose whole interval lies above the
    overall error rate are named in the report's summary.

    Examples
    --------
    >>> section = ErrorAnalysisSection()
    >>> section.name, section.title
    ('errors', 'Error analysis')
    """

    name = "errors"
    title = "Error analysis"
    budget_weight = 0.0
    raw_only = True  # the tree reads individual rows
    private_reason = (
        "Left out in private mode: the error-analysis tree is grown on individual held-out rows and "
        "trustlab has no differentially private release of it; nothing was spent on this section."
    )

    def compute(self, ctx: AuditContext, budget: Any = None) -> SectionResult:
        """Fit the slice tree on one half of the held-out rows and measure its slices on the other.

        Parameters
        ----------
        ctx : AuditContext
            The audit's context.
        budget : None
            Unused (raw mode only).

        Returns
        -------
        SectionResult
        """
        idx = ctx.test_index
        proba = ctx.proba_test
        if idx.size > MAX_ROWS:
            keep = np.sort(np.random.default_rng(ctx.random_state).choice(idx.size, MAX_ROWS, replace=False))
            idx, proba = idx[keep], proba[keep]
        cols = list(dict.fromkeys([*ctx.features, *ctx.sensitive]))
        frame = ctx.data.iloc[idx][cols].reset_index(drop=True)
        wrong = (proba >= 0.5) != (ctx.y[idx] == 1)
        search = split_from_hash(row_hash(ctx.data.iloc[idx], int(ctx.random_state) + _KEY), 0.5)
        slices, overall = error_slices(frame, wrong, search, seed=int(ctx.random_state))
        above = [s for s in slices if s["judged"] and s["interval"][0] > overall["error_rate"]]
        figures = {
            "overall": overall,
            "slices": slices,
            "worse_than_overall": len(above),
            "depth": DEPTH,
            "min_slice": MIN_SLICE,
            "columns": [str(c) for c in cols],
        }
        notes = [
            f"A decision tree of depth {DEPTH} learnt where the model's decisions (threshold 0.5) are "
            "wrong on one half of the held-out rows (a keyed hash of each row); each leaf is a slice. "
            "Error rates and their 95% Wilson intervals are measured on the other half, which the "
            f"tree never saw. Slices with fewer than {MIN_SLICE} rows there are too small to judge. "
            f"Columns: the model's features and the sensitive columns; text columns by their "
            f"{MAX_LEVELS} most frequent levels.",
        ]
        return SectionResult(self.name, self.title, figures, [], notes)

    def render(self, result: SectionResult) -> str:
        """A table of the slices, worst first, beside the overall error rate.

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            The section's HTML body.
        """
        f = result.figures
        o = f["overall"]

        def pct(v: float) -> str:
            return "–" if not np.isfinite(v) else f"{100 * v:.1f}%"

        head = (
            f"<p>Overall error rate on the estimate half: <strong>{pct(o['error_rate'])}</strong> "
            f"[{pct(o['interval'][0])}, {pct(o['interval'][1])}] of {o['rows']:,} rows. "
            f"<strong>{f['worse_than_overall']}</strong> slice(s) err more than that with the whole "
            "interval above it.</p>"
        )
        if not f["slices"]:
            return (
                head
                + "<p class='empty'>No slice found (too few held-out rows or errors).</p>"
                + notes_list(result.notes)
            )
        rows = []
        for s in f["slices"]:
            lo, hi = s["interval"]
            judged = (
                "above overall"
                if s["judged"] and lo > o["error_rate"]
                else "not above overall"
                if s["judged"]
                else f"too small to judge (< {f['min_slice']} rows)"
            )
            rows.append(
                [
                    " and ".join(s["conditions"]),
                    s["rows"],
                    f"{pct(s['error_rate'])} [{pct(lo)}, {pct(hi)}]",
                    judged,
                ]
            )
        return (
            head
            + table(["slice", "rows", "error rate [95% interval]", "verdict"], rows)
            + notes_list(result.notes)
            + "<p class='rule'>Worst slices first; the tree is a search, the intervals are the evidence.</p>"
        )
