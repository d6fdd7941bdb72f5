"""Purity of explanation regions against known feature groups (SOP's semantic-coherence metrics).

The SOP paper judges whether its groups are *semantically coherent* by comparing them with
ground-truth segments (ImageNet-S object masks; Table 1's "IOU" column, and the group
purity of its appendix). The authors' code (``sop/utils/metric_utils.py`` and
``notebooks/metrics/imagenet_s_purity.ipynb`` in github.com/BrachioLab/sop) computes, for a
region ``R`` (a set of features) and labelled segments ``S_1..S_L``:

- **entropy** (purity; lower is purer): ``-sum_l r_l log2 r_l`` with ``r_l = |R & S_l| / |R|``,
  the spread of the region over the segments (0 when it lies in one segment);
- **precision** (``get_prob_obj``): ``|R & O| / |R|``, the share of the region in the object
  ``O``;
- **coverage** (``get_prob_obj_coverage``, and what their ``get_iou`` returns):
  ``|R & O| / |O|``;

and builds the region of an explanation at ``k = 20%`` of the features: for SOP (and other
group methods) the union of its groups taken in order of weight until it holds ``k`` of the
features; for per-feature attributions the top ``k`` features. :func:`group_entropy` scores each
group of an :class:`~trustlab.explain.sop.SOPExplanation` on its own; :func:`region_purity`
scores regions, which :func:`sop_region` and :func:`top_feature_region` build.

References
----------
.. [1] You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with
   End-to-End Learning of Feature Groups". ICML 2025.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError

__all__ = ["RegionPurity", "group_entropy", "region_purity", "sop_region", "top_feature_region"]


def _segments(segments: Any, shape: tuple[int, ...], name: str = "segments") -> np.ndarray:
    """Integer labels, one per feature, broadcast to ``shape`` = ``(n, ...)``, as (n, F)."""
    arr = check_numeric_array(segments, name, min_rows=1)
    if np.any(arr != np.round(arr)) or arr.min() < 0:
        raise DataError(f"{name} must hold integer segment labels >= 0.", argument=name)
    try:
        arr = np.broadcast_to(arr.astype(np.int64), shape)
    except ValueError:
        raise DataError(
            f"{name} must have shape {shape[1:]} (one label per feature, shared by all rows) or "
            f"{shape}; got {arr.shape}.",
            argument=name,
        ) from None
    return arr.reshape(shape[0], -1)


def _entropy_bits(counts: np.ndarray) -> np.ndarray:
    """Entropy in bits of the rows of ``counts`` (last axis), 0 for empty rows."""
    total = counts.sum(-1, keepdims=True)
    r = np.divide(counts, total, out=np.zeros(counts.shape), where=total > 0)
    logs = np.log2(r, out=np.zeros(r.shape), where=r > 0)
    return np.abs((r * logs).sum(-1))  # abs: no -0.0


def _bool_regions(x: Any, name: str) -> np.ndarray:
    arr = check_numeric_array(x, name, min_rows=1)
    if arr.ndim < 2 or not np.isin(arr, (0, 1)).all():
        raise DataError(
            f"{name} must be a 0/1 (bool) array of shape (n, ...); got shape {arr.shape}.", argument=name
        )
    return arr.astype(bool)


def group_entropy(masks: Any, segments: Any) -> np.ndarray:
    """Entropy (bits) of each group over the ground-truth segments: 0 for a pure group.

    The authors' ``get_entropy``: group ``g`` spreads over segment ``l`` with share
    ``r_l = |g & S_l| / |g|``, and its entropy is ``-sum_l r_l log2 r_l``.

    Parameters
    ----------
    masks : array-like of bool, shape (n, m, ...)
        ``m`` groups per input (e.g. :attr:`SOPExplanation.masks`).
    segments : array-like of int, shape (...) or (n, ...)
        Ground-truth segment label of each feature (the same for all rows when ``(...)``).

    Returns
    -------
    ndarray of shape (n, m)
        Empty groups score 0.

    Examples
    --------
    >>> masks = np.array([[[1, 1, 0, 0], [0, 1, 1, 0]]], dtype=bool)
    >>> group_entropy(masks, [0, 0, 1, 1])
    array([[0., 1.]])
    """
    m = _bool_regions(masks, "masks")
    if m.ndim < 3:
        raise DataError(f"masks must have shape (n, m, ...); got {m.shape}.", argument="masks")
    n, k = m.shape[:2]
    seg = _segments(segments, (n, *m.shape[2:]))
    flat = m.reshape(n, k, -1)
    labels = np.unique(seg)
    counts = np.stack([(flat & (seg == lab)[:, None, :]).sum(-1) for lab in labels], axis=-1)
    return _entropy_bits(counts.astype(np.float64))


@dataclass(frozen=True)
class RegionPurity:
    """How well explanation regions match the ground truth, per row.

    Attributes
    ----------
    entropy : ndarray of shape (n,)
        Bits; the region's spread over all segments (0: inside one segment).
    precision : ndarray of shape (n,)
        Share of the region inside the object.
    coverage : ndarray of shape (n,)
        Share of the object inside the region (the authors' "IOU").
    iou : ndarray of shape (n,)
        Intersection over union of region and object.

    See Also
    --------
    region_purity : builds it (its example shows one).
    """

    entropy: np.ndarray
    precision: np.ndarray
    coverage: np.ndarray
    iou: np.ndarray


@validate_params({"object_label": [Interval(numbers.Integral, 0, None, closed="left")]})
def region_purity(regions: Any, segments: Any, *, object_label: int = 1) -> RegionPurity:
    """Entropy, precision, coverage and IoU of explanation regions against labelled segments.

    Parameters
    ----------
    regions : array-like of bool, shape (n, ...)
        One region per input (from :func:`sop_region` or :func:`top_feature_region`).
    segments : array-like of int, shape (...) or (n, ...)
        Segment label per feature; ``object_label`` marks the object (the authors'
        ``segs == 1``).
    object_label : int, default=1

    Returns
    -------
    RegionPurity

    Examples
    --------
    >>> r = region_purity([[1, 1, 0, 0]], [1, 0, 0, 0])
    >>> float(r.entropy[0]), float(r.precision[0]), float(r.coverage[0]), float(r.iou[0])
    (1.0, 0.5, 1.0, 0.5)
    """
    reg = _bool_regions(regions, "regions")
    n = len(reg)
    seg = _segments(segments, reg.shape)
    flat = reg.reshape(n, -1)
    counts = np.stack([(flat & (seg == lab)).sum(-1) for lab in np.unique(seg)], axis=-1)
    obj = seg == int(object_label)
    inter = (flat & obj).sum(-1).astype(np.float64)
    size, osize, union = flat.sum(-1), obj.sum(-1), (flat | obj).sum(-1)
    ratio = lambda a, b: np.divide(a, b, out=np.zeros(n), where=b > 0)  # noqa: E731
    return RegionPurity(
        entropy=_entropy_bits(counts.astype(np.float64)),
        precision=ratio(inter, size),
        coverage=ratio(inter, osize),
        iou=ratio(inter, union),
    )


def _share(share: Any) -> float:
    if isinstance(share, bool) or not isinstance(share, numbers.Real) or not 0 < float(share) <= 1:
        raise ParameterError(f"share must be a number in (0, 1]; got {share!r}.", argument="share")
    return float(share)


def top_feature_region(attributions: Any, share: float = 0.2) -> np.ndarray:
    """The top ``share`` of the features by attribution (the authors' region for post-hoc maps).

    Parameters
    ----------
    attributions : array-like of shape (n, ...)
        Per-feature attributions (signed: the largest values are taken, as the authors do).
    share : float in (0, 1], default=0.2
        Share of the features kept (``int(share * n_features)``, at least 1).

    Returns
    -------
    ndarray of bool, shape (n, ...)

    Examples
    --------
    >>> top_feature_region([[0.1, 0.9, -2.0, 0.5, 0.0]], share=0.4)
    array([[False,  True, False,  True, False]])
    """
    a = check_numeric_array(attributions, "attributions", min_rows=1)
    if a.ndim < 2:
        raise DataError(f"attributions must have shape (n, ...); got {a.shape}.", argument="attributions")
    n = len(a)
    flat = a.reshape(n, -1)
    k = max(1, int(_share(share) * flat.shape[1]))
    top = np.argsort(-flat, axis=1, kind="stable")[:, :k]
    out = np.zeros(flat.shape, dtype=bool)
    np.put_along_axis(out, top, True, axis=1)
    return out.reshape(a.shape)


def sop_region(explanation: Any, share: float = 0.2, target: Any = None) -> np.ndarray:
    """Union of SOP's groups in order of selector weight until it holds ``share`` of the features.

    The authors' region for group methods: groups sorted by their weight for the predicted
    class, the running union taken at the first group where it reaches ``int(share * F)``
    features (the last union if none does).

    Parameters
    ----------
    explanation : SOPExplanation
        From :meth:`SumOfParts.explain <trustlab.explain.sop.SumOfParts.explain>`.
    share : float in (0, 1], default=0.2
    target : int or array-like of shape (n,), optional
        Class (or output) whose weights order the groups; ``None``: the predicted class.

    Returns
    -------
    ndarray of bool, shape (n, ...)

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> masks = np.array([[[1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 1]]], dtype=bool)
    >>> e = SimpleNamespace(masks=masks, weights=np.array([[[0.1], [0.6], [0.3]]]), predicted=np.array([0]))
    >>> sop_region(e, share=0.4).astype(int)  # the 0.6 group, then the 0.3 group: 3 of 5 features
    array([[0, 0, 1, 1, 1]])
    """
    if not all(hasattr(explanation, a) for a in ("masks", "weights", "predicted")):
        raise DataError(
            "explanation must be an SOPExplanation (from SumOfParts.explain); "
            f"got {type(explanation).__name__}.",
            argument="explanation",
        )
    masks, w = explanation.masks, explanation.weights
    n, m = masks.shape[:2]
    t = explanation.predicted if target is None else np.broadcast_to(np.asarray(target, dtype=int), (n,))
    if t.min() < 0 or t.max() >= w.shape[2]:
        raise ParameterError(f"target must lie in [0, {w.shape[2] - 1}]; got {target!r}.", argument="target")
    flat = masks.reshape(n, m, -1)
    k = max(1, int(_share(share) * flat.shape[2]))
    order = np.argsort(-w[np.arange(n), :, t], axis=1, kind="stable")
    union = np.logical_or.accumulate(flat[np.arange(n)[:, None], order], axis=1)  # (n, m, F)
    first = np.minimum((union.sum(-1) < k).sum(1), m - 1)
    return union[np.arange(n), first].reshape(masks.shape[:1] + masks.shape[2:])
