"""What the ZKP-amenable LIME publishes and what a verification returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Checks", "ExplanationProof", "LimeCertificate", "VerifiableExplanation", "VerificationReport"]


@dataclass(frozen=True)
class LimeCertificate:
    """What the verifier needs besides the public parameters: all integers at fixed point.

    Attributes
    ----------
    x_q : numpy.ndarray
        Instance at scale ``2^f``.
    labels_q : numpy.ndarray
        Model outputs at scale ``2^f`` on ``[x; z_1..z_n]`` (row 0 is the prediction).
    w_q : numpy.ndarray
        Surrogate coefficients at scale ``2^f``.
    b_q : int
        Surrogate intercept at scale ``2^f``.
    theta_q : numpy.ndarray
        Dual vector at scale ``2^(2f)``.
    seed : bytes
        The sampling seed.
    border_q : numpy.ndarray or None
        BorderLIME only: the centre ``x_b`` (nearest opposite-label point found) at scale ``2^f``.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.verifiable import AmenableLime, derive_seed
    >>> lime = AmenableLime(n_samples=30, top_k=1)
    >>> x = np.array([0.5, -1.0])
    >>> exp = lime.explain(lambda Z: 1 / (1 + np.exp(-Z[:, 0])), x, derive_seed("c", lime.quantize(x)))
    >>> cert = exp.certificate
    >>> cert.x_q.tolist(), cert.labels_q.shape, cert.theta_q.shape
    ([128, -256], (31,), (30,))
    """

    x_q: np.ndarray
    labels_q: np.ndarray
    w_q: np.ndarray
    b_q: int
    theta_q: np.ndarray
    seed: bytes
    border_q: np.ndarray | None = None


@dataclass(frozen=True)
class VerifiableExplanation:
    """An explanation of the ZKP-amenable LIME.

    Attributes
    ----------
    coef : numpy.ndarray
        Surrogate coefficients (``w_q / 2^f``).
    intercept : float
        Surrogate intercept.
    topk_idx : tuple of int
        Indices of the ``k`` largest ``|coef|``, largest first.
    topk_val : tuple of int
        Their fixed-point values ``w_q[topk_idx]``.
    prediction : float
        Model output at ``x`` (``labels_q[0] / 2^f``).
    certificate : LimeCertificate
        The integers the checks run on.
    gap : float
        Duality gap ``P - D`` of the certificate.
    max_dual_correlation : float
        ``||X_w^T theta||_inf``; at most ``(1 + feas_slack) alpha`` when the check passes.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.verifiable import AmenableLime, derive_seed
    >>> lime = AmenableLime(n_samples=50, top_k=1)
    >>> x = np.array([0.2, 0.4])
    >>> exp = lime.explain(lambda Z: 1 / (1 + np.exp(-3 * Z[:, 0])), x, derive_seed("c", lime.quantize(x)))
    >>> exp.topk_idx, exp.topk_val, abs(exp.gap) < lime.eps_gap
    ((0,), (105,), True)
    """

    coef: np.ndarray
    intercept: float
    topk_idx: tuple[int, ...]
    topk_val: tuple[int, ...]
    prediction: float
    certificate: LimeCertificate
    gap: float
    max_dual_correlation: float


@dataclass(frozen=True)
class VerificationReport:
    """Outcome of a verification: ``ok`` and each check by name. ``bool(report)`` is ``ok``.

    Attributes
    ----------
    ok : bool
        All checks passed.
    checks : dict
        Check name -> passed.
    reasons : tuple of str
        One line per failed check.

    Examples
    --------
    >>> from trustlab.explain.verifiable import VerificationReport
    >>> report = VerificationReport(False, {"gap": True, "top_k": False}, ("top_k: not the k largest",))
    >>> bool(report), report.reasons
    (False, ('top_k: not the k largest',))
    """

    ok: bool
    checks: dict[str, bool] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class ExplanationProof:
    """What the owner sends per query in light mode.

    Attributes
    ----------
    commitment : str
        The model commitment the samples were derived from.
    nonce : bytes
        The query nonce.
    prediction : float
        ``f(x)``.
    explanation : VerifiableExplanation
        Explanation and certificate.

    See Also
    --------
    trustlab.explain.verifiable.prove_explanation : makes one (with an example).
    """

    commitment: str
    nonce: bytes
    prediction: float
    explanation: VerifiableExplanation


class Checks:
    """Named pass/fail checks with a reason per failure, turned into a :class:`VerificationReport`."""

    def __init__(self, start: VerificationReport | None = None) -> None:
        self.checks: dict[str, bool] = {} if start is None else dict(start.checks)
        self.reasons: list[str] = [] if start is None else list(start.reasons)

    def record(self, name: str, ok: Any, why: str) -> None:
        self.checks[name] = bool(ok)
        if not ok:
            self.reasons.append(f"{name}: {why}")

    def extend(self, report: VerificationReport) -> None:
        self.checks.update(report.checks)
        self.reasons.extend(report.reasons)

    def report(self) -> VerificationReport:
        return VerificationReport(all(self.checks.values()), self.checks, tuple(self.reasons))
