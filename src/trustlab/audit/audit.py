"""The Audit: turns a table and a model into an :class:`~trustlab.audit.report.AuditReport`."""

from __future__ import annotations

import datetime as _dt
import numbers
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import EPSILON, HasMethods, Interval, check_params
from trustlab._validation import (
    check_binary_target,
    check_columns,
    check_epsilon,
    check_frame,
)
from trustlab.audit._audit_inputs import (
    check_sections,
    check_values,
    column_argument,
    column_name,
    column_names,
    model_frame,
)
from trustlab.audit._private_model import DP_MODEL, fit_private_model
from trustlab.audit._scale_threads import native_threads
from trustlab.audit.registry import default_sections
from trustlab.audit.report import AuditReport
from trustlab.audit.section import AuditContext, Section, SectionResult
from trustlab.audit.split import (
    DEFAULT_SAMPLE_ROWS,
    sample_rate,
    split_rows,
    training_sample,
)
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.models import MODEL_NAMES, ConstantModel, check_model, load_model, make_model
from trustlab.privacy.accounting import Accountant

__all__ = ["Audit"]

MIN_ROWS = 20

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

TRAINING_SHARE = 0.25
"""Share of a private audit's epsilon spent training the model when trustlab fits it."""

_PUBLIC_MODEL_SCOPE = (
    "The model is treated as public. When trustlab fits the default model itself, the training "
    "rows influence the held-out figures through the fitted model, and the model's behaviour is "
    "not covered by the guarantee (including whether it could be fitted: if the training rows "
    "cannot fit it, e.g. they hold a single outcome, a constant 0.5 model is used and "
    "meta.model_status says so). For a complete guarantee, pass a model trained on other data "
    "(--model PATH)."
)
_PRIVATE_MODEL_SCOPE = (
    "The model was trained by trustlab with DP-SGD on the training rows and charged to the ledger "
    "('model training'): the model and every figure computed from it are covered, so the whole "
    "report is (epsilon, delta)-DP with the ledger's totals. Its features are encoded from the "
    "public schema alone (bounds scale numbers into [-1, 1], declared categories become "
    "indicators); columns the schema does not describe are left out of it."
)

PRIVACY_SCOPE = [
    "Unit of privacy: one row of the table (add/remove one record). Every figure derived from "
    "the rows was released by a DP mechanism charged to the ledger; column kinds, bounds, "
    "categories and group names come from the public schema, never from the rows, so the "
    "report's structure is the same on any neighbouring table.",
    "Values that do not fit the schema are not allowed to change the report's shape: a value "
    "outside a column's declared categories, or one that does not read as a number in a column "
    "with bounds, counts as missing; numbers are clipped to their bounds. Rows whose target is "
    "missing or outside its two declared categories are left out of the model and of the "
    "held-out figures (a per-row filter), and counted in the Data section.",
    "The held-out split is a keyed hash of each row's own values (seed = key): adding or "
    "removing one row moves no other row between training and held-out.",
    _PUBLIC_MODEL_SCOPE,
    "DP noise comes from OpenDP's samplers and is deliberately not reproducible from the seed; "
    "the seed drives only public choices (the split, the model, the bootstrap's simulation).",
]


