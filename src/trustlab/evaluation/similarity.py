r"""Model similarity from probabilistic outputs: CAPA and error consistency.

CAPA (chance adjusted probabilistic agreement, :math:`\kappa_p`) compares two models
evaluated on the same multiple-choice items from their probabilities over the options.
It is near 0 for models whose mistakes are independent given their accuracies, positive
when they make the same mistakes (including the *same wrong option*), negative when
their mistakes avoid each other. Error consistency (Geirhos et al., 2020) is Cohen's
kappa on correctness; it counts two different wrong answers as agreement.

Inputs are an ``(n_items, n_options)`` array (``NaN`` marks options an item lacks, so
items may have different option counts) or a list of 1-D arrays (ragged). Every row must
be a probability vector (non-negative, summing to 1 within ``1e-6``) over at least two
options; ``y_true`` holds the index of the correct option of each item.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from trustlab._param_validation import validate_params
from trustlab.errors import DataError

__all__ = ["capa", "capa_matrix", "error_consistency"]

_SUM_TOL = 1e-6

_REFERENCE = (
    "S. Goel, J. Strueber, I. A. Auzina, K. K. Chandra, P. Kumaraguru, D. Kiela, A. Prabhu, "
    "M. Bethge, J. Geiping, 'Great Models Think Alike and this Undermines AI Oversight', ICML 2025"
)


def _as_probs(probs: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(P, mask)``: P zero-padded (n, K) probabilities, mask True where an option exists."""
    if isinstance(probs, str | bytes) or probs is None:
        raise DataError(
            f"{name} must be an (n_items, n_options) array or a list of 1-D probability arrays, "
            f"got {type(probs).__name__}.",
            argument=name,
        )
    rows: list[np.ndarray]
    if isinstance(probs, np.ndarray) and probs.ndim != 2 and probs.dtype != object:
        raise DataError(f"{name} must be 2-dimensional, got shape {probs.shape}.", argument=name)
    if (isinstance(probs, np.ndarray) and probs.dtype != object) or hasattr(probs, "to_numpy"):
        try:
            arr = np.asarray(probs, dtype=float)
        except (TypeError, ValueError) as exc:
            raise DataError(
                f"{name} must hold numbers; converting it failed ({exc}).", argument=name
            ) from None
        if arr.ndim != 2:
            raise DataError(f"{name} must be 2-dimensional, got shape {arr.shape}.", argument=name)
        mask = ~np.isnan(arr)
        pad = np.where(mask, arr, 0.0)
    else:
        if not isinstance(probs, Sequence | np.ndarray):
            raise DataError(
                f"{name} must be an (n_items, n_options) array or a list of 1-D arrays, "
                f"got {type(probs).__name__}.",
                argument=name,
            )
        try:
            rows = [np.asarray(r, dtype=float).ravel() for r in probs]
        except (TypeError, ValueError) as exc:
            raise DataError(
                f"{name} must hold numbers; converting it failed ({exc}).", argument=name
            ) from None
        if not rows:
            raise DataError(f"{name} is empty; pass at least one item.", argument=name)
        width = max(r.size for r in rows)
        pad = np.zeros((len(rows), width))
        mask = np.zeros((len(rows), width), dtype=bool)
        for i, r in enumerate(rows):
            keep = ~np.isnan(r)
            vals = r[keep]
            pad[i, : vals.size] = vals
            mask[i, : vals.size] = True
    if pad.shape[0] == 0:
        raise DataError(f"{name} is empty; pass at least one item.", argument=name)
    if not np.all(np.isfinite(pad)):
        raise DataError(f"{name} contains infinite values; pass probabilities.", argument=name)
    n_opt = mask.sum(axis=1)
    if (n_opt < 2).any():
        i = int(np.argmax(n_opt < 2))
        raise DataError(
            f"{name}: item {i} has {int(n_opt[i])} option(s); every item needs at least 2 options.",
            argument=name,
        )
    if (pad < 0).any():
        i = int(np.argmax((pad < 0).any(axis=1)))
        raise DataError(
            f"{name}: item {i} has a negative probability; pass probabilities (e.g. a softmax over "
            "the option scores).",
            argument=name,
        )
    sums = pad.sum(axis=1)
    bad = np.abs(sums - 1.0) > _SUM_TOL
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(
            f"{name}: the probabilities of item {i} sum to {sums[i]:.6g}, not 1 (tolerance {_SUM_TOL:g}); "
            "normalise each row over its options, e.g. p / p.sum(axis=1, keepdims=True), or apply a "
            "softmax to the option scores.",
            argument=name,
        )
    return pad, mask


