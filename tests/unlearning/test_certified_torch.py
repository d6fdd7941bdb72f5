"""Certified unlearning of a torch MLP (the paper's setting: no convexity needed)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sklearn.model_selection import train_test_split  # noqa: E402

from trustlab.errors import DataError, ModelError  # noqa: E402
from trustlab.security._nets import digits, make_net, predict, train  # noqa: E402
from trustlab.unlearning import membership_advantage  # noqa: E402
from trustlab.unlearning.certified import NoisyFinetuneUnlearner  # noqa: E402


class _Proba:
    """predict_proba / classes_ view of a torch classifier for the membership attack."""

    def __init__(self, net):
        self.net, self.classes_ = net, np.arange(10)

    def predict_proba(self, X):
        with torch.no_grad():
            return torch.softmax(self.net(torch.as_tensor(np.asarray(X, dtype=np.float32))), 1).numpy()


@pytest.fixture(scope="module")
def setting():
    X, y = digits()
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    net = train(make_net("mlp", hidden=32, seed=0), Xtr, ytr, epochs=40, lr=1e-2, seed=0)
    forget = np.random.default_rng(0).choice(len(ytr), 100, replace=False)
    keep = np.setdiff1d(np.arange(len(ytr)), forget)
    retrained = train(make_net("mlp", hidden=32, seed=1), Xtr[keep], ytr[keep], epochs=40, lr=1e-2, seed=1)
    return Xtr, Xte, ytr, yte, net, forget, keep, retrained


def test_unlearned_mlp_approaches_retraining_with_a_certificate(setting):
    Xtr, Xte, ytr, yte, net, forget, keep, retrained = setting
    before = [p.detach().clone() for p in net.parameters()]
    # small steps and clipping keep the noise small (sigma 0.051 over 36 steps); the defaults'
    # sigma 2.37 washes the MLP out and 20 epochs of fine-tuning reach only 0.60-0.62 held-out
    unlearner = NoisyFinetuneUnlearner(
        C0=32.0, lr=0.1, weight_decay=2.0, C1=0.1, finetune_iter=20, random_state=0
    )
    rel = unlearner.unlearn(net, Xtr, ytr, forget)
    # the input model is untouched; the certificate is the library's R = 1 figure
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    assert rel.epsilon == pytest.approx(7.08, abs=0.01) and rel.guarantee == "certified unlearning"
    assert "torch" in rel.description and rel.parameters["n_retain"] == keep.size
    un = rel.value
    assert next(un.parameters()).dtype == torch.float32

    def figures(model):
        fa = float((predict(model, Xtr[forget]) == ytr[forget]).mean())
        ta = float((predict(model, Xte) == yte).mean())
        return fa, ta, membership_advantage(_Proba(model), Xtr[forget], ytr[forget], Xte, yte)

    # the unlearner's noise is unseeded (os.urandom), so its figures vary from run to run: the
    # attack's advantage is judged at the 99.9% level of the Kolmogorov-Smirnov statistic
    # (c = sqrt(ln(2 / 0.001) / 2) = 1.95: 0.212 here), not the 95% level (0.133), which two
    # models that never saw the rows exceed one run in twenty (measured: 0.17 once in CI)
    noise_level = 1.95 * np.sqrt(1 / forget.size + 1 / yte.size)
    f_un, t_un, mia_un = figures(un)
    f_re, t_re, mia_re = figures(retrained)
    # measured (seeds 0 and 1 of the unlearner): forget accuracy 0.96, held-out 0.935-0.954;
    # retrained 0.97-0.99 / 0.97-0.98; 27,748 gradient evaluations vs 50,280 for retraining
    assert mia_un < noise_level and mia_re < noise_level  # forgotten rows look never trained on
    assert abs(f_un - f_re) <= 0.10  # 100 forgotten rows: 2.5 binomial s.e. is about 0.05 each
    # six runs of the unseeded noise: held-out 0.906-0.967 against retraining's 0.963 (mean gap 0.03,
    # sd 0.02): 0.08 is 2.5 sd above the mean gap
    assert t_re - t_un <= 0.08
    # a fraction of retraining's per-example gradients (40 epochs)
    assert rel.parameters["gradient_evaluations"] < 0.6 * 40 * keep.size


def test_torch_bad_input_is_named(setting):
    Xtr, _, ytr, _, net, forget, _, _ = setting
    un = NoisyFinetuneUnlearner(C0=32.0)
    with pytest.raises(DataError) as err:
        un.unlearn(net, Xtr, ytr + 5, forget)
    assert err.value.argument == "y"
    bad = Xtr.copy()
    bad[0, 0] = np.nan
    with pytest.raises(DataError) as err:
        un.unlearn(net, bad, ytr, forget)
    assert err.value.argument == "X"
    with pytest.raises(ModelError) as err:
        un.unlearn(net, Xtr[:, :10], ytr, forget)
    assert err.value.argument == "model"
    with pytest.raises(DataError) as err:
        un.unlearn(net, Xtr, ytr, [])
    assert err.value.argument == "forget"
