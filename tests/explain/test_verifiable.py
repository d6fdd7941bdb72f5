"""Tests of trustlab.explain.verifiable (ExpProof light mode) and verifiable_zk (ezkl backend)."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
from sklearn.linear_model import Lasso

from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.explain.verifiable import (
    AmenableLime,
    ExplanationProof,
    VerifiableExplanation,
    check_certificate,
    commit_model,
    derive_seed,
    find_border_point,
    prove_explanation,
    verify_explanation,
)

SALT = b"a sixteen+ byte salt"
RNG = np.random.default_rng(0)
W1 = RNG.normal(size=(6, 8))
W2 = RNG.normal(size=8)
WEIGHTS = [W1, W2]


def mlp(Z, w1=W1, w2=W2):
    """A small ReLU network with a sigmoid output: the confidential model."""
    return 1 / (1 + np.exp(-(np.maximum(Z @ w1, 0) @ w2 - 0.5)))


COMMIT = commit_model(WEIGHTS, SALT)
X_TEST = RNG.normal(size=(50, 6))
LIME = AmenableLime()


def _explain(x, lime=LIME, nonce=b"q"):
    seed = derive_seed(COMMIT, lime.quantize(x), nonce)
    return seed, lime.explain(mlp, x, seed)


def _with(exp, **changes):
    """A copy of the explanation with certificate fields replaced (and top-k recomputed)."""
    cert = dataclasses.replace(exp.certificate, **changes)
    w = np.asarray(cert.w_q)
    order = np.lexsort((np.arange(w.size), -np.abs(w)))[: len(exp.topk_idx)]
    return dataclasses.replace(
        exp,
        certificate=cert,
        topk_idx=tuple(int(j) for j in order),
        topk_val=tuple(int(w[j]) for j in order),
    )


def _consistent_theta(lime, exp, w_q, b_q):
    """The strongest forger's dual: the exact residual of the forged (w, b) over n."""
    c = exp.certificate
    Xw, yw = lime.weighted_problem(c.x_q, c.seed, c.labels_q)
    r = lime._residual(Xw, yw, np.asarray(w_q), int(b_q), 256)
    n = lime.n_samples
    return np.array([(2 * int(v) + n) // (2 * n) for v in r.tolist()], dtype=np.int64)


# ----------------------------------------------------------------------------- oracles
def test_lasso_step_matches_sklearn_and_gap():
    x = X_TEST[0]
    _, exp = _explain(x)
    c = exp.certificate
    Xw, yw = LIME.weighted_problem(c.x_q, c.seed, c.labels_q)
    Xf, yf = Xw / 256.0, yw / 256.0
    ref = Lasso(alpha=0.01, fit_intercept=True, tol=1e-10, max_iter=100_000).fit(Xf, yf)
    # published coefficients are sklearn's rounded to 1/256
    assert np.abs(exp.coef - ref.coef_).max() <= 0.5 / 256 + 1e-12
    assert abs(exp.intercept - ref.intercept_) <= 0.5 / 256 + 1e-12
    # float duality gap at sklearn's solution
    n = len(yf)
    r = yf - ref.intercept_ - Xf @ ref.coef_
    theta = r / n
    primal = r @ r / (2 * n) + 0.01 * np.abs(ref.coef_).sum()
    dual = theta @ yf - n / 2 * theta @ theta
    assert abs(primal - dual) < 1e-6
    assert np.abs(Xf.T @ theta).max() <= 0.01 + 1e-8
    # fixed point: far inside the circuit's 0.1
    assert abs(exp.gap) < 0.01
    assert exp.max_dual_correlation <= 0.015


def test_determinism_golden():
    # Integer samples, labels, coefficients and explanation depend only on the seed:
    # these digests are the same on every platform (pure integer / SHA-256 / exactly
    # rounded Decimal tables; the model is evaluated on exact binary fractions).
    x = np.array([0.5, -1.25, 2.0, 0.0, 0.75, -0.5])
    seed = derive_seed("golden", LIME.quantize(x), b"n")
    assert seed.hex()[:16] == "20576b6292899ae3"
    Z = LIME.neighbourhood(LIME.quantize(x), seed)
    assert Z.dtype == np.int64 and Z.shape == (100, 6)
    assert hashlib.sha256(Z.astype("<i8").tobytes()).hexdigest()[:16] == GOLDEN_SAMPLES
    lin = lambda Z: Z @ np.array([0.25, -0.5, 0.0, 0.125, 0.0, 0.0])  # noqa: E731 - exact in binary
    e1 = LIME.explain(lin, x, seed)
    e2 = LIME.explain(lin, x, seed)
    assert np.array_equal(e1.certificate.w_q, e2.certificate.w_q)
    assert e1.topk_idx == e2.topk_idx == (1, 0, 3, 2, 4, 5)
    assert e1.certificate.w_q.tolist() == [44, -115, 0, 6, 0, 0]
    Xw, _ = LIME.weighted_problem(e1.certificate.x_q, seed, e1.certificate.labels_q)
    assert hashlib.sha256(Xw.astype("<i8").tobytes()).hexdigest()[:16] == GOLDEN_WEIGHTED


GOLDEN_SAMPLES = "188b12a639124b47"
GOLDEN_WEIGHTED = "c0cc27105f15251d"


def test_samplers():
    xq = LIME.quantize(np.array([0.0, 1.0, -2.0]))
    seed = derive_seed("s", xq)
    Z = LIME.neighbourhood(xq, seed)
    delta = Z - xq
    assert delta.min() >= -512 and delta.max() < 512 and np.all(delta % 4 == 0)
    g = AmenableLime(sampler="gaussian", n_samples=5000)
    G = (g.neighbourhood(xq, seed) - xq) / 256
    # 15000 standard-normal-table draws: the mean's sd is 1/sqrt(15000) ~ 0.008 and the
    # sd's ~0.006; 4-sigma bands. The table is symmetric and its extreme is Phi^-1(1/512).
    assert abs(G.mean()) < 0.035 and abs(G.std() - 1) < 0.03
    assert np.abs(G).max() <= 2.9
    assert not np.array_equal(Z, LIME.neighbourhood(xq, derive_seed("s", xq, b"other")))


def test_no_overflow_large_problem():
    # d = 64, n = 10^4 (the spec's limits): the sums of products stay exact (int64 below
    # 2^62 by the bound in _exact, Python ints beyond), so the honest certificate checks.
    lime = AmenableLime(n_samples=10_000, top_k=5)
    rng = np.random.default_rng(1)
    beta = rng.normal(size=64) / 8
    x = rng.normal(size=64)
    f = lambda Z: np.tanh((Z - x) @ beta)  # noqa: E731
    seed = derive_seed("big", lime.quantize(x))
    exp = lime.explain(f, x, seed)
    rep = check_certificate(lime, exp, x_q=lime.quantize(x), seed=seed)
    assert rep.ok, rep.reasons


# ----------------------------------------------------------------------------- claims
def _float_objective(X, y, w, b, alpha=0.01):
    r = y - b - X @ w
    return r @ r / (2 * len(y)) + alpha * np.abs(w).sum()


@pytest.mark.claims
def test_expproof_completeness_and_soundness():
    # The paper's protocol on 50 test points (its evaluation size), n = 100 samples.
    # All checks are exact integer arithmetic on deterministic inputs, so the counts are
    # exact, with no statistical tolerance:
    # * completeness: every honest explanation verifies (50/50);
    # * the published top-k is bound: reordered indices (where the top two |w| differ)
    #   and altered values are rejected; a zero dual (theta = 0) is rejected;
    # * large coefficient forgeries (the strongest forger re-derives theta from its own
    #   residual) are rejected: zeroing or flipping the sign of a top coefficient with
    #   |w| >= 0.1;
    # * every forgery that *is* accepted (e.g. scaling small coefficients by 1.2) is a
    #   near-optimal Lasso solution: its objective exceeds scikit-learn's optimum P* by
    #   at most eps_gap = 0.1 (weak duality with the checked gap); measured 3.2e-3.
    steep = lambda Z: 1 / (1 + np.exp(-(3 * Z[:, 0] - 2 * Z[:, 1] + Z[:, 2])))  # noqa: E731
    honest = 0
    top_rejected = top_tried = 0
    big_rejected = big_tried = 0
    accepted = {"scale_1.2": 0, "swap": 0, "scale_2": 0}
    worst_subopt = 0.0
    for model in (mlp, steep):
        for x in X_TEST:
            seed = derive_seed(COMMIT, LIME.quantize(x), b"q")
            exp = LIME.explain(model, x, seed)
            honest += check_certificate(LIME, exp, x_q=LIME.quantize(x), seed=seed).ok
            c = exp.certificate
            w = np.asarray(c.w_q)
            j1, j2 = exp.topk_idx[0], exp.topk_idx[1]
            if abs(w[j1]) != abs(w[j2]):
                top_tried += 2
                wrong_idx = dataclasses.replace(exp, topk_idx=(j2, j1, *exp.topk_idx[2:]))
                wrong_val = dataclasses.replace(exp, topk_val=(exp.topk_val[0] + 3, *exp.topk_val[1:]))
                top_rejected += (not check_certificate(LIME, wrong_idx).ok) + (
                    not check_certificate(LIME, wrong_val).ok
                )
            top_tried += 1
            top_rejected += not check_certificate(LIME, _with(exp, theta_q=np.zeros(100, np.int64))).ok
            Xw, yw = LIME.weighted_problem(c.x_q, seed, c.labels_q)
            Xf, yf = Xw / 256, yw / 256
            ref = Lasso(alpha=0.01, tol=1e-12, max_iter=1_000_000).fit(Xf, yf)
            p_star = _float_objective(Xf, yf, ref.coef_, ref.intercept_)
            swapped = w.copy()
            swapped[[j1, j2]] = swapped[[j2, j1]]
            small = {
                "scale_1.2": np.floor(w * 1.2 + 0.5).astype(np.int64),
                "swap": swapped,
                "scale_2": 2 * w,
            }
            big = {}
            if abs(w[j1]) >= 26:  # |w| >= 0.1 at scale 2^8
                zeroed, flipped = w.copy(), w.copy()
                zeroed[j1], flipped[j1] = 0, -w[j1]
                big = {"zero": zeroed, "flip": flipped}
            for key, w_f in {**small, **big}.items():
                fake = _with(exp, w_q=w_f, theta_q=_consistent_theta(LIME, exp, w_f, c.b_q))
                ok = check_certificate(LIME, fake).ok
                if key in big:
                    big_tried += 1
                    big_rejected += not ok
                elif ok:
                    accepted[key] += 1
                    worst_subopt = max(
                        worst_subopt, _float_objective(Xf, yf, w_f / 256, c.b_q / 256) - p_star
                    )
    assert honest == 100
    assert top_rejected == top_tried >= 250
    assert big_rejected == big_tried >= 60
    assert worst_subopt <= 0.1
    assert accepted["scale_2"] < accepted["scale_1.2"]  # the certificate's resolution is finite


@pytest.mark.claims
def test_paper_gap_check_alone_is_weak_without_dual_binding():
    # With the circuit's checks only (bind_dual=False), theta = 0 satisfies feasibility and
    # sum(theta) = 0 and leaves the gap equal to the primal objective, which for these
    # labels (in [0, 1], weighted by sqrt(pi) <= 1) is below eps_gap = 0.1 even at
    # w = 0: any sparse explanation would pass. bind_dual=True rejects it.
    paper = AmenableLime(bind_dual=False)
    x = X_TEST[1]
    _, exp = _explain(x, lime=paper)
    fake = _with(exp, w_q=np.zeros(6, np.int64), b_q=0, theta_q=np.zeros(100, np.int64))
    assert check_certificate(paper, fake).ok
    assert not check_certificate(LIME, fake).ok
    assert check_certificate(LIME, _explain(x)[1]).ok


def test_ball_sampler_radii():
    # Points uniform in a d-ball have P(||v|| <= t r) = t^d. n = 10^4 fixed-point points
    # (d + 2 table Gaussians, integer normalisation): KS test against t^3 at the spec's
    # level, p > 0.01 (measured p = 0.31; the integer rounding of the unit vectors moves
    # radii by ~1/256, far below the KS resolution 1.63/sqrt(n) = 0.016).
    from scipy import stats

    lime = AmenableLime(border=True, n_ball=10_000)
    xq, bq = lime.quantize(np.zeros(3)), lime.quantize(np.array([1.0, 0.0, 0.0]))
    pts = lime.ball(xq, bq, b"0" * 32) / 256
    r = np.linalg.norm(pts, axis=1)
    assert r.max() <= 1 + 2 / 256
    assert stats.kstest(r, lambda t: np.clip(t, 0, 1) ** 3).pvalue > 0.01
    # directions are balanced: each coordinate's mean is 0 within 4 sd (sd ~ 0.45/100)
    assert np.abs(pts.mean(axis=0)).max() < 0.02


@pytest.mark.claims
def test_border_lime():
    # BorderLIME on a smooth logistic model, x far from the boundary (f(x) ~ 3e-5, where
    # standard LIME is flat): x_b has the other label, the certificate (including the
    # ball check) verifies, and under 1% of 1000 fresh points uniform in the ball of
    # radius ||x - x_b|| around x have the other label (the spec's oracle; measured 0).
    f = lambda Z: 1 / (1 + np.exp(-3 * (Z[:, 0] + 0.5 * Z[:, 1] - 1.0)))  # noqa: E731
    lime = AmenableLime(border=True, top_k=3)
    x = np.array([-2.0, -1.0, 0.5, 0.0])
    seed = derive_seed("c", lime.quantize(x))
    exp = lime.explain(f, x, seed)
    xb = exp.certificate.border_q / 256
    assert (f(xb[None])[0] >= 0.5) != (f(x[None])[0] >= 0.5)
    rep = check_certificate(lime, exp, x_q=lime.quantize(x), seed=seed)
    assert rep.ok and rep.checks["ball"] and rep.checks["border_label"]
    rng = np.random.default_rng(5)
    v = rng.normal(size=(1000, 4))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    pts = x + v * np.linalg.norm(xb - x) * rng.uniform(size=(1000, 1)) ** (1 / 4)
    assert np.mean(f(pts) >= 0.5) < 0.01
    # the explanation at the border sees the model's slope: feature 0 first, 1 second
    assert exp.topk_idx[:2] == (0, 1) and exp.coef[0] > exp.coef[1] > 0
    # forged border point with x's own label, or ball labels flipped: rejected
    lab = np.asarray(exp.certificate.labels_q).copy()
    n = lime.n_samples
    lab[n + 1] = lab[0]
    assert not check_certificate(
        lime, dataclasses.replace(exp, certificate=dataclasses.replace(exp.certificate, labels_q=lab))
    ).checks["border_label"]
    lab = np.asarray(exp.certificate.labels_q).copy()
    lab[n + 5] = 255
    assert not check_certificate(
        lime, dataclasses.replace(exp, certificate=dataclasses.replace(exp.certificate, labels_q=lab))
    ).checks["ball"]
    # protocol with opening binds the ball and border labels too
    proof = prove_explanation(f, x, commitment=COMMIT, lime=lime)
    assert verify_explanation(proof, commitment=COMMIT, x=x, lime=lime, opening=(f, WEIGHTS, SALT)).checks[
        "labels"
    ]
    with pytest.raises(DataError) as info:
        lime.batch(lime.quantize(x), seed)
    assert info.value.argument == "border_q"


def test_protocol_light_mode():
    x = X_TEST[2]
    proof = prove_explanation(mlp, x, commitment=COMMIT, nonce="n1")
    assert isinstance(proof, ExplanationProof)
    assert proof.prediction == pytest.approx(mlp(x[None])[0], abs=1 / 256)
    assert verify_explanation(proof, commitment=COMMIT, x=x, nonce="n1").ok
    assert verify_explanation(proof, commitment=COMMIT, x=x, nonce="n1", opening=(mlp, WEIGHTS, SALT)).ok
    # wrong nonce, wrong x, other commitment, wrong prediction
    assert not verify_explanation(proof, commitment=COMMIT, x=x, nonce="n2")
    assert not verify_explanation(proof, commitment=COMMIT, x=X_TEST[3], nonce="n1")
    other = commit_model([W1, W2 * 1.01], SALT)
    assert not verify_explanation(proof, commitment=other, x=x, nonce="n1")
    rep = verify_explanation(dataclasses.replace(proof, prediction=0.0), commitment=COMMIT, x=x, nonce="n1")
    assert not rep.checks["prediction"]
    # A model changed after the commitment: the owner explains with another model.
    changed = lambda Z: mlp(Z, W1, W2 * 1.5)  # noqa: E731
    proof2 = prove_explanation(changed, x, commitment=COMMIT, nonce="n1")
    # light mode cannot see it (labels are not bound to the model) ...
    assert verify_explanation(proof2, commitment=COMMIT, x=x, nonce="n1").ok
    # ... opening the model to the verifier does
    rep = verify_explanation(proof2, commitment=COMMIT, x=x, nonce="n1", opening=(mlp, WEIGHTS, SALT))
    assert not rep.ok and not rep.checks["labels"] and rep.checks["opening"]
    rep = verify_explanation(proof, commitment=COMMIT, x=x, nonce="n1", opening=(mlp, [W1, W2 * 2], SALT))
    assert not rep.checks["opening"]


def test_commitment_binding_and_hiding_inputs():
    assert commit_model(WEIGHTS, SALT) == COMMIT
    assert commit_model({"a": W1, "b": W2}, SALT) != COMMIT
    assert commit_model(WEIGHTS, SALT + b"x") != COMMIT
    assert commit_model([W1.ravel(), W2], SALT) != COMMIT  # shapes are committed
    assert commit_model(W1, SALT) != COMMIT


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("kwargs", "arg"),
    [
        ({"n_samples": 1}, "n_samples"),
        ({"sampler": "sobol"}, "sampler"),
        ({"alpha": 0}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"top_k": 0}, "top_k"),
        ({"frac_bits": 4}, "frac_bits"),
        ({"frac_bits": 20}, "frac_bits"),
        ({"eps_gap": -1}, "eps_gap"),
        ({"feas_slack": float("inf")}, "feas_slack"),
        ({"sum_tol": -0.1}, "sum_tol"),
        ({"bind_dual": "yes"}, "bind_dual"),
        ({"kernel_width": 0}, "kernel_width"),
        ({"border": 1}, "border"),
        ({"n_ball": 0}, "n_ball"),
    ],
)
def test_bad_parameters(kwargs, arg):
    lime = AmenableLime(**kwargs)
    with pytest.raises(ParameterError) as info:
        lime.explain(mlp, X_TEST[0], b"0" * 32)
    assert info.value.argument == arg


