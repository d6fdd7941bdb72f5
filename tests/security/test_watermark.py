"""BiMark (Feng et al., ICML 2025): unbiasedness, extraction against an MPAC-style baseline, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.security.watermark import BiMark, MPACBaseline, generate_watermarked

MSG = "10110010"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "security" / "watermark.md"


def _chi_square_p(counts: np.ndarray, probs: np.ndarray) -> float:
    """Goodness of fit of ``counts`` to ``probs``; categories with expected count < 5 pooled."""
    from scipy.stats import chisquare

    expected = probs * counts.sum()
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    return float(chisquare(obs[keep], exp[keep]).pvalue)


def _key_averaged(make, probs: np.ndarray, n_keys: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per key, the watermarked distribution after a fixed context and one token sampled from it."""
    rng = np.random.default_rng(seed)
    bits = np.array([int(b) for b in MSG])
    counts, total = np.zeros(probs.size, dtype=np.int64), np.zeros(probs.size)
    for key in range(n_keys):
        wm = make(key)
        q = wm._step(probs, wm._digest(np.array([3, 5])), bits)
        total += q
        counts[rng.choice(probs.size, p=q)] += 1
    return counts, total / n_keys


@pytest.mark.claims
def test_claim_unbiased_chi_square_over_keys_where_the_green_list_baseline_is_biased():
    # A peaked next-token distribution (Zipf over 13 tokens): BiMark's key-averaged watermarked
    # distribution passes a chi-square test against it; the MPAC-style green list (delta=2)
    # flattens it and fails the same test at the same number of keys.
    probs = 1.0 / np.arange(1, 14) ** 1.5
    probs /= probs.sum()
    n_keys = 1000
    counts_b, mean_b = _key_averaged(lambda k: BiMark(13, key=k, n_bits=8), probs, n_keys, 0)
    counts_m, _ = _key_averaged(lambda k: MPACBaseline(13, key=k, n_bits=8), probs, n_keys, 0)
    assert _chi_square_p(counts_b, probs) > 0.01
    assert _chi_square_p(counts_m, probs) < 1e-4
    # The exact key average (no sampling) equals the distribution to Monte-Carlo accuracy.
    assert np.abs(mean_b - probs).max() < 4 * np.sqrt(probs.max() / n_keys)


@pytest.fixture(scope="module")
def random_lm():
    pytest.importorskip("transformers")
    from trustlab.lm import ModelConfig, build_model

    return build_model(
        ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2, max_len=64), seed=0
    )


def _bit_accuracy(wm, ids: np.ndarray) -> float:
    target = np.array([int(b) for b in MSG])
    return float(np.mean([np.mean(wm.extract(row, start=2).bits == target) for row in ids]))


@pytest.mark.claims
def test_claim_extraction_above_mpac_at_equal_length(random_lm):
    prompts = np.tile(np.array([[3, 5]]), (12, 1))
    bimark, mpac = BiMark(13, key=11, n_bits=8), MPACBaseline(13, key=11, n_bits=8, delta=2.0)
    acc_b = _bit_accuracy(
        bimark, generate_watermarked(random_lm, prompts, bimark, MSG, max_new_tokens=32, seed=0)
    )
    acc_m = _bit_accuracy(
        mpac, generate_watermarked(random_lm, prompts, mpac, MSG, max_new_tokens=32, seed=0)
    )
    assert acc_b > acc_m
    assert acc_b > 0.95


def test_unwatermarked_text_is_not_detected(random_lm):
    # Under the null the p-value is exact: at level 0.01, about 0.16 of 16 texts (allow 2).
    ids = generate_watermarked(
        random_lm, np.tile(np.array([[3, 5]]), (16, 1)), None, max_new_tokens=32, seed=1
    )
    p = [BiMark(13, key=11, n_bits=8).extract(row, start=2).p_value for row in ids]
    assert sum(v < 0.01 for v in p) <= 2
    wm = BiMark(13, key=11, n_bits=8)
    marked = generate_watermarked(random_lm, ids[:4, :2], wm, MSG, max_new_tokens=32, seed=1)
    assert all(wm.extract(row, start=2).p_value < 1e-4 for row in marked)


def test_processor_works_inside_transformers_generate(random_lm):
    import torch
    from transformers import LogitsProcessorList

    wm = BiMark(13, key=11, n_bits=8)
    torch.manual_seed(0)
    out = random_lm.generate(
        torch.tensor([[3, 5]] * 4),
        do_sample=True,
        top_k=0,
        max_new_tokens=32,
        logits_processor=LogitsProcessorList([wm.processor(MSG)]),
        pad_token_id=0,
    )
    found = [wm.extract(row, start=2) for row in out.numpy()]
    assert sum(f.message == MSG for f in found) >= 3
    assert all(f.message in (MSG, None) for f in found)


