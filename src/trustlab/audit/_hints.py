"""What would make a check evaluable: the hint a not-evaluable check carries.

A check is not evaluable when its groups are too small to compare (too few held-out
rows, too few positives or negatives) or, in private mode, when the privacy noise in a
group's counts is too large for its figures to mean anything (a group needs
:data:`~trustlab.audit.prediction_table.NOISE_FACTOR` noise standard deviations of
positives and of negatives). The hint names the smallest change that would decide it:
more held-out rows of a named group, a larger epsilon (by a stated factor), or one
sensitive column at a time (the noisy cells of a group's count are then fewer).

Every number a hint reads is a figure the report already shows: in private mode, the
released (noisy, projected) counts and the public noise scale; hints are
post-processing and cost no budget.
"""

from __future__ import annotations

import math

import numpy as np

from trustlab.audit.prediction_table import (
    MIN_CLASS,
    MIN_GROUP,
    N_SCORE_BINS,
    NOISE_FACTOR,
    PredictionTable,
    binned_metrics,
    discrete_laplace_sd,
)

__all__ = ["group_hint", "rows_hint"]

_MAX_FACTOR = 1e4  # a larger epsilon beyond this factor is not suggested


def rows_hint(have: float, need: float, what: str = "held-out rows") -> str:
    """``"at least NEED WHAT (now HAVE): more data or a larger --test-size"``.

    Examples
    --------
    >>> rows_hint(3, 30)
    'at least 30 held-out rows (now 3): more data or a larger --test-size'
    """
    return f"at least {need:,.0f} {what} (now {have:,.0f}): more data or a larger --test-size"


def _floor(sd_unit: float, scale: float | None, factor: float) -> float:
    """Positives (and negatives) a group needs when epsilon is ``factor`` times larger."""
    sd = sd_unit * discrete_laplace_sd(None if not scale else scale / factor)
    return max(float(MIN_CLASS), NOISE_FACTOR * sd)


def _epsilon_factor(sd_unit: float, scale: float, lack: float) -> float | None:
    """Smallest factor (2 significant digits, rounded up) by which epsilon would clear ``lack``."""
    if lack < MIN_CLASS or _floor(sd_unit, scale, _MAX_FACTOR) > lack:
        return None
    lo, hi = 1.0, _MAX_FACTOR
    for _ in range(60):  # the floor falls as the factor grows: bisect
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if _floor(sd_unit, scale, mid) <= lack else (mid, hi)
    digits = 1 - math.floor(math.log10(hi))
    return math.ceil(hi * 10**digits) / 10**digits


def group_hint(tab: PredictionTable, attribute: str, wanted: int = 2) -> str:
    """What would make ``wanted`` groups of ``attribute`` evaluable, in words ("" when they are).

    The group that decides is the ``k``-th largest of those not yet evaluable (``k`` the
    number of groups missing), ranked by its smaller class (positives or negatives). For
    it the hint lists, as apply: the held-out rows it needs at its positive share; in
    private mode, the factor by which a larger epsilon would lower the noise floor to
    its counts, and whether auditing ``attribute`` alone (one sensitive column: fewer
    noisy cells per count) would.

    Parameters
    ----------
    tab : PredictionTable
        The shared prediction table (released counts in private mode).
    attribute : str
        The sensitive column.
    wanted : int
        Groups the check needs (2 to compare, 1 to judge a group).

    Returns
    -------
    str
        ``"evaluable with ..."`` or "".

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.audit.prediction_table import PredictionTable
    >>> c = np.zeros((2, 20, 2)); c[0, 5] = [60, 60]; c[1, 5] = [4, 4]
    >>> tab = PredictionTable(("g",), (("a", "b"),), c, None, None, c[None])
    >>> group_hint(tab, "g")
    'evaluable with more held-out rows of b: about 30 (now 8), to hold 10 positives and 10 negatives'
    """
    levels = tab.levels[tab.attributes.index(attribute)]
    if len(levels) < wanted:
        return (
            f"evaluable with a sensitive column of at least {wanted} groups ({attribute} has {len(levels)})"
        )
    ok = tab.evaluable(attribute)
    missing = wanted - int(ok.sum())
    if missing <= 0:
        return ""
    m = binned_metrics(tab.by_attribute(attribute))
    count, pos, neg = (np.rint(m[k]) for k in ("count", "positives", "negatives"))
    lack = np.minimum(pos, neg)
    order = [i for i in np.argsort(-lack, kind="stable") if not ok[i]]
    i = order[min(missing, len(order)) - 1]
    g, need = levels[i], tab.min_class(attribute)
    parts = []
    share = lack[i] / count[i] if count[i] > 0 else 0.0
    if share > 0:
        rows = max(float(MIN_GROUP), need / share)
        parts.append(
            f"more held-out rows of {g}: about {rows:,.0f} (now {count[i]:,.0f}), to hold "
            f"{need:,.0f} positives and {need:,.0f} negatives"
        )
    else:
        parts.append(
            f"held-out rows of {g} with both outcomes (now {pos[i]:,.0f} positive, {neg[i]:,.0f} negative)"
        )
    if tab.noise_scale and count[i] >= MIN_GROUP:
        unit = tab.class_noise_sd(attribute) / discrete_laplace_sd(tab.noise_scale)
        factor = _epsilon_factor(unit, tab.noise_scale, lack[i])
        if factor is not None:
            parts.insert(0, f"an --epsilon {factor:g} times larger")
        if len(tab.attributes) > 1:
            alone = _floor(math.sqrt(N_SCORE_BINS), tab.noise_scale, 1.0)
            if lack[i] >= alone:
                parts.insert(
                    1 if factor is not None else 0,
                    f"--sensitive {attribute} alone (fewer noisy cells: it then needs {alone:,.0f} "
                    "positives and negatives)",
                )
    return "evaluable with " + ", or ".join(parts)
