"""Zero-knowledge backend of verifiable LIME: prove the labels came from the committed model (ezkl).

The light mode of :mod:`trustlab.explain.verifiable` shows everything about a LIME
explanation except that the labels of the neighbourhood are the committed model's
outputs. This module proves that part with ezkl (Halo2 PLONK proofs over an ONNX
graph, KZG commitments on BN254):

* **Setup** (owner, once): the model (a ``torch.nn.Module``) is exported to ONNX for a
  batch of ``n_samples + 1`` rows; the circuit takes the rows as *public* inputs, the
  weights as *hashed* private values (their Poseidon hash is a public instance: this
  hash is the model commitment) and the outputs as *public*. The verifying key, the
  settings and the SRS are published with the commitment; the ONNX file, the compiled
  circuit and the proving key stay with the owner.
* **Query**: the owner derives the sampling seed from (commitment, x, nonce), builds
  ``[x; z_1..z_n]`` at fixed point, proves the model's outputs on them, fits the Lasso
  on those outputs and sends the proof with the explanation and its certificate.
* **Verification** (anyone): check the proof with the verifying key; check its public
  instances hold the published commitment, exactly the seed-derived rows and the
  labels in the certificate; then check the certificate (duality gap, feasibility,
  top-k) in integers as in light mode.

What it does not do (see ``docs/explain/verifiable-lime.md``): the Lasso certificate is
checked in Python by the verifier, not inside the circuit (the labels are public
instances, so the verifier learns the model's outputs on the ``n`` neighbours, as in
light mode); the sampler hash is SHA-256 outside the circuit rather than Poseidon
inside it (the verifier re-derives the rows, so the result is the same); the SRS is
generated locally by :func:`zk_setup`, whose creator knows its secret and could forge
proofs: real deployments must load a public ceremony SRS (``srs_path``).

ezkl, onnx and torch are optional (``pip install trustlab[zk]``) and imported lazily.

References
----------
.. [1] Yadav, C., Laufer, E. M., Boneh, D., Chaudhuri, K. "ExpProof:
   Operationalizing Explanations for Confidential Models with ZKPs". Proceedings of
   the 42nd International Conference on Machine Learning (ICML 2025), PMLR 267:70183-70204.
.. [2] ezkl: zero-knowledge inference for ONNX models, https://github.com/zkonduit/ezkl.
"""

from __future__ import annotations

import json
import numbers
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, check_positive_int
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.explain._vl_certificate import check_certificate
from trustlab.explain._vl_commitment import as_bytes, derive_seed
from trustlab.explain._vl_fixed_point import quantize, round_int
from trustlab.explain._vl_lime import AmenableLime, check_lime, public_params
from trustlab.explain._vl_results import Checks, VerifiableExplanation, VerificationReport

__all__ = [
    "ZKExplanationProof",
    "ZKPublic",
    "ZKSetup",
    "zk_prove_explanation",
    "zk_setup",
    "zk_verify_explanation",
]


def _ezkl() -> Any:
    try:
        import ezkl
    except ImportError:  # pragma: no cover - depends on the environment
        raise ModelError(
            "the zero-knowledge backend needs ezkl, onnx and torch: pip install 'trustlab[zk]'.",
            argument="backend",
        ) from None
    return ezkl


@dataclass(frozen=True)
class ZKPublic:
    """What the owner publishes once: the verifier needs nothing else.

    Attributes
    ----------
    commitment : str
        Poseidon hash of the model weights (a public instance of every proof).
    settings_path, vk_path, srs_path : pathlib.Path
        Circuit settings, verifying key and structured reference string.
    n_features, n_samples : int
        Shape the circuit was built for (``n_samples + 1`` rows of ``n_features``).

    See Also
    --------
    zk_setup : makes it (``docs/explain/verifiable-lime.md`` has a worked example).
    zk_verify_explanation : needs nothing else to check a proof.
    """

    commitment: str
    settings_path: Path
    vk_path: Path
    srs_path: Path
    n_features: int
    n_samples: int


@dataclass(frozen=True)
class ZKSetup:
    """The owner's setup: public part plus the private proving artefacts.

    Attributes
    ----------
    public : ZKPublic
        To publish.
    compiled_path, pk_path, workdir : pathlib.Path
        Compiled circuit (holds the weights), proving key and working directory; keep private.
    lime : AmenableLime
        Public LIME parameters the circuit was sized for.
    logrows : int
        Circuit size ``2^logrows`` rows.
    setup_s : float
        Seconds spent in the setup.

    See Also
    --------
    zk_setup : makes it.
    zk_prove_explanation : proves explanations with it.
    """

    public: ZKPublic
    compiled_path: Path
    pk_path: Path
    workdir: Path
    lime: AmenableLime
    logrows: int
    setup_s: float


