"""Positional attention: value generalisation on algorithmic tasks (Back de Luca et al., ICML 2025)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from sklearn.base import clone

from trustlab.errors import TrustlabError
from trustlab.theory import (
    PositionalTransformerRegressor,
    algorithmic_task,
    simulate_positional_sample_complexity,
    simulate_value_generalization,
)

# The fast claim's budget: n = 4, 2 layers, width 16, 200 Adam steps (see the docs page).
FAST = {"width": 16, "mlp_hidden": 16, "n_layers": 2, "steps": 200, "batch_size": 64, "learning_rate": 1e-2}


@pytest.fixture(scope="module")
def cummin_run():
    return simulate_value_generalization(
        "min", [2, 8], length=4, n_train=2000, n_test=500, estimator_params=FAST
    )


@pytest.mark.claims
def test_claim_positional_attention_generalises_to_larger_values(cummin_run) -> None:
    """Trained on [-2, 2], tested on [-8, 8]: positional beats standard attention beyond 3 paired SEs."""
    r = cummin_run
    assert r.train_loss.max() < 0.05  # both learned the task in distribution
    gap = r.standard[0, 1] - r.positional[0, 1]
    assert gap > 3 * r.difference_se[0, 1], (r.positional, r.standard, r.difference_se)
    assert r.ratio[1] > 1.5
    # in distribution both are accurate (the OOD gap is not an in-distribution failure)
    assert max(r.positional[0, 0], r.standard[0, 0]) < 0.05


def _kadane_prefix(row: np.ndarray) -> list[float]:
    out, best = [], -np.inf
    for i in range(len(row)):
        best = max(best, max(row[a : b + 1].sum() for a in range(i + 1) for b in range(a, i + 1)))
        out.append(best)
    return out


def test_tasks_equal_brute_force() -> None:
    for task in ("sum", "min", "max", "median", "sort", "maxsub"):
        x, y = algorithmic_task(task, 20, 6, random_state=1)
        for row, out in zip(x, y, strict=True):
            if task == "sort":
                ref = sorted(row)
            elif task == "maxsub":
                ref = _kadane_prefix(row)
            else:
                f = {"sum": np.sum, "min": np.min, "max": np.max, "median": np.median}[task]
                ref = [f(row[: i + 1]) for i in range(len(row))]
            np.testing.assert_allclose(out, ref, atol=1e-12)
    x, y = algorithmic_task("sum", 5, 4, cumulative=False, random_state=2)
    np.testing.assert_allclose(y, np.repeat(x.sum(axis=1, keepdims=True), 4, axis=1))


def test_ranges_and_rejection() -> None:
    def inside(**reject):
        x, _ = algorithmic_task("min", 2000, 8, low=-8, high=8, random_state=3, **reject)
        assert np.all(np.abs(x) <= 8)
        return np.mean(np.abs(x).max(axis=1) <= 2)

    # without rejection ~(4/16)^2 = 6 % of ranges lie in [-2, 2] (sd 0.5 % at 2000 rows); with it,
    # only rows whose range barely leaves the band (2.5 % here) can still have all 8 values inside
    assert inside(reject_low=-2, reject_high=2) < 0.035 < 0.045 < inside()
    a, _ = algorithmic_task("max", 3, 4, random_state=7)
    b, _ = algorithmic_task("max", 3, 4, random_state=7)
    np.testing.assert_array_equal(a, b)


def test_positional_attention_matrices_do_not_depend_on_the_input() -> None:
    x, y = algorithmic_task("sum", 128, 4, random_state=0)
    params = {"width": 8, "mlp_hidden": 8, "n_layers": 2, "steps": 5}
    pos = PositionalTransformerRegressor("positional", **params).fit(x, y)
    std = PositionalTransformerRegressor("standard", **params).fit(x, y)
    w_pos, w_std = pos.attention_weights(x[:3]), std.attention_weights(x[:3])
    assert w_pos.shape == (2, 3, 2, 5, 5)
    np.testing.assert_allclose(w_pos.sum(axis=-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(w_pos[:, 0], w_pos[:, 1])  # same matrices for every input
    assert not np.allclose(w_std[:, 0], w_std[:, 1])  # standard attention reads the values
    # the fit runs on one torch thread and restores the caller's setting
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    PositionalTransformerRegressor("positional", **{**params, "steps": 1}).fit(x, y)
    assert torch.get_num_threads() == threads
    # deterministic for a seed, and clone keeps the parameters
    again = clone(pos).fit(x, y)
    np.testing.assert_allclose(again.predict(x), pos.predict(x), atol=1e-6)
    assert pos.predict(x).shape == (128, 4)


def test_bad_input() -> None:
    x, y = algorithmic_task("sum", 16, 4, random_state=0)
    reg = PositionalTransformerRegressor(width=8, mlp_hidden=8, steps=1)
    with pytest.raises(TrustlabError, match="task"):
        algorithmic_task("mean", 4, 4)
    with pytest.raises(TrustlabError, match="high"):
        algorithmic_task("sum", 4, 4, low=1, high=1)
    with pytest.raises(TrustlabError, match="reject_low"):
        algorithmic_task("sum", 4, 4, reject_low=-2)
    with pytest.raises(TrustlabError, match="reject_low"):
        algorithmic_task("sum", 4, 4, low=-1, high=1, reject_low=-2, reject_high=2)
    with pytest.raises(TrustlabError, match="not fitted"):
        reg.predict(x)
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(TrustlabError, match="X"):
        reg.fit(bad, y)
    with pytest.raises(TrustlabError, match="y"):
        reg.fit(x, y[:, :3])
    with pytest.raises(TrustlabError, match="attention"):
        PositionalTransformerRegressor("softmax").fit(x, y)
    with pytest.raises(TrustlabError, match="width"):
        PositionalTransformerRegressor(width=9, steps=1).fit(x, y)
    reg.fit(x, y)
    with pytest.raises(TrustlabError, match="columns"):
        reg.predict(x[:, :3])
    with pytest.raises(TrustlabError, match="scales"):
        simulate_value_generalization("sum", [1, 4], length=4)
    with pytest.raises(TrustlabError, match="estimator_params"):
        simulate_value_generalization("sum", [2], length=4, estimator_params={"attention": "standard"})
    for sizes in ([100, 50], [100], [0, 10], [1.5, 3.0]):
        with pytest.raises(TrustlabError, match="n_train"):
            simulate_positional_sample_complexity("sum", sizes, length=4)
    with pytest.raises(TrustlabError, match="estimator_params"):
        simulate_positional_sample_complexity("sum", [8, 16], length=4, estimator_params={"random_state": 1})
    with pytest.raises(TrustlabError, match="epochs"):
        simulate_positional_sample_complexity(
            "sum", [8, 16], length=4, epochs=2, estimator_params={"steps": 5}
        )


def test_sample_complexity_epochs_protocol_scales_the_steps() -> None:
    tiny = {"width": 8, "mlp_hidden": 8, "n_layers": 1, "batch_size": 16}
    r = simulate_positional_sample_complexity(
        "sum", [8, 128], length=4, n_test=8, epochs=1.5, estimator_params=tiny
    )
    np.testing.assert_array_equal(r.n_steps, [2, 12])  # ceil(1.5 * m / min(16, m))
    assert r.test_mse.shape == r.train_mse.shape == (2, 1, 2) and r.decrease_se.shape == (2, 1, 1)
    assert np.all(np.isfinite(r.gap))


@pytest.mark.claims
def test_claim_in_distribution_error_falls_with_training_set_size() -> None:
    """Paper, Figure 2 (learnability, Theorem 6.1): in distribution, both models' test error
    falls as the training set grows. Cumulative sum, n = 4, 16 vs 1000 nested training sequences,
    one step budget (100 Adam steps, batch 64): the decrease exceeds 3 paired SEs for both.
    """
    params = {**FAST, "steps": 100}
    r = simulate_positional_sample_complexity(
        "sum", [16, 1000], length=4, n_test=500, estimator_params=params
    )
    drop = r.test_mse[:, 0, 0] - r.test_mse[:, 0, 1]
    assert np.all(drop > 3 * r.decrease_se[:, 0, 0]), (r.test_mse, r.decrease_se)
    assert r.gap.shape == (2, 1, 2)


@pytest.mark.slow
@pytest.mark.claims
@pytest.mark.parametrize("task", ["min", "sum", "sort"])
def test_claim_value_generalisation_at_paper_size_slow(task: str) -> None:
    """n = 8 with the paper's width, depth and heads, 1000 Adam steps per model (the benchmark's
    full run): positional beats standard attention beyond 3 paired SEs at c = 8 and c = 20.

    Slow: minutes of CPU per task.
    """
    r = simulate_value_generalization(
        task, [2, 4, 8, 20], length=8, n_train=10_000, n_test=500, estimator_params={"steps": 1000}
    )
    gap = r.standard[0] - r.positional[0]
    assert np.all(gap[2:] > 3 * r.difference_se[0, 2:]), (r.positional, r.standard)
