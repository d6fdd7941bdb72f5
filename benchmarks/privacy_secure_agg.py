"""Janus vs pairwise masking: bytes, rounds and client time per client at 10 / 100 / 1,000 clients.

trustlab's Janus (``run_janus``: two server processes and client worker processes over
loopback TCP, bytes counted on the sockets) against the pairwise-masking baseline
(``simulate_pairwise``: SecAgg's complete graph, and a sparse graph of degree
``2 ceil(log2 n)`` as Flamingo and Bell et al. use; frames built and counted the same way).
Every row checks that all clients obtained the plaintext sum (to fixed-point precision).
The paper's full text was not reachable here, so its own ratios cannot be quoted; its
claim is the shape: per-client cost constant in ``n`` for Janus, ``O(log n)`` (sparse)
or ``O(n)`` (complete) for pairwise masking.
"""

from __future__ import annotations

import math
import time

import numpy as np

from trustlab.privacy.secure_agg import JanusParams, run_janus, simulate_pairwise

DIM = 100


def _row(method: str, n: int, res, x: np.ndarray, wall: float) -> dict:
    err = float(np.max(np.abs(res.aggregate - x.sum(axis=0))))
    return {
        "method": method,
        "clients": n,
        "bytes up / client": res.bytes_up_per_client,
        "bytes down / client": res.bytes_down_per_client,
        "rounds / client": res.rounds_per_client,
        "client ms (median)": 1e3 * res.client_seconds,
        "wall s": wall,
        "max |error|": err,
    }


def run(quick: bool = False) -> dict:
    sizes = (10, 100) if quick else (10, 100, 1000)
    params = JanusParams(dim=DIM, frac_bits=16, bound=1.0, max_clients=10_000)
    rows = []
    for n in sizes:
        x = np.random.default_rng(n).uniform(-1, 1, size=(n, DIM))
        t0 = time.perf_counter()
        res = run_janus(x, params, n_workers=2, timeout=300)
        rows.append(_row("janus (processes)", n, res, x, time.perf_counter() - t0))
        if n <= 100:
            t0 = time.perf_counter()
            res = simulate_pairwise(x, params)
            rows.append(_row("pairwise, complete graph", n, res, x, time.perf_counter() - t0))
        k = min(n - 1 - (n - 1) % 2, 2 * math.ceil(math.log2(n)))
        t0 = time.perf_counter()
        res = simulate_pairwise(x, params, degree=k)
        rows.append(_row(f"pairwise, degree {k}", n, res, x, time.perf_counter() - t0))
    janus = {r["clients"]: r for r in rows if r["method"].startswith("janus")}
    notes = [
        f"vector length {DIM}, 16 fractional bits; Janus bytes include sealing (X25519 + ChaCha20-Poly1305).",
        "janus per-client bytes across n: "
        + ", ".join(f"{n}: {r['bytes up / client']}+{r['bytes down / client']}" for n, r in janus.items()),
    ]
    for r in rows:
        if not r["method"].startswith("janus"):
            j = janus[r["clients"]]
            ratio = (r["bytes up / client"] + r["bytes down / client"]) / (
                j["bytes up / client"] + j["bytes down / client"]
            )
            notes.append(f"{r['method']} at n={r['clients']}: {ratio:.2f}x Janus's bytes per client")
    return {
        "title": "Janus secure aggregation vs pairwise masking (per client)",
        "rows": rows,
        "notes": notes,
    }
