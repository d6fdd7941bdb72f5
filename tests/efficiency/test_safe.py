"""SAFE pruning (Lee et al., ICML 2025): the augmented-Lagrangian iteration, its baselines and sharpness."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from trustlab.efficiency import SAFEPruning, prunable_weights, sharpness, sparsity_of  # noqa: E402
from trustlab.efficiency._projection import importance  # noqa: E402
from trustlab.efficiency.safe import _project  # noqa: E402
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError  # noqa: E402
from trustlab.vision import accuracy, digits_split, make_classifier  # noqa: E402
from trustlab.vision.classifiers import one_thread  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return digits_split()


def test_projection_keeps_the_largest_magnitudes_globally():
    a = torch.tensor([[3.0, -0.5], [0.1, -4.0]])
    b = torch.tensor([2.0, -0.2, 0.3])
    pa, pb = _project([a, b], 3)
    assert torch.equal(pa, torch.tensor([[3.0, 0.0], [0.0, -4.0]]))
    assert torch.equal(pb, torch.tensor([2.0, 0.0, 0.0]))
    same = _project([a, b], 10)
    assert torch.equal(same[0], a) and torch.equal(same[1], b)


@settings(max_examples=25, deadline=None)
@given(
    v=st.lists(st.floats(-5, 5, allow_nan=False), min_size=6, max_size=6),
    p=st.lists(st.floats(0.01, 10), min_size=6, max_size=6),
    keep=st.integers(0, 6),
)
def test_generalised_projection_minimises_the_p_weighted_distance(v, p, keep):
    """SAFE+'s z-step: over every support of size ``keep``, none is closer to v in the P-metric."""
    vt, pt = torch.tensor(v, dtype=torch.float64), torch.tensor(p, dtype=torch.float64)
    a, b = _project([vt[:4].reshape(2, 2), vt[4:]], keep, [pt[:4].reshape(2, 2), pt[4:]])
    z = torch.cat([a.reshape(-1), b])
    assert int((z != 0).sum()) <= keep
    best = min(
        float((pt * (vt * torch.isin(torch.arange(6), torch.tensor(s, dtype=torch.long)) - vt) ** 2).sum())
        for s in itertools.combinations(range(6), keep)
    )
    assert float((pt * (z - vt) ** 2).sum()) == pytest.approx(best, abs=1e-9)


