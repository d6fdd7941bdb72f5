"""Information-theoretic fairness generalisation bounds (MI and supersample CMI).

How far can a model's fairness loss on fresh data exceed the fairness loss it reached on its
training sample? For a group-mean fairness loss (demographic-parity or equalised-odds gap) the
expected gap is at most ``sqrt((sum_c 1/n_c) I(W; S) / 2)`` (mutual information between the
model and its training sample) and at most ``sqrt(2 (sum_c 1/n_c) I(W; U | Z~))`` (conditional
mutual information of a supersample), ``n_c`` the sizes of the cells the loss averages over.
Both follow from replacing one sample at a time (the Efron-Stein-style telescoping of Laakom,
Chen, Schmidhuber & Bu, ICML 2025), Donsker-Varadhan and the chain rule; the proofs and their
assumptions are in ``docs/fairness/fairness-bounds.md``. The classical uniform-convergence
bound over a finite class is here for comparison, and plug-in estimators of the information
terms for learners with a discrete output.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_choice, check_numeric_array, check_positive
from trustlab.errors import DataError, ParameterError

__all__ = [
    "CRITERIA",
    "cell_counts",
    "cmi_fairness_bound",
    "discrete_mutual_information",
    "fairness_loss",
    "mi_fairness_bound",
    "output_entropy",
    "random_group_fairness_bound",
    "random_group_variance_proxy",
    "supersample_cmi",
    "uniform_convergence_fairness_bound",
]

CRITERIA = ("demographic_parity", "equalized_odds")
_CRITERION = [Options(CRITERIA)]
_CORRECTION = [Options(("miller-madow", "none"))]
_INFO = [Interval(numbers.Real, 0, None, closed="left")]

_REFERENCE = (
    "F. Laakom, H. Chen, J. Schmidhuber and Y. Bu, 'Fairness Overfitting in Machine Learning: "
    "An Information-Theoretic Perspective', ICML 2025 (arXiv:2506.07861)."
)


def _cells(
    sensitive_features: Any, y_true: Any, criterion: str, n: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (group codes, label codes or None-as-zeros, cell codes) after checking them."""
    criterion = check_choice(criterion, "criterion", CRITERIA)
    groups = np.asarray(sensitive_features, dtype=object)
    if groups.ndim != 1 or len(groups) == 0:
        raise DataError(
            f"sensitive_features must be a non-empty 1-D array of group labels, got shape {groups.shape}.",
            argument="sensitive_features",
        )
    if n is not None and len(groups) != n:
        raise DataError(
            f"sensitive_features has {len(groups)} rows but y_pred has {n}; pass one group per row.",
            argument="sensitive_features",
        )
    if any(g is None or (isinstance(g, float) and math.isnan(g)) for g in groups):
        raise DataError(
            "sensitive_features has missing values; drop those rows or give them a group.",
            argument="sensitive_features",
        )
    _, g_codes = np.unique(groups.astype(str), return_inverse=True)
    if g_codes.max() < 1:
        raise DataError(
            "sensitive_features has a single group; a fairness gap needs at least two.",
            argument="sensitive_features",
        )
    if criterion == "demographic_parity":
        return g_codes, np.zeros_like(g_codes), g_codes
    if y_true is None:
        raise ParameterError(
            "criterion='equalized_odds' needs y_true (0/1 labels); pass it or use demographic_parity.",
            argument="y_true",
        )
    y = check_numeric_array(y_true, "y_true", ndim=1)
    if len(y) != len(groups) or not np.isin(y, (0, 1)).all():
        raise DataError(
            f"y_true must hold one 0/1 label per row ({len(groups)} rows); encode the positive outcome as 1.",
            argument="y_true",
        )
    y_codes = y.astype(np.int64)
    return g_codes, y_codes, g_codes * 2 + y_codes


