"""Tests of trustlab.privacy.training (DP-SGD): accounting, empirical audit, accuracy, bad input."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab.errors import BudgetExceededError, DataError, MissingDependencyError, ParameterError  # noqa: E402
from trustlab.privacy import _training_core as core  # noqa: E402
from trustlab.privacy.accounting import Accountant  # noqa: E402
from trustlab.privacy.amplification import BISAccountant, PoissonAccountant  # noqa: E402
from trustlab.privacy.audit import audit_epsilon  # noqa: E402
from trustlab.privacy.signsgd import SignMechanismAccountant  # noqa: E402
from trustlab.privacy.training import GUARANTEE_COVERS, DPSGDClassifier  # noqa: E402


@pytest.fixture(scope="module")
def toy() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (600, 3))
    y = (X[:, 0] - 0.5 * X[:, 1] > 0).astype(int)
    return X, y


# -- claim 1: the spent epsilon is the accountant's figure, charged as one ledger line ------------
def test_release_equals_poisson_accountant_and_one_ledger_line(toy):
    X, y = toy
    acc = Accountant(3.0, 1e-5)
    clf = DPSGDClassifier(1.0, 1e-6, sample_rate=0.05, epochs=3, accountant=acc, n_hint=600).fit(X, y)
    assert clf.steps_ == 60
    p = clf.release_.parameters
    # priced by dp-accounting's PLD at the accounted multiplier (noise over the grid's sensitivity)
    z, dlt = p["accounted_noise_multiplier"], 1e-6 - p["grid_delta"]
    assert p["accountant"] == "pld" and z < clf.noise_multiplier_ < z * (1 + 1e-5)
    assert clf.release_.epsilon == pytest.approx(_pld(z, 60, 0.05, dlt), rel=1e-12)
    assert (
        clf.release_.epsilon
        < p["rdp_epsilon"]
        == pytest.approx(PoissonAccountant(z, 60, 0.05).get_epsilon(dlt), rel=1e-12)
    )
    assert 0.99 <= clf.release_.epsilon <= 1.0  # calibrated to a relative 1e-3 of the target
    assert len(acc.ledger()) == 1
    assert acc.spent_epsilon == pytest.approx(clf.release_.epsilon, rel=1e-12)
    assert acc.spent_delta == pytest.approx(1e-6)
    p = clf.release_.parameters
    for key in ("sample_rate", "steps", "noise_multiplier", "clip_norm", "covers", "divisor"):
        assert key in p
    assert p["covers"] == GUARANTEE_COVERS
    assert p["steps"] == 60 and p["divisor"] == pytest.approx(30.0)
    # the calibrated multiplier is the smallest (to 1e-3) that meets the target
    assert _pld(z / 1.002, 60, 0.05, dlt) > 1.0


def test_wider_pld_interval_at_small_noise_stays_an_upper_bound_within_1e_5():
    # the interval widens like 1 / sigma**2 below sigma 0.5 (time bounded); pessimistic rounding
    # keeps the figure above the fine one, and at sigma 0.3 (epsilon ~30) it moves by < 1e-5
    from dp_accounting import dp_event
    from dp_accounting.pld import PLDAccountant

    from trustlab.privacy._training_calibration import PLD_INTERVAL, pld_interval

    assert pld_interval(1.0) == pld_interval(0.5) == PLD_INTERVAL
    assert pld_interval(0.25) == pytest.approx(4 * PLD_INTERVAL)
    fine = PLDAccountant(value_discretization_interval=PLD_INTERVAL)
    fine.compose(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(0.3)), 30)
    coarse = _pld(0.3, 30, 0.01, 1e-6)
    assert fine.get_epsilon(1e-6) <= coarse <= fine.get_epsilon(1e-6) * (1 + 1e-5)


def _pld(z: float, steps: int, q: float, delta: float) -> float:
    from dp_accounting import dp_event
    from dp_accounting.pld import PLDAccountant

    from trustlab.privacy._training_calibration import pld_interval

    acc = PLDAccountant(value_discretization_interval=pld_interval(z))
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps)
    return float(acc.get_epsilon(delta))


# both accountants priced again (~9 s CPU); test_release_equals_poisson_accountant_and_one_ledger_line stays
# fast
@pytest.mark.slow
def test_balanced_and_signsgd_are_priced_by_their_accountants(toy):
    X, y = toy
    bis = DPSGDClassifier(1.0, 1e-6, sample_rate=0.1, epochs=2, sampling="balanced", n_hint=600).fit(X, y)
    p = bis.release_.parameters
    assert p["accountant"] == "rdp"  # the stated fallback: no PLD accountant for this scheme
    assert bis.release_.epsilon == pytest.approx(
        BISAccountant(20, 2, p["accounted_noise_multiplier"]).get_epsilon(1e-6 - p["grid_delta"]), rel=1e-12
    )
    sign = DPSGDClassifier(2.0, 1e-6, sample_rate=0.1, epochs=2, optimizer="signsgd").fit(X, y)
    expected = SignMechanismAccountant("gaussian", sign.noise_multiplier_, 0.1).get_epsilon(1e-6, 20)
    assert sign.release_.epsilon == pytest.approx(expected, rel=1e-12) and expected <= 2.0
    with pytest.raises(ParameterError) as err:
        DPSGDClassifier(1.0, 1e-6, optimizer="signsgd", sampling="balanced").fit(X, y)
    assert err.value.argument == "sampling"


def test_given_noise_multiplier_is_used_and_must_meet_epsilon(toy):
    X, y = toy
    clf = DPSGDClassifier(5.0, 1e-5, sample_rate=0.1, epochs=1, noise_multiplier=2.0).fit(X, y)
    assert clf.noise_multiplier_ == 2.0
    p = clf.release_.parameters
    assert clf.release_.epsilon == pytest.approx(
        _pld(p["accounted_noise_multiplier"], 10, 0.1, 1e-5 - p["grid_delta"]), rel=1e-12
    )
    with pytest.raises(ParameterError) as err:
        DPSGDClassifier(0.1, 1e-5, sample_rate=0.1, epochs=1, noise_multiplier=0.5).fit(X, y)
    assert err.value.argument == "noise_multiplier"


def test_budget_checked_before_any_noise(toy, monkeypatch):
    X, y = toy
    draws = []
    real = core.add_grid_noise
    monkeypatch.setattr(core, "add_grid_noise", lambda *a: draws.append(1) or real(*a))
    acc = Accountant(0.5, 1e-5)
    clf = DPSGDClassifier(1.0, 1e-6, sample_rate=0.1, epochs=1, accountant=acc)
    with pytest.raises(BudgetExceededError):
        clf.fit(X, y)
    assert draws == [] and acc.ledger() == [] and not hasattr(clf, "release_")


# -- claim 2: empirical privacy audit (worst-case neighbour: a canary at the clip norm) ----------
def _audit(epsilon_claim: float, sigma: float, n_trials: int):
    # D: two rows at x = 0 whose bias gradients cancel; D': D plus a canary whose clipped gradient
    # has norm exactly clip_norm. One full-batch step: the Gaussian mechanism with sensitivity C.
    D = (np.zeros((2, 2)), np.array([0, 1]))
    Dp = (np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]), np.array([0, 1, 0]))

    def mechanism(data):
        clf = DPSGDClassifier(
            epsilon_claim,
            1e-5,
            sample_rate=1.0,
            epochs=1,
            clip_norm=0.5,
            noise_multiplier=sigma,
            learning_rate=1.0,
            n_hint=1,
        ).fit(*data)
        return -(clf.coef_[0, 0] + clf.intercept_[0])  # projection on the canary's gradient

    return audit_epsilon(mechanism, D, Dp, n_trials=n_trials, delta=1e-5, alpha=0.05)


def test_empirical_audit_below_claim_and_catches_weak_noise(monkeypatch):
    sigma = 3.0
    claim = PoissonAccountant(sigma, 1, 1.0).get_epsilon(1e-5)
    assert 1.0 < claim < 2.0
    # 600 trials: the weak-noise mutant measured 3.47 (2.57 at 300, 4.23 at 2000) against the
    # claim 1.39; the honest run 0.36
    honest = _audit(claim, sigma, 600)
    assert honest.epsilon_lower <= claim
    real = core.add_grid_noise
    monkeypatch.setattr(core, "add_grid_noise", lambda units, scale: real(units, scale / 10))
    mutant = _audit(claim, sigma, 600)
    assert mutant.epsilon_lower > claim


# -- per-example gradients against torch.func ---------------------------------------------------
@pytest.mark.parametrize("model", ["logistic", "mlp"])
def test_per_example_gradients_and_clipping_match_torch_func(model):
    from torch.func import functional_call, grad, vmap  # noqa: F401

    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.uniform(-1, 1, (7, 4)), dtype=torch.float64)
    y = torch.as_tensor(rng.integers(0, 2, 7), dtype=torch.float64)
    params = core.init_params(model, 4, 5, rng, torch.float64)
    params = [p + 0.3 * torch.as_tensor(rng.normal(size=tuple(p.shape))) for p in params]

    def loss(ps, x, t):
        z = core.logits(model, list(ps), x[None])[0]
        return torch.nn.functional.binary_cross_entropy_with_logits(z, t)

    ref = vmap(grad(loss), in_dims=(None, 0, 0))(tuple(params), X, y)
    mine = core.per_example_grads(model, params, X, y)
    for a, b in zip(mine, ref, strict=True):
        torch.testing.assert_close(a, b)
    C = 0.3
    norms = torch.sqrt(sum((g.reshape(7, -1) ** 2).sum(1) for g in ref))
    f = torch.clamp(C / norms, max=1.0)
    for a, g in zip(core.clipped_sum(model, params, X, y, C), ref, strict=True):
        torch.testing.assert_close(a, (g * f.reshape(-1, *[1] * (g.dim() - 1))).sum(0))


# -- behaviour ---------------------------------------------------------------------------------
def test_single_class_labels_allowed(toy):
    X, _ = toy
    clf = DPSGDClassifier(1.0, 1e-6, sample_rate=0.1, epochs=3, n_hint=600).fit(X, np.ones(600, dtype=int))
    assert clf.classes_.tolist() == [0, 1]
    assert clf.predict_proba(X).shape == (600, 2)
    assert float(clf.predict_proba(X)[:, 1].mean()) > 0.5


def test_mlp_learns_and_threads_restored(toy):
    X, y = toy
    before = torch.get_num_threads()
    clf = DPSGDClassifier(
        8.0, 1e-6, model="mlp", hidden=8, sample_rate=0.1, epochs=5, n_hint=600, random_state=0
    ).fit(X, y)
    assert torch.get_num_threads() == before
    assert [p.shape for p in clf.params_] == [(8, 3), (8,), (8,), ()]
    assert clf.score(X, y) > 0.75
    assert np.allclose(clf.predict_proba(X).sum(1), 1.0)


def test_fits_differ_seed_drives_only_init(toy):
    X, y = toy
    a = DPSGDClassifier(1.0, 1e-6, sample_rate=0.1, epochs=1, random_state=0).fit(X, y)
    b = DPSGDClassifier(1.0, 1e-6, sample_rate=0.1, epochs=1, random_state=0).fit(X, y)
    assert not np.array_equal(a.coef_, b.coef_)
    assert DPSGDClassifier().__sklearn_tags__().non_deterministic


# -- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"sample_rate": 0.0}, "sample_rate"),
        ({"sample_rate": 1.5}, "sample_rate"),
        ({"epochs": 0}, "epochs"),
        ({"clip_norm": 0.0}, "clip_norm"),
        ({"clip_norm": -1.0}, "clip_norm"),
        ({"model": "forest"}, "model"),
        ({"optimizer": "adam"}, "optimizer"),
        ({"sampling": "shuffle"}, "sampling"),
        ({"noise_multiplier": 0.0}, "noise_multiplier"),
        ({"n_hint": 0}, "n_hint"),
        ({"accountant": "ledger"}, "accountant"),
    ],
)
def test_bad_parameters(toy, kwargs, argument):
    X, y = toy
    with pytest.raises(ParameterError) as err:
        DPSGDClassifier(**{"epsilon": 1.0, "delta": 1e-6, **kwargs}).fit(X, y)
    assert err.value.argument == argument


def test_epsilon_unreachable_is_a_parameter_error(toy):
    X, y = toy
    with pytest.raises(ParameterError) as err:
        DPSGDClassifier(1e-9, 1e-6, sample_rate=1.0, epochs=1000).fit(X, y)
    assert err.value.argument == "epsilon"


@pytest.mark.parametrize(
    ("X", "y", "argument"),
    [
        (np.array([[0.5, 2.0]]), np.array([1]), "X"),  # outside [-1, 1]: never clipped silently
        (np.array([[0.5, np.nan]]), np.array([1]), "X"),
        (np.array([[0.5, np.inf]]), np.array([1]), "X"),
        (np.array([0.5, 0.1]), np.array([1, 0]), "X"),
        (np.zeros((2, 2)), np.array([0, 2]), "y"),
        (np.zeros((2, 2)), np.array([0]), "y"),
        (np.zeros((2, 2)), np.array([0, np.nan]), "y"),
        ("text", np.array([0]), "X"),
        (np.array([[0.5 + 0.1j, 0.0]]), np.array([1]), "X"),
    ],
)
def test_bad_data(X, y, argument):
    with pytest.raises(DataError) as err:
        DPSGDClassifier(1.0, 1e-6, epochs=1, sample_rate=0.5).fit(X, y)
    assert err.value.argument == argument


def test_predict_checks(toy):
    X, y = toy
    with pytest.raises(Exception, match="not fitted"):
        DPSGDClassifier().predict(X)
    clf = DPSGDClassifier(1.0, 1e-6, sample_rate=0.5, epochs=1).fit(X, y)
    with pytest.raises(DataError):
        clf.predict(X[:, :2])


def test_torch_optional():
    code = "import sys, trustlab.privacy, trustlab.privacy.training; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_torch_names_the_extra(toy, monkeypatch):
    X, y = toy
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingDependencyError, match=r"trustlab\[torch\]"):
        DPSGDClassifier(1.0, 1e-6, epochs=1, sample_rate=0.5).fit(X, y)


# -- claim 3: accuracy on the embedded Benefits data ------------------------------------------------
def _benefits():
    from sklearn.model_selection import train_test_split

    from trustlab.datasets import load_default

    df, info, schema = load_default()
    cols = []
    for name, spec in schema.columns.items():  # public schema only: categories and bounds
        if name == info.target:
            continue
        if spec.categories is not None:
            cols += [(df[name].astype(str) == str(c)).to_numpy(float) * 2 - 1 for c in spec.categories]
        elif spec.bounds is not None:
            lo, hi = spec.bounds
            cols.append(np.clip((df[name].to_numpy(float) - lo) / (hi - lo), 0, 1) * 2 - 1)
    X = np.column_stack(cols)
    y = (df[info.target].astype(str) == str(info.positive)).to_numpy(int)
    return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)


def test_benefits_model_at_epsilon_one_is_no_worse_than_the_majority_class():
    """The audit's private model on the embedded data. Benefits' features barely predict `ui`
    (non-private logistic regression 0.694 vs the majority class 0.684 on these 1,464 test rows),
    so this only checks that DP-SGD does no harm there; the utility claim is the next test."""
    Xtr, Xte, ytr, yte = _benefits()
    majority = max(yte.mean(), 1 - yte.mean())
    acc = DPSGDClassifier(1.0, 1e-6, n_hint=len(ytr)).fit(Xtr, ytr).score(Xte, yte)
    # tolerance: 2.5 binomial standard errors of a held-out accuracy on len(yte) rows
    tol = 2.5 * math.sqrt(majority * (1 - majority) / len(yte))
    assert acc >= majority - tol, (acc, majority, tol)


@pytest.mark.claims
def test_dp_sgd_at_epsilon_one_nearly_matches_non_private_on_a_linear_task():
    """Where the features carry the label (a noisy linear rule, 3,000 training rows, 8 features
    in [-1, 1]), DP-SGD at epsilon = 1 keeps the non-private accuracy: measured 0.934-0.943 over
    five fits against logistic regression's 0.941 (majority class 0.528)."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (4000, 8))
    y = (X @ rng.normal(size=8) + 0.3 * rng.normal(size=4000) > 0).astype(int)
    Xtr, Xte, ytr, yte = X[:3000], X[3000:], y[:3000], y[3000:]
    clean = LogisticRegression().fit(Xtr, ytr).score(Xte, yte)
    accs = [DPSGDClassifier(1.0, 1e-6, n_hint=len(ytr)).fit(Xtr, ytr).score(Xte, yte) for _ in range(3)]
    # tolerance: 3 standard errors of the difference of two held-out accuracies on 1,000 rows
    tol = 3 * math.sqrt(2 * clean * (1 - clean) / len(yte))
    assert np.mean(accs) >= clean - tol, (accs, clean, tol)
    assert np.mean(accs) >= max(yte.mean(), 1 - yte.mean()) + 0.3