def test_wanda_metric_is_the_squared_norm_of_each_input_feature():
    """P = diag(A^T A): per Linear input column, per Conv2d (in-channel, kernel offset) patch entry."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
    lin = torch.nn.Linear(6 * 16, 5)
    net = torch.nn.Sequential(conv, torch.nn.ReLU(), torch.nn.Flatten(), lin)
    X = torch.rand(3, 4, 8, 8)
    p_conv, p_lin = importance(net, [conv, lin], "wanda", X, None)
    hidden = torch.relu(conv(X)).reshape(3, -1).detach()
    assert torch.allclose(p_lin, (hidden**2).sum(0).expand(5, -1), rtol=1e-5, atol=1e-6)  # + the ridge
    padded = torch.nn.functional.pad(X, (1, 1, 1, 1))
    for o in (0, 4):  # one output channel per group: group g reads input channels 2g, 2g + 1
        g = o // 3
        for c, i, j in itertools.product(range(2), range(3), range(3)):
            patch = padded[:, 2 * g + c, i : i + 8 : 2, j : j + 8 : 2]  # every position the kernel entry sees
            assert float(p_conv[o, c, i, j]) == pytest.approx(float((patch**2).sum()), rel=1e-5, abs=1e-6)
    # SNIP: P = (df/dw)^2 on the calibration batch
    y = torch.tensor([0, 3, 1])
    (g_conv,) = torch.autograd.grad(torch.nn.functional.cross_entropy(net(X), y), [conv.weight])
    assert torch.allclose(importance(net, [conv, lin], "snip", X, y)[0], g_conv**2, rtol=1e-4, atol=1e-9)
    assert importance(net, [conv, lin], "magnitude", X, y) is None


def test_obd_metric_is_hutchinsons_estimate_of_the_hessian_diagonal():
    """P = diag(grad^2 f) (Optimal Brain Damage): each probe's error v_i sum_{j != i} H_ij v_j is at
    most the off-diagonal row sum, so the estimate lies within it of the explicit Hessian's diagonal."""
    torch.manual_seed(0)
    lin1, lin2 = torch.nn.Linear(3, 4), torch.nn.Linear(4, 3)
    net = torch.nn.Sequential(lin1, torch.nn.Tanh(), lin2).double()
    X, y = torch.randn(20, 3, dtype=torch.float64), torch.randint(0, 3, (20,))
    with one_thread():  # a tiny net: threads only cost here
        est = torch.cat([p.reshape(-1) for p in importance(net, [lin1, lin2], "obd", X, y)])
    w1, w2 = lin1.weight.detach(), lin2.weight.detach()
    n1 = w1.numel()

    def loss(flat):
        a = torch.tanh(X @ flat[:n1].reshape(w1.shape).T + lin1.bias.detach())
        return torch.nn.functional.cross_entropy(a @ flat[n1:].reshape(w2.shape).T + lin2.bias.detach(), y)

    with one_thread():
        h = torch.autograd.functional.hessian(loss, torch.cat([w1.reshape(-1), w2.reshape(-1)]))
    diag = torch.diagonal(h)
    off = h.abs().sum(1) - diag.abs()
    ridge = 1e-8 * float(est.mean())
    assert torch.all((est - diag.clamp_min(0)).abs() <= off + ridge + 1e-12)
    assert float((est - diag.clamp_min(0)).abs().mean()) < 0.5 * float(off.mean())  # errors average out
    assert float(est.min()) >= 0  # negative curvature: no saliency, pruned first


def test_sparse_gradient_adds_the_gradient_at_the_projected_point(data):
    """SAFE+SG: with lam tiny and rho = 0 one x-step moves x by -lr (grad f(x) + grad f(proj(x))) under
    SGD, so it differs from ADMM's step exactly by the projected point's gradient."""
    X_tr, _, y_tr, _ = data
    X, y = X_tr[:64], y_tr[:64]
    base = make_classifier("mlp", width=4)
    kw = {"sparsity": 0.5, "method": "admm", "optimizer": "sgd", "epochs": 1, "batch_size": 64, "lr": 1e-2}
    plain = SAFEPruning(base, dual_interval=1000, **kw)
    sg = SAFEPruning(base, dual_interval=1000, sparse_gradient=True, **kw)
    # the final projection hides x_T: compare the pruned models' kept weights instead
    with one_thread():
        pw, sw = prunable_weights(plain.fit(X, y).model_), prunable_weights(sg.fit(X, y).model_)
    assert sg.sparsity_ == pytest.approx(0.5, abs=0.01)
    net = copy.deepcopy(base)
    weights = prunable_weights(net)
    keep = round(0.5 * sum(w.numel() for w in weights))
    with torch.no_grad():
        for w, p in zip(weights, _project([w.detach().clone() for w in weights], keep), strict=True):
            w.copy_(p)
    loss = torch.nn.functional.cross_entropy(net(torch.as_tensor(X)), torch.as_tensor(y))
    grads = torch.autograd.grad(loss, weights)
    for a, b, g in zip(pw, sw, grads, strict=True):
        both = (a != 0) & (b != 0)
        assert torch.allclose((a - b)[both], (1e-2 * g)[both], atol=1e-6)


