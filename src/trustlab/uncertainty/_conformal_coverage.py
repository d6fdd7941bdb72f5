"""Coverage of conformal sets per group, with intervals, and the one-call report.

Private to :mod:`trustlab.uncertainty.conformal`, which re-exports
:func:`group_coverage`, :func:`weighted_coverage_deviation` and :func:`conformal_coverage`.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.uncertainty._conformal_groups import _as_group_frame, _weights
from trustlab.uncertainty._conformal_inputs import _is_classifier
from trustlab.uncertainty._conformal_kandinsky import KandinskyConformal


def _check_covered(covered: Any) -> np.ndarray:
    c = np.asarray(covered)
    if c.ndim != 1 or c.size == 0:
        raise DataError(
            f"covered must be a non-empty 1-D array of booleans, got shape {c.shape}.", argument="covered"
        )
    if c.dtype != bool:
        if not np.isin(c, (0, 1)).all():
            raise DataError(
                "covered must hold booleans (or 0/1): whether each label is in its set.", argument="covered"
            )
        c = c.astype(bool)
    return c


@validate_params({"alpha": [Interval(numbers.Real, 0, 1, closed="neither")]})
def weighted_coverage_deviation(covered: Any, weights: Any, alpha: float) -> np.ndarray:
    """Signed weighted coverage deviation per group: ``mean_i w_ij (1{covered_i} - (1 - alpha))``.

    The quantity Kandinsky conformal prediction bounds (its absolute value is the
    paper's wCD); dividing by the group mass ``mean_i w_ij`` gives the coverage gap
    inside the group.

    Parameters
    ----------
    covered : array-like of bool, shape (n,)
        Whether each label is in its prediction set.
    weights : array-like of shape (n, d) or DataFrame
        Group weights in [0, 1].
    alpha : float in (0, 1)
        Miscoverage level.

    Returns
    -------
    numpy.ndarray of shape (d,)
        One deviation per group (positive: over-coverage).

    References
    ----------
    K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal Prediction: Beyond Class- and
    Covariate-Conditional Coverage", ICML 2025 (the weighted coverage deviation).

    Examples
    --------
    >>> weighted_coverage_deviation([True, True, False, True], [[1, 0], [1, 1], [0, 1], [0, 1]], 0.25)
    array([ 0.125 , -0.0625])
    """
    c = _check_covered(covered)
    w, _ = _weights(
        np.asarray(weights, dtype=float) if not isinstance(weights, pd.DataFrame) else weights,
        c.size,
        "weights",
    )
    return np.asarray((w * (c.astype(float) - (1.0 - float(alpha)))[:, None]).mean(axis=0))


@validate_params(
    {
        "alpha": [Interval(numbers.Real, 0, 1, closed="neither")],
        "confidence": [Interval(numbers.Real, 0, 1, closed="neither")],
        "tolerance": [Interval(numbers.Real, 0, 1, closed="left")],
    }
)
def group_coverage(
    covered: Any,
    groups: Any = None,
    *,
    set_size: Any = None,
    alpha: float = 0.1,
    confidence: float = 0.95,
    tolerance: float = 0.0,
) -> pd.DataFrame:
    """Coverage and mean set size of conformal sets, overall and per group, with intervals.

    A pure function of the coverage indicators (e.g. :meth:`KandinskyConformal.covered`)
    and set sizes; groups may overlap and have fractional weights. For a group with
    weights ``w``: coverage ``sum w c / sum w`` with a Wilson score interval at the
    effective size ``n_eff = (sum w)^2 / sum w^2`` (Kish; the row count for an indicator
    group), and mean set size with a normal interval on the weighted standard error.

    Parameters
    ----------
    covered : array-like of bool, shape (n,)
        Whether each test label is in its prediction set.
    groups : DataFrame, array of shape (n, d), 1-D labels or None
        Group weights in [0, 1] (columns = groups, may overlap), or one label per row (a
        partition; one group per value). ``None``: only the overall row.
    set_size : array-like of shape (n,), optional
        Size of each prediction set (number of classes, or interval length).
    alpha : float in (0, 1), default=0.1
        Target miscoverage; the target coverage is ``1 - alpha``.
    confidence : float in (0, 1), default=0.95
        Level of the intervals.
    tolerance : float in [0, 1), default=0.0
        Shortfall tolerated before a group is flagged: ``status`` is ``"short"`` when
        the interval lies below ``1 - alpha - tolerance``, ``"ok"`` when it lies at or
        above it, ``"inconclusive"`` when it straddles it.

    Returns
    -------
    pandas.DataFrame
        Indexed by group (first row ``"all"``): ``weight`` (sum of weights), ``n_eff``,
        ``coverage``, ``coverage_low``, ``coverage_high``, ``target``, ``gap``
        (coverage - target), ``mean_set_size``, ``set_size_low``, ``set_size_high``
        (NaN without ``set_size``) and ``status``.

    Raises
    ------
    DataError
        Weights outside [0, 1], a group with total weight 0, mismatched lengths.

    References
    ----------
    E. B. Wilson, "Probable inference, the law of succession, and statistical inference",
    JASA 1927 (the interval); K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal
    Prediction", ICML 2025 (group-conditional coverage).

    Examples
    --------
    >>> covered = np.array([1, 1, 1, 0, 1, 1, 0, 1], dtype=bool)
    >>> groups = pd.DataFrame({"a": [1, 1, 1, 1, 0, 0, 0, 0], "b": [0, 0, 1, 1, 1, 1, 1, 1]})
    >>> table = group_coverage(covered, groups, set_size=np.arange(8.0), alpha=0.2)
    >>> table.index.tolist(), table["coverage"].round(3).tolist(), table["mean_set_size"].tolist()
    (['all', 'a', 'b'], [0.75, 0.75, 0.667], [3.5, 1.5, 4.5])
    >>> table["status"].tolist()  # 8 rows cannot show coverage >= 0.8
    ['inconclusive', 'inconclusive', 'inconclusive']
    """
    c = _check_covered(covered)
    n = c.size
    w, names = _weights(groups, n)
    w = np.column_stack([np.ones(n), w])
    names = ["all", *names]
    if len(set(names)) != len(names):
        raise DataError(f"groups has duplicated names {names[1:]} (or one named 'all').", argument="groups")
    mass = w.sum(axis=0)
    if (mass <= 0).any():
        j = int(np.argmax(mass <= 0))
        raise DataError(
            f"group {names[j]!r} has no members in this data (total weight 0); drop it or add rows from it.",
            argument="groups",
        )
    size = None
    if set_size is not None:
        size = check_numeric_array(set_size, "set_size", ndim=1)
        if size.shape[0] != n:
            raise DataError(f"set_size has {size.shape[0]} rows, expected {n}.", argument="set_size")
    z = float(stats.norm.ppf(0.5 + confidence / 2.0))
    n_eff = mass**2 / (w**2).sum(axis=0)
    cov = (w * c[:, None]).sum(axis=0) / mass
    denom = 1.0 + z * z / n_eff
    centre = (cov + z * z / (2 * n_eff)) / denom
    half = z * np.sqrt(cov * (1 - cov) / n_eff + z * z / (4 * n_eff**2)) / denom
    low, high = np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
    target = 1.0 - float(alpha)
    floor = target - float(tolerance)
    status = np.where(high < floor, "short", np.where(low >= floor, "ok", "inconclusive"))
    if size is not None:
        mean = (w * size[:, None]).sum(axis=0) / mass
        var = (w * (size[:, None] - mean) ** 2).sum(axis=0) / mass
        se = np.sqrt(var / np.maximum(n_eff - 1.0, 1.0))
        s_low, s_high = mean - z * se, mean + z * se
    else:
        mean = s_low = s_high = np.full(len(names), np.nan)
    return pd.DataFrame(
        {
            "weight": mass,
            "n_eff": n_eff,
            "coverage": cov,
            "coverage_low": low,
            "coverage_high": high,
            "target": target,
            "gap": cov - target,
            "mean_set_size": mean,
            "set_size_low": s_low,
            "set_size_high": s_high,
            "status": status,
        },
        index=pd.Index(names, name="group"),
    )


@validate_params(
    {
        "alpha": [Interval(numbers.Real, 0, 1, closed="neither")],
        "method": [Options({"kandinsky", "split"})],
        "label_groups": ["boolean"],
        "confidence": [Interval(numbers.Real, 0, 1, closed="neither")],
        "tolerance": [Interval(numbers.Real, 0, 1, closed="left")],
        "random_state": ["random_state"],
    }
)
def conformal_coverage(
    estimator: Any,
    X_cal: Any,
    y_cal: Any,
    X_test: Any,
    y_test: Any,
    *,
    groups_cal: Any = None,
    groups_test: Any = None,
    alpha: float = 0.1,
    method: str = "kandinsky",
    label_groups: bool = True,
    confidence: float = 0.95,
    tolerance: float = 0.0,
    random_state: Any = None,
) -> pd.DataFrame:
    """Calibrate conformal sets for a fitted model and report coverage per group, in one call.

    The groups may live outside the model's inputs (e.g. sensitive columns the model does
    not see): pass them row-aligned as ``groups_cal`` and ``groups_test``. Numeric
    columns in [0, 1] are weights; other columns are categorical and become one
    indicator group per value, plus one per combination of values when there are
    several columns (overlapping groups). With ``method="kandinsky"`` the sets are
    calibrated with :class:`KandinskyConformal` on those groups (and, for classifiers
    with ``label_groups=True``, on the class of the label, i.e. class-conditional
    coverage as well); ``method="split"`` calibrates plain split conformal for
    comparison. Coverage and mean set size per group (and per class) with intervals come
    from :func:`group_coverage`.

    Parameters
    ----------
    estimator : fitted estimator
        Classifier with ``predict_proba`` or regressor.
    X_cal, y_cal : array-like or DataFrame, array-like
        Calibration data (not used to train ``estimator``).
    X_test, y_test : array-like or DataFrame, array-like
        Evaluation data.
    groups_cal, groups_test : DataFrame, Series, array or None
        Row-aligned group columns or weights for the calibration and test rows (both or
        neither).
    alpha : float in (0, 1), default=0.1
        Target miscoverage.
    method : {"kandinsky", "split"}, default="kandinsky"
        Calibration method.
    label_groups : bool, default=True
        Classifiers: also target, and report, coverage per class of the label.
    confidence : float in (0, 1), default=0.95
        Level of the intervals.
    tolerance : float in [0, 1), default=0.0
        Shortfall tolerated by the ``status`` column (see :func:`group_coverage`).
    random_state : None, int or numpy Generator
        Tie-breaking noise.

    Returns
    -------
    pandas.DataFrame
        :func:`group_coverage`'s table (rows ``all``, each group, and ``y=<class>``).

    Raises
    ------
    DataError
        Groups without calibration members, weights outside [0, 1], mismatched rows.

    References
    ----------
    K. Bairaktari, J. Wu, Z. S. Wu, "Kandinsky Conformal Prediction: Beyond Class- and
    Covariate-Conditional Coverage", ICML 2025.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((3000, 3)); y = (X[:, 0] + rng.standard_normal(3000) > 0).astype(int)
    >>> sex = pd.Series(rng.choice(["f", "m"], 3000), name="sex")
    >>> model = LogisticRegression().fit(X[:1000], y[:1000])
    >>> table = conformal_coverage(model, X[1000:2000], y[1000:2000], X[2000:], y[2000:],
    ...                            groups_cal=sex[1000:2000], groups_test=sex[2000:], random_state=0)
    >>> table.index.tolist()
    ['all', 'sex=f', 'sex=m', 'y=0', 'y=1']
    >>> bool((table["coverage"] - 0.9).abs().max() < 0.06)
    True
    """
    if (groups_cal is None) != (groups_test is None):
        raise DataError(
            "pass groups for both the calibration and the test rows (groups_cal and groups_test), "
            "or neither.",
            argument="groups_cal" if groups_cal is None else "groups_test",
        )
    if X_test is X_cal:  # the group lookup below tells the two apart by identity
        X_test = X_test.copy() if hasattr(X_test, "copy") else list(X_test)
    n_cal = KandinskyConformal._n_rows(X_cal, "X_cal")
    n_test = KandinskyConformal._n_rows(X_test, "X_test")
    g_cal = _as_group_frame(groups_cal, n_cal, "groups_cal")
    g_test = _as_group_frame(groups_test, n_test, "groups_test")
    missing = [c for c in g_cal.columns if c not in g_test.columns]
    for c in missing:  # a value seen only in calibration: an empty test group
        g_test[c] = 0.0
    extra = [c for c in g_test.columns if c not in g_cal.columns]
    if extra:
        raise DataError(
            f"groups {extra} occur in the test rows but not in the calibration rows; their coverage "
            "cannot be calibrated: add calibration rows from them or merge them into other groups.",
            argument="groups_cal",
        )
    g_test = g_test[list(g_cal.columns)]
    classification = _is_classifier(estimator)
    table_by_x = {id(X_cal): g_cal.to_numpy(float), id(X_test): g_test.to_numpy(float)}
    classes = np.asarray(estimator.classes_) if classification else None
    use_labels = classification and label_groups

    label_names = [f"y={c}" for c in classes.tolist()] if use_labels and classes is not None else []
    names = [str(c) for c in g_cal.columns] + label_names

    def features(X: Any, y: Any) -> pd.DataFrame:
        cols = [table_by_x[id(X)]]
        if use_labels:
            assert classes is not None
            cols.append((np.asarray(y)[:, None] == classes[None, :]).astype(float))
        return pd.DataFrame(np.column_stack(cols), columns=names)

    cp = KandinskyConformal(
        estimator,
        group_features=features if method == "kandinsky" else None,
        alpha=alpha,
        random_state=random_state,
    )
    try:
        cp.fit(X_cal, y_cal)
    except DataError as exc:
        if exc.argument == "group_features":
            raise DataError(str(exc), argument="groups_cal") from None
        raise
    covered = cp.covered(X_test, y_test)
    sizes = cp.set_size(X_test)
    report = g_test.copy()
    report.index = pd.RangeIndex(n_test)
    if use_labels:
        assert classes is not None
        yt = np.asarray(y_test)
        for c in classes.tolist():
            report[f"y={c}"] = (yt == c).astype(float)
    report = report.loc[:, report.sum(axis=0) > 0]
    return group_coverage(
        covered,
        report if report.shape[1] else None,
        set_size=sizes,
        alpha=alpha,
        confidence=confidence,
        tolerance=tolerance,
    )
