"""Explanations: FastPD, LIME and verifiable LIME, BRACE counterfactuals, confined regions.

See ``docs/explain/`` for one page per method. The zero-knowledge backend
(``zk_*``) imports ezkl, onnx and torch only when called (``pip install "trustlab[zk]"``).
"""

from trustlab.explain._linear import coef_intercept
from trustlab.explain._trees import (
    TreeArrays,
    TreeEnsemble,
    ensemble_from_model,
    trees_from_lightgbm,
    trees_from_sklearn,
    trees_from_xgboost,
)
from trustlab.explain.counterfactual import (
    CounterfactualResult,
    brace,
    brace_path,
    causal_recourse,
    counterfactual_metrics,
    counterfactuals,
    deep_backtracking,
    wachter,
)
from trustlab.explain.fastpd import FastPD, PDCurveDisplay
from trustlab.explain.feature_partition import FeaturePartition, make_manifold_blocks
from trustlab.explain.graph_contrastive import (
    ClusterQuality,
    FuzzyBoundaryGCL,
    cluster_quality,
    load_karate_communities,
    make_community_graph,
)
from trustlab.explain.graph_counterfactual import (
    GIST,
    GraphCounterfactuals,
    GraphGINClassifier,
    forward_perturbation,
    make_house_graphs,
    make_motif_graphs,
    spectral_distance,
)
from trustlab.explain.hierarchy import (
    LogitsHierarchy,
    dendrogram_purity,
    lca_f1,
    leaf_purity,
    logits_to_hierarchy,
    merges_to_linkage,
)
from trustlab.explain.lime import LimeExplanation, LimeStability, LimeTabular
from trustlab.explain.recourse import (
    Box,
    ConfinedRegionFinder,
    ConfinedRegions,
    has_recourse,
    max_reachable_score,
)
from trustlab.explain.recourse_actions import ActionSet, DirectionalLinkage, OneHot, Thermometer
from trustlab.explain.recourse_audit import (
    RawLinearModel,
    RecourseCheck,
    default_action_set,
    linearize,
    recourse_check,
)
from trustlab.explain.scm import AdditiveNoiseSCM, LinearSCM
from trustlab.explain.topics import AnchoredCorpus, ExemplarLDA, make_anchored_lda_corpus
from trustlab.explain.verifiable import (
    AmenableLime,
    ExplanationProof,
    LimeCertificate,
    VerifiableExplanation,
    VerificationReport,
    check_certificate,
    commit_model,
    derive_seed,
    find_border_point,
    prove_explanation,
    verify_explanation,
)
from trustlab.explain.verifiable_zk import (
    ZKExplanationProof,
    ZKPublic,
    ZKSetup,
    zk_prove_explanation,
    zk_setup,
    zk_verify_explanation,
)

__all__ = [
    "GIST",
    "ActionSet",
    "AdditiveNoiseSCM",
    "AmenableLime",
    "AnchoredCorpus",
    "Box",
    "ClusterQuality",
    "ConfinedRegionFinder",
    "ConfinedRegions",
    "CounterfactualResult",
    "DirectionalLinkage",
    "ExemplarLDA",
    "ExplanationProof",
    "FastPD",
    "FeaturePartition",
    "FuzzyBoundaryGCL",
    "GraphCounterfactuals",
    "GraphGINClassifier",
    "LimeCertificate",
    "LimeExplanation",
    "LimeStability",
    "LimeTabular",
    "LinearSCM",
    "LogitsHierarchy",
    "OneHot",
    "PDCurveDisplay",
    "RawLinearModel",
    "RecourseCheck",
    "Thermometer",
    "TreeArrays",
    "TreeEnsemble",
    "VerifiableExplanation",
    "VerificationReport",
    "ZKExplanationProof",
    "ZKPublic",
    "ZKSetup",
    "brace",
    "brace_path",
    "causal_recourse",
    "check_certificate",
    "cluster_quality",
    "coef_intercept",
    "commit_model",
    "counterfactual_metrics",
    "counterfactuals",
    "deep_backtracking",
    "default_action_set",
    "dendrogram_purity",
    "derive_seed",
    "ensemble_from_model",
    "find_border_point",
    "forward_perturbation",
    "has_recourse",
    "lca_f1",
    "leaf_purity",
    "linearize",
    "load_karate_communities",
    "logits_to_hierarchy",
    "make_anchored_lda_corpus",
    "make_community_graph",
    "make_house_graphs",
    "make_manifold_blocks",
    "make_motif_graphs",
    "max_reachable_score",
    "merges_to_linkage",
    "prove_explanation",
    "recourse_check",
    "spectral_distance",
    "trees_from_lightgbm",
    "trees_from_sklearn",
    "trees_from_xgboost",
    "verify_explanation",
    "wachter",
    "zk_prove_explanation",
    "zk_setup",
    "zk_verify_explanation",
]
