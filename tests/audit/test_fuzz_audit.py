"""Property-based probes of ``Audit`` with hostile tables and arguments (issue 11 §4).

Properties: ``Audit(...).run`` either returns a report whose JSON is valid (finite
numbers or null) or raises a :class:`trustlab.errors.TrustlabError` that names an
argument; never another exception. In private mode it never raises on a fact about the
rows (only on the arguments, column names and schema). A saved report folder is complete
or absent.

Tables: 0 to 60 rows; numeric columns with ties, constants, NaN, +-inf, 1e308 and
subnormal magnitudes; text columns with unicode and mixed types; one-value and tiny
sensitive groups; unicode, integer and duplicate column names; targets with one, two
or three values and missing labels. Arguments: sensitive and ignore as a string, a list
or odd types; ``private`` as booleans and strings; bad seeds and test sizes.

The default profile (derandomized, a few dozen examples) runs in CI in well under a
minute; ``--run-slow`` runs a longer random profile.
"""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from trustlab.audit import Audit
from trustlab.audit.report import REPORT_FILES
from trustlab.datasets import Schema
from trustlab.errors import TrustlabError

# fast: 12 fixed (derandomised) examples, each a whole audit (~1 s; the suite's 10-minute budget,
# issue 25); slow: 300 random ones
FAST = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
SLOW = settings(FAST, max_examples=300, derandomize=False)
PROFILES = [pytest.param(FAST, id="fast"), pytest.param(SLOW, id="slow", marks=pytest.mark.slow)]

HOSTILE = [0.0, -0.0, 1.0, 1e308, -1e308, 1e-308, 5e-324, 1e15, np.nan, np.inf, -np.inf, 3.4e38]
NAMES = ["x", "y", "ünï", "列", "a b", "", "0", "x.1"]


@st.composite
def tables(draw: Any) -> tuple[pd.DataFrame, str, list[Any]]:
    """A table with a target ``t``, sensitive column(s) and 1-3 hostile feature columns.

    Hypothesis draws the structure (size, label set, group pattern, column kinds, how
    many hostile cells); a drawn seed fills the cells, so that even the simplest
    examples have varied rows.
    """
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # rare structures come from the seed: hypothesis favours its simplest choices, which would
    # otherwise make every example tiny or duplicated
    n = int(rng.choice([40, 60, 25, 0, 1, 2, 5], p=[0.3, 0.3, 0.2, 0.05, 0.05, 0.05, 0.05]))
    labels = draw(
        st.sampled_from([["no", "yes"], ["no", "yes"], [0, 1], ["yes"], ["a", "b", "c"], [True, False]])
    )
    target: list[Any] = list(rng.choice(np.array(labels, dtype=object), size=n))
    if n and rng.random() < 0.1:
        target[0] = None  # a missing label
    groups = draw(st.sampled_from([["f", "m"], ["f", "m"], ["f"], ["f", "m", "x"], ["ä", "🙂"], [1, 2]]))
    sens: list[Any] = list(rng.choice(np.array(groups, dtype=object), size=n))
    if rng.random() < 0.3 and n > 2:  # a tiny group: one or two rows
        sens = [groups[0]] * (n - 2) + [groups[-1]] * 2
    frame: dict[Any, Any] = {"t": target, "s": sens}
    hostile_share = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    for _ in range(draw(st.integers(1, 3))):
        name = draw(st.sampled_from(NAMES))
        kind = draw(st.sampled_from(["num", "num", "const", "text", "mixed", "int"]))
        if kind in ("num", "const"):
            col: Any = rng.normal(size=n).round(1) if kind == "num" else np.full(n, rng.normal())
            mask = rng.random(n) < hostile_share
            col = np.where(mask, rng.choice(np.array(HOSTILE), size=n), col)
        elif kind == "text":
            col = list(rng.choice(np.array(["a", "b", "ä", "🙂", "", " ", "nan", "1"], dtype=object), size=n))
        elif kind == "mixed":
            col = [v if rng.random() < 0.5 else float(rng.normal()) for v in rng.choice(["a", "b"], size=n)]
        else:
            col = rng.integers(-3, 4, size=n)
        frame[name] = col
    df = pd.DataFrame(frame)
    if rng.random() < 0.1 and df.shape[1] > 2:  # a duplicated column name
        df.columns = [*df.columns[:-1], df.columns[1]]
    odd = [["s", "s"], ["s", "t"], 3, ["nope"]]
    sensitive: Any = (
        draw(st.sampled_from(odd)) if rng.random() < 0.15 else draw(st.sampled_from(["s", ["s"]]))
    )
    return df, "t", sensitive


SCHEMA = Schema.from_dict(
    {
        "columns": {
            "t": {"categories": ["no", "yes"]},
            "s": {"categories": ["f", "m"]},
            # every generated feature name has public bounds: private mode trains the model on
            # them with DP-SGD (a schema describing no feature is a public error, tested apart)
            **{name: {"bounds": [-10, 10]} for name in NAMES if name.strip()},
        }
    }
)

