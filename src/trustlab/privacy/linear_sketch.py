"""The linear-transformation model (LTM): private linear sketches from distributed clients.

``n`` clients each hold a row ``a_i`` of ``A`` (``n x d``). A public sketch matrix
``S`` (``m x n``) is applied by a simulated secure aggregation over a few
non-colluding servers; every client adds a small Gaussian noise *share* to its
contribution, and the shares sum to central-model noise on ``S A``. The released
sketch ``S A + E`` therefore carries an error that does not grow with ``n``, and
low-rank approximation (:class:`LTMLowRank`) and ridge regression
(:class:`LTMRidge`) run on it as post-processing.

Baselines at the same privacy: :func:`local_variant` (the paper's interpolation
between the local model, ``p=0``, and the LTM, ``p=1``), and two central-model
methods, :func:`central_mod_sulq` and :func:`central_ssp_ridge`.

The secure aggregation is a *simulation* (additive secret shares in fixed point
modulo ``2**64``, masks from a seeded NumPy generator, servers summing their
shares in one process); it is not a cryptographic protocol and gives no security
against anyone who can read this process's memory.

References
----------
Jakob Burkhardt, Hannah Keller, Claudio Orlandi, Chris Schwiegelshohn.
"Distributed Differentially Private Data Analytics via Secure Sketching".
ICML 2025 (PMLR 267:5913-5942; arXiv 2412.00497).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin

from trustlab._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_numeric_array,
    check_positive,
    check_positive_int,
    make_generator,
)
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.privacy.calibration import DG_ROUNDING_TV, grid_gaussian_epsilon, grid_gaussian_sigma
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import MAX_INTEGER_SCALE, add_discrete_gaussian, add_discrete_laplace

__all__ = [
    "FIXED_POINT_BITS",
    "LTMLowRank",
    "LTMRidge",
    "additive_shares",
    "central_mod_sulq",
    "central_ssp_ridge",
    "local_variant",
    "low_rank_excess",
    "ltm_release",
    "make_sketch",
    "reconstruct",
    "ridge_cost_ratio",
]

FIXED_POINT_BITS = 32
"""Fractional bits of the fixed-point encoding used by the simulated secure aggregation."""

_SCALE = float(2**FIXED_POINT_BITS)
_MAX_ABS = 2.0**62 / _SCALE  # keeps every partial sum inside the signed 64-bit range
_KINDS = ("osnap", "dense")
_MECHANISMS = ("gaussian", "laplace")
_NEIGHBOURING = ("replace", "add_remove")
_NOISE = ("aggregated", "per_client")


# ----------------------------------------------------------------------------- checks


def _honest(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0.0 < float(value) <= 1.0):
        raise ParameterError(
            f"honest_fraction must be a number in (0, 1] (the share of each sketch row's "
            f"contributors assumed to add their noise), got {value!r}.",
            argument="honest_fraction",
        )
    return float(value)


def _privacy(epsilon: Any, delta: Any, mechanism: str) -> tuple[float, float]:
    eps = check_epsilon(epsilon, allow_inf=True)
    dlt = check_delta(delta)
    if mechanism == "gaussian" and math.isfinite(eps) and dlt == 0.0:
        raise ParameterError(
            "delta must be > 0 for the Gaussian mechanism (e.g. 1e-5, well below 1/n); "
            "use mechanism='laplace' for pure epsilon-DP.",
            argument="delta",
        )
    return eps, dlt


def _matrix(A: Any, name: str, *, private: bool = False) -> np.ndarray:
    """A 2-d float array; for private data a row with NaN or +-inf becomes a zero row.

    Shape and type are public and checked; the values of private rows are not: a
    client whose row is not finite contributes nothing (as a zero row), so no
    exception depends on them. Public inputs (evaluation data, new rows to
    predict) still raise on non-finite values.
    """
    if sp.issparse(A):
        raise DataError(
            f"{name} is a sparse matrix; sparse input is not supported, pass {name}.toarray().",
            argument=name,
        )
    arr = check_numeric_array(A, name, ndim=2, allow_nan=private)
    if arr.shape[1] == 0:
        raise DataError(f"{name} has no columns; pass an (n_clients, n_features) array.", argument=name)
    if private:
        arr = np.where(np.isfinite(arr).all(axis=1)[:, None], arr, 0.0)
    return arr


def _check_sketch(S: Any, n: int) -> sp.csr_matrix:
    if isinstance(S, str | bytes) or S is None:
        raise ParameterError(
            f"S must be a sparse matrix or 2-D array of shape (m, {n}); build one with make_sketch(m, {n}).",
            argument="S",
        )
    try:
        mat = sp.csr_matrix(S, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ParameterError(
            f"S must be a numeric matrix; converting it failed ({exc}).", argument="S"
        ) from None
    if mat.shape[1] != n or mat.shape[0] < 1:
        raise ParameterError(
            f"S must have shape (m, n_clients) = (m, {n}), got {mat.shape}; "
            "the sketch has one column per client (row of A).",
            argument="S",
        )
    if not np.all(np.isfinite(mat.data)):
        raise ParameterError("S contains NaN or infinite entries.", argument="S")
    mat.eliminate_zeros()
    mat.sort_indices()
    return mat


def _clip_rows(A: np.ndarray, bound: float) -> np.ndarray:
    norms = np.linalg.norm(A, axis=1)
    factor = np.minimum(1.0, bound / np.maximum(norms, np.finfo(float).tiny))
    return A * factor[:, None]


# ----------------------------------------------------------------------------- sketch


def make_sketch(m: int, n: int, kind: str = "osnap", s: int = 2, random_state: Any = None) -> sp.csc_matrix:
    """Draw a public sketch matrix ``S`` (``m x n``) with unit-norm columns.

    Parameters
    ----------
    m : int
        Sketch rows (the paper's target dimension).
    n : int
        Columns, one per client.
    kind : {"osnap", "dense"}, default "osnap"
        ``"osnap"``: sparse JL / OSNAP, ``s`` non-zeros per column at distinct
        uniformly chosen rows, values ``+-1/sqrt(s)`` (``s=1`` is CountSketch).
        ``"dense"``: every entry ``+-1/sqrt(m)``.
    s : int, default 2
        Non-zeros per column for ``"osnap"`` (``1 <= s <= m``).
    random_state : None, int or numpy Generator
        Seeds the (public, non-private) sketch.

    Returns
    -------
    scipy.sparse.csc_matrix

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025. Nelson, Nguyen. "OSNAP: Faster
    numerical linear algebra algorithms via sparser subspace embeddings". FOCS 2013.

    Examples
    --------
    >>> S = make_sketch(8, 5, s=2, random_state=0)
    >>> S.shape, S.getnnz(axis=0).tolist()
    ((8, 5), [2, 2, 2, 2, 2])
    >>> bool(np.allclose(np.sqrt(S.multiply(S).sum(axis=0)), 1.0))
    True
    """
    m = check_positive_int(m, "m")
    n = check_positive_int(n, "n")
    kind = check_choice(kind, "kind", _KINDS)
    rng = make_generator(random_state)
    if kind == "dense":
        signs = rng.choice(np.array([-1.0, 1.0]), size=(m, n)) / math.sqrt(m)
        return sp.csc_matrix(signs)
    s = check_positive_int(s, "s")
    if s > m:
        raise ParameterError(
            f"s must be <= m (non-zeros per column fit in {m} rows), got s={s}.", argument="s"
        )
    rows = rng.integers(0, m, size=(n, s))
    # Redraw the later of any repeated rows until every column has s distinct rows.
    while True:
        srt = np.sort(rows, axis=1)
        dup = (srt[:, 1:] == srt[:, :-1]).any(axis=1) if s > 1 else np.zeros(n, bool)
        if not dup.any():
            break
        rows[dup] = rng.integers(0, m, size=(int(dup.sum()), s))
    vals = rng.choice(np.array([-1.0, 1.0]), size=(n, s)) / math.sqrt(s)
    cols = np.repeat(np.arange(n), s)
    return sp.csc_matrix((vals.ravel(), (rows.ravel(), cols)), shape=(m, n))


# ----------------------------------------------------------------------------- secure aggregation


def _encode(arr: np.ndarray) -> np.ndarray:
    """Fixed-point encoding ``rint(x * 2**32)`` as int64 (``|x| < _MAX_ABS`` checked by callers)."""
    return np.rint(arr * _SCALE).astype(np.int64)


def _decode(enc: np.ndarray) -> np.ndarray:
    """Floats of fixed-point integers: ``k / 2**32`` (exact while ``|k| < 2**53``; else the nearest float)."""
    return enc.astype(float) / _SCALE


def _share_int(enc: np.ndarray, n_servers: int, rng: np.random.Generator) -> np.ndarray:
    """Additive shares modulo ``2**64`` of int64 fixed-point values; masks from ``rng`` (not noise)."""
    masks = rng.integers(
        0, np.iinfo(np.uint64).max, size=(n_servers - 1, *enc.shape), dtype=np.uint64, endpoint=True
    )
    last = enc.view(np.uint64) - masks.sum(axis=0, dtype=np.uint64)
    return np.concatenate([masks, last[None]], axis=0)


def additive_shares(msg: Any, n_servers: int = 2, random_state: Any = None) -> np.ndarray:
    """Split a real array into ``n_servers`` additive shares modulo ``2**64`` (fixed point).

    The message is encoded with :data:`FIXED_POINT_BITS` fractional bits; all but
    the last share are uniform 64-bit masks from ``random_state`` and the last is
    the encoding minus their sum (wrapping). Any ``n_servers - 1`` shares are
    uniform and independent of the message. The masks are public-seeded simulation
    randomness, not privacy noise.

    Returns
    -------
    numpy.ndarray of uint64, shape ``(n_servers, *msg.shape)``

    Examples
    --------
    >>> sh = additive_shares([1.5, -2.25], 3, random_state=0)
    >>> reconstruct(sh).tolist()
    [1.5, -2.25]
    """
    arr = np.asarray(check_numeric_array(np.atleast_1d(msg), "msg", min_rows=0), dtype=float)
    n_servers = check_positive_int(n_servers, "n_servers", minimum=2)
    rng = make_generator(random_state)
    if arr.size and np.abs(arr).max() >= _MAX_ABS:
        raise DataError(
            f"msg has entries of magnitude >= {_MAX_ABS:.3g}, beyond the fixed-point range; rescale it.",
            argument="msg",
        )
    return _share_int(_encode(arr), n_servers, rng)


def reconstruct(shares: Any) -> np.ndarray:
    """Add additive shares modulo ``2**64`` and decode the fixed-point result to floats."""
    arr = np.asarray(shares)
    if arr.dtype != np.uint64 or arr.ndim < 1 or arr.shape[0] < 2:
        raise DataError(
            "shares must be a uint64 array of shape (n_servers >= 2, ...) as made by additive_shares.",
            argument="shares",
        )
    return _decode(arr.sum(axis=0, dtype=np.uint64).view(np.int64))


def _secure_sum(
    enc: np.ndarray, row_ptr: np.ndarray, m: int, n_servers: int, rng: np.random.Generator
) -> np.ndarray:
    """Simulate one round on fixed-point messages: each is secret-shared, each server sums per sketch row.

    Returns the exact int64 sums of the messages of each sketch row (modulo ``2**64``,
    which the range check keeps from wrapping).
    """
    shares = _share_int(enc, n_servers, rng)  # (servers, nnz, d)
    nonempty = np.flatnonzero(np.diff(row_ptr) > 0)
    server_sums = np.zeros((n_servers, m, enc.shape[1]), dtype=np.uint64)
    if nonempty.size:
        # Each server adds up, per sketch row, the shares it received (mod 2**64).
        server_sums[:, nonempty] = np.add.reduceat(shares, row_ptr[nonempty], axis=1, dtype=np.uint64)
    return server_sums.sum(axis=0, dtype=np.uint64).view(np.int64)


# ----------------------------------------------------------------------------- release


def _check_integer_scale(std: float, what: str) -> None:
    if std * _SCALE > MAX_INTEGER_SCALE:
        raise ParameterError(
            f"the {what} ({std:.3g}) exceeds 2**20, the largest noise the {FIXED_POINT_BITS}-bit fixed-point "
            "grid carries exactly; raise epsilon, or rescale the data so that row_bound is smaller.",
            argument="epsilon",
        )


def _discrete_noise_grouped(enc: np.ndarray, std: np.ndarray, kind: str) -> np.ndarray:
    """Add discrete noise of scale ``std[i]`` (data units) to row ``i`` of the fixed-point ``enc``.

    The noise is OpenDP's exact discrete Gaussian (``kind="gaussian"``, ``std`` is its
    scale) or discrete Laplace (``std`` is the Laplace scale) on the fixed-point grid
    ``2**-32``, added to the integers inside OpenDP.
    """
    out = enc.copy()
    add = add_discrete_gaussian if kind == "gaussian" else add_discrete_laplace
    for value in np.unique(std):
        if value <= 0:
            continue
        idx = np.flatnonzero(std == value)
        out[idx] = add(enc[idx], float(value) * _SCALE)
    return out


def _grid_slack(sens: float, cnt: int, share_ratio: float, shares_per_entry: float) -> float:
    """The constant ``C`` of the grid term ``C / sigma_c**2`` (see :func:`calibration.grid_gaussian_sigma`).

    ``sigma_c * share_ratio`` is the smallest std of one discrete share (the whole
    entry when noise is aggregated), ``shares_per_entry`` the most shares an entry sums
    and ``cnt`` the most noisy coordinates one client's row touches.
    """
    h = 1.0 / _SCALE
    rounding = 0.5 * sens * h / share_ratio
    tv = cnt * shares_per_entry * DG_ROUNDING_TV * h * h / share_ratio**2
    return rounding + tv


def _rounding_slack(neighbouring: str) -> float:
    """Most that rounding to the fixed-point grid adds to one coordinate's change (data units).

    ``|round(x) - round(x')| <= |x - x'| + h`` under replacement and
    ``|round(x)| <= |x| + h / 2`` for an added or removed client, ``h = 2**-32``.
    """
    return (1.0 if neighbouring == "replace" else 0.5) / _SCALE


def _realised_epsilon(
    S: sp.csr_matrix,
    ratio: np.ndarray,
    row_sens: float,
    slack: float,
    sigma_c: float,
    sens: float,
    delta: float,
    share_ratio: float | None,
    cnt: int,
    per_entry: float,
) -> float:
    """Epsilon at ``delta`` of the Gaussian sketch whose row ``j`` has noise variance ``ratio[j] sigma_c**2``.

    Whitening each row (post-processing) leaves noise ``sigma_c`` on every entry and
    a client's L2 sensitivity at most ``row_sens * sqrt(sum_j S_ji**2 / ratio_j)`` plus
    the rounding ``slack`` over the smallest ``sqrt(ratio_j)``; a row with no noise and
    a non-zero ``S_ji`` makes the release exact (``inf``). The grid term is recomputed
    for that sensitivity and for the smallest discrete share actually drawn
    (``share_ratio * sigma_c`` per client, or the whole entry when aggregated).
    """
    rows = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
    inv = np.divide(1.0, ratio, out=np.full(ratio.shape, math.inf), where=ratio > 0)
    per_client = np.bincount(S.indices, weights=S.data**2 * inv[rows], minlength=S.shape[1])
    inv_max = float(inv[rows].max()) if rows.size else 1.0
    eff = row_sens * math.sqrt(float(per_client.max())) + slack * math.sqrt(inv_max)
    if eff <= sens * (1 + 1e-12):
        return 0.0  # no row below sigma_c**2: the requested epsilon holds
    if not math.isfinite(eff):
        return math.inf
    s_ratio = share_ratio if share_ratio is not None else math.sqrt(1.0 / inv_max)
    if s_ratio * sigma_c * _SCALE < 1.0:
        return math.inf  # shares narrower than one grid unit: no bound is claimed
    grid = 0.5 * eff / (_SCALE * s_ratio) + cnt * per_entry * DG_ROUNDING_TV / (_SCALE * s_ratio) ** 2
    return grid_gaussian_epsilon(sigma_c, delta, eff, grid)


def _release(
    A: Any,
    S: Any,
    epsilon: Any,
    delta: Any,
    row_bound: Any,
    *,
    mechanism: str,
    honest_fraction: Any,
    p: float,
    neighbouring: str,
    noise: str,
    n_servers: int,
    withholding: Any,
    random_state: Any,
    name: str = "A",
) -> Release:
    mechanism = check_choice(mechanism, "mechanism", _MECHANISMS)
    neighbouring = check_choice(neighbouring, "neighbouring", _NEIGHBOURING)
    noise = check_choice(noise, "noise", _NOISE)
    eps, dlt = _privacy(epsilon, delta, mechanism)
    A = _matrix(A, name, private=True)
    n, d = A.shape
    bound = check_positive(row_bound, "row_bound")
    gamma = _honest(honest_fraction)
    n_servers = check_positive_int(n_servers, "n_servers", minimum=2)
    S = _check_sketch(S, n)
    rng = make_generator(random_state)
    m = S.shape[0]
    if bound * max(1.0, float(np.abs(S.data).max(initial=0.0))) * n >= _MAX_ABS:
        raise ParameterError(
            f"row_bound={bound} times n={n} exceeds the fixed-point range ({_MAX_ABS:.3g}); "
            "rescale the data.",
            argument="row_bound",
        )
    withheld = np.zeros(n, dtype=bool)
    if withholding is not None:
        w = np.asarray(withholding)
        if w.dtype == bool and w.shape == (n,):
            withheld = w.copy()
        elif (
            w.ndim == 1
            and np.issubdtype(w.dtype, np.integer)
            and (w.size == 0 or (w.min() >= 0 and w.max() < n))
        ):
            withheld[w] = True
        else:
            raise ParameterError(
                f"withholding must be a boolean mask of length {n} or indices of clients in [0, {n}).",
                argument="withholding",
            )
    private = math.isfinite(eps)
    if (
        mechanism == "laplace"
        and private
        and (noise != "aggregated" or gamma != 1.0 or p != 1.0 or withheld.any())
    ):
        raise ParameterError(
            "mechanism='laplace' needs per-client Gamma noise shares, and trustlab.privacy.samplers has no "
            "floating-point-safe Gamma sampler; it is available only with noise='aggregated', "
            "honest_fraction=1, no withholding (the sum of honest shares is then exactly Laplace). "
            "Use mechanism='gaussian' otherwise.",
            argument="mechanism",
        )

    clipped = _clip_rows(A, bound)
    factor = 2.0 if neighbouring == "replace" else 1.0
    # Rounding one message coordinate to the grid moves it by at most h/2, so a client's
    # contribution to a coordinate changes by at most h more (replace) or h/2 (add/remove)
    # than the exact one; 1e-12 of relative slack covers the float error of clipping and
    # of the products S_ji a_i (a few ulps).
    per_coord = _rounding_slack(neighbouring)
    row_sens = factor * bound * (1 + 1e-12)
    col_l2 = np.sqrt(np.asarray(S.multiply(S).sum(axis=0)).ravel())
    col_l1 = np.asarray(abs(S).sum(axis=0)).ravel()
    col_nnz = np.bincount(S.indices, minlength=n)
    cnt = int(col_nnz.max()) * d  # most noisy coordinates one client touches
    row_ptr = S.indptr
    rows = np.repeat(np.arange(m), np.diff(row_ptr))
    cols = S.indices
    n_j = np.diff(row_ptr).astype(float)
    h_j = n_j - np.bincount(rows, weights=withheld[cols].astype(float), minlength=m)
    # The messages: client i sends S_ji a_i to sketch row j (plus its noise share), in fixed point.
    enc = _encode(S.data[:, None] * clipped[cols])
    params: dict[str, Any] = {
        "row_bound": bound,
        "clipping": "each row clipped to L2 norm <= row_bound",
        "neighbouring": f"{neighbouring} one client's row",
        "sketch_shape": (m, n),
        "sketch_nnz_per_row": (int(n_j.min()), int(n_j.max())),
        "honest_fraction": gamma,
        "noise_simulation": noise,
        "n_servers": n_servers,
        "fixed_point_grid": 2.0**-FIXED_POINT_BITS,
        "secure_aggregation": (
            f"simulated additive secret sharing mod 2**64, {FIXED_POINT_BITS}-bit fixed point, "
            "seeded masks; not a cryptographic protocol"
        ),
    }
    if p != 1.0:
        params["interpolation_p"] = p
    notes = [
        "inputs clipped to row_bound (L2 per row); a row with NaN or inf entries counts as a zero row",
        f"messages rounded to the fixed-point grid 2**-{FIXED_POINT_BITS} before aggregation; the "
        "sensitivity includes that rounding; noise is discrete, drawn on the same grid, so the output "
        "is a multiple of 2**-32",
    ]
    if not private:
        agg = _secure_sum(enc, row_ptr, m, n_servers, rng)
        params.update(sigma_c=0.0, notes=(*notes, "epsilon=inf: no noise, not private"))
        return Release(
            _decode(agg), math.inf, 0.0, "none (non-private sketch)", params, "sketch S A (not private)"
        )
    if mechanism == "gaussian":
        slack = per_coord * math.sqrt(cnt)
        sens = row_sens * float(col_l2.max()) + slack
        has = n_j > 0
        if noise == "per_client":
            share_ratio = 1.0 / math.sqrt(gamma * float(n_j.max()) ** p)
            per_entry = float(n_j.max())
        else:
            share_ratio, per_entry = 1.0, 1.0
        grid = _grid_slack(sens, cnt, share_ratio, per_entry)
        sigma_c = grid_gaussian_sigma(eps, dlt, sens, grid)
        # every discrete share at least one grid unit wide (where the TV bound holds)
        sigma_c = max(sigma_c, 1.0 / (_SCALE * share_ratio))
        share_var = np.zeros(m)
        share_var[has] = sigma_c**2 / (gamma * n_j[has] ** p)
        if noise == "per_client":
            share_std = np.sqrt(share_var[rows])
            share_std[withheld[cols]] = 0.0
            _check_integer_scale(float(share_std.max(initial=0.0)), "noise share std")
            noisy = _discrete_noise_grouped(enc, share_std, "gaussian")
            agg = _secure_sum(noisy, row_ptr, m, n_servers, rng)
        else:
            agg = _secure_sum(enc, row_ptr, m, n_servers, rng)
            entry_std = sigma_c * np.sqrt(h_j / (gamma * np.maximum(n_j, 1.0) ** p))
            _check_integer_scale(float(entry_std.max(initial=0.0)), "noise std")
            agg = _discrete_noise_grouped(agg, entry_std, "gaussian")
        params.update(
            sensitivity_l2=sens,
            rounding_slack_l2=slack,
            sigma_c=sigma_c,
            grid_delta=grid / sigma_c**2,
            calibration=(
                "analytic Gaussian mechanism (Balle & Wang 2018) plus the discrete-Gaussian grid term "
                "(trustlab.privacy.calibration.grid_gaussian_sigma)"
            ),
            share_std_range=(float(np.sqrt(share_var[has].min())), float(np.sqrt(share_var[has].max()))),
        )
        if p == 0.0:
            notes.append("local model: each client's messages are (epsilon, delta)-DP on their own")
        else:
            notes.append(
                "(epsilon, delta)-DP holds when at least honest_fraction of each sketch row's "
                "contributors add their noise share and the servers do not all collude"
            )
        mech = "LTM Gaussian" if p == 1.0 else f"LTM-interpolated Gaussian (p={p:g})"
        if withheld.any():
            # Rows where withholding clients leave less than sigma_c**2 of noise: the
            # release meets only the epsilon of its realised noise, and must say so.
            ratio = h_j / (gamma * np.maximum(n_j, 1.0) ** p)  # realised variance / sigma_c**2
            met = _realised_epsilon(
                S,
                ratio,
                row_sens,
                slack,
                sigma_c,
                sens,
                dlt,
                share_ratio if noise == "per_client" else None,
                cnt,
                per_entry,
            )
            if met > eps:
                params["requested_epsilon"] = eps
                notes.append(
                    f"withholding clients exceed the honest_fraction assumption: the realised noise "
                    f"gives epsilon={met:.6g}, not the requested {eps:.6g}"
                )
                eps = met
    else:
        slack1 = per_coord * cnt
        sens1 = row_sens * math.sqrt(d) * float(col_l1.max()) + slack1
        b = sens1 / eps
        _check_integer_scale(b, "Laplace scale")
        agg = _secure_sum(enc, row_ptr, m, n_servers, rng)
        agg = _discrete_noise_grouped(agg, np.where(n_j > 0, b, 0.0), "laplace")
        params.update(
            sensitivity_l1=sens1, rounding_slack_l1=slack1, laplace_scale=b, sigma_c=b * math.sqrt(2.0)
        )
        notes.append(
            "L1 sensitivity uses ||a||_1 <= sqrt(d) ||a||_2; the per-client Gamma-difference shares are "
            "drawn in aggregate (their sum is exactly discrete Laplace on the grid); pure epsilon-DP"
        )
        mech = "LTM Laplace"
    params["notes"] = tuple(notes)
    return Release(
        _decode(agg),
        eps,
        dlt if mechanism == "gaussian" else 0.0,
        mech + " (secure aggregation simulated)",
        params,
        f"noisy sketch S A + E of a {n} x {d} client matrix, {m} sketch rows",
    )


def ltm_release(
    A: Any,
    S: Any,
    epsilon: float,
    delta: float,
    row_bound: float,
    mechanism: str = "gaussian",
    honest_fraction: float = 1.0,
    neighbouring: str = "replace",
    *,
    noise: str = "aggregated",
    n_servers: int = 2,
    withholding: Any = None,
    random_state: Any = None,
) -> Release:
    """Release the noisy sketch ``S A + E`` in the linear-transformation model.

    Every client's row is clipped to L2 norm ``row_bound``. For each non-zero
    ``S_ji`` client ``i`` sends ``S_ji a_i``, rounded to the fixed-point grid
    ``2**-32``, plus a discrete Gaussian share of variance
    ``sigma_c**2 / (honest_fraction * n_j)`` on that grid (``n_j``: non-zeros in row
    ``j`` of ``S``) to a simulated secure aggregation. ``sigma_c`` is the analytic
    Gaussian mechanism's std for the L2 sensitivity ``max_i ||S[:, i]|| * row_bound``
    (times 2 for ``"replace"``) plus the rounding slack ``2**-32 sqrt(s d)``, raised by
    the grid term of :func:`~trustlab.privacy.calibration.grid_gaussian_sigma` (the
    discrete Gaussian is not the continuous one; ``parameters["grid_delta"]``). If at
    least ``honest_fraction * n_j`` clients of every row add their share, each entry of
    ``E`` has variance ``>= sigma_c**2`` and the release is ``(epsilon, delta)``-DP. Every
    released entry is a multiple of ``2**-32``.

    Parameters
    ----------
    A : array-like, shape (n_clients, d)
        One private row per client.
    S : sparse matrix or array, shape (m, n_clients)
        Public sketch (see :func:`make_sketch`); chosen independently of ``A``.
    epsilon : float
        Privacy budget (``math.inf``: no noise, not private).
    delta : float
        ``> 0`` for the Gaussian mechanism; ``0`` allowed for ``"laplace"``.
    row_bound : float
        Public L2 bound on each client's row (rows are clipped to it).
    mechanism : {"gaussian", "laplace"}, default "gaussian"
        ``"laplace"`` adds per-entry discrete Laplace noise on the ``2**-32`` grid of
        scale ``Delta_1 / epsilon`` with ``Delta_1 = max_i ||S[:, i]||_1 * sqrt(d) *
        row_bound`` (times 2 for replacement) plus the rounding slack ``2**-32 s d``:
        exactly epsilon-DP; only with ``noise="aggregated"``, ``honest_fraction=1``
        and no withholding (no safe Gamma sampler exists for per-client shares).
    honest_fraction : float in (0, 1], default 1
        Assumed share of each row's contributors that add their noise.
    neighbouring : {"replace", "add_remove"}, default "replace"
        Neighbours differ in one client's row (replaced, or added/removed).
    noise : {"aggregated", "per_client"}, keyword, default "aggregated"
        ``"per_client"`` draws every client's share (``n * s * d`` OpenDP draws,
        ~0.05 ms each) and secret-shares ``S_ji a_i + share``. ``"aggregated"``
        secret-shares ``S_ji a_i`` and adds, per entry, one draw of the sum of the
        honest clients' shares (the same distribution, ``m * d`` draws).
    n_servers : int, keyword, default 2
        Servers in the simulated aggregation (>= 2).
    withholding : bool mask or indices, keyword, optional
        Clients that (dishonestly) add no noise share, to test the guarantee. When they
        leave some row with less than ``sigma_c**2`` of noise, the release's
        ``epsilon`` is the one its realised noise meets (``inf`` if a row has none)
        and ``parameters["requested_epsilon"]`` keeps the one asked for.
    random_state : None, int or numpy Generator, keyword
        Seeds the secret-sharing masks only (public simulation randomness); DP noise
        comes from OpenDP and cannot be seeded.

    Returns
    -------
    Release
        ``value`` is the ``m x d`` noisy sketch (multiples of ``2**-32``);
        ``parameters`` hold ``sigma_c``, the sensitivity and its rounding slack, the
        grid term, the clipping note and the simulation's description.

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025.

    Examples
    --------
    >>> A = np.eye(4)[:, :2]
    >>> S = make_sketch(3, 4, s=2, random_state=0)
    >>> rel = ltm_release(A, S, 1.0, 1e-5, row_bound=1.0, neighbouring="add_remove")
    >>> rel.value.shape, round(rel.parameters["sigma_c"], 4)
    ((3, 2), 3.7306)
    >>> bool(np.allclose(ltm_release(A, S, float("inf"), 0.0, 1.0).value, S @ A))
    True
    """
    return _release(
        A,
        S,
        epsilon,
        delta,
        row_bound,
        mechanism=mechanism,
        honest_fraction=honest_fraction,
        p=1.0,
        neighbouring=neighbouring,
        noise=noise,
        n_servers=n_servers,
        withholding=withholding,
        random_state=random_state,
    )


def local_variant(
    A: Any,
    S: Any,
    epsilon: float,
    delta: float,
    row_bound: float,
    p: float = 0.0,
    neighbouring: str = "replace",
    *,
    noise: str = "aggregated",
    n_servers: int = 2,
    random_state: Any = None,
) -> Release:
    """Release ``S A + E`` with share variance ``sigma_c**2 * n_j**(-p)`` (local-to-LTM interpolation).

    ``p=0`` is the local model: every client adds the full ``N(0, sigma_c**2)`` to
    each message, so it is private without trusting the aggregation, and the noise
    of an entry grows like ``n_j``. ``p=1`` is :func:`ltm_release` with
    ``honest_fraction=1``. Gaussian mechanism only; other parameters as in
    :func:`ltm_release`.

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025 (experiments, p in [0, 1]).

    Examples
    --------
    >>> S = make_sketch(4, 50, random_state=0)
    >>> rel = local_variant(np.ones((50, 2)) / 2, S, 1.0, 1e-5, 1.0, p=0.0)
    >>> rel.parameters["interpolation_p"], rel.value.shape
    (0.0, (4, 2))
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not (0.0 <= float(p) <= 1.0):
        raise ParameterError(f"p must be a number in [0, 1] (0: local, 1: LTM), got {p!r}.", argument="p")
    return _release(
        A,
        S,
        epsilon,
        delta,
        row_bound,
        mechanism="gaussian",
        honest_fraction=1.0,
        p=float(p),
        neighbouring=neighbouring,
        noise=noise,
        n_servers=n_servers,
        withholding=None,
        random_state=random_state,
    )


