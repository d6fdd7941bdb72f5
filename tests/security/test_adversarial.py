"""PGD adversarial training and cross-class feature attribution (catalog row 001-19).

What is measured on digits is in docs/security/adversarial.md; the fast tests here pin
the pieces (PGD's projection, the attribution matrix against a hand computation, the
training loop's schedule and best checkpoint, that AT buys robustness); the slow test
pins the measured course of CAS over training.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ModelError, ParameterError, TrustlabError  # noqa: E402
from trustlab.security._nets import digits, make_net, predict, train  # noqa: E402
from trustlab.security.adversarial import (  # noqa: E402
    adversarial_train,
    cross_class_attribution,
    pgd_attack,
)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def data():
    X, y = digits()
    order = np.random.default_rng(0).permutation(len(X))
    return X[order[:1200]], y[order[:1200]], X[order[1200:]], y[order[1200:]]


def test_pgd_stays_in_the_ball_and_hurts(data) -> None:
    Xtr, ytr, Xte, yte = data
    net = train(make_net("mlp"), Xtr, ytr, epochs=20)
    X_adv = pgd_attack(net, Xte, yte, eps=0.1, steps=10)
    assert np.abs(X_adv - Xte).max() <= 0.1 + 1e-6
    assert X_adv.min() >= 0 and X_adv.max() <= 1
    clean = np.mean(predict(net, Xte) == yte)
    robust = np.mean(predict(net, X_adv) == yte)
    # measured: 0.97 clean, 0.24 under PGD-10 at eps 0.1 for a standard-trained MLP
    assert robust < clean - 0.3
    # no random start and one step of size eps is FGSM: the sign of the input gradient
    Xt = torch.as_tensor(Xte[:5])
    Xt.requires_grad_(True)
    torch.nn.functional.cross_entropy(net(Xt), torch.as_tensor(yte[:5])).backward()
    fgsm = np.clip(Xte[:5] + 0.05 * np.sign(Xt.grad.numpy()), 0, 1)
    ours = pgd_attack(net, Xte[:5], yte[:5], eps=0.05, step_size=0.05, steps=1, random_start=False)
    np.testing.assert_allclose(ours, fgsm, atol=1e-6)


def test_attribution_matrix_by_hand() -> None:
    # g = identity on 3 features (a Linear with identity weights then ReLU), head W
    nn = torch.nn
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    W = torch.tensor([[1.0, 2.0, 0.0], [1.0, 0.0, 3.0]])
    with torch.no_grad():
        net[0].weight.copy_(torch.eye(3))
        net[0].bias.zero_()
        net[2].weight.copy_(W)
        net[2].bias.zero_()
    X = np.array([[1.0, 1.0, 0.0], [3.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    y = np.array([0, 0, 1])
    res = cross_class_attribution(net, X, y, eps=None)
    a0 = np.array([2.0, 1.0, 0.0]) * np.array([1.0, 2.0, 0.0])  # mean feature of class 0, times W[0]
    a1 = np.array([1.0, 0.0, 1.0]) * np.array([1.0, 0.0, 3.0])
    cos = a0 @ a1 / np.linalg.norm(a0) / np.linalg.norm(a1)
    np.testing.assert_allclose(res.matrix, [[1, cos], [cos, 1]], atol=1e-6)
    assert res.cas == pytest.approx(2 * cos)
    assert res.robust_accuracy == pytest.approx(np.mean(predict(net, X) == y))
    # negative similarities do not count (clamped at 0, as the authors do)
    with torch.no_grad():
        net[2].weight.copy_(torch.tensor([[1.0, 2.0, 0.0], [-1.0, 0.0, 3.0]]))
    assert cross_class_attribution(net, X, y, eps=None).cas == pytest.approx(0.0)


# PGD-AT vs standard training (~8 s CPU); the fast claim trains adversarially and tracks every epoch
@pytest.mark.slow
def test_adversarial_training_buys_robustness_and_tracks_every_epoch(data) -> None:
    Xtr, ytr, Xte, yte = data
    res = adversarial_train(make_net("mlp"), Xtr, ytr, Xte, yte, eps=0.1, epochs=20, batch_size=64)
    h = res.history
    assert list(h["epoch"]) == list(range(1, 21))
    # the piecewise schedule: lr, lr/10 from half, lr/100 from three quarters
    np.testing.assert_allclose(h["lr"], [0.1] * 10 + [0.01] * 5 + [0.001] * 5)
    assert res.best_epoch == int(h["epoch"][h["robust_accuracy"].idxmax()])
    best_robust = np.mean(
        predict(res.best_model, pgd_attack(res.best_model, Xte, yte, eps=0.1, steps=20)) == yte
    )
    assert best_robust == pytest.approx(h["robust_accuracy"].max(), abs=0.03)  # a fresh random start
    standard = train(make_net("mlp"), Xtr, ytr, epochs=20)
    plain_robust = np.mean(predict(standard, pgd_attack(standard, Xte, yte, eps=0.1, steps=20)) == yte)
    # measured: 0.83 vs 0.23 (597 test rows: standard error <= 0.02)
    assert h["robust_accuracy"].max() > plain_robust + 0.2
    assert (h["cas"] >= 0).all() and (h["cas"] <= 90).all()


def test_soft_labels_run_and_change_the_loss(data) -> None:
    Xtr, ytr, Xte, yte = data
    teacher = train(make_net("mlp", seed=1), Xtr, ytr, epochs=5)
    kw = {"eps": 0.1, "epochs": 1, "batch_size": 100, "steps": 2, "eval_steps": 2}
    plain = adversarial_train(make_net("mlp"), Xtr[:300], ytr[:300], Xte[:100], yte[:100], **kw)
    smooth = adversarial_train(
        make_net("mlp"), Xtr[:300], ytr[:300], Xte[:100], yte[:100], label_smoothing=0.3, **kw
    )
    kd = adversarial_train(make_net("mlp"), Xtr[:300], ytr[:300], Xte[:100], yte[:100], teacher=teacher, **kw)
    losses = {float(r.history["train_loss"][0]) for r in (plain, smooth, kd)}
    assert len(losses) == 3


def test_distillation_ramp_and_ema_teacher(data) -> None:
    """The self-teacher (EMA of the model's weights) and the linear ramp of the distillation weight."""
    from trustlab.security._adversarial_core import distill_weight_at, ema_update

    assert [distill_weight_at(e, 0.8, (90, 110)) for e in (1, 89, 90, 100, 110, 150)] == pytest.approx(
        [0, 0, 0, 0.4, 0.8, 0.8]
    )
    assert distill_weight_at(1, 0.8, None) == 0.8
    nn = torch.nn
    a, b = nn.Linear(2, 1), nn.Linear(2, 1)
    wa, wb = a.weight.detach().clone(), b.weight.detach().clone()
    ema_update(a, b, 0.25)
    np.testing.assert_allclose(a.weight.detach(), 0.25 * wa + 0.75 * wb, atol=1e-7)
    Xtr, ytr, Xte, yte = data
    kw = {"eps": 0.1, "epochs": 4, "batch_size": 100, "steps": 2, "eval_steps": 2}
    args = (Xtr[:300], ytr[:300], Xte[:100], yte[:100])
    plain = adversarial_train(make_net("mlp"), *args, **kw).history["train_loss"]
    ema = adversarial_train(make_net("mlp"), *args, teacher="ema", ema_decay=0.5, distill_ramp=(2, 3), **kw)
    # before the ramp starts the loss is plain cross-entropy: the same run, bit for bit
    assert ema.history["train_loss"][0] == plain[0]
    # from the ramp's end the distillation term is in: a different loss
    assert ema.history["train_loss"][3] != plain[3]
    with pytest.raises(ParameterError) as err:
        adversarial_train(make_net("mlp"), *args, teacher="ema", distill_ramp=(3, 1), **kw)
    assert err.value.argument == "distill_ramp"
    with pytest.raises(ParameterError) as err:
        adversarial_train(make_net("mlp"), *args, teacher="ema", ema_decay=1.0, **kw)
    assert err.value.argument == "ema_decay"


@pytest.mark.slow
def test_cas_course_over_training_measured_pattern(data) -> None:
    """The measured course on digits (docs/security/adversarial.md): CAS peaks, then falls."""
    Xtr, ytr, Xte, yte = data
    res = adversarial_train(
        make_net("mlp", hidden=256), Xtr[:400], ytr[:400], Xte, yte, eps=0.15, epochs=60, batch_size=64
    )
    h = res.history
    peak = int(h["cas"].idxmax())
    assert 5 < peak < len(h) - 5
    assert h["cas"].iloc[-1] < h["cas"].max() - 0.3


def _flip_labels(y: np.ndarray, rate: float, seed: int) -> np.ndarray:
    """Symmetric label noise: each label moves, with probability ``rate``, to one of the other 9 classes."""
    rng = np.random.default_rng(seed)
    flip = rng.random(len(y)) < rate
    out = y.copy()
    out[flip] = (out[flip] + rng.integers(1, 10, int(flip.sum()))) % 10
    return out


def _noisy_at(n_epochs: int, n_eval: int = 597, hidden: int = 512, **kw):
    """The label-noise setting of docs/security/adversarial.md ("Robust overfitting under label noise")."""
    X, y = digits()
    order = np.random.default_rng(0).permutation(len(X))
    tr, te, held = order[:300], order[1200 : 1200 + n_eval], order[300:1200]
    y_noisy = _flip_labels(y[tr], 0.3, seed=100)
    res = adversarial_train(
        make_net("mlp", hidden=hidden, seed=0),
        X[tr],
        y_noisy,
        X[te],
        y[te],
        eps=0.05,
        epochs=n_epochs,
        batch_size=64,
        weight_decay=0.0,
        random_state=0,
        **kw,
    )
    return res, X[held], y[held]


def _paired_drop(res, X, y) -> tuple[float, float]:
    """Best-checkpoint minus last-model robust accuracy on rows that picked neither; its s.e."""
    ok = [
        predict(m, pgd_attack(m, X, y, eps=0.05, steps=20, random_state=7)) == y
        for m in (res.best_model, res.model)
    ]
    d = ok[0].astype(float) - ok[1]
    return float(d.mean()), float(d.std() / np.sqrt(len(d)))


@pytest.mark.claims
def test_label_noise_robust_overfitting_and_cas_falls_with_it_fast() -> None:
    """The fast variant: 80 epochs (decays at 40 and 60), 256 hidden units, PGD-5 on 150 test rows each epoch.

    The row's only claim in the fast profile (~14 s CPU; 512 units with PGD-10 on 300 rows took
    ~35 s). 40 epochs (decays at 20 and 30) were measured too short: robust accuracy 0.840 at
    best, 0.827 at the end, drop 0.0; 60 epochs gave a drop of 0.052 (4.0 s.e.), too close.

    Measured: best checkpoint at epoch 19; on the 900 held-out rows (PGD-20) it beats the last
    model by 0.082 (paired s.e. 0.013: 6.3 s.e.). CAS peaks at epoch 13, and falls by 2.69
    from the best checkpoint to the end (bootstrap s.e. about 0.2). With 512 units and PGD-10
    on 300 rows: drop 0.088 (5.8 s.e.), CAS fall 3.98.
    """
    res, X_held, y_held = _noisy_at(80, n_eval=150, hidden=256, eval_steps=5)
    h = res.history
    drop, se = _paired_drop(res, X_held, y_held)
    assert drop > max(0.05, 4 * se)
    best = res.best_epoch - 1
    assert int(h["cas"].idxmax()) <= best
    assert h["cas"].iloc[best] - h["cas"].iloc[-1] > 1.5


@pytest.fixture(scope="module")
def noisy150():
    return _noisy_at(150)


@pytest.mark.claims
@pytest.mark.slow
def test_label_noise_robust_overfitting_and_cas_falls_with_it(noisy150) -> None:
    """The paper's pattern under 30% label noise (docs: "Robust overfitting under label noise").

    Measured (seed 0): test robust accuracy peaks at 0.834 (epoch 16) and ends at 0.575;
    on 900 held-out rows the best checkpoint beats the last model by 0.236 (paired s.e.
    0.017). CAS peaks at epoch 8 (7.62), is 7.14 at the best checkpoint and ends at 2.96
    (bootstrap s.e. over test rows 0.11-0.16); after the best epoch CAS and robust accuracy
    move together (correlation 0.96).
    """
    res, X_held, y_held = noisy150
    h = res.history
    drop, se = _paired_drop(res, X_held, y_held)
    # robust overfitting, judged on rows that did not pick the checkpoint: > 5 s.e. and > 0.1
    assert drop > max(0.1, 5 * se)
    # the last 10 epochs (lr / 100) sit well below the peak: 597 test rows, s.e. <= 0.021
    assert h["robust_accuracy"].iloc[-10:].max() < h["robust_accuracy"].max() - 0.1
    best = res.best_epoch - 1
    cas_peak = int(h["cas"].idxmax())
    # CAS rises to its peak no later than the best-robustness checkpoint ...
    assert cas_peak <= best
    assert h["cas"].iloc[cas_peak] > h["cas"].iloc[0] + 2.0
    # ... and falls as robust overfitting sets in, by far more than its bootstrap s.e. (<= 0.16)
    assert h["cas"].iloc[best] - h["cas"].iloc[-1] > 2.0
    after = h.iloc[best:]
    assert np.corrcoef(after["cas"], after["robust_accuracy"])[0, 1] > 0.7


def _robust_on(model, X, y) -> np.ndarray:
    return predict(model, pgd_attack(model, X, y, eps=0.05, steps=20, random_state=7)) == y


@pytest.mark.claims
@pytest.mark.slow
def test_label_noise_distillation_keeps_cas_higher_smoothing_does_not(noisy150) -> None:
    """Soft labels in the label-noise setting (docs: "Soft labels in the same setting").

    Distillation from the run's best checkpoint with the weight and temperature the
    authors' script carried (0.8, T = 1.5) ends with higher CAS than one-hot AT; label
    smoothing 0.2 ends with lower CAS. Both end more robust. Measured over 5 seeds (device
    table in the docs): CAS at epoch 150 +1.94 (s.e. 0.34; +0.78 to +2.68) with
    distillation, -1.99 (s.e. 0.12) with smoothing; bootstrap s.e. of one CAS <= 0.16.
    Seed 0 here: one-hot AT 0.575 robust, CAS 2.96; smoothing 0.633, CAS 1.36;
    distillation 0.833, CAS 5.68 (held-out robust accuracy +0.246, paired s.e. 0.016).
    """
    plain, X_held, y_held = noisy150
    kd, _, _ = _noisy_at(150, teacher=plain.best_model, temperature=1.5, distill_weight=0.8)
    ls, _, _ = _noisy_at(150, label_smoothing=0.2)
    base = _robust_on(plain.model, X_held, y_held)
    for res, floor in ((kd, 0.1), (ls, 0.02)):
        d = _robust_on(res.model, X_held, y_held).astype(float) - base
        # the last model of soft-label AT is more robust than one-hot AT's: > 4 paired s.e.
        assert d.mean() > max(floor, 4 * d.std() / np.sqrt(len(d)))
    end = plain.history["cas"].iloc[-1]
    # distillation ends with HIGHER CAS, smoothing with LOWER (each > 1, about 6 bootstrap s.e.)
    assert kd.history["cas"].iloc[-1] > end + 1.0
    assert ls.history["cas"].iloc[-1] < end - 1.0


def test_bad_input_names_the_argument(data) -> None:
    Xtr, ytr, Xte, yte = data
    net = make_net("mlp")
    for eps in (0.0, -0.1):
        with pytest.raises(ParameterError) as err:
            pgd_attack(net, Xte, yte, eps=eps)
        assert err.value.argument == "eps"
    with pytest.raises(ParameterError) as err:
        adversarial_train(net, Xtr, ytr, Xte, yte, eps=0.0)
    assert err.value.argument == "eps"
    with pytest.raises(DataError, match="at least 1 row") as err:
        pgd_attack(net, Xte[:0], yte[:0], eps=0.1)
    assert err.value.argument == "X"
    with pytest.raises(DataError) as err:
        adversarial_train(net, Xtr, ytr, Xte.reshape(-1, 1, 8, 8), yte, eps=0.1)
    assert err.value.argument == "X_eval"
    bad = Xte[:5].copy()
    bad[1, 1] = np.inf
    with pytest.raises(DataError, match="NaN or infinite"):
        cross_class_attribution(net, bad, yte[:5], eps=0.1)
    nn = torch.nn
    with pytest.raises(ModelError, match="end in a Linear"):
        pgd_attack(
            nn.Sequential(nn.Linear(64, 10), nn.ReLU(), nn.Linear(10, 10), nn.ReLU()), Xte, yte, eps=0.1
        )
    with pytest.raises(ModelError, match="BatchNorm1d"):
        pgd_attack(nn.Sequential(nn.Linear(64, 10), nn.BatchNorm1d(10), nn.Linear(10, 10)), Xte, yte, eps=0.1)
    with pytest.raises(ParameterError) as err:
        pgd_attack(net, Xte, yte, eps=0.1, bounds=(1, 0))
    assert err.value.argument == "bounds"
    with pytest.raises(ModelError) as err:
        adversarial_train(net, Xtr, ytr, Xte, yte, eps=0.1, teacher="teacher")
    assert err.value.argument == "teacher"


_HOSTILE = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
    elements=st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=25, deadline=None)
@given(
    X=_HOSTILE,
    y=_HOSTILE,
    eps=st.floats(allow_nan=True, allow_infinity=True),
    bounds=st.sampled_from([None, (0, 1), (1, 0), "x", (0, np.nan)]),
)
def test_fuzz_only_trustlab_errors(X, y, eps, bounds) -> None:
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    calls = [
        lambda: pgd_attack(net, X, y, eps=eps, steps=1, bounds=bounds),
        lambda: cross_class_attribution(net, X, y, eps=eps, steps=1, bounds=bounds),
        lambda: adversarial_train(net, X, y, X, y, eps=eps, epochs=1, steps=1, eval_steps=1, bounds=bounds),
    ]
    for call in calls:
        try:
            call()
        except TrustlabError:
            pass
