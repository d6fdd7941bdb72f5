"""trustlab.evaluation: model-similarity (CAPA, error consistency) and ranking-based harm metrics."""

from trustlab.evaluation.ranking import (
    HarmRanking,
    RankingScores,
    elo_scores,
    harm_ranking,
    hodgerank_scores,
    rank_centrality_scores,
)
from trustlab.evaluation.similarity import capa, capa_matrix, error_consistency

__all__: list[str] = [
    "HarmRanking",
    "RankingScores",
    "capa",
    "capa_matrix",
    "elo_scores",
    "error_consistency",
    "harm_ranking",
    "hodgerank_scores",
    "rank_centrality_scores",
]
