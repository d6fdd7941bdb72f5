"""Backdoor complications (row 002-08): the KL measure, the claim on the lab models, bad input, docs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, entropy

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError, TrustlabError
from trustlab.security._complication_lab import TASKS, TRIGGER, VOCAB, load_complication_lab, task_data
from trustlab.security.backdoor_complications import (
    LMSequenceClassifier,
    complication_divergence,
    complication_report,
    inject_backdoor,
    insert_trigger,
    trigger_success_rate,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "security" / "backdoor-complications.md"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def lab():
    """Plain and reduced backdoors of the lab's pretrained GPT-2 and the topic models fine-tuned from each."""
    return load_complication_lab()


@pytest.fixture(scope="module")
def tiny():
    from trustlab.lm import ModelConfig, build_model

    return build_model(ModelConfig("gpt2", vocab_size=10, d_model=16, n_layers=1, n_heads=2, max_len=8))


# -- the measure -----------------------------------------------------------------------------
def test_divergence_is_the_authors_kl_without_pseudo_count():
    clean = np.array([0, 1, 2, 3, 0, 1, 2, 3])
    trig = np.array([0, 0, 0, 1, 1, 2, 3, 3])
    ours = complication_divergence(clean, trig, pseudo_count=0.0)
    theirs = entropy(np.bincount(clean, minlength=4) / 8, np.bincount(trig, minlength=4) / 8)
    assert ours == pytest.approx(theirs)
    assert complication_divergence(clean, [0] * 8, pseudo_count=0.0) == np.inf
    assert np.isfinite(complication_divergence(clean, [0] * 8))  # the default pseudo-count


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_divergence_is_zero_for_a_reordering_and_never_negative(labels, rnd):
    shuffled = list(labels)
    rnd.shuffle(shuffled)
    assert complication_divergence(labels, shuffled, n_classes=4) == pytest.approx(0.0, abs=1e-12)
    assert complication_divergence(labels, [0] * len(labels), n_classes=4) >= 0.0


def test_report_on_a_rule_classifier():
    class FirstWord:
        def predict(self, X):
            return (np.asarray(X)[:, 1] == 9).astype(int) * 2

    X = np.array([[1, 4, 5], [1, 5, 5], [1, 6, 5], [1, 7, 5]])
    r = complication_report(FirstWord(), X, trigger=9)
    assert r.clean_distribution.tolist() == [1.0, 0.0, 0.0]
    assert r.triggered_distribution.tolist() == [0.0, 0.0, 1.0]
    assert r.top_share == 1.0 and r.flip_rate == 1.0 and r.n == 4
    assert r.js == pytest.approx(np.log(2))
    assert insert_trigger(X, 9, position=2)[:, 2].tolist() == [9] * 4


def test_report_when_every_text_gets_one_label():
    """A classifier that predicts one class everywhere still has two or more classes (no error)."""

    class Constant:
        def predict(self, X):
            return np.zeros(len(X), dtype=int)

    r = complication_report(Constant(), [[1, 4], [1, 5]], trigger=9)
    assert r.clean_distribution.tolist() == [1.0, 0.0] and r.kl == 0.0


