"""Task-vector formation during pretraining: task decodability, in-context accuracy, patching [1]_.

A causal LM trains on in-context tasks with a latent task id (the lab's affine maps
``y = (k_t x + b_t) mod V``, :func:`~trustlab.lm.incontext_tasks`); checkpoints are kept along
the way. At each checkpoint:

- **task encoding**: *task decodability* (TD), the paper's geometric measure: the residual stream
  of each block at the token right before the answer ``y*`` (the query ``x*``), ``n_per_task``
  prompts per task, each classified by the majority task among its ``k = 10`` nearest neighbours
  (Euclidean, leave-one-out); TD is the share classified correctly, per block and at the best
  block;
- **task decoding / ICL performance**: greedy accuracy of the answer ``y*``;
- **task vectors**: the mean query representation of each task at a block (the paper's
  activation patching, its appendix C) is added to the residual stream of a *demonstration-free*
  query (``x*`` alone, the zero-shot protocol of Hendel et al. [2]_), at every block (a layer
  sweep); *self* patching (the query's own task) should raise accuracy above the unpatched
  zero-shot baseline, *cross* patching (another task's vector) should make the model answer
  with the other task's map.

The paper's claims: task encoding (TD) and decoding (ICL accuracy) emerge together over
training, and TD predicts ICL performance; :class:`TaskVectorFormation` reports both curves and
their Pearson correlation over checkpoints (and over checkpoint x task pairs).

References
----------
.. [1] Han, Song, Gore, Agrawal. "Emergence and Effectiveness of Task Vectors in In-Context
   Learning: An Encoder Decoder Perspective". ICML 2025 (PMLR 267), arXiv:2412.12276.
.. [2] Hendel, Geva, Globerson. "In-Context Learning Creates Task Vectors". Findings of
   EMNLP 2023, arXiv:2310.15916.
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, Options, validate_params
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.lm.corpora import TokenData, incontext_tasks
from trustlab.lm.hooks import run_with_hooks
from trustlab.lm.models import ModelConfig, build_model, save_model
from trustlab.lm.training import TrainConfig, train_model

__all__ = [
    "TaskVectorFormation",
    "patch_task_vector",
    "query_representations",
    "task_decodability",
    "task_vector_formation",
    "task_vectors",
    "train_with_checkpoints",
]


@dataclass(frozen=True)
class TaskVectorFormation:
    """Task encoding and decoding over training checkpoints (:func:`task_vector_formation`).

    Attributes
    ----------
    steps : ndarray of int, shape (c,)
        Optimiser steps of the checkpoints (0 = initialisation).
    decodability : ndarray of float, shape (c, n_layers)
        TD of each block's residual stream (``blocks.{i}.resid_post``) at the query token.
    td : ndarray of float, shape (c,)
        TD at the best block of each checkpoint (the paper picks the layer that best encodes).
    task_td : ndarray of float, shape (c, n_tasks)
        Per task: the share of its prompts classified correctly, at the best block.
    accuracy : ndarray of float, shape (c,)
        Greedy accuracy of the answer ``y*`` (ICL performance).
    task_accuracy : ndarray of float, shape (c, n_tasks)
        The same per task.
    patch_layer : ndarray of int, shape (c,)
        Block whose output is patched for ``patch_self`` and ``patch_cross`` (the best-TD block
        below the last one).
    patch_base : ndarray of float, shape (c,)
        Accuracy on demonstration-free queries (``x*`` alone), unpatched: the zero-shot baseline.
    patch_self : ndarray of float, shape (c,)
        The same with the query's own task vector added after block ``patch_layer``.
    patch_cross : ndarray of float, shape (c,)
        Share of demonstration-free queries answered with *another* task's map once that
        task's vector is added after block ``patch_layer`` (task ``t + 1``'s vector patched into
        queries of task ``t``; only queries where the two maps differ count).
    cross_base : ndarray of float, shape (c,)
        Share answered with that other task's map without patching (its chance level).
    patch_self_layers : ndarray of float, shape (c, n_layers)
        ``patch_self`` with the vector added after each block (the layer sweep).
    patch_cross_layers : ndarray of float, shape (c, n_layers)
        ``patch_cross`` after each block.
    correlation : float
        Pearson correlation of ``td`` and ``accuracy`` over the checkpoints.
    task_correlation : float
        Pearson correlation of ``task_td`` and ``task_accuracy`` over checkpoint x task pairs.
    chance_td : float
        ``1 / n_tasks``.
    n_per_task : int
        Evaluated prompts per task.

    See Also
    --------
    task_vector_formation
    """

    steps: np.ndarray
    decodability: np.ndarray
    td: np.ndarray
    task_td: np.ndarray
    accuracy: np.ndarray
    task_accuracy: np.ndarray
    patch_layer: np.ndarray
    patch_base: np.ndarray
    patch_self: np.ndarray
    patch_cross: np.ndarray
    cross_base: np.ndarray
    patch_self_layers: np.ndarray
    patch_cross_layers: np.ndarray
    correlation: float
    task_correlation: float
    chance_td: float
    n_per_task: int


@validate_params({"k": [Interval(numbers.Integral, 1, None, closed="left")]})
def task_decodability(representations: Any, tasks: Any, *, k: int = 10) -> tuple[float, np.ndarray]:
    """Task decodability: leave-one-out k-nearest-neighbour accuracy of the latent task [1]_.

    Each representation is classified by the majority task among its ``k`` nearest other
    representations (Euclidean); a tie goes to the smallest task id, as scikit-learn's
    ``KNeighborsClassifier`` does.

    Parameters
    ----------
    representations : array-like of float, shape (n, d)
        One representation per prompt (e.g. the residual stream at the query token).
    tasks : array-like of int, shape (n,)
        The latent task of each prompt.
    k : int, default=10
        Neighbours (the paper's ``k = 10``); must be below ``n``.

    Returns
    -------
    td : float
        Share of prompts whose task is recovered.
    per_task : ndarray of float, shape (n_tasks,)
        The same per task id ``0 .. max(tasks)`` (NaN for an id without prompts).

    Examples
    --------
    >>> h = np.r_[np.zeros((20, 2)), np.ones((20, 2))] + np.random.default_rng(0).normal(0, .1, (40, 2))
    >>> td, per = task_decodability(h, np.repeat([0, 1], 20), k=5); td
    1.0
    """
    h = np.asarray(representations, dtype=float)
    z = np.asarray(tasks)
    if h.ndim != 2 or z.ndim != 1 or len(h) != len(z):
        raise DataError(
            f"representations must be (n, d) and tasks (n,), got {h.shape} and {z.shape}.",
            argument="representations",
        )
    if not np.isfinite(h).all():
        raise DataError("representations hold NaN or inf; check the model.", argument="representations")
    if k >= len(h):
        raise ParameterError(f"k must be below the number of prompts {len(h)}, got {k}.", argument="k")
    if not np.issubdtype(z.dtype, np.integer) or z.min() < 0:
        raise DataError("tasks must be non-negative integer ids.", argument="tasks")
    sq = (h * h).sum(axis=1)
    dist = sq[:, None] + sq[None, :] - 2.0 * h @ h.T
    np.fill_diagonal(dist, np.inf)
    nearest = np.argsort(dist, axis=1, kind="stable")[:, :k]
    n_tasks = int(z.max()) + 1
    votes = np.zeros((len(h), n_tasks), dtype=int)
    np.add.at(votes, (np.repeat(np.arange(len(h)), k), z[nearest].ravel()), 1)
    hit = votes.argmax(axis=1) == z
    counts = np.bincount(z, minlength=n_tasks)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_task = np.bincount(z, weights=hit.astype(float), minlength=n_tasks) / counts
    return float(hit.mean()), per_task


def _check_prompts(data: Any) -> None:
    if not isinstance(data, TokenData) or "task" not in data.latent:
        raise DataError(
            "data must be a TokenData of in-context tasks with a latent 'task' "
            "(from trustlab.lm.incontext_tasks).",
            argument="data",
        )
    if data.tokens.shape[1] < 4 or data.tokens.shape[1] % 2:
        raise DataError(
            f"data sequences must hold at least two (x, y) pairs, got length {data.tokens.shape[1]}.",
            argument="data",
        )


def query_representations(model: Any, data: TokenData) -> np.ndarray:
    """Residual stream after every block at the query token ``x*`` (the token right before ``y*``).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM.
    data : TokenData
        In-context prompts ``x1 y1 ... x* y*`` (the last token is the answer).

    Returns
    -------
    ndarray of float, shape (n, n_layers, d_model)
        ``blocks.{i}.resid_post`` at position ``length - 2``.

    Examples
    --------
    >>> from trustlab.lm import incontext_tasks
    >>> m = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=2, n_heads=2, max_len=8))
    >>> query_representations(m, incontext_tasks(5, 3, 2, n_values=8)).shape
    (5, 2, 16)
    """
    _check_prompts(data)
    n_layers = int(model.config.num_hidden_layers)
    names = [f"blocks.{i}.resid_post" for i in range(n_layers)]
    q = data.tokens.shape[1] - 2
    out = run_with_hooks(model, data.tokens[:, : q + 1], names)
    return np.stack([out[n][:, q].float().numpy() for n in names], axis=1)


@validate_params({"layer": [Interval(numbers.Integral, 0, None, closed="left")]})
def task_vectors(model: Any, data: TokenData, layer: int) -> np.ndarray:
    """Mean query representation of each task at a block: the task vectors [1]_.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM.
    data : TokenData
        In-context prompts with latent ``"task"`` (every task id present).
    layer : int
        Block whose output (``blocks.{layer}.resid_post``) is averaged.

    Returns
    -------
    ndarray of float, shape (n_tasks, d_model)
        Row ``t``: the mean over task ``t``'s prompts.

    Examples
    --------
    >>> from trustlab.lm import incontext_tasks
    >>> m = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=2, n_heads=2, max_len=8))
    >>> task_vectors(m, incontext_tasks(20, 3, 2, n_values=8), 0).shape
    (2, 16)
    """
    reps = query_representations(model, data)
    if layer >= reps.shape[1]:
        raise ParameterError(f"layer must be below {reps.shape[1]}, got {layer}.", argument="layer")
    z = data.latent["task"]
    n_tasks = int(z.max()) + 1
    if len(np.unique(z)) != n_tasks:
        raise DataError("data must hold prompts of every task id 0 .. max(task).", argument="data")
    return np.stack([reps[z == t, layer].mean(axis=0) for t in range(n_tasks)])


@validate_params(
    {"layer": [Interval(numbers.Integral, 0, None, closed="left")], "mode": [Options({"add", "replace"})]}
)
@torch.no_grad()
def patch_task_vector(model: Any, tokens: Any, vector: Any, layer: int, *, mode: str = "add") -> np.ndarray:
    """Greedy prediction at the last token with a vector patched into the stream after a block [1]_.

    The paper's activation patching (its appendix C): the task vector is added to the residual
    stream of the last token (the query ``x*``) at ``blocks.{layer}.resid_post``, and the model
    continues its forward pass. ``mode="replace"`` overwrites that state instead, as Hendel et
    al. [2]_ do at their separator token. For the zero-shot protocol, pass demonstration-free
    queries (``x*`` alone) as ``tokens``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM.
    tokens : array-like of int, shape (n, length)
        Prompts ending with the query token.
    vector : array-like of float, shape (d_model,) or (n, d_model)
        The vector to add (one for all prompts, or one per prompt).
    layer : int
        The block after which it is patched.
    mode : {"add", "replace"}, default="add"
        Add the vector to the last token's state (the paper) or replace that state by it.

    Returns
    -------
    ndarray of int, shape (n,)
        The predicted next token of each prompt.

    Examples
    --------
    >>> m = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=2, n_heads=2, max_len=8))
    >>> patch_task_vector(m, [[1, 2, 3]], np.zeros(16), 0).shape
    (1,)
    """
    ids = np.asarray(tokens)
    if ids.ndim != 2:
        raise DataError(f"tokens must be (n, length), got shape {ids.shape}.", argument="tokens")
    vec = torch.as_tensor(np.asarray(vector, dtype=np.float32))
    d_model = int(model.config.hidden_size)
    if vec.shape[-1] != d_model or vec.ndim not in (1, 2) or (vec.ndim == 2 and vec.shape[0] != len(ids)):
        raise DataError(
            f"vector must have shape ({d_model},) or ({len(ids)}, {d_model}), got {tuple(vec.shape)}.",
            argument="vector",
        )
    if not torch.isfinite(vec).all():
        raise DataError("vector holds NaN or inf.", argument="vector")
    if layer >= int(model.config.num_hidden_layers):
        raise ParameterError(
            f"layer must be below {model.config.num_hidden_layers}, got {layer}.", argument="layer"
        )

    def patch(x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        x[:, -1] = vec.to(x.dtype) if mode == "replace" else x[:, -1] + vec.to(x.dtype)
        return x

    out = run_with_hooks(model, ids, [], edits={f"blocks.{layer}.resid_post": patch})
    return out["logits"][:, -1].argmax(-1).numpy()


@validate_params({"at_steps": ["array-like"], "config": [TrainConfig]})
def train_with_checkpoints(
    model: Any,
    data: TokenData,
    config: TrainConfig,
    at_steps: Any,
    *,
    out_dir: str | Path | None = None,
) -> list[tuple[int, dict[str, torch.Tensor]]]:
    """Train with the lab's loop, keeping the weights after the given steps (0 = initialisation).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Trained in place (ends in its final state).
    data : TokenData
        Training data.
    config : TrainConfig
        The schedule (``at_steps`` must lie in ``[0, config.steps]``).
    at_steps : array-like of int
        Steps after which to keep a checkpoint.
    out_dir : str or Path, optional
        If given, each checkpoint is also written there in safetensors (``step-{s:06d}/``, as
        :func:`~trustlab.lm.save_model` writes it).

    Returns
    -------
    list of (int, dict)
        ``(step, state_dict)`` in step order (CPU tensors, copies).

    Examples
    --------
    >>> from trustlab.lm import incontext_tasks
    >>> m = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=1, n_heads=2, max_len=8))
    >>> data = incontext_tasks(32, 3, 2, n_values=8)
    >>> cks = train_with_checkpoints(m, data, TrainConfig(steps=4), [0, 2, 4])
    >>> [s for s, _ in cks]
    [0, 2, 4]
    """
    steps = sorted({int(s) for s in np.asarray(at_steps).ravel()})
    if not steps or steps[0] < 0 or steps[-1] > config.steps:
        raise ParameterError(
            f"at_steps must lie in [0, {config.steps}] (the config's steps), got {steps}.",
            argument="at_steps",
        )
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"model must be a torch causal LM, got {type(model).__name__}.", argument="model")
    kept: list[tuple[int, dict[str, torch.Tensor]]] = []
    wanted = set(steps)

    def keep(step: int) -> None:
        kept.append((step, {k: v.detach().clone() for k, v in model.state_dict().items()}))
        if out_dir is not None:
            save_model(model, Path(out_dir) / f"step-{step:06d}")

    if 0 in wanted:
        keep(0)
    if steps[-1] > 0:
        train_model(
            model, data, config, callback=lambda step, loss: keep(step + 1) if step + 1 in wanted else None
        )
    return kept


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.ravel(a).astype(float), np.ravel(b).astype(float)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok] - a[ok].mean(), b[ok] - b[ok].mean()
    denom = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denom) if denom > 0 else float("nan")


def _evaluate(model: Any, evals: TokenData, k: int, n_tasks: int) -> dict[str, Any]:
    z = evals.latent["task"]
    reps = query_representations(model, evals)
    layers = [task_decodability(reps[:, i], z, k=k) for i in range(reps.shape[1])]
    tds = np.array([td for td, _ in layers])
    best = int(np.argmax(tds))
    q = evals.tokens.shape[1] - 2
    with torch.no_grad():
        logits = model(input_ids=torch.as_tensor(evals.tokens[:, : q + 1])).logits[:, -1]
    hit = logits.argmax(-1).numpy() == evals.tokens[:, q + 1]
    task_acc = np.array([hit[z == t].mean() for t in range(n_tasks)])
    patch_layer = int(np.argmax(tds[:-1])) if len(tds) > 1 else 0
    zero_shot = evals.tokens[:, [q]]  # the query alone, no demonstrations (Hendel et al.)
    kk, bb = evals.latent["k"], evals.latent["b"]
    x, y = evals.tokens[:, q], evals.tokens[:, q + 1]
    table = np.array([[kk[z == t][0], bb[z == t][0]] for t in range(n_tasks)])
    other = (z + 1) % n_tasks
    y_other = (table[other, 0] * x + table[other, 1]) % evals.vocab_size
    differ = max((y_other != y).mean(), 1e-12)
    with torch.no_grad():
        base = model(input_ids=torch.as_tensor(zero_shot)).logits[:, -1].argmax(-1).numpy()
    sweep_self, sweep_cross = [], []
    for layer in range(reps.shape[1]):
        vectors = np.stack([reps[z == t, layer].mean(axis=0) for t in range(n_tasks)])
        own = patch_task_vector(model, zero_shot, vectors[z], layer)
        cross = patch_task_vector(model, zero_shot, vectors[other], layer)
        sweep_self.append(float((own == y).mean()))
        sweep_cross.append(float(((cross == y_other) & (y_other != y)).mean() / differ))
    return {
        "decodability": tds,
        "td": float(tds[best]),
        "task_td": layers[best][1],
        "accuracy": float(hit.mean()),
        "task_accuracy": task_acc,
        "patch_layer": patch_layer,
        "patch_base": float((base == y).mean()),
        "patch_self": sweep_self[patch_layer],
        "patch_cross": sweep_cross[patch_layer],
        "cross_base": float(((base == y_other) & (y_other != y)).mean() / differ),
        "patch_self_layers": np.array(sweep_self),
        "patch_cross_layers": np.array(sweep_cross),
    }


@validate_params(
    {
        "n_tasks": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_values": [Interval(numbers.Integral, 3, None, closed="left")],
        "n_pairs": [Interval(numbers.Integral, 2, None, closed="left")],
        "checkpoints": ["array-like"],
        "n_train_sequences": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_per_task": [Interval(numbers.Integral, 2, None, closed="left")],
        "k": [Interval(numbers.Integral, 1, None, closed="left")],
        "model_config": [ModelConfig, None],
        "train_config": [TrainConfig, None],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
        "out_dir": [str, Path, None],
        "arch": [Options({"gpt2", "llama"})],
    }
)
def task_vector_formation(
    n_tasks: int = 4,
    n_values: int = 16,
    n_pairs: int = 6,
    *,
    checkpoints: Any = (0, 25, 50, 100, 150, 200, 300),
    n_train_sequences: int = 4096,
    n_per_task: int = 100,
    k: int = 10,
    arch: str = "llama",
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    seed: int = 0,
    out_dir: str | Path | None = None,
) -> TaskVectorFormation:
    """Train a tiny LM on in-context tasks; task decodability, ICL accuracy and patching per checkpoint.

    Parameters
    ----------
    n_tasks : int, default=4
        Latent tasks (affine maps mod ``n_values``; the paper's synthetic setting has 4 bases).
    n_values : int, default=16
        Token values ``V``.
    n_pairs : int, default=6
        ``(x, y)`` pairs per prompt; the last pair's ``y`` is the answer ``y*``.
    checkpoints : array-like of int
        Steps at which the model is evaluated (within ``train_config.steps``).
    n_train_sequences : int, default=4096
        Training prompts (fresh ``x`` values, the same task table).
    n_per_task : int, default=100
        Evaluated prompts per task (the paper's ``N = 100``).
    k : int, default=10
        Neighbours of the TD classifier (the paper's ``k = 10``).
    arch : {"llama", "gpt2"}, default="llama"
        Architecture of the default model (ignored when ``model_config`` is given).
    model_config : ModelConfig, optional
        Defaults to 3 blocks, width 32, 2 heads (``vocab_size`` and ``max_len`` are set from the task).
    train_config : TrainConfig, optional
        Defaults to 300 steps of 32 prompts, lr 1e-2, 10 warm-up steps.
    seed : int, default=0
        Seeds the task table, the prompts, the weights and the batch order.
    out_dir : str or Path, optional
        Where to write each checkpoint (safetensors); nothing is written when ``None``.

    Returns
    -------
    TaskVectorFormation
        The curves and their correlation.

    Examples
    --------
    >>> res = task_vector_formation(checkpoints=[0, 300])  # doctest: +SKIP
    >>> res.td[-1] > res.td[0] and res.accuracy[-1] > res.accuracy[0]  # doctest: +SKIP
    True
    """
    base = model_config or ModelConfig(arch, vocab_size=n_values, d_model=32, n_layers=3, n_heads=2)
    cfg = ModelConfig.from_dict({**base.to_dict(), "vocab_size": n_values, "max_len": 2 * n_pairs})
    tcfg = train_config or TrainConfig(steps=300, batch_size=32, lr=1e-2, warmup=10, seed=seed)
    # The same seed draws the same task table; the prompts differ by the generator's stream.
    pool = incontext_tasks(
        n_train_sequences + 20 * n_per_task * n_tasks, n_pairs, n_tasks, n_values=n_values, seed=seed
    )
    z = pool.latent["task"]
    evals_idx = np.concatenate([np.flatnonzero(z == t)[-n_per_task:] for t in range(n_tasks)])
    if any((z == t).sum() < n_per_task + 1 for t in range(n_tasks)):
        raise ParameterError(
            "n_per_task is too large for the drawn prompts; lower it.", argument="n_per_task"
        )
    train_idx = np.setdiff1d(np.arange(len(z)), evals_idx)[:n_train_sequences]

    def subset(idx: np.ndarray) -> TokenData:
        return TokenData(
            pool.tokens[idx],
            pool.loss_mask[idx],
            pool.vocab_size,
            {n: v[idx] for n, v in pool.latent.items()},
        )

    train, evals = subset(train_idx), subset(evals_idx)
    model = build_model(cfg, seed=seed)
    kept = train_with_checkpoints(model, train, tcfg, checkpoints, out_dir=out_dir)
    probe = copy.deepcopy(model)  # one copy, reloaded per checkpoint
    rows = []
    for step, state in kept:
        probe.load_state_dict(state)
        rows.append((step, _evaluate(probe, evals, k, n_tasks)))
    get = {key: np.array([r[key] for _, r in rows]) for key in rows[0][1]}
    return TaskVectorFormation(
        steps=np.array([s for s, _ in rows]),
        decodability=get["decodability"],
        td=get["td"],
        task_td=get["task_td"],
        accuracy=get["accuracy"],
        task_accuracy=get["task_accuracy"],
        patch_layer=get["patch_layer"].astype(int),
        patch_base=get["patch_base"],
        patch_self=get["patch_self"],
        patch_cross=get["patch_cross"],
        cross_base=get["cross_base"],
        patch_self_layers=get["patch_self_layers"],
        patch_cross_layers=get["patch_cross_layers"],
        correlation=_pearson(get["td"], get["accuracy"]),
        task_correlation=_pearson(get["task_td"], get["task_accuracy"]),
        chance_td=1.0 / n_tasks,
        n_per_task=n_per_task,
    )
