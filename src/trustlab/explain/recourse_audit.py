"""Recourse checks on raw tables: express a linear pipeline in its input columns, then audit.

:func:`linearize` turns a fitted model that is linear in its raw columns (e.g. the
audit's ``logistic`` pipeline: one-hot categories, imputed and standardised
numbers, logistic regression) into one coefficient per numeric column and per
category level, verified against the model's own ``decision_function``.
:func:`recourse_check` then runs the pointwise check and the confined-region
search of :mod:`trustlab.explain.recourse` with a default action set derived from
the columns (see :func:`default_action_set`), so that the regions read in the
table's own units ("age in [20, 30] and joblost in {slack_work}").
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_columns, check_frame
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.explain._inputs import as_list, check_magnitude
from trustlab.explain._linear import decision_scores
from trustlab.explain.recourse import Box, ConfinedRegionFinder, ConfinedRegions, max_reachable_score
from trustlab.explain.recourse_actions import MAX_BOUND, ActionSet, OneHot

__all__ = ["RawLinearModel", "RecourseCheck", "default_action_set", "linearize", "recourse_check"]


def _str_columns(data: pd.DataFrame, name: str) -> pd.DataFrame:
    """``data`` with its column labels as strings (how the raw model names them); unique."""
    labels = [str(c) for c in data.columns]
    if len(set(labels)) != len(labels):
        raise DataError(f"{name} has duplicate column names {labels[:10]}; make them unique.", argument=name)
    return data.set_axis(labels, axis=1)


def _check_range(data: pd.DataFrame, numeric: Sequence[str], name: str) -> None:
    """Numeric columns within the recourse solvers' range (+-``MAX_BOUND``), infinite values aside."""
    for c in numeric:
        col = data[c].to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            big = np.isfinite(col) & (np.abs(col) > MAX_BOUND)
        if big.any():
            raise DataError(
                f"{name} column {c!r} holds {float(col[big][0]):.3g}, beyond +-{MAX_BOUND:.0e}, the largest "
                "feature range the recourse solvers take; rescale it (e.g. thousands).",
                argument=name,
            )


def _is_categorical(s: pd.Series) -> bool:
    return not pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s)


