"""Unlearning and memory: a kNN memory with exact removal, certified and source-free unlearning."""

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
from trustlab.unlearning.source_free import (
    SourceFreeReport,
    SourceFreeUnlearner,
    SyntheticSamples,
    conflict_averse_direction,
    synthesize,
)

__all__: list[str] = [
    "KNNMemory",
    "MemoryExplanation",
    "MemoryNeighbour",
    "NoisyFinetuneUnlearner",
    "PruneResult",
    "SourceFreeReport",
    "SourceFreeUnlearner",
    "SyntheticSamples",
    "UnlearningComparison",
    "certificate_epsilon",
    "compare_to_retraining",
    "conflict_averse_direction",
    "distance_vote",
    "membership_advantage",
    "plurality_vote",
    "rank_vote",
    "softmax_vote",
    "synthesize",
]
