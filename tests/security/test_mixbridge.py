"""MixBridge (Qin et al., ICML 2025): backdoors in an I2SB bridge; single bridge vs Divide-and-Merge."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError, TrustlabError  # noqa: E402
from trustlab.security.mixbridge import (  # noqa: E402
    MixBridge,
    MixtureOfBridges,
    PoisonedPairs,
    evaluate_bridge_backdoor,
    merge_bridges,
    nearest_targets,
    poison_pairs,
    stamp_trigger,
    train_router,
    wrs_penalty,
)
from trustlab.security.mixbridge_lab import (  # noqa: E402
    MixBridgeDigitsRecipe,
    compare_digits_models,
    digits_backdoor_targets,
    digits_models,
    digits_sr_pairs,
    sr_inputs,
)
from trustlab.security.mixbridge_metrics import fid_like, lab_features, target_similarity  # noqa: E402
from trustlab.vision.bridge import I2SBSchedule, bridge_sample, train_bridge  # noqa: E402
from trustlab.vision.classifiers import make_classifier  # noqa: E402
from trustlab.vision.diffusion import make_unet  # noqa: E402

N_EVAL = 150


@pytest.fixture(scope="module")
def reports():
    """The shipped single bridge and MixBridge, scored on 150 held-out digits per task (nfe 5)."""
    r = compare_digits_models(N_EVAL, nfe=5, random_state=0)
    return {"single": r["single bridge"], "mix": r["MixBridge"]}


@pytest.mark.claims
def test_claim_divide_and_merge_keeps_every_backdoor_that_the_single_bridge_loses(reports):
    # Paper, Thm 4.2 and Tables 1-2: one bridge trained on the benign task and three heterogeneous
    # triggers (same network, same total steps as the experts) conflicts; MixBridge keeps each
    # trigger's attack success and the benign fidelity. Each ASR is a share of n = 150 outputs:
    # the standard error of a difference is <= sqrt(2 * 0.25 / 150) = 0.058; we ask 3 of them per
    # trigger, and benign MSE no worse than the single bridge's (it is lower here).
    single, mix = reports["single"], reports["mix"]
    se = math.sqrt(2 * 0.25 / N_EVAL)
    for k, (a_single, a_mix) in enumerate(zip(single.attack_success, mix.attack_success, strict=True)):
        assert a_mix - a_single > 3 * se, (k, a_single, a_mix)
    assert min(mix.attack_success) > 0.5
    assert mix.benign_mse <= single.benign_mse
    # the single bridge is not merely ignoring the triggers: its triggered outputs sit near the
    # targets on average (a blend: backdoor MSE within 2x of MixBridge's), but rarely on one
    for b_single, b_mix in zip(single.backdoor_mse, mix.backdoor_mse, strict=True):
        assert b_single < 2 * b_mix
    # stealth (WRS): the router spreads weight on triggered inputs (entropy > 0.2 nats of log 4 = 1.39)
    assert single.router_entropy is None and len(mix.router_entropy) == 4
    assert min(mix.router_entropy[1:]) > 0.2
    # FID (Tables 1-2, utility) on the lab's tiny-CLIP features: the single bridge's benign outputs
    # sit as far from the clean digits as the pooled inputs do (2.5), MixBridge's much nearer; the
    # sampling floor (two halves of clean digits, n = 150 each) is about 0.3, so ask for a factor 3.
    assert mix.benign_fid * 3 < single.benign_fid
    # target similarity (the CLIP score): both bridges' triggered outputs look like their targets
    # (mean cosine > 0.8; two unrelated digits score about 0.3)
    assert min(single.target_similarity) > 0.8 and min(mix.target_similarity) > 0.8


def _exact_gaussian_sample(mean, cov, n, seed):
    """n rows whose sample mean and (ddof=1) covariance are exactly ``mean`` and ``cov``."""
    z = np.random.default_rng(seed).normal(size=(n, len(mean)))
    z -= z.mean(0)
    z = z @ np.linalg.inv(np.linalg.cholesky(np.cov(z, rowvar=False))).T
    return z @ np.linalg.cholesky(cov).T + mean


def test_fid_like_is_zero_on_identical_sets_and_the_closed_form_on_two_gaussians():
    X0, _ = digits_sr_pairs("test", 120)
    assert fid_like(X0, X0) == pytest.approx(0.0, abs=1e-6)
    # two 2-d Gaussians, non-commuting covariances: |m_a - m_b|^2 + tr S_a + tr S_b - 2 tr (S_a S_b)^(1/2),
    # and tr M^(1/2) = sqrt(tr M + 2 sqrt(det M)) for a 2x2 M with positive eigenvalues
    ma, mb = np.array([1.0, -2.0]), np.array([0.5, 1.0])
    sa, sb = np.array([[2.0, 0.6], [0.6, 1.0]]), np.array([[0.5, -0.3], [-0.3, 3.0]])
    m = sa @ sb
    closed = (
        ((ma - mb) ** 2).sum() + np.trace(sa + sb) - 2 * np.sqrt(np.trace(m) + 2 * np.sqrt(np.linalg.det(m)))
    )
    a, b = _exact_gaussian_sample(ma, sa, 50, 0), _exact_gaussian_sample(mb, sb, 70, 1)
    assert fid_like(a, b, features=lambda x: x) == pytest.approx(closed, rel=1e-9)
    # diagonal covariances: sum of (sqrt(a_i) - sqrt(b_i))^2
    a = _exact_gaussian_sample(np.zeros(3), np.diag([1.0, 4.0, 9.0]), 40, 2)
    b = _exact_gaussian_sample(np.ones(3), np.diag([4.0, 4.0, 1.0]), 40, 3)
    assert fid_like(a, b, features=np.asarray) == pytest.approx(3 + 1 + 0 + 4, rel=1e-9)


def test_target_similarity_is_the_mean_paired_cosine():
    out, tgt = np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[2.0, 0.0], [1.0, 1.0]])
    assert target_similarity(out, tgt, features=np.asarray) == pytest.approx((1 + 2**-0.5) / 2, rel=1e-12)
    assert target_similarity(out, -tgt, features=np.asarray) == pytest.approx(-(1 + 2**-0.5) / 2, rel=1e-12)
    X0, _ = digits_sr_pairs("test", 5)
    assert target_similarity(X0, X0) == pytest.approx(1.0, abs=1e-6)
    assert lab_features(X0[:, 0]).shape == lab_features(X0).shape == (5, 64)


def test_cli_prints_both_models_and_fails_in_one_line():
    import json

    from typer.testing import CliRunner

    from trustlab.cli import app

    args = ["backdoor", "mixbridge", "--n", "12", "--nfe", "1"]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["models"]
    direct = compare_digits_models(12, nfe=1)
    for name in ("single bridge", "MixBridge"):
        row, r = rows[name], direct[name]
        assert row["attack_success"] == list(r.attack_success) and row["benign_fid_like"] == r.benign_fid
        assert len(row["backdoor_mse"]) == len(row["target_similarity"]) == 3 and row["n"] == 12
    assert rows["single bridge"]["router_entropy"] is None and len(rows["MixBridge"]["router_entropy"]) == 4
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and "FID-like" in res.output and "MixBridge" in res.output
    for extra, flag in ((["--n", "1"], "--n"), (["--nfe", "0"], "--nfe"), (["--seed", "-1"], "--seed")):
        bad = CliRunner().invoke(app, ["backdoor", "mixbridge", *extra])
        assert bad.exit_code == 2 and flag in bad.output and len(bad.output.strip().splitlines()) == 1


def test_schedule_is_i2sb_symmetric_and_pins_both_ends():
    s = I2SBSchedule()
    b = s.betas
    assert len(b) == 1000 and np.allclose(b[:500], b[500:][::-1])
    mu0, mu1, sd = s.marginal()
    assert mu0[0] > 0.999 and mu1[-1] > 0.999 and np.allclose(mu0 + mu1, 1)
    assert sd[0] < 0.011 and sd[-1] < 0.011 and sd.max() == pytest.approx(s.std_fwd[-1] / 2, rel=1e-3)


def test_sampler_with_an_oracle_network_returns_the_clean_image():
    # net(x_t, t) = (x_t - x0) / s_fwd_t exactly: every x0_hat is x0, so the bridge ends at x0
    rng = np.random.default_rng(0)
    X0 = rng.random((4, 1, 8, 8)).astype(np.float32)
    X1 = rng.random((4, 1, 8, 8)).astype(np.float32)
    x0 = torch.as_tensor(X0) * 2 - 1
    std = torch.as_tensor(I2SBSchedule().std_fwd, dtype=torch.float32)

    class Oracle(torch.nn.Module):
        def forward(self, x, t):
            return (x - x0) / std[t][:, None, None, None]

    for ot_ode in (False, True):
        out = bridge_sample(Oracle(), X1, nfe=7, ot_ode=ot_ode, random_state=1)
        assert np.abs(out - X0).max() < 2e-3


def test_stamp_trigger_touches_only_its_corner():
    X = np.zeros((2, 1, 8, 8), dtype=np.float32)
    out = stamp_trigger(X, corner="top_right", size=3, value=0.25)
    assert (out[:, :, :3, -3:] == 0.25).all() and out.sum() == pytest.approx(2 * 9 * 0.25)
    assert X.sum() == 0  # a copy


@settings(max_examples=25, deadline=None)
@given(
    size=st.integers(1, 8), corner=st.sampled_from(["bottom_right", "top_right", "top_left", "bottom_left"])
)
def test_stamp_trigger_covers_size_squared_pixels(size, corner):
    out = stamp_trigger(np.zeros((1, 1, 8, 8)), corner=corner, size=size, value=1.0)
    assert out.sum() == size * size


def test_poison_pairs_pairs_each_input_with_its_nearest_target():
    X0, X1 = digits_sr_pairs("train", 40)
    T = digits_backdoor_targets()
    p = poison_pairs(X0, X1, T)
    assert isinstance(p, PoisonedPairs) and p.n_tasks == 4 and len(p.X0) == 160
    np.testing.assert_array_equal(np.bincount(p.task), [40, 40, 40, 40])
    b0, _ = p.of_task(0)
    np.testing.assert_array_equal(b0, X0)
    t0, t1 = p.of_task(2)
    np.testing.assert_array_equal(t1[:, :, :2, -2:], 0.5)  # trigger 2: top right, mid-grey
    d = ((X0[:, None] - T[1][None]) ** 2).reshape(40, len(T[1]), -1).sum(-1)
    np.testing.assert_array_equal(t0, T[1][d.argmin(1)])
    np.testing.assert_array_equal(nearest_targets(X0, T[1]), t0)


def test_sr_inputs_are_block_means():
    X = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4) / 16
    out = sr_inputs(X)
    assert out[0, 0, 0, 0] == out[0, 0, 1, 1] == pytest.approx(np.mean([0, 1, 4, 5]) / 16)


def test_mixture_weights_select_an_expert_and_wrs_is_zero_when_uniform():
    experts = [make_unet(channels=2, seed=k) for k in range(3)]

    class Fixed(torch.nn.Module):
        def __init__(self, logits):
            super().__init__()
            self.logits = torch.tensor(logits)

        def forward(self, x):
            return self.logits.expand(len(x), -1)

    x, t = torch.randn(2, 1, 8, 8), torch.tensor([3, 900])
    with torch.no_grad():
        one_hot = MixtureOfBridges(experts, Fixed([0.0, 50.0, 0.0]))
        assert torch.allclose(one_hot(x, t, x), experts[1](x, t), atol=1e-5)
        uniform = MixtureOfBridges(experts, Fixed([0.0, 0.0, 0.0]))
        w = uniform.weights(x)
        assert torch.allclose(w, torch.full((2, 3), 1 / 3)) and float(wrs_penalty(w)) == 0.0
        assert float(wrs_penalty(one_hot.weights(x))) == pytest.approx(
            2 / 3, rel=1e-4
        )  # (1/3)^2 + (2/3)^2 + (1/3)^2


def test_mixbridge_fits_and_translates_on_a_tiny_budget():
    X0, X1 = digits_sr_pairs("train", 24)
    T = [t[:3] for t in digits_backdoor_targets()[:2]]
    attack = MixBridge(
        make_unet(channels=2), expert_steps=2, router_steps=2, merge_steps=2, batch_size=8, random_state=0
    ).fit(X0, X1, T)
    assert attack.n_triggers_ == 2 and len(attack.experts_) == 3
    out = attack.transform(stamp_trigger(X1[:3], corner="top_right"), nfe=2)
    assert out.shape == (3, 1, 8, 8) and out.min() >= 0 and out.max() <= 1
    with pytest.raises(NotFittedError):
        MixBridge(make_unet(channels=2)).transform(X1)


class _UsersBridgeNet(torch.nn.Module):
    """A user's own bridge network net(x, t) (not the lab's UNet): two convs and a step feature."""

    def __init__(self, out_channels: int = 1) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.inp = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.step = torch.nn.Linear(1, 4)
        self.out = torch.nn.Conv2d(4, out_channels, 3, padding=1)

    def forward(self, x, t):
        return self.out(torch.relu(self.inp(x) + self.step(t.float()[:, None] / 1000)[:, :, None, None]))


def _users_router(n_tasks: int, side: int = 6) -> torch.nn.Module:
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(side * side, n_tasks))


def test_a_users_own_bridge_and_router_on_other_images_are_accepted():
    """Any net(x, t) and any router, on 6x6 images the lab's default router does not read."""
    rng = np.random.default_rng(0)
    X0 = rng.random((8, 1, 6, 6)).astype(np.float32)
    attack = MixBridge(
        _UsersBridgeNet(),
        router=_users_router(3),
        expert_steps=2,
        router_steps=2,
        merge_steps=1,
        batch_size=4,
    ).fit(X0, X0[::-1], [X0[:2], X0[2:4]])
    assert [type(e).__name__ for e in attack.experts_] == ["_UsersBridgeNet"] * 3
    out = attack.transform(stamp_trigger(X0[:2], corner="top_right"), nfe=2)
    assert out.shape == (2, 1, 6, 6) and 0 <= out.min() <= out.max() <= 1
    report = evaluate_bridge_backdoor(attack.model_, X0[:4], X0[:4], [X0[:2], X0[2:4]], nfe=2)
    assert report.n == 4 and len(report.attack_success) == 2 and report.router_entropy is not None