@dataclass(frozen=True)
class RawLinearModel:
    """A model's score written as ``b + sum_j w_j x_j`` over numeric columns and category indicators.

    Attributes
    ----------
    names : tuple of str
        Numeric column names, then ``"column=level"`` indicators.
    coef : numpy.ndarray
    intercept : float
    numeric : tuple of str
    categorical : tuple of (str, tuple of levels)
    max_error : float
        Largest ``|decision_function - reconstruction|`` on the reference rows.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.recourse_audit import linearize
    >>> X = pd.DataFrame({"hours": [1.0, 2, 3, 4, 5, 6], "city": list("abcabc")})
    >>> X["c"] = (X.city == "a").astype(float)
    >>> raw = linearize(LogisticRegression().fit(X[["hours", "c"]], [0, 0, 0, 1, 1, 1]), X[["hours", "c"]])
    >>> Z = raw.encode(X)
    >>> Z.shape, bool(np.allclose(raw.score(X), Z @ raw.coef + raw.intercept))
    ((6, 2), True)
    """

    names: tuple[str, ...]
    coef: np.ndarray
    intercept: float
    numeric: tuple[str, ...]
    categorical: tuple[tuple[str, tuple[Any, ...]], ...]
    max_error: float

    def encode(self, data: pd.DataFrame) -> np.ndarray:
        """Rows of ``data`` as the feature matrix the coefficients apply to.

        Missing values, and category levels not seen when linearising, give NaN rows.

        Parameters
        ----------
        data : pandas.DataFrame
            Rows with the linearised columns.

        Returns
        -------
        numpy.ndarray of shape (n, len(names))
        """
        data = data.set_axis([str(c) for c in data.columns], axis=1)
        parts = [data[list(self.numeric)].to_numpy(dtype=float)] if self.numeric else []
        for col, levels in self.categorical:
            values = data[col].astype(object).to_numpy()
            ind = np.stack([values == lev for lev in levels], axis=1).astype(float)
            # missing values and levels not seen in the reference rows have no coefficient
            ind[pd.isna(values) | (ind.sum(axis=1) == 0)] = np.nan
            parts.append(ind)
        return np.hstack(parts) if parts else np.zeros((len(data), 0))

    def score(self, data: pd.DataFrame) -> np.ndarray:
        """The linear score ``b + w^T x`` of each row.

        Parameters
        ----------
        data : pandas.DataFrame

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        return self.encode(data) @ self.coef + self.intercept


@validate_params({"atol": [Interval(numbers.Real, 0, None, closed="left")]})
def linearize(model: Any, X: pd.DataFrame, *, atol: float = 1e-6) -> RawLinearModel:
    """Express a fitted binary classifier that is linear in the raw columns of ``X``.

    Numeric columns get the slope of the decision function; each category level
    (the levels seen in ``X``) gets its offset from the first row's level. The
    reconstruction is checked on up to 500 complete rows of ``X``; a model that is
    not linear (trees, kernels, interactions, splines) raises :class:`ModelError`.

    Parameters
    ----------
    model : fitted classifier with ``decision_function`` or ``predict_proba``
    X : pandas.DataFrame
        Reference rows in the columns the model was fitted on.
    atol : float
        Allowed reconstruction error (relative to ``1 + |score|``).

    Returns
    -------
    RawLinearModel

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.compose import make_column_transformer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import OneHotEncoder, StandardScaler
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame({"age": rng.integers(20, 60, 200), "job": rng.choice(["a", "b"], 200)})
    >>> y = (X.age > 40).astype(int)
    >>> pre = make_column_transformer((StandardScaler(), ["age"]), (OneHotEncoder(), ["job"]))
    >>> raw = linearize(make_pipeline(pre, LogisticRegression()).fit(X, y), X)
    >>> raw.names, raw.max_error < 1e-6
    (('age', 'job=a', 'job=b'), True)

    References
    ----------
    .. [1] Lawless, C., Weng, T., Ustun, B., Udell, M. "Understanding Fixed Predictions
       via Confined Regions". ICML 2025 (the method this feeds).
    """
    if not isinstance(X, pd.DataFrame) or len(X) == 0:
        raise DataError("X must be a non-empty pandas DataFrame of the model's input columns.", argument="X")
    if not (hasattr(model, "decision_function") or hasattr(model, "predict_proba")):
        raise ModelError(
            "model must be a fitted classifier with decision_function or predict_proba, got "
            f"{type(model).__name__}.",
            argument="model",
        )
    atol = float(atol)
    columns = X.columns  # the model's own labels; the raw model names them as strings
    X = _str_columns(X, "X")
    complete = X.dropna()
    if complete.empty:
        raise DataError("X has no row without missing values.", argument="X")
    cats = [c for c in X.columns if _is_categorical(X[c])]
    nums = [c for c in X.columns if c not in cats]
    for c in nums:
        col = X[c].to_numpy(dtype=float)
        check_magnitude(col, f"X[{c!r}]")
        if np.isinf(col).any():
            raise DataError(f"X column {c!r} contains infinite values; replace them.", argument="X")
    base = complete.iloc[[0]]
    probes = [base]
    deltas = []
    for c in nums:
        sd = float(complete[c].std()) if len(complete) > 1 else 1.0
        delta = sd if math.isfinite(sd) and sd > 0 else 1.0
        p = base.copy()
        p[c] = p[c].astype(float) + delta
        probes.append(p)
        deltas.append(delta)
    levels = {c: tuple(pd.unique(complete[c].astype(object))) for c in cats}
    for c in cats:
        for lev in levels[c]:
            p = base.copy()
            p[c] = pd.Series([lev], index=p.index, dtype=X[c].dtype)
            probes.append(p)
    try:
        f = decision_scores(model, pd.concat(probes, ignore_index=True).set_axis(columns, axis=1))
    except Exception as exc:  # a model that cannot score its own probes is unsupported
        raise ModelError(
            f"model could not score probe rows ({type(exc).__name__}: {exc}).", argument="model"
        ) from None
    f0 = f[0]
    slopes = (f[1 : 1 + len(nums)] - f0) / np.asarray(deltas)
    offsets = f[1 + len(nums) :] - f0
    intercept = float(f0 - (slopes @ base[nums].to_numpy(dtype=float).ravel() if nums else 0.0))
    names = tuple(nums) + tuple(f"{c}={lev}" for c in cats for lev in levels[c])
    raw = RawLinearModel(
        names=names,
        coef=np.concatenate([slopes, offsets]),
        intercept=intercept,
        numeric=tuple(nums),
        categorical=tuple((c, levels[c]) for c in cats),
        max_error=0.0,
    )
    ref = complete.iloc[: min(500, len(complete))]
    truth = decision_scores(model, ref.set_axis(columns, axis=1))
    err = np.abs(raw.score(ref) - truth)
    rel = float(np.max(err / (1.0 + np.abs(truth))))
    if not rel <= atol:
        raise ModelError(
            f"model is not linear in the raw columns (reconstruction error {rel:.2g}); confined regions "
            "need a linear classifier (e.g. logistic regression on one-hot and scaled columns).",
            argument="model",
        )
    return RawLinearModel(names, raw.coef, intercept, raw.numeric, raw.categorical, float(err.max()))


def default_action_set(
    raw: RawLinearModel,
    data: pd.DataFrame,
    *,
    sensitive: Iterable[str] = (),
    immutable: Iterable[str] = (),
    increase_only: Iterable[str] = (),
    decrease_only: Iterable[str] = (),
    bounds: Mapping[str, tuple[float, float]] | None = None,
) -> ActionSet:
    """The audit's default action set, stated so it can be explained in a report.

    - numeric columns: actionable in both directions anywhere in their feasible
      range (``bounds`` when given, e.g. a schema's public bounds, widened to cover
      ``data``; else the min and max of ``data``); ``int`` when every value in
      ``data`` is an integer;
    - the population region searched for confined regions: the min and max of
      ``data`` per numeric column (where individuals actually are);
    - categorical columns: one-hot groups, immutable;
    - sensitive columns and those in ``immutable``: immutable;
    - ``increase_only``/``decrease_only``: one direction.

    Fixed predictions found under it are therefore those that *no* change of the
    numeric, non-sensitive columns can flip.

    Parameters
    ----------
    raw : RawLinearModel
        From :func:`linearize`.
    data : pandas.DataFrame
        Rows whose ranges define the feasible and population regions.
    sensitive, immutable : str or sequence of str
        Columns held fixed (sensitive columns need not be model inputs).
    increase_only, decrease_only : str or sequence of str
        Columns allowed to move one way only.
    bounds : mapping of str to (float, float), optional
        Public feasible ranges (widened to cover ``data``).

    Returns
    -------
    ActionSet

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> from trustlab.explain.recourse_audit import default_action_set, linearize
    >>> X = pd.DataFrame({"age": [20, 30, 40, 50], "debt": [1.5, 0.5, 2.0, 1.0]})
    >>> raw = linearize(LogisticRegression().fit(X, [0, 0, 1, 1]), X)
    >>> default_action_set(raw, X, immutable=["age"]).to_frame()[["dtype", "actionable", "lb", "ub"]]
          dtype  actionable    lb    ub
    age     int       False  20.0  50.0
    debt  float        True   0.5   2.0
    """
    if not isinstance(raw, RawLinearModel):
        raise ParameterError(
            f"raw must be a RawLinearModel from linearize(model, X), got {type(raw).__name__}.",
            argument="raw",
        )
    data = _str_columns(check_frame(data, "data"), "data")
    check_columns(data, list(raw.numeric) + [c for c, _ in raw.categorical], "data")
    _check_range(data, raw.numeric, "data")
    # sensitive columns need not be model inputs; the others must name columns of the data
    imm, inc, dec = (
        set(map(str, check_columns(data, [str(c) for c in as_list(v, arg)], arg)))
        for v, arg in (
            (immutable, "immutable"),
            (increase_only, "increase_only"),
            (decrease_only, "decrease_only"),
        )
    )
    sens = set(map(str, as_list(sensitive, "sensitive")))
    names = list(raw.names)
    d = len(names)
    lb, ub = np.zeros(d), np.ones(d)
    plb, pub = np.zeros(d), np.ones(d)
    dtype = ["bool"] * d
    actionable = np.zeros(d, dtype=bool)
    step_lb, step_ub = np.full(d, -np.inf), np.full(d, np.inf)
    for j, c in enumerate(raw.numeric):
        col = data[c].to_numpy(dtype=float)
        col = col[np.isfinite(col)]
        dmin, dmax = float(col.min()), float(col.max())
        lo, hi = dmin, dmax
        if bounds and c in bounds and bounds[c] is not None:
            try:
                lo, hi = (float(v) for v in bounds[c])
            except (TypeError, ValueError):
                raise ParameterError(
                    f"bounds[{c!r}] must be a pair (lower, upper) of numbers, got {bounds[c]!r}.",
                    argument=f"bounds[{c!r}]",
                ) from None
            lo, hi = min(lo, dmin), max(hi, dmax)
        integral = bool(np.all(col == np.round(col)))
        dtype[j] = "int" if integral else "float"
        lb[j], ub[j] = (math.floor(lo), math.ceil(hi)) if integral else (lo, hi)
        plb[j], pub[j] = (math.floor(dmin), math.ceil(dmax)) if integral else (dmin, dmax)
        actionable[j] = c not in sens and c not in imm
        if c in inc:
            step_lb[j] = 0.0
        if c in dec:
            step_ub[j] = 0.0
    constraints = []
    k = len(raw.numeric)
    for _col, levels in raw.categorical:
        constraints.append(OneHot(tuple(names[k : k + len(levels)])))
        k += len(levels)
    return ActionSet(
        names,
        lb,
        ub,
        dtype=dtype,
        actionable=actionable,
        step_lb=step_lb,
        step_ub=step_ub,
        population_lb=plb,
        population_ub=pub,
        constraints=constraints,
    )


def describe_box(box: Box, raw: RawLinearModel) -> list[list[Any]]:
    """The box's conditions in the table's terms: ``[column, "in", value]`` rows.

    Numeric columns give ``[lower, upper]``; a categorical column gives the list of
    levels the box allows (only columns the box restricts are listed).
    """
    out: list[list[Any]] = []
    k = len(raw.numeric)
    for j, c in enumerate(raw.numeric):
        if box.restricted[j]:
            out.append([c, "in", [float(box.lower[j]), float(box.upper[j])]])
    for c, levels in raw.categorical:
        lo, hi = box.lower[k : k + len(levels)], box.upper[k : k + len(levels)]
        k += len(levels)
        if np.any(lo >= 1):
            allowed = [levels[int(np.argmax(lo))]]
        else:
            allowed = [lev for lev, h in zip(levels, hi, strict=True) if h >= 1]
        if len(allowed) < len(levels):
            out.append([c, "in", [str(a) for a in allowed]])
    return out


def _format(conditions: Sequence[Sequence[Any]]) -> str:
    parts = []
    for c, _, v in conditions:
        if v and isinstance(v[0], str):
            parts.append(f"{c} in {{{', '.join(v)}}}")
        else:
            parts.append(f"{c} in [{v[0]:.4g}, {v[1]:.4g}]")
    return " and ".join(parts) if parts else "the whole population region"


@dataclass(frozen=True)
class RecourseCheck:
    """Outcome of :func:`recourse_check`: pointwise figures and the confined regions found.

    Attributes
    ----------
    n_checked : int
        Rows of the evaluation table checked (rows with missing values are skipped).
    n_negative, n_fixed : int
        Rows predicted negative, and those with no recourse under the action set.
    regions : ConfinedRegions
    descriptions : tuple of str
    conditions : tuple of list
        Per region, its conditions as ``[column, "in", bounds or levels]``.
    n_inside : tuple of int
        Per region, the evaluation rows inside it.
    n_fixed_covered : int
        Fixed evaluation rows inside some region.
    consistent : bool
        Whether every evaluation row inside a region is fixed pointwise.
    n_skipped : int
        Evaluation rows left out (missing values or unseen category levels).
    actionable, immutable : tuple of str
        The action set's actionable features and immutable columns.
    max_error : float
        The linearisation's largest reconstruction error.

    See Also
    --------
    recourse_check : computes it (with an example).
    """

    n_checked: int
    n_skipped: int
    n_negative: int
    n_fixed: int
    regions: ConfinedRegions
    descriptions: tuple[str, ...]
    conditions: tuple[list[list[Any]], ...]
    n_inside: tuple[int, ...]
    n_fixed_covered: int
    consistent: bool
    actionable: tuple[str, ...]
    immutable: tuple[str, ...]
    max_error: float

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able figures (for the audit report).

        Returns
        -------
        dict
            ``status``, ``certified``, counts and shares, one entry per region
            (``description``, ``conditions``, ``n_rows``, ``verified``, ``solve_time``), the
            total solve time, the actionable and immutable columns, the linearisation error.
        """
        return {
            "status": self.regions.status,
            "certified": self.regions.certified,
            "n_checked": self.n_checked,
            "n_skipped": self.n_skipped,
            "n_negative": self.n_negative,
            "n_fixed": self.n_fixed,
            "share_fixed": self.n_fixed / self.n_checked if self.n_checked else float("nan"),
            "n_fixed_covered": self.n_fixed_covered,
            "consistent": self.consistent,
            "regions": [
                {
                    "description": desc,
                    "conditions": cond,
                    "n_rows": n,
                    "verified": bool(b.verified),
                    "solve_time": round(float(b.solve_time), 3),
                }
                for desc, cond, n, b in zip(
                    self.descriptions, self.conditions, self.n_inside, self.regions.boxes, strict=True
                )
            ],
            "solve_time": round(float(sum(self.regions.solve_times)), 3),
            "actionable": list(self.actionable),
            "immutable": list(self.immutable),
            "linearization_error": self.max_error,
        }