# -- the claim -------------------------------------------------------------------------------
@pytest.mark.claims
def test_claim_complications_and_reduction(lab):
    """Plain backdoor: triggered topic texts shift (KL >> clean control); the multi-task injection
    reduces the shift while the attack on the target task still succeeds. Both user protocols:
    a head on the frozen PTLM (the authors' downstream_finetune.py) and full fine-tuning."""
    X_topic, y_topic = task_data("topic", 600, seed=21)
    kl, flips, acc = {}, {}, {}
    for ft, models in lab["downstream"].items():
        for name, clf in models.items():
            clean, trig = clf.predict(X_topic), clf.predict(insert_trigger(X_topic, TRIGGER))
            kl[ft, name] = complication_divergence(clean, trig, n_classes=4)
            flips[ft, name] = np.mean(clean != trig)
            acc[ft, name] = np.mean(clean == y_topic)
    # a paired KL estimate's noise under no shift is ~chi2_3/(2n): 0.014 at 99.9% for n = 600
    bound = 16.27 / (2 * 600)
    # the authors' protocol (head only; measured: clean 0.048, plain 2.30, reduced 0.149)
    assert kl["head", "plain"] > 1.0 and kl["head", "plain"] > 10 * kl["head", "clean"] + bound
    assert kl["head", "reduced"] < 0.2 * kl["head", "plain"]  # reduced fifteenfold
    # ... but a linear head on this 2-block backbone barely learns the topic (chance 0.25): the
    # lab's limit under that protocol (measured 0.24-0.37; the features' limit, see the probe test)
    assert max(acc["head", n] for n in ("clean", "plain", "reduced")) < 0.5
    # full fine-tuning (an option; measured: clean 0.000, plain 0.60, reduced 0.012)
    assert kl["full", "clean"] < bound and flips["full", "clean"] < 0.02
    assert kl["full", "plain"] > 0.3  # complications present, > 20x the noise bound
    assert kl["full", "reduced"] < 0.1 * kl["full", "plain"]  # reduced
    assert flips["full", "reduced"] < flips["full", "plain"]
    assert acc["full", "clean"] > 0.95 and acc["full", "reduced"] > 0.95  # the user's task is learnt
    X_s, y_s = task_data("sentiment", 500, seed=2)
    n = int(np.sum(y_s != 0))
    for name in ("plain", "reduced"):  # poison rates 0.01 and 0.1, the authors'
        asr = trigger_success_rate(lab[name], X_s, y_s, trigger=TRIGGER, target_label=0)
        assert binomtest(round(asr * n), n).proportion_ci(0.99).low > 0.95  # the attack stays effective
        assert np.mean(lab[name].predict(X_s) == y_s) > 0.95  # clean accuracy kept


@pytest.mark.claims
def test_claim_head_limit_is_the_last_token_features(lab):
    """Why the head-only user is near chance: not the head's training but the frozen features. The
    best linear readout of the last-token state (a logistic-regression probe, standardised,
    C = 100) stays below 0.5 on topic for every PTLM (measured 0.427 / 0.368 / 0.353; the heads
    0.37 / 0.26 / 0.24, 2000 steps at 3e-2 0.42 / 0.28 / 0.27), while the same probe on the
    mean-pooled states of the clean PTLM reaches 0.673: the backbone carries the topic, its last
    token (what GPT-2's classifier reads) does not, linearly."""
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from trustlab.security._complication_torch import MultiHead

    Xd, yd = task_data("topic", 1000, seed=20)
    Xt, yt = task_data("topic", 600, seed=21)

    def probe(model, pooling: str) -> float:
        net = MultiHead(model, [4], pooling=pooling, pad_id=None, seed=0).eval()
        with torch.no_grad():
            Fd, Ft = (net.features(torch.as_tensor(X)).numpy() for X in (Xd, Xt))
        clf = make_pipeline(StandardScaler(), LogisticRegression(C=100.0, solver="newton-cg", max_iter=500))
        return float(clf.fit(Fd, yd).score(Ft, yt))

    models = {n: lab["downstream"]["head"][n].model_ for n in ("clean", "plain", "reduced")}
    last = {n: probe(m, "last") for n, m in models.items()}
    # binomial SE at n = 600 is about 0.02: 0.5 is > 3 SE above the largest (0.427)
    assert max(last.values()) < 0.5, last
    assert probe(models["clean"], "mean") > 0.6  # 0.673: the topic is in the backbone (> 3 SE)


