"""The KV-cached decoding loop of :func:`trustlab.security.safety_decoding.safe_generate`.

Private (Li & Kim, ICML 2025). A re-classification at step ``g`` reads the sequence up to the
token chosen at step ``g - 1``, and which rows are due, and with which strategic-attention
window, is known as soon as that token is chosen (the rules' state changes only at checks). So
the ``[CLS]`` token of the next check rides in the same forward pass as that token: the pass
takes two tokens, the new one (ordinary causal attention, it does not see ``[CLS]``) and
``[CLS]`` (its rule window and itself), through a 4-D attention mask, and ``[CLS]`` is cropped
from the cache afterwards. A check then costs a second row in a pass that runs anyway instead of
a pass of its own (on the CPU about 0.3 of a decoding step instead of 1.1). The first
check rides in the prompt's pass the same way, and so does a visible ``[CLS]``
(``cls_visible_``): one extra row of the prompt's pass, kept in the cache, instead of the three
passes of ``start_visible``. Models whose attention implementation takes no 4-D mask from us
(anything but ``sdpa`` and ``eager``), or whose sliding window or attention chunk the sequence
reaches (our mask would override theirs), run each check, and the visible ``[CLS]``, in passes
of their own, as before. Only rounding differs between the two (float32: the ``[CLS]``
probabilities by < 1e-5); tokens and verdicts are tested equal to the pass-per-check loop.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from trustlab.security._safety_visible import _cache_kw, _out_cache, start_visible


def _fusable(model: Any, length: int) -> bool:
    """Whether our 4-D mask is the model's mask for sequences up to ``length`` tokens."""
    cfg = model.config
    if getattr(cfg, "_attn_implementation", None) not in ("sdpa", "eager"):
        return False
    for name in ("sliding_window", "attention_chunk_size"):  # a mask we would override
        w = getattr(cfg, name, None)
        if isinstance(w, int) and not isinstance(w, bool) and 0 < w <= length:
            return False
    return True


