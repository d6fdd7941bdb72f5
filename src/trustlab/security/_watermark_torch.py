"""torch / ``transformers`` side of :mod:`trustlab.security.watermark` (imported lazily)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from trustlab.errors import DataError, ParameterError


class WatermarkProcessor(LogitsProcessor):
    """Replaces each row's next-token distribution by the watermarked one (log-probabilities).

    Rows whose last ``window`` tokens were already watermarked in this call are left as
    they are (the extractor skips them too).
    """

    def __init__(self, watermark: Any, bits: np.ndarray) -> None:
        self.watermark = watermark
        self.bits = bits
        self._seen: dict[int, set[bytes]] = {}

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        wm = self.watermark
        if scores.shape[-1] != wm.vocab_size:
            raise ParameterError(
                f"the model has {scores.shape[-1]} logits but the watermark vocab_size is {wm.vocab_size}; "
                "build the watermark with the model's vocabulary size.",
                argument="vocab_size",
            )
        if input_ids.shape[1] < wm.window:
            return scores
        probs = torch.softmax(scores.double(), dim=-1).cpu().numpy()
        prefixes = input_ids[:, -wm.window :].cpu().numpy().astype(np.int64)
        out = scores.clone()
        for row in range(scores.shape[0]):
            seen = self._seen.setdefault(row, set())
            raw = prefixes[row].tobytes()
            if raw in seen:
                continue
            seen.add(raw)
            q = wm._step(probs[row], wm._digest(prefixes[row]), self.bits)
            with np.errstate(divide="ignore"):
                out[row] = torch.from_numpy(np.log(q)).to(out.dtype).to(out.device)
        return out  # type: ignore[return-value]


def make_processor(watermark: Any, bits: np.ndarray) -> WatermarkProcessor:
    """A fresh processor for one ``generate`` call."""
    return WatermarkProcessor(watermark, bits)


@torch.no_grad()
def sample(
    model: Any, prompt_ids: Any, watermark: Any, message: Any, *, max_new_tokens: int, seed: int
) -> np.ndarray:
    """Ancestral sampling with a KV cache, the watermark applied last (see ``generate_watermarked``)."""
    ids = np.asarray(prompt_ids)
    if ids.ndim != 2 or ids.shape[1] < 1 or not np.issubdtype(ids.dtype, np.integer):
        raise DataError(
            "prompt_ids must be a 2-D integer array (batch, prompt_len); pass ids[None] for one prompt.",
            argument="prompt_ids",
        )
    if not hasattr(model, "config") or not callable(model):
        raise ParameterError(
            "model must be a transformers causal LM; load one with trustlab.lm.load_model.", argument="model"
        )
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ParameterError(
            f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}.", argument="max_new_tokens"
        )
    proc = None if watermark is None else watermark.processor(message)
    device = next(model.parameters()).device
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    tokens = torch.as_tensor(ids, dtype=torch.long, device=device)
    was_training = model.training
    model.eval()
    import inspect

    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    try:
        out = model(input_ids=tokens, use_cache=True)
        for step in range(max_new_tokens):
            scores = out.logits[:, -1, :].float()
            if proc is not None:
                scores = proc(tokens, scores)
            probs = torch.softmax(scores, dim=-1).cpu()
            nxt = torch.multinomial(probs, 1, generator=gen).to(device)
            tokens = torch.cat([tokens, nxt], dim=1)
            if step + 1 < max_new_tokens:
                past = getattr(out, "cache", None) if cache_arg == "cache" else None
                past = past if past is not None else out.past_key_values
                out = model(input_ids=nxt, use_cache=True, **{cache_arg: past})
    finally:
        model.train(was_training)
    return tokens.cpu().numpy().astype(np.int64)
