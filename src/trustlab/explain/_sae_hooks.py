"""Hook points of a user's torch model, and the SAE-spliced forward pass; re-exported by sae_metrics.

A hook point is either a ``trustlab.lm`` name of a ``transformers`` causal LM
(``blocks.{i}.resid_post`` ...) or the name of any submodule (``dict(model.named_modules())``),
so every model a user has locally (an encoder such as MiniLM, a causal LM, a plain torch
network) can be read (:func:`trustlab.explain.sae_data.collect_activations`) and spliced:
:func:`embedding_recovered` replaces the activation by an SAE's reconstruction and measures how
much of the model's output survives, the analogue of SAEBench's loss recovered for models
without a next-token loss.

References
----------
.. [1] Karvonen, Rager, Lin, Tigges, Bloom, Chanin, Lau, Farrell, McDougall, Ayonrinde, Till,
   Wearden, Conmy, Marks, Nanda. "SAEBench: A Comprehensive Benchmark for Sparse Autoencoders
   in Language Model Interpretability". ICML 2025, section 3.2.1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.explain._sae_common import _check_sae

__all__ = ["embedding_recovered", "forward_with_edit", "model_inputs", "resolve_hook_point", "sae_splice"]


def resolve_hook_point(model: Any, hook_point: Any) -> Any:
    """The submodule named ``hook_point``, or None when it is a ``trustlab.lm`` hook point.

    Raises ParameterError (argument ``hook_point``) listing some valid names otherwise.
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"model must be a torch.nn.Module, got {type(model).__name__}.", argument="model")
    modules = dict(model.named_modules())
    if isinstance(hook_point, str) and hook_point and hook_point in modules:
        return modules[hook_point]
    lm_names: list[str] = []
    if hasattr(model, "config"):
        try:
            from trustlab.lm.hooks import hook_points

            lm_names = hook_points(model)
        except (ImportError, ModelError):
            lm_names = []
    if isinstance(hook_point, str) and hook_point in lm_names:
        return None
    some = [m for m in modules if m][:6] + lm_names[:3]
    raise ParameterError(
        f"hook_point {hook_point!r} is not a submodule of the model nor a trustlab.lm hook point; "
        f"valid names include {', '.join(map(repr, some))} (see model.named_modules()).",
        argument="hook_point",
    )


def model_inputs(inputs: Any) -> dict[str, Any]:
    """``model(**kwargs)`` keyword arguments: a dict as given, token ids as ``input_ids``."""
    import torch

    if isinstance(inputs, dict):
        if not inputs:
            raise DataError(
                "inputs is an empty dict; pass token ids or model(**inputs) arguments.", argument="inputs"
            )
        return dict(inputs)
    return {"input_ids": torch.as_tensor(np.asarray(inputs))}


def sae_splice(sae: Any) -> Callable[[Any], Any]:
    """``f(x)``: the SAE's reconstruction of a ``(..., d)`` tensor, same shape and dtype."""
    import torch

    def replace(x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1]).detach().cpu().numpy().astype(np.float64)
        rec = sae.transform(flat) @ sae.W_dec_ + sae.b_dec_
        return torch.as_tensor(rec, dtype=x.dtype, device=x.device).reshape(x.shape)

    return replace


def forward_with_edit(
    model: Any, kwargs: dict[str, Any], hook_point: str, module: Any, edit: Callable[[Any], Any] | None
) -> Any:
    """``model(**kwargs)`` in eval mode, without gradients, the hook point's value edited.

    The value is replaced by ``edit(value)`` (``None``: unedited); ``module`` is
    :func:`resolve_hook_point`'s answer.
    """
    import torch

    if module is None:
        from trustlab.lm.hooks import run_with_hooks

        if "input_ids" not in kwargs:
            raise DataError(
                "a trustlab.lm hook point needs token ids (inputs['input_ids']).", argument="inputs"
            )

        edits = {hook_point: edit} if edit is not None else None
        return run_with_hooks(model, kwargs["input_ids"], [], edits=edits)["logits"]
    if edit is None:
        edit = _identity

    def hook(mod: Any, args: Any, out: Any, f: Callable[[Any], Any] = edit) -> Any:
        if isinstance(out, tuple | list):
            return type(out)([f(out[0]), *out[1:]])
        if not isinstance(out, torch.Tensor):
            raise ParameterError(
                f"hook_point {hook_point!r} returns a {type(out).__name__}, not a tensor; pick a submodule "
                "whose output is a tensor (e.g. a block or a layer inside it).",
                argument="hook_point",
            )
        return f(out)

    handle = module.register_forward_hook(hook) if edit is not _identity else None
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            return model(**kwargs)
    finally:
        if handle is not None:
            handle.remove()
        model.train(was_training)


