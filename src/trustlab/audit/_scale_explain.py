"""The Explain section of a distributed audit (``trustlab audit --dask``).

FastPD's background is every held-out row: its per-leaf counts
(:class:`trustlab.compute.trees.FastPDBackground`) are computed on the workers in the
pass that scores the held-out rows (pass 2 of :mod:`trustlab.audit._scale`), merged, and
read on the client by :meth:`FastPD.fit_background_state
<trustlab.explain.FastPD.fit_background_state>`. The explained (query) rows are a hash
sample of at most 500 held-out rows (the section's own limit), collected in the same
pass: the rows whose keyed hash is smallest, a function of each row alone, so the sample
is the same on any partitioning. Only the counts (well under 1 MB for the default model),
the sample and the model cross the network.

:func:`explain_statistic` builds the pass's statistic and :func:`explain_section` runs
the section on its merged result; the section reads the background from the context
(:data:`trustlab.audit.sections.explain.BACKGROUND_KEY`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab._stats import splitmix64
from trustlab.audit._scale_stats import as_category
from trustlab.audit.section import AuditContext, Section, SectionResult
from trustlab.audit.sections.explain import _MAX_ROWS, BACKGROUND_KEY, _split_pipeline
from trustlab.audit.split import row_hash, split_from_hash, training_sample
from trustlab.compute.statistics import MergeableStatistic
from trustlab.compute.trees import FastPDBackground
from trustlab.errors import ModelError

__all__ = ["BACKGROUND_ROWS", "HeldoutExplain", "explain_section", "explain_statistic"]

BACKGROUND_ROWS = 1_000_000
"""Held-out rows a distributed audit counts into FastPD's background (about; a hash sample)."""
_QUERY_KEY = np.uint64(0xE4A1)  # the query sample's draw: splitmix64(row hash ^ this)


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """``category`` columns as object (partitions' categories differ; the rows merge as values)."""
    cats = [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)]
    return frame.astype(dict.fromkeys(cats, object)).reset_index(drop=True)


