"""HypotheSAEs statistics: latent selection (Lasso, correlation, separation) and held-out tests.

The paper validates hypotheses on held-out texts by regressing the target on all hypotheses'
annotations at once (OLS, or a logistic regression for a binary target) and counting the
coefficients significant after a Bonferroni correction; it also reports each hypothesis's
separation score ``E[y | concept] - E[y | no concept]`` with a two-sample t-test.

References
----------
.. [1] Movva, Peng, Garg, Kleinberg, Pierson. "Sparse Autoencoders for Hypothesis Generation".
   ICML 2025.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from scipy import stats
from sklearn.linear_model import Lasso, LogisticRegression

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError

SELECTION_METHODS = ("lasso", "correlation", "separation")


def _lasso_search(Z: np.ndarray, y: np.ndarray, n_select: int, classification: bool) -> np.ndarray:
    """Coefficients of the L1 fit whose number of non-zeros is closest to ``n_select`` from above."""
    lo, hi = 1e-6, 1e4  # the authors' bracket on the penalty, searched geometrically (20 halvings)
    best: np.ndarray | None = None
    for _ in range(20):
        alpha = float(np.sqrt(lo * hi))
        if classification:
            model: Any = LogisticRegression(l1_ratio=1.0, solver="liblinear", C=1 / alpha, max_iter=1000)
        else:
            model = Lasso(alpha=alpha, max_iter=1000)
        coef = model.fit(Z, y).coef_.ravel()
        nnz = int(np.count_nonzero(coef))
        if nnz >= n_select and (best is None or nnz <= np.count_nonzero(best)):
            best = coef
        if nnz == n_select:
            break
        if nnz < n_select:
            hi = alpha
        else:
            lo = alpha
    return coef if best is None else best


@validate_params(
    {
        "Z": ["array-like"],
        "y": ["array-like"],
        "n_select": [Interval(numbers.Integral, 1, None, closed="left")],
        "method": [Options(set(SELECTION_METHODS))],
        "classification": [None, "boolean"],
    }
)
def select_latents(
    Z: Any, y: Any, n_select: int = 20, *, method: str = "lasso", classification: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Select the latents that predict a target (HypotheSAEs step 2).

    Parameters
    ----------
    Z : array-like of shape (n_samples, n_latents)
        SAE latents (non-negative).
    y : array-like of shape (n_samples,)
        Target (at least two distinct values).
    n_select : int, default=20
        Latents to keep (the paper's number of hypotheses ``H``).
    method : {"lasso", "correlation", "separation"}, default="lasso"
        ``"lasso"``: on standardised latents, the L1 penalty is searched (geometric bisection in
        ``[1e-6, 1e4]``, 20 steps, as the authors' code) until ``n_select`` coefficients are
        non-zero; L1 logistic regression when ``classification``. ``"correlation"``: largest
        ``|Pearson r|``. ``"separation"``: largest ``|mean(y | 100 top activations) - mean(y | 0)|``.
    classification : bool, optional
        Binary target; default: ``y`` has exactly two values.

    Returns
    -------
    indices : ndarray of int
        Selected latents by decreasing ``|score|`` (latents that never fire are never selected).
    scores : ndarray of float
        Their signed scores (coefficient, correlation or separation).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Z = np.maximum(rng.normal(size=(300, 10)), 0)
    >>> y = 2 * Z[:, 3] - Z[:, 7] + 0.1 * rng.normal(size=300)
    >>> select_latents(Z, y, 2)[0].tolist()
    [3, 7]
    """
    Z = check_numeric_array(Z, "Z", ndim=2, min_rows=3)
    y = check_numeric_array(y, "y", ndim=1)
    if y.shape[0] != Z.shape[0]:
        raise DataError(f"y has {y.shape[0]} values but Z has {Z.shape[0]} rows.", argument="y")
    values = np.unique(y)
    if values.size < 2:
        raise DataError("y has a single value; a target must vary to select features.", argument="y")
    if classification is None:
        classification = values.size == 2
    if classification:
        if values.size != 2:
            raise DataError(
                f"classification=True needs a binary y, got {values.size} values; one-vs-rest it.",
                argument="y",
            )
        y = (y == values[1]).astype(float)
    live = np.flatnonzero(Z.max(0) > Z.min(0))
    if live.size == 0:
        raise DataError("every latent is constant on these texts; train the SAE longer.", argument="Z")
    Zl = Z[:, live]
    n_select = min(int(n_select), live.size)
    if method == "lasso":
        Zs = (Zl - Zl.mean(0)) / Zl.std(0)
        scores = _lasso_search(Zs, y, n_select, bool(classification))
    elif method == "correlation":
        Zc, yc = Zl - Zl.mean(0), y - y.mean()
        scores = (Zc.T @ yc) / (np.linalg.norm(Zc, axis=0) * np.linalg.norm(yc))
    else:
        scores = np.empty(live.size)
        for j in range(live.size):
            a = Zl[:, j]
            top = np.argsort(-a, kind="stable")[: min(100, int(np.count_nonzero(a > 0)) or 1)]
            off = a <= 0
            scores[j] = y[top].mean() - (y[off].mean() if off.any() else y.mean())
    order = np.argsort(-np.abs(scores), kind="stable")[:n_select]
    order = order[scores[order] != 0]
    return live[order], scores[order]


