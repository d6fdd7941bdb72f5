"""Confined regions as results: a :class:`Box` and the outcome of an enumeration."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_numeric_array
from trustlab.explain._rec_inputs import rows

__all__ = ["TOL", "Box", "ConfinedRegions"]

# Tolerance on the verified maximum reachable score of a box: SCIP solves to a
# feasibility tolerance of 1e-9 (the reference code's Gurobi setting); every box is
# re-checked by an LP and kept "verified" only when its maximum score is <= _TOL.
TOL = 1e-6


@dataclass(frozen=True)
class Box:
    """A confined region: every individual with ``lower <= x <= upper`` has a fixed prediction.

    Attributes
    ----------
    names : tuple of str
    lower, upper : numpy.ndarray of shape (d,)
    population_lower, population_upper : numpy.ndarray
        The population region the box was searched in (for the description).
    objective : float
        Normalised width ``sum_j (u_j - l_j) / (PU_j - PL_j + 1)``.
    max_score : float
        The highest score any individual in the box reaches with an allowed action,
        re-computed by an LP over the continuous relaxation (an upper bound); ``<= 0``
        (up to ``tolerance``) confirms the box.
    solve_time : float
        Seconds SCIP spent on the solve that found the box.
    tolerance : float, default 1e-6
        Largest ``max_score`` that still confirms the box: 1e-6 times the largest ``|score|``
        the model reaches over the action set's ranges (the solvers work on the classifier
        scaled to that size, so the tolerance is relative to the scores, not absolute).

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.recourse import ActionSet, ConfinedRegionFinder
    >>> A = ActionSet(["age", "savings"], [18, 0], [80, 10], dtype=["int", "int"],
    ...               actionable=np.array([False, True]), step_ub=[0, 3])
    >>> regions = ConfinedRegionFinder(A).fit(np.array([-0.1, 1.0]), -2.0).enumerate(max_regions=2)
    >>> box = regions.boxes[0]
    >>> box.describe(), box.verified, box.n_conditions
    ('age in [20, 80] and savings in [0, 1]', True, 2)
    >>> box.contains([[30, 0], [30, 5]]).tolist()
    [True, False]
    """

    names: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    population_lower: np.ndarray = field(repr=False)
    population_upper: np.ndarray = field(repr=False)
    objective: float
    max_score: float
    solve_time: float
    tolerance: float = field(default=TOL, repr=False)

    @property
    def verified(self) -> bool:
        """Whether the LP re-check confirms that nobody in the box can reach a positive score."""
        return self.max_score <= self.tolerance

    @property
    def restricted(self) -> np.ndarray:
        """Boolean mask of the features on which the box is narrower than the population region."""
        return (self.lower > self.population_lower + 1e-9) | (self.upper < self.population_upper - 1e-9)

    @property
    def n_conditions(self) -> int:
        """Description size: number of features the box restricts."""
        return int(self.restricted.sum())

    def contains(self, X: Any) -> np.ndarray:
        """Which rows of ``X`` lie inside the box.

        Parameters
        ----------
        X : array-like of shape (n, d) or (d,), or DataFrame with the box's columns

        Returns
        -------
        numpy.ndarray of bool, shape (n,)
        """
        arr = rows(X, self.names, "X", allow_nan=True)
        tol = 1e-9 * (1 + np.abs(self.population_upper - self.population_lower))
        return np.all((arr >= self.lower - tol) & (arr <= self.upper + tol), axis=1)

    def to_frame(self, *, all_features: bool = False) -> pd.DataFrame:
        """The box as a table (``lower``, ``upper``), by default only the restricted features.

        Parameters
        ----------
        all_features : bool, default False
            List every feature, not only those the box restricts.

        Returns
        -------
        pandas.DataFrame
            Indexed by feature.
        """
        mask = np.ones(len(self.names), bool) if all_features else self.restricted
        return pd.DataFrame(
            {"lower": self.lower[mask], "upper": self.upper[mask]},
            index=pd.Index([n for n, m in zip(self.names, mask, strict=True) if m], name="feature"),
        )

    def describe(self, digits: int = 4) -> str:
        """A one-line description such as ``"age in [20, 30] and debt in [0, 3]"``.

        Parameters
        ----------
        digits : int, default 4
            Significant digits of the bounds.

        Returns
        -------
        str
        """
        parts = [
            f"{n} in [{lo:.{digits}g}, {hi:.{digits}g}]"
            for n, lo, hi, m in zip(self.names, self.lower, self.upper, self.restricted, strict=True)
            if m
        ]
        return " and ".join(parts) if parts else "the whole population region"


@dataclass(frozen=True)
class ConfinedRegions:
    """The outcome of :meth:`ConfinedRegionFinder.enumerate`.

    Attributes
    ----------
    boxes : tuple of Box
        The confined regions found, largest first, pairwise disjoint.
    status : str
        ``"certified"``: the first MIQCP is infeasible, so no confined box exists in
        the population region and every individual in it has recourse (for the
        continuous relaxation of the actions; see the docs). ``"exhausted"``: after
        the boxes listed no further disjoint box exists. ``"max_regions"``: stopped at
        ``max_regions``. ``"time_limit"``: stopped by the time limit (the boxes found
        are still confined; nothing is certified).
    solve_times : tuple of float
        Seconds per MIQCP solve, including the last (infeasible) one.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.recourse import ActionSet, ConfinedRegionFinder
    >>> A = ActionSet(["age", "savings"], [18, 0], [80, 10], dtype=["int", "int"],
    ...               actionable=np.array([False, True]), step_ub=[0, 3])
    >>> regions = ConfinedRegionFinder(A).fit(np.array([-0.1, 1.0]), -2.0).enumerate(max_regions=2)
    >>> regions.status, len(regions.boxes), regions.certified
    ('max_regions', 2, False)
    >>> regions.to_frame()[["region", "feature", "lower"]].to_dict("list")
    {'region': [0, 0, 1, 1], 'feature': ['age', 'savings', 'age', 'savings'], 'lower': [20.0, 0.0, 30.0, 2.0]}
    """

    boxes: tuple[Box, ...]
    status: str
    solve_times: tuple[float, ...]

    @property
    def certified(self) -> bool:
        """True when recourse is certified for the whole population region."""
        return self.status == "certified"

    def contains(self, X: Any) -> np.ndarray:
        """Which rows of ``X`` lie inside some box.

        Parameters
        ----------
        X : array-like of shape (n, d) or DataFrame with the boxes' columns

        Returns
        -------
        numpy.ndarray of bool, shape (n,)
        """
        if not self.boxes:
            return np.zeros(len(check_numeric_array(X, "X", allow_nan=True, ndim=2)), dtype=bool)
        return np.any([b.contains(X) for b in self.boxes], axis=0)

    def to_frame(self) -> pd.DataFrame:
        """All boxes as one table.

        Returns
        -------
        pandas.DataFrame
            Columns ``region``, ``feature``, ``lower``, ``upper``: one row per restricted
            feature of each box.
        """
        frames = [b.to_frame().reset_index().assign(region=k) for k, b in enumerate(self.boxes)]
        if not frames:
            return pd.DataFrame(columns=["region", "feature", "lower", "upper"])
        return pd.concat(frames, ignore_index=True)[["region", "feature", "lower", "upper"]]
