"""Keyed 64-bit hashing of key batches for the bottom-k sketches (vectorised in NumPy).

Integer keys go through a keyed mix computed on whole arrays: the key is XORed with a
64-bit word derived from the secret salt (by BLAKE2b, so that related salts give unrelated
words), passed through MurmurHash3's 64-bit finaliser,
offset by a second derived word and finalised again. The finaliser is a bijection of 64-bit
words, so distinct integer keys never collide. String and bytes keys are hashed one by
one with keyed BLAKE2b (8-byte digest) under the same salt. The salt is the sketch's
secret: it comes from :func:`os.urandom` unless the caller passes one (reproducible tests).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Hashable
from typing import Any

import numpy as np

from trustlab.errors import DataTypeError, ParameterError

SALT_BYTES = 16
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_RANK_SHIFT = np.uint64(11)
_RANK_UNIT = 2.0**-53


def make_salt(salt: Any) -> bytes:
    """Return ``salt`` as 16 bytes, drawing it from ``os.urandom`` when ``None``."""
    if salt is None:
        return os.urandom(SALT_BYTES)
    if isinstance(salt, bool):
        raise ParameterError(f"salt must be None, an int or bytes; got {salt!r}.", argument="salt")
    if isinstance(salt, int | np.integer):
        value = int(salt)
        if value < 0 or value >= 2 ** (8 * SALT_BYTES):
            raise ParameterError(
                f"salt must be a non-negative int below 2**128; got {value}.", argument="salt"
            )
        return value.to_bytes(SALT_BYTES, "little")
    if isinstance(salt, bytes | bytearray):
        if len(salt) == 0 or len(salt) > 64:
            raise ParameterError(f"salt must hold 1 to 64 bytes; got {len(salt)}.", argument="salt")
        return hashlib.blake2b(bytes(salt), digest_size=SALT_BYTES).digest()
    raise ParameterError(
        f"salt must be None (a secret drawn from os.urandom), an int or bytes; got {type(salt).__name__}.",
        argument="salt",
    )


def _fmix(h: np.ndarray, tmp: np.ndarray) -> None:
    """MurmurHash3's 64-bit finaliser, in place (``tmp`` is scratch space)."""
    for mult in (_M1, _M2):
        np.right_shift(h, _S33, out=tmp)
        h ^= tmp
        h *= mult
    np.right_shift(h, _S33, out=tmp)
    h ^= tmp


def _hash_ints(x: np.ndarray, salt: bytes) -> np.ndarray:
    words = hashlib.blake2b(salt, digest_size=16, person=b"trustlab-bottomk").digest()
    k0 = np.uint64(int.from_bytes(words[:8], "little"))
    k1 = np.uint64(int.from_bytes(words[8:], "little"))
    h = np.bitwise_xor(x, k0)
    tmp = np.empty_like(h)
    with np.errstate(over="ignore"):
        _fmix(h, tmp)
        h += k1
        _fmix(h, tmp)
    return h


def _hash_bytes(items: Any, salt: bytes) -> np.ndarray:
    out = np.empty(len(items), dtype=np.uint64)
    for i, item in enumerate(items):
        data = item.encode("utf-8", "surrogatepass") if isinstance(item, str) else bytes(item)
        out[i] = int.from_bytes(hashlib.blake2b(data, digest_size=8, key=salt).digest(), "little")
    return out


def _bad_keys(detail: str) -> DataTypeError:
    return DataTypeError(
        f"keys must be integers, strings or bytes; {detail}. Map other objects to one of "
        "these first (e.g. an id column, or str(key)).",
        argument="keys",
    )


def hash_keys(keys: Any, salt: bytes) -> np.ndarray:
    """Keyed 64-bit hashes (``uint64``) of a batch of keys, in input order."""
    if isinstance(keys, str | bytes) or not (hasattr(keys, "__len__") or hasattr(keys, "__array__")):
        if isinstance(keys, Hashable) and not isinstance(keys, float):
            keys = [keys]
        else:
            raise _bad_keys(f"got {type(keys).__name__}")
    try:
        arr = np.asarray(keys)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise _bad_keys(f"could not read them as a flat batch ({exc})") from None
    if arr.ndim != 1:
        arr = arr.reshape(-1) if arr.ndim == 0 else arr
        if arr.ndim != 1:
            raise _bad_keys(f"got an array of shape {arr.shape} (pass a flat batch)")
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    kind = arr.dtype.kind
    if kind in "US" and not isinstance(keys, np.ndarray):
        arr = np.empty(len(keys), dtype=object)
        arr[:] = list(keys)  # NumPy would turn [1, "a"] into strings; look at each key
        kind = "O"
    if kind == "u":
        return _hash_ints(arr.astype(np.uint64, copy=False), salt)
    if kind == "i":
        return _hash_ints(arr.astype(np.int64, copy=False).view(np.uint64), salt)
    if kind in "US":
        return _hash_bytes(arr.tolist(), salt)
    if kind == "O":
        items = arr.tolist()
        if all(isinstance(v, str | bytes) for v in items):
            return _hash_bytes(items, salt)
        if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in items):
            if any(not -(2**63) <= int(v) < 2**64 for v in items):
                raise _bad_keys("an integer key is outside the 64-bit range")
            ints = np.array([int(v) % 2**64 for v in items], dtype=np.uint64)
            return _hash_ints(ints, salt)
        bad = next((v for v in items if not isinstance(v, str | bytes | int | np.integer)), None)
        if bad is None:
            raise _bad_keys("got a mix of integer and string keys (pick one type)")
        what = "not hashable" if not isinstance(bad, Hashable) else "of an unsupported type"
        raise _bad_keys(f"got a key of type {type(bad).__name__} ({what})")
    raise _bad_keys(f"got dtype {arr.dtype} (floats and bools are ambiguous as identities)")


def hashes_to_ranks(h: np.ndarray) -> np.ndarray:
    """Ranks in ``(0, 1]`` from 64-bit hashes (the top 53 bits, plus one unit)."""
    return ((h >> _RANK_SHIFT).astype(np.float64) + 1.0) * _RANK_UNIT


def sorted_unique(h: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a uint64 array.

    Sort-based: NumPy 2.4's ``np.unique`` hashes and runs about 50x slower on 1M random
    64-bit values.
    """
    s = np.sort(h)
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
