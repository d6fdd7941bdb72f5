"""GIST graph counterfactuals by spectral backtracking (catalog row 003-10).

The claim (Prenkaj, Zaradoukas and Kasneci, ICML 2025): backtracking from an overshot
counterfactual towards the input's spectrum gives higher validity than forward perturbation at a
smaller spectral distance to the input, and mitigates the overshoot. Fast profile: a GIN trained
on 120 tree / tree-with-house graphs (12 nodes), 24 held-out graphs explained, one seed.
"""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError, TrustlabError
from trustlab.explain.graph_counterfactual import (
    GIST,
    GraphGINClassifier,
    forward_perturbation,
    make_house_graphs,
    make_motif_graphs,
    spectral_distance,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "explain" / "graph-counterfactuals.md"
N_TEST = 24


def _z_proportions(p1: float, p2: float, n: int) -> float:
    """z of the gap between two proportions measured on ``n`` inputs each (unpooled standard error)."""
    se = np.sqrt((p1 * (1 - p1) + p2 * (1 - p2)) / n)
    return (p1 - p2) / max(se, 1.0 / n)


def _z_paired(diff: np.ndarray) -> float:
    """z of the mean of paired differences (standard error from their spread)."""
    return float(diff.mean() / (diff.std(ddof=1) / np.sqrt(diff.size)))


@pytest.fixture(scope="module")
def task():
    """A GIN trained on 120 graphs (60 full-batch epochs, about 1 s of CPU) and 24 test graphs."""
    graphs, y = make_house_graphs(120, random_state=0)
    clf = GraphGINClassifier(epochs=60, random_state=0).fit(graphs, y)
    test, y_test = make_house_graphs(N_TEST, random_state=100)
    return clf, graphs, test, y_test


@pytest.fixture(scope="module")
def results(task):
    clf, graphs, test, _ = task
    gist = GIST(clf).fit(graphs)
    return {
        "gist": gist.explain(test),
        "overshoot": GIST(clf, alphas=(1.0,), steps=1, n_samples=0).fit(graphs).explain(test),
        "random": forward_perturbation(clf, test, max_edits=5, random_state=0),
    }


def test_the_oracle_learned_the_rule(task):
    clf, _, test, y_test = task
    assert np.mean(clf.predict(test) == y_test) >= 0.9


@pytest.mark.claims
def test_claim_validity_above_forward_perturbation_at_smaller_spectral_distance(results):
    gist, fwd = results["gist"], results["random"]
    # one-sided tests at z > 2 (about 2.3 %): validity as proportions over the 24 inputs,
    # spectral distance paired per input
    assert _z_proportions(gist.validity, fwd.validity, N_TEST) > 2.0, (gist.validity, fwd.validity)
    assert _z_paired(fwd.spectral_distance - gist.spectral_distance) > 2.0


@pytest.mark.claims
def test_claim_backtracking_mitigates_the_overshoot(results):
    gist, over = results["gist"], results["overshoot"]
    assert gist.validity >= over.validity  # the path starts at the overshot graph: never less valid
    closer = over.spectral_distance - gist.spectral_distance
    assert np.all(closer >= -1e-9)
    assert np.mean(closer > 1e-9) >= 0.25  # the backtracking moved a quarter of them or more
    assert _z_paired(closer) > 2.0
    moved = gist.alpha < 1.0
    assert np.all(gist.valid[moved])


def test_result_fields_are_consistent(task, results):
    clf, _, test, _ = task
    r = results["gist"]
    assert len(r.graphs) == N_TEST
    np.testing.assert_array_equal(r.counterfactual_labels, clf.predict(r.graphs))
    np.testing.assert_array_equal(r.valid, r.counterfactual_labels != r.labels)
    # networkx's Laplacian spectra (the graphs here all have 12 nodes)
    expected = [
        np.linalg.norm(
            np.sort(nx.laplacian_spectrum(nx.from_numpy_array(g)))
            - np.sort(nx.laplacian_spectrum(nx.from_numpy_array(c)))
        )
        for g, c in zip(test, r.graphs, strict=True)
    ]
    np.testing.assert_allclose(r.spectral_distance, expected, atol=1e-8)
    for c in r.graphs:
        np.testing.assert_array_equal(c, c.T)
        assert not np.diag(c).any()


def test_target_and_fixed_alpha(task):
    clf, graphs, test, _ = task
    gist = GIST(clf, alphas=(1.0, 0.5), steps=10, fallback=False).fit(graphs)
    r = gist.explain(test[:4], target=1)
    assert np.all(r.alpha[~np.isnan(r.alpha)] == 0.5)
    np.testing.assert_array_equal(r.valid, r.counterfactual_labels == 1)


def test_draws_are_seeded_and_connected_keeps_every_counterfactual_connected(task, results):
    clf, graphs, test, _ = task
    again = GIST(clf).fit(graphs).explain(test)  # random_state None draws with seed 0
    for a, b in zip(results["gist"].graphs, again.graphs, strict=True):
        np.testing.assert_array_equal(a, b)
    plain = GIST(clf, n_samples=0).fit(graphs).explain(test)  # thresholded optima only
    assert np.all(results["gist"].spectral_distance <= plain.spectral_distance + 1e-9)  # a superset
    tied = GIST(clf, connected=True).fit(graphs).explain(test)
    assert tied.validity == 1.0
    assert all(nx.is_connected(nx.from_numpy_array(g)) for g in tied.graphs)
    assert not all(nx.is_connected(nx.from_numpy_array(g)) for g in results["gist"].graphs)


def test_greedy_baseline_needs_probabilities(task):
    clf, _, test, _ = task
    r = forward_perturbation(clf, test[:2], strategy="greedy", max_edits=3)
    assert r.n_edits.max() <= 3
    with pytest.raises(ModelError, match="predict_proba"):
        forward_perturbation(lambda gs: np.zeros(len(gs)), test[:2], strategy="greedy")


def test_irand_tries_growing_edit_counts_and_returns_the_input_when_none_flips(task):
    clf, _, test, _ = task
    r = forward_perturbation(clf, test[:8], strategy="irand", max_edits=0.1, tries=3, random_state=0)
    budget = int(0.1 * 12 * 11 / 2) - 1  # the authors' range(1, int(p * pairs)): 5 flips at most
    for c, ok, k in zip(r.graphs, r.valid, r.n_edits, strict=True):
        assert (1 <= k <= budget) if ok else k == 0  # no flip found: the input itself
        np.testing.assert_array_equal(c, c.T)
    assert r.valid.any()
    never = lambda gs: np.zeros(len(gs), dtype=int)  # noqa: E731
    none = forward_perturbation(never, test[:2], strategy="irand", max_edits=2, random_state=0)
    assert not none.valid.any() and np.all(none.n_edits == 0)
    with pytest.raises(ParameterError, match="tries"):
        forward_perturbation(clf, test[:2], strategy="irand", tries=0)
    with pytest.raises(ParameterError, match="max_edits"):
        forward_perturbation(clf, test[:2], strategy="irand", max_edits=1.5)


def test_several_overshoots_never_farther_than_the_nearest_overshot_graph(task, results):
    clf, graphs, test, _ = task
    wide = GIST(clf, alphas=(0.5, 0.0), steps=10, n_overshoots=3).fit(graphs).explain(test[:8])
    over = results["overshoot"]
    assert np.all(wide.valid)
    assert np.all(wide.spectral_distance <= over.spectral_distance[:8] + 1e-9)  # G' is a candidate
    with pytest.raises(ParameterError, match="n_overshoots"):
        GIST(clf, n_overshoots=0).fit(graphs)


def test_forward_perturbation_with_a_target(task):
    clf, _, test, _ = task
    edges_mod_3 = lambda gs: np.array([int(g.sum() / 2) % 3 for g in gs])  # noqa: E731
    labels = edges_mod_3(test[:6])
    target = (labels + 2) % 3  # removing one edge reaches it; adding one reaches another class: no stop
    r = forward_perturbation(edges_mod_3, test[:6], max_edits=8, random_state=0, target=target)
    np.testing.assert_array_equal(r.valid, r.counterfactual_labels == target)
    assert r.valid.mean() > 0
    with pytest.raises(ParameterError, match="target"):
        forward_perturbation(clf, test[:2], strategy="greedy", max_edits=1, target=5)
    with pytest.raises(ParameterError, match="target"):
        forward_perturbation(clf, test[:2], target=[0, 1, 0])


def test_motif_graphs_follow_their_rule():
    graphs, y = make_motif_graphs(9, random_state=3)
    assert y.tolist() == [0, 1, 2] * 3
    for g, label in zip(graphs, y, strict=True):
        h = nx.from_numpy_array(g)
        assert nx.is_connected(h) and h.number_of_nodes() == 12
        triangles = sum(nx.triangles(h).values()) // 3
        # house: one triangle and two independent cycles; 6-cycle: one cycle; 2 x 3 grid: two
        assert (triangles, h.number_of_edges() - 11) == {0: (1, 2), 1: (0, 1), 2: (0, 2)}[label]


def test_spectral_distance_known_values():
    path = nx.to_numpy_array(nx.path_graph(4))
    star = nx.to_numpy_array(nx.star_graph(3))
    # path P4: 0, 2 - sqrt 2, 2, 2 + sqrt 2; star K1,3: 0, 1, 1, 4
    expected = np.linalg.norm([0, 2 - 2**0.5 - 1, 2 - 1, 2 + 2**0.5 - 4])
    assert spectral_distance(path, star) == pytest.approx(expected)
    # a graph of another size compares through isolated padding nodes (zero eigenvalues)
    c4 = nx.to_numpy_array(nx.cycle_graph(4))  # 0, 2, 2, 4 (padded: 0, 0, 2, 2, 4)
    k5 = nx.to_numpy_array(nx.complete_graph(5))  # 0, 5, 5, 5, 5
    assert spectral_distance(c4, k5) == pytest.approx(np.linalg.norm([0, 5, 3, 3, 1]))


def _bad_graphs():
    ring = nx.to_numpy_array(nx.cycle_graph(5))
    nan = ring.copy()
    nan[0, 1] = np.nan
    loop = ring.copy()
    loop[0, 0] = 1
    directed = ring.copy()
    directed[0, 2] = 1
    two = nx.to_numpy_array(nx.disjoint_union(nx.cycle_graph(4), nx.cycle_graph(4)))
    return {
        "NaN": nan,
        "self-loops": loop,
        "symmetric": directed,
        "disconnected": two,
        "no edges": np.zeros((5, 5)),
        "square": np.ones((4, 5)),
    }


@pytest.mark.parametrize("case", list(_bad_graphs()))
def test_bad_graphs_raise(task, case):
    clf, graphs, _, _ = task
    gist = GIST(clf, steps=1).fit(graphs[:10])
    with pytest.raises(DataError, match=case) as err:
        gist.explain([_bad_graphs()[case]])
    assert err.value.argument == "graphs"


def test_bad_parameters_and_state(task):
    clf, graphs, test, _ = task
    graphs = graphs[:10]
    with pytest.raises(NotFittedError):
        GIST(clf).explain(test[:1])
    with pytest.raises(ModelError, match="oracle"):
        GIST().fit(graphs)
    with pytest.raises(ParameterError, match="non-increasing"):
        GIST(clf, alphas=(0.0, 1.0)).fit(graphs)
    with pytest.raises(ParameterError, match="alphas"):
        GIST(clf, alphas=(1.5,)).fit(graphs)
    with pytest.raises(ParameterError, match="steps"):
        GIST(clf, steps=0).fit(graphs)
    with pytest.raises(ParameterError, match="n_samples"):
        GIST(clf, n_samples=-1).fit(graphs)
    with pytest.raises(ParameterError, match="random_state"):
        GIST(clf, random_state=-2).fit(graphs)
    with pytest.raises(DataError, match="same label"):
        GIST(lambda gs: np.zeros(len(gs))).fit(graphs)
    with pytest.raises(ParameterError, match="target"):
        GIST(clf, steps=1).fit(graphs).explain(test[:2], target=[1, 0, 1])
    with pytest.raises(DataError, match="list of adjacency"):
        GIST(clf).fit(graphs[0])
    with pytest.raises(DataError, match="empty"):
        GIST(clf).fit([])
    with pytest.raises(DataError, match="one label per graph"):
        GraphGINClassifier(epochs=1).fit(graphs, [0, 1])
    with pytest.raises(ModelError, match="one label per graph"):
        GIST(lambda gs: np.zeros(2)).fit(graphs)


@settings(max_examples=6, deadline=None)
@given(st.integers(4, 9), st.sampled_from(["nan", "loop", "asym", "weight"]))
def test_any_corrupted_graph_raises_a_trustlab_error(n, kind):
    a = nx.to_numpy_array(nx.cycle_graph(n))
    if kind == "nan":
        a[0, 1] = np.inf
    elif kind == "loop":
        a[n - 1, n - 1] = 1
    elif kind == "asym":
        a[0, n // 2] = 1 if a[0, n // 2] == 0 else 0
    else:
        a *= 2.5
    with pytest.raises(TrustlabError):
        spectral_distance(a, a)


def test_docs_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert blocks
    namespace: dict = {"__name__": "docs_example"}
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), namespace)
    out = capsys.readouterr().out
    assert "validity GIST / random flips:" in out


