"""API defects of issue 26 section 3: bad labels, pandas' nullable dtypes, --positive, repeatable figures.

Each test failed on the main branch before its fix.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab._validation import check_binary_target
from trustlab.audit import Audit
from trustlab.audit.sections.robustness import RobustnessSection
from trustlab.audit.sections.unlearning import UnlearningSection
from trustlab.errors import DataError
from trustlab.fairness.metrics import confusion_by_group


@pytest.mark.parametrize("bad", [2, -1, 0.5])
def test_confusion_by_group_refuses_labels_other_than_0_and_1(bad):
    y = [1, 0, bad, 1]
    with pytest.raises(DataError, match="0 or 1") as info:
        confusion_by_group(y, [1, 0, 1, 1], sensitive_features=["a", "a", "b", "b"])
    assert info.value.argument == "y_true"
    with pytest.raises(DataError, match="0 or 1") as info:
        confusion_by_group([1, 0, 1, 1], y, sensitive_features=["a", "a", "b", "b"])
    assert info.value.argument == "y_pred"


def _table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x": x,
            "w": rng.uniform(size=n),
            "c": rng.choice(["u", "v", "w"], n),
            "g": rng.choice(["a", "b"], n),
            "y": (x + rng.normal(size=n) > 0).astype(int),
        }
    )


def test_robustness_after_convert_dtypes_with_missing_text():
    df = _table().convert_dtypes()
    df.loc[::7, "c"] = pd.NA
    report = Audit(model="logistic", sections=[RobustnessSection()]).run(df, target="y", sensitive=["g"])
    assert report["robustness"].figures["released"]


@pytest.mark.parametrize(
    "values, positive, expected",
    [
        (pd.Series([0.0, 1.0, 1.0, 0.0]), "1", 1.0),
        (pd.Series([0.0, 1.0, 1.0, 0.0]), 1, 1.0),
        (pd.Series([True, False, True]), "true", True),
        (pd.Series([True, False, True]), "False", False),
        (pd.Series([0, 1, 1]), "1.0", 1),
    ],
)
def test_positive_label_read_as_the_targets_type(values, positive, expected):
    y, _, pos = check_binary_target(values, "target 'y'", positive)
    assert pos == expected and type(pos) is not str
    assert y.tolist() == (values == expected).astype(int).tolist()


def test_positive_message_shows_plain_values():
    with pytest.raises(DataError) as info:
        check_binary_target(pd.Series([0.0, 1.0]), "target 'y'", "2")
    assert "np.float64" not in str(info.value) and "[0.0, 1.0]" in str(info.value)


def test_all_missing_target_is_named():
    df = _table().assign(y=np.nan)
    with pytest.raises(DataError, match="target 'y'") as info:
        Audit(model="logistic").run(df, target="y", sensitive=["g"])
    assert info.value.argument == "target" and "--ignore" not in str(info.value)


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, str(k)))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _leaves(v, (*path, str(i)))
    else:
        yield path, obj


def test_unlearning_same_seed_same_figures_but_the_stated_unseeded_ones():
    df = _table(500)
    runs = [
        Audit(model="logistic", sections=[UnlearningSection()], random_state=3).run(
            df, target="y", sensitive=["g"]
        )["unlearning"]
        for _ in range(2)
    ]
    a, b = (dict(_leaves(r.figures)) for r in runs)
    assert a.keys() == b.keys()
    unseeded = [tuple(p.split(".")) for p in runs[0].figures["deletion"]["unseeded"]]
    assert unseeded, "the report states which figures are not reproducible from the seed"

    def declared(path):
        return path[:1] == ("deletion",) and any(path[1 : 1 + len(u)] == u for u in unseeded)

    differing = [p for p in a if a[p] != b[p] and not (a[p] != a[p] and b[p] != b[p])]
    assert all(declared(p) for p in differing), [p for p in differing if not declared(p)]
    # the seeded figures: the attack on the original model, the row choice and the retrained model
    assert a[("membership", "advantage", "0")] == b[("membership", "advantage", "0")]
    assert not declared(("deletion", "models", "retrained", "test_accuracy"))
    assert any("unseeded" in n or "same --seed" in n for n in runs[0].notes)
