"""Featurizers and interchange interventions of MIB's causal-variable track (see mib_causal).

Every featurizer maps a hidden vector ``h`` to features ``f(h)`` and back with the reconstruction
error kept, so an interchange on the feature set ``S`` with gate ``g`` (1 on ``S``) gives
``h' = h_b + D(g * (f(h_c) - f(h_b)))``, ``D`` the decoder: the identity (full vector, neurons),
the PCA basis, the SAE's decoder rows, or for DAS ``f(h) = R h`` with ``R`` a learned ``k x d``
matrix with orthonormal rows and ``D = R^T`` [1]_, [2]_, [3]_.

References
----------
.. [1] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
.. [2] Geiger, Wu, Potts, Icard, Goodman. "Finding Alignments Between Interpretable Causal Variables
   and Distributed Neural Representations". CLeaR 2024 (DAS).
.. [3] De Cao, Schlichtkrull, Aziz, Titov. "How do Decisions Emerge across Layers in Neural Models?
   Interpretation with Differentiable Masking". EMNLP 2020; Huang et al. "RAVEL". ACL 2024 (DBM).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from trustlab.errors import DataError, ModelError
from trustlab.lm._mib_causal_model import CounterfactualPairs
from trustlab.lm.hooks import _block_hooks, _child, _layout, run_with_hooks

__all__ = ["FEATURIZERS", "MIB_TRAINING", "out_projection", "site_name"]

_OUT_PROJ = ("o_proj", "c_proj", "out_proj", "dense")

FEATURIZERS = ("full", "das", "dbm", "dbm-pca", "dbm-sae", "random")
# MIB's causal-variable baselines (the released experiments/config.py): AdamW, constant rate.
MIB_TRAINING: dict[str, Any] = {
    "epochs": 3,
    "lr": 1e-2,
    "batch_size": 32,
    "mask_l1": 1e-4,
    "temperature": (1.0, 0.01),
}


def site_name(layer: int, n_layers: int) -> str:
    """Hook point of site ``layer``: ``blocks.{layer}.resid_pre``, or the last block's resid_post."""
    return f"blocks.{layer}.resid_pre" if layer < n_layers else f"blocks.{n_layers - 1}.resid_post"


def out_projection(lay: Any, layer: int) -> torch.nn.Module:
    """Block ``layer``'s attention output projection, whose input holds every head's output side by side."""
    proj = _child(lay.attn[layer], _OUT_PROJ)
    if proj is None:
        raise ModelError(
            f"model: block {layer}'s attention has no output projection ({', '.join(_OUT_PROJ)}); "
            "attention-head sites are not available for this architecture.",
            argument="model",
        )
    return proj


def _head_slice(lay: Any, head: int) -> slice:
    return slice(head * lay.d_head, (head + 1) * lay.d_head)


def collect(
    model: Any, ids: np.ndarray, positions: Any, sites: list[Any], every_position: bool = False
) -> Any:
    """Vectors at each site: ``{site: (n, d)}`` at ``positions`` (or ``(n * seq, d)``), and the predictions.

    A site is an int (the residual stream entering that block; ``n_layers``: leaving the last) or a pair
    ``(layer, head)``: that head's output before the output projection (``d_head`` wide, MIB's
    attention-head unit).
    """
    lay = _layout(model)
    n_layers = len(lay.layers)
    resid = [s for s in sites if not isinstance(s, tuple)]
    names = {s: site_name(s, n_layers) for s in resid}
    z: dict[int, torch.Tensor] = {}

    def capture(layer: int) -> Any:
        def hook(mod: Any, args: Any) -> None:
            z[layer] = args[0].detach()

        return hook

    layers = sorted({s[0] for s in sites if isinstance(s, tuple)})
    handles = [out_projection(lay, layer).register_forward_pre_hook(capture(layer)) for layer in layers]
    try:
        out = run_with_hooks(model, ids, sorted(set(names.values())))
    finally:
        for h in handles:
            h.remove()
    rows = torch.arange(ids.shape[0])
    result = {}
    for site in sites:
        if isinstance(site, tuple):
            x = z[site[0]][..., _head_slice(lay, site[1])].double().cpu()
        else:
            x = out[names[site]].double().cpu()
        result[site] = (x.reshape(-1, x.shape[-1]) if every_position else x[rows, positions]).numpy()
    return result, out["logits"][rows, positions].argmax(-1).cpu().numpy()


def intervened_logits(
    model: Any, ids: torch.Tensor, pos: torch.Tensor, layer: Any, delta: torch.Tensor
) -> torch.Tensor:
    """Logits at ``pos`` with ``delta`` added at site ``layer`` (int, or ``(layer, head)``) and ``pos``."""
    lay = _layout(model)
    n_layers = len(lay.layers)
    rows = torch.arange(ids.shape[0], device=ids.device)
    if isinstance(layer, tuple):
        cols = _head_slice(lay, layer[1])

        def add(mod: Any, args: Any) -> tuple[Any, ...]:
            x = args[0].clone()
            x[rows, pos, cols] = x[rows, pos, cols] + delta.to(x.dtype)
            return (x, *args[1:])

        handles = [out_projection(lay, layer[0]).register_forward_pre_hook(add)]
    else:
        block, kind = (layer, "resid_pre") if layer < n_layers else (n_layers - 1, "resid_post")

        def edit(x: torch.Tensor) -> torch.Tensor:
            x = x.clone()
            x[rows, pos] = x[rows, pos] + delta.to(x.dtype)
            return x

        handles = _block_hooks(block, set(), lay, {}, {f"blocks.{block}.{kind}": edit})
    try:
        logits = model(input_ids=ids).logits
    finally:
        for h in handles:
            h.remove()
    return logits[rows, pos]


