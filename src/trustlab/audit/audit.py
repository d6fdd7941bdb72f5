"""The Audit: turns a table and a model into an :class:`~trustlab.audit.report.AuditReport`."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from trustlab._validation import (
    check_binary_target,
    check_columns,
    check_epsilon,
    check_fraction,
    check_frame,
)
from trustlab.audit.registry import default_sections
from trustlab.audit.report import AuditReport
from trustlab.audit.section import AuditContext, Section, SectionResult
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.models import MODEL_NAMES, check_model, load_model, make_model
from trustlab.privacy.accounting import Accountant

__all__ = ["Audit"]

MIN_ROWS = 20

PRIVACY_SCOPE = [
    "Unit of privacy: one row of the table. Every figure derived from the rows was released "
    "by a DP mechanism charged to the ledger; labels, bounds and categories come from the "
    "public schema.",
    "The model is treated as public. When trustlab fits the default model itself, the training "
    "rows influence the held-out figures through the fitted model; that influence is not covered "
    "by the guarantee. For a complete guarantee, pass a model trained on other data (--model PATH).",
    "DP noise comes from OpenDP's samplers and is deliberately not reproducible from the seed.",
]


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
        Share of rows held out (stratified on the target) for evaluation.
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
    ignore : sequence of str
        Columns to leave out of the model and the report.
    random_state : int, default 0
        Seed of the split, the model, and the bootstrap.

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

    # -- validation -------------------------------------------------------------------------
    def _validate(
        self, data: Any, target: str, sensitive: Sequence[str]
    ) -> tuple[pd.DataFrame, list[str], Schema]:
        data = check_frame(data, min_rows=MIN_ROWS)
        check_fraction(self.test_size, "test_size")
        ignore = check_columns(data, list(self.ignore), "ignore")
        check_columns(data, target, "target")
        sens = check_columns(data, sensitive, "sensitive")
        if not sens:
            raise DataError("name at least one sensitive column.", argument="sensitive")
        if target in sens or target in ignore or set(sens) & set(ignore):
            raise DataError("target, sensitive and ignored columns must be distinct.", argument="sensitive")
        data = data.drop(columns=ignore)
        empty = [str(c) for c in data.columns if data[c].isna().all()]
        if empty:
            raise DataError(
                f"column(s) {empty} are entirely missing; leave them out with --ignore "
                f"{','.join(empty)} (Audit(ignore=[...])).",
                argument=empty[0],
            )
        schema = self.schema or Schema()
        if self.private:
            if self.epsilon is None:
                raise ParameterError("private mode needs a total --epsilon (e.g. 1.0).", argument="epsilon")
            check_epsilon(self.epsilon)
            undeclared = [c for c in [target, *sens] if schema.categories(c) is None]
            if undeclared:
                raise DataError(
                    f"private mode needs the public categories of {undeclared} in the schema "
                    "(--schema FILE); trustlab never reads them off the private data. "
                    "See docs/audit.md#schema.",
                    argument="schema",
                )
            cats = schema.categories(target) or ()
            if len(cats) != 2:
                raise DataError(
                    f"the schema must declare exactly two categories for the target "
                    f"{target!r}, got {list(cats)}.",
                    argument="schema",
                )
            outside = ~data[target].astype(object).isin(list(cats))
            if outside.any():
                raise DataError(
                    f"target {target!r} has values outside its declared categories {list(cats)}.",
                    argument="target",
                )
        elif self.epsilon is not None:
            raise ParameterError("--epsilon is only used with --private; add --private.", argument="epsilon")
        return data, sens, schema

    def _fit(self, X_train: pd.DataFrame, y_train: np.ndarray) -> tuple[Any, str]:
        model = self.model
        if isinstance(model, str | Path) and str(model) in MODEL_NAMES:
            fitted = make_model(str(model), X_train, random_state=self.random_state)
            return fitted.fit(X_train, y_train), str(model)
        if isinstance(model, str | Path):
            if not str(model).endswith((".pkl", ".pickle", ".joblib")) and not Path(model).exists():
                raise ModelError(
                    f"model must be one of {', '.join(MODEL_NAMES)} or a path to a pickled "
                    f"fitted classifier (.pkl), got {str(model)!r}.",
                    argument="model",
                )
            return load_model(model), Path(model).name
        return check_model(model), type(model).__name__

    @staticmethod
    def _proba(model: Any, X: pd.DataFrame, positive: Any) -> np.ndarray:
        try:
            proba = np.asarray(model.predict_proba(X), dtype=float)
        except Exception as exc:
            raise ModelError(
                f"the model's predict_proba failed on the audit's features ({type(exc).__name__}: "
                f"{exc}); check it was trained on the same columns (target and --ignore'd "
                "columns removed).",
                argument="model",
            ) from None
        if proba.ndim != 2 or proba.shape[1] != 2:
            raise ModelError(f"predict_proba must return shape (n, 2), got {proba.shape}.", argument="model")
        classes = list(getattr(model, "classes_", [0, 1]))
        col = 1
        for i, c in enumerate(classes):
            if str(c) == str(positive):
                col = i
        return np.clip(proba[:, col], 0.0, 1.0)

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

        ``progress`` is called with a short description before each step.
        """
        step = progress or (lambda _msg: None)
        sensitive = [sensitive] if isinstance(sensitive, str) else list(sensitive)
        data, sens, schema = self._validate(data, target, sensitive)
        positive = self.positive
        if self.private and positive is None:
            positive = (schema.categories(target) or (None, None))[1]
        y, negative, positive = check_binary_target(data[target], target, positive)
        if len(np.unique(y)) < 2:
            raise DataError(f"target {target!r} has a single value.", argument="target")
        features = [c for c in data.columns if c != target and (self.use_sensitive or c not in sens)]
        if not features:
            raise DataError("no feature columns are left for the model.", argument="data")
        data = data.reset_index(drop=True)
        idx = np.arange(len(data))
        try:
            train_idx, test_idx = train_test_split(
                idx, test_size=self.test_size, stratify=y, random_state=self.random_state
            )
        except ValueError as exc:
            raise DataError(
                f"the held-out split failed ({exc}); the data needs more rows of each outcome.",
                argument="data",
            ) from None
        train_idx, test_idx = np.sort(train_idx), np.sort(test_idx)
        step(
            "fitting model" if isinstance(self.model, str) and self.model in MODEL_NAMES else "loading model"
        )
        model, model_name = self._fit(data.iloc[train_idx][features], y[train_idx])
        step("predicting")
        proba = self._proba(model, data.iloc[test_idx][features], positive)
        ctx = AuditContext(
            data=data,
            target=target,
            sensitive=sens,
            features=features,
            y=y,
            positive_label=positive,
            negative_label=negative,
            train_index=train_idx,
            test_index=test_idx,
            model=model,
            model_name=model_name,
            proba_test=proba,
            schema=schema,
            private=self.private,
            random_state=self.random_state,
        )
        sections = [s for s in (self.sections or default_sections()) if s.applies(ctx)]
        budgets: dict[str, Accountant] = {}
        accountant = None
        if self.private:
            assert self.epsilon is not None
            accountant = Accountant(self.epsilon, name="audit")
            weights: dict[str, float] = {}
            for s in sections:
                weights[s.key] = max(weights.get(s.key, 0.0), s.budget_weight)
            budgets = accountant.split(weights)
        results: list[SectionResult] = []
        for s in sections:
            step(f"section: {s.title}")
            results.append(s.compute(ctx, budgets.get(s.key)))
        for key, acc in budgets.items():
            if acc.remaining_epsilon > 1e-9 * acc.total_epsilon:
                raise RuntimeError(f"internal error: budget '{key}' left {acc.remaining_epsilon} unspent")
        meta: dict[str, Any] = {
            "dataset": dataset_name,
            "target": target,
            "positive_label": str(positive),
            "sensitive": sens,
            "features": [str(f) for f in features],
            "model": model_name,
            "test_size": self.test_size,
            "random_state": self.random_state,
            "private": self.private,
            "epsilon": self.epsilon,
            "trustlab_version": version("trustlab"),
            "generated_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        }
        if self.private:
            meta["privacy_scope"] = PRIVACY_SCOPE
            meta["schema_source"] = schema.source
        ledger = accountant.ledger() if accountant is not None else []
        return AuditReport(meta=meta, results=results, sections=sections, ledger=ledger)
