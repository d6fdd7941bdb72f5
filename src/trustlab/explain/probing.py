"""SAE probes vs baseline probes on activations, in the four hard probing regimes.

Kantamneni et al. ask whether sparse-autoencoder latents make better probing features than the
raw activations. A probe is trained on the ``k`` SAE latents whose class means differ most
(then an L1 logistic regression), beside five baselines on the raw activations (L2 logistic
regression, PCA + logistic regression, k-nearest neighbours, XGBoost, MLP), each with ten
hyperparameter values chosen by validation AUC. The regimes are data scarcity, class imbalance,
label noise and covariate shift; the "quiver of arrows" reports the test AUC of the method with
the best validation AUC, with and without the SAE probes in the quiver. See
docs/explain/sae-probing.md.

References
----------
.. [1] Kantamneni, Engels, Rajamanoharan, Tegmark, Nanda. "Are Sparse Autoencoders Useful? A
   Case Study in Sparse Probing". ICML 2025 (arXiv:2502.16681).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.explain._probing_arms import (
    TopMeanDifference,
    _auc,
    _estimator,
    _fit_predict,
    _folds,
    _grid,
    _validation_auc,
)
from trustlab.explain.sae_metrics import binary_labels

__all__ = [
    "BASELINE_METHODS",
    "REGIMES",
    "TopMeanDifference",
    "compare_probes",
    "default_regime_values",
    "summarize_probes",
]

BASELINE_METHODS = ("logreg", "pca", "knn", "xgboost", "mlp")
REGIMES = ("standard", "scarcity", "imbalance", "noise", "shift")
#: regimes whose validation data is faithful to the test data: compared by the quiver of arrows;
#: the others (corrupted validation labels, shifted test inputs) head to head, as in the paper
QUIVER_REGIMES = ("standard", "scarcity", "imbalance")


def default_regime_values(regime: str) -> list[float]:
    """The paper's grid of each regime's parameter (Section 3.2).

    ``scarcity``: 20 training sizes log-spaced in [2, 1024] (rounded, duplicates dropped);
    ``imbalance``: 19 positive ratios in [0.05, 0.95]; ``noise``: 11 flipped fractions in
    [0, 0.5]; ``standard`` and ``shift``: one cell (``0``).

    Parameters
    ----------
    regime : {"standard", "scarcity", "imbalance", "noise", "shift"}
        The regime.

    Returns
    -------
    list of float
        The regime's parameter values.

    Examples
    --------
    >>> default_regime_values("noise")[:3]
    [0.0, 0.05, 0.1]
    """
    if regime == "scarcity":
        return [float(v) for v in np.unique(np.round(np.logspace(np.log10(2), np.log10(1024), 20)))]
    if regime == "imbalance":
        return [round(float(v), 4) for v in np.linspace(0.05, 0.95, 19)]
    if regime == "noise":
        return [round(float(v), 4) for v in np.linspace(0.0, 0.5, 11)]
    if regime in ("standard", "shift"):
        return [0.0]
    raise ParameterError(f"regime must be one of {REGIMES}, got {regime!r}.", argument="regimes")


def _encoder(encode: Any) -> Callable[[np.ndarray], np.ndarray]:
    if encode is None:
        return lambda X: X  # no SAE: baselines only
    if hasattr(encode, "transform"):
        return lambda X: np.asarray(encode.transform(X), dtype=float)
    if callable(encode):
        return lambda X: np.asarray(encode(X), dtype=float)
    raise ParameterError(
        f"encode must be a fitted SAE (with transform), a callable X -> latents, or None; got "
        f"{type(encode).__name__}.",
        argument="encode",
    )


def _regime_split(
    regime: str,
    value: float,
    y: np.ndarray,
    pool: np.ndarray,
    test: np.ndarray,
    n_max: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Training rows, their (possibly corrupted) labels, and test rows for one cell."""
    pos, neg = pool[y[pool] == 1], pool[y[pool] == 0]
    if regime == "scarcity":
        n = int(min(value, len(pool)))
        first = [rng.choice(pos), rng.choice(neg)]  # both classes present (n = 2: one of each)
        rest = rng.permutation(np.setdiff1d(pool, first))[: max(n - 2, 0)]
        train = np.concatenate([first, rest])[:n]
        return train, y[train], test
    if regime == "imbalance":

        def draw(p: np.ndarray, q: np.ndarray, n_cap: int) -> np.ndarray:
            n = min(n_cap, int(len(p) / value), int(len(q) / (1 - value)))
            n1 = min(max(1, round(value * n)), n - 1)
            return np.concatenate([rng.choice(p, n1, replace=False), rng.choice(q, n - n1, replace=False)])

        train = draw(pos, neg, n_max)
        tpos, tneg = test[y[test] == 1], test[y[test] == 0]
        return train, y[train], draw(tpos, tneg, len(test))
    train = rng.permutation(pool)[:n_max]
    labels = y[train].copy()
    if regime == "noise":
        flip = rng.choice(len(train), round(value * len(train)), replace=False)
        labels[flip] = 1 - labels[flip]
    return train, labels, test


