"""Checks and interventions of :mod:`trustlab.security.steering_transfer`: hooks, vocabularies, steering.

Split from the main module to keep each under the size limit; the public names are re-exported
there. References: Oozeer et al., "Activation Space Interventions Can Be Transferred Between
Large Language Models", ICML 2025; Turner et al., "Activation Addition", 2023; Arditi et al.,
"Refusal in Language Models Is Mediated by a Single Direction", NeurIPS 2024.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from trustlab._param_validation import Options, validate_params
from trustlab._validation import check_token_ids
from trustlab.errors import DataError, ModelError, ParameterError

__all__ = ["check_vocabularies", "greedy_generate", "steer"]


_HOOK = re.compile(r"^blocks\.(-?\d+)\.(resid_post|attn_out|mlp_out)$")


# -- checks ---------------------------------------------------------------------------------
def _layout(model: Any, name: str) -> Any:
    from trustlab.lm.hooks import _layout as lay

    try:
        return lay(model)
    except ModelError as exc:
        raise ModelError(f"{name}: {exc}", argument=name) from exc


def _vocab_size(model: Any) -> int:
    return int(model.get_input_embeddings().num_embeddings)


def _hook(model: Any, hook: Any, name: str, model_name: str) -> tuple[str, int, str]:
    """Validates ``blocks.{i}.{kind}`` against the model; a negative ``i`` counts from the end."""
    lay = _layout(model, model_name)
    match = _HOOK.match(hook) if isinstance(hook, str) else None
    if match is None:
        raise ParameterError(
            f"{name} must be 'blocks.{{i}}.resid_post' (or .attn_out / .mlp_out), got {hook!r}; these "
            "are the hook points a steering vector can be added at.",
            argument=name,
        )
    n = len(lay.layers)
    i = int(match.group(1))
    if not -n <= i < n:
        raise ParameterError(
            f"{name}: layer {i} is out of range for {model_name}, which has {n} blocks; use 0..{n - 1} "
            "(or -1 for the last).",
            argument=name,
        )
    i %= n
    return f"blocks.{i}.{match.group(2)}", i, match.group(2)


def check_vocabularies(
    source: Any, target: Any, *, source_tokenizer: Any = None, target_tokenizer: Any = None
) -> int:
    """Checks that two models read the same token ids, so that shared prompts can pair them.

    Parameters
    ----------
    source, target : transformers causal LM
        The two models.
    source_tokenizer, target_tokenizer : transformers tokenizer, optional
        When both are given, their vocabularies (token to id) must be identical.

    Returns
    -------
    int
        The shared vocabulary size.

    Raises
    ------
    ModelError
        A model is not a decoder-only ``transformers`` LM with recognisable blocks.
    DataError
        The embedding tables or the tokenizers' vocabularies differ.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> a = build_model(ModelConfig("llama", vocab_size=12, d_model=8, n_layers=1, n_heads=2))
    >>> b = build_model(ModelConfig("gpt2", vocab_size=12, d_model=16, n_layers=2, n_heads=2))
    >>> check_vocabularies(a, b)
    12
    """
    _layout(source, "source")
    _layout(target, "target")
    vs, vt = _vocab_size(source), _vocab_size(target)
    if vs != vt:
        raise DataError(
            f"the source model reads {vs} token ids and the target {vt}: the vocabularies do not match, "
            "so one prompt cannot be fed to both; pair models that share a tokenizer.",
            argument="target",
        )
    if source_tokenizer is not None and target_tokenizer is not None:
        if dict(source_tokenizer.get_vocab()) != dict(target_tokenizer.get_vocab()):
            raise DataError(
                "source_tokenizer and target_tokenizer map tokens to different ids; pair models that "
                "share a tokenizer.",
                argument="target_tokenizer",
            )
    return vs


def _rows(x: Any, name: str, width: int | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64) if not hasattr(x, "detach") else x.detach().cpu().numpy()
    if a.ndim != 2 or a.shape[0] == 0 or (width is not None and a.shape[1] != width):
        want = f"(n, {width})" if width is not None else "(n, d)"
        raise DataError(f"{name} must be a non-empty {want} array, got shape {a.shape}.", argument=name)
    if not np.isfinite(a).all():
        raise DataError(f"{name} holds NaN or inf; check the model's dtype (use float32).", argument=name)
    return a.astype(np.float32)


# -- interventions: on while the context is open, off after ----------------------------------
def _edit_hook(model: Any, hook: str, edit: Callable[[Any], Any]) -> Any:
    _, i, kind = _hook(model, hook, "hook", "model")
    lay = _layout(model, "model")
    module = {"resid_post": lay.layers, "attn_out": lay.attn, "mlp_out": lay.mlp}[kind][i]

    def fn(mod: Any, args: Any, out: Any) -> Any:
        if isinstance(out, tuple):
            return (edit(out[0]), *out[1:])
        return edit(out)

    return module.register_forward_hook(fn)


@contextmanager
@validate_params({"hook": [str], "alpha": [numbers.Real], "mode": [Options({"add", "ablate"})]})
def steer(model: Any, vector: Any, *, hook: str, alpha: float = 1.0, mode: str = "add") -> Iterator[Any]:
    """Steers ``model`` at ``hook`` while the ``with`` block is open (on), not after (off).

    Parameters
    ----------
    model : transformers causal LM
    vector : array-like of float, shape (d_model,)
        A steering vector (native, or mapped by :meth:`ActivationMapper.map_vector`).
    hook : str
        ``blocks.{i}.resid_post`` (or ``attn_out`` / ``mlp_out``).
    alpha : float, default=1.0
        Strength: ``x + alpha v`` at every position (``mode="add"``, ActAdd; a negative alpha
        subtracts); ``mode="ablate"`` removes the direction, ``x - (x.v) v / ||v||^2``.
    mode : {"add", "ablate"}, default="add"

    Yields
    ------
    model
        The same model, steered inside the block.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=8, n_layers=2, n_heads=2))
    >>> with steer(m, np.ones(8), hook="blocks.0.resid_post", alpha=5.0):
    ...     on = greedy_generate(m, [[1, 2, 3]], max_new_tokens=2)
    >>> greedy_generate(m, [[1, 2, 3]], max_new_tokens=2).shape == on.shape
    True
    """
    import torch

    _hook(model, hook, "hook", "model")
    width = int(model.get_input_embeddings().embedding_dim)
    v = _rows(np.asarray(vector, dtype=np.float64).reshape(1, -1), "vector", width)[0]
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool) or not math.isfinite(alpha):
        raise ParameterError(f"alpha must be a finite number, got {alpha!r}.", argument="alpha")
    if mode not in ("add", "ablate"):
        raise ParameterError(f"mode must be 'add' or 'ablate', got {mode!r}.", argument="mode")
    if mode == "ablate" and not np.linalg.norm(v) > 0:
        raise DataError("vector is zero; a direction to ablate needs a non-zero vector.", argument="vector")
    vt = torch.as_tensor(v)

    def edit(x: Any) -> Any:
        u = vt.to(x.device, x.dtype)
        if mode == "add":
            return x + float(alpha) * u
        return x - (x @ u)[..., None] * u / (u @ u)

    handle = _edit_hook(model, hook, edit)
    try:
        yield model
    finally:
        handle.remove()


def greedy_generate(model: Any, prompts: Any, *, max_new_tokens: int = 8) -> np.ndarray:
    """Greedy continuation of equal-length prompts (whatever hooks are on apply).

    Parameters
    ----------
    model : transformers causal LM
        The model (its train/eval mode is restored afterwards).
    prompts : array-like of int, shape (n, length)
        Token ids, all prompts of the same length.
    max_new_tokens : int, default=8
        Tokens to generate (argmax of the next-token logits, no sampling).

    Returns
    -------
    ndarray of int64, shape (n, max_new_tokens)
        The generated tokens only.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.lm import ModelConfig, build_model
    >>> lm = build_model(ModelConfig(arch="llama", vocab_size=16, d_model=8, n_layers=1,
    ...                              n_heads=2, max_len=16))
    >>> greedy_generate(lm, np.array([[1, 2, 3], [4, 5, 6]]), max_new_tokens=2).shape
    (2, 2)
    """
    import torch

    _layout(model, "model")
    ids = check_token_ids(prompts, "prompts", vocab=_vocab_size(model))
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, numbers.Integral)
        or max_new_tokens < 1
    ):
        raise ParameterError(
            f"max_new_tokens must be a positive integer, got {max_new_tokens!r}.", argument="max_new_tokens"
        )
    device = next(model.parameters()).device
    cur = torch.as_tensor(ids, device=device)
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            for _ in range(int(max_new_tokens)):
                nxt = model(input_ids=cur).logits[:, -1].argmax(-1, keepdim=True)
                cur = torch.cat([cur, nxt], dim=1)
    finally:
        model.train(was)
    return cur[:, ids.shape[1] :].cpu().numpy()
