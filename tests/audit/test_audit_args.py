"""Audit(...) and Audit.run validate their arguments up front (issue 11 §2).

Each bad argument raises ParameterError or DataError whose ``argument`` is the name the
user passed (not an internal variable), before any model is fitted; a string given for
``ignore`` or ``sensitive`` is one column, never split into characters; ``private`` and
``use_sensitive`` accept only real booleans.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.datasets import Schema
from trustlab.errors import DataError, ParameterError, TrustlabError

SCHEMA = Schema.from_dict(
    {
        "columns": {
            "group": {"categories": ["a", "b"]},
            "label": {"categories": ["no", "yes"]},
            # a feature with public bounds: private mode trains the model on it with DP-SGD
            "x": {"bounds": [-5, 5]},
        }
    }
)


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(3)
    n = 240
    x = rng.normal(size=n)
    group = rng.choice(["a", "b"], size=n)
    y = np.where(x + rng.normal(scale=0.6, size=n) > 0, "yes", "no")
    return pd.DataFrame({"x": x, "z": rng.uniform(size=n), "group": group, "label": y})


@pytest.mark.parametrize(
    "kwargs,argument,message",
    [
        ({"private": "no"}, "private", "bool"),
        ({"private": 1}, "private", "bool"),
        ({"use_sensitive": "yes"}, "use_sensitive", "bool"),
        ({"random_state": -1}, "random_state", r"\[0, 4.29497e\+09\]"),
        ({"random_state": 2**40}, "random_state", "int in the range"),
        ({"random_state": 1.5}, "random_state", "int in the range"),
        ({"random_state": "0"}, "random_state", "int in the range"),
        ({"test_size": 0}, "test_size", r"\(0, 1\)"),
        ({"test_size": float("nan")}, "test_size", r"\(0, 1\)"),
        ({"test_size": "0.3"}, "test_size", r"\(0, 1\)"),
        ({"schema": {"columns": {}}}, "schema", "Schema"),
        ({"schema": "schema.json"}, "schema", "Schema"),
        ({"model": 3}, "model", "predict_proba"),
        ({"model": None}, "model", "predict_proba"),
        ({"ignore": 3.5}, "ignore", "column name"),
        ({"ignore": {"x"}}, "ignore", "list of column names"),
        ({"ignore": [["x"]]}, "ignore", "must name a column"),
        ({"epsilon": 1.0}, "epsilon", "--private"),
        ({"private": True}, "epsilon", "--epsilon"),
        ({"private": True, "epsilon": "1"}, "epsilon", "range"),
        ({"private": True, "epsilon": -1.0}, "epsilon", "range"),
        ({"positive": ["yes"]}, "positive", "positive"),
        ({"sections": "data"}, "sections", "Section"),
    ],
)
def test_bad_constructor_arguments(kwargs, argument, message):
    with pytest.raises(ParameterError, match=message) as err:
        Audit(**kwargs)
    assert err.value.argument == argument


def test_reassigned_attribute_is_checked_at_run(frame):
    audit = Audit(model="logistic")
    audit.private = "no"  # a string must not switch privacy on (or off) at run time either
    with pytest.raises(ParameterError) as err:
        audit.run(frame, target="label", sensitive="group")
    assert err.value.argument == "private"


@pytest.mark.parametrize(
    "target,sensitive,argument,message",
    [
        (["label"], "group", "target", "must name a column"),
        (None, "group", "target", "must name a column"),
        (1.0, "group", "target", "must name a column"),
        ("label", None, "sensitive", "at least one sensitive"),
        ("label", [], "sensitive", "at least one sensitive"),
        ("label", ["group", "group"], "sensitive", "more than once"),
        ("label", {"group"}, "sensitive", "list of column names"),
        ("label", [("group",)], "sensitive", "must name a column"),
        ("label", "grp", "sensitive", r"unknown column\(s\) \['grp'\]"),
        ("label", "label", "sensitive", "cannot also be a sensitive"),
        ("nope", "group", "target", "unknown column"),
    ],
)
def test_bad_run_arguments(frame, target, sensitive, argument, message):
    with pytest.raises(TrustlabError, match=message) as err:
        Audit(model="logistic").run(frame, target=target, sensitive=sensitive)
    assert err.value.argument == argument
    assert isinstance(err.value, ParameterError | DataError)


def test_a_string_is_one_column_never_its_characters(frame):
    wide = frame.assign(xz=frame["x"] * 2)
    report = Audit(model="logistic", ignore="xz").run(wide, target="label", sensitive="group")
    assert "xz" not in report.meta["features"] and {"x", "z"} <= set(report.meta["features"])
    # "xz" split into characters would have dropped x and z instead
    with pytest.raises(DataError, match=r"unknown column\(s\) \['xy'\]") as err:
        Audit(model="logistic", ignore="xy").run(frame, target="label", sensitive="group")
    assert err.value.argument == "ignore"
    for ignore in (("z",), np.array(["z"]), pd.Index(["z"])):
        r = Audit(model="logistic", ignore=ignore).run(frame, target="label", sensitive=pd.Index(["group"]))
        assert "z" not in r.meta["features"]


def test_ignoring_the_target_names_ignore(frame):
    with pytest.raises(DataError, match="must not name the target") as err:
        Audit(model="logistic", ignore=["label"]).run(frame, target="label", sensitive="group")
    assert err.value.argument == "ignore"
    with pytest.raises(DataError, match="no feature columns") as err:
        Audit(model="logistic", ignore=["x", "z"]).run(frame, target="label", sensitive="group")
    assert err.value.argument == "ignore"


def test_run_argument_types(frame):
    with pytest.raises(ParameterError) as err:
        Audit(model="logistic").run(frame, target="label", sensitive="group", dataset_name=3)
    assert err.value.argument == "dataset_name"
    with pytest.raises(ParameterError) as err:
        Audit(model="logistic").run(frame, target="label", sensitive="group", progress="yes")
    assert err.value.argument == "progress"
    with pytest.raises(DataError) as err:
        Audit().run(frame.to_numpy(), target="label", sensitive="group")
    assert err.value.argument == "data"


def test_integer_column_names_are_names(frame):
    numbered = frame.set_axis(range(4), axis=1)
    report = Audit(model="logistic").run(numbered, target=3, sensitive=2)
    assert report.meta["target"] == 3 and report.meta["sensitive"] == [2]


@pytest.mark.parametrize(
    "column,values,message",
    [
        ("x", lambda f: f["x"] + 1j, "complex numbers"),
        ("c", lambda f: [complex(i, 1) if i % 2 else "t" for i in range(len(f))], "complex numbers"),
        ("c", lambda f: [[i] for i in range(len(f))], "list values"),
        ("c", lambda f: [{"k": i} for i in range(len(f))], "dict values"),
        ("c", lambda f: pd.date_range("2000-01-01", periods=len(f)), "datetime64"),
        ("c", lambda f: pd.to_timedelta(np.arange(len(f)), unit="s"), "timedelta64"),
        ("c", lambda f: pd.period_range("2000-01", periods=len(f), freq="M"), "period"),
        ("x", lambda f: f["x"].where(f.index != 5, np.inf), "1 infinite value"),
        ("x", lambda f: f["x"].where(f.index != 5, -1e308), "beyond"),
        ("x", lambda f: f["x"] * 1e300, "beyond"),
    ],
)
def test_unusable_columns_are_named(frame, column, values, message):
    bad = frame.assign(**{column: values(frame)})
    with pytest.raises(DataError, match=message) as err:
        Audit(model="logistic").run(bad, target="label", sensitive="group")
    assert err.value.argument == column


def test_usable_odd_columns_run(frame):
    odd = frame.assign(
        mixed=[i if i % 3 else f"t{i}" for i in range(len(frame))],
        flag=frame.index % 2 == 0,
        counts=pd.array([1, None] * (len(frame) // 2), dtype="Int64"),
        big=frame["z"] * 3e38,
        tiny=frame["z"] * 1e-30,
    )
    # 'mixed' differs on every row: the screening calls it a row id; keep it as a feature
    report = Audit(model="logistic", keep=["mixed"]).run(odd, target="label", sensitive="group")
    assert {"mixed", "flag", "counts", "big", "tiny"} <= set(report.meta["features"])


@pytest.mark.parametrize(
    "change",
    [
        lambda f: f.assign(x=f["x"].where(f.index != 5, np.inf)),
        lambda f: f.assign(x=f["x"].where(f.index != 5, 1e308)),
        lambda f: f.assign(c=[[i] for i in range(len(f))]),
        lambda f: f.assign(x=f["x"].astype(object).where(f.index != 5, 1j)),
        lambda f: f.assign(x=f["x"] + 0j),
        lambda f: f.assign(c=pd.date_range("2000-01-01", periods=len(f))),
    ],
    ids=["inf", "1e308", "lists", "one-complex-cell", "complex-column", "dates"],
)
def test_private_mode_never_raises_on_values(frame, change):
    """issue 10: in private mode no fact about the rows raises; the raw-mode checks stay out."""
    report = Audit(model="logistic", private=True, epsilon=1.0, schema=SCHEMA).run(
        change(frame), target="label", sensitive="group"
    )
    assert report.meta["private"] is True


def test_model_path_object(tmp_path, frame):
    with pytest.raises(TrustlabError) as err:
        Audit(model=Path(tmp_path / "missing.pkl")).run(frame, target="label", sensitive="group")
    assert err.value.argument == "model"