@dataclass
class _Prepared:
    """A validated table and what the run needs from it."""

    raw: pd.DataFrame  # the user's rows (ignored columns dropped), index reset: the split hashes these
    data: pd.DataFrame  # what the sections read: conformed to the schema in private mode
    sensitive: list[str]
    features: list[str]
    schema: Schema
    y: np.ndarray  # 0/1 (0 where unlabelled)
    labelled: np.ndarray  # bool: the row's target is one of the two labels
    positive: Any
    negative: Any


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
        if not self.private and self.epsilon is not None:
            raise ParameterError("--epsilon is only used with --private; add --private.", argument="epsilon")
        if self.private and self.epsilon is None:
            raise ParameterError("private mode needs a total --epsilon (e.g. 1.0).", argument="epsilon")

    def _prepare(self, data: Any, target: Any, sensitive: Any) -> _Prepared:
        """Check the arguments and the table; conform it to the schema in private mode.

        In private mode only public facts raise (the arguments, the column names, the
        schema); facts about the rows (how many, which values, missing or not) never do.
        """
        self._validate_params()
        target = column_name(target, "target")
        sens = column_names(sensitive, "sensitive")
        ignore = column_names(self.ignore, "ignore")
        data = check_frame(data, min_rows=0 if self.private else MIN_ROWS)
        check_columns(data, ignore, "ignore")
        check_columns(data, [target], "target")
        check_columns(data, sens, "sensitive")
        if not sens:
            raise DataError("name at least one sensitive column.", argument="sensitive")
        if target in sens:
            raise DataError(
                f"the target {target!r} cannot also be a sensitive column; name it once.",
                argument="sensitive",
            )
        if target in ignore or set(sens) & set(ignore):
            raise DataError(
                "ignore must not name the target or a sensitive column; the audit needs them.",
                argument="ignore",
            )
        raw = data.drop(columns=ignore).reset_index(drop=True)
        features = [c for c in raw.columns if c != target and (self.use_sensitive or c not in sens)]
        if not features:
            raise DataError(
                "no feature columns are left for the model (every column is the target, sensitive or "
                "ignored); keep at least one other column.",
                argument="ignore" if ignore else "data",
            )
        schema = self.schema or Schema()
        if not self.private:
            check_values(raw, list(raw.columns))
            empty = [c for c in raw.columns if raw[c].isna().all()]
            if empty:
                raise DataError(
                    f"column(s) {[str(c) for c in empty]} are entirely missing; leave them out with "
                    f"--ignore {','.join(map(str, empty))} (Audit(ignore=[...])).",
                    argument=column_argument(empty[0]),
                )
            y, negative, positive = check_binary_target(raw[target], f"target {target!r}", self.positive)
            if len(np.unique(y)) < 2:
                raise DataError(f"target {target!r} has a single value.", argument="target")
            return _Prepared(raw, raw, sens, features, schema, y, np.ones(len(raw), bool), positive, negative)
        assert self.epsilon is not None  # _validate_params
        check_epsilon(self.epsilon)
        undeclared = [c for c in [target, *sens] if schema.categories(c) is None]
        if undeclared:
            raise DataError(
                f"private mode needs the public categories of {undeclared} in the schema "
                "(--schema FILE); trustlab never reads them off the private data. Draft a schema "
                "with `trustlab schema DATA --out schema.json` (datasets.draft_schema), fill it in "
                "and pass it with --schema (docs/schema.md).",
                argument="schema",
            )
        cats = list(schema.categories(target) or ())
        if len(cats) != 2:
            raise DataError(
                f"the schema must declare exactly two categories for the target {target!r}, got {cats}.",
                argument="schema",
            )
        positive = cats[1]
        if self.positive is not None:
            matches = [c for c in cats if c == self.positive or str(c) == str(self.positive)]
            if not matches:
                raise DataError(
                    f"positive label {self.positive!r} is not one of the target's declared "
                    f"categories {cats}.",
                    argument="positive",
                )
            positive = matches[0]
        negative = next(c for c in cats if c != positive)
        conformed = schema.conform(raw)
        labels = conformed[target].astype(object)
        labelled = labels.notna().to_numpy()
        y = (labels == positive).to_numpy().astype(np.int64)
        return _Prepared(raw, conformed, sens, features, schema, y, labelled, positive, negative)

    def _fits_model(self) -> bool:
        """Whether trustlab fits the model itself (a model name, not a path or an estimator)."""
        return isinstance(self.model, str | Path) and str(self.model) in MODEL_NAMES

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
        """The model, its name and a status line (private mode falls back to a constant model)."""
        model = self.model
        if self.trains_privately():
            if training_budget is None:
                assert self.epsilon is not None
                training_budget = Accountant(TRAINING_SHARE * self.epsilon, self.delta, name="model training")
            fitted, status = fit_private_model(
                X_train,
                y_train,
                schema,
                accountant=training_budget,
                delta=self.delta,
                train_fraction=1.0 - float(self.test_size),
            )
            if str(model) != "logistic":
                status += f"; '{model}' has no DP trainer in trustlab, so a logistic regression was trained"
            return fitted, DP_MODEL, status
        if self._fits_model():
            try:
                fitted = make_model(str(model), X_train, random_state=self.random_state)
                with native_threads():
                    fitted.fit(X_train, y_train)
                return fitted, str(model), "fitted on the training rows"
            except ModelError:
                raise
            except Exception as exc:
                if self.private:
                    return (
                        ConstantModel(),
                        str(model),
                        f"the training rows could not fit the model ({type(exc).__name__}); "
                        "a constant 0.5 model was used",
                    )
                raise DataError(
                    f"the model could not be fitted on the training rows ({type(exc).__name__}: "
                    f"{exc}); the data needs rows of both outcomes on the training side.",
                    argument="data",
                ) from None
        if isinstance(model, str | Path):
            if not str(model).endswith((".pkl", ".pickle", ".joblib")) and not Path(model).exists():
                raise ModelError(
                    f"model must be one of {', '.join(MODEL_NAMES)} or a path to a pickled "
                    f"fitted classifier (.pkl), got {str(model)!r}.",
                    argument="model",
                )
            return load_model(model), Path(model).name, "given by the user"
        return check_model(model), type(model).__name__, "given by the user"

    def _proba(self, model: Any, X: pd.DataFrame, positive: Any) -> tuple[np.ndarray, str | None]:
        """Predicted probabilities of the positive label (and, in private mode, a fallback note)."""
        if len(X) == 0:
            return np.zeros(0), None
        try:
            classes = getattr(model, "classes_", None)
            if classes is not None and len(classes) != 2:  # e.g. fitted on a single outcome
                raise ModelError(
                    f"the model knows {len(classes)} class(es); a binary classifier is needed.",
                    argument="model",
                )
            with native_threads():
                proba = np.asarray(model.predict_proba(X), dtype=float)
            if proba.ndim != 2 or proba.shape != (len(X), 2):
                raise ModelError(
                    f"predict_proba must return shape (n, 2), got {proba.shape}.", argument="model"
                )
        except Exception as exc:
            if self.private:  # our own messages carry no data; others might quote a value: type only
                why = str(exc) if isinstance(exc, ModelError) else type(exc).__name__
                return np.full(len(X), 0.5), (
                    f"the model could not predict the held-out rows ({why}); a constant 0.5 was used"
                )
            if isinstance(exc, ModelError):
                raise
            raise ModelError(
                f"the model's predict_proba failed on the audit's features ({type(exc).__name__}: "
                f"{exc}); check it was trained on the same columns (target and --ignore'd "
                "columns removed).",
                argument="model",
            ) from None
        classes = list(getattr(model, "classes_", [0, 1]))
        col = 1
        for i, c in enumerate(classes):
            # a model trustlab fitted learnt the 0/1 encoding (1 = positive): never match the
            # user's label there (positive=0 would pick the negative class's column)
            own = self._fits_model() or isinstance(model, ConstantModel)
            if (c == 1) if own else str(c) == str(positive):
                col = i
        p = proba[:, col]
        return np.clip(np.where(np.isfinite(p), p, 0.5), 0.0, 1.0), None

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
        held_out, h = split_rows(prep.raw, self.test_size, self.random_state)
        train_idx = np.flatnonzero(prep.labelled & ~held_out)
        test_idx = np.flatnonzero(prep.labelled & held_out)
        sampled = ""
        if not self.private and self._fits_model():
            rate = sample_rate(self.sample_rows, len(prep.raw), self.test_size)
            if rate < 1.0:
                kept = train_idx[training_sample(h[train_idx], rate)]
                sampled = f" (a hash sample of {kept.size:,} of the {train_idx.size:,} training rows)"
                train_idx = kept
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
        )

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
        sections = [s for s in (self.sections or default_sections()) if s.applies(ctx)]
        budgets: dict[str, Accountant] = {}
        if accountant is not None:
            weights: dict[str, float] = {}
            for s in sections:
                if s.budget_weight > 0:  # a weight-0 section releases nothing: it gets budget None
                    weights[s.key] = max(weights.get(s.key, 0.0), s.budget_weight)
            budgets = accountant.split(weights) if weights else {}
        results: list[SectionResult] = []
        for s in sections:
            step(f"section: {s.title}")
            results.append(s.compute(ctx, budgets.get(s.key) if s.budget_weight > 0 else None))
        for key, acc in budgets.items():
            if acc.remaining_epsilon > 1e-9 * acc.total_epsilon:
                raise RuntimeError(f"internal error: budget '{key}' left {acc.remaining_epsilon} unspent")
        meta: dict[str, Any] = {
            "dataset": dataset_name,
            "target": target,
            "positive_label": str(ctx.positive_label),
            "sensitive": ctx.sensitive,
            "features": [str(f) for f in ctx.features],
            "model": ctx.model_name,
            "model_status": ctx.model_status,
            "test_size": self.test_size,
            "split": "keyed hash of each row's values (seed = key); rows with the hash below "
            "test_size are held out",
            "random_state": self.random_state,
            "private": self.private,
            "epsilon": self.epsilon,
            "trustlab_version": version("trustlab"),
            "generated_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        }
        if self.private:
            scope = _PRIVATE_MODEL_SCOPE if training_budget is not None else _PUBLIC_MODEL_SCOPE
            meta["privacy_scope"] = [scope if line == _PUBLIC_MODEL_SCOPE else line for line in PRIVACY_SCOPE]
            meta["delta"] = self.delta if training_budget is not None else 0.0
            meta["schema_source"] = ctx.schema.source
            if ctx.schema.epsilon_spent or ctx.schema.delta_spent:
                meta["schema_privacy"] = {
                    "epsilon": ctx.schema.epsilon_spent,
                    "delta": ctx.schema.delta_spent,
                    "note": "spent drafting the schema from these rows (trustlab schema --epsilon); "
                    "the total spent on the rows is this plus the audit's epsilon (basic composition)",
                }
        ledger = accountant.ledger() if accountant is not None else []
        return AuditReport(meta=meta, results=results, sections=sections, ledger=ledger)
