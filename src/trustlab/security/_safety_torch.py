"""``transformers`` side of :mod:`trustlab.security.safety_decoding` (imported lazily)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import LogitsProcessor


class SafetyLogitsProcessor(LogitsProcessor):
    """Strategic decoding inside ``model.generate``: forces the refusal opening when the head says so."""

    def __init__(self, head: Any, rules: Any, monitor_cls: Any) -> None:
        self.head = head
        self.rules = rules
        self.monitor_cls = monitor_cls
        self.monitor: Any = None
        self.n_checks = 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        ids = input_ids.cpu().numpy()
        g = ids.shape[1] - self.rules.prompt_length
        first = self.monitor is None
        if first:
            self.monitor = self.monitor_cls(ids.shape[0], self.rules)
        mon = self.monitor
        if not first:
            mon.ended(ids[:, -1])
        rows = mon.due(g)
        if rows.any():
            prob = self.head.predict_proba(ids, key_mask=mon.key_mask(ids))[:, 1]
            mon.update(g, rows, prob)
            self.n_checks = mon.checks
        forced = mon.forced()
        out = scores.clone()
        for i in range(len(forced)):
            if forced[i] >= 0:
                out[i] = float("-inf")
                out[i, int(forced[i])] = 0.0
        return out  # type: ignore[return-value]

    @property
    def refused_at(self) -> Any:
        """Response position where each row's refusal was inserted (-1: none)."""
        return None if self.monitor is None else self.monitor.refused_at
