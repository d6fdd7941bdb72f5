"""trustlab.lm.mib: MIB's circuit-localisation track (edge scores, faithfulness curves, CPR and CMD)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from trustlab.errors import DataError, ModelError, ParameterError, TrustlabError
from trustlab.lm._mib_graph import _graph_shape, edge_graph, graph_forward, prune_mask
from trustlab.lm.mib import (
    MIB_BUDGETS,
    PatchingTask,
    _Context,
    circuit_faithfulness,
    circuit_localization,
    edge_auroc,
    edge_scores,
    faithfulness_curve,
    min_pairs,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: extra threads only contend


@pytest.fixture(scope="module")
def small_task():
    return min_pairs(16, n_items=6, n_values=12, seed=3)


def test_edge_count_matches_the_benchmarks_gpt2_small() -> None:
    # MIB's evaluation code lists 32,491 edges for GPT-2 small (12 blocks, 12 heads)
    assert _graph_shape(12, 12).n_edges == 32491
    g = _graph_shape(2, 2)
    assert g.n_edges == 46 and g.edge_names[:2] == ["input->a0.h0<q>", "input->a0.h1<q>"]
    assert "a0.h1->a1.h0<k>" in g.edge_names and "m1->logits" in g.edge_names
    assert "a1.h0->m0" not in g.edge_names  # no edge runs backwards


def _hf_model(kind: str):
    """Tiny Qwen2 (biased Q/K/V) and Mistral / Llama with grouped-query attention, built from configs."""
    import transformers as tf

    shape = {"vocab_size": 20, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2}
    shape |= {"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 16}
    cls = {
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
        "mistral": (tf.MistralConfig, tf.MistralForCausalLM),
    }
    cls["llama-gqa"] = (tf.LlamaConfig, tf.LlamaForCausalLM)
    config, model = cls[kind]
    torch.manual_seed(0)
    return model(config(**shape)).eval()


@pytest.mark.parametrize("arch", ["gpt2", "llama", "mixtral", "qwen2", "mistral", "llama-gqa"])
def test_full_and_empty_circuits_reproduce_the_clean_and_counterfactual_runs(tiny_models, arch) -> None:
    model = tiny_models[arch] if arch in tiny_models else _hf_model(arch)
    g = edge_graph(model)
    gen = torch.Generator().manual_seed(0)
    clean, cf = torch.randint(0, 20, (3, 9), generator=gen), torch.randint(0, 20, (3, 9), generator=gen)
    pos = torch.tensor([8, 4, 6])
    rows = torch.arange(3)
    with torch.no_grad():
        own, _, _ = graph_forward(model, g, clean, pos)
        _, corrupt, _ = graph_forward(model, g, cf, pos)
        full, _, _ = graph_forward(model, g, clean, pos, mask=torch.ones(g.valid.shape), corrupt=corrupt)
        empty, _, _ = graph_forward(model, g, clean, pos, mask=torch.zeros(g.valid.shape), corrupt=corrupt)
        ref_clean = model(input_ids=clean).logits[rows, pos]
        ref_cf = model(input_ids=cf).logits[rows, pos]
    for ours, ref in ((own, ref_clean), (full, ref_clean), (empty, ref_cf)):
        torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_pruning_never_changes_the_output(tiny_models, small_task) -> None:
    model = tiny_models["llama"]
    ctx = _Context(model, small_task)
    rng = np.random.default_rng(0)
    for share in (0.1, 0.3, 0.6):
        mask = ctx.graph.mask(np.flatnonzero(rng.random(ctx.graph.n_edges) < share))
        pruned = prune_mask(ctx.graph, mask)
        assert pruned.sum() <= mask.sum() and not (pruned > mask).any()
        assert ctx.circuit_metric(pruned) == pytest.approx(ctx.circuit_metric(mask), abs=1e-5)


def test_activation_patching_scores_are_single_edge_ablations(tiny_models, small_task) -> None:
    model = tiny_models["llama"]
    ap = edge_scores(model, small_task, method="activation-patching")  # batched, several edges a pass
    ctx = _Context(model, small_task)
    names = ap.graph.edge_names
    for e in (0, 17, ap.graph.n_edges - 1):
        f = circuit_faithfulness(model, small_task, [n for i, n in enumerate(names) if i != e])
        assert f == pytest.approx(1 - ap.scores[e] / (ctx.m_full - ctx.m_empty), abs=1e-5)


def test_eap_equals_the_gradient_of_the_metric_with_respect_to_the_edge_mask(tiny_models, small_task) -> None:
    # EAP's (a_clean - a_cf) . dm/dx_d is dm/dw_e for an edge weight w_e mixing live and counterfactual
    # sources (at w = 1): an independent route through autograd, not through the destination inputs.
    model = tiny_models["gpt2"]
    eap = edge_scores(model, small_task, method="eap")
    ctx = _Context(model, small_task)
    weights = torch.ones(ctx.graph.valid.shape, requires_grad=True)
    logits, _, _ = ctx.run(ctx.clean, mask=weights, corrupt=ctx.corrupt_acts)
    (grad,) = torch.autograd.grad(ctx.metric(logits), weights)
    g = ctx.graph
    np.testing.assert_allclose(eap.scores, grad.numpy()[g.edges[:, 0], g.edges[:, 1]], rtol=1e-4, atol=1e-6)
    ig = edge_scores(model, small_task, method="eap-ig", ig_steps=1)  # one IG point is plain EAP
    np.testing.assert_allclose(ig.scores, eap.scores, rtol=1e-5, atol=1e-7)


def test_curves_follow_the_benchmarks_definitions(tiny_models, small_task) -> None:
    model = tiny_models["llama"]
    scores = edge_scores(model, small_task, method="eap-ig", ig_steps=2)
    signed = faithfulness_curve(model, small_task, scores, prune=False)
    assert signed.n_edges.tolist() == [int(b * 46) for b in MIB_BUDGETS]
    assert signed.faithfulness[-1] == 1.0 and signed.faithfulness[0] == 0.0
    top = scores.top(int(0.5 * 46))
    assert signed.faithfulness[-2] == pytest.approx(circuit_faithfulness(model, small_task, top), abs=1e-6)
    loc = circuit_localization(model, small_task, scores)
    assert loc.cpr == pytest.approx(np.trapezoid(loc.signed.faithfulness, loc.signed.fractions))
    assert loc.cmd == pytest.approx(
        np.trapezoid(np.abs(1 - loc.absolute.faithfulness), loc.absolute.fractions)
    )
    pruned = faithfulness_curve(model, small_task, scores)  # pruning shrinks circuits, never f
    np.testing.assert_allclose(pruned.faithfulness, signed.faithfulness, atol=1e-5)
    assert (pruned.n_edges <= signed.n_edges).all()


def test_scores_recover_a_circuit_known_by_construction(sorting_model) -> None:
    # Silence head a1.h1 (its output-projection columns) and MLP m0 (its down projection): every edge
    # from or into them has exactly no effect. So has every edge from `input` that the last block
    # reads at the answer position only (its queries, its MLP, the logits): the counterfactual leaves
    # that token (SEP) unchanged. The known circuit is every other edge. MIB scores such ground truths
    # (InterpBench) by AUROC; a mislabelled head or edge would put weight on the dead edges.
    import copy

    model = copy.deepcopy(sorting_model[0])
    layers = model.model.layers
    dh = model.config.hidden_size // model.config.num_attention_heads
    with torch.no_grad():
        layers[1].self_attn.o_proj.weight[:, dh : 2 * dh] = 0.0
        layers[0].mlp.down_proj.weight.zero_()
    task = min_pairs(16, seed=20)
    g = edge_graph(model)
    dead = {"a1.h1", "m0"}
    same_token = {"input->a1.h0<q>", "input->m1", "input->logits"}
    alive = [
        i
        for i, name in enumerate(g.edge_names)
        if name.split("->")[0] not in dead
        and name.split("->")[1].split("<")[0] not in dead
        and name not in same_token
    ]
    n1, n0 = len(alive), g.n_edges - len(alive)
    for method in ("activation-patching", "eap", "eap-ig", "eap-ig-activations"):
        scores = edge_scores(model, task, method=method)
        assert np.abs(scores.scores[np.setdiff1d(np.arange(g.n_edges), alive)]).max() < 1e-6
        assert edge_auroc(scores, alive) > 0.99
    # IFR reads only the clean run: it zeroes the edges out of the silenced components (their output is
    # 0, no proximity) but not the edges into them, which it cannot tell are dead (measured AUROC 0.79)
    ifr = edge_scores(model, task, method="information-flow-routes")
    from_dead = [i for i, name in enumerate(g.edge_names) if name.split("->")[0] in dead]
    into_dead = [i for i, name in enumerate(g.edge_names) if name.split("->")[1].split("<")[0] in dead]
    assert np.abs(ifr.scores[from_dead]).max() < 1e-6 and ifr.scores[into_dead].max() > 0.1
    assert 0.6 < edge_auroc(ifr, alive) < 0.95
    null_se = np.sqrt((n0 + n1 + 1) / (12 * n0 * n1))  # AUROC's sd under the null (Mann-Whitney)
    rand = [edge_auroc(edge_scores(model, task, method="random", random_state=s), alive) for s in range(8)]
    assert abs(np.mean(rand) - 0.5) < 3 * null_se / np.sqrt(len(rand))
    with pytest.raises(ParameterError, match="circuit"):
        edge_auroc(edge_scores(model, task, method="random"), [])


def test_bad_input_raises_trustlab_errors(tiny_models, small_task) -> None:
    model = tiny_models["llama"]
    with pytest.raises(DataError, match="corrupted"):
        PatchingTask(
            small_task.clean, small_task.corrupted[:, :-1], small_task.answers, small_task.cf_answers
        )
    with pytest.raises(DataError, match="answers"):
        PatchingTask(small_task.clean, small_task.corrupted, small_task.answers[:-1], small_task.cf_answers)
    with pytest.raises(ParameterError, match=r"unknown edge 'a7\.h0->logits'"):
        circuit_faithfulness(model, small_task, ["input->m0", "a7.h0->logits"])
    with pytest.raises(ParameterError, match="method"):
        edge_scores(model, small_task, method="acdc")
    with pytest.raises(DataError, match="scores"):
        circuit_localization(model, small_task, np.zeros(5))
    with pytest.raises(DataError, match="same logit difference"):
        same = PatchingTask(small_task.clean, small_task.clean, small_task.answers, small_task.cf_answers)
        edge_scores(model, same, method="eap")
    with pytest.raises(DataError, match="vocabulary"):
        edge_scores(model, PatchingTask(small_task.clean + 30, small_task.corrupted, [1] * 16, [2] * 16))
    with pytest.raises(ModelError, match="model"):
        edge_scores(torch.nn.Linear(2, 2), small_task)


@settings(max_examples=20, deadline=None)
@given(st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0, exclude_min=True), st.just(float("nan"))))
def test_budgets_out_of_range_are_refused(tiny_models, small_task, bad) -> None:
    with pytest.raises(TrustlabError, match="budgets"):
        faithfulness_curve(tiny_models["llama"], small_task, np.zeros(46), budgets=[0.1, bad])


@settings(max_examples=25, deadline=None)
@given(st.tuples(st.integers(1, 4), st.integers(1, 6)), st.tuples(st.integers(1, 4), st.integers(1, 6)))
def test_mismatched_clean_and_counterfactual_shapes_are_refused(a, b) -> None:
    clean, corrupted = np.zeros(a, dtype=int), np.ones(b, dtype=int)
    if a == b:
        assert len(PatchingTask(clean, corrupted, [0] * a[0], [1] * a[0])) == a[0]
    else:
        with pytest.raises(DataError, match="corrupted"):
            PatchingTask(clean, corrupted, [0] * a[0], [1] * a[0])


_SCORED = ("activation-patching", "eap", "eap-ig", "eap-ig-activations", "information-flow-routes")


def _localize(model, task, held_out, seeds):
    out = {}
    for method in _SCORED:
        scores = edge_scores(model, task, method=method)
        out[method] = (circuit_localization(model, held_out, scores), scores.scores)
    rand = [
        circuit_localization(model, held_out, edge_scores(model, task, method="random", random_state=s))
        for s in range(seeds)
    ]
    return out, np.array([r.cpr for r in rand]), np.array([r.cmd for r in rand])


def _check_order(out, r_cpr, r_cmd, near: float) -> None:
    """The paper's ordering: attribution patching (EAP-IG) near activation patching, all far above random.

    "Far": above the random baseline's mean CPR (below its mean CMD) over seeds by more than 3 standard
    errors of that mean, and by at least 0.2. "Near": within ``near`` times the activation-patching-to-
    random gap.
    """
    ap, eap, ig = (out[m][0] for m in ("activation-patching", "eap", "eap-ig"))
    gap_cpr = max(3 * r_cpr.std(ddof=1) / np.sqrt(len(r_cpr)), 0.2)
    gap_cmd = max(3 * r_cmd.std(ddof=1) / np.sqrt(len(r_cmd)), 0.2)
    for loc in (ap, eap, ig):
        assert loc.cpr > r_cpr.mean() + gap_cpr
        assert loc.cmd < r_cmd.mean() - gap_cmd
    assert abs(ig.cpr - ap.cpr) < near * (ap.cpr - r_cpr.mean())
    assert abs(ig.cmd - ap.cmd) < near * (r_cmd.mean() - ap.cmd)
    assert eap.cpr <= ig.cpr + 0.02  # the paper: integrated gradients improve on plain EAP
    assert spearmanr(out["eap"][1], out["activation-patching"][1])[0] > 0.7
    # EAP-IG on activations: near patching too, and no better than EAP-IG on inputs (MIB's README: the
    # inputs variant "in most cases performs better")
    act = out["eap-ig-activations"][0]
    assert act.cpr > r_cpr.mean() + gap_cpr and act.cmd < r_cmd.mean() - gap_cmd
    assert abs(act.cpr - ap.cpr) < near * (ap.cpr - r_cpr.mean())
    assert abs(act.cmd - ap.cmd) < near * (r_cmd.mean() - ap.cmd)
    assert act.cpr <= ig.cpr + 0.02 and act.cmd >= ig.cmd - 0.02
    # IFR (no counterfactual): above random, far below the counterfactual attribution methods (by more
    # than a quarter of the patching-to-random gap); its scores are positive, so CPR = 1 - CMD
    ifr = out["information-flow-routes"][0]
    assert ifr.cpr > r_cpr.mean() and ifr.cmd < r_cmd.mean()
    assert ifr.cpr < min(ig.cpr, act.cpr) - 0.25 * (ap.cpr - r_cpr.mean())
    assert ifr.cmd > max(ig.cmd, act.cmd) + 0.25 * (r_cmd.mean() - ap.cmd)


@pytest.mark.claims
def test_claim_attribution_patching_near_activation_patching_far_above_random(sorting_model) -> None:
    # Llama, 2 blocks x 2 heads (46 edges), trained to sort 6 values; the task reads the minimum at
    # the separator, the counterfactual raises it: every causal path starts at the changed value.
    model = sorting_model[0]
    task, held_out = min_pairs(32, seed=10), min_pairs(32, seed=11)
    out, r_cpr, r_cmd = _localize(model, task, held_out, seeds=5)
    _check_order(out, r_cpr, r_cmd, near=0.25)


@pytest.mark.claims
@pytest.mark.slow  # trains a 3-block, 4-head model (262 edges) and patches every edge: ~40 s CPU
def test_claim_ordering_on_a_larger_graph_slow() -> None:
    from trustlab.lm import ModelConfig, TrainConfig, build_model, sorting_task, train_model

    model = build_model(ModelConfig("llama", vocab_size=13, d_model=32, n_layers=3, n_heads=4, max_len=32))
    train_model(model, sorting_task(2000, 6, n_values=12), TrainConfig(steps=100, lr=1e-2, warmup=5))
    for seed in (10, 12):
        out, r_cpr, r_cmd = _localize(model, min_pairs(32, seed=seed), min_pairs(32, seed=seed + 1), seeds=10)
        _check_order(out, r_cpr, r_cmd, near=0.1)


def test_cli_circuit_scores_a_checkpoint_with_a_pairs_file(sorting_model, tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from trustlab.cli import app
    from trustlab.lm import save_model

    folder = save_model(sorting_model[0], tmp_path / "m")
    t = min_pairs(16, seed=5)
    spec = {k: getattr(t, k).tolist() for k in ("clean", "corrupted", "answers", "cf_answers")}
    (tmp_path / "pairs.json").write_text(json.dumps(spec))
    runner = CliRunner()
    args = ["lm", "circuit", str(folder), "--pairs", str(tmp_path / "pairs.json"), "--methods", "eap,random"]
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert "46 edges: eap CPR" in res.output and "random CPR" in res.output
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["eap"]["cpr"] > saved["random"]["cpr"] and len(saved["eap"]["signed"]["faithfulness"]) == 10
    for bad, flag in ((["lm", "circuit", str(folder)], "--pairs"), ([*args[:-1], "acdc"], "--methods")):
        res = runner.invoke(app, bad)
        assert res.exit_code == 2 and flag in res.output and len(res.output.strip().splitlines()) == 1
