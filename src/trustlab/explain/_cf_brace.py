"""BRACE and its special cases (Wachter, deep backtracking), over one instance, a lam grid or a table."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Options, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.explain._cf_causal import causal_recourse
from trustlab.explain._cf_exact import exact_cf, linear_problem
from trustlab.explain._cf_model import SUPPORTED
from trustlab.explain._cf_penalty import penalty_cf
from trustlab.explain._cf_problem import (
    SEARCH_PARAMETERS,
    check_scm,
    infeasible_result,
    make_result,
    method_name,
    setup_problem,
)
from trustlab.explain._cf_result import CounterfactualResult
from trustlab.explain._cf_search import search_cf
from trustlab.explain.scm import AdditiveNoiseSCM, LinearSCM

__all__ = ["brace", "brace_path", "counterfactuals", "deep_backtracking", "wachter"]


@validate_params(SEARCH_PARAMETERS)
def brace(
    model: Any,
    scm: AdditiveNoiseSCM,
    x: Any,
    target: Any = None,
    *,
    lam: float = 1.0,
    immutable: Sequence[Any] = (),
    scales: Any = None,
    noise_scales: Any = "feature",
    solver: str = "auto",
    tau: float = 1e-6,
    time_limit: float = 10.0,
    random_state: Any = 0,
    bounds: Mapping[Any, tuple[float | None, float | None]] | None = None,
) -> CounterfactualResult:
    """BRACE backtracking counterfactual: trade feature distance against noise distance with ``lam``.

    Solves ``min_{u'} d_X(x, F(u')) + lam * d_U(u, u')`` subject to
    ``model(F(u')) = target`` and the immutable features fixed (paper eq. 8-10),
    with ``d_X = sum_i |x_i - x'_i| / s_i`` and
    ``d_U = sqrt(sum_i (u_i - u'_i)^2 / s_i^2)`` over the mutable features (paper
    Section 7).

    Parameters
    ----------
    model : fitted binary classifier
        Anything with ``predict`` and ``classes_``; see the module docstring for
        which models the exact solver takes.
    scm : fitted LinearSCM or AdditiveNoiseSCM
        Over exactly the model's input features.
    x : array of shape (d,), Series or one-row DataFrame
        The factual instance (a Series/DataFrame is matched by name).
    target : class label, optional
        The desired class; default: the class the model does not predict at ``x``.
    lam : float, default 1.0
        Weight of the noise distance (the paper reports 1 and 1.2). 0 gives
        Wachter's counterfactual, ``numpy.inf`` deep backtracking.
    immutable : sequence of str or int
        Features held at their factual values.
    scales : array of shape (d,), optional
        ``s_i`` of ``d_X``; default the features' standard deviations on the SCM's
        fit data (``scm.feature_scale_``).
    noise_scales : {"feature", "noise"} or array, default "feature"
        ``s_i`` of ``d_U``: the same feature scales (paper eq. 25 as read by this
        library), the SCM's noise standard deviations, or your own.
    solver : {"auto", "exact", "penalty", "search"}
        ``"auto"`` takes the exact solver when it applies, else the search;
        ``"penalty"`` is the paper's gradient penalty method (see the module docstring).
    tau : float, default 1e-6
        Decision margin of the exact solver (``w . x' + b >= tau``), avoiding ties.
    time_limit : float, default 10
        Seconds for the search and penalty solvers; on expiry the best counterfactual found so
        far is returned with ``status="time_limit"``.
    random_state : int, Generator or None
        Seeds the search solver.
    bounds : mapping of feature name to (low, high), optional
        Box constraints ``low <= x_cf[name] <= high`` the counterfactual must satisfy, e.g.
        ``{"age": (18, 75)}``; None leaves a side open. Honoured by every solver; when no
        counterfactual exists within them the result has ``status="infeasible"`` and
        ``valid=False`` (the factual ``x`` itself is not checked when it already has the target).

    Returns
    -------
    CounterfactualResult

    References
    ----------
    Fatemi, P., Sharifian, E., Yassaee, M. H. "A New Approach to Backtracking
    Counterfactual Explanations: A Unified Causal Framework for Efficient Model
    Interpretability". ICML 2025, PMLR 267:16273-16285.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.counterfactual import brace, brace_path, deep_backtracking, wachter
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=1000)
    >>> b = a + 0.5 * rng.normal(size=1000)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> x = pd.Series({"a": -1.0, "b": -1.0})
    >>> cf = brace(clf, scm, x, target=1)
    >>> cf.valid, cf.status, cf.solver
    (True, 'optimal', 'exact')
    >>> bool(np.allclose(scm.generate(cf.u_cf), cf.x_cf))
    True
    >>> w = wachter(clf, scm, x, target=1)
    >>> w.method, w.lam, bool(w.d_x <= cf.d_x and cf.d_u <= w.d_u)
    ('wachter', 0.0, True)
    >>> int(np.count_nonzero(w.x_cf != w.x))
    1
    >>> db = deep_backtracking(clf, scm, x, target=1)
    >>> db.method, db.valid, bool(db.d_u <= cf.d_u)
    ('deep_backtracking', True, True)
    >>> path = brace_path(clf, scm, x, [0, 1, 10, np.inf], target=1)  # Wachter to deep backtracking
    >>> bool(all(np.diff([r.d_u for r in path]) <= 1e-9))
    True
    >>> boxed = brace(clf, scm, x, target=1, bounds={"a": (None, -0.5)})
    >>> boxed.status, bool(boxed.x_cf[0] <= -0.5)
    ('optimal', True)
    >>> brace(clf, scm, x, target=1, bounds={"a": (None, -1.0), "b": (None, -1.0)}).status
    'infeasible'
    """
    p = setup_problem(model, scm, x, target, lam, immutable, scales, noise_scales, tau, bounds)
    limit = float(time_limit)
    rng = make_generator(random_state)
    method = method_name(p.lam)
    if p.valid(p.x)[0]:
        return make_result(p, p.x.copy(), method, "none", "already_target", 0)
    if p.immutable_outside():
        return infeasible_result(p, method, "none", 0)
    lp = linear_problem(p) if solver in ("auto", "exact") else None
    if solver == "exact" and lp is None:
        raise ModelError(
            f"solver='exact' needs a LinearSCM and a linear classifier; got {type(p.scm).__name__} and "
            f"{type(model).__name__}. Use solver='search' (supported: {SUPPORTED}).",
            argument="solver",
        )
    if lp is not None:
        if not np.any(lp.a != 0):
            return make_result(
                p,
                p.x.copy(),
                method,
                "exact",
                "not_found",
                0,
                notes=("the model does not depend on any mutable feature",),
            )
        x_opt, status, calls = exact_cf(p, lp, p.lam)
        if x_opt is None:
            return infeasible_result(p, method, "exact", calls)
        return make_result(p, x_opt, method, "exact", status, calls)
    if solver == "penalty":
        f = p.model.differentiable() if isinstance(p.scm, LinearSCM) else None
        if f is None:
            raise ModelError(
                "solver='penalty' needs a LinearSCM and a differentiable model (a linear classifier or a "
                f"binary MLPClassifier, optionally after StandardScaler); got {type(p.scm).__name__} and "
                f"{type(model).__name__}. Use solver='search'.",
                argument="solver",
            )
        x_cf, status, calls = penalty_cf(p, f, time.perf_counter() + limit)
        return make_result(p, x_cf, method, "penalty", status, calls)
    x_cf, status, calls = search_cf(p, p.lam, rng, time.perf_counter() + limit)
    notes = (
        ("no valid counterfactual found within the bounds",) if p.bounded and status == "not_found" else ()
    )
    return make_result(p, x_cf, method, "search", status, calls, notes=notes)


def _at_fixed_lam(
    name: str, lam: float, model: Any, scm: AdditiveNoiseSCM, x: Any, target: Any, kwargs: dict[str, Any]
) -> CounterfactualResult:
    """:func:`brace` at the ``lam`` that defines the special case ``name`` (which then refuses ``lam``)."""
    if "lam" in kwargs:
        raise ParameterError(f"{name} fixes lam = {lam:g}; call brace(..., lam=...) instead.", argument="lam")
    return brace(model, scm, x, target, lam=lam, **kwargs)


def wachter(
    model: Any, scm: AdditiveNoiseSCM, x: Any, target: Any = None, **kwargs: Any
) -> CounterfactualResult:
    """Wachter et al.'s counterfactual: :func:`brace` with ``lam = 0`` (minimum ``d_X``, no causal term).

    Parameters
    ----------
    model, scm, x, target, **kwargs
        As in :func:`brace`, which takes every keyword here but ``lam`` (``immutable``, ``bounds``,
        ``solver``, ``time_limit``, ...).

    Returns
    -------
    CounterfactualResult
        With ``method="wachter"`` and ``lam=0``.

    References
    ----------
    Wachter, S., Mittelstadt, B., Russell, C. "Counterfactual explanations without opening
    the black box". Harvard JOLT 2018. As a special case of BRACE: Fatemi, P., Sharifian, E.,
    Yassaee, M. H., ICML 2025.

    Examples
    --------
    See :func:`brace`, whose example sets Wachter's counterfactual and deep backtracking
    against BRACE's on one instance.
    """
    return _at_fixed_lam("wachter", 0.0, model, scm, x, target, kwargs)


def deep_backtracking(
    model: Any, scm: AdditiveNoiseSCM, x: Any, target: Any = None, **kwargs: Any
) -> CounterfactualResult:
    """Deep backtracking (Kladny et al., 2024): :func:`brace` with ``lam = inf`` (minimum ``d_U``).

    Parameters
    ----------
    model, scm, x, target, **kwargs
        As in :func:`wachter`.

    Returns
    -------
    CounterfactualResult
        With ``method="deep_backtracking"`` and ``lam=inf``.

    References
    ----------
    Kladny, K.-R., von Kügelgen, J., Schölkopf, B., Muehlebach, M. "Deep backtracking
    counterfactuals for causally compliant explanations". TMLR 2024. As a limit of BRACE:
    Fatemi, P., Sharifian, E., Yassaee, M. H., ICML 2025.

    Examples
    --------
    See :func:`brace`, whose example compares the three on one instance.
    """
    return _at_fixed_lam("deep_backtracking", math.inf, model, scm, x, target, kwargs)


def brace_path(
    model: Any, scm: AdditiveNoiseSCM, x: Any, lams: Iterable[float], target: Any = None, **kwargs: Any
) -> list[CounterfactualResult]:
    """BRACE over a grid of ``lam`` values (the feature/noise distance trade-off curve).

    Parameters
    ----------
    model : fitted binary classifier
    scm : fitted LinearSCM or AdditiveNoiseSCM
    x : array of shape (d,), Series or one-row DataFrame
    lams : iterable of float
        The values of ``lam`` (e.g. ``[0, 1, numpy.inf]``).
    target : class label, optional
    **kwargs
        Passed to :func:`brace`.

    Returns
    -------
    list of CounterfactualResult
        One per value of ``lam``, in order.

    Examples
    --------
    See :func:`brace`, whose example runs the path from Wachter's counterfactual (``lam = 0``)
    to deep backtracking (``lam = inf``).
    """
    lam_list = list(lams) if isinstance(lams, Iterable) and not isinstance(lams, str) else []
    if not lam_list:
        raise ParameterError(
            f"lams must hold at least one value of lam (e.g. [0, 1, np.inf]), got {lams!r}.", argument="lams"
        )
    return [brace(model, scm, x, target, lam=lam, **kwargs) for lam in lam_list]


@validate_params({"method": [Options({"brace", "wachter", "deep_backtracking", "causal_recourse"})]})
def counterfactuals(
    model: Any, scm: AdditiveNoiseSCM, X: Any, *, method: str = "brace", target: Any = None, **kwargs: Any
) -> list[CounterfactualResult]:
    """One counterfactual per row of ``X`` (``method``: brace, wachter, deep_backtracking, causal_recourse).

    Parameters
    ----------
    model : fitted binary classifier
    scm : fitted LinearSCM or AdditiveNoiseSCM
    X : DataFrame or array of shape (n, d)
        The instances (a DataFrame is matched to the SCM by column name).
    method : {"brace", "wachter", "deep_backtracking", "causal_recourse"}, default "brace"
    target : class label, optional
        The desired class of every row; default: per row, the class the model does not predict.
    **kwargs
        Passed to the method (e.g. ``immutable``, ``bounds``, ``lam``); ``time_limit``
        applies per row.

    Returns
    -------
    list of CounterfactualResult
        One per row of ``X``.

    References
    ----------
    Fatemi, P., Sharifian, E., Yassaee, M. H. "A New Approach to Backtracking
    Counterfactual Explanations: A Unified Causal Framework for Efficient Model
    Interpretability". ICML 2025, PMLR 267:16273-16285.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.counterfactual import counterfactuals
    >>> from trustlab.explain.scm import LinearSCM
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500); b = a + 0.5 * rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": b})
    >>> clf = LogisticRegression().fit(X, (a + b > 0).astype(int))
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> rejected = X[clf.predict(X) == 0].iloc[:3]
    >>> results = counterfactuals(clf, scm, rejected, lam=1.0)
    >>> [r.valid for r in results]
    [True, True, True]
    """
    funcs: dict[str, Callable[..., CounterfactualResult]] = {
        "brace": brace,
        "wachter": wachter,
        "deep_backtracking": deep_backtracking,
        "causal_recourse": causal_recourse,
    }
    scm = check_scm(scm)
    if isinstance(X, pd.DataFrame):
        rows: list[Any] = [X.iloc[[i]] for i in range(len(X))]
    else:
        arr = check_numeric_array(X, "X", ndim=2)
        rows = list(arr)
    if not rows:
        raise DataError("X has no rows.", argument="X")
    return [funcs[method](model, scm, row, target, **kwargs) for row in rows]
