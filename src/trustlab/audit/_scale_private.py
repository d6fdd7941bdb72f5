"""The private audit on Dask (``trustlab audit DATA --private --dask ...``).

Workers compute EXACT statistics of their partitions (counts, integer grid-unit sums,
code histograms, the quantile grid counts of the DP boxplots) on rows conformed to the
public schema; the client merges them and adds the noise ONCE, with the same mechanism
functions as the in-process private audit
(:func:`~trustlab.compute.private.dp_histogram_of_counts` =
:func:`~trustlab.privacy.statistics.dp_histogram` on counts,
:func:`~trustlab.privacy.statistics.dp_sum_of_units` = :func:`~trustlab.privacy.dp_sum` on
grid units, :func:`~trustlab.compute.quantiles.grouped_dp_boxplot_on` = the section's
grouped boxplot), in the same accountants and the same order: the ledger is identical
to the in-process audit's with the same sections. Workers never draw noise.

What the run reads from the private rows decides nothing: every branch, error, column
type, level, bin count and the training sample's rate come from the schema and the
arguments (public). The DP model (DP-SGD) is trained on the client, on a hash sample of
the training rows at a rate fixed by the schema's public ``rows`` (every training row
when the schema has none); a row is kept by a function of that row alone, so a
neighbouring table changes at most one sampled row and DP-SGD's guarantee holds for the
whole table.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab.audit._audit_inputs import column_name, column_names, model_frame
from trustlab.audit._public_screening import screen_declared_text, screen_names, screening_meta
from trustlab.audit._scale_threads import native_threads
from trustlab.audit.prediction_table import (
    N_BOOT,
    N_SCORE_BINS,
    OTHER,
    PredictionTable,
    consistent_counts,
)
from trustlab.audit.section import AuditContext, Section, SectionResult
from trustlab.audit.sections._columns import category_codes
from trustlab.audit.sections.data import DataSection, private_statistics
from trustlab.audit.sections.privacy import PrivacySection, group_statistics
from trustlab.audit.split import row_hash, sample_rate, split_from_hash, training_sample
from trustlab.audit.summary import mark_vacuous
from trustlab.compute.backend import compute
from trustlab.compute.private import dp_histogram_of_counts
from trustlab.compute.statistics import MergeableStatistic
from trustlab.datasets._cells import bound_cells
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError
from trustlab.fairness import bootstrap_counts
from trustlab.privacy.accounting import Accountant

__all__ = ["PRIVATE_SCALE_SECTIONS", "run_scaled_private"]

PRIVATE_SCALE_SECTIONS = ("data", "performance", "fairness", "privacy")
_TABLE_KEY = "prediction_table"  # the key shared_prediction_table uses in private mode


class _Plan:
    """The public facts the workers need: the schema, the columns, the split and the sample rate."""

    def __init__(self, schema: Schema, columns: list[Any], cols: dict[str, Any], **kw: Any) -> None:
        self.schema, self.columns = schema, columns
        self.target, self.sensitive, self.features = cols["target"], cols["sensitive"], cols["features"]
        self.positive = cols["positive"]
        self.test_size, self.seed, self.rate = kw["test_size"], kw["seed"], kw["rate"]
        self.declared = [c for c in columns if c in schema]

    def prepare(self, chunk: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame, np.ndarray]:
        """Held-out mask (the in-process hash of the raw values), the conformed rows, labelled mask."""
        chunk = bound_cells(chunk)  # the work on one cell is bounded (MAX_CELL_CHARS)
        h = row_hash(chunk, self.seed)
        conformed = self.schema.conform(chunk.reset_index(drop=True))
        labelled = conformed[self.target].notna().to_numpy()
        return h, conformed, labelled


class _FirstPass(MergeableStatistic[dict[str, Any], dict[str, Any]]):
    """Exact sufficient statistics of the private Data section, and the training sample.

    ``rows``; per declared column with bounds: ``missing`` and the integer ``units`` of
    :func:`~trustlab.privacy.statistics.grid_units`; per declared categorical column: the
    code histogram over its categories + missing/other (the Privacy section's group
    sizes are the same histograms). ``sample``: the conformed training rows (labelled,
    not held out) whose hash falls below the public rate, with their 0/1 outcome.
    """

    def __init__(self, plan: _Plan) -> None:
        self.plan = plan

    @override
    def partial(self, chunk: pd.DataFrame) -> dict[str, Any]:
        p = self.plan
        h, conf, labelled = p.prepare(chunk)
        state = private_statistics(conf, p.schema, p.declared) | group_statistics(conf, p.schema, p.sensitive)
        keep = labelled & ~split_from_hash(h, p.test_size) & training_sample(h, p.rate)
        rows = conf.loc[keep, p.features].reset_index(drop=True)
        y = (conf.loc[keep, p.target].astype(object) == p.positive).to_numpy().astype(np.int64)
        state["sample"] = (rows, y)
        return state

    @override
    def merge(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in a.items():
            if k == "sample":
                out[k] = (pd.concat([v[0], b[k][0]], ignore_index=True), np.concatenate([v[1], b[k][1]]))
            else:
                out[k] = v + b[k]  # Python ints (exact) and int64 histograms
        return out

    @override
    def finalize(self, state: dict[str, Any]) -> dict[str, Any]:
        return state


class _HeldoutCounts(MergeableStatistic[np.ndarray, np.ndarray]):
    """Held-out labelled rows counted by (sensitive cell, score bin, label): the private table's codes."""

    def __init__(self, plan: _Plan, model: Any, column: int) -> None:
        self.plan, self.model, self.column = plan, model, column
        self.levels = [[*(plan.schema.categories(a) or ()), OTHER] for a in plan.sensitive]
        self.n_codes = int(np.prod([len(lv) for lv in self.levels])) * N_SCORE_BINS * 2

    @override
    def partial(self, chunk: pd.DataFrame) -> np.ndarray:
        p = self.plan
        h, conf, labelled = p.prepare(chunk)
        rows = conf[split_from_hash(h, p.test_size) & labelled].reset_index(drop=True)
        proba = np.full(len(rows), 0.5)
        if len(rows):
            try:  # as in process: a model that cannot predict scores 0.5 (never raises on the rows)
                with native_threads():
                    out = np.asarray(self.model.predict_proba(model_frame(rows[p.features], p.schema)), float)
                proba = np.clip(np.where(np.isfinite(out[:, self.column]), out[:, self.column], 0.5), 0, 1)
            except Exception:
                proba = np.full(len(rows), 0.5)
        cell = np.zeros(len(rows), dtype=np.int64)
        for a, lv in zip(p.sensitive, self.levels, strict=True):
            cell = cell * len(lv) + category_codes(rows[a], lv[:-1])
        score_bin = np.clip((proba * N_SCORE_BINS).astype(np.int64), 0, N_SCORE_BINS - 1)
        y = (rows[p.target].astype(object) == p.positive).to_numpy().astype(np.int64)
        codes = (cell * N_SCORE_BINS + score_bin) * 2 + y
        return np.bincount(codes, minlength=self.n_codes).astype(np.int64)

    @override
    def merge(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    @override
    def finalize(self, state: np.ndarray) -> np.ndarray:
        return state


def private_prediction_table(
    counts: np.ndarray, sensitive: list[Any], levels: list[list[Any]], budget: Accountant, seed: int
) -> PredictionTable:
    """The private prediction table from merged exact counts (as ``build_prediction_table`` releases it)."""
    n_cells = int(np.prod([len(lv) for lv in levels])) if levels else 1
    n_codes = n_cells * N_SCORE_BINS * 2
    release = budget.record(
        dp_histogram_of_counts(
            counts,
            budget.remaining_epsilon,
            description=(
                f"held-out rows counted by sensitive group x score bin ({N_SCORE_BINS}) x label "
                f"({n_codes} cells)"
            ),
        )
    )
    released = np.asarray(release.value).reshape(n_cells, N_SCORE_BINS, 2)
    scale = float(release.parameters["scale"])
    table_counts = consistent_counts(released)
    reps = consistent_counts(
        bootstrap_counts(table_counts, n_boot=N_BOOT, noise_scale=scale, random_state=seed)
    )
    return PredictionTable(
        attributes=tuple(sensitive),
        levels=tuple(tuple(lv) for lv in levels),
        counts=table_counts,
        released=released,
        noise_scale=scale,
        replicates=reps,
    )


class _MergedData(DataSection):
    """The private Data section on merged exact statistics (the releases of ``DataSection._private``)."""

    def __init__(self, stats: dict[str, Any], columns: list[Any]) -> None:
        self.stats, self.columns = stats, columns

    @override
    def _private(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        assert budget is not None
        note = (
            "Computed on Dask: exact counts and grid-unit sums merged from the partitions, noise "
            "added once on the client by the same mechanisms as in process."
        )
        return self._release(ctx, budget, self.stats, self.columns, (note,))


class _MergedPrivacy(PrivacySection):
    """The private Privacy section on merged statistics (the releases of ``PrivacySection._release``).

    Group sizes: the merged code histograms of the first pass
    (:func:`~trustlab.audit.sections.privacy.group_statistics` summed over partitions);
    boxplots: :func:`~trustlab.compute.quantiles.grouped_dp_boxplot_on` (grid counts merged
    on the workers, quantiles and outlier counts released once here).
    """

    def __init__(self, stats: dict[str, Any], frame: Any, client: Any) -> None:
        self.stats, self.frame, self.client = stats, frame, client

    @override
    def _private(self, ctx: AuditContext, budget: Accountant | None) -> SectionResult:
        from trustlab.compute.quantiles import grouped_dp_boxplot_on

        assert budget is not None

        def boxplot(col: Any, attr: Any, epsilon: float, bounds: tuple[float, float], **kw: Any) -> Any:
            categories = kw.pop("categories")
            return grouped_dp_boxplot_on(
                self.frame, col, attr, categories, epsilon, bounds, client=self.client, **kw
            )

        note = (
            "Computed on Dask: group sizes and the boxplots' grid counts merged from the partitions "
            "(two passes per figure), noise added once on the client by the same mechanisms as in process."
        )
        return self._release(ctx, budget, self.stats, boxplot, (note,))


def _expected_sample(schema: Schema, test_size: float, rate: float) -> str:
    """The training sample's size as a public figure (never the exact private count)."""
    if schema.rows is None:
        return 'every training row (the schema declares no public row estimate "rows")'
    expected = round(schema.rows * (1.0 - test_size) * rate)
    return (
        f"about {expected:,} training rows (rate {rate:.4g} from the schema's public estimate of "
        f"{schema.rows:,} rows)"
    )


def run_scaled_private(
    runner: Any,
    path: str | Path,
    *,
    target: str,
    sensitive: Any,
    client: Any,
    sample_rows: int | None,
    dataset_name: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Any:
    """The private audit of a partitioned Parquet dataset on Dask (see the module's notes).

    Public facts only decide anything: the arguments, the schema and the files' column
    names (their footers' row counts are never read). The Data, Performance, Fairness and
    Privacy sections run; their releases and the ledger are those of
    ``Audit(private=True, ...).run`` with the same sections on the same table.
    """
    import dask.dataframe as dd

    from trustlab.audit._fit import TRAINING_SHARE
    from trustlab.audit._meta import private_meta, run_meta
    from trustlab.audit._private_model import DP_MODEL, fit_private_model
    from trustlab.audit._run import compute_sections, section_budgets
    from trustlab.audit.registry import default_sections
    from trustlab.audit.report import AuditReport
    from trustlab.datasets.loaders import check_parquet_schemas, parquet_files

    step = progress or (lambda _msg: None)
    files = parquet_files(path)
    target, sensitive = column_name(target, "target"), column_names(sensitive, "sensitive")
    # row counts never read; column types are the schema's (each partition is conformed)
    arrow, _ = check_parquet_schemas(files, required=(target, *sensitive), private=True)
    # the in-process checks of public facts, on an empty table with the files' columns
    prep = runner._prepare(arrow.empty_table().to_pandas(), target, sensitive)
    schema, sens = prep.schema, prep.sensitive
    keep = column_names(runner.keep, "keep")
    names = screen_declared_text(  # public facts only: the schema and the column names (as in process)
        lambda rest: screen_names(
            rest, target=target, sensitive=sens, use_sensitive=runner.use_sensitive, keep=keep
        ),
        prep.features,
        schema,
        keep=keep,
        use_sensitive=runner.use_sensitive,
    )
    features, flags = names.features, [f.to_dict() for f in names.flags]
    if not features:
        raise DataError(
            f"no feature columns are left once {names.dropped} (named as copies of the target or of a "
            "sensitive column) are left out; keep one with Audit(keep=[...]).",
            argument="keep",
        )
    columns = list(prep.raw.columns)
    seed, test_size = int(runner.random_state), float(runner.test_size)
    rate = 1.0 if schema.rows is None else sample_rate(sample_rows, schema.rows, test_size)
    plan = _Plan(
        schema,
        columns,
        {"target": target, "sensitive": sens, "features": features, "positive": prep.positive},
        test_size=test_size,
        seed=seed,
        rate=rate,
    )
    frame = dd.read_parquet([str(f) for f in files], columns=columns)
    t0 = time.perf_counter()
    first = compute(
        _FirstPass(plan), frame, client=client, progress=lambda d, n: step(f"pass 1/2: {d}/{n} partitions")
    )
    t1 = time.perf_counter()
    assert runner.epsilon is not None  # _validate_params
    accountant = Accountant(runner.epsilon, runner.delta, name="audit")
    training_budget = accountant.child(TRAINING_SHARE * runner.epsilon, "model training", delta=runner.delta)
    sample, y_sample = first.pop("sample")
    step("training the DP model on the hash sample")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # whether it warns is a fact about the rows
        model, status = fit_private_model(
            model_frame(sample, schema),
            y_sample,
            schema,
            accountant=training_budget,
            delta=runner.delta,
            train_fraction=(1.0 - test_size) * rate,  # DP-SGD's step divisor: the expected sample size
        )
    status = status.replace("on the training rows", "on a hash sample of the training rows", 1)
    if str(runner.model) != "logistic":
        status += f"; '{runner.model}' has no DP trainer in trustlab, so a logistic regression was trained"
    status += (
        f"; sample: {_expected_sample(schema, test_size, rate)}; every held-out row scored on the workers"
    )
    classes = list(getattr(model, "classes_", [0, 1]))
    column = classes.index(1) if 1 in classes else 1
    t2 = time.perf_counter()
    held = _HeldoutCounts(plan, model, column)
    counts = compute(held, frame, client=client, progress=lambda d, n: step(f"pass 2/2: {d}/{n} partitions"))
    t3 = time.perf_counter()
    ctx = AuditContext(
        data=prep.data,  # no rows: the sections read merged statistics and the schema
        target=target,
        sensitive=sens,
        features=features,
        y=np.zeros(0, dtype=np.int64),
        positive_label=prep.positive,
        negative_label=prep.negative,
        train_index=np.zeros(0, dtype=np.int64),
        test_index=np.zeros(0, dtype=np.int64),
        model=model,
        model_name=DP_MODEL,
        proba_test=np.zeros(0),
        schema=schema,
        private=True,
        random_state=seed,
        model_status=status,
        column_flags=flags,
        screening=screening_meta(private=True),
    )
    conformed = frame.map_partitions(schema.conform, meta=schema.conform(frame._meta))
    wanted = [s for s in (runner.sections or default_sections()) if s.name in PRIVATE_SCALE_SECTIONS]
    sections: list[Section] = [
        _MergedData(first, columns)
        if s.name == "data"
        else _MergedPrivacy(first, conformed, client)
        if s.name == "privacy"
        else s
        for s in wanted
    ]
    sections = [s for s in sections if s.applies(ctx)]
    budgets = section_budgets(sections, accountant)
    if "predictions" in budgets:  # the shared table, released once into the sections' shared budget
        ctx._shared[_TABLE_KEY] = private_prediction_table(
            counts, sens, held.levels, budgets["predictions"], seed
        )
    results, skill = mark_vacuous(compute_sections(sections, ctx, budgets, step))
    workers = len(client.scheduler_info().get("workers", {})) if client is not None else 0
    meta = run_meta(
        dataset=dataset_name or Path(path).name,
        target=target,
        positive=prep.positive,
        sensitive=sens,
        features=features,
        model=DP_MODEL,
        model_status=status,
        test_size=test_size,
        random_state=seed,
        private=True,
        epsilon=runner.epsilon,
    )
    meta |= private_meta(schema, trained_privately=True, delta=runner.delta)
    meta |= {"no_skill": skill, "column_flags": flags, "group": None, "screening": ctx.screening}
    meta |= {
        "scale": {
            "backend": "dask",
            "workers": workers,
            "files": len(files),
            # no partition count: Parquet row groups follow the private row count
            "rows": schema.rows,  # public (the schema's estimate) or None; the true count is private
            "sample_rows": _expected_sample(schema, test_size, rate),
            "sample_rate": rate,
            "sections_left_out": [
                s.name
                for s in (runner.sections or default_sections())
                if s.name not in PRIVATE_SCALE_SECTIONS
            ],
            "note": "Private: workers compute exact counts and sums of their partitions; the client "
            "merges them and adds the noise once (the in-process mechanisms and ledger). Rows, sums "
            "and counts never leave the cluster unnoised except to this client; the report holds only "
            "released figures.",
        },
    }
    # wall-clock times depend on the rows: for the terminal only, never in the report
    timings = {"pass1": t1 - t0, "fit": t2 - t1, "pass2": t3 - t2}
    return AuditReport(
        meta=meta, results=results, sections=sections, ledger=accountant.ledger(), timings=timings
    )