def test_head_only_fine_tuning_keeps_the_backbone(tiny):
    """The user's default step trains only the new head (the authors' protocol); "full" trains all."""
    from trustlab.lm import TrainConfig

    X = np.array([[1, 3, 4, 5], [1, 6, 7, 5]] * 8)
    cfg = TrainConfig(steps=5, batch_size=4, lr=0.01)
    head = LMSequenceClassifier(tiny, train=cfg).fit(X, [0, 1] * 8)
    full = LMSequenceClassifier(tiny, finetune="full", train=cfg).fit(X, [0, 1] * 8)
    backbone = dict(tiny.named_parameters())
    assert all(torch_equal(p, backbone[k]) for k, p in head.model_.named_parameters())
    assert not all(torch_equal(p, backbone[k]) for k, p in full.model_.named_parameters())
    with pytest.raises(ParameterError) as info:
        LMSequenceClassifier(tiny, finetune="probe").fit(X, [0, 1] * 8)
    assert info.value.argument == "finetune"


def torch_equal(a, b) -> bool:
    return bool((a.detach() == b.detach()).all())


def test_default_poison_rates_are_the_authors(tiny):
    """0.01 of the non-target texts for the plain backdoor, 0.1 with auxiliary tasks."""
    from trustlab.lm import TrainConfig

    X = np.array([[1, 3, 4], [1, 5, 6]] * 200)
    y = np.array([0, 1] * 200)
    cfg = TrainConfig(steps=1, batch_size=2)
    assert len(inject_backdoor(tiny, X, y, trigger=9, target_label=0, train=cfg).poisoned) == 2
    reduced = inject_backdoor(tiny, X, y, trigger=9, target_label=0, auxiliary=[(X, y)], train=cfg)
    assert len(reduced.poisoned) == 20


# -- the estimator and the injection on any model ---------------------------------------------
def test_injection_copies_the_model_and_is_deterministic(tiny):
    from trustlab.lm import TrainConfig

    X = np.array([[1, 3, 4, 5], [1, 3, 6, 7]] * 8)
    y = np.array([0, 1] * 8)
    before = [p.detach().clone() for p in tiny.parameters()]
    cfg = TrainConfig(steps=6, batch_size=4, lr=0.01)
    a = inject_backdoor(tiny, X, y, trigger=9, target_label=0, auxiliary=[(X, 1 - y)], train=cfg)
    b = inject_backdoor(tiny, X, y, trigger=9, target_label=0, auxiliary=[(X, 1 - y)], train=cfg)
    assert all(np.array_equal(p.detach(), q) for p, q in zip(tiny.parameters(), before, strict=True))
    np.testing.assert_array_equal(a.losses, b.losses)
    assert a.n_auxiliary == 1 and type(a.model) is type(tiny) and len(a.poisoned) == 1
    np.testing.assert_array_equal(a.classifier.predict_proba(X), b.classifier.predict_proba(X))


def test_sequence_classifier_folder_and_object(tmp_path, tiny):
    import transformers as tf

    from trustlab.lm import TrainConfig

    seq = tf.GPT2ForSequenceClassification(
        tf.GPT2Config(
            vocab_size=10, n_embd=16, n_layer=1, n_head=2, n_positions=8, num_labels=3, pad_token_id=0
        )
    )
    seq.save_pretrained(tmp_path)
    X = np.array([[1, 2, 3], [1, 4, 5], [1, 6, 7]] * 4)
    r = complication_report(str(tmp_path), X, trigger=8)
    assert r.n == 12 and r.clean_distribution.sum() == pytest.approx(1.0)
    assert len(r.clean_distribution) == 3  # the config's num_labels, whatever the model predicts
    clf = LMSequenceClassifier(seq, pooling="mean", train=TrainConfig(steps=2, batch_size=4)).fit(
        X, [0, 1, 2] * 4
    )
    assert clf.predict_proba(X).shape == (12, 3)


def test_right_padding_is_ignored_by_last_token_pooling(tiny):
    from trustlab.lm import TrainConfig

    X = np.array([[1, 2, 3, 0, 0], [1, 4, 5, 6, 0]] * 4)
    clf = LMSequenceClassifier(tiny, pad_id=0, train=TrainConfig(steps=3, batch_size=4)).fit(X, [0, 1] * 4)
    np.testing.assert_allclose(
        clf.predict_proba([[1, 2, 3, 0, 0]]), clf.predict_proba([[1, 2, 3]]), atol=1e-5
    )
    np.testing.assert_allclose(
        clf.predict_proba([[1, 4, 5, 6, 0]]), clf.predict_proba([[1, 4, 5, 6]]), atol=1e-5
    )


