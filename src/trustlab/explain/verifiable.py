"""Verifiable LIME (ExpProof): a fixed-point LIME with an optimality certificate, and its protocol.

ExpProof (Yadav, Laufer, Boneh, Chaudhuri, ICML 2025) lets the owner of a
confidential model explain a decision to a party who does not trust it: the owner
commits to the model once; per query it returns the prediction, a LIME explanation
and a proof that (a) the committed model made the prediction, (b) the LIME
neighbourhood came from public randomness the owner could not choose, and (c) the
explanation is the output of a fixed public LIME procedure. The circuit does not
re-run the Lasso; it checks a *duality-gap certificate*.

This module is the ZKP-amenable LIME, written so that every check is exact integer
arithmetic the verifier can redo (the "light" mode of the spec):

1. Fixed point: inputs, labels, weights and surrogate coefficients at scale
   ``2^f`` (``f = frac_bits = 8``), the dual vector and the objectives at ``2^(2f)``;
   every product is floor-divided back to its scale.
2. Randomness: a SHA-256 counter stream keyed by ``derive_seed(commitment, x, nonce)``,
   one byte ``u`` per coordinate, so the prover cannot choose the samples.
3. Sampling: ``uniform``: ``z = x + 4 (u - 128) / 256`` (a grid of step 1/64 on
   ``[-2, 2)`` around ``x``); ``gaussian``: ``z = x + Phi^-1((u + 1/2) / 256)`` from a table.
4. Kernel: ``pi = exp(-||z - x||^2 / sigma^2)``, ``sigma = 0.75 sqrt(d)``, then
   ``sqrt(pi)``, each read as an exactly rounded table value; rows and labels are
   multiplied by ``sqrt(pi)``.
5. Surrogate: the Lasso ``P(w, b) = ||y_w - b - X_w w||^2 / (2n) + alpha ||w||_1``,
   ``alpha = 0.01``, solved by the prover (scikit-learn), with dual ``theta = r / n``.
6. Certificate: ``|P - D(theta)| <= eps_gap`` with ``D = theta^T y_w - n ||theta||^2 / 2``,
   ``||X_w^T theta||_inf <= (1 + feas_slack) alpha``; library additions: ``|sum theta|
   <= sum_tol`` (the intercept's optimality condition) and, with ``bind_dual=True``,
   ``theta`` must be the residual of ``(w, b)`` over ``n`` up to rounding.
7. Top-k: the published ``k`` indices must hold the ``k`` largest ``|w|`` and their values.
8. BorderLIME (``border=True``): LIME centred at ``x_b``, the nearest opposite-label point
   found by growing spheres, certified by ``f(x_b)`` having the other label and
   ``n_ball`` seed-derived points in the ball of radius ``||x - x_b||`` around ``x``
   sharing ``x``'s label.

The protocol functions :func:`commit_model`, :func:`prove_explanation` and
:func:`verify_explanation` wrap it. In this light mode the verifier sees the labels
of the neighbourhood but cannot tell that they came from the committed model
unless the owner opens the model to it; :mod:`trustlab.explain.verifiable_zk`
proves that part in zero knowledge with ezkl.

References
----------
.. [1] Yadav, C., Laufer, E. M., Boneh, D., Chaudhuri, K. "ExpProof:
   Operationalizing Explanations for Confidential Models with ZKPs". Proceedings of
   the 42nd International Conference on Machine Learning (ICML 2025), PMLR 267:70183-70204.
.. [2] Ribeiro, M. T., Singh, S., Guestrin, C. "'Why Should I Trust You?':
   Explaining the Predictions of Any Classifier". KDD 2016.
"""

from __future__ import annotations

import decimal
import functools
import hashlib
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab._validation import check_array, check_choice, check_positive, check_positive_int
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.explain.lime import (
    _check_label,
    _check_predict_fn,
    _model_column,
    _topk_order,
    _weighted_lasso,
)

__all__ = [
    "AmenableLime",
    "ExplanationProof",
    "LimeCertificate",
    "VerifiableExplanation",
    "VerificationReport",
    "check_certificate",
    "commit_model",
    "derive_seed",
    "find_border_point",
    "prove_explanation",
    "verify_explanation",
]

_DOMAIN = b"trustlab/expproof/v1"
_SAMPLERS = ("uniform", "gaussian")


