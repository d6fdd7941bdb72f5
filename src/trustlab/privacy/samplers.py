"""Noise samplers that are safe against floating-point attacks.

All noise is sampled exactly from cryptographically secure randomness: the
discrete Gaussian on integers and the floating-point-safe continuous Laplace and
Gaussian by OpenDP (Rust); the discrete Laplace by Canonne, Kamath and Steinke's
exact algorithm vectorised in NumPy integers on the operating system's secure
uniform integers (``trustlab.privacy._exact_laplace``, ~50x faster than OpenDP's
element-by-element draw), or by OpenDP for a scale whose exact fraction does not
fit 64-bit arithmetic.
NumPy's samplers are never used for privacy noise (Mironov, CCS 2012, shows how
their rounding leaks). Uniform integers (:func:`uniform_int`), used inside
mechanisms to break ties and to pick a grid point, are exact draws from the
operating system's cryptographically secure generator.

**Add noise to the data, not the other way round.** The ``add_*`` functions take
the values themselves and form the noisy sum exactly (in OpenDP's arbitrary
precision, or with overflow-checked integers for the discrete Laplace) before
converting back: an integer sum that exceeds the 64-bit range saturates
(post-processing of the exact noisy value, so it stays private), and a float
value is first rounded to the public grid ``2**k`` and the noise is drawn exactly
on that grid, so every float output lies on the grid and its low bits say nothing.
Drawing noise around 0 and adding it yourself is what the ``add_*`` functions
exist to avoid: a clamped noise sample (``x + clamp(Z)``) reveals ``x`` at the
clamp, and ``x + Z`` rounded in floating point reveals low bits of ``x``.

OpenDP's randomness cannot be seeded, by design: DP noise is not reproducible
run to run, while everything else in trustlab is. A ``random_state`` in trustlab
never drives noise.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from trustlab._validation import check_positive_int
from trustlab.errors import DataError, ParameterError
from trustlab.privacy import _exact_laplace
from trustlab.privacy._opendp import opendp
from trustlab.privacy._selection import bernoulli, exponential_select, uniform_int

__all__ = [
    "MAX_INTEGER_SCALE",
    "add_discrete_gaussian",
    "add_discrete_laplace",
    "add_gaussian",
    "add_laplace",
    "bernoulli",
    "discrete_gaussian",
    "discrete_laplace",
    "exponential_select",
    "gaussian",
    "grid_slack",
    "laplace",
    "uniform_int",
]

MAX_INTEGER_SCALE = 2.0**52
"""Largest scale of integer noise trustlab draws.

At this scale a 64-bit result saturates with probability below ``exp(-1000)``; a
larger scale (an epsilon so small that the noise would swamp any 64-bit count)
is refused with a :class:`~trustlab.errors.ParameterError` rather than served
inexactly.
"""

_INT64_MAX = np.iinfo(np.int64).max


def _check_scale(scale: Any, *, integer: bool = False) -> float:
    if isinstance(scale, bool) or not isinstance(scale, int | float | np.integer | np.floating):
        raise ParameterError(f"noise scale must be a number, got {scale!r}.", argument="scale")
    scale = float(scale)
    if not math.isfinite(scale) or scale < 0:
        raise ParameterError(
            f"noise scale must be finite and >= 0, got {scale}; epsilon is too small (or not a "
            "positive number) for this release.",
            argument="scale",
        )
    if integer and scale > MAX_INTEGER_SCALE:
        raise ParameterError(
            f"noise scale {scale:.3g} exceeds {MAX_INTEGER_SCALE:.3g}, beyond what 64-bit integer "
            "noise can serve exactly; increase epsilon (or reduce the sensitivity/resolution).",
            argument="scale",
        )
    return scale


def _int_values(values: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    arr = np.asarray(values)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.isfinite(arr).all() and (arr == np.floor(arr)).all():
            arr = arr.astype(np.float64)
            if arr.size and np.abs(arr).max() >= 2.0**63:
                raise DataError("values exceed the 64-bit integer range.", argument="values")
            arr = arr.astype(np.int64)
        else:
            raise DataError(
                f"values must be integers (got dtype {arr.dtype}); integer noise is added to integer "
                "queries only.",
                argument="values",
            )
    if arr.dtype.kind == "u" and arr.size and arr.max() > _INT64_MAX:
        raise DataError("values exceed the 64-bit integer range.", argument="values")
    return arr.astype(np.int64).ravel(), arr.shape


def _add_integer_noise(values: Any, scale: Any, kind: str) -> np.ndarray:
    scale = _check_scale(scale, integer=True)
    flat, shape = _int_values(values)
    if flat.size == 0 or scale == 0.0:
        return flat.reshape(shape)
    if kind == "laplace" and _exact_laplace.fits(scale):  # a property of the public scale
        return _exact_laplace.add(flat, scale).reshape(shape)
    # a contiguous int64 array crosses into OpenDP as one buffer (a list is checked element by element)
    noisy = _integer_measurement(kind, scale)(np.ascontiguousarray(flat, dtype=np.int64))
    return np.asarray(noisy, dtype=np.int64).reshape(shape)


@lru_cache(maxsize=256)
def _integer_measurement(kind: str, scale: float) -> Any:
    """OpenDP's integer noise measurement for ``kind`` and ``scale`` (built once: the build costs ms)."""
    dp = opendp()
    space = (
        dp.vector_domain(dp.atom_domain(T="i64")),
        *((dp.l1_distance(T="i64"),) if kind == "laplace" else (dp.l2_distance(T="i64"),)),
    )
    maker = dp.m.make_laplace if kind == "laplace" else dp.m.make_gaussian
    return maker(*space, scale=scale)


