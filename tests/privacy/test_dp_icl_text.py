"""DP synthetic demonstrations from private labelled texts and ``trustlab dp-icl`` (row 002-10)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from trustlab.errors import DataError, ParameterError
from trustlab.privacy import Accountant

TEXTS = ["the cat sat on the mat", "a dog ran in the park", "the cat ate", "a dog barked at night"]
LABELS = ["cat", "dog", "cat", "dog"]


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory):
    pytest.importorskip("transformers")
    from trustlab.lm import ModelConfig, build_model, save_model, train_tokenizer

    tok = train_tokenizer(TEXTS * 3, vocab_size=280)
    model = build_model(
        ModelConfig("llama", vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, max_len=64)
    )
    return save_model(model, tmp_path_factory.mktemp("lm"), tok)


@pytest.mark.claims
def test_claim_text_release_charges_the_whole_budget_split_over_labels(lm_dir):
    from trustlab.lm import load_model, load_tokenizer
    from trustlab.privacy.dp_icl import dp_icl_sigma
    from trustlab.privacy.dp_icl_text import dp_text_demonstrations

    acc = Accountant(2.0, 1e-4)
    out = dp_text_demonstrations(
        load_model(lm_dir),
        load_tokenizer(lm_dir),
        TEXTS,
        LABELS,
        epsilon=2.0,
        delta=1e-4,
        n_per_label=2,
        max_tokens=3,
        top_k=10,
        accountant=acc,
    )
    assert [y for y, _ in out.demonstrations] == ["cat", "cat", "dog", "dog"]
    assert acc.spent_epsilon == pytest.approx(2.0) and acc.spent_delta == pytest.approx(1e-4)
    for rel in out.releases:  # each label: (1, 5e-5) over its 2 x 3 tokens, 2 subsets of 1 text
        assert rel.epsilon == pytest.approx(1.0) and rel.parameters["n_subsets"] == 2
        assert rel.noise_scale == pytest.approx(dp_icl_sigma(1.0, 5e-5, 6, 10))
    info = out.to_dict()["privacy"]
    assert info["epsilon"] == 2.0 and len(info["per_label"]) == 2


def test_text_ablation_options_pass_through_and_spend_the_same(lm_dir):
    from trustlab.lm import load_model, load_tokenizer
    from trustlab.privacy.dp_icl_text import dp_text_demonstrations

    acc = Accountant(2.0, 1e-4)
    out = dp_text_demonstrations(
        load_model(lm_dir),
        load_tokenizer(lm_dir),
        TEXTS,
        LABELS,
        epsilon=2.0,
        delta=1e-4,
        max_tokens=2,
        top_k=10,
        top_p=0.8,
        base_probability=False,
        accountant=acc,
    )
    assert acc.spent_epsilon == pytest.approx(2.0) and acc.spent_delta == pytest.approx(1e-4)
    for rel in out.releases:
        assert rel.parameters["top_p"] == 0.8 and rel.parameters["base_probability"] is False


def test_bad_text_input(lm_dir):
    from trustlab.lm import load_model, load_tokenizer
    from trustlab.privacy.dp_icl_text import dp_text_demonstrations

    model, tok = load_model(lm_dir), load_tokenizer(lm_dir)
    for texts, labels, arg in [
        ([], [], "texts"),
        ([1, 2], ["a", "b"], "texts"),
        (TEXTS, LABELS[:2], "labels"),
    ]:
        with pytest.raises(DataError) as info:
            dp_text_demonstrations(model, tok, texts, labels, epsilon=1.0, delta=1e-5)
        assert info.value.argument == arg
    acc = Accountant(1.0, 1e-5)
    with pytest.raises(ParameterError) as info:  # "cat" has 3 texts, "dog" 1: refused before any release
        dp_text_demonstrations(
            model, tok, TEXTS, ["cat", "cat", "cat", "dog"], epsilon=1.0, delta=1e-5, shots=2, accountant=acc
        )
    assert info.value.argument == "shots" and acc.spent_epsilon == 0.0


def test_cli_prints_demonstrations_and_privacy_and_exits_2_on_bad_input(lm_dir, tmp_path):
    from trustlab.cli import app

    data = tmp_path / "private.jsonl"
    data.write_text(
        "".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in zip(TEXTS, LABELS, strict=True))
    )
    csv_data = tmp_path / "private.csv"
    csv_data.write_text("text,label\n" + "".join(f"{t},{y}\n" for t, y in zip(TEXTS, LABELS, strict=True)))
    runner = CliRunner()
    base = ["dp-icl", str(lm_dir)]
    opts = ["--epsilon", "2", "--delta", "1e-4", "--max-tokens", "3", "--top-k", "10"]
    res = runner.invoke(app, [*base, str(data), *opts, "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [d["label"] for d in out["demonstrations"]] == ["cat", "dog"]
    assert out["privacy"]["spent_epsilon"] == pytest.approx(2.0)
    res = runner.invoke(app, [*base, str(data), *opts, "--top-p", "0.9", "--no-base-probability", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["privacy"]["spent_epsilon"] == pytest.approx(2.0)
    res = runner.invoke(app, [*base, str(data), *opts, "--subsets", "1", "--json"])  # Algorithm 3
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)["privacy"]
    assert info["spent_epsilon"] == pytest.approx(2.0)
    assert [r["sampling_rate"] for r in info["per_label"]] == [0.5, 0.5]  # 1 of each label's 2 texts
    res = runner.invoke(app, [*base, str(csv_data), *opts, "--method", "baseline"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[-1].startswith("privacy spent: epsilon=2")
    (tmp_path / "bad.jsonl").write_text('{"text": "x"}\n')
    for args, flag in [
        ([*base, str(tmp_path / "missing.csv"), *opts], "DATA"),
        ([*base, str(tmp_path / "bad.jsonl"), *opts], "DATA"),
        (["dp-icl", str(tmp_path), str(data), *opts], "MODEL"),
        ([*base, str(data), "--epsilon", "0", "--delta", "1e-4"], "--epsilon"),
        ([*base, str(data), *opts, "--method", "greedy"], "--method"),
        ([*base, str(data), *opts, "--shots", "3"], "--shots"),
        ([*base, str(data), *opts, "--top-p", "2"], "--top-p"),
        ([*base, str(data), *opts, "--subsets", "3"], "--subsets"),
        ([*base, str(data), *opts, "--method", "baseline", "--no-base-probability"], "--no-base-probability"),
    ]:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, res.output
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error ({flag})"), res.stderr


class _WordTokenizer:
    """Whitespace tokenizer over five words: the labels' prompts, two texts and the separator."""

    def __call__(self, text, add_special_tokens=False):
        ids = {"a:": 0, "b:": 1, "x": 2, "y": 3, "\n": 4}
        return {"input_ids": [ids[w] for w in text.replace("\n", " \n ").split(" ") if w]}

    def decode(self, ids):
        return " ".join(map(str, ids))


