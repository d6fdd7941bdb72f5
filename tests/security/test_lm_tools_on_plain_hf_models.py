"""Issue 32's tools on the user's own model: plain ``transformers`` models built here from a config.

Not trustlab's ``build_model`` nor a shipped lab model: ``GPT2LMHeadModel`` / ``LlamaForCausalLM``
straight from ``transformers`` with its own config defaults, left in training mode as a config
build leaves it (the tools must work on it and hand it back in the mode they found it).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers")

V = 13


def _gpt2():
    torch.manual_seed(0)
    return tf.GPT2LMHeadModel(
        tf.GPT2Config(
            vocab_size=V, n_embd=16, n_layer=1, n_head=2, n_positions=64, bos_token_id=0, eos_token_id=0
        )
    )


def _llama():
    torch.manual_seed(0)
    cfg = tf.LlamaConfig(
        vocab_size=V,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return tf.LlamaForCausalLM(cfg)


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def plain(request):
    model = _gpt2() if request.param == "gpt2" else _llama()
    assert model.training  # a config build is in training mode
    return model


def test_bimark_embeds_and_reads_back_on_a_plain_model(plain):
    from trustlab.security.watermark import BiMark, generate_watermarked

    wm = BiMark(V, key=b"user key", n_bits=4)
    prompts = np.array([[3, 5], [4, 6]])
    a = generate_watermarked(plain, prompts, wm, "1011", max_new_tokens=48, seed=1)
    b = generate_watermarked(plain, prompts, wm, "1011", max_new_tokens=8, seed=1)
    np.testing.assert_array_equal(a[:, :10], b)  # dropout is off while sampling
    assert plain.training
    found = [wm.extract(row, start=2) for row in a]
    assert [f.message for f in found] == ["1011", "1011"]
    assert BiMark(V, key=b"other", n_bits=4).extract(a[0], start=2).p_value > 1e-3


def test_smoothed_loss_on_a_plain_model_equals_the_logits_path(plain):
    from trustlab.uncertainty.label_smoothing import smoothed_lm_loss

    ids = torch.randint(0, V, (2, 10), generator=torch.Generator().manual_seed(0))
    plain.eval()
    try:
        light = smoothed_lm_loss(plain, ids, smoothing=0.1)
        full = smoothed_lm_loss(plain, ids, smoothing=0.1, memory_light=False)
        logits = plain(ids).logits[:, :-1].reshape(-1, V).double()
        ref = torch.nn.functional.cross_entropy(logits, ids[:, 1:].reshape(-1), label_smoothing=0.1)
    finally:
        plain.train()
    assert abs(light.item() - ref.item()) < 1e-5 and abs(full.item() - ref.item()) < 1e-5
    light.backward()
    assert plain.get_output_embeddings().weight.grad is not None
    plain.zero_grad(set_to_none=True)


def test_dp_demonstrations_from_a_plain_model_are_charged(plain):
    from trustlab.privacy import Accountant
    from trustlab.privacy.dp_icl import generate_dp_demonstrations

    acc = Accountant(2.0, delta=1e-5)
    rel = generate_dp_demonstrations(
        plain,
        [[2, 3], [4, 5], [6, 7], [8, 9]],
        epsilon=2.0,
        delta=1e-5,
        label_prompts=[[1]],
        max_tokens=3,
        top_k=5,
        accountant=acc,
    )
    assert rel.epsilon == 2.0 and acc.spent_epsilon == pytest.approx(2.0, rel=1e-6)
    assert all(0 <= t < V for demo in rel.value for t in demo)


def test_steering_hook_on_a_plain_model_is_on_inside_and_off_after(plain):
    from trustlab.security.steering_transfer import steer, steering_vector

    ids = torch.tensor([[1, 2, 3, 4]])
    plain.eval()
    try:
        before = plain(ids).logits
        v = steering_vector(plain, [[1, 2, 3]], [[4, 5, 6]], hook="blocks.0.resid_post")
        with steer(plain, v, hook="blocks.0.resid_post", alpha=5.0):
            on = plain(ids).logits
        after = plain(ids).logits
    finally:
        plain.train()
    assert not torch.allclose(on, before) and torch.equal(after, before)


def test_safety_head_decodes_a_plain_model(plain):
    from trustlab.security.safety_decoding import SafetyHead, safe_generate

    rng = np.random.default_rng(0)
    harmful = rng.integers(7, V, (8, 5))
    benign = rng.integers(1, 7, (8, 5))
    head = SafetyHead(plain, steps=30).fit(np.vstack([harmful, benign]), np.r_[np.ones(8), np.zeros(8)])
    out = safe_generate(
        plain, head, np.vstack([harmful[:2], benign[:2]]), refusal_ids=[1, 2], max_new_tokens=3
    )
    assert out.tokens.shape == (4, 8) and out.n_checks >= 1
    assert plain.training


def test_complication_report_on_a_plain_sequence_classifier():
    from trustlab.security.backdoor_complications import complication_report

    torch.manual_seed(0)
    clf = tf.GPT2ForSequenceClassification(
        tf.GPT2Config(
            vocab_size=V, n_embd=16, n_layer=1, n_head=2, n_positions=16, num_labels=3, pad_token_id=0
        )
    )
    X = np.random.default_rng(0).integers(1, V, (24, 6))
    report = complication_report(clf, X, trigger=12)
    assert report.kl >= 0 and np.isclose(np.sum(report.clean_distribution), 1.0)
