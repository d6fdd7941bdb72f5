"""TSC backdoor purification (catalog row 000-04) and the BadNets helper.

Claim (docs/security/backdoor.md): on digits with a BadNets patch (10% of 1,200
training rows poisoned to label 0), TSC with 360 clean training rows takes the attack
success rate from about 100% to near chance while clean accuracy stays within a few
points; plain fine-tuning on the same clean rows leaves the backdoor in place.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ModelError, ParameterError, TrustlabError  # noqa: E402
from trustlab.security._backdoor_baselines import fine_prune, fine_tune  # noqa: E402
from trustlab.security._backdoor_curve import curve_point, update_batchnorm  # noqa: E402
from trustlab.security._backdoor_layers import permute_to  # noqa: E402
from trustlab.security._nets import digits, make_net, predict, train  # noqa: E402
from trustlab.security.backdoor import (  # noqa: E402
    add_trigger,
    attack_success_rate,
    badnets_poison,
    tsc_purify,
)

N_TRAIN = 1200
N_CLEAN = 360  # 30% of the training rows: the clean set TSC and the baselines get


@pytest.fixture(autouse=True)
def _one_thread():
    # two cores shared by several jobs: torch's default thread pool oversubscribes them
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _scenario(kind: str, seed: int = 0):
    X, y = digits(image=kind.startswith("cnn"))
    order = np.random.default_rng(seed).permutation(len(X))
    tr, te = order[:N_TRAIN], order[N_TRAIN:]
    data = badnets_poison(X[tr], y[tr], rate=0.1, target=0, random_state=seed)
    net = train(make_net(kind, seed=seed), data.X, data.y, epochs=30, seed=seed)
    clean = np.random.default_rng(seed + 100).choice(np.flatnonzero(~data.poisoned), N_CLEAN, replace=False)
    return net, X[tr][clean], y[tr][clean], X[te], y[te]


def _scores(model, X, y) -> tuple[float, float]:
    return float(np.mean(predict(model, X) == y)), attack_success_rate(model, X, y, target=0)


@pytest.mark.claims
def test_tsc_removes_the_backdoor_where_fine_tuning_does_not() -> None:
    net, Xc, yc, Xte, yte = _scenario("mlp")
    acc0, asr0 = _scores(net, Xte, yte)
    # the attack took: 536 triggered test rows, measured ASR 1.00, clean accuracy 0.975 (597 rows)
    assert asr0 >= 0.9 and acc0 >= 0.95
    result = tsc_purify(net, Xc, yc, t=0.5, epochs=50, batch_size=32)
    acc, asr = _scores(result.model, Xte, yte)
    # measured: ASR 0.019, accuracy 0.946. Chance is 1/10 (a clean model scores 0.00);
    # 0.15 is 4 standard errors (sqrt(0.1*0.9/536) = 0.013) above chance.
    assert asr <= 0.15
    # within 5 points of the backdoored model (standard error of a 597-row accuracy: 0.007)
    assert acc >= acc0 - 0.05
    # stage 1 pushes the copy away (anti-correlated units), stage 2 aligns
    assert all(c < 0 for c in result.stage1_correlation)
    assert all(c > 0.3 for c in result.stage2_correlation)
    # plain fine-tuning on the same clean rows keeps the backdoor (measured ASR 0.96)
    ft_acc, ft_asr = _scores(fine_tune(net, Xc, yc, epochs=30), Xte, yte)
    assert ft_asr >= 0.5 and ft_acc >= acc0 - 0.05


@pytest.mark.claims
@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_tsc_claim_other_seeds_and_fine_pruning(seed: int) -> None:
    net, Xc, yc, Xte, yte = _scenario("mlp", seed)
    acc0, _ = _scores(net, Xte, yte)
    acc, asr = _scores(
        tsc_purify(net, Xc, yc, t=0.5, epochs=50, batch_size=32, random_state=seed).model, Xte, yte
    )
    assert asr <= 0.15 and acc >= acc0 - 0.05
    pruned, _ = fine_prune(net, Xc, yc, seed=seed)
    assert _scores(pruned, Xte, yte)[1] > asr


@pytest.mark.claims
@pytest.mark.slow
def test_tsc_claim_cnn() -> None:
    net, Xc, yc, Xte, yte = _scenario("cnn")
    acc0, asr0 = _scores(net, Xte, yte)
    assert asr0 >= 0.9
    acc, asr = _scores(tsc_purify(net, Xc, yc, t=0.5, epochs=50, batch_size=32).model, Xte, yte)
    assert asr <= 0.2 and acc >= acc0 - 0.06


@pytest.mark.claims
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tsc_claim_cnn_with_batchnorm(seed: int) -> None:
    """The CNN with a BatchNorm2d after each convolution (Conv - BN - ReLU, as in a ResNet).

    Measured (backdoored -> TSC, clean accuracy / ASR): seed 0 0.993/1.000 -> 0.980/0.007,
    seed 1 0.987/0.998 -> 0.982/0.022, seed 2 0.987/1.000 -> 0.966/0.009; fine-tuning on the
    same clean rows keeps ASR 0.83-0.95. Without re-estimating the BatchNorm statistics of
    the curve points (a mutant), seed 0 ends at clean accuracy 0.873.
    """
    net, Xc, yc, Xte, yte = _scenario("cnn_bn", seed)
    acc0, asr0 = _scores(net, Xte, yte)
    assert asr0 >= 0.9
    result = tsc_purify(net, Xc, yc, t=0.5, epochs=50, batch_size=32, random_state=seed)
    acc, asr = _scores(result.model, Xte, yte)
    # chance 1/10; 0.15 is 4 SEs above it (536 triggered rows); accuracy SE on 597 rows ~0.006
    assert asr <= 0.15 and acc >= acc0 - 0.05
    assert all(c < 0 for c in result.stage1_correlation)
    assert _scores(fine_tune(net, Xc, yc, epochs=30), Xte, yte)[1] >= 0.5


def _bn_mlp(seed: int) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    nn = torch.nn
    return nn.Sequential(
        nn.Linear(64, 32),
        nn.BatchNorm1d(32),
        nn.ReLU(),
        nn.Linear(32, 24, bias=False),  # no bias: the BatchNorm's shift plays its part
        nn.BatchNorm1d(24),
        nn.ReLU(),
        nn.Linear(24, 10),
    )


def _net(kind: str, seed: int) -> torch.nn.Sequential:
    net = _bn_mlp(seed) if kind == "mlp_bn" else make_net(kind, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # non-trivial BatchNorm statistics and affine parameters
        for m in net.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.3)
                m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                m.weight.copy_(torch.rand(n, generator=gen) + 0.5)
                m.bias.copy_(torch.randn(n, generator=gen) * 0.2)
    return net.eval()


@pytest.mark.parametrize("kind", ["mlp", "cnn", "cnn_bn", "mlp_bn"])
@pytest.mark.parametrize("align", [True, False])
def test_permutation_keeps_the_function(kind: str, align: bool) -> None:
    X, _ = digits(image=kind.startswith("cnn"))
    a = _net(kind, seed=0)
    b = _net(kind, seed=1)
    Xt = torch.as_tensor(X[:200])
    permuted, corr = permute_to(a, b, Xt, align=align)
    with torch.no_grad():
        assert torch.allclose(permuted(Xt), b(Xt), atol=1e-5)
    # the weights did move (the identity is not what either search returns for two random nets)
    assert not torch.equal(permuted[0].weight, b[0].weight)
    _, corr_other = permute_to(a, b, Xt, align=not align)
    assert (corr > corr_other) == align


def test_self_alignment_matches_every_live_unit_and_unalignment_pushes_away() -> None:
    X, _ = digits()
    net = make_net("mlp", seed=3)
    Xt = torch.as_tensor(X[:300])
    _, corr = permute_to(net, net, Xt, align=True)
    # each unit is matched to itself: correlation ~1 (below 1 only for units of tiny variance,
    # through the 1e-4 the authors add to the denominator, and 0 for units dead on these rows)
    assert corr > 0.5
    _, corr_far = permute_to(net, net, Xt, align=False)
    assert corr_far < 0


def test_curve_end_points_and_midpoint_init() -> None:
    X, y = digits()
    a, b = make_net("mlp", seed=0), make_net("mlp", seed=1)
    Xt, yt = torch.as_tensor(X[:64]), torch.as_tensor(y[:64])
    gen = torch.Generator().manual_seed(0)
    kw = {"epochs": 2, "lr": 0.01, "batch_size": 32, "l2": 0.0, "generator": gen}
    start, _ = curve_point(a, b, Xt, yt, t=0.0, **kw)
    end, _ = curve_point(a, b, Xt, yt, t=1.0, **kw)
    for p, q in zip(start.parameters(), a.parameters(), strict=True):
        assert torch.allclose(p, q)
    for p, q in zip(end.parameters(), b.parameters(), strict=True):
        assert torch.allclose(p, q)
    # untrained (0 epochs), the bend is the midpoint: theta(1/2) = (A + B) / 2
    mid, _ = curve_point(a, b, Xt, yt, t=0.5, **{**kw, "epochs": 0})
    for p, q, r in zip(mid.parameters(), a.parameters(), b.parameters(), strict=True):
        assert torch.allclose(p, (q + r) / 2, atol=1e-6)


def test_batchnorm_statistics_permuted_with_the_units() -> None:
    """Each BatchNorm's four vectors follow its layer's units; a skipped one would break the function."""
    X, _ = digits(image=True)
    a, b = _net("cnn_bn", 0), _net("cnn_bn", 1)
    permuted, _ = permute_to(a, b, torch.as_tensor(X[:200]), align=True)
    for conv, bn in ((0, 1), (3, 4)):
        # recover the permutation from the conv bias, then check every BatchNorm vector
        new_bias, old_bias = permuted[conv].bias, b[conv].bias
        perm = torch.cdist(new_bias[:, None], old_bias[:, None]).argmin(1)
        assert torch.equal(new_bias, old_bias[perm]) and not torch.equal(perm, torch.arange(len(perm)))
        for name in ("weight", "bias", "running_mean", "running_var"):
            assert torch.equal(getattr(permuted[bn], name), getattr(b[bn], name)[perm]), name


def test_curve_points_reestimate_batchnorm_statistics() -> None:
    """The point taken on a curve gets BatchNorm statistics of the clean rows, not of an end point."""
    X, y = digits(image=True)
    Xt, yt = torch.as_tensor(X[:300]), torch.as_tensor(y[:300])
    a, b = _net("cnn_bn", 0), _net("cnn_bn", 1)
    gen = torch.Generator().manual_seed(0)
    mid, _ = curve_point(a, b, Xt, yt, t=0.5, epochs=1, lr=0.01, batch_size=64, l2=0.0, generator=gen)
    with torch.no_grad():
        pre = mid[0](Xt)  # the input of the first BatchNorm at the curve point
    # size-weighted average of the per-batch means of 5 batches (64 x 4 + 44) = the overall mean
    assert torch.allclose(mid[1].running_mean, pre.mean((0, 2, 3)), atol=1e-5)
    assert not torch.allclose(mid[1].running_mean, a[1].running_mean, atol=1e-2)
    # the one-pass estimate on all rows at once: mean and unbiased variance of the input
    update_batchnorm(mid, Xt, batch_size=300)
    assert torch.allclose(mid[1].running_mean, pre.mean((0, 2, 3)), atol=1e-5)
    assert torch.allclose(mid[1].running_var, pre.transpose(0, 1).reshape(16, -1).var(1), rtol=1e-4)
    assert mid[1].momentum == 0.1 and not mid.training  # restored


def test_tsc_runs_on_batchnorm_models() -> None:
    """End to end with BatchNorm1d, fine-tuning between rounds and a trailing one-row batch."""
    X, _ = digits()
    net = _net("mlp_bn", 0)
    before = copy.deepcopy(net.state_dict())
    result = tsc_purify(net, X[:33], rounds=2, epochs=2, batch_size=16, finetune_epochs=2)
    assert len(result.clean_loss) == 2 and all(np.isfinite(result.clean_loss))
    assert not result.model.training
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    bn = result.model[1]
    assert torch.isfinite(bn.running_var).all() and not torch.equal(bn.running_mean, net[1].running_mean)


def test_pseudo_labels_and_input_model_untouched() -> None:
    X, y = digits()
    net = train(make_net("mlp"), X[:600], y[:600], epochs=5)
    before = copy.deepcopy(net.state_dict())
    result = tsc_purify(net, X[600:700], rounds=1, epochs=3, batch_size=50)
    assert result.pseudo_labels and len(result.clean_loss) == 1
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert result.model is not net


def test_badnets_poison_and_trigger() -> None:
    X, y = digits()
    data = badnets_poison(X, y, rate=0.2, target=3, patch_size=3, value=0.5, random_state=1)
    assert data.poisoned.sum() == round(0.2 * len(y))
    assert np.all(data.y[data.poisoned] == 3) and np.all(y[data.poisoned] != 3)
    img = data.X[data.poisoned].reshape(-1, 8, 8)
    assert np.all(img[:, -3:, -3:] == 0.5)
    np.testing.assert_array_equal(data.X[~data.poisoned], X[~data.poisoned])
    assert add_trigger(np.zeros((2, 1, 5, 5)), patch_size=2)[:, 0, -2:, -2:].sum() == 8


def test_bad_input_names_the_argument() -> None:
    X, y = digits()
    net = make_net("mlp")
    nn = torch.nn
    with pytest.raises(ModelError, match="does not directly follow") as err:
        tsc_purify(nn.Sequential(nn.Linear(64, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Linear(8, 2)), X)
    assert err.value.argument == "model"
    with pytest.raises(ModelError, match="track_running_stats"):
        tsc_purify(
            nn.Sequential(nn.Linear(64, 8), nn.BatchNorm1d(8, track_running_stats=False), nn.Linear(8, 2)), X
        )
    with pytest.raises(ModelError, match="LayerNorm"):
        tsc_purify(nn.Sequential(nn.Linear(64, 8), nn.LayerNorm(8), nn.Linear(8, 2)), X)
    with pytest.raises(ModelError, match="grouped"):
        tsc_purify(nn.Sequential(nn.Conv2d(1, 4, 3), nn.Conv2d(4, 4, 3, groups=2)), X.reshape(-1, 1, 8, 8))
    with pytest.raises(ModelError, match="no bias"):
        tsc_purify(nn.Sequential(nn.Linear(64, 8, bias=False), nn.ReLU(), nn.Linear(8, 2)), X)
    with pytest.raises(ParameterError, match="batch_size") as err:
        tsc_purify(_bn_mlp(0), X[:10], batch_size=1)
    assert err.value.argument == "batch_size"
    with pytest.raises(ModelError, match="Sequential"):
        tsc_purify(torch.nn.Linear(64, 10), X)
    with pytest.raises(ModelError, match="at least two"):
        tsc_purify(torch.nn.Sequential(torch.nn.Linear(64, 10)), X)
    with pytest.raises(DataError, match="at least 2 row") as err:
        tsc_purify(net, X[:0])
    assert err.value.argument == "X_clean"
    with pytest.raises(DataError, match=r"\(n, 64\)"):
        tsc_purify(net, X.reshape(-1, 1, 8, 8))
    with pytest.raises(DataError, match=r"\(n, 1, height, width\)"):
        tsc_purify(make_net("cnn"), X)
    bad = X[:10].copy()
    bad[0, 0] = np.nan
    with pytest.raises(DataError, match="NaN"):
        tsc_purify(net, bad)
    with pytest.raises(DataError, match=r"0\.\.9") as err:
        tsc_purify(net, X[:10], y[:10] + 5)
    assert err.value.argument == "y_clean"
    with pytest.raises(DataError, match="one label per row"):
        tsc_purify(net, X[:10], y[:9])
    for bad_t in (0.0, 1.0, -0.5):
        with pytest.raises(ParameterError) as err:
            tsc_purify(net, X[:10], t=bad_t)
        assert err.value.argument == "t"
    with pytest.raises(DataError, match="patch_size"):
        add_trigger(X[:2], patch_size=9)
    with pytest.raises(DataError, match="square"):
        add_trigger(np.zeros((2, 10)))
    with pytest.raises(DataError, match="lower rate"):
        badnets_poison(X, np.zeros(len(X)) + 1, rate=1.0, target=1)
    with pytest.raises(DataError, match="target class"):
        attack_success_rate(net, X[:3], [0, 0, 0], target=0)


_HOSTILE = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=1, max_dims=4, max_side=6),
    elements=st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=25, deadline=None)
@given(X=_HOSTILE, y=_HOSTILE, t=st.floats(allow_nan=True), patch=st.integers(-1, 9))
def test_fuzz_only_trustlab_errors(X, y, t, patch) -> None:
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    calls = [
        lambda: tsc_purify(net, X, y, t=t, rounds=1, epochs=1),
        lambda: tsc_purify(net, X, rounds=1, epochs=1),
        lambda: add_trigger(X, patch_size=patch),
        lambda: badnets_poison(X, y, patch_size=patch),
        lambda: attack_success_rate(net, X, y, target=0, patch_size=patch),
    ]
    for call in calls:
        try:
            call()
        except TrustlabError:
            pass
