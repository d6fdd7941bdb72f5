"""Issue 26 section 2: huge inputs, the privacy stance of the Robustness table, and the figures."""

from __future__ import annotations

import re

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


def _fairness_result() -> dict:
    rates = {"selection_rate": [0.8, 0.82], "true_positive_rate": [0.85, 0.87]}
    rates |= {"false_positive_rate": [0.73, 0.74], "accuracy": [0.66, 0.67]}
    return {
        "groups": ["female", "male"],
        "evaluable": [True, True],
        "rates": rates,
        "rate_intervals": {m: [[v - 0.04, v + 0.04] for v in vals] for m, vals in rates.items()},
        "differences": {"demographic_parity_difference": 0.02, "equalized_odds_difference": 0.03},
        "difference_intervals": {
            "demographic_parity_difference": [0.0, 0.06],
            "equalized_odds_difference": [0.0, 0.1],
        },
    }


def test_fairness_panels_keep_group_colours_for_groups_and_legends_off_the_bars():
    from matplotlib.colors import to_hex

    from trustlab.audit.plots import LEGEND_FONTSIZE, PALETTE, new_grid
    from trustlab.audit.render._fairness import _draw

    fig, axes = new_grid(1, 2, width=10.0, height=3.3, width_ratios=[2.2, 1])
    ax, ax2 = axes[0]
    _draw(axes[0], "sex", _fairness_result(), 0.1)
    group_colours = {c.lower() for c in PALETTE}
    measure_colours = {to_hex(p.get_facecolor()) for p in ax2.patches}
    assert measure_colours and not measure_colours & group_colours  # a measure is not a group
    assert to_hex(ax.patches[0].get_facecolor()) == PALETTE[0].lower()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # a renderer to measure the laid-out legend and bars
    canvas.draw()
    renderer = canvas.get_renderer()
    legend = ax.get_legend()
    assert legend.get_texts()[0].get_fontsize() >= LEGEND_FONTSIZE
    box = legend.get_window_extent(renderer)
    for bar in ax.patches:  # the legend covers no bar
        assert not box.overlaps(bar.get_window_extent(renderer))


def test_coverage_figure_legible_in_greys_and_one_precision():
    from trustlab.audit.plots import PALETTE
    from trustlab.audit.render import _uncertainty as unc

    def method(c):
        return {"coverage": c, "coverage_low": c - 0.03, "coverage_high": c + 0.03}

    rows = [
        {"group": g, "evaluated": True, **{m: method(0.9) for m, _ in unc._METHODS}} for g in ("all", "a")
    ]
    svg = unc._figure(rows, 0.9, 0.85).lower()
    assert not any(c.lower() in svg for c in PALETTE)  # methods are not drawn in group colours
    sizes = re.findall(r"font-size: ([\d.]+)px[^>]*>(?:target 1|kandinsky)", svg)
    assert len(sizes) == 2 and min(map(float, sizes)) >= 9  # the legend
    cell = {"mean_set_size": 1.67, "set_size_low": 1.64, "set_size_high": 1.71}
    assert unc._cell({"k": cell}, "k", "size") == "1.670 [1.640, 1.710]"


def test_partial_dependence_panels_share_one_y_scale():
    from trustlab.audit.render._explain import _pd_figure

    curves = [
        {"feature": "a", "grid": [0, 1, 2], "pd": [0.1, 0.2, 0.3]},
        {"feature": "b", "grid": [0, 1, 2], "pd": [1.0, 1.5, 2.0]},
        {"feature": "c", "grid": [0, 1], "pd": [0.5, 0.6], "levels": ["x", "y"]},
    ]
    fig = _pd_figure(curves, "log-odds", set())
    limits = {ax.get_ylim() for ax in fig.axes}
    assert len(limits) == 1
    low, high = limits.pop()
    assert low <= 0.1 and high >= 2.0
