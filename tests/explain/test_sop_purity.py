"""Group purity (explain/sop_purity.py): the authors' entropy, precision, coverage and IoU of
explanation regions against known segments, bad input, and SOP vs per-feature attributions on
planted groups (tabular) and ink (digits)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab._adam import Adam  # noqa: E402
from trustlab.errors import DataError, ParameterError  # noqa: E402
from trustlab.explain.sop import SumOfParts  # noqa: E402
from trustlab.explain.sop_faithfulness import gradient_x_input  # noqa: E402
from trustlab.explain.sop_purity import (  # noqa: E402
    group_entropy,
    region_purity,
    sop_region,
    top_feature_region,
)
from trustlab.vision import digits_split, make_classifier, one_thread, train_classifier  # noqa: E402


def test_entropy_and_region_scores_by_hand() -> None:
    masks = np.array([[[1, 1, 0, 0], [0, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]]], dtype=bool)
    H = group_entropy(masks, [0, 0, 1, 2])
    np.testing.assert_allclose(H, [[0.0, 1.0, 1.5, 0.0]])
    # per-row segments: the second row's labels differ
    H2 = group_entropy(np.repeat(masks, 2, 0), [[0, 0, 1, 2], [0, 1, 2, 3]])
    np.testing.assert_allclose(H2[1], [1.0, 1.0, 2.0, 0.0])
    r = region_purity([[1, 1, 0, 0], [0, 0, 1, 1], [0, 1, 1, 0]], [1, 1, 1, 0])
    np.testing.assert_allclose(r.precision, [1.0, 0.5, 1.0])
    np.testing.assert_allclose(r.coverage, [2 / 3, 1 / 3, 2 / 3])
    np.testing.assert_allclose(r.iou, [2 / 3, 0.25, 2 / 3])
    np.testing.assert_allclose(r.entropy, [0.0, 1.0, 0.0])
    np.testing.assert_allclose(region_purity([[1, 1, 0, 0]], [2, 0, 0, 0], object_label=2).iou, [0.5])


def test_regions_follow_the_weights_and_the_share() -> None:
    class E:  # the fields sop_region reads
        masks = np.array([[[1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 1]]], dtype=bool)
        weights = np.array([[[0.1], [0.6], [0.3]]])
        predicted = np.array([0])

    np.testing.assert_array_equal(sop_region(E, share=0.2), [[0, 0, 1, 0, 0]])
    np.testing.assert_array_equal(sop_region(E, share=0.4), [[0, 0, 1, 1, 1]])
    np.testing.assert_array_equal(sop_region(E, share=1.0), [[1, 1, 1, 1, 1]])
    assert top_feature_region(np.arange(10.0)[None], share=0.2).nonzero()[1].tolist() == [8, 9]


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(DataError, match="masks"):
        group_entropy(np.ones((2, 3)), [0, 1, 1])
    with pytest.raises(DataError, match="segments"):
        group_entropy(np.ones((1, 2, 3), bool), [0, 1])
    with pytest.raises(DataError, match="segments"):
        region_purity([[1, 0]], [0.5, 1])
    with pytest.raises(DataError, match="regions"):
        region_purity([[2, 0]], [0, 1])
    with pytest.raises(ParameterError, match="share"):
        top_feature_region([[1.0, 2.0]], share=0)
    with pytest.raises(DataError, match="attributions"):
        top_feature_region([1.0, np.nan])
    with pytest.raises(DataError, match="explanation"):
        sop_region(np.ones((1, 2, 3)))
    with pytest.raises(ParameterError, match="object_label"):
        region_purity([[1, 0]], [0, 1], object_label=-1)


@pytest.fixture(scope="module")
def xor():
    """y = [x0 x1 > 0] on 10 uniform features: the true group is {x0, x1}, the rest is noise."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(2500, 10)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] > 0).astype(np.int64)
    nn = torch.nn
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))
    params = list(net.parameters())
    opt = Adam(params, lr=3e-3)
    Xt, yt = torch.as_tensor(X[:1000]), torch.as_tensor(y[:1000])
    with one_thread():
        for _ in range(200):
            opt.step(torch.autograd.grad(torch.nn.functional.cross_entropy(net(Xt), yt), params))
        sop = SumOfParts(net, n_epochs=2, random_state=0).fit(X[:1000], y[:1000])
        feat = SumOfParts(net, grouping="features", n_epochs=2, random_state=0).fit(X[:1000], y[:1000])
        Xe = X[1000:1300]
        G = gradient_x_input(net, Xe)
        return {"net": net, "X": Xe, "e": sop.explain(Xe), "ef": feat.explain(Xe), "G": G}


