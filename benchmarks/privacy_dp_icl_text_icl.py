"""Does the lab's English LM learn a real-text classification in context? (row 002-10's text claim)

PTA's text claim needs a model that reads labels off demonstrations. This benchmark measures it on
two real-text tasks, with random label words per task (so zero-shot is chance and the label
mapping can only come from the demonstrations):

- *pydoc topics*: sentences of CPython's ``pydoc_data.topics`` (the lab's English corpus), labelled
  by topic (the 31 topics with at least 16 sentences); a task is a random pair of topics;
- *docstring domains*: first sentences of the docstrings of 13 groups of standard-library modules
  (turtle graphics, tk widgets, email, archives, testing, dates, networking, math, logging,
  concurrency, paths, ip addresses, typing), read with ``ast`` from the shipped sources (PSF
  licence, as the pydoc texts); a task is a random pair of groups.

Classifier: the demonstrations of each label in their own prompt ``"{y}: {text}\\n"`` (the format
``dp_text_demonstrations`` writes), the query scored by ``log p(" {query}\\n" | demonstrations of y,
"{y}:")`` (a channel classifier, Min et al. 2022), argmax over the labels (ties: a coin). Texts are
cut to 12 tokens; 0-3 real demonstrations per label; 40 tasks x 10 queries; chance 0.5. Controls:
the same classifier when the queries *are* demonstrations (pure copying), and a word-overlap
classifier (content words shared with each label's demonstrations) as a ceiling of what the
texts say. The fine-tuned arm (not in ``--quick``) trains ``small-llama-english`` further for 600
steps on same-module episodes of the other 268 standard-library modules' docstrings (8,463
sentences; half the lines of an episode repeat an earlier one, to reward copying) and is
evaluated on the 13 held-out groups. On it, the DP arm: 60 paired repeats of a random pair of
groups, 20 private texts and 5 queries per label, one synthetic demonstration per label (12 tokens,
``top_k = 10``, ``delta = 1e-4``, subsets of one text) by Tang et al.'s baseline and by PTA
(``alpha = 2``) at eps 1, 2, 4, 8 and 1e6 (for inf), scored by the same classifier.
"""

from __future__ import annotations

import ast
import math
import os
import re
import sysconfig

import numpy as np

GROUPS = {
    "turtle graphics": ["turtle"],
    "tk widgets": ["tkinter/__init__", "tkinter/ttk"],
    "email": ["email/message", "mailbox", "smtplib", "imaplib", "poplib", "nntplib"],
    "archives": ["tarfile", "zipfile", "bz2", "lzma", "gzip", "shutil"],
    "testing": ["unittest/case", "doctest", "bdb", "pdb"],
    "dates": ["datetime", "calendar"],
    "networking": ["socket", "ssl", "http/client", "urllib/request", "ftplib"],
    "math": ["statistics", "decimal", "fractions", "random"],
    "logging": ["logging/__init__"],
    "concurrency": ["threading", "asyncio/events", "multiprocessing/pool"],
    "paths": ["pathlib"],
    "ip": ["ipaddress"],
    "typing": ["typing", "inspect", "enum"],
}
LABELS = "apple river stone cloud tiger piano lemon table chair grape maple ocean tulip".split()
TRAIN_LABELS = "red blue green black white north south east west cat dog fish bird horse cow lion".split()
STOP = set(
    "the a an of to is and in for or be if are it that this by as with on not its can return returns".split()
)
OK = re.compile(r"[A-Z][^>{}\[\]=]*")


def _docstring_sentences(path: str, first_only: bool = True) -> list[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node)
            if doc:
                text = " ".join((doc.split("\n\n")[0] if first_only else doc).split())
                parts = re.split(r"(?<=[.!?])\s+", text)
                out += [
                    s for s in parts[: 1 if first_only else None] if OK.fullmatch(s) and len(s.split()) >= 4
                ]
    return sorted(set(out))


def _cut(tok, s: str) -> str:
    return tok.decode(tok(" " + s, add_special_tokens=False)["input_ids"][:12]).strip()


def docstring_domains(tok) -> dict[str, list[str]]:
    """The held-out groups' docstring sentences (cut to 12 tokens)."""
    lib = sysconfig.get_paths()["stdlib"]
    return {
        g: sorted({_cut(tok, s) for m in mods for s in _docstring_sentences(os.path.join(lib, m + ".py"))})
        for g, mods in GROUPS.items()
    }