def _smallest(keys: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(keys, kind="stable")[:k]


class HeldoutExplain(MergeableStatistic[dict[str, Any], dict[str, Any]]):
    """One partition's held-out rows: FastPD background counts and the query hash sample.

    Parameters
    ----------
    model : fitted classifier
        The audit's model (a Pipeline whose last step FastPD explains, or a tree model).
    features : sequence of str
        The model's input columns.
    test_size : float
        Share of rows held out (the audit's split).
    seed : int
        The split's key.
    n_queries : int, default=500
        Held-out rows kept to be explained on the client.
    background_rate : float, default=1.0
        Share of the held-out rows counted into FastPD's background: a hash sample
        (:func:`~trustlab.audit.split.training_sample` of each held-out row's hash, a
        function of the row alone), so the background does not depend on the
        partitioning. The distributed audit bounds it to about
        :data:`BACKGROUND_ROWS` rows: counting costs about 25 microseconds a row.

    Notes
    -----
    The result is ``{"background": FastPDBackgroundState or None, "queries": DataFrame}``;
    the background is None when the model is not a tree ensemble FastPD reads (a linear
    model is explained from the query rows alone, as in process).
    """

    def __init__(
        self,
        model: Any,
        features: Sequence[str],
        *,
        test_size: float,
        seed: int,
        n_queries: int = _MAX_ROWS,
        background_rate: float = 1.0,
    ) -> None:
        pre, est = _split_pipeline(model)
        self.features = list(features)
        self.background_rate = float(background_rate)
        self.test_size, self.seed, self.n_queries = float(test_size), int(seed), int(n_queries)
        try:
            self.background: FastPDBackground | None = FastPDBackground(
                est, columns=self.features, preprocessor=pre
            )
        except ModelError:  # not a tree model (e.g. a logistic regression)
            self.background = None

    @override
    def partial(self, chunk: pd.DataFrame) -> dict[str, Any]:
        h = row_hash(chunk, self.seed)
        held = split_from_hash(h, self.test_size)
        return self.partial_held(as_category(chunk[held]), h[held])

    def partial_held(self, rows: pd.DataFrame, h: np.ndarray) -> dict[str, Any]:
        """:meth:`partial` on a partition's held-out rows (text as ``category``) and their row hashes.

        The distributed audit's second pass hashes each row once and hands the held-out
        rows both to the scoring statistic and to this one.

        Parameters
        ----------
        rows : pandas.DataFrame
            The partition's held-out rows, text columns as ``category``.
        h : numpy.ndarray
            Their keyed row hashes (:func:`~trustlab.audit.split.row_hash` with ``seed``).

        Returns
        -------
        dict
            The partial state.
        """
        keys = splitmix64(h ^ _QUERY_KEY)
        keep = _smallest(keys, self.n_queries)
        queries = _plain(rows.iloc[keep])
        counted = rows[training_sample(h, self.background_rate)] if self.background_rate < 1 else rows
        bg = None if self.background is None else self.background.partial(counted)
        return {"background": bg, "queries": queries, "keys": keys[keep]}

    @override
    def merge(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        keys = np.concatenate([a["keys"], b["keys"]])
        keep = _smallest(keys, self.n_queries)
        queries = pd.concat([a["queries"], b["queries"]], ignore_index=True).iloc[keep]
        bg = None
        if self.background is not None:
            bg = self.background.merge(a["background"], b["background"])
        return {"background": bg, "queries": queries.reset_index(drop=True), "keys": keys[keep]}

    @override
    def finalize(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"background": state["background"], "queries": state["queries"]}


def explain_statistic(
    model: Any,
    features: Sequence[str],
    *,
    test_size: float,
    seed: int,
    n_queries: int = _MAX_ROWS,
    background_rate: float = 1.0,
) -> HeldoutExplain:
    """The statistic to add to the distributed audit's second pass (see the module's notes).

    Parameters
    ----------
    model : fitted classifier
        The audit's model.
    features : sequence of str
        The model's input columns.
    test_size : float
        Share of rows held out.
    seed : int
        The split's key.
    n_queries : int, default=500
        Held-out rows to explain on the client.
    background_rate : float, default=1.0
        Share of the held-out rows counted into the background (a hash sample).

    Returns
    -------
    HeldoutExplain
    """
    return HeldoutExplain(
        model, features, test_size=test_size, seed=seed, n_queries=n_queries, background_rate=background_rate
    )


def explain_section(section: Section, ctx: AuditContext, merged: dict[str, Any]) -> SectionResult:
    """Run the Explain ``section`` on the merged result of :func:`explain_statistic`.

    The section sees a context whose held-out rows are the query sample (scored here)
    and whose cache holds the merged background; the training rows stay the model's
    sample (the recourse check of a linear model reads them).

    Parameters
    ----------
    section : Section
        The Explain section (:class:`~trustlab.audit.sections.explain.ExplainSection`).
    ctx : AuditContext
        The distributed audit's context (its data: the training sample).
    merged : dict
        ``compute(explain_statistic(...), frame)``.

    Returns
    -------
    SectionResult
    """
    queries: pd.DataFrame = merged["queries"]
    cols = list(ctx.data.columns)
    data = as_category(pd.concat([_plain(ctx.data), queries[cols]], ignore_index=True))
    y_q = (queries[ctx.target].astype(object) == ctx.positive_label).to_numpy().astype(np.int64)
    test_index = np.arange(len(ctx.data), len(data))
    if len(queries):
        classes = list(getattr(ctx.model, "classes_", [0, 1]))
        column = classes.index(1) if 1 in classes else 1
        proba = np.asarray(ctx.model.predict_proba(data.iloc[test_index][ctx.features]), dtype=float)[
            :, column
        ]
    else:
        proba = np.zeros(0)
    shared = dict(ctx._shared)
    if merged["background"] is not None and merged["background"].n_rows:
        shared[BACKGROUND_KEY] = merged["background"]
    qctx = dataclasses.replace(
        ctx,
        data=data,
        y=np.concatenate([np.asarray(ctx.y, dtype=np.int64), y_q]),
        test_index=test_index,
        proba_test=proba,
        _shared=shared,
    )
    return section.compute(qctx, None)
