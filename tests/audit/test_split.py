"""The held-out split is a per-row function, so one row changes the prediction histogram by at most 1.

Issue 10 item 5: with ``train_test_split(stratify=y, random_state=seed)`` adding one row
reshuffled hundreds of rows and moved the histogram the private audit charges as
sensitivity 1 by L1 = 42..130 (Benefits, model held fixed).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import train_test_split

import trustlab.audit.audit as audit_module
from trustlab.audit import Audit
from trustlab.audit.prediction_table import build_prediction_table
from trustlab.audit.split import row_hash, row_split, sample_rate
from trustlab.errors import ParameterError
from trustlab.models import make_model

SENS = ["sex", "nwhite"]


@pytest.fixture(scope="module")
def fixed_model(benefits):
    """A model trained on other rows and held fixed (the model is public in issue 10)."""
    df, info, _ = benefits
    feats = [c for c in df.columns if c not in (info.target, *SENS)]
    other = df.sample(1500, random_state=1)
    return make_model("logistic", other[feats]).fit(other[feats], (other[info.target] == "yes").astype(int))


def _held_out_row(df: pd.DataFrame, **changes) -> pd.DataFrame:
    """A row (one of df's, with ``changes``) whose hash puts it on the held-out side."""
    for i in range(len(df)):
        row = df.iloc[[i]].astype({k: object for k in changes}).assign(**changes)
        if row_split(row.reset_index(drop=True), 0.3, 0)[0]:
            return row
    raise AssertionError("no held-out row")


def _neighbours(df: pd.DataFrame, *, odd_values: bool) -> dict[str, tuple[pd.DataFrame, pd.DataFrame, int]]:
    """(table, neighbour, exact L1 change): one held-out row added (first, middle, last) or removed."""
    row = _held_out_row(df, age=33)
    mid = len(df) // 2
    held = np.flatnonzero(row_split(df.reset_index(drop=True), 0.3, 0))
    out = {
        "add first": (df, pd.concat([row, df]), 1),
        "add middle": (df, pd.concat([df.iloc[:mid], row, df.iloc[mid:]]), 1),
        "add last": (df, pd.concat([df, row]), 1),
        "remove a held-out row": (df, df.drop(df.index[held[len(held) // 2]]), 1),
        "remove a training row": (df, df.drop(df.index[np.setdiff1d(np.arange(len(df)), held)[mid // 2]]), 0),
    }
    if odd_values:  # private mode: the schema makes these values missing
        out["add with age missing (int64 -> float64)"] = (
            df,
            pd.concat([df, _held_out_row(df, age=np.nan)]),
            1,
        )
        unknown = _held_out_row(df, age="unknown")
        out["add with age 'unknown' (-> object)"] = (df, pd.concat([df.astype({"age": object}), unknown]), 1)
    return out


def _table(frame: pd.DataFrame, model, *, private: bool, schema=None):
    ctx = Audit(model=model, private=private, epsilon=1.0 if private else None, schema=schema).context(
        frame, target="ui", sensitive=SENS
    )
    return ctx, build_prediction_table(ctx, None, n_boot=1).counts


@pytest.mark.parametrize("private", [False, True])
def test_one_row_changes_the_histogram_by_at_most_one(benefits, fixed_model, private):
    df, _info, schema = benefits
    for name, (a, b, change) in _neighbours(df, odd_values=private).items():
        _, ha = _table(a, fixed_model, private=private, schema=schema)
        _, hb = _table(b, fixed_model, private=private, schema=schema)
        assert np.abs(ha - hb).sum() == change, name


def test_no_other_row_changes_side(benefits):
    df, _info, _ = benefits
    mask = row_split(df.reset_index(drop=True), 0.3, 0)
    shuffled = df.sample(frac=1.0, random_state=3)
    again = row_split(shuffled.reset_index(drop=True), 0.3, 0)
    assert (pd.Series(again, index=shuffled.index).loc[df.index].to_numpy() == mask).all()
    plus = pd.concat([df.iloc[:100], df.iloc[[5]].assign(age=61), df.iloc[100:]]).reset_index(drop=True)
    moved = np.delete(row_split(plus, 0.3, 0), 100) != mask
    assert not moved.any()


def test_hash_reads_values_not_dtypes():
    a = pd.DataFrame({"age": [40, 50, 60], "sex": pd.Categorical(["f", "m", "f"])})
    b = pd.DataFrame({"age": [40.0, 50.0, 60.0], "sex": ["f", "m", "f"]})
    c = pd.DataFrame({"age": ["40", 50, "60"], "sex": np.array(["f", "m", "f"], dtype=object)})
    assert (row_hash(a) == row_hash(b)).all() and (row_hash(a) == row_hash(c)).all()
    assert row_hash(pd.DataFrame({"x": [0.0]}))[0] == row_hash(pd.DataFrame({"x": [-0.0]}))[0]
    assert row_hash(a, seed=1)[0] != row_hash(a, seed=0)[0]
    assert row_hash(a.iloc[:, ::-1])[0] != row_hash(a)[0]  # column order is part of the key


def test_split_share_and_independence_across_seeds():
    df = pd.DataFrame({"x": np.arange(20_000), "y": np.arange(20_000) % 7})
    masks = [row_split(df, 0.3, s) for s in range(3)]
    sd = np.sqrt(0.3 * 0.7 / len(df))
    for m in masks:
        assert abs(m.mean() - 0.3) < 5 * sd
    both = (masks[0] & masks[1]).mean()  # independent coins: 0.09 of the rows
    assert abs(both - 0.09) < 5 * np.sqrt(0.09 * 0.91 / len(df))
    assert row_split(df.iloc[:0], 0.3, 0).shape == (0,)


def test_sensitivity_check_catches_a_reshuffling_split(benefits, fixed_model, monkeypatch):
    """The check above can fail: the old stratified shuffle moves the histogram by far more than 1."""

    def old_split(frame, test_size, seed):
        y = (frame["ui"].astype(str) == "yes").to_numpy()
        _, test = train_test_split(np.arange(len(frame)), test_size=test_size, stratify=y, random_state=seed)
        mask = np.zeros(len(frame), dtype=bool)
        mask[test] = True
        return mask

    monkeypatch.setattr(audit_module, "split_rows", lambda f, t, s: (old_split(f, t, s), row_hash(f, s)))
    df, _info, _ = benefits
    a, b, _ = _neighbours(df, odd_values=False)["add middle"]
    _, ha = _table(a, fixed_model, private=False)
    _, hb = _table(b, fixed_model, private=False)
    assert np.abs(ha - hb).sum() > 10


def test_model_fitted_on_the_hash_sample_of_the_dask_run(benefits):
    """`sample_rows` fits on a hash sample: the rows a distributed run samples, stated in the status."""
    from trustlab.audit._scale import _TrainingSample

    df, _info, _ = benefits
    ctx = Audit(model="logistic", sample_rows=1000).context(df, target="ui", sensitive=SENS)
    full = Audit(model="logistic", sample_rows=None).context(df, target="ui", sensitive=SENS)
    assert (ctx.test_index == full.test_index).all()  # every held-out row is still scored
    assert set(ctx.train_index) < set(full.train_index)
    sd = np.sqrt(1000)  # the sample's size is binomial around sample_rows
    assert abs(len(ctx.train_index) - 1000) < 5 * sd
    assert f"a hash sample of {len(ctx.train_index):,} of the {len(full.train_index):,}" in ctx.model_status
    rate = sample_rate(1000, len(df), 0.3)
    chunks = [df.iloc[i : i + 700] for i in range(0, len(df), 700)]  # any partitioning
    stat = _TrainingSample(0.3, 0, rate)
    dask_rows = stat.finalize(functools.reduce(stat.merge, [stat.partial(c) for c in chunks]))
    ours = df.iloc[ctx.train_index]
    assert len(dask_rows) == len(ours) and (dask_rows.to_numpy() == ours.to_numpy()).all()
    assert Audit(model="logistic").context(df, target="ui", sensitive=SENS).model_status == full.model_status


def test_sample_rows_is_checked():
    with pytest.raises(ParameterError, match="sample_rows"):
        Audit(sample_rows=5)


def test_hash_reads_categorical_and_arrow_strings_as_their_values():
    """The fast routes (category codes, Arrow factorisation) give the object route's hashes."""
    rng = np.random.default_rng(0)
    values = np.array(["a", "b", "12", "1e3", "nan", "x y", None, "-0", "40.0"], dtype=object)
    col = values[rng.integers(0, len(values), 500)]
    obj = pd.DataFrame({"c": col, "n": rng.normal(size=500)})
    ref = row_hash(obj, 5)
    for dtype in ("category", "string", "string[pyarrow]"):
        other = obj.assign(c=obj["c"].astype(dtype))
        assert (row_hash(other, 5) == ref).all(), dtype
    unused = obj.assign(c=pd.Categorical(col, categories=[*dict.fromkeys(v for v in values if v), "zz"]))
    assert (row_hash(unused, 5) == ref).all()