def other_modules(tok) -> dict[str, list[str]]:
    """Docstring sentences of every other standard-library module with at least 6 (the fine-tuning data)."""
    lib = sysconfig.get_paths()["stdlib"]
    held = {os.path.join(lib, m + ".py") for mods in GROUPS.values() for m in mods}
    skip = {"test", "tests", "site-packages", "__pycache__", "idle_test", "lib2to3"}
    out = {}
    for root, dirs, files in os.walk(lib):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for f in sorted(files):
            p = os.path.join(root, f)
            if f.endswith(".py") and p not in held:
                ss = sorted({_cut(tok, s) for s in _docstring_sentences(p, first_only=False)})
                if len(ss) >= 6:
                    out[p] = ss
    return out


def pydoc_topics(tok) -> dict[str, list[str]]:
    """Sentences of the pydoc topics with at least 16 of them (cut to 12 tokens)."""
    from pydoc_data.topics import topics

    out = {}
    for name in sorted(topics):
        parts = re.split(r"(?<=[.!?:])\s+", " ".join(topics[name].split()))
        ss = sorted({_cut(tok, s) for s in parts if re.match(r"[A-Z]", s) and len(s.split()) >= 4})
        if len(ss) >= 16:
            out[name] = ss
    return out


def channel_accuracy(model, tok, demos, queries, labels, rng) -> float:
    """Per-label channel classifier: argmax_y log p(query | y's demonstrations, "y:")."""
    import torch

    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    hits = []
    for y, t in queries:
        body = enc(" " + t) + enc("\n")
        seqs = [
            (enc("".join(f"{c}: {d}\n" for yy, d in demos if yy == c) + f"{c}:") + body)[-64:] for c in labels
        ]
        ids = torch.full((len(seqs), max(map(len, seqs))), tok.eos_token_id)
        for i, s in enumerate(seqs):
            ids[i, : len(s)] = torch.tensor(s)
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=ids).logits.double(), -1)
        sc = np.array(
            [
                sum(float(lp[i, p - 1, s[p]]) for p in range(len(s) - len(body), len(s)))
                for i, s in enumerate(seqs)
            ]
        )
        best = np.flatnonzero(np.isclose(sc, sc.max(), rtol=0, atol=1e-9))
        hits.append(labels[int(rng.choice(best))] == y)
    return float(np.mean(hits))


def overlap_accuracy(demos, queries, labels, rng) -> float:
    """Content words shared with each label's demonstrations; argmax (ties: a coin)."""
    bag = lambda s: {w.lower().strip(".,:;()'\"") for w in s.split()} - STOP  # noqa: E731
    hits = []
    for y, t in queries:
        sc = np.array(
            [len(bag(t) & set().union(set(), *(bag(d) for yy, d in demos if yy == c))) for c in labels]
        )
        hits.append(labels[int(rng.choice(np.flatnonzero(sc == sc.max())))] == y)
    return float(np.mean(hits))


def evaluate(model, tok, pool, *, n_tasks=40, shots=(0, 1, 2, 3), seed=1) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    names = sorted(pool)
    acc: dict[str, list[float]] = {}
    for _ in range(n_tasks):
        pair = rng.choice(len(names), 2, replace=False)
        labs = [str(y) for y in rng.choice(LABELS, 2, replace=False)]
        per = {
            y: [pool[names[i]][j] for j in rng.permutation(len(pool[names[i]]))]
            for y, i in zip(labs, pair, strict=True)
        }
        queries = [(y, per[y][-1 - q]) for y in labs for q in range(5)]
        for k in shots:
            demos = [(y, per[y][i]) for i in range(k) for y in labs]
            acc.setdefault(f"LM, {k} real demonstrations per label", []).append(
                channel_accuracy(model, tok, demos, queries, labs, rng)
            )
            if k:
                acc.setdefault(f"word overlap, {k} per label", []).append(
                    overlap_accuracy(demos, queries, labs, rng)
                )
        demos = [(y, per[y][i]) for i in range(2) for y in labs]
        acc.setdefault("LM, queries = its 2 demonstrations (copying)", []).append(
            channel_accuracy(model, tok, demos, demos, labs, rng)
        )
    return acc


