"""Explanations: FastPD (partial dependence, interventional SHAP, interactions) and more.

See ``docs/explain/`` for one page per method.
"""

from trustlab.explain._trees import (
    TreeArrays,
    TreeEnsemble,
    ensemble_from_model,
    trees_from_lightgbm,
    trees_from_sklearn,
    trees_from_xgboost,
)
from trustlab.explain.fastpd import FastPD

__all__ = [
    "FastPD",
    "TreeArrays",
    "TreeEnsemble",
    "ensemble_from_model",
    "trees_from_lightgbm",
    "trees_from_sklearn",
    "trees_from_xgboost",
]
