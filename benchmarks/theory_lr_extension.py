"""LR schedules (Schaipp et al., ICML 2025): the bound's optimal-rate rules on extended MLP training.

Issue 34's two figures on small MLPs (``mlp_extension_study``: one-hidden-layer tanh students,
online SGD, batch 1, each seed its own power-law teacher): (1) the measured optimal base rate
at ``T``, ``2T``, ``4T`` (parabola vertex over a ``sqrt 2`` rate grid, 16 seeds) and its ratio to
``T`` with a paired seed-bootstrap interval, beside the bound's ``gamma*(kT)/gamma*(T)``;
(2) per horizon, Spearman between the fitted bound and the measured loss over schedules x rates.
Then the paper's Section 5.1 continuation (``mlp_continuation_study``): cut the rate by ``rho``
after the short run's stable phase; measured best ``rho`` beside the bound's. One torch thread;
about 30 s of CPU (quick: about 3 s).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr


def run(quick: bool = False) -> dict:
    from trustlab.theory.lr_continuation import mlp_continuation_study
    from trustlab.theory.lr_extension import mlp_extension_study
    from trustlab.theory.lr_schedules import schedule, schedule_bound

    kw = {"n_seeds": 4, "n_bootstrap": 100} if quick else {}
    steps = 100 if quick else 500
    st = mlp_extension_study(steps, **kw)
    rows = []
    mean = st.loss.mean(axis=-1)
    for h, t in enumerate(st.steps):
        tuned = np.nanmin(np.where(np.isfinite(mean[h]), mean[h], np.nan), axis=1)
        omega = [schedule_bound(schedule(n, t)).optimal_value for n in st.schedules]
        for s, name in enumerate(st.schedules):
            best = int(np.argmin(mean[h, s]))
            row = {
                "T": t,
                "schedule": name,
                "tuned_loss": float(tuned[s]),
                "tuned_loss_se": float(st.loss[h, s, best].std(ddof=1) / np.sqrt(st.loss.shape[-1])),
                "optimal_gamma": float(st.optimal_gamma[h, s]),
                "bound_gamma_fitted": float(st.predicted_gamma[h, s]),
                "at_edge": bool(st.at_edge[h, s]),
            }
            if h:
                row["ratio"] = float(st.measured_ratio[h - 1, s])
                row["ratio_lo"], row["ratio_hi"] = (float(v) for v in st.ratio_interval[h - 1, s])
                row["bound_ratio"] = float(st.predicted_ratio[h - 1, s])
            rows.append(row)
        rows[-1]["spearman_points"] = float(st.rank_correlation[h])
        rows[-1]["spearman_lo"], rows[-1]["spearman_hi"] = (float(v) for v in st.rank_interval[h])
        rows[-1]["spearman_schedules"] = float(spearmanr(omega, tuned)[0])
    cool = st.schedules.index("cooldown")
    cont = mlp_continuation_study(float(st.optimal_gamma[0, cool]), steps, **kw)
    for i, k in enumerate(cont.factors):
        rows.append(
            {
                "T": round(k * steps),
                "schedule": f"continuation x{k:g} (gamma {cont.gamma:.4f})",
                "optimal_rho": float(cont.optimal_rho[i]),
                "rho_lo": float(cont.rho_interval[i, 0]),
                "rho_hi": float(cont.rho_interval[i, 1]),
                "bound_rho": float(cont.predicted_rho[i]),
                "loss_keep_rate": float(cont.keep_loss[i]),
                "loss_bound_rho": float(cont.predicted_loss[i]),
                "gain_lo": float(cont.gain_interval[i, 0]),
                "gain_hi": float(cont.gain_interval[i, 1]),
            }
        )
    return {
        "title": "Optimal base rate on extension and the bound's ordering, small MLPs (000-12, issue 34)",
        "rows": rows,
        "notes": [
            f"fit L*, D^2, G^2 = {', '.join(f'{v:.4g}' for v in st.fit)} (NNLS, relative error)",
            f"rho grid {np.round(cont.rhos, 3).tolist()}; seed-mean loss per rho: "
            + "; ".join(
                f"x{k:g}: {np.round(cont.loss[i].mean(-1), 4).tolist()}" for i, k in enumerate(cont.factors)
            ),
        ],
    }