# ----------------------------------------------------------------------------- central baselines


_GRAM_BITS = 16


def _int_gram(U: np.ndarray) -> np.ndarray:
    """Exact ``U^T U`` of an int64 matrix, saturated at ``+-2**62`` (chunked products, Python-int sums)."""
    k = U.shape[1]
    peak = int(np.abs(U).max(initial=0))
    chunk = max(1, 2**62 // max(1, peak * peak * 2))
    total = [[0] * k for _ in range(k)]
    for start in range(0, U.shape[0], chunk):
        block = U[start : start + chunk]
        part = block.T @ block
        for i in range(k):
            for j in range(k):
                total[i][j] += int(part[i, j])
    cap = 2**62
    return np.array([[min(cap, max(-cap, v)) for v in row] for row in total], dtype=np.int64)


def _noisy_gram(
    Z: np.ndarray, epsilon: float, delta: float, bound: float, neighbouring: str
) -> tuple[np.ndarray, float, float, float]:
    """``Z^T Z`` plus symmetric discrete Gaussian noise on a fixed-point grid (upper triangle, mirrored).

    Rows (already clipped to ``bound``) are rounded to the grid ``bound * 2**-16``; the
    Gram matrix of the rounded rows is formed exactly in integers (saturated at
    ``+-2**62``, a 1-Lipschitz clamp) and OpenDP adds discrete Gaussian noise to its
    upper triangle. The output is a multiple of ``(bound * 2**-16)**2``. Returns the
    matrix, the noise std and the Frobenius sensitivity (data units, rounding
    included), and the grid step.
    """
    # ||z z^T - w w^T||_F^2 = |z|^4 + |w|^4 - 2 (z.w)^2 <= 2 B^4 (replace); B^4 (add/remove), B = max |z|.
    k = Z.shape[1]
    unit = bound * 2.0**-_GRAM_BITS
    step = unit * unit
    if not math.isfinite(epsilon):
        sens = bound**2 * (math.sqrt(2.0) if neighbouring == "replace" else 1.0)
        return Z.T @ Z, 0.0, sens, 0.0
    U = np.rint(Z / unit).astype(np.int64)
    # a rounded row has norm <= 2**16 (1 + 1e-12) + sqrt(k) / 2 grid units (clipping's float error included)
    b_int = 2.0**_GRAM_BITS * (1 + 1e-12) + math.sqrt(k) / 2
    sens_int = b_int**2 * (math.sqrt(2.0) if neighbouring == "replace" else 1.0)
    n_upper = k * (k + 1) // 2
    sigma_int = grid_gaussian_sigma(epsilon, delta, sens_int, 0.5 * sens_int + n_upper * DG_ROUNDING_TV)
    if sigma_int > MAX_INTEGER_SCALE:
        raise ParameterError(
            f"epsilon={epsilon:g} needs Gram noise beyond 2**52 grid units of (row_bound * 2**-16)**2, more "
            "than integer noise can serve exactly; raise epsilon.",
            argument="epsilon",
        )
    gram = _int_gram(U)
    iu = np.triu_indices(k)
    noisy = np.zeros((k, k), dtype=np.int64)
    noisy[iu] = add_discrete_gaussian(gram[iu], sigma_int)
    noisy = noisy + np.triu(noisy, 1).T
    return noisy.astype(float) * step, sigma_int * step, sens_int * step, step


def central_mod_sulq(
    A: Any,
    n_components: int,
    epsilon: float,
    delta: float,
    row_bound: float,
    neighbouring: str = "replace",
) -> Release:
    """Central-model baseline: top-``k`` eigenvectors of ``A^T A`` plus symmetric Gaussian noise (MOD-SULQ).

    Rows are clipped to ``row_bound``; the upper triangle of ``A^T A`` gets
    Gaussian noise calibrated by the analytic Gaussian mechanism for its
    Frobenius sensitivity (``sqrt(2) row_bound**2`` for replacement,
    ``row_bound**2`` for add/remove), so that it is compared with the LTM at equal
    ``(epsilon, delta)``. This replaces Chaudhuri et al.'s closed-form noise scale.

    Returns
    -------
    Release
        ``value`` is the ``(n_components, d)`` matrix of orthonormal components.

    References
    ----------
    Chaudhuri, Sarwate, Sinha. "A near-optimal algorithm for differentially-private
    principal components". JMLR 2013. Used as the central baseline by Burkhardt,
    Keller, Orlandi, Schwiegelshohn, ICML 2025.

    Examples
    --------
    >>> A = np.repeat([[0.6, 0.8]], 100, axis=0)
    >>> rel = central_mod_sulq(A, 1, float("inf"), 0.0, 1.0)
    >>> np.round(np.abs(rel.value), 3).tolist()
    [[0.6, 0.8]]
    """
    A = _matrix(A, "A", private=True)
    k = check_positive_int(n_components, "n_components")
    if k > A.shape[1]:
        raise ParameterError(f"n_components must be <= d={A.shape[1]}, got {k}.", argument="n_components")
    eps, dlt = _privacy(epsilon, delta, "gaussian")
    neighbouring = check_choice(neighbouring, "neighbouring", _NEIGHBOURING)
    bound = check_positive(row_bound, "row_bound")
    gram, sigma, sens, step = _noisy_gram(_clip_rows(A, bound), eps, dlt, bound, neighbouring)
    _, vecs = np.linalg.eigh(gram)
    comps = vecs[:, ::-1][:, :k].T
    return Release(
        comps,
        eps,
        dlt if math.isfinite(eps) else 0.0,
        "Gaussian on A^T A (MOD-SULQ, central model)",
        {
            "row_bound": bound,
            "neighbouring": f"{neighbouring} one row",
            "sensitivity_frobenius": sens,
            "sigma": sigma,
            "gram_grid": step,
            "notes": (
                "inputs clipped to row_bound (L2 per row)",
                "rows rounded to row_bound * 2**-16, exact integer Gram matrix, discrete Gaussian noise "
                "on its grid (OpenDP); sensitivity includes the rounding",
            ),
        },
        f"top-{k} principal directions",
    )


def central_ssp_ridge(
    X: Any,
    y: Any,
    alpha: float,
    epsilon: float,
    delta: float,
    row_bound: float,
    neighbouring: str = "replace",
) -> Release:
    """Central-model baseline: ridge from noisy sufficient statistics ``X^T X`` and ``X^T y`` (SSP).

    Each ``[x_i, y_i]`` is clipped jointly to L2 norm ``row_bound``; the Gram
    matrix of ``[X | y]`` gets symmetric Gaussian noise (as in
    :func:`central_mod_sulq`) and ``coef = (XtX + alpha I)^-1 Xty``.

    Returns
    -------
    Release
        ``value`` is the coefficient vector (no intercept).

    References
    ----------
    Wang. "Revisiting differentially private linear regression: optimal and adaptive
    prediction & estimation in unbounded domain". UAI 2018. Used as the central
    baseline by Burkhardt, Keller, Orlandi, Schwiegelshohn, ICML 2025.

    Examples
    --------
    >>> X = np.array([[0.5, 0.0], [0.0, 0.5]] * 50)
    >>> rel = central_ssp_ridge(X, X @ [0.5, -0.5], 1e-9, float("inf"), 0.0, 1.0)
    >>> np.round(rel.value, 6).tolist()
    [0.5, -0.5]
    """
    Z = _joint(X, y, private=True)
    lam = check_positive(alpha, "alpha", allow_zero=True)
    eps, dlt = _privacy(epsilon, delta, "gaussian")
    neighbouring = check_choice(neighbouring, "neighbouring", _NEIGHBOURING)
    bound = check_positive(row_bound, "row_bound")
    gram, sigma, sens, step = _noisy_gram(_clip_rows(Z, bound), eps, dlt, bound, neighbouring)
    d = Z.shape[1] - 1
    coef = _solve(gram[:d, :d] + lam * np.eye(d), gram[:d, d])
    return Release(
        coef,
        eps,
        dlt if math.isfinite(eps) else 0.0,
        "Gaussian on [X y]^T [X y] (SSP, central model)",
        {
            "row_bound": bound,
            "neighbouring": f"{neighbouring} one row",
            "sensitivity_frobenius": sens,
            "sigma": sigma,
            "gram_grid": step,
            "alpha": lam,
            "notes": (
                "each [x, y] clipped jointly to row_bound (L2)",
                "rows rounded to row_bound * 2**-16, exact integer Gram matrix, discrete Gaussian noise "
                "on its grid (OpenDP); sensitivity includes the rounding",
            ),
        },
        "ridge coefficients",
    )


def _joint(X: Any, y: Any, *, private: bool = False) -> np.ndarray:
    X = _matrix(X, "X", private=private)
    yv = check_numeric_array(y, "y", ndim=1, allow_nan=private)
    if yv.shape[0] != X.shape[0]:
        raise DataError(f"y has {yv.shape[0]} values but X has {X.shape[0]} rows.", argument="y")
    Z = np.column_stack([X, yv])
    return np.where(np.isfinite(Z).all(axis=1)[:, None], Z, 0.0) if private else Z


def _solve(M: np.ndarray, v: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(M, v)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(M, v, rcond=None)[0]


# ----------------------------------------------------------------------------- metrics


def low_rank_excess(A: Any, components: Any) -> float:
    """Return ``||A - A P||_F^2 - ||A - A_k||_F^2`` for the projector ``P`` onto the rows of ``components``.

    The paper's ``psi`` is this excess divided by ``n``; ``k`` is the number of components.

    Examples
    --------
    >>> A = np.diag([3.0, 2.0, 1.0])
    >>> low_rank_excess(A, [[0.0, 1.0, 0.0]])
    5.0
    """
    A = _matrix(A, "A")
    V = np.atleast_2d(check_numeric_array(components, "components"))
    if V.shape[1] != A.shape[1]:
        raise DataError(
            f"components must have {A.shape[1]} columns, got {V.shape[1]}.", argument="components"
        )
    Q, _ = np.linalg.qr(V.T)
    gram = A.T @ A  # d x d: both terms from it, so tall A costs one pass
    eig = np.linalg.eigvalsh(gram)[::-1]
    captured_best = float(np.sum(eig[: V.shape[0]]))
    captured = float(np.trace(Q.T @ gram @ Q))
    return captured_best - captured


def ridge_cost_ratio(X: Any, y: Any, coef: Any, alpha: float) -> float:
    """Return the paper's ``phi``: the ridge cost of ``coef`` over the optimal ridge cost.

    Examples
    --------
    >>> X = np.eye(3); y = np.ones(3)
    >>> ridge_cost_ratio(X, y, np.full(3, 0.5), 1.0)
    1.0
    """
    Z = _joint(X, y)
    X, yv = Z[:, :-1], Z[:, -1]
    lam = check_positive(alpha, "alpha", allow_zero=True)
    w = check_numeric_array(coef, "coef", ndim=1)
    if w.shape[0] != X.shape[1]:
        raise DataError(f"coef must have {X.shape[1]} entries, got {w.shape[0]}.", argument="coef")
    best = _solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ yv)

    def cost(v: np.ndarray) -> float:
        return float(np.sum((X @ v - yv) ** 2) + lam * np.sum(v**2))

    return cost(w) / cost(best)


# ----------------------------------------------------------------------------- estimators


def _finite_epsilon(epsilon: Any, estimator: str, alternative: str) -> None:
    """Private estimators refuse ``epsilon=inf``: a DP estimator never silently fits without noise."""
    if isinstance(epsilon, numbers.Real) and not isinstance(epsilon, bool) and math.isinf(float(epsilon)):
        raise ParameterError(
            f"{estimator} is a private estimator and epsilon must be finite, got {epsilon!r}; for the "
            f"non-private fit use {alternative} (or ltm_release(..., epsilon=math.inf) for the exact "
            "sketch).",
            argument="epsilon",
        )
    check_epsilon(epsilon)


def _estimator_sketch(
    sketch: Any, sketch_rows: Any, sparsity: Any, rng: np.random.Generator, n: int, default_rows: int
) -> sp.csr_matrix:
    if isinstance(sketch, str):
        kind = check_choice(sketch, "sketch", _KINDS)
        m = default_rows if sketch_rows is None else check_positive_int(sketch_rows, "sketch_rows")
        return _check_sketch(make_sketch(m, n, kind, sparsity, rng), n)
    return _check_sketch(sketch, n)


class _LTMBase:
    def _check_fitted(self, attr: str) -> None:
        if not hasattr(self, attr):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit first.", argument="fit")


class LTMLowRank(TransformerMixin, _LTMBase, BaseEstimator):
    """Private rank-``k`` approximation from an LTM sketch (top right singular vectors of ``S A + E``).

    Parameters
    ----------
    n_components : int, default 2
        The rank ``k``.
    epsilon, delta : float, default 1.0, 1e-5
        Privacy of the sketch release (everything after is post-processing); epsilon
        must be finite (a private estimator never fits without noise).
    row_bound : float, default 1.0
        Public L2 bound on each client's row; rows are clipped to it.
    sketch_rows : int, optional
        Sketch rows ``m``; default ``20 * n_components``.
    sketch : {"osnap", "dense"} or matrix, default "osnap"
        The public sketch kind, or a fixed ``(m, n)`` matrix.
    sparsity : int, default 2
        Non-zeros per column of the OSNAP sketch.
    mechanism, honest_fraction, neighbouring, noise, n_servers
        Passed to :func:`ltm_release`.
    random_state : None, int or Generator
        Seeds the public sketch and the masks (not the DP noise).

    Attributes
    ----------
    components_ : ndarray, shape (n_components, d)
        Orthonormal rows spanning the private rank-``k`` subspace ``X'``.
    projector_ : ndarray, shape (d, d)
        ``X' X'^T``.
    release_ : Release
        The noisy sketch release (the privacy spent).

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025 (Theorems 4.3-4.4).

    Examples
    --------
    >>> A = np.outer(np.linspace(-1, 1, 2000), [0.6, 0.8, 0.0])
    >>> est = LTMLowRank(n_components=1, random_state=0).fit(A)
    >>> est.components_.shape, est.release_.epsilon
    ((1, 3), 1.0)
    """

    def __init__(
        self,
        n_components: int = 2,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        row_bound: float = 1.0,
        sketch_rows: int | None = None,
        sketch: Any = "osnap",
        sparsity: int = 2,
        mechanism: str = "gaussian",
        honest_fraction: float = 1.0,
        neighbouring: str = "replace",
        noise: str = "aggregated",
        n_servers: int = 2,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.row_bound = row_bound
        self.sketch_rows = sketch_rows
        self.sketch = sketch
        self.sparsity = sparsity
        self.mechanism = mechanism
        self.honest_fraction = honest_fraction
        self.neighbouring = neighbouring
        self.noise = noise
        self.n_servers = n_servers
        self.random_state = random_state

    def fit(self, X: Any, y: Any = None) -> LTMLowRank:
        """Release the sketch of ``X`` and keep its top ``n_components`` right singular vectors."""
        _finite_epsilon(self.epsilon, "LTMLowRank", "sklearn.decomposition.TruncatedSVD")
        A = _matrix(X, "X", private=True)
        k = check_positive_int(self.n_components, "n_components")
        if k > A.shape[1]:
            raise ParameterError(
                f"n_components must be <= the number of columns ({A.shape[1]}), got {k}.",
                argument="n_components",
            )
        rng = make_generator(self.random_state)
        S = _estimator_sketch(self.sketch, self.sketch_rows, self.sparsity, rng, A.shape[0], 20 * k)
        if S.shape[0] < k:
            raise ParameterError(
                f"sketch_rows must be >= n_components={k}, got {S.shape[0]}.", argument="sketch_rows"
            )
        rel = _release(
            A,
            S,
            self.epsilon,
            self.delta,
            self.row_bound,
            mechanism=self.mechanism,
            honest_fraction=self.honest_fraction,
            p=1.0,
            neighbouring=self.neighbouring,
            noise=self.noise,
            n_servers=self.n_servers,
            withholding=None,
            random_state=rng,
            name="X",
        )
        _, _, vt = np.linalg.svd(rel.value, full_matrices=False)
        self.components_ = vt[:k]
        self.projector_ = self.components_.T @ self.components_
        self.release_ = rel
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Project ``X`` onto the private subspace: ``X @ components_.T``."""
        self._check_fitted("components_")
        A = _matrix(X, "X")
        if A.shape[1] != self.n_features_in_:
            raise DataError(f"X has {A.shape[1]} columns; fit saw {self.n_features_in_}.", argument="X")
        return A @ self.components_.T


class LTMRidge(RegressorMixin, _LTMBase, BaseEstimator):
    """Private ridge regression from an LTM sketch of ``[X | y]``.

    Solves ``coef = (A~^T A~ + alpha I)^-1 A~^T b~`` on the noisy sketch
    ``[A~ | b~] = S [X | y] + E`` (no intercept, as in the paper; centre the data
    with public values if needed). ``E^T E`` adds about ``m sigma_c**2 I`` of extra
    ridge; ``debias=True`` subtracts its expectation (a library option, off by default).

    Parameters
    ----------
    alpha : float, default 1.0
        The ridge penalty ``lambda``.
    epsilon, delta, row_bound, sketch_rows, sketch, sparsity : see LTMLowRank
    mechanism, honest_fraction, neighbouring, noise, n_servers, random_state : see LTMLowRank
        As in :class:`LTMLowRank`; each ``[x_i, y_i]`` is clipped jointly to ``row_bound``;
        ``sketch_rows`` defaults to ``20 * n_features``.
    debias : bool, default False
        Subtract the expected ``E^T E`` from the sketched Gram matrix.

    Attributes
    ----------
    coef_ : ndarray, shape (d,)
    release_ : Release

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025 (Theorem 4.5).

    Examples
    --------
    >>> X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(5000, 2))
    >>> est = LTMRidge(alpha=1.0, random_state=0).fit(X, X @ [0.5, -0.5])
    >>> est.coef_.shape, est.predict(X[:3]).shape
    ((2,), (3,))
    """

    def __init__(
        self,
        alpha: float = 1.0,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        row_bound: float = 1.0,
        sketch_rows: int | None = None,
        sketch: Any = "osnap",
        sparsity: int = 2,
        mechanism: str = "gaussian",
        honest_fraction: float = 1.0,
        neighbouring: str = "replace",
        noise: str = "aggregated",
        n_servers: int = 2,
        debias: bool = False,
        random_state: Any = None,
    ) -> None:
        self.alpha = alpha
        self.epsilon = epsilon
        self.delta = delta
        self.row_bound = row_bound
        self.sketch_rows = sketch_rows
        self.sketch = sketch
        self.sparsity = sparsity
        self.mechanism = mechanism
        self.honest_fraction = honest_fraction
        self.neighbouring = neighbouring
        self.noise = noise
        self.n_servers = n_servers
        self.debias = debias
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> LTMRidge:
        """Release the sketch of ``[X | y]`` and solve the ridge problem on it."""
        _finite_epsilon(self.epsilon, "LTMRidge", "sklearn.linear_model.Ridge(fit_intercept=False)")
        Z = _joint(X, y, private=True)
        lam = check_positive(self.alpha, "alpha", allow_zero=True)
        if not isinstance(self.debias, bool | np.bool_):
            raise ParameterError(f"debias must be True or False, got {self.debias!r}.", argument="debias")
        d = Z.shape[1] - 1
        rng = make_generator(self.random_state)
        S = _estimator_sketch(self.sketch, self.sketch_rows, self.sparsity, rng, Z.shape[0], 20 * d)
        rel = _release(
            Z,
            S,
            self.epsilon,
            self.delta,
            self.row_bound,
            mechanism=self.mechanism,
            honest_fraction=self.honest_fraction,
            p=1.0,
            neighbouring=self.neighbouring,
            noise=self.noise,
            n_servers=self.n_servers,
            withholding=None,
            random_state=rng,
            name="X",
        )
        At, bt = rel.value[:, :d], rel.value[:, d]
        gram = At.T @ At + lam * np.eye(d)
        if self.debias:
            n_j = np.diff(S.indptr)
            per_entry = rel.parameters["sigma_c"] ** 2 / float(rel.parameters["honest_fraction"])
            gram = gram - per_entry * float(np.count_nonzero(n_j)) * np.eye(d)
        self.coef_ = _solve(gram, At.T @ bt)
        self.release_ = rel
        self.n_features_in_ = d
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Return ``X @ coef_``."""
        self._check_fitted("coef_")
        A = _matrix(X, "X")
        if A.shape[1] != self.n_features_in_:
            raise DataError(f"X has {A.shape[1]} columns; fit saw {self.n_features_in_}.", argument="X")
        return A @ self.coef_