@validate_params(
    {
        "max_regions": [Interval(numbers.Integral, 1, None, closed="left")],
        "time_limit": [Interval(numbers.Real, 0, None, closed="neither")],
    }
)
def recourse_check(
    model: Any,
    reference: pd.DataFrame,
    evaluate: pd.DataFrame,
    *,
    sensitive: Iterable[str] = (),
    immutable: Iterable[str] = (),
    increase_only: Iterable[str] = (),
    decrease_only: Iterable[str] = (),
    bounds: Mapping[str, tuple[float, float]] | None = None,
    max_regions: int = 5,
    time_limit: float = 5.0,
) -> RecourseCheck:
    """Pointwise recourse on ``evaluate`` and confined regions of the population region.

    The model is linearised on ``reference`` (the training rows), the action set is
    :func:`default_action_set` over ``reference`` and ``evaluate`` together, and up
    to ``max_regions`` confined regions are searched within ``time_limit`` seconds.

    Parameters
    ----------
    model : fitted binary classifier, linear in the raw columns
    reference : pandas.DataFrame
        The rows the model is linearised on (e.g. the training rows).
    evaluate : pandas.DataFrame
        The rows checked pointwise (rows with missing values are skipped).
    sensitive, immutable, increase_only, decrease_only, bounds
        As in :func:`default_action_set`.
    max_regions : int, default 5
    time_limit : float, default 5.0
        Seconds for the confined-region search (all regions together).

    Returns
    -------
    RecourseCheck

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame({"income": rng.integers(0, 10, 300), "group": rng.integers(0, 2, 300)})
    >>> y = (X.income + 8 * X.group > 11).astype(int)
    >>> model = LogisticRegression(C=100).fit(X, y)
    >>> res = recourse_check(model, X, X, sensitive=["group"])
    >>> res.n_fixed, res.n_fixed_covered, res.consistent, res.descriptions
    (141, 141, True, ('group in [0, 0]',))
    """
    raw = linearize(model, reference)
    _check_range(_str_columns(reference, "reference"), raw.numeric, "reference")
    evaluate = check_frame(evaluate, "evaluate")
    check_columns(evaluate, list(reference.columns), "evaluate")
    _check_range(_str_columns(evaluate, "evaluate"), raw.numeric, "evaluate")
    table = pd.concat([reference, evaluate])
    A = default_action_set(
        raw,
        table,
        sensitive=sensitive,
        immutable=immutable,
        increase_only=increase_only,
        decrease_only=decrease_only,
        bounds=bounds,
    )
    Z = raw.encode(evaluate)
    ok = np.all(np.isfinite(Z), axis=1)
    Z = Z[ok]
    score = Z @ raw.coef + raw.intercept
    reach = max_reachable_score(Z, raw.coef, A, intercept=raw.intercept) if len(Z) else np.zeros(0)
    fixed = reach <= 0
    regions = (
        ConfinedRegionFinder(A, time_limit=time_limit).fit(raw.coef, raw.intercept).enumerate(max_regions)
    )
    inside = [b.contains(Z) for b in regions.boxes]
    covered = np.any(inside, axis=0) if inside else np.zeros(len(Z), bool)
    conds = tuple(describe_box(b, raw) for b in regions.boxes)
    return RecourseCheck(
        n_checked=len(Z),
        n_skipped=int((~ok).sum()),
        n_negative=int((score <= 0).sum()),
        n_fixed=int(fixed.sum()),
        regions=regions,
        descriptions=tuple(_format(c) for c in conds),
        conditions=conds,
        n_inside=tuple(int(m.sum()) for m in inside),
        n_fixed_covered=int((covered & fixed).sum()),
        consistent=bool(np.all(fixed[covered])),
        actionable=tuple(n for n, a in zip(A.names, A.actionable, strict=True) if a),
        immutable=tuple(
            dict.fromkeys(n.split("=")[0] for n, a in zip(A.names, A.actionable, strict=True) if not a)
        ),
        max_error=raw.max_error,
    )
