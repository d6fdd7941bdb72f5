"""Amplification by random partitioning (003-19): accountant speed and agreement beside dp-accounting.

Parts:

1. T = 10,000 steps, z = 1.1, q = 0.01, delta = 1e-5: time and epsilon of trustlab's
   Poisson, balanced-iteration-subsampling (k = 100 = qT) and model-splitting (d = 8)
   accountants beside dp-accounting's ``RdpAccountant`` and ``PLDAccountant`` (the peer,
   Poisson subsampling). Agreement: |trustlab Poisson - dp-accounting RDP|.
2. The regime where balanced iteration subsampling beats Poisson (z = 1, one
   participation per record, T = 5 ... 10,000), both on integer orders 2..256.
3. Poisson agreement over a grid of (z, q, T) against dp-accounting's RDP figure.
"""

from __future__ import annotations

import statistics
import time
from typing import Any


def _timed(fn: Any, repeats: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def run(quick: bool = False) -> dict[str, Any]:
    from dp_accounting import dp_event
    from dp_accounting.pld import PLDAccountant
    from dp_accounting.rdp import RdpAccountant

    from trustlab.privacy.amplification import (
        BISAccountant,
        ModelSplitAccountant,
        PoissonAccountant,
        compare_to_poisson,
    )

    repeats = 2 if quick else 5
    z, q, steps, delta = 1.1, 0.01, 10_000, 1e-5
    event = dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps
    )

    def peer_rdp() -> float:
        acc = RdpAccountant()
        acc.compose(event)
        return float(acc.get_epsilon(delta))

    def peer_pld() -> float:
        acc = PLDAccountant(value_discretization_interval=1e-3)
        acc.compose(event)
        return float(acc.get_epsilon(delta))

    t_rdp, e_rdp = _timed(peer_rdp, repeats)
    t_pld, e_pld = _timed(peer_pld, 1 if quick else 2)
    rows: list[dict[str, Any]] = []
    rows.append(
        {
            "part": "1",
            "accountant": "dp-accounting RDP (peer)",
            "epsilon": e_rdp,
            "time_s": t_rdp,
            "ratio": 1.0,
        }
    )
    rows.append(
        {
            "part": "1",
            "accountant": "dp-accounting PLD (peer)",
            "epsilon": e_pld,
            "time_s": t_pld,
            "ratio": t_pld / t_rdp,
        }
    )
    for label, fn in (
        ("trustlab Poisson", lambda: PoissonAccountant(z, steps, q).get_epsilon(delta)),
        ("trustlab BIS k=100", lambda: BISAccountant(steps, 100, z).get_epsilon(delta)),
        ("trustlab model split d=8", lambda: ModelSplitAccountant(8, z, steps, q).get_epsilon(delta)),
    ):
        t, e = _timed(fn, repeats)
        rows.append({"part": "1", "accountant": label, "epsilon": e, "time_s": t, "ratio": t / t_rdp})
    agreement = abs(rows[2]["epsilon"] - e_rdp)

    horizons = (5, 10, 20, 100, 1000) if quick else (5, 10, 20, 50, 100, 1000, 10_000)
    for t_ in horizons:
        c = compare_to_poisson(1.0, t_, 1, delta)
        rows.append(
            {
                "part": "2",
                "accountant": f"BIS vs Poisson, T={t_}, k=1, z=1",
                "epsilon": c.epsilon_balanced,
                "time_s": c.epsilon_poisson,
                "ratio": c.ratio,
            }
        )

    worst = 0.0
    grid = [(1.1, 0.01, 1000), (0.8, 0.001, 10_000), (2.0, 0.1, 100), (1.0, 1.0, 10), (1.5, 0.05, 3000)]
    for zz, qq, tt in grid:
        acc = RdpAccountant()
        acc.compose(
            dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(qq, dp_event.GaussianDpEvent(zz)), tt)
        )
        diff = abs(PoissonAccountant(zz, tt, qq).get_epsilon(delta) - acc.get_epsilon(delta))
        worst = max(worst, diff)
        rows.append(
            {
                "part": "3",
                "accountant": f"Poisson z={zz} q={qq} T={tt}",
                "epsilon": diff,
                "time_s": 0.0,
                "ratio": 0.0,
            }
        )

    return {
        "title": "Amplification by random partitioning: accountants beside dp-accounting",
        "rows": rows,
        "agreement_poisson_vs_rdp": agreement,
        "worst_poisson_difference": worst,
        "notes": [
            "part 1: epsilon at delta=1e-5 and median seconds; ratio = time / dp-accounting RDP's time.",
            f"trustlab Poisson vs dp-accounting RDP: |difference| = {agreement:.2e} (target < 1e-3).",
            "part 2: epsilon = BIS epsilon, time_s = Poisson epsilon (q = 1/T), ratio = BIS/Poisson.",
            f"part 3: epsilon column = |trustlab - dp-accounting RDP|; worst {worst:.2e}.",
            "PLD is tighter than any RDP figure (it is not an RDP conversion); it is shown for reference.",
        ],
    }