@pytest.mark.slow  # three GINs on 200 graphs and 60 explained inputs each: about 10 s of CPU
@pytest.mark.claims
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_claim_three_seeds_at_benchmark_size(seed):
    graphs, y = make_house_graphs(200, random_state=seed)
    clf = GraphGINClassifier(epochs=100, random_state=seed).fit(graphs, y)
    test, _ = make_house_graphs(60, random_state=1000 + seed)
    gist = GIST(clf).fit(graphs).explain(test)
    fwd = forward_perturbation(clf, test, max_edits=5, random_state=seed)
    assert _z_proportions(gist.validity, fwd.validity, len(test)) > 2.0
    assert _z_paired(fwd.spectral_distance - gist.spectral_distance) > 2.0


@pytest.mark.slow  # three GINs (400 epochs on 300 graphs) and 60 inputs each: about 14 s of CPU
@pytest.mark.claims
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_claim_multiclass_with_a_target_class(seed):
    """Three motif classes; each input asks for the class after its predicted one (mod 3)."""
    graphs, y = make_motif_graphs(300, random_state=seed)
    clf = GraphGINClassifier(epochs=400, learning_rate=0.02, random_state=seed).fit(graphs, y)
    test, _ = make_motif_graphs(60, random_state=1000 + seed)
    target = (clf.predict(test) + 1) % 3
    gist = GIST(clf, random_state=seed).fit(graphs).explain(test, target=target)
    np.testing.assert_array_equal(gist.valid, gist.counterfactual_labels == target)
    over = GIST(clf, alphas=(1.0,), steps=1, n_samples=0).fit(graphs).explain(test, target=target)
    closer = over.spectral_distance - gist.spectral_distance
    # the backtracking moves 52 %, 42 %, 32 % (seeds 0-2) strictly closer than the overshoot
    assert np.all(closer >= -1e-9) and np.mean(closer > 1e-9) >= 0.25
    assert _z_paired(closer) > 2.0
    fwd = forward_perturbation(clf, test, max_edits=5, random_state=seed, target=target)
    greedy = forward_perturbation(clf, test, strategy="greedy", max_edits=5, target=target)
    assert _z_proportions(gist.validity, fwd.validity, len(test)) > 2.0, (gist.validity, fwd.validity)
    assert _z_paired(fwd.spectral_distance - gist.spectral_distance) > 2.0
    # the greedy flips (O(n^2) probability queries a step) are as valid here, but farther in spectrum
    assert gist.validity >= greedy.validity
    assert _z_paired(greedy.spectral_distance - gist.spectral_distance) > 2.0


