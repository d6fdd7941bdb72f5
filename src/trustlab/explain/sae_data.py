"""Activations for sparse autoencoders: a planted hierarchical feature model and a hook collector.

:func:`make_hierarchical_activations` is the toy model of Chanin et al. (2024) that Bussmann et
al. (2025, section 4.1) use to show feature absorption: binary features on a tree, each with
its own direction; a child fires only when its parent does, so "child implies parent", the
pattern a sparsity penalty rewards by absorbing the parent into the child's latent. The ground
truth (which features fired, their directions, the tree) makes absorption measurable exactly.

:func:`collect_activations` reads activations from a user's model: a ``transformers`` causal LM
at a ``trustlab.lm`` hook point (``blocks.{i}.resid_post`` ...), or any torch module at the
name of one of its submodules (``dict(model.named_modules())``).

References
----------
.. [1] Chanin, Wilken-Smith, Dulka, Bhatnagar, Bloom. "A is for Absorption: Studying Feature
   Splitting and Absorption in Sparse Autoencoders". arXiv:2409.14507, 2024.
.. [2] Bussmann, Nabeshima, Karvonen, Nanda. "Learning Multi-Level Features with Matryoshka
   Sparse Autoencoders". ICML 2025.
"""

from __future__ import annotations

import hashlib
import numbers
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.explain._sae_hooks import model_inputs, resolve_hook_point

__all__ = [
    "BiosCorpus",
    "HierarchicalActivations",
    "collect_activations",
    "make_bios_corpus",
    "make_hierarchical_activations",
]