# -- structure: noise every step, whatever the data; the balanced schedule -----------------------
@pytest.mark.parametrize("model", ["logistic", "mlp"])
def test_noise_drawn_every_step_independent_of_data(model, monkeypatch):
    counts = []
    real = core.add_grid_noise

    def counting(*args):
        counts[-1] += 1
        return real(*args)

    monkeypatch.setattr(core, "add_grid_noise", counting)
    rng = np.random.default_rng(2)
    for n, labels in ((3, np.zeros(3, int)), (400, rng.integers(0, 2, 400))):
        counts.append(0)
        X = rng.uniform(-1, 1, (n, 2))
        DPSGDClassifier(1.0, 1e-6, model=model, hidden=4, sample_rate=0.25, epochs=2).fit(X, labels)
    assert counts == [8, 8]  # one exact draw for all parameters, every step


def test_balanced_schedule_uses_every_row_exactly_epochs_times():
    from trustlab.privacy.training import _balanced_schedule

    rows, cols = _balanced_schedule(1001, 40, 3)
    assert np.bincount(rows, minlength=1001).tolist() == [3] * 1001
    assert cols.min() >= 0 and cols.max() < 40
    assert len(set(zip(rows.tolist(), cols.tolist(), strict=True))) == 3003  # distinct steps per row
    batches = list(core.batches((rows, cols), 1001, 40, 0.075, core.secure_generator()))
    assert len(batches) == 40 and sum(len(b) for b in batches) == 3003


