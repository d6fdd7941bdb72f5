"""The table of (group cell, score bin, label) counts that Performance and Fairness share.

In private mode this table is the only release made from the predictions: one
discrete-Laplace histogram whose cells partition the held-out rows (parallel
composition). Every performance and fairness figure is post-processing of it,
through **one** function, :func:`consistent_counts`: each sensitive cell's block
of ``20 score bins x 2 labels`` noisy counts is projected onto the non-negative
counts with the same (clamped) total. The projected table is what both sections
read, so a group's row count is the same everywhere, group counts add up to the
overall count, and an empty group shows its noise around zero (not the sum of
positive parts of 40 noises).

Intervals come from bootstrap replicates of the table (:attr:`PredictionTable.replicates`),
drawn once and shared by both sections: multinomial row resamples of the counts
(the row bootstrap); in private mode each replicate also gets fresh simulated noise
of the released scale and the same projection, so the intervals include the
privacy noise and the post-processing (a parametric bootstrap: it reads only
released numbers and costs no budget).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit._binned_counts import (
    binned_metrics,
    confusion_from_bins,
    consistent_counts,
    discrete_laplace_sd,
)
from trustlab.audit.section import AuditContext
from trustlab.fairness import bootstrap_counts
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.release import Release
from trustlab.privacy.statistics import dp_histogram

__all__ = [
    "LEVEL",
    "MIN_CLASS",
    "MIN_GROUP",
    "NOISE_FACTOR",
    "N_BOOT",
    "N_SCORE_BINS",
    "OTHER",
    "PredictionTable",
    "binned_metrics",
    "build_prediction_table",
    "confusion_from_bins",
    "consistent_counts",
    "discrete_laplace_sd",
    "group_levels",
    "prediction_codes",
    "release_prediction_histogram",
    "shared_prediction_table",
    "size_rule",
]

N_SCORE_BINS = 20  # width 0.05: the 0.5 decision threshold and the 10 calibration bins are edges
OTHER = "(missing or other)"
N_BOOT = 1000
LEVEL = 0.95
MIN_GROUP = 30  # held-out rows a group needs before its figures are compared
MIN_CLASS = 10  # positives and negatives a group needs (TPR / FPR / AUC denominators)
NOISE_FACTOR = 10  # ... and, in private mode, this many noise standard deviations of each


def group_levels(ctx: AuditContext, column: str) -> list[Any]:
    """The levels of a sensitive column.

    Private mode: the schema's categories and ``OTHER`` (always, whatever the data
    hold). Otherwise: the levels seen anywhere in the table (not only the held-out
    rows, so that a group absent from them is reported as empty), and ``OTHER``
    when a value is missing.

    Parameters
    ----------
    ctx : AuditContext
        The audit's context.
    column : str
        A sensitive column.

    Returns
    -------
    list
        The levels, ``OTHER`` last when present.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from trustlab.audit import Audit
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=200), "g": rng.choice(["a", "b"], 200)})
    >>> df["y"] = (df.x + rng.normal(size=200) > 0).astype(int)
    >>> ctx = Audit(model="logistic").context(df, target="y", sensitive="g")
    >>> group_levels(ctx, "g")
    ['a', 'b']
    """
    if ctx.private:
        cats = ctx.schema.categories(column)
        if cats is None:  # the audit checks this before any section runs
            raise KeyError(column)
        return [*cats, OTHER]
    values = ctx.data[column]
    levels = sorted(pd.unique(values.dropna()), key=str)
    return [*levels, OTHER] if values.isna().any() else levels


def _codes(values: pd.Series, levels: list[Any]) -> np.ndarray:
    lookup = {v: i for i, v in enumerate(levels) if v != OTHER}
    other = levels.index(OTHER) if OTHER in levels else -1
    mapped = values.astype(object).map(lookup)
    return mapped.fillna(other).to_numpy(dtype=np.int64)


@dataclass(frozen=True)
class PredictionTable:
    """Counts ``counts[cell, bin, label]`` over the cross product of sensitive levels.

    Attributes
    ----------
    attributes : tuple of str
        The sensitive columns, in the order of the cell code.
    levels : tuple of tuple
        The levels of each attribute (:func:`group_levels`); the cells are their cross
        product, the last attribute varying fastest.
    counts : numpy.ndarray
        The table every figure reads: raw counts, or in private mode the released
        noisy counts after :func:`consistent_counts`.
    released : numpy.ndarray or None
        The noisy release itself (private mode), before post-processing.
    noise_scale : float or None
        The discrete Laplace scale of each released count (None when raw).
    replicates : numpy.ndarray
        ``[N_BOOT, cell, bin, label]`` bootstrap replicates, post-processed as ``counts``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from trustlab.audit import Audit
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=200), "g": rng.choice(["a", "b"], 200)})
    >>> df["y"] = (df.x + rng.normal(size=200) > 0).astype(int)
    >>> ctx = Audit(model="logistic").context(df, target="y", sensitive="g")
    >>> tab = build_prediction_table(ctx, None, n_boot=20)
    >>> tab.counts.shape, tab.replicates.shape, tab.levels
    ((2, 20, 2), (20, 2, 20, 2), (('a', 'b'),))
    >>> tab.group_counts("g").tolist(), float(tab.group_counts())
    ([32.0, 28.0], 60.0)
    """

    attributes: tuple[str, ...]
    levels: tuple[tuple[Any, ...], ...]
    counts: np.ndarray
    released: np.ndarray | None
    noise_scale: float | None
    replicates: np.ndarray

    @property
    def edges(self) -> np.ndarray:
        """The score bins' edges: ``counts.shape[-2] + 1`` equally spaced points from 0 to 1."""
        return np.linspace(0.0, 1.0, self.counts.shape[-2] + 1)

    def by_attribute(self, attribute: str, counts: np.ndarray | None = None) -> np.ndarray:
        """Counts ``[..., level, bin, label]`` of one attribute (summing over the others).

        ``counts`` defaults to the table's own; pass replicates ``[..., cell, bin, label]``
        to marginalise them all.

        Parameters
        ----------
        attribute : str
            One of :attr:`attributes`.
        counts : numpy.ndarray, optional
            ``[..., cell, bin, label]`` counts laid out as the table's.

        Returns
        -------
        numpy.ndarray
            ``[..., level, bin, label]`` counts.
        """
        c = self.counts if counts is None else counts
        lead = c.ndim - 3
        a = self.attributes.index(attribute)
        shape = tuple(len(lv) for lv in self.levels)
        full = c.reshape(*c.shape[:lead], *shape, *c.shape[-2:])
        others = tuple(lead + i for i in range(len(shape)) if i != a)
        return full.sum(axis=others) if others else full

    def overall(self, counts: np.ndarray | None = None) -> np.ndarray:
        """Counts ``[..., bin, label]`` over all rows.

        Parameters
        ----------
        counts : numpy.ndarray, optional
            ``[..., cell, bin, label]`` counts (default: the table's own).

        Returns
        -------
        numpy.ndarray
            The counts summed over the cells.
        """
        c = self.counts if counts is None else counts
        return c.sum(axis=-3)

    def group_counts(self, attribute: str | None = None) -> np.ndarray:
        """Rows per level of ``attribute`` (all rows for None): integers, the same for every section.

        The projection keeps each cell's clamped integer total, so these are integers up to
        float rounding, which is removed here.

        Parameters
        ----------
        attribute : str, optional
            One of :attr:`attributes`; None for the overall count.

        Returns
        -------
        numpy.ndarray
            Rounded row counts per level (a 0-d array for None).
        """
        c = self.overall() if attribute is None else self.by_attribute(attribute)
        return np.rint(c.sum(axis=(-2, -1)))

    def class_noise_sd(self, attribute: str) -> float:
        """Standard deviation of the privacy noise in one level's count of positives (or negatives).

        That count sums ``N_SCORE_BINS`` bins over every cell of the level, each with
        independent noise; 0 without privacy.

        Parameters
        ----------
        attribute : str
            One of :attr:`attributes`.

        Returns
        -------
        float
            ``sqrt(N_SCORE_BINS * cells) * discrete_laplace_sd(noise_scale)``, ``cells`` the
            number of cells per level.
        """
        a = self.attributes.index(attribute)
        cells = int(np.prod([len(lv) for i, lv in enumerate(self.levels) if i != a]))
        return math.sqrt(N_SCORE_BINS * cells) * discrete_laplace_sd(self.noise_scale)

    def count_halfwidth(self, attribute: str | None = None, z: float = 1.959963984540054) -> float:
        """Half-width of the noise-only interval of a level's row count (of the overall count for None).

        Such a count sums ``2 * N_SCORE_BINS`` noisy entries per cell; its noise is close to
        normal (a sum of many independent discrete Laplace draws). 0 without privacy.

        Parameters
        ----------
        attribute : str, optional
            One of :attr:`attributes`; None for the overall count.
        z : float, default=1.96
            Normal quantile of the interval (95%).

        Returns
        -------
        float
            The half-width, in rows.
        """
        cells = self.counts.shape[0]
        if attribute is not None:
            cells //= len(self.levels[self.attributes.index(attribute)])
        return z * math.sqrt(2 * N_SCORE_BINS * cells) * discrete_laplace_sd(self.noise_scale)

    def min_class(self, attribute: str) -> float:
        """Positives and negatives a level of ``attribute`` needs: ``max(MIN_CLASS, NOISE_FACTOR * sd)``.

        Parameters
        ----------
        attribute : str
            One of :attr:`attributes`.

        Returns
        -------
        float
            The minimum count of each class (``sd`` from :meth:`class_noise_sd`).
        """
        return max(float(MIN_CLASS), NOISE_FACTOR * self.class_noise_sd(attribute))

    def evaluable(self, attribute: str) -> np.ndarray:
        """Which levels are large enough for their figures to mean something (see :func:`size_rule`).

        Parameters
        ----------
        attribute : str
            One of :attr:`attributes`.

        Returns
        -------
        numpy.ndarray of bool
            Per level: at least ``MIN_GROUP`` rows and :meth:`min_class` of each class.
        """
        m = binned_metrics(self.by_attribute(attribute))
        need = self.min_class(attribute)
        return (m["count"] >= MIN_GROUP) & (m["positives"] >= need) & (m["negatives"] >= need)


