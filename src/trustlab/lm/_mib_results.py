"""Result objects of :mod:`trustlab.lm.mib` (MIB's circuit-localisation track): scores, curves, metrics.

References
----------
.. [1] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trustlab.lm._mib_graph import EdgeGraph

__all__ = ["CircuitLocalization", "EdgeScores", "FaithfulnessCurve"]


@dataclass(frozen=True)
class EdgeScores:
    """One score per edge (positive: the edge helps the clean answer).

    Attributes
    ----------
    method : str
        One of :data:`trustlab.lm.mib.METHODS`.
    scores : ndarray of float, shape (n_edges,)
        Scores in the order of ``graph.edges``; in units of the metric (mean logit difference).
    graph : EdgeGraph
        The graph scored.
    """

    method: str
    scores: np.ndarray
    graph: EdgeGraph = field(repr=False)

    def top(self, n: int, *, absolute: bool = False) -> list[str]:
        """Names of the ``n`` best edges (by signed or absolute score)."""
        key = np.abs(self.scores) if absolute else self.scores
        order = np.argsort(-key, kind="stable")[:n]
        names = self.graph.edge_names
        return [names[i] for i in order]


@dataclass(frozen=True)
class FaithfulnessCurve:
    """Faithfulness of the top-scored circuits over edge budgets.

    Attributes
    ----------
    budgets : ndarray of float
        Requested shares of edges (the circuit keeps ``int(budget * n_edges)`` top edges).
    n_edges : ndarray of int
        Edges left in each circuit after pruning.
    fractions : ndarray of float
        ``n_edges / total edges``: the x-axis of the areas.
    faithfulness : ndarray of float
        ``(m(C) - m(∅)) / (m(N) - m(∅))`` per circuit.
    absolute : bool
        Whether circuits took the top edges by absolute score.
    """

    budgets: np.ndarray
    n_edges: np.ndarray
    fractions: np.ndarray
    faithfulness: np.ndarray
    absolute: bool

    @property
    def area(self) -> float:
        """Trapezoid area under the curve (CPR when ``absolute`` is False)."""
        return float(np.trapezoid(self.faithfulness, self.fractions))

    @property
    def area_from_one(self) -> float:
        """Trapezoid area under ``|1 - f|`` (CMD when ``absolute`` is True)."""
        return float(np.trapezoid(np.abs(1.0 - self.faithfulness), self.fractions))


@dataclass(frozen=True)
class CircuitLocalization:
    """MIB's two integrated metrics for one set of edge scores.

    Attributes
    ----------
    cpr : float
        Integrated circuit performance ratio (signed scores; higher is better).
    cmd : float
        Integrated circuit-model difference (absolute scores; lower is better, 0 is ideal).
    signed, absolute : FaithfulnessCurve
        The two curves.
    """

    cpr: float
    cmd: float
    signed: FaithfulnessCurve
    absolute: FaithfulnessCurve
