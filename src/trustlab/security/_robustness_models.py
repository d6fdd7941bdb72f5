"""Model kinds for the robustness checks: torch, analytic scikit-learn, tree, other.

scikit-learn's ``LogisticRegression`` and ``MLPClassifier`` (bare estimators on numeric
arrays) are rebuilt as torch modules from their fitted weights, so their input gradients
are exact (analytic) and the same projected-gradient search serves them and torch models.
Trees (and pipelines ending in one) are piecewise constant: no gradient exists, and the
audit reports only the model-agnostic OOD part for them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.security._nets import require_torch

__all__ = ["final_estimator", "is_tree_model", "model_kind", "torch_logits"]

_TREE_NAMES = ("Tree", "Forest", "Boosting", "XGB", "LGBM", "CatBoost", "Booster")


def final_estimator(model: Any) -> Any:
    """The last step of a scikit-learn Pipeline (the model itself otherwise)."""
    steps = getattr(model, "steps", None)
    if isinstance(steps, list) and steps:
        return final_estimator(steps[-1][1])
    return model


def is_tree_model(model: Any) -> bool:
    """Whether the model (or a pipeline's final step) is a tree or tree ensemble."""
    est = final_estimator(model)
    return any(part in type(est).__name__ for part in _TREE_NAMES)


def model_kind(model: Any) -> str:
    """``"torch"``, ``"logistic"``, ``"mlp"`` (analytic gradients), ``"tree"`` or ``"other"``."""
    try:
        import torch

        if isinstance(model, torch.nn.Module):
            return "torch"
    except ImportError:  # pragma: no cover - torch is in the dev extra
        pass
    if is_tree_model(model):
        return "tree"
    name = type(model).__name__
    if name == "LogisticRegression" and hasattr(model, "coef_"):
        return "logistic"
    if name == "MLPClassifier" and hasattr(model, "coefs_"):
        return "mlp"
    return "other"


def torch_logits(model: Any, kind: str) -> Any:
    """A torch callable mapping a (n, d) float tensor to logits whose argmax is ``predict``."""
    torch = require_torch()
    if kind == "torch":
        return model
    if kind == "logistic":
        w = torch.as_tensor(np.asarray(model.coef_, dtype=np.float64))
        b = torch.as_tensor(np.asarray(model.intercept_, dtype=np.float64))

        def logistic(x: Any) -> Any:
            z = x.to(torch.float64) @ w.T + b
            return torch.cat([torch.zeros_like(z), z], dim=1) if z.shape[1] == 1 else z

        return logistic
    weights = [torch.as_tensor(np.asarray(c, dtype=np.float64)) for c in model.coefs_]
    biases = [torch.as_tensor(np.asarray(c, dtype=np.float64)) for c in model.intercepts_]
    act = {
        "relu": torch.relu,
        "tanh": torch.tanh,
        "logistic": torch.sigmoid,
        "identity": lambda v: v,
    }[model.activation]

    def mlp(x: Any) -> Any:
        h = x.to(torch.float64)
        for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
            h = h @ w + b
            if i < len(weights) - 1:
                h = act(h)
        return torch.cat([torch.zeros_like(h), h], dim=1) if h.shape[1] == 1 else h

    return mlp