@pytest.mark.slow  # signSGD's learning is claimed in test_signsgd.py; this end-to-end fit ~4 s CPU
def test_signsgd_learns(toy):
    X, y = toy
    clf = DPSGDClassifier(8.0, 1e-6, optimizer="signsgd", sample_rate=0.1, epochs=10, learning_rate=0.02)
    assert clf.fit(X, y).score(X, y) > 0.8
    assert "epsilon_post_processing" in clf.release_.parameters


# -- slow: the audit with Poisson subsampling over several steps -------------------------------------
@pytest.mark.slow
def test_poisson_audit_below_claim_and_catches_unsampled_canary(monkeypatch):
    # ten steps at q = 0.1, z = 2: claimed epsilon 0.94; without the sampling the canary shifts the
    # summed statistic by 1.58 noise standard deviations (a log-likelihood ratio near 2.7 at a threshold)
    sigma, q = 2.0, 0.1
    claim = PoissonAccountant(sigma, 10, q).get_epsilon(1e-5)
    assert 0.9 < claim < 1.0
    D = (np.zeros((2, 2)), np.array([0, 1]))
    Dp = (np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]), np.array([0, 1, 0]))

    def mechanism(data):
        clf = DPSGDClassifier(
            claim,
            1e-5,
            sample_rate=q,
            epochs=1,
            clip_norm=0.5,
            noise_multiplier=sigma,
            learning_rate=1e-3,
            n_hint=1,
        ).fit(*data)
        return -(clf.coef_[0, 0] + clf.intercept_[0])

    honest = audit_epsilon(mechanism, D, Dp, n_trials=4000, delta=1e-5)
    assert honest.epsilon_lower <= claim
    # mutant: every row in every batch, but still accounted as Poisson at q (amplification not earned)
    real = core.batches
    monkeypatch.setattr(core, "batches", lambda s, n, steps, rate, gen: real(s, n, steps, 1.0, gen))
    mutant = audit_epsilon(mechanism, D, Dp, n_trials=4000, delta=1e-5)
    assert mutant.epsilon_lower > claim, (mutant.epsilon_lower, claim)