@dataclass(frozen=True)
class ZKExplanationProof:
    """What the owner sends per query.

    Attributes
    ----------
    proof_path : pathlib.Path
        ezkl proof (JSON) in the owner's working directory.
    explanation : VerifiableExplanation
        The explanation with its certificate (labels are the circuit's outputs).
    nonce : bytes
        The query nonce.
    prediction : float
        The proven model output at ``x``.
    prove_s : float
        Seconds to build the witness and the proof.
    proof_bytes : int
        Size of the proof itself (bytes, excluding the JSON wrapper and public instances).

    See Also
    --------
    zk_prove_explanation : makes it.
    zk_verify_explanation : checks it against the owner's :class:`ZKPublic`.
    """

    proof_path: Path
    explanation: VerifiableExplanation
    nonce: bytes
    prediction: float
    prove_s: float
    proof_bytes: int


def _check_zk_lime(lime: Any) -> AmenableLime:
    lime = check_lime(lime)
    if lime.border:
        raise ParameterError(
            "the ezkl backend supports standard LIME only; use border=False (BorderLIME runs in light mode).",
            argument="lime",
        )
    return lime


def _write_input(path: Path, batch_q: np.ndarray, s: int) -> None:
    path.write_text(json.dumps({"input_data": [(batch_q.astype(float) / s).ravel().tolist()]}))