def _design(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intercept plus the columns of ``A`` that can enter a regression (non-constant, full rank)."""
    from scipy.linalg import qr

    idx = np.flatnonzero(A.min(0) != A.max(0))
    Z = A[:, idx].astype(float)
    if idx.size:  # drop columns that are linear combinations of the others (rank-revealing QR)
        Zc = Z - Z.mean(0)
        _, r, piv = qr(Zc, mode="economic", pivoting=True)
        rank = int(np.sum(np.abs(np.diag(r)) > 1e-9 * max(1.0, abs(r[0, 0]))))
        good = np.sort(piv[:rank])
        idx, Z = idx[good], Z[:, good]
    return np.column_stack([np.ones(A.shape[0]), Z]), idx


def ols_test(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """OLS coefficients (without the intercept), their two-sided t-test p-values, and R^2."""
    n, p = X.shape
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    dof = max(n - p, 1)
    sigma2 = float(resid @ resid) / dof
    cov = sigma2 * np.linalg.pinv(X.T @ X)
    se = np.sqrt(np.clip(np.diag(cov), 1e-300, None))
    pvals = 2 * stats.t.sf(np.abs(beta / se), dof)
    tss = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float(resid @ resid) / tss if tss > 0 else float("nan")
    return beta[1:], pvals[1:], r2


def logit_test(X: np.ndarray, y: np.ndarray, n_iter: int = 50) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Logistic regression by Newton's method: coefficients, Wald p-values, McFadden's pseudo-R^2.

    Returns ``None`` when the fit does not converge (e.g. perfect separation); the caller then
    falls back to OLS, as the authors' code does.
    """
    beta = np.zeros(X.shape[1])
    for _ in range(n_iter):
        eta = np.clip(X @ beta, -30, 30)
        p = 1 / (1 + np.exp(-eta))
        w = p * (1 - p)
        H = X.T @ (X * w[:, None])
        try:
            step = np.linalg.solve(H, X.T @ (y - p))
        except np.linalg.LinAlgError:
            return None
        beta = beta + step
        if np.max(np.abs(step)) < 1e-8:
            break
    else:
        return None
    if np.max(np.abs(beta)) > 15:  # quasi-separation: the Wald test is meaningless
        return None
    eta = X @ beta
    p = 1 / (1 + np.exp(-eta))
    H = X.T @ (X * (p * (1 - p))[:, None])
    se = np.sqrt(np.clip(np.diag(np.linalg.pinv(H)), 1e-300, None))
    pvals = 2 * stats.norm.sf(np.abs(beta / se))
    ll = float(np.sum(y * np.log(np.clip(p, 1e-12, 1)) + (1 - y) * np.log(np.clip(1 - p, 1e-12, 1))))
    p0 = float(np.clip(y.mean(), 1e-12, 1 - 1e-12))
    ll0 = float(len(y) * (p0 * np.log(p0) + (1 - p0) * np.log(1 - p0)))
    return beta[1:], pvals[1:], 1 - ll / ll0 if ll0 < 0 else float("nan")


def joint_test(
    A: np.ndarray, y: np.ndarray, classification: bool
) -> tuple[np.ndarray, np.ndarray, float, str]:
    """Regress ``y`` on all annotations; coefficients and p-values per column (NaN if left out)."""
    X, idx = _design(A)
    coef = np.full(A.shape[1], np.nan)
    pval = np.full(A.shape[1], np.nan)
    fit = logit_test(X, y) if classification else None
    model = "logit"
    if fit is None:
        fit, model = ols_test(X, y), "ols"
    coef[idx], pval[idx] = fit[0], fit[1]
    return coef, pval, fit[2], model


def separation(a: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``mean(y | a = 1) - mean(y | a = 0)`` and its two-sample t-test p-value."""
    on, off = y[a == 1], y[a == 0]
    if on.size < 2 or off.size < 2:
        return float("nan"), float("nan")
    res = stats.ttest_ind(on, off)
    return float(on.mean() - off.mean()), float(res.pvalue)
