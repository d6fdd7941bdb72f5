"""S&I, GAIA-Z, MSP and energy OOD detectors (trustlab.security.ood) and their metrics."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError, TrustlabError  # noqa: E402
from trustlab.security._nets import digits, far_ood, make_net, predict, train  # noqa: E402
from trustlab.security._ood_layers import _capture, attribution_path, split_integrate_ratios  # noqa: E402
from trustlab.security.ood import (  # noqa: E402
    EnergyDetector,
    GAIADetector,
    MSPDetector,
    SplitIntegrateDetector,
    fpr_at_tpr,
    ood_metrics,
)


def _auroc_se(auc: float, n1: int, n2: int) -> float:
    """Hanley-McNeil standard error of an AUROC from n1 OOD and n2 ID rows."""
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    return math.sqrt((auc * (1 - auc) + (n1 - 1) * (q1 - auc**2) + (n2 - 1) * (q2 - auc**2)) / (n1 * n2))


def _delong_diff_se(id_a, ood_a, id_b, ood_b) -> float:
    """DeLong standard error of AUROC(a) - AUROC(b), two scores of the same rows (paired)."""

    def components(s_id, s_ood):
        s_id, s_ood = np.asarray(s_id)[None, :], np.asarray(s_ood)[:, None]
        psi = (s_ood > s_id) + 0.5 * (s_ood == s_id)  # OOD positive: higher = more OOD
        return psi.mean(1), psi.mean(0)  # per OOD row, per ID row

    v10a, v01a = components(id_a, ood_a)
    v10b, v01b = components(id_b, ood_b)
    s10, s01 = np.cov(np.c_[v10a, v10b].T), np.cov(np.c_[v01a, v01b].T)
    cov = s10 / len(v10a) + s01 / len(v01a)
    return math.sqrt(max(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1], 0.0))


def _split(image: bool):
    X, y = digits(image=image)
    perm = np.random.default_rng(0).permutation(len(X))
    X, y = X[perm], y[perm]
    ind = y < 6
    X_id, y_id, X_out = X[ind], y[ind], X[~ind]
    n = len(X_id) // 2
    noise = np.random.default_rng(1).normal(0, 0.5, X_id[n:].shape)
    corrupted = np.clip(X_id[n:] + noise, 0, 1).astype(np.float32)
    return X_id[:n], y_id[:n], X_id[n:], y_id[n:], X_out[: len(X_id) - n], corrupted


def _far(image: bool, n: int):
    """Far-OOD: 8x8 grey patches of scikit-learn's two bundled photographs (digits' scale)."""
    return far_ood(n, "patches", image=image, seed=0)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Torch on one thread: the tests share 2 cores, and oversubscription triples the time."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def mlp_setup():
    X_tr, y_tr, X_te, y_te, X_out, X_noise = _split(image=False)
    net = train(make_net("mlp", n_classes=6), X_tr, y_tr, epochs=30)
    return net, X_tr, X_te, y_te, X_out, X_noise


@pytest.fixture(scope="module")
def cnn_setup():
    X_tr, y_tr, X_te, y_te, X_out, X_noise = _split(image=True)
    net = train(make_net("cnn", n_classes=6), X_tr, y_tr, epochs=30)
    return net, X_tr, X_te, y_te, X_out, X_noise


def _metrics(det, X_tr, X_te, X_out):
    det.fit(X_tr)
    return ood_metrics(det.score_samples(X_te), det.score_samples(X_out))


@pytest.mark.claims
def test_claim_heldout_classes_mlp(mlp_setup):
    """ID digits 0-5 vs OOD digits 6-9 on an MLP: what we measure (S&I does not beat MSP here).

    Measured (seed 0, 542 ID / 542 OOD rows): MSP AUROC 0.963 FPR95 0.19, energy 0.975 /
    0.16, GAIA-Z 0.899 / 0.40, S&I 0.899 / 0.40. A difference of two AUROCs must exceed
    3 * sqrt(2) Hanley-McNeil SEs (independence bound; the paired SE is smaller).
    """
    net, X_tr, X_te, y_te, X_out, _ = mlp_setup
    assert (predict(net, X_te) == y_te).mean() > 0.95
    si = _metrics(SplitIntegrateDetector(net), X_tr, X_te, X_out)
    gaia = _metrics(GAIADetector(net), X_tr, X_te, X_out)
    msp = _metrics(MSPDetector(net), X_tr, X_te, X_out)
    se = _auroc_se(si.auroc, si.n_ood, si.n_id)
    assert si.n_id == si.n_ood == len(X_te)
    assert si.auroc > 0.85 > 0.5 + 3 * se  # detects held-out classes well above chance
    assert msp.auroc > si.auroc + 3 * math.sqrt(2) * se  # on an MLP, MSP is better than the gradient patterns
    assert abs(si.auroc - gaia.auroc) < 0.02  # the adversarial path barely moves MLP patterns
    assert si.fpr95 < 0.6


@pytest.mark.claims
def test_claim_corrupted_inputs_cnn(cnn_setup):
    """ID digits vs the same digits under N(0, 0.5) noise on a CNN: S&I beats MSP and energy.

    Measured (seed 0): S&I AUROC 0.909 FPR95 0.37, GAIA-Z 0.909 / 0.35, MSP 0.806 / 0.60,
    energy 0.857 / 0.49 (542 ID and 542 corrupted rows). The FPR95 margins (0.10, 0.06)
    are about 3 binomial SEs of a difference of two FPRs near 0.4 on 542 rows. This one
    depends on the model seed: over seeds 0-3 S&I scores 0.538-0.943 here and beats both
    baselines in three (docs/security/ood.md, hypothesis (c)).
    """
    net, X_tr, X_te, _, _, X_noise = cnn_setup
    si = _metrics(SplitIntegrateDetector(net), X_tr, X_te, X_noise)
    gaia = _metrics(GAIADetector(net), X_tr, X_te, X_noise)
    msp = _metrics(MSPDetector(net), X_tr, X_te, X_noise)
    energy = _metrics(EnergyDetector(net), X_tr, X_te, X_noise)
    se = _auroc_se(si.auroc, si.n_ood, si.n_id)
    margin = 3 * math.sqrt(2) * se
    assert si.auroc > msp.auroc + margin
    assert si.auroc > energy.auroc + margin
    assert si.fpr95 < msp.fpr95 - 0.1 and si.fpr95 < energy.fpr95 - 0.06
    assert si.auroc >= gaia.auroc - 0.02  # no worse than its baseline


@pytest.mark.claims
def test_claim_far_ood_cnn(cnn_setup):
    """ID digits vs far-OOD photo patches on a CNN: S&I beats MSP and energy (the paper's setting).

    The paper's OOD sets are other data sets (SVHN, textures, Places), not held-out classes.
    Measured (seed 0, 542 ID rows, 542 patches): S&I AUROC 0.998 FPR95 0.013, GAIA-Z
    0.998 / 0.011, MSP 0.855 / 0.49, energy 0.927 / 0.24 (seeds 1-3 in the next test).
    AUROC margins: 3 paired (DeLong) standard errors of the difference; FPR95 margin 0.1
    is 5 binomial SEs of a difference of two FPRs <= 0.25 on 542 rows.
    """
    net, X_tr, X_te, _, _, _ = cnn_setup
    _assert_si_beats_logit_baselines_far(net, X_tr, X_te, _far(True, len(X_te)))


def _assert_si_beats_logit_baselines_far(net, X_tr, X_te, X_far):
    dets = {
        "si": SplitIntegrateDetector(net),
        "msp": MSPDetector(net),
        "energy": EnergyDetector(net),
        "gaia": GAIADetector(net),
    }
    s = {k: (d.fit(X_tr).score_samples(X_te), d.score_samples(X_far)) for k, d in dets.items()}
    m = {k: ood_metrics(*v) for k, v in s.items()}
    assert m["si"].auroc > 0.95 and m["si"].fpr95 < 0.15
    for base in ("msp", "energy"):
        assert m["si"].auroc > m[base].auroc + 3 * _delong_diff_se(*s["si"], *s[base]), base
        assert m["si"].fpr95 < m[base].fpr95 - 0.1, base
    assert abs(m["si"].auroc - m["gaia"].auroc) < 0.01  # at alpha = 1/255 the path collapses


@pytest.mark.claims
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.slow  # second seeds (~3 s CPU each); seed 0 is the fast claim
def test_claim_far_ood_cnn_other_seeds(seed):
    """Seeds 1-3 (model init and batch order): S&I 0.999/0.989/0.977 vs energy 0.954/0.893/0.949."""
    X_tr, y_tr, X_te, _, _, _ = _split(image=True)
    net = train(make_net("cnn", n_classes=6, seed=seed), X_tr, y_tr, epochs=30, seed=seed)
    _assert_si_beats_logit_baselines_far(net, X_tr, X_te, _far(True, len(X_te)))


def test_default_step_barely_moves_the_path(cnn_setup):
    """Hypothesis (a): alpha = 1/255 moves the split features by ~0.3% of their spread.

    Measured on the CNN (200 ID rows): mean |h_1 - h_0| / std(h_0) 0.003 and 0.1% of the
    integrated pattern differs from the clean one at alpha = 1/255 (so S&I equals GAIA-Z);
    at alpha = 0.1 the move is 0.09 std and 3.4% of the pattern changes.
    """
    net, _, X_te, _, _, _ = cnn_setup
    x = torch.as_tensor(X_te[:200])
    layers = [("0", net[0]), ("2", net[2])]
    _, feats = _capture(net, layers, x)

    def move(alpha):
        rel, changed = [], []
        for name, module in layers:
            path = attribution_path(net, module, x, feats[name], steps=2, alpha=alpha, loss="ce")
            (h0, _, g0), (h1, _, g1) = path
            rel.append(float((h1 - h0).abs().mean() / h0.std()))
            changed.append(float(((g0 * g1 != 0) != (g0 != 0)).float().mean()))
        return np.mean(rel), np.mean(changed)

    rel, changed = move(1 / 255)
    assert rel < 0.01 and changed < 0.005
    rel, changed = move(0.1)
    assert rel > 0.05 and changed > 0.01


def test_add_integration_equals_gaia(mlp_setup, cnn_setup):
    """With ReLU after each split, a unit with zero gradient is inactive, so the CE step leaves
    it (sign(0) = 0) where it is: its gradient stays zero, and the union of patterns that
    ``integration="add"`` takes is the clean pattern. S&I-add is GAIA-Z (the authors' ImageNet
    run uses "add")."""
    for net, X_tr, X_te, *_ in (mlp_setup, cnn_setup):
        gaia = GAIADetector(net).fit(X_tr).score_samples(X_te[:100])
        for alpha in (1 / 255, 0.1, 1.0):
            det = SplitIntegrateDetector(net, alpha=alpha, steps=3, integration="add").fit(X_tr)
            np.testing.assert_allclose(det.score_samples(X_te[:100]), gaia, atol=1e-7)


def test_multiply_integration_is_a_subset_of_the_clean_pattern(cnn_setup):
    """Multiplying gradients along the path can only turn non-zeros into zeros."""
    net, _, X_te, _, _, _ = cnn_setup
    layers = [("0", net[0]), ("2", net[2])]
    x = torch.as_tensor(X_te[:64])
    clean = split_integrate_ratios(net, layers, x, steps=1, alpha=0.1, loss="ce", integration="multiply")
    mult = split_integrate_ratios(net, layers, x, steps=3, alpha=0.1, loss="ce", integration="multiply")
    add = split_integrate_ratios(net, layers, x, steps=3, alpha=0.1, loss="ce", integration="add")
    assert clean.shape == (64, 16 + 32)
    assert torch.all(mult <= clean + 1e-7)
    assert torch.any(mult < clean - 1e-7)  # the adversarial path changes the pattern
    assert torch.all(add >= mult - 1e-7)


def test_attribution_path_moves_away_from_the_prediction(cnn_setup):
    """Each adversarial step raises the cross-entropy to the clean prediction (and keeps h_0)."""
    net, _, X_te, _, _, _ = cnn_setup
    x = torch.as_tensor(X_te[:64])
    with torch.no_grad():
        h0 = net[0](x)
        y_hat = net(x).argmax(1)
    path = attribution_path(net, net[0], x, h0, steps=4, alpha=0.05, loss="ce")
    assert len(path) == 4 and torch.equal(path[0][0], h0)
    ce = [torch.nn.functional.cross_entropy(y, y_hat).item() for _, y, _ in path]
    assert ce[0] < ce[1] < ce[2] < ce[3]
    for (h, _, _), (h_next, _, _) in itertools.pairwise(path):
        step = (h_next - h).abs()  # alpha * |sign(grad)|: 0 where the gradient is 0 (inactive units)
        assert torch.all((step < 1e-6) | ((step - 0.05).abs() < 1e-6)) and (step > 0).any()


def test_scores_are_per_row_and_batch_independent(mlp_setup):
    net, X_tr, X_te, _, _, _ = mlp_setup
    det = SplitIntegrateDetector(net, batch_size=7).fit(X_tr)
    full = SplitIntegrateDetector(net).fit(X_tr).score_samples(X_te[:30])
    np.testing.assert_allclose(det.score_samples(X_te[:30]), full, atol=1e-6)
    np.testing.assert_allclose(det.score_samples(X_te[3:4]), full[3:4], atol=1e-6)
    assert net.training is False


def test_msp_and_energy_formulas(mlp_setup):
    net, X_tr, X_te, _, _, _ = mlp_setup
    with torch.no_grad():
        logits = net(torch.as_tensor(X_te[:10])).numpy().astype(np.float64)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(MSPDetector(net).fit(X_tr).score_samples(X_te[:10]), -p.max(1), rtol=1e-5)
    lse = 2 * np.log(np.exp(logits / 2).sum(1))
    det = EnergyDetector(net, temperature=2.0).fit(X_tr)
    np.testing.assert_allclose(det.score_samples(X_te[:10]), -lse, rtol=1e-5)


def test_metrics_known_values():
    assert fpr_at_tpr([1, 1, 0, 0], [0.9, 0.8, 0.85, 0.1], tpr=1.0) == 0.5
    assert fpr_at_tpr([1, 1, 0, 0], [0.9, 0.8, 0.85, 0.1], tpr=0.5) == 0.0
    m = ood_metrics(np.arange(100), np.arange(100) + 1000.0)
    assert (m.auroc, m.fpr95) == (1.0, 0.0)
    m = ood_metrics(np.arange(100), np.arange(100) + 0.5)
    # ID keeps rows scoring <= 94.05 (95th of 0..99); OOD rows 0.5 .. 93.5 fall below: 94 of 100
    assert m.fpr95 == pytest.approx(0.94)
    assert m.auroc == pytest.approx(0.505)
    # ID is the positive class of the TPR: 10 OOD rows below every ID row are accepted as ID
    ood = np.r_[np.full(10, -1.0), 200.0 + np.arange(90)]
    assert ood_metrics(np.arange(100), ood).fpr95 == pytest.approx(0.10)


def test_default_layers_and_model_without_layers():
    nn = torch.nn
    bn = nn.Sequential(nn.Linear(64, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)).eval()
    assert GAIADetector(bn).fit(np.zeros((4, 64), np.float32)).layers_ == ["1"]
    head_only = nn.Sequential(nn.Flatten(), nn.Linear(64, 3))
    with pytest.raises(ModelError, match="BatchNorm, Conv or Linear") as err:
        SplitIntegrateDetector(head_only).fit(np.zeros((4, 64), np.float32))
    assert err.value.argument == "model"
    with pytest.raises(ModelError, match="no module named") as err:
        SplitIntegrateDetector(make_net("mlp"), layers=["fc1"]).fit(np.zeros((4, 64), np.float32))
    assert err.value.argument == "layers"

    class Unused(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.extra = nn.Linear(64, 3), nn.Linear(8, 8)

        def forward(self, x):
            return self.body(x)

    unused = Unused()
    with pytest.raises(ModelError, match="not called"):
        GAIADetector(unused, layers=["extra"]).fit(np.zeros((4, 64), np.float32))
    MSPDetector(head_only).fit(np.zeros((4, 64), np.float32))  # logit methods need no layers


def test_bad_input_names_the_argument(mlp_setup):
    net, X_tr, *_ = mlp_setup
    with pytest.raises(ParameterError, match="alpha") as err:
        SplitIntegrateDetector(net, alpha=0.0).fit(X_tr)
    assert err.value.argument == "alpha"
    with pytest.raises(ParameterError, match="steps"):
        SplitIntegrateDetector(net, steps=0).fit(X_tr)
    with pytest.raises(ParameterError, match="integration"):
        SplitIntegrateDetector(net, integration="mean").fit(X_tr)
    with pytest.raises(ParameterError, match="model"):
        MSPDetector("not a model").fit(X_tr)
    with pytest.raises(DataError, match="at least 1 row") as err:
        SplitIntegrateDetector(net).fit(np.zeros((0, 64), np.float32))
    assert err.value.argument == "X"
    bad = X_tr[:5].copy()
    bad[0, 0] = np.nan
    with pytest.raises(DataError, match="NaN"):
        GAIADetector(net).fit(bad)
    with pytest.raises(NotFittedError):
        GAIADetector(net).score_samples(X_tr[:3])
    det = GAIADetector(net).fit(X_tr)
    with pytest.raises(DataError, match="shape"):
        det.score_samples(X_tr[:3, :10])
    with pytest.raises(DataError, match="at least 2 dimensions"):
        det.score_samples(X_tr[0])
    with pytest.raises(DataError, match="y_true"):
        fpr_at_tpr([1, 1], [0.2, 0.3])
    with pytest.raises(ParameterError, match="tpr"):
        ood_metrics([0.1], [0.2], tpr=0.0)


@settings(max_examples=25, deadline=None)
@given(
    data=st.one_of(
        st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=70),
        st.lists(
            st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=3), max_size=3
        ),
        st.text(max_size=5),
        st.none(),
    ),
    alpha=st.one_of(st.floats(allow_nan=True), st.integers(-2, 2), st.none()),
)
def test_fuzz_only_trustlab_errors(data, alpha):
    net = make_net("mlp", n_classes=3)
    for call in (
        lambda: SplitIntegrateDetector(net, alpha=alpha).fit(data),
        lambda: GAIADetector(net).fit(np.zeros((2, 64), np.float32)).score_samples(data),
        lambda: ood_metrics(data, [0.1, 0.2]),
        lambda: fpr_at_tpr(data, data),
    ):
        try:
            call()
        except TrustlabError:
            pass
