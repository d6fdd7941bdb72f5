"""trustlab.lm._mib_siit: a sorting Llama trained with SIIT, a model with a known circuit (InterpBench)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.errors import ParameterError
from trustlab.lm._mib_graph import _graph_shape
from trustlab.lm._mib_siit import circuit_edges
from trustlab.lm.mib import circuit_faithfulness, edge_auroc, edge_scores, min_pairs, siit_sorting_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: extra threads only contend

SAME_TOKEN = {"input->a0.h0<q>", "input->m1", "input->logits"}  # read only at the unchanged separator


def test_circuit_edges_join_the_circuits_nodes_and_bad_nodes_are_refused() -> None:
    g = _graph_shape(2, 2)
    names = [g.edge_names[i] for i in circuit_edges(g, ("a0.h0", "m1"))]
    assert names == [
        "input->a0.h0<q>",
        "input->a0.h0<k>",
        "input->a0.h0<v>",
        "input->m1",
        "input->logits",
        "a0.h0->m1",
        "a0.h0->logits",
        "m1->logits",
    ]
    for kwargs, arg in (
        ({"nodes": ("a0.h0", "m7")}, "nodes"),
        ({"nodes": ("input",)}, "nodes"),
        ({"nodes": ("a0.h0", "a0.h0")}, "nodes"),
        ({"aligned": "m1", "nodes": ("a0.h0",)}, "aligned"),
    ):
        with pytest.raises(ParameterError, match=arg):
            siit_sorting_model(steps=1, **kwargs)


@pytest.mark.claims
@pytest.mark.slow  # trains the SIIT model (300 steps of three passes, ~15-30 s CPU) and scores it six ways
def test_claim_siit_model_has_its_circuit_and_counterfactual_methods_find_it_slow() -> None:
    # Measured over seeds 0, 1, 2: accuracy 1.0, the 8-edge circuit's faithfulness 0.978-0.984; AUROC against
    # the 5 circuit edges the counterfactual can reach: patching, EAP, EAP-IG (inputs, activations), edge
    # pruning 0.99-1.0, UGS 0.97-1.0, IFR 0.82; against all 8 (MIB's definition) 0.68-0.83, random 0.506.
    model, circuit = siit_sorting_model(random_state=0)
    task, held_out = min_pairs(32, seed=10), min_pairs(32, seed=11)
    with torch.no_grad():
        pred = model(input_ids=torch.as_tensor(held_out.clean)).logits[:, -1].argmax(-1).numpy()
    assert (pred == held_out.answers).mean() >= 0.95
    assert circuit_faithfulness(model, held_out, circuit.edges) > 0.9  # 8 of 46 edges carry the task
    names = np.array(edge_scores(model, task, method="random").graph.edge_names)
    same = np.array([i for i in circuit.edges if names[i] in SAME_TOKEN])
    reach = np.array([i for i in circuit.edges if names[i] not in SAME_TOKEN])
    aurocs = {}
    for method in ("activation-patching", "eap", "eap-ig", "eap-ig-activations", "information-flow-routes"):
        scores = edge_scores(model, task, method=method)
        aurocs[method] = edge_auroc(scores, reach)
        if method != "information-flow-routes":  # the counterfactual barely reaches the same-token edges
            assert np.abs(scores.scores[same]).max() < 3e-3 * np.abs(scores.scores[reach]).max()
            assert aurocs[method] > 0.95
            assert edge_auroc(scores, circuit.edges) < 0.8
    ifr = aurocs.pop("information-flow-routes")  # no counterfactual: below every counterfactual method
    assert 0.6 < ifr < 0.9 and ifr < min(aurocs.values()) - 0.05