def test_nonfinite_per_example_gradient_counts_as_absent_row():
    params = [torch.tensor([float("inf"), 0.0]), torch.tensor(0.0)]
    X = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    y = torch.tensor([0.0, 1.0])
    sums = core.clipped_sum("logistic", params, X, y, 1.0)
    # row 1's logit is inf * 0 = NaN: its gradient is dropped; row 0's (finite, norm sqrt 2) is clipped to 1
    assert all(bool(torch.isfinite(s).all()) for s in sums)
    torch.testing.assert_close(sums[0], torch.tensor([2**-0.5, 0.0]))
    torch.testing.assert_close(sums[1], torch.tensor(2**-0.5))


def test_sklearn_contract():
    from sklearn.base import clone

    clf = DPSGDClassifier(2.0, 1e-7, model="mlp", hidden=4, n_hint=50)
    twin = clone(clf)
    assert twin.get_params() == clf.get_params()
    assert "accountant" in clf.get_params() and "n_hint" in clf.get_params()


def test_sparse_input_rejected_with_a_clear_message():
    import scipy.sparse as sp

    with pytest.raises(DataError, match="sparse"):
        DPSGDClassifier(1.0, 1e-6, epochs=1, sample_rate=0.5).fit(
            sp.csr_matrix(np.eye(3)), np.array([0, 1, 0])
        )


