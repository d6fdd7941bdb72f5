"""The Unlearning section: membership inference on the training rows and the cost of a deletion request."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.audit.sections.unlearning import UnlearningSection, advantage_interval
from trustlab.datasets import load_default
from trustlab.unlearning import membership_advantage


@pytest.fixture(scope="module")
def benefits():
    return load_default()


def _run(benefits, model):
    frame, info, _ = benefits
    audit = Audit(model=model, sections=[UnlearningSection()])
    return audit, audit.run(frame, target=info.target, sensitive=list(info.sensitive))


def test_membership_check_follows_its_interval_and_agrees_with_the_library(benefits):
    frame, info, _ = benefits
    audit, report = _run(benefits, "hgb")
    res = report.results[0]
    adv, low, high = res.figures["membership"]["advantage"]
    ctx = audit.context(frame, target=info.target, sensitive=list(info.sensitive))
    X = ctx.data[ctx.features]
    tr, te = ctx.train_index, ctx.test_index
    expected = membership_advantage(ctx.model, X.iloc[tr], ctx.y[tr], X.iloc[te], ctx.y[te])
    assert adv == pytest.approx(expected, abs=1e-12)
    assert (low, high) == pytest.approx(advantage_interval(adv, tr.size, te.size))
    check = res.checks[0]
    assert check.status == ("pass" if high <= 0.1 else "fail" if low > 0.1 else "inconclusive")
    # a boosted tree model on 3,464 rows remembers them: measured 0.228 [0.163, 0.292]
    assert check.status == "fail"
    assert "deletion" not in res.figures
    assert any("no certified unlearning for 'hgb'" in n for n in res.notes)


def test_logistic_model_gets_the_deletion_comparison(benefits):
    _, report = _run(benefits, "logistic")
    res = report.results[0]
    d = res.figures["deletion"]
    assert d["rows"] == 50 and d["C0"] >= 2 * d["norm"] and np.log2(d["C0"]).is_integer()
    assert set(d["models"]) == {"original", "unlearned", "retrained"}
    un, re_ = d["models"]["unlearned"], d["models"]["retrained"]
    # the certified model matches retraining on held-out rows within a point
    assert abs(un["test_accuracy"] - re_["test_accuracy"]) <= 0.01
    assert un["gradient_evaluations"] > 0 and d["epsilon"] > 0 and d["delta"] == 1e-5
    html = UnlearningSection().render(res)
    assert "certified unlearning" in html and "retrained without the rows" in html


def test_advantage_interval_covers_zero_for_two_samples_of_one_distribution():
    # 200 replicates of the attack on losses from one distribution: the interval holds 0 in >= 95%
    rng = np.random.default_rng(0)
    m, n, covered = 300, 200, 0
    for _ in range(200):
        a, b = rng.exponential(size=m), rng.exponential(size=n)
        taus = np.unique(np.concatenate([a, b]))
        adv = max(
            0.0,
            float(
                np.max(
                    np.searchsorted(np.sort(a), taus, "right") / m
                    - np.searchsorted(np.sort(b), taus, "right") / n
                )
            ),
        )
        covered += advantage_interval(adv, m, n)[0] <= 0.0
    assert covered >= 190


def test_private_mode_and_supplied_models_are_left_out(benefits):
    frame, info, schema = benefits
    rep = Audit(private=True, epsilon=1.0, schema=schema, sections=[UnlearningSection()]).run(
        frame, target=info.target, sensitive=list(info.sensitive)
    )
    res = rep.results[0]
    assert res.figures == {"released": False} and not res.checks and "private mode" in res.notes[0]
    assert not any(e.section == "unlearning" for e in rep.ledger)
    model = Audit(model="logistic").context(frame, target=info.target, sensitive=["sex"]).model
    res = Audit(model=model, sections=[UnlearningSection()]).run(frame, target=info.target, sensitive=["sex"])
    assert res.results[0].figures == {"released": False} and "supplied" in res.results[0].notes[0]


def test_membership_advantage_accepts_frames_for_pipelines():
    from trustlab.models import make_model

    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.normal(size=200), "c": rng.choice(["x", "y"], 200)})
    y = (X["a"] > 0).astype(int).to_numpy()
    model = make_model("logistic", X).fit(X.iloc[:100], y[:100])
    adv = membership_advantage(model, X.iloc[:100], y[:100], X.iloc[100:], y[100:])
    assert 0.0 <= adv < 0.25
