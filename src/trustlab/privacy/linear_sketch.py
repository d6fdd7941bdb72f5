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

The implementation lives in private modules, one per responsibility: the public
sketches and inputs (``_ltm_inputs``), the simulated secure aggregation
(``_secure_aggregation``), the noisy release (``_ltm_release``), the central
baselines (``_ltm_central``) and the estimators with the paper's metrics
(``_ltm_estimators``).

References
----------
Jakob Burkhardt, Hannah Keller, Claudio Orlandi, Chris Schwiegelshohn.
"Distributed Differentially Private Data Analytics via Secure Sketching".
ICML 2025 (PMLR 267:5913-5942; arXiv 2412.00497).
"""

from __future__ import annotations

from trustlab.privacy._ltm_central import central_mod_sulq, central_ssp_ridge
from trustlab.privacy._ltm_estimators import LTMLowRank, LTMRidge, low_rank_excess, ridge_cost_ratio
from trustlab.privacy._ltm_inputs import make_sketch
from trustlab.privacy._ltm_release import local_variant, ltm_release
from trustlab.privacy._secure_aggregation import FIXED_POINT_BITS, additive_shares, reconstruct

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
