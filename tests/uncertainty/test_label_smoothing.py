"""Label smoothing for calibrated SFT (Huang, Lu & Zeng, ICML 2025): exact chunked loss, LM loss, ECE."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trustlab.errors import TrustlabError  # noqa: E402
from trustlab.uncertainty.label_smoothing import (  # noqa: E402
    chunked_smoothed_cross_entropy,
    smoothed_cross_entropy,
    smoothed_lm_loss,
)

F = torch.nn.functional


def _problem(n, d, v, seed, dtype=torch.float64, bias=True):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g, dtype=dtype, requires_grad=True)
    w = (torch.randn(v, d, generator=g, dtype=dtype) / d**0.5).requires_grad_()
    b = torch.randn(v, generator=g, dtype=dtype).requires_grad_() if bias else None
    y = torch.randint(0, v, (n,), generator=g)
    y[::5] = -100
    return h, w, b, y


def _grads(loss, *params):
    return torch.autograd.grad(loss, [p for p in params if p is not None])


@pytest.mark.claims
@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 24),
    v=st.integers(2, 50),
    token_block=st.integers(3, 16),
    vocab_block=st.integers(4, 32),
    beta=st.sampled_from([0.0, 0.1, 0.5]),
    bias=st.booleans(),
)
def test_chunked_loss_and_gradients_equal_torch_label_smoothing(n, v, token_block, vocab_block, beta, bias):
    # The reference is torch's own cross_entropy(label_smoothing=beta) on the materialised logits.
    h, w, b, y = _problem(n, 6, v, seed=n * 100 + v, bias=bias)
    if (y == -100).all():
        y[0] = 0
    logits = h @ w.T + (b if b is not None else 0)
    ref = F.cross_entropy(logits, y, label_smoothing=beta, ignore_index=-100)
    ours = chunked_smoothed_cross_entropy(
        h, w, y, bias=b, smoothing=beta, token_block=token_block, vocab_block=vocab_block
    )
    assert ours.dtype == torch.float64
    assert abs(float(ours.detach()) - float(ref.detach())) < 1e-10
    for a, r in zip(_grads(ours, h, w, b), _grads(ref, h, w, b), strict=True):
        assert torch.allclose(a, r, atol=1e-10)
    assert (
        abs(float(smoothed_cross_entropy(logits, y, smoothing=beta).detach()) - float(ref.detach())) < 1e-12
    )


def test_float32_sum_and_none_reductions():
    h, w, b, y = _problem(300, 16, 1000, seed=1, dtype=torch.float32)
    logits = h @ w.T + b
    for reduction in ("sum", "none"):
        ref = F.cross_entropy(logits, y, label_smoothing=0.1, reduction=reduction)
        ours = chunked_smoothed_cross_entropy(h, w, y, bias=b, reduction=reduction, vocab_block=128)
        assert torch.allclose(ours, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("temperature", "softcap"), [(0.25, None), (1.0, 3.0), (0.5, 4.0)])
def test_temperature_and_softcap_are_the_authors_training_loss(temperature, softcap):
    # The authors' SFT loss: cross_entropy(label_smoothing) of cap(z / T), times T.
    h, w, b, y = _problem(40, 6, 30, seed=3)

    def reference():
        capped = (h @ w.T + b) * 3 / temperature
        if softcap is not None:
            capped = softcap * torch.tanh(capped / softcap)
        return F.cross_entropy(capped, y, label_smoothing=0.1) * temperature

    ref = reference()
    z = (h @ w.T + b) * 3
    ours = smoothed_cross_entropy(z, y, smoothing=0.1, temperature=temperature, softcap=softcap)
    assert abs(float(ours.detach()) - float(ref.detach())) < 1e-12
    for a, r in zip(_grads(ours, h, w, b), _grads(ref, h, w, b), strict=True):
        assert torch.allclose(a, r, atol=1e-12)
    if softcap is None:  # the memory-light loss takes the temperature without the logits
        light = chunked_smoothed_cross_entropy(
            h, w * 3, y, bias=b * 3, temperature=temperature, vocab_block=7
        )
        assert abs(float(light.detach()) - float(ref.detach())) < 1e-10
        for a, r in zip(_grads(light, h, w, b), _grads(reference(), h, w, b), strict=True):
            assert torch.allclose(a, r, atol=1e-10)


def test_lm_loss_with_temperature_memory_light_equals_logits_path():
    from trustlab.lm import ModelConfig, build_model

    model = build_model(ModelConfig("llama", vocab_size=23, d_model=16, n_layers=1, n_heads=2, max_len=16))
    ids = torch.randint(0, 23, (2, 7), generator=torch.Generator().manual_seed(1))
    light = smoothed_lm_loss(model, ids, temperature=0.2, vocab_block=5)
    full = smoothed_lm_loss(model, ids, temperature=0.2, memory_light=False)
    assert abs(float(light.detach()) - float(full.detach())) < 1e-5
    capped = smoothed_lm_loss(model, ids, temperature=0.2, softcap=0.5, memory_light=False)
    assert float(capped.detach()) != pytest.approx(float(full.detach()), abs=1e-3)  # the cap binds


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_lm_loss_memory_light_equals_logits_path(arch):
    from trustlab.lm import ModelConfig, build_model

    model = build_model(
        ModelConfig(arch, vocab_size=23, d_model=16, n_layers=1, n_heads=2, max_len=16), seed=0
    )
    ids = torch.randint(0, 23, (3, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[:, :4] = 0  # the prompt does not count (instruction-style SFT)
    light = smoothed_lm_loss(model, ids, mask, smoothing=0.1, vocab_block=5, token_block=7)
    full = smoothed_lm_loss(model, ids, mask, smoothing=0.1, memory_light=False)
    assert abs(float(light.detach()) - float(full.detach())) < 1e-5
    params = [p for p in model.parameters() if p.requires_grad]
    for a, r in zip(torch.autograd.grad(light, params), torch.autograd.grad(full, params), strict=True):
        assert torch.allclose(a, r, atol=1e-5)


def test_training_hook_with_zero_smoothing_reproduces_the_lab_loop():
    from trustlab.lm import ModelConfig, TrainConfig, build_model, sorting_task, train_model

    data = sorting_task(64, 4, n_values=8, seed=0)
    cfg = TrainConfig(steps=4, batch_size=8, seed=0)

    def model():
        return build_model(ModelConfig("llama", vocab_size=9, d_model=16, n_layers=1, n_heads=2), seed=0)

    plain = train_model(model(), data, cfg).losses
    hooked = train_model(
        model(), data, cfg, loss_fn=lambda m, t, k: smoothed_lm_loss(m, t, k, smoothing=0.0)
    ).losses
    assert np.allclose(plain, hooked, atol=1e-4)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda h, w, y: chunked_smoothed_cross_entropy(h, w, y, smoothing=1.0), "smoothing"),
        (lambda h, w, y: chunked_smoothed_cross_entropy(h, w, y, smoothing=-0.1), "smoothing"),
        (lambda h, w, y: chunked_smoothed_cross_entropy(h, w[:, :3], y), "weight"),
        (lambda h, w, y: chunked_smoothed_cross_entropy(h, w, y.float()), "targets"),
        (lambda h, w, y: chunked_smoothed_cross_entropy(h, w, y + 100), "targets"),
        (lambda h, w, y: chunked_smoothed_cross_entropy(h[0], w, y), "hidden"),
        (lambda h, w, y: chunked_smoothed_cross_entropy(h, w, y, vocab_block=0), "vocab_block"),
        (lambda h, w, y: chunked_smoothed_cross_entropy(h, w, y, reduction="avg"), "reduction"),
        (lambda h, w, y: chunked_smoothed_cross_entropy(h, w, y, bias=torch.zeros(3)), "bias"),
        (lambda h, w, y: smoothed_cross_entropy(h @ w.T, y[:2]), "targets"),
        (lambda h, w, y: smoothed_lm_loss(torch.nn.Linear(2, 2), y[None]), "model"),
        (lambda h, w, y: smoothed_cross_entropy(h @ w.T, y, temperature=0), "temperature"),
        (lambda h, w, y: smoothed_cross_entropy(h @ w.T, y, temperature=float("nan")), "temperature"),
        (lambda h, w, y: smoothed_cross_entropy(h @ w.T, y, temperature=True), "temperature"),
        (lambda h, w, y: chunked_smoothed_cross_entropy(h, w, y, temperature=-1.0), "temperature"),
        (lambda h, w, y: smoothed_cross_entropy(h @ w.T, y, softcap=0.0), "softcap"),
        (lambda h, w, y: smoothed_cross_entropy(h @ w.T, y, softcap=float("inf")), "softcap"),
        (lambda h, w, y: smoothed_lm_loss(torch.nn.Linear(2, 2), y[None], softcap=30.0), "softcap"),
    ],
)
def test_bad_input_names_the_argument(call, argument):
    h, w, _, y = _problem(6, 4, 10, seed=0)
    with pytest.raises(TrustlabError) as err:
        call(h.detach(), w.detach(), y)
    assert err.value.argument == argument


@pytest.mark.slow  # two fine-tunes of 300 steps (10-30 s on the shared machine)
@pytest.mark.claims
def test_claim_smoothing_lowers_ece_at_matched_accuracy(noisy_answers):
    # 150 noisy instruction items (40% random answers), 300 steps: the hard-label model overfits
    # and grows over-confident; the same run with smoothing 0.1 (the paper's value) keeps
    # accuracy and lowers the top-1 ECE on 2,000 held-out items (sd of ECE about 0.01).
    from trustlab.lm import ModelConfig, TrainConfig, build_model, train_model
    from trustlab.uncertainty import expected_calibration_error

    train, _ = noisy_answers(150, 0)
    test, answers = noisy_answers(2000, 1)
    results = {}
    for beta in (0.0, 0.1):
        model = build_model(
            ModelConfig("llama", vocab_size=16, d_model=16, n_layers=1, n_heads=2, max_len=8), seed=0
        )
        hook = None if beta == 0 else (lambda m, t, k: smoothed_lm_loss(m, t, k, smoothing=0.1))
        train_model(model, train, TrainConfig(steps=300, batch_size=32, lr=1e-2, warmup=10), loss_fn=hook)
        with torch.no_grad():
            probs = torch.softmax(model(torch.as_tensor(test.tokens[:, :-1])).logits[:, -1].double(), -1)
        conf, pred = probs.max(-1)
        correct = (pred.numpy() == answers).astype(int)
        results[beta] = (correct.mean(), expected_calibration_error(correct, conf.numpy()))
    (acc_hard, ece_hard), (acc_ls, ece_ls) = results[0.0], results[0.1]
    assert abs(acc_hard - acc_ls) < 0.04  # matched accuracy (sd of a difference about 0.016)
    assert ece_ls < ece_hard - 0.04


@pytest.mark.slow  # a 200-step "pretraining" and two 300-step fine-tunes (about 50 s on the shared machine)
@pytest.mark.claims
def test_claim_fine_tuning_degrades_calibration_and_smoothing_keeps_it(noisy_answers):
    # The paper's first finding at toy scale: a base model trained on plenty of the task's data
    # (4,000 items, 40% random answers) is calibrated; instruction-style fine-tuning on 150 items
    # makes it over-confident; the same fine-tune with smoothing 0.1 keeps much of the base's
    # calibration. Measured: ECE 0.033 base, 0.248 after hard-label SFT, 0.133 after smoothed
    # SFT (accuracy 0.691, 0.566, 0.618; top-1 ECE on 2,000 held-out items, sd about 0.01).
    import copy

    from trustlab.lm import ModelConfig, TrainConfig, build_model, train_model
    from trustlab.uncertainty import expected_calibration_error

    pretrain, _ = noisy_answers(4000, 10)
    sft, _ = noisy_answers(150, 0)
    test, answers = noisy_answers(2000, 1)

    def evaluate(model):
        with torch.no_grad():
            probs = torch.softmax(model(torch.as_tensor(test.tokens[:, :-1])).logits[:, -1].double(), -1)
        conf, pred = probs.max(-1)
        correct = (pred.numpy() == answers).astype(int)
        return correct.mean(), expected_calibration_error(correct, conf.numpy())

    base = build_model(
        ModelConfig("llama", vocab_size=16, d_model=16, n_layers=1, n_heads=2, max_len=8), seed=0
    )
    train_model(base, pretrain, TrainConfig(steps=200, batch_size=64, lr=1e-2, warmup=10))
    _, ece_base = evaluate(base)
    results = {}
    for beta in (0.0, 0.1):
        model = copy.deepcopy(base)
        hook = None if beta == 0 else (lambda m, t, k: smoothed_lm_loss(m, t, k, smoothing=0.1))
        train_model(model, sft, TrainConfig(steps=300, batch_size=32, lr=1e-2, warmup=10), loss_fn=hook)
        results[beta] = evaluate(model)
    (acc_hard, ece_hard), (acc_ls, ece_ls) = results[0.0], results[0.1]
    assert ece_base < 0.06
    assert ece_hard > ece_base + 0.1  # fine-tuning degrades calibration
    assert ece_ls < ece_hard - 0.05  # smoothing keeps much of it
    assert acc_ls > acc_hard - 0.04


# Instruction-style QA for the pretrained lab LM: "Q: what kind of value is [3, 41]? A: list".
_KINDS = (" string", " number", " list", " tuple")  # one BPE token each in small-llama-english


def _literal(kind, rng):
    if kind == 0:
        return "'" + "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), rng.integers(2, 6))) + "'"
    if kind == 1:
        whole = rng.random() < 0.5
        return str(rng.integers(0, 1000)) if whole else f"{rng.integers(0, 100)}.{rng.integers(10)}"
    items = ", ".join(str(rng.integers(0, 100)) for _ in range(rng.integers(2, 4)))
    return f"[{items}]" if kind == 2 else f"({items})"


def _value_kind_qa(tokenizer, n, seed, noise=0.4, length=28):
    """``n`` QA items; a share ``noise`` of the answers is a random kind (so the best accuracy is 0.7)."""
    from trustlab.lm.corpora import TokenData

    answers = np.array([tokenizer(k)["input_ids"][0] for k in _KINDS])
    pad = tokenizer("\n")["input_ids"][0]
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 4, n)
    label = np.where(rng.random(n) < noise, rng.integers(0, 4, n), kind)
    rows = []
    for k, a in zip(kind, label, strict=True):
        ids = tokenizer(f"Q: what kind of value is {_literal(k, rng)}? A:")["input_ids"] + [int(answers[a])]
        rows.append([pad] * (length - len(ids)) + ids)  # left-padded with newlines to one length
    tokens = np.array(rows)
    mask = np.zeros_like(tokens, dtype=bool)
    mask[:, -1] = True  # only the answer token is supervised
    return TokenData(tokens, mask, len(tokenizer)), answers[label]


@pytest.mark.slow  # eight 150-step fine-tunes of a 4-block lab Llama (about 3 min on a loaded 2-core box)
@pytest.mark.claims
def test_claim_smoothing_lowers_ece_after_sft_of_a_pretrained_lab_lm():
    # The paper's setting with a lab language model: small-llama-english (4 blocks, width 96,
    # byte-level BPE of 1,024 tokens, pretrained here on CPython's pydoc texts) is fine-tuned on
    # 150 instruction-style QA items ("Q: what kind of value is (3, 41)? A: tuple", 40% of the
    # answers random), all weights, 150 steps of 16, with and without smoothing 0.1; the
    # confidence is the answer position's top-1 probability over the whole vocabulary, on 1,000
    # held-out items per seed. Four seeds (data and batch order), paired. Measured ECE hard ->
    # smoothed: 0.354 -> 0.252, 0.252 -> 0.194, 0.297 -> 0.244, 0.292 -> 0.222 (gain 0.071,
    # paired SE 0.011); accuracy 0.552 vs 0.558.
    import copy

    from trustlab.lm import TrainConfig, load_shipped, train_model
    from trustlab.uncertainty import expected_calibration_error

    torch.set_num_threads(1)
    base, tokenizer, _ = load_shipped("small-llama-english")
    gains, acc_gaps = [], []
    for seed in range(4):
        train, _ = _value_kind_qa(tokenizer, 150, seed)
        test, answers = _value_kind_qa(tokenizer, 1000, 1000 + seed)
        ece, acc = {}, {}
        for beta in (0.0, 0.1):
            model = copy.deepcopy(base)
            hook = None if beta == 0 else (lambda m, t, k: smoothed_lm_loss(m, t, k, smoothing=0.1))
            config = TrainConfig(steps=150, batch_size=16, lr=2e-3, warmup=10, seed=seed)
            train_model(model, train, config, loss_fn=hook)
            with torch.no_grad():
                logits = model(torch.as_tensor(test.tokens[:, :-1])).logits[:, -1].double()
            conf, pred = torch.softmax(logits, -1).max(-1)
            correct = (pred.numpy() == answers).astype(int)
            acc[beta], ece[beta] = correct.mean(), expected_calibration_error(correct, conf.numpy())
        gains.append(ece[0.0] - ece[0.1])
        acc_gaps.append(acc[0.1] - acc[0.0])
    gain, se = np.mean(gains), np.std(gains, ddof=1) / np.sqrt(len(gains))
    assert gain > 3 * se and gain > 0.03  # smoothing lowers the ECE beyond 3 paired SE
    assert np.mean(acc_gaps) > -0.03  # without costing accuracy


def test_docs_example_runs_and_its_figures_hold(capsys):
    # docs/uncertainty/label_smoothing.md: the python blocks run in order, in one namespace.
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "uncertainty" / "label_smoothing.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    assert len(blocks) == 2
    ns: dict = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, str(page), "exec"), ns)
    assert "smoothed SFT loss" in capsys.readouterr().out
    assert abs(float(ns["ours"]) - float(ns["ref"])) < 1e-5  # float32 over 50 classes
    assert ns["cap"].smoothing_reachable  # the last loop step: T = 0.1 lets smoothing act
    assert torch.isfinite(ns["loss"])
