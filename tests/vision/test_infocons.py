"""InfoCons (row 000-07): critical subsets of a point-cloud classifier, beside CP and PCSAM."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError, TrustlabError  # noqa: E402
from trustlab.vision import (  # noqa: E402
    InfoCons,
    critical_point_scores,
    find_point_layer,
    make_pointnet,
    make_shape_clouds,
    part_precision,
    pcsam_scores,
    point_cloud_logits,
    shape_pointnet,
    subset_faithfulness,
    top_k_points,
)

N_EVAL, K = 200, 16


@pytest.fixture(scope="module")
def net():
    return shape_pointnet()


@pytest.fixture(scope="module")
def fitted(net):
    X_fit, _, _ = make_shape_clouds(32, n_points=64, random_state=2)
    return InfoCons(net, epochs=5, lr=3e-2).fit(X_fit)


@pytest.fixture(scope="module")
def held_out():
    return make_shape_clouds(N_EVAL, n_points=64, random_state=3)


@pytest.fixture(scope="module")
def scores(net, fitted, held_out):
    X = held_out[0]
    return {
        "infocons": fitted.score_points(X),
        "cp": critical_point_scores(net, X),
        "pcsam": pcsam_scores(net, X),
    }


@pytest.fixture(scope="module")
def faith(net, held_out, scores):
    X, _, part = held_out
    out = {name: subset_faithfulness(net, X, s, K) for name, s in scores.items()}
    out["truth"] = subset_faithfulness(net, X, part.astype(float), K)
    return out


def _paired_gap(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Mean of a - b and its standard error over the clouds (paired)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))


def _per_cloud_precision(s: np.ndarray, part: np.ndarray) -> np.ndarray:
    return np.array([part_precision(s[i : i + 1], part[i : i + 1]) for i in range(len(s))])


@pytest.mark.claims
def test_claim_infocons_subsets_are_more_faithful_than_cp_and_pcsam(net, held_out, scores, faith):
    """Paper's headline (critical-point dropping): at equal size, dropping InfoCons' subset
    changes the prediction far more often than dropping CP's or PCSAM's, and the subset
    lands on the planted part. Gaps must exceed 3 paired standard errors over 200 clouds.
    The issue's "prediction kept with the subset" is not asserted on this model: here it is below
    a random subset's (test_keep_favours_max_pool_critical_points_on_pointnet), because the
    model also reads the body; it is asserted on a model for which the part is sufficient
    (test_claim_subset_keeps_the_prediction_where_the_part_suffices)."""
    X, y, part = held_out
    assert (point_cloud_logits(net, X).argmax(1).numpy() == y).mean() > 0.9  # the model reads the part
    for base in ("cp", "pcsam"):
        gap, se = _paired_gap(faith[base].survived, faith["infocons"].survived)
        assert gap > max(3 * se, 0.2), (base, faith[base].drop, faith["infocons"].drop)
        prec_gap, prec_se = _paired_gap(
            _per_cloud_precision(scores["infocons"], part), _per_cloud_precision(scores[base], part)
        )
        assert prec_gap > max(3 * prec_se, 0.3), base
    # as faithful as the planted part itself (within 3 SE), and mostly on it
    gap, se = _paired_gap(faith["infocons"].survived, faith["truth"].survived)
    assert abs(gap) <= 3 * se + 1 / N_EVAL
    assert part_precision(scores["infocons"], part) > 0.85
    # a random subset of the same size almost never changes the prediction
    rand = subset_faithfulness(net, X, np.random.default_rng(0).random(part.shape), K)
    assert rand.drop > 0.85 > faith["infocons"].drop + 0.4


def test_keep_favours_max_pool_critical_points_on_pointnet(net, held_out, faith):
    """Recorded, not the paper's claim: keeping only CP's subset reproduces PointNet's pooled
    feature, so CP keeps every prediction; keeping only the part (InfoCons' subset, or the
    planted truth) drops the body the model also reads, and keeps about half: *fewer* than a
    random subset of the same size (16 points spread over part and body keep 0.70 of the
    predictions, mean of 10 draws; InfoCons 0.505, paired gap 0.198 +- 0.043 over 200 clouds).
    "Prediction kept with the subset" does not reproduce on this model: it is a property of the
    model (the part is not sufficient for it), not of the explainer; on a model for which the
    part is sufficient it holds (test_claim_subset_keeps_the_prediction_where_the_part_suffices)."""
    cp, ic, truth = faith["cp"], faith["infocons"], faith["truth"]
    assert cp.keep > 0.95
    assert abs(ic.keep - truth.keep) < 0.15 and ic.keep < cp.keep
    X, _, part = held_out
    draws = [
        subset_faithfulness(net, X, np.random.default_rng(r).random(part.shape), K, random_state=r).kept
        for r in range(10)
    ]
    random_keep = np.mean(draws, axis=0)  # per cloud: share of 10 random subsets that keep it
    gap, se = _paired_gap(random_keep, ic.kept)
    assert gap > 3 * se, (random_keep.mean(), ic.keep)


def _keep_part_and_some_body(X, part, rng, p=0.5):
    """Augmentation: with probability ``p`` a cloud keeps its part and a random share of its
    body (0 to all of it); the removed points are refilled with copies of kept ones, as
    ``subset_faithfulness`` does, so the part alone becomes sufficient for the label."""
    out = X.copy()
    n_points = X.shape[1]
    for i in range(len(X)):
        if rng.random() >= p:
            continue
        body = rng.permutation(np.flatnonzero(~part[i]))
        keep = np.concatenate([np.flatnonzero(part[i]), body[: rng.integers(len(body) + 1)]])
        out[i] = X[i, np.concatenate([keep, keep[rng.integers(len(keep), size=n_points - len(keep))]])]
    return out


def _part_sufficient_pointnet():
    """The shipped PointNet fine-tuned 20 epochs (Adam 1e-3, batches of 16) on its 800 training
    clouds with ``_keep_part_and_some_body``: the planted part alone then keeps the prediction.
    About 10 s on one thread."""
    from trustlab.vision.classifiers import one_thread

    X, y, part = make_shape_clouds(800, n_points=64, random_state=0)
    net = shape_pointnet()
    rng, gen = np.random.default_rng(0), torch.Generator().manual_seed(0)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    yt = torch.as_tensor(y)
    with one_thread():
        net.train()
        for _ in range(20):
            Xa = torch.as_tensor(_keep_part_and_some_body(X, part, rng))
            order = torch.randperm(len(X), generator=gen)
            for start in range(0, len(X), 16):
                idx = order[start : start + 16]
                opt.zero_grad()
                torch.nn.functional.cross_entropy(net(Xa[idx]), yt[idx]).backward()
                opt.step()
    return net.eval()


@pytest.mark.claims
@pytest.mark.slow  # 6 s quiet, ~15 s under load: a fine-tune, InfoCons, 14 faithfulness passes
def test_claim_subset_keeps_the_prediction_where_the_part_suffices(held_out):
    """The issue's "prediction kept with the subset, lost without it", where it is testable: on
    a PointNet for which the planted part alone keeps the prediction (fine-tuned with body
    subsampling), keeping only InfoCons' 16 of 64 points keeps it as often as keeping the
    planted part (0.955 vs 0.96) and far more often than a random 16-point subset (0.68, mean
    of 10 draws; paired gap 0.27 +- 0.024 over 200 clouds), and dropping them still loses it
    (0.23 vs CP 0.695, PCSAM 0.79, random 0.97). On the shipped PointNet, which also reads the
    body, the keep half fails (test_keep_favours_max_pool_critical_points_on_pointnet)."""
    net = _part_sufficient_pointnet()
    X, y, part = held_out
    assert (point_cloud_logits(net, X).argmax(1).numpy() == y).mean() > 0.9
    X_fit, _, _ = make_shape_clouds(32, n_points=64, random_state=2)
    s = InfoCons(net, epochs=5, lr=3e-2).fit(X_fit).score_points(X)
    ic = subset_faithfulness(net, X, s, K)
    truth = subset_faithfulness(net, X, part.astype(float), K)
    assert truth.keep > 0.9  # the premise: on this model the part is sufficient
    draws = [
        subset_faithfulness(net, X, np.random.default_rng(r).random(part.shape), K, random_state=r)
        for r in range(10)
    ]
    random_kept = np.mean([d.kept for d in draws], axis=0)
    random_survived = np.mean([d.survived for d in draws], axis=0)
    # kept with the subset: above random beyond 3 SE (and 0.15), level with the planted part
    gap, se = _paired_gap(ic.kept, random_kept)
    assert gap > max(3 * se, 0.15), (ic.keep, random_kept.mean())
    gap, se = _paired_gap(ic.kept, truth.kept)
    assert abs(gap) <= 3 * se + 1 / N_EVAL, (ic.keep, truth.keep)
    # lost without it: below random, CP and PCSAM beyond 3 SE (and 0.2)
    gap, se = _paired_gap(random_survived, ic.survived)
    assert gap > max(3 * se, 0.5), (random_survived.mean(), ic.drop)
    for base in (critical_point_scores(net, X), pcsam_scores(net, X)):
        gap, se = _paired_gap(subset_faithfulness(net, X, base, K).survived, ic.survived)
        assert gap > max(3 * se, 0.2)
    assert part_precision(s, part) > 0.85


def test_scores_shape_range_and_concepts(fitted, held_out):
    X = held_out[0][:10]
    s = fitted.score_points(X)
    assert s.shape == (10, 64) and np.all((s > 0) & (s < 1))
    c = fitted.concepts(X, n_concepts=4)
    assert c.shape == (10, 64) and np.all(np.bincount(c.ravel()) == 10 * 16)
    top = top_k_points(s, 16)
    assert np.all(c[np.arange(10)[:, None], top] == 0)  # concept 0 = the top 16
    assert fitted.layer_ == "features" and fitted.points_axis_ == 1 and np.isfinite(fitted.loss_)


def test_iter_mode_refines_and_is_seeded(net, fitted, held_out):
    X, _, part = held_out
    one_pass = fitted.score_points(X[:12])
    it = copy.copy(fitted).set_params(n_iter=5)
    a = it.score_points(X[:12])
    b = it.score_points(X[:12])
    assert np.array_equal(a, b) and not np.allclose(a, one_pass)
    assert part_precision(a, part[:12]) > 0.7


class _ChannelsFirstNet(torch.nn.Module):
    """A PointNet written with Conv1d on (batch, 3, n_points): features are (batch, d, n)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Sequential(
            torch.nn.Conv1d(3, 16, 1), torch.nn.ReLU(), torch.nn.Conv1d(16, 32, 1)
        )
        self.head = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.conv(x.transpose(1, 2)).max(dim=2).values)


