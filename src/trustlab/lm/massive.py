"""Disrupting massive values in Q and K: contextual against parametric knowledge (Jin et al. 2025).

Jin et al. [1]_ find that the queries and keys (not the values) of RoPE models hold a few
*massive* dimensions (L2 norm over tokens far above the head's mean, see
:func:`~trustlab.lm.internals.massive_values`), and that replacing them by their mean destroys
tasks that read the context (passkey retrieval, in-context QA) while tasks that recall
parametric knowledge (facts stored in the weights) suffer much less; replacing as many random
dimensions changes little.

- :func:`disrupt_massive_values`: the disruption as hook edits for any causal LM
  (:func:`~trustlab.lm.run_with_hooks` ``edits=``): in every block and head, the ``n_dims``
  largest-norm dimensions of Q and K (or, for the control, as many random other ones) are set to
  their mean over the tokens of a reference batch, before RoPE is applied.
- :func:`contextual_parametric_task`: a mixture a tiny model learns in seconds: a contextual
  task (a random sequence, a separator, the same sequence again: the copy is predictable only
  from the context, by induction) and a parametric one (keys followed by their value under a
  fixed map: predictable only from the weights).
- :func:`disruption_study`: accuracy of each task, clean, with the massive dimensions disrupted
  and with random ones disrupted, plus the concentration of Q, K and V and where the top
  dimensions fall among RoPE's frequencies.
- :func:`rope_frequency_profile`: the share of Q or K energy per RoPE frequency beside the
  rotation of each frequency over the context (where the paper puts massive values: the
  frequencies that barely turn).

References
----------
.. [1] Jin, Mei, Xu, Sun, Tang, Du, Liu, Zhang. "Massive Values in Self-Attention Modules are the
   Key to Contextual Knowledge Understanding". ICML 2025.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trustlab._cache import publish, spec_digest, staging_dir, trained_dir
from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError, ParameterError
from trustlab.lm.corpora import TokenData
from trustlab.lm.hooks import HOOK_KINDS, hook_points, run_with_hooks
from trustlab.lm.internals import massive_values

__all__ = [
    "DisruptionStudy",
    "FrequencyProfile",
    "contextual_parametric_task",
    "disrupt_massive_values",
    "disruption_study",
    "load_massive_lab",
    "rope_base",
    "rope_frequency_profile",
    "rope_low_frequency",
    "task_accuracy",
]

TASKS = ("contextual", "parametric")


@validate_params(
    {
        "n": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_symbols": [Interval(numbers.Integral, 2, None, closed="left")],
        "length": [Interval(numbers.Integral, 1, None, closed="left")],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
        "map_seed": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def contextual_parametric_task(
    n: int, *, n_symbols: int = 32, length: int = 10, seed: int = 0, map_seed: int = 123
) -> TokenData:
    """Half contextual (copy a sequence seen in context), half parametric (a fixed map) sequences.

    Tokens ``0 .. n_symbols - 1`` are symbols; ``n_symbols`` marks a contextual sequence,
    ``n_symbols + 1`` a parametric one, ``n_symbols + 2`` is the separator. A contextual
    sequence is ``CTX s_1 .. s_L SEP s_1 .. s_L`` (loss on the copy); a parametric one is
    ``PAR k_1 f(k_1) .. k_L f(k_L) SEP`` with ``f`` a permutation fixed by ``map_seed`` (loss on
    the values). Both have ``2 * length + 2`` tokens.

    Parameters
    ----------
    n : int
        Number of sequences (even indices contextual, odd parametric).
    n_symbols : int, default=32
        Symbols (vocabulary ``n_symbols + 3``).
    length : int, default=10
        Symbols per copied sequence / key-value pairs per parametric sequence.
    seed : int, default=0
        Draws the sequences and keys.
    map_seed : int, default=123
        Fixes the parametric map (keep it between training and evaluation).

    Returns
    -------
    TokenData
        With ``latent["task"]``: 0 contextual, 1 parametric.

    Examples
    --------
    >>> d = contextual_parametric_task(4, n_symbols=8, length=3)
    >>> d.tokens.shape, d.latent["task"].tolist()
    ((4, 8), [0, 1, 0, 1])
    """
    ctx, par, sep = n_symbols, n_symbols + 1, n_symbols + 2
    fmap = np.random.default_rng(map_seed).permutation(n_symbols)
    rng = np.random.default_rng(seed)
    toks = np.zeros((n, 2 * length + 2), np.int64)
    mask = np.zeros(toks.shape, bool)
    task = np.arange(n) % 2
    for i in range(n):
        s = rng.integers(0, n_symbols, length)
        if task[i] == 0:
            toks[i] = [ctx, *s, sep, *s]
            mask[i, length + 2 :] = True
        else:
            toks[i, 0], toks[i, -1] = par, sep
            toks[i, 1 : 2 * length + 1 : 2], toks[i, 2 : 2 * length + 1 : 2] = s, fmap[s]
            mask[i, 2 : 2 * length + 1 : 2] = True
    return TokenData(toks, mask, n_symbols + 3, {"task": task})


def _n_layers(model: Any) -> int:
    return len(hook_points(model)) // len(HOOK_KINDS)


def disrupt_massive_values(
    model: Any,
    input_ids: Any,
    *,
    n_dims: int = 2,
    kinds: tuple[str, ...] = ("q", "k"),
    control: bool = False,
    random_state: int | None = 0,
) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Hook edits that replace the massive Q/K dimensions by their mean (Jin et al. 2025, Sec. 4).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Any decoder-only causal LM (:func:`~trustlab.lm.run_with_hooks` reads its Q/K/V).
    input_ids : array-like of int, shape (batch, seq)
        Reference tokens: they rank the dimensions (L2 norm over their tokens) and give the means.
    n_dims : int, default=2
        Dimensions disrupted per block, head and projection.
    kinds : tuple of {"q", "k", "v"}, default=("q", "k")
        Projections to disrupt (the paper: Q and K).
    control : bool, default=False
        Disrupt ``n_dims`` random dimensions outside the top ``n_dims`` instead (the paper's
        random-disruption baseline).
    random_state : int or None, default=0
        Draws the control's dimensions.

    Returns
    -------
    dict of str to callable
        ``{"blocks.{i}.attn.{q|k}": f}`` for ``run_with_hooks(..., edits=...)``.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model, run_with_hooks
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=16, n_layers=1, n_heads=2))
    >>> edits = disrupt_massive_values(m, [[1, 2, 3, 4]], n_dims=1)
    >>> sorted(edits)
    ['blocks.0.attn.k', 'blocks.0.attn.q']
    >>> run_with_hooks(m, [[1, 2, 3, 4]], [], edits=edits)["logits"].shape
    torch.Size([1, 4, 10])
    """
    kinds = tuple(kinds)
    if not kinds or any(k not in ("q", "k", "v") for k in kinds):
        raise ParameterError(f"kinds must be a non-empty subset of q, k, v, got {kinds!r}.", argument="kinds")
    n = _n_layers(model)
    names = [f"blocks.{i}.attn.{x}" for i in range(n) for x in kinds]
    out = run_with_hooks(model, input_ids, names)
    d_head = int(out[names[0]].shape[-1])
    if isinstance(n_dims, bool) or not isinstance(n_dims, numbers.Integral) or not 1 <= n_dims <= d_head // 2:
        raise ParameterError(
            f"n_dims must be an integer from 1 to half the head width ({d_head // 2}), got {n_dims!r}.",
            argument="n_dims",
        )
    rng = np.random.default_rng(random_state)
    edits: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
    for name in names:
        x = out[name].float()  # (batch, heads, seq, d_head)
        order = np.argsort(-torch.linalg.vector_norm(x, dim=(0, 2)).cpu().numpy(), axis=-1, kind="stable")
        if control:
            dims = np.stack([rng.choice(row[n_dims:], n_dims, replace=False) for row in order])
        else:
            dims = order[:, :n_dims]
        sel = torch.zeros(x.shape[1], d_head, dtype=torch.bool)
        sel[torch.arange(x.shape[1])[:, None], torch.as_tensor(dims)] = True
        mean = out[name].mean(dim=(0, 2))

        def edit(t: torch.Tensor, sel: torch.Tensor = sel, mean: torch.Tensor = mean) -> torch.Tensor:
            s = sel.to(t.device)[None, :, None, :]
            return torch.where(s, mean.to(t.device, t.dtype)[None, :, None, :], t)

        edits[name] = edit
    return edits


