"""A tiny image-to-image Schrödinger bridge (I2SB): schedule, paired training, bridge sampling.

The bridge substrate of the vision lab, beside the DDPM of :mod:`trustlab.vision.diffusion`.
I2SB (Liu et al., 2023) is a diffusion Schrödinger bridge between two image distributions
given as boundary *pairs* ``(x0, x1)`` (``x0`` clean, ``x1`` degraded): its marginals are
Gaussian products, ``x_t = mu0_t x0 + mu1_t x1 + sigma_t eps`` with ``mu0_t = s_bwd^2 /
(s_fwd^2 + s_bwd^2)``, ``mu1_t = s_fwd^2 / (...)`` and ``sigma_t^2 = s_fwd^2 s_bwd^2 / (...)``,
where ``s_fwd_t^2`` and ``s_bwd_t^2`` are the cumulative betas from each end. A network
``net(x_t, t)`` learns ``(x_t - x0) / s_fwd_t`` (I2SB's eq. 12), and sampling starts at the
degraded image ``x1`` and steps back with the DDPM posterior ``p(x_{n-1} | x0_hat, x_n)``.
Any ``torch.nn.Module`` ``net(x, t)`` with ``t`` a ``(n,)`` long tensor of steps is accepted
(the lab's :func:`~trustlab.vision.diffusion.make_unet` is one). MixBridge
(:mod:`trustlab.security.mixbridge`) injects backdoors into such bridges.

Images are ``(n, C, H, W)`` floats in [0, 1]; the bridge works in ``[-1, 1]``.

References
----------
G.-H. Liu, A. Vahdat, D.-A. Huang, E. A. Theodorou, W. Nie, A. Anandkumar,
"I2SB: Image-to-Image Schrödinger Bridge", ICML 2023.
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError, ModelError
from trustlab.vision.classifiers import check_model, one_thread, require_torch, torch_generator
from trustlab.vision.diffusion import _denoising_loop, _to_model_space

__all__ = ["I2SBSchedule", "bridge_sample", "train_bridge"]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]


@dataclass(frozen=True)
class I2SBSchedule:
    """I2SB's symmetric beta schedule over ``interval`` discrete steps.

    ``betas`` rise as in Ho et al.'s "linear" schedule on the square-root scale from
    ``beta_min`` to ``beta_max / interval`` over the first half and mirror over the second
    (I2SB's ``make_beta_schedule`` then ``concatenate([b[:n//2], flip(b[:n//2])])``).

    Parameters
    ----------
    interval : int, default=1000
        Number of discrete steps (I2SB's ``--interval``).
    beta_max : float, default=0.3
        I2SB's ``--beta-max`` (the value MixBridge trains with).
    beta_min : float, default=1e-4
        First beta.

    Examples
    --------
    >>> s = I2SBSchedule()
    >>> round(float(s.std_fwd[-1]), 3), round(float(s.std_sb.max()), 3)
    (0.376, 0.188)
    """

    interval: int = 1000
    beta_max: float = 0.3
    beta_min: float = 1e-4

    @property
    def betas(self) -> np.ndarray:
        """The ``interval`` betas (float64)."""
        n = int(self.interval)
        b = np.linspace(self.beta_min**0.5, (self.beta_max / n) ** 0.5, n, dtype=np.float64) ** 2
        return np.concatenate([b[: n // 2], b[: n // 2][::-1], b[n // 2 : n // 2 + n % 2]])

    @property
    def std_fwd(self) -> np.ndarray:
        """``sqrt(sum_{s <= t} beta_s)``: the noise accumulated from the clean end."""
        return np.sqrt(np.cumsum(self.betas))

    @property
    def std_bwd(self) -> np.ndarray:
        """``sqrt(sum_{s >= t} beta_s)``: the noise accumulated from the degraded end."""
        return np.sqrt(np.cumsum(self.betas[::-1])[::-1])

    def marginal(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(mu0, mu1, sigma)`` of ``x_t = mu0 x0 + mu1 x1 + sigma eps`` for every step.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray, numpy.ndarray)
            Each of shape ``(interval,)``.
        """
        f2, b2 = self.std_fwd**2, self.std_bwd**2
        return b2 / (f2 + b2), f2 / (f2 + b2), np.sqrt(f2 * b2 / (f2 + b2))

    @property
    def std_sb(self) -> np.ndarray:
        """The bridge marginal's standard deviation ``sigma_t``."""
        return self.marginal()[2]


def check_pairs(X0: Any, X1: Any) -> tuple[Any, Any]:
    """``X0`` and ``X1`` as ``[-1, 1]`` tensors of equal shape (DataError naming the culprit)."""
    x0, x1 = _to_model_space(X0, "X0"), _to_model_space(X1, "X1")
    if x0.shape != x1.shape:
        raise DataError(
            f"X0 and X1 must be paired images of one shape; got {tuple(x0.shape)} and {tuple(x1.shape)}.",
            argument="X1",
        )
    return x0, x1


def check_fits(model: Any, x: Any, name: str) -> None:
    """Run ``model`` once on ``x[:1]`` at step 0 (eval mode, no gradients) to name a mismatch.

    A torch error there (channels, size) is a :class:`DataError` naming ``name``; a model that
    does not take ``(x, t)`` or returns an output not shaped like its input is a
    :class:`ModelError` naming ``model``.
    """
    torch = require_torch()
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    try:
        with torch.no_grad():
            xb, t = x[:1], torch.zeros(1, dtype=torch.long)
            out = model(xb, t, xb) if getattr(model, "takes_input_image", False) else model(xb, t)
    except TypeError as exc:
        raise ModelError(
            f"model must be a network model(x, t) taking a batch and its (n,) steps ({exc}).",
            argument="model",
        ) from None
    except RuntimeError as exc:
        raise DataError(
            f"{name} does not fit the network's input ({exc}); pass images of the shape it takes.",
            argument=name,
        ) from None
    finally:
        if hasattr(model, "train"):
            model.train(was_training)
    shape = tuple(getattr(out, "sample", out).shape)
    if shape[1:] != tuple(xb.shape[1:]):  # per image: a batch-specific oracle may broadcast
        raise ModelError(
            f"model must return images shaped like its input, {tuple(xb.shape[1:])}; got {shape[1:]}.",
            argument="model",
        )


@functools.lru_cache(maxsize=4)
def _loss_coefficients(schedule: I2SBSchedule) -> tuple[Any, ...]:
    """``(mu0, mu1, sigma, std_fwd)`` of every step as float32 tensors, built once per schedule."""
    torch = require_torch()
    return tuple(torch.as_tensor(a, dtype=torch.float32) for a in (*schedule.marginal(), schedule.std_fwd))


def bridge_loss(net: Any, x0: Any, x1: Any, t: Any, noise: Any, schedule: I2SBSchedule) -> Any:
    """I2SB's regression loss at steps ``t``: ``|net(x_t, t) - (x_t - x0) / s_fwd_t|^2`` (mean)."""
    torch = require_torch()
    mu0, mu1, sd, std_fwd = (a[t][:, None, None, None] for a in _loss_coefficients(schedule))
    xt = mu0 * x0 + mu1 * x1 + sd * noise
    out = net(xt, t)
    return torch.nn.functional.mse_loss(getattr(out, "sample", out), (xt - x0) / std_fwd)


@validate_params(
    {"steps": _POS_INT, "batch_size": _POS_INT, "lr": [Interval(numbers.Real, 0, None, closed="neither")]}
)
def train_bridge(
    model: Any,
    X0: Any,
    X1: Any,
    *,
    steps: int = 1000,
    lr: float = 2e-3,
    batch_size: int = 64,
    schedule: I2SBSchedule | None = None,
    random_state: Any = 0,
) -> Any:
    """Train a bridge network in place on boundary pairs ``(X0[i], X1[i])``; return it in eval mode.

    Each Adam step draws ``batch_size`` pairs (with replacement), a step ``t`` uniform on
    ``0 .. interval-1`` and the bridge marginal ``x_t`` between the pair, and regresses
    ``net(x_t, t)`` on ``(x_t - x0) / s_fwd_t`` (I2SB, Algorithm 1).

    Parameters
    ----------
    model : torch.nn.Module
        ``model(x, t)`` returns a tensor shaped like ``x``.
    X0, X1 : array-like of shape (n, C, H, W)
        Clean (target) and degraded (input) images in [0, 1], paired by row.
    steps, batch_size : int, default=(1000, 64)
        Adam steps and minibatch size (``min(batch_size, n)``).
    lr : float, default=2e-3
        Adam's learning rate.
    schedule : I2SBSchedule, optional
        Default :class:`I2SBSchedule()`.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds batches, steps and noise.

    Returns
    -------
    torch.nn.Module
        ``model``, trained, in eval mode.

    Examples
    --------
    >>> from trustlab.vision.diffusion import make_unet
    >>> X = np.random.default_rng(0).random((8, 1, 8, 8)).astype(np.float32)
    >>> train_bridge(make_unet(channels=4), X, X[::-1], steps=2).training
    False
    """
    check_model(model)
    x0, x1 = check_pairs(X0, X1)
    check_fits(model, x1, "X0")
    sched = schedule or I2SBSchedule()

    def loss(idx: Any, t: Any, noise: Any, gen: Any) -> Any:
        return bridge_loss(model, x0[idx], x1[idx], t, noise, sched)

    return _denoising_loop(model, x0, sched.interval, loss, steps, lr, batch_size, random_state)


def sampling_steps(interval: int, nfe: int) -> np.ndarray:
    """``nfe + 1`` steps from ``0`` to ``interval - 1``, evenly spaced (I2SB's ``space_indices``)."""
    return np.linspace(0, interval - 1, nfe + 1).round().astype(np.int64)


def predict_x0(model: Any, xt: Any, t: int, x1: Any, std_fwd: float) -> Any:
    """``x0_hat = x_t - s_fwd_t net(x_t, t)``; a model with ``takes_input_image`` also gets ``x1``."""
    torch = require_torch()
    steps = torch.full((xt.shape[0],), int(t), dtype=torch.long)
    out = model(xt, steps, x1) if getattr(model, "takes_input_image", False) else model(xt, steps)
    return xt - std_fwd * getattr(out, "sample", out)


@validate_params({"nfe": _POS_INT, "ot_ode": ["boolean"], "clip_denoised": ["boolean"]})
def bridge_sample(
    model: Any,
    X1: Any,
    *,
    nfe: int = 10,
    schedule: I2SBSchedule | None = None,
    ot_ode: bool = False,
    clip_denoised: bool = True,
    random_state: Any = 0,
) -> np.ndarray:
    """Translate degraded images ``X1`` with a trained bridge (I2SB's DDPM sampler); images in [0, 1].

    From ``x_N = x1`` each of ``nfe`` steps predicts ``x0_hat`` and draws ``x_{n'}`` from the
    posterior ``N(c0 x0_hat + c1 x_n, v)`` with ``c0 = d^2 / (s_{n'}^2 + d^2)``, ``c1 =
    s_{n'}^2 / (s_{n'}^2 + d^2)``, ``v = s_{n'}^2 d^2 / (s_{n'}^2 + d^2)``, ``s = s_fwd`` and
    ``d^2 = s_n^2 - s_{n'}^2`` (no noise at the last step, nor with ``ot_ode``).

    Parameters
    ----------
    model : torch.nn.Module or callable
        ``model(x, t)`` (or ``model(x, t, x1)`` when it has ``takes_input_image = True``, as a
        :class:`~trustlab.security.mixbridge.MixtureOfBridges` does).
    X1 : array-like of shape (n, C, H, W)
        Degraded images in [0, 1].
    nfe : int, default=10
        Network evaluations (I2SB samples with ``nfe`` up to ``interval - 1``).
    schedule : I2SBSchedule, optional
        The schedule the model was trained with; default :class:`I2SBSchedule()`.
    ot_ode : bool, default=False
        Deterministic (optimal-transport ODE) sampling.
    clip_denoised : bool, default=True
        Clip each ``x0_hat`` to [-1, 1].
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the posterior noise.

    Returns
    -------
    numpy.ndarray of shape (n, C, H, W)
        float32 in [0, 1].

    Examples
    --------
    >>> from trustlab.vision.diffusion import make_unet
    >>> X = np.zeros((2, 1, 8, 8), dtype=np.float32)
    >>> bridge_sample(make_unet(channels=4), X, nfe=2).shape
    (2, 1, 8, 8)
    """
    torch = require_torch()
    if not callable(model):
        raise DataError(
            f"model must be a torch module net(x, t); got {type(model).__name__}.", argument="model"
        )
    x1 = _to_model_space(X1, "X1")
    check_fits(model, x1, "X1")
    sched = schedule or I2SBSchedule()
    if nfe >= sched.interval:
        raise DataError(
            f"nfe must be below the schedule's {sched.interval} steps; got {nfe}.", argument="nfe"
        )
    gen = torch_generator(random_state)
    std = sched.std_fwd
    steps = sampling_steps(sched.interval, int(nfe))[::-1]
    xt = x1.clone()
    with one_thread(), torch.no_grad():
        for prev, n in zip(steps[1:], steps[:-1], strict=True):
            x0 = predict_x0(model, xt, int(n), x1, float(std[n]))
            if clip_denoised:
                x0 = x0.clamp(-1.0, 1.0)
            sp2, d2 = std[prev] ** 2, std[n] ** 2 - std[prev] ** 2
            xt = (d2 / (sp2 + d2)) * x0 + (sp2 / (sp2 + d2)) * xt
            if not ot_ode and prev > 0:
                xt = xt + float(np.sqrt(sp2 * d2 / (sp2 + d2))) * torch.randn(xt.shape, generator=gen)
    return ((xt.clamp(-1, 1) + 1) / 2).numpy().astype(np.float32)
