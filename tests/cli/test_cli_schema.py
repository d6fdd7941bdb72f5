"""`trustlab schema DATA --out FILE`: the draft a private audit's --schema starts from (issue 11 §2)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from trustlab.cli import main


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A small HI-like table: integer hours, a float, a count with ~74% zeros, categories."""
    d = tmp_path_factory.mktemp("schema")
    rng = np.random.default_rng(5)
    n = 3000
    hours = np.clip(rng.normal(30, 15, n), 0, 90).round().astype(int)
    frame = pd.DataFrame(
        {
            "hours": hours,
            "income": rng.lognormal(3, 0.6, n).round(2),
            "kids": rng.choice([0, 1, 2, 3], n, p=[0.74, 0.18, 0.06, 0.02]),
            "race": rng.choice(["white", "black", "other"], n, p=[0.7, 0.2, 0.1]),
            "insured": np.where(hours + rng.normal(0, 15, n) > 30, "yes", "no"),
        }
    )
    path = d / "hi.csv"
    frame.to_csv(path, index=False)
    return d, path


def _main(capsys, *argv):
    with pytest.raises(SystemExit) as stop:
        main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return stop.value.code, out, err


def test_draft_then_fill_then_private_audit(data, capsys):
    d, path = data
    out = d / "draft.json"
    code, stdout, err = _main(capsys, "schema", path, "--out", out)
    assert code == 0, err
    assert "5 null entries" in stdout and "nothing estimated" in stdout
    draft = json.loads(out.read_text())
    assert draft["columns"]["hours"] == {
        "bounds": None,
        "integer": True,
        "review": draft["columns"]["hours"]["review"],
    }
    # the unfilled draft is refused with a line naming the entry
    code, _, err = _main(capsys, "audit", path, "--target", "insured", "--sensitive", "race",
                         "--private", "--epsilon", "1", "--schema", out, "--out", d / "r0")  # fmt: skip
    assert code == 2 and "'hours': 'bounds' is not filled in" in err
    # filled from "public knowledge"
    cols = draft["columns"]
    cols["hours"]["bounds"], cols["income"]["bounds"], cols["kids"]["bounds"] = [0, 168], [0, 500], [0, 10]
    cols["race"]["categories"], cols["insured"]["categories"] = ["white", "black", "other"], ["no", "yes"]
    out.write_text(json.dumps(draft))
    code, stdout, err = _main(capsys, "audit", path, "--target", "insured", "--sensitive", "race",
                              "--private", "--epsilon", "1", "--schema", out, "--out", d / "r1",
                              "--model", "logistic")  # fmt: skip
    assert code == 0, err
    report = json.loads((d / "r1" / "report.json").read_text())
    assert "schema_privacy" not in report["meta"]  # nothing was spent drafting it


def test_draft_with_epsilon_is_usable_and_its_cost_is_reported(data, capsys):
    d, path = data
    out = d / "dp.json"
    code, stdout, err = _main(capsys, "schema", path, "--out", out, "--epsilon", "2")
    assert code == 0, err and "epsilon=2" in stdout
    draft = json.loads(out.read_text())
    assert draft["privacy"]["epsilon"] == 2
    assert set(draft["columns"]["insured"]["categories"]) == {"no", "yes"}
    assert all(entry["review"] for entry in draft["columns"].values())
    code, stdout, err = _main(capsys, "audit", path, "--target", "insured", "--sensitive", "race",
                              "--private", "--epsilon", "1", "--schema", out, "--out", d / "r2",
                              "--model", "logistic")  # fmt: skip
    assert code == 0, err
    assert "epsilon=2 spent drafting the schema" in stdout
    meta = json.loads((d / "r2" / "report.json").read_text())["meta"]
    assert meta["schema_privacy"]["epsilon"] == 2
    ledger = (d / "r2" / "report.html").read_text().split('<section id="ledger">')[1].split("</section>")[0]
    assert "Plus &epsilon; = 2" in ledger and "spent drafting the schema" in ledger


@pytest.mark.parametrize(
    "extra,flag,message",
    [
        (["--epsilon", "0"], "--epsilon", "epsilon"),
        (["--epsilon", "1", "--delta", "0"], "--delta", "delta"),
        (["--categorical", "nope"], "--categorical", "unknown column"),
    ],
)
def test_schema_bad_arguments(data, capsys, tmp_path, extra, flag, message):
    _, path = data
    code, _, err = _main(capsys, "schema", path, "--out", tmp_path / "s.json", *extra)
    assert code == 2 and err.startswith(f"error ({flag}):") and message in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.json").exists()


def test_schema_never_overwrites_without_force(data, capsys, tmp_path):
    _, path = data
    out = tmp_path / "s.json"
    out.write_text("my filled-in schema")
    code, _, err = _main(capsys, "schema", path, "--out", out)
    assert code == 2 and "--force" in err and out.read_text() == "my filled-in schema"
    code, _, err = _main(capsys, "schema", path, "--out", tmp_path)
    assert code == 2 and "folder" in err
    code, _, _ = _main(capsys, "schema", path, "--out", out, "--force")
    assert code == 0 and "columns" in json.loads(out.read_text())
    code, _, err = _main(capsys, "schema", tmp_path / "none.csv", "--out", tmp_path / "x.json")
    assert code == 2 and err.startswith("error (DATA):")


def test_no_rows_is_not_an_error_where_privacy_applies(tmp_path, capsys):
    """Whether a table has rows is a fact about the rows: private commands must not fail on it."""
    data = tmp_path / "empty.csv"
    data.write_text("label,group,x\n")
    schema = tmp_path / "s.json"
    schema.write_text(
        '{"columns": {"group": {"categories": ["a", "b"]}, "label": {"categories": ["no", "yes"]}, '
        '"x": {"bounds": [0, 1]}}}'
    )
    code, _, err = _main(capsys, "audit", data, "--target", "label", "--sensitive", "group", "--private",
                         "--epsilon", "1", "--schema", schema, "--out", tmp_path / "r")  # fmt: skip
    assert code == 0, err
    code, _, err = _main(capsys, "schema", data, "--out", tmp_path / "d.json", "--epsilon", "1")
    assert code == 0, err
    assert set(json.loads((tmp_path / "d.json").read_text())["columns"]) == {"label", "group", "x"}
    code, _, err = _main(capsys, "audit", data, "--target", "label", "--sensitive", "group",
                         "--out", tmp_path / "r2")  # fmt: skip
    assert code == 2 and "no rows" in err  # raw mode may say so


def test_text_columns_are_drafted_as_text(data, capsys):
    d, path = data
    out = d / "text.json"
    code, _, err = _main(capsys, "schema", path, "--out", out, "--text", "race")
    assert code == 0, err
    assert json.loads(out.read_text())["columns"]["race"]["text"] is True
    code, _, err = _main(capsys, "schema", path, "--out", d / "bad.json", "--text", "nope")
    assert code == 2 and err.startswith("error (--text)") and len(err.strip().splitlines()) == 1
