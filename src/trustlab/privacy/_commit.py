"""Pedersen vector commitments on secp256k1 through libsecp256k1 (``coincurve``) (private module).

``Com(v, r) = sum_j v_j G_j + r H``. The generators are hashed to the curve by
try-and-increment over SHA-256, so no one knows a discrete logarithm between any two of
them: binding rests on the discrete-log assumption, hiding is perfect. The commitment is
additively homomorphic in ``(v, r)`` and separable in ``r`` (``Com(v, a + b) = Com(v, a) +
b H``), the property Janus's "separable homomorphic commitment" needs.

Points travel as 33-byte compressed encodings. libsecp256k1 cannot represent the point at
infinity; a sum that lands there (probability about ``2**-256`` for honest parties, whose
``r`` is uniform) raises :class:`ValueError`, which the protocol turns into an abort.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from collections.abc import Sequence

import numpy as np

from trustlab.errors import MissingDependencyError

__all__ = ["ORDER", "POINT_BYTES", "add_points", "check_point", "commit", "generators", "random_scalar"]

ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
"""The prime order of the secp256k1 group."""

POINT_BYTES = 33
_DOMAIN = b"trustlab/janus/pedersen/v1"


def _coincurve() -> object:
    try:
        import coincurve
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(
            "Janus commitments need coincurve (libsecp256k1): pip install 'trustlab[collab]'",
            argument="coincurve",
        ) from exc
    return coincurve


def _hash_to_point(index: int) -> object:
    coincurve = _coincurve()
    counter = 0
    while True:
        x = hashlib.sha256(_DOMAIN + index.to_bytes(8, "big") + counter.to_bytes(4, "big")).digest()
        try:
            return coincurve.PublicKey(b"\x02" + x)  # type: ignore[attr-defined]
        except ValueError:  # x is not on the curve (about half of all x): try the next
            counter += 1


@functools.lru_cache(maxsize=8)
def generators(length: int) -> tuple[object, tuple[object, ...]]:
    """``(H, (G_1, ..., G_length))``: independent generators hashed to the curve."""
    h = _hash_to_point(0)
    return h, tuple(_hash_to_point(j + 1) for j in range(length))


def random_scalar() -> int:
    """A uniform nonzero scalar modulo the group order (from ``secrets``)."""
    return 1 + secrets.randbelow(ORDER - 1)


def commit(values: np.ndarray, r: int) -> bytes:
    """``Com(values, r)`` as 33 bytes; ``values`` are integers (any sign), taken mod the order."""
    coincurve = _coincurve()
    h, gens = generators(len(values))
    terms = []
    for g, v in zip(gens, np.asarray(values).tolist(), strict=True):
        s = int(v) % ORDER
        if s:
            terms.append(g.multiply(s.to_bytes(32, "big")))  # type: ignore[attr-defined]
    rs = r % ORDER
    if rs:
        terms.append(h.multiply(rs.to_bytes(32, "big")))  # type: ignore[attr-defined]
    if not terms:
        raise ValueError("commitment is the point at infinity")
    point = coincurve.PublicKey.combine_keys(terms)  # type: ignore[attr-defined]
    return bytes(point.format(compressed=True))


def check_point(data: bytes) -> bool:
    """Whether ``data`` is a valid compressed secp256k1 point."""
    coincurve = _coincurve()
    try:
        coincurve.PublicKey(bytes(data))  # type: ignore[attr-defined]
    except (ValueError, TypeError):
        return False
    return True


def add_points(points: Sequence[bytes]) -> bytes:
    """The sum of compressed points (raises ``ValueError`` on a malformed point)."""
    coincurve = _coincurve()
    keys = [coincurve.PublicKey(bytes(p)) for p in points]  # type: ignore[attr-defined]
    return bytes(coincurve.PublicKey.combine_keys(keys).format(compressed=True))  # type: ignore[attr-defined]