def task_accuracy(
    model: Any, data: TokenData, *, edits: dict[str, Callable] | None = None
) -> dict[str, float]:
    """Greedy next-token accuracy on the loss positions of each task of ``data``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model.
    data : TokenData
        From :func:`contextual_parametric_task` (``latent["task"]``).
    edits : dict, optional
        Hook edits (e.g. from :func:`disrupt_massive_values`).

    Returns
    -------
    dict of str to float
        ``{"contextual": acc, "parametric": acc}``.

    Examples
    --------
    >>> model = load_massive_lab()
    >>> data = contextual_parametric_task(8, seed=1)
    >>> task_accuracy(model, data)
    {'contextual': 1.0, 'parametric': 1.0}
    >>> acc = task_accuracy(model, data, edits=disrupt_massive_values(model, data.tokens))
    >>> acc["contextual"] < 1.0
    True
    """
    if not isinstance(data, TokenData) or "task" not in data.latent:
        raise DataError(
            "data must be a TokenData with latent['task'], e.g. from contextual_parametric_task.",
            argument="data",
        )
    pred = run_with_hooks(model, data.tokens, [], edits=edits)["logits"].argmax(-1).cpu().numpy()
    ok = pred[:, :-1] == data.tokens[:, 1:]
    mask = data.loss_mask[:, 1:]
    task = np.asarray(data.latent["task"])
    return {t: float(ok[(task == j)[:, None] & mask].mean()) for j, t in enumerate(TASKS)}


