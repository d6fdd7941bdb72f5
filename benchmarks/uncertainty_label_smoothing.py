"""Memory-light label-smoothed cross-entropy beside torch's ``cross_entropy(label_smoothing=0.1)``.

Huang, Lu & Zeng (ICML 2025) compute the smoothed loss of an LLM's last layer without the
``tokens x vocabulary`` logits. Both sides get the same final hidden states ``h`` (n x d), output
layer ``W`` (V x d) and targets; torch's side is ``F.cross_entropy(h @ W.T, y, label_smoothing=0.1)``
(it materialises the logits, their log-softmax and the gradient of the logits), trustlab's is
``chunked_smoothed_cross_entropy(h, W, y)`` (tiles of 1024 x 4096). Each row runs the forward and
backward pass in a fresh subprocess and reports the growth of the process's peak resident memory
over the inputs (CPU; ``ru_maxrss``), the median wall time, and the agreement of the loss and of
the gradients (max absolute difference).
"""

from __future__ import annotations

import json
import subprocess
import sys

_CHILD = r"""
import json, resource, sys, time
import torch
from trustlab.uncertainty.label_smoothing import chunked_smoothed_cross_entropy
torch.set_num_threads(1)
n, d, v, which, repeats = (int(a) if a.isdigit() else a for a in sys.argv[1:6])
temp = float(sys.argv[7])
g = torch.Generator().manual_seed(0)
h = torch.randn(n, d, generator=g, requires_grad=True)
w = (torch.randn(v, d, generator=g) / d ** 0.5).requires_grad_()
y = torch.randint(0, v, (n,), generator=g)
def run(h, w, y):
    if which == "torch":
        loss = torch.nn.functional.cross_entropy(h @ w.T / temp, y, label_smoothing=0.1) * temp
    else:
        loss = chunked_smoothed_cross_entropy(h, w, y, smoothing=0.1, temperature=temp)
    gh, gw = torch.autograd.grad(loss, [h, w])
    return loss.detach(), gh, gw
run(h[:8].detach().requires_grad_(), w[:64].detach().requires_grad_(), y[:8] % 64)  # warm-up
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
times = []
for _ in range(repeats):
    t = time.perf_counter(); loss, gh, gw = run(h, w, y); times.append(time.perf_counter() - t)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
torch.save((loss, gh, gw), sys.argv[6])
times.sort()
print(json.dumps({"peak_mib": (peak - base) / 1024, "seconds": times[len(times) // 2]}))
"""


def _child(n: int, d: int, v: int, which: str, repeats: int, out: str, temperature: float = 1.0) -> dict:
    args = [sys.executable, "-c", _CHILD, str(n), str(d), str(v), which, str(repeats), out, str(temperature)]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> dict:
    import tempfile
    from pathlib import Path

    import torch

    # The last row is the paper's remedy for large-vocabulary models: training temperature 0.25
    # (torch's side: the authors' loss, cross_entropy(logits / T, label_smoothing=0.1) * T).
    sizes = [(1024, 128, 32000, 1.0)]
    if not quick:
        sizes += [(4096, 128, 32000, 1.0), (1024, 128, 32000, 0.25)]
    repeats = 1 if quick else 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, d, v, temp in sizes:
            res, outs = {}, {}
            for which in ("torch", "trustlab"):
                outs[which] = str(Path(tmp) / f"{which}.pt")
                res[which] = _child(n, d, v, which, repeats, outs[which], temp)
            a, b = torch.load(outs["torch"]), torch.load(outs["trustlab"])
            rows.append(
                {
                    "case": f"n={n} tokens, d={d}, V={v}" + (f", temperature {temp}" if temp != 1 else ""),
                    "logits_mib": round(n * v * 4 / 2**20, 1),
                    "peak_mib_torch": round(res["torch"]["peak_mib"], 1),
                    "peak_mib_trustlab": round(res["trustlab"]["peak_mib"], 1),
                    "memory_ratio_torch_over_trustlab": round(
                        res["torch"]["peak_mib"] / max(res["trustlab"]["peak_mib"], 1.0), 2
                    ),
                    "s_torch": round(res["torch"]["seconds"], 3),
                    "s_trustlab": round(res["trustlab"]["seconds"], 3),
                    "time_ratio_trustlab_over_torch": round(
                        res["trustlab"]["seconds"] / res["torch"]["seconds"], 2
                    ),
                    "loss_abs_diff": float(abs(a[0] - b[0])),
                    "grad_max_abs_diff": float(
                        max((x - y).abs().max() for x, y in zip(a[1:], b[1:], strict=True))
                    ),
                }
            )
    return {
        "title": "Label-smoothed CE (0.1): memory-light chunked vs torch cross_entropy, forward + backward",
        "rows": rows,
        "notes": [
            "peak_mib: growth of the subprocess's peak RSS during forward+backward (CPU, 1 thread); "
            "floor of 1 MiB in the ratio.",
            "the chunked loss recomputes its tiles in the backward pass (as the paper's kernel does): "
            "less memory for some more compute.",
        ],
    }
