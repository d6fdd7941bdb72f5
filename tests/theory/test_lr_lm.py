"""LR schedules on a lab language model vs the fitted convex bound (Schaipp et al., ICML 2025; 000-12)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab import theory
from trustlab.errors import TrustlabError
from trustlab.theory import lm_schedule_study, schedule, schedule_bound
from trustlab.theory.lr_lm import bound_terms


def test_bound_terms_equal_schedule_bound_on_the_truncated_rates() -> None:
    s = schedule("wsd", 60)
    a, b = bound_terms(s, 0.2, [10, 60])
    for t, at, bt in zip((10, 60), a, b, strict=True):
        ref = schedule_bound(s[:t], 0.2, distance=1.5, gradient_bound=0.7)
        assert np.isclose(1.5**2 * at + 0.7**2 * bt, ref.value, rtol=1e-12)


def test_bound_terms_show_the_cooldown_drop() -> None:
    """The bound falls faster during WSD's cooldown than over the same steps at constant rate."""
    t = np.arange(2, 1001)
    wsd = np.add(*bound_terms(schedule("wsd", 1000), 0.05, t))
    const = np.add(*bound_terms(schedule("constant", 1000), 0.05, t))
    assert np.allclose(wsd[:790], const[:790])
    assert (wsd[798] - wsd[-1]) > 5 * (const[798] - const[-1])


def test_bad_input() -> None:
    for shape in ([1.0, -0.5, 1.0], [1.0, 0.5, 0.0]):  # negative or zero rate multipliers
        with pytest.raises(TrustlabError, match="shape must be positive") as info:
            bound_terms(shape, 0.1, [2])
        assert info.value.argument == "shape"
    with pytest.raises(TrustlabError, match="checkpoints"):
        bound_terms(schedule("cosine", 10), 0.1, [1, 5])
    with pytest.raises(TrustlabError, match="gamma"):
        bound_terms(schedule("cosine", 10), -0.1, [5])
    with pytest.raises(TrustlabError, match="schedules"):
        lm_schedule_study([0.01], schedules=("linear",), steps=10)
    with pytest.raises(TrustlabError, match="gammas"):
        lm_schedule_study([0.01, 0.0], steps=10)


@pytest.mark.claims
@pytest.mark.slow  # reason: 3 schedules x 4 rates x 2 seeds of a tiny lab Llama, 400 AdamW steps (~4 min)
def test_wsd_cooldown_drop_and_its_gain_over_constant_match_the_fitted_bound() -> None:
    """Measured (2 seeds, final held-out loss sd 0.004-0.015 nats): tuned loss wsd 3.048 < constant
    3.123 (bound 3.325 < 3.406); extra loss drop of wsd over constant during the last 20 %, at
    wsd's best rate: 0.075 (bound 0.100); the cooldown drop grows with the base rate in both
    (measured 0.17, 0.22, 0.24, 0.26; bound 0.07, 0.12, 0.22, 0.44). Not asserted, because it
    fails: cosine is measured worst (3.268) where the bound ranks it with wsd (3.319)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        st = lm_schedule_study([1.5e-3, 3e-3, 6e-3, 1.2e-2], steps=400, seeds=(0, 1))
    finally:
        torch.set_num_threads(threads)
    c, w = st.schedules.index("constant"), st.schedules.index("wsd")
    tol = 3 * float(np.nanmax(st.seed_sd))  # 3 seed standard deviations of a final loss
    # wsd beats constant at the tuned rate, by more than the seed noise, and the bound agrees
    assert st.tuned_loss[w] < st.tuned_loss[c] - tol
    assert st.tuned_bound[w] < st.tuned_bound[c]
    # the cooldown's extra drop (wsd minus constant over the last 20 %, same rate) is where the
    # fitted bound puts it: positive, within a factor 2 of the bound's
    gam = float(st.best_gamma[w])
    mw, pw = st.drop("wsd", 0.8, gam)
    mc, pc = st.drop("constant", 0.8, gam)
    assert mw - mc > tol and pw - pc > 0
    assert 0.5 < (mw - mc) / (pw - pc) < 2.0
    # a larger base rate gives a larger cooldown drop, measured and predicted
    drops = np.array([st.drop("wsd", 0.8, float(g)) for g in st.gammas])
    assert np.all(np.diff(drops[:, 0]) > 0) and np.all(np.diff(drops[:, 1]) > 0)


@pytest.mark.parametrize(
    ("argument", "call"),
    [
        ("steps", lambda v: theory.lm_schedule_study([1e-3], steps=v)),
        *[
            (name, lambda v, name=name: theory.lm_schedule_study([1e-3], steps=10, **{name: v}))
            for name in ("n_checkpoints", "d_model", "n_layers", "seq_len", "batch_size", "n_eval")
        ],
    ],
    ids=lambda c: c if isinstance(c, str) else "",
)
@settings(max_examples=3, deadline=None)
@given(bad=st.integers(max_value=0))
def test_non_positive_sizes_name_the_argument(argument: str, call, bad: int) -> None:
    """Issue 34: a non-positive dimension, step or sample count raises a TrustlabError naming it."""
    with pytest.raises(TrustlabError) as info:
        call(bad)
    assert info.value.argument == argument and argument in str(info.value)
