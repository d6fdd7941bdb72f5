"""Row 004-14: task-vector formation during pretraining (task decodability, ICL accuracy, patching)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.errors import DataError, ParameterError
from trustlab.lm import ModelConfig, TrainConfig, build_model, incontext_tasks
from trustlab.lm.hooks import run_with_hooks
from trustlab.lm.task_vectors import (
    patch_task_vector,
    query_representations,
    task_decodability,
    task_vector_formation,
    task_vectors,
    train_with_checkpoints,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def micro():
    return build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=2, n_heads=2, max_len=12))


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 7))
def test_decodability_matches_sklearn_leave_one_out(seed, k):
    from scipy.stats import mode
    from sklearn.neighbors import KNeighborsClassifier

    rng = np.random.default_rng(seed)
    z = rng.integers(0, 3, size=30)
    h = rng.normal(size=(30, 4)) + z[:, None] * rng.uniform(0, 2)
    td, per = task_decodability(h, z, k=k)
    # kneighbors() without a query leaves each point out: scikit-learn's leave-one-out kNN.
    idx = KNeighborsClassifier(k, algorithm="brute").fit(h, z).kneighbors(return_distance=False)
    pred = mode(z[idx], axis=1, keepdims=False).mode
    assert td == pytest.approx((pred == z).mean())
    for t in range(3):
        if (z == t).any():
            assert per[t] == pytest.approx((pred[z == t] == t).mean())


def test_decodability_separated_and_random():
    rng = np.random.default_rng(0)
    z = np.repeat(np.arange(4), 50)
    sep = rng.normal(size=(200, 8)) + 10 * np.eye(4, 8)[z]
    assert task_decodability(sep, z)[0] == 1.0
    # Random representations: about chance (1/4); 200 prompts, 4 sd = 0.12.
    assert abs(task_decodability(rng.normal(size=(200, 8)), z)[0] - 0.25) < 0.12


def test_representations_vectors_and_zero_patch(micro):
    data = incontext_tasks(24, 4, 3, n_values=8, seed=1)
    reps = query_representations(micro, data)
    assert reps.shape == (24, 2, 16)
    vecs = task_vectors(micro, data, 0)
    np.testing.assert_allclose(vecs[1], reps[data.latent["task"] == 1, 0].mean(axis=0), rtol=1e-6)
    prompts = data.tokens[:, :-1]
    with torch.no_grad():
        plain = micro(input_ids=torch.as_tensor(prompts)).logits[:, -1].argmax(-1).numpy()
    np.testing.assert_array_equal(patch_task_vector(micro, prompts, np.zeros(16), 0), plain)
    big = patch_task_vector(micro, prompts, 1e3 * vecs[0] / np.linalg.norm(vecs[0]), 0)
    assert len(set(big.tolist())) <= 2  # a huge vector overrides the query: (nearly) one answer


def test_replace_patch_at_last_block_carries_the_donor_prediction(micro):
    # After the last block only the final norm and the head remain: replacing the last token's
    # state by another prompt's state there must give exactly that prompt's prediction.
    data = incontext_tasks(12, 4, 3, n_values=8, seed=2)
    prompts = data.tokens[:, :-1]
    out = run_with_hooks(micro, prompts, ["blocks.1.resid_post"])
    donor = out["blocks.1.resid_post"][:, -1].numpy()[::-1].copy()
    want = out["logits"][:, -1].argmax(-1).numpy()[::-1]
    zero_shot = prompts[:, -1:]
    np.testing.assert_array_equal(patch_task_vector(micro, zero_shot, donor, 1, mode="replace"), want)
    with pytest.raises(ParameterError, match="mode"):
        patch_task_vector(micro, zero_shot, donor, 1, mode="swap")


def test_patching_is_measured_on_demonstration_free_queries():
    # The zero-shot protocol (Hendel et al. 2023): the unpatched baseline is the accuracy on x*
    # alone, recomputed here from the untrained model (step 0), and the sweep covers every block.
    cfg = ModelConfig("llama", vocab_size=8, d_model=16, n_layers=2, n_heads=2)
    res = task_vector_formation(
        4,
        8,
        3,
        checkpoints=[0],
        n_per_task=12,
        n_train_sequences=64,
        model_config=cfg,
        train_config=TrainConfig(steps=1, batch_size=8),
    )
    pool = incontext_tasks(64 + 20 * 12 * 4, 3, 4, n_values=8, seed=0)
    z = pool.latent["task"]
    idx = np.concatenate([np.flatnonzero(z == t)[-12:] for t in range(4)])
    model = build_model(ModelConfig.from_dict({**cfg.to_dict(), "max_len": 6}), seed=0)
    with torch.no_grad():
        pred = model(input_ids=torch.as_tensor(pool.tokens[idx, 4:5])).logits[:, -1].argmax(-1).numpy()
    assert res.patch_base[0] == pytest.approx((pred == pool.tokens[idx, 5]).mean())
    assert res.patch_self_layers.shape == res.patch_cross_layers.shape == (1, 2)
    assert res.patch_self[0] == res.patch_self_layers[0, res.patch_layer[0]]


def test_checkpoints_are_kept_and_written(tmp_path):
    model = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=1, n_heads=2, max_len=8))
    data = incontext_tasks(32, 3, 2, n_values=8)
    kept = train_with_checkpoints(model, data, TrainConfig(steps=3, batch_size=8), [0, 3], out_dir=tmp_path)
    assert [s for s, _ in kept] == [0, 3]
    name = "model.embed_tokens.weight"
    assert not torch.equal(kept[0][1][name], kept[1][1][name])
    assert torch.equal(kept[1][1][name], model.state_dict()[name])
    assert (tmp_path / "step-000003" / "model.safetensors").is_file()


def test_bad_input(micro):
    z = np.repeat([0, 1], 5)
    with pytest.raises(ParameterError, match="k must be below"):
        task_decodability(np.zeros((10, 2)), z, k=10)
    with pytest.raises(DataError, match="NaN"):
        task_decodability(np.full((10, 2), np.nan), z)
    with pytest.raises(DataError, match="representations"):
        task_decodability(np.zeros((10, 2)), z[:5])
    with pytest.raises(DataError, match="vector"):
        patch_task_vector(micro, [[1, 2, 3]], np.zeros(5), 0)
    with pytest.raises(ParameterError, match="layer"):
        patch_task_vector(micro, [[1, 2, 3]], np.zeros(16), 2)
    with pytest.raises(DataError, match="latent 'task'"):
        from trustlab.lm import sorting_task

        query_representations(micro, sorting_task(4, 3, n_values=5))
    with pytest.raises(ParameterError, match="at_steps"):
        train_with_checkpoints(micro, incontext_tasks(8, 3, 2, n_values=8), TrainConfig(steps=2), [0, 5])
    with pytest.raises(ParameterError, match="n_tasks"):
        task_vector_formation(n_tasks=1)


@pytest.mark.claims
def test_claim_task_encoding_and_icl_accuracy_rise_together():
    # 3 blocks x width 24, 300 steps (about 3 s of CPU): the fast profile's formation run. At 200
    # steps the TD gain (0.08-0.14 over seeds 0-2 on an AMD EPYC host) straddled its 3-SE bar
    # (0.106) and seed 0 failed there while passing on Intel; at 300 steps it is 0.18.
    cfg = ModelConfig("llama", vocab_size=8, d_model=24, n_layers=3, n_heads=2)
    tcfg = TrainConfig(steps=300, batch_size=32, lr=2e-2, warmup=10)
    res = task_vector_formation(4, 8, 6, checkpoints=[50, 300], model_config=cfg, train_config=tcfg)
    se = np.sqrt(0.25 / (4 * res.n_per_task))  # largest binomial SE of a share over 400 prompts
    assert res.td[1] > res.chance_td + 3 * se, res
    assert res.td[1] - res.td[0] > 3 * np.sqrt(2) * se, res
    assert res.accuracy[1] - res.accuracy[0] > 3 * np.sqrt(2) * se, res


@pytest.mark.slow  # one 3-block model, 300 steps, 7 checkpoints: about a minute on a loaded core
@pytest.mark.claims
def test_claim_task_encoding_and_icl_accuracy_emerge_together_slow():
    res = task_vector_formation(4, 8, 6, checkpoints=[0, 50, 100, 150, 200, 250, 300])
    n = 4 * res.n_per_task
    se = np.sqrt(0.25 / n)  # largest binomial standard error of a share over n prompts
    # Encoding: TD of the last checkpoint beats chance and the first trained checkpoint by 3 SE.
    assert res.td[-1] > res.chance_td + 3 * se, res
    assert res.td[-1] - res.td[1] > 3 * np.sqrt(2) * se, res
    # Decoding: ICL accuracy rises with it; encoding quality predicts accuracy over checkpoints.
    assert res.accuracy[-1] - res.accuracy[1] > 3 * np.sqrt(2) * se, res
    assert res.correlation > 0.5, res.correlation


def test_cli_writes_checkpoints_and_json(tmp_path):
    import json

    from typer.testing import CliRunner

    from trustlab.cli import app

    out = tmp_path / "tv"
    res = CliRunner().invoke(
        app, ["lm", "task-vectors", "--out", str(out), "--steps", "2", "--n-per-task", "12"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads((out / "formation.json").read_text())
    assert data["steps"] == [0, 1, 2] and len(data["td"]) == 3
    assert (out / "checkpoints" / "step-000002" / "model.safetensors").is_file()
    bad = CliRunner().invoke(app, ["lm", "task-vectors", "--out", str(tmp_path / "b"), "--steps", "0"])
    assert bad.exit_code == 2 and "--steps" in bad.output
