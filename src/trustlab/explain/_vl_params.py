"""The public parameters of the ZKP-amenable LIME and the certificate's exact arithmetic.

Read by the explainer (:mod:`._vl_lime`) and by the verifier (:mod:`._vl_certificate`)
alike, so that neither imports the other for them: :func:`public_params` checks the
parameters of an :class:`~trustlab.explain.verifiable.AmenableLime` (any object with
its attributes) and derives the fixed-point scales; :func:`residual` and
:func:`gap_and_corr` are the integer duality-gap computation both sides run.

References
----------
Yadav, Laufer, Boneh, Chaudhuri. "ExpProof: Operationalizing Explanations for
Confidential Models with ZKPs". ICML 2025.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab._validation import check_choice, check_positive, check_positive_int
from trustlab.errors import ParameterError
from trustlab.explain._vl_fixed_point import exact, round_int

__all__ = ["SAMPLERS", "gap_and_corr", "public_params", "residual"]

SAMPLERS = ("uniform", "gaussian")


def public_params(lime: Any) -> dict[str, Any]:
    """The checked public parameters of ``lime`` and the derived scales ``s = 2^f``, ``S = 2^(2f)``."""
    n = check_positive_int(lime.n_samples, "n_samples", minimum=2)
    check_choice(lime.sampler, "sampler", SAMPLERS)
    fb = check_positive_int(lime.frac_bits, "frac_bits", minimum=6)
    if fb > 12:
        raise ParameterError(f"frac_bits must be between 6 and 12, got {fb}.", argument="frac_bits")
    if not isinstance(lime.bind_dual, bool):
        raise ParameterError("bind_dual must be True or False.", argument="bind_dual")
    if not isinstance(lime.border, bool):
        raise ParameterError("border must be True or False.", argument="border")
    n_ball = check_positive_int(lime.n_ball, "n_ball")
    kw = None if lime.kernel_width is None else check_positive(lime.kernel_width, "kernel_width")
    return {
        "n": n,
        "fb": fb,
        "s": 1 << fb,
        "S": 1 << (2 * fb),
        "alpha": check_positive(lime.alpha, "alpha"),
        "k": check_positive_int(lime.top_k, "top_k"),
        "eps_gap": check_positive(lime.eps_gap, "eps_gap"),
        "feas_slack": check_positive(lime.feas_slack, "feas_slack", allow_zero=True),
        "sum_tol": check_positive(lime.sum_tol, "sum_tol", allow_zero=True),
        "kw": kw,
        "border": lime.border,
        "n_ball": n_ball,
        "n_labels": n + 1 + (1 + n_ball if lime.border else 0),
    }


def residual(Xw: np.ndarray, yw: np.ndarray, w_q: np.ndarray, b_q: int, s: int) -> np.ndarray:
    """``r = y_w - b - X_w w`` at scale ``2^(2f)``, exact."""
    return np.asarray(exact(yw) * s - exact(Xw) @ exact(w_q) - b_q * s)


def gap_and_corr(
    lime: Any, Xw: np.ndarray, yw: np.ndarray, w_q: np.ndarray, b_q: int, theta: np.ndarray
) -> tuple[int, int]:
    """Duality gap ``P - D`` and ``||X_w^T theta||_inf`` of a certificate, exact, at scale ``2^(2f)``."""
    p = public_params(lime)
    s, S, n = p["s"], p["S"], p["n"]
    alpha_S = round_int(p["alpha"] * S)
    r = residual(Xw, yw, w_q, b_q, s).astype(object)
    th = theta.astype(object)
    # Sums are exact Python ints, each objective floored once at scale 2^(2f)
    # (flooring every squared term, as a naive circuit would, loses the dual's
    # n ||theta||^2 / 2 entirely: theta ~ 1e-4 is a few units at 2^16).
    primal = int(sum(r * r)) // (2 * n * S) + alpha_S * int(np.abs(w_q).sum()) // s
    dual = int(th @ yw.astype(object)) // s - (n * int(sum(th * th))) // (2 * S)
    corr = (Xw.astype(object).T @ th) // s
    return primal - dual, int(max(abs(int(c)) for c in corr))
