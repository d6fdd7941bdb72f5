"""LoRA fine-tuning of the vision lab's tiny DDPM: low-rank adapters, merging, a cached digit pair.

FineXtract (:mod:`trustlab.privacy.finextract`) attacks both full (DreamBooth) fine-tunes and
LoRA fine-tunes; this module builds the lab's LoRA fine-tune. LoRA (Hu et al.) freezes a
layer's weight ``W`` and learns ``W + (alpha / r) B A`` with ``A`` of rank ``r``: for a linear
layer ``A`` is ``r x in`` and ``B`` is ``out x r``; for a convolution (as ``peft`` does it)
``A`` is a convolution with the layer's kernel, stride and padding into ``r`` channels and
``B`` a 1x1 convolution back to ``out``. ``B`` starts at zero, so the adapted model starts as
the base; ``A`` starts Gaussian with standard deviation ``1 / r`` (``peft``'s
``init_lora_weights="gaussian"``, the ``diffusers`` LoRA training scripts' choice).

The adapters are written here (a few dozen lines) instead of taken from ``peft``: importing
``peft`` costs about 4 s of CPU (more than a fast test may spend), the lab's UNet has no
attention projections for its ``target_modules`` defaults, and a merged adapter is an exact
sum of weights, so the fine-tuned model is a plain ``make_unet`` module any FineXtract call
accepts. ``tests/privacy/test_finextract_lora.py`` checks the adapters against ``peft``'s
where it is installed.

References
----------
E. J. Hu et al., "LoRA: Low-Rank Adaptation of Large Language Models", ICLR 2022.
X. Wu, J. Zhang, Z. S. Wu, "Leveraging Model Guidance to Extract Training Data from
Personalized Diffusion Models", ICML 2025 (their LoRA runs: ``diffusers``'
``train_text_to_image_lora.py``, rank 64, ``lora_alpha = rank``, learning rate 1e-4 against
2e-6 for full fine-tuning, the same 200 steps per image).
"""

from __future__ import annotations

import copy
import functools
import io
import numbers
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import cache_root, save_npz, spec_digest
from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ModelError, ParameterError
from trustlab.vision.classifiers import check_labels, check_model, require_torch
from trustlab.vision.diffusion import DDPMSchedule, _denoising_loop, _to_model_space
from trustlab.vision.diffusion_digits import (
    DigitsDDPMRecipe,
    _check_recipe,
    digits_ddpm_pair,
    digits_finetune_images,
)
from trustlab.vision.diffusion_digits_conditional import (
    ConditionalDigitsPairRecipe,
    conditional_digits_finetune_images,
    digits_conditional_ddpm_pair,
)

__all__ = [
    "LoRARecipe",
    "add_lora",
    "digits_conditional_lora_ddpm_pair",
    "digits_lora_ddpm_pair",
    "lora_parameters",
    "merge_lora",
    "train_lora_ddpm",
]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]


@functools.cache
def _lora_class() -> Any:
    torch = require_torch()
    nn = torch.nn

    class LoRALayer(nn.Module):  # type: ignore[name-defined]
        """``base(x) + (alpha / r) B(A(x))`` around a frozen ``nn.Linear`` or ``nn.Conv2d``."""

        def __init__(self, base: Any, rank: int, alpha: float) -> None:
            super().__init__()
            self.base_layer = base
            self.scaling = float(alpha) / rank
            if isinstance(base, nn.Linear):
                self.lora_A = nn.Linear(base.in_features, rank, bias=False)
                self.lora_B = nn.Linear(rank, base.out_features, bias=False)
            else:
                self.lora_A = nn.Conv2d(
                    base.in_channels, rank, base.kernel_size, base.stride, base.padding, bias=False
                )
                self.lora_B = nn.Conv2d(rank, base.out_channels, 1, bias=False)
            nn.init.normal_(self.lora_A.weight, std=1.0 / rank)
            nn.init.zeros_(self.lora_B.weight)

        def delta_weight(self) -> Any:
            """``(alpha / r) B A`` shaped like the base layer's weight."""
            b = self.lora_B.weight.reshape(self.lora_B.weight.shape[0], -1)
            a = self.lora_A.weight.reshape(self.lora_A.weight.shape[0], -1)
            return (self.scaling * b @ a).reshape(self.base_layer.weight.shape)

        def forward(self, x: Any) -> Any:
            return self.base_layer(x) + self.scaling * self.lora_B(self.lora_A(x))

    return LoRALayer


