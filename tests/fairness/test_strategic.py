"""Feature markets induced by a classifier (Sommer et al., ICML 2025): prices, response, learning."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from trustlab.errors import DataError, NotFittedError, ParameterError, TrustlabError
from trustlab.fairness import _strategic_market as mk
from trustlab.fairness.strategic import (
    DEMO_SUPPLY,
    MarketAwareClassifier,
    fixed_cost_response,
    make_feature_market,
    market_equilibrium,
)


def test_hand_computed_revenue_market() -> None:
    # distances 1 and 0.5; budgets 0.4: reservation prices 0.4 and 0.8 per unit of distance.
    # revenue at 0.8: 0.8 * 0.5 = 0.4; at 0.4: 0.4 * 1.5 = 0.6 -> rho = 0.4, both buy.
    X = np.array([[-1.0, 0.0], [-0.5, 0.0], [1.0, 0.0]])
    r = market_equilibrium(X, [1.0, 0.0], 0.0, [0.4, 0.4, 0.0])
    assert r.unit_price == pytest.approx(0.4)
    assert r.moved.tolist() == [True, True, False] and r.accepted.all()
    assert r.demand == pytest.approx(1.5 / 3) and r.revenue == pytest.approx(0.6 / 3)
    np.testing.assert_allclose(r.X_response[:2], [[0.0, 0.0], [0.0, 0.0]], atol=1e-12)
    np.testing.assert_allclose(r.prices, [0.4, 0.0])  # p = rho * w / ||w||
    # budget 0.2 for the far user: 0.2 * 1.5 = 0.3 < 0.4 -> the sellers price it out
    r = market_equilibrium(X, [1.0, 0.0], 0.0, [0.2, 0.4, 0.0])
    assert r.unit_price == pytest.approx(0.8) and r.moved.tolist() == [False, True, False]
    # ties at the price all buy
    r = market_equilibrium(np.array([[-1.0], [-1.0], [-2.0]]), [1.0], 0.0, [1.0, 1.0, 2.0])
    assert r.unit_price == pytest.approx(1.0) and r.moved.all()
    # nobody rejected, or a zero classifier that rejects everyone: no sale
    assert np.isinf(market_equilibrium([[1.0]], [1.0], 0.0, [1.0]).unit_price)
    r = market_equilibrium([[1.0], [2.0]], [0.0], -1.0, [5.0, 5.0])
    assert np.isinf(r.unit_price) and not r.moved.any() and not r.accepted.any()


def test_revenue_price_maximises_revenue_over_every_price() -> None:
    X, _, B = make_feature_market(2000, random_state=3)
    w, b = np.array([0.8, 0.5]), -0.4
    r = market_equilibrium(X, w, b, B)
    u = mk.distances(X, w, b)
    np.testing.assert_allclose(u, np.maximum(-(X @ w + b), 0) / np.linalg.norm(w))

    def revenue(rho: float) -> float:
        return rho * float(np.sum(u[(u > 0) & (B >= rho * u)])) / u.size

    assert r.revenue == pytest.approx(revenue(r.unit_price))
    grid = np.r_[np.geomspace(1e-3, 1e4, 4000), B[u > 0] / u[u > 0]]
    assert max(revenue(p) for p in grid) <= r.revenue * (1 + 1e-12)
    # buyers are exactly those who can afford the crossing; they land on the boundary
    np.testing.assert_array_equal(r.moved, (u > 0) & (B >= r.unit_price * u))
    np.testing.assert_allclose((r.X_response @ w + b)[r.moved], 0.0, atol=1e-9)
    np.testing.assert_array_equal(r.X_response[~r.moved], X[~r.moved])
    # distances, hence prices and buyers, do not depend on the scale of (w, b)
    r3 = market_equilibrium(X, 3 * w, 3 * b, B)
    assert r3.unit_price == pytest.approx(r.unit_price) and (r3.moved == r.moved).all()


def test_smooth_price_tends_to_the_revenue_price_and_has_a_gradient() -> None:
    torch = pytest.importorskip("torch")
    from trustlab.fairness._strategic_learn import smooth_price

    X, _, B = make_feature_market(300, random_state=5)
    w, b = np.array([0.8, 0.5]), -0.2
    rho = market_equilibrium(X, w, b, B).unit_price
    wt = torch.tensor(w, requires_grad=True)
    s = torch.tensor(X) @ wt + b
    u = torch.clamp(-s / torch.linalg.vector_norm(wt), min=0.0)
    hard = smooth_price(torch, u, torch.tensor(B), 1e-4, 1e4)
    assert float(hard.detach()) == pytest.approx(rho, rel=1e-6)
    soft = smooth_price(torch, u, torch.tensor(B), 0.1, 2.0)
    (grad,) = torch.autograd.grad(soft, wt)
    assert np.isfinite(grad.numpy()).all() and np.abs(grad.numpy()).sum() > 0


def test_clearing_market_is_kept_as_an_alternative() -> None:
    # gaps 1 and 0.5, budgets 0.4: reservation prices 0.4 and 0.8; supply Q(lam) = lam.
    # D = 0.5 for lam <= 0.4 > Q(0.4) = 0.4, D = 1/6 above: clears at lam = 0.4 with user 0 rationed.
    X = np.array([[-1.0, 0.0], [-0.5, 0.0], [1.0, 0.0]])
    r = market_equilibrium(X, [1.0, 0.0], 0.0, [0.4, 0.4, 0.0], pricing="clearing", supply_slope=[1.0, 1.0])
    assert r.unit_price == pytest.approx(0.4, abs=1e-9)
    assert r.moved.tolist() == [False, True, False]
    assert r.demand == pytest.approx(0.5 / 3)
    X, _, B = make_feature_market(3000, random_state=3)
    w, b = np.array([0.6, 0.7]), -0.5
    r = market_equilibrium(X, w, b, B / 64, pricing="clearing", **DEMO_SUPPLY)
    lam = r.unit_price / np.linalg.norm(w)
    demand = mk._Demand(mk.gaps(X, w, b), B / 64)
    slope, cost = DEMO_SUPPLY["supply_slope"], DEMO_SUPPLY["marginal_cost"]
    assert mk.score_supply(lam, w, slope, cost) >= demand(lam * (1 + 1e-9))
    assert mk.score_supply(lam * (1 - 1e-6), w, slope, cost) < demand(lam * (1 - 1e-6))
    np.testing.assert_allclose(r.prices / w, lam)
    assert mk.score_supply(lam, w, np.zeros(2), cost) == 0.0


def test_fixed_cost_linear_and_quadratic() -> None:
    X = np.array([[-1.0, -1.0], [-0.2, 0.0], [1.0, 1.0]])
    w = np.array([1.0, 2.0])
    r = fixed_cost_response(X, w, 0.0, [1.0, 1.0, 1.0], unit_costs=[1.0, 1.0])
    # cheapest score: feature 1 at 1/2 per unit of score; user 0 lacks 3 (cost 1.5 > 1)
    assert r.unit_price == pytest.approx(0.5 * np.sqrt(5))  # per unit of distance
    assert r.moved.tolist() == [False, True, False]
    np.testing.assert_allclose(r.X_response[1], [-0.2, 0.1])
    q = fixed_cost_response(X, w, 0.0, [1.0, 1.0, 1.0], unit_costs=2.0, cost="quadratic")
    # quadratic: cost 2 * g^2 / ||w||^2; user 0: 2 * 9 / 5 = 3.6 > 1; user 1: 2 * 0.04 / 5 <= 1
    assert q.moved.tolist() == [False, True, False]
    np.testing.assert_allclose(q.X_response[1] @ w, 0.0, atol=1e-12)


@pytest.mark.claims
def test_claim_high_accuracy_needs_budget_inequality() -> None:
    """The paper's finding: with equal budgets nearly every rejected user buys (accuracy ~ 1/2).

    Naive classifier, 20,000 test users (standard error of an accuracy <= 0.0036).
    Measured: strategic accuracy 0.544 / 0.595 / 0.817 / 0.799 at inequality
    ``b_max / b_min`` = 1 / 4 / 64 / 1024 (clean accuracy 0.746); at equal budgets 0.9 of
    the rejected users buy.
    """
    X, y, B = make_feature_market(3000, random_state=1)
    clf = MarketAwareClassifier(anticipate="none").fit(X, y, B)
    acc = {}
    for ineq in (1.0, 4.0, 64.0, 1024.0):
        Xt, yt, Bt = make_feature_market(20000, inequality=ineq, random_state=2)
        acc[ineq] = clf.score_strategic(Xt, yt, Bt)
        if ineq == 1.0:
            rejected = clf.predict(Xt) == 0
            assert clf.respond(Xt, Bt).moved[rejected].mean() > 0.85
            clean = float(np.mean(clf.predict(Xt) == yt))
    assert acc[1.0] < 0.6 < clean - 0.1
    assert acc[1.0] < acc[4.0] < acc[64.0] - 0.1
    assert acc[1024.0] > 0.75


@pytest.mark.claims
def test_claim_strat_beats_naive_and_masc_lowers_its_market_loss() -> None:
    """Inequality 64, budgets correlated with the label (Adult-like), 1,500 train / 20,000 test.

    Measured: naive 0.819, Strat (naive weights, intercept line-searched at the
    naive-induced price) 0.856. MASC (10 epochs) lowers the market hinge it optimises,
    measured at the hard price its own weights induce on the training users, from 0.442
    (naive weights; price 21.5 per unit of distance) to 0.417 (price 26.2). The 0.02
    margin is > 10 standard errors of a paired difference on 20,000 users.
    """
    from trustlab.fairness._strategic_learn import hinge_at_price

    X, y, B = make_feature_market(1500, random_state=1)
    Xt, yt, Bt = make_feature_market(20000, random_state=2)
    naive = MarketAwareClassifier(anticipate="none").fit(X, y, B)
    strat = MarketAwareClassifier(anticipate="fixed").fit(X, y, B)
    assert strat.score_strategic(Xt, yt, Bt) > naive.score_strategic(Xt, yt, Bt) + 0.02
    masc = MarketAwareClassifier(max_iter=10).fit(X, y, B)

    def hard_loss(clf: MarketAwareClassifier) -> float:
        return hinge_at_price(X, y, B, clf.coef_, clf.intercept_, clf.train_price_) + 0.01 * float(
            clf.coef_ @ clf.coef_
        )

    assert hard_loss(masc) < hard_loss(naive) - 0.01


@pytest.mark.claims
@pytest.mark.slow
def test_claim_masc_beats_the_naive_learner_on_average() -> None:
    """MASC's gain over the naive learner, averaged over 3 mini-batch orders (30 epochs each).

    Measured (train seed 1): 0.818 / 0.827 / 0.838 vs naive 0.819 (mean gain +0.009);
    train seeds 3 and 4 (random_state 0): 0.850 and 0.851 vs 0.819 and 0.815. The paper
    reports MASC above Strat on Adult and Folktables; here it is not reliably
    (Strat 0.856 / 0.847 / 0.847 on train seeds 1 / 3 / 4; docs/fairness/strategic.md).
    """
    Xt, yt, Bt = make_feature_market(20000, random_state=2)
    gains = []
    for seed in (1, 3, 4):
        X, y, B = make_feature_market(1500, random_state=seed)
        naive = MarketAwareClassifier(anticipate="none").fit(X, y, B).score_strategic(Xt, yt, Bt)
        masc = MarketAwareClassifier(max_iter=30).fit(X, y, B).score_strategic(Xt, yt, Bt)
        gains.append(masc - naive)
    assert np.mean(gains) > 0.01
    assert min(gains) > -0.005


def test_estimator_errors_and_contract() -> None:
    X, y, B = make_feature_market(200, random_state=0)
    with pytest.raises(NotFittedError):
        MarketAwareClassifier().predict(X)
    with pytest.raises(ParameterError, match="sort_temperature"):
        MarketAwareClassifier(sort_temperature=0.0).fit(X, y, B)
    with pytest.raises(ParameterError, match="learning_rate"):
        MarketAwareClassifier(learning_rate=-1.0).fit(X, y, B)
    with pytest.raises(ParameterError, match="anticipate"):
        MarketAwareClassifier(anticipate="oracle").fit(X, y, B)
    with pytest.raises(ParameterError, match="fixed_price"):
        MarketAwareClassifier(anticipate="fixed", fixed_price=0.0).fit(X, y, B)
    with pytest.raises(DataError, match="budgets"):
        MarketAwareClassifier(max_iter=2).fit(X, y, B[:-1])
    with pytest.raises(DataError, match="y"):
        MarketAwareClassifier(max_iter=2).fit(X, np.zeros(200), B)
    fixed = MarketAwareClassifier(anticipate="fixed", fixed_price=2.0).fit(X, y, B)
    assert len(fixed.loss_curve_) == 100 and fixed.intercept_ in np.linspace(-3, 3, 100)
    clf = MarketAwareClassifier(max_iter=3, batch_size=64).fit(X, y, B)
    assert len(clf.loss_curve_) == 3 and np.isfinite(clf.loss_curve_).all()
    assert clf.predict(X).shape == (200,) and set(clf.get_params()) >= {"anticipate", "price_temperature"}
    with pytest.raises(DataError, match="columns"):
        clf.predict(X[:, :1])


@pytest.mark.parametrize(
    ("kwargs", "arg"),
    [
        ({"X": np.empty((0, 2))}, "X"),
        ({"X": [[np.nan, 1.0]]}, "X"),
        ({"coef": [1.0]}, "coef"),
        ({"budgets": [-1.0]}, "budgets"),
        ({"supply_slope": [0.0, 0.0], "pricing": "clearing"}, "supply_slope"),
        ({"supply_slope": -1.0}, "supply_slope"),
        ({"marginal_cost": [np.inf, 0.0], "pricing": "clearing"}, "marginal_cost"),
        ({"pricing": "auction"}, "pricing"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict, arg: str) -> None:
    base = {"X": [[0.0, 1.0]], "coef": [1.0, 1.0], "intercept": 0.0, "budgets": [1.0]}
    base.update(kwargs)
    if arg == "X" and len(np.asarray(base["X"])) == 0:
        base["budgets"] = []
    with pytest.raises(TrustlabError) as info:
        market_equilibrium(**base)
    assert info.value.argument == arg


floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=40, deadline=None)
@given(
    X=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=4), elements=floats),
    coef=hnp.arrays(np.float64, hnp.array_shapes(max_dims=1, max_side=4), elements=floats),
    budgets=hnp.arrays(np.float64, hnp.array_shapes(max_dims=1, max_side=4), elements=floats),
    slope=st.one_of(floats, hnp.arrays(np.float64, st.integers(0, 4), elements=floats)),
)
def test_fuzz_only_trustlab_errors(
    X: np.ndarray, coef: np.ndarray, budgets: np.ndarray, slope: object
) -> None:
    for func, kw in (
        (market_equilibrium, {}),
        (market_equilibrium, {"pricing": "clearing", "supply_slope": slope}),
        (fixed_cost_response, {"unit_costs": slope}),
    ):
        try:
            func(X, coef, 0.0, budgets, **kw)
        except TrustlabError:
            pass


@settings(max_examples=25, deadline=None)
@given(
    X=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, max_side=4), elements=floats),
    y=hnp.arrays(np.float64, hnp.array_shapes(max_dims=1, max_side=4), elements=floats),
    budgets=st.one_of(
        st.none(), hnp.arrays(np.float64, hnp.array_shapes(max_dims=1, max_side=4), elements=floats)
    ),
    n=st.one_of(st.integers(-3, 3), floats),
)
def test_fuzz_estimator_and_generator_only_trustlab_errors(X, y, budgets, n) -> None:
    for call in (
        lambda: MarketAwareClassifier(max_iter=2).fit(X, y, budgets),
        lambda: MarketAwareClassifier(anticipate="fixed").fit(X, y, budgets),
        lambda: make_feature_market(n, inequality=n, random_state=0),
    ):
        try:
            call()
        except TrustlabError:
            pass
