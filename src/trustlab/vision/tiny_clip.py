"""The vision lab's tiny CLIP: a dual encoder trained contrastively on digits and shapes, shipped.

A CLIP-like model small enough to train on one CPU thread: an MLP image tower on 8x8 images and a
2-layer causal text transformer pooled at its end-of-text token (CLIP's layout), trained with the
symmetric contrastive loss on scikit-learn's digits and six procedural shapes, each captioned by
one of five templates with one of three names per concept. It is the substrate of the
prompt-tuning rows (:mod:`trustlab.uncertainty.prompt_tuning`): it exposes ``image_encoder``,
``token_embedding``, ``text_encoder(embeddings, eot_index)``, ``tokenize`` and ``logit_scale``,
the interface those methods take from any dual encoder.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import cache_root, save_npz, spec_digest
from trustlab.errors import DataError, ParameterError
from trustlab.vision.classifiers import digits_split, one_thread, require_torch

__all__ = [
    "CONCEPTS",
    "FILLER_WORDS",
    "DigitTask",
    "TinyClipRecipe",
    "digit_task",
    "outlier_vocabulary",
    "tiny_clip",
    "train_tiny_clip",
]

CONCEPTS: tuple[tuple[str, str, str], ...] = (
    ("zero", "0", "null"),
    ("one", "1", "eins"),
    ("two", "2", "zwei"),
    ("three", "3", "drei"),
    ("four", "4", "vier"),
    ("five", "5", "fuenf"),
    ("six", "6", "sechs"),
    ("seven", "7", "sieben"),
    ("eight", "8", "acht"),
    ("nine", "9", "neun"),
    ("bar", "dash", "line"),
    ("pillar", "stick", "column"),
    ("box", "square", "frame"),
    ("slash", "diagonal", "stroke"),
    ("blob", "dot", "spot"),
    ("checker", "grid", "board"),
)
"""The lab's concepts (digits 0-9, then six shapes), three names each; the first is the class name."""

FILLER_WORDS = ("apple", "river", "cloud", "table", "music", "garden", "window", "storm", "bread", "candle")
"""Words in the vocabulary that no caption uses (their embeddings are never trained)."""

_TEMPLATES = (
    "a photo of the digit",
    "a drawing of a",
    "an image of",
    "a picture of the number",
    "a sketch of a",
)
_SPECIAL = ("<pad>", "<sos>", "<eot>")
_MAX_LEN = 12


def _vocabulary() -> tuple[str, ...]:
    template_words = sorted({w for t in _TEMPLATES for w in t.split()})
    names = [w for c in CONCEPTS for w in c]
    return _SPECIAL + tuple(template_words) + tuple(names) + FILLER_WORDS


