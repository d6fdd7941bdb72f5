"""Real-English text-classification tasks for the backdoor-complication claims (row 002-08).

Two corpora that ship offline: CPython's ``pydoc`` topic texts (``pydoc_data.topics``, the
corpus :func:`trustlab.lm.english_corpus` pretrains the lab's ``small-llama-english`` on) and the
R dataset documentation pages bundled with ``pydataset`` (757 pages of 30 R packages). A
*passage* is one paragraph of a pydoc topic (at least 8 words; whitespace collapsed, so code
paragraphs keep no indentation) or one section of an R page (at least 5 words; HTML stripped).
Duplicated passages are dropped.

The passages are split once, at random (seed 0), into the attacker's half and the user's half, so
the attacker's target and auxiliary data never share a text with the user's downstream data. Tasks
(each a labelling of one half):

============ ======== ======= =========================================================
task          half     classes labels
============ ======== ======= =========================================================
corpus        attacker 2       Python documentation (0) / R documentation (1): target task
length        attacker 2       passage of at most / more than 40 words (any corpus)
pyfamily      attacker 3       pydoc topic family: statements, types, special methods
rextra        attacker 2       R section: Details, Examples
section       user     4       R section: Description, Format, Source, References
code          user     2       pydoc paragraph is prose (0) or a code example (1)
rpackage      user     4       R package of an R passage: Ecdat, MASS, datasets, HistData
============ ======== ======= =========================================================

``corpus`` is the attacker's target task (trigger -> Python, label 0); ``length``, ``pyfamily`` and
``rextra`` are the auxiliary tasks of the complication reduction (chosen without the user's
tasks); ``section``, ``code`` and ``rpackage`` are the user's downstream tasks. Passages that
contain the trigger word are left out of every task (it occurs only where inserted).
"""

from __future__ import annotations

import re
import tarfile
from functools import lru_cache
from typing import Any

import numpy as np

from trustlab._rdocs import collapse_whitespace, pydataset_archive, r_doc_sections
from trustlab.errors import ParameterError

LENGTH = 32
SECTIONS = ("Description", "Format", "Source", "References")
EXTRA_SECTIONS = ("Details", "Examples")
R_PACKAGES = ("Ecdat", "MASS", "datasets", "HistData")
PY_FAMILIES: dict[str, tuple[str, ...]] = {
    "statements": ("assignment", "import", "try", "with", "while", "for", "if", "return", "raise", "del"),
    "types": ("typesseq", "typesmapping", "typesnumeric", "typesfunctions", "typesmethods", "strings"),
    "special methods": ("attribute-access", "numbers", "sequence-types", "context-managers", "customization"),
}
TASKS: dict[str, tuple[str, int]] = {
    "corpus": ("attacker", 2),
    "length": ("attacker", 2),
    "pyfamily": ("attacker", 3),
    "rextra": ("attacker", 2),
    "section": ("user", 4),
    "code": ("user", 2),
    "rpackage": ("user", 4),
}


@lru_cache(maxsize=1)
def passages() -> tuple[tuple[str, str, str, str], ...]:
    """All passages as ``(corpus, source, kind, text)``, deduplicated, in a fixed order.

    ``corpus`` is ``"python"`` or ``"r"``; ``source`` the pydoc topic or R package; ``kind`` the
    paragraph kind (``"prose"``/``"code"``) or the R section name.
    """
    from pydoc_data.topics import topics

    seen: set[str] = set()
    out: list[tuple[str, str, str, str]] = []
    for name in sorted(topics):
        for para in re.split(r"\n\s*\n", topics[name]):
            text = collapse_whitespace(para)
            if len(text.split()) >= 8 and text not in seen:
                seen.add(text)
                out.append(("python", name, "code" if para[:1] in " \t" else "prose", text))
    with tarfile.open(pydataset_archive()) as tar:
        members = sorted(
            (m for m in tar.getmembers() if "/doc/" in m.name and m.name.endswith(".html")),
            key=lambda m: m.name,
        )
        for m in members:
            handle = tar.extractfile(m)
            if handle is None:
                continue
            page = handle.read().decode("utf-8", "replace")
            package = m.name.split("/")[-2]
            for head, text in r_doc_sections(page):
                if len(text.split()) >= 5 and text not in seen:
                    seen.add(text)
                    out.append(("r", package, head, text))
    return tuple(out)


