"""CPO loss, concept-noise injection and synthetic concept data for :mod:`trustlab.explain.cbm`.

Private module: the public names are re-exported by ``trustlab.explain.cbm`` (see its
docstring and docs/explain/cbm.md).

References
----------
.. [1] Penaloza, Zhang, Charlin, Espinosa Zarlenga. "Addressing Concept Mislabeling in Concept
   Bottleneck Models Through Preference Optimization". ICML 2025 (arXiv 2504.18026).
.. [2] Rafailov et al. "Direct Preference Optimization: Your Language Model is Secretly a Reward
   Model". NeurIPS 2023.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError

__all__ = ["PAIRS", "cpo_loss", "flip_concepts", "make_concept_data"]

PAIRS = ("model", "annotation")


# ---------------------------------------------------------------------------------------- losses
def cpo_loss(
    logits: torch.Tensor,
    concepts: torch.Tensor,
    *,
    beta: float = 1.0,
    pairs: str = "model",
    n_samples: int = 1,
    reference_logits: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Concept Preference Optimization loss of concept logits against annotated 0/1 concepts.

    Each concept of each row is a preference problem between its two values. A pair is drawn
    (``pairs="model"``: two values from the model's Bernoulli ``sigmoid(logits)``, the one equal
    to the annotation preferred; ``pairs="annotation"``: the annotation preferred over one value
    from the model). A pair of equal values carries no preference and adds 0; otherwise, with
    ``s = 2 c_w - 1`` for the preferred value ``c_w``, DPO's log-ratio difference is
    ``s * (logit - reference_logit)`` and the pair's loss ``softplus(-beta * s * (logit -
    reference_logit))``. The draws are not differentiated (DPO treats its pairs as data); the
    loss is averaged over ``n_samples`` draws, rows and concepts.

    With ``pairs="model"`` and ``beta = 1`` the expected gradient vanishes exactly when
    ``sigmoid(logit)`` equals the probability that the annotation is 1 (the posterior), and a
    concept the model is confident about (either way) is rarely drawn as a differing pair, so a
    mislabeled annotation of it pushes little. ``pairs="annotation"`` stops at
    ``logit(q) / (1 + beta)`` and pushes on such a concept as hard as BCE.

    Parameters
    ----------
    logits : torch.Tensor of shape (n, k)
        Concept logits ``g(x)`` (log-odds of each concept being present).
    concepts : torch.Tensor of shape (n, k)
        Annotated concepts in {0, 1} (possibly mislabeled).
    beta : float, default=1.0
        DPO's inverse temperature on the log-ratios.
    pairs : {"model", "annotation"}, default="model"
        Where the compared values come from (see above).
    n_samples : int, default=1
        Pairs drawn per concept and row.
    reference_logits : torch.Tensor broadcastable to (n, k), optional
        Log-odds of the reference ``pi_ref``; ``None`` is the uniform prior (log-odds 0).
    generator : torch.Generator, optional
        Drives the draws.

    Returns
    -------
    torch.Tensor
        Scalar loss.

    References
    ----------
    Penaloza et al., "Addressing Concept Mislabeling in Concept Bottleneck Models Through
    Preference Optimization", ICML 2025; Rafailov et al., "Direct Preference Optimization",
    NeurIPS 2023.

    Examples
    --------
    >>> import torch
    >>> z, c = torch.tensor([[4.0, -4.0]]), torch.tensor([[1.0, 1.0]])
    >>> g = torch.Generator().manual_seed(0)
    >>> round(float(cpo_loss(z, c, n_samples=4000, generator=g)), 2)  # confident: little pull
    0.08
    >>> round(float(cpo_loss(z, c, pairs="annotation", n_samples=4000, generator=g)), 2)
    1.98
    """
    if not isinstance(logits, torch.Tensor) or not isinstance(concepts, torch.Tensor):
        raise DataError("logits and concepts must be torch tensors of the same shape.", argument="logits")
    if logits.shape != concepts.shape:
        raise DataError(
            f"concepts must have the shape of logits {tuple(logits.shape)}; got {tuple(concepts.shape)}.",
            argument="concepts",
        )
    if not isinstance(beta, numbers.Real) or isinstance(beta, bool) or not beta > 0:
        raise ParameterError(f"beta must be a positive number; got {beta!r}.", argument="beta")
    if pairs not in PAIRS:
        raise ParameterError(f"pairs must be one of {PAIRS}; got {pairs!r}.", argument="pairs")
    if not isinstance(n_samples, numbers.Integral) or isinstance(n_samples, bool) or n_samples < 1:
        raise ParameterError(f"n_samples must be an integer >= 1; got {n_samples!r}.", argument="n_samples")
    c = concepts.to(logits.dtype)
    margin = (2 * c - 1) * (logits if reference_logits is None else logits - reference_logits)
    pair_loss = torch.nn.functional.softplus(-float(beta) * margin)
    with torch.no_grad():
        p = torch.sigmoid(logits)
        shape = (int(n_samples), *logits.shape)
        first = torch.rand(shape, generator=generator, dtype=logits.dtype) < p
        other = (
            c.bool()
            if pairs == "annotation"
            else torch.rand(shape, generator=generator, dtype=logits.dtype) < p
        )
        differs = (first != other).to(logits.dtype).mean(0)
    return (differs * pair_loss).mean()