def test_sharpness_equals_the_top_eigenvalue_of_the_explicit_hessian(data):
    X_tr, _, y_tr, _ = data
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 2, bias=False))
    X, y = X_tr[:40], y_tr[:40] % 2  # two classes: a well-separated top eigenvalue (4.8 vs 0.38)
    Xt, yt = torch.as_tensor(X).reshape(40, -1), torch.as_tensor(y)

    def top_eigenvalue(keep):
        def loss(w):
            return torch.nn.functional.cross_entropy(Xt @ w.T, yt)

        H = torch.autograd.functional.hessian(loss, net[1].weight.detach().clone(), vectorize=True)
        H = H.reshape(128, 128).double()[keep][:, keep]
        return float(torch.linalg.eigvalsh(H)[-1])

    everything = torch.ones(128, dtype=torch.bool)
    assert sharpness(net, X, y, n_iter=30) == pytest.approx(top_eigenvalue(everything), rel=1e-4)
    # pruned (zero) entries are outside the subnetwork: the measure is the kept block's
    with torch.no_grad():
        net[1].weight[:, 32:] = 0.0
    keep = torch.cat([torch.ones(2, 32), torch.zeros(2, 32)], dim=1).reshape(-1).bool()
    assert sharpness(net, X, y, n_iter=30) == pytest.approx(top_eigenvalue(keep), rel=1e-4)


@pytest.mark.parametrize("method", ["safe", "admm", "magnitude"])
def test_every_method_reaches_the_exact_sparsity_and_leaves_the_model_alone(data, method):
    X_tr, X_te, y_tr, _ = data
    base = make_classifier("mlp", width=4)
    before = [p.detach().clone() for p in base.parameters()]
    fitted = SAFEPruning(base, sparsity=0.75, method=method, epochs=1).fit(X_tr[:256], y_tr[:256])
    total = sum(w.numel() for w in prunable_weights(fitted.model_))
    assert fitted.sparsity_ == pytest.approx(1 - round(0.25 * total) / total, abs=1e-9)
    assert sparsity_of(fitted.model_) == fitted.sparsity_
    assert all(torch.equal(a, b) for a, b in zip(before, base.parameters(), strict=True))
    assert fitted.predict(X_te[:3]).shape == (3,)


@pytest.mark.parametrize("projection", ["wanda", "snip"])
def test_safe_plus_prunes_a_batch_norm_cnn_and_retunes_its_statistics(data, projection):
    """Any torch CNN: SAFE+ with the paper's SGD recipe reaches the sparsity; BN statistics are retuned."""
    X_tr, _, y_tr, _ = data
    torch.manual_seed(0)
    nn = torch.nn
    base = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(256, 10)
    )
    X, y = X_tr[:128], y_tr[:128]
    fit = SAFEPruning(base, sparsity=0.8, projection=projection, optimizer="sgd", lr=0.05, epochs=2).fit(X, y)
    total = sum(w.numel() for w in prunable_weights(fit.model_))
    assert fit.sparsity_ == pytest.approx(1 - round(0.2 * total) / total, abs=1e-9)
    assert 0 < fit.constraint_gap_ < 1
    assert float(base[1].running_mean.abs().sum()) == 0.0  # the user's model is untouched
    with torch.no_grad():
        h = fit.model_[0](torch.as_tensor(X))
    bn = fit.model_[1]
    assert bn.momentum == 0.1  # the user's setting is kept for later training
    assert torch.allclose(bn.running_mean, h.mean(dim=(0, 2, 3)), atol=1e-5)
    assert torch.allclose(bn.running_var, h.var(dim=(0, 2, 3), unbiased=True), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("method", ["safe", "magnitude"])
def test_layer_scope_prunes_every_layer_to_the_sparsity(data, method):
    X_tr, _, y_tr, _ = data
    fit = SAFEPruning(
        make_classifier("relu_mlp", width=4), sparsity=0.75, method=method, scope="layer", epochs=1
    )
    fit.fit(X_tr[:128], y_tr[:128])
    for w in prunable_weights(fit.model_):
        assert int((w == 0).sum()) == w.numel() - round(0.25 * w.numel())


def test_zero_sparsity_keeps_every_weight(data):
    X_tr, _, y_tr, _ = data
    fitted = SAFEPruning(make_classifier("mlp", width=4), sparsity=0.0, epochs=1).fit(X_tr[:128], y_tr[:128])
    assert fitted.sparsity_ == 0.0


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"sparsity": 1.0}, "sparsity"),
        ({"sparsity": -0.1}, "sparsity"),
        ({"rho": -1.0}, "rho"),
        ({"lam": 0.0}, "lam"),
        ({"method": "lottery"}, "method"),
        ({"dual_interval": 0}, "dual_interval"),
        ({"projection": "hessian"}, "projection"),
        ({"sparse_gradient": "yes"}, "sparse_gradient"),
        ({"optimizer": "rmsprop"}, "optimizer"),
        ({"scope": "row"}, "scope"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs, argument):
    with pytest.raises(ParameterError) as err:
        SAFEPruning(make_classifier("mlp", width=2), epochs=1, **kwargs).fit(
            np.zeros((4, 1, 8, 8)), [0, 1, 2, 3]
        )
    assert err.value.argument == argument


