"""Model compression that keeps accuracy: quantization-aware training (QuEST), pruning (SAFE, SAFE+).

SAFE/SAFE+ also prune a causal LM block by block after training (:mod:`.safe_llm`); QuEST
pre-trains the lab's language models with quantized linear layers (:mod:`.quest_lm`).

Methods take any ``torch.nn.Module`` (image classifiers from :mod:`trustlab.vision` in the
tests and docs). Needs torch (``pip install trustlab[torch]``); importing :mod:`trustlab`
does not import this package. See docs/efficiency/.
"""

from __future__ import annotations

from trustlab.efficiency._quantizers import gaussian_mse_scale, hadamard_matrix
from trustlab.efficiency.quest import METHODS, QuantizationAwareTraining, gradient_alignment, quantize_model
from trustlab.efficiency.quest_lm import FULL_PRECISION, QuantizedLMComparison, quest_lm_comparison
from trustlab.efficiency.safe import (
    OPTIMIZERS,
    PROJECTIONS,
    PRUNING_METHODS,
    SAFEPruning,
    prunable_weights,
    sharpness,
    sparsity_of,
)
from trustlab.efficiency.safe_llm import LLM_PRUNING_METHODS, decoder_layers, lm_perplexity, prune_causal_lm

__all__ = [
    "FULL_PRECISION",
    "LLM_PRUNING_METHODS",
    "METHODS",
    "OPTIMIZERS",
    "PROJECTIONS",
    "PRUNING_METHODS",
    "QuantizationAwareTraining",
    "QuantizedLMComparison",
    "SAFEPruning",
    "decoder_layers",
    "gaussian_mse_scale",
    "gradient_alignment",
    "hadamard_matrix",
    "lm_perplexity",
    "prunable_weights",
    "prune_causal_lm",
    "quantize_model",
    "quest_lm_comparison",
    "sharpness",
    "sparsity_of",
]
