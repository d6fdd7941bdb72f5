"""A shipped graph-classification set: MUTAG's 188 molecules (TUDataset).

The arrays live in ``mutag.npz`` next to this module (plain arrays, read with
``allow_pickle=False``), written once by ``tools/convert_mutag.py`` from the TUDataset text
files of MUTAG (the copy in GraKeL's test data).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from trustlab._param_validation import validate_params

__all__ = ["MoleculeDataset", "load_mutag"]

_MUTAG_ATOMS = ("C", "N", "O", "F", "I", "Cl", "Br")
_MUTAG_BONDS = ("aromatic", "single", "double", "triple")
_MUTAG_CITATION = (
    "Debnath, A. K., Lopez de Compadre, R. L., Debnath, G., Shusterman, A. J. and Hansch, C. "
    "(1991) 'Structure-activity relationship of mutagenic aromatic and heteroaromatic nitro "
    "compounds. Correlation with molecular orbital energies and hydrophobicity', J. Med. Chem. "
    "34(2), 786-797; as distributed in the TUDataset collection: Morris, C. et al. (2020) "
    "'TUDataset: a collection of benchmark datasets for learning with graphs', ICML GRL+ "
    "workshop (the files as copied in GraKeL's test data, https://github.com/ysig/GraKeL, "
    "BSD-3-Clause code licence; no licence is stated for the data itself)."
)


@dataclass(frozen=True)
class MoleculeDataset:
    """Molecular graphs with a label per graph (graph classification).

    Attributes
    ----------
    name : str
        The data set's short name.
    graphs : list of numpy.ndarray
        One dense symmetric 0/1 adjacency matrix (float64, no self-loops) per molecule: a node
        per heavy atom, an edge per bond. The input :class:`~trustlab.explain.GIST`,
        :func:`~trustlab.explain.forward_perturbation` and
        :class:`~trustlab.explain.GraphGINClassifier` take.
    labels : numpy.ndarray
        Class index per graph (int64).
    node_features : list of numpy.ndarray
        One-hot atom type per node, shape ``(n_nodes, n_atom_types)`` (float32), rows in the
        node order of ``graphs``.
    bond_types : list of numpy.ndarray
        Per graph, a ``(n_nodes, n_nodes)`` int8 matrix: the bond type index of each edge
        (into ``bond_names``), ``-1`` where there is no bond.
    class_names, atom_names, bond_names : tuple of str
        The name of each class, atom-type and bond-type index.
    citation : str
        Where the data comes from, to cite.

    See Also
    --------
    load_mutag : builds one.
    """

    name: str
    graphs: list[np.ndarray]
    labels: np.ndarray
    node_features: list[np.ndarray]
    bond_types: list[np.ndarray]
    class_names: tuple[str, ...]
    atom_names: tuple[str, ...]
    bond_names: tuple[str, ...]
    citation: str

    @property
    def n_graphs(self) -> int:
        """Number of graphs."""
        return len(self.graphs)

    @property
    def n_nodes(self) -> int:
        """Nodes over all graphs."""
        return int(sum(len(g) for g in self.graphs))

    @property
    def n_edges(self) -> int:
        """Undirected edges over all graphs (each counted once)."""
        return int(sum(g.sum() for g in self.graphs) // 2)


@lru_cache(maxsize=1)
def _arrays(name: str) -> dict[str, np.ndarray]:
    raw = resources.files("trustlab.datasets").joinpath(f"{name}.npz").read_bytes()
    with np.load(io.BytesIO(raw), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


@validate_params({})  # no parameters: a call with any argument raises a TrustlabError
def load_mutag() -> MoleculeDataset:
    """Load MUTAG: 188 nitroaromatic compounds, mutagenic (125) or not (63).

    Each graph is a molecule: a node per heavy atom (hydrogens removed), labelled with one of
    7 atom types (C, N, O, F, I, Cl, Br), an edge per bond, labelled aromatic, single, double
    or triple; the graph's label says whether the compound is mutagenic on *Salmonella
    typhimurium* TA98 (label 1, the TUDataset's ``1``) or not (label 0, the TUDataset's
    ``-1``). 3,371 nodes and 3,721 bonds in all (the 7,442 directed entries of
    ``MUTAG_A.txt``), 10 to 28 nodes per graph (17.9 on average); every graph is connected.
    Node order within a graph is the files' order. A fresh copy on each call.

    Source: Debnath et al. (1991), as distributed in the TUDataset collection (Morris et al.,
    2020); the files were read from GraKeL's test data (https://github.com/ysig/GraKeL,
    commit 24d496d, identical to the PyPI wheel grakel 0.1.11) and checked against the
    published counts by ``tools/convert_mutag.py`` (a 5 kB npz). GraKeL's code is
    BSD-3-Clause; neither the TUDataset site nor the original paper states a licence for the
    data, which is redistributed by the common graph-learning libraries.

    Returns
    -------
    MoleculeDataset
        The adjacency matrices, graph labels, one-hot atom features, bond types and names.

    References
    ----------
    Debnath, Lopez de Compadre, Debnath, Shusterman and Hansch (1991), "Structure-activity
    relationship of mutagenic aromatic and heteroaromatic nitro compounds. Correlation with
    molecular orbital energies and hydrophobicity", J. Med. Chem. 34(2). Morris, Kriege, Bause,
    Kersting, Mutzel and Neumann (2020), "TUDataset: a collection of benchmark datasets for
    learning with graphs", ICML workshop on Graph Representation Learning and Beyond.

    Examples
    --------
    >>> m = load_mutag()
    >>> m.n_graphs, m.n_nodes, m.n_edges, np.bincount(m.labels).tolist()
    (188, 3371, 3721, [63, 125])
    >>> m.graphs[0].shape, m.node_features[0].shape
    ((17, 17), (17, 7))
    """
    z = _arrays("mutag")
    sizes = z["n_nodes"].astype(np.int64)
    n_edges = z["n_edges"].astype(np.int64)
    node_start = np.concatenate([[0], np.cumsum(sizes)])
    edge_start = np.concatenate([[0], np.cumsum(n_edges)])
    eye = np.eye(len(_MUTAG_ATOMS), dtype=np.float32)
    graphs, features, bonds = [], [], []
    for g, n in enumerate(sizes):
        e = slice(edge_start[g], edge_start[g + 1])
        row, col = z["edge_row"][e].astype(np.int64), z["edge_col"][e].astype(np.int64)
        adj = np.zeros((n, n))
        adj[row, col] = adj[col, row] = 1.0
        kind = np.full((n, n), -1, dtype=np.int8)
        kind[row, col] = kind[col, row] = z["edge_labels"][e].astype(np.int8)
        graphs.append(adj)
        bonds.append(kind)
        features.append(eye[z["node_labels"][node_start[g] : node_start[g + 1]].astype(np.int64)])
    return MoleculeDataset(
        name="mutag",
        graphs=graphs,
        labels=z["graph_labels"].astype(np.int64),
        node_features=features,
        bond_types=bonds,
        class_names=("non-mutagenic", "mutagenic"),
        atom_names=_MUTAG_ATOMS,
        bond_names=_MUTAG_BONDS,
        citation=_MUTAG_CITATION,
    )