def _targets(model: Any, rank: int) -> list[str]:
    """Names of the ``Linear`` / ``Conv2d`` layers where a rank-``rank`` update is low-rank."""
    nn = require_torch().nn
    out = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Linear):
            dims = (mod.in_features, mod.out_features)
        elif isinstance(mod, nn.Conv2d) and mod.groups == 1:
            dims = (mod.in_channels * int(np.prod(mod.kernel_size)), mod.out_channels)
        else:
            continue
        if min(dims) > rank:
            out.append(name)
    return out


@validate_params({"rank": _POS_INT, "alpha": [None, Interval(numbers.Real, 0, None, closed="neither")]})
def add_lora(model: Any, *, rank: int = 4, alpha: float | None = None, seed: int = 0) -> Any:
    """A copy of ``model`` with its weights frozen and LoRA adapters on its conv and linear layers.

    Every ``nn.Linear`` and (ungrouped) ``nn.Conv2d`` whose update can be of rank below
    ``min(fan_in, fan_out)`` gets an adapter (in the lab's UNet: all but the 1-channel output
    convolution); transposed convolutions and normalisations stay frozen, as in ``peft``.

    Parameters
    ----------
    model : torch.nn.Module
        The base denoiser (left unchanged).
    rank : int, default=4
        ``r``. The paper's LoRA runs use 64 on Stable Diffusion's 320-1280-wide attention
        projections (1/5 to 1/20 of the width); 4 is 1/4 and 1/8 of the lab UNet's 16 and 32.
    alpha : float, optional
        ``lora_alpha``; default ``rank`` (scaling 1, the ``diffusers`` scripts' choice).
    seed : int, default=0
        Seeds the Gaussian initialisation of the ``A`` matrices.

    Returns
    -------
    torch.nn.Module
        Only the adapters' ``lora_A`` / ``lora_B`` weights require gradients.

    Examples
    --------
    >>> from trustlab.vision.diffusion import make_unet
    >>> net = add_lora(make_unet(channels=8), rank=2)
    >>> sum(p.numel() for p in lora_parameters(net)) < sum(p.numel() for p in net.parameters()) // 4
    True
    """
    torch = require_torch()
    check_model(model)
    names = _targets(model, int(rank))
    if not names:
        raise ModelError(
            f"model has no Linear or Conv2d layer wider than rank={rank}; pass a smaller rank.",
            argument="model",
        )
    out = copy.deepcopy(model)
    out.requires_grad_(False)
    cls = _lora_class()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        for name in names:
            parent_name, _, child = name.rpartition(".")
            parent = out.get_submodule(parent_name) if parent_name else out
            setattr(parent, child, cls(getattr(parent, child), int(rank), float(alpha or rank)))
    return out.train(model.training)


def lora_parameters(model: Any) -> list[Any]:
    """The trainable adapter weights of a model made by :func:`add_lora`.

    Parameters
    ----------
    model : torch.nn.Module

    Returns
    -------
    list of torch.nn.Parameter
        Every ``lora_A`` and ``lora_B`` weight, in module order.

    Examples
    --------
    >>> from trustlab.vision.diffusion import make_unet
    >>> len(lora_parameters(add_lora(make_unet(channels=8), rank=2))) % 2
    0
    """
    return [p for m in _adapters(model) for p in (m.lora_A.weight, m.lora_B.weight)]


def _adapters(model: Any) -> list[Any]:
    """The adapter modules of ``model``; a ModelError names it when there are none."""
    torch = require_torch()
    cls = _lora_class()
    found = [m for m in model.modules() if isinstance(m, cls)] if isinstance(model, torch.nn.Module) else []
    if not found:
        raise ModelError("model has no LoRA adapters; pass a model made by add_lora.", argument="model")
    return found


