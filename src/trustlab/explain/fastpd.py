"""FastPD: partial dependence, interventional SHAP and the functional decomposition of trees.

The estimator follows Liu et al. (ICML 2025). Partial dependence is linear in the
model, so for one tree

    v_S(x) = sum over leaves l of c_l * 1[x satisfies l on S ∩ T_l] * p_l(S ∩ T_l),

where ``T_l`` are the distinct features on the path to leaf ``l`` and ``p_l(K)`` is
the share of background rows that satisfy the path's constraints on ``T_l \\ K``.
Each leaf is therefore a small cooperative game on its own ``|T_l| <= depth``
features, and everything FastPD returns (PD functions, the components of the
functional decomposition, interventional SHAP values) is a sum over leaves of a
quantity of that leaf game.

Implementation (vectorised NumPy, linear in the number of background and query rows):

1. *Augmentation* (``fit``, once per background). For every leaf, each background
   row gets a ``|T_l|``-bit code saying on which of the leaf's features it satisfies
   the path's interval; a histogram of codes followed by a superset-sum (zeta)
   transform gives ``p_l(K)`` for all ``2^|T_l|`` subsets ``K``. This is the same
   table the paper's recursive augmentation builds, computed in ``O(n_b * |T_l|)``
   per leaf plus ``O(|T_l| 2^|T_l|)``.
2. *Explanation*. A query row enters a leaf game only through its own code on
   the leaf's features, so per leaf a table indexed by code holds the leaf's
   Shapley values (computed in ``fit`` with subset-sum transforms) or Moebius
   coefficients (the components); a query gathers its row of the table.

References
----------
.. [1] Liu, J., Steensgaard, T., Wright, M. N., Pfister, N., Hiabu, M. "Fast
   Estimation of Partial Dependence Functions using Trees". Proceedings of the
   42nd International Conference on Machine Learning (ICML 2025), PMLR 267.
.. [2] Hiabu, M., Meyer, J. T., Wright, M. N. "Unifying local and global model
   explanations by functional decomposition of low dimensional structures".
   AISTATS 2023 (the decomposition and the R package ``glex``).
.. [3] Molnar, C., Casalicchio, G., Bischl, B. "Quantifying Model Complexity via
   Functional Decomposition for Better Post-hoc Interpretability". ECML-PKDD
   workshops 2019 (the interaction strength).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas
import pandas as pd
from scipy import sparse

from trustlab._validation import check_array, check_choice, check_positive_int, check_random_state
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.explain._trees import TreeArrays, TreeEnsemble, ensemble_from_model

__all__ = ["FastPD"]

# Working-set size (number of array elements) for one vectorised block.
_BLOCK = 1 << 22


@dataclass
class _LeafGroup:
    """All leaves (across trees) with the same number ``k`` of distinct path features."""

    k: int
    value: np.ndarray  # (L,) leaf value times the tree weight
    feat: np.ndarray  # (L, k) feature index of each slot
    lo: np.ndarray  # (L, k) interval lower end
    hi: np.ndarray  # (L, k) interval upper end
    nan_ok: np.ndarray  # (L, k) a missing value satisfies the slot
    ratio: np.ndarray  # (L, k) product of child/parent cover ratios on the slot's splits
    lo_r: np.ndarray | None = None  # (L, k) rank of ``lo`` among the feature's cut points
    width: np.ndarray | None = None  # (L, k) rank(hi) - rank(lo): bins inside the interval
    P: np.ndarray | None = None  # (L, 2^k) p_l(K), K indexed by slot bitmask
    shap_table: np.ndarray | None = None  # (L * 2^k, k) Shapley value of each slot per code
    cat: np.ndarray | None = None  # (L, k) row of ``catsets`` of a categorical slot, else -1
    catsets: np.ndarray | None = None  # (n_sets, n_bins) allowed category bins of a slot


def _extract_leaves(trees: Sequence[TreeArrays], weight: float) -> tuple[dict[int, _LeafGroup], float]:
    """Walk every tree once; return leaves grouped by path-feature count, and constants.

    A leaf's constraint on a numerical feature is an interval; on a categorical
    feature it is the set of category bins that every categorical split of the path
    sends the leaf's way (the intersection of the left sets or their complements).
    """
    rows: dict[int, list[tuple[float, list[int], list[Any], list[Any], list[Any], list[Any], list[Any]]]]
    rows = {}
    constant = 0.0
    for tree in trees:
        stack: list[tuple[int, dict[int, list[Any]]]] = [(0, {})]
        while stack:
            node, cons = stack.pop()
            if tree.left[node] == -1:
                val = float(tree.value[node]) * weight
                if not cons:
                    constant += val
                    continue
                feats = sorted(cons)
                rows.setdefault(len(feats), []).append(
                    (val, feats, *([cons[f][i] for f in feats] for i in range(5)))  # type: ignore[arg-type]
                )
                continue
            f = int(tree.feature[node])
            t = float(tree.threshold[node])
            cover = float(tree.cover[node])
            cat_left = tree.cat_left.get(node)
            for child, go_left in ((int(tree.left[node]), True), (int(tree.right[node]), False)):
                new = {key: list(v) for key, v in cons.items()}
                lo, hi, nan_ok, ratio, allowed = new.get(f, [-np.inf, np.inf, True, 1.0, None])
                if cat_left is not None:
                    side = cat_left if go_left else ~cat_left
                    allowed = side if allowed is None else allowed & side
                elif go_left:
                    hi = min(hi, t)
                else:
                    lo = max(lo, t)
                nan_ok = nan_ok and (bool(tree.nan_left[node]) == go_left)
                r = float(tree.cover[child]) / cover if cover > 0 else 0.0
                new[f] = [lo, hi, nan_ok, ratio * r, allowed]
                stack.append((child, new))
    groups = {}
    for k, items in rows.items():
        g = _LeafGroup(
            k=k,
            value=np.array([it[0] for it in items], dtype=np.float64),
            feat=np.array([it[1] for it in items], dtype=np.int64),
            lo=np.array([it[2] for it in items], dtype=np.float64),
            hi=np.array([it[3] for it in items], dtype=np.float64),
            nan_ok=np.array([it[4] for it in items], dtype=bool),
            ratio=np.array([it[5] for it in items], dtype=np.float64),
        )
        sets = [a for it in items for a in it[6] if a is not None]
        if sets:
            width = max(len(a) for a in sets)
            catsets = np.zeros((len(sets), width), dtype=bool)
            cat = np.full((len(items), k), -1, dtype=np.int64)
            i = 0
            for li, it in enumerate(items):
                for j, a in enumerate(it[6]):
                    if a is not None:
                        catsets[i, : len(a)] = a
                        cat[li, j] = i
                        i += 1
            g.cat, g.catsets = cat, catsets
        groups[k] = g
    return groups, constant


def _rank_intervals(groups: dict[int, _LeafGroup], n_features: int) -> list[np.ndarray]:
    """Sorted cut points per feature; store each interval as integer ranks of its ends.

    With ``b(x)`` the number of cut points below ``x`` (``<= x`` for XGBoost's
    strict rule), ``x`` lies in the interval ``(lo, hi]`` (``[lo, hi)``) exactly when
    ``rank(lo) <= b(x) < rank(hi)``, so rows are compared as small integers.
    """
    cuts = []
    for f in range(n_features):
        vals = [g.lo[g.feat == f] for g in groups.values()]
        vals += [g.hi[g.feat == f] for g in groups.values()]
        allv = np.concatenate(vals) if vals else np.empty(0)
        cuts.append(np.unique(allv[np.isfinite(allv)]))
    for g in groups.values():
        lo_r = np.zeros(g.lo.shape, dtype=np.int64)
        hi_r = np.zeros(g.hi.shape, dtype=np.int64)
        for f in np.unique(g.feat):
            sel = g.feat == f
            u = cuts[f]
            lo, hi = g.lo[sel], g.hi[sel]
            lo_r[sel] = np.where(np.isfinite(lo), np.searchsorted(u, lo) + 1, 0)
            hi_r[sel] = np.where(np.isfinite(hi), np.searchsorted(u, hi) + 1, len(u) + 1)
        g.lo_r = lo_r.astype(np.int32)
        g.width = np.maximum(hi_r - lo_r, 0).astype(np.uint32)
    return cuts


def _bins(X: np.ndarray, cuts: list[np.ndarray], ens: TreeEnsemble) -> np.ndarray:
    """Transposed bin matrix ``(n_features, n)``: cut points below each value; NaN is -1.

    A categorical feature's bin is its category bin (``ens.encode``); -1 marks a
    value that takes the missing-value direction.
    """
    B = np.empty((X.shape[1], X.shape[0]), dtype=np.int32)
    for f, u in enumerate(cuts):
        col = X[:, f]
        if f in ens.categorical and ens.encode is not None:
            B[f] = ens.encode(f, col)
            continue
        B[f] = np.searchsorted(u, col, side="right" if ens.strict else "left")
        nan = np.isnan(col)
        if nan.any():
            B[f, nan] = -1
    return B


def _codes(BT: np.ndarray, g: _LeafGroup, has_nan: bool) -> np.ndarray:
    """Codes of shape (L, n): bit ``j`` says the row meets leaf ``l``'s slot-``j`` constraint.

    ``has_nan`` says whether ``BT`` holds -1 (values taking the missing direction).
    """
    assert g.lo_r is not None and g.width is not None
    dt = np.uint8 if g.k <= 8 else np.uint16 if g.k <= 16 else np.uint32
    codes = np.zeros((len(g.value), BT.shape[1]), dtype=dt)
    for j in range(g.k):
        rows = np.take(BT, g.feat[:, j], axis=0)  # (L, n)
        diff = (rows - g.lo_r[:, j, None]).view(np.uint32)  # negative -> huge
        sat = diff < g.width[:, j, None]
        if g.cat is not None and g.catsets is not None:
            sel = np.nonzero(g.cat[:, j] >= 0)[0]
            if len(sel):
                r = rows[sel]
                sat[sel] = g.catsets[g.cat[sel, j, None], np.maximum(r, 0)] & (r >= 0)
        if has_nan:
            sat |= (rows == -1) & g.nan_ok[:, j, None]
        codes |= sat.astype(dt) << dt(j)
    return codes


def _transform(F: np.ndarray, k: int, kind: str) -> np.ndarray:
    """In-place subset-sum ('sub'), superset-sum ('sup') or Moebius ('mob') on the last axis."""
    lead = F.shape[:-1]
    m = 1 << k
    for b in range(k):
        view = F.reshape(*lead, m >> (b + 1), 2, 1 << b)
        if kind == "sub":
            view[..., 1, :] += view[..., 0, :]
        elif kind == "sup":
            view[..., 0, :] += view[..., 1, :]
        else:
            view[..., 1, :] -= view[..., 0, :]
    return F


def _popcount(k: int) -> np.ndarray:
    masks = np.arange(1 << k)
    return np.array([bin(int(m)).count("1") for m in masks], dtype=np.int64)


def _shap_table(g: _LeafGroup) -> np.ndarray:
    """Shapley values of each slot for every possible query code of every leaf game.

    For a leaf game ``v(s) = c * 1[s ⊆ code] * P(s)`` the Shapley value of slot
    ``j`` is ``c * sum_{s ⊆ code\\j} w(|s|) (P(s ∪ j) - P(s))`` when ``j`` is in the
    code and ``-c * sum_{s ⊆ code} w(|s|) P(s)`` otherwise: subset sums, done with
    ``O(k 2^k)`` transforms.
    """
    assert g.P is not None
    k, m = g.k, 1 << g.k
    pc = _popcount(k)
    w = np.array(
        [math.factorial(p) * math.factorial(k - p - 1) / math.factorial(k) if p < k else 0.0 for p in pc]
    )
    P = g.P
    c = g.value[:, None]
    masks = np.arange(m)
    table = np.empty((len(g.value), m, k))
    zb = _transform(w * P, k, "sub")
    for j in range(k):
        bit = 1 << j
        without = (masks & bit) == 0
        a = np.zeros_like(P)
        a[:, without] = w[without] * (P[:, masks[without] | bit] - P[:, without])
        z = _transform(a, k, "sub")
        table[:, :, j] = np.where(~without, c * z[:, masks ^ bit], -c * zb)
    return table.reshape(len(g.value) * m, k)


def _model_frame(X: Any, ens: TreeEnsemble, name: str) -> pd.DataFrame:
    """``X`` as a DataFrame with the model's columns, in the model's order."""
    if not isinstance(X, pd.DataFrame):
        if ens.feature_names is not None:
            raise DataError(
                f"{name} must be a pandas DataFrame: the model was fitted on a DataFrame with "
                f"categorical columns of strings ({_string_columns(ens)}); pass rows with its "
                f"columns {list(ens.feature_names)[:20]}.",
                argument=name,
            )
        X = pd.DataFrame(np.asarray(X, dtype=object))
    if X.ndim != 2 or len(X) == 0:
        raise DataError(f"{name} must be a non-empty 2-D table, got shape {X.shape}.", argument=name)
    if ens.feature_names is None:
        if X.shape[1] != ens.n_features:
            raise DataError(
                f"{name} has {X.shape[1]} columns; the model has {ens.n_features} features.",
                argument=name,
            )
        return X
    cols = list(X.columns.map(str))
    expected = list(ens.feature_names)
    if cols == expected:
        return X
    missing = [c for c in expected if c not in cols]
    if missing:
        raise DataError(
            f"{name} lacks the model's feature(s) {missing[:10]}; pass a DataFrame with the "
            f"columns the model was fitted on.",
            argument=name,
        )
    return X.set_axis(cols, axis=1)[expected]


def _string_columns(ens: TreeEnsemble) -> list[str]:
    names = ens.feature_names
    return [names[f] if names is not None else str(f) for f in sorted(ens.categories)][:10]


def _category_codes(col: pd.Series, values: np.ndarray, feature: str, name: str) -> np.ndarray:
    """Codes of a column of category values, as the model's ``OrdinalEncoder`` makes them.

    The position of each value among the model's known ``values`` (exact match, as
    scikit-learn's hash-table lookup); NaN for a missing value (NaN, None, pd.NA)
    and for a value unseen in training, both of which the model sends down each
    split's missing-value side.
    """
    dtype = col.dtype
    inner = dtype.categories.dtype if isinstance(dtype, pd.CategoricalDtype) else dtype
    if pd.api.types.is_numeric_dtype(inner) or pd.api.types.is_bool_dtype(inner):
        raise DataError(
            f"{name} column {feature!r} has dtype {dtype}, but the model's categories for it are "
            f"strings (e.g. {values[:3].tolist()}); pass the category values, not numbers or codes.",
            argument=name,
        )
    obj = np.array(col, dtype=object)  # a copy: the user's column is not touched
    missing = pd.isna(obj)
    obj[missing] = None
    codes = pd.Index(values, dtype=object).get_indexer(obj)
    out = codes.astype(np.float64)
    out[codes < 0] = np.nan
    return out


def _frame_codes(frame: pd.DataFrame, ens: TreeEnsemble, name: str) -> np.ndarray:
    """Float matrix of a DataFrame: category codes for string columns, numbers elsewhere."""
    out = np.empty(frame.shape, dtype=np.float64)
    for f in range(frame.shape[1]):
        col = frame.iloc[:, f]
        label = str(frame.columns[f])
        values = ens.categories.get(f)
        if values is not None:
            out[:, f] = _category_codes(col, values, label, name)
            continue
        try:
            out[:, f] = np.asarray(col, dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError(
                f"{name} column {label!r} must be numeric (the model treats it as a number), "
                f"got dtype {col.dtype}.",
                argument=name,
            ) from None
    return out


class FastPD:
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
        check_choice(self.weights, "weights", ("empirical", "path"))
        if self.max_interaction is not None:
            check_positive_int(self.max_interaction, "max_interaction")
        if self.max_background is not None:
            check_positive_int(self.max_background, "max_background")
        ens = ensemble_from_model(self.model)
        frame: pd.DataFrame | None = None
        names: list[Any] | None
        if ens.categories:
            # string categories: the trees take each such column as its category code
            frame = _model_frame(X, ens, "background")
            names = list(frame.columns.map(str))
            Xb = _frame_codes(frame, ens, "background")
        else:
            names = list(X.columns.map(str)) if isinstance(X, pd.DataFrame) else None
            Xb = check_array(X, "background", ndim=2, allow_nan=True)
        if np.isinf(Xb).any():
            raise DataError(
                "background contains infinite values; replace them (NaN is allowed and "
                "follows each split's missing-value direction).",
                argument="background",
            )
        if Xb.shape[1] != ens.n_features:
            raise DataError(
                f"background has {Xb.shape[1]} columns but the model was trained on "
                f"{ens.n_features} features; pass rows with the model's features.",
                argument="background",
            )
        if (
            names is not None
            and ens.feature_names is not None
            and list(ens.feature_names) != names
            and not all(n.startswith("Column_") for n in ens.feature_names)
        ):
            if sorted(ens.feature_names) == sorted(names):
                raise DataError(
                    "background columns are in a different order than the model's "
                    f"features {list(ens.feature_names)}; reorder them.",
                    argument="background",
                )
        rng = check_random_state(self.random_state)
        if self.max_background is not None and len(Xb) > self.max_background:
            idx = np.sort(rng.choice(len(Xb), size=self.max_background, replace=False))
            Xb = Xb[idx]
            if frame is not None:
                frame = frame.iloc[idx]
        self._ens: TreeEnsemble = ens
        self.feature_names_in_ = np.asarray(
            names if names is not None else (ens.feature_names or [f"x{j}" for j in range(ens.n_features)]),
            dtype=object,
        )
        self.n_features_in_ = ens.n_features
        # with string categories, the background as given (the user's values)
        self.background_ = Xb if frame is None else frame
        self._background_codes = Xb
        Xc = self._cast(Xb)
        groups, constant = _extract_leaves(ens.trees, ens.tree_weight)
        self._groups = groups
        self._constant = constant
        self._cuts = _rank_intervals(groups, ens.n_features)
        BTb, nan_b = self._bin(Xc)
        self.n_leaves_ = int(sum(len(g.value) for g in groups.values()))
        n_b = len(Xc)
        for g in groups.values():
            m = 1 << g.k
            L = len(g.value)
            if self.weights == "empirical":
                counts = np.zeros(L * m, dtype=np.float64)
                step = self._row_step(L)
                offsets = (np.arange(L, dtype=np.int64) * m)[:, None]
                for s in range(0, n_b, step):
                    codes = _codes(BTb[:, s : s + step], g, nan_b)
                    counts += np.bincount((codes + offsets).ravel(), minlength=L * m)
                sup = _transform(counts.reshape(L, m), g.k, "sup")
                g.P = sup[:, ::-1] / n_b  # p_l(K) = share satisfying the slots outside K
            else:
                masks = np.arange(m)
                P = np.ones((L, m))
                for j in range(g.k):
                    outside = (masks & (1 << j)) == 0
                    P[:, outside] *= g.ratio[:, j : j + 1]
                g.P = P
            g.shap_table = _shap_table(g)
        # The offset (base score, init estimator) is measured, not read from the
        # model's parameters: prediction minus the sum of the parsed trees.
        # The probe includes rows with missing values, which checks their routing.
        nan_rows = np.nonzero(np.isnan(Xb).any(axis=1))[0][:64]
        probe_idx = np.union1d(np.arange(min(len(Xb), 64)), nan_rows)
        probe = Xb[probe_idx]
        try:
            if frame is None:
                raw = ens.predict_raw(probe)
            else:  # the model's own encoder reads the user's values
                sub = frame.iloc[probe_idx]
                raw = ens.predict_raw(sub if ens.feature_names is not None else sub.to_numpy())  # type: ignore[arg-type]
        except ValueError as exc:
            if not len(nan_rows):
                raise  # pragma: no cover - the model rejects its own kind of input
            raise DataError(
                f"background contains NaN but the model does not accept missing values "
                f"({type(self.model).__name__}: {str(exc)[:120]}); impute them first.",
                argument="background",
            ) from None
        diff = raw - self._tree_sum(self._cast(probe))
        self._offset = float(np.mean(diff))
        scale = 1.0 + float(np.max(np.abs(raw)))
        if float(np.max(np.abs(diff - self._offset))) > 1e-4 * scale:
            raise DataError(  # pragma: no cover - a parsing bug, not user input
                "FastPD could not reproduce the model's predictions from its trees "
                f"(max deviation {float(np.max(np.abs(diff - self._offset))):.3g}); "
                "please report this model type.",
                argument="model",
            )
        self.expected_value_ = (
            self._offset
            + self._constant
            + sum(float(g.value @ g.P[:, 0]) for g in groups.values() if g.P is not None)
        )
        return self

    # ------------------------------------------------------------------ helpers
    def _check_fitted(self) -> None:
        if not hasattr(self, "expected_value_"):
            raise NotFittedError("this FastPD is not fitted yet; call fit(background) first.", argument="fit")

    def _cast(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=self._ens.input_dtype).astype(np.float64)

    def _prepare(self, X: Any, name: str = "X") -> np.ndarray:
        self._check_fitted()
        if self._ens.categories:
            return self._cast(_frame_codes(_model_frame(X, self._ens, name), self._ens, name))
        if isinstance(X, pd.DataFrame):
            cols = list(X.columns.map(str))
            expected = list(self.feature_names_in_)
            if cols != expected:
                if set(expected) <= set(cols):
                    X = X.rename(columns=str)[expected]
                else:
                    missing = sorted(set(expected) - set(cols))
                    raise DataError(f"{name} lacks the model's feature(s) {missing[:10]}.", argument=name)
        arr = check_array(X, name, ndim=2, allow_nan=True)
        if arr.shape[1] != self.n_features_in_:
            raise DataError(
                f"{name} has {arr.shape[1]} columns; the model has {self.n_features_in_} features.",
                argument=name,
            )
        return self._cast(arr)

    def _row_step(self, width: int) -> int:
        return max(1, _BLOCK // max(width, 1))

    def _bin(self, Xc: np.ndarray) -> tuple[np.ndarray, bool]:
        """Rows' bin codes per split feature, and whether any value is missing (code < 0)."""
        BT = _bins(Xc, self._cuts, self._ens)
        return BT, bool((BT < 0).any())

    def _tree_sum(self, X: np.ndarray) -> np.ndarray:
        out = np.full(len(X), self._constant)
        BT, has_nan = self._bin(X)
        for g in self._groups.values():
            full = (1 << g.k) - 1
            step = self._row_step(len(g.value))
            for s in range(0, len(X), step):
                codes = _codes(BT[:, s : s + step], g, has_nan)
                out[s : s + step] += g.value @ (codes == full)
        return out

    def _subset(self, subset: Any) -> tuple[int, ...]:
        items = [subset] if isinstance(subset, numbers.Integral | str) else list(subset)
        idx = []
        names = list(self.feature_names_in_)
        for item in items:
            if isinstance(item, str):
                if item not in names:
                    raise ParameterError(
                        f"unknown feature {item!r} in a subset; features are {names[:20]}.",
                        argument="subsets",
                    )
                idx.append(names.index(item))
            elif isinstance(item, numbers.Integral) and not isinstance(item, bool):
                if not 0 <= int(item) < self.n_features_in_:
                    raise ParameterError(
                        f"feature index {item} is out of range; the model has "
                        f"{self.n_features_in_} features (0..{self.n_features_in_ - 1}).",
                        argument="subsets",
                    )
                idx.append(int(item))
            else:
                raise ParameterError(
                    f"a subset must hold feature indices or names, got {item!r}.",
                    argument="subsets",
                )
        if len(set(idx)) != len(idx):
            raise ParameterError(f"subset {tuple(items)} repeats a feature.", argument="subsets")
        return tuple(sorted(idx))

    # ------------------------------------------------------------------ outputs
    def predict(self, X: Any) -> np.ndarray:
        """Raw prediction (margin) recomputed from the parsed trees; equals the model's."""
        Xc = self._prepare(X)
        return self._offset + self._tree_sum(Xc)

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
        out: dict[tuple[int, ...], np.ndarray] = {}
        code_cache: dict[int, list[np.ndarray]] = {}
        BT, has_nan = self._bin(Xc)
        for S in wanted:
            res = np.full(len(Xc), self._offset + self._constant)
            for k, g in self._groups.items():
                assert g.P is not None
                bits = (np.isin(g.feat, S) @ (1 << np.arange(k))).astype(np.int64)
                const = g.value * g.P[np.arange(len(g.value)), bits]
                if not S:
                    res += const.sum()
                    continue
                step = self._row_step(len(g.value))
                if k not in code_cache:
                    code_cache[k] = [
                        _codes(BT[:, s : s + step], g, has_nan).astype(np.int64)
                        for s in range(0, len(Xc), step)
                    ]
                for i, codes in enumerate(code_cache[k]):
                    sl = slice(i * step, i * step + codes.shape[1])
                    res[sl] += const @ ((codes & bits[:, None]) == bits[:, None])
            out[S] = res
        return out

    def pd_curve(
        self, feature: Any, grid: Any = None, *, grid_resolution: int = 50
    ) -> tuple[np.ndarray, np.ndarray]:
        """PD curve ``v_{k}`` of one feature: ``(grid, values)``.

        The default grid is ``grid_resolution`` points evenly spaced between the
        5th and 95th percentiles of the background (the unique values when there
        are fewer), as in scikit-learn's ``partial_dependence``; for a feature with
        native categorical splits, its ``grid_resolution`` most frequent background
        values. Missing background values are ignored for the grid.
        """
        self._check_fitted()
        if not isinstance(feature, numbers.Integral | str):
            raise ParameterError(
                f"pd_curve takes one feature (an index or a name), got {feature!r}; use pd() for subsets.",
                argument="feature",
            )
        (k,) = self._subset(feature)
        values = self._ens.categories.get(k)
        if values is not None:
            # string categories: the grid holds the user's values, evaluated by code
            if grid is None:
                check_positive_int(grid_resolution, "grid_resolution", minimum=2)
                col = self._background_codes[:, k]
                uniq, counts = np.unique(col[~np.isnan(col)], return_counts=True)
                if len(uniq) == 0:
                    raise DataError(
                        f"feature {k} is missing or unseen in every background row; pass a grid.",
                        argument="grid",
                    )
                codes = np.sort(uniq[np.argsort(-counts, kind="stable")[:grid_resolution]])
                grid = values[codes.astype(np.int64)]
            else:
                grid = np.asarray(grid, dtype=object)
                if grid.ndim != 1 or len(grid) == 0:
                    raise DataError(
                        f"grid must be a non-empty 1-D sequence of categories, got shape {grid.shape}.",
                        argument="grid",
                    )
                codes = _category_codes(pd.Series(list(grid)), values, str(self.feature_names_in_[k]), "grid")
            Xq = np.zeros((len(grid), self.n_features_in_))
            Xq[:, k] = codes
            return grid, self._pd(Xq, [(k,)])[(k,)]
        if grid is None:
            check_positive_int(grid_resolution, "grid_resolution", minimum=2)
            col = self._background_codes[:, k]
            col = col[~np.isnan(col)]
            uniq, counts = np.unique(col, return_counts=True)
            if len(uniq) == 0:
                raise DataError(
                    f"feature {k} is missing in every background row; pass a grid.",
                    argument="grid",
                )
            if k in self._ens.categorical:
                # categories, not a range: the most frequent ones, in value order
                grid = np.sort(uniq[np.argsort(-counts, kind="stable")[:grid_resolution]])
            elif len(uniq) <= grid_resolution:
                grid = uniq
            else:
                lo, hi = np.percentile(col, [5, 95])
                grid = np.linspace(lo, hi, grid_resolution) if hi > lo else uniq
        grid = check_array(grid, "grid", ndim=1)
        Xq = np.zeros((len(grid), self.n_features_in_))
        Xq[:, k] = grid
        return grid, self._pd(self._cast(Xq), [(k,)])[(k,)]

    def shap_values(self, X: Any) -> np.ndarray:
        """Interventional SHAP values (raw output space), shape (n, n_features).

        ``expected_value_ + shap_values(X).sum(axis=1)`` equals the raw prediction.
        """
        Xc = self._prepare(X)
        d = self.n_features_in_
        out = np.zeros((d, len(Xc)))
        BT, has_nan = self._bin(Xc)
        for g in self._groups.values():
            assert g.shap_table is not None
            L, k, m = len(g.value), g.k, 1 << g.k
            # table by slot: (k, L * m), so that one flat index serves every slot
            by_slot = np.ascontiguousarray(g.shap_table.reshape(L * m, k).T)
            onehots = [
                sparse.csr_matrix((np.ones(L), (g.feat[:, j], np.arange(L))), shape=(d, L)) for j in range(k)
            ]
            offsets = (np.arange(L, dtype=np.int64) * m)[:, None]
            step = self._row_step(L)
            for s in range(0, len(Xc), step):
                flat = _codes(BT[:, s : s + step], g, has_nan) + offsets
                for j in range(k):
                    out[:, s : s + step] += onehots[j] @ np.take(by_slot[j], flat)
        return out.T.copy()

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
        width = max([min(k, order or k) for k in self._groups] or [1])
        d = self.n_features_in_
        plans = []
        keys = []
        for k, g in self._groups.items():
            pc = _popcount(k)
            masks = np.nonzero((pc >= 1) & (pc <= (order or k)))[0]
            L = len(g.value)
            key = np.full((L, len(masks), width), d, dtype=np.int64)
            for mi, mask in enumerate(masks):
                slots = [j for j in range(k) if mask >> j & 1]
                key[:, mi, : len(slots)] = np.sort(g.feat[:, slots], axis=1)
            keys.append(key.reshape(-1, width))
            plans.append((g, masks))
        if not keys:
            return float(self.expected_value_), pd.DataFrame(index=range(len(Xc)))
        uniq, inverse = np.unique(np.concatenate(keys), axis=0, return_inverse=True)
        inverse = inverse.ravel()
        out = np.zeros((len(Xc), len(uniq)))
        BT, has_nan = self._bin(Xc)
        start = 0
        for g, masks in plans:
            assert g.P is not None
            k, m, L = g.k, 1 << g.k, len(g.value)
            codes_all = np.arange(m)
            sub = (codes_all[:, None] & codes_all[None, :]) == codes_all[None, :]
            n_sel = len(masks)
            cols = inverse[start : start + L * n_sel]
            start += L * n_sel
            lc = max(1, _BLOCK // (m * m))
            for l0 in range(0, L, lc):
                sl = slice(l0, min(L, l0 + lc))
                Lc = sl.stop - sl.start
                G = g.value[sl, None, None] * sub[None] * g.P[sl, None, :]
                mob = _transform(G, k, "mob")[:, :, masks].reshape(Lc * m, n_sel)
                onehot = sparse.csr_matrix(
                    (
                        np.ones(Lc * n_sel),
                        (np.arange(Lc * n_sel), cols[l0 * n_sel : sl.stop * n_sel]),
                    ),
                    shape=(Lc * n_sel, len(uniq)),
                )
                assert g.lo_r is not None and g.width is not None
                sub_group = _LeafGroup(
                    k,
                    g.value[sl],
                    g.feat[sl],
                    g.lo[sl],
                    g.hi[sl],
                    g.nan_ok[sl],
                    g.ratio[sl],
                    lo_r=g.lo_r[sl],
                    width=g.width[sl],
                    cat=None if g.cat is None else g.cat[sl],
                    catsets=g.catsets,
                )
                offsets = (np.arange(Lc, dtype=np.int64) * m)[:, None]
                step = self._row_step(Lc * n_sel)
                for s in range(0, len(Xc), step):
                    codes = _codes(BT[:, s : s + step], sub_group, has_nan) + offsets
                    vals = mob[codes].transpose(1, 0, 2).reshape(codes.shape[1], Lc * n_sel)
                    out[s : s + step] += np.asarray(vals @ onehot)
        names = np.asarray(self.feature_names_in_)
        labels = [":".join(names[[f for f in row if f < d]]) for row in uniq]
        orders = [int(np.sum(row < d)) for row in uniq]
        frame = pd.DataFrame(out, columns=labels)
        sort = sorted(range(len(labels)), key=lambda i: (orders[i], tuple(uniq[i])))
        return float(self.expected_value_), frame.iloc[:, sort]

    def importance(self, X: Any, *, max_order: int | None = None) -> pandas.Series:
        """Mean ``|m_S(x)|`` over the rows of ``X`` for every component, largest first."""
        _, comp = self.components(X, max_order=max_order)
        return comp.abs().mean().sort_values(ascending=False)

    def interaction_strength(self, X: Any) -> float:
        """Share of the prediction's variance not explained by main effects.

        ``E[(m(x) - m_∅ - sum_k m_k(x_k))^2] / E[(m(x) - mean m)^2]`` over the rows
        of ``X`` (0: additive model; Molnar et al. 2019).
        """
        Xc = self._prepare(X)
        total = self._offset + self._tree_sum(Xc) - self.expected_value_
        _, comp = self.components(X, max_order=1)
        resid = total - comp.sum(axis=1).to_numpy()
        denom = float(np.mean((total - total.mean()) ** 2))
        return float(np.mean(resid**2) / denom) if denom > 0 else 0.0

    def plot_pd(self, feature: Any, *, ax: Any = None, grid: Any = None, **kwargs: Any) -> Any:
        """Plot the PD curve of ``feature`` on ``ax`` (a new one if None); return the Axes."""
        from trustlab.explain._plotting import plot_pd_curve

        x, v = self.pd_curve(feature, grid)
        (k,) = self._subset(feature)
        return plot_pd_curve(x, v, str(self.feature_names_in_[k]), ax=ax, **kwargs)
