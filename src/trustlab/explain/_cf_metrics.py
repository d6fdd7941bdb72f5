"""Validity, proximity, plausibility and causal consistency of counterfactuals."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab.errors import DataError, ParameterError
from trustlab.explain._cf_model import check_model
from trustlab.explain._cf_problem import check_scm
from trustlab.explain._cf_result import CounterfactualResult
from trustlab.explain.scm import AdditiveNoiseSCM

__all__ = ["counterfactual_metrics"]


def counterfactual_metrics(
    model: Any, scm: AdditiveNoiseSCM, results: Sequence[CounterfactualResult]
) -> pd.DataFrame:
    """Validity, proximity, plausibility and causal consistency of counterfactuals.

    Columns, one row per result:

    - ``validity``: the model predicts the target at ``x_cf`` (re-evaluated).
    - ``proximity``: ``d_X`` (scaled l1 distance over the mutable features; lower is closer).
    - ``noise_distance``: ``d_U`` (how much the world must differ).
    - ``plausibility``: root-mean-square z-score of the counterfactual's noise
      under the SCM, ``sqrt(mean(((u_cf - mean_U) / sd_U)^2))``; about 1 for a
      typical individual, larger is less plausible.
    - ``causal_residual``: with ``C`` the changed features (plus a recourse result's
      intervened set, which may hold some features fixed), the scaled l1 distance
      between ``x_cf`` and ``F_{do(X_C = x_cf_C)}(u)``, i.e. how far the unchanged
      features sit from what the SCM says they become once ``C`` changes;
      ``causally_consistent`` is ``causal_residual <= 1e-6``.

    Parameters
    ----------
    model : fitted binary classifier
    scm : fitted LinearSCM or AdditiveNoiseSCM
        The SCM the results were computed with.
    results : sequence of CounterfactualResult

    Returns
    -------
    pandas.DataFrame
        One row per result: ``method``, ``lam``, the columns above and ``status``.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.counterfactual import brace, counterfactual_metrics
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500); b = a + 0.5 * rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + 3 * b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> res = [brace(clf, scm, [-1.0, -1.0], target=1, lam=lam) for lam in (0.0, 1.0)]
    >>> counterfactual_metrics(clf, scm, res)[["method", "validity", "causally_consistent"]]
        method  validity  causally_consistent
    0  wachter      True                 True
    1    brace      True                 True
    """
    scm = check_scm(scm)
    results = list(results) if isinstance(results, Iterable) and not isinstance(results, str | bytes) else []
    if not results or not all(isinstance(r, CounterfactualResult) for r in results):
        raise ParameterError("results must be a non-empty list of CounterfactualResult.", argument="results")
    m = check_model(model, scm)
    rows = []
    for r in results:
        if len(r.x) != scm.n_features_in_:
            raise DataError(
                "results were computed with a different SCM (feature count differs).", argument="results"
            )
        pred = m.predict(r.x_cf)[0]
        u_cf = scm.abduct(r.x_cf)
        z = (u_cf - scm.noise_mean_) / scm.noise_scale_
        moved = np.abs(r.x_cf - r.x) > 1e-9 * (1 + np.abs(r.x))
        moved |= np.isin(scm.feature_names_in_.astype(str), list(r.intervened))
        changed = np.flatnonzero(moved)
        x_do = scm.intervene(scm.abduct(r.x), list(changed), r.x_cf[changed])
        resid = float(np.abs((x_do - r.x_cf) / scm.feature_scale_).sum())
        rows.append(
            {
                "method": r.method,
                "lam": r.lam,
                "validity": bool(pred == r.target),
                "proximity": r.d_x,
                "noise_distance": r.d_u,
                "plausibility": float(np.sqrt(np.mean(z * z))),
                "causal_residual": resid,
                "causally_consistent": resid <= 1e-6,
                "status": r.status,
            }
        )
    return pd.DataFrame(rows)
