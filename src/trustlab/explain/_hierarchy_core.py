"""Logits to Hierarchies (L2H): the merging loop and the SciPy linkage export."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils.validation import check_is_fitted

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError

AGGREGATIONS = ("sum", "mean", "max")


def check_logits(logits: Any, name: str = "logits") -> np.ndarray:
    """An (N, K) float array of finite logits with K >= 2."""
    z = check_numeric_array(logits, name, ndim=2, min_rows=1, allow_nan=True)
    if not np.all(np.isfinite(z)):
        raise DataError(
            f"{name} holds NaN or infinite values (in {int((~np.isfinite(z)).any(axis=1).sum())} "
            "row(s)); a hierarchy needs finite logits: check the model's output for those rows.",
            argument=name,
        )
    if z.shape[1] < 2:
        raise DataError(
            f"{name} has {z.shape[1]} column(s): a hierarchy needs at least 2 clusters (one "
            "logit column per cluster).",
            argument=name,
        )
    return z


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stable for large logits."""
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _call_model(model: Any, method: str, X: Any) -> Any:
    try:
        return getattr(model, method)(X)
    except SklearnNotFittedError:
        raise ModelError(
            f"model ({type(model).__name__}) is not fitted; fit it before building its hierarchy.",
            argument="model",
        ) from None
    except (ValueError, TypeError) as exc:
        raise DataError(
            f"model.{method}(X) failed on X ({exc}); pass the input the model was fitted on "
            "(same features), or the logits themselves with model=None.",
            argument="X",
        ) from None


def model_logits(model: Any, X: Any, temperature: float | None) -> np.ndarray:
    """Logits of a fitted flat model: log-probabilities, decision values or k-means distances."""
    if callable(getattr(model, "fit", None)):
        try:
            check_is_fitted(model)
        except SklearnNotFittedError:
            raise ModelError(
                f"model ({type(model).__name__}) is not fitted; fit it before building its hierarchy.",
                argument="model",
            ) from None
        except TypeError:  # not a scikit-learn estimator: try its methods below
            pass
    for method in ("predict_log_proba", "predict_proba", "decision_function"):
        if callable(getattr(model, method, None)):
            try:
                out = np.asarray(_call_model(model, method, X), dtype=float)
            except AttributeError:  # e.g. predict_proba unavailable for this configuration
                continue
            if method == "predict_proba":
                out = np.log(np.clip(out, 1e-300, None))
            if out.ndim == 1:  # a binary decision function: two opposite logits
                out = np.column_stack([-out / 2, out / 2])
            return out
    if callable(getattr(model, "transform", None)) and hasattr(model, "cluster_centers_"):
        d2 = np.asarray(_call_model(model, "transform", X), dtype=float) ** 2
        t = temperature
        if t is None:
            nearest = d2.min(axis=1)
            t = float(np.median(nearest)) if np.median(nearest) > 0 else 1.0
        return -d2 / t
    raise ModelError(
        f"model ({type(model).__name__}) gives no logits: it needs predict_log_proba, "
        "predict_proba or decision_function (a classifier, a GaussianMixture), or transform "
        "with cluster_centers_ (k-means distances, turned into logits -d**2 / temperature); "
        "or pass the (n_samples, n_clusters) logits to fit() directly.",
        argument="model",
    )


def l2h_merges(
    z: np.ndarray, aggregation: str = "sum"
) -> tuple[list[tuple[tuple[int, ...], tuple[int, ...]]], np.ndarray, np.ndarray]:
    """Run L2H; returns (merges, argmax labels, cluster confidences m_c)."""
    k = z.shape[1]
    p = softmax(z)
    labels = p.argmax(axis=1)
    q = p.max(axis=1)
    sizes = np.bincount(labels, minlength=k)
    conf = np.divide(np.bincount(labels, weights=q, minlength=k), sizes, out=np.zeros(k), where=sizes > 0)
    groups: list[list[int]] = [[c] for c in range(k)]
    merges: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    order = np.argsort(labels, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    for _ in range(k - 1):
        if aggregation == "sum":
            scores = [conf[g].sum() for g in groups]
        elif aggregation == "mean":
            scores = [conf[g].mean() for g in groups]
        else:
            scores = [conf[g].max() for g in groups]
        low = int(np.argmin(scores))  # first in list order on ties
        g_low = groups[low]
        members = np.concatenate([order[starts[c] : starts[c + 1]] for c in g_low])
        mass_cluster: np.ndarray = np.zeros(k)
        if members.size:
            sub = p[members].copy()
            sub[:, g_low] = 0.0
            sub /= sub.sum(axis=1, keepdims=True)
            target = sub.argmax(axis=1)
            mass_cluster = np.bincount(target, weights=sub[np.arange(members.size), target], minlength=k)
        best, best_mass = -1, -np.inf
        for pos, g in enumerate(groups):
            if pos == low:
                continue
            mass = float(mass_cluster[g].mean())
            if mass > best_mass:
                best, best_mass = pos, mass
        g_tgt = groups[best]
        merges.append((tuple(g_low), tuple(g_tgt)))
        new = g_low + g_tgt
        groups = [g for pos, g in enumerate(groups) if pos not in (low, best)] + [new]
    return merges, labels, conf


def merges_to_linkage_array(
    merges: list[tuple[tuple[int, ...], tuple[int, ...]]], n_leaves: int
) -> np.ndarray:
    """SciPy linkage ``(n_leaves - 1, 4)``: node ``n_leaves + s`` made at step ``s``, height ``s + 1``."""
    node_of: dict[frozenset[int], int] = {frozenset([c]): c for c in range(n_leaves)}
    out = np.zeros((len(merges), 4))
    for s, (a, b) in enumerate(merges):
        fa, fb = frozenset(a), frozenset(b)
        if fa not in node_of or fb not in node_of or fa & fb:
            raise DataError(
                f"merges[{s}] = ({a}, {b}) does not join two current groups of the tree; pass "
                "the merges produced by logits_to_hierarchy.",
                argument="merges",
            )
        i, j = node_of.pop(fa), node_of.pop(fb)
        out[s] = (i, j, s + 1, len(fa) + len(fb))
        node_of[fa | fb] = n_leaves + s
    return out
