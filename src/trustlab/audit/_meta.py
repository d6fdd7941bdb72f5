"""What a report's ``meta`` says: the run's settings and, in private mode, the privacy scope.

Shared by the in-process audit (:meth:`trustlab.audit.Audit.run`) and the distributed
ones (:mod:`trustlab.audit._scale`, :mod:`trustlab.audit._scale_private`), so the three
reports describe a run with the same fields and the same words.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from trustlab.datasets.schema import Schema

__all__ = ["PRIVACY_SCOPE", "PRIVATE_MODEL_SCOPE", "PUBLIC_MODEL_SCOPE", "private_meta", "run_meta"]

PUBLIC_MODEL_SCOPE = (
    "The model is treated as public. When trustlab fits the default model itself, the training "
    "rows influence the held-out figures through the fitted model, and the model's behaviour is "
    "not covered by the guarantee (including whether it could be fitted: if the training rows "
    "cannot fit it, e.g. they hold a single outcome, a constant 0.5 model is used and "
    "meta.model_status says so). For a complete guarantee, pass a model trained on other data "
    "(--model PATH)."
)
PRIVATE_MODEL_SCOPE = (
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
    PUBLIC_MODEL_SCOPE,
    "DP noise comes from OpenDP's samplers and is deliberately not reproducible from the seed; "
    "the seed drives only public choices (the split, the model, the bootstrap's simulation).",
]

_SPLIT = "keyed hash of each row's values (seed = key); rows with the hash below test_size are held out"


def run_meta(
    *,
    dataset: str,
    target: Any,
    positive: Any,
    sensitive: Sequence[Any],
    features: Sequence[Any],
    model: str,
    model_status: str,
    test_size: float,
    random_state: int,
    private: bool,
    epsilon: float | None,
) -> dict[str, Any]:
    """The settings of a run, as every report's ``meta`` opens.

    Returns
    -------
    dict
        ``dataset``, ``target``, ``positive_label``, ``sensitive``, ``features``, ``model``,
        ``model_status``, ``test_size``, ``split``, ``random_state``, ``private``,
        ``epsilon``, ``trustlab_version`` and ``generated_at``.
    """
    return {
        "dataset": dataset,
        "target": target,
        "positive_label": str(positive),
        "sensitive": list(sensitive),
        "features": [str(f) for f in features],
        "model": model,
        "model_status": model_status,
        "test_size": test_size,
        "split": _SPLIT,
        "random_state": random_state,
        "private": private,
        "epsilon": epsilon,
        "trustlab_version": version("trustlab"),
        "generated_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def private_meta(schema: Schema, *, trained_privately: bool, delta: float) -> dict[str, Any]:
    """A private report's scope, delta and schema provenance (added to :func:`run_meta`'s fields).

    Parameters
    ----------
    schema : Schema
        The public schema of the run.
    trained_privately : bool
        Whether trustlab trained the model with DP-SGD (its scope line then replaces the
        public-model one, and ``delta`` is the training run's).
    delta : float
        The DP-SGD run's delta (the report's delta is 0 otherwise: every other release is pure DP).

    Returns
    -------
    dict
    """
    scope = PRIVATE_MODEL_SCOPE if trained_privately else PUBLIC_MODEL_SCOPE
    meta: dict[str, Any] = {
        "privacy_scope": [scope if line == PUBLIC_MODEL_SCOPE else line for line in PRIVACY_SCOPE],
        "delta": delta if trained_privately else 0.0,
        "schema_source": schema.source,
    }
    if schema.epsilon_spent or schema.delta_spent:
        meta["schema_privacy"] = {
            "epsilon": schema.epsilon_spent,
            "delta": schema.delta_spent,
            "note": "spent drafting the schema from these rows (trustlab schema --epsilon); "
            "the total spent on the rows is this plus the audit's epsilon (basic composition)",
        }
    return meta
