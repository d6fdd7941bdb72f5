"""What would make a not-evaluable check evaluable (issue 26 §2, private mode): the hints' figures.

The tables here are built by hand (no audit runs): a group's released positives and
negatives against the noise floor (10 noise standard deviations), and the epsilon factor
and single-column alternative the hint names.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from trustlab.audit._hints import _floor, group_hint, rows_hint
from trustlab.audit.prediction_table import (
    MIN_GROUP,
    N_SCORE_BINS,
    PredictionTable,
    discrete_laplace_sd,
)


def _table(sizes: dict[str, tuple[int, int]], scale: float | None, other_levels: int = 1) -> PredictionTable:
    """Groups of one attribute ``g`` (``level: (negatives, positives)``), crossed with ``h`` of
    ``other_levels`` levels; every count in the first cell of ``h``, score bin 5."""
    levels = tuple(sizes)
    counts = np.zeros((len(levels) * other_levels, N_SCORE_BINS, 2))
    for i, (neg, pos) in enumerate(sizes.values()):
        counts[i * other_levels, 5] = [neg, pos]
    attrs = ("g",) if other_levels == 1 else ("g", "h")
    lv = (levels,) if other_levels == 1 else (levels, tuple(f"h{j}" for j in range(other_levels)))
    return PredictionTable(attrs, lv, counts, counts if scale else None, scale, counts[None])


def test_raw_hint_names_the_group_and_the_rows_it_needs():
    tab = _table({"a": (500, 500), "b": (200, 200), "c": (12, 4)}, None)
    assert group_hint(tab, "g") == ""  # a and b compare
    tab = _table({"a": (500, 500), "b": (8, 2), "c": (4, 4)}, None)
    # b's smaller class is 2 (share 0.2): 10 positives need about 50 rows; c (4 of each) is the larger
    hint = group_hint(tab, "g")
    assert (
        hint
        == "evaluable with more held-out rows of c: about 30 (now 8), to hold 10 positives and 10 negatives"
    )
    assert "--epsilon" not in hint
    assert rows_hint(3, MIN_GROUP) == "at least 30 held-out rows (now 3): more data or a larger --test-size"


def test_one_outcome_group_needs_rows_of_both_outcomes():
    tab = _table({"a": (500, 500), "b": (60, 0)}, None)
    assert "with both outcomes (now 0 positive, 60 negative)" in group_hint(tab, "g")


@pytest.mark.parametrize("scale", [8.0, 12.0, 40.0])
def test_epsilon_factor_is_the_smallest_that_clears_the_noise_floor(scale):
    """The factor named decides the group (its floor at that epsilon is at most its smaller class),
    and 5% less would not (2 significant digits, rounded up)."""
    tab = _table({"a": (20_000, 20_000), "b": (900, 300)}, scale)
    need = tab.min_class("g")
    assert need > 300  # b is too small at this epsilon
    hint = group_hint(tab, "g")
    factor = float(hint.split("an --epsilon ")[1].split(" times")[0])
    unit = math.sqrt(N_SCORE_BINS)
    assert _floor(unit, scale, factor) <= 300 < _floor(unit, scale, factor * 0.95)
    assert tab.class_noise_sd("g") == pytest.approx(unit * discrete_laplace_sd(scale))


def test_single_column_alternative_when_fewer_cells_would_do():
    """With two sensitive columns a group's count sums 3 x 20 noisy cells; alone, 20: its floor drops
    by sqrt(3). A group between the two floors is told to audit its column alone."""
    scale = 12.0
    tab = _table({"a": (20_000, 20_000), "b": (1000, 1000)}, scale, other_levels=3)
    alone = _floor(math.sqrt(N_SCORE_BINS), scale, 1.0)
    assert alone <= 1000 < tab.min_class("g")
    hint = group_hint(tab, "g")
    assert (
        f"--sensitive g alone (fewer noisy cells: it then needs {alone:,.0f} positives and negatives)" in hint
    )
    assert hint.index("--epsilon") < hint.index("--sensitive g alone") < hint.index("more held-out rows of b")


def test_no_epsilon_helps_a_group_below_the_sampling_floor():
    tab = _table({"a": (20_000, 20_000), "b": (9, 12)}, 12.0)
    hint = group_hint(tab, "g")
    assert "--epsilon" not in hint and "more held-out rows of b" in hint