class Interchange(torch.nn.Module):
    """``delta = D(g * df)``: the change an interchange makes to the base vector.

    ``df`` are feature differences ``f(h_c) - f(h_b)`` of a fixed featurizer, or raw differences
    ``h_c - h_b`` for a rotation (DAS, random). ``mask`` (DBM) gives the gate: ``sigmoid(mask / T)``
    while training, ``mask > 0`` (``sigmoid(mask) > 0.5``) when evaluating, as MIB's mask intervention.
    """

    def __init__(
        self, method: str, n_features: int, d: int, k: int, decoder: Any, gen: torch.Generator
    ) -> None:
        super().__init__()
        self.method = method
        self.temperature = 1.0
        self.decoder = None if decoder is None else torch.as_tensor(decoder, dtype=torch.float64)
        self.mask = (
            torch.nn.Parameter(torch.zeros(n_features, dtype=torch.float64))
            if method.startswith("dbm")
            else None
        )
        self.rotate: torch.nn.Module | None = None
        if method in ("das", "random"):
            q, _ = torch.linalg.qr(torch.randn(d, k, generator=gen, dtype=torch.float64))
            lin = torch.nn.Linear(d, k, bias=False, dtype=torch.float64)
            with torch.no_grad():
                lin.weight.copy_(q.T)
            lin.weight.requires_grad_(method == "das")
            # DAS: the rows stay orthonormal under training (torch's orthogonal parametrisation)
            self.rotate = torch.nn.utils.parametrizations.orthogonal(lin) if method == "das" else lin

    def rows(self) -> torch.Tensor:
        """The rotation's ``k x d`` matrix with orthonormal rows (DAS, random)."""
        assert self.rotate is not None
        weight: Any = self.rotate.weight
        return torch.as_tensor(weight)

    def gate(self) -> torch.Tensor | None:
        if self.mask is None:
            return None
        if self.training:
            return torch.sigmoid(self.mask / self.temperature)
        return (self.mask > 0).to(self.mask.dtype)

    def forward(self, df: torch.Tensor) -> torch.Tensor:
        if self.rotate is not None:
            r = self.rows()
            return (df @ r.T) @ r
        g = self.gate()
        z = df if g is None else df * g
        return z if self.decoder is None else z @ self.decoder

    def n_selected(self, d: int) -> int:
        """Features the evaluated intervention moves (``k`` for a rotation, the mask's count for DBM)."""
        if self.rotate is not None:
            return int(self.rows().shape[0])
        if self.mask is None:
            return d
        return int((self.mask > 0).sum())


def train_interchange(
    model: Any,
    module: Interchange,
    pairs: CounterfactualPairs,
    df: np.ndarray,
    layer: Any,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    mask_l1: float,
    temperature: tuple[float, float],
    gen: torch.Generator,
) -> list[float]:
    """MIB's training loop: cross-entropy of the counterfactual label, AdamW, DBM's L1 and annealing."""
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        return []
    device = next(model.parameters()).device
    ids = torch.as_tensor(pairs.base, device=device)
    pos = torch.as_tensor(pairs.positions, device=device)
    labels = torch.as_tensor(pairs.labels, device=device)
    dft = torch.as_tensor(df, dtype=torch.float64)
    n = len(pairs)
    n_batches = -(-n // batch_size)
    temps = np.linspace(temperature[0], temperature[1], epochs * n_batches + 1)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    frozen = [p for p in model.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    losses, step = [], 0
    module.train()
    try:
        for _ in range(epochs):
            order = torch.randperm(n, generator=gen)
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                module.temperature = float(temps[step])
                logits = intervened_logits(model, ids[idx], pos[idx], layer, module(dft[idx]).to(device))
                loss = torch.nn.functional.cross_entropy(logits.float(), labels[idx])
                gate = module.gate()
                if gate is not None:
                    loss = loss + mask_l1 * gate.abs().sum()
                if not torch.isfinite(loss):
                    raise DataError(
                        "the intervention's loss is NaN or inf; check the model.", argument="model"
                    )
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
                step += 1
        module.temperature = float(temps[-1])
    finally:
        for p in frozen:
            p.requires_grad_(True)
        module.eval()
    return losses


@torch.no_grad()
def accuracy(
    model: Any, module: Interchange, pairs: CounterfactualPairs, df: np.ndarray, layer: Any
) -> float:
    """Interchange intervention accuracy: the share of pairs answered with the causal model's label."""
    module.eval()
    device = next(model.parameters()).device
    ids = torch.as_tensor(pairs.base, device=device)
    pos = torch.as_tensor(pairs.positions, device=device)
    delta = module(torch.as_tensor(df, dtype=torch.float64)).to(device)
    pred = intervened_logits(model, ids, pos, layer, delta).argmax(-1).cpu().numpy()
    return float((pred == pairs.labels).mean())
