"""Prime-field vectors for secure aggregation: ``Z_p`` with ``p = 2**61 - 1`` in NumPy (private module).

Values are ``uint64`` arrays with entries in ``[0, p)``; a sum of two entries is below
``2**62`` and fits, so addition and subtraction are exact and vectorised. Real values
enter through a public fixed-point encoding (``round(x * 2**frac_bits)``, clip bound
checked), and masks come from a keyed AES-256-CTR stream rejection-sampled to ``Z_p``
(cryptographic randomness, not privacy noise).
"""

from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from trustlab.errors import DataError, ParameterError

__all__ = [
    "PRIME",
    "decode_fixed",
    "encode_fixed",
    "fadd",
    "from_signed",
    "fsub",
    "fsum",
    "prg_field",
    "to_signed",
]

PRIME = (1 << 61) - 1
"""The field modulus ``2**61 - 1`` (a Mersenne prime)."""

_P = np.uint64(PRIME)
_HALF = PRIME // 2


def encode_fixed(values: np.ndarray, frac_bits: int, bound: float) -> np.ndarray:
    """``round(x * 2**frac_bits)`` as int64 after checking ``|x| <= bound`` and finiteness.

    The error names the argument but never a value (the caller's input is private).
    """
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise DataError("values holds NaN or inf: pass finite numbers", argument="values")
    if np.any(np.abs(arr) > bound):
        raise DataError(
            f"values exceed the public clip bound {bound}: clip them to [-bound, bound] first",
            argument="values",
        )
    return np.rint(arr * float(2**frac_bits)).astype(np.int64)


def decode_fixed(ints: np.ndarray, frac_bits: int) -> np.ndarray:
    """Floats ``k / 2**frac_bits`` of signed fixed-point integers."""
    return np.asarray(ints, dtype=np.int64).astype(float) / float(2**frac_bits)


def from_signed(ints: np.ndarray) -> np.ndarray:
    """Signed int64 with ``|k| < p/2`` -> field elements in ``[0, p)``."""
    k = np.asarray(ints, dtype=np.int64)
    return np.where(k < 0, k + np.int64(PRIME), k).astype(np.uint64)


def to_signed(elems: np.ndarray) -> np.ndarray:
    """Field elements -> signed int64 in ``(-p/2, p/2]`` (the inverse of :func:`from_signed`)."""
    e = np.asarray(elems, dtype=np.uint64).astype(np.int64)
    return np.where(e > _HALF, e - np.int64(PRIME), e)


def fadd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(a + b) mod p`` elementwise."""
    s = a + b
    return np.where(s >= _P, s - _P, s)


def fsub(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(a - b) mod p`` elementwise."""
    return np.where(a >= b, a - b, a + (_P - b))


def fsum(rows: np.ndarray) -> np.ndarray:
    """Sum mod ``p`` over the first axis (exact: partial sums are reduced as they go)."""
    arr = np.asarray(rows, dtype=np.uint64)
    out = np.zeros(arr.shape[1:], dtype=np.uint64)
    for row in arr:
        out = fadd(out, row)
    return out


def prg_field(seed: bytes, length: int, label: bytes = b"") -> np.ndarray:
    """``length`` uniform elements of ``Z_p`` from a 32-byte ``seed`` (AES-256-CTR keystream).

    Each 64-bit word keeps its low 61 bits; the single value ``2**61 - 1`` is rejected,
    so every element is exactly uniform. ``label`` (at most 8 bytes) separates streams
    drawn from one seed; it forms the counter block's prefix.
    """
    if len(seed) != 32:
        raise ParameterError("seed must be 32 bytes", argument="seed")
    if len(label) > 8:
        raise ParameterError("label must be at most 8 bytes", argument="label")
    nonce = label.ljust(8, b"\0") + bytes(8)
    enc = Cipher(algorithms.AES(seed), modes.CTR(nonce)).encryptor()
    out = np.empty(0, dtype=np.uint64)
    need = int(length)
    while out.size < need:
        words = np.frombuffer(enc.update(bytes(8 * (need - out.size + 2))), dtype="<u8")
        words = words & _P
        out = np.concatenate([out, words[words != _P]])
    return out[:need].copy()
