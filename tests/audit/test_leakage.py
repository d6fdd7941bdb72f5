"""Target leakage and copies of sensitive columns (issue 26 §1.1)."""

from __future__ import annotations

import gzip
from html import escape

import numpy as np
import pandas as pd
import pytest

from trustlab.cli import main
from trustlab.datasets import load_table
from trustlab.errors import DataError


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x": x,
            "z": rng.uniform(size=n),
            "race": rng.choice(["a", "b", "c"], n),
            "y": np.where(x + rng.normal(size=n) > 0, "yes", "no"),
        }
    )


def test_duplicate_header_is_refused_naming_it(tmp_path):
    df = _frame()
    text = df.assign(y2=df["y"]).to_csv(index=False).replace("y2", "y", 1)
    path = tmp_path / "dup.csv"
    path.write_text(text)
    assert pd.read_csv(path).columns[-1] == "y.1"  # what pandas does silently
    with pytest.raises(DataError, match=r"'y'.*twice|'y'.*more than once") as info:
        load_table(path)
    assert info.value.argument == "data"
    gz = tmp_path / "dup.csv.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(DataError, match="'y'"):
        load_table(gz)


def test_duplicate_header_cli_exit_2(tmp_path, capsys):
    df = _frame()
    path = tmp_path / "dup.csv"
    path.write_text(df.assign(r2=df["race"]).to_csv(index=False).replace("r2", "race", 1))
    with pytest.raises(SystemExit) as stop:
        main(["audit", str(path), "--target", "y", "--sensitive", "race", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "race" in err and len(err.strip().splitlines()) == 1


def _leaky(n: int = 1500, seed: int = 0) -> pd.DataFrame:
    df = _frame(n, seed)
    rng = np.random.default_rng(seed + 1)
    yes = (df["y"] == "yes").to_numpy()
    df["y.1"] = df["y"].map({"yes": 1, "no": 0})  # the target, relabelled
    df["after"] = yes * 10.0 + rng.normal(size=n)  # recorded after the outcome
    df["race.1"] = df["race"].map({"a": "A", "b": "B", "c": "C"})  # a copy of the sensitive column
    return df


def _sections(*names):
    from trustlab.audit.registry import default_sections

    return [s for s in default_sections() if s.name in names]


def test_leaky_columns_are_left_out_and_stated():
    from trustlab.audit import Audit

    report = Audit(sections=_sections("data", "performance")).run(_leaky(), target="y", sensitive="race")
    assert report.meta["features"] == ["x", "z"]
    kinds = {f["column"]: f["kind"] for f in report.meta["column_flags"]}
    assert kinds == {"y.1": "target_copy", "after": "predicts_target", "race.1": "sensitive_copy"}
    auc = report["performance"].figures["overall"]["roc_auc"]
    assert auc < 0.95  # the model on x alone, not the leak (AUC 1.000 before)
    inputs = report["data"].figures["model_inputs"]
    assert {f["column"] for f in inputs["screened"]} == {"y.1", "after", "race.1"}
    html = report.to_html()
    top = html[html.index('id="summary"') : html.index('id="data"')]
    for col in ("y.1", "after", "race.1"):
        assert escape(f"'{col}'") in top, col
    assert "--keep after" in top


def test_keep_puts_a_flagged_column_back():
    from trustlab.audit import Audit

    report = Audit(sections=_sections("performance"), keep=["after"]).run(
        _leaky(), target="y", sensitive="race"
    )
    assert report.meta["features"] == ["x", "z", "after"]
    assert report["performance"].figures["overall"]["roc_auc"] > 0.99
    assert "kept as a feature as asked" in report.to_html()


def test_keep_must_name_a_column():
    from trustlab.audit import Audit

    with pytest.raises(DataError) as info:
        Audit(keep=["nope"]).run(_leaky(), target="y", sensitive="race")
    assert info.value.argument == "keep"


def _leaky_schema():
    from trustlab.datasets import Schema

    return Schema.from_dict(
        {
            "columns": {
                "y": {"categories": ["no", "yes"]},
                "race": {"categories": ["a", "b", "c"]},
                "x": {"bounds": [-4, 4]},
                "z": {"bounds": [0, 1]},
                "after": {"bounds": [-5, 15]},
            }
        }
    )


def test_private_mode_screens_the_names_only_and_says_so():
    """Private mode: whether a column is left out may not depend on the rows, so only the names are
    screened ('y.1' copies 'y', 'race.1' copies 'race'); 'after' (a leak only its values show) stays,
    identically on a table where it is noise, and the report says the row screening did not run."""
    from sklearn.linear_model import LogisticRegression

    from trustlab.audit import Audit

    leaky = _leaky()
    rng = np.random.default_rng(5)
    neighbour = leaky.assign(after=rng.normal(size=len(leaky)))  # no leak in the values now
    # a public model (trained on other rows), so that no DP-SGD run is needed here
    model = LogisticRegression().fit(_leaky(300, seed=9)[["x", "z", "after"]], rng.integers(0, 2, 300))
    reports = [
        Audit(private=True, epsilon=1.0, schema=_leaky_schema(), model=model, sections=_sections("data")).run(
            t, target="y", sensitive="race"
        )
        for t in (leaky, neighbour)
    ]
    for r in reports:
        assert r.meta["features"] == ["x", "z", "after"]
        kinds = {f["column"]: (f["kind"], f["related"], f["dropped"]) for f in r.meta["column_flags"]}
        assert kinds == {"y.1": ("target_copy", "y", True), "race.1": ("sensitive_copy", "race", True)}
        assert r.meta["screening"]["ran"] is False and "did not run" in r.meta["screening"]["note"]
    assert reports[0].meta["column_flags"] == reports[1].meta["column_flags"]
    html = reports[0].to_html()
    data = html[html.index('id="data"') :]
    assert escape(reports[0].meta["screening"]["note"]) in data
    summary = html[html.index('id="summary"') : html.index('id="data"')]
    assert "column screening (leakage, copies, identifiers, free text)" in summary
    assert escape("'y.1'") in summary


def _with_free_text(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    """``_frame`` and a free-text column: 2,000 notes drawn from 1,200 (about 1,000 distinct)."""
    rng = np.random.default_rng(seed)
    words = np.array(["late", "paid", "call", "back", "refund", "error", "card", "fee", "ok", "again"])
    pool = np.array([" ".join(rng.choice(words, rng.integers(3, 8))) + f" #{i}" for i in range(1200)])
    return _frame(n, seed).assign(note=rng.choice(pool, n))


def test_free_text_column_is_left_out_of_the_default_model():
    """Issue 26 §2: a text column of ~1,000 levels made the logistic audit of 2,000 rows take 140 s
    (one-hot encoding); it is left out of the model with a note, as identifiers are."""
    from trustlab.audit import Audit
    from trustlab.audit.screening import MAX_TEXT_LEVELS

    df = _with_free_text()
    assert MAX_TEXT_LEVELS < df["note"].nunique() < len(df)  # not a row id: values repeat
    report = Audit(model="logistic", sections=_sections("data", "performance")).run(
        df, target="y", sensitive="race"
    )
    assert report.meta["features"] == ["x", "z"]
    (flag,) = report.meta["column_flags"]
    assert (flag["column"], flag["kind"], flag["dropped"]) == ("note", "free_text", True)
    assert flag["detail"] == f"{df['note'].nunique():,} distinct values on 2,000 rows"
    html = report.to_html()
    summary = html[html.index('id="summary"') : html.index('id="data"')]
    assert "free text" in summary and "--keep note" in summary
    # a category of few levels stays, whatever its type
    few = df.assign(note=df["note"].str.len().astype(str))
    assert few["note"].nunique() <= MAX_TEXT_LEVELS
    assert (
        "note"
        in Audit(model="logistic", sections=_sections("performance"))
        .run(few, target="y", sensitive="race")
        .meta["features"]
    )
