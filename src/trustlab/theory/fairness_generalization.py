"""Check the information-theoretic fairness generalisation bounds against a simulation.

The population is the shipped Ecdat ``benefits`` table (sensitive ``sex``, target ``ui``): a
logistic score is fitted once on a fixed half of the rows, the other half is the population.
The learner is fairness-regularised ERM over group-specific thresholds on that score (``K``
public quantile thresholds per group, ``|W| = K^2``): it minimises
``error + penalty * fairness loss`` on a training sample with fixed cell counts. Over many
resamples, :func:`simulate_fairness_generalization` measures the fairness generalisation gap
(the population fairness risk of each learned model is computed exactly: the group means on a
fresh sample are independent binomials), estimates ``I(W; S)`` and the supersample
``I(W; U | Z~)``, and evaluates the MI, CMI and uniform-convergence bounds of
:mod:`trustlab.fairness.bounds`. See ``docs/fairness/fairness-bounds.md``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.stats import binom

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_choice, check_positive, check_positive_int, make_generator
from trustlab.errors import ParameterError
from trustlab.fairness.bounds import (
    CRITERIA,
    cmi_fairness_bound,
    mi_fairness_bound,
    output_entropy,
    supersample_cmi,
    uniform_convergence_fairness_bound,
)
from trustlab.fairness.bounds_evaluated import (
    evaluated_cmi_fairness_bound,
    prediction_cmi,
    prediction_discordance,
)

__all__ = [
    "FairnessGeneralizationSimulation",
    "ThresholdPopulation",
    "benefits_threshold_population",
    "population_fairness_risk",
    "simulate_fairness_generalization",
]


@dataclass(frozen=True)
class ThresholdPopulation:
    """A finite population split into fairness cells, a score per row and a threshold grid.

    Attributes
    ----------
    criterion : str
        ``"demographic_parity"`` (cells = groups ``0, 1``) or ``"equalized_odds"`` (cells =
        ``(group, label)`` in the order ``(0,0), (0,1), (1,0), (1,1)``).
    scores, labels : tuple of numpy.ndarray
        Per cell, the rows' scores and 0/1 labels.
    thresholds : numpy.ndarray
        The ``K`` thresholds; a model ``(k0, k1)`` predicts ``score > thresholds[k_t]`` in group ``t``.

    Examples
    --------
    >>> pop = ThresholdPopulation(
    ...     "demographic_parity",
    ...     scores=(np.array([0.1, 0.4, 0.8]), np.array([0.3, 0.9])),
    ...     labels=(np.array([0, 0, 1]), np.array([0, 1])),
    ...     thresholds=np.array([0.2, 0.5]),
    ... )
    >>> pop.cell_groups
    (0, 1)
    >>> pop.positive_rates().round(3)
    array([[0.667, 0.333],
           [1.   , 0.5  ]])
    """

    criterion: str
    scores: tuple[np.ndarray, ...]
    labels: tuple[np.ndarray, ...]
    thresholds: np.ndarray

    @property
    def cell_groups(self) -> tuple[int, ...]:
        """The group (0 or 1) of each cell."""
        return (0, 1) if self.criterion == "demographic_parity" else (0, 0, 1, 1)

    def positive_rates(self) -> np.ndarray:
        """Population rate of ``score > threshold`` per cell and threshold, shape ``(cells, K)``.

        Returns
        -------
        numpy.ndarray of shape (n_cells, K)
            Entry ``[c, k]``: the share of cell ``c``'s rows with ``score > thresholds[k]``.
        """
        return np.array([(s[:, None] > self.thresholds).mean(axis=0) for s in self.scores])


SENSITIVE = ("sex", "nwhite")


@lru_cache(maxsize=8)
def benefits_threshold_population(
    criterion: str = "demographic_parity", n_thresholds: int = 16, sensitive: str = "sex"
) -> ThresholdPopulation:
    """The ``benefits`` population: a logistic score fitted on a fixed half, cells on the other.

    Parameters
    ----------
    criterion : {"demographic_parity", "equalized_odds"}
    n_thresholds : int
        ``K`` thresholds at the score quantiles ``0.05..0.95`` of the fitting half (public to
        the learner: they do not depend on any training sample).
    sensitive : {"sex", "nwhite"}
        The sensitive attribute (left out of the score's features). ``"sex"``: group 0 =
        female (24 % of rows); ``"nwhite"``: group 0 = non-white (15 %).

    Returns
    -------
    ThresholdPopulation

    Examples
    --------
    >>> pop = benefits_threshold_population()
    >>> [len(s) for s in pop.scores]  # female, male rows of the population half
    [581, 1858]
    """
    from sklearn.linear_model import LogisticRegression

    from trustlab.datasets import load_benefits

    criterion = check_choice(criterion, "criterion", CRITERIA)
    k = check_positive_int(n_thresholds, "n_thresholds", minimum=2)
    sensitive = check_choice(sensitive, "sensitive", SENSITIVE)
    df = load_benefits()
    y = (df["ui"] == "yes").to_numpy().astype(np.int64)
    group = (df["sex"] == "male" if sensitive == "sex" else df["nwhite"] == "no").to_numpy().astype(np.int64)
    feats = df.drop(columns=["ui", sensitive])
    x = np.column_stack(
        [
            feats[c].cat.codes.to_numpy() if feats[c].dtype == "category" else feats[c].to_numpy()
            for c in feats
        ]
    ).astype(float)
    x = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    perm = np.random.default_rng(0).permutation(len(df))  # a fixed, public split
    fit_rows, pop_rows = perm[: len(df) // 2], perm[len(df) // 2 :]
    model = LogisticRegression(max_iter=2000).fit(x[fit_rows], y[fit_rows])
    thresholds = np.quantile(model.predict_proba(x[fit_rows])[:, 1], np.linspace(0.05, 0.95, k))
    score = model.predict_proba(x[pop_rows])[:, 1]
    g, lab = group[pop_rows], y[pop_rows]
    masks = (
        [g == 0, g == 1]
        if criterion == "demographic_parity"
        else [(g == t) & (lab == v) for t in (0, 1) for v in (0, 1)]
    )
    return ThresholdPopulation(
        criterion, tuple(score[m] for m in masks), tuple(lab[m] for m in masks), np.asarray(thresholds)
    )


def _abs_diff_law(n0: int, p0: float, n1: int, p1: float) -> tuple[np.ndarray, np.ndarray]:
    """Values and probabilities of ``|B0/n0 - B1/n1|``, ``B_i ~ Bin(n_i, p_i)`` independent, sorted."""
    a, b = binom.pmf(np.arange(n0 + 1), n0, p0), binom.pmf(np.arange(n1 + 1), n1, p1)
    vals = np.abs(np.arange(n0 + 1)[:, None] / n0 - np.arange(n1 + 1)[None, :] / n1).ravel()
    probs = np.outer(a, b).ravel()
    order = np.argsort(vals, kind="stable")
    return vals[order], probs[order]


def _cdf(vals: np.ndarray, probs: np.ndarray, at: np.ndarray) -> np.ndarray:
    cum = np.cumsum(probs)
    idx = np.searchsorted(vals, at, side="right") - 1
    return np.where(idx >= 0, cum[np.maximum(idx, 0)], 0.0)


@validate_params({"rates": ["array-like"], "counts": ["array-like"], "criterion": [Options(CRITERIA)]})
def population_fairness_risk(rates: Sequence[float], counts: Sequence[int], criterion: str) -> float:
    """Exact ``E l(w, S')`` for hard decisions on a fresh sample with the given cell counts.

    Parameters
    ----------
    rates : sequence of float
        The decision's positive rate in each cell (population values).
    counts : sequence of int
        Samples per cell.
    criterion : {"demographic_parity", "equalized_odds"}
        Two groups: DP cells ``(0, 1)``; EO cells ``(0,0), (0,1), (1,0), (1,1)``.

    Returns
    -------
    float
        ``E|B_0/n_0 - B_1/n_1|`` (DP) or ``E max_y |B_{0y}/n_{0y} - B_{1y}/n_{1y}|`` (EO).

    Examples
    --------
    >>> round(population_fairness_risk([0.5, 0.5], [1, 1], "demographic_parity"), 6)
    0.5
    """
    criterion = check_choice(criterion, "criterion", CRITERIA)
    n_cells = 2 if criterion == "demographic_parity" else 4
    if len(rates) != n_cells or len(counts) != n_cells:
        raise ParameterError(
            f"rates and counts need {n_cells} entries for {criterion}, got {len(rates)} and {len(counts)}.",
            argument="counts",
        )
    n = [check_positive_int(c, "counts") for c in counts]
    p = [float(r) for r in rates]
    if criterion == "demographic_parity":
        vals, probs = _abs_diff_law(n[0], p[0], n[1], p[1])
        return float(vals @ probs)
    va, pa = _abs_diff_law(n[0], p[0], n[2], p[2])  # label 0: the FPR gap
    vb, pb = _abs_diff_law(n[1], p[1], n[3], p[3])  # label 1: the TPR gap
    support = np.unique(np.concatenate([va, vb]))
    joint = _cdf(va, pa, support) * _cdf(vb, pb, support)
    return float(support @ np.diff(joint, prepend=0.0))


def _fit(pop: ThresholdPopulation, idx: list[np.ndarray], penalty: float) -> tuple[np.ndarray, np.ndarray]:
    """Fairness-regularised ERM on a batch of samples: cell ``c`` rows ``idx[c]`` (shape ``(B, n_c)``).

    Returns the chosen model index ``k0 * K + k1`` and its training fairness loss, per sample.
    """
    k = len(pop.thresholds)
    pos, err, n = [], [], []
    for c, rows in enumerate(idx):
        dec = pop.scores[c][rows][..., None] > pop.thresholds
        pos.append(dec.sum(axis=1))
        err.append((dec != pop.labels[c][rows][..., None].astype(bool)).sum(axis=1))
        n.append(rows.shape[1])
    groups = pop.cell_groups
    err_t = [sum(err[c] for c in range(len(idx)) if groups[c] == t) for t in (0, 1)]
    total_err = (err_t[0][:, :, None] + err_t[1][:, None, :]) / sum(n)
    pairs = [(0, 1)] if pop.criterion == "demographic_parity" else [(0, 2), (1, 3)]
    loss = np.max(
        [np.abs(pos[a][:, :, None] / n[a] - pos[b][:, None, :] / n[b]) for a, b in pairs], axis=0
    ).reshape(len(idx[0]), k * k)
    choice = np.argmin(total_err.reshape(len(idx[0]), k * k) + penalty * loss, axis=1)
    return choice, loss[np.arange(len(choice)), choice]


class _BoundRatios:
    """The ratios a bound-versus-simulation result reports (shared by the two simulations)."""

    gap: float
    mi_bound: float
    cmi_bound: float
    uniform_bound: float

    @property
    def tightness(self) -> float:
        """``mi_bound / gap``: how many times the measured gap the MI bound is."""
        return self.mi_bound / self.gap if self.gap > 0 else float("inf")

    @property
    def mi_to_uniform(self) -> float:
        """``mi_bound / uniform_bound`` (< 1: the MI bound is the tighter)."""
        return self.mi_bound / self.uniform_bound

    @property
    def cmi_to_mi(self) -> float:
        """``cmi_bound / mi_bound`` (> 1: the CMI bound is the looser)."""
        return self.cmi_bound / self.mi_bound


@dataclass(frozen=True)
class FairnessGeneralizationSimulation(_BoundRatios):
    """Measured fairness generalisation gap beside the MI, CMI and uniform-convergence bounds.

    Attributes
    ----------
    criterion : str
    cell_counts : tuple of int
    penalty : float
    n_hypotheses : int
        ``|W| = K^2``.
    n_datasets : int
    train_loss, population_loss : float
        Mean training fairness loss and mean exact population fairness risk of the learned models.
    gap, gap_se : float
        Mean of ``population - train`` over the resamples, and its standard error.
    mutual_information, cmi : float
        Estimates of ``I(W; S | C) = H(W)`` and ``I(W; U | Z~)`` (nats; Miller-Madow).
    mi_bound, cmi_bound, uniform_bound : float
    prediction_cmi : float
        Estimate of the evaluated CMI ``I(F; U | Z~)``, ``F`` the learned model's decisions on
        all ``2n`` supersample entries (same runs as ``cmi``).
    discordance : float
        Mean ``sigma^2 = sum_k (F_{k,0} - F_{k,1})^2 / n_{c_k}^2`` over those runs (at most
        ``sum_c 1/n_c``).
    evaluated_cmi_bound : float
        ``sqrt(2 discordance prediction_cmi)``
        (:func:`~trustlab.fairness.bounds_evaluated.evaluated_cmi_fairness_bound`, Theorem 5).

    See Also
    --------
    simulate_fairness_generalization : builds it.
    """

    criterion: str
    cell_counts: tuple[int, ...]
    penalty: float
    n_hypotheses: int
    n_datasets: int
    train_loss: float
    population_loss: float
    gap: float
    gap_se: float
    mutual_information: float
    cmi: float
    mi_bound: float
    cmi_bound: float
    uniform_bound: float
    prediction_cmi: float
    discordance: float
    evaluated_cmi_bound: float

    @property
    def evaluated_to_mi(self) -> float:
        """``evaluated_cmi_bound / mi_bound`` (< 1: the prediction-level CMI bound is the tighter)."""
        return self.evaluated_cmi_bound / self.mi_bound


def _counts(n_per_cell: Any, n_cells: int) -> tuple[int, ...]:
    if isinstance(n_per_cell, numbers.Integral) and not isinstance(n_per_cell, bool):
        return (check_positive_int(n_per_cell, "n_per_cell", minimum=2),) * n_cells
    if isinstance(n_per_cell, np.ndarray):
        n_per_cell = n_per_cell.tolist()
    if not isinstance(n_per_cell, Sequence) or len(n_per_cell) != n_cells:
        raise ParameterError(
            f"n_per_cell must be an integer >= 2 or {n_cells} integers (one per cell), got {n_per_cell!r}.",
            argument="n_per_cell",
        )
    return tuple(check_positive_int(v, "n_per_cell", minimum=2) for v in n_per_cell)


@validate_params(
    {
        "criterion": [Options(CRITERIA)],
        "n_per_cell": [Interval(numbers.Integral, 2, None, closed="left"), "array-like"],
        "penalty": [Interval(numbers.Real, 0, None, closed="left")],
        "n_thresholds": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_datasets": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_supersamples": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_masks": [Interval(numbers.Integral, 2, None, closed="left")],
        "sensitive": [Options(SENSITIVE)],
        "random_state": ["random_state"],
    }
)
def simulate_fairness_generalization(
    *,
    criterion: str = "demographic_parity",
    n_per_cell: int | Sequence[int] = 50,
    penalty: float = 1.0,
    n_thresholds: int = 16,
    n_datasets: int = 2000,
    n_supersamples: int = 20,
    n_masks: int = 200,
    sensitive: str = "sex",
    random_state: Any = 0,
) -> FairnessGeneralizationSimulation:
    """Measure the fairness generalisation gap of fair threshold ERM on ``benefits`` and bound it.

    Parameters
    ----------
    criterion : {"demographic_parity", "equalized_odds"}
        The fairness loss regularised, measured and bounded.
    n_per_cell : int or sequence of int
        Training samples per cell (2 DP cells; 4 EO cells), each >= 2.
    penalty : float
        ``lambda >= 0`` in ``error + lambda * fairness loss``.
    n_thresholds : int
        ``K`` thresholds per group.
    n_datasets : int
        Independent training samples for the gap and the MI estimate.
    n_supersamples, n_masks : int
        Supersamples and masks per supersample for the CMI estimate.
    sensitive : {"sex", "nwhite"}
        The sensitive attribute of ``benefits`` (:func:`benefits_threshold_population`).
    random_state : None, int or numpy.random.Generator
        Drives the resampling.

    Returns
    -------
    FairnessGeneralizationSimulation

    References
    ----------
    F. Laakom, H. Chen, J. Schmidhuber and Y. Bu, "Fairness Overfitting in Machine Learning:
    An Information-Theoretic Perspective", ICML 2025.

    Examples
    --------
    >>> sim = simulate_fairness_generalization(n_datasets=200, n_supersamples=2, n_masks=50)
    >>> bool(sim.gap <= sim.mi_bound <= sim.uniform_bound)
    True
    """
    criterion = check_choice(criterion, "criterion", CRITERIA)
    penalty = check_positive(penalty, "penalty", allow_zero=True)
    n_datasets = check_positive_int(n_datasets, "n_datasets", minimum=2)
    n_supersamples = check_positive_int(n_supersamples, "n_supersamples")
    n_masks = check_positive_int(n_masks, "n_masks", minimum=2)
    pop = benefits_threshold_population(
        criterion,
        check_positive_int(n_thresholds, "n_thresholds", minimum=2),
        check_choice(sensitive, "sensitive", SENSITIVE),
    )
    counts = _counts(n_per_cell, len(pop.scores))
    rng = make_generator(random_state)
    k = len(pop.thresholds)

    idx = [rng.integers(0, len(s), size=(n_datasets, n)) for s, n in zip(pop.scores, counts, strict=True)]
    choice, train = _fit(pop, idx, penalty)
    rates = pop.positive_rates()
    groups = pop.cell_groups
    risk = {
        int(w): population_fairness_risk(
            [rates[c, (w // k) if groups[c] == 0 else (w % k)] for c in range(len(counts))], counts, criterion
        )
        for w in np.unique(choice)
    }
    population = np.array([risk[int(w)] for w in choice])
    diff = population - train

    outputs, ids, preds = [], [], []
    for j in range(n_supersamples):
        pairs = [rng.integers(0, len(s), size=(n, 2)) for s, n in zip(pop.scores, counts, strict=True)]
        masks = [rng.integers(0, 2, size=(n_masks, n)) for n in counts]
        chosen = [p[np.arange(len(p)), m] for p, m in zip(pairs, masks, strict=True)]
        w = _fit(pop, chosen, penalty)[0]
        outputs.append(w)
        ids.append(np.full(n_masks, j))
        # F: the learned model's decisions on both entries of every pair, shape (n_masks, n, 2)
        thr = [pop.thresholds[w // k], pop.thresholds[w % k]]
        preds.append(
            np.concatenate(
                [pop.scores[c][p][None] > thr[groups[c]][:, None, None] for c, p in enumerate(pairs)], axis=1
            ).astype(np.int8)
        )
    mi = output_entropy(choice)
    cmi = supersample_cmi(np.concatenate(outputs), np.concatenate(ids))
    pair_cells = np.repeat(np.arange(len(counts)), counts)
    f_cmi = prediction_cmi(np.concatenate(preds), np.concatenate(ids))
    disc = prediction_discordance(np.concatenate(preds), pair_cells)
    return FairnessGeneralizationSimulation(
        criterion=criterion,
        cell_counts=counts,
        penalty=penalty,
        n_hypotheses=k * k,
        n_datasets=n_datasets,
        train_loss=float(train.mean()),
        population_loss=float(population.mean()),
        gap=float(diff.mean()),
        gap_se=float(diff.std(ddof=1) / np.sqrt(n_datasets)),
        mutual_information=mi,
        cmi=cmi,
        mi_bound=mi_fairness_bound(mi, counts),
        cmi_bound=cmi_fairness_bound(cmi, counts),
        uniform_bound=uniform_convergence_fairness_bound(k * k, counts),
        prediction_cmi=f_cmi,
        discordance=disc,
        evaluated_cmi_bound=evaluated_cmi_fairness_bound(f_cmi, counts, discordance=disc),
    )
