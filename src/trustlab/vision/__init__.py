"""The vision lab: small image classifiers and a tiny DDPM on data that ships, training loops, checks.

Needs torch (``pip install trustlab[torch]``). Importing :mod:`trustlab` does not import
this package. Methods that work on image models live in their pillar (compression in
:mod:`trustlab.efficiency`) and take any ``torch.nn.Module``; this package holds only the
substrate that their tests, docs and benchmarks train on. See docs/vision-lab.md.
"""

from __future__ import annotations

from trustlab.vision.bridge import I2SBSchedule, bridge_sample, train_bridge
from trustlab.vision.classifiers import (
    KINDS,
    accuracy,
    check_images,
    check_labels,
    digits_split,
    make_classifier,
    one_thread,
    predict,
    require_torch,
    torch_generator,
    train_classifier,
)
from trustlab.vision.diffusion import DDPMSchedule, ddim_sample, make_unet, train_ddpm
from trustlab.vision.diffusion_conditional import (
    ConditionalDDPMRecipe,
    digits_conditional_ddpm,
    make_conditional_unet,
    train_conditional_ddpm,
)
from trustlab.vision.diffusion_digits import (
    DigitsDDPMRecipe,
    digits_ddpm_pair,
    digits_finetune_images,
    train_digits_ddpm_pair,
)
from trustlab.vision.diffusion_lora import (
    LoRARecipe,
    add_lora,
    digits_conditional_lora_ddpm_pair,
    digits_lora_ddpm_pair,
    lora_parameters,
    merge_lora,
    train_lora_ddpm,
)
from trustlab.vision.infocons import InfoCons
from trustlab.vision.point_attribution import (
    SubsetFaithfulness,
    critical_point_scores,
    find_point_layer,
    part_precision,
    pcsam_scores,
    subset_faithfulness,
    top_k_points,
)
from trustlab.vision.pointclouds import (
    BODIES,
    PARTS,
    check_point_clouds,
    make_pointnet,
    make_shape_clouds,
    point_cloud_logits,
    shape_pointnet,
    train_point_classifier,
    train_shape_pointnet,
)

__all__ = [
    "BODIES",
    "KINDS",
    "PARTS",
    "ConditionalDDPMRecipe",
    "DDPMSchedule",
    "DigitsDDPMRecipe",
    "I2SBSchedule",
    "InfoCons",
    "LoRARecipe",
    "SubsetFaithfulness",
    "accuracy",
    "add_lora",
    "bridge_sample",
    "check_images",
    "check_labels",
    "check_point_clouds",
    "critical_point_scores",
    "ddim_sample",
    "digits_conditional_ddpm",
    "digits_conditional_lora_ddpm_pair",
    "digits_ddpm_pair",
    "digits_finetune_images",
    "digits_lora_ddpm_pair",
    "digits_split",
    "find_point_layer",
    "lora_parameters",
    "make_classifier",
    "make_conditional_unet",
    "make_pointnet",
    "make_shape_clouds",
    "make_unet",
    "merge_lora",
    "one_thread",
    "part_precision",
    "pcsam_scores",
    "point_cloud_logits",
    "predict",
    "require_torch",
    "shape_pointnet",
    "subset_faithfulness",
    "top_k_points",
    "torch_generator",
    "train_bridge",
    "train_classifier",
    "train_conditional_ddpm",
    "train_ddpm",
    "train_digits_ddpm_pair",
    "train_lora_ddpm",
    "train_point_classifier",
    "train_shape_pointnet",
]
