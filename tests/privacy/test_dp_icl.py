"""DP synthetic demonstrations (Tang et al. 2024; PTA, Yamasaki et al. 2025): audit, accounting, bad input."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from trustlab.errors import BudgetExceededError, DataError, ParameterError
from trustlab.privacy import Accountant
from trustlab.privacy.audit import audit_epsilon
from trustlab.privacy.calibration import analytic_gaussian_epsilon, gaussian_delta
from trustlab.privacy.dp_icl import (
    clip_to_simplex,
    dp_icl_sigma,
    generate_dp_demonstrations,
    private_token,
    pta_distribution,
    public_vocabulary,
    step_sensitivity,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "privacy" / "dp-icl.md"


def _fake_lm(contexts):
    """Vocabulary of 4: a context holding the private token 2 puts all its mass on token 0, one
    holding 3 on token 1 (the worst case: disjoint one-hot distributions); public contexts
    (neither) split evenly between 0 and 1."""
    out = np.zeros((len(contexts), 4))
    for r, c in enumerate(contexts):
        if 2 in c:
            out[r, 0] = 1.0
        elif 3 in c:
            out[r, 1] = 1.0
        else:
            out[r, :2] = 0.5
    return out


def _release(private, *, epsilon=2.0, delta=1e-5, max_tokens=16, method="baseline", **kw):
    return generate_dp_demonstrations(
        _fake_lm,
        private,
        epsilon=epsilon,
        delta=delta,
        label_prompts=[[0]],
        max_tokens=max_tokens,
        top_k=2,
        method=method,
        **kw,
    )


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("pta", {}),
        ("pta", {"top_p": 0.9, "base_probability": False}),  # the ablations' candidate set and PA3
        pytest.param("baseline", {}, marks=pytest.mark.slow),  # slow: the same step, 1-2 s each
        pytest.param("baseline", {"top_p": 0.9}, marks=pytest.mark.slow),  # BA2
        pytest.param("pta", {"top_p": 0.9}, marks=pytest.mark.slow),  # PA2
    ],
)
@pytest.mark.claims
def test_claim_audit_one_step_on_worst_case_neighbours(method, options, audit_trials):
    # PTA's privacy equals the baseline's (the paper's Section 4.2 / Appendix D): both pass the
    # same worst-case audit, with and without the ablations' options (Algorithm 2's top-p cut of the
    # public vocabulary, PTA without p_base). One private demonstration replaced: the only subset's
    # distribution moves from token 0 to token 1 (L2 distance sqrt(2), the sensitivity)
    res = audit_epsilon(
        lambda d: _release(d, method=method, max_tokens=1, **options).value[0][-1],
        [[2]],
        [[3]],
        n_trials=audit_trials(1600),
        delta=1e-5,
        events=("value",),
    )
    assert res.epsilon_lower <= 2.0, res


@pytest.mark.slow  # 2 x 2000 releases of 16 noisy tokens each (about a minute)
@pytest.mark.parametrize(
    ("method", "options"),
    [("baseline", {}), ("pta", {"top_p": 0.9, "base_probability": False})],  # also the ablations' path
)
def test_audit_whole_release_on_worst_case_neighbours(method, options, audit_trials):
    # the same neighbours at every one of 16 steps; statistic: how many 1-tokens came out,
    # so a noise scale that ignores the composition over steps (or is mis-scaled 4x) shows
    res = audit_epsilon(
        lambda d: sum(t == 1 for t in _release(d, method=method, **options).value[0][1:]),
        [[2]],
        [[3]],
        n_trials=audit_trials(2000),
        delta=1e-5,
    )
    assert res.epsilon_lower <= 2.0, res


def test_audit_one_token_with_unnormalised_inputs(audit_trials):
    # a subset that claims 1000 on token 1: clipping brings it back to the simplex
    sigma = dp_icl_sigma(1.0, 1e-5, 1, 2)
    res = audit_epsilon(
        lambda d: private_token(d, [0, 1], sigma),
        [[1.0, 0.0]],
        [[0.0, 1000.0]],
        n_trials=audit_trials(1600),
        delta=1e-5,
        events=("value",),
    )
    assert res.epsilon_lower <= 1.0, res


@pytest.mark.claims
def test_claim_exact_composed_accounting():
    acc = Accountant(2.0, delta=1e-5)
    rel = _release([[2], [2], [3]], max_tokens=4, n_demonstrations=2, accountant=acc)
    assert rel.measure == "gaussian" and rel.parameters["n_steps"] == 8
    assert rel.parameters["n_subsets"] == 3
    assert rel.sensitivity == pytest.approx(math.sqrt(8) * step_sensitivity(2))
    # exact accounting from the noise each token gets: 8 Gaussian steps of sensitivity sqrt(2) + slack
    # compose to Gaussian DP with mu = sqrt(8) * s / sigma, which is (2, 1e-5)-DP and no more
    mu = math.sqrt(8) * step_sensitivity(2) / rel.parameters["sigma_per_token"]
    assert gaussian_delta(2.0, mu) == pytest.approx(1e-5, rel=1e-4)
    assert analytic_gaussian_epsilon(rel.noise_scale, 1e-5, rel.sensitivity) == pytest.approx(2.0, rel=1e-6)
    assert acc.spent_epsilon == pytest.approx(2.0, rel=1e-6)
    assert len(rel.value) == 2 and all(len(d) == 5 and d[0] == 0 for d in rel.value)
    with pytest.raises(BudgetExceededError):  # nothing left: refused before any noise is drawn
        _release([[2]], max_tokens=1, accountant=acc)


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("pta", {"top_p": 0.6}),  # PA2
        ("pta", {"base_probability": False}),  # PA3
        ("baseline", {"top_p": 0.6}),  # BA2
    ],
)
def test_ablation_options_spend_what_the_default_spends(method, options):
    # the top-p cut and dropping p_base only post-process public outputs or reshape a subset's
    # distribution before clipping: same noise, same sensitivity, same ledger entry
    spent = []
    for kw in ({}, options):
        acc = Accountant(3.0, delta=1e-4)
        rel = _release(
            [[2], [3], [2]], epsilon=1.5, delta=5e-5, max_tokens=3, method=method, accountant=acc, **kw
        )
        spent.append(
            (rel.epsilon, rel.delta, rel.noise_scale, rel.sensitivity, acc.spent_epsilon, acc.spent_delta)
        )
    assert spent[1] == pytest.approx(spent[0], rel=1e-12)
    assert rel.parameters["top_p"] == options.get("top_p", 1.0)
    assert rel.parameters["base_probability"] is options.get("base_probability", True)


def _skewed_lm(contexts):
    """Vocabulary of 4: public contexts 0.7 / 0.25 / 0.05 / 0 on tokens 0-3; a context holding the
    private token 2 puts all its mass on token 3, which the public prompt never proposes."""
    out = np.tile([0.7, 0.25, 0.05, 0.0], (len(contexts), 1))
    for r, c in enumerate(contexts):
        if 2 in c:
            out[r] = [0.0, 0.0, 0.0, 1.0]
    return out


@pytest.mark.parametrize("base_probability", [True, False])
def test_top_p_candidates_come_from_the_public_distribution_only(base_probability):
    # top_p=0.9 keeps tokens 0 and 1 (0.7 + 0.25 >= 0.9) whatever the private demonstrations say;
    # token 2 (public 0.05) and token 3 (private only) can never be emitted
    rel = generate_dp_demonstrations(
        _skewed_lm,
        [[2]] * 6,
        epsilon=4.0,
        delta=1e-5,
        label_prompts=[[0]],
        max_tokens=12,
        top_k=4,
        top_p=0.9,
        method="pta",
        base_probability=base_probability,
    )
    assert set(rel.value[0][1:]) <= {0, 1}, rel.value


def test_noise_scale_grows_as_sqrt_of_steps():
    assert dp_icl_sigma(1.0, 1e-5, 16, 8) == pytest.approx(4 * dp_icl_sigma(1.0, 1e-5, 1, 8))


def test_pieces():
    assert np.allclose(clip_to_simplex([[np.nan, -1.0, 2.0, 2.0]]), [[0, 0, 0.5, 0.5]])
    assert public_vocabulary([0.2, 0.2, 0.6], 5).tolist() == [2, 0, 1]
    assert public_vocabulary([0.2, 0.2, 0.6], 5, top_p=0.6).tolist() == [2]  # V' ∩ V'' (Algorithm 2)
    assert public_vocabulary([0.2, 0.2, 0.6], 5, top_p=0.7).tolist() == [2, 0]
    assert public_vocabulary([0.2, 0.2, 0.6], 1, top_p=0.9).tolist() == [2]  # top-k binds first
    q = pta_distribution([[0.5, 0.3, 0.2]], [0.25, 0.5, 0.25], None, 1.0, vocab=[0, 1])  # PA3
    assert q[0].tolist() == pytest.approx([2.0 / 2.6, 0.6 / 2.6, 0.0])
    p = pta_distribution([[0.6, 0.4]], [0.5, 0.5], [0.5, 0.5], 2.0)
    assert p[0, 0] == pytest.approx(0.36 / 0.52)  # (0.6/0.5)^2 vs (0.4/0.5)^2
    assert np.allclose(pta_distribution([[0.9, 0.1]], [0.5, 0.5], [0.3, 0.7], 0.0), [[0.3, 0.7]])
    assert private_token([[0.1, 0.9, 0.0], [0.0, 1.0, 0.0]], [0, 1, 2], 0.0) == 1


def test_eos_stops_a_demonstration_but_not_the_charge():
    rel = _release([[3]], epsilon=1000.0, max_tokens=5, eos_id=1)  # noise std 0.08, gap 1: no flake
    assert rel.value[0] == [0, 1] and rel.parameters["n_steps"] == 5


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"method": "greedy"}, "method"),
        ({"alpha": -1.0}, "alpha"),
        ({"top_k": 0}, "top_k"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"base_probability": "no"}, "base_probability"),
        ({"base_probability": False, "method": "baseline"}, "base_probability"),
        ({"shots": 3}, "shots"),
        ({"label_prompts": [[]]}, "label_prompts"),
        ({"private": [[2.5]]}, "private"),
    ],
)
def test_bad_input_names_the_argument(kwargs, argument):
    args = {"epsilon": 1.0, "delta": 1e-5, "label_prompts": [[0]], "private": [[2], [3]]}
    args.update(kwargs)
    private = args.pop("private")
    with pytest.raises((ParameterError, DataError)) as info:
        generate_dp_demonstrations(_fake_lm, private, **args)
    assert info.value.argument == argument


def test_bad_model_and_context_and_vocabulary(tiny_lm):
    with pytest.raises(ParameterError) as info:
        generate_dp_demonstrations(object(), [[1]], epsilon=1.0, delta=1e-5, label_prompts=[[0]])
    assert info.value.argument == "model"
    with pytest.raises(ParameterError) as info:  # 4 * (40 + 8) tokens > the context of 64
        generate_dp_demonstrations(
            tiny_lm, [[1]] * 4, epsilon=1.0, delta=1e-5, label_prompts=[[0]], shots=4, max_tokens=40
        )
    assert info.value.argument == "max_demo_tokens"
    with pytest.raises(DataError) as info:
        generate_dp_demonstrations(tiny_lm, [[99]], epsilon=1.0, delta=1e-5, label_prompts=[[0]])
    assert info.value.argument == "private"
    for eos in (99, -1, 1.5):
        with pytest.raises(DataError) as info:
            generate_dp_demonstrations(
                tiny_lm, [[1]], epsilon=1.0, delta=1e-5, label_prompts=[[0]], eos_id=eos
            )
        assert info.value.argument == "eos_id"


@pytest.fixture(scope="module")
def tiny_lm():
    pytest.importorskip("transformers")
    from trustlab.lm import ModelConfig, build_model

    return build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2, max_len=64))


def test_docs_example_runs(capsys):
    pytest.importorskip("transformers")
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), {"__name__": "docs_example"})
    assert "sigma=" in capsys.readouterr().out
