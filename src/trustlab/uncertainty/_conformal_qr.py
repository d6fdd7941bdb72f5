"""Linear quantile regression (pinball loss) for Kandinsky conformal prediction.

Solves ``min_beta sum_i rho_tau(s_i - phi_i' beta)`` exactly through its dual LP,
``max_b s'b`` subject to ``Phi'b = (1 - tau) Phi'1`` and ``0 <= b <= 1`` (HiGHS via
:func:`scipy.optimize.linprog`); ``beta`` is the dual of the equality constraints.

For large ``n`` the LP is solved on a band of points near the fitted quantile only
(Portnoy and Koenker's preprocessing, "The Gaussian hare and the Laplacian tortoise",
Statistical Science 1997): a pilot fit on a subsample, the points far above (below) it
fixed at ``b = 1`` (``b = 0``), the reduced LP solved, and the fixed points checked
against the new fit; any that fall on the wrong side widen the band and the LP is solved
again. The answer is the exact minimiser (the KKT conditions are verified on all points),
with memory ``O(n d)`` and LPs of ``O(d^{1/2} n^{2/3})`` points (plus the rows of rare
groups, which always enter the LP).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from trustlab.errors import DataError

_DIRECT_MAX = 5_000


def _dual_lp(phi: np.ndarray, s: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """Solve max s'b, Phi'b = rhs, 0 <= b <= 1; return beta (None if infeasible)."""
    res = linprog(
        -s,
        A_eq=sp.csr_matrix(phi.T),
        b_eq=rhs,
        bounds=(0.0, 1.0),
        method="highs",
    )
    if res.status != 0:
        return None
    return np.asarray(-res.eqlin.marginals, dtype=float)


def _partition_fit(phi: np.ndarray, s: np.ndarray, tau: float) -> np.ndarray | None:
    """Closed form when ``phi`` is constant columns plus indicators of a partition (or none).

    Then the fitted value in each cell is the cell's tau-quantile: the
    ``ceil(tau n_k)``-th smallest score (``numpy.quantile(method="inverted_cdf")``), a
    minimiser of the pinball loss (the unique one when ``tau n_k`` is not an integer).
    This covers split, class-conditional and Mondrian conformal prediction.
    """
    if not np.all((phi == 0.0) | (phi == 1.0)):
        return None
    const = np.all(phi == 1.0, axis=0)
    cells = phi[:, ~const]
    beta = np.zeros(phi.shape[1])
    if cells.shape[1] == 0:
        if not const.any():
            return None
        beta[int(np.argmax(const))] = np.quantile(s, tau, method="inverted_cdf")
        return beta
    if not np.all(cells.sum(axis=1) == 1.0):
        return None
    label = cells.argmax(axis=1)
    q = np.empty(cells.shape[1])
    for k in range(cells.shape[1]):
        q[k] = np.quantile(s[label == k], tau, method="inverted_cdf")
    beta[~const] = q
    return beta


def pinball_fit(phi: np.ndarray, s: np.ndarray, tau: float, rng: np.random.Generator) -> np.ndarray:
    """Coefficients of the tau-quantile linear regression of ``s`` on ``phi`` (exact)."""
    n, d = phi.shape
    closed = _partition_fit(phi, s, tau)
    if closed is not None:
        return closed
    rhs_full = (1.0 - tau) * phi.sum(axis=0)
    if n <= _DIRECT_MAX:
        beta = _dual_lp(phi, s, rhs_full)
        if beta is None:  # pragma: no cover - the full dual is always feasible (b = 1 - tau)
            raise DataError(
                "the quantile regression LP failed; check group_features.", argument="group_features"
            )
        return beta
    m = int(min(n // 2, max(_DIRECT_MAX, np.sqrt(d) * n ** (2.0 / 3.0))))
    sub = rng.choice(n, size=m, replace=False)
    pilot = pinball_fit(phi[sub], s[sub], tau, rng)  # recursive: the pilot is itself preprocessed
    r = s - phi @ pilot
    band = min(n, m)
    support = (phi != 0).sum(axis=0)
    while True:
        if band >= n:
            beta = _dual_lp(phi, s, rhs_full)
            assert beta is not None
            return beta
        fixed = np.ones(n, dtype=bool)
        fixed[np.argpartition(np.abs(r), band - 1)[:band]] = False
        # rows of rare groups always enter the LP: a subsample sees too few of them for the
        # pilot to place their threshold, and fixing them makes the reduced LP infeasible
        rare = support <= band // (2 * d)
        if rare.any():
            fixed &= ~(phi[:, rare] != 0).any(axis=1)
        active = np.flatnonzero(~fixed)
        hi = fixed & (r > 0)
        lo = fixed & (r <= 0)
        rhs = rhs_full - phi[hi].sum(axis=0)
        beta = _dual_lp(phi[active], s[active], rhs)
        if beta is None:
            band *= 2
            continue
        r_new = s - phi @ beta
        wrong = (hi & (r_new < 0)) | (lo & (r_new > 0))
        if not wrong.any():
            return beta
        r = r_new
        band = min(n, 2 * band)
