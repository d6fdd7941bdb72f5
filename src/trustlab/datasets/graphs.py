"""Shipped real graphs with node features: Cora and CiteSeer (Planetoid split).

The arrays live in ``cora.npz`` and ``citeseer.npz`` next to this module (plain arrays, read with
``allow_pickle=False``), written once by ``tools/convert_planetoid.py`` from the Planetoid
repository's pickles.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import scipy.sparse as sp

from trustlab._param_validation import Options, validate_params

__all__ = ["GraphDataset", "load_citeseer", "load_cora", "load_planetoid"]

# Planetoid stores labels as 0..6; the class each index stands for is matched by size to
# the LINQS release's counts (all seven sizes differ, so the match is unique).
_CORA_CLASSES = (
    "Theory",
    "Reinforcement_Learning",
    "Genetic_Algorithms",
    "Neural_Networks",
    "Probabilistic_Methods",
    "Case_Based",
    "Rule_Learning",
)

# Matched by size to the LINQS CiteSeer release's counts of its 3,312 papers (all six differ).
_CITESEER_CLASSES = ("AI", "ML", "IR", "DB", "Agents", "HCI")

_PLANETOID = (
    "split of Yang, Z., Cohen, W. and Salakhutdinov, R. (2016) 'Revisiting "
    "semi-supervised learning with graph embeddings', ICML (Planetoid, "
    "https://github.com/kimiyoung/planetoid, MIT licence, Copyright (c) 2016 Zhilin Yang)."
)

_CITESEER_CITATION = (
    "Giles, C. L., Bollacker, K. and Lawrence, S. (1998) 'CiteSeer: an automatic citation "
    "indexing system', ACM Digital Libraries; Sen, P. et al. (2008) 'Collective "
    "classification in network data', AI Magazine 29(3), 93-106 (LINQS); " + _PLANETOID
)

_CORA_CITATION = (
    "McCallum, A., Nigam, K., Rennie, J. and Seymore, K. (2000) 'Automating the construction "
    "of internet portals with machine learning', Information Retrieval 3, 127-163; Sen, P. "
    "et al. (2008) 'Collective classification in network data', AI Magazine 29(3), 93-106 "
    "(LINQS); " + _PLANETOID
)


@dataclass(frozen=True)
class GraphDataset:
    """A node-classification graph with features, labels and a public split.

    Attributes
    ----------
    name : str
        The data set's short name.
    adjacency : scipy.sparse.csr_matrix
        Symmetric 0/1 adjacency (float64), no self-loops.
    features : numpy.ndarray or scipy.sparse.csr_matrix
        Node features, shape ``(n_nodes, n_features)`` (float32).
    labels : numpy.ndarray
        Class index per node (int64); ``-1`` for a node without a label (CiteSeer's 15).
    train_mask, val_mask, test_mask : numpy.ndarray
        Boolean masks of the public split, pairwise disjoint.
    class_names : tuple of str
        The name of each class index.
    citation : str
        Where the data comes from, to cite.

    See Also
    --------
    load_planetoid : builds one (``load_cora``, ``load_citeseer``).
    """

    name: str
    adjacency: sp.csr_matrix
    features: np.ndarray | sp.csr_matrix
    labels: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    class_names: tuple[str, ...]
    citation: str

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return int(self.labels.size)

    @property
    def n_edges(self) -> int:
        """Number of undirected edges (each counted once)."""
        return int(self.adjacency.nnz // 2)


@lru_cache(maxsize=2)
def _arrays(name: str) -> dict[str, np.ndarray]:
    raw = resources.files("trustlab.datasets").joinpath(f"{name}.npz").read_bytes()
    with np.load(io.BytesIO(raw), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _mask(n: int, idx: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[idx.astype(np.int64)] = True
    return mask


@validate_params({"name": [Options({"cora", "citeseer"})], "features": [Options({"dense", "sparse"})]})
def load_planetoid(name: str = "cora", features: str = "dense") -> GraphDataset:
    """Load a Planetoid citation graph (Cora or CiteSeer) with its public split.

    Each node is a paper; its binary features say which words of a fixed vocabulary (after
    stemming and stop-word removal) it contains; its label is its topic; edges are
    citations, made undirected (repeated entries of Planetoid's adjacency lists merged,
    self-loops dropped). The public split of Yang et al. (2016): 20 training nodes per
    class, the next 500 nodes for validation and the 1,000 nodes of ``test.index`` for
    testing, the test rows placed at their node ids as the standard loader (Kipf and
    Welling's) does. The other nodes are unlabelled in the semi-supervised setting (their
    labels are still returned).

    - ``"cora"``: see :func:`load_cora`.
    - ``"citeseer"``: see :func:`load_citeseer`.

    Source: the Planetoid repository (https://github.com/kimiyoung/planetoid), MIT licence,
    Copyright (c) 2016 Zhilin Yang; converted by ``tools/convert_planetoid.py``.

    Parameters
    ----------
    name : {"cora", "citeseer"}, default "cora"
        Which graph.
    features : {"dense", "sparse"}, default "dense"
        Return the features as a dense float32 array or a :class:`scipy.sparse.csr_matrix`.

    Returns
    -------
    GraphDataset
        Adjacency (CSR, symmetric), features, labels, the three masks and the class names.

    References
    ----------
    Yang, Cohen and Salakhutdinov (2016), "Revisiting semi-supervised learning with graph
    embeddings", ICML. Sen et al. (2008), "Collective classification in network data", AI
    Magazine 29(3).

    Examples
    --------
    >>> g = load_planetoid("citeseer")
    >>> g.features.shape, g.n_edges, len(g.class_names)
    ((3327, 3703), 4552, 6)
    """
    z = _arrays(name)
    n = int(z["labels"].size)
    row = z["edge_row"].astype(np.int64)
    col = z["edge_col"].astype(np.int64)
    adj = sp.csr_matrix(
        (np.ones(2 * row.size), (np.concatenate([row, col]), np.concatenate([col, row]))), shape=(n, n)
    )
    indices = z["feat_indices"].astype(np.int32)
    x = sp.csr_matrix(
        (np.ones(indices.size, dtype=np.float32), indices, z["feat_indptr"].copy()),
        shape=(n, int(z["n_features"])),
    )
    cora = name == "cora"
    return GraphDataset(
        name=name,
        adjacency=adj,
        features=x.toarray() if features == "dense" else x,
        labels=z["labels"].astype(np.int64),
        train_mask=_mask(n, z["train"]),
        val_mask=_mask(n, z["val"]),
        test_mask=_mask(n, z["test"]),
        class_names=_CORA_CLASSES if cora else _CITESEER_CLASSES,
        citation=_CORA_CITATION if cora else _CITESEER_CITATION,
    )


@validate_params({"features": [Options({"dense", "sparse"})]})
def load_cora(features: str = "dense") -> GraphDataset:
    """Load Cora with the Planetoid public split: 2,708 papers, 5,278 citation links.

    Each node is a machine-learning paper; its 1,433 binary features say which words of a
    fixed vocabulary (after stemming and stop-word removal) the paper contains; its label is
    one of 7 topics. Edges are citations, made undirected: the 5,429 links of the LINQS
    release become 5,278 distinct undirected edges (Planetoid's adjacency lists repeat 302
    entries; there are no self-loops). The public split of Yang et al. (2016): 140 training
    nodes (20 per class), 500 validation nodes and 1,000 test nodes; the other 1,068 nodes
    are unlabelled in the semi-supervised setting (their labels are still returned). The
    test rows are placed at their node ids as the standard loader (Kipf and Welling's) does.
    Same as ``load_planetoid("cora", features)``.

    Source: the Planetoid repository (https://github.com/kimiyoung/planetoid), MIT licence,
    Copyright (c) 2016 Zhilin Yang; data of McCallum et al. (2000) as released by the LINQS
    group (Sen et al., 2008). Converted by ``tools/convert_planetoid.py`` to an 85 kB npz.

    Parameters
    ----------
    features : {"dense", "sparse"}, default "dense"
        Return the features as a dense float32 array (15.5 MB) or a
        :class:`scipy.sparse.csr_matrix` (49,216 ones).

    Returns
    -------
    GraphDataset
        Adjacency (CSR, symmetric), features, labels (class sizes 351, 217, 418, 818, 426,
        298, 180), the three masks and the class names.

    References
    ----------
    McCallum, Nigam, Rennie and Seymore (2000), "Automating the construction of internet
    portals with machine learning", Information Retrieval 3. Sen et al. (2008), "Collective
    classification in network data", AI Magazine 29(3). Yang, Cohen and Salakhutdinov
    (2016), "Revisiting semi-supervised learning with graph embeddings", ICML.

    Examples
    --------
    >>> cora = load_cora()
    >>> cora.features.shape, cora.n_edges, len(cora.class_names)
    ((2708, 1433), 5278, 7)
    >>> int(cora.train_mask.sum()), int(cora.val_mask.sum()), int(cora.test_mask.sum())
    (140, 500, 1000)
    """
    return load_planetoid("cora", features)


@validate_params({"features": [Options({"dense", "sparse"})]})
def load_citeseer(features: str = "dense") -> GraphDataset:
    """Load CiteSeer with the Planetoid public split: 3,327 papers, 4,552 citation links.

    Each node is a computer-science paper; its 3,703 binary features say which words of a
    fixed vocabulary the paper contains (31.8 per labelled paper); its label is one of 6
    topics (AI, ML, IR, DB, Agents, HCI). Edges are citations, made undirected: Planetoid's
    adjacency lists hold 9,464 entries, which become 4,552 distinct undirected edges once
    repeats are merged and the 124 self-loops dropped; 48 nodes have no edge. Public split:
    120 training nodes (20 per class), 500 validation nodes, 1,000 test nodes.

    **The 15 padded nodes.** Planetoid's ``test.index`` spans ids 2,312..3,326 but lists
    only 1,000 of those 1,015 ids: 15 papers of the citation graph (ids 2407, 2489, 2553,
    2682, 2781, 2953, 3042, 3063, 3212, 3214, 3250, 3292, 3305, 3306, 3309) are not in the
    labelled release (3,312 papers). As the standard loader does, they keep their ids and
    their citation edges (one or two each) and get an all-zero feature row; they have no
    label, returned as ``-1`` (the standard loader's ``argmax`` of a zero row calls them
    class 0). They are in no mask; drop them (``labels >= 0``) before drawing random splits.
    Same as ``load_planetoid("citeseer", features)``.

    Source: the Planetoid repository (https://github.com/kimiyoung/planetoid), MIT licence,
    Copyright (c) 2016 Zhilin Yang; data of Giles et al. (1998) as released by the LINQS
    group (Sen et al., 2008). Converted by ``tools/convert_planetoid.py`` to a 172 kB npz.

    Parameters
    ----------
    features : {"dense", "sparse"}, default "dense"
        Return the features as a dense float32 array (49.3 MB) or a
        :class:`scipy.sparse.csr_matrix` (105,165 ones).

    Returns
    -------
    GraphDataset
        Adjacency (CSR, symmetric), features, labels (class sizes 249, 590, 668, 701, 596,
        508, and 15 nodes at ``-1``), the three masks and the class names.

    References
    ----------
    Giles, Bollacker and Lawrence (1998), "CiteSeer: an automatic citation indexing system",
    ACM Digital Libraries. Sen et al. (2008), "Collective classification in network data", AI
    Magazine 29(3). Yang, Cohen and Salakhutdinov (2016), "Revisiting semi-supervised
    learning with graph embeddings", ICML.

    Examples
    --------
    >>> cs = load_citeseer()
    >>> cs.features.shape, cs.n_edges, int((cs.labels < 0).sum())
    ((3327, 3703), 4552, 15)
    >>> int(cs.train_mask.sum()), int(cs.val_mask.sum()), int(cs.test_mask.sum())
    (120, 500, 1000)
    """
    return load_planetoid("citeseer", features)
