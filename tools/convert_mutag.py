"""Convert the TUDataset text files of MUTAG into ``src/trustlab/datasets/mutag.npz``.

A dev-time script, run once; the library only reads the npz. MUTAG (Debnath et al., J. Med.
Chem. 34(2), 1991; as distributed in the TUDataset collection, Morris et al., 2020): 188
nitroaromatic compounds, a node per heavy atom (7 atom types), an edge per bond (4 bond
types), a graph label per compound (1: mutagenic on *Salmonella typhimurium* TA98, -1: not).

The files read were the copy in GraKeL's test data (``grakel/tests/data/MUTAG/`` of
https://github.com/ysig/GraKeL, commit 24d496d8dac448bd520ac8d83b571fbaafc0db71, identical
byte for byte to the PyPI wheel grakel 0.1.11): ``MUTAG_A.txt`` (1-based node pairs, both
directions), ``MUTAG_graph_indicator.txt``, ``MUTAG_graph_labels.txt``,
``MUTAG_node_labels.txt``, ``MUTAG_edge_labels.txt``.

Checks before writing (the script stops on any failure): 188 graphs, 3,371 nodes, 7,442
directed entries = 3,721 undirected bonds, each listed in both directions with one bond
type, no self-loop, no bond across graphs, nodes of a graph contiguous, labels 125 mutagenic
vs 63 not, every graph connected.

The npz holds plain arrays (loads with ``allow_pickle=False``): ``n_nodes`` and ``n_edges``
per graph (uint8), ``node_labels`` (uint8, TU atom codes 0-6, nodes in file order),
``edge_row < edge_col`` (uint8, node indices local to their graph, graphs in order) with
``edge_labels`` (uint8, TU bond codes 0-3), ``graph_labels`` (uint8, 1 = mutagenic).

Usage::

    python tools/convert_mutag.py DIR     # DIR holds the MUTAG_*.txt files
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def _ints(path: Path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=1)


def convert(src: Path, out: Path) -> dict[str, np.ndarray]:
    """Read the five MUTAG files in ``src``, check them, write ``out``; return the arrays."""
    pairs = _ints(src / "MUTAG_A.txt").reshape(-1, 2) - 1
    graph_of = _ints(src / "MUTAG_graph_indicator.txt") - 1
    y = _ints(src / "MUTAG_graph_labels.txt")
    atoms = _ints(src / "MUTAG_node_labels.txt")
    bonds = _ints(src / "MUTAG_edge_labels.txt")
    assert (graph_of.max() + 1, graph_of.size, len(pairs), bonds.size) == (188, 3371, 7442, 7442)
    assert np.all(np.diff(graph_of) >= 0), "nodes of a graph must be contiguous"
    assert sorted(np.unique(y, return_counts=True)[1].tolist()) == [63, 125] and set(y) == {-1, 1}
    assert np.all(graph_of[pairs[:, 0]] == graph_of[pairs[:, 1]]), "bond across graphs"
    assert np.all(pairs[:, 0] != pairs[:, 1]), "self-loop"
    kind = {(int(a), int(b)): int(t) for (a, b), t in zip(pairs, bonds, strict=True)}
    assert len(kind) == 7442 and all(kind[(b, a)] == t for (a, b), t in kind.items()), "asymmetric"
    upper = pairs[:, 0] < pairs[:, 1]
    row, col, lab = pairs[upper, 0], pairs[upper, 1], bonds[upper]
    order = np.lexsort((col, row))
    row, col, lab = row[order], col[order], lab[order]
    assert row.size == 3721
    n_nodes = np.bincount(graph_of, minlength=188)
    start = np.concatenate([[0], np.cumsum(n_nodes)[:-1]])
    g_of_edge = graph_of[row]
    import networkx as nx

    for g in range(188):
        e = g_of_edge == g
        h = nx.Graph()
        h.add_nodes_from(range(n_nodes[g]))
        h.add_edges_from(zip(row[e] - start[g], col[e] - start[g], strict=True))
        assert nx.is_connected(h), f"graph {g} is disconnected"
    arrays = {
        "n_nodes": n_nodes.astype(np.uint8),
        "n_edges": np.bincount(g_of_edge, minlength=188).astype(np.uint8),
        "node_labels": atoms.astype(np.uint8),
        "edge_row": (row - start[g_of_edge]).astype(np.uint8),
        "edge_col": (col - start[g_of_edge]).astype(np.uint8),
        "edge_labels": lab.astype(np.uint8),
        "graph_labels": (y == 1).astype(np.uint8),
    }
    np.savez_compressed(out, **arrays)
    return arrays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, help="folder with the MUTAG_*.txt files")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "src/trustlab/datasets/mutag.npz"
    )
    args = parser.parse_args()
    convert(args.src, args.out)


if __name__ == "__main__":
    main()