def add_discrete_laplace(values: Any, scale: float) -> np.ndarray:
    """Add independent discrete Laplace noise of scale ``scale`` to integer ``values`` (exact).

    The noise ``k`` has probability proportional to ``exp(-|k| / scale)``; adding it to
    an integer query of L1 sensitivity ``s`` gives ``s / scale``-DP. The draw is
    Canonne, Kamath and Steinke's exact algorithm on the scale's exact fraction, in
    vectorised integers (OpenDP's sampler when that fraction is too large for 64
    bits). The sum is formed exactly and saturates at the 64-bit limits
    (post-processing of the exact noisy value; with ``scale <= MAX_INTEGER_SCALE`` a
    saturation has probability below ``exp(-1000)``).

    Parameters
    ----------
    values : int or array-like of int
        The exact integer query answers (counts, sums of grid units).
    scale : float
        Noise scale, ``0 <= scale <= MAX_INTEGER_SCALE``.

    Returns
    -------
    numpy.ndarray of int64
        ``values`` plus noise, in ``values``' shape.

    References
    ----------
    Canonne, Kamath, Steinke. "The Discrete Gaussian for Differential Privacy".
    NeurIPS 2020, Algorithms 1 and 2.

    Examples
    --------
    >>> add_discrete_laplace([5, 7], 0.0).tolist()
    [5, 7]
    """
    return _add_integer_noise(values, scale, "laplace")


def add_discrete_gaussian(values: Any, scale: float) -> np.ndarray:
    """Add independent discrete Gaussian noise of scale ``scale`` to integer ``values`` (OpenDP).

    The noise ``k`` has probability proportional to ``exp(-k**2 / (2 scale**2))``; for an
    integer query of L2 sensitivity ``s`` the release is ``rho``-zCDP with
    ``rho = s**2 / (2 scale**2)``. Arithmetic as in :func:`add_discrete_laplace`.

    Parameters
    ----------
    values : int or array-like of int
        The exact integer query answers (floats are accepted only when they are
        whole numbers).
    scale : float
        Noise scale (the std of the underlying continuous Gaussian),
        ``0 <= scale <= MAX_INTEGER_SCALE``; 0 returns ``values`` unchanged.

    Returns
    -------
    numpy.ndarray of int64
        ``values`` plus noise, in ``values``' shape (saturated at the int64 limits).

    Raises
    ------
    ParameterError
        When ``scale`` is negative, not finite or above ``MAX_INTEGER_SCALE``.
    DataError
        When ``values`` are not integers or exceed the 64-bit range.

    References
    ----------
    Canonne, Kamath, Steinke. "The Discrete Gaussian for Differential Privacy".
    NeurIPS 2020.

    Examples
    --------
    >>> add_discrete_gaussian(3, 0.0).tolist()
    3
    """
    return _add_integer_noise(values, scale, "gaussian")


