"""The rules of safety-aware decoding: strategic attention windows, tau, the re-classification schedule.

Private to :mod:`trustlab.security.safety_decoding` (Li & Kim, ICML 2025); pure NumPy, shared by
``safe_generate`` and the ``LogitsProcessor``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.errors import ParameterError

_INIT, _MALICIOUS, _BENIGN, _TRANSITION = 0, 1, 2, 3
SCHEDULES = ("annealing", "every", "periodic", "first")


@dataclass(frozen=True)
class _Rules:
    prompt_length: int
    refusal_ids: tuple[int, ...]
    tau: int = 3
    r1: int = 10
    r2: int = 10
    r3: int = 10
    threshold: float = 0.5
    schedule: str = "annealing"
    period: int = 10
    skip_ids: tuple[int, ...] = ()
    eos_id: int | None = None


def _rules(prompt_length: int, refusal_ids: Any, **kw: Any) -> _Rules:
    ref = np.asarray(refusal_ids)
    if ref.ndim != 1 or ref.size == 0 or not np.issubdtype(ref.dtype, np.integer):
        raise ParameterError(
            "refusal_ids must be a non-empty 1-D list of token ids (the refusal opening, e.g. "
            "tokenizer('Sorry, I cannot').input_ids).",
            argument="refusal_ids",
        )
    for name in ("tau", "r1", "r2", "r3", "period"):
        v = kw.get(name, 1)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ParameterError(f"{name} must be an integer >= 1, got {v!r}.", argument=name)
    t = kw.get("threshold", 0.5)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 < t < 1.0:
        raise ParameterError(f"threshold must lie in (0, 1), got {t!r}.", argument="threshold")
    if kw.get("schedule", "annealing") not in SCHEDULES:
        raise ParameterError(
            f"schedule must be one of {SCHEDULES}, got {kw.get('schedule')!r}.", argument="schedule"
        )
    unknown = set(kw) - set(_Rules.__dataclass_fields__)
    if unknown:
        raise ParameterError(
            f"unknown rule arguments {sorted(unknown)}; use tau, r1, r2, r3, threshold, schedule, "
            "period, skip_ids, eos_id.",
            argument=sorted(unknown)[0],
        )
    kw["skip_ids"] = tuple(int(i) for i in np.atleast_1d(np.asarray(kw.get("skip_ids", ()), dtype=np.int64)))
    return _Rules(int(prompt_length), tuple(int(i) for i in ref), **kw)


class _Monitor:
    """Per-row state of the paper's rules (Rules 1-4, tau, the re-classification schedule)."""

    def __init__(self, n: int, rules: _Rules) -> None:
        self.rules = rules
        self.mode = np.full(n, _INIT)
        self.streak = np.zeros(n, dtype=np.int64)
        self.start = np.zeros(n, dtype=np.int64)  # S_t, in generated tokens
        self.next = np.zeros(n, dtype=np.int64)
        self.refused_at = np.full(n, -1, dtype=np.int64)
        self.done = np.zeros(n, dtype=bool)
        self.queue: list[list[int]] = [[] for _ in range(n)]
        self.checks = 0

    def due(self, g: int) -> np.ndarray:
        busy = np.array([bool(q) for q in self.queue])
        live = ~self.done & ~busy & (self.mode != _MALICIOUS)
        return live & ((self.mode == _INIT) | (self.mode == _TRANSITION) | (self.next <= g))

    def key_mask(self, ids: np.ndarray) -> np.ndarray:
        r, lp = self.rules, self.rules.prompt_length
        g = ids.shape[1] - lp
        j = np.arange(ids.shape[1]) - lp  # generated-token index; < 0 in the query
        ok = ~np.isin(ids, r.skip_ids)
        query = ok & (j < 0)[None, :]
        rule1 = ok & ((j < 0) | (j < r.r1))[None, :]
        rule2 = ok & (j >= max(0, g - r.r2))[None, :] & (j >= 0)[None, :]
        s = self.start[:, None]
        rule3 = ok & (j[None, :] >= s - r.r2) & (j[None, :] < s + r.r3) & (j >= 0)[None, :]
        mode = self.mode[:, None]
        mask = np.where(mode == _BENIGN, rule2, np.where(mode == _TRANSITION, rule3, rule1))
        empty = ~mask.any(axis=1)
        mask[empty] = query[empty] | rule1[empty]
        return mask

    def _gap(self, g: int) -> int:
        r = self.rules
        if r.schedule == "every":
            return 1
        if r.schedule == "periodic":
            return r.period
        if r.schedule == "first":
            return 1 << 62
        return min(max(1, g), r.r2)  # annealing: 1, 1, 2, 4, ... capped at r2 (every token seen)

    def update(self, g: int, rows: np.ndarray, prob: np.ndarray) -> None:
        r = self.rules
        self.checks += 1
        for i in map(int, np.flatnonzero(rows)):
            bad = prob[i] >= r.threshold
            if self.mode[i] == _INIT:
                self.mode[i] = _MALICIOUS if bad else _BENIGN
                if bad:
                    self._refuse(i, g)
            elif self.mode[i] == _BENIGN and bad:
                self.mode[i], self.start[i], self.streak[i] = _TRANSITION, g, 1
                if r.tau <= 1:
                    self._refuse(i, g)
            elif self.mode[i] == _TRANSITION:
                if bad:
                    self.streak[i] += 1
                    if self.streak[i] >= r.tau:
                        self._refuse(i, g)
                else:  # a false trigger: back to Rule 2
                    self.mode[i], self.streak[i] = _BENIGN, 0
            if self.mode[i] == _BENIGN:
                self.next[i] = g + self._gap(g)

    def _refuse(self, i: int, g: int) -> None:
        self.mode[i] = _MALICIOUS
        self.refused_at[i] = g
        self.queue[i] = list(self.rules.refusal_ids)

    def ended(self, last: np.ndarray) -> None:
        """Mark the rows whose last token is the end of response (no more checks)."""
        if self.rules.eos_id is not None:
            self.done |= last == self.rules.eos_id

    def forced(self) -> np.ndarray:
        """The token each row must take next (-1: free)."""
        eos = self.rules.eos_id
        out = np.full(len(self.queue), -1, dtype=np.int64)
        for i, q in enumerate(self.queue):
            if q:
                out[i] = q.pop(0)
            elif self.done[i] and eos is not None:
                out[i] = eos
        return out


def _check_context(model: Any, n_prompt: int, max_new_tokens: int) -> None:
    """Learned positions end at the model's context; rotary ones do not."""
    cfg = getattr(model, "config", None)
    rotary = any(getattr(cfg, a, None) is not None for a in ("rope_theta", "rope_parameters", "rope_scaling"))
    context = getattr(cfg, "n_positions", None)
    if context is None and not rotary:
        context = getattr(cfg, "max_position_embeddings", None)
    if context is not None and n_prompt + max_new_tokens > int(context):
        raise ParameterError(
            f"max_new_tokens={max_new_tokens} after {n_prompt} prompt tokens exceeds the model's "
            f"context of {context} positions; lower max_new_tokens or shorten the prompts.",
            argument="max_new_tokens",
        )