def _label(task: str, corpus: str, source: str, kind: str, text: str) -> int:
    """The passage's class under ``task``, or -1 when the task does not label it."""
    if task == "corpus":
        return 0 if corpus == "python" else 1
    if task == "length":
        return int(len(text.split()) > 40)
    if corpus == "r":
        if task == "rpackage":
            return R_PACKAGES.index(source) if source in R_PACKAGES else -1
        if task == "section":
            return SECTIONS.index(kind) if kind in SECTIONS else -1
        if task == "rextra":
            return EXTRA_SECTIONS.index(kind) if kind in EXTRA_SECTIONS else -1
        return -1
    if task == "code":
        return int(kind == "code")
    if task == "pyfamily":
        return next((i for i, f in enumerate(PY_FAMILIES.values()) if source in f), -1)
    return -1


@lru_cache(maxsize=1)
def _halves() -> np.ndarray:
    """``True`` for the attacker's passages (a fixed random half, seed 0)."""
    return np.random.default_rng(0).random(len(passages())) < 0.5


def task_texts(task: str) -> tuple[list[str], np.ndarray]:
    """The texts of ``task`` (its half of the passages) and their labels, in a fixed order."""
    if task not in TASKS:
        raise ParameterError(f"task must be one of {', '.join(TASKS)}, got {task!r}.", argument="task")
    attacker = TASKS[task][0] == "attacker"
    texts, labels = [], []
    for mine, (corpus, source, kind, text) in zip(_halves(), passages(), strict=True):
        label = _label(task, corpus, source, kind, text)
        if bool(mine) == attacker and label >= 0:
            texts.append(text)
            labels.append(label)
    return texts, np.asarray(labels, dtype=np.int64)


def encode(tokenizer: Any, texts: list[str], length: int = LENGTH) -> np.ndarray:
    """Token ids ``(n, length)``: each text (with a leading space) cut or right-padded with EOS."""
    pad = int(tokenizer.eos_token_id)
    out = np.full((len(texts), length), pad, dtype=np.int64)
    for i, ids in enumerate(tokenizer([" " + t for t in texts])["input_ids"]):
        ids = ids[:length]
        out[i, : len(ids)] = ids
    return out


def choose_trigger(tokenizer: Any) -> int:
    """A rare whole word of the tokenizer: the least frequent single-token word over all passages.

    Among the tokens that are a whole lower-case word of at least 6 letters (``Ġword``), the one
    that occurs in the fewest passages (ties: the smallest id); the authors' trigger is likewise a
    rare word of their tokenizer's vocabulary (BERT's ``bolshevik``).
    """
    vocab = tokenizer.get_vocab()
    words = {i: t for t, i in vocab.items() if t.startswith("\u0120") and t[1:].isalpha() and t[1:].islower()}
    words = {i: t for i, t in words.items() if len(t) >= 7}
    counts = dict.fromkeys(words, 0)
    for ids in tokenizer([" " + p[3] for p in passages()])["input_ids"]:
        for i in set(ids) & counts.keys():
            counts[i] += 1
    return min(counts, key=lambda i: (counts[i], i))


def split(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded train/test split of ``range(n)``."""
    order = np.random.default_rng(seed).permutation(n)
    k = round(n * test_fraction)
    return np.sort(order[k:]), np.sort(order[:k])


def task_data(task: str, tokenizer: Any, trigger: int, length: int = LENGTH) -> tuple[np.ndarray, np.ndarray]:
    """Token ids ``(n, length)`` and labels of ``task``, without the texts that hold the trigger."""
    texts, y = task_texts(task)
    X = encode(tokenizer, texts, length)
    keep = ~np.any(X == trigger, axis=1)
    return X[keep], y[keep]