@validate_params(
    {"sensitive_features": ["array-like"], "y_true": ["array-like", None], "criterion": _CRITERION}
)
def cell_counts(
    sensitive_features: Any, *, y_true: Any = None, criterion: str = "demographic_parity"
) -> np.ndarray:
    """Count the samples of each cell the fairness loss averages over.

    Parameters
    ----------
    sensitive_features : array-like of shape (n_samples,)
        The group of each row.
    y_true : array-like of shape (n_samples,), optional
        0/1 labels; needed for ``criterion="equalized_odds"``.
    criterion : {"demographic_parity", "equalized_odds"}
        DP cells are the groups; EO cells are the (group, label) pairs.

    Returns
    -------
    numpy.ndarray
        Counts per cell (groups sorted by their string form; EO: label 0 before 1). A cell may
        be 0 here; :func:`fairness_loss` refuses empty cells.

    Examples
    --------
    >>> cell_counts(["a", "b", "a", "a"]).tolist()
    [3, 1]
    """
    g, _, cells = _cells(sensitive_features, y_true, criterion)
    n_cells = (g.max() + 1) * (1 if criterion == "demographic_parity" else 2)
    return np.bincount(cells, minlength=n_cells)


@validate_params(
    {
        "y_pred": ["array-like"],
        "sensitive_features": ["array-like"],
        "y_true": ["array-like", None],
        "criterion": _CRITERION,
        "offset": _INFO,
    }
)
def fairness_loss(
    y_pred: Any,
    *,
    sensitive_features: Any,
    y_true: Any = None,
    criterion: str = "demographic_parity",
    offset: float = 0.0,
) -> float:
    """Group-mean fairness loss of predictions in ``[0, 1]``: the DP or EO gap.

    ``demographic_parity``: ``max_t m_t - min_t m_t``, ``m_t`` the mean prediction of group
    ``t``. ``equalized_odds``: the larger over ``y`` of ``max_t m_{t,y} - min_t m_{t,y}`` (the
    true- and false-positive-rate gaps on hard decisions). Replacing one sample of cell ``c``
    moves the loss by at most ``1/n_c``: the property the bounds use.

    Parameters
    ----------
    y_pred : array-like of shape (n_samples,)
        Decisions (0/1) or scores in ``[0, 1]``.
    sensitive_features : array-like of shape (n_samples,)
        The group of each row.
    y_true : array-like of shape (n_samples,), optional
        0/1 labels; needed for ``equalized_odds``.
    criterion : {"demographic_parity", "equalized_odds"}
    offset : float, default 0
        Each cell's sum is divided by ``n_c + offset``. ``0``: the group means (fairlearn's
        differences). ``2``: the empirical DP risk ``|sum_{T=0} f / (n_0 + 2) - sum_{T=1} f /
        (n_1 + 2)|`` of Laakom et al. as a public review of the paper states it (the paper's own
        text could not be read here); defined even when a cell is empty, so the group counts
        may be random (:func:`random_group_fairness_bound`).

    Returns
    -------
    float

    References
    ----------
    F. Laakom et al., ICML 2025: the DP fairness loss (a difference of group means).

    Examples
    --------
    >>> fairness_loss([1, 0, 1, 1], sensitive_features=["a", "a", "b", "b"])
    0.5
    >>> round(fairness_loss([1, 0, 1, 1], sensitive_features=["a", "a", "b", "b"], offset=2), 4)
    0.25
    """
    pred = check_numeric_array(y_pred, "y_pred", ndim=1)
    if pred.min() < 0 or pred.max() > 1:
        raise DataError(
            "y_pred must lie in [0, 1] (decisions or probabilities); rescale scores first.",
            argument="y_pred",
        )
    offset = check_positive(offset, "offset", allow_zero=True)
    g, _, cells = _cells(sensitive_features, y_true, criterion, n=len(pred))
    n_groups = int(g.max()) + 1
    n_labels = 1 if criterion == "demographic_parity" else 2
    counts = np.bincount(cells, minlength=n_groups * n_labels)
    if offset == 0 and (counts == 0).any():
        raise DataError(
            f"every {'group' if n_labels == 1 else '(group, label) cell'} needs at least one row; "
            f"cell counts are {counts.tolist()}. Drop empty groups or collect more data.",
            argument="sensitive_features",
        )
    sums = np.bincount(cells, weights=pred, minlength=len(counts))
    means = (sums / (counts + offset)).reshape(n_groups, n_labels)
    return float(np.max(means.max(axis=0) - means.min(axis=0)))


def _check_counts(counts: Any) -> float:
    """Return ``sum_c 1/n_c`` after checking the cell counts are positive integers."""
    arr = check_numeric_array(counts, "cell_counts", ndim=1)
    if (arr < 1).any() or not np.all(arr == np.round(arr)):
        raise ParameterError(
            f"cell_counts must be positive integers (samples per cell), got {arr.tolist()}; "
            "every cell of the fairness loss needs at least one sample.",
            argument="cell_counts",
        )
    return float(np.sum(1.0 / arr))


