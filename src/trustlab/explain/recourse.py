"""Confined regions: certify recourse for linear classifiers, or describe who has none.

A linear classifier ``h(x) = 1[w^T x + b > 0]`` can give some people a *fixed*
negative prediction: no action ``a`` they are allowed to take (an
:class:`~trustlab.explain.recourse_actions.ActionSet`) reaches a positive score.
Pointwise audits (:func:`has_recourse`) check the people in a dataset one by one
and miss people not in it. :class:`ConfinedRegionFinder` implements ReVer
(Lawless, Weng, Ustun, Udell, ICML 2025): it finds *confined regions*, axis-aligned
boxes of feature space in which every individual is fixed, or proves that the
population region holds none, which certifies recourse for everyone in it,
including out-of-sample individuals.

The mixed-integer quadratically constrained program (population mode)
---------------------------------------------------------------------
For a box ``[l, u]`` the joint system in ``(x, a)``, written ``G x + H a <= g(l, u)``,
holds the box rows ``x <= u``, ``-x <= -l``, the action bounds, the feasible-outcome
rows ``lb <= x + a <= ub``, the action set's joint constraints, and a last row
``-w^T (x + a) <= b`` (the action reaches a non-negative score). By Farkas' lemma
and LP duality, a multiplier ``y >= 0`` with ``G^T y = 0``, ``H^T y = 0``,
``y_last = 1`` and ``g(l, u)^T y <= 0`` certifies ``max w^T (x + a) + b <= 0`` over
the box and the feasible actions. ``g(l, u)^T y`` holds the bilinear terms
``y_(u_j) u_j - y_(l_j) l_j``; maximising the normalised width
``sum_j (u_j - l_j) / (PU_j - PL_j + 1)`` under these constraints, the valid
inequality ``sum_j max(w_j, 0) u_j + min(w_j, 0) l_j <= -b`` and a witness point
in the box, is the MIQCP solved here with SCIP (through PySCIPOpt), which handles
the non-convex bilinear constraint by spatial branch and bound. Disjoint further
boxes come from re-solving with big-M disjunctions; an infeasible first solve
certifies recourse.

References
----------
.. [1] Lawless, C., Weng, T., Ustun, B., Udell, M. "Understanding Fixed Predictions
   via Confined Regions". Proceedings of the 42nd International Conference on
   Machine Learning (ICML 2025), PMLR 267:32649-32674.
.. [2] Kothari, A., Ustun, B., et al. "Prediction without Preclusion: Recourse
   Verification with Reachable Sets". ICLR 2024 (pointwise verification).

Implementation: ``_rec_inputs`` (model and input checks), ``_rec_pointwise`` (the
pointwise baseline), ``_rec_regions`` (the results), ``_rec_solvers`` (the MILP, the
MIQCP and the LP re-check) and ``_rec_finder`` (:class:`ConfinedRegionFinder`).
"""

from trustlab.explain._rec_finder import ConfinedRegionFinder
from trustlab.explain._rec_inputs import linear_model_params as linear_model_params  # importable, as before
from trustlab.explain._rec_pointwise import has_recourse, max_reachable_score
from trustlab.explain._rec_regions import Box, ConfinedRegions
from trustlab.explain.recourse_actions import ActionSet, DirectionalLinkage, OneHot, Thermometer

__all__ = [
    "ActionSet",
    "Box",
    "ConfinedRegionFinder",
    "ConfinedRegions",
    "DirectionalLinkage",
    "OneHot",
    "Thermometer",
    "has_recourse",
    "max_reachable_score",
]
