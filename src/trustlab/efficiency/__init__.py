"""Model compression that keeps accuracy: quantization-aware training (QuEST) and pruning (SAFE, SAFE+).

Methods take any ``torch.nn.Module`` (image classifiers from :mod:`trustlab.vision` in the
tests and docs). Needs torch (``pip install trustlab[torch]``); importing :mod:`trustlab`
does not import this package. See docs/efficiency/.
"""

from __future__ import annotations

from trustlab.efficiency._quantizers import gaussian_mse_scale, hadamard_matrix
from trustlab.efficiency.quest import METHODS, QuantizationAwareTraining, gradient_alignment, quantize_model
from trustlab.efficiency.safe import (
    OPTIMIZERS,
    PROJECTIONS,
    PRUNING_METHODS,
    SAFEPruning,
    prunable_weights,
    sharpness,
    sparsity_of,
)

__all__ = [
    "METHODS",
    "OPTIMIZERS",
    "PROJECTIONS",
    "PRUNING_METHODS",
    "QuantizationAwareTraining",
    "SAFEPruning",
    "gaussian_mse_scale",
    "gradient_alignment",
    "hadamard_matrix",
    "prunable_weights",
    "quantize_model",
    "sharpness",
    "sparsity_of",
]
