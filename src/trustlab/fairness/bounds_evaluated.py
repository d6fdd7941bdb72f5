"""Prediction-level (evaluated) CMI fairness bounds and the random-cell constant for equalised odds.

Two additions to :mod:`trustlab.fairness.bounds` (trustlab's derivations; the paper's own
theorems could not be read, see ``docs/fairness/fairness-bounds.md``):

* **Evaluated CMI** (Theorem 5 of the docs page). With a supersample of ``n`` pairs whose two
  entries share a fairness cell, the gap is at most ``sqrt(2 E[sigma^2] I(F; U | Z~))``, ``F``
  the learned model's predictions on all ``2n`` supersample entries and
  ``sigma^2 = sum_k (f(x_{k,0}) - f(x_{k,1}))^2 / n_{c_k}^2`` (pairs on which the predictions
  agree cost nothing). ``I(F; U | Z~) <= I(W; U | Z~)`` (data processing) and
  ``sigma^2 <= sum_c 1/n_c``, so the bound is never looser than the hypothesis-level CMI bound
  :func:`~trustlab.fairness.bounds.cmi_fairness_bound`. This is the f-CMI of Harutyunyan et
  al. (2021) and the evaluated CMI of Hellstrom & Durisi (2022), taken whole (not sample by
  sample, because the fairness loss is not a sum over samples).
* **Random cells** (Theorem 4). With i.i.d. samples the cell counts of the offset loss are
  multinomial; replacing one sample moves the loss by at most the sum of the two largest
  ``1/(M_c + 1 + offset)`` over cells, ``M`` the counts among the other ``n - 1`` samples.
  Two cells (the groups) give the demographic-parity constant of
  :func:`~trustlab.fairness.bounds.random_group_variance_proxy`; four cells (group x label)
  the equalised-odds one.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_choice, check_numeric_array, check_positive
from trustlab.errors import DataError, ParameterError
from trustlab.fairness.bounds import _CORRECTION, _check_counts, supersample_cmi

__all__ = [
    "evaluated_cmi_fairness_bound",
    "prediction_cmi",
    "prediction_discordance",
    "random_cell_fairness_bound",
    "random_cell_variance_proxy",
]

_INFO = [Interval(numbers.Real, 0, None, closed="left")]
_N = [Interval(numbers.Integral, 1, None, closed="left")]


def _check_shares(cell_shares: Any) -> np.ndarray:
    p = check_numeric_array(cell_shares, "cell_shares", ndim=1)
    if len(p) < 2 or (p < 0).any() or abs(float(p.sum()) - 1.0) > 1e-9:
        raise ParameterError(
            f"cell_shares must hold >= 2 probabilities summing to 1 (one per cell), got {p.tolist()}.",
            argument="cell_shares",
        )
    return p / p.sum()


def _multinomial_support(n: int, p: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Count vectors of ``Multinomial(n, p)`` with their probabilities (states below ``tol`` dropped)."""
    from scipy.stats import binom

    states = np.zeros((1, 0), dtype=np.int64)
    probs = np.ones(1)
    left = 1.0
    for c in range(len(p) - 1):
        remaining = n - states.sum(axis=1)
        q = min(1.0, float(p[c]) / left) if left > 0 else 0.0
        # counts whose marginal Bin(n, p_c) probability is below tol carry at most tol each
        marginal = np.flatnonzero(binom.pmf(np.arange(n + 1), n, float(p[c])) > tol)
        vals = np.arange(marginal.min(), marginal.max() + 1)
        pm = binom.pmf(vals[None, :], remaining[:, None], q) * probs[:, None]
        keep = pm > tol
        rows, cols = np.nonzero(keep)
        states = np.column_stack([states[rows], vals[cols]])
        probs = pm[rows, cols]
        left -= float(p[c])
    return np.column_stack([states, n - states.sum(axis=1)]), probs


