"""The plain-array form of a fitted tree ensemble: :class:`TreeArrays` per tree, :class:`TreeEnsemble`.

The readers of :mod:`trustlab.explain._trees` build them (where the split semantics of
each library are described); FastPD (:mod:`trustlab.explain._fastpd_leaves`) and the
categorical-split helpers (:mod:`trustlab.explain._tree_categories`) read them.

References
----------
Liu, Steensgaard, Wright, Pfister, Hiabu. "Fast Estimation of Partial Dependence
Functions using Trees". ICML 2025.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["TreeArrays", "TreeEnsemble"]


@dataclass(frozen=True)
class TreeArrays:
    """One tree as flat node arrays (node 0 is the root; leaves have ``left == -1``).

    ``nan_left`` says where a missing value goes at each split; ``cover`` is the
    training weight (hessian sum, sample count) reaching the node. ``cat_left``
    maps each categorical split's node to a boolean array over the feature's
    category bins (see :attr:`TreeEnsemble.encode`): True where the bin goes left.

    Attributes
    ----------
    feature : numpy.ndarray of int
        Split feature of each node (-1 at leaves).
    threshold : numpy.ndarray of float
        Split value (NaN at leaves and categorical splits).
    left, right : numpy.ndarray of int
        Children (-1 at leaves).
    value : numpy.ndarray of float
        Leaf values in raw output space (0 at internal nodes).
    cover : numpy.ndarray of float
        Training weight reaching each node.
    nan_left : numpy.ndarray of bool
        Whether a missing value goes left.
    cat_left : dict of int to numpy.ndarray of bool
        Per categorical split, the category bins that go left.

    See Also
    --------
    trees_from_sklearn : reads them from a model (with an example).
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    cover: np.ndarray
    nan_left: np.ndarray
    cat_left: dict[int, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class TreeEnsemble:
    """A tree ensemble ready for FastPD: trees, split rule and the raw prediction function.

    ``prediction = offset + sum over trees of weight * leaf value``; ``offset`` is not
    read from the model's parameters but measured (see :func:`ensemble_from_model`).

    Attributes
    ----------
    trees : tuple of TreeArrays
    n_features : int
    strict : bool
        True: go left when ``x < t`` (XGBoost); False: when ``x <= t``.
    input_dtype : numpy dtype
        Inputs are cast to it before comparing (float32 or float64).
    tree_weight : float
        Weight of every tree (1 for boosting, ``1 / n_trees`` for forests).
    predict_raw : callable
        The model's raw prediction of an array of rows.
    library : str
        ``"xgboost"``, ``"lightgbm"`` or ``"sklearn"``.
    feature_names : tuple of str or None
    categorical : dict of int to int
        Categorical feature -> number of category bins.
    encode : callable or None
        ``encode(f, column)`` maps raw values to bins, -1 for the missing-value side.
    categories : dict of int to numpy.ndarray
        String category values per column, in the model's code order (HistGradientBoosting).

    See Also
    --------
    ensemble_from_model : builds one (with an example).
    """

    trees: tuple[TreeArrays, ...]
    n_features: int
    strict: bool  # True: go left when x < t (XGBoost); False: x <= t
    input_dtype: Any  # inputs are cast to this dtype before comparing (float32 or float64)
    tree_weight: float
    predict_raw: Callable[[np.ndarray], np.ndarray]
    library: str
    feature_names: tuple[str, ...] | None = None
    # categorical feature -> number of category bins; ``encode(f, column)`` maps raw
    # values of such a feature to bins in [0, n_bins), or -1 where the value takes
    # the node's missing-value direction.
    categorical: dict[int, int] = field(default_factory=dict)
    encode: Callable[[int, np.ndarray], np.ndarray] | None = None
    # input column -> its non-numeric category values (HistGradientBoosting fitted on
    # string or ``category`` columns), in the model's code order: the trees (and
    # ``encode``) then take such a column as the position of its value in this
    # array (NaN for a missing or unseen value), as the model's OrdinalEncoder does.
    categories: dict[int, np.ndarray] = field(default_factory=dict)
