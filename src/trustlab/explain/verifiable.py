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

Implementation: ``_vl_commitment`` (seed, byte stream, model commitment),
``_vl_fixed_point`` (tables and rounding), ``_vl_lime`` (the amenable LIME),
``_vl_border`` (BorderLIME's search), ``_vl_authors`` (the authors' own variant, for
comparison), ``_vl_results``, ``_vl_certificate`` (the
verifier's checks) and ``_vl_protocol`` (prove / verify); the float LIME core is
shared with :mod:`trustlab.explain.lime`.
"""

from trustlab.explain._vl_authors import (
    EXPPROOF_ALPHA,
    expproof_lasso,
    expproof_perturbations,
    expproof_sqrt_weights,
)
from trustlab.explain._vl_border import find_border_point
from trustlab.explain._vl_certificate import check_certificate
from trustlab.explain._vl_commitment import commit_model, derive_seed
from trustlab.explain._vl_lime import AmenableLime
from trustlab.explain._vl_protocol import prove_explanation, verify_explanation
from trustlab.explain._vl_results import (
    ExplanationProof,
    LimeCertificate,
    VerifiableExplanation,
    VerificationReport,
)

__all__ = [
    "EXPPROOF_ALPHA",
    "AmenableLime",
    "ExplanationProof",
    "LimeCertificate",
    "VerifiableExplanation",
    "VerificationReport",
    "check_certificate",
    "commit_model",
    "derive_seed",
    "expproof_lasso",
    "expproof_perturbations",
    "expproof_sqrt_weights",
    "find_border_point",
    "prove_explanation",
    "verify_explanation",
]