@dataclass(frozen=True)
class HierarchicalActivations:
    """Activations made of planted hierarchical features.

    Attributes
    ----------
    X : ndarray of shape (n_samples, d)
        ``features @ directions`` plus Gaussian noise.
    features : ndarray of shape (n_samples, n_features)
        Each feature's magnitude in each row (0 when off).
    directions : ndarray of shape (n_features, d)
        Unit directions (orthonormal when ``d >= n_features``).
    parent : ndarray of int, shape (n_features,)
        Each feature's parent, ``-1`` for the top-level features.

    See Also
    --------
    make_hierarchical_activations : builds it.

    Examples
    --------
    >>> data = make_hierarchical_activations(50, n_parents=2, n_children=1, d=4)
    >>> data.features.shape, data.directions.shape, data.parents.tolist()
    ((50, 4), (4, 4), [0, 1])
    >>> bool(((data.features[:, 2] > 0) <= (data.features[:, 0] > 0)).all())  # child implies parent
    True
    """

    X: np.ndarray
    features: np.ndarray
    directions: np.ndarray
    parent: np.ndarray

    @property
    def parents(self) -> np.ndarray:
        """Indices of the features that have children."""
        return np.unique(self.parent[self.parent >= 0])


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_parents": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_children": [Interval(numbers.Integral, 0, None, closed="left")],
        "d": [Interval(numbers.Integral, 1, None, closed="left")],
        "p_parent": [Interval(numbers.Real, 0, 1, closed="right")],
        "p_child": [Interval(numbers.Real, 0, 1, closed="right")],
        "exclusive_children": ["boolean"],
        "magnitude_std": [Interval(numbers.Real, 0, None, closed="left")],
        "noise": [Interval(numbers.Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_hierarchical_activations(
    n_samples: int = 4000,
    *,
    n_parents: int = 4,
    n_children: int = 3,
    d: int = 20,
    p_parent: float = 0.25,
    p_child: float = 0.6,
    exclusive_children: bool = True,
    magnitude_std: float = 0.0,
    noise: float = 0.0,
    random_state: Any = 0,
) -> HierarchicalActivations:
    """Sample activations from a two-level tree of binary features (the absorption toy model).

    Parameters
    ----------
    n_samples : int, default=4000
        Rows.
    n_parents : int, default=4
        Top-level features, each on independently with probability ``p_parent``.
    n_children : int, default=3
        Children per parent; given its parent is on, a child is on with probability
        ``p_child`` (one child at most, chosen uniformly, when ``exclusive_children``).
    d : int, default=20
        Activation width (the paper's toy uses 20).
    p_parent, p_child : float
        Firing probabilities (the paper's edge probabilities ``p(parent -> child)``).
    exclusive_children : bool, default=True
        Children of one parent are mutually exclusive (Chanin et al.'s first-letter setting).
    magnitude_std : float, default=0.0
        Magnitudes are ``1 + magnitude_std * N(0, 1)`` clipped at 0.1 (``0``: binary, as in
        the paper's toy).
    noise : float, default=0.0
        Standard deviation of isotropic Gaussian noise added to ``X``.
    random_state : int, Generator or None, default=0

    Returns
    -------
    HierarchicalActivations
        Features are ordered parents first (``0 .. n_parents - 1``), then each parent's children.

    Examples
    --------
    >>> data = make_hierarchical_activations(100, n_parents=2, n_children=2, d=8)
    >>> data.X.shape, data.parent.tolist()
    ((100, 8), [-1, -1, 0, 0, 1, 1])
    """
    rng = make_generator(random_state)
    n_features = n_parents * (1 + n_children)
    parent = np.concatenate([np.full(n_parents, -1), np.repeat(np.arange(n_parents), n_children)])
    on = np.zeros((n_samples, n_features), dtype=bool)
    on[:, :n_parents] = rng.random((n_samples, n_parents)) < p_parent
    if n_children:
        for j in range(n_parents):
            kids = n_parents + j * n_children + np.arange(n_children)
            if exclusive_children:
                fire = on[:, j] & (rng.random(n_samples) < p_child)
                pick = rng.integers(0, n_children, n_samples)
                on[np.flatnonzero(fire), kids[pick[fire]]] = True
            else:
                on[:, kids] = on[:, [j]] & (rng.random((n_samples, n_children)) < p_child)
    mags = np.ones((n_samples, n_features))
    if magnitude_std > 0:
        mags = np.clip(1.0 + magnitude_std * rng.normal(size=mags.shape), 0.1, None)
    features = np.where(on, mags, 0.0)
    gauss = rng.normal(size=(max(d, n_features), max(d, n_features)))
    if d >= n_features:
        q, _ = np.linalg.qr(gauss[:d, :n_features])
        directions = q.T
    else:
        directions = gauss[:n_features, :d]
        directions = directions / np.linalg.norm(directions, axis=1, keepdims=True)
    X = features @ directions
    if noise > 0:
        X = X + noise * rng.normal(size=X.shape)
    return HierarchicalActivations(X=X, features=features, directions=directions, parent=parent)


def collect_activations(
    model: Any,
    inputs: Any,
    hook_point: str,
    *,
    attention_mask: Any = None,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
) -> np.ndarray:
    """Activations of a torch model at a hook point, one row per token (or per example).

    Parameters
    ----------
    model : torch.nn.Module
        A ``transformers`` causal LM (then ``hook_point`` may be a ``trustlab.lm`` name such as
        ``"blocks.1.resid_post"``), or any torch module (then ``hook_point`` names one of its
        submodules, as ``model.named_modules()`` lists them; the submodule's output, or its first
        element when it returns a tuple, is recorded).
    inputs : array-like of int (batch, seq), tensor, or dict of tensors
        Token ids, or the keyword arguments of ``model(**inputs)`` (e.g. a tokenizer's output).
    hook_point : str
        Where to read.
    attention_mask : array-like of 0/1, shape (batch, seq), optional
        Rows at padded positions are dropped (taken from ``inputs["attention_mask"]`` when given).
    batch_size : int, default=32
        Examples per forward pass.
    cache_dir : str or Path, optional
        Stream the activations batch by batch into a ``.npy`` file in this folder (created) and
        return it as a read-only NumPy memmap; the file is named by the hook point and a digest
        of the model's weights, the inputs and the mask, so a later call with the same ones reads
        it without running the model. Point it at a cache folder (e.g.
        ``$TRUSTLAB_CACHE/activations``), never at a repository. ``None``: in memory, nothing written.

    Returns
    -------
    ndarray of shape (n_rows, width)
        ``float32`` activations; ``(batch, seq, width)`` outputs are flattened to tokens (a
        read-only ``numpy.memmap`` when ``cache_dir`` is given).

    Raises
    ------
    ParameterError
        ``hook_point`` is not a hook point of the model (the message lists some that are).

    Examples
    --------
    >>> import torch
    >>> from trustlab.lm.models import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=16, n_layers=1, n_heads=2))
    >>> ids = torch.randint(0, 10, (4, 8), generator=torch.Generator().manual_seed(0))
    >>> collect_activations(m, ids, "blocks.0.resid_post").shape  # a trustlab.lm hook point
    (32, 16)
    >>> mask = torch.ones(4, 8, dtype=torch.long)
    >>> mask[:, 6:] = 0  # the last two positions are padding
    >>> collect_activations(m, {"input_ids": ids, "attention_mask": mask}, "model.layers.0.mlp").shape
    (24, 16)
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ParameterError(f"batch_size must be a positive int, got {batch_size!r}.", argument="batch_size")
    module = resolve_hook_point(model, hook_point)
    kwargs = model_inputs(inputs)
    if attention_mask is None and "attention_mask" in kwargs:
        attention_mask = kwargs["attention_mask"]
    mask = None if attention_mask is None else np.asarray(attention_mask).astype(bool)
    n = int(next(iter(kwargs.values())).shape[0])
    path = None
    if cache_dir is not None:
        path = (
            Path(cache_dir)
            / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', hook_point)[:60]}-{_digest(model, kwargs, mask)}.npy"
        )
        if path.is_file():
            return np.load(path, mmap_mode="r")
    chunks: list[np.ndarray] = []
    out: Any = None
    tmp = Path()
    row = 0
    for start in range(0, n, batch_size):
        part = {key: val[start : start + batch_size] for key, val in kwargs.items()}
        if module is not None:
            act = _module_output(model, module, part).numpy()
        else:
            from trustlab.lm.hooks import run_with_hooks

            act = run_with_hooks(model, part["input_ids"], [hook_point])[hook_point].float().cpu().numpy()
        seq = act.shape[1] if act.ndim == 3 else 0  # 0: one row per example
        if seq and mask is not None:
            if mask.shape != (n, seq):
                raise DataError(
                    f"attention_mask has shape {mask.shape}, but the activations are {(n, act.shape[1])}.",
                    argument="attention_mask",
                )
            act = act[mask[start : start + act.shape[0]]]
        elif seq:
            act = act.reshape(-1, act.shape[-1])
        if not np.all(np.isfinite(act)):
            raise DataError(
                f"the activations at {hook_point!r} hold NaN or inf; check the model's weights and dtype.",
                argument="model",
            )
        if path is None:
            chunks.append(act)
            continue
        if out is None:  # the file's shape is known from the first batch
            rows = (int(mask.sum()) if mask is not None else n * seq) if seq else n
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(rows, *act.shape[1:]))
        out[row : row + len(act)] = act
        row += len(act)
    if path is None:
        return np.concatenate(chunks).astype(np.float32, copy=False)
    out.flush()
    del out
    os.replace(tmp, path)
    return np.load(path, mmap_mode="r")


def _digest(model: Any, kwargs: dict[str, Any], mask: Any) -> str:
    """SHA-256 (first 16 hex digits) of the model's class and weights, the inputs and the mask."""
    import torch

    h = hashlib.sha256(type(model).__qualname__.encode())
    items = [*model.state_dict().items(), *sorted(kwargs.items())]
    for name, value in [*items, *([("mask", mask)] if mask is not None else [])]:
        t = value.detach().cpu() if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def _module_output(model: Any, module: Any, kwargs: dict[str, Any]) -> Any:
    import torch

    store: list[Any] = []

    def hook(mod: Any, args: Any, out: Any) -> None:
        store.append((out[0] if isinstance(out, tuple | list) else out).detach())

    handle = module.register_forward_hook(hook)
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(**kwargs)
    finally:
        handle.remove()
        model.train(was_training)
    return store[0].float().cpu()


# ------------------------------------------------------------ a planted Bias-in-Bios corpus
_NAMES = (
    ("James", "Robert", "Michael", "David", "Thomas", "Daniel", "Paul", "Mark", "Steven", "Kevin"),
    ("Mary", "Linda", "Susan", "Karen", "Sarah", "Emily", "Laura", "Anna", "Rachel", "Julia"),
)
_PRONOUNS = (("He", "his", "him"), ("She", "her", "her"))
_RELATIVES = (("wife", "son", "brother"), ("husband", "daughter", "sister"))
_PROFESSIONS = (
    ("professor", "lecturer in physics", "professor of history", "academic"),
    ("nurse", "registered nurse", "nurse practitioner", "staff nurse"),
)
_DUTIES = (
    (
        "teaches undergraduate courses",
        "supervises doctoral students",
        "publishes research in academic journals",
        "gives lectures at the university",
        "writes grant proposals for the department",
        "grades exams and essays",
        "serves on the faculty senate",
        "presents papers at scientific conferences",
    ),
    (
        "cares for patients on the ward",
        "administers medication to patients",
        "works night shifts at the hospital",
        "monitors the vital signs of patients",
        "assists doctors in the emergency room",
        "changes bandages and dressings",
        "comforts families in the intensive care unit",
        "takes blood samples at the clinic",
    ),
)
_FILLERS = (
    "lives in {city}",
    "enjoys hiking on weekends",
    "likes to cook for friends",
    "has lived in {city} for years",
    "plays the piano in the evenings",
    "volunteers at a local charity",
    "runs every morning before work",
    "reads novels on quiet evenings",
)
_CITIES = ("Boston", "Denver", "Chicago", "Seattle", "Atlanta", "Portland", "Dallas", "Miami")
_TEMPLATES = (
    "{Name} is a {job}. {He} {duty} and {filler}.",
    "{Name} works as a {job} and {duty}. In {his} free time {he} {filler}.",
    "As a {job}, {Name} {duty}. {He} {filler} with {his} {relative}.",
    "{Name} has been a {job} for {years} years. {He} {duty}.",
    "Meet {Name}, a {job} who {duty}. {His} {relative} says {he} {filler}.",
)


@dataclass(frozen=True)
class BiosCorpus:
    """Short biographies whose profession and gender vary independently (planted Bias in Bios).

    Attributes
    ----------
    texts : list of str
        One biography a row.
    profession : ndarray of int, shape (n_samples,)
        ``0`` professor, ``1`` nurse.
    gender : ndarray of int, shape (n_samples,)
        ``0`` male, ``1`` female (first name, pronouns and relatives).

    See Also
    --------
    make_bios_corpus : builds it.

    Examples
    --------
    >>> c = make_bios_corpus(8, random_state=0)
    >>> len(c.texts), c.profession.shape, c.gender.shape
    (8, (8,), (8,))
    """

    texts: list[str]
    profession: np.ndarray
    gender: np.ndarray


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 4, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_bios_corpus(n_samples: int = 2000, *, random_state: Any = 0) -> BiosCorpus:
    """A planted stand-in for SAEBench's Bias in Bios professor / nurse SCR task.

    Each biography fills one of five templates with a first name, pronouns and a relative of
    its gender (10 names a gender), a job title and one of eight duties of its profession
    (professor or nurse), and a neutral filler (hobby, city, years); profession and gender are
    drawn independently and uniformly, so every combination occurs (the balanced set from which
    SCR takes its biased subset). The profession is carried by the job title and the duty, the
    gender by the name, the pronouns and the relative.

    Parameters
    ----------
    n_samples : int, default=2000
        Biographies (at least 4).
    random_state : int, Generator or None, default=0

    Returns
    -------
    BiosCorpus

    Examples
    --------
    >>> c = make_bios_corpus(4, random_state=1)
    >>> print(c.texts[0].split(". ")[0])
    Meet Thomas, a lecturer in physics who serves on the faculty senate
    >>> int(c.profession[0]), int(c.gender[0])  # professor, male
    (0, 0)
    """
    rng = make_generator(random_state)
    prof = rng.integers(0, 2, n_samples)
    gender = rng.integers(0, 2, n_samples)
    texts = []
    for p, g in zip(prof, gender, strict=True):
        he, his, _ = _PRONOUNS[g]
        filler = str(rng.choice(_FILLERS)).format(city=rng.choice(_CITIES))
        text = str(rng.choice(_TEMPLATES)).format(
            Name=rng.choice(_NAMES[g]),
            job=rng.choice(_PROFESSIONS[p]),
            duty=rng.choice(_DUTIES[p]),
            filler=filler,
            relative=rng.choice(_RELATIVES[g]),
            years=int(rng.integers(2, 30)),
            He=he,
            he=he.lower(),
            His=his.capitalize(),
            his=his,
        )
        texts.append(text.replace(" a academic", " an academic"))
    return BiosCorpus(texts=texts, profession=prof.astype(int), gender=gender.astype(int))
