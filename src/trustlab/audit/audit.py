"""The Audit: turns a table and a model into an :class:`~trustlab.audit.report.AuditReport`."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import EPSILON, HasMethods, Interval, check_params
from trustlab.audit._audit_inputs import check_sections, column_name, column_names, model_frame
from trustlab.audit._entity_inputs import check_group, check_held_out, check_keep, probe_model
from trustlab.audit._fit import TRAINING_SHARE, fit_model, fits_model, positive_proba
from trustlab.audit._meta import PRIVACY_SCOPE, private_meta, run_meta
from trustlab.audit._prepare import MIN_ROWS, Prepared, prepare
from trustlab.audit._public_screening import screen_declared_text, screen_names, screening_meta
from trustlab.audit._run import compute_sections, left_out_in_private, section_budgets
from trustlab.audit.registry import default_sections
from trustlab.audit.report import AuditReport
from trustlab.audit.screening import Screening, screen_columns
from trustlab.audit.section import AuditContext, Section
from trustlab.audit.split import (
    DEFAULT_SAMPLE_ROWS,
    group_split,
    sample_rate,
    split_rows,
    training_sample,
)
from trustlab.audit.summary import mark_vacuous
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.accounting import Accountant

__all__ = ["MIN_ROWS", "PRIVACY_SCOPE", "TRAINING_SHARE", "Audit"]

_PARAMETERS: dict[str, Any] = {
    "model": [str, Path, HasMethods(["predict_proba"])],
    "test_size": [Interval(numbers.Real, 0, 1, closed="neither")],
    "private": ["boolean"],
    "epsilon": [None, EPSILON],
    "schema": [None, Schema],
    "use_sensitive": ["boolean"],
    "positive": [None, str, bool, numbers.Real],
    "random_state": [Interval(numbers.Integral, 0, 2**32 - 1, closed="both")],
    "delta": [Interval(numbers.Real, 0, 1e-3, closed="neither")],
    "sample_rows": [None, Interval(numbers.Integral, 100, None, closed="left")],
}


class Audit:
    """A configurable audit of a binary classifier and its data.

    Parameters
    ----------
    model : str or estimator, default "hgb"
        One of ``"hgb"``, ``"xgboost"``, ``"lightgbm"``, ``"logistic"`` (a default
        pipeline fitted on the training split), a path to a pickled fitted
        classifier, or a fitted classifier with ``predict_proba``.
    sections : sequence of Section, optional
        The sections to run, in order; the registered defaults when None.
    test_size : float, default 0.3
        Share of rows held out for evaluation. Each row is held out when a keyed hash
        of its own values (key: ``random_state``) falls below ``test_size``
        (:func:`trustlab.audit.split.row_split`), in both modes: adding or removing a
        row moves no other row, which the private histogram of held-out rows needs.
    private : bool, default False
        Release every data-derived figure with differential privacy.
    epsilon : float, optional
        Total privacy budget; required when ``private``.
    schema : Schema, optional
        Public bounds and categories; required in private mode for the target and
        sensitive columns (the embedded data ships one).
    use_sensitive : bool, default False
        Whether the model may use the sensitive columns as features.
    positive : optional
        The positive label of the target (inferred when None).
    ignore : str or sequence of str
        Columns to leave out of the model and the report (a string is one column name).
    random_state : int, default 0
        Seed of the split, the model and the bootstrap's simulation: public choices
        only, never DP noise. An int in ``[0, 2**32 - 1]``.
    delta : float, default 1e-6
        Private mode with a model trustlab fits (a name such as ``"hgb"``): the delta of
        the DP-SGD training run, which takes :data:`TRAINING_SHARE` of ``epsilon``
        (every other release is pure DP). In ``(0, 1e-3)``; pick it well below one over
        the number of rows.
    sample_rows : int or None, default 200,000
        A model trustlab fits (a name such as ``"hgb"``) outside private mode is fitted
        on about this many training rows, a hash sample (each training row is kept when
        an independent keyed hash of its values falls below ``sample_rows`` / the
        training side's expected size: :func:`~trustlab.audit.split.training_sample`),
        so that a table of millions of rows audits in minutes; every held-out row is
        still scored. The same rows are sampled as in a distributed run
        (``trustlab audit --dask``). None fits on every training row. Private mode
        always trains on every training row (a rate computed from the row count would
        depend on the private data). At least 100.
    group : str, optional
        A column that identifies an entity observed on several rows (a person in a
        panel). The held-out side is then a keyed hash of this column's value alone
        (:func:`~trustlab.audit.split.group_split`), so held-out rows never share an
        entity with training rows; the column is never a feature. Without it, a raw
        audit that finds a panel structure says so at the top of the report.
    keep : str or sequence of str
        Columns to keep as features although the screening flagged them (a copy of the
        target or of a sensitive column, a feature that predicts the target alone, an
        identifier: :mod:`trustlab.audit.screening`); they stay flagged in the report.

    Raises
    ------
    ParameterError
        When a parameter has the wrong type or range (``private`` and ``use_sensitive``
        must be real booleans: the string ``"no"`` is refused, not read as true), checked
        here and again at each run; the error's ``argument`` names the parameter.

    Examples
    --------
    >>> from trustlab.datasets import load_default
    >>> df, info, schema = load_default()
    >>> report = Audit(model="logistic").run(df, target="ui", sensitive=["sex"])
    >>> [r.name for r in report.results]  # doctest: +ELLIPSIS
    ['data', 'performance', 'fairness'...]
    """

    def __init__(
        self,
        *,
        model: Any = "hgb",
        sections: Sequence[Section] | None = None,
        test_size: float = 0.3,
        private: bool = False,
        epsilon: float | None = None,
        schema: Schema | None = None,
        use_sensitive: bool = False,
        positive: Any = None,
        ignore: Sequence[str] = (),
        random_state: int = 0,
        delta: float = 1e-6,
        sample_rows: int | None = DEFAULT_SAMPLE_ROWS,
        group: str | None = None,
        keep: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.sections = sections
        self.test_size = test_size
        self.private = private
        self.epsilon = epsilon
        self.schema = schema
        self.use_sensitive = use_sensitive
        self.positive = positive
        self.ignore = ignore
        self.random_state = random_state
        self.delta = delta
        self.sample_rows = sample_rows
        self.group = group
        self.keep = keep
        self._validate_params()

    # -- validation -------------------------------------------------------------------------
    def _validate_params(self) -> None:
        """Check every parameter's type and range (again at each run: attributes may be reassigned).

        Raises
        ------
        ParameterError
            Naming the parameter (``argument``) and what it may be.
        """
        params = {name: getattr(self, name) for name in _PARAMETERS}
        check_params(params, _PARAMETERS, "Audit")
        check_sections(self.sections)
        column_names(self.ignore, "ignore")
        column_names(self.keep, "keep")
        if self.group is not None:
            column_name(self.group, "group")
        if not self.private and self.epsilon is not None:
            raise ParameterError("--epsilon is only used with --private; add --private.", argument="epsilon")
        if self.private and self.epsilon is None:
            raise ParameterError("private mode needs a total --epsilon (e.g. 1.0).", argument="epsilon")

    def _prepare(self, data: Any, target: Any, sensitive: Any) -> Prepared:
        """Check the arguments and the table; conform it to the schema in private mode.

        In private mode only public facts raise (the arguments, the column names, the
        schema); facts about the rows (how many, which values, missing or not) never do
        (:func:`trustlab.audit._prepare.prepare`).
        """
        self._validate_params()
        return prepare(
            data,
            target,
            sensitive,
            private=self.private,
            epsilon=self.epsilon,
            schema=self.schema,
            use_sensitive=self.use_sensitive,
            positive=self.positive,
            ignore=self.ignore,
        )

    def _fits_model(self) -> bool:
        """Whether trustlab fits the model itself (a model name, not a path or an estimator)."""
        return fits_model(self.model)

    def trains_privately(self) -> bool:
        """Whether a run trains the model with DP-SGD (private mode and a model name, not a model).

        Returns
        -------
        bool
        """
        return bool(self.private) and self._fits_model()

    def _fit(
        self, X_train: pd.DataFrame, y_train: np.ndarray, schema: Schema, training_budget: Accountant | None
    ) -> tuple[Any, str, str]:
        """The model, its name and a status line (:func:`trustlab.audit._fit.fit_model`)."""
        if self.trains_privately() and training_budget is None:
            assert self.epsilon is not None
            training_budget = Accountant(TRAINING_SHARE * self.epsilon, self.delta, name="model training")
        return fit_model(
            self.model,
            X_train,
            y_train,
            schema,
            private=self.private,
            training_budget=training_budget,
            delta=self.delta,
            test_size=self.test_size,
            random_state=self.random_state,
        )

    def _proba(self, model: Any, X: pd.DataFrame, positive: Any) -> tuple[np.ndarray, str | None]:
        """Predicted probabilities of the positive label (:func:`trustlab.audit._fit.positive_proba`)."""
        return positive_proba(model, X, positive, private=self.private, own=self._fits_model())

    def context(
        self,
        data: pd.DataFrame,
        *,
        target: str,
        sensitive: Sequence[str] | str,
        progress: Callable[[str], None] | None = None,
        training_budget: Accountant | None = None,
    ) -> AuditContext:
        """Validate, split, fit (or load) the model and predict the held-out rows once.

        The sections read the returned :class:`AuditContext`; :meth:`run` calls this first.
        In private mode, rows whose target is missing or outside the schema's two
        declared categories are neither trained on nor held out.

        Parameters
        ----------
        data : pandas.DataFrame
            The table, one row per record, unique column names.
        target : str
            The binary outcome column.
        sensitive : str or sequence of str
            The sensitive column(s) (a string is one column name); each at most once.
        progress : callable, optional
            Called with a short description before fitting (or loading) the model and
            before predicting.
        training_budget : Accountant, optional
            Private mode, when trustlab trains the model: the budget the DP-SGD run spends
            in full (:meth:`run` passes its ``"model training"`` share; when None a budget
            of ``TRAINING_SHARE * epsilon`` and ``delta`` of its own is used).

        Returns
        -------
        AuditContext
            The prepared table, the split's row positions, the fitted model and its
            held-out probabilities of the positive label.

        Raises
        ------
        ParameterError, DataError, ModelError
            Bad arguments, unknown columns, an unusable model or (raw mode only) an
            unusable table or split. In private mode nothing about the rows raises: a
            model that cannot be fitted or cannot predict is replaced by a constant 0.5
            one, noted in ``model_status``.
        """
        step = progress or (lambda _msg: None)
        prep = self._prepare(data, target, sensitive)
        flags = self._screen(prep, target)
        held_out, h = split_rows(prep.raw, self.test_size, self.random_state)
        if self.group is not None:
            held_out = group_split(prep.raw, self.group, self.test_size, self.random_state)
        train_idx = np.flatnonzero(prep.labelled & ~held_out)
        test_idx = np.flatnonzero(prep.labelled & held_out)
        sampled = ""
        if not self.private and self._fits_model():
            rate = sample_rate(self.sample_rows, len(prep.raw), self.test_size)
            if rate < 1.0:
                kept = train_idx[training_sample(h[train_idx], rate)]
                sampled = f" (a hash sample of {kept.size:,} of the {train_idx.size:,} training rows)"
                train_idx = kept
        if not self.private:
            check_held_out(test_idx.size, self.test_size, self.group is not None)
        if not self.private and (test_idx.size == 0 or len(np.unique(prep.y[train_idx])) < 2):
            raise DataError(
                f"the held-out split left {test_idx.size} held-out rows and "
                f"{len(np.unique(prep.y[train_idx]))} outcome(s) among the training rows; the data "
                "needs more rows of each outcome (or another --test-size / --seed"
                + (", or a larger --sample-rows)." if sampled else ")."),
                argument="data",
            )
        X = model_frame(prep.data[prep.features], prep.schema) if self.private else prep.data[prep.features]
        step("fitting model" if self._fits_model() else "loading model")
        with warnings.catch_warnings():
            if self.private:  # e.g. an all-missing column: whether it warns is a fact about the rows
                warnings.simplefilter("ignore")
            model, model_name, status = self._fit(
                X.iloc[train_idx], prep.y[train_idx], prep.schema, training_budget
            )
            if self.private and not self._fits_model():  # public facts: names and the schema
                probe_model(model, prep.features, prep.schema)
            step("predicting")
            proba, failed = self._proba(model, X.iloc[test_idx], prep.positive)
        return AuditContext(
            data=prep.data,
            target=target,
            sensitive=prep.sensitive,
            features=prep.features,
            y=prep.y,
            positive_label=prep.positive,
            negative_label=prep.negative,
            train_index=train_idx,
            test_index=test_idx,
            model=model,
            model_name=model_name,
            proba_test=proba,
            schema=prep.schema,
            private=self.private,
            random_state=self.random_state,
            model_status=failed or status + sampled,
            column_flags=flags,
            group=self.group,
            screening=screening_meta(private=self.private, rows=int(prep.labelled.sum())),
        )

    def _screen(self, prep: Prepared, target: Any) -> list[dict[str, Any]]:
        """Check ``group`` and ``keep``; in raw mode drop the flagged columns from ``prep.features``.

        Private mode reads no row here (whether a column leaks is a fact about the rows):
        ``group`` is taken out of the features, and the features whose names copy the
        target's or a sensitive column's (:func:`~trustlab.audit._public_screening.screen_names`).
        In both modes the schema's text columns are left out
        (:func:`~trustlab.audit._public_screening.screen_declared_text`).
        """
        keep = column_names(self.keep, "keep")
        check_group(list(prep.raw.columns), self.group, target, prep.sensitive)
        check_keep(list(prep.raw.columns), keep)
        features = [c for c in prep.features if c != self.group]
        labelled = prep.labelled

        def screen(rest: list[Any]) -> Screening:
            if not self.private:
                return screen_columns(
                    prep.raw.loc[labelled],
                    prep.y[labelled],
                    target=target,
                    sensitive=prep.sensitive,
                    features=rest,
                    use_sensitive=self.use_sensitive,
                    keep=keep,
                    seed=self.random_state,
                )
            return screen_names(  # public facts only: the column names
                rest, target=target, sensitive=prep.sensitive, use_sensitive=self.use_sensitive, keep=keep
            )

        screening = screen_declared_text(
            screen, features, prep.schema, keep=keep, use_sensitive=self.use_sensitive
        )
        features, flags = screening.features, [f.to_dict() for f in screening.flags]
        if not features:
            raise DataError(
                "no feature columns are left for the model once the screened columns "
                f"{[f['column'] for f in flags]} and the group are left out; keep one with --keep "
                "(Audit(keep=[...])).",
                argument="keep",
            )
        prep.features = features
        return flags

    # -- running ----------------------------------------------------------------------------
    def run(
        self,
        data: pd.DataFrame,
        *,
        target: str,
        sensitive: Sequence[str] | str,
        dataset_name: str = "data",
        progress: Callable[[str], None] | None = None,
    ) -> AuditReport:
        """Split, fit (or load) the model, predict once, and compute every section.

        Parameters
        ----------
        data : pandas.DataFrame
            The table, one row per record, unique column names.
        target : str
            The binary outcome column.
        sensitive : str or sequence of str
            The sensitive column(s) (a string is one column name); each at most once.
        dataset_name : str
            The table's name in the report.
        progress : callable, optional
            Called with a short description before each step.

        Returns
        -------
        AuditReport
            One result per section that applies to the data (the registered defaults
            when ``sections`` is None), the run's metadata and, in private mode, the
            ledger of every DP release (the sections' budgets add up to ``epsilon``).

        Raises
        ------
        ParameterError, DataError
            Bad arguments, unknown columns, or (raw mode only) an unusable table: the
            error names the argument or the column. In private mode nothing about the
            rows raises.
        """
        if not isinstance(dataset_name, str):
            raise ParameterError(
                f"dataset_name must be a string; got {type(dataset_name).__name__}.", argument="dataset_name"
            )
        if progress is not None and not callable(progress):
            raise ParameterError(
                f"progress must be None or a callable; got {type(progress).__name__}.", argument="progress"
            )
        self._validate_params()
        step = progress or (lambda _msg: None)
        accountant = None
        training_budget = None
        if self.private:
            assert self.epsilon is not None
            trains = self.trains_privately()
            accountant = Accountant(self.epsilon, self.delta if trains else 0.0, name="audit")
            if trains:
                training_budget = accountant.child(
                    TRAINING_SHARE * self.epsilon, "model training", delta=self.delta
                )
        ctx = self.context(
            data, target=target, sensitive=sensitive, progress=step, training_budget=training_budget
        )
        asked = list(self.sections or default_sections())
        sections = [s for s in asked if s.applies(ctx)]
        budgets = section_budgets(sections, accountant)
        results, skill = mark_vacuous(compute_sections(sections, ctx, budgets, step))
        meta = run_meta(
            dataset=dataset_name,
            target=target,
            positive=ctx.positive_label,
            sensitive=ctx.sensitive,
            features=ctx.features,
            model=ctx.model_name,
            model_status=ctx.model_status,
            test_size=self.test_size,
            random_state=self.random_state,
            private=self.private,
            epsilon=self.epsilon,
        )
        meta |= {
            "column_flags": ctx.column_flags,
            "group": self.group,
            "no_skill": skill,
            "screening": ctx.screening,
        }
        if self.private:
            meta |= private_meta(ctx.schema, trained_privately=training_budget is not None, delta=self.delta)
            meta["private_left_out"] = left_out_in_private(asked, ctx)
        ledger = accountant.ledger() if accountant is not None else []
        return AuditReport(meta=meta, results=results, sections=sections, ledger=ledger)
