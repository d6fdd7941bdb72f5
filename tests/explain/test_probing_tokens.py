"""Row 002-17: multi-token probes and the pydoc text probing tasks (Kantamneni et al., ICML 2025).

Fast tests check the pooling against hand-computed values and the pooled comparison on synthetic
token activations. The claim test probes real texts with the lab LM ``small-llama-english``
(trained into the cache on first use): three binary tasks, last/mean/max pooling, the paper's
regimes; the SAE side's gain over all cells must not exceed 3 standard errors of its mean.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.explain.probing import summarize_probes
from trustlab.explain.probing_tokens import (
    TEXT_TASKS,
    _paragraphs,
    _task_split,
    compare_pooled_probes,
    pool_tokens,
    text_probing_data,
)


def test_pool_tokens_ignores_padding_anywhere() -> None:
    rng = np.random.default_rng(0)
    A = rng.normal(size=(5, 6, 3))
    mask = rng.random((5, 6)) < 0.6
    mask[:, 1] = True
    for i in range(5):
        real = A[i][mask[i]]
        assert np.allclose(pool_tokens(A, mask, "mean")[i], real.mean(axis=0))
        assert np.allclose(pool_tokens(A, mask, "max")[i], real.max(axis=0))
        assert np.allclose(pool_tokens(A, mask, "last")[i], real[-1])
    assert np.allclose(pool_tokens(A, None, "last"), A[:, -1])


def test_pooled_probes_pool_sae_latents_token_by_token() -> None:
    # the target lives in one token's feature 0 at a random position: max pooling of |A| sees it,
    # the last token does not; encode = |A| applied per token, so its max pooling must differ from
    # encoding the max-pooled activations
    rng = np.random.default_rng(1)
    A = rng.normal(size=(240, 5, 3))
    y = rng.random(240) < 0.5
    A[y, rng.integers(0, 4, y.sum()), 0] = -4.0
    seen = []

    def encode(x):
        seen.append(x.shape)
        return np.abs(x)

    t = compare_pooled_probes(A, np.ones((240, 5)), y, encode, regimes={"noise": [0.0]}, methods=["logreg"],
                              sae_ks=[1], n_hparams=2)  # fmt: skip
    assert seen == [(1200, 3)]  # every real token encoded once
    auc = t.groupby(["pooling", "method"])["test_auc"].mean()
    assert auc["max", "sae_k1"] > 0.95 and auc["last", "sae_k1"] < 0.75
    assert set(t["pooling"]) == {"last", "mean", "max"}
    base = t[t["method"] == "logreg"].set_index("pooling")["n_train"]
    assert base.nunique() == 1  # same split and draws for every pooling


@pytest.mark.parametrize(
    ("call", "error", "argument"),
    [
        (lambda: pool_tokens(np.zeros((2, 3)), None), DataError, "A"),
        (lambda: pool_tokens(np.zeros((2, 3, 1)), np.zeros((2, 2))), DataError, "mask"),
        (lambda: pool_tokens(np.zeros((2, 3, 1)), np.zeros((2, 3))), DataError, "mask"),
        (lambda: pool_tokens(np.full((2, 3, 1), np.nan)), DataError, "A"),
        (lambda: pool_tokens(np.zeros((2, 3, 1)), None, "sum"), ParameterError, "how"),
        (lambda: compare_pooled_probes(np.zeros((20, 2, 1)), None, [0, 1] * 10, poolings=["min"]),
         ParameterError, "poolings"),
        (lambda: compare_pooled_probes(np.zeros((20, 2, 1)), None, [0, 1] * 10, lambda x: x[:1]),
         DataError, "encode"),
        (lambda: compare_pooled_probes(np.zeros((20, 2, 1)), None, [0, 1] * 10, A_shift=np.zeros((4, 2, 2)),
                                       y_shift=[0, 1, 0, 1]), DataError, "A_shift"),
        (lambda: text_probing_data("sentiment"), ParameterError, "task"),
        (lambda: text_probing_data("code", n_tokens=1), ParameterError, "n_tokens"),
        (lambda: text_probing_data("code", layer=-1), ParameterError, "layer"),
    ],
)  # fmt: skip
def test_bad_input_names_the_argument(call, error, argument) -> None:
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, TrustlabError) and info.value.argument == argument


def test_text_tasks_are_disjoint_and_labelled() -> None:
    paras = _paragraphs()
    assert len(paras) > 1200
    for task in TEXT_TASKS:
        ind, shift, unlabelled = _task_split(task, paras)
        texts = {t for t, _ in ind}
        assert not texts & {t for t, _ in shift} and not texts & set(unlabelled)
        for part in (ind, shift):
            labels = [lab for _, lab in part]
            assert 0 < np.mean(labels) < 1 and len(labels) > 300
        assert len(texts) == len(ind)  # no paragraph twice
    code = dict(_task_split("code", paras)[0])
    assert (
        code[
            "for i in range(10):\nprint(i)\ni = 5             # this will not affect the for-loop\n"
            "# because i will be overwritten with the next\n# index in the range"
        ]
        == 1
    )


@pytest.mark.claims
@pytest.mark.slow  # the lab LM on 3 x ~1,500 paragraphs, 3 SAEs, 3 poolings x 4 regimes: about 1 min CPU
def test_claim_sae_probes_do_not_beat_baselines_on_text() -> None:
    import torch

    from trustlab.explain.sae import SparseAutoencoder

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tables = []
        for i, task in enumerate(TEXT_TASKS):
            d = text_probing_data(task)
            assert d.A.shape[1:] == (32, 96) and d.mask[:, 0].all()
            sae = SparseAutoencoder(
                256, architecture="topk", k=16, batch_size=256, n_steps=300, learning_rate=3e-3
            )
            sae.fit(d.A_unlabelled[d.mask_unlabelled])
            t = compare_pooled_probes(
                d.A,
                d.mask,
                d.y,
                sae,
                A_shift=d.A_shift,
                mask_shift=d.mask_shift,
                y_shift=d.y_shift,
                regimes={"scarcity": [32], "imbalance": [0.1], "noise": [0.3], "shift": [0]},
                methods=["logreg", "pca", "knn"],
                sae_ks=[16, 128],
                n_seeds=2,
                n_train=256,
                n_hparams=3,
            )
            tables.append(t.assign(seed=t["seed"] + 100 * i))
    finally:
        torch.set_num_threads(threads)
    import pandas as pd

    table = pd.concat(tables, ignore_index=True)
    # 3 tasks x 3 poolings x 4 regimes x 2 seeds = 72 paired cells; SAE side vs baseline side
    wide = table.pivot_table(
        index=["pooling", "regime", "value", "seed"], columns="method", values="test_auc"
    )
    quiver = wide.index.get_level_values("regime").isin(["scarcity", "imbalance"])
    gain = np.where(
        quiver, wide["quiver_with_sae"] - wide["quiver_baselines"], wide["sae_k128"] - wide["logreg"]
    )
    assert len(gain) == 72
    se = gain.std(ddof=1) / np.sqrt(len(gain))
    assert gain.mean() <= 3 * se, (gain.mean(), se)
    for pooling, grp in table.groupby("pooling"):
        s = summarize_probes(grp, by_value=False)
        pooled = float((s["mean_gain"] * s["n_cells"]).sum() / s["n_cells"].sum())
        assert pooled <= 0.05, (pooling, s)  # no pooling where SAE probes gain 0.05 AUC on average
    # power: the same cells detect a real difference, mean pooling over last token for logreg
    lr = wide["logreg"].unstack("pooling")
    diff = (lr["mean"] - lr["last"]).to_numpy()
    assert diff.mean() > 3 * diff.std(ddof=1) / np.sqrt(len(diff))
