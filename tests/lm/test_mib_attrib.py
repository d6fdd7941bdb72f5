"""trustlab.lm._mib_attrib: MIB's EAP-IG-activations and information-flow-routes edge scores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trustlab.errors import ParameterError
from trustlab.lm._mib_attrib import proximity_importance, source_groups
from trustlab.lm.mib import METHODS, PatchingTask, edge_scores, min_pairs

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: extra threads only contend


@pytest.fixture(scope="module")
def task():
    return min_pairs(12, n_items=6, n_values=12, seed=3)


def _dense(scores):
    g = scores.graph
    full = np.zeros(g.valid.shape)
    full[g.edges[:, 0], g.edges[:, 1]] = scores.scores
    return full


def test_ig_activations_runs_one_interpolation_per_component_group(tiny_models, task) -> None:
    # MIB's code sets one group's output (the embedding, a block's heads, a block's MLP) to a constant
    # and sums the gradients at every destination over all groups' runs. At one step (alpha = 1) every run
    # is the clean run, except that the interpolated group passes no gradient back: the logits' input is
    # upstream of no group, so its edges get EAP's score exactly, and the last MLP's input loses its
    # gradient in one run of G (its own), so its edges get (G - 1) / G of EAP's.
    model = tiny_models["llama"]
    assert "eap-ig-activations" in METHODS and "information-flow-routes" in METHODS
    eap = _dense(edge_scores(model, task, method="eap"))
    one = edge_scores(model, task, method="eap-ig-activations", ig_steps=1)
    g = one.graph
    n_groups = len(source_groups(g))
    assert n_groups == 1 + 2 * g.n_layers and source_groups(g)[1] == list(range(1, 1 + g.n_heads))
    act = _dense(one)
    np.testing.assert_allclose(act[:, -1], eap[:, -1], rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(act[:, -2], eap[:, -2] * (n_groups - 1) / n_groups, rtol=1e-4, atol=1e-9)
    three = edge_scores(model, task, method="eap-ig-activations", ig_steps=3).scores
    assert np.isfinite(three).all() and not np.allclose(three, one.scores)
    mean = edge_scores(model, task, method="eap-ig-activations", ig_steps=1, ablation="mean").scores
    assert not np.allclose(mean, one.scores)  # the interpolation ends at the ablation's constants


def test_proximity_importance_follows_ferrando_and_voita() -> None:
    x = torch.tensor([[1.0, 2.0], [0.0, 1.0]])  # two destinations
    o = torch.tensor([[1.0, 2.0], [-1.0, -2.0], [0.5, 0.0]])  # three terms
    imp = proximity_importance(x, o)
    # destination 0: ||x||_1 = 3; proximities 3, max(0, 3 - 6) = 0, 3 - 2.5 = 0.5
    np.testing.assert_allclose(imp[:, 0].numpy(), [3 / 3.5, 0.0, 0.5 / 3.5], rtol=1e-6)
    # destination 1: ||x||_1 = 1; proximities max(0, 1 - 2) = 0, max(0, 1 - 4) = 0, max(0, 1 - 1.5) = 0
    np.testing.assert_array_equal(imp[:, 1].numpy(), [0.0, 0.0, 0.0])


def test_ifr_reads_only_the_clean_run_and_normalises_over_sources(tiny_models, task) -> None:
    model = tiny_models["gpt2"]
    ifr = edge_scores(model, task, method="information-flow-routes")
    dense = _dense(ifr)
    assert (ifr.scores >= 0).all() and (ifr.scores <= 1).all()
    np.testing.assert_allclose(dense.sum(0), 1.0, atol=1e-5)  # each destination's sources share 1
    other_cf = PatchingTask(task.clean, task.clean[::-1], task.answers, task.answers[::-1])
    np.testing.assert_array_equal(
        edge_scores(model, other_cf, method="information-flow-routes").scores, ifr.scores
    )
    with pytest.raises(ParameterError, match="ig_steps"):
        edge_scores(model, task, method="eap-ig-activations", ig_steps=0)
