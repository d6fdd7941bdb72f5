"""The public names of trustlab.explain (the compatibility contract of its module split).

Their numpydoc sections are checked with every other package's in tests/test_docstrings.py.
"""

from __future__ import annotations

import trustlab.explain as explain


def test_public_names_are_exactly_the_documented_set() -> None:
    """The package's public names (the lead's compatibility contract for this refactor)."""
    assert sorted(explain.__all__) == sorted(
        [
            "ActionSet", "AdditiveNoiseSCM", "AmenableLime", "AnchoredCorpus", "Box",
            "ConfinedRegionFinder", "ConfinedRegions", "CounterfactualResult", "DirectionalLinkage",
            "ExemplarLDA", "ExplanationProof", "FastPD", "FeaturePartition", "LimeCertificate",
            "LimeExplanation", "LimeStability", "LimeTabular",
            "LinearSCM", "LogitsHierarchy", "OneHot", "PDCurveDisplay", "RawLinearModel", "RecourseCheck",
            "Thermometer",
            "TreeArrays",
            "TreeEnsemble", "VerifiableExplanation", "VerificationReport", "ZKExplanationProof",
            "ZKPublic", "ZKSetup", "brace", "brace_path", "causal_recourse", "check_certificate",
            "coef_intercept",
            "commit_model", "counterfactual_metrics", "counterfactuals", "deep_backtracking",
            "default_action_set", "dendrogram_purity", "derive_seed", "ensemble_from_model",
            "find_border_point",
            "has_recourse", "lca_f1", "leaf_purity", "linearize", "logits_to_hierarchy",
            "make_anchored_lda_corpus", "make_manifold_blocks",
            "merges_to_linkage", "max_reachable_score", "prove_explanation", "recourse_check",
            "trees_from_lightgbm", "trees_from_sklearn", "trees_from_xgboost", "verify_explanation",
            "wachter", "zk_prove_explanation", "zk_setup", "zk_verify_explanation",
            "GIST", "GraphCounterfactuals", "GraphGINClassifier", "forward_perturbation", "make_house_graphs",
                "make_motif_graphs",
            "spectral_distance",
            "ClusterQuality", "FuzzyBoundaryGCL", "cluster_quality", "load_karate_communities",
            "make_community_graph",
        ]
    )  # fmt: skip
    for name in explain.__all__:
        assert getattr(explain, name).__module__.startswith("trustlab.explain")