def test_bad_inputs():
    seed = b"0" * 32
    for x in (
        np.r_[X_TEST[0][:5], np.nan],
        np.r_[X_TEST[0][:5], np.inf],
        X_TEST[:2],
        [],
        "x",
        np.full(6, 1e15),
    ):
        with pytest.raises(DataError) as info:
            LIME.explain(mlp, x, seed)
        assert info.value.argument == "x"
    with pytest.raises(ParameterError) as info:
        LIME.explain(mlp, X_TEST[0], "seed")
    assert info.value.argument == "seed"
    with pytest.raises(ModelError) as info:
        LIME.explain(None, X_TEST[0], seed)
    assert info.value.argument == "predict_fn"
    with pytest.raises(ModelError) as info:
        LIME.explain(lambda Z: np.full(len(Z), np.nan), X_TEST[0], seed)
    assert info.value.argument == "predict_fn"
    with pytest.raises(ParameterError) as info:
        derive_seed("", [1, 2])
    assert info.value.argument == "commitment"
    with pytest.raises(ParameterError) as info:
        derive_seed("c", [1, 2], nonce=3)
    assert info.value.argument == "nonce"
    with pytest.raises(ParameterError) as info:
        commit_model(WEIGHTS, b"short")
    assert info.value.argument == "salt"
    for bad in ("weights", 3, []):
        with pytest.raises(ModelError) as info:
            commit_model(bad, SALT)
        assert info.value.argument == "weights"
    with pytest.raises(DataError) as info:
        commit_model([np.array([1.0, np.nan])], SALT)
    assert info.value.argument == "weights"
    with pytest.raises(DataError) as info:
        LIME.weighted_problem(LIME.quantize(X_TEST[0]), seed, np.zeros(5, np.int64))
    assert info.value.argument == "labels_q"
    with pytest.raises(ParameterError) as info:
        verify_explanation("proof", commitment=COMMIT, x=X_TEST[0])
    assert info.value.argument == "proof"
    with pytest.raises(ParameterError) as info:
        check_certificate("lime", None)
    assert info.value.argument == "lime"
    with pytest.raises(ParameterError) as info:
        check_certificate(LIME, "exp")
    assert info.value.argument == "explanation"
    with pytest.raises(ParameterError) as info:
        prove_explanation(mlp, X_TEST[0], commitment=COMMIT, lime="default")
    assert info.value.argument == "lime"
    with pytest.raises(ParameterError) as info:
        verify_explanation(
            prove_explanation(mlp, X_TEST[0], commitment=COMMIT), commitment=COMMIT, x=X_TEST[0], lime="x"
        )
    assert info.value.argument == "lime"
    with pytest.raises(DataError) as info:
        commit_model([np.array(["a", "b"])], SALT)
    assert info.value.argument == "weights"
    # fixed-point vectors: strings and NaN are named, not a NumPy conversion error
    for bad in ("abc", [np.nan, 1.0], np.array([np.inf, 1.0]), [None, 1]):
        with pytest.raises(DataError) as info:
            derive_seed("c", bad)
        assert info.value.argument == "x_q"
        with pytest.raises(DataError) as info:
            LIME.neighbourhood(bad, seed)
        assert info.value.argument == "x_q"
    with pytest.raises(DataError) as info:
        LIME.explain_labels(LIME.quantize(X_TEST[0]), seed, ["a"] * 5)
    assert info.value.argument == "labels_q"
    _, exp = _explain(X_TEST[0])
    assert isinstance(exp, VerifiableExplanation)
    with pytest.raises(DataError) as info:
        check_certificate(LIME, exp, x_q="abc")
    assert info.value.argument == "x_q"
    proof = prove_explanation(mlp, X_TEST[0], commitment=COMMIT)
    for opening in ((mlp,), "model"):
        with pytest.raises(ParameterError) as info:
            verify_explanation(proof, commitment=COMMIT, x=X_TEST[0], opening=opening)
        assert info.value.argument == "opening"
    for label in ("1", 1.5, -1, True):
        with pytest.raises(ParameterError) as info:
            LIME.explain(mlp, X_TEST[0], seed, label=label)
        assert info.value.argument == "label"
    rng = np.random.default_rng(0)
    for kwargs, arg in (
        ({"predict_fn": None}, "predict_fn"),
        ({"x_q": "abc"}, "x_q"),
        ({"s": 0}, "s"),
        ({"rng": 0}, "rng"),
        ({"label": "a"}, "label"),
    ):
        args = {"predict_fn": mlp, "x_q": LIME.quantize(X_TEST[0]), "s": 256, "rng": rng} | kwargs
        with pytest.raises((ParameterError, DataError, ModelError)) as info:
            find_border_point(args.pop("predict_fn"), args.pop("x_q"), args.pop("s"), **args)
        assert info.value.argument == arg
    bad_shape = _with(exp, theta_q=np.zeros(3, np.int64))
    rep = check_certificate(LIME, bad_shape)
    assert not rep.ok and not rep.checks["shapes"]


