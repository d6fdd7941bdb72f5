"""Read fitted tree ensembles into plain arrays: one :class:`TreeArrays` per tree.

Supported: XGBoost (``XGBModel`` wrappers and ``Booster``, gbtree only), LightGBM
(``LGBMModel`` and ``Booster``), and scikit-learn ``DecisionTree*``,
``RandomForest*``, ``ExtraTrees*``, ``GradientBoosting*`` and
``HistGradientBoosting*`` models; regression and binary classification; numerical
splits everywhere and the native categorical splits of HistGradientBoosting,
LightGBM and XGBoost. Trees are
read in the model's *raw* output space (the margin, i.e. log-odds for boosted
classifiers; the class-1 probability for forests and single trees, which average
leaf class shares).

Split semantics differ between libraries and are kept exactly:

* XGBoost goes left when ``x < threshold`` and compares in float32;
* LightGBM, scikit-learn and HistGradientBoosting go left when ``x <= threshold``
  (scikit-learn's trees compare float32 inputs, the others float64);
* a missing value follows the node's stored default direction (LightGBM nodes
  whose ``missing_type`` is ``None`` treat NaN as 0, as LightGBM does).

A categorical split sends a row left iff its category is in the node's set. The
raw value is mapped to a *category bin* per feature (:attr:`TreeEnsemble.encode`)
exactly as each library does before its set lookup:

* HistGradientBoosting: NaN, negative values and categories unseen in training
  follow ``missing_go_to_left``; other values are truncated to an integer (values
  of 256 and above, never valid HGB categories, are treated as unseen). A model
  fitted on string categories takes each such column as the position of its value
  among the model's categories (:attr:`TreeEnsemble.categories`; NaN when missing
  or unseen), which is what its internal ``OrdinalEncoder`` produces;
* LightGBM: the value is truncated to an integer; NaN, negative values and
  categories not in the node's set go right (whatever the ``missing_type``);
* XGBoost: the value is cast to float32 and truncated; the node's category list
  goes *right*, everything else (including negative and out-of-range values)
  left; NaN follows ``default_left``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from trustlab.errors import ModelError
from trustlab.explain._tree_arrays import TreeArrays, TreeEnsemble
from trustlab.explain._tree_categories import (
    categorical_widths,
    encoder_hist,
    encoder_lightgbm,
    encoder_xgboost,
    hist_layout,
    pad_categories,
    unpack_bitset,
)

__all__ = [
    "SUPPORTED_MODELS",
    "TreeArrays",
    "TreeEnsemble",
    "ensemble_from_model",
    "trees_from_lightgbm",
    "trees_from_sklearn",
    "trees_from_xgboost",
]

SUPPORTED_MODELS = (
    "xgboost (XGBRegressor, XGBClassifier for binary targets, Booster with gbtree), "
    "lightgbm (LGBMRegressor, LGBMClassifier for binary targets, Booster), scikit-learn "
    "(DecisionTree*, RandomForest*, ExtraTrees*, GradientBoosting*, HistGradientBoosting*); "
    "numerical splits and the native categorical splits of HistGradientBoosting, "
    "LightGBM and XGBoost"
)


def _reject_multiclass(n_classes: int | None, model: Any) -> None:
    if n_classes is not None and n_classes > 2:
        raise ModelError(
            f"{type(model).__name__} has {n_classes} classes; FastPD supports regression and "
            "binary classification. Explain one class at a time with a one-vs-rest model.",
            argument="model",
        )


# --------------------------------------------------------------------------- XGBoost
def trees_from_xgboost(model: Any) -> tuple[list[TreeArrays], float]:
    """Read an XGBoost model (sklearn wrapper or ``Booster``) into node arrays.

    Split values and leaf values are taken from the JSON model (``save_raw("json")``),
    which stores them exactly.

    Parameters
    ----------
    model : fitted XGBRegressor, XGBClassifier (binary) or Booster (gbtree)

    Returns
    -------
    trees : list of TreeArrays
    weight : float
        Weight of every tree in the sum (1.0: boosted trees add up).

    Examples
    --------
    >>> import numpy as np
    >>> xgboost = __import__("pytest").importorskip("xgboost")
    >>> from trustlab.explain import trees_from_xgboost
    >>> X = np.arange(8.0).reshape(4, 2)
    >>> model = xgboost.XGBRegressor(n_estimators=2, max_depth=1).fit(X, [0, 0, 1, 1])
    >>> trees, weight = trees_from_xgboost(model)
    >>> len(trees), weight
    (2, 1.0)
    """
    booster = model.get_booster() if hasattr(model, "get_booster") else model
    if not hasattr(booster, "save_raw"):
        raise ModelError(
            f"model must be a fitted XGBoost model or Booster, got {type(model).__name__}.", argument="model"
        )
    cfg = json.loads(bytes(booster.save_raw(raw_format="json")))
    learner = cfg["learner"]
    gb = learner["gradient_booster"]
    if gb.get("name") != "gbtree":
        raise ModelError(
            f"XGBoost booster {gb.get('name')!r} is not supported; FastPD needs "
            "booster='gbtree' (dart re-weights trees, gblinear has none).",
            argument="model",
        )
    params = learner.get("learner_model_param", {})
    n_class = int(float(params.get("num_class", 0) or 0))
    n_target = int(float(params.get("num_target", 1) or 1))
    if n_class > 1 or n_target > 1:
        raise ModelError(
            f"the XGBoost model has {max(n_class, n_target)} outputs; FastPD supports "
            "regression and binary classification (one output).",
            argument="model",
        )
    trees = []
    for t in gb["model"]["trees"]:
        left = np.asarray(t["left_children"], dtype=np.int64)
        right = np.asarray(t["right_children"], dtype=np.int64)
        cond = np.asarray(t["split_conditions"], dtype=np.float32).astype(np.float64)
        is_leaf = left == -1
        cat_left: dict[int, np.ndarray] = {}
        split_type = np.asarray(t.get("split_type", []), dtype=np.int64)
        if np.any(split_type != 0):
            # XGBoost sends the listed categories right and every other value left.
            cats = np.asarray(t.get("categories", []), dtype=np.int64)
            segs = t.get("categories_segments", [])
            sizes = t.get("categories_sizes", [])
            for node, seg, size in zip(t.get("categories_nodes", []), segs, sizes, strict=True):
                right_cats = cats[int(seg) : int(seg) + int(size)]
                mask = np.ones(int(right_cats.max(initial=-1)) + 1, dtype=bool)
                mask[right_cats] = False
                cat_left[int(node)] = mask
            if set(np.nonzero(split_type != 0)[0].tolist()) != set(cat_left):
                raise ModelError(
                    "the XGBoost model has categorical splits without category lists; "
                    "FastPD cannot read them. Please report this model.",
                    argument="model",
                )
        trees.append(
            TreeArrays(
                feature=np.where(is_leaf, -1, np.asarray(t["split_indices"], dtype=np.int64)),
                threshold=np.where(is_leaf, np.nan, cond),
                left=left,
                right=right,
                value=np.where(is_leaf, cond, 0.0),
                cover=np.asarray(t["sum_hessian"], dtype=np.float64),
                nan_left=np.asarray(t["default_left"], dtype=bool),
                cat_left=cat_left,
            )
        )
    return pad_categories(trees, other_left=True), 1.0


# --------------------------------------------------------------------------- LightGBM
def _lightgbm_tree(info: dict[str, Any]) -> TreeArrays:
    """Flatten one tree of ``dump_model()`` into node arrays."""
    if info.get("is_linear"):
        raise ModelError(
            "LightGBM linear trees are not supported by FastPD; train with linear_tree=False.",
            argument="model",
        )
    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []
    value: list[float] = []
    cover: list[float] = []
    nan_left: list[bool] = []
    cat_left: dict[int, np.ndarray] = {}

    def add(node: dict[str, Any]) -> int:
        idx = len(feature)
        for lst, v in (
            (feature, -1),
            (threshold, np.nan),
            (left, -1),
            (right, -1),
            (value, 0.0),
            (cover, 0.0),
            (nan_left, True),
        ):
            lst.append(v)  # type: ignore[arg-type]
        if "split_feature" not in node:
            value[idx] = float(node["leaf_value"])
            cover[idx] = float(node.get("leaf_count", 0))
            return idx
        decision = node.get("decision_type", "<=")
        if decision not in ("<=", "=="):
            raise ModelError(
                f"the LightGBM model has a split of type {decision!r}; FastPD supports "
                "numerical ('<=') and categorical ('==') splits.",
                argument="model",
            )
        missing = node.get("missing_type", "None")
        if missing == "Zero":
            raise ModelError(
                "the LightGBM model treats zeros as missing (zero_as_missing=True); "
                "FastPD does not support that routing. Retrain with zero_as_missing=False.",
                argument="model",
            )
        feature[idx] = int(node["split_feature"])
        cover[idx] = float(node.get("internal_count", 0))
        if decision == "==":
            # The listed categories go left; NaN, negative and unlisted values go
            # right, whatever the missing_type (LightGBM's CategoricalDecision).
            left_cats = np.asarray([int(c) for c in str(node["threshold"]).split("||")], dtype=np.int64)
            mask = np.zeros(int(left_cats.max(initial=-1)) + 1, dtype=bool)
            mask[left_cats[left_cats >= 0]] = True
            cat_left[idx] = mask
            nan_left[idx] = False
        else:
            thr = float(node["threshold"])
            threshold[idx] = thr
            # missing_type "NaN": NaN follows default_left; "None": NaN is read as 0.
            nan_left[idx] = bool(node["default_left"]) if missing == "NaN" else 0.0 <= thr
        left[idx] = add(node["left_child"])
        right[idx] = add(node["right_child"])
        return idx

    add(info["tree_structure"])
    return TreeArrays(
        feature=np.asarray(feature, dtype=np.int64),
        threshold=np.asarray(threshold, dtype=np.float64),
        left=np.asarray(left, dtype=np.int64),
        right=np.asarray(right, dtype=np.int64),
        value=np.asarray(value, dtype=np.float64),
        cover=np.asarray(cover, dtype=np.float64),
        nan_left=np.asarray(nan_left, dtype=bool),
        cat_left=cat_left,
    )


def trees_from_lightgbm(model: Any) -> tuple[list[TreeArrays], float]:
    """Read a LightGBM model (``LGBMModel`` or ``Booster``) from ``dump_model()``.

    Parameters
    ----------
    model : fitted LGBMRegressor, LGBMClassifier (binary) or Booster

    Returns
    -------
    trees, weight
        As in :func:`trees_from_xgboost`.

    Examples
    --------
    >>> import numpy as np
    >>> lightgbm = __import__("pytest").importorskip("lightgbm")
    >>> from trustlab.explain import trees_from_lightgbm
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> model = lightgbm.LGBMRegressor(n_estimators=3, min_child_samples=5, verbose=-1).fit(X, X[:, 0])
    >>> trees, weight = trees_from_lightgbm(model)
    >>> len(trees), weight
    (3, 1.0)
    """
    booster = model.booster_ if hasattr(model, "booster_") else model
    if not hasattr(booster, "dump_model"):
        raise ModelError(
            f"model must be a fitted LightGBM model or Booster, got {type(model).__name__}.", argument="model"
        )
    dump = booster.dump_model()
    if int(dump.get("num_tree_per_iteration", 1)) != 1:
        raise ModelError(
            f"the LightGBM model has {dump.get('num_tree_per_iteration')} trees per "
            "iteration (multiclass); FastPD supports regression and binary classification.",
            argument="model",
        )
    trees = [_lightgbm_tree(info) for info in dump["tree_info"]]
    return pad_categories(trees, other_left=False), 1.0


# --------------------------------------------------------------------------- scikit-learn
def _from_sklearn_tree(tree: Any, scale: float, proba: bool) -> TreeArrays:
    t = tree.tree_
    left = np.asarray(t.children_left, dtype=np.int64)
    is_leaf = left == -1
    val = np.asarray(t.value)
    if proba:
        shares = val[:, 0, :] / np.maximum(val[:, 0, :].sum(axis=1, keepdims=True), 1e-300)
        leaf_value = shares[:, 1]
    else:
        leaf_value = val[:, 0, 0]
    nan_left = getattr(t, "missing_go_to_left", None)
    return TreeArrays(
        feature=np.where(is_leaf, -1, np.asarray(t.feature, dtype=np.int64)),
        threshold=np.where(is_leaf, np.nan, np.asarray(t.threshold, dtype=np.float64)),
        left=left,
        right=np.asarray(t.children_right, dtype=np.int64),
        value=np.where(is_leaf, leaf_value * scale, 0.0),
        cover=np.asarray(t.weighted_n_node_samples, dtype=np.float64),
        nan_left=(np.ones(len(left), dtype=bool) if nan_left is None else np.asarray(nan_left, bool)),
    )


def _from_hist_predictor(predictor: Any) -> TreeArrays:
    nodes = predictor.nodes
    is_leaf = nodes["is_leaf"].astype(bool)
    cat_left = {
        int(i): unpack_bitset(predictor.raw_left_cat_bitsets[int(nodes["bitset_idx"][i])])
        for i in np.nonzero(nodes["is_categorical"].astype(bool) & ~is_leaf)[0]
    }
    return TreeArrays(
        feature=np.where(is_leaf, -1, nodes["feature_idx"].astype(np.int64)),
        threshold=np.where(is_leaf, np.nan, nodes["num_threshold"].astype(np.float64)),
        left=np.where(is_leaf, -1, nodes["left"].astype(np.int64)),
        right=np.where(is_leaf, -1, nodes["right"].astype(np.int64)),
        value=np.where(is_leaf, nodes["value"].astype(np.float64), 0.0),
        cover=nodes["count"].astype(np.float64),
        nan_left=nodes["missing_go_to_left"].astype(bool),
        cat_left=cat_left,
    )


def trees_from_sklearn(model: Any) -> tuple[list[TreeArrays], float]:
    """Read a fitted scikit-learn tree model into node arrays (and the tree weight).

    Parameters
    ----------
    model : fitted DecisionTree*, RandomForest*, ExtraTrees*, GradientBoosting* or HistGradientBoosting*

    Returns
    -------
    trees : list of TreeArrays
    weight : float
        Weight of every tree in the sum (``1 / n_trees`` for forests, else 1.0).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> X = np.arange(8.0).reshape(4, 2)
    >>> trees, weight = trees_from_sklearn(DecisionTreeRegressor(max_depth=1).fit(X, [0, 0, 1, 1]))
    >>> len(trees), weight, trees[0].left.tolist(), trees[0].value.tolist()
    (1, 1.0, [1, -1, -1], [0.0, 0.0, 1.0])
    """
    name = type(model).__name__
    _reject_multiclass(len(getattr(model, "classes_", [])) or None, model)
    if name.startswith("HistGradientBoosting"):
        if getattr(model, "n_trees_per_iteration_", 1) != 1:
            raise ModelError(
                "the HistGradientBoosting model is multiclass; FastPD supports regression "
                "and binary classification.",
                argument="model",
            )
        to_input, _, _ = hist_layout(model)
        trees = [_from_hist_predictor(p[0]) for p in model._predictors]
        # the trees index the model's internal columns; renumber to the input's
        return [replace(t, feature=np.where(t.left == -1, -1, to_input[t.feature])) for t in trees], 1.0
    is_clf = hasattr(model, "classes_")
    if name.startswith("GradientBoosting"):
        lr = float(model.learning_rate)
        return [_from_sklearn_tree(est[0], lr, proba=False) for est in model.estimators_], 1.0
    if name.startswith(("RandomForest", "ExtraTrees")):
        ests = list(model.estimators_)
        return [_from_sklearn_tree(e, 1.0, proba=is_clf) for e in ests], 1.0 / len(ests)
    if name.startswith(("DecisionTree", "ExtraTree")):
        return [_from_sklearn_tree(model, 1.0, proba=is_clf)], 1.0
    raise ModelError(f"unsupported model {name}; supported: {SUPPORTED_MODELS}.", argument="model")


def _sklearn_raw(model: Any) -> Callable[[np.ndarray], np.ndarray]:
    name = type(model).__name__
    if name.startswith("HistGradientBoosting"):

        def raw_hist(X: np.ndarray) -> np.ndarray:
            with warnings.catch_warnings():  # fitted on a DataFrame; FastPD passes arrays
                warnings.filterwarnings("ignore", message="X does not have valid feature names")
                return np.asarray(model._raw_predict(X), dtype=np.float64).ravel()

        return raw_hist
    if hasattr(model, "classes_"):
        if name.startswith("GradientBoosting"):
            return lambda X: np.asarray(model.decision_function(X), dtype=np.float64).ravel()
        return lambda X: np.asarray(model.predict_proba(X), dtype=np.float64)[:, 1]
    return lambda X: np.asarray(model.predict(X), dtype=np.float64).ravel()


def ensemble_from_model(model: Any) -> TreeEnsemble:
    """Identify the library of ``model`` and read its trees (raises :class:`ModelError`).

    Parameters
    ----------
    model : fitted tree model
        XGBoost, LightGBM or scikit-learn (see :data:`SUPPORTED_MODELS`).

    Returns
    -------
    TreeEnsemble

    Examples
    --------
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> import numpy as np
    >>> X = np.arange(20.0).reshape(10, 2); y = X[:, 0]
    >>> ens = ensemble_from_model(GradientBoostingRegressor(n_estimators=3).fit(X, y))
    >>> len(ens.trees), ens.strict
    (3, False)
    """
    module = type(model).__module__.split(".")[0]
    name = type(model).__name__
    if name == "Pipeline":
        raise ModelError(
            "model is a scikit-learn Pipeline; explain its final estimator on the "
            "transformed features: FastPD(pipe[-1]).fit(pipe[:-1].transform(X)).",
            argument="model",
        )
    if module == "xgboost":
        if hasattr(model, "n_classes_"):
            _reject_multiclass(int(model.n_classes_), model)
        trees, w = trees_from_xgboost(model)
        booster = model.get_booster() if hasattr(model, "get_booster") else model
        names = booster.feature_names
        types = booster.feature_types
        widths = categorical_widths(trees)

        def predict_xgb(X: np.ndarray) -> np.ndarray:
            import xgboost

            dm = xgboost.DMatrix(X, feature_names=names, feature_types=types, enable_categorical=True)
            return np.asarray(booster.predict(dm, output_margin=True), dtype=np.float64)

        n_features = int(booster.num_features())
        return TreeEnsemble(
            tuple(trees),
            n_features,
            True,
            np.float32,
            w,
            predict_xgb,
            "xgboost",
            tuple(names) if names else None,
            widths,
            encoder_xgboost(widths) if widths else None,
        )
    if module == "lightgbm":
        if hasattr(model, "n_classes_") and getattr(model, "_n_classes", None):
            _reject_multiclass(int(model.n_classes_), model)
        trees, w = trees_from_lightgbm(model)
        booster = model.booster_ if hasattr(model, "booster_") else model

        def predict_lgb(X: np.ndarray) -> np.ndarray:
            return np.asarray(booster.predict(X, raw_score=True), dtype=np.float64).ravel()

        widths = categorical_widths(trees)
        return TreeEnsemble(
            tuple(trees),
            int(booster.num_feature()),
            False,
            np.float64,
            w,
            predict_lgb,
            "lightgbm",
            tuple(booster.feature_name()),
            widths,
            encoder_lightgbm(widths) if widths else None,
        )
    if module == "sklearn" and hasattr(model, "n_features_in_"):
        trees, w = trees_from_sklearn(model)
        dtype = np.float64 if name.startswith("HistGradientBoosting") else np.float32
        names = getattr(model, "feature_names_in_", None)
        widths = categorical_widths(trees)
        return TreeEnsemble(
            tuple(trees),
            int(model.n_features_in_),
            False,
            dtype,
            w,
            _sklearn_raw(model),
            "sklearn",
            tuple(map(str, names)) if names is not None else None,
            widths,
            encoder_hist(model) if widths else None,
            hist_layout(model)[2] if name.startswith("HistGradientBoosting") else {},
        )
    if module == "sklearn":
        raise ModelError(
            f"{name} is not fitted (or not a tree model); fit it first. Supported: {SUPPORTED_MODELS}.",
            argument="model",
        )
    raise ModelError(
        f"unsupported model type {module}.{name}; FastPD explains tree ensembles: {SUPPORTED_MODELS}.",
        argument="model",
    )
