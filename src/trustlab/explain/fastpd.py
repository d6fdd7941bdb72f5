r"""FastPD: partial dependence, interventional SHAP and the functional decomposition of trees.

The estimator follows Liu et al. (ICML 2025). Partial dependence is linear in the
model, so for one tree

    v_S(x) = sum over leaves l of c_l * 1[x satisfies l on S ∩ T_l] * p_l(S ∩ T_l),

where ``T_l`` are the distinct features on the path to leaf ``l`` and ``p_l(K)`` is
the share of background rows that satisfy the path's constraints on ``T_l \ K``.
Each leaf is therefore a small cooperative game on its own ``|T_l| <= depth``
features, and everything FastPD returns (PD functions, the components of the
functional decomposition, interventional SHAP values) is a sum over leaves of a
quantity of that leaf game.

Implementation (vectorised NumPy, linear in the number of background and query rows):

1. *Augmentation* (``fit``, once per background). For every leaf, each background
   row gets a ``|T_l|``-bit code saying on which of the leaf's features it satisfies
   the path's interval; a histogram of codes followed by a superset-sum (zeta)
   transform gives ``p_l(K)`` for all ``2^|T_l|`` subsets ``K``. This is the same
   table the paper's recursive augmentation builds, computed in ``O(n_b * |T_l|)``
   per leaf plus ``O(|T_l| 2^|T_l|)``.
2. *Explanation*. A query row enters a leaf game only through its own code on
   the leaf's features, so per leaf a table indexed by code holds the leaf's
   Shapley values (computed in ``fit`` with subset-sum transforms) or Moebius
   coefficients (the components); a query gathers its row of the table.

References
----------
.. [1] Liu, J., Steensgaard, T., Wright, M. N., Pfister, N., Hiabu, M. "Fast
   Estimation of Partial Dependence Functions using Trees". Proceedings of the
   42nd International Conference on Machine Learning (ICML 2025), PMLR 267.
.. [2] Hiabu, M., Meyer, J. T., Wright, M. N. "Unifying local and global model
   explanations by functional decomposition of low dimensional structures".
   AISTATS 2023 (the decomposition and the R package ``glex``).
.. [3] Molnar, C., Casalicchio, G., Bischl, B. "Quantifying Model Complexity via
   Functional Decomposition for Better Post-hoc Interpretability". ECML-PKDD
   workshops 2019 (the interaction strength).

Implementation: ``_fastpd`` (the estimator), ``_fastpd_leaves`` (leaves, binning,
the per-leaf tables and their sums), ``_fastpd_inputs`` (DataFrames and string
categories) and ``_pd_display`` (drawing, apart from the computations).
"""

from trustlab.explain._fastpd import FastPD
from trustlab.explain._pd_display import PDCurveDisplay

__all__ = ["FastPD", "PDCurveDisplay"]
