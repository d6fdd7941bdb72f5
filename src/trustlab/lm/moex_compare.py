"""MoE-X against a standard MoE and a dense MLP on tasks with known features [1]_.

Each variant of :func:`~trustlab.lm.moex.build_moe_variant` trains with the lab's loop on the
lab's in-context tasks (``x1 y1 ... x* y*``, ``y = (k_t x + b_t) mod V``, latent task ``t``),
the same data, schedule and seed. At the ``x`` tokens after two demonstrations the ground-truth
binary features are known, as the chess board-state properties (BSPs) of the paper are: "the
answer the model must produce is ``v``" (``V`` features) and "the latent task is ``t``"
(``n_tasks`` features). The wide hidden layer of the last block is scored with the paper's
interpretability measures (:func:`~trustlab.lm.moex.bsp_coverage`,
:func:`~trustlab.lm.moex.bsp_reconstruction`) next to the held-out loss, the share of active
hidden units and, for the routed variants, the correlation of the routing scores with the
experts' actual activation counts.

References
----------
.. [1] Yang, Venhoff, Khakzar, Schroeder de Witt, Dokania, Bibi, Torr. "Mixture of Experts Made
   Intrinsically Interpretable". ICML 2025 (PMLR 267), arXiv:2503.07639.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ParameterError
from trustlab.lm.corpora import TokenData, incontext_tasks
from trustlab.lm.models import ModelConfig
from trustlab.lm.moex import (
    _VARIANTS,
    MOE_VARIANTS,
    bsp_coverage,
    bsp_reconstruction,
    build_moe_variant,
    hidden_activations,
    routing_sparsity_correlation,
)
from trustlab.lm.training import TrainConfig, evaluate_loss, train_model

__all__ = ["MoEComparison", "compare_moe_variants"]


@dataclass(frozen=True)
class MoEComparison:
    """Interpretability and loss of MoE variants (rows) over seeds (columns).

    Attributes
    ----------
    variants : tuple of str
        The variants, in row order.
    seeds : ndarray of int, shape (s,)
        One trained model per variant and seed.
    loss : ndarray of float, shape (v, s)
        Held-out loss (nats per answer token).
    coverage : ndarray of float, shape (v, s)
        BSP coverage of the last block's hidden units.
    reconstruction : ndarray of float, shape (v, s)
        BSP reconstruction F1 (detectors fitted on half the held-out tokens, scored on the other).
    active : ndarray of float, shape (v, s)
        Mean share of the hidden units that are non-zero per token.
    routing_correlation : ndarray of float, shape (v, s)
        Correlation of routing scores with the experts' active-unit counts (NaN for dense).
    n_tokens : int
        Evaluated tokens (both halves).

    See Also
    --------
    compare_moe_variants
    """

    variants: tuple[str, ...]
    seeds: np.ndarray
    loss: np.ndarray
    coverage: np.ndarray
    reconstruction: np.ndarray
    active: np.ndarray
    routing_correlation: np.ndarray
    n_tokens: int


def _features(data: TokenData, n_tasks: int) -> tuple[np.ndarray, np.ndarray]:
    length = data.tokens.shape[1]
    pos = np.arange(4, length, 2)  # x tokens after two demonstrations
    answer = data.tokens[:, pos + 1].ravel()
    task = np.repeat(data.latent["task"], len(pos))
    feats = np.concatenate(
        [answer[:, None] == np.arange(data.vocab_size), task[:, None] == np.arange(n_tasks)], 1
    )
    return pos, feats


@validate_params(
    {
        "variants": [list, tuple],
        "seeds": ["array-like"],
        "n_tasks": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_values": [Interval(numbers.Integral, 3, None, closed="left")],
        "n_pairs": [Interval(numbers.Integral, 3, None, closed="left")],
        "n_train_sequences": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_eval": [Interval(numbers.Integral, 2, None, closed="left")],
        "model_config": [ModelConfig, None],
        "train_config": [TrainConfig, None],
    }
)
def compare_moe_variants(
    variants: Any = MOE_VARIANTS,
    seeds: Any = (0,),
    *,
    n_tasks: int = 4,
    n_values: int = 8,
    n_pairs: int = 6,
    n_train_sequences: int = 4000,
    n_eval: int = 300,
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
) -> MoEComparison:
    """Train each variant on in-context tasks; loss and interpretability of its last hidden layer.

    Parameters
    ----------
    variants : sequence of {"moex", "moe", "dense", "relu-moe"}, default ("moex", "moe", "dense")
        The variants to compare (``"relu-moe"``: the paper's Table 3 ablation, ReLU experts
        with a learned router).
    seeds : array-like of int, default (0,)
        One model per seed (weights and batch order; the data is the same for all).
    n_tasks, n_values, n_pairs : int, default 4, 8, 6
        The in-context tasks (see :func:`~trustlab.lm.incontext_tasks`).
    n_train_sequences : int, default=4000
        Training prompts.
    n_eval : int, default=300
        Held-out prompts (the same task table).
    model_config : ModelConfig, optional
        Defaults to Mixtral, 2 blocks, width 32, 2 heads, 4 experts, top-2 (expert width 64:
        active hidden width 128 = 4 x 32, the dense variant's width).
    train_config : TrainConfig, optional
        Defaults to 300 steps of 32 prompts, lr 1e-2, 10 warm-up steps.

    Returns
    -------
    MoEComparison
        Per variant and seed.

    Examples
    --------
    >>> res = compare_moe_variants(seeds=[0, 1])  # doctest: +SKIP
    >>> res.reconstruction.mean(axis=1)  # doctest: +SKIP
    """
    names = tuple(variants)
    if not names or any(v not in _VARIANTS for v in names):
        raise ParameterError(f"variants must be drawn from {_VARIANTS}, got {names!r}.", argument="variants")
    seed_list = [int(s) for s in np.asarray(seeds).ravel()]
    if not seed_list or min(seed_list) < 0:
        raise ParameterError("seeds must be one or more non-negative integers.", argument="seeds")
    base = model_config or ModelConfig(
        "mixtral", vocab_size=n_values, d_model=32, n_layers=2, n_heads=2, n_experts=4, top_k=2
    )
    cfg = ModelConfig.from_dict({**base.to_dict(), "vocab_size": n_values, "max_len": 2 * n_pairs})
    pool = incontext_tasks(n_train_sequences + n_eval, n_pairs, n_tasks, n_values=n_values, seed=0)

    def part(sl: slice) -> TokenData:
        return TokenData(
            pool.tokens[sl], pool.loss_mask[sl], n_values, {k: v[sl] for k, v in pool.latent.items()}
        )

    train, evals = part(slice(0, n_train_sequences)), part(slice(n_train_sequences, None))
    pos, feats = _features(evals, n_tasks)
    half = (n_eval // 2) * len(pos)
    shape = (len(names), len(seed_list))
    out = {k: np.full(shape, np.nan) for k in ("loss", "coverage", "reconstruction", "active", "routing")}
    last = cfg.n_layers - 1
    for i, variant in enumerate(names):
        for j, seed in enumerate(seed_list):
            tcfg = train_config or TrainConfig(steps=300, batch_size=32, lr=1e-2, warmup=10, seed=seed)
            model = build_moe_variant(cfg, variant, seed=seed)
            train_model(model, train, tcfg)
            out["loss"][i, j] = evaluate_loss(model, evals)
            h = hidden_activations(model, evals.tokens, last).reshape(n_eval, 2 * n_pairs, -1)[:, pos]
            h = h.reshape(len(feats), -1)
            out["coverage"][i, j] = bsp_coverage(h, feats[:, feats.any(axis=0)])[0]
            out["reconstruction"][i, j] = bsp_reconstruction(h[:half], feats[:half], h[half:], feats[half:])
            out["active"][i, j] = float((h > 0).mean())
            if variant != "dense":
                out["routing"][i, j] = routing_sparsity_correlation(model, evals.tokens, last)
    return MoEComparison(
        variants=names,
        seeds=np.array(seed_list),
        loss=out["loss"],
        coverage=out["coverage"],
        reconstruction=out["reconstruction"],
        active=out["active"],
        routing_correlation=out["routing"],
        n_tokens=len(feats),
    )
