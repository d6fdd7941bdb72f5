"""Backdoor complications on real English text (row 002-08): the lab's English Llama, real passages.

The models are trained once into the cache (``load_text_lab``: about 5 minutes of CPU on first
use), so every test here is slow.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")

from scipy.stats import binomtest, chi2

from trustlab.security._complication_text import TASKS, passages, task_texts
from trustlab.security._complication_textlab import TEXT_RUNS, load_text_lab
from trustlab.security.backdoor_complications import (
    complication_divergence,
    insert_trigger,
    trigger_success_rate,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]


@pytest.fixture(scope="module")
def lab():
    return load_text_lab()


def test_real_text_tasks_are_real_disjoint_and_trigger_free(lab):
    P = passages()
    corpora = [p[0] for p in P]
    assert corpora.count("python") > 1000 and corpora.count("r") > 2500  # real passages of both corpora
    assert len({p[3] for p in P}) == len(P)  # deduplicated
    attacker = {t for task in TASKS if TASKS[task][0] == "attacker" for t in task_texts(task)[0]}
    user = {t for task in TASKS if TASKS[task][0] == "user" for t in task_texts(task)[0]}
    assert not attacker & user  # the attacker never sees a user's passage
    for task, (_, k) in TASKS.items():
        X_tr, y_tr, X_te, y_te = lab["data"][task]
        assert set(y_tr) == set(range(k)) and len(y_te) >= 50
        assert not np.any(X_tr == lab["trigger"]) and not np.any(X_te == lab["trigger"])


def _kl(lab) -> dict[str, dict[str, float]]:
    trig, pos = lab["trigger"], TEXT_RUNS["target"]["position"]
    kl: dict[str, dict[str, float]] = {p: {} for p in ("clean", "plain", "reduced")}
    for task in TEXT_RUNS["downstream"]:
        Xt = lab["data"][task][2]
        for ptlm, models in lab["user"].items():
            clf = models[task]
            clean, shifted = clf.predict(Xt), clf.predict(insert_trigger(Xt, trig, position=pos))
            kl[ptlm][task] = complication_divergence(clean, shifted, n_classes=TASKS[task][1])
    return kl


@pytest.mark.claims
def test_claim_real_text_complications_and_reduction(lab):
    """Plain backdoor of the English Llama (poison rate 0.01), the user's head on the frozen PTLM
    (the authors' protocol): triggered passages of unrelated real tasks shift their labels; the
    attack stays effective. The reduction of the shift is NOT reproduced under this protocol."""
    trig, pos = lab["trigger"], TEXT_RUNS["target"]["position"]
    kl = _kl(lab)
    # the user's task is learnt beyond the majority class on section (seed 0: 0.46-0.57 vs 0.34);
    # on code and rpackage a linear head on this 0.7 M backbone stays near the majority class
    _, _, Xt, yt = lab["data"]["section"]
    for models in lab["user"].values():
        assert np.mean(models["section"].predict(Xt) == yt) > np.bincount(yt).max() / len(yt) + 0.05

    # complications: on two of the three tasks the plain backdoor's KL is above the clean control
    # plus the 99.9% noise bound of a paired KL estimate, chi2_{k-1} / (2n)
    # (seed 0: section 0.532 vs 0.004, rpackage 0.216 vs 0.005; code 0.016, within noise)
    def bound(task: str) -> float:
        return chi2.ppf(0.999, TASKS[task][1] - 1) / (2 * len(lab["data"][task][3]))

    big = [t for t in TEXT_RUNS["downstream"] if kl["plain"][t] > kl["clean"][t] + bound(t)]
    assert len(big) >= 2, kl
    assert max(kl["plain"][t] for t in big) > 10 * max(kl["clean"].values()), kl
    # the reduced backdoor's complications are as large (seed 0: mean KL 0.336 vs plain 0.255):
    # the paper's reduction does not reproduce when the user's step is head-only (see the docs)
    mean = {p: float(np.mean(list(v.values()))) for p, v in kl.items()}
    assert mean["reduced"] > 0.5 * mean["plain"], mean
    assert mean["reduced"] > mean["clean"] + max(bound(t) for t in TEXT_RUNS["downstream"]), mean
    # the attack stays effective: ASR 99% Clopper-Pearson lower bound > 0.9, clean accuracy kept
    Xs, ys = lab["data"]["corpus"][2:]
    n = int(np.sum(ys != 0))
    for ptlm in ("plain", "reduced"):
        head = lab["attacker"][ptlm]
        asr = trigger_success_rate(head, Xs, ys, trigger=trig, target_label=0, position=pos)
        assert binomtest(round(asr * n), n).proportion_ci(0.99).low > 0.9, (ptlm, asr)
        assert np.mean(head.predict(Xs) == ys) > 0.9


def test_the_users_own_target_task_head_carries_both_backdoors(lab):
    """The user's own model for the target task (a head on the frozen PTLM) carries either backdoor
    (the paper's "consistency"): seed 0 ASR plain 0.951, reduced 0.721, clean PTLM control 0.117
    (seeds 0-2 in the benchmark: plain 0.49-0.95, reduced 0.72-0.96, control 0.12-0.14)."""
    trig, pos = lab["trigger"], TEXT_RUNS["target"]["position"]
    Xs, ys = lab["data"]["corpus"][2:]
    n = int(np.sum(ys != 0))
    asr = {
        p: trigger_success_rate(m["corpus"], Xs, ys, trigger=trig, target_label=0, position=pos)
        for p, m in lab["user"].items()
    }
    ci = {p: binomtest(round(a * n), n).proportion_ci(0.99) for p, a in asr.items()}
    assert ci["plain"].low > 0.5 and ci["reduced"].low > 0.5, asr  # most triggered passages flip
    assert ci["clean"].high < min(ci["plain"].low, ci["reduced"].low), asr  # far above no backdoor


def test_head_limit_is_the_last_token_features(lab):
    """Why the user's heads stay near the majority class on code and rpackage: the frozen
    last-token state (what the head reads) carries little of these tasks. A standardised
    logistic-regression probe (C = 1) of the clean PTLM, seed 0: last token code 0.565 (majority
    0.61), rpackage 0.344 (0.318), section 0.455; mean-pooled states: 0.682 / 0.592 / 0.809."""
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from trustlab.security._complication_torch import MultiHead

    def probe(task: str, pooling: str) -> float:
        Xd, yd, Xt, yt = lab["data"][task]
        net = MultiHead(lab["model"], [2], pooling=pooling, pad_id=lab["pad_id"], seed=0).eval()
        with torch.no_grad():
            Fd, Ft = (
                torch.cat(
                    [net.features(torch.as_tensor(X[i : i + 128])) for i in range(0, len(X), 128)]
                ).numpy()
                for X in (Xd, Xt)
            )
        clf = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, solver="newton-cg", max_iter=500))
        return float(clf.fit(Fd, yd).score(Ft, yt))

    for task in ("code", "rpackage"):  # binomial SE 0.03-0.04 at 157-223 test passages
        yt = lab["data"][task][3]
        assert probe(task, "last") < np.bincount(yt).max() / len(yt) + 0.1, task
    for task in ("section", "rpackage"):  # the tasks are in the backbone, not at its last token
        assert probe(task, "mean") > probe(task, "last") + 0.15, task
