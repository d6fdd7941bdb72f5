"""Adam written out, for the library's small torch models (private module).

``torch.optim`` imports ``torch._dynamo`` on first use: 3-5 s of CPU per process on a 2-core
machine, more than the whole fit of the small models trustlab trains (SAEs, FDGen's
generator, UPGNET's GCN, source-free unlearning). This is the one copy of the update they share.

References
----------
Kingma, Ba. "Adam: A Method for Stochastic Optimization". ICLR 2015.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Adam"]


class Adam:
    """Adam over ``params`` (torch tensors) with torch's defaults: betas (0.9, 0.999), eps 1e-8.

    Parameters
    ----------
    params : list of torch.Tensor
        Updated in place by :meth:`step`.
    lr : float
        Learning rate.
    betas : tuple of float
        Decay rates of the first and second moments.
    """

    def __init__(self, params: Sequence[Any], lr: float, betas: tuple[float, float] = (0.9, 0.999)) -> None:
        import torch

        self.params, self.lr, self.betas, self.t = list(params), lr, betas, 0
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]

    def step(self, grads: Sequence[Any], lr_scale: float = 1.0) -> None:
        """One update from ``grads`` (one per parameter), at ``lr * lr_scale``."""
        import torch

        b1, b2 = self.betas
        self.t += 1
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        with torch.no_grad():
            for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                p.sub_(self.lr * lr_scale * (m / c1) / ((v / c2).sqrt() + 1e-8))
