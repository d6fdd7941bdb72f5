"""The light-mode protocol: the owner proves an explanation, the verifier checks it."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ParameterError
from trustlab.explain._lime_core import check_predict_fn, model_column
from trustlab.explain._vl_certificate import check_certificate
from trustlab.explain._vl_commitment import as_bytes, commit_model, derive_seed
from trustlab.explain._vl_fixed_point import quantize, round_int
from trustlab.explain._vl_lime import AmenableLime, check_lime, public_params
from trustlab.explain._vl_results import Checks, ExplanationProof, VerificationReport

__all__ = ["prove_explanation", "verify_explanation"]


_COMMON = {
    "commitment": [str],
    "nonce": [str, bytes],
    "lime": [None, AmenableLime],
    "label": [Interval(numbers.Integral, 0, None, closed="left")],
}


@validate_params(_COMMON)
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
    lime = check_lime(lime)
    nonce_b = as_bytes(nonce)
    xq = lime.quantize(x)
    seed = derive_seed(commitment, xq, nonce_b)
    exp = lime.explain(predict_fn, x, seed, label=label)
    return ExplanationProof(commitment=commitment, nonce=nonce_b, prediction=exp.prediction, explanation=exp)


@validate_params({**_COMMON, "proof": [ExplanationProof], "opening": [None, tuple, list]})
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

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.verifiable import commit_model, prove_explanation, verify_explanation
    >>> weights, salt = [np.array([1.0, -0.5])], b"a salt of 16+ bytes"
    >>> f = lambda Z: 1 / (1 + np.exp(-Z @ weights[0]))
    >>> c = commit_model(weights, salt)
    >>> proof = prove_explanation(f, [0.3, 0.1], commitment=c, nonce="n")
    >>> report = verify_explanation(proof, commitment=c, x=[0.3, 0.1], nonce="n", opening=(f, weights, salt))
    >>> report.ok, report.checks["opening"], report.checks["labels"]
    (True, True, True)
    """
    lime = check_lime(lime)
    label = int(label)
    p = public_params(lime)
    xq = lime.quantize(x)
    seed = derive_seed(commitment, xq, as_bytes(nonce))
    exp = proof.explanation
    checks = Checks(check_certificate(lime, exp, x_q=xq, seed=seed))
    checks.record("commitment", proof.commitment == commitment, "the proof names another commitment")
    checks.record(
        "prediction",
        int(exp.certificate.labels_q[0]) == round_int(proof.prediction * p["s"]),
        "differs from the certified label of x",
    )
    if opening is not None:
        if len(opening) != 3:
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
        y = quantize(model_column(check_predict_fn(fn)(batch), batch.shape[0], label), p["s"])
        checks.record(
            "labels",
            np.array_equal(y, np.asarray(exp.certificate.labels_q, dtype=np.int64)),
            "the opened model gives other labels",
        )
    return checks.report()
