"""The torch pieces of Sum-of-Parts (private): sparsemax, tokens, group generator and selector.

See :mod:`trustlab.explain.sop` for the model and docs/explain/sum-of-parts.md for the method.

References
----------
.. [1] You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with
   End-to-End Learning of Feature Groups". ICML 2025.
.. [2] Martins, Astudillo. "From Softmax to Sparsemax". ICML 2016.
"""

from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["SOPNet", "find_head", "sparsemax"]


def sparsemax(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Euclidean projection of ``z`` onto the probability simplex along ``dim`` (Martins, 2016).

    Differentiable through torch's sort and gather, with the sparsemax Jacobian
    ``diag(s) - s s^T / |S|`` on the support ``S``.
    """
    zs, _ = torch.sort(z, dim=dim, descending=True)
    n = z.shape[dim]
    shape = [1] * z.dim()
    shape[dim] = n
    ks = torch.arange(1, n + 1, dtype=z.dtype, device=z.device).view(shape)
    cums = zs.cumsum(dim) - 1.0
    support = (ks * zs > cums).to(z.dtype)
    k_z = support.sum(dim=dim, keepdim=True).clamp_min(1.0)
    tau = cums.gather(dim, k_z.long() - 1) / k_z
    return torch.clamp(z - tau, min=0.0)


def find_head(backbone: Any, head: str | None) -> tuple[str, Any]:
    """The backbone's final ``nn.Linear`` (its class weights and the input that feeds it).

    ``head=None`` takes the last ``nn.Linear`` in ``backbone.named_modules()`` order.
    Returns ``(name, module)``; ``("", None)`` when there is none.
    """
    linears = [(n, m) for n, m in backbone.named_modules() if isinstance(m, torch.nn.Linear)]
    if head is None:
        return linears[-1] if linears else ("", None)
    modules = dict(backbone.named_modules())
    mod = modules.get(head)
    return (head, mod) if isinstance(mod, torch.nn.Linear) else ("", None)


def _uniform(gen: torch.Generator, *shape: int, fan: int) -> torch.nn.Parameter:
    bound = 1.0 / math.sqrt(max(fan, 1))
    return torch.nn.Parameter((torch.rand(*shape, generator=gen) * 2 - 1) * bound)


class SOPNet(torch.nn.Module):
    """Group generator + group selector around a frozen backbone (the trainable part of SOP).

    Parameters
    ----------
    token_dim, n_tokens : int
        Values per token (a patch's pixels, or 1 for a tabular feature) and number of tokens.
    n_candidates : int
        The first ``n_candidates`` tokens are the generator's query rows (candidate groups).
    hidden_dim : int
        Width of the group generator's token embedding.
    class_weights : torch.Tensor of shape (n_classes, backbone_dim)
        The backbone head's weight matrix: the selector's class queries start from it.
    grouping : {"learned", "features"}
        ``"learned"``: groups from the attention generator; ``"features"``: one fixed group per
        token (a per-feature SANN with the same backbone and selector).
    n_groups, group_size : int
        Groups per input and tokens per learned group.
    gen_scale, sel_scale : float
        Logit scales of the generator's softmax and the selector's sparsemax.
    gen : torch.Generator
        Seeds the initial weights.
    """

    def __init__(
        self,
        *,
        token_dim: int,
        n_tokens: int,
        n_candidates: int,
        hidden_dim: int,
        class_weights: torch.Tensor,
        grouping: str,
        n_groups: int,
        group_size: int,
        gen_scale: float,
        sel_scale: float,
        gen: torch.Generator,
    ) -> None:
        super().__init__()
        self.grouping, self.n_tokens = grouping, n_tokens
        self.n_groups = n_tokens if grouping == "features" else n_groups
        self.group_size, self.gen_scale, self.sel_scale = group_size, gen_scale, sel_scale
        # Group generator: token embedding (the paper's patch projection) + position embedding,
        # one attention head whose rows, cut at their top group_size tokens, are the groups.
        self.embed_w = _uniform(gen, token_dim, hidden_dim, fan=token_dim)
        self.embed_b = _uniform(gen, hidden_dim, fan=token_dim)
        self.pos = torch.nn.Parameter(torch.randn(n_tokens, hidden_dim, generator=gen))
        self.gen_q = _uniform(gen, hidden_dim, hidden_dim, fan=hidden_dim)
        self.gen_k = _uniform(gen, hidden_dim, hidden_dim, fan=hidden_dim)
        # Group selector: class queries from the backbone's head, identity projections (as the
        # authors initialise it), sparsemax over the groups.
        d = class_weights.shape[1]
        self.class_weights = torch.nn.Parameter(class_weights.detach().clone().float())
        self.sel_q = torch.nn.Parameter(torch.eye(d))
        self.sel_k = torch.nn.Parameter(torch.eye(d))
        # The candidate rows kept: n_groups evenly spaced query tokens (the authors' "dropout"
        # that keeps num_masks_sample of num_masks_max candidates).
        keep = torch.arange(self.n_groups) * n_candidates // max(self.n_groups, 1)
        self.keep: torch.Tensor
        self.register_buffer("keep", keep, persistent=False)

    def generate(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Binary group masks ``(n, m, T)`` and their differentiable scales ``c`` ``(n, m)``."""
        n = tokens.shape[0]
        if self.grouping == "features":
            eye = torch.eye(self.n_tokens, dtype=tokens.dtype).expand(n, -1, -1)
            return eye, torch.ones(n, self.n_tokens, dtype=tokens.dtype)
        e = tokens @ self.embed_w + self.embed_b + self.pos
        q = e[:, self.keep] @ self.gen_q
        k = e @ self.gen_k
        att = torch.softmax(self.gen_scale * q @ k.transpose(1, 2), dim=-1)  # (n, m, T)
        top = att.topk(self.group_size, dim=-1)
        masks = torch.zeros_like(att).scatter_(-1, top.indices, 1.0)
        # sum of the kept attention minus the rest: the path by which the loss reaches the
        # generator through the non-differentiable binarisation (the authors' scale c).
        c = 2.0 * top.values.sum(-1) - att.sum(-1)
        return masks, c

    def select(self, logits: torch.Tensor, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Selector weights ``(n, m, C)`` (sparsemax over groups) and the summed logits ``(n, C)``."""
        qc = self.class_weights @ self.sel_q.T  # (C, d)
        kz = feats @ self.sel_k.T  # (n, m, d)
        scores = self.sel_scale * torch.einsum("cd,nmd->ncm", qc, kz)
        w = sparsemax(scores, dim=-1).transpose(1, 2)  # (n, m, C)
        return w, (w * logits).sum(1)
