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
See ``docs/fairness/fairness-bounds.md`` (Theorem 3).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import binom

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_positive, check_positive_int, make_generator
from trustlab.fairness.bounds import output_entropy, random_group_fairness_bound, supersample_cmi
from trustlab.theory.fairness_generalization import _BoundRatios, benefits_threshold_population

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


def _fit_iid(
    score: np.ndarray,
    group: np.ndarray,
    label: np.ndarray,
    thresholds: np.ndarray,
    rows: np.ndarray,
    penalty: float,
    offset: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Fair threshold ERM on i.i.d. samples ``rows`` (shape ``(B, n)``): model ``k0 * K + k1``, train loss."""
    k = len(thresholds)
    dec = score[rows][..., None] > thresholds
    g0 = (group[rows] == 0)[..., None]
    wrong = dec != label[rows][..., None].astype(bool)
    pos = [(dec & g0).sum(axis=1), (dec & ~g0).sum(axis=1)]
    err = [(wrong & g0).sum(axis=1), (wrong & ~g0).sum(axis=1)]
    n0 = g0[..., 0].sum(axis=1)
    n1 = rows.shape[1] - n0
    loss = np.abs(
        pos[0][:, :, None] / (n0[:, None, None] + offset) - pos[1][:, None, :] / (n1[:, None, None] + offset)
    ).reshape(len(rows), k * k)
    total_err = ((err[0][:, :, None] + err[1][:, None, :]) / rows.shape[1]).reshape(len(rows), k * k)
    choice = np.argmin(total_err + penalty * loss, axis=1)
    return choice, loss[np.arange(len(choice)), choice]


@dataclass(frozen=True)
class IIDFairnessSimulation(_BoundRatios):
    """Measured offset-DP generalisation gap (i.i.d. samples) beside the random-group bounds.

    Attributes
    ----------
    n_samples : int
    group_share : float
        ``p_0``, the population share of group 0 (female).
    offset, penalty : float
    n_hypotheses, n_datasets : int
    train_loss, population_loss, gap, gap_se : float
        Mean training loss, mean exact population risk, their mean difference and its SE.
    mutual_information, cmi : float
        Estimates of ``I(W; S) = H(W)`` and ``I(W; U | Z~)`` (nats; Miller-Madow).
    mi_bound, cmi_bound, uniform_bound : float
        :func:`~trustlab.fairness.bounds.random_group_fairness_bound` with ``I(W; S)``,
        ``I(W; U | Z~)`` and ``log(2|W|)``.

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


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 2, None, closed="left")],
        "penalty": [Interval(numbers.Real, 0, None, closed="left")],
        "offset": [Interval(numbers.Real, 1, None, closed="left")],
        "n_thresholds": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_datasets": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_supersamples": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_masks": [Interval(numbers.Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def simulate_iid_fairness_generalization(
    *,
    n_samples: int = 100,
    penalty: float = 1.0,
    offset: float = 2.0,
    n_thresholds: int = 16,
    n_datasets: int = 2000,
    n_supersamples: int = 20,
    n_masks: int = 200,
    random_state: Any = 0,
) -> IIDFairnessSimulation:
    """Fair threshold ERM on i.i.d. ``benefits`` samples: the offset-DP gap and its bounds.

    Parameters
    ----------
    n_samples : int
        ``n`` i.i.d. training rows (the group counts are random), >= 2.
    penalty : float
        ``lambda`` in ``error + lambda * offset-DP loss``.
    offset : float, default 2
        Denominator offset of the DP loss (2: the review's reading of the paper), >= 1.
    n_thresholds : int
        ``K`` thresholds per group (``|W| = K^2``).
    n_datasets : int
        Independent training samples for the gap and the MI estimate.
    n_supersamples, n_masks : int
        Supersamples (``n`` pairs of i.i.d. rows) and masks per supersample for the CMI.
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
    penalty = check_positive(penalty, "penalty", allow_zero=True)
    offset = check_positive(offset, "offset")
    n_datasets = check_positive_int(n_datasets, "n_datasets", minimum=2)
    n_supersamples = check_positive_int(n_supersamples, "n_supersamples")
    n_masks = check_positive_int(n_masks, "n_masks", minimum=2)
    pop = benefits_threshold_population(
        "demographic_parity", check_positive_int(n_thresholds, "n_thresholds", minimum=2)
    )
    score = np.concatenate(pop.scores)
    label = np.concatenate(pop.labels)
    group = np.repeat([0, 1], [len(s) for s in pop.scores])
    p0 = len(pop.scores[0]) / len(score)
    k = len(pop.thresholds)
    rng = make_generator(random_state)

    choices, trains = [], []
    for start in range(0, n_datasets, 500):  # batches keep the (B, n, K) decision array small
        rows = rng.integers(0, len(score), size=(min(500, n_datasets - start), n))
        c, t = _fit_iid(score, group, label, pop.thresholds, rows, penalty, offset)
        choices.append(c)
        trains.append(t)
    choice, train = np.concatenate(choices), np.concatenate(trains)
    rates = pop.positive_rates()
    risk = {
        int(w): iid_population_fairness_risk([rates[0, w // k], rates[1, w % k]], n, p0, offset=offset)
        for w in np.unique(choice)
    }
    diff = np.array([risk[int(w)] for w in choice]) - train

    outputs, ids = [], []
    for j in range(n_supersamples):
        pairs = rng.integers(0, len(score), size=(n, 2))
        masks = rng.integers(0, 2, size=(n_masks, n))
        outputs.append(
            _fit_iid(score, group, label, pop.thresholds, pairs[np.arange(n), masks], penalty, offset)[0]
        )
        ids.append(np.full(n_masks, j))
    mi = output_entropy(choice)
    cmi = supersample_cmi(np.concatenate(outputs), np.concatenate(ids))

    def bound(info: float, kind: str = "mi") -> float:
        return random_group_fairness_bound(
            info, n_samples=n, group_share=p0, information_kind=kind, offset=offset
        )

    return IIDFairnessSimulation(
        n_samples=n,
        group_share=p0,
        offset=offset,
        penalty=penalty,
        n_hypotheses=k * k,
        n_datasets=n_datasets,
        train_loss=float(train.mean()),
        population_loss=float((diff + train).mean()),
        gap=float(diff.mean()),
        gap_se=float(diff.std(ddof=1) / np.sqrt(n_datasets)),
        mutual_information=mi,
        cmi=cmi,
        mi_bound=bound(mi),
        cmi_bound=bound(cmi, "cmi"),
        uniform_bound=bound(math.log(2 * k * k)),
    )