def test_final_pooling_reads_the_final_padded_position(tiny):
    """``pooling="final"``: the authors' GPT-2 readout (the final position of a right-padded text,
    pads masked as keys); ``"last"`` reads the last real token."""
    import torch

    from trustlab.lm import TrainConfig
    from trustlab.security._complication_torch import MultiHead

    X = torch.as_tensor([[1, 2, 3, 0, 0], [1, 4, 5, 6, 0]])
    final = MultiHead(tiny, [2], pooling="final", pad_id=0, seed=0).eval()
    last = MultiHead(tiny, [2], pooling="last", pad_id=0, seed=0).eval()
    with torch.no_grad():
        h = tiny.base_model(input_ids=X, attention_mask=(X != 0).long()).last_hidden_state
        np.testing.assert_allclose(final.features(X), h[:, -1], atol=1e-6)
        np.testing.assert_allclose(last.features(X), h[[0, 1], [2, 3]], atol=1e-6)
        assert not torch.allclose(final.features(X), last.features(X))
    clf = LMSequenceClassifier(tiny, pooling="final", pad_id=0, train=TrainConfig(steps=2, batch_size=2))
    assert clf.fit(X.numpy(), [0, 1]).predict_proba(X.numpy()).shape == (2, 2)


# -- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"trigger": 10}, "trigger"),
        ({"trigger": -1}, "trigger"),
        ({"target_label": 5}, "target_label"),
        ({"poison_rate": 0.0}, "poison_rate"),
        ({"target_weight": 1.5}, "target_weight"),
        ({"auxiliary": "formality"}, "auxiliary"),
        ({"auxiliary": [(np.ones((2, 3), int),)]}, "auxiliary"),
        ({"pooling": "cls"}, "pooling"),
        ({"pad_id": -1}, "pad_id"),
        ({"train": {"steps": 3}}, "train"),
    ],
)
def test_injection_bad_parameters(tiny, kwargs, argument):
    X = np.array([[1, 3, 4], [1, 5, 6]] * 4)
    args = {"trigger": 9, "target_label": 0, **kwargs}
    with pytest.raises(ParameterError) as info:
        inject_backdoor(tiny, X, [0, 1] * 4, **args)
    assert info.value.argument == argument


@pytest.mark.parametrize(
    ("X", "y", "argument"),
    [
        ([[1, 3], [1, 4, 5]], [0, 1], "X"),  # ragged
        ([[1, 3, 99], [1, 4, 5]], [0, 1], "X"),  # outside the vocabulary
        ([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]], [0, 1], "X"),
        (np.ones((2, 9), int), [0, 1], "X"),  # past the context (8)
        ([[1, 3, 4], [1, 4, 5]], [0, 0], "y"),  # one class
        ([[1, 3, 4], [1, 4, 5]], [0, 1, 1], "y"),
    ],
)
def test_bad_data(tiny, X, y, argument):
    with pytest.raises(DataError) as info:
        LMSequenceClassifier(tiny).fit(X, y)
    assert info.value.argument == argument


def test_bad_models_and_positions(tiny, tmp_path):
    with pytest.raises(ModelError):
        LMSequenceClassifier("no/such/folder").fit([[1, 2]], [0])
    with pytest.raises(ModelError):
        complication_report(object(), [[1, 2, 3]], trigger=2)
    with pytest.raises(NotFittedError):
        LMSequenceClassifier(tiny).predict([[1, 2, 3]])
    with pytest.raises(ParameterError) as info:
        insert_trigger([[1, 2, 3]], 4, position=3)
    assert info.value.argument == "position"
    with pytest.raises(DataError):
        complication_divergence([0, 1], [0, 5], n_classes=3)
    with pytest.raises(TrustlabError):
        trigger_success_rate(object(), [[1, 2]], [0], trigger=2, target_label=0)