def _check_values(regime: str, values: Any) -> list[float]:
    try:
        vals = [float(v) for v in values]
    except (TypeError, ValueError):
        vals = []
    ok = bool(vals) and all(np.isfinite(vals))
    if regime == "scarcity":
        ok = ok and all(v >= 2 for v in vals)
    elif regime == "imbalance":
        ok = ok and all(0 < v < 1 for v in vals)
    elif regime == "noise":
        ok = ok and all(0 <= v <= 0.5 for v in vals)
    if not ok:
        raise ParameterError(
            f"regimes[{regime!r}] must be a non-empty list of numbers (scarcity: sizes >= 2; imbalance: "
            f"ratios in (0, 1); noise: fractions in [0, 0.5]), got {values!r}.",
            argument="regimes",
        )
    return vals


def compare_probes(
    X: Any,
    y: Any,
    encode: Any = None,
    *,
    regimes: Any = ("scarcity", "imbalance", "noise"),
    methods: Any = BASELINE_METHODS,
    sae_ks: Any = (16, 128),
    X_shift: Any = None,
    y_shift: Any = None,
    n_seeds: int = 1,
    n_train: int = 1024,
    n_hparams: int = 10,
    test_size: float = 0.2,
    random_state: int = 0,
) -> pd.DataFrame:
    """Probe activations with SAE latents and with baselines across the paper's regimes.

    Parameters
    ----------
    X : array-like of shape (n_samples, d)
        Activations (the paper's last-token residual stream).
    y : array-like of shape (n_samples,)
        A binary target.
    encode : fitted SAE, callable or None
        ``encode.transform(X)`` or ``encode(X)`` gives the latents ``Z``; ``None`` runs the
        baselines only.
    regimes : iterable of str or dict, default=("scarcity", "imbalance", "noise")
        Regimes from :data:`REGIMES`, each with the paper's grid (:func:`default_regime_values`),
        or a dict ``{regime: values}``. ``shift`` needs ``X_shift`` and ``y_shift``.
    methods : iterable of str, default=BASELINE_METHODS
        Baselines on the raw activations: ``logreg`` (L2), ``pca`` (+ unregularised logistic
        regression), ``knn``, ``xgboost`` (scikit-learn histogram boosting when xgboost is not
        installed), ``mlp``.
    sae_ks : iterable of int, default=(16, 128)
        Latents per SAE probe (the paper's ``k``; clipped to the SAE's width).
    X_shift, y_shift : array-like, optional
        A covariate-shifted test set for the ``shift`` regime (probes train on ``X``).
    n_seeds : int, default=1
        Repetitions of every cell with fresh draws.
    n_train : int, default=1024
        Training rows in the non-scarcity regimes (the paper's 1,024).
    n_hparams : int, default=10
        Hyperparameter values per method (the paper's 10; smaller is faster).
    test_size : float, default=0.2
        Fraction of ``X`` held out for testing (stratified) before any regime draws.
    random_state : int, default=0
        Seeds splits, draws, grids and estimators.

    Returns
    -------
    pandas.DataFrame
        One row per (regime, value, seed, method): ``family`` (``baseline``, ``sae`` or
        ``quiver``), ``k`` (SAE probes), ``hparams``, ``val_auc``, ``test_auc``, ``n_train``.
        Two quiver rows per cell: ``quiver_baselines`` and ``quiver_with_sae``, the test AUC of
        the method with the best validation AUC (ties go to the SAE probe, as in the paper).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 5)); y = (X[:, 0] > 0).astype(int)
    >>> t = compare_probes(X, y, np.abs, regimes={"noise": [0.1]}, methods=["logreg"],
    ...                    sae_ks=[2], n_hparams=3)
    >>> t["method"].tolist()
    ['logreg', 'sae_k2', 'quiver_baselines', 'quiver_with_sae']
    """
    X = check_numeric_array(X, "X", ndim=2, min_rows=10)
    y01 = binary_labels(y, X.shape[0], "y")
    enc = _encoder(encode)
    plan = _check_regimes(regimes)
    methods = _check_methods(methods)
    ks = _check_ks(sae_ks) if encode is not None else []
    for name, val, low in (("n_seeds", n_seeds, 1), ("n_train", n_train, 4), ("n_hparams", n_hparams, 1)):
        if not isinstance(val, numbers.Integral) or isinstance(val, bool) or val < low:
            raise ParameterError(f"{name} must be an integer >= {low}, got {val!r}.", argument=name)
    if not isinstance(test_size, numbers.Real) or not 0.05 <= test_size <= 0.5:
        raise ParameterError(
            f"test_size must be a fraction in [0.05, 0.5], got {test_size!r}.", argument="test_size"
        )
    n_rare = int(min(y01.sum(), len(y01) - y01.sum()))
    if n_rare * test_size < 2 - 1e-9:  # the stratified test split needs two rows of each class
        raise DataError(
            f"y must hold at least {math.ceil(2 / test_size - 1e-9)} rows of each class so that the test "
            f"split (test_size={test_size}) holds two of each; the rarer class has {n_rare}.",
            argument="y",
        )
    Z = _latents(enc, X, "encode") if ks else None
    shift = None
    if "shift" in plan:
        if X_shift is None or y_shift is None:
            raise ParameterError(
                "the shift regime needs X_shift and y_shift (a covariate-shifted test set); pass them or "
                "drop 'shift' from regimes.",
                argument="X_shift",
            )
        Xs = check_numeric_array(X_shift, "X_shift", ndim=2, min_rows=2)
        if Xs.shape[1] != X.shape[1]:
            raise DataError(
                f"X_shift must have {X.shape[1]} columns like X, got {Xs.shape[1]}.", argument="X_shift"
            )
        shift = (
            Xs,
            binary_labels(y_shift, Xs.shape[0], "y_shift"),
            _latents(enc, Xs, "encode") if ks else None,
        )
    rng = make_generator(random_state)
    idx = np.arange(X.shape[0])
    pool, test = train_test_split(idx, test_size=test_size, stratify=y01, random_state=random_state)
    rows: list[dict] = []
    with threadpool_limits(1):  # thousands of tiny fits: native thread pools only add overhead
        for regime, values in plan.items():
            rows.extend(_run_regime(regime, values, X, Z, y01, shift, pool, test, methods, ks, n_seeds,
                                    n_train, n_hparams, rng))  # fmt: skip
    return pd.DataFrame(rows)