hostile_arguments = st.fixed_dictionaries(
    {
        "private": st.sampled_from([False, True, "no", 1]),
        "epsilon": st.sampled_from([None, 1.0, 0.0, -1.0, math.inf, "1"]),
        "test_size": st.sampled_from([0.3, 0.3, 0.0, 1.0, math.nan]),
        "random_state": st.sampled_from([0, -1, 2**40, 1.5]),
        "ignore": st.sampled_from([(), "x", "xy", ["nope"], 3.5, ["t"], ["s"]]),
        "schema": st.sampled_from([SCHEMA, None, {"columns": {}}]),
        "model": st.sampled_from(["logistic", "hgb", "forest", 3]),
    }
)
valid_arguments = st.booleans().flatmap(
    lambda private: st.fixed_dictionaries(
        {
            "private": st.just(private),
            "epsilon": st.just(1.0 if private else None),
            "test_size": st.sampled_from([0.3, 0.5]),
            "random_state": st.sampled_from([0, 1]),
            "ignore": st.sampled_from([(), "x", ["x"]]),
            "schema": st.just(SCHEMA),
            "model": st.sampled_from(["logistic", "logistic", "hgb"]),
        }
    )
)


def _json_is_clean(report: Any) -> None:
    data = json.loads(report.to_json())  # allow_nan=False inside: NaN/inf would raise here

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for w in v.values():
                walk(w)
        elif isinstance(v, list):
            for w in v:
                walk(w)
        elif isinstance(v, float):
            assert math.isfinite(v)

    walk(data)


def _run(frame: pd.DataFrame, target: str, sensitive: Any, kwargs: dict[str, Any]) -> Any:
    """The report, or None after a TrustlabError naming an argument; anything else fails."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # warnings are allowed; exceptions are the property
            report = Audit(**kwargs).run(frame, target=target, sensitive=sensitive)
    except TrustlabError as exc:
        assert exc.argument, f"{type(exc).__name__} without an argument: {exc}"
        event(f"raised {type(exc).__name__} ({exc.argument if len(str(exc.argument)) < 15 else 'column'})")
        return None
    event("report")
    return report


@pytest.mark.parametrize("profile", PROFILES)
def test_audit_raises_only_trustlab_errors(profile: settings) -> None:
    """Valid arguments, hostile tables: a report with clean JSON, or a TrustlabError."""
    reports = []

    @profile
    @given(table=tables(), kwargs=valid_arguments)
    def check(table: tuple[pd.DataFrame, str, Any], kwargs: dict[str, Any]) -> None:
        frame, target, sensitive = table
        if kwargs["ignore"] and "x" not in frame.columns:
            # valid arguments: the ignored column exists (an unknown one is a hostile argument, tested
            # below); without this most runs stop at that refusal and few reach a whole report
            frame = frame.assign(x=np.zeros(len(frame)))
        report = _run(frame, target, sensitive, kwargs)
        if report is not None:
            _json_is_clean(report)
            reports.append(report.meta["private"])

    check()
    # the probe must reach whole runs, not only errors, in both modes. Fast (fixed examples): 4 of
    # 12 (measured 6). Slow (random): about a third of 300 reach a report (99 and 100+ measured), so
    # the former bar at 100 failed about half the runs; 60 sits ~5 sd (binomial, p 1/3) below it
    least = profile.max_examples // 3 if profile.derandomize else profile.max_examples // 5
    assert len(reports) >= least and len(set(reports)) == 2, reports


@pytest.mark.parametrize("profile", PROFILES)
def test_hostile_arguments_raise_trustlab_errors(profile: settings) -> None:
    @profile
    @given(table=tables(), kwargs=hostile_arguments)
    def check(table: tuple[pd.DataFrame, str, Any], kwargs: dict[str, Any]) -> None:
        frame, target, sensitive = table
        report = _run(frame, target, sensitive, kwargs)
        if report is not None:
            _json_is_clean(report)

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_private_audit_never_raises_on_the_rows(profile: settings) -> None:
    """With valid public arguments, no table (however hostile its rows) makes a private audit raise."""

    @settings(profile, max_examples=profile.max_examples * 2 // 3)  # each one a DP-SGD fit (~1 s)
    @given(table=tables())
    def check(table: tuple[pd.DataFrame, str, Any]) -> None:
        frame, _, _ = table
        frame = frame.loc[:, ~frame.columns.duplicated()]  # column names are public: keep them valid
        if not any(c in SCHEMA for c in frame.columns if c not in ("t", "s")):
            # the layout is public: give the model a column the schema describes
            frame = frame.assign(x=np.zeros(len(frame)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = Audit(model="logistic", private=True, epsilon=1.0, schema=SCHEMA).run(
                frame, target="t", sensitive="s"
            )
        _json_is_clean(report)
        assert report.meta["private"] is True

    check()


@pytest.mark.parametrize("profile", PROFILES)
def test_saved_report_is_complete_or_absent(profile: settings, tmp_path_factory: Any) -> None:
    @settings(profile, max_examples=profile.max_examples // 3)  # rendering HTML is the slow part
    @given(table=tables(), private=st.booleans())
    def check(table: tuple[pd.DataFrame, str, Any], private: bool) -> None:
        frame, target, sensitive = table
        kwargs = {
            "model": "logistic",
            "private": private,
            "epsilon": 1.0 if private else None,
            "schema": SCHEMA,
        }
        report = _run(frame, target, sensitive, kwargs)
        out = tmp_path_factory.mktemp("fuzz") / "r"
        if report is None:
            return
        try:
            report.save(out)
        except TrustlabError:
            assert not out.exists()
            return
        assert sorted(p.name for p in out.iterdir()) == sorted(REPORT_FILES)
        json.loads((out / "report.json").read_text())
        assert (out / "report.html").read_text().rstrip().endswith("</html>")
        assert [p.name for p in out.parent.iterdir()] == ["r"]  # no temporary folder left

    check()