def size_rule(tab: PredictionTable, attribute: str, *, short: bool = False) -> str:
    """The group-size rule in words, with this table's numbers (``short``: one clause for a check's rule).

    Parameters
    ----------
    tab : PredictionTable
        The table (its noise scale sets the class minimum).
    attribute : str
        The sensitive column.
    short : bool, default=False
        One clause for a check's rule instead of the full sentence.

    Returns
    -------
    str
        The rule.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from trustlab.audit import Audit
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=200), "g": rng.choice(["a", "b"], 200)})
    >>> df["y"] = (df.x + rng.normal(size=200) > 0).astype(int)
    >>> ctx = Audit(model="logistic").context(df, target="y", sensitive="g")
    >>> size_rule(build_prediction_table(ctx, None, n_boot=20), "g", short=True)
    'groups compared: at least 30 held-out rows and 10 positives and 10 negatives (sampling floor)'
    """
    sd = tab.class_noise_sd(attribute)
    need = f"{tab.min_class(attribute):,.0f}"
    if short:
        why = f"{NOISE_FACTOR} x the noise sd {sd:.1f}" if sd else "sampling floor"
        return (
            f"groups compared: at least {MIN_GROUP} held-out rows and {need} positives and {need} "
            f"negatives ({why})"
        )
    base = (
        f"a group is evaluated when it has at least {MIN_GROUP} held-out rows and at least "
        f"{need} positives and as many negatives"
    )
    if not sd:
        return base + f" ({MIN_CLASS}: the denominators of its TPR, FPR and AUC)"
    return base + (
        f" ({NOISE_FACTOR} x {sd:.1f}, the standard deviation of the privacy noise in such a "
        f"count at this epsilon, so that noise alone moves its TPR or FPR by about "
        f"{1 / (NOISE_FACTOR * math.sqrt(2)):.2f} or less); smaller groups are too small for their "
        "figures to mean anything at this epsilon"
    )


