"""A tiny DDPM on scikit-learn's digits: noise schedule, small UNet, training, DDIM sampling.

The diffusion substrate of the vision lab (docs/vision-lab.md). Methods that work on
diffusion models (FineXtract in :mod:`trustlab.privacy.finextract`) take *any* denoiser
``eps(x, t)`` (a ``torch.nn.Module``) or a ``diffusers`` pipeline; this module only builds
the small models their tests, docs and benchmarks need. ``diffusers`` installs beside the
pinned torch, but importing it costs about 7 s of CPU, more than a fast test may spend, so
the lab's UNet and schedule are written here (a few dozen lines each) and ``diffusers``
stays optional: its pipelines are accepted wherever a denoiser is.

Images are ``(n, 1, 8, 8)`` floats in [0, 1] (as :func:`~trustlab.vision.digits_split`
gives them); the models work in ``[-1, 1]`` (``2 x - 1``), as DDPMs do.

References
----------
J. Ho, A. Jain, P. Abbeel, "Denoising Diffusion Probabilistic Models", NeurIPS 2020.
J. Song, C. Meng, S. Ermon, "Denoising Diffusion Implicit Models", ICLR 2021.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError, ParameterError
from trustlab.vision.classifiers import check_images, check_model, one_thread, require_torch, torch_generator

__all__ = [
    "DDPMSchedule",
    "ddim_loop",
    "ddim_sample",
    "ddim_timesteps",
    "make_unet",
    "train_ddpm",
]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]


@dataclass(frozen=True)
class DDPMSchedule:
    """The DDPM forward process: a linear beta schedule over ``num_train_timesteps`` steps.

    Parameters
    ----------
    num_train_timesteps : int, default=1000
    beta_start, beta_end : float, default=(1e-4, 0.02)
        Ho et al.'s linear schedule (``diffusers``' ``DDPMScheduler`` defaults).

    Examples
    --------
    >>> s = DDPMSchedule()
    >>> round(float(s.alphas_cumprod[-1]), 5)
    4e-05
    """

    num_train_timesteps: int = 1000
    beta_start: float = 1e-4
    beta_end: float = 0.02

    @property
    def alphas_cumprod(self) -> np.ndarray:
        """``prod_{s <= t} (1 - beta_s)`` for ``t = 0 .. T-1`` (float64)."""
        betas = np.linspace(self.beta_start, self.beta_end, self.num_train_timesteps, dtype=np.float64)
        return np.cumprod(1.0 - betas)


@functools.cache
def _unet_class() -> Any:
    torch = require_torch()
    nn = torch.nn

    class ResBlock(nn.Module):  # type: ignore[name-defined]
        """GroupNorm - SiLU - conv, plus the time embedding, GroupNorm - SiLU - conv, residual."""

        def __init__(self, c_in: int, c_out: int, t_dim: int) -> None:
            super().__init__()
            self.norm1 = nn.GroupNorm(min(8, c_in), c_in)
            self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
            self.time = nn.Linear(t_dim, c_out)
            self.norm2 = nn.GroupNorm(min(8, c_out), c_out)
            self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
            self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

        def forward(self, x: Any, temb: Any) -> Any:
            h = self.conv1(nn.functional.silu(self.norm1(x)))
            h = h + self.time(temb)[:, :, None, None]
            h = self.conv2(nn.functional.silu(self.norm2(h)))
            return h + self.skip(x)

    class TinyUNet(nn.Module):  # type: ignore[name-defined]
        """A two-level UNet predicting the noise ``eps(x_t, t)`` of ``(n, C, H, W)`` images."""

        def __init__(self, channels: int, in_channels: int) -> None:
            super().__init__()
            c, t_dim = channels, 4 * channels
            self.t_dim = t_dim
            self.time_mlp = nn.Sequential(nn.Linear(c, t_dim), nn.SiLU(), nn.Linear(t_dim, t_dim))
            self.inp = nn.Conv2d(in_channels, c, 3, padding=1)
            self.down1 = ResBlock(c, c, t_dim)
            self.downsample = nn.Conv2d(c, 2 * c, 3, stride=2, padding=1)
            self.down2 = ResBlock(2 * c, 2 * c, t_dim)
            self.mid = ResBlock(2 * c, 2 * c, t_dim)
            self.upsample = nn.ConvTranspose2d(2 * c, c, 4, stride=2, padding=1)
            self.up1 = ResBlock(2 * c, c, t_dim)
            self.out = nn.Sequential(
                nn.GroupNorm(min(8, c), c), nn.SiLU(), nn.Conv2d(c, in_channels, 3, padding=1)
            )
            self.channels = c

        def _embed(self, t: Any) -> Any:
            half = self.channels // 2
            freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
            args = t.float()[:, None] * freqs[None, :]
            emb = torch.cat([torch.sin(args), torch.cos(args)], dim=1)
            if emb.shape[1] < self.channels:
                emb = nn.functional.pad(emb, (0, self.channels - emb.shape[1]))
            return self.time_mlp(emb)

        def forward(self, x: Any, t: Any) -> Any:
            t = torch.as_tensor(t)
            if t.ndim == 0:
                t = t.expand(x.shape[0])
            temb = self._embed(t)
            h1 = self.down1(self.inp(x), temb)
            h = self.mid(self.down2(self.downsample(h1), temb), temb)
            h = self.up1(torch.cat([self.upsample(h), h1], dim=1), temb)
            return self.out(h)

    return TinyUNet


@validate_params({"channels": [Interval(numbers.Integral, 2, None, closed="left")], "in_channels": _POS_INT})
def make_unet(*, channels: int = 16, in_channels: int = 1, seed: int = 0) -> Any:
    """A small UNet noise predictor ``model(x, t) -> eps`` for 8x8 (or any even-sized) images.

    Two resolutions: conv in, a residual block at full size, a stride-2 conv, two residual
    blocks at half size, a transposed conv back up, the skip concatenated, a residual block,
    conv out. Residual blocks are GroupNorm - SiLU - 3x3 conv with the sinusoidal time
    embedding (through a two-layer MLP) added, as in Ho et al.'s UNet, without attention.

    Parameters
    ----------
    channels : int >= 2, default=16
        Width ``c`` at full resolution (``2c`` at half).
    in_channels : int, default=1
        Image channels.
    seed : int, default=0
        Seeds the initial weights (torch's global generator is restored).

    Returns
    -------
    torch.nn.Module

    Examples
    --------
    >>> net = make_unet(channels=8)
    >>> tuple(net(require_torch().zeros(2, 1, 8, 8), require_torch().tensor([0, 999])).shape)
    (2, 1, 8, 8)
    """
    torch = require_torch()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return _unet_class()(int(channels), int(in_channels))


def _to_model_space(X: Any, name: str) -> Any:
    torch = require_torch()
    arr = check_images(X, name)
    if arr.ndim != 4:
        raise DataError(f"{name} must be images of shape (n, C, H, W); got shape {arr.shape}.", argument=name)
    return torch.as_tensor(arr) * 2.0 - 1.0


@validate_params(
    {"steps": _POS_INT, "batch_size": _POS_INT, "lr": [Interval(numbers.Real, 0, None, closed="neither")]}
)
def train_ddpm(
    model: Any,
    X: Any,
    *,
    steps: int = 2000,
    lr: float = 2e-3,
    batch_size: int = 128,
    schedule: DDPMSchedule | None = None,
    random_state: Any = 0,
) -> Any:
    """Train (or fine-tune) a noise predictor in place on images ``X``; return it in eval mode.

    Ho et al.'s simple loss: ``t`` uniform on ``0 .. T-1``, ``x_t = sqrt(a_t) x_0 +
    sqrt(1 - a_t) eps``, minimise ``|eps - model(x_t, t)|^2`` with Adam.

    Parameters
    ----------
    model : torch.nn.Module
        ``model(x, t)`` returns a tensor shaped like ``x``.
    X : array-like of shape (n, C, H, W)
        Images in [0, 1].
    steps, batch_size : int, default=(2000, 128)
        Adam steps and minibatch size (``min(batch_size, n)``, drawn with replacement).
    lr : float, default=2e-3
        Adam's learning rate.
    schedule : DDPMSchedule, optional
        The forward process; default :class:`DDPMSchedule()`.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds batches, timesteps and noise.

    Returns
    -------
    torch.nn.Module
        ``model``, trained, in eval mode.

    Examples
    --------
    >>> X = np.random.default_rng(0).random((16, 1, 8, 8)).astype(np.float32)
    >>> net = train_ddpm(make_unet(channels=4), X, steps=2, batch_size=4)
    >>> net.training
    False
    """
    check_model(model)
    x0 = _to_model_space(X, "X")
    return _fit_noise_predictor(model, x0, steps, lr, batch_size, schedule or DDPMSchedule(), random_state)


def _fit_noise_predictor(
    model: Any,
    x0: Any,
    steps: int,
    lr: float,
    batch_size: int,
    schedule: DDPMSchedule,
    random_state: Any,
    conditioning: Any = None,
) -> Any:
    """Ho et al.'s simple loss ``|eps - model(x_t, t)|^2`` in :func:`_denoising_loop`.

    ``conditioning(idx, gen)``, when given, returns the keyword arguments of the model call for
    the minibatch ``idx`` (the class-conditional trainer's labels with their dropout).
    """
    torch = require_torch()
    acp = torch.as_tensor(schedule.alphas_cumprod, dtype=torch.float32)

    def loss(idx: Any, t: Any, noise: Any, gen: Any) -> Any:
        kwargs = conditioning(idx, gen) if conditioning is not None else {}
        a = acp[t][:, None, None, None]
        xt = a.sqrt() * x0[idx] + (1 - a).sqrt() * noise
        return torch.nn.functional.mse_loss(model(xt, t, **kwargs), noise)

    return _denoising_loop(model, x0, schedule.num_train_timesteps, loss, steps, lr, batch_size, random_state)


def _denoising_loop(
    model: Any,
    x0: Any,
    n_timesteps: int,
    loss: Any,
    steps: int,
    lr: float,
    batch_size: int,
    random_state: Any,
    params: Any = None,
) -> Any:
    """The Adam loop of the lab's diffusion and bridge trainers; returns ``model`` in eval mode.

    Each step draws, in this order from one generator, a minibatch ``idx`` of ``min(batch_size,
    n)`` rows of ``x0`` (with replacement), timesteps ``t`` uniform on ``0 .. n_timesteps-1`` and
    Gaussian noise shaped like ``x0[idx]``, then minimises ``loss(idx, t, noise, gen)`` over
    ``params`` (default all of ``model``'s) on one torch thread.
    """
    torch = require_torch()
    gen = torch_generator(random_state)
    bs = min(int(batch_size), len(x0))
    opt = torch.optim.Adam(model.parameters() if params is None else params, lr=float(lr))
    with one_thread():
        model.train()
        for _ in range(int(steps)):
            idx = torch.randint(len(x0), (bs,), generator=gen)
            t = torch.randint(int(n_timesteps), (bs,), generator=gen)
            noise = torch.randn(x0[idx].shape, generator=gen)
            opt.zero_grad()
            loss(idx, t, noise, gen).backward()
            opt.step()
    return model.eval()


def ddim_timesteps(num_train_timesteps: int, num_inference_steps: int) -> np.ndarray:
    """The DDIM timesteps, descending, with ``diffusers``' "leading" spacing (``k * T // S``).

    Parameters
    ----------
    num_train_timesteps : int
        ``T``, the diffusion's training steps.
    num_inference_steps : int
        ``S``, the sampling steps (``<= T``).

    Returns
    -------
    ndarray of int, shape (num_inference_steps,)
        ``k * (T // S)`` for ``k = S - 1, ..., 0``.

    Examples
    --------
    >>> ddim_timesteps(1000, 4).tolist()
    [750, 500, 250, 0]
    """
    stride = num_train_timesteps // num_inference_steps
    return (np.arange(num_inference_steps) * stride)[::-1].copy()


def _as_eps_fn(model: Any, name: str) -> Any:
    """``model(x, t)`` as a callable returning a tensor (``diffusers``' ``.sample`` unwrapped)."""
    if not callable(model):
        raise ParameterError(
            f"{name} must be a torch module or callable eps(x, t); got {type(model).__name__}.", argument=name
        )

    def eps(x: Any, t: Any) -> Any:
        out = model(x, t)
        return getattr(out, "sample", out)

    return eps


def ddim_loop(
    eps: Any,
    x: Any,
    alphas_cumprod: np.ndarray,
    timesteps: np.ndarray,
    *,
    clip_denoised: bool = True,
) -> Any:
    """Run deterministic DDIM (``eta = 0``) from ``x = x_T`` over descending ``timesteps``.

    ``eps(x, t)`` takes a batch and a ``(n,)`` long tensor of timesteps. Each step predicts
    ``x_0 = (x_t - sqrt(1 - a_t) eps) / sqrt(a_t)`` (clipped to [-1, 1] when
    ``clip_denoised``), recomputes ``eps`` from the clipped ``x_0`` and moves to
    ``x_prev = sqrt(a_prev) x_0 + sqrt(1 - a_prev) eps`` (``a_prev = 1`` after the last step).
    Song et al. (2021), eq. (12).

    Parameters
    ----------
    eps : callable
        The noise predictor ``eps(x, t)``.
    x : torch.Tensor
        The starting noise ``x_T``, a batch in model space.
    alphas_cumprod : ndarray of float, shape (T,)
        The schedule's cumulative products ``a_t``.
    timesteps : ndarray of int
        Descending timesteps (e.g. :func:`ddim_timesteps`).
    clip_denoised : bool, default=True
        Clip each predicted ``x_0`` to [-1, 1].

    Returns
    -------
    torch.Tensor
        The final ``x_0``, same shape as ``x``.

    Examples
    --------
    >>> import torch
    >>> acp = np.linspace(0.99, 0.01, 100)
    >>> x0 = ddim_loop(lambda x, t: torch.zeros_like(x), torch.ones(2, 3), acp, ddim_timesteps(100, 5))
    >>> x0.shape, bool(torch.all(x0 <= 1.0))
    (torch.Size([2, 3]), True)
    """
    torch = require_torch()
    acp = torch.as_tensor(np.asarray(alphas_cumprod, dtype=np.float64))
    with torch.no_grad():
        for i, t in enumerate(timesteps):
            a_t = acp[int(t)].to(x.dtype)
            a_prev = acp[int(timesteps[i + 1])].to(x.dtype) if i + 1 < len(timesteps) else x.new_tensor(1.0)
            e = eps(x, torch.full((x.shape[0],), int(t), dtype=torch.long))
            x0 = (x - (1 - a_t).sqrt() * e) / a_t.sqrt()
            if clip_denoised:
                x0 = x0.clamp(-1.0, 1.0)
                e = (x - a_t.sqrt() * x0) / (1 - a_t).sqrt()
            x = a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * e
    return x


@validate_params({"n": _POS_INT, "num_inference_steps": _POS_INT, "clip_denoised": ["boolean"]})
def ddim_sample(
    model: Any,
    n: int,
    *,
    num_inference_steps: int = 50,
    schedule: DDPMSchedule | None = None,
    shape: tuple[int, ...] = (1, 8, 8),
    clip_denoised: bool = True,
    random_state: Any = 0,
) -> np.ndarray:
    """Deterministic DDIM sampling (``eta = 0``) from a noise predictor; images in [0, 1].

    Parameters
    ----------
    model : torch.nn.Module or callable
        ``model(x, t)`` returns the predicted noise (or an object with ``.sample``).
    n : int
        Number of images.
    num_inference_steps : int, default=50
        DDIM steps (at most ``T``), "leading" spacing as ``diffusers`` spaces them.
    schedule : DDPMSchedule, optional
        The schedule the model was trained with; default :class:`DDPMSchedule()`.
    shape : tuple of int, default=(1, 8, 8)
        ``(C, H, W)``.
    clip_denoised : bool, default=True
        Clip each step's predicted ``x_0`` to [-1, 1] (pixel-space DDPMs do).
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the starting noise.

    Returns
    -------
    numpy.ndarray of shape (n, C, H, W)
        float32 in [0, 1].

    Examples
    --------
    >>> ddim_sample(make_unet(channels=4), 2, num_inference_steps=3).shape
    (2, 1, 8, 8)
    """
    eps = _as_eps_fn(model, "model")
    sched = schedule or DDPMSchedule()
    shp = tuple(map(int, shape))
    return _ddim_images(
        eps,
        int(n),
        shp,
        sched.alphas_cumprod,
        int(num_inference_steps),
        int(n) or 1,
        random_state,
        clip_denoised,
    )


def _ddim_images(
    eps: Any,
    n: int,
    shape: tuple[int, ...],
    alphas_cumprod: np.ndarray,
    num_inference_steps: int,
    batch_size: int,
    random_state: Any,
    clip_denoised: bool,
) -> np.ndarray:
    """``n`` DDIM samples of ``eps`` in [0, 1] (float32), ``batch_size`` images per pass.

    The starting noise for all ``n`` is drawn at once from ``random_state``, so the batch size
    never changes the images.
    """
    torch = require_torch()
    if num_inference_steps > len(alphas_cumprod):
        raise ParameterError(
            f"num_inference_steps must be at most the schedule's {len(alphas_cumprod)} steps; "
            f"got {num_inference_steps}.",
            argument="num_inference_steps",
        )
    x_T = torch.randn((n, *shape), generator=torch_generator(random_state))
    steps = ddim_timesteps(len(alphas_cumprod), num_inference_steps)
    out = []
    with one_thread():
        for start in range(0, n, batch_size):
            batch = x_T[start : start + batch_size]
            x0 = ddim_loop(eps, batch, alphas_cumprod, steps, clip_denoised=clip_denoised)
            out.append(((x0.clamp(-1, 1) + 1) / 2).float().numpy())
    return np.concatenate(out).astype(np.float32) if out else np.empty((0, *shape), np.float32)
