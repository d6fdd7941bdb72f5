"""Differential privacy and related guarantees for trustworthy data analysis.

Releases, accounting, safe samplers, DP statistics, quantiles, boxplots, private
bounds, label DP, data-specific indistinguishability and linear-transformation
sketches.

See ``docs/privacy/`` for one page per method.
"""

from trustlab.privacy.accounting import COMPOSITIONS, Accountant, LedgerEntry
from trustlab.privacy.amplification import (
    AmplificationResult,
    BISAccountant,
    ModelSplitAccountant,
    PoissonAccountant,
    PoissonComparison,
    amplified_epsilon,
    bis_schedule,
    compare_to_poisson,
    poisson_schedule,
)
from trustlab.privacy.audit import AuditResult, audit_epsilon, clopper_pearson
from trustlab.privacy.bounds import dp_bounds
from trustlab.privacy.boxplot import (
    BoxplotStats,
    GroupedBoxplots,
    boxplot_distance,
    dp_boxplot_stats,
    grouped_dp_boxplot,
)
from trustlab.privacy.boxplot_plot import plot_dp_boxplot
from trustlab.privacy.calibration import analytic_gaussian_epsilon, analytic_gaussian_sigma
from trustlab.privacy.dsi import (
    DSIAccountant,
    DSINoise,
    dsi_gaussian_covariance,
    dsi_release,
    leave_one_group_out_differences,
)
from trustlab.privacy.finextract import (
    ClusterResult,
    ExtractionScore,
    FineXtractResult,
    cluster_generations,
    extraction_score,
    finextract,
    guided_eps,
    model_guided_sample,
)
from trustlab.privacy.label_dp import (
    LabelDPBinaryRegression,
    PrivatizedLabels,
    RandomizedResponseLabelDP,
    rr_fisher_trace,
    rr_hockey_stick,
    rr_is_feasible,
    rr_vertices,
)
from trustlab.privacy.linear_sketch import (
    LTMLowRank,
    LTMRidge,
    additive_shares,
    central_mod_sulq,
    central_ssp_ridge,
    local_variant,
    low_rank_excess,
    ltm_release,
    make_sketch,
    reconstruct,
    ridge_cost_ratio,
)
from trustlab.privacy.quantiles import DEFAULT_RESOLUTION, dp_quantile, dp_quantiles, unbounded_quantile
from trustlab.privacy.release import PrivacyMeasure, Release
from trustlab.privacy.samplers import (
    add_discrete_gaussian,
    add_discrete_laplace,
    add_gaussian,
    add_laplace,
    bernoulli,
    discrete_gaussian,
    discrete_laplace,
    exponential_select,
    gaussian,
    laplace,
    uniform_int,
)
from trustlab.privacy.signsgd import (
    SignMechanismAccountant,
    debiased_sign_mean,
    matched_logistic_scale,
    scalar_sign_rdp,
    sign_compress,
)
from trustlab.privacy.sketches import (
    AttackResult,
    BottomKSketch,
    ParticipationExceededError,
    RobustCardinalityEstimator,
    attack_standard_estimator,
    standard_estimate,
)
from trustlab.privacy.statistics import dp_count, dp_histogram, dp_mean, dp_sum, dp_sum_of_units
from trustlab.privacy.training import DPSGDClassifier

__all__ = [
    "COMPOSITIONS",
    "DEFAULT_RESOLUTION",
    "Accountant",
    "AmplificationResult",
    "AttackResult",
    "AuditResult",
    "BISAccountant",
    "BottomKSketch",
    "BoxplotStats",
    "ClusterResult",
    "DPSGDClassifier",
    "DSIAccountant",
    "DSINoise",
    "ExtractionScore",
    "FineXtractResult",
    "GroupedBoxplots",
    "LTMLowRank",
    "LTMRidge",
    "LabelDPBinaryRegression",
    "LedgerEntry",
    "ModelSplitAccountant",
    "ParticipationExceededError",
    "PoissonAccountant",
    "PoissonComparison",
    "PrivacyMeasure",
    "PrivatizedLabels",
    "RandomizedResponseLabelDP",
    "Release",
    "RobustCardinalityEstimator",
    "SignMechanismAccountant",
    "add_discrete_gaussian",
    "add_discrete_laplace",
    "add_gaussian",
    "add_laplace",
    "additive_shares",
    "amplified_epsilon",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "attack_standard_estimator",
    "audit_epsilon",
    "bernoulli",
    "bis_schedule",
    "boxplot_distance",
    "central_mod_sulq",
    "central_ssp_ridge",
    "clopper_pearson",
    "cluster_generations",
    "compare_to_poisson",
    "debiased_sign_mean",
    "discrete_gaussian",
    "discrete_laplace",
    "dp_bounds",
    "dp_boxplot_stats",
    "dp_count",
    "dp_histogram",
    "dp_mean",
    "dp_quantile",
    "dp_quantiles",
    "dp_sum",
    "dp_sum_of_units",
    "dsi_gaussian_covariance",
    "dsi_release",
    "exponential_select",
    "extraction_score",
    "finextract",
    "gaussian",
    "grouped_dp_boxplot",
    "guided_eps",
    "laplace",
    "leave_one_group_out_differences",
    "local_variant",
    "low_rank_excess",
    "ltm_release",
    "make_sketch",
    "matched_logistic_scale",
    "model_guided_sample",
    "plot_dp_boxplot",
    "poisson_schedule",
    "reconstruct",
    "ridge_cost_ratio",
    "rr_fisher_trace",
    "rr_hockey_stick",
    "rr_is_feasible",
    "rr_vertices",
    "scalar_sign_rdp",
    "sign_compress",
    "standard_estimate",
    "unbounded_quantile",
    "uniform_int",
]