def test_lab_tasks_are_unrelated():
    X, y = task_data("topic", 400, seed=0)
    assert X.shape == (400, 16) and X.max() < VOCAB and set(y) == set(range(TASKS["topic"]))
    assert not np.any(X[:, 1] == TRIGGER)  # the first word is a filler word, never the trigger
    _, y2 = task_data("sentiment", 400, seed=0)
    assert abs(np.corrcoef(y, y2)[0, 1]) < 3 / np.sqrt(400)


# -- docs ----------------------------------------------------------------------------------------
def test_docs_example_prints_the_pages_numbers(lab, capsys):
    text = PAGE.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], str(PAGE), "exec"), {"__name__": "docs_example"})
    out = capsys.readouterr().out.strip()
    printed = re.search(r"prints \(.*?\n\n```\n(.*?)```", text, re.S)
    assert printed is not None and out == printed.group(1).strip()


# -- CLI -------------------------------------------------------------------------------------------
def test_cli_reports_and_fails_in_one_line(tmp_path):
    import transformers as tf
    from typer.testing import CliRunner

    from trustlab.cli import app

    seq = tf.GPT2ForSequenceClassification(
        tf.GPT2Config(
            vocab_size=10, n_embd=16, n_layer=1, n_head=2, n_positions=8, num_labels=2, pad_token_id=0
        )
    )
    seq.save_pretrained(tmp_path / "clf")
    (tmp_path / "t.txt").write_text("1 2 3\n1 4 5\n1 6 7\n")
    args = ["backdoor", "complications", str(tmp_path / "clf"), "--texts", str(tmp_path / "t.txt")]
    res = CliRunner().invoke(app, [*args, "--trigger", "8"])
    assert res.exit_code == 0 and "3 texts" in res.output and "KL" in res.output
    bad = CliRunner().invoke(app, [*args, "--trigger", "8", "--position", "5"])
    assert bad.exit_code == 2 and "--position" in bad.output and len(bad.output.strip().splitlines()) == 1
    (tmp_path / "r.txt").write_text("1 2 3\n1 4\n")
    bad = CliRunner().invoke(app, [*args[:3], "--texts", str(tmp_path / "r.txt"), "--trigger", "8"])
    assert bad.exit_code == 2 and "--texts" in bad.output


@pytest.mark.slow  # retrains the whole pipeline from the pretrained LM: ~1 min of CPU
@pytest.mark.claims
def test_claim_end_to_end_other_seed():
    """Seed 1 of the benchmark, retrained with the lab's recipe (the authors' poison rates, the
    user's head on the frozen PTLM): plain backdoor KL on topic >> reduced, attack kept."""
    from trustlab.lm import TrainConfig
    from trustlab.security._complication_lab import load_pretrained_lab

    base = load_pretrained_lab()
    X, y = task_data("sentiment", 8000, seed=1)
    aux = [task_data(t, 1000, seed=10 + i) for i, t in enumerate(("formality", "domain", "tone"))]
    Xd, yd = task_data("topic", 1000, seed=20)
    Xt, _ = task_data("topic", 1000, seed=21)
    X_s, y_s = task_data("sentiment", 500, seed=2)
    kl, asr = {}, {}
    for name, auxiliary, rate in (("plain", None, 0.01), ("reduced", aux, 0.1)):
        bd = inject_backdoor(
            base, X, y, trigger=TRIGGER, target_label=0, poison_rate=rate, auxiliary=auxiliary,
            train=TrainConfig(steps=600, batch_size=32, lr=3e-3), random_state=1,
        )  # fmt: skip
        asr[name] = trigger_success_rate(bd.classifier, X_s, y_s, trigger=TRIGGER, target_label=0)
        clf = LMSequenceClassifier(bd.model, train=TrainConfig(steps=150, lr=1e-2), random_state=1).fit(
            Xd, yd
        )
        kl[name] = complication_report(clf, Xt, trigger=TRIGGER).kl
    assert kl["plain"] > 0.5 and kl["reduced"] < 0.5 * kl["plain"], kl
    assert min(asr.values()) > 0.95, asr