def prediction_codes(ctx: AuditContext) -> tuple[np.ndarray, tuple[tuple[Any, ...], ...]]:
    """Each held-out row's cell code ``(sensitive cell, score bin, label)``, and the levels.

    A function of each row alone (its sensitive values, its score under the fixed model,
    its label), so adding or removing a row changes one code.

    Parameters
    ----------
    ctx : AuditContext
        The audit's context (held-out rows, their scores and labels).

    Returns
    -------
    codes : numpy.ndarray of int64, shape (n_test,)
        ``(cell * N_SCORE_BINS + score_bin) * 2 + label`` per held-out row.
    levels : tuple of tuple
        The levels of each sensitive column.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from trustlab.audit import Audit
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=200), "g": rng.choice(["a", "b"], 200)})
    >>> df["y"] = (df.x + rng.normal(size=200) > 0).astype(int)
    >>> ctx = Audit(model="logistic").context(df, target="y", sensitive="g")
    >>> codes, levels = prediction_codes(ctx)
    >>> codes.shape, levels, bool(codes.max() < 2 * 20 * 2)
    ((60,), (('a', 'b'),), True)
    """
    levels = tuple(tuple(group_levels(ctx, a)) for a in ctx.sensitive)
    sens = ctx.sensitive_test
    cell = np.zeros(len(ctx.test_index), dtype=np.int64)
    for attr, lv in zip(ctx.sensitive, levels, strict=True):
        cell = cell * len(lv) + _codes(sens[attr], list(lv))
    score_bin = np.clip((ctx.proba_test * N_SCORE_BINS).astype(np.int64), 0, N_SCORE_BINS - 1)
    return (cell * N_SCORE_BINS + score_bin) * 2 + ctx.y_test, levels