def merge_lora(model: Any) -> Any:
    """The base architecture with each adapter folded in: ``W + (alpha / r) B A`` (exact).

    Parameters
    ----------
    model : torch.nn.Module
        Made by :func:`add_lora` (and trained).

    Returns
    -------
    torch.nn.Module
        A copy with the base model's module names and shapes, so it can be compared with the
        base (FineXtract checks the two share an architecture).

    Examples
    --------
    >>> import torch
    >>> from trustlab.vision.diffusion import make_unet
    >>> base = make_unet(channels=8).eval()
    >>> merged = merge_lora(add_lora(base, rank=2))
    >>> x, t = torch.zeros(1, 1, 8, 8), torch.tensor([10])
    >>> bool(torch.allclose(merged(x, t), base(x, t)))
    True
    """
    torch = require_torch()
    cls = _lora_class()
    _adapters(model)
    out = copy.deepcopy(model)
    with torch.no_grad():
        for name, mod in list(out.named_modules()):
            if isinstance(mod, cls):
                base = mod.base_layer
                base.weight += mod.delta_weight()
                parent_name, _, child = name.rpartition(".")
                setattr(out.get_submodule(parent_name) if parent_name else out, child, base)
    out.requires_grad_(True)
    return out


@validate_params(
    {"steps": _POS_INT, "batch_size": _POS_INT, "lr": [Interval(numbers.Real, 0, None, closed="neither")]}
)
def train_lora_ddpm(
    model: Any,
    X: Any,
    y: Any = None,
    *,
    steps: int = 800,
    lr: float = 3e-3,
    batch_size: int = 64,
    schedule: DDPMSchedule | None = None,
    random_state: Any = 0,
) -> Any:
    """Train the adapters of an :func:`add_lora` model in place (Ho et al.'s loss); eval mode.

    The same loop as :func:`~trustlab.vision.diffusion.train_ddpm` (Adam, ``t`` uniform,
    ``|eps - model(x_t, t)|^2``), over the adapter weights only.

    Parameters
    ----------
    model : torch.nn.Module
        Made by :func:`add_lora`.
    X : array-like of shape (n, C, H, W)
        Images in [0, 1].
    y : array-like of shape (n,), optional
        Class labels ("prompts") of a conditional model ``model(x, t, class_labels=y)``, passed
        at every step without dropout (DreamBooth fine-tunes with the prompt every step).
    steps, batch_size : int, default=(800, 64)
        Adam steps and minibatch size (capped at ``n``).
    lr : float, default=3e-3
        Adam's learning rate (3x the lab's full fine-tuning rate; see :class:`LoRARecipe`).
    schedule : DDPMSchedule, optional
        Default :class:`~trustlab.vision.diffusion.DDPMSchedule()`.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds batches, timesteps and noise.

    Returns
    -------
    torch.nn.Module
        ``model``, its adapters trained, in eval mode.

    Examples
    --------
    >>> from trustlab.vision.diffusion import make_unet
    >>> X = np.random.default_rng(0).random((4, 1, 8, 8)).astype(np.float32)
    >>> net = train_lora_ddpm(add_lora(make_unet(channels=4), rank=1), X, steps=2)
    >>> net.training
    False
    """
    torch = require_torch()
    check_model(model)
    params = lora_parameters(model)
    if not params:
        raise ModelError("model has no LoRA adapters; wrap it with add_lora first.", argument="model")
    x0 = _to_model_space(X, "X")
    acp = torch.as_tensor((schedule or DDPMSchedule()).alphas_cumprod, dtype=torch.float32)
    labels = None
    if y is not None:
        n_classes = int(getattr(model, "n_classes", 0))
        if n_classes < 1:
            raise ParameterError("y is given but model has no int n_classes; pass y=None.", argument="y")
        labels = torch.as_tensor(check_labels(y, len(x0), n_classes, "y"))

    def loss(idx: Any, t: Any, noise: Any, gen: Any) -> Any:
        a = acp[t][:, None, None, None]
        kwargs = {} if labels is None else {"class_labels": labels[idx]}
        out = model(a.sqrt() * x0[idx] + (1 - a).sqrt() * noise, t, **kwargs)
        return torch.nn.functional.mse_loss(out, noise)

    return _denoising_loop(model, x0, len(acp), loss, steps, lr, batch_size, random_state, params=params)


