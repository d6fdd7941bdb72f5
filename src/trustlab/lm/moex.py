"""MoE-X: a mixture of ReLU experts with sparsity-aware routing, on the lab's Mixtral model [1]_.

The paper rewrites a top-k mixture of experts as one wide, sparse MLP: expert ``j`` is a ReLU
MLP ``E_j(x) = W_dec^j ReLU(W_enc^j x)`` of width ``D``; concatenating the gated hidden units
of all ``M`` experts gives a hidden layer of width ``M D`` of which only the ``k`` routed
experts' units can be non-zero. Routing picks the experts whose activations will be sparsest:
if the entries of expert ``j``'s encoder row ``i`` (over its hidden units) are modelled as
Gaussian with mean ``mu_ji`` and variance ``s2_ji``, a hidden pre-activation is Gaussian with mean
``m_j = sum_i mu_ji x_i`` and variance ``v_j = sum_i s2_ji x_i^2``, so its probability of being
positive (the expected share of active units) is ``(1 + erf(m_j / sqrt(2 v_j))) / 2``. The gate
score is ``-erf(m_j / sqrt(2 v_j))``: top-k of the scores, softmax over the chosen ones. The
score is differentiable in the encoder weights, so routing also regularises them towards sparse
activations. A load-balancing loss (the lab's, Switch style) is kept.

:func:`build_moe_variant` swaps the MLP of every block of a lab Mixtral model for one of:
``"moex"`` (ReLU experts, sparsity-aware routing), ``"moe"`` (GELU experts, the usual learned
softmax top-k router; the standard MoE baseline) or ``"dense"`` (one GELU MLP of width
``k D``: equal active parameters). :func:`hidden_activations` reads the equivalent wide hidden
layer; :func:`bsp_coverage` is the paper's interpretability measure (board-state-property
coverage of Karvonen et al. [2]_) for any binary ground-truth features.

References
----------
.. [1] Yang, Venhoff, Khakzar, Schroeder de Witt, Dokania, Bibi, Torr. "Mixture of Experts Made
   Intrinsically Interpretable". ICML 2025 (PMLR 267), arXiv:2503.07639.
.. [2] Karvonen, Wright, Rager, Angell, Brinkmann, Smith, Mayrink Verdun, Bau, Marks. "Measuring
   Progress in Dictionary Learning for Language Model Interpretability with Board Game Models".
   NeurIPS 2024.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import torch
from torch import nn

from trustlab._param_validation import Interval, Options, validate_params
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.lm.models import ModelConfig, build_model

__all__ = [
    "MOE_VARIANTS",
    "MoEXBlock",
    "bsp_coverage",
    "bsp_reconstruction",
    "build_moe_variant",
    "hidden_activations",
    "routing_sparsity_correlation",
    "sparsity_scores",
]

MOE_VARIANTS = ("moex", "moe", "dense")
# The paper's Table 3 ablation: ReLU experts with the learned top-k router (no sparsity routing).
_VARIANTS = (*MOE_VARIANTS, "relu-moe")


def sparsity_scores(x: torch.Tensor, enc: torch.Tensor) -> torch.Tensor:
    """MoE-X's routing scores: minus the erf of each expert's expected pre-activation z-score [1]_.

    Parameters
    ----------
    x : torch.Tensor, shape (n, d)
        Token representations.
    enc : torch.Tensor, shape (n_experts, width, d)
        The experts' encoder weights (``W_enc^j``, hidden units by inputs).

    Returns
    -------
    torch.Tensor, shape (n, n_experts)
        ``-erf(m_j / sqrt(2 v_j))``, higher for the experts expected to be sparser.

    Examples
    --------
    >>> enc = torch.stack([torch.full((4, 2), -1.0), torch.full((4, 2), 1.0)]) + 0.1 * torch.eye(4, 2)
    >>> sparsity_scores(torch.ones(1, 2), enc).argmax(-1).item()  # the all-negative encoder
    0
    """
    mu = enc.mean(dim=1)  # (E, d): mean over hidden units of each input's weights
    var = enc.var(dim=1, unbiased=False)  # (E, d)
    m = x @ mu.T
    v = (x * x) @ var.T
    return -torch.erf(m / torch.sqrt(2.0 * v + 1e-12))


class _Router(nn.Module):
    """Router returning ``(router_logits, top_k_weights, top_k_index)`` like Mixtral's."""

    def __init__(self, d_model: int, n_experts: int, top_k: int, sparsity: bool) -> None:
        super().__init__()
        self.top_k, self.sparsity = top_k, sparsity
        self.weight = None if sparsity else nn.Parameter(torch.randn(n_experts, d_model) * 0.02)

    def forward(self, x: torch.Tensor, enc: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self.weight is None:
            logits = sparsity_scores(x, enc)
        else:
            logits = nn.functional.linear(x, self.weight)
        top, index = torch.topk(logits, self.top_k, dim=-1)
        return logits, torch.softmax(top, dim=-1), index


class MoEXBlock(nn.Module):
    """A mixture-of-experts MLP with single-activation experts (ReLU or GELU), Mixtral-compatible.

    Parameters
    ----------
    d_model : int
        Width of the residual stream.
    width : int
        Hidden units per expert (``D``).
    n_experts : int
        Experts (``M``); 1 with ``top_k = 1`` is a dense MLP.
    top_k : int
        Experts per token.
    activation : {"relu", "gelu"}
        The experts' activation.
    sparsity_routing : bool
        MoE-X's sparsity-aware router (no parameters) instead of a learned softmax router.

    Notes
    -----
    ``forward`` records the gated hidden units of the last call in ``last_hidden``
    (``(tokens, n_experts * width)``) when ``record`` is true.

    See Also
    --------
    build_moe_variant : a lab Mixtral model whose MLPs are these blocks.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> block = MoEXBlock(8, width=16, n_experts=4, top_k=2, activation="relu", sparsity_routing=True)
    >>> block.record = True
    >>> block(torch.randn(2, 3, 8)).shape
    torch.Size([2, 3, 8])
    >>> per_expert = block.last_hidden.reshape(6, 4, 16)  # (tokens, experts, width)
    >>> (per_expert != 0).any(-1).sum(-1).tolist()  # experts active per token: at most top_k
    [2, 2, 2, 2, 2, 2]
    """

    def __init__(
        self, d_model: int, width: int, n_experts: int, top_k: int, activation: str, sparsity_routing: bool
    ) -> None:
        super().__init__()
        self.n_experts, self.width, self.top_k = n_experts, width, top_k
        self.enc = nn.Parameter(torch.randn(n_experts, width, d_model) / math.sqrt(d_model))
        self.dec = nn.Parameter(torch.randn(n_experts, d_model, width) * 0.02)
        self.gate = _Router(d_model, n_experts, top_k, sparsity_routing)
        self.act = nn.functional.relu if activation == "relu" else nn.functional.gelu
        self.record = False
        self.last_hidden: torch.Tensor | None = None
        self.last_logits: torch.Tensor | None = None

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Route each token, run its experts, return the gated sum (same shape as the input).

        Parameters
        ----------
        hidden_states : torch.Tensor, shape (..., d_model)
            Token representations (Mixtral passes ``(batch, seq, d_model)``).

        Returns
        -------
        torch.Tensor, same shape as ``hidden_states``
            ``sum_j g_j(x) W_dec^j act(W_enc^j x)`` over each token's ``top_k`` experts, with
            ``g`` the softmax of the router's ``top_k`` scores. Sets ``last_logits`` (the router's
            scores for every expert) and, when ``record`` is true, ``last_hidden``.
        """
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        logits, weights, index = self.gate(x, self.enc)
        self.last_logits = logits
        gate = torch.zeros(x.shape[0], self.n_experts, dtype=x.dtype, device=x.device)
        gate.scatter_(1, index, weights.to(x.dtype))
        # Every expert computed, then masked: exact, and cheap at the lab's sizes.
        h = self.act(torch.einsum("nd,ewd->new", x, self.enc)) * gate[:, :, None]
        out = torch.einsum("new,edw->nd", h, self.dec)
        if self.record:
            self.last_hidden = h.detach().reshape(x.shape[0], -1)
        return out.reshape(shape)


def _aux_loss(blocks: list[MoEXBlock]) -> torch.Tensor:
    total = torch.zeros(())
    for b in blocks:
        if b.n_experts == 1 or b.last_logits is None:
            continue
        probs = torch.softmax(b.last_logits.float(), dim=-1)
        chosen = torch.zeros_like(probs).scatter_(1, torch.topk(b.last_logits, b.top_k, dim=-1)[1], 1.0)
        total = total + b.n_experts * (chosen.mean(0) * probs.mean(0)).sum()
    return total


@validate_params(
    {
        "config": [ModelConfig],
        "variant": [Options(set(_VARIANTS))],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def build_moe_variant(config: ModelConfig, variant: str = "moex", *, seed: int = 0) -> Any:
    """A lab Mixtral model whose every MLP is MoE-X, a standard MoE or a dense MLP [1]_.

    Parameters
    ----------
    config : ModelConfig
        ``arch="mixtral"``; ``d_ff`` is each expert's width ``D`` (default ``4 d_model / top_k``
        so that the active hidden width is ``4 d_model``), ``n_experts`` and ``top_k`` as usual.
    variant : {"moex", "moe", "dense", "relu-moe"}, default="moex"
        ``"moex"``: ReLU experts, sparsity-aware routing. ``"moe"``: GELU experts, learned softmax
        top-k router. ``"dense"``: one GELU MLP of width ``top_k * D`` (equal active parameters).
        ``"relu-moe"``: ReLU experts with the learned router (the paper's Table 3 ablation).
    seed : int, default=0
        Seeds the weights.

    Returns
    -------
    transformers.MixtralForCausalLM
        Trainable with :func:`~trustlab.lm.train_model`, hookable with
        :func:`~trustlab.lm.run_with_hooks`; the load-balancing loss is the ``aux_loss`` of its
        output. Saving works, but loading needs this function (the blocks are not ``transformers``').

    Examples
    --------
    >>> cfg = ModelConfig("mixtral", vocab_size=10, d_model=16, n_layers=1, n_heads=2, n_experts=4, top_k=2)
    >>> m = build_moe_variant(cfg, "moex")
    >>> m(input_ids=torch.tensor([[1, 2, 3]])).logits.shape
    torch.Size([1, 3, 10])
    """
    if config.arch != "mixtral":
        raise ParameterError(f"config.arch must be 'mixtral', got {config.arch!r}.", argument="config")
    model = build_model(config, seed=seed)
    width = config.d_ff or max(1, 4 * config.d_model // config.top_k)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        blocks = []
        for layer in model.model.layers:
            if variant == "dense":
                block = MoEXBlock(config.d_model, config.top_k * width, 1, 1, "gelu", False)
            else:
                block = MoEXBlock(
                    config.d_model,
                    width,
                    config.n_experts,
                    config.top_k,
                    "relu" if variant in ("moex", "relu-moe") else "gelu",
                    variant == "moex",
                )
            layer.mlp = block
            blocks.append(block)
    model.config.output_router_logits = False
    original = model.forward

    def forward(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        out.aux_loss = _aux_loss(blocks)
        return out

    model.forward = forward
    model.moe_variant = variant
    return model.eval()


@torch.no_grad()
def hidden_activations(model: Any, input_ids: Any, layer: int) -> np.ndarray:
    """The wide hidden layer of block ``layer``: gated expert units, zero for unrouted experts.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A model from :func:`build_moe_variant`.
    input_ids : array-like of int, shape (batch, seq)
        Token ids.
    layer : int
        The block.

    Returns
    -------
    ndarray of float, shape (batch * seq, n_experts * width)
        One row per token (row-major over batch, then position).

    Examples
    --------
    >>> cfg = ModelConfig("mixtral", vocab_size=10, d_model=16, n_layers=1, n_heads=2, n_experts=4, top_k=2)
    >>> hidden_activations(build_moe_variant(cfg), [[1, 2, 3]], 0).shape
    (3, 128)
    """
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or not all(isinstance(getattr(b, "mlp", None), MoEXBlock) for b in layers):
        raise ModelError("model must come from build_moe_variant.", argument="model")
    if not isinstance(layer, int | np.integer) or not 0 <= layer < len(layers):
        raise ParameterError(
            f"layer must be an integer in [0, {len(layers)}), got {layer!r}.", argument="layer"
        )
    block = layers[layer].mlp
    ids = torch.as_tensor(np.asarray(input_ids), dtype=torch.long)
    block.record = True
    try:
        model(input_ids=ids)
        assert block.last_hidden is not None
        return block.last_hidden.float().numpy().copy()
    finally:
        block.record, block.last_hidden = False, None


@validate_params({"thresholds": ["array-like", None]})
def bsp_coverage(activations: Any, features: Any, *, thresholds: Any = None) -> tuple[float, np.ndarray]:
    """Coverage of binary ground-truth features by single hidden units (Karvonen et al. [2]_).

    Each unit's activations are scaled by its maximum; for every threshold ``t`` a unit fires when
    its scaled activation exceeds ``t``, and its F1 score as a detector of each feature is
    computed. A feature's score is its best F1 over units and thresholds; coverage is the mean
    over features (the paper's "BSP coverage", 1 = every feature has a unit that detects it).

    Parameters
    ----------
    activations : array-like of float, shape (n, units)
        Hidden activations, one row per token.
    features : array-like of bool, shape (n, n_features)
        Ground-truth binary properties of each token (each must occur at least once).
    thresholds : array-like of float, optional
        Default ``0, 0.1, ..., 0.9`` (Karvonen et al.'s grid).

    Returns
    -------
    coverage : float
        Mean best F1.
    per_feature : ndarray of float, shape (n_features,)
        Best F1 of each feature.

    Examples
    --------
    >>> feats = np.eye(3, dtype=bool).repeat(4, axis=0)
    >>> acts = feats.astype(float) + 0.01
    >>> bsp_coverage(acts, feats)[0]
    1.0
    """
    a, y = _check_pair(activations, features, "activations")
    if not y.any(axis=0).all():
        raise DataError(
            "every feature must be true for at least one row; drop the empty ones.", argument="features"
        )
    grid = _grid(thresholds)
    scaled = _scaled(a, a.max(axis=0))
    yf = y.astype(float)
    positives = yf.sum(axis=0)
    best = np.zeros(y.shape[1])
    for t in grid:
        fire = (scaled > t).astype(float)
        tp = fire.T @ yf  # (units, features)
        f1 = 2 * tp / (fire.sum(axis=0)[:, None] + positives[None, :])
        best = np.maximum(best, f1.max(axis=0))
    return float(best.mean()), best


def _grid(thresholds: Any) -> np.ndarray:
    grid = np.arange(10) / 10 if thresholds is None else np.asarray(thresholds, dtype=float).ravel()
    if grid.size == 0 or not np.all((grid >= 0) & (grid < 1)):
        raise ParameterError("thresholds must be values in [0, 1).", argument="thresholds")
    return grid


def _scaled(a: np.ndarray, top: np.ndarray) -> np.ndarray:
    return np.where(top > 0, a / np.where(top > 0, top, 1.0), 0.0)


def _check_pair(a: Any, y: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    a, y = np.asarray(a, dtype=float), np.asarray(y).astype(bool)
    if a.ndim != 2 or y.ndim != 2 or len(a) != len(y) or len(a) == 0:
        raise DataError(
            f"{name}: activations (n, units) and features (n, n_features) must share n >= 1 rows, got "
            f"{a.shape} and {y.shape}.",
            argument=name,
        )
    if not np.isfinite(a).all():
        raise DataError(f"{name}: activations hold NaN or inf.", argument=name)
    return a, y


@validate_params(
    {"precision": [Interval(numbers.Real, 0, 1, closed="right")], "thresholds": ["array-like", None]}
)
def bsp_reconstruction(
    fit_activations: Any,
    fit_features: Any,
    activations: Any,
    features: Any,
    *,
    precision: float = 0.95,
    thresholds: Any = None,
) -> float:
    """Reconstruction of binary ground-truth features from high-precision single units [2]_.

    On a fitting split, every (unit, threshold) whose firing detects a feature with precision
    at least ``precision`` becomes a detector of it (scaling and thresholds as in
    :func:`bsp_coverage`, the scale taken from the fitting split). On the evaluation split a
    feature is predicted true when any of its detectors fires; the score is the F1 of these
    predictions over all (row, feature) entries (the paper's "BSP reconstruction", our reading:
    higher when the features are carried by single, monosemantic units).

    Parameters
    ----------
    fit_activations, fit_features : array-like, shapes (n_fit, units) and (n_fit, n_features)
        The split that picks the detectors.
    activations, features : array-like, shapes (n, units) and (n, n_features)
        The split that is reconstructed.
    precision : float, default=0.95
        Minimum precision of a detector on the fitting split.
    thresholds : array-like of float, optional
        Default ``0, 0.1, ..., 0.9``.

    Returns
    -------
    float
        Micro F1 of the reconstruction (0 when no detector exists).

    Examples
    --------
    >>> feats = np.eye(3, dtype=bool).repeat(4, axis=0)
    >>> bsp_reconstruction(feats * 1.0, feats, feats * 1.0, feats)
    1.0
    """
    a_fit, y_fit = _check_pair(fit_activations, fit_features, "fit_activations")
    a, y = _check_pair(activations, features, "activations")
    if a.shape[1] != a_fit.shape[1] or y.shape[1] != y_fit.shape[1]:
        raise DataError("both splits must have the same units and features.", argument="activations")
    grid = _grid(thresholds)
    top = a_fit.max(axis=0)
    s_fit, s = _scaled(a_fit, top), _scaled(a, top)
    pred = np.zeros(y.shape, dtype=bool)
    for t in grid:
        fire_fit = s_fit > t
        tp = fire_fit.T.astype(float) @ y_fit.astype(float)
        n_fire = fire_fit.sum(axis=0)[:, None]
        good = (n_fire > 0) & (tp >= precision * np.maximum(n_fire, 1))  # (units, features)
        if good.any():
            pred |= ((s > t).astype(float) @ good.astype(float)) > 0
    tp_all = float((pred & y).sum())
    denom = float(pred.sum() + y.sum())
    return 2 * tp_all / denom if denom else 0.0


@torch.no_grad()
def routing_sparsity_correlation(model: Any, input_ids: Any, layer: int) -> float:
    """Pearson correlation of each expert's routing score with its actual number of active units.

    For every token and every expert (routed or not), the router's score against the L0 norm of
    ``ReLU(W_enc^j x)`` (positive pre-activations). The paper's Figure 9: the sparsity-aware score
    is strongly negatively correlated with the experts' L0 (it picks the sparsest), a learned
    top-k router's logits are not.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A model from :func:`build_moe_variant` (not ``"dense"``).
    input_ids : array-like of int, shape (batch, seq)
        Token ids.
    layer : int
        The block.

    Returns
    -------
    float
        The correlation over (token, expert) pairs.

    Examples
    --------
    >>> cfg = ModelConfig("mixtral", vocab_size=10, d_model=16, n_layers=1, n_heads=2, n_experts=4, top_k=2)
    >>> routing_sparsity_correlation(build_moe_variant(cfg), [[1, 2, 3, 4]], 0) < 0
    True
    """
    hidden_activations(model, input_ids, layer)  # validates model, layer and ids
    block = model.model.layers[layer].mlp
    if block.n_experts < 2:
        raise ModelError("the dense variant has no router; give a 'moex' or 'moe' model.", argument="model")
    captured: dict[str, torch.Tensor] = {}
    handle = block.register_forward_pre_hook(lambda mod, args: captured.update(x=args[0]))
    try:
        model(input_ids=torch.as_tensor(np.asarray(input_ids), dtype=torch.long))
    finally:
        handle.remove()
    x = captured["x"].reshape(-1, captured["x"].shape[-1])
    logits = block.gate(x, block.enc)[0]
    l0 = (torch.einsum("nd,ewd->new", x, block.enc) > 0).sum(-1).float()
    a, b = logits.ravel().double(), l0.ravel()
    a, b = a - a.mean(), b.double() - b.double().mean()
    return float((a * b).sum() / torch.sqrt((a * a).sum() * (b * b).sum()).clamp_min(1e-300))
