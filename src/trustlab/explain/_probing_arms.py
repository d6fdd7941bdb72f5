"""Probe arms of :mod:`trustlab.explain.probing`.

Hyperparameter grids (Kantamneni et al. Appendix C.3), estimators, the Eq. 1 latent selection
and Table 4's validation strategy.

References
----------
.. [1] Kantamneni, Engels, Rajamanoharan, Tegmark, Nanda. "Are Sparse Autoencoders Useful? A
   Case Study in Sparse Probing". ICML 2025 (arXiv:2502.16681).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
from sklearn.neighbors import KNeighborsClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline


class TopMeanDifference(TransformerMixin, BaseEstimator):
    """Keep the ``k`` columns with the largest absolute class-mean difference (paper Eq. 1).

    Parameters
    ----------
    k : int, default=16
        Columns kept (clipped to the width of ``X``).

    Attributes
    ----------
    columns_ : ndarray of int
        The kept columns, largest difference first.

    Examples
    --------
    >>> Z = np.array([[0, 1.0], [0, 1], [1, 0], [1, 0]]); y = [0, 0, 1, 1]
    >>> TopMeanDifference(k=1).fit(Z, y).columns_.tolist()
    [0]
    """

    def __init__(self, k: int = 16) -> None:
        self.k = k

    def fit(self, X: Any, y: Any) -> TopMeanDifference:
        """Rank the columns of ``X`` by ``|mean(X | y = 1) - mean(X | y = 0)|``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features (e.g. SAE latents).
        y : array-like of shape (n_samples,)
            Binary labels (1 is the positive class); with one class, every difference is 0.

        Returns
        -------
        TopMeanDifference
            ``self``, with ``columns_``.
        """
        X, y = np.asarray(X, dtype=float), np.asarray(y)
        if np.unique(y).size < 2:
            diff = np.zeros(X.shape[1])
        else:
            diff = X[y == 1].mean(0) - X[y != 1].mean(0)
        self.columns_ = np.argsort(-np.abs(diff), kind="stable")[: min(int(self.k), X.shape[1])]
        return self

    def transform(self, X: Any) -> np.ndarray:
        """The kept columns of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the width seen in :meth:`fit`.

        Returns
        -------
        numpy.ndarray of shape (n_samples, len(columns_))
            ``X[:, columns_]`` as floats.
        """
        return np.asarray(X, dtype=float)[:, self.columns_]


class _Constant(ClassifierMixin, BaseEstimator):
    """The training prior, for a training set with one class (tiny CV folds)."""

    def fit(self, X: Any, y: Any) -> _Constant:
        self.p_ = float(np.mean(np.asarray(y) == 1))
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        p = np.full(len(X), self.p_)
        return np.c_[1 - p, p]


def _log_ints(high: int, n: int) -> list[int]:
    high = max(int(high), 1)
    return sorted({int(v) for v in np.round(np.logspace(0, np.log10(high), n))})


def _grid(method: str, n: int, d: int, n_hparams: int, rng: np.random.Generator) -> list[dict]:
    """Appendix C.3's hyperparameters for ``n`` training rows of width ``d``."""
    if method in ("logreg", "sae"):
        return [{"C": float(c)} for c in np.logspace(5, -5, n_hparams)]
    if method == "pca":
        return [{"n_components": c} for c in _log_ints(min(n, d, 100), n_hparams)]
    if method == "knn":
        return [{"n_neighbors": c} for c in _log_ints(min(100, max(n - 1, 1)), n_hparams)]
    if method == "xgboost":
        return [
            {
                "n_estimators": int(rng.choice([50, 100, 150, 200, 250])),
                "max_depth": int(rng.integers(2, 6)),
                "learning_rate": float(10 ** rng.uniform(-3, -1)),
                "subsample": float(rng.uniform(0.7, 1.0)),
                "colsample_bytree": float(rng.uniform(0.7, 1.0)),
                "reg_alpha": float(10 ** rng.uniform(-3, 1)),
                "reg_lambda": float(10 ** rng.uniform(-3, 1)),
                "min_child_weight": int(rng.integers(1, 10)),
            }
            for _ in range(n_hparams)
        ]
    # mlp
    return [
        {
            "hidden_layer_sizes": (int(rng.choice([16, 32, 64])),) * int(rng.integers(1, 4)),
            "learning_rate_init": float(rng.choice(np.logspace(-4, -2, 5))),
            "alpha": float(rng.choice(np.logspace(-5, -2, 5))),
        }
        for _ in range(n_hparams)
    ]


