"""The verifier's integer checks of a ZKP-amenable LIME certificate."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab.errors import ParameterError
from trustlab.explain._vl_commitment import int_vector
from trustlab.explain._vl_fixed_point import round_int
from trustlab.explain._vl_params import gap_and_corr, public_params, residual
from trustlab.explain._vl_results import Checks, VerifiableExplanation, VerificationReport

__all__ = ["check_certificate"]


def check_certificate(
    lime: Any, explanation: VerifiableExplanation, *, x_q: Any = None, seed: Any = None
) -> VerificationReport:
    """Re-derive the samples and check the duality gap, feasibility and top-k in integers.

    Parameters
    ----------
    lime : AmenableLime
        The public parameters.
    explanation : VerifiableExplanation
        What the prover published.
    x_q, seed : optional
        The instance and seed the verifier expects; default: those in the certificate.
        A verifier should always pass them (and derive ``seed`` itself).

    Returns
    -------
    VerificationReport
        Checks ``instance``, ``seed``, ``shapes``, ``gap``, ``feasibility``, ``dual_sum``,
        ``dual_binding`` (when ``bind_dual``), ``top_k`` and, for BorderLIME,
        ``border_label`` and ``ball``.

    Examples
    --------
    See :class:`AmenableLime`.
    """
    if not callable(getattr(lime, "weighted_problem", None)):  # the explainer's public parameters
        raise ParameterError("lime must be an AmenableLime (the public parameters).", argument="lime")
    if not isinstance(explanation, VerifiableExplanation):
        raise ParameterError(
            f"explanation must be a VerifiableExplanation, got {type(explanation).__name__}.",
            argument="explanation",
        )
    p = public_params(lime)
    s, S, n = p["s"], p["S"], p["n"]
    cert = explanation.certificate
    checks = Checks()
    record = checks.record
    xq = np.asarray(cert.x_q, dtype=np.int64)
    if x_q is not None:
        record("instance", np.array_equal(int_vector(x_q, "x_q"), xq), "x differs")
    sd = cert.seed if seed is None else seed
    if seed is not None:
        record("seed", sd == cert.seed, "seed differs from the expected one")
    d = xq.size
    w_q = np.asarray(cert.w_q, dtype=np.int64)
    theta = np.asarray(cert.theta_q, dtype=np.int64)
    shapes_ok = w_q.shape == (d,) and theta.shape == (n,) and np.asarray(cert.labels_q).size == p["n_labels"]
    if p["border"]:
        shapes_ok = shapes_ok and cert.border_q is not None and np.asarray(cert.border_q).shape == (d,)
    record("shapes", shapes_ok, f"expected w of size {d}, theta of size {n}, {p['n_labels']} labels")
    if not shapes_ok:
        return checks.report()
    if p["border"]:
        lab = np.asarray(cert.labels_q, dtype=np.int64)
        cls = 2 * lab >= s  # class 1 when the output is >= 0.5
        record("border_label", cls[n + 1] != cls[0], "f(x_b) has the same label as f(x)")
        record("ball", bool(np.all(cls[n + 2 :] == cls[0])), "a ball point around x has the other label")
    Xw, yw = lime.weighted_problem(xq, sd, cert.labels_q, cert.border_q)
    gap, corr = gap_and_corr(lime, Xw, yw, w_q, int(cert.b_q), theta)
    record("gap", abs(gap) <= round_int(p["eps_gap"] * S), f"|P - D| = {abs(gap) / S:.4g} > {p['eps_gap']}")
    feas = math.ceil((1 + p["feas_slack"]) * p["alpha"] * S)
    record("feasibility", corr <= feas, f"||X_w^T theta||_inf = {corr / S:.4g} > {feas / S:.4g}")
    tsum = int(theta.sum())
    record("dual_sum", abs(tsum) <= round_int(p["sum_tol"] * S), f"|sum theta| = {abs(tsum) / S:.4g}")
    if lime.bind_dual:
        r = residual(Xw, yw, w_q, int(cert.b_q), s).astype(object)
        dev = max(abs(int(t) * n - int(ri)) for t, ri in zip(theta.tolist(), r.tolist(), strict=True))
        record("dual_binding", dev <= n, "theta is not the residual of (w, b) divided by n")
    k = min(p["k"], d)
    idx = list(explanation.topk_idx)
    vals = [int(v) for v in explanation.topk_val]
    top_ok = len(idx) == k == len(vals) and len(set(idx)) == k and all(0 <= j < d for j in idx)
    if top_ok:
        sorted_abs = np.sort(np.abs(w_q))[::-1][:k]
        top_ok = (
            [int(w_q[j]) for j in idx] == vals
            and sorted(np.abs(vals).tolist(), reverse=True) == sorted_abs.tolist()
            and np.abs(vals).tolist() == sorted(np.abs(vals).tolist(), reverse=True)
        )
    record("top_k", top_ok, "the published indices/values are not the k largest |w|")
    return checks.report()
