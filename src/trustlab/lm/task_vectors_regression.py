"""Task vectors in the paper's own synthetic setting: a mixture of sparse linear regressions [1]_.

The paper's section 3.3 and appendices C-D: prompts ``x1 y1 ... xK yK`` of continuous tokens
(Garg et al. [2]_), ``y = w . x + eps``, ``w`` non-zero only on a latent *basis*, one of
``n_bases`` disjoint coordinate sets (:func:`sparse_regression_prompts`); a GPT-2 on
``inputs_embeds`` trained with the MSE of each ``y_i`` predicted at ``x_i``. Per checkpoint:

- **ICL performance**: the test MSE per basis and number of demonstrations (normalised by
  ``rank``, the variance of ``w . x``, so that predicting 0 scores about 1);
- **task decoding** (the paper's basis-conditional algorithm, read off that error curve): where
  the curve lies between the generic ``D``-dimensional regression and the Bayes-optimal
  basis-conditional one (:func:`regression_baselines`, :func:`decoding_index`);
- **task encoding**: task decodability (TD, kNN ``k = 10``, leave-one-out;
  :func:`trustlab.lm.task_vectors.task_decodability`) of the basis from the residual stream after
  each block, at the last ``y`` token (the paper's Fig. 2 representation) or at the query ``x``;
- **activation patching** (appendix C, Fig. 7): the mean representation of basis ``i`` at the
  query position (after a block) is added to (or replaces) the residual stream at the query of
  prompts of basis ``j`` *with their demonstrations*; the change of the query's loss, a
  ``n_bases x n_bases`` matrix, should be negative on the diagonal and positive off it.

References
----------
.. [1] Han, Song, Gore, Agrawal. "Emergence and Effectiveness of Task Vectors in In-Context
   Learning: An Encoder Decoder Perspective". ICML 2025 (PMLR 267), arXiv:2412.12276.
.. [2] Garg, Tsipras, Liang, Valiant. "What Can Transformers Learn In-Context? A Case Study of
   Simple Function Classes". NeurIPS 2022, arXiv:2208.01633.
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._threads import one_thread
from trustlab.errors import DataError, ParameterError
from trustlab.lm._tv_regression_decoding import (
    BASELINES,
    RegressionTaskVectors,
    _balanced,
    _half_way,
    decoding_index,
    regression_baselines,
)
from trustlab.lm._tv_regression_model import (
    _INT0,
    _INT1,
    RegressionPrompts,
    RegressionTransformer,
    _block_hooks,
    _check_model,
    _check_prompts,
    _tensors,
    sparse_regression_prompts,
)
from trustlab.lm.task_vectors import _pearson, task_decodability

__all__ = [
    "BASELINES",
    "BasisPatching",
    "RegressionPrompts",
    "RegressionTaskVectors",
    "RegressionTransformer",
    "basis_losses",
    "basis_patching",
    "decoding_index",
    "regression_baselines",
    "regression_representations",
    "regression_task_vector_formation",
    "sparse_regression_prompts",
    "train_regression",
]


@validate_params({"position": [Options({"y", "query"})], "n_demos": [None, _INT0]})
def regression_representations(
    model: Any, prompts: Any, *, position: str = "y", n_demos: int | None = None
) -> np.ndarray:
    """The residual stream after every block at one token of each prompt [1]_.

    Parameters
    ----------
    model : RegressionTransformer
        The model.
    prompts : RegressionPrompts
        The prompts.
    position : {"y", "query"}, default="y"
        ``"y"``: the ``y`` token of demonstration ``n_demos`` (the paper's Fig. 2 uses the
        ``y`` token of the 20th, the last, demonstration); ``"query"``: the ``x`` token after
        ``n_demos`` demonstrations, the token right before the answer (the paper's TD token).
    n_demos : int, optional
        Demonstrations before the token (``"y"``: 1-based index of the demonstration). Defaults
        to all: the last ``y`` token, or the last ``x`` token (``n_points - 1`` demonstrations).

    Returns
    -------
    ndarray of float, shape (n_layers, n, width)
        Row ``l``: the output of block ``l``.

    Examples
    --------
    >>> m = RegressionTransformer(4, 3, n_layers=2, width=8, n_heads=2)
    >>> regression_representations(m, sparse_regression_prompts(5, n_dims=4, rank=1, n_points=3)).shape
    (2, 5, 8)
    """
    _check_model(model)
    _check_prompts(model, prompts)
    k = prompts.xs.shape[1]
    if position == "y":
        d = k if n_demos is None else n_demos
        if not 1 <= d <= k:
            raise ParameterError(
                f"n_demos must lie in [1, {k}] for position 'y', got {d}.", argument="n_demos"
            )
        pos = 2 * d - 1
    else:
        d = k - 1 if n_demos is None else n_demos
        if not 0 <= d <= k - 1:
            raise ParameterError(
                f"n_demos must lie in [0, {k - 1}] for position 'query', got {d}.", argument="n_demos"
            )
        pos = 2 * d
    record: dict[int, torch.Tensor] = {}
    xs, ys = _tensors(prompts)
    with torch.no_grad(), _block_hooks(model, record):
        model(xs, ys)
    return np.stack([record[i][:, pos].numpy().astype(float) for i in range(len(model.blocks))])


def basis_losses(model: Any, prompts: Any) -> np.ndarray:
    """Test MSE per basis and position, divided by ``rank`` (predicting 0 scores about 1) [1]_.

    Parameters
    ----------
    model : RegressionTransformer
        The model.
    prompts : RegressionPrompts
        Test prompts (every basis present).

    Returns
    -------
    ndarray of float, shape (n_bases, n_points)
        Entry ``[b, i]``: mean squared error of ``y_i`` (after ``i`` demonstrations) on basis ``b``.

    Examples
    --------
    >>> m = RegressionTransformer(4, 3, n_layers=1, width=8, n_heads=2)
    >>> basis_losses(m, sparse_regression_prompts(40, n_dims=4, rank=1, n_points=3)).shape
    (4, 3)
    """
    _check_model(model)
    _check_prompts(model, prompts)
    with torch.no_grad():
        err = ((model(*_tensors(prompts)) - torch.from_numpy(prompts.ys)) ** 2).numpy().astype(float)
    if len(np.unique(prompts.basis)) < prompts.n_bases:
        raise DataError("prompts must hold every basis; draw more.", argument="prompts")
    return np.stack([err[prompts.basis == b].mean(axis=0) for b in range(prompts.n_bases)]) / prompts.rank


@dataclass(frozen=True)
class BasisPatching:
    """The paper's Fig. 7 matrix (:func:`basis_patching`).

    Attributes
    ----------
    delta : ndarray of float, shape (n_bases, n_bases)
        ``delta[j, i]``: mean change of the query loss of basis ``j``'s prompts when basis ``i``'s
        vector is patched in (the diagonal is self-patching).
    se : ndarray of float, shape (n_bases, n_bases)
        Standard error of each mean (over prompts).
    base : ndarray of float, shape (n_bases,)
        Unpatched query loss per basis.
    contrast : float
        Mean over prompts of (own basis's change minus the mean change of the other bases):
        negative when self-patching helps more than cross-patching.
    contrast_se : float
        Its standard error (paired over prompts).

    See Also
    --------
    basis_patching
    """

    delta: np.ndarray
    se: np.ndarray
    base: np.ndarray
    contrast: float
    contrast_se: float


@validate_params({"layer": [_INT0], "n_demos": [_INT0], "mode": [Options({"add", "replace"})]})
def basis_patching(
    model: Any, prompts: Any, vectors: Any, *, layer: int, n_demos: int, mode: str = "add"
) -> BasisPatching:
    """The paper's Fig. 7: the loss change when a basis's mean representation is patched in [1]_.

    The mean residual stream after block ``layer`` at the query ``x`` token after ``n_demos``
    demonstrations, over the prompts of ``vectors`` of basis ``i`` (appendix C's task vector), is
    added to (``"add"``, the paper's appendix C) or replaces the residual stream at that token of
    each prompt of ``prompts`` (basis ``j``, its demonstrations kept); the pass goes on and the
    squared error of the query's prediction, divided by ``rank``, is compared with the unpatched
    one on the same prompt.

    Parameters
    ----------
    model : RegressionTransformer
        The model.
    prompts : RegressionPrompts
        Prompts to patch (every basis present).
    vectors : RegressionPrompts
        Prompts whose mean representations are the task vectors (drawn apart from ``prompts``).
    layer : int
        Block whose output is patched (0-based; the paper patches its layer 5, i.e. 4 here).
    n_demos : int
        Demonstrations before the query (below the prompts' ``n_points``).
    mode : {"add", "replace"}, default="add"
        Add the mean or overwrite the state with it.

    Returns
    -------
    BasisPatching
        The loss-change matrix, its standard errors and the self-minus-cross contrast.

    Examples
    --------
    >>> m = RegressionTransformer(4, 3, n_layers=2, width=8, n_heads=2)
    >>> p = sparse_regression_prompts(40, n_dims=4, rank=1, n_points=3)
    >>> v = sparse_regression_prompts(40, n_dims=4, rank=1, n_points=3, seed=1)
    >>> basis_patching(m, p, v, layer=0, n_demos=1).delta.shape
    (4, 4)
    """
    _check_model(model)
    _check_prompts(model, prompts)
    _check_prompts(model, vectors)
    if layer >= len(model.blocks):
        raise ParameterError(f"layer must be below {len(model.blocks)}, got {layer}.", argument="layer")
    if n_demos >= prompts.xs.shape[1]:
        raise ParameterError(
            f"n_demos must be below {prompts.xs.shape[1]}, got {n_demos}.", argument="n_demos"
        )
    nb = prompts.n_bases
    if nb < 2 or any((z == b).sum() < 2 for z in (prompts.basis, vectors.basis) for b in range(nb)):
        raise DataError("need >= 2 bases, >= 2 prompts of each in prompts and vectors.", argument="prompts")
    reps = regression_representations(model, vectors, position="query", n_demos=n_demos)[layer]
    means = torch.tensor(
        np.stack([reps[vectors.basis == b].mean(axis=0) for b in range(nb)]), dtype=torch.float32
    )
    xs, ys = _tensors(prompts)
    pos, k = 2 * n_demos, n_demos

    def query_err(vector: torch.Tensor | None) -> np.ndarray:
        def patch(i: int, hidden: torch.Tensor) -> torch.Tensor:
            if vector is None or i != layer:
                return hidden
            hidden = hidden.clone()
            hidden[:, pos] = vector + (hidden[:, pos] if mode == "add" else 0.0)
            return hidden

        with torch.no_grad(), _block_hooks(model, {}, patch):
            pred = model(xs[:, : k + 1], ys[:, : k + 1])[:, k]
        return ((pred - ys[:, k]) ** 2).numpy().astype(float) / prompts.rank

    base_err = query_err(None)
    diff = np.stack([query_err(means[i]) - base_err for i in range(nb)], axis=1)  # (n, nb)
    z = prompts.basis
    delta = np.stack([diff[z == j].mean(axis=0) for j in range(nb)])
    se = np.stack([diff[z == j].std(axis=0, ddof=1) / np.sqrt((z == j).sum()) for j in range(nb)])
    own = diff[np.arange(len(z)), z]
    per_prompt = own - (diff.sum(axis=1) - own) / (nb - 1)
    return BasisPatching(
        delta=delta,
        se=se,
        base=np.array([base_err[z == j].mean() for j in range(nb)]),
        contrast=float(per_prompt.mean()),
        contrast_se=float(per_prompt.std(ddof=1) / np.sqrt(len(z))),
    )


_POS = Interval(numbers.Real, 0, None, closed="neither")
_NONNEG = Interval(numbers.Real, 0, None, closed="left")


@validate_params(
    {"rank": [_INT1], "n_bases": [_INT1], "steps": [_INT0], "batch_size": [_INT1]}
    | {"lr": [_POS], "noise": [_NONNEG], "seed": [_INT0]}
)
def train_regression(
    model: Any,
    *,
    rank: int = 4,
    n_bases: int = 4,
    noise: float = 0.1,
    steps: int = 80_000,
    batch_size: int = 128,
    lr: float = 1e-4,
    checkpoints: Any = (),
    seed: int = 0,
) -> list[tuple[int, dict[str, torch.Tensor]]]:
    """Train on fresh prompts of the mixture each step, keeping checkpoints (the paper's App. D.2).

    Adam (betas 0.9 and 0.9999, constant learning rate, the paper's), the MSE of every ``y_i``
    prediction, one torch thread. The same seed gives the same weights.

    Parameters
    ----------
    model : RegressionTransformer
        Trained in place (ends in its final state).
    rank, n_bases, noise
        The mixture (:func:`sparse_regression_prompts`; ``n_dims`` and ``n_points`` are the model's).
    steps : int, default=80000
        Optimiser steps (the paper's 80k).
    batch_size : int, default=128
        Prompts per step (the paper's 128).
    lr : float, default=1e-4
        Learning rate (the paper's 1e-4).
    checkpoints : array-like of int, default=()
        Steps after which to keep the weights (0 = initialisation), within ``[0, steps]``.
    seed : int, default=0
        Seeds the prompts of every step.

    Returns
    -------
    list of (int, dict)
        ``(step, state_dict)`` in step order (copies).

    Examples
    --------
    >>> m = RegressionTransformer(4, 3, n_layers=1, width=8, n_heads=2)
    >>> [s for s, _ in train_regression(m, rank=1, steps=2, batch_size=4, checkpoints=[0, 2])]
    [0, 2]
    """
    _check_model(model)
    at = sorted({int(s) for s in np.asarray(checkpoints, dtype=int).ravel()})
    if at and (at[0] < 0 or at[-1] > steps):
        raise ParameterError(f"checkpoints must lie in [0, {steps}], got {at}.", argument="checkpoints")
    seeds = np.random.default_rng(seed).integers(0, 2**31 - 1, size=steps)
    opt = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.9999))
    kept: list[tuple[int, dict[str, torch.Tensor]]] = []

    def keep(step: int) -> None:
        if step in at:
            kept.append((step, copy.deepcopy(model.state_dict())))

    model.train()
    with one_thread():
        keep(0)
        for step in range(steps):
            p = sparse_regression_prompts(
                batch_size,
                n_dims=model.n_dims,
                rank=rank,
                n_bases=n_bases,
                n_points=model.n_points,
                noise=noise,
                seed=int(seeds[step]),
            )
            xs, ys = _tensors(p)
            loss = ((model(xs, ys) - ys) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            keep(step + 1)
    model.eval()
    return kept


_SIZES = ("n_dims", "rank", "n_bases", "n_points", "n_layers", "width", "n_heads", "steps", "batch_size", "k")


@validate_params(
    {name: [_INT1] for name in _SIZES}
    | {"lr": [_POS], "noise": [_NONNEG], "seed": [_INT0]}
    | {
        "n_per_basis": [Interval(numbers.Integral, 2, None, closed="left")],
        "position": [Options({"y", "query"})],
    }
    | {
        "patch_layer": [None, _INT0],
        "patch_demos": [None, _INT0],
        "patch_mode": [Options({"add", "replace"})],
    }
)
def regression_task_vector_formation(
    *,
    n_dims: int = 16,
    rank: int = 4,
    n_bases: int = 4,
    n_points: int = 20,
    noise: float = 0.1,
    n_layers: int = 12,
    width: int = 256,
    n_heads: int = 8,
    mark_y: bool = False,
    pair_y: bool = False,
    steps: int = 80_000,
    batch_size: int = 128,
    lr: float = 1e-4,
    checkpoints: Any = None,
    n_per_basis: int = 100,
    k: int = 10,
    position: str = "y",
    patch_layer: int | None = None,
    patch_demos: int | None = None,
    patch_mode: str = "add",
    seed: int = 0,
) -> RegressionTaskVectors:
    """Train the paper's synthetic model; per-basis loss, TD and Fig. 7 patching per checkpoint [1]_.

    The defaults are the paper's (App. D.2: ``D = 16``, rank 4, 4 bases, 20 points, a 12-block
    GPT-2 of width 256 with 8 heads, batch 128, Adam at 1e-4, 80k steps: hours of CPU); the
    measured runs in docs/lm-task-vectors.md use a much smaller setting.

    Parameters
    ----------
    n_dims, rank, n_bases, n_points, noise
        The mixture (:func:`sparse_regression_prompts`).
    n_layers, width, n_heads, mark_y, pair_y
        The model (:class:`RegressionTransformer`).
    steps, batch_size, lr
        The training (:func:`train_regression`).
    checkpoints : array-like of int, optional
        Steps to evaluate; defaults to 11 evenly spaced from 0 to ``steps``.
    n_per_basis : int, default=100
        Test prompts per basis (the paper's ``N = 100``); the same number, drawn apart, gives the
        task vectors.
    k : int, default=10
        Neighbours of TD (the paper's 10).
    position : {"y", "query"}, default="y"
        Token of the TD representations (:func:`regression_representations`; the paper's Fig. 2
        uses the last ``y`` token).
    patch_layer : int, optional
        Block patched; defaults to the middle block ``n_layers // 2 - 1`` (the paper's layer 5 of 12
        is block 4).
    patch_demos : int, optional
        Demonstrations before the patched query; defaults to ``rank``.
    patch_mode : {"add", "replace"}, default="add"
        :func:`basis_patching`'s mode (the paper adds).
    seed : int, default=0
        Seeds the weights, the training prompts and (offset) the test prompts.

    Returns
    -------
    RegressionTaskVectors
        The curves, the coupling statistics and the patching matrices.

    Examples
    --------
    >>> res = regression_task_vector_formation(n_dims=4, rank=1, n_points=4, n_layers=2, width=16,
    ...     n_heads=2, steps=4, batch_size=8, checkpoints=[0, 4], n_per_basis=12)
    >>> res.loss.shape, res.patch_delta.shape
    ((2, 4), (2, 4, 4))
    """
    cks = np.linspace(0, steps, 11).astype(int) if checkpoints is None else np.asarray(checkpoints, dtype=int)
    if k >= n_bases * n_per_basis:
        raise ParameterError(f"k must be below the test prompts ({n_bases * n_per_basis}).", argument="k")
    layer = n_layers // 2 - 1 if patch_layer is None else patch_layer
    demos = rank if patch_demos is None else patch_demos
    if layer >= n_layers or demos >= n_points:
        raise ParameterError(
            f"patch_layer must be below n_layers ({n_layers}) and patch_demos below n_points ({n_points}).",
            argument="patch_layer" if layer >= n_layers else "patch_demos",
        )
    model = RegressionTransformer(
        n_dims,
        n_points,
        n_layers=n_layers,
        width=width,
        n_heads=n_heads,
        mark_y=mark_y,
        pair_y=pair_y,
        seed=seed,
    )
    kept = train_regression(
        model,
        rank=rank,
        n_bases=n_bases,
        noise=noise,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        checkpoints=cks,
        seed=seed,
    )
    kw = {"n_dims": n_dims, "rank": rank, "n_bases": n_bases, "n_points": n_points, "noise": noise}
    test = _balanced(n_per_basis, 10_000 + 100 * seed, **kw)
    vecs = _balanced(n_per_basis, 20_000 + 100 * seed, **kw)
    baselines = regression_baselines(test, noise=max(noise, 1e-3))
    probe = copy.deepcopy(model)
    rows: list[dict[str, Any]] = []
    with one_thread():
        for _, state in kept:
            probe.load_state_dict(state)
            reps = regression_representations(probe, test, position=position)
            tds = [task_decodability(r, test.basis, k=k) for r in reps]
            pt = basis_patching(probe, test, vecs, layer=layer, n_demos=demos, mode=patch_mode)
            curve = basis_losses(probe, test)
            rows.append(
                {
                    "curve": curve,
                    "td": np.array([t[0] for t in tds]),
                    "btd": np.stack([t[1] for t in tds]),
                    "delta": pt.delta,
                    "se": pt.se,
                    "base": pt.base,
                    "contrast": np.array([pt.contrast, pt.contrast_se]),
                }
            )
    get = {key: np.stack([r[key] for r in rows]) for key in rows[0]}
    loss = get["curve"].mean(axis=2)
    td_layer = int(np.argmax(get["td"][-1]))
    btd = get["btd"][:, td_layer]
    decoding = np.stack([decoding_index(c, baselines) for c in get["curve"]])
    return RegressionTaskVectors(
        steps=np.array([s for s, _ in kept]),
        loss=loss,
        loss_curve=get["curve"],
        decodability=get["td"],
        basis_td=get["btd"],
        td_layer=td_layer,
        coupling=np.array([_pearson(btd[:, b], -loss[:, b]) for b in range(n_bases)]),
        td_onset=np.array([_half_way(btd[:, b], True) for b in range(n_bases)]),
        loss_onset=np.array([_half_way(loss[:, b], False) for b in range(n_bases)]),
        patch_layer=layer,
        patch_demos=demos,
        patch_delta=get["delta"],
        patch_se=get["se"],
        patch_base=get["base"],
        patch_contrast=get["contrast"][:, 0],
        patch_contrast_se=get["contrast"][:, 1],
        baselines=baselines,
        decoding=decoding,
        td_predicts_loss=_pearson(btd.ravel(), -loss.ravel()),
        chance_td=1.0 / n_bases,
        n_per_basis=n_per_basis,
        model=model,
    )