@validate_params({"information": _INFO, "cell_counts": ["array-like"]})
def mi_fairness_bound(information: float, cell_counts: Any) -> float:
    """MI bound on the fairness generalisation gap: ``sqrt((sum_c 1/n_c) I(W; S | C) / 2)``.

    Parameters
    ----------
    information : float
        ``I(W; S | C)`` in nats (>= 0); for a deterministic learner with a finite output, the
        output's entropy over resamples (:func:`output_entropy`).
    cell_counts : array-like of int
        Samples per cell (:func:`cell_counts`).

    Returns
    -------
    float
        Upper bound on ``|E[population fairness risk - training fairness loss]|``.

    References
    ----------
    F. Laakom, H. Chen, J. Schmidhuber and Y. Bu, "Fairness Overfitting in Machine Learning:
    An Information-Theoretic Perspective", ICML 2025 (MI bound; trustlab's constants are proved
    in docs/fairness/fairness-bounds.md, Theorem 1).

    Examples
    --------
    >>> round(mi_fairness_bound(2.0, [50, 50]), 4)
    0.2
    """
    info = check_positive(information, "information", allow_zero=True)
    return math.sqrt(_check_counts(cell_counts) * info / 2.0)


@validate_params({"cmi": _INFO, "cell_counts": ["array-like"]})
def cmi_fairness_bound(cmi: float, cell_counts: Any) -> float:
    """Supersample CMI bound: ``sqrt(2 (sum_c 1/n_c) I(W; U | Z~))``.

    Parameters
    ----------
    cmi : float
        ``I(W; U | Z~)`` in nats, at most ``n log 2`` (:func:`supersample_cmi`).
    cell_counts : array-like of int
        Samples per cell of the training sample.

    Returns
    -------
    float

    References
    ----------
    F. Laakom et al., ICML 2025 (CMI bound; docs/fairness/fairness-bounds.md, Theorem 2).

    Examples
    --------
    >>> round(cmi_fairness_bound(0.5, [50, 50]), 4)
    0.2
    """
    info = check_positive(cmi, "cmi", allow_zero=True)
    return math.sqrt(2.0 * _check_counts(cell_counts) * info)