@validate_params(
    {
        "n_features": [Interval(numbers.Integral, 1, None, closed="left")],
        "workdir": [str, os.PathLike],
        "lime": [None, AmenableLime],
        "srs_path": [None, str, os.PathLike],
    }
)
def zk_setup(
    model: Any,
    n_features: int,
    workdir: str | os.PathLike[str],
    *,
    lime: AmenableLime | None = None,
    calibration_X: Any = None,
    srs_path: str | os.PathLike[str] | None = None,
) -> ZKSetup:
    """Export the model, build the circuit and keys, and compute the model commitment.

    Parameters
    ----------
    model : torch.nn.Module
        Maps ``(m, n_features)`` float32 inputs to ``(m,)`` or ``(m, 1)`` scores (e.g.
        a class-1 probability); put any softmax/column selection inside the module.
    n_features : int
        Number of input features.
    workdir : path
        Directory the ONNX file, circuit, keys and proofs are written to (created if absent).
    lime : AmenableLime, optional
        Public LIME parameters (``n_samples`` and ``frac_bits`` size the circuit).
    calibration_X : array-like of shape (m, n_features), optional
        Representative inputs for ezkl's range calibration; default: a neighbourhood of
        the origin. Queries far outside the calibrated range make the witness fail.
    srs_path : path, optional
        A public ceremony SRS with at least ``2^logrows`` points. Default: generate one
        locally, which is fine for tests and demos only (its creator knows the secret).

    Returns
    -------
    ZKSetup

    Notes
    -----
    trustlab prints nothing, but ezkl does: its calibration prints a numerical-fidelity
    table to stdout and its Rust code logs to the terminal (``RUST_LOG=error`` keeps only
    errors). Files are written only under ``workdir`` (and ``srs_path`` is only read).

    Examples
    --------
    See ``docs/explain/verifiable-lime.md`` (a setup takes tens of seconds).
    """
    ezkl = _ezkl()
    import torch

    lime = _check_zk_lime(lime)
    p = public_params(lime)
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"model must be a torch.nn.Module, got {type(model).__name__}.", argument="model")
    n_features = check_positive_int(n_features, "n_features")
    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    m = p["n"] + 1
    start = time.perf_counter()
    if calibration_X is None:
        zero = np.zeros(n_features, dtype=np.int64)
        cal_q = np.vstack([zero[None, :], lime.neighbourhood(zero, derive_seed("calibration", zero))])
    else:
        cal = check_numeric_array(calibration_X, "calibration_X", ndim=2)
        if cal.shape[1] != n_features:
            raise DataError(
                f"calibration_X has {cal.shape[1]} columns, expected {n_features}.", argument="calibration_X"
            )
        cal_q = quantize(cal, p["s"])
        cal_q = cal_q[np.arange(m) % len(cal_q)]
    onnx_path, settings, compiled = wd / "model.onnx", wd / "settings.json", wd / "model.compiled"
    dummy = torch.zeros((m, n_features), dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        out = model(dummy)
    if tuple(out.shape) not in {(m,), (m, 1)}:
        raise ModelError(
            f"model must return shape (m,) or (m, 1); got {tuple(out.shape)} for m={m}.", argument="model"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (dummy,),
            str(onnx_path),
            input_names=["input"],
            output_names=["output"],
            dynamo=False,
            opset_version=18,  # the newest opset ezkl's ONNX runtime (tract) is tested with
        )
    run_args = ezkl.PyRunArgs()
    run_args.input_visibility = "public"
    run_args.output_visibility = "public"
    run_args.param_visibility = "hashed"
    run_args.input_scale = p["fb"]
    run_args.param_scale = p["fb"]
    # Range checks decompose values in base 128 with 4 legs (2^28 > any value at scale
    # 2^8 here) instead of ezkl's default base 2^14: the range table then needs 128 rows
    # instead of 16384, which lets small models fit a 2^11-2^12 row circuit (setup and
    # proving about 3x faster than with the default).
    run_args.decomp_base = 128
    run_args.decomp_legs = 4
    ezkl.gen_settings(str(onnx_path), str(settings), py_run_args=run_args)
    cal_path = wd / "calibration.json"
    _write_input(cal_path, cal_q, p["s"])
    ezkl.calibrate_settings(str(cal_path), str(onnx_path), str(settings), "resources", scales=[p["fb"]])
    conf = json.loads(settings.read_text())
    if conf["run_args"]["input_scale"] != p["fb"]:  # pragma: no cover - ezkl respects scales=[fb]
        raise ModelError("ezkl chose another input scale than frac_bits.", argument="frac_bits")
    logrows = int(conf["run_args"]["logrows"])
    ezkl.compile_circuit(str(onnx_path), str(compiled), str(settings))
    srs = wd / "kzg.srs" if srs_path is None else Path(srs_path)
    if srs_path is None:
        ezkl.gen_srs(str(srs), logrows)
    witness = wd / "calibration_witness.json"
    ezkl.gen_witness(str(cal_path), str(compiled), str(witness), None, None)
    commitment = json.loads(witness.read_text())["processed_params"]["poseidon_hash"][0]
    vk, pk = wd / "vk.key", wd / "pk.key"
    ezkl.setup(str(compiled), str(vk), str(pk), str(srs), None, False)
    public = ZKPublic(
        commitment=str(commitment),
        settings_path=settings,
        vk_path=vk,
        srs_path=srs,
        n_features=n_features,
        n_samples=p["n"],
    )
    return ZKSetup(
        public=public,
        compiled_path=compiled,
        pk_path=pk,
        workdir=wd,
        lime=lime,
        logrows=logrows,
        setup_s=time.perf_counter() - start,
    )


def _to_frac(values: list[int], out_scale: int, fb: int) -> np.ndarray:
    """Fixed-point ints at ``2^out_scale`` -> ``2^fb`` (round half up)."""
    if out_scale >= fb:
        sh = out_scale - fb
        return np.array([(v + (1 << sh >> 1)) >> sh if sh else v for v in values], dtype=np.int64)
    return np.array([v << (fb - out_scale) for v in values], dtype=np.int64)


@validate_params({"nonce": [str, bytes], "name": [str]})
def zk_prove_explanation(
    setup: ZKSetup, x: Any, *, nonce: str | bytes = b"", name: str = "query"
) -> ZKExplanationProof:
    """Owner side: prove the model's outputs on the seed-derived neighbourhood and explain.

    Parameters
    ----------
    setup : ZKSetup
        From :func:`zk_setup`.
    x : array-like of shape (n_features,)
        The query, in the model's (standardised) feature space.
    nonce : str or bytes, default b""
        Verifier-chosen public value.
    name : str, default "query"
        File stem of the witness and proof in ``setup.workdir``.

    Returns
    -------
    ZKExplanationProof

    Examples
    --------
    See ``docs/explain/verifiable-lime.md`` (with ezkl a setup takes tens of seconds and a
    proof about a minute, too slow for a doctest).
    """
    ezkl = _ezkl()
    if not isinstance(setup, ZKSetup):
        raise ParameterError("setup must be a ZKSetup from zk_setup.", argument="setup")
    if not name.replace("-", "").replace("_", "").isalnum():
        raise ParameterError("name must be letters, digits, '-' or '_'.", argument="name")
    lime = setup.lime
    p = public_params(lime)
    xq = lime.quantize(x)
    if xq.size != setup.public.n_features:
        raise DataError(
            f"x has {xq.size} features; the circuit takes {setup.public.n_features}.", argument="x"
        )
    nonce_b = as_bytes(nonce)
    seed = derive_seed(setup.public.commitment, xq, nonce_b)
    batch = lime.batch(xq, seed)
    start = time.perf_counter()
    data, witness, proof = (
        setup.workdir / f"{name}{ext}" for ext in (".input.json", ".witness.json", ".proof.json")
    )
    _write_input(data, batch, p["s"])
    try:
        ezkl.gen_witness(str(data), str(setup.compiled_path), str(witness), None, None)
    except Exception as exc:  # ezkl raises plain RuntimeErrors
        raise DataError(
            f"ezkl could not evaluate the circuit on this query ({exc}); x may lie outside the "
            "calibrated range: rerun zk_setup with calibration_X covering it.",
            argument="x",
        ) from None
    wit = json.loads(witness.read_text())
    out_scale = int(json.loads(setup.public.settings_path.read_text())["model_output_scales"][0])
    labels = _to_frac([int(ezkl.felt_to_int(v)) for v in wit["outputs"][0]], out_scale, p["fb"])
    ezkl.prove(
        str(witness), str(setup.compiled_path), str(setup.pk_path), str(proof), str(setup.public.srs_path)
    )
    prove_s = time.perf_counter() - start
    explanation = lime.explain_labels(xq, seed, labels)
    size = len(json.loads(proof.read_text())["proof"])
    return ZKExplanationProof(
        proof_path=proof,
        explanation=explanation,
        nonce=nonce_b,
        prediction=explanation.prediction,
        prove_s=prove_s,
        proof_bytes=size,
    )


@validate_params({"nonce": [str, bytes], "lime": [None, AmenableLime]})
def zk_verify_explanation(
    proof: ZKExplanationProof,
    public: ZKPublic,
    *,
    x: Any,
    nonce: str | bytes = b"",
    lime: AmenableLime | None = None,
) -> VerificationReport:
    """Verifier side: check the ezkl proof, its public instances and the LIME certificate.

    Parameters
    ----------
    proof : ZKExplanationProof
        What the owner sent.
    public : ZKPublic
        What the owner published at setup (the verifier's own copy).
    x : array-like of shape (n_features,)
        The verifier's copy of the query.
    nonce : str or bytes, default b""
        The nonce the verifier chose.
    lime : AmenableLime, optional
        The public LIME parameters; default ``AmenableLime()`` with ``n_samples`` taken
        from ``public``.

    Returns
    -------
    VerificationReport
        Checks ``zk_proof``, ``commitment``, ``inputs``, ``labels``, ``prediction`` and
        those of :func:`~trustlab.explain.verifiable.check_certificate`.

    Examples
    --------
    See ``docs/explain/verifiable-lime.md`` (with ezkl a setup takes tens of seconds and a
    proof about a minute, too slow for a doctest).
    """
    ezkl = _ezkl()
    if not isinstance(proof, ZKExplanationProof):
        raise ParameterError("proof must be a ZKExplanationProof.", argument="proof")
    if not isinstance(public, ZKPublic):
        raise ParameterError("public must be the ZKPublic published at setup.", argument="public")
    lime = _check_zk_lime(AmenableLime(n_samples=public.n_samples) if lime is None else lime)
    p = public_params(lime)
    if p["n"] != public.n_samples:
        raise ParameterError(
            f"lime.n_samples={p['n']} but the circuit was built for {public.n_samples}.", argument="lime"
        )
    xq = lime.quantize(x)
    if xq.size != public.n_features:
        raise DataError(f"x has {xq.size} features; the circuit takes {public.n_features}.", argument="x")
    seed = derive_seed(public.commitment, xq, as_bytes(nonce))
    checks = Checks()
    record = checks.record
    try:
        ok = bool(
            ezkl.verify(
                str(proof.proof_path),
                str(public.settings_path),
                str(public.vk_path),
                str(public.srs_path),
                False,
            )
        )
    except Exception:  # a malformed or forged proof makes ezkl raise
        ok = False
    record("zk_proof", ok, "ezkl rejected the proof")
    conf = json.loads(Path(public.settings_path).read_text())
    out_scale = int(conf["model_output_scales"][0])
    instances = json.loads(Path(proof.proof_path).read_text())["instances"][0]
    batch = lime.batch(xq, seed)
    m = batch.shape[0]
    if len(instances) != 1 + batch.size + m:
        record("instances", False, f"expected {1 + batch.size + m} public values, got {len(instances)}")
        return checks.report()
    record("commitment", instances[0] == public.commitment, "the proof's weight hash is not the commitment")
    rows = np.array([int(ezkl.felt_to_int(v)) for v in instances[1 : 1 + batch.size]], dtype=np.int64)
    record("inputs", np.array_equal(rows, batch.ravel()), "the proven rows are not the seed-derived ones")
    labels = _to_frac([int(ezkl.felt_to_int(v)) for v in instances[1 + batch.size :]], out_scale, p["fb"])
    cert_labels = np.asarray(proof.explanation.certificate.labels_q, dtype=np.int64)
    record(
        "labels", np.array_equal(labels, cert_labels), "the certificate's labels are not the proven outputs"
    )
    record(
        "prediction",
        int(labels[0]) == round_int(proof.prediction * p["s"]),
        "the stated prediction is not the proven output at x",
    )
    checks.extend(check_certificate(lime, proof.explanation, x_q=xq, seed=seed))
    return checks.report()