def _run_regime(
    regime: str, values: list[float], X: np.ndarray, Z: np.ndarray | None, y01: np.ndarray, shift: Any,
    pool: np.ndarray, test: np.ndarray, methods: list[str], ks: list[int], n_seeds: int, n_train: int,
    n_hparams: int, rng: np.random.Generator,
) -> list[dict]:  # fmt: skip
    rows: list[dict] = []
    for value in values:
        for seed in range(n_seeds):
            train, labels, test_rows = _regime_split(regime, value, y01, pool, test, n_train, rng)
            if regime == "shift" and shift is not None:
                feats = {"raw": (X[train], shift[0]), "sae": (Z[train], shift[2]) if Z is not None else None}
                y_test = shift[1]
            else:
                feats = {
                    "raw": (X[train], X[test_rows]),
                    "sae": (Z[train], Z[test_rows]) if Z is not None else None,
                }
                y_test = y01[test_rows]
            cell = {"regime": regime, "value": value, "seed": seed, "n_train": len(train)}
            rows.extend(_run_cell(cell, feats, labels, y_test, methods, ks, n_hparams, rng))
    return rows


def _latents(enc: Callable[[np.ndarray], np.ndarray], X: np.ndarray, name: str) -> np.ndarray:
    Z = np.asarray(enc(X), dtype=float)
    if Z.ndim != 2 or Z.shape[0] != X.shape[0] or not np.all(np.isfinite(Z)):
        raise ParameterError(
            f"{name} must map X ({X.shape[0]} rows) to a finite 2-D array of latents with one row per "
            f"input row, got shape {Z.shape}.",
            argument=name,
        )
    return Z


