"""Unlearning and memory: a kNN memory with exact removal, certified unlearning by noisy fine-tuning."""

from trustlab.unlearning.certified import (
    NoisyFinetuneUnlearner,
    UnlearningComparison,
    certificate_epsilon,
    compare_to_retraining,
    membership_advantage,
)
from trustlab.unlearning.memory import (
    KNNMemory,
    MemoryExplanation,
    MemoryNeighbour,
    PruneResult,
    distance_vote,
    plurality_vote,
    rank_vote,
    softmax_vote,
)

__all__: list[str] = [
    "KNNMemory",
    "MemoryExplanation",
    "MemoryNeighbour",
    "NoisyFinetuneUnlearner",
    "PruneResult",
    "UnlearningComparison",
    "certificate_epsilon",
    "compare_to_retraining",
    "distance_vote",
    "membership_advantage",
    "plurality_vote",
    "rank_vote",
    "softmax_vote",
]
