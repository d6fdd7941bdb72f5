"""MixBridge's second task, inpainting (Qin et al., ICML 2025): masks, inputs, poison rate, CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ParameterError, TrustlabError  # noqa: E402
from trustlab.security.mixbridge import poison_pairs, poison_rate_pairs  # noqa: E402
from trustlab.security.mixbridge_lab import (  # noqa: E402
    MixBridgeDigitsRecipe,
    center_mask,
    compare_digits_models,
    digits_backdoor_targets,
    digits_inpaint_pairs,
    freeform_masks,
    inpaint_inputs,
)

N_EVAL = 150


@pytest.fixture(scope="module")
def reports():
    """The shipped inpainting single bridge and MixBridge on 150 held-out digits per task (nfe 5)."""
    r = compare_digits_models(N_EVAL, task="inpaint", nfe=5, random_state=0)
    return r["single bridge"], r["MixBridge"]


@pytest.mark.claims
def test_claim_inpainting_mixbridge_keeps_the_backdoors_the_single_bridge_loses(reports):
    # Paper, Tables 1-2 (ImageNet inpainting): the single bridge trained on the benign task and three
    # heterogeneous triggers loses attack success; MixBridge keeps it. Each ASR is a share of
    # n = 150 outputs: the standard error of a difference is <= sqrt(2 * 0.25 / 150) = 0.058; over the
    # three triggers (450 outputs) <= 0.033. We ask 3 of them for the mean and for zeros and inverted
    # threes (the diamonds' gap is 0.17 here, 2.9 SE: not asked).
    single, mix = reports
    se1, se3 = math.sqrt(2 * 0.25 / N_EVAL), math.sqrt(2 * 0.25 / (3 * N_EVAL))
    assert np.mean(mix.attack_success) - np.mean(single.attack_success) > 3 * se3
    for k in (0, 1):
        assert mix.attack_success[k] - single.attack_success[k] > 3 * se1, k
    assert min(mix.attack_success) > 0.5
    # utility: the benign MSE is *not* better here (0.038 vs 0.037): only ask it is within 15%
    assert mix.benign_mse < 1.15 * single.benign_mse
    # stealth: weight spread on triggered inputs (entropy > 0.2 nats of log 4 = 1.39)
    assert single.router_entropy is None and min(mix.router_entropy[1:]) > 0.2


@pytest.mark.slow  # imports the whole CLI and samples both models twice (~5 s CPU)
def test_cli_inpaint_task_matches_the_library():
    import json

    from typer.testing import CliRunner

    from trustlab.cli import app

    res = CliRunner().invoke(
        app, ["backdoor", "mixbridge", "--task", "inpaint", "--n", "12", "--nfe", "1", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    direct = compare_digits_models(12, task="inpaint", nfe=1)
    assert out["task"] == "inpaint"
    for name in ("single bridge", "MixBridge"):
        assert out["models"][name]["attack_success"] == list(direct[name].attack_success)
        assert out["models"][name]["benign_mse"] == direct[name].benign_mse
    res = CliRunner().invoke(app, ["backdoor", "mixbridge", "--task", "inpaint", "--n", "12", "--nfe", "1"])
    assert res.exit_code == 0 and "inpainting" in res.output
    bad = CliRunner().invoke(app, ["backdoor", "mixbridge", "--task", "deblur"])
    assert bad.exit_code == 2 and "--task" in bad.output and len(bad.output.strip().splitlines()) == 1


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31), h=st.integers(4, 12), w=st.integers(4, 12))
def test_freeform_masks_cover_20_to_30_percent(seed, h, w):
    m = freeform_masks(5, (h, w), random_state=seed)
    assert m.shape == (5, 1, h, w) and set(np.unique(m)) <= {0.0, 1.0}
    count = m.sum(axis=(1, 2, 3))
    assert (count >= math.ceil(0.2 * h * w - 1e-9)).all() and (count <= math.floor(0.3 * h * w + 1e-9)).all()


def test_freeform_masks_are_strokes_not_scattered_pixels():
    # brush strokes: most hole pixels touch another hole pixel (4-neighbours); i.i.d. pixels at 25%
    # coverage would touch one with probability about 1 - 0.75^4 = 0.68
    m = freeform_masks(200, random_state=3)[:, 0]
    pad = np.pad(m, ((0, 0), (1, 1), (1, 1)))
    nb = pad[:, :-2, 1:-1] + pad[:, 2:, 1:-1] + pad[:, 1:-1, :-2] + pad[:, 1:-1, 2:]
    assert ((nb > 0) & (m == 1)).sum() / m.sum() > 0.9
    # and the holes move around the image: every pixel is in some hole
    assert m.max(0).min() == 1


def test_center_mask_is_i2sb_central_box():
    m = center_mask((8, 8))[0, 0]
    assert m.sum() == 16 and m[2:6, 2:6].all()
    assert center_mask((12, 8))[0, 0].sum() == 6 * 4


def test_inpaint_inputs_keep_known_pixels_and_fill_holes_with_clipped_gaussian_noise():
    X0 = np.full((400, 1, 8, 8), 0.3, dtype=np.float32)
    M = freeform_masks(400, random_state=0)
    X1 = inpaint_inputs(X0, M, random_state=1)
    np.testing.assert_array_equal(X1[M == 0], X0[M == 0])
    fill = X1[M == 1] * 2 - 1  # back to the model's scale: clip(N(0, 1), -1, 1)
    n = fill.size
    # P(|z| >= 1) = 0.3173; standard error sqrt(p (1 - p) / n)
    at_edge = np.isclose(np.abs(fill), 1.0).mean()
    assert abs(at_edge - 0.3173) < 4 * math.sqrt(0.3173 * 0.6827 / n)
    assert abs(fill.mean()) < 4 * 0.8 / math.sqrt(n)  # sd of clip(z) < 0.8
    np.testing.assert_array_equal(inpaint_inputs(X0, M, random_state=1), X1)


def test_digits_inpaint_pairs_repeat_digits_per_draw_with_fresh_masks():
    X0, X1, M = digits_inpaint_pairs("train", 10, draws=3, random_state=0)
    assert X0.shape == X1.shape == M.shape == (30, 1, 8, 8)
    np.testing.assert_array_equal(X0[:10], X0[20:])
    assert not np.array_equal(M[:10], M[10:20])
    np.testing.assert_array_equal(X1[M == 0], X0[M == 0])
    _, X1c, Mc = digits_inpaint_pairs("test", 5, mask="center")
    assert (Mc.sum(axis=(1, 2, 3)) == 16).all() and X1c.shape == (5, 1, 8, 8)


def test_poison_rate_pairs_keep_one_version_per_clean_pair_at_the_rate():
    X0, X1, _ = digits_inpaint_pairs("train", 600)
    T = digits_backdoor_targets()
    full = poison_pairs(X0, X1, T)
    for rate in (0.1, 0.5, 0.9):
        p = poison_rate_pairs(full, rate, random_state=4)
        assert len(p.X0) == 600 and p.n_tasks == 4
        share = (p.task > 0).mean()
        assert abs(share - rate) < 4 * math.sqrt(rate * (1 - rate) / 600), (rate, share)
        # each row is the same clean pair's version for its task
        i = np.arange(600)
        np.testing.assert_array_equal(p.X0, full.X0[p.task * 600 + i])
        np.testing.assert_array_equal(p.X1[p.task == 0], X1[p.task == 0])
        counts = np.bincount(p.task[p.task > 0], minlength=4)[1:]
        assert counts.min() > 0.5 * counts.max()  # triggers drawn uniformly


def test_recipe_task_keeps_super_resolution_cache_names():
    assert MixBridgeDigitsRecipe().fingerprint() == "d519a893fd12"  # as before the task field
    assert MixBridgeDigitsRecipe(task="inpaint").fingerprint() != "d519a893fd12"


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: freeform_masks(0), "n"),
        (lambda: freeform_masks(2, (8,)), "shape"),
        (lambda: freeform_masks(2, coverage=(0.3, 0.2)), "coverage"),
        (lambda: freeform_masks(2, (4, 4), coverage=(0.2, 0.23)), "coverage"),
        (lambda: inpaint_inputs(np.zeros((2, 1, 8, 8)), np.zeros((2, 1, 4, 4))), "masks"),
        (lambda: inpaint_inputs(np.zeros((2, 1, 8, 8)), np.full((2, 1, 8, 8), 2.0)), "masks"),
        (lambda: inpaint_inputs(np.zeros((8, 8)), center_mask()), "X0"),
        (lambda: digits_inpaint_pairs("val"), "split"),
        (lambda: digits_inpaint_pairs(mask="box"), "mask"),
        (lambda: digits_inpaint_pairs(draws=0), "draws"),
        (lambda: MixBridgeDigitsRecipe(task="deblur"), "task"),
        (lambda: MixBridgeDigitsRecipe(task="inpaint", mask_draws=0), "mask_draws"),
        (lambda: compare_digits_models(5, task="deblur"), "task"),
        (lambda: poison_rate_pairs((np.zeros(2), np.zeros(2)), 0.5), "pairs"),
        (lambda: poison_rate_pairs(_pairs(), 1.0), "rate"),
        (lambda: poison_rate_pairs(_subset(_pairs()), 0.5), "pairs"),
    ],
)
def test_bad_input_names_the_argument(call, argument):
    with pytest.raises(TrustlabError) as err:
        call()
    assert err.value.argument == argument, err.value
    assert isinstance(err.value, DataError | ParameterError)


def _pairs():
    X = np.random.default_rng(0).random((4, 1, 8, 8)).astype(np.float32)
    return poison_pairs(X, X, [X[:2]])


def _subset(p):
    from trustlab.security.mixbridge import PoisonedPairs

    return PoisonedPairs(p.X0[1:], p.X1[1:], p.task[1:], p.corners)


@pytest.mark.slow  # trains four experts, a router, two single bridges and two merges (~70 s CPU)
@pytest.mark.claims
def test_claim_poison_rate_sweep_mixbridge_beats_the_single_bridge_at_low_and_high_rates():
    # Paper (parameter study): poison rates 10-90%. The benchmark's seed 0 (security_mixbridge_inpaint):
    # each pair poisoned with probability rate; the single bridge retrained on those pairs, MixBridge
    # re-merged from the same experts and router. Mean ASR over the three triggers is a share of 450
    # outputs: the standard error of a difference is <= sqrt(2 * 0.25 / 450) = 0.033; we ask 3 of them.
    from trustlab.security.mixbridge import MixBridge, evaluate_bridge_backdoor, merge_bridges, train_router
    from trustlab.vision.bridge import train_bridge
    from trustlab.vision.classifiers import make_classifier
    from trustlab.vision.diffusion import make_unet

    X0, X1, _ = digits_inpaint_pairs("train", 600, draws=4, random_state=0)
    T = digits_backdoor_targets()
    attack = MixBridge(make_unet(channels=8), expert_steps=300, wrs=1.0, random_state=0).fit(X0, X1, T)
    pairs = attack.poison(X0, X1, T)
    router = train_router(make_classifier("cnn", width=8, n_classes=4), pairs, steps=200, random_state=0)
    Xv0, Xv1, _ = digits_inpaint_pairs("test", N_EVAL, random_state=1)
    se = math.sqrt(2 * 0.25 / (3 * N_EVAL))
    asr, benign = {}, {}
    for j, rate in ((0, 0.1), (2, 0.9)):
        rp = poison_rate_pairs(pairs, rate, random_state=j)
        single = train_bridge(make_unet(channels=8), rp.X0, rp.X1, steps=1200, random_state=7 + j)
        merged = merge_bridges(attack.experts_, router, rp, steps=50, wrs=1.0, random_state=200 + j)
        for name, model in (("single", single), ("mix", merged)):
            r = evaluate_bridge_backdoor(model, Xv0, Xv1, T, nfe=10, random_state=0)
            asr[name, rate], benign[name, rate] = float(np.mean(r.attack_success)), r.benign_mse
    for rate in (0.1, 0.9):
        assert asr["mix", rate] - asr["single", rate] > 3 * se, (rate, asr)
    # the single bridge needs a high rate to take the backdoors (0.00 at 10%, 0.64 at 90%) and then
    # loses benign fidelity (MSE 0.066 vs MixBridge's 0.040 at 90%)
    assert asr["single", 0.1] < 0.1 and asr["single", 0.9] - asr["single", 0.1] > 3 * se
    assert benign["mix", 0.9] < 0.8 * benign["single", 0.9]
    # not the paper's robustness: MixBridge's attack success falls too at 10% (0.39 vs 0.80 at 90%)
    assert asr["mix", 0.9] - asr["mix", 0.1] > 3 * se
