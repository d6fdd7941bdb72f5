"""The LTM sketch release ``S A + E``: sensitivity, calibration, noise shares (private module).

References
----------
Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
Data Analytics via Secure Sketching". ICML 2025.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import (
    check_choice,
    check_positive,
    check_positive_int,
    make_generator,
)
from trustlab.errors import ParameterError
from trustlab.privacy._ltm_inputs import (
    CONSTRAINTS,
    MECHANISMS,
    NEIGHBOURING,
    NOISE,
    check_sketch,
    clip_rows,
    honest,
    matrix,
    privacy,
)
from trustlab.privacy._secure_aggregation import FIXED_POINT_BITS, MAX_ABS, SCALE, decode, encode, secure_sum
from trustlab.privacy.calibration import DG_ROUNDING_TV, grid_gaussian_epsilon, grid_gaussian_sigma
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import MAX_INTEGER_SCALE, add_discrete_gaussian, add_discrete_laplace

__all__ = [
    "local_variant",
    "ltm_release",
    "release",
]


def _check_integer_scale(std: float, what: str) -> None:
    if std * SCALE > MAX_INTEGER_SCALE:
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
        out[idx] = add(enc[idx], float(value) * SCALE)
    return out


def _grid_slack(sens: float, cnt: int, share_ratio: float, shares_per_entry: float) -> float:
    """The constant ``C`` of the grid term ``C / sigma_c**2`` (see :func:`calibration.grid_gaussian_sigma`).

    ``sigma_c * share_ratio`` is the smallest std of one discrete share (the whole
    entry when noise is aggregated), ``shares_per_entry`` the most shares an entry sums
    and ``cnt`` the most noisy coordinates one client's row touches.
    """
    h = 1.0 / SCALE
    rounding = 0.5 * sens * h / share_ratio
    tv = cnt * shares_per_entry * DG_ROUNDING_TV * h * h / share_ratio**2
    return rounding + tv


def _rounding_slack(neighbouring: str) -> float:
    """Most that rounding to the fixed-point grid adds to one coordinate's change (data units).

    ``|round(x) - round(x')| <= |x - x'| + h`` under replacement and
    ``|round(x)| <= |x| + h / 2`` for an added or removed client, ``h = 2**-32``.
    """
    return (1.0 if neighbouring == "replace" else 0.5) / SCALE


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
    if s_ratio * sigma_c * SCALE < 1.0:
        return math.inf  # shares narrower than one grid unit: no bound is claimed
    grid = 0.5 * eff / (SCALE * s_ratio) + cnt * per_entry * DG_ROUNDING_TV / (SCALE * s_ratio) ** 2
    return grid_gaussian_epsilon(sigma_c, delta, eff, grid)


def release(
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
    mechanism = check_choice(mechanism, "mechanism", MECHANISMS)
    neighbouring = check_choice(neighbouring, "neighbouring", NEIGHBOURING)
    noise = check_choice(noise, "noise", NOISE)
    eps, dlt = privacy(epsilon, delta, mechanism)
    A = matrix(A, name, private=True)
    n, d = A.shape
    bound = check_positive(row_bound, "row_bound")
    gamma = honest(honest_fraction)
    n_servers = check_positive_int(n_servers, "n_servers", minimum=2)
    S = check_sketch(S, n)
    rng = make_generator(random_state)
    m = S.shape[0]
    if bound * max(1.0, float(np.abs(S.data).max(initial=0.0))) * n >= MAX_ABS:
        raise ParameterError(
            f"row_bound={bound} times n={n} exceeds the fixed-point range ({MAX_ABS:.3g}); rescale the data.",
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

    clipped = clip_rows(A, bound)
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
    enc = encode(S.data[:, None] * clipped[cols])
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
        agg = secure_sum(enc, row_ptr, m, n_servers, rng)
        params.update(sigma_c=0.0, notes=(*notes, "epsilon=inf: no noise, not private"))
        return Release(
            decode(agg), math.inf, 0.0, "none (non-private sketch)", params, "sketch S A (not private)"
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
        sigma_c = max(sigma_c, 1.0 / (SCALE * share_ratio))
        share_var = np.zeros(m)
        share_var[has] = sigma_c**2 / (gamma * n_j[has] ** p)
        if noise == "per_client":
            share_std = np.sqrt(share_var[rows])
            share_std[withheld[cols]] = 0.0
            _check_integer_scale(float(share_std.max(initial=0.0)), "noise share std")
            noisy = _discrete_noise_grouped(enc, share_std, "gaussian")
            agg = secure_sum(noisy, row_ptr, m, n_servers, rng)
        else:
            agg = secure_sum(enc, row_ptr, m, n_servers, rng)
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
        agg = secure_sum(enc, row_ptr, m, n_servers, rng)
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
    # Gaussian: discrete Gaussian on a grid, whose (epsilon, delta) carries a grid term, so the
    # measure is "approximate" (charged by its (epsilon, delta)), not a continuous "gaussian".
    return Release(
        decode(agg),
        eps,
        dlt if mechanism == "gaussian" else 0.0,
        mech + " (secure aggregation simulated)",
        params,
        f"noisy sketch S A + E of a {n} x {d} client matrix, {m} sketch rows",
        measure="approximate" if mechanism == "gaussian" else "pure",
        sensitivity=float(params["sensitivity_l2" if mechanism == "gaussian" else "sensitivity_l1"]),
        noise_scale=float(params.get("laplace_scale", params["sigma_c"])),
    )


@validate_params(CONSTRAINTS)
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
    >>> from trustlab.privacy.linear_sketch import make_sketch
    >>> A = np.eye(4)[:, :2]
    >>> S = make_sketch(3, 4, s=2, random_state=0)
    >>> rel = ltm_release(A, S, 1.0, 1e-5, row_bound=1.0, neighbouring="add_remove")
    >>> rel.value.shape, round(rel.parameters["sigma_c"], 4)
    ((3, 2), 3.7306)
    >>> bool(np.allclose(ltm_release(A, S, float("inf"), 0.0, 1.0).value, S @ A))
    True
    """
    return release(
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


@validate_params(
    {
        **{k: v for k, v in CONSTRAINTS.items() if k not in ("mechanism", "honest_fraction")},
        "p": [Interval(numbers.Real, 0, 1, closed="both")],
    }
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
    :func:`ltm_release`. Each entry of ``E`` has variance ``>= sigma_c**2`` whatever
    ``p``, so every ``p`` gives the same ``(epsilon, delta)``; smaller ``p`` trusts the
    aggregation less and pays with more noise.

    Parameters
    ----------
    A : array-like, shape (n_clients, d)
        One private row per client.
    S : sparse matrix or array, shape (m, n_clients)
        Public sketch (see :func:`make_sketch`); chosen independently of ``A``.
    epsilon : float
        Privacy budget (``math.inf``: no noise, not private).
    delta : float
        Delta of the Gaussian mechanism, ``> 0`` for a finite epsilon.
    row_bound : float
        Public L2 bound on each client's row (rows are clipped to it).
    p : float in [0, 1], default 0.0
        Interpolation exponent: 0 is the local model, 1 the LTM.
    neighbouring : {"replace", "add_remove"}, default "replace"
        Neighbours differ in one client's row (replaced, or added/removed).
    noise : {"aggregated", "per_client"}, keyword, default "aggregated"
        How the shares are simulated, as in :func:`ltm_release`.
    n_servers : int, keyword, default 2
        Servers in the simulated aggregation (>= 2).
    random_state : None, int or numpy Generator, keyword
        Seeds the secret-sharing masks only; DP noise cannot be seeded.

    Returns
    -------
    Release
        ``value`` is the ``m x d`` noisy sketch; ``parameters["interpolation_p"]``
        holds ``p`` and the rest as in :func:`ltm_release`.

    Raises
    ------
    ParameterError
        When ``p`` is not a number in ``[0, 1]`` (or another parameter is invalid).

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025 (experiments, p in [0, 1]).

    Examples
    --------
    >>> from trustlab.privacy.linear_sketch import make_sketch
    >>> S = make_sketch(4, 50, random_state=0)
    >>> rel = local_variant(np.ones((50, 2)) / 2, S, 1.0, 1e-5, 1.0, p=0.0)
    >>> rel.parameters["interpolation_p"], rel.value.shape
    (0.0, (4, 2))
    """
    return release(
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