def _paired_gap(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    d = a - b
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))


@pytest.mark.claims
def test_claim_sop_groups_match_the_planted_group(xor) -> None:
    """The paper's purity metrics (IoU with the ground truth at k = 20%, group entropy) on a task
    whose true group is known: SOP's top group is {x0, x1} far more often than the top-20%
    features of gradient x input on the backbone or of a per-feature SANN.
    Measured (300 rows): IoU SOP 0.943, gradient x input 0.777, per-feature 0.566, random 0.15;
    entropy of the groups SOP uses 0.029 bits vs 0.316 over all its groups."""
    seg = np.r_[1, 1, np.zeros(8, int)]
    iou = {
        "sop": region_purity(sop_region(xor["e"]), seg).iou,
        "gxi": region_purity(top_feature_region(xor["G"]), seg).iou,
        "features": region_purity(sop_region(xor["ef"]), seg).iou,
    }
    assert iou["sop"].mean() > 0.9
    for other in ("gxi", "features"):
        gap, se = _paired_gap(iou["sop"], iou[other])
        assert gap > 3 * se and gap > 0.1
    e = xor["e"]
    H = group_entropy(e.masks, seg)
    used = e.weights[np.arange(len(H)), :, e.predicted] > 0
    assert H[used].mean() < 0.1 < H.mean()


def _train(net, X, y, epochs):
    opt = Adam(list(net.parameters()), lr=3e-3)

    def step(model, xb, yb):
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.step(torch.autograd.grad(loss, list(model.parameters())))

    return train_classifier(net, X, y, epochs=epochs, step=step)


@pytest.mark.slow  # trains a digits backbone and two SOP models (~2 s): kept off the fast run
@pytest.mark.claims
def test_claim_on_digits_sop_regions_lie_on_the_ink_but_less_than_gradient_x_input() -> None:
    """Digits have no segmentation; the stated ground truth is the ink (pixels > 0.5, 29% of
    them), the analogue of ImageNet-S's object masks. SOP's 20% region (its top groups) lies on
    the ink well above chance, and above a per-feature SANN's, but NOT above gradient x input's
    top 20% (0.63 vs 0.84 precision, 100 digits): not reproduced at this scale. Gradient x
    input is exactly 0 on blank pixels, so it can hardly pick background at all."""
    X_tr, X_te, y_tr, _ = digits_split()
    with one_thread():
        net = _train(make_classifier("relu_mlp", width=16, seed=0), X_tr, y_tr, 10)
        sop = SumOfParts(net, n_epochs=2, random_state=0).fit(X_tr, y_tr)
        feat = SumOfParts(net, grouping="features", n_epochs=2, random_state=0).fit(X_tr, y_tr)
        X = X_te[:100]
        e, ef, G = sop.explain(X), feat.explain(X), gradient_x_input(net, X)
    ink = (X > 0.5).astype(int)
    prec = {
        "sop": region_purity(sop_region(e), ink).precision,
        "features": region_purity(sop_region(ef), ink).precision,
        "gxi": region_purity(top_feature_region(G), ink).precision,
    }
    chance = ink.reshape(100, -1).mean(1)
    for lower in (chance, prec["features"]):
        gap, se = _paired_gap(prec["sop"], lower)
        assert gap > 3 * se
    gap, se = _paired_gap(prec["gxi"], prec["sop"])
    assert gap > 3 * se  # measured 0.84 vs 0.63: post-hoc wins here
