import pandas as pd
import pytest

from trustlab.datasets import Schema, load_benefits, load_default, load_table
from trustlab.errors import DataError


def test_benefits_shape_and_types():
    df = load_benefits()
    assert df.shape == (4877, 18)
    assert isinstance(df["sex"].dtype, pd.CategoricalDtype)
    assert df["ui"].value_counts().to_dict() == {"yes": 3335, "no": 1542}


def test_default_schema_covers_every_column_and_holds_the_data():
    df, _info, schema = load_default()
    assert set(schema.columns) == set(df.columns)
    for col in df.columns:
        if (b := schema.bounds(col)) is not None:
            assert df[col].between(*b).all(), col
        else:
            assert set(df[col].astype(str)) <= set(schema.categories(col)), col


def test_load_csv_and_parquet(tmp_path, small_frame):
    small_frame.to_csv(tmp_path / "t.csv", index=False)
    small_frame.to_parquet(tmp_path / "t.parquet")
    a, b = load_table(tmp_path / "t.csv"), load_table(tmp_path / "t.parquet")
    assert a.shape == b.shape == small_frame.shape
    assert isinstance(a["group"].dtype, pd.CategoricalDtype)


@pytest.mark.parametrize("content,match", [("", "empty"), ("a,b\n", "no rows")])
def test_load_bad_files(tmp_path, content, match):
    p = tmp_path / "bad.csv"
    p.write_text(content)
    with pytest.raises(DataError, match=match):
        load_table(p)


def test_load_missing_and_unknown_extension(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_table(tmp_path / "nope.csv")
    (tmp_path / "x.xlsx").write_text("x")
    with pytest.raises(DataError, match="unknown extension"):
        load_table(tmp_path / "x.xlsx")


def test_schema_rejects_bad_specs():
    with pytest.raises(DataError, match="exactly one"):
        Schema.from_dict({"columns": {"a": {}}})
    with pytest.raises(DataError, match="columns"):
        Schema.from_dict({"cols": {}})
    with pytest.raises(DataError, match="actionable") as info:
        Schema.from_dict({"columns": {"a": {"bounds": [0, 1], "actionable": "sometimes"}}})
    assert info.value.argument == "schema"


def test_schema_actionable_round_trip():
    raw = {
        "columns": {"age": {"bounds": [0, 99], "actionable": "increase"}, "sex": {"categories": ["f", "m"]}}
    }
    s = Schema.from_dict(raw)
    assert s.actionable("age") == "increase" and s.actionable("sex") is None and s.actionable("x") is None
    assert Schema.from_dict(s.to_dict()).actionable("age") == "increase"
    _, _, default = load_default()
    assert default.actionable("state") == "no" and default.actionable("age") == "increase"


def test_schema_conform_casts_declared_columns_by_the_schema_alone():
    """Private mode's dtypes come from here: the same whatever odd values one row holds."""
    import numpy as np

    schema = Schema.from_dict(
        {
            "columns": {
                "age": {"bounds": [18, 99]},
                "sex": {"categories": ["f", "m"]},
                "k": {"categories": [0, 1]},
            }
        }
    )
    tables = [
        pd.DataFrame({"age": [20, 40], "sex": ["f", "m"], "k": [0, 1], "z": [1, 2]}),
        pd.DataFrame(
            {"age": [20.0, np.nan], "sex": pd.Categorical(["f", None]), "k": [0.0, 1.0], "z": [1, 2]}
        ),
        pd.DataFrame({"age": ["20", "unknown"], "sex": ["f", "x"], "k": ["0", "1"], "z": [1, 2]}),
        pd.DataFrame({"age": [-5, 1e9], "sex": [1, "m"], "k": [True, 7], "z": [1, 2]}),
    ]
    out = [schema.conform(t) for t in tables]
    for o in out:
        assert str(o["age"].dtype) == "float64" and list(o["sex"].cat.categories) == ["f", "m"]
        assert list(o["k"].cat.categories) == [0, 1]
    assert out[0]["age"].tolist() == [20.0, 40.0] and out[0]["k"].tolist() == [0, 1]
    assert out[1]["k"].tolist() == [0, 1] and out[2]["k"].tolist() == [0, 1]  # 0.0 and "0" match 0
    assert np.isnan(out[2]["age"][1]) and pd.isna(out[2]["sex"][1])  # out of schema -> missing
    assert out[3]["age"].tolist() == [18.0, 99.0]  # clipped to the bounds
    assert pd.isna(out[3]["sex"][0]) and pd.isna(out[3]["k"][1])
    assert out[3]["z"].tolist() == [1, 2]  # undeclared columns untouched
