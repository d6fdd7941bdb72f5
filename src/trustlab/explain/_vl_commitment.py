"""ExpProof's public randomness and commitments: the sampling seed, its byte stream, the model hash.

Light mode (:mod:`trustlab.explain.verifiable`): SHA-256 with a domain tag and
length-prefixed parts, where the ExpProof circuit uses Poseidon (the verifier redoes
the hash outside the circuit, so the binding is the same).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trustlab._param_validation import validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError, ParameterError

__all__ = ["DOMAIN", "as_bytes", "byte_stream", "commit_model", "derive_seed", "int_vector"]

DOMAIN = b"trustlab/expproof/v1"


def int_bytes(values: np.ndarray) -> bytes:
    return b"".join(int(v).to_bytes(16, "big", signed=True) for v in values)


def as_bytes(nonce: Any) -> bytes:
    if isinstance(nonce, bytes):
        return nonce
    if isinstance(nonce, str):
        return nonce.encode()
    raise ParameterError(f"nonce must be str or bytes, got {type(nonce).__name__}.", argument="nonce")


@validate_params({"commitment": [str], "nonce": [str, bytes]})
def derive_seed(commitment: str, x_q: Any, nonce: str | bytes = b"") -> bytes:
    """The public sampling seed: SHA-256 of the model commitment, the quantised instance and a nonce.

    Parameters
    ----------
    commitment : str
        The model commitment published before the query.
    x_q : array-like of int
        The instance at the fixed-point scale.
    nonce : str or bytes, default b""
        Public per-query value. It must be chosen by the verifier (or fixed), never by
        the prover, who could otherwise try nonces until the explanation suits it.

    Returns
    -------
    bytes
        32-byte seed.

    Examples
    --------
    >>> len(derive_seed("abc", [256, -128]))
    32
    """
    if not isinstance(commitment, str) or not commitment:
        raise ParameterError("commitment must be a non-empty string.", argument="commitment")
    xq = int_vector(x_q, "x_q")
    h = hashlib.sha256()
    for part in (DOMAIN, commitment.encode(), int_bytes(xq), as_bytes(nonce)):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


def int_vector(values: Any, name: str) -> np.ndarray:
    """``values`` as a flat int64 vector (fixed-point integers), or a :class:`DataError` naming ``name``."""
    try:
        arr = np.asarray(values)
        if arr.dtype.kind in "fc" and not (np.all(np.isfinite(arr)) and np.all(np.abs(arr) < 2.0**63)):
            raise ValueError(name)  # NaN, inf or beyond int64: no fixed-point integer
        return arr.astype(np.int64).ravel()
    except (TypeError, ValueError, OverflowError):
        raise DataError(
            f"{name} must be finite integers at the fixed-point scale (e.g. AmenableLime.quantize(x)), "
            f"got {type(values).__name__} {str(values)[:60]}.",
            argument=name,
        ) from None


def byte_stream(seed: bytes, count: int) -> np.ndarray:
    """``count`` bytes of SHA-256(seed || counter) for counter = 0, 1, 2, ..."""
    blocks = (count + 31) // 32
    out = b"".join(hashlib.sha256(seed + i.to_bytes(8, "big")).digest() for i in range(blocks))
    return np.frombuffer(out[:count], dtype=np.uint8).astype(np.int64)


@validate_params({"salt": [str, bytes]})
def commit_model(weights: Any, salt: str | bytes) -> str:
    """Salted SHA-256 commitment to model weights (the light mode's commitment).

    Parameters
    ----------
    weights : array, sequence of arrays, or mapping name -> array
        The parameters (e.g. ``[layer.weight, layer.bias, ...]`` as NumPy arrays, or a
        ``state_dict`` converted to NumPy). Order and shapes are part of the commitment.
    salt : str or bytes
        Secret random salt (at least 16 bytes) that hides the weights; kept by the owner
        and revealed only to open the commitment.

    Returns
    -------
    str
        Hex digest to publish.

    Examples
    --------
    >>> import numpy as np
    >>> c = commit_model([np.ones((2, 2)), np.zeros(2)], salt=b"0123456789abcdef")
    >>> len(c)
    64
    """
    salt_b = as_bytes(salt) if isinstance(salt, str | bytes) else None
    if salt_b is None or len(salt_b) < 16:
        raise ParameterError(
            "salt must be str or bytes of at least 16 bytes (e.g. os.urandom(32)).", argument="salt"
        )
    if isinstance(weights, Mapping):
        items: list[tuple[str, Any]] = [(str(k), weights[k]) for k in sorted(weights, key=str)]
    elif isinstance(weights, np.ndarray):
        items = [("0", weights)]
    elif isinstance(weights, Sequence) and not isinstance(weights, str | bytes):
        items = [(str(i), w) for i, w in enumerate(weights)]
    else:
        raise ModelError(
            "weights must be an array, a sequence of arrays or a mapping name -> array.",
            argument="weights",
        )
    if not items:
        raise ModelError("weights is empty; pass the model's parameters.", argument="weights")
    h = hashlib.sha256()
    h.update(DOMAIN + b"/model")
    h.update(salt_b)
    for name, w in items:
        arr = check_numeric_array(w, "weights", min_rows=0).reshape(-1)
        h.update(name.encode() + b"|" + repr(np.shape(w)).encode() + b"|")
        h.update(arr.astype("<f8").tobytes())
    return h.hexdigest()
