"""SAeUron (row 003-06), second part: several concepts at once, why digits resist, the
mean-difference baseline and ``trustlab unlearn saeuron``.

All on the shipped fit (:func:`digits_saeuron`); generations are judged by a logistic
regression on scikit-learn's digits, as in test_saeuron.py.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sklearn.datasets import load_digits  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from trustlab.cli import app  # noqa: E402
from trustlab.errors import TrustlabError  # noqa: E402
from trustlab.unlearning.saeuron import digits_saeuron, feature_scores, select_features  # noqa: E402
from trustlab.unlearning.saeuron_eval import (  # noqa: E402
    mean_difference_ablation,
    mean_difference_directions,
    unlearning_rates,
)

EVENS, ODDS = [0, 2, 4, 6, 8], [1, 3, 5, 7, 9]


@pytest.fixture(scope="module")
def su():
    """The shipped fit at ``down2`` (the claims below were calibrated on it)."""
    return digits_saeuron(hook="down2")


@pytest.fixture(scope="module")
def judge():
    from threadpoolctl import threadpool_limits

    d = load_digits()
    with threadpool_limits(1):  # BLAS threads only cost on 1,797 x 64
        return LogisticRegression(max_iter=500).fit(d.data / 16.0, d.target)


def _noise(n_per_digit: int, seed: int = 1):
    y = np.repeat(np.arange(10), n_per_digit)
    return np.random.default_rng(seed).standard_normal((len(y), 1, 8, 8)), y


def _rates(su, judge, X, y, unlearn, **kw):
    img = su.generate(X, y, unlearn=unlearn, **kw)
    return unlearning_rates(y, judge.predict(img.reshape(len(y), -1)), unlearn)


def test_unlearning_rates_by_hand() -> None:
    r = unlearning_rates([3, 3, 1, 1, 5, 5], [3, 8, 1, 7, 5, 5], [3, 5])
    assert (r.removed_rate, r.retained_accuracy) == (0.75, 0.5)
    assert r.per_concept == {1: 0.5, 3: 0.5, 5: 1.0} and (r.n_removed, r.n_retained) == (4, 2)
    with pytest.raises(TrustlabError, match="predicted"):
        unlearning_rates([1, 2], [1], [1])
    with pytest.raises(TrustlabError, match="y"):
        unlearning_rates([1, 1], [1, 1], [1])


def test_score_against_retained_leaves_the_co_removed_concepts_out(su) -> None:
    """One concept: the same features; several: each concept is scored against the kept ones only."""
    retained = digits_saeuron(hook="down2").set_params(score_against="retained")
    for s_all, s_ret in zip(su.selected_features(3), retained.selected_features(3), strict=True):
        np.testing.assert_array_equal(s_all, s_ret)

    def without(c, other):  # the counts with the co-removed concept left out
        w = su.counts_.astype(float)
        w[other] = 0.0
        return select_features(feature_scores(su.concept_means_, c, counts=w), 90.0)

    want = [np.union1d(a, b) for a, b in zip(without(1, 3), without(3, 1), strict=True)]
    got = retained.selected_features([1, 3], percentile=90.0)
    for g, wnt in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, wnt)
    assert any(
        len(np.setdiff1d(g, a))
        for g, a in zip(got, su.selected_features([1, 3], percentile=90.0), strict=True)
    )
    with pytest.raises(TrustlabError, match="unlearn"):
        retained.selected_features(list(range(10)))
    with pytest.raises(TrustlabError, match="score_against"):
        digits_saeuron(hook="down2").set_params(score_against="mine").selected_features(3)


def test_mean_difference_ablation_at_zero_changes_nothing(su) -> None:
    X, y = _noise(2, seed=5)
    dirs = mean_difference_directions(su, X, y, [1, 3], per_concept=True)
    assert len(dirs) == len(su.timesteps_) and dirs[0][0].shape == (2, 32)
    np.testing.assert_allclose(np.linalg.norm(dirs[0][0], axis=1), 1.0, atol=1e-9)
    base = su.generate(X, y)
    with mean_difference_ablation(su, dirs, 0.0):
        same = su.generate(X, y)
    with mean_difference_ablation(su, dirs, 8.0):
        moved = su.generate(X, y)
    np.testing.assert_allclose(same, base, atol=1e-5)
    assert np.abs(moved - base).max() > 0.05
    with pytest.raises(TrustlabError, match="alpha"):
        with mean_difference_ablation(su, dirs, -1.0):
            pass
    with pytest.raises(TrustlabError, match="directions"):
        with mean_difference_ablation(su, dirs[:3], 1.0):
            pass
    with pytest.raises(TrustlabError, match="y"):
        mean_difference_directions(su, X, np.full(len(y), 3), [3])


def test_cli_removes_digits_writes_images_and_saves_the_saeuron(tmp_path) -> None:
    out, args = tmp_path / "edited.npz", ["unlearn", "saeuron", "--remove", "3", "--per-digit", "1"]
    res = CliRunner().invoke(app, [*args, "--out", str(out), "--save", str(tmp_path / "su")])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("removed 3: generated 1.00 -> ")
    with np.load(out) as f:
        assert f["images"].shape == (10, 1, 8, 8) and f["removed"].tolist() == [3]
    again = CliRunner().invoke(app, [*args, "--load", str(tmp_path / "su")])  # the saved fit
    assert again.exit_code == 0 and again.output == res.output
    (tmp_path / "a_file").write_text("x")
    for flag in ("--save", "--load"):
        bad = CliRunner().invoke(app, [*args, flag, str(tmp_path / "a_file")])
        lines = [ln for ln in bad.output.splitlines() if ln.strip()]
        assert bad.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"error ({flag})")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--remove", "3,12"], "--remove"),
        (["--remove", "x"], "--remove"),
        (["--remove", "3", "--per-digit", "0"], "--per-digit"),
        (["--remove", "3", "--per-digit", "1", "--percentile", "100"], "--percentile"),
        (["--remove", "3", "--per-digit", "1", "--multiplier", "nan"], "--multiplier"),
        (["--remove", "3", "--per-digit", "1", "--score-against", "some"], "--score-against"),
        (["--remove", "3", "--out", "/no/such/dir/x.npz"], "--out"),
        (["--remove", "3", "--block", "up1"], "--block"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args, flag) -> None:
    res = CliRunner().invoke(app, ["unlearn", "saeuron", *args])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error ({flag})")


@pytest.mark.slow  # 20 prompts per digit, 5 generation passes: ~8 s of CPU
@pytest.mark.claims
def test_claim_five_digits_at_once_keep_the_others(su, judge) -> None:
    """Paper: one SAE removes several concepts at once. The per-digit parameters of the single-digit
    sweep (percentile 90-99, multipliers down to -30) united over five digits scale ~92 of the 512
    features per step, which carry 63-93% of the kept digits' activation mass: the kept digits
    break (measured accuracy 0.59 / 0.57). One shared point, as the authors remove several styles
    (percentile 99, multiplier -20, picked on the validation noise), with each digit scored
    against the kept digits only, keeps them (measured 0.90 / 0.99) while the removed digits'
    rate falls from 1.0 to 0.41 / 0.50. 100 prompts on each side: a binomial standard error of at
    most 0.05; the bounds sit two to three of them from the measured values."""
    X, y = _noise(20)
    ret = digits_saeuron(hook="down2").set_params(score_against="retained")
    for five in (EVENS, ODDS):
        tuned = _rates(su, judge, X, y, five)
        shared = _rates(ret, judge, X, y, five, percentile=99.0, multiplier=-20.0)
        assert tuned.retained_accuracy <= 0.72
        assert shared.retained_accuracy >= 0.82
        assert shared.removed_rate <= 0.62
    one = _rates(ret, judge, X, y, [3], percentile=99.0, multiplier=-30.0)
    assert one.removed_rate <= 0.7 and one.retained_accuracy >= 0.95


@pytest.mark.slow  # six generation passes at 20 prompts per digit: ~7 s of CPU
def test_digit_four_has_a_route_around_the_hooked_block(su, judge) -> None:
    """Why digits resist at ``down2``: even the ideal erasure there (its output replaced by what it
    is under the null prompt) leaves 4 drawn 0.9 of the time and 7 0.8 (3, 5, 8, 9: 0.5-0.6),
    because the class embedding enters again in ``mid`` after the hook; the ideal erasure of
    ``mid``'s output (``down2`` and ``mid`` both nulled) leaves every digit at <= 0.25, which is
    why ``mid`` is the default block. 20 prompts per digit (standard error <= 0.11)."""
    net = su.model
    state: dict = {"busy": False}

    def pre(mod, args, kwargs):
        state["x"], state["t"] = args[0], torch.as_tensor(args[1])

    def null_temb():
        t = state["t"].expand(state["x"].shape[0]) if state["t"].ndim == 0 else state["t"]
        return net._embed(t) + net.class_embedding(torch.full((len(t),), net.n_classes, dtype=torch.long))

    def null_down2(mod, args, out):
        tn = null_temb()
        return net.down2(net.downsample(net.down1(net.inp(state["x"]), tn)), tn)

    def null_mid(mod, args, out):
        if state["busy"]:
            return out
        state["busy"] = True
        try:
            return mod(args[0], null_temb())
        finally:
            state["busy"] = False

    X, y = _noise(20)

    def rates(hooks):
        hs = [net.register_forward_pre_hook(pre, with_kwargs=True)]
        hs += [getattr(net, n).register_forward_hook(f) for n, f in hooks]
        try:
            state["busy"] = False
            pred = judge.predict(su.generate(X, y).reshape(len(y), -1))
        finally:
            for h in hs:
                h.remove()
        return np.array([np.mean(pred[y == c] == c) for c in range(10)])

    def guarded_down2(mod, args, out):
        if state["busy"]:
            return out
        state["busy"] = True
        try:
            return null_down2(mod, args, out)
        finally:
            state["busy"] = False

    at_down2 = rates([("down2", guarded_down2)])
    assert at_down2[4] >= 0.7 and at_down2[7] >= 0.6
    assert min(at_down2[[3, 5, 8, 9]]) <= 0.75
    both = rates([("down2", guarded_down2), ("mid", null_mid)])
    assert both.max() <= 0.45


@pytest.mark.slow  # six generation passes at 30 prompts per digit: ~6 s of CPU
@pytest.mark.claims
def test_claim_the_block_that_decides_the_digit_removes_seven(su, judge) -> None:
    """The paper hooks the block where the concept is decided. On the lab UNet that is ``mid``
    (its output nulled, every digit falls to <= 0.25; ``down2``'s leaves 4 at 0.9): with the
    per-digit sweep's points, 7 falls from 1.0 to 0.13 at ``mid`` but stays at 0.87 at
    ``down2``, the others keeping 0.86 / 0.95. 4 resists at both (1.0). 30 prompts per digit
    (binomial standard error <= 0.09 on one digit, ~0.02 on the 270 others); bounds >= 3 of them
    from the measured values."""
    X, y = _noise(30)
    mid = digits_saeuron()
    assert mid.hook == "mid"
    seven_mid, seven_down2 = _rates(mid, judge, X, y, [7]), _rates(su, judge, X, y, [7])
    assert seven_mid.removed_rate <= 0.4 and seven_mid.retained_accuracy >= 0.78
    assert seven_down2.removed_rate >= 0.6
    assert _rates(mid, judge, X, y, [4]).removed_rate >= 0.7  # not removed: an open gap


@pytest.mark.slow  # 12 validation passes at 10 prompts per digit, two at 50: ~6 s of CPU
@pytest.mark.claims
def test_claim_saeuron_beats_a_tuned_mean_difference_ablation_on_six_at_mid(judge) -> None:
    """The paper's claim that SAeUron beats other unlearning edits, on the one digit where it
    holds here beyond 3 standard errors (benchmarks/unlearning_saeuron_digits.py: at ``mid``,
    SAeUron minus the tuned ablation in ``(UA + IRA) / 2`` is +0.146 +- 0.015 on 6, +0.112 +-
    0.027 on 7, none lost beyond 3 SE; over the 10 digits only +0.023 +- 0.020, a tie; at
    ``down2`` the ablation is ahead, -0.075 +- 0.028). Removing 6, SAeUron leaves 0.02 of its
    prompts drawn as 6 with the others at 0.99; the mean-difference direction (from SAeUron's
    own 400 fit generations, strength picked on validation noise from 12 values by the same
    rule) takes 6 no lower than 0.18 with the others at 0.91 at any strength. Fresh noise
    (seed 5, not in the benchmark), 50 prompts per digit: the paired difference, +0.15 at
    100 prompts (SE 0.016; 9.3-9.9 SE on seeds 2, 4, 5), must exceed 3 of its standard errors
    (0.028 at 50 prompts: +0.19 measured, 6.6 SE)."""
    from trustlab.unlearning import _saeuron_lab as lab

    alphas = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0, 16.0, 24.0, 32.0)
    mid = digits_saeuron()
    dirs = mean_difference_directions(mid, *lab.lab_data(), [6])

    def score(y, pred):
        on = y == 6
        gone, kept = (pred[on] != 6).astype(float), (pred[~on] == y[~on]).astype(float)
        return gone, kept, (gone.mean() + kept.mean()) / 2

    def ablated(X, y, alpha):
        with mean_difference_ablation(mid, dirs, alpha):
            return judge.predict(mid.generate(X, y).reshape(len(y), -1))

    X_val, y_val = _noise(10, seed=3)
    alpha = max(alphas, key=lambda a: score(y_val, ablated(X_val, y_val, a))[2])
    X, y = _noise(50, seed=5)
    pred = judge.predict(mid.generate(X, y, unlearn=[6]).reshape(len(y), -1))
    sae = unlearning_rates(y, pred, [6])
    assert sae.removed_rate <= 0.12 and sae.retained_accuracy >= 0.95
    g_s, k_s, s_sae = score(y, pred)
    g_a, k_a, s_abl = score(y, ablated(X, y, alpha))
    dg, dk = g_s - g_a, k_s - k_a
    se = 0.5 * np.sqrt(dg.var(ddof=1) / len(dg) + dk.var(ddof=1) / len(dk))
    assert s_sae - s_abl > 3 * se, (alpha, s_sae, s_abl, se)
