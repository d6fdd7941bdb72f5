"""CAPA (Goel et al., ICML 2025), error consistency and the pairwise similarity matrix."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.evaluation import capa, capa_matrix, error_consistency

A = [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.4, 0.2, 0.2, 0.2]]
B = [[0.6, 0.3, 0.1], [0.5, 0.4, 0.1], [0.1, 0.1, 0.1, 0.7]]
Y = [0, 1, 3]


def test_worked_example_soft_components() -> None:
    out = capa(A, B, Y, return_components=True)
    assert out["c_obs"] == pytest.approx(0.3633333333, abs=1e-9)
    assert out["pbar_a"] == pytest.approx(0.5666666667, abs=1e-9)
    assert out["pbar_b"] == pytest.approx(0.5666666667, abs=1e-9)
    assert out["mean_inv_wrong"] == pytest.approx(4 / 9, abs=1e-12)
    assert out["c_exp"] == pytest.approx(0.4045679012, abs=1e-9)
    assert out["kappa"] == pytest.approx(-0.0692515032, abs=1e-9)


def test_worked_example_discrete_and_self() -> None:
    out = capa(A, B, Y, discrete=True, return_components=True)
    assert out["c_obs"] == pytest.approx(1 / 3)
    assert out["pbar_a"] == pytest.approx(2 / 3)
    assert out["c_exp"] == pytest.approx(0.4938271605, abs=1e-9)
    assert out["kappa"] == pytest.approx(-0.3170731707, abs=1e-9)
    assert capa(A, A, Y) == pytest.approx(0.1490773378, abs=1e-9)


def test_nan_padded_array_equals_ragged_list() -> None:
    pad = lambda rows: np.array([r + [np.nan] * (4 - len(r)) for r in rows])  # noqa: E731
    assert capa(pad(A), pad(B), Y) == pytest.approx(capa(A, B, Y), abs=1e-15)


def test_identical_one_hot_models_give_exactly_one() -> None:
    rng = np.random.default_rng(0)
    n, k = 500, 4
    y = rng.integers(0, k, n)
    pred = np.where(rng.random(n) < 0.7, y, rng.integers(0, k, n))
    onehot = np.eye(k)[pred]
    assert capa(onehot, onehot, y) == 1.0
    assert capa(onehot, onehot, y, discrete=True) == 1.0


def _independent_binary(acc1: float, acc2: float, n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    right1 = rng.random(n) < acc1
    right2 = rng.random(n) < acc2
    p1 = np.where(right1, y, 1 - y)
    p2 = np.where(right2, y, 1 - y)
    return y, np.eye(2)[p1], np.eye(2)[p2], p1, p2


@pytest.mark.claims
def test_independent_mistakes_give_capa_near_zero_while_cohen_kappa_rises() -> None:
    """Paper Figure 2: model 1 right on 90%, model 2 independent with accuracy 50%..90%."""
    n = 100_000
    kappas, cohens = [], []
    for i, acc2 in enumerate([0.5, 0.6, 0.7, 0.8, 0.9]):
        y, o1, o2, p1, p2 = _independent_binary(0.9, acc2, n, seed=i)
        kappas.append(capa(o1, o2, y))
        cohens.append(cohen_kappa_score(p1, p2))
    # independence: kappa_p estimates 0 with standard error < 1/sqrt(n) * 3 ~ 0.01
    assert max(abs(k) for k in kappas) < 0.02, kappas
    assert all(np.diff(cohens) > 0.05), cohens  # Cohen's kappa rises with accuracy alone
    assert cohens[-1] > 0.6


def test_binary_one_hot_discrete_capa_equals_error_consistency() -> None:
    rng = np.random.default_rng(3)
    y, o1, o2, _, _ = _independent_binary(0.8, 0.7, 2000, seed=3)
    same = rng.random(2000) < 0.5  # make them correlated
    o2[same] = o1[same]
    assert capa(o1, o2, y, discrete=True) == pytest.approx(error_consistency(o1, o2, y), abs=1e-12)
    assert capa(o1, o2, y) == pytest.approx(error_consistency(o1, o2, y), abs=1e-12)


def test_same_vs_different_wrong_options_separate_capa_from_error_consistency() -> None:
    """4 options, both wrong on the same items: EC = 1 either way; CAPA only for the same wrong option."""
    rng = np.random.default_rng(5)
    n, k = 4000, 4
    y = rng.integers(0, k, n)
    wrong = rng.random(n) < 0.4
    off = rng.integers(1, k, n)
    p1 = np.where(wrong, (y + off) % k, y)
    p2_same = p1
    p2_diff = np.where(wrong, (y + off % (k - 1) + 1) % k, y)  # a different wrong option
    assert np.all(p2_diff[wrong] != p1[wrong]) and np.all(p2_diff[wrong] != y[wrong])
    o1, o_same, o_diff = np.eye(k)[p1], np.eye(k)[p2_same], np.eye(k)[p2_diff]
    assert error_consistency(o1, o_same, y) == pytest.approx(1.0)
    assert error_consistency(o1, o_diff, y) == pytest.approx(1.0)
    assert capa(o1, o_same, y) == pytest.approx(1.0)
    k_diff = capa(o1, o_diff, y)
    # c_obs = 0.6 (agree only when right), pbar = 0.6, c_exp = .36 + .16/3
    assert k_diff == pytest.approx((0.6 - (0.36 + 0.16 / 3)) / (1 - (0.36 + 0.16 / 3)), abs=0.03)
    assert k_diff < 0.5


def test_anti_correlated_mistakes_are_negative() -> None:
    """Binary items, each model right on 50%: model 2 wrong exactly where model 1 is right."""
    rng = np.random.default_rng(7)
    n = 1000
    y = rng.integers(0, 2, n)
    right1 = rng.random(n) < 0.5
    p1 = np.where(right1, y, 1 - y)
    p2 = np.where(~right1, y, 1 - y)
    value = capa(np.eye(2)[p1], np.eye(2)[p2], y)
    # c_obs = 0, pbar's = mean(right1) and 1 - mean(right1): kappa = -c_exp/(1-c_exp)
    a = right1.mean()
    c_exp = 2 * a * (1 - a)
    assert value == pytest.approx(-c_exp / (1 - c_exp), abs=1e-12)
    assert value < -0.99


def test_matrix_matches_pairs_and_is_symmetric() -> None:
    rng = np.random.default_rng(11)
    n, k, m = 300, 5, 4
    y = rng.integers(0, k, n)
    probs = [rng.dirichlet(np.ones(k) * 0.5, n) for _ in range(m)]
    mat = capa_matrix(probs, y)
    assert mat.shape == (m, m)
    np.testing.assert_allclose(mat, mat.T, atol=0)
    for i in range(m):
        for j in range(m):
            assert mat[i, j] == pytest.approx(capa(probs[i], probs[j], y), abs=1e-12)
    dmat = capa_matrix(np.stack(probs), y, discrete=True)
    assert dmat[1, 2] == pytest.approx(capa(probs[1], probs[2], y, discrete=True), abs=1e-12)
    np.testing.assert_allclose(np.diag(dmat), 1.0)


def test_argmax_ties_go_to_the_lowest_index() -> None:
    a = [[0.5, 0.5], [0.5, 0.5]]
    b = [[1.0, 0.0], [1.0, 0.0]]
    assert capa(a, b, [0, 1], discrete=True, return_components=True)["c_obs"] == 1.0


def test_chance_agreement_one_returns_nan_with_warning() -> None:
    one = np.eye(3)[[0, 1, 2]]
    with pytest.warns(RuntimeWarning, match="undefined"):
        assert math.isnan(capa(one, one, [0, 1, 2]))


def test_against_lm_sim_reference_if_installed() -> None:
    metrics = pytest.importorskip("lmsim.metrics")
    rng = np.random.default_rng(2)
    for k in (2, 3, 5):
        a, b = rng.dirichlet(np.ones(k), 200), rng.dirichlet(np.ones(k), 200)
        y = rng.integers(0, k, 200)
        assert capa(a, b, y) == pytest.approx(metrics.CAPA().compute_k(list(a), list(b), y), abs=1e-12)
        assert error_consistency(a, b, y) == pytest.approx(
            metrics.EC().compute_k(list(a), list(b), y), abs=1e-12
        )


@pytest.mark.parametrize(
    ("a", "y", "argument", "match"),
    [
        ([[0.6, 0.6], [0.5, 0.5]], [0, 1], "probs_a", "sum to 1.2"),
        ([[1.2, -0.2], [0.5, 0.5]], [0, 1], "probs_a", "negative"),
        ([[1.0], [1.0]], [0, 0], "probs_a", "at least 2 options"),
        ([[0.5, 0.5], [0.5, 0.5]], [0, 2], "y_true", "not an option index"),
        ([[0.5, 0.5], [0.5, 0.5]], [0.5, 1], "y_true", "integer"),
        ("abc", [0], "probs_a", "array"),
    ],
)
def test_bad_input_names_the_argument(a: object, y: object, argument: str, match: str) -> None:
    b = [[0.5, 0.5], [0.5, 0.5]]
    with pytest.raises(DataError, match=match) as info:
        capa(a, b, y)
    assert info.value.argument == argument


def test_mismatched_models_and_flags() -> None:
    with pytest.raises(DataError, match="same items") as info:
        capa([[0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]], [0])
    assert info.value.argument == "probs_b"
    with pytest.raises(DataError, match="options"):
        capa([[0.5, 0.5]], [[0.2, 0.4, 0.4]], [0])
    with pytest.raises(ParameterError) as p:
        capa(A, B, Y, discrete="yes")  # type: ignore[arg-type]
    assert p.value.argument == "discrete"
    with pytest.raises(DataError):
        capa_matrix([], [0])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 30),
    k=st.integers(2, 6),
    conc=st.floats(0.05, 5.0),
    seed=st.integers(0, 2**31 - 1),
    discrete=st.booleans(),
)
def test_fuzz_range_and_symmetry(n: int, k: int, conc: float, seed: int, discrete: bool) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.dirichlet(np.ones(k) * conc, n), rng.dirichlet(np.ones(k) * conc, n)
    y = rng.integers(0, k, n)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ab = capa(a, b, y, discrete=discrete)
        ba = capa(b, a, y, discrete=discrete)
    if math.isnan(ab):
        assert math.isnan(ba)
    else:
        assert -1 - 1e-12 <= ab <= 1 + 1e-12
        assert ab == pytest.approx(ba, abs=1e-12)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    rows=st.lists(
        st.lists(
            st.one_of(st.floats(-2, 2), st.just(float("nan")), st.just(0.5), st.just(1.0)),
            min_size=0,
            max_size=4,
        ),
        min_size=0,
        max_size=4,
    )
)
def test_fuzz_hostile_rows_raise_trustlab_errors_only(rows: list[list[float]]) -> None:
    try:
        capa(rows, rows, [0] * len(rows))
    except TrustlabError:
        pass
