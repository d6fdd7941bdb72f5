"""The results of the DP boxplots: the five numbers of one box and a grouped figure (private module)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.errors import ParameterError
from trustlab.privacy.release import Release

__all__ = ["BoxplotStats", "GroupedBoxplots", "boxplot_distance"]


@dataclass(frozen=True)
class BoxplotStats:
    """The numbers a (DP) boxplot draws, with the privacy they cost.

    Attributes
    ----------
    whisker_lo, q1, median, q3, whisker_hi : float
        The five drawn numbers, ordered and inside the public bounds.
    share_lo, share_hi : float
        Share of points below the lower / above the upper whisker: a noisy integer
        count divided by ``n`` (a multiple of ``1 / n`` in ``[0, 1]``), or 0 when the
        whisker sits at the estimated extreme and no share is released.
    n : float
        The sample size the boxplot used: public (given, or ``len(x)`` under
        ``"replace"``) or a DP release (see the notes); never the exact size of a
        sample whose size is private.
    qmin, qmax : float
        The estimated extremes (levels ``q_n`` and ``1 - q_n``), post-processed.
    epsilon : float
        Epsilon charged for the whole boxplot.
    method : str
        Which construction produced it.
    releases : tuple of Release
        The underlying releases, for the ledger; their epsilons sum to ``epsilon``.
    notes : tuple of str
        Plain-language caveats (clipping, budget split, where ``n`` came from).

    See Also
    --------
    trustlab.privacy.dp_boxplot_stats : Builds this result from a private sample.
    """

    whisker_lo: float
    q1: float
    median: float
    q3: float
    whisker_hi: float
    share_lo: float
    share_hi: float
    n: float
    qmin: float
    qmax: float
    epsilon: float
    method: str
    releases: tuple[Release, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def count_lo(self) -> int:
        """Displayed number of points below the lower whisker: ``round(n * share_lo)``."""
        return max(0, round(self.n * self.share_lo))

    @property
    def count_hi(self) -> int:
        """Displayed number of points above the upper whisker: ``round(n * share_hi)``."""
        return max(0, round(self.n * self.share_hi))

    @property
    def five(self) -> np.ndarray:
        """``[whisker_lo, q1, median, q3, whisker_hi]`` as an array."""
        return np.array([self.whisker_lo, self.q1, self.median, self.q3, self.whisker_hi])

    def to_dict(self) -> dict[str, Any]:
        """Plain-type summary (no releases).

        Returns
        -------
        dict
            The five numbers, the outlier shares and displayed counts
            (``count_lo``, ``count_hi``), ``n``, ``epsilon``, ``method`` and ``notes``
            as floats, ints, strings and lists (JSON-serialisable). The extremes
            ``qmin``/``qmax`` and the releases are left out.
        """
        return {
            "whisker_lo": float(self.whisker_lo),
            "q1": float(self.q1),
            "median": float(self.median),
            "q3": float(self.q3),
            "whisker_hi": float(self.whisker_hi),
            "share_lo": float(self.share_lo),
            "share_hi": float(self.share_hi),
            "count_lo": self.count_lo,
            "count_hi": self.count_hi,
            "n": float(self.n),
            "epsilon": float(self.epsilon),
            "method": self.method,
            "notes": list(self.notes),
        }


@dataclass(frozen=True, eq=False)
class GroupedBoxplots(Mapping[Any, BoxplotStats]):
    """DP boxplots of one column by a public grouping: a mapping label -> :class:`BoxplotStats`.

    The mapping holds the groups that were drawn; every public group is listed in
    ``categories`` with its public or released size in ``sizes``, and those too small
    to draw are in ``too_small``. Nothing here is an exact private count.

    Attributes
    ----------
    boxes : mapping
        Label to :class:`BoxplotStats`, for the groups drawn, in category order.
    categories : tuple
        Every public group, in order (``other_label`` last when used).
    sizes : mapping
        Label to group size: the released discrete-Laplace count (``sizes_public``
        False) or the public count the caller passed (True).
    sizes_public : bool
        Whether ``sizes`` were given as public rather than released here.
    too_small : tuple
        Groups whose (public or released) size is below ``min_group_size``: no box.
    min_group_size : int
        The threshold used.
    epsilon : float
        Epsilon of the whole figure under ``neighbouring``.
    neighbouring : str
        The relation the guarantee is stated for.
    releases : tuple of Release
        The group sizes (when released) and the boxes (parallel composition);
        their epsilons sum to ``epsilon``.
    notes : tuple of str
        Plain-language caveats.

    See Also
    --------
    trustlab.privacy.grouped_dp_boxplot : Builds this result from a private column.
    """

    boxes: Mapping[Any, BoxplotStats]
    categories: tuple[Any, ...]
    sizes: Mapping[Any, float]
    sizes_public: bool
    too_small: tuple[Any, ...]
    min_group_size: int
    epsilon: float
    neighbouring: str
    releases: tuple[Release, ...] = ()
    notes: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> BoxplotStats:
        return self.boxes[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.boxes)

    def __len__(self) -> int:
        return len(self.boxes)

    def to_dict(self) -> dict[str, Any]:
        """Plain-type summary: every group's size, and the boxes drawn.

        Returns
        -------
        dict
            ``categories``, ``sizes`` and ``too_small`` keyed by ``str(label)``, the
            threshold, ``epsilon``, ``neighbouring``, ``boxes`` (label to
            :meth:`BoxplotStats.to_dict`) and ``notes``; JSON-serialisable, no releases.
        """
        return {
            "categories": [str(c) for c in self.categories],
            "sizes": {str(k): float(v) for k, v in self.sizes.items()},
            "sizes_public": self.sizes_public,
            "too_small": [str(c) for c in self.too_small],
            "min_group_size": self.min_group_size,
            "epsilon": float(self.epsilon),
            "neighbouring": self.neighbouring,
            "boxes": {str(k): v.to_dict() for k, v in self.boxes.items()},
            "notes": list(self.notes),
        }


def boxplot_distance(a: BoxplotStats, b: BoxplotStats) -> dict[str, float]:
    """Distances between two boxplots: location, scale, skewness and tails.

    ``location = |median_a - median_b|``, ``scale = |IQR_a - IQR_b|``,
    ``skewness`` is the L1 distance of the two whisker-to-box lengths and
    ``tails`` the L1 distance of the two outlier shares (the paper's metrics).
    Post-processing of two released boxplots: it costs no privacy budget.

    Parameters
    ----------
    a, b : BoxplotStats
        The two boxplots to compare (e.g. a DP boxplot and the exact one).

    Returns
    -------
    dict of str to float
        ``"location"``, ``"scale"`` and ``"skewness"`` in the data's units,
        ``"tails"`` as a share in ``[0, 2]``.

    Raises
    ------
    ParameterError
        When ``a`` or ``b`` is not a :class:`BoxplotStats`.

    References
    ----------
    Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025.

    Examples
    --------
    >>> a = BoxplotStats(0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0, 100, 0.0, 4.0, 1.0, "exact")
    >>> b = BoxplotStats(0.0, 1.5, 2.5, 3.0, 5.0, 0.05, 0.0, 100, 0.0, 5.0, 1.0, "exact")
    >>> boxplot_distance(a, b)
    {'location': 0.5, 'scale': 0.5, 'skewness': 1.5, 'tails': 0.05}
    """
    for name, s in (("a", a), ("b", b)):
        if not isinstance(s, BoxplotStats):
            raise ParameterError(f"{name} must be a BoxplotStats, got {type(s).__name__}.", argument=name)
    return {
        "location": abs(a.median - b.median),
        "scale": abs((a.q3 - a.q1) - (b.q3 - b.q1)),
        "skewness": abs((a.q1 - a.whisker_lo) - (b.q1 - b.whisker_lo))
        + abs((a.whisker_hi - a.q3) - (b.whisker_hi - b.q3)),
        "tails": abs(a.share_lo - b.share_lo) + abs(a.share_hi - b.share_hi),
    }
