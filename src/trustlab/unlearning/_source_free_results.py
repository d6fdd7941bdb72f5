"""Result records of source-free unlearning: the synthetic samples and the unlearning report."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SourceFreeReport", "SyntheticSamples"]


@dataclass(frozen=True)
class SyntheticSamples:
    """Inputs synthesised from a classifier by :func:`synthesize`.

    Attributes
    ----------
    X : numpy.ndarray
        The kept samples, shape ``(n, *input_shape)``, inside ``input_range``.
    y : numpy.ndarray
        The class each sample was drawn for.
    generated : dict of int to int
        Samples drawn per class.
    kept : dict of int to int
        Samples kept per class (``keep="argmax"``: those the model assigns to their class).
    hit_rate : dict of int to float
        Fraction of the drawn samples of each class that the model assigns to it.
    energy_trace : tuple of float
        Mean energy of all chains before each step and after the last.
    score_evals : int
        Per-sample evaluations of the score ``-grad_x E`` (Heun: two per step).

    See Also
    --------
    synthesize : Builds it.
    """

    X: np.ndarray
    y: np.ndarray
    generated: dict[int, int]
    kept: dict[int, int]
    hit_rate: dict[int, float]
    energy_trace: tuple[float, ...]
    score_evals: int


@dataclass(frozen=True)
class SourceFreeReport:
    """What :class:`SourceFreeUnlearner` did: the synthesis, then the fine-tuning.

    Attributes
    ----------
    forget_classes : tuple of int
        The classes unlearned.
    retain_classes : tuple of int
        The other classes.
    synthesis : SyntheticSamples
        The synthetic retain and forget sets (the only data the fine-tuning saw).
    synthesis_steps : int
        Langevin steps per chain.
    objective_history : dict of str to tuple of float
        Per-epoch mean of ``"retain"``, ``"forget"``, ``"disc"`` (0 when not used) and the
        weighted ``"total"``.
    optimizer_steps : int
        Fine-tuning updates taken.
    used_disc : bool
        Whether the discriminative feature alignment was part of the objective.

    See Also
    --------
    SourceFreeUnlearner : Builds it.
    """

    forget_classes: tuple[int, ...]
    retain_classes: tuple[int, ...]
    synthesis: SyntheticSamples
    synthesis_steps: int
    objective_history: dict[str, tuple[float, ...]]
    optimizer_steps: int
    used_disc: bool
