"""Issue 26 section 2: huge inputs, the privacy stance of the Robustness table, and the figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.audit.sections.robustness import RobustnessSection, _ood_inputs
from trustlab.errors import DataError


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x1, x2 = rng.normal(size=n), rng.normal(size=n)
    return pd.DataFrame(
        {
            "x1": x1,
            "x2": x2,
            "note": [f"w{v}" for v in rng.integers(0, 3 * n, size=n)],  # free text: most values once
            "sex": rng.choice(["f", "m"], size=n),
            "y": (x1 + rng.normal(size=n) > 0).astype(int),
        }
    )


def test_ood_caps_the_levels_of_a_free_text_column():
    frame = _frame()
    X_train, X_test = frame.iloc[:300].drop(columns="y"), frame.iloc[300:].drop(columns="y")
    assert X_train["note"].nunique() > 200
    ref, scored, notes = _ood_inputs(X_train, X_test, 20_000, 0)
    assert ref["note"].nunique() == 31  # the 30 most frequent training levels and one for the rest
    assert set(scored["note"]) <= set(ref["note"])
    assert any("note (" in n and "30 most frequent" in n for n in notes)
    assert ref[["x1", "x2", "sex"]].equals(X_train[["x1", "x2", "sex"]])  # other columns as they were


def test_most_unlike_rows_show_ids_and_features_not_records():
    frame = _frame()
    frame.loc[frame.index[-5:], "x2"] = 40.0  # held-out rows far out on x2 (the split is a hash)
    section = RobustnessSection()
    section.max_rows = 50
    report = Audit(model="logistic", sections=[section]).run(frame, target="y", sensitive=["sex"])
    top = report.results[0].figures["ood"]["top"]
    assert top and all("values" not in t for t in top)
    assert top[0]["unusual"][0]["feature"] == "x2" and "IQR above" in top[0]["unusual"][0]["how"]
    html = report.to_html()
    body = html[html.index('id="robustness"') :]
    assert "what makes it unusual" in body
    assert "40.0" not in body and "w1" not in body  # no raw value of a listed row


@pytest.mark.parametrize("kind", ["levels", "continuous"])
def test_sensitive_column_with_too_many_groups_is_refused(kind):
    frame = _frame(300)
    rng = np.random.default_rng(1)
    n = len(frame)
    frame["zone"] = rng.integers(0, 1000, size=n).astype(str) if kind == "levels" else rng.normal(size=n)
    with pytest.raises(DataError, match=r"sensitive column 'zone' has .* bin it") as err:
        Audit(model="logistic", sections=[]).run(frame, target="y", sensitive=["zone"])
    assert err.value.argument == "sensitive"


def test_cli_refuses_a_many_group_sensitive_column(tmp_path):
    from typer.testing import CliRunner

    from trustlab.cli import app

    frame = _frame(300)
    frame["zone"] = np.arange(len(frame)) % 120
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    res = CliRunner().invoke(
        app, ["audit", str(path), "--target", "y", "--sensitive", "zone", "--out", str(tmp_path / "r")]
    )
    assert res.exit_code == 2
    assert "'zone'" in res.output and "120" in res.output
