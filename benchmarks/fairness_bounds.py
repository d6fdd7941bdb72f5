"""Fairness generalisation bounds (002-11): trustlab beside fairlearn and beside Monte Carlo.

1. The fairness loss: trustlab's ``fairness_loss`` beside fairlearn's
   ``demographic_parity_difference`` / ``equalized_odds_difference`` on the same 200 random
   decision vectors (agreement and speed ratio).
2. The population fairness risk of the simulation: trustlab's exact binomial computation
   beside a 20,000-draw Monte-Carlo estimate (agreement in Monte-Carlo standard errors, speed).
3. The bounds beside the measured gap and the classical uniform-convergence bound, with fixed
   cell counts and in the paper's i.i.d. setting (random group counts, the ``1/(n_t + 2)`` DP loss).
   Beside them the evaluated (prediction-level) CMI bound of the fixed-count runs (Theorem 5)
   and equalised odds in the i.i.d. setting (Theorem 4).
4. A DP-regularised MLP (the kind of learner the paper's experiments use) on i.i.d. samples of
   the ``benefits`` population: its measured fairness generalisation gap beside the one
   information bound trustlab can evaluate for it (the CMI bound at ``I(W; U | Z~) <= n log 2``).
5. The same checks with the table's other sensitive attribute, ``nwhite`` (race; 15 % non-white),
   the attribute COMPAS is usually audited on (COMPAS and Adult are not shipped).

Run: ``python -m benchmarks fairness_bounds [--quick]``.
"""

from __future__ import annotations

import time

import numpy as np
from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference

from trustlab.fairness.bounds import fairness_loss, random_group_fairness_bound
from trustlab.theory.fairness_generalization import population_fairness_risk, simulate_fairness_generalization
from trustlab.theory.fairness_generalization_iid import simulate_iid_fairness_generalization


def _losses(rows: list[dict], n_cases: int) -> None:
    rng = np.random.default_rng(0)
    cases = [
        (rng.integers(0, 2, 2000), rng.choice(["a", "b", "c"], 2000), rng.integers(0, 2, 2000))
        for _ in range(n_cases)
    ]
    for name, theirs, kw in [
        ("DP loss", demographic_parity_difference, {}),
        ("EO loss", equalized_odds_difference, {"criterion": "equalized_odds"}),
    ]:
        t = time.perf_counter()
        a = [fairness_loss(p, sensitive_features=s, y_true=y, **kw) for p, s, y in cases]
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        b = [theirs(y, p, sensitive_features=s) for p, s, y in cases]
        t_theirs = time.perf_counter() - t
        rows.append(
            {
                "comparison": f"{name}: trustlab vs fairlearn ({n_cases} vectors)",
                "agreement": f"max |diff| {np.max(np.abs(np.subtract(a, b))):.1e}",
                "trustlab_ms": 1e3 * t_ours / n_cases,
                "peer_ms": 1e3 * t_theirs / n_cases,
                "speed_ratio": t_theirs / t_ours,
            }
        )


def _population(rows: list[dict]) -> None:
    rng = np.random.default_rng(1)
    for rates, counts, criterion in [
        ([0.31, 0.47], [50, 50], "demographic_parity"),
        ([0.2, 0.7, 0.35, 0.6], [25, 25, 25, 25], "equalized_odds"),
    ]:
        t = time.perf_counter()
        exact = population_fairness_risk(rates, counts, criterion)
        t_exact = time.perf_counter() - t
        t = time.perf_counter()
        d = rng.binomial(counts, rates, size=(20_000, len(counts))) / np.asarray(counts)
        mc = (
            np.abs(d[:, 0] - d[:, 1])
            if criterion == "demographic_parity"
            else np.maximum(np.abs(d[:, 0] - d[:, 2]), np.abs(d[:, 1] - d[:, 3]))
        )
        t_mc = time.perf_counter() - t
        z = (exact - mc.mean()) / (mc.std() / np.sqrt(len(mc)))
        rows.append(
            {
                "comparison": f"{criterion} population risk: exact vs 20,000-draw Monte Carlo",
                "agreement": f"{exact:.5f} vs {mc.mean():.5f} (z = {z:+.2f})",
                "trustlab_ms": 1e3 * t_exact,
                "peer_ms": 1e3 * t_mc,
                "speed_ratio": t_mc / t_exact,
            }
        )


