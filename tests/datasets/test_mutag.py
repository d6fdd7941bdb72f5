"""load_mutag: the shipped MUTAG molecules have the TUDataset counts.

Counts of the TUDataset release (Morris et al., 2020) of Debnath et al.'s (1991) compounds: 188
graphs, 3,371 nodes, 7,442 directed entries of ``MUTAG_A.txt`` = 3,721 bonds, 125 mutagenic and
63 not, atom types C 2,395, N 345, O 593, F 12, I 1, Cl 23, Br 2; bond types (directed entries)
aromatic 4,708, single 2,008, double 724, triple 2.
"""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.datasets import MoleculeDataset, load_mutag


@pytest.fixture(scope="module")
def mutag() -> MoleculeDataset:
    return load_mutag()


def test_counts(mutag: MoleculeDataset) -> None:
    assert (mutag.n_graphs, mutag.n_nodes, mutag.n_edges) == (188, 3371, 3721)
    assert np.bincount(mutag.labels).tolist() == [63, 125]
    assert mutag.labels.dtype == np.int64
    sizes = [len(g) for g in mutag.graphs]
    assert (min(sizes), max(sizes)) == (10, 28)
    assert mutag.class_names == ("non-mutagenic", "mutagenic")


def test_atoms_are_one_hot_and_match_the_release(mutag: MoleculeDataset) -> None:
    x = np.concatenate(mutag.node_features)
    assert x.dtype == np.float32 and x.shape == (3371, 7)
    assert np.all(x.sum(axis=1) == 1) and set(np.unique(x)) == {0.0, 1.0}
    assert np.bincount(x.argmax(axis=1)).tolist() == [2395, 345, 593, 12, 1, 23, 2]
    assert mutag.atom_names == ("C", "N", "O", "F", "I", "Cl", "Br")
    assert all(f.shape == (len(g), 7) for f, g in zip(mutag.node_features, mutag.graphs, strict=True))


def test_graphs_are_simple_connected_and_bond_types_sit_on_edges(mutag: MoleculeDataset) -> None:
    import networkx as nx

    kinds = np.zeros(4, dtype=int)
    for a, b in zip(mutag.graphs, mutag.bond_types, strict=True):
        assert a.dtype == np.float64 and np.array_equal(a, a.T) and not np.diag(a).any()
        assert set(np.unique(a)) <= {0.0, 1.0}
        np.testing.assert_array_equal(b >= 0, a == 1)
        assert nx.is_connected(nx.from_numpy_array(a))
        kinds += np.bincount(b[b >= 0], minlength=4)
    assert kinds.tolist() == [4708, 2008, 724, 2]  # directed entries, as in MUTAG_edge_labels.txt


def test_a_nitro_group_in_the_first_molecule(mutag: MoleculeDataset) -> None:
    """Molecule 0 (mutagenic) carries a nitro group: an N bonded to two O atoms and one C."""
    a, atoms = mutag.graphs[0], mutag.node_features[0].argmax(axis=1)
    assert mutag.labels[0] == 1
    nitro = [i for i in np.flatnonzero(atoms == 1) if sorted(atoms[a[i] == 1].tolist()) == [0, 2, 2]]
    assert nitro


def test_loads_are_fresh_copies(mutag: MoleculeDataset) -> None:
    again = load_mutag()
    again.graphs[0][0, 1] = 7.0
    assert mutag.graphs[0][0, 1] != 7.0
    assert "Debnath" in mutag.citation and "TUDataset" in mutag.citation
