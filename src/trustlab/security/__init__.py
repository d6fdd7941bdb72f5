"""Security and robustness of models: out-of-distribution detection, label-flip robustness, backdoors.

torch is imported inside the methods that need it: ``import trustlab.security`` stays light.
See ``docs/security/`` for one page per method.
"""

from trustlab.security.ood import (
    EnergyDetector,
    GAIADetector,
    MSPDetector,
    OODMetrics,
    SplitIntegrateDetector,
    fpr_at_tpr,
    ood_metrics,
)
from trustlab.security.robustness import (
    FlipResult,
    KNNShiftDetector,
    TabularOODResult,
    prediction_flips,
    tabular_ood_scores,
)

__all__: list[str] = [
    "EnergyDetector",
    "FlipResult",
    "GAIADetector",
    "KNNShiftDetector",
    "MSPDetector",
    "OODMetrics",
    "SplitIntegrateDetector",
    "TabularOODResult",
    "fpr_at_tpr",
    "ood_metrics",
    "prediction_flips",
    "tabular_ood_scores",
]