def test_poisson_batches_have_the_accounted_rate():
    sizes = [len(b) for b in core.batches(None, 10_000, 50, 0.1, core.secure_generator())]
    # mean of 50 Binomial(10000, 0.1) sizes: standard error sqrt(900 / 50) = 4.24; 5 standard errors
    assert abs(np.mean(sizes) - 1000) < 5 * math.sqrt(900 / 50)
    assert len(sizes) == 50


def test_no_rows_trains_on_noise_alone_and_charges_the_same():
    """The row count is private: zero rows must not raise, and the charge is the same as for any n."""
    pytest.importorskip("torch")
    acc_empty, acc_full = Accountant(1.0, 1e-6), Accountant(1.0, 1e-6)
    empty = DPSGDClassifier(1.0, 1e-6, accountant=acc_empty).fit(np.zeros((0, 3)), np.zeros(0))
    rng = np.random.default_rng(0)
    DPSGDClassifier(1.0, 1e-6, accountant=acc_full).fit(rng.uniform(-1, 1, (50, 3)), rng.integers(0, 2, 50))
    assert acc_empty.spent_epsilon == acc_full.spent_epsilon > 0
    assert empty.predict_proba(np.zeros((2, 3))).shape == (2, 2)


# -- model splitting (003-19 in the trainer) ------------------------------------------------------
def test_model_split_is_priced_by_its_accountant_and_one_block_is_poisson(toy):
    from trustlab.privacy.amplification import ModelSplitAccountant

    X, y = toy
    split = DPSGDClassifier(1.0, 1e-6, sample_rate=0.1, epochs=2, sampling="model_split", num_blocks=4).fit(
        X, y
    )
    p = split.release_.parameters
    assert split.release_.epsilon == pytest.approx(
        ModelSplitAccountant(4, p["accounted_noise_multiplier"], 20, 0.1).get_epsilon(1e-6 - p["grid_delta"]),
        rel=1e-12,
    )
    assert split.release_.parameters["num_blocks"] == 4
    assert split.release_.parameters["divisor"] == pytest.approx(0.1 * 1000 / 4)
    poisson = DPSGDClassifier(1.0, 1e-6, sample_rate=0.1, epochs=2).fit(X, y)
    # splitting earns amplification: less noise for the same epsilon; one block is plain Poisson
    assert split.noise_multiplier_ < poisson.noise_multiplier_
    one = DPSGDClassifier(1.0, 1e-6, sample_rate=0.1, epochs=2, sampling="model_split", num_blocks=1)
    z1 = one.fit(X, y).release_.parameters["accounted_noise_multiplier"]
    assert ModelSplitAccountant(1, z1, 20, 0.1).get_epsilon(1e-6) == pytest.approx(
        PoissonAccountant(z1, 20, 0.1).get_epsilon(1e-6), rel=1e-9
    )
    # Poisson is priced by PLD, model splitting by Renyi DP (the fallback): PLD needs less noise
    assert poisson.noise_multiplier_ < one.noise_multiplier_
    assert poisson.release_.parameters["num_blocks"] == 1  # ignored unless model_split
    with pytest.raises(ParameterError) as err:
        DPSGDClassifier(1.0, 1e-6, sampling="model_split", num_blocks=0).fit(X, y)
    assert err.value.argument == "num_blocks"
    with pytest.raises(ParameterError) as err:
        DPSGDClassifier(1.0, 1e-6, optimizer="signsgd", sampling="model_split").fit(X, y)
    assert err.value.argument == "sampling"