def _as_labels(y_true: Any, mask: np.ndarray) -> np.ndarray:
    try:
        y = np.asarray(y_true)
    except (TypeError, ValueError):  # pragma: no cover - asarray of objects rarely fails
        raise DataError("y_true must be a 1-D array of option indices.", argument="y_true") from None
    if y.ndim != 1 or y.size != mask.shape[0]:
        raise DataError(
            f"y_true must be 1-D with one correct-option index per item ({mask.shape[0]}), "
            f"got shape {y.shape}.",
            argument="y_true",
        )
    if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
        y = y.astype(np.int64)
    if y.dtype.kind not in "iu":
        raise DataError(
            f"y_true must hold integer option indices (0-based), got dtype {y.dtype}.", argument="y_true"
        )
    n_opt = mask.sum(axis=1)
    bad = (y < 0) | (y >= n_opt)
    if bad.any():
        i = int(np.argmax(bad))
        raise DataError(
            f"y_true[{i}] = {int(y[i])} is not an option index of item {i} (it has {int(n_opt[i])} options, "
            "indices 0..n_options-1).",
            argument="y_true",
        )
    return y.astype(np.int64)


def _one_hot_argmax(p: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """One-hot of the argmax over existing options; ties go to the lowest index."""
    idx = np.argmax(np.where(mask, p, -np.inf), axis=1)
    out = np.zeros_like(p)
    out[np.arange(p.shape[0]), idx] = 1.0
    return out


def _kappa(c_obs: Any, c_exp: Any, what: str) -> Any:
    c_obs = np.asarray(c_obs, dtype=float)
    c_exp = np.asarray(c_exp, dtype=float)
    degenerate = np.isclose(c_exp, 1.0, rtol=0.0, atol=1e-12)
    if degenerate.any():
        warnings.warn(
            f"{what}: the chance agreement is 1 (e.g. both models always right), so kappa is "
            "undefined; returning nan.",
            RuntimeWarning,
            stacklevel=3,
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(degenerate, np.nan, (c_obs - c_exp) / np.where(degenerate, 1.0, 1.0 - c_exp))
    return k


def _check_pair(
    pa: np.ndarray, ma: np.ndarray, pb: np.ndarray, mb: np.ndarray, name_b: str = "probs_b"
) -> tuple[np.ndarray, np.ndarray]:
    if pa.shape[0] != pb.shape[0]:
        raise DataError(
            f"{name_b} has {pb.shape[0]} items but probs_a has {pa.shape[0]}; evaluate both models on the "
            "same items.",
            argument=name_b,
        )
    width = max(pa.shape[1], pb.shape[1])
    pa = np.pad(pa, ((0, 0), (0, width - pa.shape[1])))
    pb = np.pad(pb, ((0, 0), (0, width - pb.shape[1])))
    ma2 = np.pad(ma, ((0, 0), (0, width - ma.shape[1])))
    mb2 = np.pad(mb, ((0, 0), (0, width - mb.shape[1])))
    if not np.array_equal(ma2.sum(axis=1), mb2.sum(axis=1)):
        i = int(np.argmax(ma2.sum(axis=1) != mb2.sum(axis=1)))
        raise DataError(
            f"{name_b}: item {i} has {int(mb2[i].sum())} options but probs_a gives {int(ma2[i].sum())}; both "
            "models must score the same options of each item.",
            argument=name_b,
        )
    return pa, pb


@validate_params({"discrete": ["boolean"], "return_components": ["boolean"]})
def capa(
    probs_a: Any, probs_b: Any, y_true: Any, *, discrete: bool = False, return_components: bool = False
) -> float | dict[str, float]:
    """Chance adjusted probabilistic agreement (CAPA, kappa_p) of two models.

    With ``p_j(o|x)`` model j's probability of option o on item x and ``c(x)`` the
    correct option: observed agreement ``c_obs = mean_x sum_o p_a(o|x) p_b(o|x)``;
    ``pbar_j = mean_x p_j(c(x)|x)``; chance agreement of two independent models with
    those mean probabilities, spreading the rest uniformly over the wrong options,
    ``c_exp = pbar_a pbar_b + (1 - pbar_a)(1 - pbar_b) mean_x 1/(|O(x)| - 1)``; and
    ``kappa_p = (c_obs - c_exp) / (1 - c_exp)``, in ``[-1, 1]``.

    Parameters
    ----------
    probs_a, probs_b : array-like of shape (n_items, n_options) or list of 1-D arrays
        Each model's probabilities over the options of each item (``NaN`` pads items with
        fewer options). Rows must sum to 1 within 1e-6.
    y_true : array-like of int, shape (n_items,)
        Index of the correct option of each item.
    discrete : bool, default=False
        Use the one-hot argmax of each row instead of the probabilities (the paper's
        discrete variant; then ``c_obs`` is the fraction of items with the same chosen
        option and ``pbar_j`` the accuracy). Argmax ties go to the lowest index.
    return_components : bool, default=False
        Return a dict with ``kappa``, ``c_obs``, ``c_exp``, ``pbar_a``, ``pbar_b`` and
        ``mean_inv_wrong`` (the mean of ``1/(|O(x)| - 1)``) instead of the float.

    Returns
    -------
    float or dict
        kappa_p (``nan``, with a :class:`RuntimeWarning`, when ``c_exp == 1``).

    Raises
    ------
    DataError
        A row is not a probability vector, has fewer than 2 options, the two models
        differ in items or options, or ``y_true`` is not a valid option index.

    See Also
    --------
    capa_matrix : all pairwise CAPA values of several models.
    error_consistency : Cohen's kappa on correctness (Geirhos et al., 2020).

    References
    ----------
    S. Goel, J. Strueber, I. A. Auzina, K. K. Chandra, P. Kumaraguru, D. Kiela, A. Prabhu,
    M. Bethge, J. Geiping, "Great Models Think Alike and this Undermines AI Oversight",
    ICML 2025 (arXiv 2502.04313), Section 2.

    Examples
    --------
    >>> a = [[.7, .2, .1], [.1, .8, .1], [.4, .2, .2, .2]]
    >>> b = [[.6, .3, .1], [.5, .4, .1], [.1, .1, .1, .7]]
    >>> round(capa(a, b, [0, 1, 3]), 6)
    -0.069252
    >>> round(capa(a, b, [0, 1, 3], discrete=True), 6)
    -0.317073
    """
    pa, ma = _as_probs(probs_a, "probs_a")
    pb, mb = _as_probs(probs_b, "probs_b")
    pa, pb = _check_pair(pa, ma, pb, mb)
    mask = np.pad(ma, ((0, 0), (0, pa.shape[1] - ma.shape[1])))
    y = _as_labels(y_true, mask)
    if discrete:
        pa, pb = _one_hot_argmax(pa, mask), _one_hot_argmax(pb, mask)
    rows = np.arange(y.size)
    c_obs = float(np.einsum("ij,ij->", pa, pb) / y.size)
    pbar_a = float(pa[rows, y].mean())
    pbar_b = float(pb[rows, y].mean())
    inv_wrong = float(np.mean(1.0 / (mask.sum(axis=1) - 1.0)))
    c_exp = pbar_a * pbar_b + (1.0 - pbar_a) * (1.0 - pbar_b) * inv_wrong
    kappa = float(_kappa(c_obs, c_exp, "capa"))
    if return_components:
        return {
            "kappa": kappa,
            "c_obs": c_obs,
            "c_exp": c_exp,
            "pbar_a": pbar_a,
            "pbar_b": pbar_b,
            "mean_inv_wrong": inv_wrong,
        }
    return kappa


def error_consistency(probs_a: Any, probs_b: Any, y_true: Any) -> float:
    """Error consistency: Cohen's kappa on whether each model's argmax is correct.

    ``c_obs`` is the fraction of items where both models are right or both wrong and
    ``c_exp = acc_a acc_b + (1 - acc_a)(1 - acc_b)``. On binary items with one-hot
    outputs it equals discrete CAPA; on items with more options it counts two
    *different* wrong answers as agreement, which CAPA does not.

    Parameters
    ----------
    probs_a, probs_b : array-like of shape (n_items, n_options) or list of 1-D arrays
        As in :func:`capa` (only the argmax of each row is used; ties go to the lowest index).
    y_true : array-like of int, shape (n_items,)
        Index of the correct option of each item.

    Returns
    -------
    float
        The kappa (``nan``, with a :class:`RuntimeWarning`, when ``c_exp == 1``).

    References
    ----------
    R. Geirhos, K. Meding, F. A. Wichmann, "Beyond accuracy: quantifying trial-by-trial
    behaviour of CNNs and humans by measuring error consistency", NeurIPS 2020; used as
    the baseline in Goel et al., "Great Models Think Alike and this Undermines AI
    Oversight", ICML 2025.

    Examples
    --------
    >>> a = [[.9, .1, 0.], [.1, .8, .1], [.2, .7, .1]]
    >>> b = [[.8, .2, 0.], [.1, .1, .8], [.1, .1, .8]]
    >>> round(error_consistency(a, b, [0, 0, 0]), 6)  # both wrong twice, on different options
    1.0
    >>> abs(capa(a, b, [0, 0, 0], discrete=True)) < 1e-12  # CAPA: different wrong options, chance level
    True
    """
    pa, ma = _as_probs(probs_a, "probs_a")
    pb, mb = _as_probs(probs_b, "probs_b")
    pa, pb = _check_pair(pa, ma, pb, mb)
    mask = np.pad(ma, ((0, 0), (0, pa.shape[1] - ma.shape[1])))
    y = _as_labels(y_true, mask)
    ra = np.argmax(np.where(mask, pa, -np.inf), axis=1) == y
    rb = np.argmax(np.where(mask, pb, -np.inf), axis=1) == y
    acc_a, acc_b = ra.mean(), rb.mean()
    c_obs = float(np.mean(ra == rb))
    c_exp = float(acc_a * acc_b + (1 - acc_a) * (1 - acc_b))
    return float(_kappa(c_obs, c_exp, "error_consistency"))


@validate_params({"discrete": ["boolean"]})
def capa_matrix(probs: Any, y_true: Any, *, discrete: bool = False) -> np.ndarray:
    """Pairwise CAPA of several models on the same items (a symmetric matrix).

    Entry ``(i, j)`` is ``capa(probs[i], probs[j], y_true)``; the diagonal holds each
    model's self-agreement (1 for one-hot outputs, below 1 for soft ones since
    ``sum_o p(o)^2 < 1``). All pairs are computed at once: one ``(M, n K) x (n K, M)``
    product for the observed agreements.

    Parameters
    ----------
    probs : sequence of M inputs, or array of shape (M, n_items, n_options)
        Each model's probabilities, in any form :func:`capa` accepts; all on the same
        items and options.
    y_true : array-like of int, shape (n_items,)
        Index of the correct option of each item.
    discrete : bool, default=False
        Use one-hot argmax outputs (see :func:`capa`).

    Returns
    -------
    numpy.ndarray of shape (M, M)
        Symmetric; ``nan`` (with a :class:`RuntimeWarning`) where the chance agreement is 1.

    References
    ----------
    S. Goel et al., "Great Models Think Alike and this Undermines AI Oversight", ICML 2025
    (the paper's similarity heatmaps are such matrices).

    Examples
    --------
    >>> a = [[.7, .3], [.2, .8], [.6, .4]]
    >>> b = [[.6, .4], [.3, .7], [.3, .7]]
    >>> np.round(capa_matrix([a, b], [0, 1, 1]), 4)
    array([[ 0.1244, -0.0098],
           [-0.0098,  0.01  ]])
    """
    if isinstance(probs, str | bytes) or probs is None or len(probs) < 1:
        raise DataError("probs must be a non-empty sequence of model outputs.", argument="probs")
    parsed = [_as_probs(p, f"probs[{m}]") for m, p in enumerate(probs)]
    n = parsed[0][0].shape[0]
    width = max(p.shape[1] for p, _ in parsed)
    n_opt = parsed[0][1].sum(axis=1)
    stack = np.zeros((len(parsed), n, width))
    mask = np.pad(parsed[0][1], ((0, 0), (0, width - parsed[0][1].shape[1])))
    for m, (p, mk) in enumerate(parsed):
        if p.shape[0] != n:
            raise DataError(
                f"probs[{m}] has {p.shape[0]} items but probs[0] has {n}; "
                "evaluate all models on the same items.",
                argument="probs",
            )
        if not np.array_equal(mk.sum(axis=1), n_opt):
            i = int(np.argmax(mk.sum(axis=1) != n_opt))
            raise DataError(
                f"probs[{m}]: item {i} has {int(mk[i].sum())} options but probs[0] gives {int(n_opt[i])}.",
                argument="probs",
            )
        stack[m, :, : p.shape[1]] = p
    y = _as_labels(y_true, mask)
    if discrete:
        idx = np.argmax(np.where(mask[None], stack, -np.inf), axis=2)
        flat = (idx[:, :, None] == np.arange(width)[None, None, :]).astype(float)
        stack = flat
    flat2 = stack.reshape(len(parsed), -1)
    c_obs = flat2 @ flat2.T / n
    pbar = stack[:, np.arange(n), y].mean(axis=1)
    inv_wrong = float(np.mean(1.0 / (n_opt - 1.0)))
    c_exp = np.outer(pbar, pbar) + np.outer(1 - pbar, 1 - pbar) * inv_wrong
    out = np.asarray(_kappa(c_obs, c_exp, "capa_matrix"), dtype=float)
    return (out + out.T) / 2.0
