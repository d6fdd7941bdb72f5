"""The fairness generalisation check in the paper's i.i.d. setting (random group counts).

Laakom, Chen, Schmidhuber & Bu (ICML 2025) draw the training sample i.i.d., so the number of
samples per group is random, and (as a public review of the paper states it; the paper's own
text could not be read here) measure demographic parity with the empirical risk
``|sum_{T=0} f / (n_0 + 2) - sum_{T=1} f / (n_1 + 2)|``, the population risk being its
expectation on a fresh i.i.d. sample. :func:`simulate_iid_fairness_generalization` runs the
check of :mod:`trustlab.theory.fairness_generalization` in that setting: fairness-regularised
group-threshold ERM on i.i.d. samples of the shipped ``benefits`` population, the population
risk computed exactly (a binomial mixture over the group count), and the random-group MI, CMI
and finite-class bounds of :func:`trustlab.fairness.bounds.random_group_fairness_bound`.
``criterion="equalized_odds"`` runs the same check for the offset EO loss (cells = group x
label, multinomial counts; population risk by Monte Carlo; bounds of
:func:`trustlab.fairness.bounds_evaluated.random_cell_fairness_bound`). See
``docs/fairness/fairness-bounds.md`` (Theorems 3 and 4).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import binom

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_choice, check_positive, check_positive_int, make_generator
from trustlab.fairness.bounds import CRITERIA, output_entropy, supersample_cmi
from trustlab.fairness.bounds_evaluated import random_cell_fairness_bound
from trustlab.theory.fairness_generalization import SENSITIVE, _BoundRatios, benefits_threshold_population

__all__ = ["IIDFairnessSimulation", "iid_population_fairness_risk", "simulate_iid_fairness_generalization"]


@validate_params(
    {
        "rates": ["array-like"],
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "group_share": [Interval(numbers.Real, 0, 1, closed="both")],
        "offset": [Interval(numbers.Real, 1, None, closed="left")],
    }
)
def iid_population_fairness_risk(
    rates: Any, n_samples: int, group_share: float, *, offset: float = 2.0
) -> float:
    """Exact ``E |B_0/(N_0 + offset) - B_1/(N_1 + offset)|`` for hard decisions on an i.i.d. sample.

    ``N_0 ~ Bin(n, p_0)``, ``N_1 = n - N_0``, and given the counts ``B_t ~ Bin(N_t, q_t)``
    independent (``q_t`` the decision's positive rate in group ``t``). Group counts of
    probability below ``1e-15`` are dropped (error below ``1e-15 n``).

    Parameters
    ----------
    rates : array-like of 2 floats
        ``(q_0, q_1)`` in ``[0, 1]``.
    n_samples : int
    group_share : float
        ``p_0``.
    offset : float, default 2

    Returns
    -------
    float

    Examples
    --------
    >>> round(iid_population_fairness_risk([1.0, 1.0], 1, 0.5), 4)  # one sample: |1/3 - 0|
    0.3333
    """
    q = np.asarray(rates, dtype=float)
    n = check_positive_int(n_samples, "n_samples")
    delta = check_positive(offset, "offset")
    p0 = float(group_share)
    w_n0 = binom.pmf(np.arange(n + 1), n, p0)
    total = 0.0
    for n0 in np.flatnonzero(w_n0 > 1e-15):
        n1 = n - int(n0)
        a = binom.pmf(np.arange(n0 + 1), n0, q[0])
        b = binom.pmf(np.arange(n1 + 1), n1, q[1])
        diff = np.abs(np.arange(n0 + 1)[:, None] / (n0 + delta) - np.arange(n1 + 1)[None, :] / (n1 + delta))
        total += float(w_n0[n0]) * float(a @ diff @ b)
    return float(total)


def _loss_and_error(
    score: np.ndarray,
    group: np.ndarray,
    label: np.ndarray,
    thresholds: np.ndarray,
    rows: np.ndarray,
    offset: float,
    criterion: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Offset fairness loss and error rate of every model ``k0 * K + k1`` on samples ``rows`` (``(B, n)``)."""
    k = len(thresholds)
    dec = score[rows][..., None] > thresholds
    g0 = (group[rows] == 0)[..., None]
    lab = label[rows][..., None].astype(bool)
    wrong = dec != lab
    err = [(wrong & g0).sum(axis=1), (wrong & ~g0).sum(axis=1)]
    loss = np.zeros((len(rows), k, k))
    for y_mask in [None] if criterion == "demographic_parity" else [~lab, lab]:
        m0, m1 = (g0, ~g0) if y_mask is None else (g0 & y_mask, ~g0 & y_mask)
        n0 = m0[..., 0].sum(axis=1)[:, None, None] + offset
        n1 = m1[..., 0].sum(axis=1)[:, None, None] + offset
        term = np.abs((dec & m0).sum(axis=1)[:, :, None] / n0 - (dec & m1).sum(axis=1)[:, None, :] / n1)
        loss = np.maximum(loss, term)
    total_err = (err[0][:, :, None] + err[1][:, None, :]) / rows.shape[1]
    return loss.reshape(len(rows), k * k), total_err.reshape(len(rows), k * k)


def _fit_iid(
    score: np.ndarray,
    group: np.ndarray,
    label: np.ndarray,
    thresholds: np.ndarray,
    rows: np.ndarray,
    penalty: float,
    offset: float,
    criterion: str = "demographic_parity",
) -> tuple[np.ndarray, np.ndarray]:
    """Fair threshold ERM on i.i.d. samples ``rows`` (shape ``(B, n)``): model ``k0 * K + k1``, train loss."""
    loss, total_err = _loss_and_error(score, group, label, thresholds, rows, offset, criterion)
    choice = np.argmin(total_err + penalty * loss, axis=1)
    return choice, loss[np.arange(len(choice)), choice]


@dataclass(frozen=True)
class IIDFairnessSimulation(_BoundRatios):
    """Measured offset fairness generalisation gap (i.i.d. samples) beside the random-cell bounds.

    Attributes
    ----------
    n_samples : int
    group_share : float
        ``p_0``, the population share of group 0 (female, or non-white with ``sensitive="nwhite"``).
    offset, penalty : float
    n_hypotheses, n_datasets : int
    train_loss, population_loss, gap, gap_se : float
        Mean training loss, mean population risk, their mean difference and its SE (for
        equalised odds the SE includes the Monte-Carlo error of the population risk).
    mutual_information, cmi : float
        Estimates of ``I(W; S) = H(W)`` and ``I(W; U | Z~)`` (nats; Miller-Madow).
    mi_bound, cmi_bound, uniform_bound : float
        :func:`~trustlab.fairness.bounds_evaluated.random_cell_fairness_bound` with
        ``I(W; S)``, ``I(W; U | Z~)`` and ``log(2|W|)`` (for DP equal to
        :func:`~trustlab.fairness.bounds.random_group_fairness_bound`).
    criterion : str
        ``"demographic_parity"`` (population risk exact) or ``"equalized_odds"`` (population
        risk by Monte Carlo on ``n_fresh`` fresh samples shared by all models).
    cell_shares : tuple of float
        Population probability of each cell (DP: the two groups; EO: group x label).
    population_mc_se : float
        Monte-Carlo SE of the mean population risk (0 for DP).

    See Also
    --------
    simulate_iid_fairness_generalization : builds it.
    """

    n_samples: int
    group_share: float
    offset: float
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
    criterion: str = "demographic_parity"
    cell_shares: tuple[float, ...] = ()
    population_mc_se: float = 0.0


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 2, None, closed="left")],
        "criterion": [Options(CRITERIA)],
        "penalty": [Interval(numbers.Real, 0, None, closed="left")],
        "offset": [Interval(numbers.Real, 1, None, closed="left")],
        "n_thresholds": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_datasets": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_supersamples": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_masks": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_fresh": [Interval(numbers.Integral, 2, None, closed="left")],
        "sensitive": [Options(SENSITIVE)],
        "random_state": ["random_state"],
    }
)
def simulate_iid_fairness_generalization(
    *,
    n_samples: int = 100,
    criterion: str = "demographic_parity",
    penalty: float = 1.0,
    offset: float = 2.0,
    n_thresholds: int = 16,
    n_datasets: int = 2000,
    n_supersamples: int = 20,
    n_masks: int = 200,
    n_fresh: int = 20000,
    sensitive: str = "sex",
    random_state: Any = 0,
) -> IIDFairnessSimulation:
    """Fair threshold ERM on i.i.d. ``benefits`` samples: the offset DP or EO gap and its bounds.

    Parameters
    ----------
    n_samples : int
        ``n`` i.i.d. training rows (the cell counts are random), >= 2.
    criterion : {"demographic_parity", "equalized_odds"}
        The offset loss regularised, measured and bounded (EO: the larger over the label of
        the offset group gap among rows with that label).
    penalty : float
        ``lambda`` in ``error + lambda * offset loss``.
    offset : float, default 2
        Denominator offset of the loss (2: the review's reading of the paper), >= 1.
    n_thresholds : int
        ``K`` thresholds per group (``|W| = K^2``).
    n_datasets : int
        Independent training samples for the gap and the MI estimate.
    n_supersamples, n_masks : int
        Supersamples (``n`` pairs of i.i.d. rows) and masks per supersample for the CMI.
    n_fresh : int
        EO only: fresh i.i.d. samples of size ``n`` on which the population risk of every
        model is averaged (shared by all models; the DP risk is exact and ignores it).
    sensitive : {"sex", "nwhite"}
        The sensitive attribute of ``benefits``; ``group_share`` is then the share of women,
        resp. of non-white workers.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    IIDFairnessSimulation

    References
    ----------
    F. Laakom, H. Chen, J. Schmidhuber and Y. Bu, "Fairness Overfitting in Machine Learning:
    An Information-Theoretic Perspective", ICML 2025.

    Examples
    --------
    >>> sim = simulate_iid_fairness_generalization(n_datasets=200, n_supersamples=2, n_masks=50)
    >>> bool(sim.gap <= sim.mi_bound <= sim.uniform_bound)
    True
    """
    n = check_positive_int(n_samples, "n_samples", minimum=2)
    criterion = check_choice(criterion, "criterion", CRITERIA)
    penalty = check_positive(penalty, "penalty", allow_zero=True)
    offset = check_positive(offset, "offset")
    n_datasets = check_positive_int(n_datasets, "n_datasets", minimum=2)
    n_supersamples = check_positive_int(n_supersamples, "n_supersamples")
    n_masks = check_positive_int(n_masks, "n_masks", minimum=2)
    n_fresh = check_positive_int(n_fresh, "n_fresh", minimum=2)
    pop = benefits_threshold_population(
        "demographic_parity",
        check_positive_int(n_thresholds, "n_thresholds", minimum=2),
        check_choice(sensitive, "sensitive", SENSITIVE),
    )
    score = np.concatenate(pop.scores)
    label = np.concatenate(pop.labels)
    group = np.repeat([0, 1], [len(s) for s in pop.scores])
    p0 = len(pop.scores[0]) / len(score)
    shares = (
        np.array([p0, 1 - p0])
        if criterion == "demographic_parity"
        else np.bincount(group * 2 + label, minlength=4) / len(score)
    )
    k = len(pop.thresholds)
    rng = make_generator(random_state)

    def fit(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _fit_iid(score, group, label, pop.thresholds, rows, penalty, offset, criterion)

    choices, trains = [], []
    for start in range(0, n_datasets, 500):  # batches keep the (B, n, K) decision array small
        c, t = fit(rng.integers(0, len(score), size=(min(500, n_datasets - start), n)))
        choices.append(c)
        trains.append(t)
    choice, train = np.concatenate(choices), np.concatenate(trains)
    mc_se = 0.0
    if criterion == "demographic_parity":
        rates = pop.positive_rates()
        risk = {
            int(w): iid_population_fairness_risk([rates[0, w // k], rates[1, w % k]], n, p0, offset=offset)
            for w in np.unique(choice)
        }
        population = np.array([risk[int(w)] for w in choice])

    outputs, ids = [], []
    for j in range(n_supersamples):
        pairs = rng.integers(0, len(score), size=(n, 2))
        outputs.append(fit(pairs[np.arange(n), rng.integers(0, 2, size=(n_masks, n))])[0])
        ids.append(np.full(n_masks, j))
    if criterion == "equalized_odds":
        freq = np.bincount(choice, minlength=k * k) / len(choice)
        risk_sum, mixed = np.zeros(k * k), []
        for start in range(0, n_fresh, 500):
            rows = rng.integers(0, len(score), size=(min(500, n_fresh - start), n))
            loss = _loss_and_error(score, group, label, pop.thresholds, rows, offset, criterion)[0]
            risk_sum += loss.sum(axis=0)
            mixed.append(loss @ freq)
        population = (risk_sum / n_fresh)[choice]
        mc_se = float(np.concatenate(mixed).std(ddof=1) / np.sqrt(n_fresh))
    diff = population - train
    mi = output_entropy(choice)
    cmi = supersample_cmi(np.concatenate(outputs), np.concatenate(ids))

    def bound(info: float, kind: str = "mi") -> float:
        return random_cell_fairness_bound(
            info, n_samples=n, cell_shares=shares, information_kind=kind, offset=offset
        )

    return IIDFairnessSimulation(
        n_samples=n,
        group_share=p0,
        offset=offset,
        penalty=penalty,
        n_hypotheses=k * k,
        n_datasets=n_datasets,
        train_loss=float(train.mean()),
        population_loss=float(population.mean()),
        gap=float(diff.mean()),
        gap_se=float(np.hypot(diff.std(ddof=1) / np.sqrt(n_datasets), mc_se)),
        mutual_information=mi,
        cmi=cmi,
        mi_bound=bound(mi),
        cmi_bound=bound(cmi, "cmi"),
        uniform_bound=bound(math.log(2 * k * k)),
        criterion=criterion,
        cell_shares=tuple(float(v) for v in shares),
        population_mc_se=mc_se,
    )