@validate_params(
    {
        "n_samples": _N,
        "cell_shares": ["array-like"],
        "offset": [Interval(numbers.Real, 1, None, closed="left")],
    }
)
def random_cell_variance_proxy(n_samples: int, cell_shares: Any, *, offset: float = 2.0) -> float:
    """``n E[c^2]``, ``c`` the sum of the two largest ``1/(M_c + 1 + offset)``, ``M ~ Mult(n - 1, p)``.

    The range constant of the offset fairness loss with i.i.d. samples (random cell counts):
    the loss reads each cell through ``sum_{cell c} f / (n_c + offset)`` and is 1-Lipschitz in
    each of those terms (DP gap; EO = the larger of the per-label gaps), so one sample, which
    can join any cell, moves it inside an interval no longer than ``c``
    (docs/fairness/fairness-bounds.md, Theorem 4). With two cells it equals
    :func:`~trustlab.fairness.bounds.random_group_variance_proxy`.

    Parameters
    ----------
    n_samples : int
        ``n``, the training sample size (>= 1).
    cell_shares : array-like of float
        Population probability of each cell (>= 2 cells, summing to 1); EO order
        ``(T=0,Y=0), (T=0,Y=1), (T=1,Y=0), (T=1,Y=1)``.
    offset : float, default 2
        Denominator offset (>= 1).

    Returns
    -------
    float
        Exact up to dropped count vectors of probability below ``1e-15`` each.

    Examples
    --------
    >>> round(random_cell_variance_proxy(1, [0.5, 0.5]), 4)  # no other samples: c = 2/3
    0.4444
    >>> round(random_cell_variance_proxy(100, [0.1, 0.2, 0.3, 0.4]), 3)
    1.679
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer) or n_samples < 1:
        raise ParameterError(
            f"n_samples must be an integer >= 1 (the training sample size), got {n_samples!r}.",
            argument="n_samples",
        )
    p = _check_shares(cell_shares)
    delta = check_positive(offset, "offset")
    if delta < 1:
        raise ParameterError(
            f"offset must be >= 1 for random cells (an empty cell needs a denominator), got {offset!r}.",
            argument="offset",
        )
    return _variance_proxy(int(n_samples), tuple(float(v) for v in p), float(delta))


@lru_cache(maxsize=32)
def _variance_proxy(n: int, shares: tuple[float, ...], delta: float) -> float:
    counts, probs = _multinomial_support(n - 1, np.asarray(shares), 1e-15)
    inv = np.sort(1.0 / (counts + 1 + delta), axis=1)
    c = inv[:, -1] + inv[:, -2]
    return float(n * np.sum(probs * c**2) / np.sum(probs))


@validate_params(
    {
        "information": _INFO,
        "n_samples": _N,
        "cell_shares": ["array-like"],
        "information_kind": [Options(("mi", "cmi"))],
        "offset": [Interval(numbers.Real, 1, None, closed="left")],
    }
)
def random_cell_fairness_bound(
    information: float,
    *,
    n_samples: int,
    cell_shares: Any,
    information_kind: str = "mi",
    offset: float = 2.0,
) -> float:
    """MI or CMI bound on the offset fairness gap with i.i.d. samples and any number of cells.

    ``mi``: ``sqrt(V I(W; S) / 2)``; ``cmi``: ``sqrt(2 V I(W; U | Z~))``, with
    ``V = random_cell_variance_proxy(n, p, offset)``. Four cells give the equalised-odds loss
    (:func:`~trustlab.fairness.bounds.fairness_loss` with ``criterion="equalized_odds"`` and
    ``offset``) in the paper's i.i.d. setting; with ``I`` replaced by ``log(2|W|)`` the ``mi``
    form is the finite-class bound.

    Parameters
    ----------
    information : float
        ``I(W; S)`` or ``I(W; U | Z~)`` in nats (>= 0).
    n_samples : int
    cell_shares : array-like of float
    information_kind : {"mi", "cmi"}
    offset : float, default 2

    Returns
    -------
    float

    References
    ----------
    F. Laakom, H. Chen, J. Schmidhuber and Y. Bu, "Fairness Overfitting in Machine Learning:
    An Information-Theoretic Perspective", ICML 2025 (setting; the constant is trustlab's,
    docs/fairness/fairness-bounds.md, Theorem 4).

    Examples
    --------
    >>> round(random_cell_fairness_bound(2.0, n_samples=100, cell_shares=[0.5, 0.5]), 4)
    0.3845
    """
    info = check_positive(information, "information", allow_zero=True)
    kind = check_choice(information_kind, "information_kind", ("mi", "cmi"))
    v = random_cell_variance_proxy(n_samples, cell_shares, offset=offset)
    return math.sqrt(v * info / 2.0) if kind == "mi" else math.sqrt(2.0 * v * info)


def _check_pair_predictions(predictions: Any) -> np.ndarray:
    arr = check_numeric_array(predictions, "predictions", ndim=3)
    if arr.shape[0] == 0 or arr.shape[1] == 0 or arr.shape[2] != 2:
        raise DataError(
            "predictions must have shape (n_runs, n_pairs, 2): the model's prediction on both "
            f"entries of every supersample pair, one row per run; got {arr.shape}.",
            argument="predictions",
        )
    if arr.min() < 0 or arr.max() > 1:
        raise DataError(
            "predictions must lie in [0, 1] (decisions or probabilities).", argument="predictions"
        )
    return arr


@validate_params({"predictions": ["array-like"], "pair_cells": ["array-like"]})
def prediction_discordance(predictions: Any, pair_cells: Any) -> float:
    """Mean over runs of ``sigma^2 = sum_k (F_{k,0} - F_{k,1})^2 / n_{c_k}^2`` (Theorem 5's constant).

    Flipping the mask bit of pair ``k`` swaps its two entries between the training and the
    held-out half; the fairness loss of either half then moves by at most
    ``|F_{k,0} - F_{k,1}| / n_{c_k}``. A pair on which the model predicts the same for both
    entries costs nothing. At most ``sum_c 1/n_c`` (every pair discordant, hard decisions).

    Parameters
    ----------
    predictions : array-like of shape (n_runs, n_pairs, 2)
        ``F``: the learned model's prediction (in ``[0, 1]``) on both entries of each pair,
        one row per (supersample, mask) run.
    pair_cells : array-like of shape (n_pairs,)
        The fairness cell of each pair (both entries share it); ``n_c`` is the number of pairs
        of cell ``c``, the training sample's cell count.

    Returns
    -------
    float

    Examples
    --------
    >>> f = [[[1, 0], [1, 1], [0, 0], [1, 0]]]  # pairs 0 and 3 discordant
    >>> prediction_discordance(f, ["a", "a", "b", "b"])  # 1/4 + 1/4
    0.5
    """
    f = _check_pair_predictions(predictions)
    cells = np.asarray(pair_cells, dtype=object)
    if cells.ndim != 1 or len(cells) != f.shape[1]:
        raise DataError(
            f"pair_cells must give one cell per pair ({f.shape[1]}), got shape {cells.shape}.",
            argument="pair_cells",
        )
    _, codes, counts = np.unique(cells.astype(str), return_inverse=True, return_counts=True)
    weight = 1.0 / counts[np.asarray(codes).ravel()] ** 2
    return float(np.mean(((f[..., 0] - f[..., 1]) ** 2) @ weight))


@validate_params(
    {"predictions": ["array-like"], "supersample_ids": ["array-like"], "correction": _CORRECTION}
)
def prediction_cmi(predictions: Any, supersample_ids: Any, *, correction: str = "miller-madow") -> float:
    """Estimate ``I(F; U | Z~)``, ``F`` a deterministic learner's predictions on the supersample.

    For a deterministic learner ``F`` is a function of ``(U, Z~)``, so ``I(F; U | z~) = H(F | z~)``:
    the plug-in entropy of the distinct prediction vectors over the masks of each supersample,
    averaged over supersamples (:func:`~trustlab.fairness.bounds.supersample_cmi` on the rows).
    Hard decisions or quantised scores keep the number of distinct vectors finite; continuous
    scores make every mask distinct and the estimate ``log(n_masks)``, a sign the learner
    needs quantising.

    Parameters
    ----------
    predictions : array-like of shape (n_runs, n_pairs, 2)
        As in :func:`prediction_discordance`.
    supersample_ids : array-like of shape (n_runs,)
        The supersample of each run (masks drawn uniformly and independently).
    correction : {"miller-madow", "none"}

    Returns
    -------
    float
        Nats, at most ``n_pairs log 2`` in truth (the estimate is also capped there).

    References
    ----------
    H. Harutyunyan, M. Raginsky, G. Ver Steeg and A. Galstyan, "Information-theoretic
    generalization bounds for black-box learning algorithms", NeurIPS 2021 (f-CMI);
    F. Hellstrom and G. Durisi, "A new family of generalization bounds using samplewise
    evaluated CMI", NeurIPS 2022.

    Examples
    --------
    >>> f = [[[1, 0]], [[0, 1]], [[1, 0]], [[0, 1]]]  # F reveals the one mask bit
    >>> round(prediction_cmi(f, [0, 0, 0, 0], correction="none"), 4)
    0.6931
    """
    f = _check_pair_predictions(predictions)
    info = supersample_cmi(f.reshape(len(f), -1), supersample_ids, correction=correction)
    return min(info, f.shape[1] * math.log(2.0))


@validate_params({"cmi": _INFO, "cell_counts": ["array-like"], "discordance": [*_INFO, None]})
def evaluated_cmi_fairness_bound(cmi: float, cell_counts: Any, *, discordance: float | None = None) -> float:
    """Evaluated-CMI bound on the fairness gap: ``sqrt(2 s I(F; U | Z~))``.

    ``s`` is the mean discordance ``E[sigma^2]`` (:func:`prediction_discordance`) when given,
    else its worst case ``sum_c 1/n_c``. Valid for the group-mean DP and EO losses with fixed
    cell counts and a supersample whose pairs share a cell (docs/fairness/fairness-bounds.md,
    Theorem 5).

    Parameters
    ----------
    cmi : float
        ``I(F; U | Z~)`` in nats (:func:`prediction_cmi`).
    cell_counts : array-like of int
        Training samples per cell.
    discordance : float, optional
        ``E[sigma^2]``; must not exceed ``sum_c 1/n_c``.

    Returns
    -------
    float

    References
    ----------
    F. Laakom et al., ICML 2025 (the CMI bound it sharpens); Harutyunyan et al., NeurIPS 2021;
    Hellstrom and Durisi, NeurIPS 2022.

    Examples
    --------
    >>> round(evaluated_cmi_fairness_bound(0.5, [50, 50]), 4)  # = cmi_fairness_bound
    0.2
    >>> round(evaluated_cmi_fairness_bound(0.5, [50, 50], discordance=0.01), 4)
    0.1
    """
    info = check_positive(cmi, "cmi", allow_zero=True)
    worst = _check_counts(cell_counts)
    if discordance is None:
        s = worst
    else:
        s = check_positive(discordance, "discordance", allow_zero=True)
        if s > worst * (1 + 1e-9):
            raise ParameterError(
                f"discordance {s!r} exceeds its maximum sum_c 1/n_c = {worst!r}; pass the mean "
                "of sum_k (F_k0 - F_k1)^2 / n_c^2 over runs (prediction_discordance).",
                argument="discordance",
            )
    return math.sqrt(2.0 * s * info)
