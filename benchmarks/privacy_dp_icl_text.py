"""DP synthetic demonstrations on a real-text task: pydoc sentences, statements vs types.

Model: the lab's ``small-llama-english`` (4 blocks, width 96, BPE 1024, context 64; trained into the
cache on first use). Data: sentences of CPython's ``pydoc_data.topics`` (the lab's English corpus,
docs/data-card.md) of 4-20 words and at most 16 tokens (no code characters), labelled by their
topic's group: the statement topics (``if``, ``while``, ``try``, ``import``, ...) vs the built-in type topics
(``typesseq``, ``typesmapping``, ``string-methods``, ...). Per repeat: a random half of each
label's sentences is private, the other half the queries. Synthetic demonstrations: one per label
(12 tokens, top_k = 10, the paper's best k), subsets of 1 sentence, the budget split over the two
labels, delta = 1e-4 in all. In-context prompt: ``Text: ...\\nKind: statement\\n`` per
demonstration (label order random), then the query; the prediction compares the two label tokens,
calibrated on the content-free input "N/A" (Zhao et al. 2021, the paper's Appendix F.4).
"""

from __future__ import annotations

import math
import re

import numpy as np

STATEMENTS = (
    "assert", "assignment", "augassign", "break", "continue", "del", "for", "global", "if", "import",
    "nonlocal", "pass", "raise", "return", "try", "while", "with", "class", "function", "compound",
    "async", "yield", "else", "lambda",
)  # fmt: skip
TYPES = (
    "typesseq", "typesseq-mutable", "typesmapping", "typesfunctions", "typesmethods", "typesmodules",
    "string-methods", "numeric-types", "sequence-types", "dict", "lists", "integers", "floating",
    "booleans", "strings", "bltin-code-objects", "bltin-ellipsis-object", "bltin-null-object",
    "bltin-type-objects", "specialattrs", "types", "numbers", "imaginary", "truth",
)  # fmt: skip
LABELS = ("statement", "type")


def sentences(tokenizer) -> dict[str, list[str]]:
    """The task's sentences of each label."""
    from pydoc_data.topics import topics

    out: dict[str, list[str]] = {}
    for label, names in zip(LABELS, (STATEMENTS, TYPES), strict=True):
        found = []
        for name in names:
            for s in re.split(r"(?<=[.!?])\s+", " ".join(topics[name].split())):
                ok = re.fullmatch(r"[A-Z][^>\[\]{}=]+[.]", s) and 4 <= len(s.split()) <= 20
                if ok and len(tokenizer(" " + s)["input_ids"]) <= 16:
                    found.append(s)
        out[label] = sorted(set(found))
    return out


def _accuracy(model, tokenizer, demos, queries) -> float:
    import torch

    label_ids = [tokenizer(" " + y)["input_ids"][0] for y in LABELS]
    prefix = "".join(f"Text: {t}\nKind: {y}\n" for y, t in demos)

    def probs(text: str) -> np.ndarray:
        ids = tokenizer(prefix + f"Text: {text}\nKind:")["input_ids"][-64:]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, -1, label_ids]
        return torch.softmax(logits.double(), -1).numpy()

    cf = probs("N/A")
    hits = [int(np.argmax(probs(t) / cf)) == LABELS.index(y) for y, t in queries]
    return float(np.mean(hits))


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.lm import load_shipped
    from trustlab.privacy.dp_icl_text import dp_text_demonstrations

    torch.set_num_threads(1)
    model, tokenizer, _ = load_shipped("small-llama-english")
    pool = sentences(tokenizer)
    repeats = 3 if quick else 10
    epsilons = (1.0, 4.0, 8.0, 1e6)
    methods = {"baseline (Tang et al.)": ("baseline", 1.0), "PTA alpha=2": ("pta", 2.0)}
    acc: dict[str, list[float]] = {}
    rng = np.random.default_rng(0)
    examples: dict[str, list] = {}
    for _ in range(repeats):
        private: dict[str, list[str]] = {}
        queries = []
        for y in LABELS:
            order = rng.permutation(len(pool[y]))
            half = len(order) // 2
            private[y] = [pool[y][i] for i in order[:half]]
            queries += [(y, pool[y][i]) for i in order[half:]]
        texts = [t for y in LABELS for t in private[y]]
        labels = [y for y in LABELS for _ in private[y]]
        acc.setdefault("zero-shot", []).append(_accuracy(model, tokenizer, [], queries))
        real = [(y, private[y][0]) for y in rng.permutation(LABELS)]
        acc.setdefault("1 real private sentence per label (not private)", []).append(
            _accuracy(model, tokenizer, real, queries)
        )
        for eps in epsilons:
            for name, (method, alpha) in methods.items():
                out = dp_text_demonstrations(
                    model, tokenizer, texts, labels, epsilon=eps, delta=1e-4, max_tokens=12,
                    top_k=10, alpha=alpha, method=method,
                )  # fmt: skip
                demos = [out.demonstrations[i] for i in rng.permutation(len(out.demonstrations))]
                examples.setdefault(f"{name}, eps={eps:g}", demos)
                acc.setdefault(f"{name}, eps={eps:g}", []).append(_accuracy(model, tokenizer, demos, queries))
    rows = [
        {"case": case, "accuracy": float(np.mean(v)), "se": float(np.std(v, ddof=1) / math.sqrt(len(v)))}
        for case, v in acc.items()
    ]
    return {
        "title": "DP-ICL on pydoc sentences (statement vs type) with small-llama-english",
        "rows": rows,
        "notes": [
            f"{repeats} repeats; {len(pool['statement'])} statement and {len(pool['type'])} type sentences, "
            "half private, half queries; chance 0.5; eps=1e+06 stands for eps=inf.",
            "first repeat's synthetic demonstrations: " + json_examples(examples),
        ],
    }


def json_examples(examples: dict[str, list]) -> str:
    import json

    return json.dumps({k: v for k, v in examples.items() if k.endswith(("eps=1", "eps=1e+06"))})
