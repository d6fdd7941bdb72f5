"""The ``[CLS]`` safety token visible to the response: the paper's implicit attention channel.

Private to :mod:`trustlab.security.safety_decoding` and :mod:`trustlab.security.safety_joint`
(Li & Kim, ICML 2025). The paper prepends ``[CLS]`` and lets the generated tokens attend to it
(the "implicit leverage" of the safety signal, next to the explicit refusal insertion). Here the
persistent ``[CLS]`` sits in the sequence just before the query's last token (its end-of-instruction
marker, a template token Rule 4 skips anyway): it reads the query (Rule 1 before any response
token, Rule 4's tokens masked), it shares the marker's position id, and every later token, the
marker and the response, attends to it through the ordinary causal mask. Nothing it reads lies
after a token that sees it, so the language-model loss cannot learn from the future through it.
Training runs three passes: the prefix with a cache, ``[CLS]`` on that cache (kept), the rest on
the cache; decoding runs the same as one pass with a 4-D mask (``_safety_loop``), or these three
where the attention implementation takes no 4-D mask.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np


def _cache_kw(model: Any) -> str:
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _out_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def split_points(loss_mask: np.ndarray) -> np.ndarray:
    """Where the persistent ``[CLS]`` goes in each training row.

    Before the token that predicts the first counted target (a query's end marker). Rows whose
    loss starts at the first target (documents) get 0: no ``[CLS]`` is visible to them.
    """
    target = np.asarray(loss_mask, dtype=bool)[:, 1:]
    first = np.where(target.any(axis=1), target.argmax(axis=1), 0)
    return first.astype(np.int64)


def visible_forward(
    model: Any, head: Any, tokens: Any, split: np.ndarray, key_ok: np.ndarray
) -> tuple[Any, Any]:
    """Logits of ``tokens`` (n, L) with a persistent ``[CLS]`` inserted before column ``split[i]``.

    ``key_ok`` (n, L) marks the tokens the ``[CLS]`` may read (Rule 4). Returns the logits in the
    tokens' own order, shape (n, L, vocab), and the ``[CLS]`` token's malicious logit, shape (n,)
    (meaningless where ``split == 0``). Differentiable when gradients are enabled.
    """
    import torch

    device = tokens.device
    n, length = tokens.shape
    split = np.asarray(split, dtype=np.int64)
    width = int(split.max())
    if width == 0:
        return model(input_ids=tokens).logits, torch.zeros(n, device=device)
    idx = np.arange(width)[None, :] - (width - split)[:, None]  # token index of each prefix column
    pre_real = idx >= 0
    t_idx = torch.as_tensor(np.clip(idx, 0, None), device=device)
    pre_ids = tokens.gather(1, t_idx)
    out = model(
        input_ids=pre_ids,
        attention_mask=torch.as_tensor(pre_real.astype(np.int64), device=device),
        position_ids=t_idx,
        use_cache=True,
    )
    cache = _out_cache(out)
    ok = np.take_along_axis(np.asarray(key_ok, dtype=bool), np.clip(idx, 0, None), axis=1) & pre_real
    ok[~ok.any(axis=1)] = pre_real[~ok.any(axis=1)]
    z = head.cls_logits(
        cache, torch.as_tensor(ok, device=device), torch.as_tensor(split, device=device), keep=True
    )
    rest = length - int(split.min())
    ridx = split[:, None] + np.arange(rest)[None, :]
    r_real = ridx < length
    r_idx = torch.as_tensor(np.minimum(ridx, length - 1), device=device)
    attn = np.concatenate([pre_real, (split >= 1)[:, None], r_real], axis=1)
    out2 = model(
        input_ids=tokens.gather(1, r_idx),
        attention_mask=torch.as_tensor(attn.astype(np.int64), device=device),
        position_ids=torch.as_tensor(ridx, device=device),
        use_cache=True,
        **{_cache_kw(model): cache},
    )
    both = torch.cat([out.logits, out2.logits], dim=1)
    col = torch.as_tensor(width - split[:, None] + np.arange(length)[None, :], device=device)
    return both.gather(1, col[..., None].expand(-1, -1, both.shape[-1])), z


def start_visible(model: Any, head: Any, prompts: Any, skip_ids: tuple[int, ...]) -> Any:
    """Encode ``prompts[:, :-1]`` and the persistent ``[CLS]``; return the cache.

    The ``[CLS]`` reads the query without Rule 4's ids; decoding continues on the cache with the
    query's last token.
    """
    import torch

    lp = prompts.shape[1]
    out = model(input_ids=prompts[:, :-1], use_cache=True)
    cache = _out_cache(out)
    ok = ~np.isin(prompts[:, :-1].cpu().numpy(), skip_ids)
    ok[~ok.any(axis=1)] = True
    head.cls_logits(cache, torch.as_tensor(ok, device=prompts.device), lp - 1, keep=True)
    return cache
