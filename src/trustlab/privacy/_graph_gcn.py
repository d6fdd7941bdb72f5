"""UPGNET's node-classification pipeline on a simplified GCN (private module).

The GNN is SGC (a two-layer GCN without nonlinearities): propagation by the normalised
adjacency with self-loops, then scikit-learn's logistic regression. torch-geometric would
install beside the pinned torch, but torch training is slow on the shared CPUs here and the
NFR and HOA layers are model-agnostic. The features' noise comes from the multi-bit
mechanism only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from trustlab.errors import ParameterError
from trustlab.privacy.graph_ldp import hoa, multibit_encode, multibit_rectify, nfr
from trustlab.privacy.release import Release

__all__ = ["LDPGraphResult", "ldp_node_classification", "train_gcn"]


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
    a = sp.csr_matrix(adjacency, dtype=float)
    a = a - sp.diags(a.diagonal()) + sp.eye(a.shape[0])
    deg = np.asarray(a.sum(axis=1)).ravel()
    s = sp.csr_matrix(sp.diags(deg**-0.5) @ a @ sp.diags(deg**-0.5))
    x = np.asarray(features, dtype=float)
    for _ in range(layers):
        x = s @ x
    x = (x - x[train_idx].mean(axis=0)) / (x[train_idx].std(axis=0) + 1e-12)  # scale from the training nodes
    clf = LogisticRegression(C=c, max_iter=2000).fit(x[train_idx], y[train_idx])
    return float(np.mean(clf.predict(x[test_idx]) == y[test_idx]))


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
    **gcn: Any,
) -> LDPGraphResult:
    """Node classification on locally private features: ``"upgnet"`` (N-H), ``"base"``, or ``"nonprivate"``.

    ``"upgnet"``: multi-bit reports, rectified, NFR with ``mu = tau * B`` (``B`` the bound of
    the rectified values), HOA with ``k`` steps, then the GCN. ``"base"``: the GCN on the
    rectified reports. ``"nonprivate"``: the GCN on the raw features (``epsilon=None``).
    """
    if method not in ("upgnet", "base", "nonprivate"):
        raise ParameterError(
            f"method must be 'upgnet', 'base' or 'nonprivate', got {method!r}", argument="method"
        )
    if not (0.0 <= tau < 1.0):
        raise ParameterError(f"tau must lie in [0, 1), got {tau!r}", argument="tau")
    release = None
    if method == "nonprivate":
        x = np.asarray(features, dtype=float)
    else:
        if epsilon is None:
            raise ParameterError("epsilon is required for a private method", argument="epsilon")
        release = multibit_encode(features, epsilon, bounds=bounds)
        x = multibit_rectify(release)
        if method == "upgnet":
            bound = float(np.max(np.abs(multibit_rectify(_extreme(release)))))
            x = hoa(adjacency, nfr(x, tau * bound), k)
    acc = train_gcn(adjacency, x, np.asarray(y), np.asarray(train_idx), np.asarray(test_idx), **gcn)
    return LDPGraphResult(accuracy=acc, release=release, method=method)


def _extreme(release: Release) -> Release:
    """A release of the same parameters whose reports are all +1 (the rectified values' public bound)."""
    return Release(
        value=np.ones((1, release.parameters["d"]), dtype=np.int8),
        epsilon=release.epsilon,
        delta=0.0,
        mechanism=release.mechanism,
        parameters=release.parameters,
        description="public bound",
    )