def _estimator(method: str, hp: dict, k: int, n_train: int, d: int, seed: int) -> Any:
    if method == "logreg":
        return LogisticRegression(C=hp["C"], max_iter=1000)
    if method == "sae":
        return make_pipeline(
            TopMeanDifference(k), LogisticRegression(C=hp["C"], l1_ratio=1.0, solver="liblinear")
        )
    if method == "pca":
        nc = max(1, min(hp["n_components"], n_train, d))
        return make_pipeline(PCA(nc, random_state=seed), LogisticRegression(C=np.inf, max_iter=1000))
    if method == "knn":
        return KNeighborsClassifier(max(1, min(hp["n_neighbors"], n_train)))
    if method == "xgboost":
        try:
            import xgboost
        except ImportError:  # the `boost` extra is absent: sklearn's histogram boosting instead
            from sklearn.ensemble import HistGradientBoostingClassifier

            return HistGradientBoostingClassifier(
                max_iter=hp["n_estimators"], max_depth=hp["max_depth"], learning_rate=hp["learning_rate"],
                l2_regularization=hp["reg_lambda"], random_state=seed,
            )  # fmt: skip
        return xgboost.XGBClassifier(**hp, n_jobs=1, random_state=seed, verbosity=0)
    return MLPClassifier(**hp, max_iter=200, random_state=seed)


def _fit_predict(est: Any, X: np.ndarray, y: np.ndarray, X_eval: np.ndarray) -> np.ndarray:
    if np.unique(y).size < 2:
        est = _Constant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        return est.fit(X, y).predict_proba(X_eval)[:, 1]


def _auc(y: np.ndarray, s: np.ndarray) -> float:
    return float(roc_auc_score(y, s)) if np.unique(y).size == 2 else float("nan")


def _folds(y: np.ndarray, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Table 4's validation strategy for ``n = len(y)`` training rows."""
    n = len(y)
    idx = np.arange(n)
    if n <= 3:
        return [(idx, idx)]
    if n <= 12:  # leave-two-out: disjoint held-out pairs, predictions pooled
        return list(KFold(n // 2, shuffle=True, random_state=seed).split(idx))
    if n <= 128:
        if np.bincount(y, minlength=2).min() >= 6:
            return list(StratifiedKFold(6, shuffle=True, random_state=seed).split(idx, y))
        return list(KFold(6, shuffle=True, random_state=seed).split(idx))
    tr, va = train_test_split(idx, test_size=0.2, stratify=y, random_state=seed)
    return [(tr, va)]


def _validation_auc(
    method: str, hp: dict, k: int, X: np.ndarray, y: np.ndarray, folds: list, seed: int
) -> float:
    if len(folds) == 1:
        tr, va = folds[0]
        est = _estimator(method, hp, k, len(tr), X.shape[1], seed)
        return _auc(y[va], _fit_predict(est, X[tr], y[tr], X[va]))
    scores = np.empty(len(y))
    for tr, va in folds:
        est = _estimator(method, hp, k, len(tr), X.shape[1], seed)
        scores[va] = _fit_predict(est, X[tr], y[tr], X[va])
    return _auc(y, scores)  # out-of-fold predictions pooled (folds of 2 rows have no AUC of their own)