def _benefits_population() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Standardised features, 0/1 target and group (1 = male) of the population half of ``benefits``."""
    from trustlab.datasets import load_benefits

    df = load_benefits()
    y = (df["ui"] == "yes").to_numpy().astype(np.float32)
    group = (df["sex"] == "male").to_numpy().astype(np.int64)
    feats = df.drop(columns=["ui", "sex"])
    x = np.column_stack(
        [
            feats[c].cat.codes.to_numpy() if feats[c].dtype == "category" else feats[c].to_numpy()
            for c in feats
        ]
    ).astype(np.float32)
    x = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    rows = np.random.default_rng(0).permutation(len(df))[len(df) // 2 :]  # the same half as the simulation
    return x[rows], y[rows], group[rows]


def _offset_dp(f, g, offset: float = 2.0):
    """The offset DP loss of soft predictions ``f`` (torch or numpy, last axis = samples)."""
    s0 = (f * (g == 0)).sum(-1) / ((g == 0).sum(-1) + offset)
    s1 = (f * (g == 1)).sum(-1) / ((g == 1).sum(-1) + offset)
    return abs(s0 - s1)


def _mlp(notes: list[str], n: int, n_runs: int, penalty: float = 1.0, steps: int = 300) -> None:
    import torch

    torch.set_num_threads(1)
    x, y, g = _benefits_population()
    rng = np.random.default_rng(7)
    train_loss, pop_loss = [], []
    for run_id in range(n_runs):
        rows = rng.integers(0, len(y), n)
        xt, yt, gt = torch.from_numpy(x[rows]), torch.from_numpy(y[rows]), torch.from_numpy(g[rows])
        torch.manual_seed(run_id)
        net = torch.nn.Sequential(torch.nn.Linear(x.shape[1], 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
        opt = torch.optim.Adam(net.parameters(), lr=0.01)
        for _ in range(steps):
            opt.zero_grad()
            p = torch.sigmoid(net(xt)[:, 0])
            loss = torch.nn.functional.binary_cross_entropy(p, yt) + penalty * _offset_dp(p, gt)
            loss.backward()
            opt.step()
        with torch.no_grad():
            f_all = torch.sigmoid(net(torch.from_numpy(x))[:, 0]).numpy()
        train_loss.append(float(_offset_dp(f_all[rows], g[rows])))
        fresh = rng.integers(0, len(y), (2000, n))  # population risk: 2,000 fresh i.i.d. samples
        pop_loss.append(float(_offset_dp(f_all[fresh], g[fresh]).mean()))
    diff = np.subtract(pop_loss, train_loss)
    p0 = float(np.mean(g == 0))
    cmi_cap = random_group_fairness_bound(n * np.log(2), n_samples=n, group_share=p0, information_kind="cmi")
    notes.append(
        f"DP-regularised MLP (32 hidden units, lambda = {penalty}, {steps} Adam steps), n = {n} i.i.d. rows, "
        f"{n_runs} resamples: train loss {np.mean(train_loss):.4f}, population {np.mean(pop_loss):.4f}, "
        f"gap {diff.mean():.4f} +- {diff.std(ddof=1) / np.sqrt(n_runs):.4f}; CMI bound at I <= n log 2: "
        f"{cmi_cap:.2f} (vacuous: the loss is <= 1); the MI of continuous weights is not finite"
    )


def run(quick: bool = False) -> dict:
    rows: list[dict] = []
    _losses(rows, 20 if quick else 200)
    _population(rows)
    notes = []
    fixed = {  # (criterion, n per cell)
        "sex": [("demographic_parity", 50), ("demographic_parity", 200), ("equalized_odds", 50)],
        "nwhite": [("demographic_parity", 50), ("equalized_odds", 50)],
    }
    iid = {  # (criterion, n, fresh samples for the EO population risk)
        "sex": [("demographic_parity", n, 2) for n in (50, 100, 200)] + [("equalized_odds", 800, 4000)],
        "nwhite": [
            ("demographic_parity", 100, 2),
            ("demographic_parity", 400, 2),
            ("equalized_odds", 800, 4000),
        ],
    }
    if quick:
        fixed, iid = {"sex": fixed["sex"][:1]}, {"sex": [("demographic_parity", 100, 2)]}
    for sensitive, cases in fixed.items():
        for criterion, n in cases:
            s = simulate_fairness_generalization(
                criterion=criterion, n_per_cell=n, penalty=1.0, sensitive=sensitive
            )
            notes.append(
                f"{sensitive}, {criterion}, n = {n} per cell: gap {s.gap:.4f} +- {s.gap_se:.4f}; MI bound "
                f"{s.mi_bound:.3f} ({s.tightness:.1f}x the gap), CMI bound {s.cmi_bound:.3f}, evaluated "
                f"CMI bound {s.evaluated_cmi_bound:.3f} ({s.evaluated_to_mi:.2f}x the MI bound; I(F;U|Z) "
                f"{s.prediction_cmi:.2f} vs I(W;U|Z) {s.cmi:.2f}), uniform-convergence bound "
                f"{s.uniform_bound:.3f} (MI / uniform {s.mi_to_uniform:.2f})"
            )
    for sensitive, cases in iid.items():
        for criterion, n, n_fresh in cases:
            t = simulate_iid_fairness_generalization(
                n_samples=n, criterion=criterion, penalty=1.0, n_fresh=n_fresh, sensitive=sensitive
            )
            notes.append(
                f"{sensitive}, i.i.d. setting (offset-2 {criterion} loss), n = {n}: gap {t.gap:.4f} +- "
                f"{t.gap_se:.4f}; MI bound {t.mi_bound:.3f} ({t.tightness:.1f}x the gap), CMI bound "
                f"{t.cmi_bound:.3f} ({t.cmi_to_mi:.2f}x the MI bound), finite-class bound "
                f"{t.uniform_bound:.3f} (MI / uniform {t.mi_to_uniform:.2f})"
            )
    for n in [100] if quick else [100, 400]:
        _mlp(notes, n, 20 if quick else 100)
    return {"title": "Fairness generalisation bounds (002-11)", "rows": rows, "notes": notes}
