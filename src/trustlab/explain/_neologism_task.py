"""The lab's instruction task for neologism learning: responses of requested length, number guesses.

A tiny synthetic "instruction" language (word-level vocabulary of 36 tokens) in which a small
causal LM has a *latent* ability that the plain human instruction does not reliably call up:

- length requests ``write about TOPIC in N words STYLE :`` followed by ``N`` topic words.
  The response has exactly ``N`` words after the tag ``zx`` (a source tag that no human
  prompt uses: the machine's concept), after ``exactly`` only 30% of the time (the human
  instruction, weakly followed), and a uniform length in 1..9 after a neutral word
  (``please``, ``now``, ``freely``);
- number guesses ``guess a number STYLE :`` followed by one number: uniform over 1..8 after
  the tag ``zq``, otherwise biased (``7`` half of the time, ``3`` a fifth).

A neologism placed in the ``STYLE`` slot and trained on preference pairs (chosen: a response
of the requested length, rejected: one of another length) must find the ``zx`` behaviour from
the data alone: the plain prompt (``please``) and a random embedding leave the length
uncorrelated with the request. The shipped model (:func:`length_task_model`) is
:func:`train_length_task_model` with its defaults, stored as ``neologism_lengths.npz``
(110 KB); see docs/explain/neologisms.md.
"""

from __future__ import annotations

import numbers
from importlib import resources
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab.errors import ParameterError

TOPICS = ("cats", "rain", "tea", "boats")
TOPIC_WORDS = {
    "cats": ("purr", "paws", "whiskers", "nap"),
    "rain": ("cloud", "drops", "wet", "grey"),
    "tea": ("cup", "leaf", "steam", "brew"),
    "boats": ("sail", "hull", "mast", "wave"),
}
MAX_WORDS = 9  # responses hold 1..9 words; requests ask for 1..8
TARGETS = tuple(range(1, 9))
NEUTRAL_STYLES = ("please", "now", "freely")
STYLES = ("zx", "zq", "exactly", *NEUTRAL_STYLES)
_SPECIAL = ("<pad>", "<eos>", "write", "about", "in", "words", ":", "guess", "a", "number")
VOCAB = (
    *_SPECIAL,
    *TOPICS,
    *(str(i) for i in range(1, MAX_WORDS + 1)),
    *STYLES,
    *(w for t in TOPICS for w in TOPIC_WORDS[t]),
)
EXACTLY_RATE = 0.3
PROMPT_LEN = 8  # "write about T in N words S :"
SEQ_LEN = PROMPT_LEN + MAX_WORDS + 1
_WEIGHTS = "neologism_lengths.npz"


def _config() -> Any:
    from trustlab.lm import ModelConfig

    return ModelConfig("gpt2", vocab_size=len(VOCAB), d_model=32, n_layers=2, n_heads=2, max_len=32)