def _worst_case_lm(contexts):
    """A context holding text x puts all its mass on token 0, one holding y on token 1 (public: half each)."""
    out = np.zeros((len(contexts), 5))
    for r, c in enumerate(contexts):
        if 2 in c:
            out[r, 0] = 1.0
        elif 3 in c:
            out[r, 1] = 1.0
        else:
            out[r, :2] = 0.5
    return out


@pytest.mark.slow  # 2 x 1600 releases (about 10 s)
def test_audit_text_release_on_worst_case_neighbours(audit_trials):
    from trustlab.privacy.audit import audit_epsilon
    from trustlab.privacy.dp_icl_text import dp_text_demonstrations

    def label_a_token(texts):
        out = dp_text_demonstrations(
            _worst_case_lm,
            _WordTokenizer(),
            texts,
            ["a", "b"],
            epsilon=2.0,
            delta=1e-5,
            max_tokens=1,
            top_k=2,
        )
        return out.demonstrations[0][1]

    # label a's only text replaced: its subset's distribution moves from token 0 to token 1; each
    # label holds (1, 5e-6) of the (2, 1e-5) budget
    res = audit_epsilon(label_a_token, ["x", "y"], ["y", "y"], n_trials=audit_trials(1600), delta=5e-6)
    assert res.epsilon_lower <= 1.0, res
