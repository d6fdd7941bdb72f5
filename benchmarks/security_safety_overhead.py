"""Decoding overhead of safety-aware decoding (row 000-03), paired and interleaved, with its parts.

The paper's claim: the annealed re-classification keeps the overhead "under 0.2x" of decoding.
Timed on an untrained 4-block Llama (width 256, vocabulary 2,048, 12-token prompts, batch 8),
one thread, as in ``security_safety_decoding``: ``safe_generate`` with the head (annealing,
defaults ``r1 = r2 = r3 = 10``, ``threshold=0.999`` so that every row stays benign and no
refusal shortens the work) against the same KV-cached greedy loop without the head
(``head=None``), at 64 and 128 new tokens, with the ``[CLS]`` hidden and visible.

**Paired, interleaved:** each repeat runs plain and safe decoding back to back, the order
alternating, and keeps their ratio; reported are the median ratio - 1, its interquartile range
and a distribution-free 95% interval of the median (order statistics), in CPU time of this
process (robust to the other processes of a loaded machine) and in wall time. The load average
is stated. ``passes = separate`` re-times the loop as it was before session 15 (each check a
``[CLS]`` pass of its own, the visible ``[CLS]`` in passes of its own) in the same run.

**Parts** (CPU time; each call paired with a decoding step of the batch at a 76-token context
run just before it, after an untimed one; the median of the ratios): what a check costs as its
own pass, as a row riding in a decoding pass, the key mask, the bookkeeping, the cache crop, the
head's logit, the ``LogitsProcessor``'s check.
"""

from __future__ import annotations

import copy
import os
import statistics
import time

import numpy as np


def _summary(ratios: list[float]) -> dict:
    from scipy.stats import binom

    r = np.sort(np.asarray(ratios))
    n = len(r)
    lo = max(int(binom.ppf(0.025, n, 0.5)) - 1, 0)  # order-statistic 95% interval of the median
    hi = min(n - 1 - lo, n - 1)
    q1, q3 = np.percentile(r, [25, 75])
    return {
        "median": round(float(np.median(r)), 3),
        "iqr": f"{q1:.3f} .. {q3:.3f}",
        "ci95_median": f"{r[lo]:.3f} .. {r[hi]:.3f}",
        "_hi": float(r[hi]),
    }


def paired(plain, safe, repeats: int) -> tuple[list[float], list[float]]:
    """Ratios safe / plain - 1 of CPU time and wall time, one pair per repeat, order alternating."""
    plain()
    safe()
    cpu, wall = [], []
    for r in range(repeats):
        t = {}
        for name, fn in (("p", plain), ("s", safe)) if r % 2 == 0 else (("s", safe), ("p", plain)):
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            t[name] = (time.process_time() - c0, time.perf_counter() - w0)
        cpu.append(t["s"][0] / t["p"][0] - 1)
        wall.append(t["s"][1] / t["p"][1] - 1)
    return cpu, wall


def _setup():
    from trustlab.lm import ModelConfig, build_model
    from trustlab.security.safety_decoding import SafetyHead

    vocab_size = 2048
    model = build_model(
        ModelConfig("llama", vocab_size=vocab_size, d_model=256, n_layers=4, n_heads=4, max_len=256), seed=0
    ).eval()
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab_size, (64, 12))
    head = SafetyHead(model, steps=3).fit(x, np.arange(64) % 2)
    vis = copy.copy(head)  # the same head with a persistent [CLS] in the cache: cls_visible's cost
    vis.cls_visible_, vis.cls_skip_ids_ = True, ()
    return model, head, vis, rng.integers(0, vocab_size, (8, 12))