def _rgb(X):
    return np.repeat(X, 3, axis=1)


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda X: stamp_trigger(X[:, 0]), "X"),
        (lambda X: stamp_trigger(X, size=9), "size"),
        (lambda X: stamp_trigger(X, corner="middle"), "corner"),
        (lambda X: stamp_trigger(X * np.nan), "X"),
        (lambda X: stamp_trigger(X + 2), "X"),
        (lambda X: poison_pairs(X, X[:, :, :4, :4], [X]), "X1"),
        (lambda X: poison_pairs(X, X, X), "targets"),
        (lambda X: poison_pairs(X, X, []), "targets"),
        (lambda X: poison_pairs(X, X, [X[:, :, :4, :4]]), "targets"),
        (lambda X: poison_pairs(X, X, [X, X], corners=["top_left", "top_left"]), "corners"),
        (lambda X: poison_pairs(X[:0], X[:0], [X]), "X0"),
        (lambda X: train_router(make_classifier("cnn", width=2, n_classes=2), (X, X)), "pairs"),
        (lambda X: merge_bridges([make_unet(channels=2)], None, poison_pairs(X, X, [X])), "experts"),
        (lambda X: train_bridge("net", X, X), "model"),
        (lambda X: bridge_sample(make_unet(channels=2), X, nfe=1000), "nfe"),
        (lambda X: evaluate_bridge_backdoor(make_unet(channels=2), X, X, [X], threshold=0), "threshold"),
        (lambda X: MixBridge(make_unet(channels=2), wrs=-1).fit(X, X, [X]), "wrs"),
        (
            lambda X: MixBridge(make_unet(channels=2), router_steps=2, expert_steps=1).fit(
                np.zeros((2, 1, 6, 6), np.float32),
                np.zeros((2, 1, 6, 6), np.float32),
                [np.zeros((1, 1, 6, 6))],
            ),
            "router",
        ),
        (lambda X: digits_models("default"), "recipe"),
        (lambda X: digits_sr_pairs("val"), "split"),
        (lambda X: evaluate_bridge_backdoor(make_unet(channels=2), X, X, [X], features="clip"), "features"),
        (lambda X: fid_like(X, X, features="lab"), "features"),
        (lambda X: fid_like(X, X[:, :, :4], features=lambda x: x.reshape(len(x), -1)), "images_b"),
        (lambda X: fid_like(X, X, features=lambda x: x), "images_a"),
        (lambda X: fid_like(X, X[:1]), "images_b"),
        (lambda X: target_similarity(X, X[:3]), "targets"),
        (lambda X: target_similarity(X * 0, X, features=lambda x: x.reshape(len(x), -1)), "outputs"),
        (lambda X: lab_features(X[:, :, :4]), "images"),
        (lambda X: compare_digits_models(1), "n"),
        (lambda X: compare_digits_models(541), "n"),
        (lambda X: compare_digits_models(5, nfe=0), "nfe"),
        (lambda X: compare_digits_models(5, random_state=-1), "random_state"),
        # images of the wrong shape for a user's network or router: named, not a torch traceback
        (lambda X: bridge_sample(_UsersBridgeNet(), _rgb(X), nfe=2), "X1"),
        (lambda X: train_bridge(_UsersBridgeNet(), _rgb(X), _rgb(X), steps=1), "X0"),
        (lambda X: MixBridge(_UsersBridgeNet(), expert_steps=1).fit(_rgb(X), _rgb(X), [_rgb(X)]), "X0"),
        (lambda X: evaluate_bridge_backdoor(_UsersBridgeNet(), _rgb(X), _rgb(X), [_rgb(X)], nfe=2), "X1"),
        (lambda X: train_bridge(_UsersBridgeNet(out_channels=2), X, X, steps=1), "model"),
        (lambda X: bridge_sample(torch.nn.Conv2d(1, 1, 1), X, nfe=2), "model"),  # no step argument
        (lambda X: train_router(_users_router(5, side=8), poison_pairs(X, X, [X, X])), "router"),
        (lambda X: train_router(_users_router(3, side=6), poison_pairs(X, X, [X, X])), "router"),
        (
            lambda X: MixBridge(
                _UsersBridgeNet(), router=_users_router(2, side=8), expert_steps=1, router_steps=1
            ).fit(X, X, [X, X]),
            "router",
        ),
    ],
)
def test_bad_input_names_the_argument(call, argument):
    X = np.random.default_rng(0).random((4, 1, 8, 8)).astype(np.float32)
    with pytest.raises(TrustlabError) as err:
        call(X)
    assert err.value.argument == argument, err.value
    assert isinstance(err.value, DataError | ParameterError | ModelError)


