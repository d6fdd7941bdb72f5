"""trustlab.evaluation: model similarity (CAPA, error consistency), ranking-based harm, train-test overlap."""

from trustlab.evaluation.contamination import ContaminationSimulation, simulate_contamination
from trustlab.evaluation.overlap import OverlapReport, train_test_overlap
from trustlab.evaluation.ranking import (
    HarmRanking,
    RankingScores,
    elo_scores,
    harm_ranking,
    hodgerank_scores,
    rank_centrality_scores,
)
from trustlab.evaluation.similarity import capa, capa_matrix, error_consistency
from trustlab.evaluation.substring_overlap import SubstringOverlapReport, exact_substring_overlap

__all__: list[str] = [
    "ContaminationSimulation",
    "HarmRanking",
    "OverlapReport",
    "RankingScores",
    "SubstringOverlapReport",
    "capa",
    "capa_matrix",
    "elo_scores",
    "error_consistency",
    "exact_substring_overlap",
    "harm_ranking",
    "hodgerank_scores",
    "rank_centrality_scores",
    "simulate_contamination",
    "train_test_overlap",
]
