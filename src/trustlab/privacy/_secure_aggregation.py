"""Simulated secure aggregation: additive secret shares in fixed point modulo ``2**64`` (private module).

A *simulation* (masks from a seeded NumPy generator, servers summing their shares
in one process), not a cryptographic protocol: it gives no security against anyone
who can read this process's memory. The masks are public simulation randomness,
never privacy noise.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import (
    check_numeric_array,
    make_generator,
)
from trustlab.errors import DataError

__all__ = [
    "FIXED_POINT_BITS",
    "MAX_ABS",
    "SCALE",
    "additive_shares",
    "decode",
    "encode",
    "reconstruct",
    "secure_sum",
    "share_int",
]

FIXED_POINT_BITS = 32
"""Fractional bits of the fixed-point encoding used by the simulated secure aggregation."""

SCALE = float(2**FIXED_POINT_BITS)
MAX_ABS = 2.0**62 / SCALE  # keeps every partial sum inside the signed 64-bit range


def encode(arr: np.ndarray) -> np.ndarray:
    """Fixed-point encoding ``rint(x * 2**32)`` as int64 (``|x| < MAX_ABS`` checked by callers)."""
    return np.rint(arr * SCALE).astype(np.int64)


def decode(enc: np.ndarray) -> np.ndarray:
    """Floats of fixed-point integers: ``k / 2**32`` (exact while ``|k| < 2**53``; else the nearest float)."""
    return enc.astype(float) / SCALE


def share_int(enc: np.ndarray, n_servers: int, rng: np.random.Generator) -> np.ndarray:
    """Additive shares modulo ``2**64`` of int64 fixed-point values; masks from ``rng`` (not noise)."""
    masks = rng.integers(
        0, np.iinfo(np.uint64).max, size=(n_servers - 1, *enc.shape), dtype=np.uint64, endpoint=True
    )
    last = enc.view(np.uint64) - masks.sum(axis=0, dtype=np.uint64)
    return np.concatenate([masks, last[None]], axis=0)


@validate_params(
    {"n_servers": [Interval(numbers.Integral, 2, None, closed="left")], "random_state": ["random_state"]}
)
def additive_shares(msg: Any, n_servers: int = 2, random_state: Any = None) -> np.ndarray:
    """Split a real array into ``n_servers`` additive shares modulo ``2**64`` (fixed point).

    The message is encoded with :data:`FIXED_POINT_BITS` fractional bits; all but
    the last share are uniform 64-bit masks from ``random_state`` and the last is
    the encoding minus their sum (wrapping). Any ``n_servers - 1`` shares are
    uniform and independent of the message. The masks are public-seeded simulation
    randomness, not privacy noise.

    Parameters
    ----------
    msg : float or array-like of float
        The message; entries must have magnitude below ``MAX_ABS`` (``2**30``).
        Values are rounded to the grid ``2**-32``.
    n_servers : int, default 2
        Number of shares (servers), ``>= 2``.
    random_state : None, int or numpy Generator, default None
        Seeds the masks (public simulation randomness).

    Returns
    -------
    numpy.ndarray of uint64, shape ``(n_servers, *msg.shape)``
        The shares (a scalar ``msg`` is treated as shape ``(1,)``).

    Raises
    ------
    DataError
        When ``msg`` is not numeric or has an entry of magnitude ``>= MAX_ABS``.

    Examples
    --------
    >>> sh = additive_shares([1.5, -2.25], 3, random_state=0)
    >>> reconstruct(sh).tolist()
    [1.5, -2.25]
    """
    arr = np.asarray(check_numeric_array(np.atleast_1d(msg), "msg", min_rows=0), dtype=float)
    n_servers = int(n_servers)
    rng = make_generator(random_state)
    if arr.size and np.abs(arr).max() >= MAX_ABS:
        raise DataError(
            f"msg has entries of magnitude >= {MAX_ABS:.3g}, beyond the fixed-point range; rescale it.",
            argument="msg",
        )
    return share_int(encode(arr), n_servers, rng)


def reconstruct(shares: Any) -> np.ndarray:
    """Add additive shares modulo ``2**64`` and decode the fixed-point result to floats.

    The inverse of :func:`additive_shares`: all shares together give back the
    message rounded to the grid ``2**-32``; any fewer are uniform noise.

    Parameters
    ----------
    shares : numpy.ndarray of uint64, shape (n_servers, ...)
        Every server's share, as made by :func:`additive_shares` (``n_servers >= 2``).

    Returns
    -------
    numpy.ndarray of float, shape ``shares.shape[1:]``
        The decoded message.

    Raises
    ------
    DataError
        When ``shares`` is not a uint64 array with at least two shares.

    Examples
    --------
    >>> sh = additive_shares([0.1, 3.0], random_state=1)
    >>> sh.shape, float(reconstruct(sh)[1])
    ((2, 2), 3.0)
    >>> bool(abs(reconstruct(sh)[0] - 0.1) <= 2.0**-33)
    True
    """
    arr = np.asarray(shares)
    if arr.dtype != np.uint64 or arr.ndim < 1 or arr.shape[0] < 2:
        raise DataError(
            "shares must be a uint64 array of shape (n_servers >= 2, ...) as made by additive_shares.",
            argument="shares",
        )
    return decode(arr.sum(axis=0, dtype=np.uint64).view(np.int64))


def secure_sum(
    enc: np.ndarray, row_ptr: np.ndarray, m: int, n_servers: int, rng: np.random.Generator
) -> np.ndarray:
    """Simulate one round on fixed-point messages: each is secret-shared, each server sums per sketch row.

    Returns the exact int64 sums of the messages of each sketch row (modulo ``2**64``,
    which the range check keeps from wrapping).
    """
    shares = share_int(enc, n_servers, rng)  # (servers, nnz, d)
    nonempty = np.flatnonzero(np.diff(row_ptr) > 0)
    server_sums = np.zeros((n_servers, m, enc.shape[1]), dtype=np.uint64)
    if nonempty.size:
        # Each server adds up, per sketch row, the shares it received (mod 2**64).
        server_sums[:, nonempty] = np.add.reduceat(shares, row_ptr[nonempty], axis=1, dtype=np.uint64)
    return server_sums.sum(axis=0, dtype=np.uint64).view(np.int64)
