"""The audit's private model: features encoded from the public schema, weights trained with DP-SGD.

In private mode, when trustlab fits the model itself, the training rows must reach the
report only through a DP release. :func:`fit_private_model` trains a logistic regression
with DP-SGD (:class:`trustlab.privacy.training.DPSGDClassifier`) charged to the audit's
ledger, on features encoded by :class:`PublicEncoder`, which reads only the public
schema: a numeric column with bounds ``(lo, hi)`` becomes ``(clip(x) - mid) / half`` in
``[-1, 1]`` (missing: 0, the middle), a column with categories becomes one 0/1
indicator per declared category (missing or undeclared: all zeros). Columns the schema
does not describe are left out of the private model: without public bounds they cannot
be scaled without looking at the rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from trustlab.datasets.schema import Schema
from trustlab.errors import DataError
from trustlab.privacy.release import PrivacyMeasure, Release

__all__ = ["DP_MODEL", "PrivateModel", "PublicEncoder", "fit_private_model"]

DP_MODEL = "DP-SGD logistic regression"


class PublicEncoder:
    """Encode a frame into ``[-1, 1]`` features using only the schema's bounds and categories.

    Parameters
    ----------
    schema : Schema
        The public schema.
    columns : list of str
        The feature columns offered to the model (those the schema does not describe are
        left out: see ``used_`` and ``left_out_``).

    Examples
    --------
    >>> from trustlab.datasets import Schema
    >>> s = Schema.from_dict({"columns": {"age": {"bounds": [20, 60]}, "sex": {"categories": ["f", "m"]}}})
    >>> enc = PublicEncoder(s, ["age", "sex", "id"])
    >>> enc.transform(pd.DataFrame({"age": [20, 50, None], "sex": ["m", "f", "x"], "id": [1, 2, 3]}))
    array([[-1. ,  0. ,  1. ],
           [ 0.5,  1. ,  0. ],
           [ 0. ,  0. ,  0. ]])
    >>> enc.left_out_
    ['id']
    """

    def __init__(self, schema: Schema, columns: list[Any]) -> None:
        self.schema = schema
        self.used_: list[Any] = []
        self.left_out_: list[Any] = []
        self.names_: list[str] = []
        for c in columns:
            known = c in schema
            bounds = schema.bounds(str(c)) if known else None
            cats = schema.categories(str(c)) if known else None
            if bounds is not None and bounds[1] > bounds[0]:
                self.used_.append(c)
                self.names_.append(str(c))
            elif cats:
                self.used_.append(c)
                self.names_.extend(f"{c}={v}" for v in cats)
            else:
                self.left_out_.append(c)

    def transform(self, frame: pd.DataFrame) -> np.ndarray:
        """The encoded features, shape ``(n, len(names_))``, every value in ``[-1, 1]``.

        Parameters
        ----------
        frame : pandas.DataFrame
            Rows with (at least) the columns in ``used_``.

        Returns
        -------
        numpy.ndarray
        """
        parts: list[np.ndarray] = []
        for c in self.used_:
            bounds = self.schema.bounds(str(c))
            col = frame[c]
            if bounds is not None and bounds[1] > bounds[0]:
                lo, hi = bounds
                x = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
                mid, half = (lo + hi) / 2.0, (hi - lo) / 2.0
                z = (np.clip(x, lo, hi) - mid) / half
                parts.append(np.clip(np.where(np.isfinite(z), z, 0.0), -1.0, 1.0)[:, None])
            else:
                cats = self.schema.categories(str(c)) or ()
                values = col.astype(object).to_numpy()
                parts.append(np.column_stack([values == v for v in cats]).astype(float))
        if not parts:
            return np.zeros((len(frame), 0))
        return np.hstack(parts)


class PrivateModel:
    """A fitted DP model on raw audit frames: :class:`PublicEncoder` then the DP-SGD classifier.

    Parameters
    ----------
    encoder : PublicEncoder
        The schema-driven encoder.
    classifier : object
        The fitted :class:`~trustlab.privacy.training.DPSGDClassifier`.
    """

    def __init__(self, encoder: PublicEncoder, classifier: Any) -> None:
        self.encoder = encoder
        self.classifier = classifier
        self.classes_ = np.array([0, 1])

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Probabilities of the two outcomes (columns ordered as ``classes_``).

        Parameters
        ----------
        X : pandas.DataFrame
            Rows with the audit's feature columns.

        Returns
        -------
        numpy.ndarray of shape (n, 2)
        """
        return np.asarray(self.classifier.predict_proba(self.encoder.transform(X)), dtype=float)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """The more likely outcome (0 or 1) of each row.

        Parameters
        ----------
        X : pandas.DataFrame
            Rows with the audit's feature columns.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        return (self.predict_proba(X)[:, 1] >= 0.5).astype(int)


def fit_private_model(
    X_train: pd.DataFrame,
    y_train: np.ndarray,
    schema: Schema,
    *,
    accountant: Any,
    delta: float,
    train_fraction: float = 0.7,
) -> tuple[PrivateModel, str]:
    """Train the audit's DP model on the training rows, charged in full to ``accountant``.

    Parameters
    ----------
    X_train : pandas.DataFrame
        The training rows' feature columns (conformed to the schema).
    y_train : numpy.ndarray
        Their 0/1 outcomes.
    schema : Schema
        The public schema (feature encoding).
    accountant : Accountant
        The model's share of the audit's budget: checked before training, then charged
        in full (epsilon and ``delta``) as one ledger line.
    delta : float
        The training run's delta.
    train_fraction : float, default 0.7
        The public share of rows the audit trains on (``1 - test_size``). With the
        schema's public row estimate ``rows`` it sets DP-SGD's step-size divisor
        (``n_hint = round(rows * train_fraction)``); without one the trainer's default
        (:data:`~trustlab.privacy.training.DEFAULT_N_HINT`) is used. The true row count is
        private and never enters.

    Returns
    -------
    model : PrivateModel
    status : str
        One line for the report: what was trained, at what cost, on which columns.

    Raises
    ------
    DataError
        When the schema describes none of the feature columns (nothing public to encode:
        a fact about the schema, not the rows).
    """
    from trustlab.privacy.training import DEFAULT_N_HINT, DPSGDClassifier

    encoder = PublicEncoder(schema, list(X_train.columns))
    if not encoder.used_:
        raise DataError(
            "private training needs public bounds or categories for at least one feature column; "
            "the schema describes none of them: add them to the schema (trustlab schema).",
            argument="schema",
        )
    share = float(accountant.total_epsilon)
    description = "model training (DP-SGD)"
    # the plan is checked before any noise is drawn ...
    accountant.check(Release(None, share, delta, description=description, measure=PrivacyMeasure.APPROXIMATE))
    n_hint = DEFAULT_N_HINT if schema.rows is None else max(1, round(schema.rows * float(train_fraction)))
    clf = DPSGDClassifier(
        epsilon=share, delta=delta, model="logistic", description=description, n_hint=n_hint
    )
    clf.fit(encoder.transform(X_train), np.asarray(y_train, dtype=int))
    # ... and recorded at the whole share: the noise was calibrated so that the run's tight
    # epsilon (kept as `accounted_epsilon`) is at most the share, within 0.1% below it, so
    # the share is a valid (slightly loose) figure and the ledger adds up to the total.
    run = clf.release_
    accountant.record(
        Release(
            None,
            share,
            delta,
            mechanism=run.mechanism,
            parameters={**run.parameters, "accounted_epsilon": run.epsilon},
            description=description,
            measure=PrivacyMeasure.APPROXIMATE,
        )
    )
    left = f"; left out (no public bounds or categories): {', '.join(map(str, encoder.left_out_))}"
    status = (
        f"{DP_MODEL} trained by trustlab on the training rows (epsilon {accountant.total_epsilon:.4g}, "
        f"delta {delta:g}, on {len(encoder.names_)} schema-encoded features; step size set for "
        + (
            f"{n_hint:,} training rows from the schema's public estimate of {schema.rows:,} rows"
            if schema.rows is not None
            else f'{n_hint:,} training rows (the schema gives no public row estimate: add "rows")'
        )
        + (left if encoder.left_out_ else "")
        + ")"
    )
    return PrivateModel(encoder, clf), status
