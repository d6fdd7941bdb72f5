"""AuditReport.save writes atomically (issue 11 §3): the folder holds one whole report or nothing.

Failures are injected at each step of the write (monkeypatched file writes and renames);
after each, ``out`` must hold the previous report byte for byte, or nothing, and no
temporary folder may be left beside it.
"""

from __future__ import annotations

import builtins
import json
import os

import numpy as np
import pandas as pd
import pytest

import trustlab.audit.report as report_module
from trustlab.audit import Audit
from trustlab.audit.report import REPORT_FILES
from trustlab.errors import ParameterError


@pytest.fixture(scope="module")
def report():
    rng = np.random.default_rng(1)
    n = 300
    x = rng.normal(size=n)
    g = rng.choice(["a", "b"], size=n)
    y = np.where(x + rng.normal(scale=0.7, size=n) > 0, "yes", "no")
    frame = pd.DataFrame({"x": x, "w": rng.uniform(size=n), "g": g, "y": y})
    return Audit(model="logistic").run(frame, target="y", sensitive="g")


@pytest.fixture(scope="module")
def html(report):
    return report.to_html()


@pytest.fixture()
def rendered_once(report, html, monkeypatch):
    """``report.save`` writes the module's one rendering (rendering, ~1.5 s, is not what these tests test)."""
    real = type(report).to_html
    monkeypatch.setattr(type(report), "to_html", lambda self: html if self is report else real(self))


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else None


def _leftovers(parent, name):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def test_save_writes_both_files_and_replaces_a_previous_report(report, tmp_path):
    out = tmp_path / "deep" / "r"
    html, js = report.save(out)
    assert (html, js) == (out / "report.html", out / "report.json")
    assert sorted(p.name for p in out.iterdir()) == sorted(REPORT_FILES)
    assert json.loads(js.read_text())["meta"]["target"] == "y"
    (out / "report.json").write_text('{"stale": true}')  # a previous, different report
    report.save(out)
    assert json.loads((out / "report.json").read_text())["meta"]["target"] == "y"
    assert sorted(p.name for p in out.iterdir()) == sorted(REPORT_FILES)
    assert _leftovers(out.parent, "r") == []
    assert oct(out.stat().st_mode & 0o777) == oct(0o777 & ~_umask())  # not mkdtemp's 0o700


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


class Boom(RuntimeError):
    pass


def _fail_on_call(monkeypatch, target, name, k):
    """Make the k-th call (1-based) of ``target.name`` raise."""
    real = getattr(target, name)
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == k:
            raise Boom(f"injected failure in {name} call {k}")
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, wrapper)


@pytest.mark.parametrize("previous", [False, True], ids=["first-run", "over-a-previous-report"])
@pytest.mark.parametrize(
    "where",
    [
        ("open", "report.html"),  # before anything is written
        ("open", "report.json"),  # HTML written, JSON not
        ("fsync", 2),  # JSON written, not yet synced
        ("rename", 1),  # the first rename (old aside, or new in)
        ("rename", 2),  # over a previous report: new in fails after old moved aside
        ("rmtree", 1),  # cleanup of the old folder (the new report is complete)
    ],
    ids=lambda w: f"{w[0]}-{w[1]}",
)
def test_failure_mid_write_leaves_old_report_or_nothing(
    report, rendered_once, tmp_path, monkeypatch, previous, where
):
    out = tmp_path / "r"
    if previous:
        out.mkdir()
        (out / "report.html").write_text("<p>old</p>")
        (out / "report.json").write_text('{"old": true}')
    before = _snapshot(out)
    name, k = where
    if name == "open":
        real_open = builtins.open

        def failing_open(file, *args, **kwargs):
            if str(file).endswith(str(k)) and str(tmp_path) in str(file):
                raise Boom(f"injected failure opening {file}")
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", failing_open)
    elif name == "rmtree":
        _fail_on_call(monkeypatch, report_module.shutil, "rmtree", k)
    else:
        _fail_on_call(monkeypatch, report_module.os, name, k)
    try:
        report.save(out)
        completed = True
    except Boom:
        completed = False
    monkeypatch.undo()
    after = _snapshot(out)
    if completed or name == "rmtree":  # the new report was in place before the failure (if any)
        assert sorted(after) == sorted(REPORT_FILES)
        assert json.loads(after["report.json"])["meta"]["target"] == "y"
    else:
        assert after == before, "a failed save changed the report folder"
    if name != "rmtree":
        assert _leftovers(tmp_path, "r") == [], "a failed save left a temporary folder"


def test_out_dir_errors_name_the_argument_and_change_nothing(report, rendered_once, tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(ParameterError, match="not a folder") as err:
        report.save(f)
    assert err.value.argument == "out_dir" and f.read_text() == "x"
    with pytest.raises(ParameterError, match="cannot be written") as err:
        report.save(f / "r")  # a file in the path
    assert err.value.argument == "out_dir"
    user = tmp_path / "project"
    user.mkdir()
    (user / "data.csv").write_text("a,b\n")
    with pytest.raises(ParameterError, match=r"not a trustlab report \(data\.csv\)") as err:
        report.save(user)  # never delete the user's files
    assert sorted(p.name for p in user.iterdir()) == ["data.csv"]
    assert (user / "data.csv").read_text() == "a,b\n"
    with pytest.raises(ParameterError, match="empty"):
        report.save("")


def test_unwritable_parent_is_a_parameter_error(report, rendered_once, tmp_path, monkeypatch):
    """Permissions cannot be tested as root: the folder creation is made to fail as it would."""

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(report_module.Path, "mkdir", denied)
    with pytest.raises(ParameterError, match="Permission denied") as err:
        report.save(tmp_path / "r")
    assert err.value.argument == "out_dir"
    monkeypatch.undo()
    assert not (tmp_path / "r").exists()
