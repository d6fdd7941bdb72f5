"""The result of a counterfactual explanation (:func:`~trustlab.explain.counterfactual.brace` and friends)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["CounterfactualResult"]


@dataclass(frozen=True, eq=False)
class CounterfactualResult:
    """One counterfactual explanation and how far it moved the features and the noise.

    Attributes
    ----------
    x, x_cf : ndarray of shape (d,)
        Factual and counterfactual features (the SCM's column order).
    u, u_cf : ndarray of shape (d,)
        Their exogenous noises; ``x_cf == scm.generate(u_cf)``.
    d_x, d_u : float
        Scaled l1 feature distance and scaled l2 noise distance (mutable features).
    objective : float
        ``d_x + lam * d_u`` (``d_u`` alone for ``lam = inf``).
    valid : bool
        Whether the model predicts ``target`` at ``x_cf``.
    lam : float
        The trade-off weight used (0 for Wachter and causal recourse, inf for deep backtracking).
    method : str
        ``"brace"``, ``"wachter"``, ``"deep_backtracking"`` or ``"causal_recourse"``.
    solver : str
        ``"exact"``, ``"penalty"``, ``"search"`` (or ``"none"`` when ``x`` already has the target).
    status : str
        ``"optimal"``, ``"approximate"`` (search finished), ``"time_limit"``
        (search stopped by the time limit: best found so far), ``"already_target"``,
        ``"not_found"`` or ``"infeasible"`` (proved: no counterfactual within ``bounds``).
    target : object
        The desired class.
    feature_names : tuple of str
        Feature names in the SCM's column order.
    intervened : tuple of str
        Causal recourse only: the intervened feature set ``A``.
    n_solver_calls : int
        Optimisation problems solved (exact) or model evaluations (search).
    notes : tuple of str
        Why no counterfactual was returned, when that happens (e.g. which immutable
        features lie outside their bounds).

    See Also
    --------
    trustlab.explain.counterfactual.brace : computes one.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.counterfactual import wachter
    >>> from trustlab.explain.scm import LinearSCM
    >>> X = pd.DataFrame({"income": np.linspace(-2, 2, 40), "debt": np.cos(np.arange(40.0))})
    >>> clf = LogisticRegression().fit(X, (X.income - X.debt > 0).astype(int))
    >>> cf = wachter(clf, LinearSCM({"income": [], "debt": []}).fit(X), [-1.0, 0.5], target=1)
    >>> cf.to_frame().round(2).loc["change"].tolist(), cf.valid
    ([1.18, 0.0], True)
    """

    x: np.ndarray
    x_cf: np.ndarray
    u: np.ndarray
    u_cf: np.ndarray
    d_x: float
    d_u: float
    objective: float
    valid: bool
    lam: float
    method: str
    solver: str
    status: str
    target: Any
    feature_names: tuple[str, ...]
    intervened: tuple[str, ...] = ()
    n_solver_calls: int = 0
    notes: tuple[str, ...] = field(default=())

    def to_frame(self) -> pd.DataFrame:
        """Factual and counterfactual side by side.

        Returns
        -------
        pandas.DataFrame
            Rows ``x``, ``x_cf`` and ``change``; one column per feature.
        """
        return pd.DataFrame(
            [self.x, self.x_cf, self.x_cf - self.x],
            index=["x", "x_cf", "change"],
            columns=list(self.feature_names),
        )
