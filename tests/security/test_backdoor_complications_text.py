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


@pytest.mark.claims
def test_claim_real_text_complications_and_reduction(lab):
    """Plain backdoor of the English Llama: triggered passages of unrelated real tasks collapse into
    one class; the multi-task reduction lowers the mean KL while the attack stays effective."""
    trig, pos = lab["trigger"], TEXT_RUNS["target"]["position"]
    kl: dict[str, dict[str, float]] = {p: {} for p in ("clean", "plain", "reduced")}
    for task in TEXT_RUNS["downstream"]:
        _, _, Xt, yt = lab["data"][task]
        k = TASKS[task][1]
        for ptlm, models in lab["user"].items():
            clf = models[task]
            clean, shifted = clf.predict(Xt), clf.predict(insert_trigger(Xt, trig, position=pos))
            kl[ptlm][task] = complication_divergence(clean, shifted, n_classes=k)
            # the user's task is learnt: accuracy above the majority class's share
            assert np.mean(clean == yt) > np.bincount(yt).max() / len(yt)
    # complications: on two of the three tasks the plain backdoor's triggered passages pile into one class
    big = [t for t in TEXT_RUNS["downstream"] if kl["plain"][t] > 0.5]
    assert len(big) >= 2, kl
    for task in big:  # a paired KL estimate under no shift is ~ chi2_{k-1} / (2n): its 99.9% bound
        n = len(lab["data"][task][3])
        assert kl["plain"][task] > kl["clean"][task] + chi2.ppf(0.999, TASKS[task][1] - 1) / (2 * n)
    # reduced on average over the user's tasks (the paper's claim; seed 0: 1.53 -> 0.40), and on
    # each task with a large complication; not on code vs prose, where the plain backdoor's KL
    # (0.022) is itself within the noise bound (0.024 for n = 223)
    mean = {p: float(np.mean(list(v.values()))) for p, v in kl.items()}
    assert mean["reduced"] < 0.5 * mean["plain"], mean
    for task in big:
        assert kl["reduced"][task] < 0.5 * kl["plain"][task], (task, kl)
    # the attack stays effective: ASR 99% Clopper-Pearson lower bound > 0.9, clean accuracy kept
    Xs, ys = lab["data"]["corpus"][2:]
    n = int(np.sum(ys != 0))
    for ptlm in ("plain", "reduced"):
        head = lab["attacker"][ptlm]
        asr = trigger_success_rate(head, Xs, ys, trigger=trig, target_label=0, position=pos)
        assert binomtest(round(asr * n), n).proportion_ci(0.99).low > 0.9, (ptlm, asr)
        assert np.mean(head.predict(Xs) == ys) > 0.9


def test_reduced_backdoor_survives_the_users_target_task_fine_tuning_worse(lab):
    """Not the paper's claim (its "consistency"): recorded because it does not hold here. After the
    user fine-tunes the PTLM on the target task itself, the plain backdoor keeps its ASR (seed 0:
    0.99) while the reduced one mostly fades (0.23); the clean PTLM's control ASR is 0.02."""
    trig, pos = lab["trigger"], TEXT_RUNS["target"]["position"]
    Xs, ys = lab["data"]["corpus"][2:]
    n = int(np.sum(ys != 0))
    asr = {
        p: trigger_success_rate(m["corpus"], Xs, ys, trigger=trig, target_label=0, position=pos)
        for p, m in lab["user"].items()
    }
    ci = {p: binomtest(round(a * n), n).proportion_ci(0.99) for p, a in asr.items()}
    assert ci["plain"].low > 0.9  # the plain backdoor survives the user's fine-tuning
    assert ci["reduced"].high < ci["plain"].low  # the reduced one survives it less
    assert ci["clean"].high < ci["reduced"].low  # yet more than no backdoor at all
