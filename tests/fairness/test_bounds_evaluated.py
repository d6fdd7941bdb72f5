"""Evaluated-CMI fairness bound (Theorem 5) and the random-cell constant (Theorem 4) (002-11)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.errors import TrustlabError
from trustlab.fairness.bounds import cmi_fairness_bound, fairness_loss, random_group_variance_proxy
from trustlab.fairness.bounds_evaluated import (
    evaluated_cmi_fairness_bound,
    prediction_cmi,
    prediction_discordance,
    random_cell_fairness_bound,
    random_cell_variance_proxy,
)

# Two pairs per EO cell (group, label): n = 8 pairs, 256 masks enumerated exactly.
_GROUPS = np.repeat([0, 0, 1, 1], 2)
_LABELS = np.tile(np.repeat([0, 1], 2), 2)
_MASKS = np.array(list(itertools.product((0, 1), repeat=8)))


def _losses(p: np.ndarray, criterion: str) -> np.ndarray:
    """Group-mean DP or EO loss of each row of ``p`` (shape ``(M, 8)``) on the fixed cells."""
    if criterion == "demographic_parity":
        return np.abs(p[:, _GROUPS == 0].mean(axis=1) - p[:, _GROUPS == 1].mean(axis=1))
    gap = [
        np.abs(p[:, (_GROUPS == 0) & (_LABELS == v)].mean(1) - p[:, (_GROUPS == 1) & (_LABELS == v)].mean(1))
        for v in (0, 1)
    ]
    return np.maximum(*gap)


@settings(max_examples=20, deadline=None)
@given(
    st.sampled_from(["demographic_parity", "equalized_odds"]),
    st.integers(1, 4),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_evaluated_cmi_bound_holds_exactly_for_any_learner(criterion, n_models, seed, memorise) -> None:
    # Theorem 5 for one supersample, every mask enumerated: a deterministic learner is any map
    # u -> F(u) (predictions on all 2n entries). Here F(u) is one of n_models fixed prediction
    # tables chosen at random for each u, or (memorise) 0 on every training entry and 1 on
    # the held-out entries of group 0 (train loss 0, held-out loss 1: maximal overfitting).
    # The exact conditional gap E_u[l(held out) - l(train)] must not exceed
    # sqrt(2 E[sigma^2] H(F)).
    rng = np.random.default_rng(seed)
    if memorise:
        g0 = (_GROUPS == 0)[None, :]
        preds = np.stack([g0 * (_MASKS == 1), g0 * (_MASKS == 0)], axis=2).astype(float)
    else:
        tables = rng.integers(0, 2, size=(n_models, 8, 2)).astype(float)
        preds = tables[rng.integers(0, n_models, size=len(_MASKS))]
    train = np.take_along_axis(preds, _MASKS[..., None], axis=2)[..., 0]
    held = np.take_along_axis(preds, 1 - _MASKS[..., None], axis=2)[..., 0]
    y = _LABELS if criterion == "equalized_odds" else None
    assert _losses(held[:1], criterion)[0] == pytest.approx(
        fairness_loss(held[0], sensitive_features=_GROUPS, y_true=y, criterion=criterion)
    )
    gap = float(np.mean(_losses(held, criterion) - _losses(train, criterion)))
    info = prediction_cmi(preds, np.zeros(len(_MASKS)), correction="none")
    cells = _GROUPS * 2 + _LABELS if criterion == "equalized_odds" else _GROUPS
    counts = np.bincount(cells)
    disc = prediction_discordance(preds, cells)
    bound = evaluated_cmi_fairness_bound(info, counts, discordance=disc)
    assert abs(gap) <= bound + 1e-12
    assert bound <= cmi_fairness_bound(info, counts) + 1e-12
    if memorise:
        assert gap == pytest.approx(1.0)  # the check has teeth: the largest possible gap
        assert bound < 2.5


def test_prediction_terms_formulas() -> None:
    f = np.array([[[1, 0], [0.5, 0.5], [0.2, 0.7]], [[0, 0], [1, 0], [0, 1]]])
    cells = ["a", "a", "b"]
    # run 0: 1/4 + 0 + 0.25/1; run 1: 0 + 1/4 + 1
    assert prediction_discordance(f, cells) == pytest.approx(((0.25 + 0.25) + (0.25 + 1.0)) / 2)
    assert prediction_cmi(f, [0, 0], correction="none") == pytest.approx(math.log(2))
    assert prediction_cmi(f[:1].repeat(3, axis=0), [0, 0, 0]) == 0.0
    assert evaluated_cmi_fairness_bound(1.0, [2, 1]) == pytest.approx(cmi_fairness_bound(1.0, [2, 1]))
    assert evaluated_cmi_fairness_bound(2.0, [2, 1], discordance=0.25) == pytest.approx(1.0)


def test_random_cell_constant_matches_groups_and_monte_carlo() -> None:
    assert random_cell_variance_proxy(60, [0.3, 0.7]) == pytest.approx(random_group_variance_proxy(60, 0.3))
    p = [0.07, 0.17, 0.25, 0.51]
    m = np.random.default_rng(1).multinomial(39, p, size=100_000)
    inv = np.sort(1 / (m + 3), axis=1)
    mc = 40 * (inv[:, -1] + inv[:, -2]) ** 2
    exact = random_cell_variance_proxy(40, p)
    assert abs(exact - mc.mean()) < 4 * mc.std() / math.sqrt(len(mc))
    assert random_cell_fairness_bound(
        1.0, n_samples=40, cell_shares=p, information_kind="cmi"
    ) == pytest.approx(2 * random_cell_fairness_bound(1.0, n_samples=40, cell_shares=p))


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: random_cell_variance_proxy(0, [0.5, 0.5]), "n_samples"),
        (lambda: random_cell_variance_proxy(10, [0.5, 0.6]), "cell_shares"),
        (lambda: random_cell_variance_proxy(10, [1.0]), "cell_shares"),
        (lambda: random_cell_variance_proxy(10, [0.5, 0.5], offset=0.5), "offset"),
        (lambda: random_cell_fairness_bound(-1.0, n_samples=10, cell_shares=[0.5, 0.5]), "information"),
        (lambda: prediction_discordance(np.zeros((2, 3)), [0, 0, 1]), "predictions"),
        (lambda: prediction_discordance(np.zeros((2, 3, 2)), [0, 1]), "pair_cells"),
        (lambda: prediction_discordance(np.full((1, 2, 2), 1.5), [0, 1]), "predictions"),
        (lambda: prediction_cmi(np.zeros((0, 3, 2)), []), "predictions"),
        (lambda: prediction_cmi(np.zeros((2, 3, 2)), [0]), "supersample_ids"),
        (lambda: evaluated_cmi_fairness_bound(1.0, [0, 2]), "cell_counts"),
        (lambda: evaluated_cmi_fairness_bound(1.0, [2, 2], discordance=5.0), "discordance"),
        (lambda: evaluated_cmi_fairness_bound(-0.1, [2, 2]), "cmi"),
    ],
)
def test_bad_input(call, argument) -> None:
    with pytest.raises(TrustlabError) as info:
        call()
    assert info.value.argument == argument
