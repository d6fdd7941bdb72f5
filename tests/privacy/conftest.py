"""Fixtures shared by the privacy tests."""

from __future__ import annotations

import random

import pytest


class _SeededSecrets:
    """A seeded stand-in for the ``secrets`` module (tests only: reproducible masks)."""

    def __init__(self, seed: int) -> None:
        self._r = random.Random(seed)

    def token_bytes(self, n: int) -> bytes:
        return self._r.randbytes(n)

    def randbelow(self, k: int) -> int:
        return self._r.randrange(k)


@pytest.fixture
def seed_protocol_secrets(monkeypatch):
    """``seed_protocol_secrets(seed)`` replaces Janus's and the commitments' ``secrets`` by a seeded one."""
    from trustlab.privacy import _commit, _janus

    def install(seed: int) -> _SeededSecrets:
        fake = _SeededSecrets(seed)
        monkeypatch.setattr(_janus, "secrets", fake)
        monkeypatch.setattr(_commit, "secrets", fake)
        return fake

    return install