def parts(model, head, prompts, repeats: int) -> list[dict]:
    """The cost of each piece of a check, in decoding steps (interleaved calls, medians)."""
    import torch

    from trustlab.security._safety_loop import _embed, _pass
    from trustlab.security._safety_rules import _Monitor, _rules
    from trustlab.security._safety_visible import _cache_kw, _out_cache

    n, ctx = prompts.shape[0], 76
    rng = np.random.default_rng(1)
    ids = torch.as_tensor(np.concatenate([prompts, rng.integers(3, 2048, (n, ctx - 12))], 1))
    mon = _Monitor(n, _rules(12, [1, 2], threshold=0.999))
    kw = _cache_kw(model)
    with torch.no_grad():
        cache = _out_cache(model(input_ids=ids[:, :-1], use_cache=True))
        nxt, pos = ids[:, -1:], torch.full((n, 1), ctx - 1)
        km = torch.as_tensor(mon.key_mask(ids.numpy()))
        h = torch.zeros(n, model.config.hidden_size)

        def step():
            model(input_ids=nxt, use_cache=True, **{kw: cache})
            cache.crop(-1)

        def fused():
            _pass(model, head, cache, _embed(model, head, nxt, cls_last=True), torch.cat([pos, pos + 1], 1),
                  {1: km}, kw)  # fmt: skip
            cache.crop(-1)

        def own_pass():
            head.cls_logits(cache, km[:, :-1], ctx - 1)

        calls = {
            "decoding step (1 token on the KV cache)": step,
            "check as its own [CLS] pass (before)": own_pass,
            "check riding in the decoding pass (now; the 2-row pass, step included)": fused,
            "key mask of the rules (NumPy) + tensor": lambda: torch.as_tensor(mon.key_mask(ids.numpy())),
            "bookkeeping per step (due, forced, ended)": lambda: (
                mon.ended(ids[:, -1].numpy()), mon.due(5), mon.forced()
            ),
            "head's logit (h @ coef)": lambda: h @ head.coef_ + head.intercept_,
            "cache crop of the [CLS] (views)": lambda: (cache.crop(-1), cache.layers[0].keys.shape),
            "LogitsProcessor check (re-encodes the sequence)": lambda: head.predict_proba(
                ids.numpy(), key_mask=km.numpy()
            ),
        }  # fmt: skip
        unit_key = "decoding step (1 token on the KV cache)"
        times: dict[str, list[float]] = {k: [] for k in calls}
        ratios: dict[str, list[float]] = {k: [] for k in calls}
        for r in range(repeats + 1):  # the first round warms up
            for k, f in calls.items():  # each part right after a decoding step: paired
                step()  # untimed: the same warm caches for both
                c = time.process_time()
                step()
                t_step = time.process_time() - c
                if k.startswith("cache crop"):
                    model(input_ids=nxt, use_cache=True, **{kw: cache})  # a token to crop
                c = time.process_time()
                f()
                t = time.process_time() - c
                if r:
                    times[k].append(t)
                    ratios[k].append(t / t_step)
    rows = [
        {
            "part": k,
            "cpu_ms": round(1e3 * statistics.median(times[k]), 4),
            "decoding_steps": round(statistics.median(ratios[k]), 3),
        }
        for k in calls
    ]
    key = "check riding in the decoding pass (now; the 2-row pass, step included)"
    rows.append(
        {
            "part": "= a riding check's cost (2-row pass / step - 1)",
            "cpu_ms": round(1e3 * (statistics.median(times[key]) - statistics.median(times[unit_key])), 4),
            "decoding_steps": round(statistics.median(ratios[key]) - 1, 3),
        }
    )
    return rows


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.security import _safety_loop
    from trustlab.security.safety_decoding import safe_generate

    torch.set_num_threads(1)
    model, head, vis, prompts = _setup()
    load0 = os.getloadavg()
    repeats = 7 if quick else 21
    rows: list[dict] = []
    fusable = _safety_loop._fusable
    try:
        for n_new in (64, 128):
            kw = {"refusal_ids": [1, 2], "max_new_tokens": n_new, "threshold": 0.999}
            for label, h in (("hidden", head), ("visible", vis)):
                for passes in ("riding", "separate"):
                    _safety_loop._fusable = fusable if passes == "riding" else (lambda m, n: False)
                    res = safe_generate(model, h, prompts, **kw)
                    cpu, wall = paired(
                        lambda kw=kw: safe_generate(model, None, prompts, **kw),
                        lambda kw=kw, h=h: safe_generate(model, h, prompts, **kw),
                        repeats,
                    )
                    c, w = _summary(cpu), _summary(wall)
                    rows.append(
                        {
                            "case": f"{n_new} tok, {label}, {passes}",
                            "checks/tok": round(res.n_checks / n_new, 3),
                            "cpu": c["median"],
                            "cpu IQR": c["iqr"],
                            "cpu 95% CI": c["ci95_median"],
                            "wall": w["median"],
                            "wall IQR": w["iqr"],
                            "wall 95% CI": w["ci95_median"],
                            "< 0.2": c["_hi"] < 0.2 and w["_hi"] < 0.2,
                        }
                    )
    finally:
        _safety_loop._fusable = fusable
    part_rows = parts(model, head, prompts, 30 if quick else 100)
    load1 = os.getloadavg()
    return {
        "title": "Safety-aware decoding: overhead vs plain KV-cached greedy decoding (paired, 1 thread)",
        "rows": rows,
        "tables": {"Parts of a check (76-token context, batch 8)": part_rows},
        "load_average": {"before": [round(x, 2) for x in load0], "after": [round(x, 2) for x in load1]},
        "cores": os.cpu_count(),
        "repeats": repeats,
        "notes": [
            f"{repeats} pairs per row, order alternating; overhead = median(safe / plain) - 1 in CPU "
            "time of this process (one thread) and in wall time; IQR and 95% CI (order statistics) "
            "of the median over the pairs' ratios.",
            "< 0.2: the upper ends of both 95% intervals lie under 0.2.",
            "hidden / visible: the [CLS] hidden from the response, or visible (cls_visible_); riding: "
            "each check a [CLS] row in a decoding pass (now); separate: a pass of its own (before "
            "session 15), timed in the same run.",
            "Parts: CPU time per call (median) and the median ratio to a decoding step run just before it.",
            f"load average (1, 5, 15 min) before {tuple(round(x, 2) for x in load0)}, after "
            f"{tuple(round(x, 2) for x in load1)}, on {os.cpu_count()} cores.",
        ],
    }