@dataclass(frozen=True)
class LoRARecipe:
    """How the lab's LoRA fine-tune of a digit DDPM is trained (the base is the full pair's).

    Parameters
    ----------
    rank : int, default=4
        ``r`` (the paper: 64 on Stable Diffusion's much wider layers; see :func:`add_lora`).
    alpha : float, default=4.0
        ``lora_alpha`` (``= rank``, scaling 1, as in ``diffusers``' LoRA scripts).
    steps : int, default=800
        Adam steps, 100 per image: the same as the lab's full fine-tune (the paper trains LoRA
        and DreamBooth for the same number of steps).
    lr : float, default=3e-3
        3x the full fine-tune's 1e-3: the rate of {1e-3, 2e-3, 3e-3, 1e-2, 5e-2} whose adapters
        fit the fine-tuning images best (class 9). The paper's LoRA rate is 50x its full rate
        (1e-4 vs 2e-6); 5e-2 here leaves the loss at the base model's (docs/privacy/finextract.md).
    seed : int, default=0
        Seeds the adapters' initialisation and the minibatches.

    Examples
    --------
    >>> LoRARecipe().rank
    4
    """

    rank: int = 4
    alpha: float = 4.0
    steps: int = 800
    lr: float = 3e-3
    seed: int = 0


_SHIPPED = "ddpm_digits_lora.npz"


def _adapter_arrays(model: Any) -> dict[str, np.ndarray]:
    cls = _lora_class()
    return {
        f"{name}/{part}": getattr(mod, part).weight.detach().numpy().astype(np.float16)
        for name, mod in model.named_modules()
        if isinstance(mod, cls)
        for part in ("lora_A", "lora_B")
    }


def _cached_adapters(
    base: Any, key: str, lr: LoRARecipe, train: Any, cache_dir: str | Path | None, merged: bool
) -> Any:
    """The adapters stored under ``key``: shipped, cached, or trained by ``train()`` and cached."""
    torch = require_torch()
    raw = resources.files("trustlab.vision").joinpath(_SHIPPED).read_bytes()
    with np.load(io.BytesIO(raw)) as f:
        arrays = {k.split("/", 1)[1]: f[k] for k in f.files if k.startswith(key + "/")}
    if not arrays:
        path = cache_root(cache_dir, "vision") / f"ddpm-lora-{key}.npz"
        if not path.is_file():
            save_npz(path, _adapter_arrays(train()))
        with np.load(path) as f:
            arrays = {k: f[k] for k in f.files}
    net = add_lora(base, rank=lr.rank, alpha=lr.alpha, seed=lr.seed)
    with torch.no_grad():
        for k, w in arrays.items():
            name, part = k.rsplit("/", 1)
            getattr(net.get_submodule(name), part).weight.copy_(torch.as_tensor(w.astype(np.float32)))
    return merge_lora(net).eval() if merged else net.eval()


def _check_lora(lora: Any) -> LoRARecipe:
    lr = LoRARecipe() if lora is None else lora
    if not isinstance(lr, LoRARecipe):
        raise ParameterError(f"lora must be a LoRARecipe; got {type(lr).__name__}.", argument="lora")
    if lr.rank < 1 or lr.alpha <= 0 or lr.steps < 1 or lr.lr <= 0:
        raise ParameterError("lora: rank, alpha, steps and lr must be positive.", argument="lora")
    return lr