@settings(max_examples=15, deadline=None)
@given(sparsity=st.floats(allow_nan=False).filter(lambda s: not 0 <= s < 1))
def test_any_sparsity_outside_0_1_is_refused(sparsity):
    with pytest.raises(ParameterError, match="sparsity"):
        SAFEPruning(make_classifier("mlp", width=2), sparsity=sparsity).fit(
            np.zeros((4, 1, 8, 8)), [0, 1, 2, 3]
        )


def test_bad_models_and_images():
    with pytest.raises(ModelError, match=r"no torch\.nn\.Linear"):
        prunable_weights(torch.nn.Sequential(torch.nn.ReLU()))
    with pytest.raises(ModelError, match=r"torch\.nn\.Module"):
        SAFEPruning("vgg").fit(np.zeros((2, 1, 8, 8)), [0, 1])
    with pytest.raises(DataError, match="NaN"):
        SAFEPruning(make_classifier("mlp", width=2)).fit(np.full((2, 1, 8, 8), np.nan), [0, 1])
    with pytest.raises(NotFittedError):
        SAFEPruning(make_classifier("mlp", width=2)).predict(np.zeros((1, 1, 8, 8)))
    cnn = make_classifier("cnn", width=2)
    for call in (  # images of the wrong shape for the model: DataError naming X, not a torch traceback
        lambda: SAFEPruning(cnn, epochs=1).fit(np.zeros((4, 64)), [0, 1, 0, 1]),
        lambda: SAFEPruning(cnn, epochs=1).fit(np.zeros((4, 1, 4, 4)), [0, 1, 0, 1]),
        lambda: sharpness(cnn, np.zeros((4, 64)), [0, 1, 0, 1]),
    ):
        with pytest.raises(DataError, match="shape the model takes") as err:
            call()
        assert err.value.argument == "X"
    with pytest.raises(DataError) as err:  # label 10 for 10 logits
        sharpness(cnn, np.zeros((2, 1, 8, 8)), [0, 10])
    assert err.value.argument == "y"


@settings(max_examples=5, deadline=None)
@given(low=st.floats(-300, -1e-3), high=st.floats(1.001, 300), flip=st.booleans())
def test_pixels_outside_0_1_are_refused_with_the_fix(low, high, flip):
    X = np.zeros((2, 1, 8, 8))
    X[1, 0, 0, 0] = low if flip else high
    with pytest.raises(DataError, match="Scale the images") as err:
        SAFEPruning(make_classifier("mlp", width=2), epochs=1).fit(X, [0, 1])
    assert err.value.argument == "X"


