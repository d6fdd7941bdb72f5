"""Elo, HodgeRank and Rank Centrality on parsed judgements (private; see ranking.py)."""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix, identity
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import spsolve

from trustlab.errors import DataError
from trustlab.evaluation._ranking_inputs import Judgements


def elo(j: Judgements, *, k_factor: float, initial: float, scale: float, n_rounds: int) -> np.ndarray:
    """Sequential Elo updates in the order given, ``n_rounds`` passes."""
    r = [float(initial)] * j.n_items
    a, b, p = j.a.tolist(), j.b.tolist(), j.p.tolist()
    for _ in range(n_rounds):
        for ia, ib, s in zip(a, b, p, strict=True):
            expected = 1.0 / (1.0 + 10.0 ** ((r[ib] - r[ia]) / scale))
            step = k_factor * (s - expected)
            r[ia] += step
            r[ib] -= step
    return np.asarray(r)


def hodgerank(j: Judgements, *, flow: str, pseudo_count: float) -> tuple[np.ndarray, float]:
    """Weighted least squares potentials on the comparison graph and the cyclic residual share."""
    j.require_connected("HodgeRank")
    lo, hi, wins, n = j.pair_table()
    if flow == "logodds":
        y = np.log((wins + pseudo_count) / (n - wins + pseudo_count))
    else:  # "difference": mean of (+1 win, -1 loss), Jiang et al.'s uniform-noise flow
        y = (2.0 * wins - n) / n
    m, e = j.n_items, len(lo)
    rows = np.repeat(np.arange(e), 2)
    cols = np.column_stack([lo, hi]).ravel()
    vals = np.tile([1.0, -1.0], e)
    grad = csr_matrix((vals, (rows, cols)), shape=(e, m))
    w = n
    lap = (grad.T @ grad.multiply(w[:, None])).tocsr()
    rhs = grad.T @ (w * y)
    s = np.zeros(m)
    if m > 1:
        s[1:] = np.atleast_1d(spsolve(lap[1:, 1:].tocsc(), rhs[1:]))
    s -= s.mean()
    fitted = grad @ s
    total = float(np.sum(w * y**2))
    residual = float(np.sum(w * (y - fitted) ** 2))
    return s, (residual / total if total > 0 else 0.0)


def rank_centrality(j: Judgements, *, regularization: float) -> np.ndarray:
    """Stationary distribution of Negahban et al.'s comparison random walk."""
    j.require_connected("Rank Centrality")
    lo, hi, wins, n = j.pair_table()
    m = j.n_items
    if m == 1:
        return np.ones(1)
    to_hi = (n - wins + regularization) / (n + 2.0 * regularization)  # hi beat lo: walk lo -> hi
    to_lo = (wins + regularization) / (n + 2.0 * regularization)
    degree = np.bincount(np.concatenate([lo, hi]), minlength=m)
    d_max = float(degree.max())
    src = np.concatenate([lo, hi])
    dst = np.concatenate([hi, lo])
    rate = np.concatenate([to_hi, to_lo]) / d_max
    keep = rate > 0
    off = coo_matrix((rate[keep], (src[keep], dst[keep])), shape=(m, m)).tocsr()
    _check_single_closed_class(j, off)
    stay = 1.0 - np.asarray(off.sum(axis=1)).ravel()
    chain = off + csr_matrix((stay, (np.arange(m), np.arange(m))), shape=(m, m))
    system = (chain.T - identity(m, format="csr")).tolil()
    system[m - 1, :] = np.ones(m)
    rhs = np.zeros(m)
    rhs[-1] = 1.0
    pi = np.asarray(spsolve(system.tocsc(), rhs), dtype=float)
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


def _check_single_closed_class(j: Judgements, off: csr_matrix) -> None:
    """The walk must have one closed class, else its stationary distribution is not unique."""
    k, labels = connected_components(off, directed=True, connection="strong")
    if k == 1:
        return
    coo = off.tocoo()
    leaves = np.zeros(k, dtype=bool)
    leaves[labels[coo.row][labels[coo.row] != labels[coo.col]]] = True
    closed = np.flatnonzero(~leaves)
    if len(closed) > 1:
        shown = "; ".join(
            "{" + ", ".join(repr(j.items[i]) for i in np.flatnonzero(labels == c)[:5]) + "}"
            for c in closed[:4]
        )
        raise DataError(
            f"judgements: the Rank Centrality walk has {len(closed)} closed classes of items that never "
            f"lose to the rest ({shown}), so its stationary distribution is not unique; pass "
            "regularization > 0 (e.g. 1.0, a pseudo-count per compared pair) or add judgements.",
            argument="judgements",
        )
