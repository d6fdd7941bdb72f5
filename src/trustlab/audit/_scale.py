"""The raw audit of a partitioned Parquet dataset on a Dask cluster (``trustlab audit --dask``).

Two passes over the files, each a mergeable statistic run on the workers
(:func:`trustlab.compute.compute`):

1. every column's summary (the Data section), the sensitive columns' and the target's
   values, and a sample of training rows for the model (rows not held out whose keyed
   hash falls below a rate: a function of each row alone, so the sample is the same on
   any partitioning);
2. with the model fitted here on that sample: each partition's held-out rows scored on
   its worker and counted into the prediction table and the score tables (the
   Performance and Fairness sections).

Only the model (once per worker), the partial states (counts, sums, distinct scores)
and the sample cross the network; the rows stay where the files are read. The held-out
split is the in-process audit's (:func:`trustlab.audit.split.row_split` of each row's
values), so the held-out rows and every count are the same as an in-process run on the
same table; the model differs when the sample is smaller than the training rows.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab._validation import check_binary_target
from trustlab.audit._audit_inputs import check_values, column_name, column_names
from trustlab.audit._meta import run_meta
from trustlab.audit._public_screening import screen_declared_text, screening_meta
from trustlab.audit._scale_explain import BACKGROUND_ROWS, HeldoutExplain, explain_section, explain_statistic
from trustlab.audit._scale_stats import (
    BIN,
    COLUMNS_KEY,
    SCORES_KEY,
    TABLE_KEY,
    P,
    Y,
    as_category,
    column_statistic,
    heldout_statistic,
    score_bins,
    table_from_counts,
)
from trustlab.audit._scale_threads import native_threads
from trustlab.audit.prediction_table import OTHER
from trustlab.audit.report import AuditReport
from trustlab.audit.screening import screen_columns
from trustlab.audit.section import AuditContext
from trustlab.audit.split import (
    DEFAULT_SAMPLE_ROWS,
    row_hash,
    sample_rate,
    split_from_hash,
    training_sample,
)
from trustlab.audit.summary import mark_vacuous
from trustlab.compute.backend import compute
from trustlab.compute.statistics import MergeableStatistic, Several, ValueCounts
from trustlab.datasets.loaders import check_parquet_schemas, parquet_files
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError, ParameterError
from trustlab.models import categorical_columns

__all__ = ["DEFAULT_SAMPLE_ROWS", "SCALE_SECTIONS", "run_scaled"]

SCALE_SECTIONS = ("data", "performance", "fairness", "explain")


class _TrainingSample(MergeableStatistic[pd.DataFrame, pd.DataFrame]):
    """Rows on the training side whose keyed hash is below ``rate`` (state: those rows)."""

    def __init__(self, test_size: float, seed: int, rate: float) -> None:
        self.test_size, self.seed, self.rate = test_size, seed, rate

    @override
    def partial(self, chunk: pd.DataFrame) -> pd.DataFrame:
        h = row_hash(chunk, self.seed)  # one hash: the split and the sample (as in process)
        return chunk[~split_from_hash(h, self.test_size) & training_sample(h, self.rate)]

    @override
    def merge(self, a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
        return pd.concat([a, b], ignore_index=True)

    @override
    def finalize(self, state: pd.DataFrame) -> pd.DataFrame:
        return state.reset_index(drop=True)


class _ScoredHeldout(MergeableStatistic[dict[str, Any], dict[str, Any]]):
    """Score a partition's held-out rows with the model (on the worker), then count them.

    With ``explain`` (the Explain section's :class:`~trustlab.audit._scale_explain.HeldoutExplain`),
    the same held-out rows and their row hashes, computed once here, also feed FastPD's
    background and the query sample. The state is ``{"scored": ..., "explain": ... or None}``.
    """

    def __init__(
        self, inner: Several, model: Any, columns: dict[str, Any], explain: HeldoutExplain | None, **kw: Any
    ) -> None:
        self.inner, self.model, self.explain = inner, model, explain
        self.features, self.sensitive = columns["features"], columns["sensitive"]
        self.target, self.positive = columns["target"], columns["positive"]
        self.test_size, self.seed, self.column = kw["test_size"], kw["seed"], kw["column"]

    @override
    def partial(self, chunk: pd.DataFrame) -> dict[str, Any]:
        h = row_hash(chunk, self.seed)  # one hash a row: the split, the query sample, the background
        held = split_from_hash(h, self.test_size)
        rows = as_category(chunk[held])
        explained = None if self.explain is None else self.explain.partial_held(rows, h[held])
        if len(rows):
            with native_threads():
                p = np.asarray(self.model.predict_proba(rows[self.features]), dtype=float)[:, self.column]
            p = np.clip(np.where(np.isfinite(p), p, 0.5), 0.0, 1.0)
        else:
            p = np.zeros(0)
        y = (rows[self.target].astype(object) == self.positive).to_numpy().astype(np.int64)
        frame = rows[self.sensitive].assign(**{Y: y, P: p, BIN: score_bins(p)})
        return {"scored": self.inner.partial(frame), "explain": explained}

    @override
    def merge(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        explained = None if self.explain is None else self.explain.merge(a["explain"], b["explain"])
        return {"scored": self.inner.merge(a["scored"], b["scored"]), "explain": explained}

    @override
    def finalize(self, state: dict[str, Any]) -> dict[str, Any]:
        explained = None if self.explain is None else self.explain.finalize(state["explain"])
        return {"scored": self.inner.finalize(state["scored"]), "explain": explained}


def _levels(counts: dict[Any, int]) -> list[Any]:
    """A sensitive column's levels as the in-process audit finds them (sorted text; OTHER if missing)."""
    present = sorted((k for k in counts if k is not None), key=str)
    return [*present, OTHER] if counts.get(None) else present


def run_scaled(
    runner: Any,
    path: str | Path,
    *,
    target: str,
    sensitive: Sequence[str] | str,
    client: Any,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    dataset_name: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> AuditReport:
    """Run ``runner`` (an :class:`~trustlab.audit.Audit`) on a partitioned Parquet dataset with Dask.

    Raw mode: the Data, Performance and Fairness sections (the others need the rows in
    one place). Private mode (``runner.private``): the Data, Performance, Fairness and
    Privacy sections from merged exact statistics with the noise added once here
    (:mod:`trustlab.audit._scale_private`). See the module's notes for what is computed where.
    """
    import dask.dataframe as dd

    step = progress or (lambda _msg: None)
    runner._validate_params()
    if not runner._fits_model():
        raise ParameterError(
            "--dask fits the default model on a sample; pass a model name (hgb, logistic, ...).",
            argument="model",
        )
    if runner.private:
        from trustlab.audit._scale_private import run_scaled_private

        return run_scaled_private(
            runner,
            path,
            target=target,
            sensitive=sensitive,
            client=client,
            sample_rows=sample_rows,
            dataset_name=dataset_name,
            progress=progress,
        )
    target = column_name(target, "target")
    sens = column_names(sensitive, "sensitive")
    if not sens:
        raise DataError("name at least one sensitive column.", argument="sensitive")
    ignore = column_names(runner.ignore, "ignore")
    files = parquet_files(path)
    arrow, n_total = check_parquet_schemas(files, required=(target, *sens))
    for c in ignore:
        if c not in arrow.names:
            raise DataError(f"ignore names {c!r}, which is not a column of the files.", argument="ignore")
    columns = [c for c in arrow.names if c not in ignore]
    features = [c for c in columns if c != target and (runner.use_sensitive or c not in sens)]
    if not features:
        raise DataError(
            "no feature columns are left for the model; keep at least one other column.", argument="data"
        )
    frame = dd.read_parquet([str(f) for f in files], columns=columns)
    meta = as_category(frame._meta)
    cats = categorical_columns(meta)
    seed, test_size = int(runner.random_state), float(runner.test_size)
    rate = sample_rate(sample_rows, n_total, test_size)
    parts: dict[str, MergeableStatistic[Any, Any]] = {
        "columns": column_statistic(meta, cats),
        "target": ValueCounts(target),
        "sample": _TrainingSample(test_size, seed, rate),
    }
    parts.update({f"sens:{i}": ValueCounts(a) for i, a in enumerate(sens)})
    stats = Several(parts)
    t0 = time.perf_counter()
    first = compute(stats, frame, client=client, progress=lambda d, n: step(f"pass 1/2: {d}/{n} partitions"))
    t1 = time.perf_counter()
    labels = first["target"]
    if labels.get(None):
        raise DataError(
            f"target {target!r} has {labels[None]:,} missing value(s) in the files; drop those rows "
            "first (or rewrite the files without them).",
            argument="target",
        )
    fake = pd.Series([k if k is not None else np.nan for k in labels], dtype=object)
    _, negative, positive = check_binary_target(fake, f"target {target!r}", runner.positive)
    sample = as_category(first["sample"])
    check_values(sample, list(sample.columns))
    y_sample = (sample[target].astype(object) == positive).to_numpy().astype(np.int64)
    if len(np.unique(y_sample)) < 2:
        raise DataError(
            f"the training sample ({len(sample):,} rows) holds a single outcome; raise --sample-rows.",
            argument="data",
        )
    # the column screening runs on the sample (stated in the report: meta["screening"])
    keep = column_names(runner.keep, "keep")
    screening = screen_declared_text(  # the schema's text columns are no features
        lambda rest: screen_columns(
            sample,
            y_sample,
            target=target,
            sensitive=sens,
            features=rest,
            use_sensitive=runner.use_sensitive,
            keep=keep,
            seed=seed,
        ),
        features,
        runner.schema,
        keep=keep,
        use_sensitive=runner.use_sensitive,
    )
    features, flags = screening.features, [f.to_dict() for f in screening.flags]
    if not features:
        raise DataError(
            f"no feature columns are left once the screened columns {screening.dropped} are left out; "
            "run in process with --keep, or rewrite the files without them.",
            argument="data",
        )
    step(f"fitting model on {len(sample):,} sampled rows")
    with warnings.catch_warnings():
        model, model_name, status = runner._fit(sample[features], y_sample, runner.schema or Schema(), None)
    classes = list(getattr(model, "classes_", [0, 1]))
    column = classes.index(1) if 1 in classes else 1  # fitted on 0/1 labels (1 = positive)
    t2 = time.perf_counter()
    levels = [_levels(first[f"sens:{i}"]) for i in range(len(sens))]
    from trustlab.audit.registry import default_sections

    wants_explain = any(s.name == "explain" for s in (runner.sections or default_sections()))
    explain = None
    if wants_explain:
        rate = min(1.0, BACKGROUND_ROWS / max(1.0, n_total * test_size))
        explain = explain_statistic(model, features, test_size=test_size, seed=seed, background_rate=rate)
    scored = _ScoredHeldout(
        heldout_statistic(sens, levels),
        model,
        {"features": features, "sensitive": sens, "target": target, "positive": positive},
        explain,
        test_size=test_size,
        seed=seed,
        column=column,
    )
    both = compute(scored, frame, client=client, progress=lambda d, n: step(f"pass 2/2: {d}/{n} partitions"))
    second = both["scored"]
    t3 = time.perf_counter()
    ctx = AuditContext(
        data=sample,
        target=target,
        sensitive=sens,
        features=features,
        y=y_sample,
        positive_label=positive,
        negative_label=negative,
        train_index=np.arange(len(sample)),
        test_index=np.zeros(0, dtype=np.int64),
        model=model,
        model_name=model_name,
        proba_test=np.zeros(0),
        schema=runner.schema or Schema(),
        private=False,
        random_state=seed,
        model_status=f"{status.replace('the training rows', 'a hash sample of the training rows')} "
        f"({len(sample):,} of about {int(n_total * (1 - test_size)):,}); every held-out row scored on "
        "the workers",
        column_flags=flags,
        screening=screening_meta(private=False, rows=len(sample), sample=True),
    )
    ctx._shared[COLUMNS_KEY] = first["columns"]
    ctx._shared[TABLE_KEY] = table_from_counts(second["table"], sens, levels, seed)
    ctx._shared[SCORES_KEY] = {"overall": second["overall"]} | {
        a: second[f"scores:{i}"] for i, a in enumerate(sens)
    }
    from trustlab.audit.sections.fairness import FairnessSection

    wanted = [s for s in (runner.sections or default_sections()) if s.name in SCALE_SECTIONS]
    sections = [FairnessSection(calibration=False) if s.name == "fairness" else s for s in wanted]
    results = []
    for s in sections:
        step(f"section: {s.title}")
        if s.name == "explain":
            results.append(explain_section(s, ctx, both["explain"]))
        else:
            results.append(s.compute(ctx, None))
    workers = len(client.scheduler_info().get("workers", {})) if client is not None else 0
    report_meta = run_meta(
        dataset=dataset_name or Path(path).name,
        target=target,
        positive=positive,
        sensitive=sens,
        features=features,
        model=model_name,
        model_status=ctx.model_status,
        test_size=test_size,
        random_state=seed,
        private=False,
        epsilon=None,
    )
    report_meta |= {
        "scale": {
            "backend": "dask",
            "workers": workers,
            "files": len(files),
            "partitions": int(frame.npartitions),
            "rows": int(n_total),
            "sample_rows": len(sample),
            "seconds": {"pass1": t1 - t0, "fit": t2 - t1, "pass2": t3 - t2},
            "sections_left_out": [
                s.name for s in (runner.sections or default_sections()) if s.name not in SCALE_SECTIONS
            ],
            "note": "Data, Performance and Fairness computed as mergeable statistics on the workers; "
            "Explain from FastPD's per-leaf background counts of every held-out row (merged on the "
            "workers) and a hash sample of 500 held-out rows explained on the client; "
            "multicalibration and mitigation (they read individual held-out rows) and the other "
            "sections are left out of a distributed run.",
        },
    }
    results, skill = mark_vacuous(results)
    report_meta |= {"no_skill": skill, "column_flags": flags, "group": None, "screening": ctx.screening}
    return AuditReport(meta=report_meta, results=results, sections=sections, ledger=[])