def test_short_text_is_undecidable_not_a_guess():
    wm = BiMark(13, key=1, n_bits=8)
    result = wm.extract([3, 5, 7, 2], start=2)
    assert result.message is None and not result.decided
    assert (result.bits == -1).any()
    for ids, start in (([], 0), ([3], 0), ([3, 5, 6], 5)):  # empty, prompt only, start past the end
        empty = wm.extract(ids, start=start)
        assert empty.message is None and not empty.decided and empty.n_scored == 0 and empty.p_value == 1.0


def test_reweight_is_a_distribution_and_delta_bounds_hold():
    wm = BiMark(50, key=b"k", n_bits=4, n_layers=20, delta=1.0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        p = rng.dirichlet(np.full(50, 0.3))
        q = wm.reweight(p, rng.integers(0, 50, 2), "0110")
        assert abs(q.sum() - 1) < 1e-9 and (q >= 0).all()
        assert (q[p == 0] == 0).all()


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: BiMark(13, key=1, n_bits=8).reweight(np.full(13, 1 / 13), [1, 2], "101"), "message"),
        (lambda: BiMark(13, key=1, n_bits=8).processor("10x"), "message"),
        (lambda: BiMark(13, key=-1), "key"),
        (lambda: BiMark(13, key=b""), "key"),
        (lambda: BiMark(13, key=2**128), "key"),  # longer than the 16-byte int key
        (lambda: BiMark(13, key=1, delta=1.5), "delta"),
        (lambda: BiMark(13, key=1, n_layers=65), "n_layers"),
        (lambda: BiMark(13, key=1).extract([1, 2, 40]), "token_ids"),
        (lambda: BiMark(13, key=1, n_bits=2).reweight(np.full(12, 1 / 12), [1, 2], "10"), "probs"),
        (lambda: BiMark(13, key=1, n_bits=2).reweight(np.full(13, 1 / 13), [1], "10"), "context"),
        (lambda: MPACBaseline(13, key=1, delta=0), "delta"),
    ],
)
def test_bad_input_names_the_argument(call, argument):
    with pytest.raises(TrustlabError) as err:
        call()
    assert err.value.argument == argument


@settings(max_examples=25, deadline=None, derandomize=True)
@given(n_bits=st.integers(1, 12), length=st.integers(0, 16), data=st.data())
def test_message_of_the_wrong_length_names_message(n_bits, length, data):
    assume(length != n_bits)
    bits = "".join(data.draw(st.sampled_from("01")) for _ in range(length))
    wm = BiMark(13, key=3, n_bits=n_bits)
    for call in (lambda: wm.processor(bits), lambda: wm.reweight(np.full(13, 1 / 13), [1, 2], bits)):
        with pytest.raises(TrustlabError) as err:
            call()
        assert err.value.argument == "message" and str(n_bits) in str(err.value)


def test_vocabulary_mismatch_with_the_model(random_lm):
    with pytest.raises(ParameterError) as err:
        generate_watermarked(
            random_lm, np.array([[3, 5]]), BiMark(20, key=1, n_bits=2), "10", max_new_tokens=2
        )
    assert err.value.argument == "vocab_size"
    with pytest.raises(DataError):
        generate_watermarked(random_lm, np.array([3, 5]), BiMark(13, key=1, n_bits=2), "10")


@pytest.mark.slow  # trains a sorting-stream model (10-20 s on the shared machine)
@pytest.mark.claims
def test_claim_trained_model_extraction_and_perplexity():
    import torch

    from trustlab.lm import ModelConfig, TrainConfig, build_model, sorting_task, train_model
    from trustlab.lm.corpora import TokenData

    tok = sorting_task(2000, 6, n_values=12, seed=0).tokens.reshape(500, 52)
    model = build_model(
        ModelConfig("llama", vocab_size=13, d_model=32, n_layers=2, n_heads=2, max_len=128), seed=0
    )
    train_model(
        model,
        TokenData(tok, np.ones_like(tok, dtype=bool), 13),
        TrainConfig(steps=30, batch_size=16, lr=1e-2, warmup=5, seed=0),
    )

    def nll(ids):
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.as_tensor(ids)).logits.double(), -1)
        x = torch.as_tensor(ids)
        return float(-lp[:, :-1].gather(-1, x[:, 1:, None])[..., 0][:, 1:].mean())

    prompts = tok[:40, :2]
    plain = generate_watermarked(model, prompts, None, max_new_tokens=48, seed=0)
    bimark, mpac = BiMark(13, key=1, n_bits=8), MPACBaseline(13, key=1, n_bits=8, delta=2.0)
    ids_b = generate_watermarked(model, prompts, bimark, MSG, max_new_tokens=48, seed=0)
    ids_m = generate_watermarked(model, prompts, mpac, MSG, max_new_tokens=48, seed=0)
    assert _bit_accuracy(bimark, ids_b) > _bit_accuracy(mpac, ids_m)
    # Per-token NLL (nats) under the model: 40 x 48 tokens, standard error about 0.03.
    assert abs(nll(ids_b) - nll(plain)) < 0.1
    assert nll(ids_m) > nll(ids_b)


def test_docs_example_runs(run_docs_example):
    pytest.importorskip("transformers")
    run_docs_example(DOCS)
