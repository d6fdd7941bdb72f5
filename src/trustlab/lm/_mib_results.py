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

    See Also
    --------
    trustlab.lm.mib.edge_scores : builds it.

    Examples
    --------
    >>> from trustlab.lm._mib_graph import _graph_shape
    >>> g = _graph_shape(1, 2)  # the graph of a 1-block, 2-head model: 13 edges
    >>> s = EdgeScores("random", np.arange(g.n_edges, dtype=float) - 8, g)
    >>> s.top(2)
    ['m0->logits', 'a0.h1->logits']
    >>> s.top(2, absolute=True)
    ['input->a0.h0<q>', 'input->a0.h1<q>']
    """

    method: str
    scores: np.ndarray
    graph: EdgeGraph = field(repr=False)

    def top(self, n: int, *, absolute: bool = False) -> list[str]:
        """Names of the ``n`` best edges (by signed or absolute score).

        Parameters
        ----------
        n : int
            How many edges.
        absolute : bool, default=False
            Rank by ``|score|`` (an edge can matter either way) instead of by signed score.

        Returns
        -------
        list of str
            Edge names such as ``"a0.h1->m0"``, best first (ties in ``graph.edges`` order).
        """
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

    See Also
    --------
    trustlab.lm.mib.faithfulness_curve : builds it.

    Examples
    --------
    >>> c = FaithfulnessCurve(
    ...     budgets=np.array([0.25, 0.5, 1.0]),
    ...     n_edges=np.array([0, 2, 4]),
    ...     fractions=np.array([0.0, 0.5, 1.0]),
    ...     faithfulness=np.array([0.0, 0.8, 1.0]),
    ...     absolute=False,
    ... )
    >>> round(c.area, 6), round(c.area_from_one, 6)  # CPR-like and CMD-like areas
    (0.65, 0.35)
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

    See Also
    --------
    trustlab.lm.mib.circuit_localization : builds it.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> from trustlab.lm.mib import circuit_localization, edge_scores, min_pairs
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> task = min_pairs(8, n_items=4, n_values=12)
    >>> loc = circuit_localization(m, task, edge_scores(m, task, method="eap"), budgets=[0.5, 1.0])
    >>> loc.cpr == loc.signed.area, loc.cmd == loc.absolute.area_from_one
    (True, True)
    """

    cpr: float
    cmd: float
    signed: FaithfulnessCurve
    absolute: FaithfulnessCurve