@validate_params(
    {"n_hypotheses": [Interval(numbers.Integral, 1, None, closed="left")], "cell_counts": ["array-like"]}
)
def uniform_convergence_fairness_bound(n_hypotheses: int, cell_counts: Any) -> float:
    """Classical bound ``E sup_w |gap(w)| <= sqrt((sum_c 1/n_c) log(2|W|) / 2)`` over a finite class.

    McDiarmid makes each ``w``'s gap sub-Gaussian with variance proxy ``(sum_c 1/n_c)/4``; the
    maximal inequality over the ``2|W|`` signed gaps gives the bound, valid for any learner
    that picks from ``W``.

    Parameters
    ----------
    n_hypotheses : int
        ``|W|``, the size of the class (>= 1).
    cell_counts : array-like of int

    Returns
    -------
    float

    Examples
    --------
    >>> round(uniform_convergence_fairness_bound(256, [50, 50]), 4)
    0.3532
    """
    if isinstance(n_hypotheses, bool) or not isinstance(n_hypotheses, int | np.integer) or n_hypotheses < 1:
        raise ParameterError(
            f"n_hypotheses must be an integer >= 1 (the size of the model class), got {n_hypotheses!r}.",
            argument="n_hypotheses",
        )
    return math.sqrt(_check_counts(cell_counts) * math.log(2.0 * int(n_hypotheses)) / 2.0)


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "group_share": [Interval(numbers.Real, 0, 1, closed="both")],
        "offset": [Interval(numbers.Real, 1, None, closed="left")],
    }
)
def random_group_variance_proxy(n_samples: int, group_share: float, *, offset: float = 2.0) -> float:
    """``n E[c^2]``, ``c = 1/(M_0 + 1 + offset) + 1/(M_1 + 1 + offset)``, ``M_0 ~ Bin(n - 1, p_0)``.

    With i.i.d. samples (the groups random, not fixed) and the offset DP loss
    (:func:`fairness_loss` with ``offset``), replacing one sample while the other ``n - 1`` hold
    ``M_0, M_1`` members of the two groups moves the loss inside an interval of length at most
    ``c`` (docs/fairness/fairness-bounds.md, Theorem 3). This is the constant of
    :func:`random_group_fairness_bound`; it is about ``(1/p_0 + 1/p_1)^2 / n`` for large ``n``.

    Parameters
    ----------
    n_samples : int
        ``n``, the training sample size (>= 1).
    group_share : float
        ``p_0 = P(T = 0)`` in ``[0, 1]``.
    offset : float, default 2
        The loss's denominator offset (>= 1; 2 is the review's reading of the paper).

    Returns
    -------
    float

    Examples
    --------
    >>> round(random_group_variance_proxy(1, 0.5), 4)  # no other samples: c = 2/3
    0.4444
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer) or n_samples < 1:
        raise ParameterError(
            f"n_samples must be an integer >= 1 (the training sample size), got {n_samples!r}.",
            argument="n_samples",
        )
    p0 = float(group_share)
    if not 0.0 <= p0 <= 1.0:
        raise ParameterError(f"group_share must lie in [0, 1], got {group_share!r}.", argument="group_share")
    delta = check_positive(offset, "offset")
    if delta < 1:
        raise ParameterError(
            f"offset must be >= 1 for random groups (an empty group needs a denominator), got {offset!r}.",
            argument="offset",
        )
    from scipy.stats import binom

    m = np.arange(int(n_samples))
    c = 1.0 / (m + 1 + delta) + 1.0 / (n_samples - 1 - m + 1 + delta)
    return float(n_samples * np.sum(binom.pmf(m, n_samples - 1, p0) * c**2))


@validate_params(
    {
        "information": _INFO,
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "group_share": [Interval(numbers.Real, 0, 1, closed="both")],
        "information_kind": [Options(("mi", "cmi"))],
        "offset": [Interval(numbers.Real, 1, None, closed="left")],
    }
)
def random_group_fairness_bound(
    information: float,
    *,
    n_samples: int,
    group_share: float,
    information_kind: str = "mi",
    offset: float = 2.0,
) -> float:
    """MI or CMI bound on the offset-DP generalisation gap with i.i.d. samples (random groups).

    ``mi``: ``sqrt(V I(W; S) / 2)``; ``cmi``: ``sqrt(2 V I(W; U | Z~))``, with
    ``V = random_group_variance_proxy(n, p_0, offset)``. This is the paper's setting as the
    public review states it (i.i.d. ``(X, Y, T)``, population risk = expected empirical risk on
    a fresh i.i.d. sample, the ``1/(n_t + 2)`` loss); the constants are trustlab's
    (docs/fairness/fairness-bounds.md, Theorem 3), not read from the paper. With ``I``
    replaced by ``log(2|W|)`` the ``mi`` form bounds ``E sup_w |gap(w)|`` over a finite class.

    Parameters
    ----------
    information : float
        ``I(W; S)`` or ``I(W; U | Z~)`` in nats (>= 0).
    n_samples : int
        ``n``.
    group_share : float
        ``p_0 = P(T = 0)``.
    information_kind : {"mi", "cmi"}
    offset : float, default 2

    Returns
    -------
    float

    References
    ----------
    F. Laakom, H. Chen, J. Schmidhuber and Y. Bu, ICML 2025 (setting and loss, via a review).

    Examples
    --------
    >>> round(random_group_fairness_bound(2.0, n_samples=100, group_share=0.5), 4)
    0.3845
    """
    info = check_positive(information, "information", allow_zero=True)
    kind = check_choice(information_kind, "information_kind", ("mi", "cmi"))
    v = random_group_variance_proxy(n_samples, group_share, offset=offset)
    return math.sqrt(v * info / 2.0) if kind == "mi" else math.sqrt(2.0 * v * info)


def _labels(outputs: Any, name: str) -> np.ndarray:
    """Integer codes of discrete outputs: 1-D labels, or rows of a 2-D array."""
    if isinstance(outputs, str | bytes) or outputs is None:
        raise DataError(
            f"{name} must be an array of discrete outputs, got {type(outputs).__name__}.", argument=name
        )
    arr = np.asarray(outputs)
    if arr.ndim == 0 or len(arr) == 0:
        raise DataError(f"{name} must hold at least one output (one per training run).", argument=name)
    if arr.ndim == 1:
        if arr.dtype == object and not all(isinstance(v, Hashable) for v in arr):
            raise DataError(f"{name} must hold hashable labels.", argument=name)
        _, codes = np.unique(arr.astype(str) if arr.dtype == object else arr, return_inverse=True)
    else:
        _, codes = np.unique(arr.reshape(len(arr), -1), axis=0, return_inverse=True)
    return np.asarray(codes).ravel()


def _entropy(codes: np.ndarray, correction: str) -> float:
    counts = np.bincount(codes)
    counts = counts[counts > 0]
    p = counts / counts.sum()
    h = float(-np.sum(p * np.log(p)))
    if correction == "miller-madow":
        h += (len(counts) - 1) / (2.0 * float(counts.sum()))
    return float(h)


@validate_params({"outputs": ["array-like"], "correction": _CORRECTION})
def output_entropy(outputs: Any, *, correction: str = "miller-madow") -> float:
    """Plug-in entropy (nats) of a learner's discrete outputs over independent training runs.

    For a deterministic learner with a finite output this estimates ``I(W; S) = H(W)``.

    Parameters
    ----------
    outputs : array-like
        One output per run: labels, or rows of a 2-D array (e.g. quantised weights).
    correction : {"miller-madow", "none"}
        Miller-Madow adds ``(K - 1) / (2 N)`` (``K`` distinct outputs in ``N`` runs) to the
        plug-in estimate, which is biased low.

    Returns
    -------
    float

    Examples
    --------
    >>> round(output_entropy([0, 1, 0, 1], correction="none"), 4)
    0.6931
    """
    correction = check_choice(correction, "correction", ("miller-madow", "none"))
    return _entropy(_labels(outputs, "outputs"), correction)


@validate_params({"outputs": ["array-like"], "conditions": ["array-like"], "correction": _CORRECTION})
def discrete_mutual_information(outputs: Any, conditions: Any, *, correction: str = "miller-madow") -> float:
    """Plug-in ``I(W; V) = H(W) - H(W | V)`` for a discrete output ``W`` and condition ``V``.

    Use it for randomised learners: give the dataset id of each run as ``conditions`` (several
    runs per dataset), so ``H(W | S)`` is subtracted.

    Parameters
    ----------
    outputs : array-like
        One discrete output per run.
    conditions : array-like of shape (n_runs,)
        The value of ``V`` (e.g. the dataset id) for each run.
    correction : {"miller-madow", "none"}

    Returns
    -------
    float
        Clipped at 0.

    Examples
    --------
    >>> round(discrete_mutual_information([0, 0, 1, 1], [0, 0, 1, 1], correction="none"), 4)
    0.6931
    """
    correction = check_choice(correction, "correction", ("miller-madow", "none"))
    w = _labels(outputs, "outputs")
    v = _labels(conditions, "conditions")
    if len(v) != len(w):
        raise DataError(
            f"conditions has {len(v)} entries but outputs has {len(w)}; pass one per run.",
            argument="conditions",
        )
    conditional = sum(np.mean(v == c) * _entropy(w[v == c], correction) for c in np.unique(v))
    return max(0.0, _entropy(w, correction) - float(conditional))


@validate_params({"outputs": ["array-like"], "supersample_ids": ["array-like"], "correction": _CORRECTION})
def supersample_cmi(outputs: Any, supersample_ids: Any, *, correction: str = "miller-madow") -> float:
    """Estimate ``I(W; U | Z~)`` of a deterministic learner: the mean over supersamples of ``H(W | z~)``.

    Parameters
    ----------
    outputs : array-like
        One discrete output per (supersample, mask) run.
    supersample_ids : array-like of shape (n_runs,)
        Which supersample each run trained on; masks ``U`` drawn uniformly and independently.
    correction : {"miller-madow", "none"}

    Returns
    -------
    float

    References
    ----------
    T. Steinke and L. Zakynthinou, "Reasoning About Generalization via Conditional Mutual
    Information", COLT 2020 (the supersample); F. Laakom et al., ICML 2025.

    Examples
    --------
    >>> round(supersample_cmi([0, 1, 2, 2], [0, 0, 1, 1], correction="none"), 4)
    0.3466
    """
    correction = check_choice(correction, "correction", ("miller-madow", "none"))
    w = _labels(outputs, "outputs")
    ids = _labels(supersample_ids, "supersample_ids")
    if len(ids) != len(w):
        raise DataError(
            f"supersample_ids has {len(ids)} entries but outputs has {len(w)}; pass one per run.",
            argument="supersample_ids",
        )
    return float(np.mean([_entropy(w[ids == j], correction) for j in np.unique(ids)]))
