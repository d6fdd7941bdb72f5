"""Schema.from_json / from_dict refuse every malformed schema with one DataError naming it (issue 11 §2)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from trustlab.datasets import Schema
from trustlab.errors import DataError


@pytest.mark.parametrize(
    "content,message",
    [
        (b"{not json", "not valid JSON"),
        ('{"columns": {"\u00e9": {"categories": ["a"]}}}'.encode("latin-1"), "not UTF-8"),
        (b'{"columns": {"x": {"bounds": [NaN, 1]}}}', "NaN"),
        (b'{"columns": {"x": {"bounds": [0, Infinity]}}}', "Infinity"),
        (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
        (b"[1, 2]", '"columns" object'),
        (b'{"columns": []}', '"columns" object'),
        (b'{"columns": {"x": 3}}', "must be an object"),
        (b'{"columns": {"x": {}}}', "exactly one of"),
        (b'{"columns": {"x": {"bounds": [0, 1], "categories": ["a"]}}}', "exactly one of"),
        (b'{"columns": {"x": {"bounds": null}}}', "not filled in"),
        (b'{"columns": {"x": {"bounds": [1, "a"]}}}', "two numbers"),
        (b'{"columns": {"x": {"bounds": [true, 2]}}}', "two numbers"),
        (b'{"columns": {"x": {"bounds": [2, 1]}}}', "lower < upper"),
        (b'{"columns": {"x": {"bounds": [0, 1e300]}}}', "within"),
        (b'{"columns": {"x": {"categories": null}}}', "non-empty list"),
        (b'{"columns": {"x": {"categories": "ab"}}}', "non-empty list"),
        (b'{"columns": {"x": {"categories": [1, "1"]}}}', "same value"),
        (b'{"columns": {"x": {"categories": [[1]]}}}', "string, number or boolean"),
        (b'{"columns": {"x": {"categories": ["a"], "integer": true}}}', "only with 'bounds'"),
        (b'{"columns": {"x": {"bounds": [0, 1], "colour": "red"}}}', "unknown key"),
        (b'{"columns": {"x": {"bounds": [0, 1], "actionable": "sometimes"}}}', "actionable"),
        (b'{"columns": {"x": {"bounds": [0, 1], "description": 3}}}', "must be text"),
        (b'{"columns": {"x": {"text": true, "bounds": [0, 1]}}}', "exactly one of"),
        (b'{"columns": {"x": {"text": true, "categories": ["a"]}}}', "exactly one of"),
        (b'{"columns": {"x": {"text": false}}}', "'text' must be true"),
        (b'{"columns": {"x": {"text": "yes"}}}', "'text' must be true"),
        (
            b'{"columns": {"x": {"text": true, "actionable": "no"}}}',
            "'actionable' does not apply.*'x'|'x'.*'actionable' does not apply",
        ),
        (b'{"columns": {"x": {"text": true, "integer": false}}}', "'integer' does not apply"),
        (b'{"columns": {"x": {"text": true, "review": 3}}}', "must be text"),
        (b'{"source": 3, "columns": {}}', "source"),
        (b'{"privacy": {"epsilon": -1}, "columns": {}}', "privacy"),
    ],
)
def test_malformed_schema_files(tmp_path, content, message):
    p = tmp_path / "s.json"
    p.write_bytes(content)
    with pytest.raises(DataError, match=message) as err:
        Schema.from_json(p)
    assert err.value.argument == "schema"
    assert "\n" not in str(err.value)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(DataError, match="does not exist") as err:
        Schema.from_json(tmp_path / "none.json")
    assert err.value.argument == "schema"
    with pytest.raises(DataError, match=r"is a folder.*trustlab schema") as err:
        Schema.from_json(tmp_path)
    assert err.value.argument == "schema"


def test_round_trip_keeps_review_integer_and_privacy(tmp_path):
    raw = {
        "source": "code book",
        "privacy": {"epsilon": 0.5, "delta": 1e-7},
        "columns": {
            "n": {"bounds": [0, 10], "integer": True, "review": "check me"},
            "c": {"categories": ["a", "b"], "description": "group"},
        },
    }
    p = tmp_path / "s.json"
    p.write_text("\ufeff" + json.dumps(raw), encoding="utf-8")  # a BOM is fine
    schema = Schema.from_json(p)
    assert schema.epsilon_spent == 0.5 and schema.delta_spent == 1e-7
    assert schema.columns["n"].integer is True and schema.columns["n"].review == "check me"
    assert Schema.from_dict(schema.to_dict()) == schema


def test_conform_never_raises_on_odd_cells():
    s = Schema.from_dict({"columns": {"a": {"bounds": [0, 1]}, "c": {"categories": ["x", 1]}}})
    frame = pd.DataFrame({"a": [0.5, 1j, "t", None, [1], 1e308], "c": ["x", "1", 1.0, [1], {"k": 1}, 2j]})
    out = s.conform(frame)
    assert out["a"].tolist()[:1] == [0.5] and out["a"].iloc[5] == 1.0
    assert out["a"].iloc[1:5].isna().all()
    assert out["c"].tolist()[:3] == ["x", 1, 1] and out["c"].iloc[3:].isna().all()


def test_text_column_round_trip_and_conform(tmp_path):
    """``{"text": true}``: kind "text", no bounds or categories, round trips through JSON; conform keeps
    strings (others and cells over MAX_CELL_CHARS missing) in an object column whatever the rows hold."""
    from trustlab.datasets._cells import MAX_CELL_CHARS

    raw = {"columns": {"note": {"text": True, "description": "call notes", "review": "ok"}}}
    p = tmp_path / "s.json"
    p.write_text(json.dumps(raw), encoding="utf-8")
    schema = Schema.from_json(p)
    spec = schema.columns["note"]
    assert (spec.kind, spec.text, spec.description, spec.review) == ("text", True, "call notes", "ok")
    assert (
        schema.kind("note") == "text" and schema.bounds("note") is None and schema.categories("note") is None
    )
    assert schema.to_dict()["columns"] == raw["columns"]
    assert Schema.from_dict(schema.to_dict()) == schema
    long = "w " * MAX_CELL_CHARS
    frame = pd.DataFrame({"note": ["late again", 3, None, b"bytes", long, ""], "n": range(6)})
    out = schema.conform(frame)
    assert out["note"].dtype == object and out["n"].dtype == frame["n"].dtype
    assert out["note"].iloc[0] == "late again" and out["note"].iloc[5] == ""
    assert out["note"].iloc[1:5].isna().all()
    assert str(schema.conform(pd.DataFrame({"note": [1.0, 2.0]}))["note"].dtype) == "object"