def _run_cell(
    cell: dict, feats: dict, labels: np.ndarray, y_test: np.ndarray, methods: list[str], ks: list[int],
    n_hparams: int, rng: np.random.Generator,
) -> list[dict]:  # fmt: skip
    seed = int(rng.integers(2**31 - 1))
    folds = _folds(labels, seed)
    arms = [(m, "baseline", 0) for m in methods] + [("sae", "sae", k) for k in ks]
    out = []
    for method, family, k in arms:
        Xtr, Xte = feats["raw"] if family == "baseline" else feats["sae"]
        grid = _grid(method, len(labels), Xtr.shape[1], n_hparams, rng)
        vals = [_validation_auc(method, hp, k, Xtr, labels, folds, seed) for hp in grid]
        best = int(np.nanargmax(vals)) if not np.all(np.isnan(vals)) else 0
        est = _estimator(method, grid[best], k, len(labels), Xtr.shape[1], seed)
        test_auc = _auc(y_test, _fit_predict(est, Xtr, labels, Xte))
        name = method if family == "baseline" else f"sae_k{k}"
        out.append({**cell, "method": name, "family": family, "k": k or None, "hparams": repr(grid[best]),
                    "val_auc": vals[best], "test_auc": test_auc})  # fmt: skip
    arms_out = list(out)
    for label, pool in (("quiver_baselines", arms_out[: len(methods)]), ("quiver_with_sae", arms_out)):
        # best validation AUC; ties go to the SAE probe (paper appendix E.1), i.e. to the later arm
        scores = np.array([-np.inf if np.isnan(r["val_auc"]) else r["val_auc"] for r in pool])
        pick = pool[len(scores) - 1 - int(np.argmax(scores[::-1]))]
        out.append({**cell, "method": label, "family": "quiver", "k": pick["k"], "hparams": pick["method"],
                    "val_auc": pick["val_auc"], "test_auc": pick["test_auc"]})  # fmt: skip
    return out


def _check_regimes(regimes: Any) -> dict[str, list[float]]:
    if isinstance(regimes, str):
        regimes = [regimes]
    items = regimes.items() if isinstance(regimes, dict) else [(r, None) for r in (regimes or [])]
    plan = {}
    for regime, values in items:
        if regime not in REGIMES:
            raise ParameterError(
                f"regimes must name regimes from {REGIMES}, got {regime!r}.", argument="regimes"
            )
        plan[regime] = default_regime_values(regime) if values is None else _check_values(regime, values)
    if not plan:
        raise ParameterError(f"regimes must name at least one of {REGIMES}.", argument="regimes")
    return plan


def _check_methods(methods: Any) -> list[str]:
    methods = [methods] if isinstance(methods, str) else list(methods or [])
    bad = [m for m in methods if m not in BASELINE_METHODS]
    if not methods or bad:
        raise ParameterError(
            f"methods must be a non-empty list from {BASELINE_METHODS}, got {methods!r}.", argument="methods"
        )
    return methods