def _identity(x: Any) -> Any:
    return x


def _final(out: Any) -> Any:
    for name in ("last_hidden_state", "logits"):
        if hasattr(out, name):
            return getattr(out, name)
    return out[0] if isinstance(out, tuple | list) else out


def embedding_recovered(model: Any, inputs: Any, hook_point: str, sae: Any) -> dict[str, float]:
    """Share of the model's output kept when the SAE's reconstruction replaces an activation.

    The analogue of SAEBench's loss recovered for models without a next-token loss (sentence
    encoders such as MiniLM): with ``o`` the model's output (``last_hidden_state``, else
    ``logits``, else its first tensor), ``o_sae`` the output with the activation at ``hook_point``
    replaced by the SAE's reconstruction and ``o_zero`` with it zero-ablated,
    ``score = 1 - sum ||o_sae - o||^2 / sum ||o_zero - o||^2`` over the output rows (real tokens
    only where an attention mask is given): 1 for a perfect reconstruction, 0 for one as harmful
    as removing the activation. SAEBench itself reports the cross-entropy version
    (:func:`~trustlab.explain.sae_metrics.loss_recovered`).

    Parameters
    ----------
    model : torch.nn.Module
        Any local model: a ``transformers`` encoder or LM, or a plain torch network.
    inputs : array-like of int (batch, seq), tensor, or dict of tensors
        Token ids, or the keyword arguments of ``model(**inputs)`` (e.g. a tokenizer's output).
    hook_point : str
        A submodule name (``model.named_modules()``), or a ``trustlab.lm`` hook point of a causal LM.
    sae : SparseAutoencoder
        Fitted on activations from that point (:func:`~trustlab.explain.sae_data.collect_activations`).

    Returns
    -------
    dict
        ``mse_sae``, ``mse_zero`` (mean squared error of the output per row), ``cosine_sae``
        (mean cosine of the spliced and the original output rows) and ``score``.

    Raises
    ------
    ParameterError
        ``hook_point`` is not a hook point of the model (the message lists some that are).

    Examples
    --------
    >>> import torch
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> from trustlab.explain.sae_data import collect_activations
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    >>> x = {"input": torch.randn(64, 4, generator=torch.Generator().manual_seed(0))}
    >>> sae = SparseAutoencoder(16, k=8, batch_size=32, n_steps=50, learning_rate=1e-2)
    >>> sae = sae.fit(collect_activations(net, x, "1"))
    >>> sorted(embedding_recovered(net, x, "1", sae))
    ['cosine_sae', 'mse_sae', 'mse_zero', 'score']
    """
    import torch

    sae = _check_sae(sae)
    module = resolve_hook_point(model, hook_point)
    kwargs = model_inputs(inputs)
    outs = [
        _final(forward_with_edit(model, kwargs, hook_point, module, edit)).float()
        for edit in (None, sae_splice(sae), torch.zeros_like)
    ]
    mask = kwargs.get("attention_mask")
    flat = []
    for o in outs:
        if mask is not None and o.ndim == 3 and tuple(o.shape[:2]) == tuple(mask.shape):
            o = o[torch.as_tensor(mask).bool()]
        flat.append(o.reshape(-1, o.shape[-1]).double())
    ref, spliced, zero = flat
    mse_sae = float(((spliced - ref) ** 2).sum(1).mean())
    mse_zero = float(((zero - ref) ** 2).sum(1).mean())
    cosine = float(torch.nn.functional.cosine_similarity(spliced, ref, dim=1).mean())
    return {
        "mse_sae": mse_sae,
        "mse_zero": mse_zero,
        "cosine_sae": cosine,
        "score": 1.0 - mse_sae / mse_zero if mse_zero > 0 else float("nan"),
    }