def fine_tune(model, tok, steps: int = 600):
    from trustlab.lm import TokenData, TrainConfig, train_model

    mods = other_modules(tok)
    names = sorted(mods)
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    rng = np.random.default_rng(0)
    n, length = steps * 32, 64
    tokens = np.full((n, length), tok.eos_token_id, dtype=np.int64)
    mask = np.zeros((n, length), dtype=bool)
    for r in range(n):
        m, y = names[int(rng.integers(len(names)))], TRAIN_LABELS[int(rng.integers(len(TRAIN_LABELS)))]
        ids: list[int] = []
        seen: list[str] = []
        while True:
            fresh = not seen or rng.random() > 0.5
            t = mods[m][int(rng.integers(len(mods[m])))] if fresh else seen[int(rng.integers(len(seen)))]
            seen.append(t)
            line = enc(f"{y}:") + enc(" " + t) + enc("\n")
            if len(ids) + len(line) > length:
                break
            ids += line
        tokens[r, : len(ids)] = ids
        mask[r, 1 : len(ids)] = True
    res = train_model(
        model, TokenData(tokens, mask, len(tok)), TrainConfig(steps=steps, batch_size=32, lr=2e-3, warmup=20)
    )
    return sum(map(len, mods.values())), len(mods), float(np.mean(res.losses[-20:]))


def dp_arm(model, tok, pool, *, repeats: int, epsilons=(1.0, 2.0, 4.0, 8.0, 1e6)) -> dict[str, list[float]]:
    """Paired DP-ICL repeats: a random pair of groups, 20 private texts and 5 queries per label."""
    from trustlab.privacy.dp_icl_text import dp_text_demonstrations

    rng = np.random.default_rng(3)
    names = sorted(pool)
    acc: dict[str, list[float]] = {}
    for _ in range(repeats):
        pair = rng.choice(len(names), 2, replace=False)
        labs = [str(y) for y in rng.choice(LABELS, 2, replace=False)]
        per = {
            y: [pool[names[i]][j] for j in rng.permutation(len(pool[names[i]]))]
            for y, i in zip(labs, pair, strict=True)
        }
        queries = [(y, per[y][20 + q]) for y in labs for q in range(5)]
        texts = [t for y in labs for t in per[y][:20]]
        labels = [y for y in labs for _ in range(20)]
        acc.setdefault("zero-shot", []).append(channel_accuracy(model, tok, [], queries, labs, rng))
        real = [(y, per[y][0]) for y in labs]
        acc.setdefault("1 real private text per label", []).append(
            channel_accuracy(model, tok, real, queries, labs, rng)
        )
        for eps in epsilons:
            for name, method, alpha in (("baseline", "baseline", 1.0), ("PTA alpha=2", "pta", 2.0)):
                out = dp_text_demonstrations(
                    model, tok, texts, labels, epsilon=eps, delta=1e-4, max_tokens=12, top_k=10,
                    alpha=alpha, method=method,
                )  # fmt: skip
                acc.setdefault(f"{name}, eps={eps:g}", []).append(
                    channel_accuracy(model, tok, out.demonstrations, queries, labs, rng)
                )
            pair_diff = acc[f"PTA alpha=2, eps={eps:g}"][-1] - acc[f"baseline, eps={eps:g}"][-1]
            acc.setdefault(f"PTA minus baseline (paired), eps={eps:g}", []).append(pair_diff)
    return acc


def _row(model: str, task: str, case: str, v: list[float]) -> dict:
    se = float(np.std(v, ddof=1) / math.sqrt(len(v)))
    return {"model": model, "task": task, "case": case, "accuracy": float(np.mean(v)), "se": se}


def run(quick: bool = False) -> dict:
    import torch

    from trustlab.lm import load_shipped

    torch.set_num_threads(1)
    model, tok, _ = load_shipped("small-llama-english")
    rows, notes = [], []
    n_tasks = 10 if quick else 40
    arms = [("pydoc topics", pydoc_topics(tok)), ("docstring domains", docstring_domains(tok))]
    for corpus, pool in arms:
        for case, v in evaluate(model, tok, pool, n_tasks=n_tasks).items():
            rows.append(_row("small-llama-english", corpus, case, v))
    if not quick:
        n_sent, n_mod, loss = fine_tune(model, tok)
        notes.append(f"fine-tuned on {n_sent} sentences of {n_mod} other modules, final loss {loss:.2f}")
        model.eval()
        for case, v in evaluate(model, tok, arms[1][1], n_tasks=n_tasks).items():
            if case.startswith("LM"):
                rows.append(_row("fine-tuned (600 steps)", "docstring domains", case, v))
        for case, v in dp_arm(model, tok, arms[1][1], repeats=60).items():
            rows.append(_row("fine-tuned (600 steps)", "docstring domains, DP-ICL", case, v))
    notes.append(f"{n_tasks} binary tasks x 10 queries per row; chance 0.5; random label words per task")
    return {
        "title": "In-context learning of real-text labels by the lab's English LM",
        "rows": rows,
        "notes": notes,
    }