def digits_lora_ddpm_pair(
    recipe: DigitsDDPMRecipe | None = None,
    lora: LoRARecipe | None = None,
    *,
    merged: bool = True,
    cache_dir: str | Path | None = None,
) -> tuple[Any, Any]:
    """The lab's pretrained digit DDPM and a LoRA fine-tune of it on the full fine-tune's images.

    The pretrained model is :func:`~trustlab.vision.digits_ddpm_pair` ``(recipe)``'s (shipped
    or cached); the adapters are trained on :func:`~trustlab.vision.digits_finetune_images`
    ``(recipe)`` (the same 8 images as the full fine-tune). The default recipe's adapters
    (rank 4 and rank 8) ship with trustlab; any other pair is trained on first use (6-9 s on
    one CPU thread) and kept in ``cache_dir`` (default ``$TRUSTLAB_CACHE/vision`` or
    ``~/.cache/trustlab/vision``) as float16 adapter weights (30-50 KB) under a hash of both
    recipes; they are loaded back as float32, so a model is the same just trained or read.

    Parameters
    ----------
    recipe : DigitsDDPMRecipe, optional
        The base model and fine-tuning images (its ``finetune_steps`` / ``finetune_lr`` are
        the full fine-tune's and do not apply). Default :class:`DigitsDDPMRecipe()`.
    lora : LoRARecipe, optional
        Default :class:`LoRARecipe()`.
    merged : bool, default=True
        Return the fine-tuned model with the adapters merged (:func:`merge_lora`), the base
        architecture; False returns the adapter-wrapped model (same predictions).
    cache_dir : str or Path, optional
        Where trained adapters are kept.

    Returns
    -------
    pretrained, finetuned : torch.nn.Module
        In eval mode.

    Examples
    --------
    >>> from trustlab.vision.diffusion import ddim_sample
    >>> pre, ft = digits_lora_ddpm_pair()
    >>> ddim_sample(ft, 2, num_inference_steps=5).shape
    (2, 1, 8, 8)
    """
    r = _check_recipe(recipe)
    lr = _check_lora(lora)
    pre = _pretrained(r, cache_dir)
    key = spec_digest(
        {
            "base": r.pretrain_fingerprint(),
            "images": [r.finetune_class, r.n_finetune, r.seed, r.batch_size],
            "lora": asdict(lr),
        }
    )

    def train() -> Any:
        net = add_lora(pre, rank=lr.rank, alpha=lr.alpha, seed=lr.seed)
        imgs = digits_finetune_images(r)
        return train_lora_ddpm(
            net, imgs, steps=lr.steps, lr=lr.lr, batch_size=r.batch_size, random_state=r.seed + 1
        )

    return pre, _cached_adapters(pre, key, lr, train, cache_dir, merged)


def _pretrained(r: DigitsDDPMRecipe, cache_dir: str | Path | None) -> Any:
    """The recipe's pretrained model (shipped when its pretraining is the default's)."""
    if r.pretrain_fingerprint() == DigitsDDPMRecipe().pretrain_fingerprint():
        return digits_ddpm_pair(cache_dir=cache_dir)[0]  # shipped
    return digits_ddpm_pair(r, cache_dir=cache_dir)[0]


def digits_conditional_lora_ddpm_pair(
    recipe: ConditionalDigitsPairRecipe | None = None,
    lora: LoRARecipe | None = None,
    *,
    merged: bool = True,
    cache_dir: str | Path | None = None,
) -> tuple[Any, Any]:
    """The lab's class-conditional pretrained DDPM and a LoRA fine-tune of it with the prompt.

    DreamBooth-LoRA at 8x8: the adapters (on the UNet's conv and linear layers; the class
    embedding, like DreamBooth-LoRA's text encoder, stays frozen) are trained on
    :func:`~trustlab.vision.diffusion_digits_conditional.conditional_digits_finetune_images`
    ``(recipe)`` with the label ``recipe.finetune_class`` at every step, trained on first use
    (~8 s) into the cache as for :func:`digits_lora_ddpm_pair`.

    Parameters
    ----------
    recipe : ConditionalDigitsPairRecipe, optional
        The base model (shipped for the default), the class and the images.
    lora : LoRARecipe, optional
        Default :class:`LoRARecipe()`.
    merged : bool, default=True
        Merge the adapters into the base architecture.
    cache_dir : str or Path, optional
        Where trained adapters are kept.

    Returns
    -------
    pretrained, finetuned : torch.nn.Module
        ``model(x, t, class_labels=y)`` noise predictors in eval mode.

    Examples
    --------
    >>> pre, ft = digits_conditional_lora_ddpm_pair()  # doctest: +SKIP
    """
    from trustlab.vision.diffusion_digits_conditional import _check as _check_cond

    r = _check_cond(recipe)
    lr = _check_lora(lora)
    pre = digits_conditional_ddpm_pair(
        r if r.pretrain_fingerprint() != ConditionalDigitsPairRecipe().pretrain_fingerprint() else None,
        cache_dir=cache_dir,
    )[0]
    key = spec_digest(
        {"conditional": True, "base": r.pretrain_fingerprint(), "recipe": asdict(r), "lora": asdict(lr)}
    )

    def train() -> Any:
        net = add_lora(pre, rank=lr.rank, alpha=lr.alpha, seed=lr.seed)
        imgs = conditional_digits_finetune_images(r)
        labels = np.full(len(imgs), r.finetune_class)
        return train_lora_ddpm(
            net, imgs, labels, steps=lr.steps, lr=lr.lr, batch_size=r.batch_size, random_state=r.seed + 1
        )

    return pre, _cached_adapters(pre, key, lr, train, cache_dir, merged)
