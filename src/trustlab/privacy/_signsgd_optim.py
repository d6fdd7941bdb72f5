"""The noisy SignSGD torch optimizer (imports torch; reached only through ``trustlab.privacy.signsgd``)."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Sequence
from typing import Any, ClassVar

import torch

from trustlab._param_validation import Interval, Options, check_params
from trustlab.errors import DataError, ParameterError
from trustlab.privacy._signsgd_accounting import SignMechanismAccountant
from trustlab.privacy.release import Release

__all__ = ["NoisySignSGD"]


def _secure_torch_generator(device: torch.device) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1))
    return gen


class NoisySignSGD(torch.optim.Optimizer):
    """Noisy SignSGD with simulated workers: each sends ``sign(clipped sum + noise)``; the server votes.

    Each step, for every worker ``m`` of ``num_workers``: the per-example gradients of
    its Poisson-sampled examples are clipped to ``clip_norm`` (l2 over all parameters),
    summed into ``v_m``, and the worker sends ``s_m = sign(v_m + xi_m)`` with ``xi_m``
    i.i.d. Gaussian (std ``noise_multiplier * clip_norm``) or logistic (scale
    ``noise_multiplier * clip_norm``) per coordinate; ``sign(0) = +1``. Every worker
    sends every step, also with no examples (the structure never depends on the
    data). The server takes ``a = sign(sum_m s_m)`` (``"majority"``, ties to ``+1``) or
    ``a = mean_m s_m`` (``"mean"``) and sets ``p <- p - lr * a``.

    **Noise source.** A ``torch.Generator`` seeded from ``os.urandom`` at every step:
    no seed drives the noise. It is DP-SGD-style float noise, as Opacus draws it, not
    noise on a Mironov grid; the guarantee is the usual floating-point DP-SGD one.
    Use :meth:`poisson_mask` for the sampling the accountant assumes.

    Parameters
    ----------
    params : iterable of torch.Tensor or dict
        The parameters to optimise (as for any torch optimizer).
    lr : float, default 1e-3
        Step size, > 0.
    clip_norm : float, default 1.0
        Per-example l2 clipping norm ``C``, > 0.
    noise_multiplier : float, default 1.0
        Noise scale over ``C``, > 0.
    noise : {"gaussian", "logistic"}, default "gaussian"
        The noise distribution.
    aggregation : {"majority", "mean"}, default "majority"
        How the server combines the workers' signs.
    sample_rate : float, default 0.01
        The Poisson rate at which examples are sampled (used by the accountant and
        :meth:`poisson_mask`), in ``(0, 1]``.
    num_workers : int, default 1
        Number of simulated workers, >= 1.
    nonfinite : {"raise", "zero"}, default "raise"
        A non-finite per-example gradient raises :class:`~trustlab.errors.DataError`
        (``"raise"``; note that an error is itself one bit about the data), or the
        example's gradient is replaced by zero, as if the example were absent
        (``"zero"``; no information leaks).

    Attributes
    ----------
    steps_taken : int
        Number of completed steps.

    References
    ----------
    Jin, Dai. "Noisy SIGNSGD Is More Differentially Private Than You (Might) Think".
    ICML 2025. Bernstein et al. "signSGD with Majority Vote is Communication
    Efficient and Fault Tolerant". ICLR 2019.

    Examples
    --------
    >>> import torch
    >>> w = torch.nn.Parameter(torch.zeros(3))
    >>> opt = NoisySignSGD([w], lr=0.1, noise_multiplier=1.0, sample_rate=0.5, num_workers=2)
    >>> grads = [torch.tensor([[5.0, -5.0, 0.0], [5.0, -5.0, 0.0]])]
    >>> opt.step(grads, workers=torch.tensor([0, 1]))
    >>> opt.steps_taken, tuple(w.shape)
    (1, (3,))
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "clip_norm": [Interval(numbers.Real, 0, None, closed="neither")],
        "noise_multiplier": [Interval(numbers.Real, 0, None, closed="neither")],
        "noise": [Options({"gaussian", "logistic"})],
        "aggregation": [Options({"majority", "mean"})],
        "sample_rate": [Interval(numbers.Real, 0, 1, closed="right")],
        "num_workers": [Interval(numbers.Integral, 1, None, closed="left")],
        "nonfinite": [Options({"raise", "zero"})],
    }

    def __init__(
        self,
        params: Any,
        lr: float = 1e-3,
        *,
        clip_norm: float = 1.0,
        noise_multiplier: float = 1.0,
        noise: str = "gaussian",
        aggregation: str = "majority",
        sample_rate: float = 0.01,
        num_workers: int = 1,
        nonfinite: str = "raise",
    ) -> None:
        settings = {
            "lr": lr,
            "clip_norm": clip_norm,
            "noise_multiplier": noise_multiplier,
            "noise": noise,
            "aggregation": aggregation,
            "sample_rate": sample_rate,
            "num_workers": num_workers,
            "nonfinite": nonfinite,
        }
        check_params(settings, self._parameter_constraints, "NoisySignSGD")
        super().__init__(params, {"lr": float(lr)})
        self.clip_norm = float(clip_norm)
        self.noise_multiplier = float(noise_multiplier)
        self.noise = noise
        self.aggregation = aggregation
        self.sample_rate = float(sample_rate)
        self.num_workers = int(num_workers)
        self.nonfinite = nonfinite
        self.steps_taken = 0

    def _params(self) -> list[torch.Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def poisson_mask(self, n: int) -> torch.Tensor:
        """Draw the Poisson sample of ``n`` examples at ``sample_rate`` (``os.urandom``-seeded generator).

        Parameters
        ----------
        n : int
            Number of examples to sample from (>= 0).

        Returns
        -------
        torch.Tensor
            Boolean mask of shape ``(n,)``.
        """
        check_params({"n": n}, {"n": [Interval(numbers.Integral, 0, None, closed="left")]}, "poisson_mask")
        gen = _secure_torch_generator(torch.device("cpu"))
        return torch.rand(int(n), generator=gen) < self.sample_rate

    def _check_grads(
        self, per_example_grads: Sequence[Any], workers: Any
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        params = self._params()
        if not isinstance(per_example_grads, list | tuple) or len(per_example_grads) != len(params):
            raise DataError(
                f"per_example_grads must be a list with one tensor per parameter ({len(params)}), "
                f"each of shape (n_examples, *param.shape).",
                argument="per_example_grads",
            )
        grads = []
        n: int | None = None
        for g, p in zip(per_example_grads, params, strict=True):
            if not isinstance(g, torch.Tensor) or not g.is_floating_point():
                raise DataError("per_example_grads must hold float tensors.", argument="per_example_grads")
            if tuple(g.shape[1:]) != tuple(p.shape) or (n is not None and g.shape[0] != n):
                raise DataError(
                    f"per_example_grads: expected shape (n_examples, {tuple(p.shape)}) for every parameter, "
                    f"got {tuple(g.shape)}.",
                    argument="per_example_grads",
                )
            n = int(g.shape[0])
            grads.append(g.detach().to(p.device, p.dtype))
        w = torch.as_tensor(workers) if workers is not None else torch.zeros(n or 0, dtype=torch.long)
        if w.dim() != 1 or w.shape[0] != (n or 0) or w.is_floating_point() or w.dtype == torch.bool:
            raise DataError(
                "workers must be an integer tensor of shape (n_examples,) giving each example's worker.",
                argument="workers",
            )
        if w.numel() and (int(w.min()) < 0 or int(w.max()) >= self.num_workers):
            raise DataError(f"workers must lie in [0, {self.num_workers}).", argument="workers")
        return grads, w.long()

    @torch.no_grad()
    def step(  # type: ignore[override]
        self, per_example_grads: Sequence[Any] | None = None, workers: Any = None, closure: Any = None
    ) -> None:
        """Take one noisy SignSGD step from the sampled examples' per-example gradients.

        Parameters
        ----------
        per_example_grads : list of torch.Tensor
            One tensor per parameter (in ``param_groups`` order), shape
            ``(n_examples, *param.shape)``: the gradients of the examples sampled this
            step (see :meth:`poisson_mask`); ``n_examples`` may be 0.
        workers : torch.Tensor, optional
            Integer tensor ``(n_examples,)``: each example's worker (default: all 0).
        closure : callable, optional
            Not supported (the gradients are passed explicitly); must be None.

        Raises
        ------
        DataError
            On a shape mismatch, or a non-finite gradient with ``nonfinite="raise"``.
        """
        if closure is not None or per_example_grads is None:
            raise ParameterError(
                "NoisySignSGD.step needs per_example_grads (and workers); closures are not supported.",
                argument="per_example_grads",
            )
        grads, w = self._check_grads(per_example_grads, workers)
        params = self._params()
        n = grads[0].shape[0] if grads else 0
        flat = [g.reshape(n, p.numel()) for g, p in zip(grads, params, strict=True)]
        finite = torch.ones(n, dtype=torch.bool, device=flat[0].device if flat else None)
        for f in flat:
            finite &= torch.isfinite(f).all(dim=1)
        if not bool(finite.all()):
            if self.nonfinite == "raise":
                raise DataError(
                    "per_example_grads holds NaN or infinity; fix the model/loss, or pass nonfinite='zero' "
                    "to treat such examples as absent.",
                    argument="per_example_grads",
                )
            flat = [torch.where(finite[:, None], f, torch.zeros_like(f)) for f in flat]
        sq = torch.zeros(n, dtype=flat[0].dtype if flat else torch.float32, device=finite.device)
        for f in flat:
            sq += (f * f).sum(dim=1)
        factor = torch.clamp(self.clip_norm / torch.clamp(torch.sqrt(sq), min=1e-30), max=1.0)
        scale = self.noise_multiplier * self.clip_norm
        for p, f, group in zip(params, flat, self._groups_per_param(), strict=True):
            gen = _secure_torch_generator(p.device)
            v = torch.zeros(self.num_workers, f.shape[1], dtype=p.dtype, device=p.device)
            v.index_add_(0, w.to(p.device), f * factor[:, None])
            if self.noise == "gaussian":
                xi = torch.randn(v.shape, generator=gen, dtype=p.dtype, device=p.device) * scale
            else:
                u = torch.rand(v.shape, generator=gen, dtype=torch.float64, device=p.device)
                u = u.clamp(min=math.ulp(0.0))
                xi = (torch.log(u) - torch.log1p(-u)).to(p.dtype) * scale
            signs = torch.where(v + xi >= 0, 1.0, -1.0).to(p.dtype)
            total = signs.sum(dim=0)
            if self.aggregation == "majority":
                direction = torch.where(total >= 0, 1.0, -1.0).to(p.dtype)
            else:
                direction = total / self.num_workers
            p.add_(direction.reshape(p.shape), alpha=-group["lr"])
        self.steps_taken += 1

    def _groups_per_param(self) -> list[dict[str, Any]]:
        return [group for group in self.param_groups for _ in group["params"]]

    def accountant(self) -> Any:
        """Return the :class:`~trustlab.privacy.signsgd.SignMechanismAccountant` of this optimizer's settings.

        Returns
        -------
        SignMechanismAccountant
            With this optimizer's noise, noise multiplier and sample rate.
        """
        return SignMechanismAccountant(self.noise, self.noise_multiplier, self.sample_rate)

    def privacy_spent(self, delta: float) -> Release:
        """Return what the steps taken so far spent, per record of a worker, as a :class:`Release`.

        Parameters
        ----------
        delta : float
            Target delta, in ``(0, 1)``.

        Returns
        -------
        Release
            ``value=None``; ``epsilon`` with the sign's amplification, the post-processing
            epsilon among its parameters. Before the first step: epsilon and delta 0.
        """
        if self.steps_taken == 0:
            check_params(
                {"delta": delta}, {"delta": [Interval(numbers.Real, 0, 1, closed="neither")]}, "privacy_spent"
            )
            return Release(
                None, 0.0, 0.0, mechanism="noisy SignSGD", description="noisy SignSGD training (no step)"
            )
        return self.accountant().plan(delta, self.steps_taken, description="noisy SignSGD training")
