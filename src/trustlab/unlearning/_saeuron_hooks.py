"""SAeUron's torch side: the model, the DDIM sampler with guidance, capture and the SAE hook.

Private helpers of :mod:`trustlab.unlearning.saeuron`. The hook point's output is read as a
set of *patches*: ``(n, C, H, W)`` feature maps give ``n H W`` rows of ``C`` numbers (the
paper's layout, one SAE input per spatial position), ``(n, L, C)`` token sequences ``n L``
rows, ``(n, C)`` vectors ``n`` rows. A tuple output (``diffusers`` blocks) is read and
rewritten in its first element.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.vision._pipeline import is_pipeline, pipeline_parts
from trustlab.vision.diffusion import DDPMSchedule


def resolve_model(model: Any, schedule: Any) -> tuple[Any, np.ndarray, bool]:
    """The denoiser, its schedule's ``alphas_cumprod`` and whether ``model`` was a pipeline.

    A ``diffusers`` pipeline (``.unet`` and ``.scheduler``) gives its ``.unet`` and its
    scheduler's schedule (read as FineXtract reads it); a ``schedule`` given beside it must
    match. Any other ``model`` is taken as the denoiser, with ``schedule`` (default
    :class:`~trustlab.vision.DDPMSchedule`).
    """
    if not is_pipeline(model):
        return model, (schedule or DDPMSchedule()).alphas_cumprod, False
    parts = pipeline_parts(model, "model", "SAeUron")
    acp = parts.alphas_cumprod
    if schedule is not None:
        mine = schedule.alphas_cumprod
        if mine.shape != acp.shape or not np.allclose(mine, acp, rtol=1e-5, atol=1e-7):
            raise ParameterError(
                "schedule differs from the pipeline's scheduler (its alphas_cumprod); leave "
                "schedule=None to use the pipeline's own.",
                argument="schedule",
            )
    return parts.unet, acp, True


def resolve_hook(model: Any, hook: Any) -> Any:
    """The submodule named by ``hook`` (a dotted name of ``model.named_modules()`` or a module)."""
    if not isinstance(model, torch.nn.Module):
        raise ModelError(
            f"model must be a torch.nn.Module noise predictor (e.g. a diffusers UNet2DModel) or a "
            f"diffusers pipeline whose .unet is one; got {type(model).__name__}.",
            argument="model",
        )
    if isinstance(hook, torch.nn.Module):
        if not any(m is hook for m in model.modules()):
            raise ParameterError(
                "hook must be a submodule of model; pass one of its modules.", argument="hook"
            )
        return hook
    names = dict(model.named_modules())
    if not isinstance(hook, str) or hook not in names or hook == "":
        some = ", ".join(list(n for n in names if n)[:8])
        raise ParameterError(
            f"hook must name a submodule of model (model.named_modules()), e.g. one of: {some}; "
            f"got {hook!r}.",
            argument="hook",
        )
    return names[hook]


def split_output(out: Any) -> tuple[Any, Callable[[Any], Any]]:
    """The activation tensor of a hook output and a function putting a new one back."""
    if isinstance(out, tuple):
        first = out[0]
        return first, lambda new: (new, *out[1:])
    return out, lambda new: new


def to_rows(act: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``(n_patches_total, C)`` rows of an activation and the inverse reshaping."""
    if not isinstance(act, torch.Tensor) or act.ndim not in (2, 3, 4):
        raise ModelError(
            "the hook point must output a tensor of shape (n, C), (n, L, C) or (n, C, H, W); got "
            f"{type(act).__name__} {tuple(getattr(act, 'shape', ()))}.",
            argument="hook",
        )
    if act.ndim == 4:
        n, c, h, w = act.shape
        rows = act.permute(0, 2, 3, 1).reshape(-1, c)
        return rows, lambda r: r.reshape(n, h, w, c).permute(0, 3, 1, 2)
    shape = act.shape
    return act.reshape(-1, shape[-1]), lambda r: r.reshape(shape)


def patches_per_sample(act: Any) -> int:
    """How many SAE rows one sample of this activation gives."""
    return int(np.prod(act.shape[2:])) if act.ndim == 4 else (int(act.shape[1]) if act.ndim == 3 else 1)


class TorchSAE:
    """The fitted :class:`~trustlab.explain.sae.SparseAutoencoder`'s encode/decode in torch."""

    def __init__(self, sae: Any) -> None:
        self.W_enc = torch.as_tensor(sae.W_enc_, dtype=torch.float32)
        self.b_enc = torch.as_tensor(sae.b_enc_, dtype=torch.float32)
        self.W_dec = torch.as_tensor(sae.W_dec_, dtype=torch.float32)
        self.b_dec = torch.as_tensor(sae.b_dec_, dtype=torch.float32)
        self.architecture, self.k, self.threshold = sae.architecture, int(sae.k), float(sae.threshold_)

    def encode(self, x: Any) -> Any:
        """``sae.transform`` on a float32 tensor (the same rule: TopK, threshold or ReLU)."""
        pre = torch.relu(x.float() @ self.W_enc + self.b_enc)
        if self.architecture == "topk":
            vals, idx = pre.topk(min(self.k, pre.shape[1]), dim=1)
            return torch.zeros_like(pre).scatter(1, idx, vals)
        if self.architecture in ("batchtopk", "matryoshka"):
            return torch.where(pre > self.threshold, pre, torch.zeros_like(pre))
        return pre

    def decode(self, z: Any) -> Any:
        return z @ self.W_dec + self.b_dec