@pytest.mark.slow  # five GINs (150 epochs on 169 molecules) and 95 explained inputs: about 45 s of CPU
@pytest.mark.claims
def test_claim_on_mutag_molecules():
    """MUTAG (188 molecules, structure only), the paper's 5 folds of 90:10: 95 held-out inputs.

    The comparison as the authors' evaluation makes it: validity, and distances averaged over
    valid counterfactuals only, against iRand (their random forward baseline: up to 10 % of the
    node pairs flipped, 3 tries per edit count). Reproduced: validity above iRand and random
    flips; backtracking closer than the overshoot; the wider search (32 draws, 3 overshoots,
    chosen on folds 5-9) closer than the default. Not reproduced: the smaller spectral distance.
    On the inputs where iRand is valid GIST is as close (1.20 vs 1.18), not closer; over valid
    counterfactuals GIST is farther (2.56 vs 1.18), and greedy flips, as valid, are closer (docs/
    explain/graph-counterfactuals.md). One-sided tests at z > 2.
    """
    from sklearn.model_selection import StratifiedKFold

    from trustlab._threads import one_thread
    from trustlab.datasets import load_mutag

    m = load_mutag()
    folds = list(StratifiedKFold(10, shuffle=True, random_state=0).split(np.zeros(m.n_graphs), m.labels))
    runs: dict[str, list] = {k: [] for k in ("gist", "wide", "over", "irand", "random", "greedy")}
    accuracy = []
    with one_thread():
        for fold, (train, test) in enumerate(folds[:5]):
            graphs, inputs = [m.graphs[i] for i in train], [m.graphs[i] for i in test]
            clf = GraphGINClassifier(epochs=150, random_state=fold).fit(graphs, m.labels[train])
            accuracy.append(np.mean(clf.predict(inputs) == m.labels[test]))
            runs["gist"].append(GIST(clf, random_state=fold).fit(graphs).explain(inputs))
            wide = GIST(clf, random_state=fold, n_samples=32, n_overshoots=3)
            runs["wide"].append(wide.fit(graphs).explain(inputs))
            runs["over"].append(GIST(clf, alphas=(1.0,), steps=1, n_samples=0).fit(graphs).explain(inputs))
            irand = forward_perturbation(
                clf, inputs, strategy="irand", max_edits=0.1, tries=3, random_state=fold
            )
            runs["irand"].append(irand)
            runs["random"].append(forward_perturbation(clf, inputs, max_edits=5, random_state=fold))
            runs["greedy"].append(forward_perturbation(clf, inputs, strategy="greedy", max_edits=5))
    valid = {k: np.concatenate([r.valid for r in rs]) for k, rs in runs.items()}
    dist = {k: np.concatenate([r.spectral_distance for r in rs]) for k, rs in runs.items()}
    n = valid["gist"].size
    assert n == 95 and np.mean(accuracy) >= 0.8  # the oracle learned something (0.85 measured)
    # validity: 1.00 vs iRand 0.35 and random flips 0.25; greedy flips 0.98
    assert valid["gist"].all() and valid["wide"].all()
    assert _z_proportions(valid["gist"].mean(), valid["irand"].mean(), n) > 2.0
    assert _z_proportions(valid["gist"].mean(), valid["random"].mean(), n) > 2.0
    assert valid["gist"].mean() >= valid["greedy"].mean()
    closer = dist["over"] - dist["gist"]
    assert np.all(closer >= -1e-9) and np.mean(closer > 1e-9) >= 0.25  # 41 % moved
    assert _z_paired(closer) > 2.0  # mean gain 0.20 over the overshoot's 2.89
    assert _z_paired(dist["gist"] - dist["wide"]) > 2.0  # the wider search: 2.68 -> 2.56
    # not reproduced. At matched validity (the 33 inputs where iRand is valid): 1.20 vs 1.18,
    # GIST not closer; against greedy flips (93 inputs both valid): 2.47 vs 1.23, GIST farther
    both = valid["irand"]
    assert both.sum() >= 20
    assert _z_paired(dist["irand"][both] - dist["wide"][both]) < 2.0
    both = valid["greedy"]
    assert _z_paired(dist["wide"][both] - dist["greedy"][both]) > 2.0
    # the authors' aggregation (mean over each method's valid counterfactuals): 2.56 vs 1.18
    a, b = dist["wide"][valid["wide"]], dist["irand"][valid["irand"]]
    assert (a.mean() - b.mean()) / np.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size) > 2.0