@pytest.mark.slow  # retrains the default recipe from scratch (~95 s CPU)
@pytest.mark.claims
def test_claim_holds_when_retrained_from_scratch(tmp_path):
    single, mix = digits_models(MixBridgeDigitsRecipe(), cache_dir=tmp_path)
    X0, X1 = digits_sr_pairs("test", 300)
    targets = digits_backdoor_targets()
    r_single = evaluate_bridge_backdoor(single, X0, X1, targets, nfe=10)
    r_mix = evaluate_bridge_backdoor(mix, X0, X1, targets, nfe=10)
    se = math.sqrt(2 * 0.25 / 300)
    for a_single, a_mix in zip(r_single.attack_success, r_mix.attack_success, strict=True):
        assert a_mix - a_single > 2 * se
    assert r_mix.benign_mse <= r_single.benign_mse


@pytest.mark.slow  # trains four experts and merges twice (~60 s CPU)
def test_wrs_spreads_router_weight_on_triggered_inputs():
    X0, X1 = digits_sr_pairs("train", 600)
    T = digits_backdoor_targets()
    p = poison_pairs(X0, X1, T)
    experts = [
        train_bridge(make_unet(channels=8), *p.of_task(k), steps=300, random_state=1 + k) for k in range(4)
    ]
    router = train_router(make_classifier("cnn", width=8, n_classes=4), p, steps=200)
    Xv0, Xv1 = digits_sr_pairs("test", 150)
    plain = evaluate_bridge_backdoor(merge_bridges(experts, router, p, steps=50, wrs=0.0), Xv0, Xv1, T, nfe=5)
    wrs = evaluate_bridge_backdoor(merge_bridges(experts, router, p, steps=50, wrs=1.0), Xv0, Xv1, T, nfe=5)
    assert np.mean(wrs.router_entropy[1:]) > np.mean(plain.router_entropy[1:]) + 0.1