def rope_low_frequency(dims: Any, d_head: int) -> np.ndarray:
    """Whether each Q/K dimension lies in the low-frequency half of RoPE (Llama's layout).

    Llama rotates dimension ``d`` with ``d + d_head / 2`` at frequency
    ``theta ** (-2 (d mod d_head/2) / d_head)``: the frequency falls with ``d mod (d_head / 2)``,
    so the low-frequency half is ``d mod (d_head / 2) >= d_head / 4``.

    Parameters
    ----------
    dims : array-like of int
        Dimension indices.
    d_head : int
        Head width.

    Returns
    -------
    ndarray of bool

    Examples
    --------
    >>> rope_low_frequency([0, 3, 4, 7], 8).tolist()
    [False, True, False, True]
    """
    half = d_head // 2
    return (np.asarray(dims) % half) >= half // 2


@dataclass(frozen=True)
class FrequencyProfile:
    """Where the energy of Q (or K) sits among RoPE's frequencies.

    Attributes
    ----------
    energy_share : ndarray, shape (d_head // 2,)
        Share of the squared norm (summed over blocks, heads and the pair ``d``, ``d + d_head/2``)
        at each frequency index ``j``; ``j = 0`` rotates fastest.
    rotation : ndarray, shape (d_head // 2,)
        Radians frequency ``j`` turns over ``length`` tokens: ``length * theta ** (-2 j / d_head)``.

    See Also
    --------
    rope_frequency_profile : builds it.

    Examples
    --------
    >>> p = FrequencyProfile(np.array([0.5, 0.3, 0.1, 0.1]), np.array([64.0, 6.4, 0.64, 0.064]))
    >>> round(p.low_frequency_share(), 2), round(p.share_rotating(1.0), 2)
    (0.2, 0.8)
    """

    energy_share: np.ndarray
    rotation: np.ndarray

    def low_frequency_share(self) -> float:
        """Energy share of the low-frequency half (``j >= d_head / 4``, as :func:`rope_low_frequency`).

        Returns
        -------
        float
        """
        return float(self.energy_share[len(self.energy_share) // 2 :].sum())

    def share_rotating(self, radians: float) -> float:
        """Energy share of the frequencies that turn at least ``radians`` over the context.

        Parameters
        ----------
        radians : float
            The rotation threshold.

        Returns
        -------
        float
        """
        return float(self.energy_share[self.rotation >= radians].sum())


_INTERLEAVED_ROPE = ("gptj", "codegen")  # rotate every other dimension, not the two halves


def rope_base(config: Any) -> float | None:
    """RoPE's base ``theta`` of a ``transformers`` config, or None where the profile does not apply.

    None for models without RoPE (GPT-2's learned positions), with rotary embeddings on part of
    each head (``partial_rotary_factor`` or ``rotary_pct`` below 1) or in the interleaved
    layout (GPT-J, CodeGen): :func:`rope_frequency_profile` assumes Llama's halves layout.

    Parameters
    ----------
    config : transformers.PretrainedConfig
        ``model.config``.

    Returns
    -------
    float or None

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> cfg = {"vocab_size": 10, "d_model": 16, "n_layers": 1, "n_heads": 2}
    >>> rope_base(build_model(ModelConfig("llama", **cfg)).config)
    10000.0
    >>> rope_base(build_model(ModelConfig("gpt2", **cfg)).config) is None
    True
    """
    params = dict(getattr(config, "rope_parameters", None) or {})
    theta = params.get("rope_theta", getattr(config, "rope_theta", None))
    partial = params.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", None))
    pct = getattr(config, "rotary_pct", None)
    if (
        theta is None
        or getattr(config, "model_type", "") in _INTERLEAVED_ROPE
        or any(f is not None and float(f) < 1 for f in (partial, pct))
    ):
        return None
    return float(theta)


@validate_params(
    {
        "length": [Interval(numbers.Integral, 1, None, closed="left")],
        "theta": [Interval(numbers.Real, 1, None, closed="neither")],
    }
)
def rope_frequency_profile(norms: Any, *, length: int, theta: float = 10000.0) -> FrequencyProfile:
    """Share of Q or K energy per RoPE frequency, beside how far each frequency turns over the context.

    The paper [1]_ places the massive Q/K dimensions of 7B models in RoPE's low-frequency
    dimensions, the ones that barely rotate over the context; this profile shows where a
    model's Q/K energy sits instead, for Llama's layout (dimension ``d`` paired with
    ``d + d_head / 2`` at frequency ``theta ** (-2 (d mod d_head/2) / d_head)``).

    Parameters
    ----------
    norms : array-like, shape (..., d_head)
        Per-dimension L2 norms over tokens, e.g. ``massive_values(model, ids).norms["q"]``
        (blocks, heads, d_head); every leading axis is summed over.
    length : int
        The context length of the tokens the norms were taken on.
    theta : float, default=10000.0
        RoPE's base (:func:`rope_base` reads it from the model's config).

    Returns
    -------
    FrequencyProfile

    Examples
    --------
    >>> from trustlab.lm import load_shipped
    >>> model, tok, _ = load_shipped("micro-llama-sorting")
    >>> ids = np.random.default_rng(0).integers(0, model.config.vocab_size, (8, 16))
    >>> norms = massive_values(model, ids).norms["q"]
    >>> p = rope_frequency_profile(norms, length=16, theta=rope_base(model.config))
    >>> p.energy_share.shape == (norms.shape[-1] // 2,), round(float(p.energy_share.sum()), 6)
    (True, 1.0)
    """
    a = np.asarray(norms, dtype=float)
    if a.ndim < 1 or a.shape[-1] < 2 or a.shape[-1] % 2:
        raise DataError(
            f"norms must end in an even head width (d_head), got shape {a.shape}; "
            "give massive_values(...).norms['q'] or ['k'].",
            argument="norms",
        )
    if not np.all(np.isfinite(a)) or np.any(a < 0) or not np.any(a > 0):
        raise DataError("norms must be finite, non-negative and not all zero.", argument="norms")
    half = a.shape[-1] // 2
    energy = (a**2).reshape(-1, a.shape[-1]).sum(axis=0)
    pair = energy[:half] + energy[half:]
    rotation = length * float(theta) ** (-2.0 * np.arange(half) / a.shape[-1])
    return FrequencyProfile(pair / pair.sum(), rotation)


@dataclass(frozen=True)
class DisruptionStudy:
    """Task accuracies under disruption, and the concentration of Q, K and V.

    Attributes
    ----------
    clean, massive, random : dict of str to float
        Accuracy per task with no edit, with the top Q/K dimensions disrupted, with random ones.
    concentration : dict of str to float
        ``max_d M / mean_d M`` for ``q``, ``k``, ``v``, the largest over blocks and heads.
    low_frequency_share : float
        Share of the (block, head) top Q and K dimensions in RoPE's low-frequency half.

    See Also
    --------
    disruption_study : builds it.

    Examples
    --------
    >>> acc = {"contextual": 1.0, "parametric": 1.0}
    >>> s = DisruptionStudy(acc, {"contextual": 0.75, "parametric": 1.0}, acc, {"q": 3.0}, 0.5)
    >>> s.drops()
    {'contextual': 0.25, 'parametric': 0.0}
    """

    clean: dict[str, float]
    massive: dict[str, float]
    random: dict[str, float]
    concentration: dict[str, float]
    low_frequency_share: float

    def drops(self) -> dict[str, float]:
        """Accuracy lost per task when the massive dimensions are disrupted.

        Returns
        -------
        dict of str to float
            ``clean[t] - massive[t]`` for ``t`` in ``("contextual", "parametric")``.
        """
        return {t: self.clean[t] - self.massive[t] for t in TASKS}


def disruption_study(
    model: Any, data: TokenData, *, n_dims: int = 2, random_state: int = 0
) -> DisruptionStudy:
    """The paper's disruption experiment on a model and a two-task dataset.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model.
    data : TokenData
        Held-out sequences with ``latent["task"]`` (:func:`contextual_parametric_task`).
    n_dims : int, default=2
        Dimensions disrupted per block, head, Q and K.
    random_state : int, default=0
        Draws the control's dimensions.

    Returns
    -------
    DisruptionStudy

    Examples
    --------
    >>> study = disruption_study(load_massive_lab(), contextual_parametric_task(40, seed=1))
    >>> study.clean, study.random  # random dimensions: no loss
    ({'contextual': 1.0, 'parametric': 1.0}, {'contextual': 1.0, 'parametric': 1.0})
    >>> drops = study.drops()  # the massive ones: context reading suffers more
    >>> drops["contextual"] > drops["parametric"]
    True
    """
    clean = task_accuracy(model, data)
    top = task_accuracy(model, data, edits=disrupt_massive_values(model, data.tokens, n_dims=n_dims))
    rnd = task_accuracy(
        model,
        data,
        edits=disrupt_massive_values(
            model, data.tokens, n_dims=n_dims, control=True, random_state=random_state
        ),
    )
    mv = massive_values(model, data.tokens)
    conc = {x: float(c.max()) for x, c in mv.concentration().items()}
    d_head = mv.norms["q"].shape[-1]
    tops = np.concatenate([mv.norms[x].argmax(-1).ravel() for x in "qk"])
    return DisruptionStudy(clean, top, rnd, conc, float(rope_low_frequency(tops, d_head).mean()))


_LAB: dict[str, Any] = {
    "model": {"d_model": 64, "n_layers": 2, "n_heads": 4, "max_len": 32, "seed": 1},
    "data": {"n": 4000, "n_symbols": 32, "length": 10, "seed": 0},
    "train": {"steps": 300, "batch_size": 32, "lr": 5e-3, "warmup": 30, "seed": 1},
}


def load_massive_lab(arch: str = "llama", *, cache_dir: str | Path | None = None) -> Any:
    """A 2-block width-64 model trained on :func:`contextual_parametric_task` (shipped or cached).

    The Llama ships (``trustlab/_models``); the GPT-2 is trained on first use into the cache
    (about 16 s CPU, 300 steps). Both tasks reach accuracy 1.0 held out.

    Parameters
    ----------
    arch : {"llama", "gpt2"}, default="llama"
        RoPE (Llama) or learned positions (GPT-2), the paper's comparison.
    cache_dir : str or Path, optional
        Where the checkpoint lives (default ``$TRUSTLAB_CACHE/lm`` or ``~/.cache/trustlab/lm``).

    Returns
    -------
    transformers.PreTrainedModel
        In eval mode.

    Examples
    --------
    >>> model = load_massive_lab()  # the shipped Llama: no training
    >>> model.config.num_hidden_layers, model.config.hidden_size, model.training
    (2, 64, False)
    >>> gpt2 = load_massive_lab("gpt2")  # trained on first use, about 16 s  # doctest: +SKIP
    """
    from trustlab.lm.models import ModelConfig, build_model, load_model, save_model
    from trustlab.lm.training import TrainConfig, train_model

    if arch not in ("llama", "gpt2"):
        raise ParameterError(f"arch must be 'llama' or 'gpt2', got {arch!r}.", argument="arch")
    spec = {**_LAB, "arch": arch}
    path = trained_dir(cache_dir, "lm", f"massive-{arch}-{spec_digest(spec)}")
    if (path / "done").is_file():
        return load_model(path).eval()
    m = dict(_LAB["model"])
    seed = m.pop("seed")
    data = contextual_parametric_task(**_LAB["data"])
    model = build_model(ModelConfig(arch, vocab_size=data.vocab_size, **m), seed=seed)
    train_model(model, data, TrainConfig(**_LAB["train"]))
    tmp = staging_dir(path)
    save_model(model, tmp)
    (tmp / "recipe.json").write_text(json.dumps(spec, indent=1))
    (tmp / "done").write_text("ok\n")
    publish(tmp, path)
    return model.eval()