# ----------------------------------------------------------------------------- ezkl backend
@pytest.fixture(scope="module")
def zk(tmp_path_factory):
    pytest.importorskip("ezkl")
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from trustlab.explain.verifiable_zk import zk_prove_explanation, zk_setup

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    lime = AmenableLime(n_samples=8, top_k=2)
    setup = zk_setup(model, 3, tmp_path_factory.mktemp("zk"), lime=lime)
    x = np.array([0.25, -0.5, 0.125])
    proof = zk_prove_explanation(setup, x, nonce="q1")
    return model, lime, setup, x, proof


@pytest.mark.slow
def test_zk_backend(zk):
    from trustlab.explain.verifiable_zk import ZKPublic, zk_verify_explanation

    model, lime, setup, x, proof = zk
    import torch

    with torch.no_grad():
        f_x = float(model(torch.tensor(x[None], dtype=torch.float32))[0, 0])
    assert abs(proof.prediction - f_x) < 0.02  # ezkl's fixed point at scale 2^8
    assert proof.proof_bytes > 1000
    rep = zk_verify_explanation(proof, setup.public, x=x, nonce="q1", lime=lime)
    assert rep.ok, rep.reasons
    assert {"zk_proof", "commitment", "inputs", "labels", "gap", "top_k"} <= set(rep.checks)
    # another nonce: the proven rows are not the ones the verifier derives
    rep = zk_verify_explanation(proof, setup.public, x=x, nonce="q2", lime=lime)
    assert not rep.ok and not rep.checks["inputs"]
    # another published commitment (a swapped model): the proof's weight hash differs
    other = ZKPublic(**{**dataclasses.asdict(setup.public), "commitment": "00" * 32})
    rep = zk_verify_explanation(proof, other, x=x, nonce="q1", lime=lime)
    assert not rep.checks["commitment"]
    # labels in the certificate that are not the proven outputs
    c = proof.explanation.certificate
    fake_labels = np.asarray(c.labels_q).copy()
    fake_labels[3] += 5
    fake = dataclasses.replace(proof, explanation=lime.explain_labels(c.x_q, c.seed, fake_labels))
    rep = zk_verify_explanation(fake, setup.public, x=x, nonce="q1", lime=lime)
    assert not rep.ok and not rep.checks["labels"]
    # a tampered proof: one byte of the proof flipped
    import json

    doc = json.loads(proof.proof_path.read_text())
    doc["proof"][100] ^= 1
    if doc.get("hex_proof"):
        doc["hex_proof"] = "0x" + bytes(doc["proof"]).hex()
    bad = setup.workdir / "tampered.proof.json"
    bad.write_text(json.dumps(doc))
    rep = zk_verify_explanation(
        dataclasses.replace(proof, proof_path=bad), setup.public, x=x, nonce="q1", lime=lime
    )
    assert not rep.ok and not rep.checks["zk_proof"]


