"""Judging SAeUron's removals, and the mean-difference ablation it is compared with (row 003-06).

:func:`unlearning_rates` turns a judge's verdicts on generations into the paper's two numbers
(UnlearnCanvas' unlearning accuracy and in-domain retain accuracy, here as the removed
concepts' generation rate and the kept concepts' accuracy). :func:`mean_difference_directions`
and :func:`mean_difference_ablation` are the baseline without a sparse autoencoder: at the same
block and step, the unit direction from the kept concepts' mean activation to the removed
ones', projected out of every patch where it points towards the removed concepts (one
direction for the whole removed set, or one per concept). See docs/unlearning/saeuron.md.

References
----------
.. [1] B. Cywinski, K. Deja. "SAeUron: Interpretable Concept Unlearning in Diffusion Models
   with Sparse Autoencoders". ICML 2025.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from trustlab.errors import DataError, ParameterError
from trustlab.unlearning import _saeuron_hooks as hk

__all__ = ["UnlearningRates", "mean_difference_ablation", "mean_difference_directions", "unlearning_rates"]


@dataclass(frozen=True)
class UnlearningRates:
    """A judge's verdict on one removal.

    Attributes
    ----------
    removed_rate : float
        Share of the removed concepts' prompts still judged their concept (``1 - UA``).
    retained_accuracy : float
        Share of the other prompts judged their own concept (``IRA``).
    per_concept : dict
        Concept -> share of its prompts judged it.
    n_removed, n_retained : int
        Prompts behind each rate.

    See Also
    --------
    unlearning_rates : builds it from a judge's labels.

    Examples
    --------
    >>> r = unlearning_rates(["cat", "cat", "dog", "owl"], ["cat", "dog", "dog", "dog"], "cat")
    >>> r.removed_rate, r.retained_accuracy, r.n_removed, r.n_retained
    (0.5, 0.5, 2, 2)
    >>> r.per_concept
    {'cat': 0.5, 'dog': 1.0, 'owl': 0.0}
    """

    removed_rate: float
    retained_accuracy: float
    per_concept: dict[Any, float]
    n_removed: int
    n_retained: int


def unlearning_rates(y: Any, predicted: Any, unlearn: Any) -> UnlearningRates:
    """Removed concepts' generation rate and the others' accuracy from a judge's labels.

    Parameters
    ----------
    y : array-like of shape (n,)
        The prompt (concept) of each generation.
    predicted : array-like of shape (n,)
        The judge's label of each generation (e.g. a classifier trained on real data, as
        UnlearnCanvas judges).
    unlearn : label or sequence of labels
        The removed concepts; at least one prompt of them and one of another concept.

    Returns
    -------
    UnlearningRates

    See Also
    --------
    trustlab.unlearning.saeuron.SAeUron.tune : the per-concept sweep with the same two rates.

    Examples
    --------
    >>> r = unlearning_rates([3, 3, 1, 1], [3, 8, 1, 7], [3])
    >>> r.removed_rate, r.retained_accuracy
    (0.5, 0.5)
    """
    y_arr, pred = np.asarray(y), np.asarray(predicted)
    if y_arr.ndim != 1 or pred.shape != y_arr.shape:
        raise DataError(
            f"predicted must hold one label per prompt of y ({y_arr.shape}); got {pred.shape}.",
            argument="predicted",
        )
    items = list(unlearn) if isinstance(unlearn, list | tuple | np.ndarray) else [unlearn]
    on = np.isin(y_arr, items)
    if not on.any() or on.all():
        raise DataError(
            "y must hold prompts of the removed concepts (unlearn) and of at least one other.",
            argument="y",
        )
    per = {
        c.item() if hasattr(c, "item") else c: float(np.mean(pred[y_arr == c] == c)) for c in np.unique(y_arr)
    }
    return UnlearningRates(
        removed_rate=float(np.mean(pred[on] == y_arr[on])),
        retained_accuracy=float(np.mean(pred[~on] == y_arr[~on])),
        per_concept=per,
        n_removed=int(on.sum()),
        n_retained=int((~on).sum()),
    )


def mean_difference_directions(
    su: Any, X: Any, y: Any, unlearn: Any, *, per_concept: bool = False
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per step, the unit directions from the kept concepts' mean activation to the removed ones'.

    The activations are those of ``su``'s block while ``su`` generates from ``X`` with prompts
    ``y`` (the conditional half under guidance, as SAeUron caches), averaged over positions.

    Parameters
    ----------
    su : SAeUron
        Fitted (its model, block, sampler and steps are used).
    X : array-like of shape (n, C, H, W)
        Starting noise.
    y : array-like of shape (n,)
        Prompts; must hold the removed concepts and at least one kept one.
    unlearn : label or sequence of labels
    per_concept : bool, default=False
        One direction per removed concept instead of one for the set.

    Returns
    -------
    list of (ndarray of shape (n_dirs, C), ndarray of shape (C,))
        Per step: the unit directions and the mean activation over all prompts.

    See Also
    --------
    mean_difference_ablation : installs the baseline with these directions.

    Examples
    --------
    >>> from trustlab.unlearning.saeuron import digits_saeuron
    >>> su = digits_saeuron()
    >>> y = np.repeat(np.arange(10), 2)
    >>> X = np.random.default_rng(0).standard_normal((20, 1, 8, 8))
    >>> dirs = mean_difference_directions(su, X, y, [3])
    >>> len(dirs), dirs[0][0].shape
    (10, (1, 32))
    """
    check_is_fitted(su, "concept_means_")
    items = su._concepts(unlearn)
    y_arr = np.asarray(y)
    on = np.isin(y_arr, items)
    if y_arr.ndim != 1 or not on.any() or on.all():
        raise DataError(
            "y must be 1-d prompts holding the removed concepts (unlearn) and at least one other.",
            argument="y",
        )
    guided = su.conditional and float(su.guidance_scale) != 1.0
    acts: list[Any] = []
    with hk.capture(su.module_, acts, (lambda a: a.chunk(2)[1]) if guided else (lambda a: a)):
        su.generate(X, y_arr if su.conditional else None)
    groups = [[c] for c in items] if per_concept else [items]
    out = []
    for a in acts:
        rows = hk.to_rows(a)[0].reshape(len(y_arr), -1, a.shape[1] if a.ndim == 4 else a.shape[-1])
        per = rows.mean(1).double().numpy()
        kept = per[~on].mean(0)
        dirs = []
        for g in groups:
            v = per[np.isin(y_arr, g)].mean(0) - kept
            dirs.append(v / max(float(np.linalg.norm(v)), 1e-12))
        out.append((np.stack(dirs), per.mean(0)))
    return out


