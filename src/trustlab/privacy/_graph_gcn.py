"""UPGNET's node-classification pipeline on a simplified GCN (private module).

The GNN is SGC by default (a two-layer GCN without nonlinearities: propagation by the
normalised adjacency with self-loops, then scikit-learn's logistic regression), or, with
``model="gcn"``, a two-layer GCN trained in torch with Kipf and Welling's settings (hidden 16,
ReLU, dropout 0.5, Adam at 0.01 with weight decay 5e-4, 200 full-batch epochs); ``"sage"`` and
``"gat"`` train GraphSAGE or GAT (``_graph_backbones``, one shared loop). The NFR and
HOA layers are model-agnostic. The features' noise comes from the multi-bit mechanism only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from trustlab.errors import ParameterError
from trustlab.privacy._graph_backbones import fit_torch_backbone, propagation, standardise
from trustlab.privacy.graph_ldp import (
    hoa,
    multibit_encode,
    multibit_rectify,
    nfr,
    piecewise_encode,
    piecewise_rectify,
)
from trustlab.privacy.release import Release

__all__ = ["LDPGraphResult", "ldp_node_classification", "train_gcn", "train_torch_gcn"]


@dataclass(frozen=True)
class LDPGraphResult:
    """Test accuracy of a GCN trained on locally private node features, and the features' release."""

    accuracy: float
    release: Release | None
    method: str


def train_gcn(
    adjacency: Any,
    features: np.ndarray,
    y: np.ndarray,
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    *,
    layers: int = 2,
    c: float = 1.0,
) -> float:
    """A simplified graph convolution (SGC): logistic regression on ``S^layers X``; test accuracy.

    ``S = D^-1/2 (A + I) D^-1/2`` is the GCN propagation with self-loops; SGC is a GCN whose
    nonlinearities are dropped (Wu et al., ICML 2019), deterministic and fast on CPUs.
    """
    s = propagation(adjacency)
    x = np.asarray(features, dtype=float)
    for _ in range(layers):
        x = s @ x
    x = standardise(x, train_idx)
    clf = LogisticRegression(C=c, max_iter=2000).fit(x[train_idx], y[train_idx])
    return float(np.mean(clf.predict(x[test_idx]) == y[test_idx]))


def train_torch_gcn(
    adjacency: Any,
    features: np.ndarray,
    y: np.ndarray,
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    *,
    hidden: int = 16,
    epochs: int = 200,
    lr: float = 0.01,
    weight_decay: float = 5e-4,
    dropout: float = 0.5,
    seed: int = 0,
) -> float:
    """A two-layer GCN (Kipf and Welling, ICLR 2017) trained full-batch in torch; test accuracy.

    ``softmax(S relu(S X W1) W2)`` with ``S`` the propagation with self-loops; Adam, dropout on
    the input and hidden layers, cross-entropy on the training nodes; deterministic for ``seed``
    (a local torch generator drives the initialisation and the dropout masks).
    """
    return fit_torch_backbone(
        "gcn",
        adjacency,
        features,
        y,
        train_idx,
        test_idx,
        hidden=hidden,
        epochs=epochs,
        lr=lr,
        weight_decay=weight_decay,
        dropout=dropout,
        seed=seed,
    )


