"""The ExpProof authors' own surrogate (their released code), offered beside trustlab's."""

from __future__ import annotations

import os

import numpy as np
import pytest
from sklearn.linear_model import Lasso

from trustlab.errors import DataError, ParameterError
from trustlab.explain.verifiable import (
    EXPPROOF_ALPHA,
    expproof_lasso,
    expproof_perturbations,
    expproof_sqrt_weights,
)


def _example(seed: int = 0, n: int = 10, d: int = 23) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The construction of the authors' example: a query at scale 2^7, 10 Gaussian-sampler
    perturbations (scale 2^8, added as integers), labels of a linear rule."""
    rng = np.random.default_rng(seed)
    x = np.floor(rng.normal(size=d) * 128 + 0.5).astype(np.int64)
    pert = expproof_perturbations(rng.integers(0, 256, size=(n, d)), 1.0, "gaussian")
    X = x + np.floor(pert * 256 + 0.5).astype(np.int64)
    y = (X[:, 0] + X[:, 4] - X[:, 7] > x[0] + x[4] - x[7]).astype(float)
    return x, X, y


def test_samplers_match_the_authors_formulas() -> None:
    u = np.arange(256)
    uni = expproof_perturbations(u, 2.0, "uniform")
    assert uni.min() == -1.0 and uni.max() == pytest.approx(0.9921875)  # +-0.5 std, std = 2
    gauss = expproof_perturbations(u[1:], 1.0, "gaussian")
    # a standard normal shifted by -0.5: the mean of the 255 quantiles is -0.5 up to the rounding
    assert gauss.mean() == pytest.approx(-0.5, abs=0.01)
    assert expproof_perturbations([0], 1.0, "gaussian")[0] < -8.0  # Phi^-1(eps)
    with pytest.raises(ParameterError):
        expproof_perturbations(u, 1.0, "laplace")
    with pytest.raises(DataError):
        expproof_perturbations([256], 1.0)


def test_fixed_intercept_lasso_is_optimal_and_differs_from_the_joint_fit() -> None:
    x, X, y = _example()
    b = 0.09
    beta = expproof_lasso(X, y, x, b)
    sw = expproof_sqrt_weights(X, x)
    Xw, yw = X * sw[:, None] / 2.0**16, y * sw / 2.0**8
    grad = Xw.T @ (yw - b - Xw @ beta) / len(yw)
    on = np.abs(beta) > 0
    assert on.any()
    # KKT of the Lasso for the fixed intercept: |grad| <= alpha, = alpha sign(beta) on the support
    assert np.all(np.abs(grad) <= EXPPROOF_ALPHA + 1e-9)
    np.testing.assert_allclose(grad[on], EXPPROOF_ALPHA * np.sign(beta[on]), atol=1e-9)
    joint = Lasso(alpha=EXPPROOF_ALPHA, tol=1e-15, max_iter=10**7).fit(Xw, yw)
    assert abs(joint.intercept_ - b) > 1e-3 and np.abs(joint.coef_ - beta).max() > 1e-4


def test_sqrt_weights_follow_the_authors_kernel() -> None:
    c = np.zeros(23, dtype=np.int64)
    X = np.zeros((2, 23), dtype=np.int64)
    X[1, 0] = 256  # squared distance 65536 -> // 256 = 256 -> 1.0 at scale 256
    w = expproof_sqrt_weights(X, c)
    width = float(np.float32(np.sqrt(23) * 0.75))
    k = round(np.exp(-1.0 / width**2) * 256)
    assert w.tolist() == [256, round(np.sqrt(k / 256) * 256)]


@pytest.mark.skipif(
    not os.path.exists(os.environ.get("EXPPROOF_WITNESS", "/nonexistent")),
    reason="set EXPPROOF_WITNESS to the authors' example-proof/witness.json (not vendored)",
)
def test_reproduces_the_authors_published_coefficients() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "explain_expproof_authors.py"
    spec = importlib.util.spec_from_file_location("explain_expproof_authors", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    res = bench.compare(bench.load_witness(os.environ["EXPPROOF_WITNESS"]))
    assert res["max_diff_fixed_intercept"] < 2.0**-16  # within their fixed-point step
    assert res["support_fixed_intercept"] == res["support_authors"]
    assert res["objective_joint"] < res["objective_authors"]
