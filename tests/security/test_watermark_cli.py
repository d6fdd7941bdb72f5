"""``trustlab watermark embed|detect``: a round trip on a local checkpoint; bad input exits 2, one line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trustlab.cli import app

pytest.importorskip("transformers")
runner = CliRunner()
MSG = "10110010"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """An untrained 1-block Llama (13 logits) saved with a number tokenizer: "3 5" -> [3, 5]."""
    from trustlab.lm import ModelConfig, build_model, number_tokenizer, save_model

    path = tmp_path_factory.mktemp("wm") / "model"
    model = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2, max_len=64))
    save_model(model, path, number_tokenizer(12))
    return path


def _embed(model_dir, out, *extra):
    args = ["watermark", "embed", str(model_dir), "--prompt", "3 5", "--message", MSG, "--out", str(out)]
    return runner.invoke(app, [*args, "--max-new-tokens", "60", *extra])


def test_embed_then_detect_round_trip(model_dir, tmp_path):
    out = tmp_path / "w.json"
    res = _embed(model_dir, out, "--key", "s3cret")
    assert res.exit_code == 0, res.output
    assert "embedded a 8-bit message in 60 tokens" in res.output
    record = json.loads(out.read_text())
    assert len(record["token_ids"]) == 62 and record["start"] == 2 and "s3cret" not in out.read_text()
    res = runner.invoke(app, ["watermark", "detect", str(out), "--key", "s3cret"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"message {MSG}; p = ")
    # The key from the environment; a wrong key reads no watermark (p-value not small).
    res = runner.invoke(app, ["watermark", "detect", str(out)], env={"TRUSTLAB_WATERMARK_KEY": "other"})
    assert res.exit_code == 0 and float(res.output.split("p = ")[1].split()[0]) > 1e-3
    # A plain text file, tokenized with the model's tokenizer (the model itself is not run).
    text = tmp_path / "w.txt"
    text.write_text(record["text"])
    res = runner.invoke(app, ["watermark", "detect", str(text), "--model", str(model_dir), "--key", "s3cret"])
    assert res.exit_code == 0 and res.output.startswith(f"message {MSG}")


def test_short_text_is_undecidable(model_dir, tmp_path):
    text = tmp_path / "short.txt"
    text.write_text("3 5 7 1")
    res = runner.invoke(app, ["watermark", "detect", str(text), "--model", str(model_dir), "--key", "k"])
    assert res.exit_code == 0 and res.output.startswith("undecidable (bits ")


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (["embed", "{model}", "--prompt", "3 5", "--message", "10x1", "--key", "k"], "--message"),
        (["embed", "{model}", "--prompt", "3 5", "--message", MSG], "--key"),
        (["embed", "{model}", "--prompt", "3", "--message", MSG, "--key", "k"], "--prompt"),
        (["embed", "{tmp}/missing", "--prompt", "3 5", "--message", MSG, "--key", "k"], "NAME_OR_DIR"),
        (["embed", "{model}", "--prompt", "3 5", "--message", MSG, "--key", "k", "--delta", "2"], "--delta"),
        (["detect", "{tmp}/junk.json", "--key", "k"], "INPUT"),
        (["detect", "{tmp}/missing.json", "--key", "k"], "INPUT"),
        (["detect", "{tmp}/text.txt", "--key", "k"], "--model"),
        (["detect", "{tmp}/text.txt", "--key", "k", "--model", "{tmp}"], "NAME_OR_DIR"),
        (["detect", "{tmp}/big.json", "--key", "k"], "INPUT"),
        (["detect", "{tmp}/big.json", "--key", "k", "--n-bits", "0"], "--n-bits"),
    ],
)
def test_bad_input_exits_2_with_one_line(model_dir, tmp_path, args, label):
    (tmp_path / "junk.json").write_text('{"token_ids": [1, 2]}')
    (tmp_path / "text.txt").write_text("3 5 7")
    (tmp_path / "big.json").write_text('{"token_ids": [3, 5, 40], "vocab_size": 13}')
    res = runner.invoke(app, ["watermark", *(a.format(tmp=tmp_path, model=model_dir) for a in args)])
    assert res.exit_code == 2, res.output
    assert res.output.startswith(f"error ({label})") and len(res.output.strip().splitlines()) == 1