def discrete_laplace(scale: float, size: int) -> np.ndarray:
    """Draw ``size`` independent discrete Laplace (two-sided geometric) integers.

    Noise alone, for tests and simulations. To release a query, pass its value to
    :func:`add_discrete_laplace` instead, so that the sum is formed exactly.

    Parameters
    ----------
    scale : float
        Noise scale: ``P(k)`` is proportional to ``exp(-|k| / scale)``,
        ``0 <= scale <= MAX_INTEGER_SCALE``.
    size : int
        Number of draws, ``>= 0``.

    Returns
    -------
    numpy.ndarray of int64
        ``size`` independent draws (unseeded).

    References
    ----------
    Canonne, Kamath, Steinke. "The Discrete Gaussian for Differential Privacy".
    NeurIPS 2020.

    Examples
    --------
    >>> discrete_laplace(0.0, 2).tolist()
    [0, 0]
    """
    size = check_positive_int(size, "size", minimum=0)
    return add_discrete_laplace(np.zeros(size, dtype=np.int64), scale)


def discrete_gaussian(scale: float, size: int) -> np.ndarray:
    """Draw ``size`` independent discrete Gaussian integers (OpenDP's exact sampler).

    Noise alone, for tests and simulations; release queries with
    :func:`add_discrete_gaussian`.

    Parameters
    ----------
    scale : float
        Noise scale: ``P(k)`` is proportional to ``exp(-k**2 / (2 scale**2))``,
        ``0 <= scale <= MAX_INTEGER_SCALE``.
    size : int
        As in :func:`discrete_laplace`.

    Returns
    -------
    numpy.ndarray of int64
        As in :func:`discrete_laplace`.

    References
    ----------
    Canonne, Kamath, Steinke. "The Discrete Gaussian for Differential Privacy".
    NeurIPS 2020.

    Examples
    --------
    >>> discrete_gaussian(0.0, 3).tolist()
    [0, 0, 0]
    """
    size = check_positive_int(size, "size", minimum=0)
    return add_discrete_gaussian(np.zeros(size, dtype=np.int64), scale)


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not (-1074 <= int(k) <= 1023):
        raise ParameterError(
            f"k must be an integer in [-1074, 1023] (the output grid is 2**k), got {k!r}.", argument="k"
        )
    return int(k)


def _float_values(values: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise DataError("values must be real numbers.", argument="values") from None
    if not np.isfinite(arr).all():
        raise DataError("values contain NaN or infinite entries.", argument="values")
    return arr.ravel(), arr.shape


def _add_float_noise(values: Any, scale: Any, k: Any, kind: str) -> np.ndarray:
    scale = _check_scale(scale)
    k = _check_k(k)
    flat, shape = _float_values(values)
    if flat.size == 0:
        return flat.reshape(shape)
    dp = opendp()
    grid = 2.0**k
    if scale == 0.0:
        return (np.round(flat / grid) * grid).reshape(shape)
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=int(flat.size))
    metric = dp.l1_distance(T=float) if kind == "laplace" else dp.l2_distance(T=float)
    maker = dp.m.make_laplace if kind == "laplace" else dp.m.make_gaussian
    meas = maker(domain, metric, scale=scale, k=k)
    return np.asarray(meas(flat.tolist()), dtype=float).reshape(shape)


def add_laplace(values: Any, scale: float, *, k: int) -> np.ndarray:
    """Add continuous Laplace noise to float ``values`` with outputs on the public grid ``2**k`` (OpenDP).

    OpenDP rounds each value to the nearest multiple of ``2**k`` and adds noise
    sampled exactly on that grid, so every output is a multiple of ``2**k`` whatever
    the input's low bits (the snapping defence of Mironov 2012). The rounding moves
    each value by at most ``2**(k-1)``, so a query of L1 sensitivity ``s`` over
    ``size`` values has sensitivity at most ``s + grid_slack(k, size, "l1")`` after it;
    the release is ``that / scale``-DP.

    Parameters
    ----------
    values : float or array-like of float
        Finite query answers.
    scale : float
        Laplace scale ``b >= 0``.
    k : int
        Output grid exponent: outputs are multiples of ``2**k``.

    Returns
    -------
    numpy.ndarray of float

    References
    ----------
    Mironov. "On Significance of the Least Significant Bits for Differential
    Privacy". CCS 2012.

    Examples
    --------
    >>> float(add_laplace(0.3, 0.0, k=-2))
    0.25
    """
    return _add_float_noise(values, scale, k, "laplace")