# ----------------------------------------------------------------------------- hashing
def _int_bytes(values: np.ndarray) -> bytes:
    return b"".join(int(v).to_bytes(16, "big", signed=True) for v in values)


def _as_bytes(nonce: Any) -> bytes:
    if isinstance(nonce, bytes):
        return nonce
    if isinstance(nonce, str):
        return nonce.encode()
    raise ParameterError(f"nonce must be str or bytes, got {type(nonce).__name__}.", argument="nonce")


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
    xq = _int_vector(x_q, "x_q")
    h = hashlib.sha256()
    for part in (_DOMAIN, commitment.encode(), _int_bytes(xq), _as_bytes(nonce)):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


def _int_vector(values: Any, name: str) -> np.ndarray:
    """``values`` as a flat int64 vector (fixed-point integers), or a :class:`DataError` naming ``name``."""
    try:
        arr = np.asarray(values)
        if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
            raise ValueError(name)
        return arr.astype(np.int64).ravel()
    except (TypeError, ValueError, OverflowError):
        raise DataError(
            f"{name} must be finite integers at the fixed-point scale (e.g. AmenableLime.quantize(x)), "
            f"got {type(values).__name__} {str(values)[:60]}.",
            argument=name,
        ) from None


def _byte_stream(seed: bytes, count: int) -> np.ndarray:
    """``count`` bytes of SHA-256(seed || counter) for counter = 0, 1, 2, ..."""
    blocks = (count + 31) // 32
    out = b"".join(hashlib.sha256(seed + i.to_bytes(8, "big")).digest() for i in range(blocks))
    return np.frombuffer(out[:count], dtype=np.uint8).astype(np.int64)


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
    salt_b = _as_bytes(salt) if isinstance(salt, str | bytes) else None
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
    h.update(_DOMAIN + b"/model")
    h.update(salt_b)
    for name, w in items:
        arr = check_array(w, "weights", min_rows=0).reshape(-1)
        h.update(name.encode() + b"|" + repr(np.shape(w)).encode() + b"|")
        h.update(arr.astype("<f8").tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------- tables
_DEC = decimal.Context(prec=40)


def _round_half_up(value: decimal.Decimal) -> int:
    return int(value.to_integral_value(rounding=decimal.ROUND_HALF_UP))


def _exp_table(dist2: np.ndarray, s: int, sigma2: decimal.Decimal) -> np.ndarray:
    """``round(exp(-(dist2 / s) / sigma^2) * s)`` for each fixed-point squared distance, exactly."""
    uniq = np.unique(dist2)
    vals = {}
    for v in uniq.tolist():
        arg = -(decimal.Decimal(int(v)) / s) / sigma2
        vals[v] = _round_half_up(_DEC.exp(arg) * s)
    return np.array([vals[v] for v in dist2.tolist()], dtype=np.int64)


def _sqrt_fixed(v: np.ndarray, s: int) -> np.ndarray:
    """``round(sqrt(v / s) * s)`` in integers: ``round(sqrt(v * s))``."""
    return np.array([(math.isqrt(4 * int(a) * s) + 1) // 2 for a in v.tolist()], dtype=np.int64)


@functools.lru_cache(maxsize=8)
def _gauss_table(s: int) -> np.ndarray:
    """``round(Phi^-1((u + 1/2) / 256) * s)`` for each byte ``u`` (cached, read-only)."""
    nd = statistics.NormalDist()
    table = np.array([math.floor(nd.inv_cdf((u + 0.5) / 256) * s + 0.5) for u in range(256)], dtype=np.int64)
    table.flags.writeable = False
    return table


def _quantize(x: np.ndarray, s: int) -> np.ndarray:
    return np.floor(np.asarray(x, dtype=float) * s + 0.5).astype(np.int64)


def _exact(a: np.ndarray) -> np.ndarray:
    """Python-int (object) copy when sums of products of entries of ``a`` could overflow int64.

    Entries up to ``2^24`` keep int64: a product is below ``2^48`` and a sum of up to
    ``2^14`` of them (``d <= 64`` features, ``n <= 10^4`` samples) below ``2^62``.
    """
    a = np.asarray(a)
    if a.dtype == object or (a.size and int(np.abs(a).max()) > 2**24):
        return a.astype(object)
    return a


# ----------------------------------------------------------------------------- results
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
    """

    commitment: str
    nonce: bytes
    prediction: float
    explanation: VerifiableExplanation


class _Checks:
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


# ----------------------------------------------------------------------------- the method
class AmenableLime:
    """ZKP-amenable LIME: seed-derived fixed-point samples, Lasso surrogate, duality-gap certificate.

    Parameters
    ----------
    n_samples : int, default 100
        Neighbourhood size ``n`` (the paper's tutorial uses 100); the instance itself is
        labelled too but not used in the fit, as in the ExpProof circuit.
    sampler : {"uniform", "gaussian"}, default "uniform"
        ``uniform``: a grid of step ``1/64`` on ``[-2, 2)`` around ``x`` per coordinate;
        ``gaussian``: standard normal via an inverse-CDF table of the byte.
    alpha : float, default 0.01
        Lasso penalty (the ExpProof code's constant).
    top_k : int, default 10
        Size of the published explanation (capped at ``d``).
    frac_bits : int, default 8
        Fixed-point fraction bits ``f`` (scale ``2^f``; dual at ``2^(2f)``), 6 to 12.
    eps_gap : float, default 0.1
        Allowed absolute duality gap ``|P - D|`` (the circuit's constant).
    feas_slack : float, default 0.5
        Dual feasibility slack: ``||X_w^T theta||_inf <= (1 + feas_slack) alpha``.
    sum_tol : float, default 0.01
        Library addition: ``|sum(theta)| <= sum_tol`` (the mean residual; the
        unpenalised intercept's optimality condition, which the circuit omits).
    bind_dual : bool, default True
        Library addition: require ``theta`` to be the residual of ``(w, b)`` over ``n``
        (to rounding). Without it a prover may send ``theta = 0`` and pass the gap
        check with any ``(w, b)`` whose primal objective is below ``eps_gap``.
    kernel_width : float, optional
        ``sigma``; default ``0.75 * sqrt(d)`` as in ``lime``.
    border : bool, default False
        BorderLIME: centre the neighbourhood at ``x_b``, the nearest opposite-label
        point (growing spheres), for points far from the decision boundary where LIME
        is flat. Needs a binary model whose explained output is a probability
        (class = output >= 0.5). The certificate then also shows that ``f(x_b)`` has
        the other label and that ``n_ball`` seed-derived points uniform in the ball of
        radius ``||x - x_b||`` around ``x`` all share ``x``'s label.
    n_ball : int, default 100
        BorderLIME's number of ball points.

    Notes
    -----
    Inputs must already be in the model's (standardised) feature space: the sampler
    perturbs each coordinate by at most 2 units. See ``docs/explain/verifiable-lime.md``
    for the divergences from the ExpProof circuit (SHA-256 instead of Poseidon, exactly
    rounded tables, the two added checks).

    References
    ----------
    .. [1] Yadav, C., Laufer, E. M., Boneh, D., Chaudhuri, K. "ExpProof:
       Operationalizing Explanations for Confidential Models with ZKPs". ICML 2025,
       PMLR 267:70183-70204.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.verifiable import AmenableLime, check_certificate, derive_seed
    >>> f = lambda Z: 1 / (1 + np.exp(-(2 * Z[:, 0] - Z[:, 1])))
    >>> lime = AmenableLime(n_samples=200, top_k=2)
    >>> x = np.array([0.5, -0.25, 0.0])
    >>> seed = derive_seed("model-commitment", lime.quantize(x))
    >>> exp = lime.explain(f, x, seed)
    >>> exp.topk_idx
    (0, 1)
    >>> bool(check_certificate(lime, exp))
    True
    """

    def __init__(
        self,
        n_samples: int = 100,
        sampler: str = "uniform",
        alpha: float = 0.01,
        top_k: int = 10,
        frac_bits: int = 8,
        eps_gap: float = 0.1,
        feas_slack: float = 0.5,
        sum_tol: float = 0.01,
        bind_dual: bool = True,
        kernel_width: float | None = None,
        border: bool = False,
        n_ball: int = 100,
    ) -> None:
        self.n_samples = n_samples
        self.sampler = sampler
        self.alpha = alpha
        self.top_k = top_k
        self.frac_bits = frac_bits
        self.eps_gap = eps_gap
        self.feas_slack = feas_slack
        self.sum_tol = sum_tol
        self.bind_dual = bind_dual
        self.kernel_width = kernel_width
        self.border = border
        self.n_ball = n_ball

    # -- parameters ----------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        n = check_positive_int(self.n_samples, "n_samples", minimum=2)
        check_choice(self.sampler, "sampler", _SAMPLERS)
        fb = check_positive_int(self.frac_bits, "frac_bits", minimum=6)
        if fb > 12:
            raise ParameterError(f"frac_bits must be between 6 and 12, got {fb}.", argument="frac_bits")
        if not isinstance(self.bind_dual, bool):
            raise ParameterError("bind_dual must be True or False.", argument="bind_dual")
        if not isinstance(self.border, bool):
            raise ParameterError("border must be True or False.", argument="border")
        n_ball = check_positive_int(self.n_ball, "n_ball")
        kw = None if self.kernel_width is None else check_positive(self.kernel_width, "kernel_width")
        return {
            "n": n,
            "fb": fb,
            "s": 1 << fb,
            "S": 1 << (2 * fb),
            "alpha": check_positive(self.alpha, "alpha"),
            "k": check_positive_int(self.top_k, "top_k"),
            "eps_gap": check_positive(self.eps_gap, "eps_gap"),
            "feas_slack": check_positive(self.feas_slack, "feas_slack", allow_zero=True),
            "sum_tol": check_positive(self.sum_tol, "sum_tol", allow_zero=True),
            "kw": kw,
            "border": self.border,
            "n_ball": n_ball,
            "n_labels": n + 1 + (1 + n_ball if self.border else 0),
        }

    def quantize(self, x: Any) -> np.ndarray:
        """The instance at fixed point, ``floor(x * 2^f + 1/2)`` (what the seed is derived from)."""
        p = self._params()
        row = check_array(x, "x", ndim=1)
        if np.abs(row).max() * p["s"] > 2**40:
            raise DataError(
                "x is too large for the fixed-point pipeline; standardise the features first.",
                argument="x",
            )
        return _quantize(row, p["s"])

    # -- the public, deterministic part --------------------------------------------
    def neighbourhood(self, x_q: Any, seed: bytes) -> np.ndarray:
        """The ``n`` samples at fixed point, derived from ``seed`` (shape ``(n, d)``, int64)."""
        p = self._params()
        xq = _int_vector(x_q, "x_q")
        if xq.size == 0:
            raise DataError("x must have at least one feature.", argument="x")
        _check_seed(seed)
        d = xq.size
        u = _byte_stream(seed, p["n"] * d).reshape(p["n"], d)
        if self.sampler == "uniform":
            delta = (u - 128) * p["s"] // 64  # 4 * (u - 128) / 256 in units of 1
        else:
            delta = _gauss_table(p["s"])[u]
        return np.asarray(xq[None, :] + delta, dtype=np.int64)

    def ball(self, x_q: Any, border_q: Any, seed: bytes) -> np.ndarray:
        """BorderLIME's ``n_ball`` points uniform in the ball of radius ``||x - x_b||`` around ``x``.

        Fixed point: ``d + 2`` table-Gaussian coordinates per point, normalised with an
        integer reciprocal square root, the first ``d`` kept (uniform in the unit ball),
        scaled by the integer radius ``isqrt(||x_q - x_b,q||^2)``.
        """
        p = self._params()
        s = p["s"]
        xq = _int_vector(x_q, "x_q")
        bq = _int_vector(border_q, "border_q")
        if bq.shape != xq.shape:
            raise DataError(f"border_q must have {xq.size} values, got {bq.size}.", argument="border_q")
        d = xq.size
        u = _byte_stream(hashlib.sha256(b"ball" + seed).digest(), p["n_ball"] * (d + 2))
        g = _gauss_table(s)[u].reshape(p["n_ball"], d + 2)
        norm2 = (g * g).sum(axis=1)  # scale s^2
        recip = np.array([math.isqrt((s**4 << 2) // max(int(v), 1)) for v in norm2.tolist()], dtype=np.int64)
        unit = (g[:, :d] * recip[:, None]) // (2 * s)  # g / ||g|| at scale s
        radius = math.isqrt(int(((xq - bq).astype(object) ** 2).sum()))  # scale s
        return np.asarray(xq[None, :] + (unit * radius) // s, dtype=np.int64)

    def batch(self, x_q: Any, seed: bytes, border_q: Any = None) -> np.ndarray:
        """All rows the model labels: ``[x; z_1..z_n]``, plus ``[x_b; ball]`` for BorderLIME."""
        p = self._params()
        xq = _int_vector(x_q, "x_q")
        if not p["border"]:
            return np.vstack([xq[None, :], self.neighbourhood(xq, seed)])
        bq = _border_point(border_q)
        parts = [xq[None, :], self.neighbourhood(bq, seed), bq[None, :], self.ball(xq, bq, seed)]
        return np.vstack(parts)

    def weighted_problem(
        self, x_q: Any, seed: bytes, labels_q: Any, border_q: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(X_w, y_w)`` at scale ``2^f``: samples and labels times the fixed-point ``sqrt(pi)``."""
        p = self._params()
        xq = _int_vector(x_q, "x_q")
        if p["border"]:
            xq = _border_point(border_q)
        Z = self.neighbourhood(xq, seed)
        yq = _int_vector(labels_q, "labels_q")
        if yq.size != p["n_labels"]:
            raise DataError(
                f"labels_q must hold {p['n_labels']} values (the labelled batch), got {yq.size}.",
                argument="labels_q",
            )
        d = xq.size
        s = p["s"]
        diff = _exact(Z - xq[None, :])
        dist2 = np.asarray((diff * diff).sum(axis=1) // s, dtype=np.int64)
        # sigma^2 exactly: (0.75 sqrt(d))^2 = 9d/16 by default
        sigma2 = decimal.Decimal(9 * d) / 16 if p["kw"] is None else decimal.Decimal(repr(p["kw"])) ** 2
        pi = _exp_table(dist2, s, sigma2)
        root = _sqrt_fixed(pi, s)
        Xw = np.asarray(_exact(root)[:, None] * _exact(Z) // s)
        yw = np.asarray(_exact(root) * _exact(yq[1 : p["n"] + 1]) // s)
        return Xw, yw

    # -- prover ----------------------------------------------------------------------
    def explain(self, predict_fn: Any, x: Any, seed: bytes, *, label: int = 1) -> VerifiableExplanation:
        """Run the amenable LIME for ``x`` with the public ``seed`` and emit the certificate.

        Parameters
        ----------
        predict_fn : callable
            The model: ``(m, d)`` array -> ``(m,)`` scores or ``(m, n_classes)``
            probabilities (column ``label``). It is evaluated on the dequantised samples.
        x : array-like of shape (d,)
            The instance, in the model's (standardised) feature space.
        seed : bytes
            From :func:`derive_seed`.
        label : int, default 1
            Output column to explain for 2-D outputs.

        Returns
        -------
        VerifiableExplanation
        """
        p = self._params()
        fn = _check_predict_fn(predict_fn)
        label = _check_label(label)
        xq = self.quantize(x)
        bq = None
        if p["border"]:
            _check_seed(seed)
            rng = np.random.default_rng(int.from_bytes(hashlib.sha256(b"spheres" + seed).digest()[:8], "big"))
            bq = find_border_point(fn, xq, p["s"], label=label, rng=rng)
        batch = self.batch(xq, seed, bq).astype(float) / p["s"]
        y = _model_column(fn(batch), batch.shape[0], label)
        return self.explain_labels(xq, seed, _quantize(y, p["s"]), border_q=bq)

    def explain_labels(
        self, x_q: Any, seed: bytes, labels_q: Any, border_q: Any = None
    ) -> VerifiableExplanation:
        """Fit the surrogate and build the certificate from given fixed-point labels.

        Used by the zero-knowledge backend, whose labels are the circuit's outputs.
        """
        p = self._params()
        xq = _int_vector(x_q, "x_q")
        yq = _int_vector(labels_q, "labels_q")
        Xw, yw = self.weighted_problem(xq, seed, yq, border_q)
        s, S, n = p["s"], p["S"], p["n"]
        coef, intercept = _weighted_lasso(Xw.astype(float) / s, yw.astype(float) / s, None, p["alpha"])
        w_q = _quantize(coef, s)
        b_q = _round_int(intercept * s)
        r_S = self._residual(Xw, yw, w_q, b_q, s)
        theta = np.array([_div_round(int(r), n) for r in r_S.tolist()], dtype=np.int64)
        k = min(p["k"], xq.size)
        order = _topk_order(w_q)[:k]
        bq = None if border_q is None else _int_vector(border_q, "border_q")
        cert = LimeCertificate(x_q=xq, labels_q=yq, w_q=w_q, b_q=b_q, theta_q=theta, seed=seed, border_q=bq)
        gap, corr = self._gap_and_corr(Xw, yw, w_q, b_q, theta)
        return VerifiableExplanation(
            coef=w_q / s,
            intercept=b_q / s,
            topk_idx=tuple(int(j) for j in order),
            topk_val=tuple(int(w_q[j]) for j in order),
            prediction=float(yq[0]) / s,
            certificate=cert,
            gap=gap / S,
            max_dual_correlation=corr / S,
        )

    # -- verifier --------------------------------------------------------------------
    @staticmethod
    def _residual(Xw: np.ndarray, yw: np.ndarray, w_q: np.ndarray, b_q: int, s: int) -> np.ndarray:
        """``r = y_w - b - X_w w`` at scale ``2^(2f)``, exact."""
        return np.asarray(_exact(yw) * s - _exact(Xw) @ _exact(w_q) - b_q * s)

    def _gap_and_corr(
        self, Xw: np.ndarray, yw: np.ndarray, w_q: np.ndarray, b_q: int, theta: np.ndarray
    ) -> tuple[int, int]:
        p = self._params()
        s, S, n = p["s"], p["S"], p["n"]
        alpha_S = _round_int(p["alpha"] * S)
        r = self._residual(Xw, yw, w_q, b_q, s).astype(object)
        th = theta.astype(object)
        # Sums are exact Python ints, each objective floored once at scale 2^(2f)
        # (flooring every squared term, as a naive circuit would, loses the dual's
        # n ||theta||^2 / 2 entirely: theta ~ 1e-4 is a few units at 2^16).
        primal = int(sum(r * r)) // (2 * n * S) + alpha_S * int(np.abs(w_q).sum()) // s
        dual = int(th @ yw.astype(object)) // s - (n * int(sum(th * th))) // (2 * S)
        corr = (Xw.astype(object).T @ th) // s
        return primal - dual, int(max(abs(int(c)) for c in corr))

    def verify(
        self, explanation: VerifiableExplanation, *, x_q: Any = None, seed: Any = None
    ) -> VerificationReport:
        """Check an explanation's certificate (see :func:`check_certificate`)."""
        return check_certificate(self, explanation, x_q=x_q, seed=seed)


def _check_lime(lime: Any) -> AmenableLime:
    """``lime`` (default ``AmenableLime()``) after checking its type and parameters."""
    lime = AmenableLime() if lime is None else lime
    if not isinstance(lime, AmenableLime):
        raise ParameterError(
            f"lime must be an AmenableLime (the public parameters), got {type(lime).__name__}.",
            argument="lime",
        )
    lime._params()
    return lime


def _check_seed(seed: Any) -> bytes:
    if not isinstance(seed, bytes) or len(seed) < 16:
        raise ParameterError("seed must be bytes of length >= 16 (use derive_seed).", argument="seed")
    return seed


def _border_point(border_q: Any) -> np.ndarray:
    if border_q is None:
        raise DataError("BorderLIME needs the border point border_q.", argument="border_q")
    return _int_vector(border_q, "border_q")


def _round_int(v: float) -> int:
    return math.floor(v + 0.5)


def _div_round(a: int, n: int) -> int:
    """``round(a / n)`` for Python ints, halves up."""
    return (2 * a + n) // (2 * n)


def find_border_point(
    predict_fn: Callable[[np.ndarray], Any],
    x_q: np.ndarray,
    s: int,
    *,
    label: int = 1,
    rng: np.random.Generator,
    radius: float = 5.0,
    n_layer: int = 1000,
    max_layers: int = 200,
) -> np.ndarray:
    """Growing spheres (BorderLIME's search, prover side): the nearest opposite-label point to ``x``.

    Halve ``radius`` while the ball around ``x`` holds opposite-label points (``n_layer``
    uniform draws per layer), then grow rings of width ``r / 2`` until one appears; the
    closest is refined by bisection on the segment to ``x`` and returned at fixed point
    (moved outwards on the grid until its quantised value keeps the other label).
    """
    predict_fn = _check_predict_fn(predict_fn)
    label = _check_label(label)
    s = check_positive_int(s, "s")
    if not isinstance(rng, np.random.Generator):
        raise ParameterError("rng must be a numpy Generator.", argument="rng")
    x = _int_vector(x_q, "x_q").astype(float) / s
    d = x.size

    def cls(Z: np.ndarray) -> np.ndarray:
        return _model_column(predict_fn(np.atleast_2d(Z)), len(np.atleast_2d(Z)), label) >= 0.5

    def shell(lo: float, hi: float) -> np.ndarray:
        v = rng.standard_normal((n_layer, d))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        r = (rng.uniform(size=n_layer) * (hi**d - lo**d) + lo**d) ** (1 / d)
        return x + v * r[:, None]

    c0 = bool(cls(x)[0])
    r = radius
    for _ in range(max_layers):
        if not np.any(cls(shell(0.0, r)) != c0) or r < 1e-6:
            break
        r /= 2
    lo, found = r, None
    for _ in range(max_layers):
        pts = shell(lo, lo + r / 2)
        opp = pts[cls(pts) != c0]
        if len(opp):
            found = opp[np.argmin(np.linalg.norm(opp - x, axis=1))]
            break
        lo += r / 2
    if found is None:
        raise ModelError(
            f"BorderLIME found no point with the other label within radius {lo:.3g} of x; "
            "use border=False for this query.",
            argument="predict_fn",
        )
    inner, outer = 0.0, 1.0  # bisection on x + t (found - x)
    for _ in range(30):
        mid = (inner + outer) / 2
        if bool(cls(x + mid * (found - x))[0]) != c0:
            outer = mid
        else:
            inner = mid
    step = (found - x) / max(np.linalg.norm(found - x), 1e-12)
    for k in range(4 * s):
        bq = _quantize(x + outer * (found - x) + k * step / s, s)
        if bool(cls(bq.astype(float) / s)[0]) != c0:
            return bq
    raise ModelError(
        "BorderLIME could not place x_b on the fixed-point grid.", argument="predict_fn"
    )  # pragma: no cover


def check_certificate(
    lime: AmenableLime, explanation: VerifiableExplanation, *, x_q: Any = None, seed: Any = None
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
    if not isinstance(lime, AmenableLime):
        raise ParameterError("lime must be an AmenableLime (the public parameters).", argument="lime")
    if not isinstance(explanation, VerifiableExplanation):
        raise ParameterError(
            f"explanation must be a VerifiableExplanation, got {type(explanation).__name__}.",
            argument="explanation",
        )
    p = lime._params()
    s, S, n = p["s"], p["S"], p["n"]
    cert = explanation.certificate
    checks = _Checks()
    record = checks.record
    xq = np.asarray(cert.x_q, dtype=np.int64)
    if x_q is not None:
        record("instance", np.array_equal(_int_vector(x_q, "x_q"), xq), "x differs")
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
    gap, corr = lime._gap_and_corr(Xw, yw, w_q, int(cert.b_q), theta)
    record("gap", abs(gap) <= _round_int(p["eps_gap"] * S), f"|P - D| = {abs(gap) / S:.4g} > {p['eps_gap']}")
    feas = math.ceil((1 + p["feas_slack"]) * p["alpha"] * S)
    record("feasibility", corr <= feas, f"||X_w^T theta||_inf = {corr / S:.4g} > {feas / S:.4g}")
    tsum = int(theta.sum())
    record("dual_sum", abs(tsum) <= _round_int(p["sum_tol"] * S), f"|sum theta| = {abs(tsum) / S:.4g}")
    if lime.bind_dual:
        r = lime._residual(Xw, yw, w_q, int(cert.b_q), s).astype(object)
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


# ----------------------------------------------------------------------------- protocol
def prove_explanation(
    predict_fn: Callable[[np.ndarray], Any],
    x: Any,
    *,
    commitment: str,
    nonce: str | bytes = b"",
    lime: AmenableLime | None = None,
    label: int = 1,
) -> ExplanationProof:
    """Owner side, light mode: explain ``x`` with samples derived from the commitment.

    Parameters
    ----------
    predict_fn : callable
        The committed model.
    x : array-like of shape (d,)
        The query, in the model's feature space.
    commitment : str
        The published model commitment (:func:`commit_model`).
    nonce : str or bytes, default b""
        Verifier-chosen public value (see :func:`derive_seed`).
    lime : AmenableLime, optional
        Public parameters; default ``AmenableLime()``.
    label : int, default 1
        Output column for 2-D outputs.

    Returns
    -------
    ExplanationProof

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.verifiable import commit_model, prove_explanation, verify_explanation
    >>> W = np.array([1.5, -1.0, 0.0, 0.5])
    >>> f = lambda Z: 1 / (1 + np.exp(-Z @ W))
    >>> c = commit_model([W], salt=b"sixteen byte salt")
    >>> x = np.array([0.2, 0.1, -0.3, 0.0])
    >>> proof = prove_explanation(f, x, commitment=c, nonce="query-1")
    >>> bool(verify_explanation(proof, commitment=c, x=x, nonce="query-1"))
    True
    >>> bool(verify_explanation(proof, commitment=c, x=x, nonce="query-2"))
    False
    """
    lime = _check_lime(lime)
    nonce_b = _as_bytes(nonce)
    xq = lime.quantize(x)
    seed = derive_seed(commitment, xq, nonce_b)
    exp = lime.explain(predict_fn, x, seed, label=label)
    return ExplanationProof(commitment=commitment, nonce=nonce_b, prediction=exp.prediction, explanation=exp)


def verify_explanation(
    proof: ExplanationProof,
    *,
    commitment: str,
    x: Any,
    nonce: str | bytes = b"",
    lime: AmenableLime | None = None,
    opening: tuple[Callable[[np.ndarray], Any], Any, str | bytes] | None = None,
    label: int = 1,
) -> VerificationReport:
    """Verifier side, light mode: re-derive the seed and samples and check the certificate.

    Parameters
    ----------
    proof : ExplanationProof
        What the owner sent.
    commitment : str
        The commitment published before the query.
    x : array-like of shape (d,)
        The verifier's own copy of the query.
    nonce : str or bytes, default b""
        The nonce the verifier chose.
    lime : AmenableLime, optional
        Public parameters; default ``AmenableLime()``.
    opening : (predict_fn, weights, salt), optional
        When the owner opens the model to the verifier (giving up confidentiality): the
        commitment is recomputed from ``weights`` and ``salt`` and the labels from
        ``predict_fn``. Without it the labels are *not* shown to come from the
        committed model; use :mod:`trustlab.explain.verifiable_zk` for that.
    label : int, default 1
        Output column for 2-D outputs (with ``opening``).

    Returns
    -------
    VerificationReport
        The checks of :func:`check_certificate` plus ``commitment``, ``prediction`` and,
        with ``opening``, ``opening`` and ``labels``.
    """
    lime = _check_lime(lime)
    label = _check_label(label)
    if not isinstance(proof, ExplanationProof):
        raise ParameterError(
            f"proof must be an ExplanationProof, got {type(proof).__name__}.", argument="proof"
        )
    p = lime._params()
    xq = lime.quantize(x)
    seed = derive_seed(commitment, xq, _as_bytes(nonce))
    exp = proof.explanation
    checks = _Checks(check_certificate(lime, exp, x_q=xq, seed=seed))
    checks.record("commitment", proof.commitment == commitment, "the proof names another commitment")
    checks.record(
        "prediction",
        int(exp.certificate.labels_q[0]) == _round_int(proof.prediction * p["s"]),
        "differs from the certified label of x",
    )
    if opening is not None:
        if not isinstance(opening, tuple | list) or len(opening) != 3:
            raise ParameterError(
                "opening must be a tuple (predict_fn, weights, salt) or None.", argument="opening"
            )
        fn, weights, salt = opening
        checks.record(
            "opening",
            commit_model(weights, salt) == commitment,
            "weights and salt do not open the commitment",
        )
        batch = lime.batch(xq, seed, exp.certificate.border_q).astype(float) / p["s"]
        y = _quantize(_model_column(_check_predict_fn(fn)(batch), batch.shape[0], label), p["s"])
        checks.record(
            "labels",
            np.array_equal(y, np.asarray(exp.certificate.labels_q, dtype=np.int64)),
            "the opened model gives other labels",
        )
    return checks.report()