def test_zk_bad_inputs(tmp_path):
    pytest.importorskip("ezkl")
    pytest.importorskip("torch")
    from trustlab.explain.verifiable_zk import zk_prove_explanation, zk_setup, zk_verify_explanation

    with pytest.raises(ModelError) as info:
        zk_setup(lambda z: z, 3, tmp_path)
    assert info.value.argument == "model"
    import torch

    with pytest.raises(ParameterError) as info:
        zk_setup(torch.nn.Linear(3, 1), 0, tmp_path)
    assert info.value.argument == "n_features"
    with pytest.raises(ModelError) as info:
        zk_setup(torch.nn.Linear(3, 2), 3, tmp_path, lime=AmenableLime(n_samples=4))
    assert info.value.argument == "model"
    with pytest.raises(DataError) as info:
        zk_setup(torch.nn.Linear(3, 1), 3, tmp_path, calibration_X=np.zeros((4, 2)))
    assert info.value.argument == "calibration_X"
    with pytest.raises(ParameterError) as info:
        zk_setup(torch.nn.Linear(3, 1), 3, tmp_path, lime=AmenableLime(border=True))
    assert info.value.argument == "lime"
    with pytest.raises(ParameterError) as info:
        zk_prove_explanation("setup", np.zeros(3))
    assert info.value.argument == "setup"
    with pytest.raises(ParameterError) as info:
        zk_verify_explanation("proof", None, x=np.zeros(3))
    assert info.value.argument == "proof"


