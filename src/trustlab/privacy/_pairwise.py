"""The pairwise-masking baseline for Janus's comparison (private module).

Secure aggregation by pairwise masks (Bonawitz et al., "Practical Secure Aggregation for
Privacy-Preserving Machine Learning", CCS 2017) without its dropout recovery: every
client posts a fresh X25519 key, fetches its neighbours' keys, agrees a seed with each
(X25519 + HKDF-SHA256) and adds (``j > i``) or subtracts (``j < i``) the neighbour's
AES-CTR mask, so the masks cancel in the server's sum. The neighbour graph is complete
(``degree=None``, as in SecAgg) or a public random ``degree``-regular ring (Bell et al.,
CCS 2020; Flamingo's ``O(log n)`` graphs). Frames are real and counted; client-server
channels are assumed to be TLS and are not sealed here.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from trustlab.errors import ParameterError
from trustlab.privacy import _field, _wire
from trustlab.privacy._agg_result import AggregationResult, make_result
from trustlab.privacy._janus import JanusParams

__all__ = ["neighbours", "simulate_pairwise"]


def neighbours(n: int, degree: int | None, session: bytes) -> list[list[int]]:
    """Each client's neighbour list: the complete graph, or a public random ``degree``-regular ring."""
    if degree is None or degree >= n - 1:
        return [[j for j in range(n) if j != i] for i in range(n)]
    if degree < 2 or degree % 2:
        raise ParameterError(f"degree must be an even integer >= 2, got {degree!r}", argument="degree")
    # public topology: a permutation from the session id (not secret randomness)
    order = np.random.default_rng(int.from_bytes(hashlib.sha256(session).digest()[:8], "big")).permutation(n)
    pos = np.empty(n, dtype=int)
    pos[order] = np.arange(n)
    half = degree // 2
    return [sorted({int(order[(pos[i] + d) % n]) for d in range(-half, half + 1) if d}) for i in range(n)]


def _pair_seed(shared: bytes, session: bytes, i: int, j: int) -> bytes:
    lo, hi = min(i, j), max(i, j)
    info = b"trustlab/pairwise/v1" + session + lo.to_bytes(4, "big") + hi.to_bytes(4, "big")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(shared)


def simulate_pairwise(
    arr: np.ndarray, params: JanusParams, *, degree: int | None = None
) -> AggregationResult:
    """One round of pairwise-masking secure aggregation in process; returns an ``AggregationResult``."""
    n, p, rnd = arr.shape[0], params, 1
    graph = neighbours(n, degree, p.session)
    keys = [X25519PrivateKey.generate() for _ in range(n)]
    up, down, secs = dict.fromkeys(range(n), 0), dict.fromkeys(range(n), 0), dict.fromkeys(range(n), 0.0)
    posted = {}
    for i in range(n):  # flight 1: keys to the server
        frame = _wire.pack(_wire.PW_KEY, p.session, rnd, i, _wire.public_bytes(keys[i]))
        up[i] += len(frame)
        posted[i] = _wire.unpack(frame, "client").body
    masked = []
    for i in range(n):  # flight 2: the neighbours' keys; flight 3: the masked vector
        body = b"".join(j.to_bytes(4, "big") + posted[j] for j in graph[i])
        frame = _wire.pack(_wire.PW_KEYS, p.session, rnd, _wire.SERVER_ID[0], body)
        down[i] += len(frame)
        t0 = time.perf_counter()
        y = _field.from_signed(_field.encode_fixed(arr[i], p.frac_bits, p.bound))
        got = _wire.unpack(frame, "server").body
        for off in range(0, len(got), 36):
            j = int.from_bytes(got[off : off + 4], "big")
            shared = keys[i].exchange(X25519PublicKey.from_public_bytes(got[off + 4 : off + 36]))
            mask = _field.prg_field(_pair_seed(shared, p.session, i, j), p.dim)
            y = _field.fadd(y, mask) if j > i else _field.fsub(y, mask)
        secs[i] += time.perf_counter() - t0
        frame = _wire.pack(_wire.PW_MASKED, p.session, rnd, i, y.astype("<u8").tobytes())
        up[i] += len(frame)
        masked.append(np.frombuffer(_wire.unpack(frame, "client").body, dtype="<u8").astype(np.uint64))
    total = _field.fsum(np.stack(masked))
    result = _wire.pack(_wire.PW_RESULT, p.session, rnd, _wire.SERVER_ID[0], total.astype("<u8").tobytes())
    sums = []
    for i in range(n):  # flight 4: the sum
        down[i] += len(result)
        body = _wire.unpack(result, "server").body
        sums.append(_field.decode_fixed(_field.to_signed(np.frombuffer(body, dtype="<u8")), p.frac_bits))
    server = sum(up.values()) + sum(down.values())
    return make_result(sums, list(range(n)), up, down, 4, [server], list(secs.values()), "pairwise-simulator")
