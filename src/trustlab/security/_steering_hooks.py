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


_HOOK = re.compile(r"^blocks\.(-?\d+)\.(resid_pre|resid_post|attn_out|mlp_out)$")


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
            f"{name} must be 'blocks.{{i}}.resid_post' (or .resid_pre / .attn_out / .mlp_out), got "
            f"{hook!r}; these are the hook points a steering vector can be added at.",
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
    if kind == "resid_pre":  # the stream entering block i (for i = 0: the token embeddings)

        def pre(mod: Any, args: Any, kwargs: Any) -> tuple[Any, Any]:
            if args:
                return (edit(args[0]), *args[1:]), kwargs
            return args, {**kwargs, "hidden_states": edit(kwargs["hidden_states"])}

        return lay.layers[i].register_forward_pre_hook(pre, with_kwargs=True)
    module = {"resid_post": lay.layers, "attn_out": lay.attn, "mlp_out": lay.mlp}[kind][i]

    def fn(mod: Any, args: Any, out: Any) -> Any:
        if isinstance(out, tuple):
            return (edit(out[0]), *out[1:])
        return edit(out)

    return module.register_forward_hook(fn)


@contextmanager
@validate_params({"hook": [str], "alpha": [numbers.Real], "mode": [Options({"add", "ablate"})]})
def steer(
    model: Any, vector: Any, *, hook: str, alpha: float = 1.0, mode: str = "add", positions: Any = None
) -> Iterator[Any]:
    """Steers ``model`` at ``hook`` while the ``with`` block is open (on), not after (off).

    Parameters
    ----------
    model : transformers causal LM
    vector : array-like of float, shape (d_model,) or (n, d_model)
        A steering vector (native, or mapped by :meth:`ActivationMapper.map_vector`); one row
        per prompt when ``positions`` is given (the paper's prompt steering, App. A Eq. 1-2:
        ``v_t = h_{+,t} - h_{-,t}`` for each contrastive pair).
    hook : str
        ``blocks.{i}.resid_post`` (or ``resid_pre`` / ``attn_out`` / ``mlp_out``).
    alpha : float, default=1.0
        Strength: ``x + alpha v`` at every position (``mode="add"``, ActAdd; a negative alpha
        subtracts); ``mode="ablate"`` removes the direction, ``x - (x.v) v / ||v||^2``.
    mode : {"add", "ablate"}, default="add"
    positions : array-like of int, shape (n,), optional
        Steer only there: row ``i`` of the batch (which must hold ``n`` rows) at token
        ``positions[i]``, e.g. the trigger's position (the paper's prompt steering at trigger
        positions); default: every position of every row. Positions index the whole sequence:
        the edit applies in every forward pass whose input covers all of them (each step of
        :func:`greedy_generate`; the prompt pass of a key-value-cached ``model.generate``,
        whose cache then carries the steered states).

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
    pos = None if positions is None else _positions(positions, vector, width)
    arr = np.asarray(vector, dtype=np.float64)
    per_row = pos is not None and arr.size > 0 and arr.size % width == 0
    rows = _rows(arr.reshape(-1, width) if per_row else arr.reshape(1, -1), "vector", width)
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool) or not math.isfinite(alpha):
        raise ParameterError(f"alpha must be a finite number, got {alpha!r}.", argument="alpha")
    if mode not in ("add", "ablate"):
        raise ParameterError(f"mode must be 'add' or 'ablate', got {mode!r}.", argument="mode")
    if mode == "ablate" and not (np.linalg.norm(rows, axis=1) > 0).all():
        raise DataError("vector is zero; a direction to ablate needs a non-zero vector.", argument="vector")
    vt = torch.as_tensor(rows[0] if pos is None else np.broadcast_to(rows, (len(pos), width)).copy())

    def change(x: Any, u: Any) -> Any:
        if mode == "add":
            return x + float(alpha) * u
        return x - (x * u).sum(-1, keepdim=True) * u / (u * u).sum(-1, keepdim=True)

    def edit(x: Any) -> Any:
        u = vt.to(x.device, x.dtype)
        if pos is None:
            return change(x, u)
        if x.shape[0] != len(pos):
            raise DataError(
                f"positions holds {len(pos)} entries but the batch has {x.shape[0]} rows; give one "
                "position (and vector row) per prompt.",
                argument="positions",
            )
        if x.shape[1] <= int(pos.max()):
            return x  # a cached decoding step: the steered prompt states are in the cache
        idx = torch.arange(len(pos), device=x.device)
        p = torch.as_tensor(pos, device=x.device)
        out = x.clone()
        out[idx, p] = change(x[idx, p], u)
        return out

    handle = _edit_hook(model, hook, edit)
    try:
        yield model
    finally:
        handle.remove()


def _positions(positions: Any, vector: Any, width: int) -> np.ndarray:
    """Per-row token positions of :func:`steer`, checked against the vector's rows."""
    p = np.asarray(positions)
    if p.ndim != 1 or p.size == 0 or not np.issubdtype(p.dtype, np.integer) or (p < 0).any():
        raise DataError(
            f"positions must be a non-empty 1-d array of non-negative token indices, got {positions!r}.",
            argument="positions",
        )
    size = np.asarray(vector).size
    rows = size // width if size % width == 0 else 1  # a wrong width is reported by the vector check
    if rows not in (1, p.size):
        raise DataError(
            f"vector has {rows} rows but positions {p.size}; give one vector, or one row per position.",
            argument="vector",
        )
    return p.astype(np.int64)


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
