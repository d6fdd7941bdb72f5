"""Security and robustness of models: OOD detection, label-flip robustness, backdoors, safe decoding.

torch is imported inside the methods that need it: ``import trustlab.security`` stays light.
See ``docs/security/`` for one page per method.
"""

from trustlab.security.adversarial import (
    AdversarialTrainingResult,
    CrossClassAttribution,
    adversarial_train,
    cross_class_attribution,
    pgd_attack,
)
from trustlab.security.backdoor import (
    PoisonedData,
    TSCResult,
    add_trigger,
    attack_success_rate,
    badnets_poison,
    tsc_purify,
)
from trustlab.security.backdoor_complications import (
    BackdoorInjection,
    ComplicationReport,
    LMSequenceClassifier,
    complication_divergence,
    complication_report,
    inject_backdoor,
    insert_trigger,
    trigger_success_rate,
)
from trustlab.security.mixbridge import (
    BridgeBackdoorReport,
    MixBridge,
    PoisonedPairs,
    evaluate_bridge_backdoor,
    merge_bridges,
    poison_pairs,
    poison_rate_pairs,
    stamp_trigger,
    train_router,
)
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
from trustlab.security.safety_decoding import (
    SafeGeneration,
    SafetyHead,
    safe_generate,
    safety_logits_processor,
)
from trustlab.security.safety_joint import JointFinetune, joint_safety_finetune
from trustlab.security.steering_transfer import (
    ActivationMapper,
    MappingQuality,
    activation_switch,
    steer,
    steering_vector,
)

__all__: list[str] = [
    "ActivationMapper",
    "AdversarialTrainingResult",
    "BackdoorInjection",
    "ComplicationReport",
    "CrossClassAttribution",
    "EnergyDetector",
    "FlipResult",
    "GAIADetector",
    "JointFinetune",
    "KNNShiftDetector",
    "LMSequenceClassifier",
    "MSPDetector",
    "MappingQuality",
    "OODMetrics",
    "PoisonedData",
    "SafeGeneration",
    "SafetyHead",
    "SplitIntegrateDetector",
    "TSCResult",
    "TabularOODResult",
    "activation_switch",
    "add_trigger",
    "adversarial_train",
    "attack_success_rate",
    "badnets_poison",
    "complication_divergence",
    "complication_report",
    "cross_class_attribution",
    "fpr_at_tpr",
    "inject_backdoor",
    "insert_trigger",
    "joint_safety_finetune",
    "ood_metrics",
    "pgd_attack",
    "prediction_flips",
    "safe_generate",
    "safety_logits_processor",
    "steer",
    "steering_vector",
    "tabular_ood_scores",
    "trigger_success_rate",
    "tsc_purify",
]

# MixBridge (row 004-16): heterogeneous backdoors in image-to-image bridges
__all__ += [
    "BridgeBackdoorReport",
    "MixBridge",
    "PoisonedPairs",
    "evaluate_bridge_backdoor",
    "merge_bridges",
    "poison_pairs",
    "poison_rate_pairs",
    "stamp_trigger",
    "train_router",
]
