"""Label-private binary regression: optimal randomized response, a bias-corrected MLE and Wald intervals.

Binary labels ``y`` are sensitive, covariates ``X`` are public. Label differential
privacy (LabelDP) protects each label: neighbouring datasets differ in one label,
features fixed. This module implements the procedure of Zhang et al. (ICML 2025):

1. :class:`RandomizedResponseLabelDP` releases every label once through randomized
   response (RR) with keep probabilities ``p0 = P(y~=0 | y=0)`` and
   ``p1 = P(y~=1 | y=1)`` chosen to maximise the trace of the Fisher information
   of the binary response model ``P(y=1 | x) = F(x'beta)`` subject to the
   ``(epsilon, delta)``-LabelDP constraints. Under pure ``epsilon``-LabelDP the
   optimum is Warner's symmetric RR with keep probability
   ``e^eps / (1 + e^eps)`` for every record. With ``delta > 0`` the one-sided
   vertices ``(p0, p1) = (1, delta)`` and ``(delta, 1)`` carry more information
   where ``F(x'beta)`` is near 0 or 1; the choice then needs ``beta``, which a
   pilot share of records (released by symmetric RR) estimates.
2. :class:`LabelDPBinaryRegression` fits ``beta`` by the likelihood of the
   *released* labels, ``P(y~=1 | x) = (1 - p0) + (p0 + p1 - 1) F(x'beta)``, which
   removes the attenuation of a naive fit on ``y~``, and gives Wald intervals from
   the expected Fisher information. Fitting and intervals are post-processing:
   they spend no further budget.

The RR coins come from OpenDP's exact Bernoulli samplers (the bit-vector
randomized response ``make_randomized_response_bitvec``, used as a vectorised
exact Bernoulli draw), never from NumPy. OpenDP's randomness cannot be seeded:
``random_state`` governs only the public pilot split.

The implementation lives in private modules: the RR privacy geometry
(``_rr_geometry``), the model and its Fisher information (``_rr_fisher``), the
release (``_rr_mechanism``) and the regression (``_labeldp_regression``).
"""

from __future__ import annotations

from trustlab.privacy._labeldp_regression import LabelDPBinaryRegression
from trustlab.privacy._rr_fisher import rr_fisher_trace
from trustlab.privacy._rr_geometry import rr_hockey_stick, rr_is_feasible, rr_vertices
from trustlab.privacy._rr_mechanism import PrivatizedLabels, RandomizedResponseLabelDP

__all__ = [
    "LabelDPBinaryRegression",
    "PrivatizedLabels",
    "RandomizedResponseLabelDP",
    "rr_fisher_trace",
    "rr_hockey_stick",
    "rr_is_feasible",
    "rr_vertices",
]
