"""Tight composition of releases with Google's dp-accounting: Renyi DP, zCDP and PLD (private module).

An :class:`Item` is one charge of a non-basic :class:`~trustlab.privacy.accounting.Accountant`;
the functions turn a list of them into a total ``epsilon`` at a given ``delta``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["Item", "pld_compose", "rdp_curve", "rdp_epsilon", "rr_noise", "zcdp_epsilon", "zcdp_rho"]


@dataclass(frozen=True)
class Item:
    """One charge of a non-basic accountant.

    ``kind`` is ``"pure"`` (epsilon-DP), ``"approx"`` ((epsilon, delta)-DP of unknown
    shape), ``"reserve"`` (a child's share, composed basically), ``"gaussian"``
    (``noise_multiplier = sigma / l2_sensitivity``, ``count`` runs), ``"laplace"``
    (``noise_multiplier = scale / l1_sensitivity``), ``"zcdp"`` (``rho``) or ``"event"``
    (a dp-accounting ``DpEvent``).
    """

    kind: str
    epsilon: float = 0.0
    delta: float = 0.0
    noise_multiplier: float = 0.0
    rho: float = 0.0
    count: int = 1
    event: Any = None


def rr_noise(epsilon: float) -> float:
    """Noise parameter of binary randomized response that is exactly ``epsilon``-DP."""
    return 2.0 * math.exp(-epsilon) / (1.0 + math.exp(-epsilon))


@lru_cache(maxsize=256)
def rdp_curve(kind: str, value: float, count: int) -> tuple[float, ...]:
    """Renyi-DP curve (dp-accounting's default orders) of one kind of release, cached."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.rdp import RdpAccountant

    if kind == "pure":
        # A pure epsilon-DP release is a post-processing of binary randomized response
        # with the same epsilon (Kairouz, Oh, Viswanath 2015), so RR's Renyi curve
        # bounds its Renyi divergence at every order; dp-accounting states RR for
        # replace-one neighbours (for add/remove it has no RR event).
        acc = RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
        acc.compose(dp_event.RandomizedResponseDpEvent(rr_noise(value), 2), count)
    else:
        acc = RdpAccountant()
        event = {
            "gaussian": dp_event.GaussianDpEvent,
            "laplace": dp_event.LaplaceDpEvent,
            "zcdp": dp_event.ZCDpEvent,
        }[kind](value)
        acc.compose(event, count)
    return tuple(float(v) for v in acc.rdp)


def rdp_epsilon(items: Sequence[Item], delta: float) -> float:
    """Total epsilon at ``delta`` of the items under Renyi-DP composition (dp-accounting)."""
    from dp_accounting.rdp import RdpAccountant
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    acc = RdpAccountant()
    total = np.zeros_like(acc.orders, dtype=float)
    for it in items:
        if it.kind == "event":
            acc.compose(it.event)
            continue
        value = {"pure": it.epsilon, "zcdp": it.rho}.get(it.kind, it.noise_multiplier)
        total += np.asarray(rdp_curve(it.kind, value, it.count))
    eps, _ = compute_epsilon(acc.orders, acc.rdp + total, delta)
    return float(eps)


def zcdp_rho(items: Sequence[Item]) -> float:
    rho = 0.0
    for it in items:
        if it.kind == "gaussian":
            rho += it.count / (2.0 * it.noise_multiplier**2)
        elif it.kind in ("pure", "laplace"):
            # epsilon-DP implies epsilon^2/2-zCDP (Bun, Steinke 2016, Prop. 1.4).
            eps = it.epsilon if it.kind == "pure" else 1.0 / it.noise_multiplier
            rho += it.count * eps**2 / 2.0
        else:
            rho += it.rho
    return rho


def zcdp_epsilon(items: Sequence[Item], delta: float) -> float:
    from dp_accounting import dp_event
    from dp_accounting.rdp import RdpAccountant

    acc = RdpAccountant()
    acc.compose(dp_event.ZCDpEvent(zcdp_rho(items)))
    return float(acc.get_epsilon(delta))


def pld_compose(items: Sequence[Item], total: Any = None) -> Any:
    """Compose the items' privacy-loss distributions onto ``total`` (dp-accounting)."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    for it in items:
        if it.kind == "gaussian":
            # k runs of a Gaussian with multiplier s are one Gaussian with s / sqrt(k).
            pld = pld_lib.from_gaussian_mechanism(it.noise_multiplier / math.sqrt(it.count))
        elif it.kind == "laplace":
            pld = pld_lib.from_laplace_mechanism(it.noise_multiplier).self_compose(it.count)
        else:  # pure or approx: the exact worst case of (epsilon, delta)-DP
            pld = pld_lib.from_privacy_parameters(common.DifferentialPrivacyParameters(it.epsilon, it.delta))
        total = pld if total is None else total.compose(pld)
    return total
