"""BRACE backtracking counterfactual explanations, with Wachter, deep-backtracking and recourse baselines.

Given a classifier ``h``, an instance ``x`` and a structural causal model (SCM,
:mod:`trustlab.explain.scm`) with noise ``u = F^{-1}(x)``, BRACE (Fatemi,
Sharifian, Yassaee, ICML 2025) returns the counterfactual

    x_cf = F(u_cf),  u_cf = argmin_{u'} d_X(x, F(u')) + lam * d_U(u, u')  s.t.  h(F(u')) = target,

with ``d_X`` the l1 distance and ``d_U`` the l2 distance, both over the mutable
features and divided by per-feature scales (the features' standard deviations by
default). Immutable features are held at their factual values. ``lam = 0`` is
Wachter's counterfactual (causal structure ignored), ``lam -> inf`` is deep
backtracking (Kladny et al., 2024), and interventional causal recourse (Karimi et
al., 2021; :func:`causal_recourse`) is one backtracking solution (Theorem 5.1) that
BRACE dominates for a suitable ``lam`` (Theorem 6.1).

Solvers
-------
``"exact"``
    :class:`~trustlab.explain.scm.LinearSCM` and a linear classifier (scikit-learn
    ``LinearClassifierMixin``: ``LogisticRegression``, ``LinearSVC``,
    ``SGDClassifier``, ``RidgeClassifier``, ``Perceptron``; optionally in a
    ``Pipeline`` after ``StandardScaler``). The problem is a convex program with
    one half-space constraint, solved in closed form for ``lam = 0`` and
    ``lam = inf`` and, in between, by SLSQP followed by an exact KKT polish on the
    active face (the returned ``status`` is ``"optimal"`` when the KKT conditions
    hold to 1e-9).
``"penalty"``
    The paper's method for differentiable models: Adam on
    ``d_X + lam d_U + beta * cross-entropy`` with ``beta = 1, 10, 100, ...`` (at most 8
    rounds of 500 steps) until a valid iterate appears, for a LinearSCM and a linear
    classifier or a binary ``MLPClassifier`` (optionally after ``StandardScaler``).
    Approximate; used only when asked for.
``"search"``
    Any binary classifier with ``predict`` and any fitted SCM: growing spheres
    in the scaled noise space, then line search towards the factual,
    sparsification and a shrinking local search, under a per-row ``time_limit``
    (default 10 s) that returns the best counterfactual found so far. Approximate.

Bounds
------
Every method takes ``bounds={"age": (18, 75), "loan": (None, 20000)}``: per-feature
box constraints ``low <= x_cf_j <= high`` (None leaves a side open) that the
counterfactual must satisfy. The exact solver stays exact (an LP for ``lam = 0``;
otherwise SLSQP with the box, then the stationarity equations solved on the optimal
face and the KKT conditions checked), the penalty solver projects its steps onto the
box and the search rejects points outside it. When no point in the box reaches the
target (proved by the exact solver, or an immutable feature lies outside its bounds)
the result has ``status="infeasible"`` and ``valid=False``; a search that finds
nothing inside the box reports ``status="not_found"``.

Implementation
--------------
The public functions live in private modules, one per responsibility:
``_cf_problem`` (input checks, bounds, distances, the result builder), ``_cf_model``
(the classifier in the SCM's column order, its linear or MLP form), ``_cf_exact``,
``_cf_penalty`` and ``_cf_search`` (the three solvers), ``_cf_brace`` (BRACE and its
special cases), ``_cf_causal`` (causal recourse) and ``_cf_metrics``.
"""

from trustlab.explain._cf_brace import brace, brace_path, counterfactuals, deep_backtracking, wachter
from trustlab.explain._cf_causal import causal_recourse
from trustlab.explain._cf_metrics import counterfactual_metrics
from trustlab.explain._cf_result import CounterfactualResult

__all__ = [
    "CounterfactualResult",
    "brace",
    "brace_path",
    "causal_recourse",
    "counterfactual_metrics",
    "counterfactuals",
    "deep_backtracking",
    "wachter",
]
