"""Post-processing to multiaccuracy and multicalibration on (proxy) groups.

Private to :mod:`trustlab.fairness.multicalibration`, which re-exports
:class:`MultiaccuracyBoost` and :class:`MulticalibrationBoost`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator

from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab.errors import DataError, NotFittedError
from trustlab.fairness._inputs import binary_labels
from trustlab.fairness._mc_inputs import _LEVELS, _group_matrix, _levels, _probs


def _predict_inputs(est: Any, fitted_attr: str, X: Any, groups: Any) -> tuple[np.ndarray, np.ndarray]:
    """Check ``est`` is fitted and read ``predict``'s probabilities and group matrix."""
    if not hasattr(est, fitted_attr):
        raise NotFittedError(
            f"{type(est).__name__} is not fitted; call fit(X, y, groups=...) first.", argument="self"
        )
    f = _probs(X, "X")
    g, _ = _group_matrix(groups, f.size, "groups")
    if g.shape[1] != est.n_groups_:
        raise DataError(f"groups has {g.shape[1]} columns; fit saw {est.n_groups_}.", argument="groups")
    return f, g


class MultiaccuracyBoost(ParamsValidationMixin, BaseEstimator):
    """Post-process probabilities to be multiaccurate on (proxy) groups.

    ``method="lstsq"`` (the authors' code, after Roth's lecture notes): one
    least-squares step ``lambda = pinv(G) (y - f)``, ``f' = f + G lambda`` with ``G``
    the (n, k) group-indicator matrix (plus a constant column for marginal
    accuracy), so that ``G^T (y - f') = 0``: every group's mean residual is 0 on the
    fitting data. ``method="iterative"``: while some group's
    ``|mean_i g_ij (y_i - f_i)| > alpha``, add the worst group's mean residual on its
    members and project to [0, 1].

    Parameters
    ----------
    method : {"lstsq", "iterative"}, default "lstsq"
        One-shot least squares or the iterative patch algorithm.
    alpha : float, default 0.01
        Target MA violation (``iterative`` only).
    add_intercept : bool, default True
        Add the all-ones group (``lstsq`` only).
    clip : bool, default True
        Clip outputs to [0, 1] (a library choice; the authors' code does not clip,
        so with ``clip=False`` outputs may leave [0, 1]).
    max_iter : int, default 1000
        Maximum patches (``iterative`` only).

    Attributes
    ----------
    coef_ : numpy.ndarray
        ``lambda`` (``lstsq``) per group (intercept last).
    patches_ : list of (int, float)
        ``(group, shift)`` in order (``iterative``).
    n_groups_ : int
        Number of groups seen in ``fit``.

    References
    ----------
    B. Bharti et al., "Multiaccuracy and Multicalibration via Proxy Groups", ICML 2025
    (Section 5); M. P. Kim, A. Ghorbani, J. Zou, "Multiaccuracy", AIES 2019.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> g = rng.integers(0, 2, (2000, 2)); y = rng.binomial(1, 0.3 + 0.4 * g[:, 0])
    >>> f = np.full(2000, 0.5)
    >>> ma = MultiaccuracyBoost(clip=False).fit(f, y, groups=g)
    >>> from trustlab.fairness import multiaccuracy_violation
    >>> bool(multiaccuracy_violation(y, ma.predict(f, groups=g), groups=g).max() < 1e-12)
    True
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "method": [Options({"lstsq", "iterative"})],
        "alpha": [Interval(numbers.Real, 0, 1, closed="neither")],
        "add_intercept": ["boolean"],
        "clip": ["boolean"],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        method: str = "lstsq",
        *,
        alpha: float = 0.01,
        add_intercept: bool = True,
        clip: bool = True,
        max_iter: int = 1000,
    ) -> None:
        self.method = method
        self.alpha = alpha
        self.add_intercept = add_intercept
        self.clip = clip
        self.max_iter = max_iter

    def _design(self, g: np.ndarray) -> np.ndarray:
        return np.column_stack([g, np.ones(g.shape[0])]) if self.add_intercept else g

    def fit(self, X: Any, y: Any, *, groups: Any) -> MultiaccuracyBoost:
        """Fit on the predictor's probabilities ``X`` with labels ``y`` and (proxy) ``groups``.

        Parameters
        ----------
        X : array-like of shape (n_samples,)
            Probabilities ``f(X)`` of the model to post-process.
        y : array-like of shape (n_samples,)
            Labels, 0 or 1 (both present).
        groups : array-like of shape (n_samples, n_groups) or (n_samples,)
            0/1 (proxy) memberships, no missing values.

        Returns
        -------
        MultiaccuracyBoost
        """
        self._validate_params()
        f = _probs(X, "X")
        yy = binary_labels(y, "y", n=f.size).astype(float)
        g, _ = _group_matrix(groups, f.size, "groups")
        self.n_groups_ = g.shape[1]
        if self.method == "lstsq":
            self.coef_ = np.linalg.pinv(self._design(g)) @ (yy - f)
            self.patches_: list[tuple[int, float]] = []
            return self
        self.coef_ = np.zeros(0)
        self.patches_ = []
        cur = f.copy()
        size = g.sum(axis=0)
        for _ in range(int(self.max_iter)):
            resid = g.T @ (yy - cur) / f.size
            j = int(np.argmax(np.abs(resid)))
            if abs(resid[j]) <= self.alpha:
                break
            shift = float(resid[j] * f.size / size[j])
            self.patches_.append((j, shift))
            cur = self._apply(cur, g, j, shift)
        return self

    def _apply(self, cur: np.ndarray, g: np.ndarray, j: int, shift: float) -> np.ndarray:
        out = cur + shift * g[:, j]
        return np.clip(out, 0.0, 1.0)

    def predict(self, X: Any, *, groups: Any) -> np.ndarray:
        """Post-processed probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples,)
            Probabilities of the original model.
        groups : array-like of shape (n_samples, n_groups) or (n_samples,)
            (Proxy) memberships, same columns as in ``fit``.

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
        """
        f, g = _predict_inputs(self, "n_groups_", X, groups)
        if self.method == "lstsq":
            out = f + self._design(g) @ self.coef_
            return np.clip(out, 0.0, 1.0) if self.clip else out
        cur = f.copy()
        for j, shift in self.patches_:
            cur = self._apply(cur, g, j, shift)
        return cur


class MulticalibrationBoost(ParamsValidationMixin, BaseEstimator):
    """Post-process probabilities to be multicalibrated on (proxy) groups (MCBoost).

    As in the authors' code: discretise ``f`` to ``m`` levels; while the worst
    squared-error violation ``max_j MC2(f, g_j) >= alpha``, pick the (level ``v``,
    group ``j``) cell maximising ``P(f = v, g_j = 1) (E[Y | f = v, g_j = 1] - v)^2`` and
    move its rows to the grid point nearest their mean label. Each patch moves a
    cell to a grid value at least as close to its mean as ``v``, so the fitting
    MSE never increases. :meth:`predict` replays the recorded patches in order.

    Divergence: cells whose rounded mean equals ``v`` (no-op patches) are skipped
    when choosing the next cell; the authors' loop would re-pick such a cell until
    its MSE-stall rule fired (same output, wasted rounds).

    Parameters
    ----------
    alpha : float, default 0.0025
        Target for the worst squared-error violation ``MC2`` (the authors pass the
        square of an l1 target; 0.0025 = 0.05^2).
    n_levels : int, optional
        Grid size ``m``; default ``ceil(1 / alpha)`` as in the authors' code.
    tol : float, default 1e-5
        MSE change below which a round counts as stalled.
    patience : int, default 3
        Stop after this many consecutive stalled rounds.
    max_iter : int, default 10000
        Maximum patches.

    Attributes
    ----------
    patches_ : list of (int, int, int)
        ``(level code v, group j, new level code)`` in order.
    history_ : pandas.DataFrame
        Per round: ``mse`` and ``worst_mc2`` on the fitting data.
    n_levels_ : int
        Grid size used.
    converged_ : bool
        Whether the worst MC2 fell below ``alpha`` (else a stall or ``max_iter`` stopped it).

    References
    ----------
    B. Bharti et al., "Multiaccuracy and Multicalibration via Proxy Groups", ICML 2025
    (Section 5, Algorithm MCBoost); U. Hebert-Johnson et al., "Multicalibration",
    ICML 2018.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> g = rng.integers(0, 2, (4000, 2)); y = rng.binomial(1, 0.2 + 0.5 * g[:, 0])
    >>> f = np.full(4000, 0.45)
    >>> mc = MulticalibrationBoost(alpha=0.001).fit(f, y, groups=g)
    >>> from trustlab.fairness import multicalibration_violation
    >>> before = multicalibration_violation(y, f, groups=g, p=2).max()
    >>> after = multicalibration_violation(y, mc.predict(f, groups=g), groups=g, p=2).max()
    >>> bool(after < 0.001 < before)
    True
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "alpha": [Interval(numbers.Real, 0, 1, closed="neither")],
        "n_levels": [None, _LEVELS],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "patience": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        alpha: float = 0.0025,
        *,
        n_levels: int | None = None,
        tol: float = 1e-5,
        patience: int = 3,
        max_iter: int = 10_000,
    ) -> None:
        self.alpha = alpha
        self.n_levels = n_levels
        self.tol = tol
        self.patience = patience
        self.max_iter = max_iter

    def fit(self, X: Any, y: Any, *, groups: Any) -> MulticalibrationBoost:
        """Fit on the predictor's probabilities ``X`` with labels ``y`` and (proxy) ``groups``.

        Parameters
        ----------
        X, y, groups
            As in :meth:`MultiaccuracyBoost.fit`.

        Returns
        -------
        MulticalibrationBoost
        """
        self._validate_params()
        f = _probs(X, "X")
        yy = binary_labels(y, "y", n=f.size).astype(float)
        g, _ = _group_matrix(groups, f.size, "groups")
        m = int(self.n_levels) if self.n_levels is not None else math.ceil(1.0 / float(self.alpha))
        self.n_levels_, self.n_groups_ = m, g.shape[1]
        n = f.size
        code = _levels(f, m)
        grid = np.arange(m + 1) / m
        patches: list[tuple[int, int, int]] = []
        history = []
        mse = float(np.mean((grid[code] - yy) ** 2))
        stalled = 0
        self.converged_ = False
        for _ in range(int(self.max_iter) + 1):
            cnt = np.stack([np.bincount(code, weights=g[:, j], minlength=m + 1) for j in range(g.shape[1])])
            sy = np.stack(
                [np.bincount(code, weights=g[:, j] * yy, minlength=m + 1) for j in range(g.shape[1])]
            )
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(cnt > 0, sy / cnt, grid[None, :])
            score = cnt / n * (mean - grid[None, :]) ** 2  # (k, m + 1)
            worst = float(score.sum(axis=1).max())
            history.append({"mse": mse, "worst_mc2": worst})
            if worst < self.alpha:
                self.converged_ = True
                break
            if len(patches) >= int(self.max_iter) or stalled >= int(self.patience):
                break
            target = np.rint(mean * m).astype(np.int64)
            score = np.where(target != np.arange(m + 1)[None, :], score, -1.0)
            j, v = np.unravel_index(int(np.argmax(score)), score.shape)
            if score[j, v] <= 0:
                break  # every cell already sits at its nearest grid point
            new = int(target[j, v])
            code = np.where((code == v) & (g[:, j] == 1), new, code)
            patches.append((int(v), int(j), new))
            new_mse = float(np.mean((grid[code] - yy) ** 2))
            stalled = stalled + 1 if abs(mse - new_mse) < self.tol else 0
            mse = new_mse
        self.patches_ = patches
        self.history_ = pd.DataFrame(history)
        return self

    def predict(self, X: Any, *, groups: Any) -> np.ndarray:
        """Post-processed probabilities on the grid of ``n_levels_`` levels.

        Parameters
        ----------
        X, groups
            As in :meth:`MultiaccuracyBoost.predict`.

        Returns
        -------
        numpy.ndarray of shape (n_samples,)
        """
        f, g = _predict_inputs(self, "patches_", X, groups)
        code = _levels(f, self.n_levels_)
        for v, j, new in self.patches_:
            code = np.where((code == v) & (g[:, j] == 1), new, code)
        return code / self.n_levels_
