"""simulate_contamination: planted train-test overlap found at the planted rate (catalog 001-03)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.errors import TrustlabError
from trustlab.evaluation import simulate_contamination


@pytest.mark.claims
def test_planted_contamination_is_found_at_the_planted_rate_on_any_sizes() -> None:
    """The claim test's corpus (400 instances, 10 % verbatim, 10 % half-copied, n = 13): exact rates.

    Prefixes shorter than n cannot be seen by n-gram overlap: then only the verbatim share comes
    back. Random 13-grams over 5,000 words never repeat (chance bound 2e-42), so no false positive.
    """
    sim = simulate_contamination()
    assert sim.planted_rate == sim.predicted_rate == sim.detected_rate == pytest.approx(0.2)
    assert sim.missed == 0 and sim.false_positives == 0 and sim.chance_bound < 1e-40
    assert sim.predicted_prefix_fraction == pytest.approx(8 / 28) and sim.prefix_fraction_error == 0.0
    assert np.all(sim.report.overlap_fraction[sim.planted == 1] == 1.0)
    short = simulate_contamination(n_test=200, n_train=20, train_length=500, prefix_length=12, random_state=3)
    assert short.planted_rate == pytest.approx(0.2) and short.predicted_prefix_fraction == 0.0
    assert short.detected_rate == short.predicted_rate == pytest.approx(0.1) and short.false_positives == 0


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 6),
    extra=st.integers(0, 12),
    n_test=st.integers(1, 30),
    vocabulary=st.integers(2, 50),
    verbatim=st.floats(0, 0.5),
    prefix=st.floats(0, 0.5),
    cut=st.floats(0, 1),
    seed=st.integers(0, 2**16),
)
def test_every_planted_copy_is_flagged_with_at_least_its_predicted_fraction(
    n: int, extra: int, n_test: int, vocabulary: int, verbatim: float, prefix: float, cut: float, seed: int
) -> None:
    """Any sizes: nothing planted is missed, and chance overlap can only add to a prefix's fraction."""
    length = n + extra
    sim = simulate_contamination(
        n_test=n_test,
        test_length=length,
        n_train=3,
        train_length=20,
        vocabulary=vocabulary,
        verbatim_rate=verbatim,
        prefix_rate=prefix,
        prefix_length=max(1, round(cut * length)),
        n=n,
        random_state=seed,
    )
    assert sim.missed == 0
    assert np.all(sim.report.overlap_fraction[sim.planted == 1] == 1.0)
    assert np.all(sim.report.overlap_fraction[sim.planted == 2] >= sim.predicted_prefix_fraction - 1e-12)
    assert sim.detected_rate >= sim.predicted_rate - 1e-12
    assert 0.0 <= sim.chance_bound <= 1.0


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"n_test": 0}, "n_test"),
        ({"test_length": -1}, "test_length"),
        ({"n_train": 0}, "n_train"),
        ({"train_length": 0}, "train_length"),
        ({"vocabulary": 1}, "vocabulary"),
        ({"verbatim_rate": -0.1}, "verbatim_rate"),
        ({"prefix_rate": 1.5}, "prefix_rate"),
        ({"prefix_length": 0}, "prefix_length"),
        ({"n": 0}, "n"),
        ({"test_length": 5, "n": 13}, "test_length"),
        ({"prefix_length": 41}, "prefix_length"),
        ({"verbatim_rate": 0.6, "prefix_rate": 0.5}, "prefix_rate"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict, argument: str) -> None:
    with pytest.raises(TrustlabError) as info:
        simulate_contamination(**kwargs)
    assert info.value.argument == argument and argument in str(info.value)
