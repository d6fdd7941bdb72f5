"""Faithfulness of attributions: insertion and deletion curves, and gradient x input.

The metrics SOP is judged by (docs/explain/sum-of-parts.md): they take any torch classifier, a
fitted :class:`~trustlab.explain.sop.SumOfParts` or a callable returning probabilities.

References
----------
.. [1] Petsiuk, Das, Saenko. "RISE: Randomized Input Sampling for Explanation of Black-box
   Models". BMVC 2018 (insertion and deletion).
.. [2] You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with
   End-to-End Learning of Feature Groups". ICML 2025.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError
from trustlab.explain.sop import _CHUNK, _check_inputs, _check_model

__all__ = ["InsertionDeletion", "gradient_x_input", "insertion_deletion"]


def _proba_fn(model: Any) -> Any:
    if hasattr(model, "predict_proba"):
        return model.predict_proba
    if isinstance(model, torch.nn.Module):

        def proba(X: np.ndarray) -> np.ndarray:
            model.eval()
            with torch.no_grad():
                out = [model(torch.as_tensor(X[s : s + _CHUNK])) for s in range(0, len(X), _CHUNK)]
            return torch.softmax(torch.cat(out), dim=1).numpy().astype(np.float64)

        return proba
    if callable(model):
        return model
    raise ModelError(
        "model must be a torch.nn.Module, an estimator with predict_proba or a callable returning "
        f"probabilities; got {type(model).__name__}.",
        argument="model",
    )


def gradient_x_input(model: Any, X: Any, target: Any = None) -> np.ndarray:
    """Gradient x input attributions of a torch classifier (the post-hoc baseline).

    Parameters
    ----------
    model : torch.nn.Module
        Maps a float batch to logits.
    X : array-like of shape (n, ...)
    target : int or array-like of shape (n,), optional
        Class per row; ``None``: the model's prediction.

    Returns
    -------
    ndarray of shape (n, ...)
        ``x * d logit_target / d x``.

    References
    ----------
    .. [1] Shrikumar, Greenside, Kundaje. "Learning Important Features Through Propagating
       Activation Differences". ICML 2017.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Linear(3, 2)
    >>> gradient_x_input(net, np.ones((1, 3)), target=0).shape
    (1, 3)
    """
    _check_model(model, "model")
    Xt = torch.as_tensor(_check_inputs(X)).requires_grad_(True)
    model.eval()
    out = model(Xt)
    t = (
        out.argmax(1)
        if target is None
        else torch.as_tensor(np.broadcast_to(np.asarray(target), (len(Xt),)).copy())
    )
    (g,) = torch.autograd.grad(out.gather(1, t.long().view(-1, 1)).sum(), Xt)
    return (g * Xt).detach().numpy().astype(np.float64)


@dataclass(frozen=True)
class InsertionDeletion:
    """Insertion and deletion curves of attributions (see :func:`insertion_deletion`).

    Attributes
    ----------
    fractions : ndarray of shape (steps + 1,)
        Share of features inserted or deleted, 0 to 1.
    insertion_curve, deletion_curve : ndarray of shape (n, steps + 1)
        Probability of the class predicted on the full input.
    insertion, deletion : ndarray of shape (n,)
        Areas under the curves (trapezoid over ``fractions``): higher insertion and lower
        deletion mean more faithful attributions.

    See Also
    --------
    insertion_deletion : builds it (its example shows one).
    """

    fractions: np.ndarray
    insertion_curve: np.ndarray
    deletion_curve: np.ndarray
    insertion: np.ndarray
    deletion: np.ndarray


@validate_params({"steps": [Interval(numbers.Integral, 1, None, closed="left")], "baseline": [numbers.Real]})
def insertion_deletion(
    model: Any, X: Any, attributions: Any, *, steps: int = 10, baseline: float = 0.0
) -> InsertionDeletion:
    """Insertion and deletion AUCs of per-feature attributions (Petsiuk et al.; SOP's Table 2).

    Features are ranked by attribution. Insertion starts from ``baseline`` everywhere and puts
    back the top ``k`` features; deletion sets the top ``k`` to ``baseline``; ``k`` runs over
    ``steps + 1`` evenly spaced shares. Each curve is the model's probability of the class it
    predicts on the full input.

    Parameters
    ----------
    model : torch.nn.Module, estimator with ``predict_proba`` or callable
        The model the attributions explain (a fitted :class:`SumOfParts` for its own maps).
    X : array-like of shape (n, ...)
    attributions : array-like of shape (n, ...)
        One score per feature of ``X``.
    steps : int, default=10
        Grid of shares ``0, 1/steps, ..., 1`` (the authors use 10 steps).
    baseline : float, default=0.0
        Value of removed features (the paper's zero occlusion).

    Returns
    -------
    InsertionDeletion

    References
    ----------
    .. [1] Petsiuk, Das, Saenko. "RISE: Randomized Input Sampling for Explanation of Black-box
       Models". BMVC 2018.
    .. [2] You et al. "Sum-of-Parts". ICML 2025.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 2))
    >>> X = np.random.default_rng(0).normal(size=(5, 4)).astype("float32")
    >>> r = insertion_deletion(net, X, gradient_x_input(net, X), steps=4)
    >>> r.insertion_curve.shape
    (5, 5)
    """
    proba = _proba_fn(model)
    X = _check_inputs(X)
    A = check_numeric_array(attributions, "attributions", min_rows=1)
    if A.shape != X.shape:
        raise DataError(
            f"attributions must have the shape of X {X.shape}; got {A.shape}.", argument="attributions"
        )
    n, shape = len(X), X.shape[1:]
    flat, d = X.reshape(n, -1), int(np.prod(shape))
    rank = np.argsort(-A.reshape(n, -1), axis=1, kind="stable")
    pos = np.empty_like(rank)
    np.put_along_axis(pos, rank, np.arange(d)[None, :].repeat(n, 0), axis=1)
    fractions = np.linspace(0.0, 1.0, int(steps) + 1)
    ks = np.round(fractions * d).astype(int)
    keep = pos[:, None, :] < ks[None, :, None]  # (n, steps+1, d): top-k features
    base = np.float32(baseline)
    ins = np.where(keep, flat[:, None, :], base).reshape(-1, *shape)
    dele = np.where(keep, base, flat[:, None, :]).reshape(-1, *shape)
    target = np.asarray(proba(X)).argmax(1)
    rows = np.repeat(np.arange(n), len(ks))
    cols = np.repeat(target, len(ks))
    p_ins = np.asarray(proba(ins.astype(np.float32)))[np.arange(len(rows)), cols].reshape(n, -1)
    p_del = np.asarray(proba(dele.astype(np.float32)))[np.arange(len(rows)), cols].reshape(n, -1)
    return InsertionDeletion(
        fractions=fractions,
        insertion_curve=p_ins,
        deletion_curve=p_del,
        insertion=np.trapezoid(p_ins, fractions, axis=1),
        deletion=np.trapezoid(p_del, fractions, axis=1),
    )
