"""Row 000-15: neologism learning (a new word's embedding trained, the model frozen)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

from trustlab.errors import DataError, ModelError, ParameterError, TrustlabError  # noqa: E402
from trustlab.explain._neologism_task import TOPICS  # noqa: E402
from trustlab.explain.neologisms import (  # noqa: E402
    NeologismLearner,
    length_prompt,
    length_task_corpus,
    length_task_model,
    length_task_pairs,
    preference_loss,
    train_length_task_model,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "explain" / "neologisms.md"
TARGETS = list(range(1, 9))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def lab():
    return length_task_model()  # packaged weights: no training


@pytest.fixture(scope="module")
def fitted(lab):
    model, tok = lab
    before = {k: v.clone() for k, v in model.state_dict().items()}
    prompts, chosen, rejected, _ = length_task_pairs(32, "<len>", seed=0)
    learner = NeologismLearner(model, tok, token="<len>", init="please", lr=0.03, n_epochs=5)
    return learner.fit(prompts, chosen, rejected), before


def _random_vector(model, seed: int) -> np.ndarray:
    w = model.get_input_embeddings().weight.detach().numpy()
    return w.mean(0) + w.std(0) * np.random.default_rng(seed).standard_normal(w.shape[1])


def _length_correlation(learner, style: str, *, embedding=None, topics=TOPICS[:2], n_samples=4, seed=1):
    prompts = [length_prompt(t, n, style) for t in topics for n in TARGETS]
    samples = learner.generate(
        prompts, n_samples=n_samples, max_new_tokens=12, random_state=seed, embedding=embedding
    )
    asked = np.repeat([n for _ in topics for n in TARGETS], n_samples)
    got = np.array([len(s) for per in samples for s in per])
    return float(np.corrcoef(asked, got)[0, 1]), float(np.mean(asked == got)), len(got)


def _fisher_gap(r1: float, r2: float, n: int) -> tuple[float, float]:
    """atanh(r1) - atanh(r2) and the standard error of that difference (independent samples)."""
    clip = 0.999
    return float(np.arctanh(min(r1, clip)) - np.arctanh(min(r2, clip))), float(np.sqrt(2.0 / (n - 3)))


@pytest.mark.claims
def test_claim_length_neologism_makes_response_length_follow_the_request(fitted, lab):
    # The lab task (docs/explain/neologisms.md): "write about T in N words STYLE :". With the
    # learned word in the STYLE slot the sampled length tracks N; the same prompt with the
    # neutral word "please", and the word replaced by a random embedding, do not.
    learner, _ = fitted
    r_neo, exact_neo, n = _length_correlation(learner, "<len>")
    r_plain, exact_plain, _ = _length_correlation(learner, "please")
    r_rand, _, _ = _length_correlation(learner, "<len>", embedding=_random_vector(lab[0], 5))
    # Tolerance: 3 standard errors of a difference of Fisher z's over n = 64 samples each.
    for other in (r_plain, r_rand):
        gap, se = _fisher_gap(r_neo, other, n)
        assert gap > 3 * se, (r_neo, r_plain, r_rand)
    assert r_neo > 0.8
    # exact-length rate: binomial standard errors over the 64 samples
    se = np.sqrt(exact_neo * (1 - exact_neo) / n + exact_plain * (1 - exact_plain) / n)
    assert exact_neo - exact_plain > 3 * se, (exact_neo, exact_plain)


def test_model_weights_unchanged_and_prompts_without_the_word_unchanged(fitted, lab):
    learner, before = fitted
    model, tok = lab
    after = model.state_dict()
    assert set(after) == set(before)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.requires_grad for p in model.parameters())  # flags restored
    assert not model.training
    assert not np.allclose(learner.embedding_, learner.init_embedding_)  # the word's row did train
    # a prompt without the word: identical to the plain model's log-probability
    prompt, response = length_prompt("tea", 3, "please"), "cup leaf steam"
    ids = tok(prompt)["input_ids"] + tok(response)["input_ids"] + [tok.eos_token_id]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1]
    lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]
    expected = float(lp[len(tok(prompt)["input_ids"]) - 1 :].sum())
    assert learner.log_prob([prompt], [response])[0] == pytest.approx(expected, abs=1e-5)
    assert tok.get_vocab().get("<len>") is None  # the user's tokenizer is not modified
    assert learner.tokenizer_.convert_ids_to_tokens(learner.token_id_) == "<len>"


def test_export_is_the_model_with_one_more_embedding_row(fitted, lab):
    learner, before = fitted
    model, _ = lab
    vocab = model.get_input_embeddings().weight.shape[0]
    grown, tok2 = learner.export()
    assert grown.get_input_embeddings().weight.shape[0] == vocab + 1
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # original untouched
    prompt = length_prompt("rain", 4, "<len>")
    ids = tok2(prompt)["input_ids"]
    assert ids[-2] == learner.token_id_ == vocab
    with torch.no_grad():
        direct = grown(input_ids=torch.tensor([ids])).logits[0, :, :vocab]
        ids_t = torch.tensor([ids])
        neo = ids_t == vocab
        vec = torch.as_tensor(learner.embedding_)
        via = model(inputs_embeds=learner._embeds(ids_t.masked_fill(neo, 0), neo, vec)).logits[0]
    torch.testing.assert_close(direct, via, rtol=1e-5, atol=1e-5)
    assert grown.generation_config.suppress_tokens == [vocab]


def test_export_unties_a_tied_model_and_leaves_the_original(tiny_llama):
    from transformers import GPT2Config, GPT2LMHeadModel

    _, tok = tiny_llama
    torch.manual_seed(0)
    tied = GPT2LMHeadModel(GPT2Config(vocab_size=11, n_embd=16, n_layer=1, n_head=2, n_positions=16)).eval()
    assert tied.get_output_embeddings().weight is tied.get_input_embeddings().weight
    before = {k: v.clone() for k, v in tied.state_dict().items()}
    learner = NeologismLearner(tied, tok, token="<w>", n_epochs=1).fit(["1 <w>"], ["2"], ["3"])
    grown, _ = learner.export()
    assert all(torch.equal(before[k], v) for k, v in tied.state_dict().items())
    assert grown.get_output_embeddings().weight.shape[0] == 12
    assert float(grown.get_output_embeddings().weight[11].detach().abs().sum()) == 0.0
    torch.testing.assert_close(grown.get_input_embeddings().weight[11], torch.as_tensor(learner.embedding_))


def test_the_neologism_lands_next_to_the_latent_tag(fitted):
    learner, _ = fitted
    table = learner.nearest_tokens(3)
    assert list(table.columns) == ["token", "cosine"]
    assert table["cosine"].is_monotonic_decreasing
    assert "zx" in list(table["token"])  # the machine's word for "exactly N", never in a human prompt


def test_preference_loss_values():
    z = torch.zeros(2)
    assert float(preference_loss(z, z, z, z)) == pytest.approx(2 * np.log(2))
    assert float(preference_loss(z, z, z, z, loss="dpo")) == pytest.approx(np.log(2))
    c, r = torch.tensor([-1.0, -3.0]), torch.tensor([-2.0, -2.0])
    assert float(preference_loss(c, r, z - 2, z - 2, loss="nll")) == pytest.approx(2.0)
    # the DPO term compares margins with the reference's: equal margins give log 2
    assert float(preference_loss(c, r, c, r, loss="dpo", beta=5.0)) == pytest.approx(np.log(2))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(-10, 0), min_size=4, max_size=4), st.floats(0.01, 2))
def test_preference_loss_is_positive_and_rewards_the_chosen_response(values, beta):
    c, r, rc, rr = (
        torch.tensor([v], dtype=torch.float64, requires_grad=i == 0) for i, v in enumerate(values)
    )
    up = preference_loss(c, r, rc, rr, beta=beta)
    dpo = preference_loss(c, r, rc, rr, beta=beta, loss="dpo")
    assert float(up.detach()) >= float(dpo.detach()) > 0
    up.backward()
    assert float(c.grad) < 0  # raising log p(chosen) lowers the loss


def test_works_on_a_llama_and_leaves_it_unchanged(tiny_llama):
    model, tok = tiny_llama
    before = {k: v.clone() for k, v in model.state_dict().items()}
    learner = NeologismLearner(model, tok, token="<w>", n_epochs=2, batch_size=2, random_state=3)
    learner.fit(["1 <w> 2", "3 <w> 4", "5 <w>"], ["3 4", "5", "6 7"], ["9", "8 8", "1"])
    assert learner.loss_history_.shape == (2,)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    out = learner.generate(["1 <w> 2", "3"], n_samples=3, max_new_tokens=4)
    assert [len(per) for per in out] == [3, 3] and all(len(s) <= 4 for per in out for s in per)
    again = learner.generate(["1 <w> 2", "3"], n_samples=3, max_new_tokens=4)
    assert out == again  # seeded


@pytest.fixture(scope="module")
def tiny_llama():
    from trustlab.lm import ModelConfig, build_model, number_tokenizer

    tok = number_tokenizer(10)
    model = build_model(ModelConfig("llama", vocab_size=11, d_model=16, n_layers=1, n_heads=2, max_len=16))
    return model, tok


class _NoEmbeddings(torch.nn.Module):
    def get_input_embeddings(self):
        raise NotImplementedError


def test_bad_input(lab, tiny_llama):
    model, tok = lab
    p, c, r, _ = length_task_pairs(2, "<len>")
    with pytest.raises(ParameterError, match="already in the vocabulary") as info:
        NeologismLearner(model, tok, token="zx").fit(p, c, r)
    assert info.value.argument == "token"
    with pytest.raises(DataError, match="empty") as info:
        NeologismLearner(model, tok, token="<len>").fit([], [], [])
    assert info.value.argument == "prompts"
    with pytest.raises(ModelError, match="input embeddings") as info:
        NeologismLearner(_NoEmbeddings(), tok, token="<len>").fit(p, c, r)
    assert info.value.argument == "model"
    with pytest.raises(ModelError):
        NeologismLearner(torch.nn.Linear(2, 2), tok, token="<len>").fit(p, c, r)
    with pytest.raises(DataError, match="does not use the neologism"):
        NeologismLearner(model, tok, token="<len>").fit(["write about tea in 2 words please :"], c[:1], r[:1])
    with pytest.raises(DataError, match="same length"):
        NeologismLearner(model, tok, token="<len>").fit(p, c[:1], r)
    with pytest.raises(DataError, match="non-empty string"):
        NeologismLearner(model, tok, token="<len>").fit(p, ["", "cup"], r)
    with pytest.raises(ParameterError, match="one word"):
        NeologismLearner(model, tok, token="two words").fit(p, c, r)
    with pytest.raises(ParameterError, match="init"):
        NeologismLearner(model, tok, token="<len>", init="cup leaf").fit(p, c, r)
    with pytest.raises(ParameterError, match="beta"):
        NeologismLearner(model, tok, token="<len>", beta=0.0).fit(p, c, r)
    with pytest.raises(ParameterError, match="loss"):
        NeologismLearner(model, tok, token="<len>", loss="ppo").fit(p, c, r)
    with pytest.raises(NotFittedError):
        NeologismLearner(model, tok).generate(["write"])
    long_prompt = " ".join(["1"] * 20) + " <w>"
    with pytest.raises(DataError, match="context") as info:
        NeologismLearner(tiny_llama[0], tiny_llama[1], token="<w>").fit([long_prompt], ["1"], ["2"])
    with pytest.raises(ParameterError, match="n_pairs"):
        length_task_pairs(0, "<len>")
    assert issubclass(ParameterError, TrustlabError)


def test_tokenizer_larger_than_the_model_vocabulary(tiny_llama):
    from trustlab.lm import number_tokenizer

    model, _ = tiny_llama  # 11 embedding rows; this tokenizer also knows the words 11-20
    with pytest.raises(DataError, match="does not match the model") as info:
        NeologismLearner(model, number_tokenizer(20), token="<len>", n_epochs=1).fit(
            ["15 <len>"], ["3"], ["4"]
        )
    assert info.value.argument == "tokenizer"


def test_bad_input_after_fit(fitted):
    learner, _ = fitted
    with pytest.raises(DataError, match="embedding") as info:
        learner.generate(["write"], embedding=np.zeros(3))
    assert info.value.argument == "embedding"
    with pytest.raises(ParameterError, match="n_samples"):
        learner.generate(["write"], n_samples=0)
    with pytest.raises(ParameterError, match="context") as info:
        learner.generate(["write"], max_new_tokens=40)
    assert info.value.argument == "max_new_tokens"
    with pytest.raises(DataError, match="prompts"):
        learner.generate("write about tea")


def test_task_corpus_follows_its_rules():
    data = length_task_corpus(300, seed=1)
    style, target, length = (data.latent[k] for k in ("style", "target", "length"))
    zx = (style == 0) & (target > 0)
    assert zx.sum() > 60 and np.all(length[zx] == target[zx])
    neutral = (style >= 3) & (target > 0)
    assert np.mean(length[neutral] == target[neutral]) < 0.3


def test_docs_example_runs(run_docs_example):
    run_docs_example(PAGE)


@pytest.mark.slow  # 64 pairs x 20 epochs (the defaults) and 8 samples x 32 prompts x 4 conditions: ~30 s
@pytest.mark.claims
def test_claim_length_neologism_with_the_defaults_slow(lab):
    model, tok = lab
    p, c, r, _ = length_task_pairs(64, "<len>", seed=0)
    learner = NeologismLearner(model, tok, token="<len>", init="please").fit(p, c, r)
    kw = {"topics": TOPICS, "n_samples": 8, "seed": 2}
    r_neo, exact_neo, n = _length_correlation(learner, "<len>", **kw)
    r_plain, _, _ = _length_correlation(learner, "please", **kw)
    r_text, _, _ = _length_correlation(learner, "exactly", **kw)  # the plain-text instruction
    r_rand, _, _ = _length_correlation(learner, "<len>", embedding=_random_vector(model, 5), **kw)
    for other in (r_plain, r_text, r_rand):
        gap, se = _fisher_gap(r_neo, other, n)
        assert gap > 3 * se, (r_neo, r_plain, r_text, r_rand)
    assert exact_neo > 0.8


@pytest.mark.slow  # generates 400 guesses per condition: ~10 s
@pytest.mark.claims
def test_claim_diversity_neologism_spreads_number_guesses_slow(lab):
    model, tok = lab
    p, c, r, _ = length_task_pairs(32, "<div>", concept="diversity", seed=0)
    learner = NeologismLearner(model, tok, token="<div>", init="please", lr=0.03, n_epochs=3).fit(p, c, r)

    def favourite_share(style, embedding=None):
        prompt = [f"guess a number {style} :"]
        s = learner.generate(prompt, n_samples=400, max_new_tokens=2, random_state=1, embedding=embedding)[0]
        return np.mean([bool(x) and tok.convert_ids_to_tokens(x[0]) == "7" for x in s])

    neo, plain = favourite_share("<div>"), favourite_share("please")
    rand = favourite_share("<div>", _random_vector(model, 5))
    # binomial standard errors over 400 guesses each
    for other in (plain, rand):
        assert other - neo > 3 * np.sqrt((neo * (1 - neo) + other * (1 - other)) / 400), (neo, plain, rand)


@pytest.mark.slow  # retrains the shipped model: 800 steps, about 90 s on one core
def test_shipped_weights_are_the_recipe_result_slow():
    model = train_length_task_model()
    shipped, _ = length_task_model()
    for (k, a), b in zip(model.state_dict().items(), shipped.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, msg=k)


def test_cli_explain_neologism_bad_pairs_file(tmp_path, capsys):
    from trustlab.cli import main

    pairs = tmp_path / "pairs.jsonl"
    for text in ('{"prompt": "x"}\n', "not json\n", ""):
        pairs.write_text(text)
        with pytest.raises(SystemExit) as stop:
            main(["explain", "neologism", str(tmp_path), str(pairs), "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and len(err) == 1 and err[0].startswith("error (PAIRS)"), err


@pytest.mark.slow  # saves, loads and trains a checkpoint three times: ~3 s
def test_cli_explain_neologism(tmp_path, lab, capsys):
    import json

    from trustlab.cli import main
    from trustlab.lm import load_model, load_tokenizer, save_model

    model, tok = lab
    folder = save_model(model, tmp_path / "base", tok)
    p, c, r, _ = length_task_pairs(8, "<len>", seed=0)
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        "\n".join(
            json.dumps({"prompt": a, "chosen": b, "rejected": d}) for a, b, d in zip(p, c, r, strict=True)
        )
    )
    args = [
        "explain",
        "neologism",
        str(folder),
        str(pairs),
        "--out",
        str(tmp_path / "out"),
        "--token",
        "<len>",
    ]
    with pytest.raises(SystemExit) as stop:
        main([*args, "--epochs", "1", "--init", "please"])
    out = capsys.readouterr().out.splitlines()
    assert stop.value.code in (0, None) and out[0].startswith("learned <len> (id 45, 32 weights), 8 pairs")
    grown, tok2 = load_model(tmp_path / "out"), load_tokenizer(tmp_path / "out")
    assert grown.get_input_embeddings().weight.shape[0] == 46 and tok2.convert_tokens_to_ids("<len>") == 45
    for bad, flag in (
        (["--token", "zx"], "--token"),
        (["--init", "cup leaf"], "--init"),
    ):
        with pytest.raises(SystemExit) as stop:
            main([*args, "--epochs", "1", *bad])
        err = capsys.readouterr().err.strip().splitlines()
        assert stop.value.code == 2 and len(err) == 1 and err[0].startswith(f"error ({flag})"), err