class _Tokenizer:
    """Word-level tokenizer: ``<sos> words <eot> <pad>...`` of fixed length, CLIP's layout."""

    def __init__(self, words: Sequence[str], max_len: int) -> None:
        self.index = {w: i for i, w in enumerate(words)}
        self.max_len = max_len

    def __call__(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        ids = np.zeros((len(texts), self.max_len), dtype=np.int64)
        eot = np.zeros(len(texts), dtype=np.int64)
        for row, text in enumerate(texts):
            words = str(text).lower().replace(".", " ").split()
            unknown = [w for w in words if w not in self.index or w in _SPECIAL]
            if unknown:
                raise DataError(
                    f"the tiny CLIP's vocabulary has no word {unknown[0]!r} (in {text!r}); use words of "
                    "trustlab.vision.tiny_clip.CONCEPTS, FILLER_WORDS or its templates.",
                    argument="texts",
                )
            if len(words) + 2 > self.max_len:
                raise DataError(f"text {text!r} is longer than {self.max_len - 2} words.", argument="texts")
            seq = [self.index["<sos>"], *(self.index[w] for w in words), self.index["<eot>"]]
            ids[row, : len(seq)] = seq
            eot[row] = len(seq) - 1
        return ids, eot


def _build(n_words: int, width: int, embed_dim: int, seed: int) -> Any:
    torch = require_torch()
    nn = torch.nn
    torch.manual_seed(seed)

    class TinyClip(nn.Module):  # type: ignore[name-defined]
        """Image tower, text tower and logit scale (see the module docstring)."""

        n_prefix = 1
        pixel_range = (0.0, 1.0)  # digits and shapes, as digits_split scales them

        def __init__(self) -> None:
            super().__init__()
            self.image_encoder = nn.Sequential(
                nn.Flatten(),
                nn.Linear(64, 2 * width),
                nn.GELU(),
                nn.Linear(2 * width, 2 * width),
                nn.GELU(),
                nn.Linear(2 * width, embed_dim),
            )
            self.token_embedding = nn.Embedding(n_words, width)
            self.positional = nn.Parameter(torch.randn(_MAX_LEN, width) * 0.02)
            layer = nn.TransformerEncoderLayer(
                width, 4, 2 * width, 0.0, activation="gelu", batch_first=True, norm_first=True
            )
            self.transformer = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.ln_final = nn.LayerNorm(width)
            self.text_projection = nn.Linear(width, embed_dim, bias=False)
            self.log_scale = nn.Parameter(torch.tensor(float(np.log(1 / 0.07))))
            self.register_buffer("causal", torch.triu(torch.full((_MAX_LEN, _MAX_LEN), float("-inf")), 1))
            self.tokenize = _Tokenizer(_vocabulary(), _MAX_LEN)

        @property
        def logit_scale(self) -> float:
            return float(self.log_scale.detach().exp().clamp(max=100.0))

        def text_encoder(self, embeddings: Any, eot_index: Any) -> Any:
            n = embeddings.shape[1]
            h = self.transformer(embeddings + self.positional[:n], mask=self.causal[:n, :n])
            h = self.ln_final(h)
            return self.text_projection(h[torch.arange(h.shape[0]), eot_index])

    return TinyClip()


@dataclass(frozen=True)
class TinyClipRecipe:
    """How the lab's tiny CLIP is trained (the default's weights ship with trustlab).

    Parameters
    ----------
    width : int, default=64
        Text width (the image tower's hidden width is twice it).
    embed_dim : int, default=64
        Joint embedding size.
    n_shapes : int, default=600
        Procedural shape images added to the 1,257 training digits.
    noise : float, default=0.5
        Standard deviation of the Gaussian pixel noise drawn afresh on every image each step (the
        downstream task adds the same noise, so zero-shot accuracy is below 100%).
    steps, lr, batch_size : int, float, int, default=(1000, 2e-3, 128)
        Adam steps, learning rate and batch of the contrastive loss.
    seed : int, default=0
        Seeds the weights, shapes, batches, captions and noise.

    See Also
    --------
    tiny_clip : loads (or trains once) the model of a recipe.
    train_tiny_clip : trains it from scratch.
    """

    width: int = 64
    embed_dim: int = 64
    n_shapes: int = 600
    noise: float = 0.5
    steps: int = 1000
    lr: float = 2e-3
    batch_size: int = 128
    seed: int = 0

    def fingerprint(self) -> str:
        """A short hash of the fields (names the cache file).

        Returns
        -------
        str
            12 hex digits.
        """
        return spec_digest(asdict(self))


def _shapes(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    images = np.zeros((n, 8, 8), dtype=np.float32)
    labels = rng.integers(6, size=n)
    for im, k in zip(images, labels, strict=True):
        r = rng.integers(1, 7)
        if k == 0:
            im[r, 1:7] = 1
        elif k == 1:
            im[1:7, r] = 1
        elif k == 2:
            im[1, 1:7] = im[6, 1:7] = im[1:7, 1] = im[1:7, 6] = 1
        elif k == 3:
            cols = np.arange(8) if rng.random() < 0.5 else np.arange(8)[::-1]
            im[np.arange(8), cols] = 1
        elif k == 4:
            a, b = rng.integers(2, 6, size=2)
            im[a - 1 : a + 2, b - 1 : b + 2] = 1
        else:
            im[::2, ::2] = 1
            im[1::2, 1::2] = 1
        im *= rng.uniform(0.6, 1.0)
    return images.reshape(n, 1, 8, 8), labels + 10


def _check_recipe(recipe: Any) -> TinyClipRecipe:
    if recipe is None:
        return TinyClipRecipe()
    if not isinstance(recipe, TinyClipRecipe):
        raise ParameterError("recipe must be a TinyClipRecipe or None.", argument="recipe")
    return recipe


def train_tiny_clip(recipe: TinyClipRecipe | None = None) -> Any:
    """Train the lab's tiny CLIP from scratch (about a minute on one CPU thread, which it uses).

    Parameters
    ----------
    recipe : TinyClipRecipe, optional
        Default :class:`TinyClipRecipe()` (the weights :func:`tiny_clip` ships).

    Returns
    -------
    torch.nn.Module
        The model, in eval mode, frozen.

    References
    ----------
    Radford et al. "Learning Transferable Visual Models From Natural Language Supervision". ICML 2021.

    Examples
    --------
    >>> model = train_tiny_clip(TinyClipRecipe(steps=2))  # doctest: +SKIP
    """
    r = _check_recipe(recipe)
    with one_thread():  # as the shipped weights were trained (the thread count changes float sums)
        return _train(r)


def _train(r: TinyClipRecipe) -> Any:
    torch = require_torch()
    rng = np.random.default_rng(r.seed)
    X_digits, _, y_digits, _ = digits_split(random_state=0)
    X_shapes, y_shapes = _shapes(r.n_shapes, rng)
    X = torch.as_tensor(np.concatenate([X_digits, X_shapes]))
    y = np.concatenate([y_digits, y_shapes])
    model = _build(len(_vocabulary()), r.width, r.embed_dim, r.seed)
    opt = torch.optim.Adam(model.parameters(), lr=r.lr)
    gen = torch.Generator().manual_seed(r.seed)
    batch = min(r.batch_size, len(y))
    for _ in range(r.steps):
        idx = rng.choice(len(y), batch, replace=False)
        captions = [
            f"{_TEMPLATES[rng.integers(len(_TEMPLATES))]} {CONCEPTS[c][rng.integers(3)]}" for c in y[idx]
        ]
        ids, eot = model.tokenize(captions)
        images = (X[idx] + r.noise * torch.randn(X[idx].shape, generator=gen)).clamp(0, 1)
        fi = torch.nn.functional.normalize(model.image_encoder(images), dim=-1)
        ft = model.text_encoder(model.token_embedding(torch.as_tensor(ids)), torch.as_tensor(eot))
        ft = torch.nn.functional.normalize(ft, dim=-1)
        logits = model.log_scale.exp().clamp(max=100.0) * fi @ ft.T
        same = torch.as_tensor(y[idx][:, None] == y[idx][None, :], dtype=torch.float32)
        target = same / same.sum(1, keepdim=True)  # captions of the same concept are all positives
        loss = (
            -(target * logits.log_softmax(1)).sum(1).mean() - (target * logits.T.log_softmax(1)).sum(1).mean()
        )
        opt.zero_grad()
        (loss / 2).backward()
        opt.step()
    return _freeze(model)


def _freeze(model: Any) -> Any:
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def _to_arrays(model: Any) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy().astype(np.float16) for k, v in model.state_dict().items()}


def _from_arrays(arrays: Any, r: TinyClipRecipe) -> Any:
    torch = require_torch()
    model = _build(len(_vocabulary()), r.width, r.embed_dim, r.seed)
    model.load_state_dict({k: torch.as_tensor(np.asarray(arrays[k], dtype=np.float32)) for k in arrays.files})
    return _freeze(model)


_SHIPPED = "tiny_clip_digits.npz"


def tiny_clip(recipe: TinyClipRecipe | None = None, *, cache_dir: str | Path | None = None) -> Any:
    """The lab's tiny CLIP (the default recipe ships; any other is trained once into a cache).

    Weights are stored as float16 and loaded as float32. Other recipes are trained by
    :func:`train_tiny_clip` on first use (about a minute) and kept in ``cache_dir`` (default
    ``$TRUSTLAB_CACHE/vision`` or ``~/.cache/trustlab/vision``) under a hash of the recipe.

    Parameters
    ----------
    recipe : TinyClipRecipe, optional
        Default :class:`TinyClipRecipe()`.
    cache_dir : str or Path, optional
        Where trained models are kept.

    Returns
    -------
    torch.nn.Module
        Frozen, in eval mode, with ``image_encoder``, ``token_embedding``,
        ``text_encoder(embeddings, eot_index)``, ``tokenize(texts) -> (ids, eot_index)``,
        ``n_prefix = 1`` and ``logit_scale``.

    Examples
    --------
    >>> model = tiny_clip()
    >>> ids, eot = model.tokenize(["a photo of the digit seven"])
    >>> ids.shape, int(eot[0])
    ((1, 12), 7)
    """
    r = _check_recipe(recipe)
    if r == TinyClipRecipe():
        raw = resources.files("trustlab.vision").joinpath(_SHIPPED).read_bytes()
        with np.load(io.BytesIO(raw)) as f:
            return _from_arrays(f, r)
    path = cache_root(cache_dir, "vision") / f"tiny-clip-{r.fingerprint()}.npz"
    if not path.is_file():
        save_npz(path, _to_arrays(train_tiny_clip(r)))
    with np.load(path) as f:
        return _from_arrays(f, r)


def ship_default(path: str | Path) -> None:  # pragma: no cover - run once by a maintainer
    """Train the default recipe and write the package-data file."""
    np.savez_compressed(Path(path), **_to_arrays(train_tiny_clip()))  # type: ignore[arg-type]


@dataclass(frozen=True)
class DigitTask:
    """A base-to-new prompt-tuning task on noisy digits (see :func:`digit_task`).

    ``X_*`` are ``(n, 1, 8, 8)`` float32 images in [0, 1]; ``y_*`` index ``base_names`` or
    ``new_names``. ``X_shots`` are the few-shot training images of the base classes; ``X_base``
    and ``X_new`` the held-out test images (digits the model never saw, with fresh noise).

    Attributes
    ----------
    X_shots, y_shots : numpy.ndarray
        Few-shot training images of the base classes and their indices into ``base_names``.
    X_base, y_base : numpy.ndarray
        Held-out base-class test images and labels.
    X_new, y_new : numpy.ndarray
        Held-out new-class test images and their indices into ``new_names``.
    base_names, new_names : tuple of str
        Class names of the base and new classes.

    See Also
    --------
    digit_task : builds it.
    """

    X_shots: np.ndarray
    y_shots: np.ndarray
    X_base: np.ndarray
    y_base: np.ndarray
    X_new: np.ndarray
    y_new: np.ndarray
    base_names: tuple[str, ...]
    new_names: tuple[str, ...]


def digit_task(
    *,
    base: Sequence[int] = (0, 1, 2, 3, 4),
    new: Sequence[int] = (5, 6, 7, 8, 9),
    shots: int = 16,
    noise: float = 0.5,
    n_draws: int = 2,
    corner_mark: float = 0.0,
    random_state: int = 0,
) -> DigitTask:
    """The base-to-new split of the paper's protocol on the lab's digits.

    Parameters
    ----------
    base, new : sequence of int
        Digits to tune on and digits to evaluate transfer on (disjoint).
    shots : int, default=16
        Training images per base class (from the digits the tiny CLIP was trained on, freshly noised).
    noise : float, default=0.5
        Pixel noise (the tiny CLIP's training noise).
    n_draws : int, default=2
        Noise draws of each of the 540 held-out digits (more test images, same digits).
    corner_mark : float, default=0.0
        Brightness added (then clipped to [0, 1]) to the top-left 3x3 pixels of every image,
        shots and test alike: a downstream artefact the tiny CLIP never saw in pre-training, the
        lab's stand-in for a domain where the hand-written prompt is not the best one (0: none).
    random_state : int, default=0
        Seeds the shots and the noise.

    Returns
    -------
    DigitTask

    Examples
    --------
    >>> task = digit_task()
    >>> task.X_shots.shape, task.base_names[0], task.new_names[0]
    ((80, 1, 8, 8), 'zero', 'five')
    """
    base_l, new_l = [int(c) for c in base], [int(c) for c in new]
    if not base_l or not new_l or set(base_l) & set(new_l) or not set(base_l + new_l) <= set(range(10)):
        raise ParameterError("base and new must be disjoint, non-empty sets of digits 0-9.", argument="base")
    if int(shots) < 1 or int(n_draws) < 1 or not 0 <= float(noise) < 1:
        raise ParameterError("shots and n_draws must be >= 1 and noise in [0, 1).", argument="shots")
    if not 0 <= float(corner_mark) <= 1:
        raise ParameterError("corner_mark must be in [0, 1].", argument="corner_mark")
    rng = np.random.default_rng(random_state)
    X_tr, X_te, y_tr, y_te = digits_split(random_state=0)

    def noisy(X: np.ndarray) -> np.ndarray:
        out = np.clip(X + noise * rng.standard_normal(X.shape), 0, 1)
        if corner_mark:
            out[..., :3, :3] = np.clip(out[..., :3, :3] + float(corner_mark), 0, 1)
        return out.astype(np.float32)

    idx = np.concatenate([rng.choice(np.flatnonzero(y_tr == c), shots, replace=False) for c in base_l])
    X_shots, y_shots = noisy(X_tr[idx]), np.searchsorted(np.sort(base_l), y_tr[idx])

    def split(classes: list[int]) -> tuple[np.ndarray, np.ndarray]:
        m = np.isin(y_te, classes)
        X = np.concatenate([noisy(X_te[m]) for _ in range(int(n_draws))])
        y = np.tile(np.searchsorted(np.sort(classes), y_te[m]), int(n_draws))
        return X, y

    X_b, y_b = split(base_l)
    X_n, y_n = split(new_l)
    return DigitTask(
        X_shots,
        y_shots,
        X_b,
        y_b,
        X_n,
        y_n,
        tuple(CONCEPTS[c][0] for c in sorted(base_l)),
        tuple(CONCEPTS[c][0] for c in sorted(new_l)),
    )


def outlier_vocabulary(exclude: Sequence[str] = ()) -> list[str]:
    """The lab's label words that are not names of the excluded concepts (DOR's outlier vocabulary).

    Parameters
    ----------
    exclude : sequence of str
        Class names (first names of :data:`CONCEPTS`) whose three names are left out, e.g. the
        base classes.

    Returns
    -------
    list of str
        Concept names and :data:`FILLER_WORDS`.

    Examples
    --------
    >>> len(outlier_vocabulary(["zero", "one"]))
    52
    """
    excluded = {w for c in CONCEPTS if c[0] in set(exclude) for w in c}
    return [w for c in CONCEPTS for w in c if w not in excluded] + list(FILLER_WORDS)