def _as_mask(model: Any, allowed: Any, dtype: Any) -> Any:
    """A boolean (sdpa) or additive (eager) 4-D attention mask from ``allowed``."""
    import torch

    if model.config._attn_implementation == "eager":
        return torch.zeros((), dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    return allowed


def _pass(
    model: Any, head: Any, cache: Any, embeds: Any, positions: Any, cls_rows: dict, kw: str, keep: bool
) -> Any:
    """One pass of ``embeds`` (n, m, d) on ``cache``: causal, except the ``[CLS]`` rows.

    ``cls_rows`` maps a row index to the boolean key mask (n, past + index) of the ``[CLS]`` at
    that row (it also attends to itself). If the last row is a ``[CLS]`` it is cropped from the
    cache, and the logits are those of the row before it (only that row's when ``keep``: the
    model takes ``logits_to_keep``). Returns the cache, the logits of the
    last token (n, vocab) and the hidden states at layer ``head.layer`` of every row.
    """
    import torch

    n, m = embeds.shape[:2]
    past = cache.get_seq_length() if cache is not None else 0
    device = embeds.device
    allowed = torch.ones(m, past + m, dtype=torch.bool, device=device).tril(past)[None].repeat(n, 1, 1)
    for row, key_mask in cls_rows.items():
        allowed[:, row, : past + row] = key_mask
    last = m - 2 if m - 1 in cls_rows else m - 1
    extra: dict[str, Any] = {kw: cache} if cache is not None else {}
    if keep:
        extra["logits_to_keep"] = torch.tensor([last], device=device)  # no vocabulary head on [CLS]
    out = model(
        inputs_embeds=embeds,
        attention_mask=_as_mask(model, allowed[:, None], embeds.dtype),
        position_ids=positions,
        use_cache=True,
        output_hidden_states=True,
        **extra,
    )
    cache = _out_cache(out)
    if m - 1 in cls_rows:
        cache.crop(-1)
    logits = out.logits[:, -1] if "logits_to_keep" in extra else out.logits[:, last]
    return cache, logits, out.hidden_states[head.layer]


def _cls(head: Any, hidden: Any) -> Any:
    return hidden.float() @ head.coef_ + head.intercept_


def _embed(model: Any, head: Any, ids: Any, *, cls_at: tuple[int, ...] = (), cls_last: bool = False) -> Any:
    """Token embeddings of ``ids``, the ``[CLS]`` embedding before the columns ``cls_at`` and last."""
    import torch

    emb = model.get_input_embeddings()(ids)
    cls = head.cls_embedding_.to(emb.dtype).expand(ids.shape[0], 1, -1)
    parts, prev = [], 0
    for at in cls_at:
        parts += [emb[:, prev:at], cls]
        prev = at
    parts.append(emb[:, prev:])
    if cls_last:
        parts.append(cls)
    return torch.cat(parts, 1)


def decode(
    model: Any,
    head: Any,
    tokens: Any,
    mon: Any,
    *,
    max_new_tokens: int,
    visible: bool,
    check: bool,
    temperature: float,
    seed: int,
) -> Any:
    """Run the loop on the prompt (+ prefill) ``tokens`` (n, L); return all tokens (n, L + new)."""
    import torch

    device = tokens.device
    n, lp = tokens.shape[0], mon.rules.prompt_length
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    kw = _cache_kw(model)
    keep = "logits_to_keep" in inspect.signature(model.forward).parameters  # once, not per step
    total = tokens.shape[1] + max_new_tokens + 2  # the tokens and two [CLS] at most
    fuse = check and _fusable(model, total)

    def window(toks: Any) -> Any:
        mask = mon.key_mask(toks.cpu().numpy())
        return torch.as_tensor(np.insert(mask, lp - 1, False, axis=1) if visible else mask, device=device)

    pending = None  # [CLS] logits of the check due at this step, computed in the last pass
    length = tokens.shape[1]
    if visible and _fusable(model, total):  # one pass: query, persistent [CLS] before its end marker, rest
        ok = ~np.isin(tokens[:, : lp - 1].cpu().numpy(), getattr(head, "cls_skip_ids_", ()))
        ok[~ok.any(axis=1)] = True
        cls_rows = {lp - 1: torch.as_tensor(ok, device=device)}
        if fuse:  # and the first check
            cls_rows[length + 1] = window(tokens)
        pos = torch.cat([torch.arange(lp, device=device), torch.arange(lp - 1, length + fuse, device=device)])
        embeds = _embed(model, head, tokens, cls_at=(lp - 1,), cls_last=fuse)
        cache, logits, hidden = _pass(model, head, None, embeds, pos.expand(n, -1), cls_rows, kw, keep)
        pending = _cls(head, hidden[:, -1]) if fuse else None
    elif visible:  # the persistent [CLS] before the query's end marker (joint_safety_finetune)
        cache = start_visible(model, head, tokens[:, :lp], getattr(head, "cls_skip_ids_", ()))
        pos = torch.arange(lp - 1, length, device=device).expand(n, -1)
        out = model(input_ids=tokens[:, lp - 1 :], position_ids=pos, use_cache=True, **{kw: cache})
        cache, logits = _out_cache(out), out.logits[:, -1]
    elif fuse:  # the first check rides in the prompt's pass
        pos = torch.arange(length + 1, device=device).expand(n, -1)
        embeds = _embed(model, head, tokens, cls_last=True)
        cache, logits, hidden = _pass(model, head, None, embeds, pos, {length: window(tokens)}, kw, keep)
        pending = _cls(head, hidden[:, -1])
    else:
        out = model(input_ids=tokens, use_cache=True)
        cache, logits = _out_cache(out), out.logits[:, -1]
    for step in range(max_new_tokens):
        g = tokens.shape[1] - lp
        if step:
            mon.ended(tokens[:, -1].cpu().numpy())
        if check:
            rows = mon.due(g)
            if rows.any():
                z = (
                    pending
                    if pending is not None
                    else head.cls_logits(cache, window(tokens), tokens.shape[1])
                )
                mon.update(g, rows, torch.sigmoid(z).cpu().numpy())
        pending = None
        forced = mon.forced()
        scores = logits.float()
        if temperature > 0:
            probs = torch.softmax(scores / float(temperature), -1).cpu()
            nxt = torch.multinomial(probs, 1, generator=gen).to(device)[:, 0]
        else:
            nxt = scores.argmax(-1)
        f = torch.as_tensor(forced, device=device)
        nxt = torch.where(f >= 0, f, nxt)[:, None]
        tokens = torch.cat([tokens, nxt], dim=1)
        if step + 1 == max_new_tokens:
            break
        pos = torch.full((n, 1), tokens.shape[1] - 1, device=device)
        if fuse:
            mon.ended(nxt[:, 0].cpu().numpy())  # as the next step will; idempotent
            if mon.due(g + 1).any():
                embeds = _embed(model, head, nxt, cls_last=True)
                km = window(tokens)
                cache, logits, hidden = _pass(
                    model, head, cache, embeds, torch.cat([pos, pos + 1], 1), {1: km}, kw, keep
                )
                pending = _cls(head, hidden[:, -1])
                continue
        out = model(
            input_ids=nxt, use_cache=True, **({"position_ids": pos} if visible else {}), **{kw: cache}
        )
        cache, logits = _out_cache(out), out.logits[:, -1]
    return tokens
