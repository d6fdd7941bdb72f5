"""``trustlab lm``: train writes a loadable checkpoint; bad input exits 2 with one line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trustlab.cli import app

runner = CliRunner()


def test_train_writes_a_checkpoint_that_loads_offline(tmp_path):
    out = tmp_path / "m"
    res = runner.invoke(app, ["lm", "train", "micro-llama-sorting", "--out", str(out), "--steps", "3"])
    assert res.exit_code == 0, res.output
    assert "trained micro-llama-sorting: 3 steps" in res.output
    info = json.loads((out / "training.json").read_text())
    assert len(info["losses"]) == 3 and info["recipe"]["model"]["arch"] == "llama"
    from trustlab.lm import load_model, load_tokenizer

    assert type(load_model(out)).__name__ == "LlamaForCausalLM"
    assert load_tokenizer(out)("12 3")["input_ids"] == [12, 3]
    res = runner.invoke(app, ["lm", "hooks", str(out)])
    assert res.exit_code == 0 and "2 blocks" in res.output


def test_train_from_a_json_recipe(tmp_path):
    cfg = tmp_path / "r.json"
    cfg.write_text(
        json.dumps(
            {
                "model": {"arch": "gpt2", "d_model": 16, "n_layers": 1, "n_heads": 2, "max_len": 16},
                "data": {"kind": "lcg", "modulus": 8, "length": 12, "n_per_param": 4},
                "train": {"steps": 2, "batch_size": 4},
            }
        )
    )
    res = runner.invoke(app, ["lm", "train", str(cfg), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "o" / "config.json").read_text())["model_type"] == "gpt2"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lm", "train", "no-such-recipe", "--out", "{tmp}/a"], "error (CONFIG)"),
        (["lm", "train", "micro-llama-sorting", "--out", "{tmp}"], "error (--out)"),
        (["lm", "hooks", "{tmp}"], "error (NAME_OR_DIR): NAME_OR_DIR"),
        (["lm", "hooks", "{tmp}/missing"], "error (NAME_OR_DIR)"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, message):
    (tmp_path / "junk.txt").write_text("x")
    res = runner.invoke(app, [a.format(tmp=tmp_path) for a in args])
    assert res.exit_code == 2
    assert message in res.output and len(res.output.strip().splitlines()) <= 3  # one line, soft-wrapped


def test_cli_start_does_not_load_torch_or_transformers():
    import subprocess
    import sys

    code = "import sys, trustlab.cli; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
