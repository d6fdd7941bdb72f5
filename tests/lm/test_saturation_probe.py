"""trustlab.lm.saturation_probe: labels, exits and summaries equal brute-force recomputations.

The model is an untrained 4-block Llama (built in well under a second): its lens ranks move
a lot, so every task and exit block occurs.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from trustlab.errors import DataError, ModelError, ParameterError, TrustlabError
from trustlab.lm import ModelConfig, build_model, run_with_hooks
from trustlab.lm.internals import early_exit, saturation_layers
from trustlab.lm.saturation_probe import (
    SaturationProbe,
    _task_examples,
    _trace,
    calibrate_threshold,
    compare_exit_rules,
    fit_saturation_probe,
    probe_early_exit,
    probe_exit_layers,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

L = 4


@pytest.fixture(scope="module")
def setup():
    model = build_model(
        ModelConfig("llama", vocab_size=12, d_model=16, n_layers=L, n_heads=2, max_len=16), seed=0
    )
    rng = np.random.default_rng(0)
    fit_ids, test_ids = rng.integers(0, 12, (40, 10)), rng.integers(0, 12, (12, 10))
    with threadpool_limits(1):
        probe = fit_saturation_probe(model, fit_ids, n_tasks=3)
    return model, probe, fit_ids, test_ids


def test_labels_follow_the_authors_rule(setup):
    model, _, ids, _ = setup
    sat = saturation_layers(model, ids, k=3).layers  # (P, 3)
    examples, kept = _task_examples(_trace(model, ids, 3), 3, 1, 0.85)
    want: list[list[list[int]]] = [[[] for _ in range(3)] for _ in range(L)]
    for p, s in enumerate(sat):
        if s[0] > int(0.85 * L):
            continue
        for layer in range(1, L):  # min_layer 1
            for r in range(3):
                low = 1 if r == 0 else max(1, s[r - 1] + 1)
                if s[r] > 1 and low <= layer <= s[r]:
                    want[layer][r].append(p)
    assert examples == want
    assert kept == int(np.sum(sat[:, 0] <= int(0.85 * L)))
    assert sum(len(x) for x in examples[0]) == 0  # below min_layer: nothing


def test_fitted_probe_is_balanced_and_reads_the_residual_stream(setup):
    _, probe, _, _ = setup
    assert isinstance(probe, SaturationProbe)
    assert np.all(probe.class_counts == probe.class_counts[0]) and probe.class_counts[0] >= 5
    assert 0 not in probe.layers_used  # block 0 can only hold task 1: dropped by the balance
    assert probe.train_balanced_accuracy > 1 / 3
    assert probe.task_proba(np.zeros((2, 16))).shape == (2, 3)


def test_exit_layers_and_summary_equal_a_direct_recomputation(setup):
    model, probe, _, ids = setup
    names = [f"blocks.{i}.{k}" for i in range(L) for k in ("resid_post", "logit_lens")]
    out = run_with_hooks(model, ids, names)
    hidden = np.stack([out[f"blocks.{i}.resid_post"].reshape(-1, 16).numpy() for i in range(L)])
    top = np.stack([out[f"blocks.{i}.logit_lens"].argmax(-1).reshape(-1).numpy() for i in range(L)])
    want = np.full(hidden.shape[1], L - 1)
    for p in range(hidden.shape[1]):
        for layer in range(L):
            if probe.task_proba(hidden[layer, p][None]).argmax() == 1:
                want[p] = layer
                break
    got = probe_exit_layers(model, probe, ids)
    np.testing.assert_array_equal(got, want)
    later = probe_exit_layers(model, probe, ids, exit_on="later")
    assert np.all(later <= got)  # firing on more tasks can only exit earlier

    ex = probe_early_exit(model, probe, ids)
    rows = np.ones((ids.shape[0], ids.shape[1]), dtype=bool)
    rows[:, -1] = False
    rows = rows.reshape(-1)
    e, t, full = want[rows], top[:, rows], top[-1, rows]
    pred = t[e, np.arange(e.size)]
    target = ids[:, 1:].reshape(-1)
    assert ex.layers_saved == pytest.approx(np.mean(1 - (e + 1) / L))
    assert ex.agreement == pytest.approx(np.mean(pred == full))
    assert ex.accuracy_exit == pytest.approx(np.mean(pred == target))
    assert ex.accuracy_full == pytest.approx(np.mean(full == target))
    sat = saturation_layers(model, ids[:, :-1], k=1).layers[:, 0]
    assert ex.oracle_layers_saved == pytest.approx(np.mean(1 - (sat + 1) / L))


def test_thresholds_order_the_exits_and_calibration_reaches_its_target(setup):
    model, probe, _, ids = setup
    exits = [probe_exit_layers(model, probe, ids, threshold=t) for t in (0.0, 0.3, 0.6, 1.0)]
    assert np.all(exits[0] == 0)  # every probability reaches 0: exit at the first block
    for a, b in itertools.pairwise(exits):
        assert np.all(a <= b)
    t = calibrate_threshold(model, probe, ids, agreement=0.9)
    assert probe_early_exit(model, probe, ids, threshold=t).agreement >= 0.9
    lower = np.nextafter(t, -np.inf)  # any lower threshold that changes an exit misses the target
    assert probe_early_exit(model, probe, ids, threshold=lower).agreement < 0.9 or np.array_equal(
        probe_exit_layers(model, probe, ids, threshold=lower),
        probe_exit_layers(model, probe, ids, threshold=t),
    )
    assert np.all(probe_exit_layers(model, probe, ids, threshold=np.inf) == L - 1)


def test_baselines_equal_a_direct_recomputation(setup):
    model, probe, _, ids = setup
    names = [f"blocks.{i}.{k}" for i in range(L) for k in ("resid_post", "logit_lens")]
    out = run_with_hooks(model, ids, names)
    rows = np.ones(ids.shape, dtype=bool)
    rows[:, -1] = False
    rows = rows.reshape(-1)
    h = np.stack([out[f"blocks.{i}.resid_post"].reshape(-1, 16).double().numpy()[rows] for i in range(L)])
    prob = np.stack(
        [out[f"blocks.{i}.logit_lens"].softmax(-1).reshape(-1, 12).double().numpy()[rows] for i in range(L)]
    )
    top = prob.argmax(-1)
    p2 = np.sort(prob, axis=-1)
    margin = p2[..., -1] - p2[..., -2]
    cos = np.full(margin.shape, -np.inf)
    cos[1:] = np.sum(h[1:] * h[:-1], -1) / (np.linalg.norm(h[1:], axis=-1) * np.linalg.norm(h[:-1], axis=-1))
    res = compare_exit_rules(model, probe, ids, softmax=(0.1, 0.3), cosine=(0.5,))
    assert set(res) == {"probe", "stability-1", "stability-2", "softmax-0.1", "softmax-0.3", "cosine-0.5"}
    for key, score, t in (
        ("softmax-0.1", margin, 0.1),
        ("softmax-0.3", margin, 0.3),
        ("cosine-0.5", cos, 0.5),
    ):
        fire = score >= t
        fire[-1] = True
        e = fire.argmax(0)
        pred = top[e, np.arange(e.size)]
        assert res[key].layers_saved == pytest.approx(np.mean(1 - (e + 1) / L))
        assert res[key].agreement == pytest.approx(np.mean(pred == top[-1]))
    t = calibrate_threshold(model, None, ids, agreement=0.8, rule="cosine")
    assert compare_exit_rules(model, probe, ids, cosine=(t,))[f"cosine-{t:g}"].agreement >= 0.8


def test_comparison_holds_the_stability_rule_of_internals(setup):
    model, probe, _, ids = setup
    res = compare_exit_rules(model, probe, ids, patience=(1, 2))
    assert res["probe"] == probe_early_exit(model, probe, ids)
    for p in (1, 2):
        assert asdict(res[f"stability-{p}"]) == pytest.approx(asdict(early_exit(model, ids, patience=p)))


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"n_tasks": 1}, "n_tasks"),
        ({"n_tasks": 13}, "n_tasks"),
        ({"min_layer": L - 1}, "min_layer"),
        ({"min_layer": -1}, "min_layer"),
        ({"max_saturation_ratio": 0.0}, "max_saturation_ratio"),
        ({"max_saturation_ratio": "1"}, "max_saturation_ratio"),
        ({"min_per_class": 0}, "min_per_class"),
        ({"min_per_class": 10**6}, "input_ids"),
    ],
)
def test_fit_rejects_bad_arguments(setup, kwargs, argument):
    model, _, ids, _ = setup
    with pytest.raises(TrustlabError) as err:
        fit_saturation_probe(model, ids[:10], **kwargs)
    assert err.value.argument == argument


def test_exit_functions_reject_bad_arguments(setup):
    model, probe, _, ids = setup
    with pytest.raises(ParameterError, match="probe"):
        probe_early_exit(model, "probe", ids)
    other = build_model(ModelConfig("llama", vocab_size=12, d_model=16, n_layers=2, n_heads=2), seed=0)
    with pytest.raises(ModelError, match="4 blocks"):
        probe_exit_layers(other, probe, ids)
    with pytest.raises(ParameterError, match="exit_on"):
        probe_exit_layers(model, probe, ids, exit_on="first")
    with pytest.raises(ParameterError, match="threshold"):
        probe_early_exit(model, probe, ids, threshold=float("nan"))
    with pytest.raises(ParameterError, match="softmax"):
        compare_exit_rules(model, probe, ids, softmax=0.5)
    with pytest.raises(ParameterError, match="cosine"):
        compare_exit_rules(model, probe, ids, cosine=("high",))
    with pytest.raises(ParameterError, match="rule"):
        calibrate_threshold(model, probe, ids, agreement=0.9, rule="entropy")
    with pytest.raises(ParameterError, match="probe"):
        calibrate_threshold(model, None, ids, agreement=0.9)
    with pytest.raises(ParameterError, match="agreement"):
        calibrate_threshold(model, probe, ids, agreement=0)
    with pytest.raises(ParameterError, match="patience"):
        compare_exit_rules(model, probe, ids, patience=())
    with pytest.raises(DataError, match="at least 2 tokens"):
        probe_early_exit(model, probe, ids[:, :1])
    with pytest.raises(DataError, match="vocabulary"):
        probe_exit_layers(model, probe, ids + 100)
    with pytest.raises(DataError, match="hidden"):
        probe.task_proba(np.zeros((2, 3)))
    with pytest.raises(ModelError, match="model"):
        fit_saturation_probe("gpt2", ids)