@pytest.mark.parametrize("model", ["logistic", "mlp"])
def test_split_clipped_sum_keeps_one_block_per_row_clipped(model):
    rng = np.random.default_rng(3)
    X = torch.as_tensor(rng.uniform(-1, 1, (9, 4)), dtype=torch.float64)
    y = torch.as_tensor(rng.integers(0, 2, 9), dtype=torch.float64)
    params = core.init_params(model, 4, 5, rng, torch.float64)
    params = [p + 0.3 * torch.as_tensor(rng.normal(size=tuple(p.shape))) for p in params]
    blocks = core.block_of_coordinates(params, 3)
    flat = torch.cat([b.reshape(-1) for b in blocks])
    assert torch.equal(flat, torch.arange(flat.numel()) % 3)
    gen = core.secure_generator()
    state = gen.get_state()
    chosen = torch.randint(3, (9,), generator=gen)
    gen.set_state(state)
    C = 0.2
    sums = core.split_clipped_sum(model, params, X, y, C, blocks, 3, gen)
    ref = core.per_example_grads(model, params, X, y)
    masked = [
        torch.where(b[None] == chosen.reshape(-1, *[1] * b.dim()), g, 0.0)
        for b, g in zip(blocks, ref, strict=True)
    ]
    norms = torch.sqrt(sum((m.reshape(9, -1) ** 2).sum(1) for m in masked))
    f = torch.clamp(C / norms, max=1.0)
    for s, m in zip(sums, masked, strict=True):
        torch.testing.assert_close(s, (m * f.reshape(-1, *[1] * (m.dim() - 1))).sum(0))
    # one block: the whole-gradient clipped sum
    one = core.split_clipped_sum(model, params, X, y, C, core.block_of_coordinates(params, 1), 1, gen)
    for a, b in zip(one, core.clipped_sum(model, params, X, y, C), strict=True):
        torch.testing.assert_close(a, b)