def _check_ks(sae_ks: Any) -> list[int]:
    try:
        ks = [int(k) for k in sae_ks if float(k) == int(k)]
    except (TypeError, ValueError):
        ks = []
    if not ks or len(ks) != len(list(sae_ks)) or any(k < 1 for k in ks):
        raise ParameterError(
            f"sae_ks must be positive integers (latents per probe), got {sae_ks!r}.", argument="sae_ks"
        )
    return ks


def summarize_probes(
    table: pd.DataFrame, *, sae_method: str | None = None, by_value: bool = True
) -> pd.DataFrame:
    """The gain from adding SAE probes, per regime and value, averaged over seeds.

    Quiver regimes (standard, scarcity, imbalance): ``quiver_with_sae - quiver_baselines``.
    Head-to-head regimes (noise, shift; their validation data is unfaithful to the test data):
    the SAE probe with the most latents (or ``sae_method``) minus ``logreg``, as in the paper.

    Parameters
    ----------
    table : DataFrame
        The output of :func:`compare_probes` (with an SAE).
    sae_method : str, optional
        The SAE arm of the head-to-head comparison (default: the largest ``k``).
    by_value : bool, default=True
        One row per (regime, value); ``False`` pools each regime's values (the paper's averages
        over the regime's grid).

    Returns
    -------
    pandas.DataFrame
        ``regime``, ``value`` (when ``by_value``), ``n_cells``, ``mean_gain``, ``se_gain``
        (standard error over the cells; NaN for one cell) and ``win_rate`` (cells where the SAE
        side has the higher test AUC; ties count half).

    Examples
    --------
    A hand-made table of two seeds in the ``standard`` regime:

    >>> import pandas as pd
    >>> table = pd.DataFrame(
    ...     [(0, "sae_k16", "sae", 16, 0.78), (0, "quiver_baselines", "quiver", None, 0.80),
    ...      (0, "quiver_with_sae", "quiver", 16, 0.82), (1, "sae_k16", "sae", 16, 0.70),
    ...      (1, "quiver_baselines", "quiver", None, 0.75), (1, "quiver_with_sae", "quiver", 16, 0.74)],
    ...     columns=["seed", "method", "family", "k", "test_auc"],
    ... ).assign(regime="standard", value=0.0)
    >>> summary = summarize_probes(table)
    >>> summary[["regime", "n_cells", "win_rate"]].to_dict("records")
    [{'regime': 'standard', 'n_cells': 2, 'win_rate': 0.5}]
    >>> round(float(summary["mean_gain"].iloc[0]), 3)
    0.005
    """
    need = {"regime", "value", "seed", "method", "family", "k", "test_auc"}
    if not isinstance(table, pd.DataFrame) or not need <= set(table.columns):
        raise ParameterError("table must be the DataFrame returned by compare_probes.", argument="table")
    sae = table[table["family"] == "sae"]
    if sae.empty:
        raise ParameterError("table has no SAE probes; call compare_probes with encode.", argument="table")
    if sae_method is None:
        sae_method = str(sae["method"].to_numpy()[int(np.argmax(sae["k"].to_numpy(dtype=float)))])
    wide = table.pivot_table(index=["regime", "value", "seed"], columns="method", values="test_auc")
    out = []
    for key, grp in wide.groupby(level=[0, 1] if by_value else [0]):
        regime = key[0]
        if regime in QUIVER_REGIMES:
            gain = grp["quiver_with_sae"] - grp["quiver_baselines"]
        else:
            if "logreg" not in grp or sae_method not in grp:
                raise ParameterError(
                    f"head-to-head regime {regime!r} needs 'logreg' and {sae_method!r} in the table.",
                    argument="sae_method",
                )
            gain = grp[sae_method] - grp["logreg"]
        g = gain.to_numpy(dtype=float)
        se = float(g.std(ddof=1) / np.sqrt(len(g))) if len(g) > 1 else float("nan")
        win = float(np.mean((g > 0) + 0.5 * (g == 0)))
        head = {"regime": regime, "value": key[1]} if by_value else {"regime": regime}
        out.append({**head, "n_cells": len(g), "mean_gain": float(g.mean()),
                    "se_gain": se, "win_rate": win})  # fmt: skip
    return pd.DataFrame(out)
