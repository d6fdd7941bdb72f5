"""A grouped DP boxplot figure: group sizes, the boxes of the groups drawn, the figure's releases.

The core of :func:`trustlab.privacy.grouped_dp_boxplot`, shared with the figures drawn
from merged counts in :mod:`trustlab.compute.quantiles`: :func:`grouped_figure`
releases the group sizes, yields the boxes to draw and takes them back; each box is a
DPBoxplot (:mod:`._boxplot_core`) under add/remove with its group's size as ``n``.

References
----------
Ramsay, Diaz-Rodriguez. "Differentially Private Boxplots". ICML 2025
(PMLR 267:51117-51139).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trustlab.privacy._boxplot_core import BoxOptions, BoxSummary, PendingBox, box_finish, box_quantiles
from trustlab.privacy._boxplot_results import BoxplotStats, GroupedBoxplots
from trustlab.privacy._boxplot_rules import MIN_GROUP_RANKS, check_n
from trustlab.privacy._inputs import NEIGHBOURING
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_discrete_laplace


@dataclass(frozen=True)
class FigurePlan:
    """The public inputs of a grouped figure, checked (see :func:`~trustlab.privacy.grouped_dp_boxplot`).

    ``labels`` are the groups in order (the declared categories, then ``other_label``
    unless it is None); ``public`` their public sizes (``counts=``) or None to release
    them with ``count_weight * epsilon``.
    """

    labels: list[Any]
    public: list[float] | None
    epsilon: float
    bounds: tuple[float, float]
    neighbouring: str
    count_weight: float
    min_group_size: int | None
    other_label: Any
    description: str


BoxesFn = Callable[[list[tuple[int, Any, float, float]]], dict[Any, BoxplotStats]]


def grouped_boxplots(exact: np.ndarray, plan: FigurePlan, boxes_fn: BoxesFn) -> GroupedBoxplots:
    """The grouped figure from exact group sizes and a box drawer (core of :func:`grouped_dp_boxplot`).

    ``exact`` holds the exact number of present values of each group in ``labels``;
    ``boxes_fn`` draws the boxes ``[(group index, label, epsilon of the box, public or
    released size), ...]`` (in process from the rows; from merged counts with a
    second pass for the outlier counts in :mod:`trustlab.compute.quantiles`). The
    releases are returned unrecorded: the caller records them in its accountant.
    """
    steps = grouped_figure(exact, plan)
    todo = next(steps)
    try:
        steps.send(boxes_fn(todo))
    except StopIteration as done:
        return done.value
    raise AssertionError("grouped_figure yields once")  # pragma: no cover


def grouped_figure(
    exact: np.ndarray, plan: FigurePlan
) -> Generator[list[tuple[int, Any, float, float]], dict[Any, BoxplotStats], GroupedBoxplots]:
    """:func:`grouped_boxplots` as a generator: releases the sizes, yields the boxes to draw, takes them back.

    Several figures can so share one pass over the data for their outlier counts
    (:func:`trustlab.compute.quantiles.grouped_dp_boxplots_on`).
    """
    labels, public, epsilon, neighbouring = plan.labels, plan.public, plan.epsilon, plan.neighbouring
    min_group_size, other_label, description = plan.min_group_size, plan.other_label, plan.description
    lower, upper = plan.bounds
    releases: list[Release] = []
    notes: list[str] = []
    if math.isinf(epsilon):
        sizes = [float(v) for v in exact]
        eps_rest = eps_box = math.inf
        notes.append("not private: exact group sizes and boxplots")
    else:
        sens = 2 if neighbouring == "replace" else 1
        if public is None:
            eps_c = plan.count_weight * epsilon
            noisy = add_discrete_laplace(exact.astype(np.int64), sens / eps_c)
            sizes = [float(max(0, int(v))) for v in noisy]
            releases.append(
                Release(
                    tuple(int(s) for s in sizes),
                    eps_c,
                    0.0,
                    "discrete Laplace",
                    {
                        "groups": tuple(str(c) for c in labels),
                        "sensitivity": sens,
                        "scale": sens / eps_c,
                        "neighbouring": NEIGHBOURING[neighbouring],
                        "post-processing": "max(0, .)",
                    },
                    f"{description}: group sizes",
                )
            )
            notes.append(f"group sizes: discrete Laplace counts (epsilon {eps_c:.4g}), not the exact sizes")
        else:
            sizes = public
            eps_c = 0.0
            notes.append("group sizes: given as public (counts=) and published as given")
        eps_rest = epsilon - eps_c
        eps_box = eps_rest if neighbouring == "add_remove" else eps_rest / 2
        if neighbouring == "replace":
            notes.append(
                "replace-one neighbours: a record moving between groups touches two boxes, so "
                f"each box gets half of {eps_rest:.4g}"
            )
    if min_group_size is None:
        min_group_size = 1 if math.isinf(eps_box) else max(10, math.ceil(MIN_GROUP_RANKS / eps_box))
    if other_label is None:
        notes.append("records with a missing or undeclared group label are left out")
    else:
        notes.append(f"records with a missing or undeclared group label form the group {other_label!r}")

    too_small: list[Any] = []
    todo: list[tuple[int, Any, float, float]] = []
    for i, cat in enumerate(labels):
        if sizes[i] < min_group_size:
            too_small.append(cat)
        else:
            todo.append((i, cat, eps_box, sizes[i]))
    boxes = yield todo
    if too_small:
        notes.append(
            f"{len(too_small)} group(s) below min_group_size={min_group_size} by their "
            f"{'public' if public is not None else 'released'} size: not drawn"
        )
    if not math.isinf(epsilon):
        releases.append(
            Release(
                {str(k): tuple(float(v) for v in s.five) for k, s in boxes.items()},
                eps_rest,
                0.0,
                "DPBoxplot per group (parallel composition)",
                {
                    "epsilon_per_box": eps_box,
                    "neighbouring": NEIGHBOURING[neighbouring],
                    "groups drawn": tuple(str(k) for k in boxes),
                    "bounds": (lower, upper),
                },
                f"{description}: one boxplot per group",
            )
        )
    return GroupedBoxplots(
        boxes=boxes,
        categories=tuple(labels),
        sizes=dict(zip(labels, sizes, strict=True)),
        sizes_public=public is not None or math.isinf(epsilon),
        too_small=tuple(too_small),
        min_group_size=min_group_size,
        epsilon=epsilon,
        neighbouring=neighbouring,
        releases=tuple(releases),
        notes=tuple(notes),
    )


def draw_boxes(
    todo: list[tuple[int, Any, float, float]],
    data: Mapping[int, BoxSummary],
    count_beyond: Callable[[dict[int, tuple[float, float]]], Any],
    opts: BoxOptions,
    bounds: tuple[float, float],
    description: str,
) -> dict[Any, BoxplotStats]:
    """The boxes of a grouped figure: their quantiles, one count beyond all whiskers, the noise.

    Each box ``(group index, label, epsilon, size)`` is a DPBoxplot under add/remove
    with its group's public or released size as ``n``. ``count_beyond`` maps
    ``{group index: (whisker_lo, whisker_hi)}`` to the exact counts below / above them
    (indexable by group index): in process from the rows, or one second pass over a
    partitioned table.
    """
    pending = pending_boxes(todo, data, opts, bounds, description)
    beyond = count_beyond({i: p.whiskers for i, (_, p) in pending.items()}) if pending else {}
    return finish_boxes(pending, beyond)


def pending_boxes(
    todo: list[tuple[int, Any, float, float]],
    data: Mapping[int, BoxSummary],
    opts: BoxOptions,
    bounds: tuple[float, float],
    description: str,
) -> dict[int, tuple[Any, PendingBox]]:
    """Steps 1-6 of every box of a grouped figure (add/remove, the group's size as ``n``)."""
    opts = replace(opts, neighbouring="add_remove")
    return {
        i: (cat, box_quantiles(data[i], eps_box, bounds, check_n(size), opts, f"{description} [{cat}]"))
        for i, cat, eps_box, size in todo
    }


def finish_boxes(pending: dict[int, tuple[Any, PendingBox]], beyond: Any) -> dict[Any, BoxplotStats]:
    """Step 7 of every pending box, with the exact counts ``beyond[group index] = (below, above)``."""
    return {cat: box_finish(p, int(beyond[i][0]), int(beyond[i][1])) for i, (cat, p) in pending.items()}
