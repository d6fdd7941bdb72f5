"""Issue 27 section 1: one row must not change the private audit's structure or make it raise.

Items: the CSV loader's ``Unnamed: 0`` rule (header and schema only), values that
pandas cannot read (``10**400``, ``Decimal("sNaN")``, ...) in ``Schema.conform`` and
the row hash, Parquet files whose column types differ, and wall-clock times and
over-long cells in the private Dask report.
"""

from __future__ import annotations

import datetime
import decimal
import fractions

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.audit.split import row_hash
from trustlab.datasets.loaders import check_parquet_schemas, load_table
from trustlab.datasets.schema import Schema

SCHEMA = Schema.from_dict(
    {
        "columns": {
            "age": {"bounds": [0, 100]},
            "sex": {"categories": ["f", "m"]},
            "y": {"categories": ["no", "yes"]},
        }
    }
)


def _base(n: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["f", "m"], n),
            "z": rng.normal(size=n),
            "y": rng.choice(["no", "yes"], n),
        }
    )


# -- 1. the CSV loader decides columns from the header and the schema alone ----------------


def test_unnamed_index_column_dropped_whatever_its_values(tmp_path):
    d = _base()
    d.to_csv(tmp_path / "d.csv")  # the index written out: first column "Unnamed: 0"
    neighbour = pd.concat([d, d.iloc[[3]]])  # one row more, repeating index value 3
    neighbour.to_csv(tmp_path / "d2.csv")
    a = load_table(tmp_path / "d.csv", private=True, schema=SCHEMA)
    b = load_table(tmp_path / "d2.csv", private=True, schema=SCHEMA)
    assert list(a.columns) == list(b.columns) == ["age", "sex", "z", "y"]
    assert [str(t) for t in a.dtypes] == [str(t) for t in b.dtypes]
    # declared in the schema: kept, whatever its values
    declared = Schema.from_dict(
        {"columns": {**SCHEMA.to_dict()["columns"], "Unnamed: 0": {"bounds": [0, 99]}}}
    )
    assert "Unnamed: 0" in load_table(tmp_path / "d2.csv", private=True, schema=declared).columns
    # raw mode keeps the old rule (a repeated value is data, not an index)
    assert "Unnamed: 0" in load_table(tmp_path / "d2.csv").columns
    assert "Unnamed: 0" not in load_table(tmp_path / "d.csv").columns


def test_private_loader_bounds_cell_size(tmp_path):
    from trustlab.datasets._cells import MAX_CELL_CHARS

    d = _base(5).astype({"sex": object})
    d.loc[2, "sex"] = "f" * (MAX_CELL_CHARS + 1)
    d.to_csv(tmp_path / "long.csv", index=False)
    out = load_table(tmp_path / "long.csv", private=True, schema=SCHEMA)
    assert out["sex"].isna().tolist() == [False, False, True, False, False]
    assert load_table(tmp_path / "long.csv")["sex"].notna().all()  # raw mode reads it


# -- 2. no value raises in Schema.conform or the row hash --------------------------------

ODD = [
    10**400,
    -(10**400),
    2**70,
    decimal.Decimal("sNaN"),
    decimal.Decimal("NaN"),
    decimal.Decimal("1e999999"),
    b"\xff\x00",
    bytearray(b"12"),
    1j,
    fractions.Fraction(1, 3),
    datetime.date(2020, 1, 1),
    (1, 2),
    [1, [2]],
    {"a": 1},
    {1, 2},
    np.array([1.0, 2.0]),
    object(),
    float("inf"),
]


class _Hostile:
    """A cell whose str, hash and comparisons all raise."""

    def __str__(self):
        raise RuntimeError("no text")

    __repr__ = __str__

    def __hash__(self):
        raise RuntimeError("no hash")

    def __eq__(self, other):
        raise RuntimeError("no eq")


def _check_conform_and_hash(df: pd.DataFrame) -> None:
    out = SCHEMA.conform(df)
    assert str(out["age"].dtype) == "float64"
    assert isinstance(out["sex"].dtype, pd.CategoricalDtype)
    assert list(out["sex"].cat.categories) == ["f", "m"]
    h = row_hash(df, 0)
    assert h.dtype == np.uint64 and h.shape == (len(df),)