def test_honest_certificates_verify_away_from_the_origin():
    """Completeness for standardised instances up to 3 sd from the origin (found by the fuzz suite).

    With scikit-learn's rounded intercept, honest certificates failed the feasibility check
    on 11 of these 120 queries: rounding w moves the residual's mean by mean(X_w) . dw,
    which ||X_w^T theta|| multiplies by the feature size. The prover now refits the intercept
    for the rounded w and takes single grid steps (intercept or coefficients) while they
    lower the correlation: 120 of 120 verify. Far from the origin no fixed-point
    certificate passes, and the prover says so instead of publishing one.
    """
    rng = np.random.default_rng(1)
    verified = 0
    for d in (1, 3, 6):
        w = rng.normal(size=d)
        f = lambda Z, w=w: 1 / (1 + np.exp(-np.clip(Z @ w, -50, 50)))  # noqa: E731
        lime = AmenableLime(n_samples=20, top_k=min(2, d))
        for i in range(40):
            x = rng.normal(scale=3.0, size=d)
            seed = derive_seed("c", lime.quantize(x), str(i).encode())
            verified += check_certificate(lime, lime.explain(f, x, seed), x_q=lime.quantize(x), seed=seed).ok
    assert verified == 120
    lime = AmenableLime(n_samples=20, top_k=1)
    far = np.array([30.0])
    with pytest.raises(DataError, match="too coarse") as err:
        lime.explain(lambda Z: 1 / (1 + np.exp(-Z[:, 0])), far, derive_seed("c", lime.quantize(far)))
    assert err.value.argument == "x"