def _concept_loss(est: Any, logits: torch.Tensor, concepts: torch.Tensor, gen: Any) -> torch.Tensor:
    if est.concept_loss == "bce":
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, concepts)
    return cpo_loss(logits, concepts, beta=est.beta, pairs=est.pairs, n_samples=est.n_samples, generator=gen)


# ---------------------------------------------------------------------------------------- data
@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_features": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_concepts": [Interval(numbers.Integral, 4, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_concept_data(
    n_samples: int = 1000, *, n_features: int = 16, n_concepts: int = 8, random_state: Any = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synthetic concept data: Gaussian inputs, threshold concepts, a task that is a rule on concepts.

    ``X ~ N(0, I_d)``; concept ``j`` is ``1[x . w_j > 0]`` with ``w_j ~ N(0, I_d / d)`` drawn once
    from ``random_state`` (so the concepts are exact functions of ``x``: any error in the
    annotations is label noise); the task has 4 classes, ``y = 2 c_0 + 1[c_1 + c_2 + c_3 >= 2]``
    (concepts ``4..k-1`` are present but irrelevant to the task).

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=16
    n_concepts : int, default=8
        At least 4.
    random_state : None, int or numpy Generator, default=0

    Returns
    -------
    X : ndarray of float32, shape (n_samples, n_features)
    C : ndarray of float32 in {0, 1}, shape (n_samples, n_concepts)
        The true concepts.
    y : ndarray of int64, shape (n_samples,)

    Examples
    --------
    >>> X, C, y = make_concept_data(5, random_state=0)
    >>> X.shape, C.shape, sorted(set(y) <= {0, 1, 2, 3} for _ in [0])
    ((5, 16), (5, 8), [True])
    """
    rng = make_generator(random_state)
    W = rng.normal(size=(n_features, n_concepts)) / np.sqrt(n_features)
    X = rng.normal(size=(n_samples, n_features))
    C = (X @ W > 0).astype(np.float32)
    y = (2 * C[:, 0] + (C[:, 1:4].sum(1) >= 2)).astype(np.int64)
    return X.astype(np.float32), C, y


@validate_params(
    {
        "rate": [Interval(numbers.Real, 0, 1, closed="both")],
        "random_state": ["random_state"],
    }
)
def flip_concepts(C: Any, rate: float, *, random_state: Any = None) -> np.ndarray:
    """Mislabel concept annotations: flip each 0/1 entry independently with probability ``rate``.

    The symmetric concept noise injected in the paper's robustness experiments.

    Parameters
    ----------
    C : array-like of shape (n, k)
        Concepts in {0, 1}.
    rate : float in [0, 1]
        Flip probability.
    random_state : None, int or numpy Generator

    Returns
    -------
    ndarray of float32, shape (n, k)

    Examples
    --------
    >>> flip_concepts([[0, 1], [1, 1]], 1.0).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    arr = _check_concepts(C, "C")
    flips = make_generator(random_state).random(arr.shape) < float(rate)
    return np.where(flips, 1 - arr, arr).astype(np.float32)


# ---------------------------------------------------------------------------------------- checks
def _check_inputs(X: Any, name: str = "X") -> np.ndarray:
    arr = check_numeric_array(X, name, ndim=2, min_rows=1, dtype=np.float32)
    if arr.shape[1] == 0:
        raise DataError(
            f"{name} must have at least one feature column; got shape {arr.shape}.", argument=name
        )
    return arr


def _check_concepts(C: Any, name: str = "C", n: int | None = None) -> np.ndarray:
    arr = check_numeric_array(C, name, ndim=2, min_rows=1, dtype=np.float64)
    if arr.shape[1] == 0 or not np.isin(arr, (0.0, 1.0)).all():
        raise DataError(
            f"{name} must hold one 0/1 column per concept (1 = present); binarise graded annotations first.",
            argument=name,
        )
    if n is not None and len(arr) != n:
        raise DataError(f"{name} must have one row per row of X ({n}); got {len(arr)}.", argument=name)
    return arr.astype(np.float32)


def _mlp(sizes: list[int]) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


class _CEMEncoder(torch.nn.Module):
    """Concept embedding encoder of Espinosa Zarlenga et al. (2022).

    A shared MLP ``h(x)``; per concept ``j`` two context embeddings ``c_j^+ = LeakyReLU(W_j^+ h)``
    and ``c_j^- = LeakyReLU(W_j^- h)`` of size ``m``; a scoring layer shared by all concepts gives
    the concept logit ``s([c_j^+, c_j^-])``. The task head reads ``p_j c_j^+ + (1 - p_j) c_j^-``.
    """

    def __init__(self, sizes: list[int], k: int, m: int) -> None:
        super().__init__()
        self.k, self.m = k, m
        self.backbone = (
            torch.nn.Sequential(_mlp(sizes), torch.nn.ReLU()) if len(sizes) > 1 else torch.nn.Identity()
        )
        self.context = torch.nn.Linear(sizes[-1], 2 * k * m)
        self.score = torch.nn.Linear(2 * m, 1)

    def parts(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        ctx = torch.nn.functional.leaky_relu(self.context(self.backbone(x))).view(-1, self.k, 2 * self.m)
        return self.score(ctx).squeeze(-1), ctx[..., : self.m], ctx[..., self.m :]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.parts(x)[0]

    def embed(self, x: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        """Mixed embeddings ``p c^+ + (1 - p) c^-`` of every concept, flattened to ``(n, k m)``."""
        _, pos, neg = self.parts(x)
        p = probs.unsqueeze(-1)
        return (p * pos + (1 - p) * neg).flatten(1)