def release_prediction_histogram(codes: np.ndarray, n_cells: int, epsilon: float) -> Release:
    """The private audit's one release from the predictions: a discrete-Laplace histogram.

    Each held-out row falls in one of ``n_cells * N_SCORE_BINS * 2`` cells: L1 sensitivity 1
    under add/remove, scale ``1 / epsilon`` per cell (:func:`~trustlab.privacy.dp_histogram`).

    Parameters
    ----------
    codes : numpy.ndarray of int
        The rows' cell codes (:func:`prediction_codes`).
    n_cells : int
        Number of sensitive cells.
    epsilon : float
        The budget of the release.

    Returns
    -------
    Release
        ``value``: the ``n_cells * N_SCORE_BINS * 2`` noisy counts.

    Examples
    --------
    >>> import numpy as np
    >>> rel = release_prediction_histogram(np.array([0, 5, 5, 79]), n_cells=2, epsilon=1.0)
    >>> np.asarray(rel.value).shape, rel.epsilon
    ((80,), 1.0)
    """
    n_codes = n_cells * N_SCORE_BINS * 2
    return dp_histogram(
        codes,
        n_codes,
        epsilon,
        description=(
            f"held-out rows counted by sensitive group x score bin ({N_SCORE_BINS}) x label ({n_codes} cells)"
        ),
    )


def build_prediction_table(
    ctx: AuditContext, budget: Accountant | None, *, n_boot: int = N_BOOT
) -> PredictionTable:
    """Count the held-out rows by (sensitive cell, score bin, label); privatise in private mode.

    Without a budget the counts are exact and the replicates are row-bootstrap resamples.
    With one, the whole remaining epsilon of ``budget`` is spent on
    :func:`release_prediction_histogram`, the release is projected by
    :func:`consistent_counts`, and each replicate adds fresh simulated noise of the released
    scale before the same projection.

    Parameters
    ----------
    ctx : AuditContext
        The audit's context.
    budget : Accountant or None
        The accountant to charge (private mode), or None.
    n_boot : int, default=N_BOOT
        Bootstrap replicates.

    Returns
    -------
    PredictionTable
        The table and its replicates.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from trustlab.audit import Audit
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=200), "g": rng.choice(["a", "b"], 200)})
    >>> df["y"] = (df.x + rng.normal(size=200) > 0).astype(int)
    >>> ctx = Audit(model="logistic").context(df, target="y", sensitive="g")
    >>> build_prediction_table(ctx, None, n_boot=20).counts.sum()
    np.float64(60.0)
    """
    codes, levels = prediction_codes(ctx)
    n_cells = int(np.prod([len(lv) for lv in levels])) if levels else 1
    shape = (n_cells, N_SCORE_BINS, 2)
    if budget is None:
        counts = np.bincount(codes, minlength=n_cells * N_SCORE_BINS * 2).reshape(shape).astype(float)
        released, scale = None, None
        reps = bootstrap_counts(counts, n_boot=n_boot, random_state=ctx.random_state)
    else:
        release = budget.record(release_prediction_histogram(codes, n_cells, budget.remaining_epsilon))
        released = np.asarray(release.value).reshape(shape)
        scale = float(release.parameters["scale"])
        counts = consistent_counts(released)
        reps = consistent_counts(
            bootstrap_counts(counts, n_boot=n_boot, noise_scale=scale, random_state=ctx.random_state)
        )
    return PredictionTable(
        attributes=tuple(ctx.sensitive),
        levels=levels,
        counts=counts,
        released=released,
        noise_scale=scale,
        replicates=reps,
    )


def shared_prediction_table(ctx: AuditContext, budget: Accountant | None) -> PredictionTable:
    """The audit's one prediction table, built on first use and shared by every section.

    Performance and Fairness share the budget key ``"predictions"``: whichever computes
    first builds (and, in private mode, releases) the table with that accountant, and
    the other reads the same released counts.

    Parameters
    ----------
    ctx : AuditContext
        The audit's context.
    budget : Accountant or None
        The shared accountant in private mode, else None.

    Returns
    -------
    PredictionTable
        The cached table (built by :func:`build_prediction_table` on the first call).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from trustlab.audit import Audit
    >>> rng = np.random.default_rng(0)
    >>> df = pd.DataFrame({"x": rng.normal(size=200), "g": rng.choice(["a", "b"], 200)})
    >>> df["y"] = (df.x + rng.normal(size=200) > 0).astype(int)
    >>> ctx = Audit(model="logistic").context(df, target="y", sensitive="g")
    >>> shared_prediction_table(ctx, None) is shared_prediction_table(ctx, None)
    True
    """
    key = "prediction_table" if budget is not None else "prediction_table_raw"
    table: PredictionTable = ctx.shared(key, lambda: build_prediction_table(ctx, budget))
    return table