def _split_audit(claim: float, sigma: float, n_trials: int):
    # one full-batch step, two blocks; the canary's clipped gradient (norm = clip norm) lies in
    # coordinates 0 (w_0) and 2 (the bias) = block 0, so it is kept with probability 1/2
    D = (np.zeros((2, 2)), np.array([0, 1]))
    Dp = (np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]), np.array([0, 1, 0]))

    def mechanism(data):
        clf = DPSGDClassifier(
            claim,
            1e-5,
            sample_rate=1.0,
            epochs=1,
            clip_norm=0.5,
            noise_multiplier=sigma,
            learning_rate=1.0,
            n_hint=2,
            sampling="model_split",
            num_blocks=2,
        ).fit(*data)
        return -(clf.coef_[0, 0] + clf.intercept_[0])

    return audit_epsilon(mechanism, D, Dp, n_trials=n_trials, delta=1e-5, alpha=0.05)


# fast: the honest run at 600 trials; slow (and tools/mutants.py, which sets TRUSTLAB_SLOW=1):
# 2,000 trials, where a weak-noise mutant measured 1.95-2.29 at 600 but clears the claim at 2,000
@pytest.mark.parametrize("n_trials", [600, pytest.param(2000, marks=pytest.mark.slow)])
def test_model_split_empirical_audit_below_claim_and_catches_weak_noise(n_trials, monkeypatch):
    from trustlab.privacy.amplification import ModelSplitAccountant

    sigma = 1.5
    # the grid's sensitivity slack (relative 1e-7 here) on top of the accountant's figure
    claim = ModelSplitAccountant(2, sigma, 1, 1.0).get_epsilon(1e-5) * (1 + 1e-6)
    assert 2.0 < claim < 2.5
    honest = _split_audit(claim, sigma, n_trials)
    assert honest.epsilon_lower <= claim
    if n_trials < 2000:
        return
    real = core.add_grid_noise
    monkeypatch.setattr(core, "add_grid_noise", lambda units, scale: real(units, scale / 10))
    mutant = _split_audit(claim, sigma, n_trials)
    assert mutant.epsilon_lower > claim, (mutant.epsilon_lower, claim)


