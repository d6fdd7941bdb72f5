"""Pointwise recourse verification: the highest score each individual can reach (the baseline)."""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from trustlab._param_validation import Options, validate_params
from trustlab.errors import DataError
from trustlab.explain._rec_inputs import (
    check_action_set,
    check_points,
    check_score_range,
    linear_model_params,
)
from trustlab.explain.recourse_actions import ActionSet

__all__ = ["has_recourse", "max_reachable_score"]


_METHOD = {"method": [Options({"auto", "ilp"})]}


@validate_params(_METHOD)
def max_reachable_score(
    X: Any, model: Any, action_set: ActionSet, *, intercept: Any = None, method: str = "auto"
) -> np.ndarray:
    """Highest score ``w^T (x + a) + b`` each individual can reach with allowed actions.

    Integer and boolean features take integer actions. Without joint constraints on
    actionable features the maximum is separable and computed in closed form for
    all rows at once; otherwise one integer program per row is solved with HiGHS
    (``scipy.optimize.milp``).

    Parameters
    ----------
    X : array-like of shape (n, d) or DataFrame
        Individuals, in the action set's feature order (or a DataFrame with those columns).
    model : fitted linear classifier or array of shape (d,)
    action_set : ActionSet
    intercept : float, optional
        Needed when ``model`` is a coefficient vector.
    method : {"auto", "ilp"}, default "auto"
        ``"ilp"`` solves one integer program per row even when the closed form applies.

    Returns
    -------
    numpy.ndarray of shape (n,)
        ``> 0``: recourse exists; ``<= 0``: the prediction is fixed.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.recourse import ActionSet, max_reachable_score
    >>> A = ActionSet(["age", "savings"], [18, 0], [80, 10], dtype=["int", "int"],
    ...               actionable=np.array([False, True]), step_ub=[0, 3])
    >>> max_reachable_score([[30, 3], [70, 0]], np.array([-0.1, 1.0]), A, intercept=-2.0)
    array([ 1., -6.])
    """
    w, b = linear_model_params(model, intercept)
    A = check_action_set(action_set, len(w))
    check_score_range(w, b, A)
    Xa = check_points(X, A)
    lo = np.maximum(A.step_lb, A.lb - Xa)
    hi = np.minimum(A.step_ub, A.ub - Xa)
    integral = np.array([t != "float" for t in A.dtype])
    lo = np.where(integral, np.ceil(lo - 1e-9), lo)
    hi = np.where(integral, np.floor(hi + 1e-9), hi)
    if A.separable and method == "auto":
        a = np.where(w > 0, hi, np.where(w < 0, lo, 0.0))
        return (Xa + a) @ w + b
    G, H, g = A.constraint_rows()
    out = np.empty(len(Xa))
    for i, x in enumerate(Xa):
        res = milp(
            -w,
            constraints=[LinearConstraint(H, -np.inf, g - G @ x)],
            bounds=Bounds(lo[i], hi[i]),
            integrality=integral.astype(int),
        )
        if res.status != 0 or res.x is None:
            raise DataError(
                f"X: row {i} violates the action set's joint constraints (e.g. a one-hot group "
                "that does not sum to 1), so no action is feasible for it.",
                argument="X",
            )
        out[i] = float(w @ (x + res.x) + b)
    return out


@validate_params(_METHOD)
def has_recourse(
    X: Any, model: Any, action_set: ActionSet, *, intercept: Any = None, method: str = "auto"
) -> np.ndarray:
    """Pointwise recourse verification: whether each individual can reach a positive prediction.

    ``True`` where some allowed action ``a`` gives ``w^T (x + a) + b > 0`` (individuals
    already predicted positive have recourse with ``a = 0``); ``False`` marks a fixed
    prediction. This is the pointwise audit the paper compares confined regions with.

    Parameters
    ----------
    X, model, action_set, intercept, method
        As in :func:`max_reachable_score`.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.recourse import ActionSet, has_recourse
    >>> A = ActionSet(["age", "savings"], [18, 0], [80, 10], dtype=["int", "int"],
    ...               actionable=np.array([False, True]), step_ub=[0, 3])
    >>> has_recourse([[30, 3], [30, 9], [70, 0]], np.array([-0.1, 1.0]), A, intercept=-2.0)
    array([ True,  True, False])

    References
    ----------
    .. [1] Lawless, C., Weng, T., Ustun, B., Udell, M. "Understanding Fixed Predictions
       via Confined Regions". ICML 2025.
    """
    return max_reachable_score(X, model, action_set, intercept=intercept, method=method) > 0
