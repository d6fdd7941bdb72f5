"""The vision lab: small image classifiers on data that ships, one training loop, input checks.

Needs torch (``pip install trustlab[torch]``). Importing :mod:`trustlab` does not import
this package. Methods that work on image models live in their pillar (compression in
:mod:`trustlab.efficiency`) and take any ``torch.nn.Module``; this package holds only the
substrate that their tests, docs and benchmarks train on. See docs/vision-lab.md.
"""

from __future__ import annotations

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

__all__ = [
    "KINDS",
    "accuracy",
    "check_images",
    "check_labels",
    "digits_split",
    "make_classifier",
    "one_thread",
    "predict",
    "require_torch",
    "torch_generator",
    "train_classifier",
]