# -- balanced iteration subsampling: empirical audit of the schedule -----------------------------
# fast: the honest run at 200 trials (8,000 ten-step fits cost ~25 s at 800); slow (and
# tools/mutants.py): 800, where the every-step mutant is caught (at 400 it measured 0.24 once)
@pytest.mark.parametrize("n_trials", [200, pytest.param(800, marks=pytest.mark.slow)])
def test_balanced_audit_below_claim_and_catches_a_schedule_using_every_step(n_trials, monkeypatch):
    # ten steps, each row in exactly one (k = 1), z = 3: claimed epsilon 0.41. The statistic (the
    # final weights' projection on the canary's gradient) sees the canary once; a schedule that puts
    # every row in every step, still accounted as k = 1, moves it ten times (an effective noise
    # multiplier of 3 / sqrt(10) = 0.95). Measured at 800 trials: honest 0.0, mutant 1.45
    from trustlab.privacy import training

    sigma = 3.0
    claim = BISAccountant(10, 1, sigma).get_epsilon(1e-5) * (1 + 1e-6)  # plus the grid's slack
    assert 0.4 < claim < 0.42
    D = (np.zeros((2, 2)), np.array([0, 1]))
    Dp = (np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]), np.array([0, 1, 0]))

    def mechanism(data):
        clf = DPSGDClassifier(
            claim,
            1e-5,
            sample_rate=0.1,
            epochs=1,
            clip_norm=0.5,
            noise_multiplier=sigma,
            learning_rate=1e-3,
            n_hint=10,
            sampling="balanced",
        ).fit(*data)
        return -(clf.coef_[0, 0] + clf.intercept_[0])

    honest = audit_epsilon(mechanism, D, Dp, n_trials=n_trials, delta=1e-5)
    assert honest.epsilon_lower <= claim
    if n_trials < 800:
        return
    real = training._balanced_schedule
    monkeypatch.setattr(training, "_balanced_schedule", lambda n, steps, k: real(n, steps, steps))
    mutant = audit_epsilon(mechanism, D, Dp, n_trials=n_trials, delta=1e-5)
    assert mutant.epsilon_lower > claim, (mutant.epsilon_lower, claim)