@contextlib.contextmanager
def timestep_tracker(model: Any) -> Iterator[dict[str, int]]:
    """Record the timestep of each ``model(x, t, ...)`` call (``t`` positional or ``timestep=``)."""
    state = {"t": -1}

    def pre_hook(module: Any, args: Any, kwargs: Any) -> None:
        t = args[1] if len(args) > 1 else kwargs.get("timestep", kwargs.get("t"))
        if t is None:
            raise ModelError(
                "model was called without a timestep; SAeUron needs model(x, t, ...).", argument="model"
            )
        state["t"] = int(torch.as_tensor(t).reshape(-1)[0])

    handle = model.register_forward_pre_hook(pre_hook, with_kwargs=True)
    try:
        yield state
    finally:
        handle.remove()


@contextlib.contextmanager
def capture(module: Any, sink: list[Any], keep: Callable[[Any], Any]) -> Iterator[None]:
    """Append ``keep(activation)`` of each forward pass of ``module`` to ``sink``."""

    def hook(mod: Any, args: Any, out: Any) -> None:
        sink.append(keep(split_output(out)[0].detach()))

    handle = module.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


class Intervention:
    """SAeUron's masked feature scaling at one hook point, per timestep (the paper's eq. 4).

    For each step ``s`` with selected features ``F_s``: every patch's latents ``f_i`` with
    ``i`` in ``F_s`` and ``f_i > mean_act[s, i]`` (the feature's average activation over all
    concepts) become ``gamma * mu_c[s, i] * f_i`` (``mu_c`` the mean activation on the
    concept being removed); the decoded latents plus the SAE's reconstruction error (when
    ``preserve_error``) replace the activation.
    """

    def __init__(
        self,
        tsae: TorchSAE,
        timesteps: np.ndarray,
        features: list[np.ndarray],
        scales: list[np.ndarray],
        thresholds: list[np.ndarray],
        preserve_error: bool,
        tracker: dict[str, int],
    ) -> None:
        self.tsae, self.timesteps, self.tracker = tsae, np.asarray(timesteps), tracker
        self.features = [torch.as_tensor(f, dtype=torch.long) for f in features]
        self.scales = [torch.as_tensor(s, dtype=torch.float32) for s in scales]
        self.thresholds = [torch.as_tensor(t, dtype=torch.float32) for t in thresholds]
        self.preserve_error = preserve_error
        self.n_calls = 0
        self.n_scaled = 0

    def step_index(self) -> int:
        """The fitted step nearest the model's current timestep."""
        return int(np.argmin(np.abs(self.timesteps - self.tracker["t"])))

    def __call__(self, module: Any, args: Any, out: Any) -> Any:
        act, put_back = split_output(out)
        s = self.step_index()
        idx = self.features[s]
        self.n_calls += 1
        if idx.numel() == 0:
            return out
        rows, unshape = to_rows(act)
        with torch.no_grad():
            x = rows.float()
            z = self.tsae.encode(x)
            recon = self.tsae.decode(z)
            sel = z[:, idx]
            mask = sel > self.thresholds[s]
            self.n_scaled += int(mask.sum())
            z[:, idx] = torch.where(mask, sel * self.scales[s], sel)
            new = self.tsae.decode(z)
            if self.preserve_error:
                new = new + (x - recon)
        return put_back(unshape(new.to(act.dtype)))


def guided_eps(
    model: Any, labels: Any, guidance_scale: float, null_label: int | None
) -> Callable[[Any, Any], Any]:
    """``eps(x, t)`` of a (conditional) denoiser, with classifier-free guidance when asked.

    Unconditional (``labels is None``): ``model(x, t)``. Conditional: ``model(x, t,
    class_labels=y)``; with ``guidance_scale != 1`` one batched call on ``[null; y]`` (as
    Stable Diffusion's pipeline does, so a hook sees both halves) and
    ``eps_u + w (eps_c - eps_u)``.
    """

    def call(x: Any, t: Any, y: Any) -> Any:
        try:
            out = model(x, t) if y is None else model(x, t, class_labels=y)
        except TypeError as exc:
            if y is None or "class_labels" not in str(exc):
                raise
            raise ModelError(
                f"model does not take class_labels ({exc}); pass conditional=False for an "
                "unconditional denoiser.",
                argument="conditional",
            ) from exc
        except RuntimeError as exc:  # a torch shape error: the noise does not fit the model
            raise DataError(
                f"X does not fit the model's input ({exc}); pass starting noise of the shape the model "
                "generates, (n, C, H, W).",
                argument="X",
            ) from exc
        return getattr(out, "sample", out)

    def eps(x: Any, t: Any) -> Any:
        if labels is None:
            return call(x, t, None)
        if guidance_scale == 1.0:
            return call(x, t, labels)
        null = torch.full_like(labels, int(null_label if null_label is not None else 0))
        e = call(torch.cat([x, x]), torch.cat([t, t]), torch.cat([null, labels]))
        e_u, e_c = e.chunk(2)
        return e_u + guidance_scale * (e_c - e_u)

    return eps


def check_noise(X: Any, name: str = "X") -> Any:
    """Starting noise ``x_T``: a finite float array of shape ``(n, C, H, W)`` (n >= 1)."""
    try:
        arr = np.asarray(X, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"{name} must be a float array of starting noise (n, C, H, W).", argument=name
        ) from exc
    if arr.ndim != 4 or arr.shape[0] < 1:
        raise DataError(
            f"{name} must be starting noise of shape (n, C, H, W) with n >= 1, e.g. "
            f"np.random.default_rng(0).standard_normal((n, 1, 8, 8)); got shape {arr.shape}.",
            argument=name,
        )
    if not np.all(np.isfinite(arr)):
        raise DataError(f"{name} contains NaN or inf; pass finite Gaussian noise.", argument=name)
    return torch.as_tensor(arr)