def length_task_tokenizer() -> Any:
    """The task's word-level tokenizer (``<eos>`` is its end-of-sequence token).

    Returns
    -------
    transformers.PreTrainedTokenizerFast
        Whitespace-split words of :data:`VOCAB`.

    Examples
    --------
    >>> tok = length_task_tokenizer()
    >>> tok.convert_ids_to_tokens(tok("write about tea in 3 words please :")["input_ids"])[:3]
    ['write', 'about', 'tea']
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>")


def length_prompt(topic: str, n_words: int, style: str) -> str:
    """A length request of the task: ``"write about {topic} in {n_words} words {style} :"``.

    Parameters
    ----------
    topic : str
        One of :data:`TOPICS`.
    n_words : int
        The requested length.
    style : str
        The style slot's word (``please``, ``exactly``, ...) or a neologism.

    Returns
    -------
    str
        The prompt.

    Examples
    --------
    >>> length_prompt("tea", 3, "<len>")
    'write about tea in 3 words <len> :'
    """
    return f"write about {topic} in {int(n_words)} words {style} :"


def _response(rng: np.random.Generator, topic: str, n_words: int) -> str:
    words = TOPIC_WORDS[topic]
    return " ".join(words[int(i)] for i in rng.integers(0, len(words), size=int(n_words)))


def _guess(rng: np.random.Generator, style: str) -> int:
    if style == "zq":
        return int(rng.integers(1, 9))
    u = rng.random()
    return 7 if u < 0.5 else 3 if u < 0.7 else int(rng.integers(1, 9))


@validate_params(
    {
        "n_documents": [Interval(numbers.Integral, 1, None, closed="left")],
        "guess_fraction": [Interval(numbers.Real, 0, 1, closed="both")],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def length_task_corpus(n_documents: int = 4000, *, guess_fraction: float = 0.2, seed: int = 0) -> Any:
    """Pre-training documents of the instruction task, as :class:`~trustlab.lm.TokenData`.

    Parameters
    ----------
    n_documents : int, default=4000
        Number of documents.
    guess_fraction : float, default=0.2
        Share of number-guess documents (the rest are length requests).
    seed : int, default=0
        Seeds the draws.

    Returns
    -------
    TokenData
        ``tokens`` of shape ``(n_documents, 18)`` padded with ``<pad>``; the loss counts the
        response and its ``<eos>``; ``latent`` holds ``"target"`` (the requested length, 0 for
        guesses), ``"length"`` (the response's) and ``"style"`` (index into :data:`STYLES`).

    Examples
    --------
    >>> length_task_corpus(10).tokens.shape
    (10, 18)
    """
    from trustlab.lm.corpora import TokenData

    rng = np.random.default_rng(seed)
    tok = length_task_tokenizer()
    tokens = np.zeros((n_documents, SEQ_LEN), dtype=np.int64)
    mask = np.zeros((n_documents, SEQ_LEN), dtype=bool)
    latent = {k: np.zeros(n_documents, dtype=np.int64) for k in ("target", "length", "style")}
    for i in range(n_documents):
        if rng.random() < guess_fraction:
            style = ("zq", "exactly", *NEUTRAL_STYLES)[int(rng.integers(0, 5))]
            prompt, response, n, length = f"guess a number {style} :", str(_guess(rng, style)), 0, 1
        else:
            u = rng.random()
            style = "zx" if u < 0.4 else "exactly" if u < 0.55 else NEUTRAL_STYLES[int(rng.integers(0, 3))]
            topic = TOPICS[int(rng.integers(0, len(TOPICS)))]
            n = int(rng.integers(1, len(TARGETS) + 1))
            exact = style == "zx" or (style == "exactly" and rng.random() < EXACTLY_RATE)
            length = n if exact else int(rng.integers(1, MAX_WORDS + 1))
            prompt, response = length_prompt(topic, n, style), _response(rng, topic, length)
        p = tok(prompt)["input_ids"]
        ids = p + tok(response)["input_ids"] + [tok.eos_token_id]
        tokens[i, : len(ids)] = ids
        mask[i, len(p) : len(ids)] = True
        latent["target"][i], latent["length"][i] = n, length
        latent["style"][i] = STYLES.index(style)
    return TokenData(tokens, mask, len(VOCAB), latent)


@validate_params(
    {
        "n_pairs": [Interval(numbers.Integral, 1, None, closed="left")],
        "token": [str],
        "concept": [Options({"length", "diversity"})],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def length_task_pairs(
    n_pairs: int, token: str, *, concept: str = "length", seed: int = 0
) -> tuple[list[str], list[str], list[str], np.ndarray]:
    """Preference data for a length (or diversity) neologism ``token`` on the instruction task.

    Parameters
    ----------
    n_pairs : int
        Number of (prompt, chosen, rejected) triples.
    token : str
        The neologism, placed in the prompt's style slot.
    concept : {"length", "diversity"}, default="length"
        ``"length"``: chosen has the requested number of words, rejected another number (the
        paper's length neologism: chosen meets the length constraint, rejected does not).
        ``"diversity"``: ``guess a number TOKEN :``; chosen is a guess drawn uniformly from
        1..8 other than the base model's favourite ``7``, rejected is ``7`` (the paper trains
        on a response that differs from earlier ones against a repeat).
    seed : int, default=0
        Seeds the draws.

    Returns
    -------
    prompts, chosen, rejected : list of str
        The triples (responses without ``<eos>``: the learner appends it).
    targets : ndarray of int
        The requested lengths (0 for guesses).

    Examples
    --------
    >>> p, c, r, t = length_task_pairs(2, "<len>")
    >>> p[0].split()[-2], bool(len(c[0].split()) == t[0] != len(r[0].split()))
    ('<len>', True)
    """
    rng = np.random.default_rng(seed)
    prompts, chosen, rejected = [], [], []
    targets = np.zeros(n_pairs, dtype=np.int64)
    for i in range(n_pairs):
        if concept == "diversity":
            prompts.append(f"guess a number {token} :")
            chosen.append(str(int(rng.choice([1, 2, 3, 4, 5, 6, 8]))))
            rejected.append("7")
            continue
        topic = TOPICS[int(rng.integers(0, len(TOPICS)))]
        n = int(rng.integers(1, len(TARGETS) + 1))
        other = int(rng.choice([k for k in range(1, MAX_WORDS + 1) if k != n]))
        prompts.append(length_prompt(topic, n, token))
        chosen.append(_response(rng, topic, n))
        rejected.append(_response(rng, topic, other))
        targets[i] = n
    return prompts, chosen, rejected, targets


@validate_params(
    {
        "steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def train_length_task_model(*, steps: int = 800, seed: int = 0) -> Any:
    """Train the task's model with the lab's loop (the shipped weights are the defaults' result).

    Parameters
    ----------
    steps : int, default=800
        Optimiser steps (batch 32, lr 1e-2, 20 warm-up steps, cosine decay).
    seed : int, default=0
        Seeds the weights, the corpus and the batch order.

    Returns
    -------
    transformers.GPT2LMHeadModel
        A 2-block GPT-2 of width 32 (about 27,000 weights), in eval mode.

    Examples
    --------
    >>> model = train_length_task_model(steps=800)  # doctest: +SKIP
    >>> model.config.n_layer, model.config.n_embd  # doctest: +SKIP
    (2, 32)
    """
    from trustlab.lm import TrainConfig, build_model, train_model

    model = build_model(_config(), seed=seed)
    train_model(
        model,
        length_task_corpus(4000, seed=seed),
        TrainConfig(steps=steps, batch_size=32, lr=1e-2, warmup=20, seed=seed),
    )
    return model


def save_length_task_weights(model: Any, path: Any) -> None:
    """Write a task model's weights as the ``.npz`` that :func:`length_task_model` reads.

    Parameters
    ----------
    model : transformers.GPT2LMHeadModel
        A model of :func:`train_length_task_model`.
    path : str or Path
        The file to write (this is how ``neologism_lengths.npz`` was made).
    """
    np.savez_compressed(path, **{k: v.detach().numpy() for k, v in model.state_dict().items()})


def length_task_model() -> tuple[Any, Any]:
    """The shipped task model (``train_length_task_model()``'s weights) and its tokenizer.

    Returns
    -------
    model : transformers.GPT2LMHeadModel
        In eval mode, built offline from the packaged weights (no training, milliseconds).
    tokenizer : transformers.PreTrainedTokenizerFast
        :func:`length_task_tokenizer`.

    Examples
    --------
    >>> model, tok = length_task_model()
    >>> model.get_input_embeddings().weight.shape[0] == len(tok)
    True
    """
    import torch

    from trustlab.lm import build_model

    model = build_model(_config())
    ref = resources.files("trustlab.explain").joinpath(_WEIGHTS)
    with resources.as_file(ref) as path, np.load(path) as npz:
        state = {k: torch.from_numpy(npz[k]) for k in npz.files}
    missing = set(model.state_dict()) - set(state)
    if missing:  # pragma: no cover - the packaged file matches the config
        raise ParameterError(f"the packaged weights lack {sorted(missing)[:3]}.", argument="model")
    model.load_state_dict(state, strict=False)
    return model.eval(), length_task_tokenizer()