def test_any_classifier_with_channels_first_features():
    model = _ChannelsFirstNet()  # left in training mode with gradients on: fit must not change that
    X, _, _ = make_shape_clouds(12, n_points=20, random_state=0)
    assert find_point_layer(model, X) == ("conv", 2)
    assert find_point_layer(model, X, "conv.0") == ("conv.0", 2)
    s = InfoCons(model, epochs=1, hidden=8, n_iter=2).fit(X).score_points(X)
    assert s.shape == (12, 20)
    assert model.training and all(p.requires_grad and p.grad is None for p in model.parameters())
    cp = critical_point_scores(model, X)
    assert np.allclose(cp.sum(axis=1), 1.0)  # every channel has one winner
    assert pcsam_scores(model, X).shape == (12, 20)
    assert model.training


def test_max_pool_critical_points_match_pointnet_definition(net, held_out):
    """Keeping exactly the CP set reproduces the pooled feature, hence the logits."""
    X = held_out[0][:5]
    cp = critical_point_scores(net, X)
    for i in range(5):
        keep = np.flatnonzero(cp[i] > 0)
        full = point_cloud_logits(net, X[i : i + 1])
        sub = point_cloud_logits(net, X[i : i + 1, keep])
        assert torch.allclose(full, sub, atol=1e-6)