@pytest.mark.parametrize("value", [*ODD, _Hostile()], ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("column", ["age", "sex", "z"])
def test_unreadable_value_becomes_missing(value, column):
    df = _base(6).astype(object)
    df[column] = pd.Series([value, *df[column].iloc[1:]], dtype=object)
    _check_conform_and_hash(df)
    out = SCHEMA.conform(df)
    readable = (
        isinstance(value, float | fractions.Fraction)
        or (isinstance(value, int) and abs(value) < 1e308)
        or (isinstance(value, decimal.Decimal) and not value.is_nan())
    )
    if column == "age" and not readable:
        assert np.isnan(out["age"].iloc[0])  # unreadable: missing, never an error
    if column == "sex":
        assert pd.isna(out["sex"].iloc[0])
    # the other rows' hashes do not depend on the odd cell
    clean = df.iloc[1:].reset_index(drop=True)
    assert (row_hash(df, 0)[1:] == row_hash(clean, 0)).all()


def test_ten_to_the_400_is_missing_not_an_error():
    from trustlab.datasets._cells import to_float

    assert np.isnan(to_float(pd.Series([10**400], dtype=object))[0])
    df = _base(3).astype(object)
    df.loc[0, "age"] = 10**400
    assert np.isnan(SCHEMA.conform(df)["age"].iloc[0])


@pytest.mark.parametrize(
    "series",
    [
        pd.Series(pd.to_datetime(["2020-01-01", None, "2021-05-05"])),
        pd.Series(pd.to_timedelta([1, None, 3], unit="s")),
        pd.Series(pd.period_range("2020-01", periods=3, freq="M")),
        pd.Series(pd.interval_range(0, 3)),
        pd.Series([1 + 2j, 3j, 0j]),
        pd.Series([1, None, 3], dtype="Int64"),
        pd.Series([True, None, False], dtype="boolean"),
        pd.Series(["f", None, "m"], dtype="string"),
        pd.Series(["f", "m", "x"], dtype="category"),
        pd.Series(pd.arrays.SparseArray([0.0, 1.0, np.nan])),
        pd.Series(
            [decimal.Decimal("1.5"), None, decimal.Decimal("2")], dtype=pd.ArrowDtype(pa.decimal128(5, 2))
        ),
        pd.Series([[1, 2], None, [3]], dtype=pd.ArrowDtype(pa.list_(pa.int64()))),
        pd.Series([b"a", None, b"b"], dtype=pd.ArrowDtype(pa.binary())),
    ],
    ids=lambda s: str(s.dtype)[:20],
)
@pytest.mark.parametrize("column", ["age", "sex", "z"])
def test_every_dtype(series, column):
    df = _base(3)
    df[column] = series
    _check_conform_and_hash(df)


_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.floats(allow_nan=True, allow_infinity=True),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.fractions(),
    st.complex_numbers(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.dates(),
    st.datetimes(),
    st.timedeltas(),
    st.tuples(st.integers(), st.text(max_size=3)),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.sampled_from(["f", "m", "40", " 7 ", "1e400", "nan", "sNaN", "Infinity"]),
    st.builds(_Hostile),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_ANY, _ANY, _ANY), min_size=1, max_size=6))
def test_conform_and_hash_never_raise(cells):
    df = pd.DataFrame(
        {
            "age": pd.Series([c[0] for c in cells], dtype=object),
            "sex": pd.Series([c[1] for c in cells], dtype=object),
            "z": pd.Series([c[2] for c in cells], dtype=object),
        }
    )
    _check_conform_and_hash(df)
    out = SCHEMA.conform(df)
    age = out["age"].to_numpy()
    assert np.all(np.isnan(age) | ((age >= 0) & (age <= 100)))
    # each row's hash is its own: the same as hashed alone
    one = row_hash(df.iloc[[0]].reset_index(drop=True), 0)
    assert one[0] == row_hash(df, 0)[0]


# -- 3. Parquet files whose types differ (private mode) -----------------------------------


def _parquet_pair(tmp_path):
    d = _base(60, seed=1)
    d.iloc[:30].to_parquet(tmp_path / "a.parquet", index=False)  # age int64
    other = d.iloc[30:].copy()
    other["age"] = other["age"].astype(float)
    other.iloc[0, 0] = np.nan  # one missing age: pandas writes the column as double
    other.to_parquet(tmp_path / "b.parquet", index=False)
    return d


def test_parquet_types_from_schema_in_private_mode(tmp_path):
    from trustlab.errors import DataError

    _parquet_pair(tmp_path)
    files = sorted(tmp_path.glob("*.parquet"))
    with pytest.raises(DataError, match="stores column 'age'"):
        check_parquet_schemas(files)  # raw mode: still one schema for all files
    arrow, _ = check_parquet_schemas(files, private=True)
    assert arrow.names == ["age", "sex", "z", "y"]


def test_private_dask_audit_with_mixed_types_and_no_timings(tmp_path):
    pytest.importorskip("dask.dataframe")
    from trustlab.audit import Audit
    from trustlab.audit._scale import run_scaled
    from trustlab.audit.sections.data import DataSection

    _parquet_pair(tmp_path)
    runner = Audit(model="logistic", private=True, epsilon=2.0, schema=SCHEMA, sections=[DataSection()])
    report = run_scaled(runner, tmp_path, target="y", sensitive=["sex"], client=None)
    scale = report.meta["scale"]
    assert "seconds" not in scale  # wall-clock times depend on the rows: terminal only
    assert set(report.timings) == {"pass1", "fit", "pass2"}
    assert "timings" not in report.to_dict() and "seconds" not in str(report.to_dict()["meta"])