def add_gaussian(values: Any, scale: float, *, k: int) -> np.ndarray:
    """Add Gaussian noise of std ``scale`` to float ``values``, outputs on the grid ``2**k`` (OpenDP).

    As :func:`add_laplace`: each value is rounded to the nearest multiple of ``2**k``
    and the noise is sampled exactly on that grid, so an L2 sensitivity ``s`` becomes
    ``s + grid_slack(k, size, "l2")``; the release is then the Gaussian mechanism with
    noise multiplier ``scale / (s + grid_slack(k, size, "l2"))``.

    Parameters
    ----------
    values : float or array-like of float
        Finite query answers.
    scale : float
        Standard deviation of the noise, ``>= 0``; 0 only rounds to the grid.
    k : int
        Output grid exponent in ``[-1074, 1023]``: outputs are multiples of ``2**k``.

    Returns
    -------
    numpy.ndarray of float
        ``values`` plus noise, in ``values``' shape, every entry a multiple of ``2**k``.

    Raises
    ------
    ParameterError
        When ``scale`` is negative or not finite, or ``k`` is out of range.
    DataError
        When ``values`` contain NaN, infinite or non-numeric entries.

    References
    ----------
    Mironov. "On Significance of the Least Significant Bits for Differential
    Privacy". CCS 2012.

    Examples
    --------
    >>> add_gaussian([1.0, 2.6], 0.0, k=0).tolist()
    [1.0, 3.0]
    """
    return _add_float_noise(values, scale, k, "gaussian")


def grid_slack(k: int, size: int, norm: str) -> float:
    """Largest change in a query's sensitivity from rounding ``size`` values to the grid ``2**k``.

    Each value moves by at most ``2**k / 2``; two neighbouring inputs can move in
    opposite directions, so a coordinate's difference grows by at most ``2**k``: the
    L1 slack is ``size * 2**k`` and the L2 slack ``sqrt(size) * 2**k`` (OpenDP's own
    privacy map adds the same).

    Parameters
    ----------
    k : int
        Grid exponent: values are rounded to multiples of ``2**k``.
    size : int
        Number of rounded values (>= 0).
    norm : {"l1", "l2"}
        The norm of the sensitivity.

    Returns
    -------
    float
        The slack to add to the sensitivity.

    Examples
    --------
    >>> grid_slack(-10, 4, "l2")
    0.001953125
    """
    k = _check_k(k)
    size = check_positive_int(size, "size", minimum=0)
    if norm not in ("l1", "l2"):
        raise ParameterError(f"norm must be 'l1' or 'l2', got {norm!r}.", argument="norm")
    return float(size if norm == "l1" else math.sqrt(size)) * 2.0**k


def laplace(scale: float, size: int) -> np.ndarray:
    """Draw ``size`` floating-point-safe continuous Laplace values (OpenDP), noise alone.

    For tests and simulations. Adding these to data in floating point yourself
    brings back the low-bit leak; release values with :func:`add_laplace`.

    Parameters
    ----------
    scale : float
        Laplace scale ``b >= 0`` (density proportional to ``exp(-|x| / b)``).
    size : int
        Number of draws, ``>= 0``.

    Returns
    -------
    numpy.ndarray of float
        ``size`` independent draws (unseeded).

    Examples
    --------
    >>> z = laplace(1.0, 4)
    >>> z.shape, z.dtype
    ((4,), dtype('float64'))
    """
    scale = _check_scale(scale)
    size = check_positive_int(size, "size", minimum=0)
    if size == 0:
        return np.zeros(0)
    dp = opendp()
    meas = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=scale
    )
    return np.asarray(meas([0.0] * size), dtype=float)


def gaussian(scale: float, size: int) -> np.ndarray:
    """Draw ``size`` floating-point-safe Gaussian values of std ``scale`` (OpenDP), noise alone.

    For tests, simulations and non-DP randomisation (e.g. DSI noise); release values
    under DP with :func:`add_gaussian`.

    Parameters
    ----------
    scale : float
        Standard deviation, ``>= 0``.
    size : int
        Number of draws, ``>= 0``.

    Returns
    -------
    numpy.ndarray of float
        ``size`` independent draws (unseeded).

    Examples
    --------
    >>> z = gaussian(2.0, 5)
    >>> z.shape, bool(((z > -100) & (z < 100)).all())
    ((5,), True)
    """
    scale = _check_scale(scale)
    size = check_positive_int(size, "size", minimum=0)
    if size == 0:
        return np.zeros(0)
    dp = opendp()
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float), scale=scale
    )
    return np.asarray(meas([0.0] * size), dtype=float)