def ldp_node_classification(
    adjacency: Any,
    features: Any,
    y: Any,
    train_idx: Any,
    test_idx: Any,
    *,
    epsilon: float | None,
    method: str = "upgnet",
    bounds: tuple[float, float] = (0.0, 1.0),
    k: int = 8,
    tau: float = 0.1,
    architecture: str = "n-h",
    mechanism: str = "multibit",
    model: str = "sgc",
    **gcn: Any,
) -> LDPGraphResult:
    """Node classification on locally private features: ``"upgnet"``, ``"base"``, or ``"nonprivate"``.

    ``"upgnet"``: multi-bit reports, rectified, then UPGNET's two layers in the order
    ``architecture`` names, then the GNN. ``"n-h"`` (the paper's default, Sec. 3.2.3): NFR on
    each node's reports with ``mu_2 = tau * B`` (``B`` the public bound of the rectified values),
    then HOA with ``k`` steps. ``"h-n"`` (Sec. 3.2.2): HOA first, then NFR on the aggregated
    embeddings with ``mu_1 = tau * B / sqrt(d_bar * k)``, ``d_bar`` the graph's average degree
    (public: the server holds the topology). The copy of the paper read prints Theorem 5's
    threshold as "tau_1 B / dK" with a symbol lost; the square root is trustlab's reading: it is
    the scale of the noise left in a mean of ``d_bar * k`` reports bounded by ``B``, as ``mu_2 =
    tau * B`` is for one report. ``"base"``: the GNN on the rectified reports. ``"nonprivate"``:
    the GNN on the raw features (``epsilon=None``). ``mechanism``: the nodes' LDP protocol,
    ``"multibit"`` (LPGNN's, the paper's default) or ``"piecewise"`` (PM, the paper's
    second). ``model``: ``"sgc"`` (default, :func:`train_gcn`), ``"gcn"``
    (:func:`train_torch_gcn`), ``"sage"`` (GraphSAGE-mean, Hamilton et al., 2017) or ``"gat"``
    (GAT, Velickovic et al., 2018), the paper's three trained backbones
    (``trustlab.privacy._graph_backbones``); further keyword arguments go to the model.
    """
    if method not in ("upgnet", "base", "nonprivate"):
        raise ParameterError(
            f"method must be 'upgnet', 'base' or 'nonprivate', got {method!r}", argument="method"
        )
    if model not in ("sgc", "gcn", "sage", "gat"):
        raise ParameterError(f"model must be 'sgc', 'gcn', 'sage' or 'gat', got {model!r}", argument="model")
    if not (0.0 <= tau < 1.0):
        raise ParameterError(f"tau must lie in [0, 1), got {tau!r}", argument="tau")
    if mechanism not in ("multibit", "piecewise"):
        raise ParameterError(
            f"mechanism must be 'multibit' or 'piecewise', got {mechanism!r}", argument="mechanism"
        )
    if architecture not in ("n-h", "h-n"):
        raise ParameterError(
            f"architecture must be 'n-h' (NFR, then HOA) or 'h-n' (HOA, then NFR), got {architecture!r}",
            argument="architecture",
        )
    release = None
    if method == "nonprivate":
        x = np.asarray(features, dtype=float)
    else:
        if epsilon is None:
            raise ParameterError("epsilon is required for a private method", argument="epsilon")
        encode, rectify = {
            "multibit": (multibit_encode, multibit_rectify),
            "piecewise": (piecewise_encode, piecewise_rectify),
        }[mechanism]
        release = encode(features, epsilon, bounds=bounds)
        x = rectify(release)
        if method == "upgnet":
            bound = float(np.max(np.abs(rectify(_extremes(release)))))
            if architecture == "n-h":
                x = hoa(adjacency, nfr(x, tau * bound), k)
            else:
                a = sp.csr_matrix(adjacency)
                d_bar = max(float(a.nnz - a.diagonal().astype(bool).sum()) / a.shape[0], 1.0)
                x = nfr(hoa(adjacency, x, k), tau * bound / np.sqrt(d_bar * k))
    args = (adjacency, x, np.asarray(y), np.asarray(train_idx), np.asarray(test_idx))
    if model == "sgc":
        acc = train_gcn(*args, **gcn)
    elif model == "gcn":
        acc = train_torch_gcn(*args, **gcn)
    else:
        acc = fit_torch_backbone(model, *args, **gcn)
    return LDPGraphResult(accuracy=acc, release=release, method=method)


def _extremes(release: Release) -> Release:
    """A release of the same parameters holding the two extreme reports (the public bound of ``|x'|``)."""
    p = release.parameters
    low, high = (1, p["cells"]) if "cells" in p else (-1, 1)  # PM's first and last cells; signs
    return Release(
        value=np.array([[low] * p["d"], [high] * p["d"]], dtype=np.int32),
        epsilon=release.epsilon,
        delta=0.0,
        mechanism=release.mechanism,
        parameters=p,
        description="public bound",
    )