def test_pcsam_sign_matches_a_finite_difference(net, held_out):
    """Moving a high-PCSAM point towards the median raises the loss (to first order)."""
    X = held_out[0][:1].astype(np.float64)
    s = pcsam_scores(net, X, alpha=0.0)  # alpha 0: -dL/dr * r
    i = int(np.argmax(s))
    c = np.median(X[0], axis=0)
    target = point_cloud_logits(net, X).argmax(1)

    def loss(x):
        return float(torch.nn.functional.cross_entropy(point_cloud_logits(net, x), target))

    moved = X.copy()
    moved[0, i] = c + (X[0, i] - c) * 0.99  # shrink r_i by 1%
    assert loss(moved) > loss(X)


def test_docs_example_runs(run_docs_example):
    run_docs_example(Path(__file__).resolve().parents[2] / "docs" / "vision" / "infocons.md")


# --- bad input ------------------------------------------------------------------------------


def test_bad_inputs_raise_trustlab_errors(net, fitted, held_out):
    X = held_out[0][:4]
    with pytest.raises(NotFittedError):
        InfoCons(net).score_points(X)
    with pytest.raises(ModelError, match="model"):
        InfoCons("not a model").fit(X)
    with pytest.raises(ParameterError, match="beta"):
        InfoCons(net, beta=0.0).fit(X)
    with pytest.raises(ParameterError, match="layer"):
        InfoCons(net, layer="nope").fit(X)
    with pytest.raises(ModelError, match="layer"):
        find_point_layer(net, X, "head")  # (batch, d): not per point
    with pytest.raises(DataError, match="X"):
        fitted.score_points(np.zeros((0, 64, 3)))
    with pytest.raises(DataError, match="X"):
        fitted.score_points(np.full((2, 64, 3), np.nan))
    with pytest.raises(ParameterError, match="n_concepts"):
        fitted.concepts(X, n_concepts=0)
    s = fitted.score_points(X)
    with pytest.raises(ParameterError, match="k"):
        subset_faithfulness(net, X, s, 64)
    with pytest.raises(DataError, match="scores"):
        subset_faithfulness(net, X, s[:, :10], 4)
    with pytest.raises(DataError, match="part_mask"):
        part_precision(s, np.ones((4, 64)))
    with pytest.raises(ParameterError, match="k"):
        top_k_points(s, 65)
    with pytest.raises(ParameterError, match="alpha"):
        pcsam_scores(net, X, alpha=float("nan"))


_TINY = make_pointnet(width=2)


@settings(max_examples=15, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=4))
def test_malformed_clouds_are_rejected(shape):
    X = np.zeros(shape)
    if X.ndim == 3 and X.shape[2] == 3 and X.shape[0] > 0 and X.shape[1] >= 2:
        return
    with pytest.raises(TrustlabError, match="X"):
        critical_point_scores(_TINY, X)
    with pytest.raises(TrustlabError, match="X") as err:  # empty clouds or batches: before any training
        InfoCons(_TINY, epochs=1).fit(X)
    assert err.value.argument == "X"