def _noisy(y: np.ndarray, share: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = y.copy()
    flip = rng.random(len(y)) < share
    out[flip] = rng.integers(0, 10, int(flip.sum()))
    return out


def _discordant(a, b, X, y):
    """(images a gets right and b wrong, the reverse): the paired comparison on the same test set."""
    from trustlab.vision import predict

    ra, rb = predict(a, X) == y, predict(b, X) == y
    return int(np.sum(ra & ~rb)), int(np.sum(rb & ~ra))


@pytest.mark.claims
def test_safe_finds_a_flatter_sparse_minimum_than_admm(data):
    """The paper's Figure 1, small network: at equal sparsity SAFE's lambda_max is well below ADMM's."""
    X_tr, X_te, y_tr, y_te = data
    base = make_classifier("mlp", width=8, seed=0)
    fits = {
        m: SAFEPruning(base, sparsity=0.8, method=m, epochs=15, batch_size=32, dual_interval=8).fit(
            X_tr[:400], y_tr[:400]
        )
        for m in ("safe", "admm")
    }
    sharp = {m: sharpness(f.model_, X_tr[:400], y_tr[:400]) for m, f in fits.items()}
    assert sharp["safe"] < 0.5 * sharp["admm"]  # measured 23 vs 166 (seed 1: 25 vs 112)
    # both are working networks (chance is 0.1), so the comparison is between minima, not collapses
    assert min(f.score(X_te, y_te) for f in fits.values()) > 0.75


@pytest.mark.slow  # three 20-epoch prunings of a 64-unit MLP (two SAM passes per SAFE step): ~1 min
@pytest.mark.claims
def test_safe_is_more_accurate_than_magnitude_and_flatter_than_both(data):
    """95 % sparsity: SAFE beats magnitude pruning on test accuracy and has the smallest lambda_max."""
    X_tr, X_te, y_tr, y_te = data
    base = make_classifier("mlp", width=16)
    fits = {
        m: SAFEPruning(base, sparsity=0.95, method=m, epochs=20).fit(X_tr, y_tr)
        for m in ("safe", "admm", "magnitude")
    }
    b, c = _discordant(fits["safe"].model_, fits["magnitude"].model_, X_te, y_te)
    # McNemar: SAFE right where magnitude is wrong more often, by more than 2 sds of the paired count
    assert b - c > 2 * np.sqrt(b + c)
    sharp = {m: sharpness(f.model_, X_tr[:500], y_tr[:500]) for m, f in fits.items()}
    assert sharp["safe"] < 0.5 * sharp["admm"] and sharp["safe"] < 0.5 * sharp["magnitude"]
    assert all(f.sparsity_ == pytest.approx(0.95, abs=1e-3) for f in fits.values())


@pytest.mark.slow  # two 20-epoch prunings on noisy labels: ~40 s
@pytest.mark.claims
def test_safe_keeps_more_accuracy_than_magnitude_under_label_noise(data):
    """25 % of the training labels replaced at random: SAFE's pruned model is more accurate on clean ones."""
    X_tr, X_te, y_tr, y_te = data
    y_noisy = _noisy(y_tr, 0.25, seed=0)
    base = make_classifier("mlp", width=16)
    safe = SAFEPruning(base, sparsity=0.9, epochs=20).fit(X_tr, y_noisy)
    mag = SAFEPruning(base, sparsity=0.9, method="magnitude", epochs=20).fit(X_tr, y_noisy)
    b, c = _discordant(safe.model_, mag.model_, X_te, y_te)
    assert b - c > 2 * np.sqrt(b + c)
    assert accuracy(safe.model_, X_te, y_te) > accuracy(mag.model_, X_te, y_te)


@pytest.mark.slow  # four 30-epoch prunings of the lab CNN on 1,257 images (SAM doubles SAFE's steps): ~1 min
@pytest.mark.claims
def test_safe_and_safe_plus_prune_a_cnn_better_than_magnitude_and_flatter_than_admm(data):
    """The paper's image claim on a CNN at 98 % sparsity: SAFE and SAFE+ keep more test accuracy than
    magnitude pruning (torch.nn.utils.prune + masked fine-tuning) and land flatter than ADMM."""
    X_tr, X_te, y_tr, y_te = data
    base = make_classifier("cnn", width=8)
    runs = {
        "magnitude": {"method": "magnitude"},
        "admm": {"method": "admm"},
        "safe": {"method": "safe"},
        "safe+": {"method": "safe", "projection": "wanda"},
    }
    fits = {
        name: SAFEPruning(base, sparsity=0.98, epochs=30, **kw).fit(X_tr, y_tr) for name, kw in runs.items()
    }
    assert all(f.sparsity_ == pytest.approx(0.98, abs=1e-3) for f in fits.values())
    for name in ("safe", "safe+"):
        # McNemar on the 540 test images: right where magnitude is wrong more often, by > 2 paired sds
        b, c = _discordant(fits[name].model_, fits["magnitude"].model_, X_te, y_te)
        assert b - c > 2 * np.sqrt(b + c), name  # measured 0.793 and 0.817 vs 0.598
    sharp = {m: sharpness(f.model_, X_tr[:500], y_tr[:500]) for m, f in fits.items()}
    assert sharp["safe"] < 0.5 * sharp["admm"] and sharp["safe+"] < 0.5 * sharp["admm"]  # 10, 18 vs 83


@pytest.mark.slow  # two 30-epoch SAFE runs of the lab CNN with the paper's SGD recipe: ~40 s
@pytest.mark.claims
def test_the_papers_lambda_needs_the_papers_step_count(data):
    """With the paper's SGD recipe and lambda = 1e-4, 300 steps leave the iterate far from the constraint
    (the final projection then costs accuracy); lambda rescaled by the step ratio (1e-4 x 117,300 / 300)
    reaches a far better pruned network at the same step count (docs/efficiency/safe.md)."""
    X_tr, X_te, y_tr, y_te = data
    base = make_classifier("cnn", width=8)
    fits = {
        lam: SAFEPruning(
            base, sparsity=0.98, optimizer="sgd", lr=0.1, lam=lam, batch_size=128, epochs=30
        ).fit(X_tr, y_tr)
        for lam in (1e-4, 0.039)
    }
    assert fits[1e-4].constraint_gap_ > 0.6  # measured 0.72: the last projection cuts half of ||x||^2
    b, c = _discordant(fits[0.039].model_, fits[1e-4].model_, X_te, y_te)
    assert b - c > 2 * np.sqrt(b + c)  # measured 0.841 vs 0.550


@pytest.mark.slow  # trains a dense CNN and MLP (20 epochs each), then four short post-training runs: ~20 s
@pytest.mark.claims
def test_safe_plus_beats_safe_in_post_training_layerwise_pruning(data):
    """The paper's LLM setting in miniature (dense model, small calibration set, each layer pruned to the
    sparsity): SAFE+'s Wanda projection keeps more accuracy than SAFE's magnitude projection at 70 %."""
    from trustlab.vision import train_classifier

    X_tr, X_te, y_tr, y_te = data
    short = {"sparsity": 0.7, "scope": "layer", "epochs": 4, "lr": 1e-3, "dual_interval": 8, "batch_size": 32}
    for kind in ("cnn", "mlp"):
        dense = train_classifier(make_classifier(kind, width=8), X_tr, y_tr, epochs=20)
        fits = {
            proj: SAFEPruning(dense, projection=proj, **short).fit(X_tr[:256], y_tr[:256])
            for proj in ("magnitude", "wanda")
        }
        b, c = _discordant(fits["wanda"].model_, fits["magnitude"].model_, X_te, y_te)
        assert b - c > 2 * np.sqrt(b + c), kind  # measured: CNN 0.907 vs 0.635, MLP 0.902 vs 0.861


@pytest.mark.slow  # two CNN runs of 30 epochs (~15 s)
@pytest.mark.claims
def test_safe_sg_keeps_more_accuracy_than_safe_at_extreme_sparsity(data):
    """The paper's Section 4.5 (Table 4): adding the gradient at the projected point (SAFE+SG) helps
    most at extreme sparsity; on the lab CNN at 98 % it keeps more test accuracy than SAFE."""
    X_tr, X_te, y_tr, y_te = data
    base = make_classifier("cnn", width=8)
    safe = SAFEPruning(base, sparsity=0.98, epochs=30).fit(X_tr, y_tr)
    sg = SAFEPruning(base, sparsity=0.98, epochs=30, sparse_gradient=True).fit(X_tr, y_tr)
    assert sg.sparsity_ == pytest.approx(0.98, abs=1e-3)
    b, c = _discordant(sg.model_, safe.model_, X_te, y_te)
    # measured (one torch thread): 0.893 vs 0.778; seeds 1/2 of weights and batches: 0.872 vs 0.850,
    # 0.887 vs 0.813
    assert b - c > 2 * np.sqrt(b + c), (sg.score(X_te, y_te), safe.score(X_te, y_te))
