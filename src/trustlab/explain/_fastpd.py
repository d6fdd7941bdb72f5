"""The FastPD estimator (Liu et al., ICML 2025); see :mod:`trustlab.explain.fastpd`."""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np
import pandas
import pandas as pd

from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab._validation import check_numeric_array, check_positive_int, make_generator
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.explain._fastpd_inputs import (
    background_codes,
    curve_grid,
    finite_input,
    frame_codes,
    model_frame,
    subset_indices,
)
from trustlab.explain._fastpd_leaves import LeafTables
from trustlab.explain._fastpd_state import N_MISSING, check_state
from trustlab.explain._pd_display import PDCurveDisplay
from trustlab.explain._trees import TreeEnsemble, ensemble_from_model

__all__ = ["FastPD"]


class FastPD(ParamsValidationMixin):
    """Partial dependence functions, interventional SHAP and interactions of a tree ensemble.

    FastPD estimates, for a fitted tree ensemble ``m`` and a background sample, the
    empirical interventional partial dependence function of *any* feature subset
    ``S``, ``v_S(x) = mean_i m(x_S, X_i,-S)``, in time linear in the numbers of
    background and query rows; from all of them it builds the functional
    decomposition ``m(x) = sum_S m_S(x_S)`` (main effects and interactions of any
    order) and interventional SHAP values ``phi_k = sum_{S ∋ k} m_S / |S|``.
    Unlike path-dependent TreeSHAP, the estimate is consistent for the
    interventional quantity when features are correlated.

    Parameters
    ----------
    model : fitted tree model
        XGBoost, LightGBM or scikit-learn tree ensemble (regression or binary
        classification). Boosted models are explained in margin space (log-odds
        for classifiers); forests and single trees of classifiers in class-1
        probability space.
    max_interaction : int or None, default=None
        Highest order of the components returned by :meth:`components` (None: all
        orders, so that they add up to the prediction). SHAP values are always
        exact (all orders); see Notes.
    max_background : int or None, default=None
        Use at most this many background rows (a random subsample drawn with
        ``random_state``); None uses all of them.
    weights : {"empirical", "path"}, default="empirical"
        ``"empirical"``: the background decides ``p_l`` (FastPD). ``"path"``: the
        training cover ratios along the path decide it, which reproduces
        path-dependent TreeSHAP and scikit-learn's ``method="recursion"`` partial
        dependence (the background is then only used for grids).
    random_state : int, Generator or None, default=0
        Seed of the background subsample.

    Attributes
    ----------
    expected_value_ : float
        Mean raw prediction over the background, ``v_∅`` (the SHAP base value and
        the decomposition's intercept).
    background_ : ndarray or DataFrame of shape (n_background, n_features)
        The background rows used (a DataFrame of the given values for a
        HistGradientBoosting model fitted on string categories).
    feature_names_in_ : ndarray of str
        Feature names (from the DataFrame given to ``fit`` or the model).
    n_features_in_ : int
        Number of features.
    n_leaves_ : int
        Number of leaves over all trees.

    Notes
    -----
    Divergences from the paper's R package ``glex``: SHAP values are always
    computed from all interaction orders (``glex`` truncates them at
    ``max_interaction``, which makes them approximate); the background is given
    to :meth:`fit` rather than to the constructor, following the scikit-learn
    contract. There is no limit on the number of features (the paper's code uses
    64-bit masks); the cost is exponential only in the number of distinct
    features on one path.

    Extensions beyond the paper (which treats numerical splits): native
    categorical splits (HistGradientBoosting, LightGBM, XGBoost) constrain a leaf
    to a *set* of categories instead of an interval, and missing values (in the
    background and the queries) follow each split's missing-value direction.
    Both only change which background rows satisfy a leaf's path, so the
    algorithm and its guarantees are unchanged. :meth:`pd_curve` evaluates a
    categorical feature at its categories. A HistGradientBoosting model fitted on
    string (or ``category``) columns is explained on DataFrames of the user's
    values, coded as the model's own ``OrdinalEncoder`` codes them (missing and
    unseen values take the missing-value side); ``pd_curve`` then returns the
    user's category values as its grid.

    References
    ----------
    .. [1] Liu, J., Steensgaard, T., Wright, M. N., Pfister, N., Hiabu, M. "Fast
       Estimation of Partial Dependence Functions using Trees". ICML 2025, PMLR 267.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = X[:, 0] + X[:, 0] * X[:, 1]
    >>> model = GradientBoostingRegressor(n_estimators=20, max_depth=3).fit(X, y)
    >>> fpd = FastPD(model).fit(X)
    >>> phi = fpd.shap_values(X[:5])
    >>> bool(np.allclose(fpd.expected_value_ + phi.sum(axis=1), model.predict(X[:5])))
    True

    Native categorical splits (here HistGradientBoosting's on column 0, coded 0..3):

    >>> from sklearn.ensemble import HistGradientBoostingRegressor
    >>> Xc = np.c_[rng.integers(0, 4, 200), rng.normal(size=200)]
    >>> yc = np.array([0.0, 2.0, -1.0, 1.0])[Xc[:, 0].astype(int)] + Xc[:, 1]
    >>> hgb = HistGradientBoostingRegressor(max_iter=20, categorical_features=[0]).fit(Xc, yc)
    >>> grid, curve = FastPD(hgb).fit(Xc).pd_curve(0)
    >>> grid.tolist()  # the categories
    [0.0, 1.0, 2.0, 3.0]
    >>> [int(i) for i in np.argsort(curve)]  # categories from lowest to highest PD
    [2, 0, 3, 1]
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "model": "no_validation",  # read by ensemble_from_model, which names what it accepts
        "max_interaction": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "max_background": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "weights": [Options(("empirical", "path"))],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        model: Any,
        *,
        max_interaction: int | None = None,
        max_background: int | None = None,
        weights: str = "empirical",
        random_state: Any = 0,
    ) -> None:
        self.model = model
        self.max_interaction = max_interaction
        self.max_background = max_background
        self.weights = weights
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any = None) -> FastPD:
        """Read the trees and precompute every leaf's background table from ``X``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_background, n_features)
            Background rows. Missing values (NaN) are allowed and follow each
            split's missing-value direction, as in the model. A DataFrame with the
            model's columns (matched by name) when the model was fitted on string
            categories; the same then holds for every ``X`` of the other methods. The paper's default is
            the data being explained, or the training data.
        y : ignored

        Returns
        -------
        self : FastPD
        """
        self._validate_params()
        ens = ensemble_from_model(self.model)
        Xb, frame, names = background_codes(X, ens, "background")
        rng = make_generator(self.random_state)
        if self.max_background is not None and len(Xb) > self.max_background:
            idx = np.sort(rng.choice(len(Xb), size=self.max_background, replace=False))
            Xb = Xb[idx]
            if frame is not None:
                frame = frame.iloc[idx]
        leaves = LeafTables(ens)
        Xc = finite_input(Xb, ens, "background", nan_ok=True, model=type(self.model).__name__)
        counts = leaves.background_counts(Xc) if self.weights == "empirical" else None
        # The probe measures the offset: the first rows and the first rows with missing values.
        nan_rows = np.nonzero(np.isnan(Xb).any(axis=1))[0][:N_MISSING]
        probe_idx = np.union1d(np.arange(min(len(Xb), 64)), nan_rows)
        probe_frame = None if frame is None else frame.iloc[probe_idx]
        self._fit_tables(
            ens,
            leaves,
            names,
            (counts, len(Xb)),
            (Xb, frame),
            (Xb[probe_idx], probe_frame),
            bool(len(nan_rows)),
        )
        return self

    def fit_background_state(self, state: Any) -> FastPD:
        """Fit from background statistics merged over partitions, instead of background rows.

        ``state`` is the result of :func:`trustlab.compute.compute` of
        :class:`trustlab.compute.trees.FastPDBackground` with this model: the counts of
        background rows by leaf code, which is all the estimate reads of the background,
        summed over partitions (of a pandas or Dask DataFrame that need not fit in
        memory). PD functions, SHAP values and components equal those of :meth:`fit` on
        the same rows (up to float rounding of the measured offset). The background's
        individual rows are replaced by the state's hash sample (``n_sample`` rows, the
        same whatever the partitioning): it is ``background_``, the default grid of
        :meth:`pd_curve` and the probe of the model's offset. ``max_background`` does not
        apply (every row is counted).

        Parameters
        ----------
        state : FastPDBackgroundState
            Merged background statistics of this model.

        Returns
        -------
        self : FastPD

        Raises
        ------
        ParameterError
            ``state`` is not a FastPDBackgroundState.
        DataError
            ``state`` was computed for another model, counts no rows, or is inconsistent.

        Examples
        --------
        >>> import numpy as np, pandas as pd
        >>> from sklearn.ensemble import GradientBoostingRegressor
        >>> from trustlab.compute import compute
        >>> from trustlab.compute.trees import FastPDBackground
        >>> rng = np.random.default_rng(0)
        >>> X = pd.DataFrame(rng.normal(size=(300, 2)), columns=["a", "b"])
        >>> model = GradientBoostingRegressor(n_estimators=10, max_depth=2).fit(X, X.a * X.b)
        >>> state = compute(FastPDBackground(model), X, chunksize=70)  # 5 partitions, merged
        >>> merged = FastPD(model).fit_background_state(state)
        >>> whole = FastPD(model).fit(X)
        >>> bool(np.allclose(merged.shap_values(X[:5]), whole.shap_values(X[:5]), rtol=0, atol=1e-12))
        True
        """
        self._validate_params()
        ens = ensemble_from_model(self.model)
        leaves = LeafTables(ens)
        st = check_state(state, leaves)
        sample = st.sample
        probe = np.concatenate([st.sample[:64], st.missing])
        probe_frame = None
        if st.sample_frame is not None and st.missing_frame is not None:
            probe_frame = pd.concat([st.sample_frame.iloc[:64], st.missing_frame], ignore_index=True)
        counts = list(st.counts) if self.weights == "empirical" else None
        names = None if st.feature_names is None else list(st.feature_names)
        self._fit_tables(
            ens,
            leaves,
            names,
            (counts, st.n_rows),
            (sample, st.sample_frame),
            (probe, probe_frame),
            st.n_missing > 0,
        )
        return self

    def _fit_tables(
        self,
        ens: TreeEnsemble,
        leaves: LeafTables,
        names: list[Any] | None,
        counts: tuple[list[np.ndarray] | None, int],
        background: tuple[np.ndarray, pd.DataFrame | None],
        probe_rows: tuple[np.ndarray, pd.DataFrame | None],
        has_missing: bool,
    ) -> None:
        """Set the fitted state from background counts (``fit`` and ``fit_background_state``)."""
        Xb, frame = background
        probe, probe_frame = probe_rows
        self._ens: TreeEnsemble = ens
        self.feature_names_in_ = np.asarray(
            names if names is not None else (ens.feature_names or [f"x{j}" for j in range(ens.n_features)]),
            dtype=object,
        )
        self.n_features_in_ = ens.n_features
        # with string categories, the background as given (the user's values)
        self.background_ = Xb if frame is None else frame
        self._background_codes = Xb
        self._leaves = leaves
        self.n_leaves_ = leaves.n_leaves
        v_empty = leaves.fit_counts(counts[0], counts[1], self.weights)
        # The offset (base score, init estimator) is measured, not read from the
        # model's parameters: prediction minus the sum of the parsed trees.
        # The probe includes rows with missing values, which checks their routing.
        try:
            if probe_frame is None:
                raw = ens.predict_raw(probe)
            else:  # the model's own encoder reads the user's values
                given: Any = probe_frame if ens.feature_names is not None else probe_frame.to_numpy()
                raw = ens.predict_raw(given)
        except ValueError as exc:
            if not has_missing:
                raise  # pragma: no cover - the model rejects its own kind of input
            raise DataError(
                f"background contains NaN but the model does not accept missing values "
                f"({type(self.model).__name__}: {str(exc)[:120]}); impute them first.",
                argument="background",
            ) from None
        diff = raw - leaves.tree_sum(self._cast(probe))
        self._offset = float(np.mean(diff))
        scale = 1.0 + float(np.max(np.abs(raw)))
        if float(np.max(np.abs(diff - self._offset))) > 1e-4 * scale:
            raise DataError(  # pragma: no cover - a parsing bug, not user input
                "FastPD could not reproduce the model's predictions from its trees "
                f"(max deviation {float(np.max(np.abs(diff - self._offset))):.3g}); "
                "please report this model type.",
                argument="model",
            )
        self._nan_ok = has_missing or frame is not None or self._probe_missing(probe[:1])
        self.expected_value_ = self._offset + v_empty

    # ------------------------------------------------------------------ helpers
    def _check_fitted(self) -> None:
        if not hasattr(self, "expected_value_"):
            raise NotFittedError("this FastPD is not fitted yet; call fit(background) first.", argument="fit")

    def _cast(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=self._ens.input_dtype).astype(np.float64)

    def _finite(self, arr: np.ndarray, name: str, *, nan_ok: bool) -> np.ndarray:
        """``arr`` cast to the model's input dtype, after rejecting inf, out-of-range and (maybe) NaN."""
        return finite_input(arr, self._ens, name, nan_ok=nan_ok, model=type(self.model).__name__)

    def _prepare(self, X: Any, name: str = "X") -> np.ndarray:
        self._check_fitted()
        if self._ens.categories:
            return self._finite(
                frame_codes(model_frame(X, self._ens, name), self._ens, name), name, nan_ok=True
            )
        if isinstance(X, pd.DataFrame):
            cols = list(X.columns.map(str))
            expected = list(self.feature_names_in_)
            if cols != expected:
                if set(expected) <= set(cols):
                    X = X.rename(columns=str)[expected]
                else:
                    missing = sorted(set(expected) - set(cols))
                    raise DataError(f"{name} lacks the model's feature(s) {missing[:10]}.", argument=name)
        arr = check_numeric_array(X, name, ndim=2, allow_nan=True)
        if arr.shape[1] != self.n_features_in_:
            raise DataError(
                f"{name} has {arr.shape[1]} columns; the model has {self.n_features_in_} features.",
                argument=name,
            )
        return self._finite(arr, name, nan_ok=self._nan_ok)

    def _probe_missing(self, row: np.ndarray) -> bool:
        """Whether the model takes missing values, routed as FastPD routes them (probed at ``fit``).

        One row per feature with that feature missing, plus an all-missing row: the model
        must accept them and its predictions must match the parsed trees.
        """
        d = row.shape[1]
        probe = np.repeat(row, d + 1, axis=0)
        probe[np.arange(d), np.arange(d)] = np.nan
        probe[d] = np.nan
        try:
            raw = np.asarray(self._ens.predict_raw(probe), dtype=float)
        except Exception:  # the model rejects missing values (any library's error type)
            return False
        mine = self._offset + self._leaves.tree_sum(self._cast(probe))
        return bool(np.allclose(raw, mine, rtol=1e-4, atol=1e-4 * (1.0 + float(np.abs(raw).max()))))

    def _subset(self, subset: Any) -> tuple[int, ...]:
        return subset_indices(subset, list(self.feature_names_in_))

    # ------------------------------------------------------------------ outputs
    def predict(self, X: Any) -> np.ndarray:
        """Raw prediction (margin) recomputed from the parsed trees; equals the model's.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
            Query rows (finite; NaN only where the model takes missing values).

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        Xc = self._prepare(X)
        return self._offset + self._leaves.tree_sum(Xc)

    def pd(self, X: Any, subsets: Iterable[Any]) -> dict[tuple[int, ...], np.ndarray]:
        """Partial dependence ``v_S(x_S)`` of each subset ``S`` at the rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
            Query rows; only the columns in ``S`` matter for ``v_S``.
        subsets : iterable of subsets
            Each a feature index, a name, or a sequence of them. ``()`` gives the
            constant ``expected_value_``.

        Returns
        -------
        dict mapping the sorted index tuple of each subset to an array of shape (n,)
            Not centred: ``v_S`` includes the intercept, as in the paper.
        """
        Xc = self._prepare(X)
        return self._pd(Xc, [self._subset(s) for s in subsets])

    def _pd(self, Xc: np.ndarray, wanted: list[tuple[int, ...]]) -> dict[tuple[int, ...], np.ndarray]:
        return self._leaves.pd(Xc, wanted, self._offset)

    def pd_curve(
        self, feature: Any, grid: Any = None, *, grid_resolution: int = 50
    ) -> tuple[np.ndarray, np.ndarray]:
        """PD curve ``v_{k}`` of one feature: ``(grid, values)``.

        The default grid is ``grid_resolution`` points evenly spaced between the
        5th and 95th percentiles of the background (the unique values when there
        are fewer), as in scikit-learn's ``partial_dependence``; for a feature with
        native categorical splits, its ``grid_resolution`` most frequent background
        values. Missing background values are ignored for the grid.

        Parameters
        ----------
        feature : int or str
            Feature index or name.
        grid : array-like of shape (m,), optional
            Values to evaluate at (category values for string categories).
        grid_resolution : int, default 50
            Size of the default grid (at least 2).

        Returns
        -------
        grid : numpy.ndarray of shape (m,)
        values : numpy.ndarray of shape (m,)
            ``v_{k}`` at each grid value, in raw model output (not centred).
        """
        self._check_fitted()
        if not isinstance(feature, numbers.Integral | str):
            raise ParameterError(
                f"pd_curve takes one feature (an index or a name), got {feature!r}; use pd() for subsets.",
                argument="feature",
            )
        (k,) = self._subset(feature)
        grid, column = curve_grid(
            k, grid, grid_resolution, self._background_codes[:, k], self._ens, str(self.feature_names_in_[k])
        )
        Xq = np.zeros((len(grid), self.n_features_in_))
        Xq[:, k] = column
        if k not in self._ens.categories:  # string categories are codes already
            Xq = self._cast(Xq)
        return grid, self._pd(Xq, [(k,)])[(k,)]

    def shap_values(self, X: Any) -> np.ndarray:
        """Interventional SHAP values (raw output space), shape (n, n_features).

        ``expected_value_ + shap_values(X).sum(axis=1)`` equals the raw prediction.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
            Query rows (finite; NaN only where the model takes missing values).

        Returns
        -------
        numpy.ndarray of shape (n, n_features)
        """
        Xc = self._prepare(X)  # first: it checks that the estimator is fitted
        return self._leaves.shap(Xc)

    def components(self, X: Any, *, max_order: int | None = None) -> tuple[float, pandas.DataFrame]:
        """Functional decomposition: intercept and the components ``m_S(x)`` of every S.

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        max_order : int or None
            Highest interaction order kept (default: ``max_interaction``, i.e. all).

        Returns
        -------
        intercept : float
            ``m_∅``, equal to ``expected_value_``.
        components : DataFrame of shape (n, n_components)
            One column per subset that appears in some tree, named by its features
            joined with ``":"`` (e.g. ``"age:income"``), ordered by order then
            features. With all orders, ``intercept + components.sum(axis=1)`` is
            the raw prediction.
        """
        Xc = self._prepare(X)
        order = self.max_interaction if max_order is None else max_order
        if order is not None:
            check_positive_int(order, "max_order")
        uniq, out = self._leaves.components(Xc, order)
        d = self.n_features_in_
        if not len(uniq):
            return float(self.expected_value_), pd.DataFrame(index=range(len(Xc)))
        names = np.asarray(self.feature_names_in_)
        labels = [":".join(names[[f for f in row if f < d]]) for row in uniq]
        orders = [int(np.sum(row < d)) for row in uniq]
        frame = pd.DataFrame(out, columns=labels)
        sort = sorted(range(len(labels)), key=lambda i: (orders[i], tuple(uniq[i])))
        return float(self.expected_value_), frame.iloc[:, sort]

    def importance(self, X: Any, *, max_order: int | None = None) -> pandas.Series:
        """Mean ``|m_S(x)|`` over the rows of ``X`` for every component, largest first.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
            Query rows (finite; NaN only where the model takes missing values).
        max_order : int or None
            Highest interaction order kept (see :meth:`components`).

        Returns
        -------
        pandas.Series
            Indexed by component name (e.g. ``"age:income"``).
        """
        _, comp = self.components(X, max_order=max_order)
        return comp.abs().mean().sort_values(ascending=False)

    def interaction_strength(self, X: Any) -> float:
        """Share of the prediction's variance not explained by main effects.

        ``E[(m(x) - m_∅ - sum_k m_k(x_k))^2] / E[(m(x) - mean m)^2]`` over the rows
        of ``X`` (0: additive model; Molnar et al. 2019).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
            Query rows (finite; NaN only where the model takes missing values).

        Returns
        -------
        float
            Between 0 and 1 up to rounding.
        """
        Xc = self._prepare(X)
        total = self._offset + self._leaves.tree_sum(Xc) - self.expected_value_
        _, comp = self.components(X, max_order=1)
        resid = total - comp.sum(axis=1).to_numpy()
        denom = float(np.mean((total - total.mean()) ** 2))
        return float(np.mean(resid**2) / denom) if denom > 0 else 0.0

    def plot_pd(self, feature: Any, *, ax: Any = None, grid: Any = None, **kwargs: Any) -> Any:
        """Plot the PD curve of ``feature`` on ``ax`` (a new one if None); return the Axes.

        A thin wrapper kept for compatibility: drawing lives in
        :class:`~trustlab.explain.fastpd.PDCurveDisplay`.

        Parameters
        ----------
        feature : int or str
            Feature index or name.
        ax : matplotlib.axes.Axes, optional
            Where to draw.
        grid : array-like, optional
            Values to evaluate at (see :meth:`pd_curve`).
        **kwargs
            ``ylabel``, ``title`` and line options (``color``, ...).

        Returns
        -------
        matplotlib.axes.Axes
        """
        x, v = self.pd_curve(feature, grid)
        (k,) = self._subset(feature)
        ylabel = kwargs.pop("ylabel", None)
        title = kwargs.pop("title", None)
        disp = PDCurveDisplay(x, v, str(self.feature_names_in_[k]), **({"ylabel": ylabel} if ylabel else {}))
        return disp.plot(ax=ax, title=title, **kwargs).ax_