@contextlib.contextmanager
def mean_difference_ablation(su: Any, directions: Any, alpha: float) -> Iterator[None]:
    """Install the mean-difference ablation on ``su``'s block (any sampler may run inside).

    Every patch ``h`` loses ``alpha * max(0, <h - m, v>) v`` for each direction ``v`` of the
    step (``m`` the mean activation): the part of it that points towards the removed
    concepts, scaled. ``alpha = 1`` projects it out; larger values push it past the mean.

    Parameters
    ----------
    su : SAeUron
        Fitted; its model and block.
    directions : list
        From :func:`mean_difference_directions` (one entry per fitted step).
    alpha : float >= 0

    Yields
    ------
    None

    See Also
    --------
    mean_difference_directions : the directions.

    Examples
    --------
    >>> from trustlab.unlearning.saeuron import digits_saeuron
    >>> su = digits_saeuron()
    >>> y = np.repeat(np.arange(10), 2)
    >>> X = np.random.default_rng(0).standard_normal((20, 1, 8, 8))
    >>> dirs = mean_difference_directions(su, X, y, [3])
    >>> with mean_difference_ablation(su, dirs, 4.0):
    ...     images = su.generate(X, y)
    >>> images.shape
    (20, 1, 8, 8)
    """
    check_is_fitted(su, "concept_means_")
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 <= float(alpha) < np.inf:
        raise ParameterError(f"alpha must be a finite number >= 0; got {alpha!r}.", argument="alpha")
    if len(directions) != len(su.timesteps_):
        raise ParameterError(
            f"directions must hold one entry per fitted step ({len(su.timesteps_)}); got "
            f"{len(directions)}. Use mean_difference_directions(su, ...).",
            argument="directions",
        )
    dirs = [
        (torch.as_tensor(v, dtype=torch.float32), torch.as_tensor(m, dtype=torch.float32))
        for v, m in directions
    ]
    with hk.timestep_tracker(su.denoiser_) as tracker:

        def hook(module: Any, args: Any, out: Any) -> Any:
            act, put_back = hk.split_output(out)
            v, m = dirs[int(np.argmin(np.abs(su.timesteps_ - tracker["t"])))]
            rows, unshape = hk.to_rows(act)
            x = rows.float()
            for vec in v:
                proj = torch.relu((x - m) @ vec)
                x = x - float(alpha) * proj[:, None] * vec[None, :]
            return put_back(unshape(x.to(act.dtype)))

        handle = su.module_.register_forward_hook(hook)
        try:
            yield
        finally:
            handle.remove()