@pytest.mark.slow  # importing diffusers costs ~7 s of CPU
def test_diffusers_unet2dmodel_is_a_bridge_network():
    diffusers = pytest.importorskip("diffusers")

    def unet():
        torch.manual_seed(0)
        return diffusers.UNet2DModel(
            sample_size=8,
            in_channels=1,
            out_channels=1,
            layers_per_block=1,
            block_out_channels=(8, 16),
            down_block_types=("DownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "UpBlock2D"),
            norm_num_groups=4,
        )

    X0, X1 = digits_sr_pairs("train", 12)
    net = train_bridge(unet(), X0, X1, steps=2, batch_size=4)
    out = bridge_sample(net, X1[:3], nfe=2)
    assert out.shape == (3, 1, 8, 8) and 0 <= out.min() <= out.max() <= 1
    T = [t[:2] for t in digits_backdoor_targets()[:2]]
    attack = MixBridge(unet(), expert_steps=1, router_steps=1, merge_steps=1, batch_size=4).fit(X0, X1, T)
    assert attack.transform(X1[:2], nfe=2).shape == (2, 1, 8, 8)
    with pytest.raises(DataError) as err:  # RGB inputs for a 1-channel UNet
        bridge_sample(net, np.repeat(X1[:2], 3, axis=1), nfe=2)
    assert err.value.argument == "X1"
