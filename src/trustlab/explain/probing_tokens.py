"""Multi-token probes and a labelled-text probing dataset from a lab language model.

Kantamneni et al. probe last-token activations, and also aggregate a text's token activations
by their mean or maximum (Appendix D of [1]); SAE latents are aggregated the same way, token by
token first, then pooled. :func:`pool_tokens` does the pooling with a padding mask,
:func:`compare_pooled_probes` runs :func:`~trustlab.explain.probing.compare_probes` once per
pooling on the same splits, and :func:`text_probing_data` builds binary probing tasks from real
texts (CPython's pydoc topic paragraphs) with the activations of a causal LM. See
docs/explain/sae-probing.md.

References
----------
.. [1] Kantamneni, Engels, Rajamanoharan, Tegmark, Nanda. "Are Sparse Autoencoders Useful? A
   Case Study in Sparse Probing". ICML 2025 (arXiv:2502.16681).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError
from trustlab.explain.probing import _encoder, compare_probes

__all__ = [
    "POOLINGS",
    "TEXT_TASKS",
    "TextProbingData",
    "compare_pooled_probes",
    "pool_tokens",
    "text_probing_data",
]

POOLINGS = ("last", "mean", "max")

#: topic families of CPython's pydoc topics (by topic name) used by the text tasks
_FAMILIES = {
    "statements": (
        "assert", "assignment", "async", "augassign", "break", "class", "compound", "continue", "del",
        "else", "for", "function", "global", "if", "import", "nonlocal", "pass", "raise", "return",
        "try", "while", "with", "yield",
    ),
    "expressions": (
        "atom-identifiers", "atom-literals", "attribute-references", "binary", "bitwise", "calls",
        "comparisons", "exprlists", "lambda", "operator-summary", "power", "shifting", "slicings",
        "subscriptions", "unary", "conversions", "booleans", "in", "await",
    ),
    "types": (
        "bltin-code-objects", "bltin-ellipsis-object", "bltin-null-object", "bltin-type-objects",
        "callable-types", "dict", "floating", "imaginary", "integers", "lists", "numbers",
        "numeric-types", "sequence-types", "string-methods", "strings", "types", "typesfunctions",
        "typesmapping", "typesmethods", "typesmodules", "typesseq", "typesseq-mutable", "objects",
        "specialattrs", "specialnames", "customization", "attribute-access",
    ),
}  # fmt: skip

#: binary tasks of :func:`text_probing_data`: (what is positive, what is negative, the shift)
TEXT_TASKS = {
    "code": "code block vs prose paragraph; shift: train on statements/expressions, test on types",
    "statements": "statements vs types topic (prose); shift: train on prose, test on code blocks",
    "expressions": "expressions vs types topic (prose); shift: train on prose, test on code blocks",
}


def _check_tokens(A: Any, mask: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    A = check_numeric_array(A, name, ndim=3, min_rows=1)
    if mask is None:
        return A, np.ones(A.shape[:2], dtype=bool)
    m = np.asarray(mask)
    if m.shape != A.shape[:2] or not (m.dtype == bool or np.isin(m, (0, 1)).all()):
        raise DataError(
            f"mask must be a 0/1 or boolean array of shape {A.shape[:2]} (rows, tokens) like the "
            f"activations, got shape {m.shape}.",
            argument="mask",
        )
    m = m.astype(bool)
    if not m.any(axis=1).all():
        raise DataError("mask must keep at least one token in every row; drop empty rows.", argument="mask")
    return A, m


def pool_tokens(A: Any, mask: Any = None, how: str = "last") -> np.ndarray:
    """Aggregate token activations ``(n, T, d)`` into one vector per text, ignoring padding.

    Parameters
    ----------
    A : array-like of shape (n_samples, n_tokens, d)
        Token activations (or token-level SAE latents).
    mask : array-like of bool of shape (n_samples, n_tokens), optional
        True on real tokens, False on padding (any positions; ``None``: all real).
    how : {"last", "mean", "max"}, default="last"
        The paper's aggregations: the last real token, or the mean or maximum over real tokens.

    Returns
    -------
    numpy.ndarray of shape (n_samples, d)

    References
    ----------
    Kantamneni et al., "Are Sparse Autoencoders Useful? A Case Study in Sparse Probing", ICML 2025.

    Examples
    --------
    >>> A = np.arange(12.0).reshape(2, 3, 2); mask = [[1, 1, 0], [1, 1, 1]]
    >>> pool_tokens(A, mask, "last").tolist(), pool_tokens(A, mask, "mean").tolist()
    ([[2.0, 3.0], [10.0, 11.0]], [[1.0, 2.0], [8.0, 9.0]])
    """
    if how not in POOLINGS:
        raise ParameterError(f"how must be one of {', '.join(POOLINGS)}, got {how!r}.", argument="how")
    A, m = _check_tokens(A, mask, "A")
    if how == "last":
        last = A.shape[1] - 1 - np.argmax(m[:, ::-1], axis=1)
        return A[np.arange(A.shape[0]), last]
    if how == "mean":
        return (A * m[..., None]).sum(axis=1) / m.sum(axis=1)[:, None]
    return np.where(m[..., None], A, -np.inf).max(axis=1)


def _token_latents(enc: Any, A: np.ndarray, m: np.ndarray) -> np.ndarray:
    Z_tok = np.asarray(enc(A[m]), dtype=float)
    if Z_tok.ndim != 2 or Z_tok.shape[0] != int(m.sum()) or not np.isfinite(Z_tok).all():
        raise DataError(
            "encode must map (tokens, d) activations to finite (tokens, latents) latents.", argument="encode"
        )
    Z = np.zeros((*m.shape, Z_tok.shape[1]))
    Z[m] = Z_tok
    return Z


def compare_pooled_probes(
    A: Any,
    mask: Any,
    y: Any,
    encode: Any = None,
    *,
    poolings: Any = POOLINGS,
    A_shift: Any = None,
    mask_shift: Any = None,
    y_shift: Any = None,
    **kwargs: Any,
) -> pd.DataFrame:
    """Run :func:`~trustlab.explain.probing.compare_probes` on pooled token activations.

    Each pooling aggregates the raw activations for the baselines and, separately, the SAE's
    token-level latents for the SAE probes (encode every real token, then pool), as in the
    paper. Every pooling uses the same ``random_state``, so the splits and draws are paired.

    Parameters
    ----------
    A : array-like of shape (n_samples, n_tokens, d)
        Token activations of each text.
    mask : array-like of bool of shape (n_samples, n_tokens) or None
        True on real tokens, False on padding.
    y : array-like of shape (n_samples,)
        A binary target.
    encode : fitted SAE, callable or None
        Maps token activations ``(m, d)`` to latents ``(m, h)``; ``None`` runs baselines only.
    poolings : iterable of str, default=POOLINGS
        Any of ``"last"``, ``"mean"``, ``"max"``.
    A_shift, mask_shift, y_shift : optional
        A covariate-shifted test set for the ``shift`` regime.
    **kwargs
        Passed to :func:`~trustlab.explain.probing.compare_probes` (``regimes``, ``methods``,
        ``sae_ks``, ``n_seeds``, ``n_train``, ``n_hparams``, ``test_size``, ``random_state``).

    Returns
    -------
    pandas.DataFrame
        The tables of ``compare_probes``, stacked, with a ``pooling`` column.

    References
    ----------
    Kantamneni et al., "Are Sparse Autoencoders Useful? A Case Study in Sparse Probing", ICML 2025.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> A = rng.normal(size=(200, 4, 3)); y = (A[:, :, 0].max(axis=1) > 1).astype(int)
    >>> t = compare_pooled_probes(A, None, y, np.abs, poolings=["last", "max"], regimes={"noise": [0.0]},
    ...                           methods=["logreg"], sae_ks=[1], n_hparams=2)
    >>> t.groupby("pooling")["test_auc"].max().gt(0.8).to_dict()
    {'last': False, 'max': True}
    """
    A, m = _check_tokens(A, mask, "A")
    pools = [poolings] if isinstance(poolings, str) else list(poolings)
    if not pools or any(p not in POOLINGS for p in pools) or len(set(pools)) != len(pools):
        raise ParameterError(
            f"poolings must be distinct values of {', '.join(POOLINGS)}, got {poolings!r}.",
            argument="poolings",
        )
    enc = _encoder(encode) if encode is not None else None
    Z = _token_latents(enc, A, m) if enc is not None else None
    shifted = A_shift is not None
    if shifted:
        As, ms = _check_tokens(A_shift, mask_shift, "A_shift")
        if As.shape[2] != A.shape[2]:
            raise DataError(
                f"A_shift must have {A.shape[2]} features like A, got {As.shape[2]}.", argument="A_shift"
            )
        Zs = _token_latents(enc, As, ms) if enc is not None else None
    tables = []
    for how in pools:
        X = pool_tokens(A, m, how)
        Xs = pool_tokens(As, ms, how) if shifted else None
        lookup = {}
        if Z is not None:
            lookup[X.tobytes()] = pool_tokens(Z, m, how)
            if shifted and Zs is not None:
                lookup[Xs.tobytes()] = pool_tokens(Zs, ms, how)  # type: ignore[union-attr]

        def pooled(x: np.ndarray, lookup: dict = lookup) -> np.ndarray:
            return lookup[np.ascontiguousarray(x, dtype=float).tobytes()]

        t = compare_probes(X, y, pooled if Z is not None else None, X_shift=Xs, y_shift=y_shift, **kwargs)
        tables.append(t.assign(pooling=how))
    return pd.concat(tables, ignore_index=True)


@dataclass(frozen=True)
class TextProbingData:
    """A labelled-text probing task: token activations, padding mask, labels and a shifted set.

    Attributes
    ----------
    A, mask, y : numpy.ndarray
        In-distribution token activations ``(n, T, d)``, mask ``(n, T)`` and binary labels.
    A_shift, mask_shift, y_shift : numpy.ndarray
        The covariate-shifted test set (see :data:`TEXT_TASKS`).
    A_unlabelled, mask_unlabelled : numpy.ndarray
        Paragraphs of the other topics, for training an SAE without the task's texts.
    texts, texts_shift : list of str
        The paragraphs behind ``A`` and ``A_shift``.

    Examples
    --------
    >>> d = TextProbingData(*[np.zeros((2, 3, 4)), np.ones((2, 3), bool), np.array([0, 1])] * 2,
    ...                     np.zeros((1, 3, 4)), np.ones((1, 3), bool), ["a", "b"], ["c", "d"])
    >>> pool_tokens(d.A, d.mask, "mean").shape
    (2, 4)
    """

    A: np.ndarray
    mask: np.ndarray
    y: np.ndarray
    A_shift: np.ndarray
    mask_shift: np.ndarray
    y_shift: np.ndarray
    A_unlabelled: np.ndarray
    mask_unlabelled: np.ndarray
    texts: list[str]
    texts_shift: list[str]


def _paragraphs() -> list[tuple[str, str, str]]:
    """(topic family or "other", "code" or "prose", paragraph) of every pydoc topic paragraph."""
    from pydoc_data.topics import topics

    family = {t: f for f, names in _FAMILIES.items() for t in names}
    out = []
    for name in sorted(topics):
        for block in topics[name].split("\n\n"):
            lines = [ln for ln in block.split("\n") if ln.strip()]
            if not lines or any(set(ln.strip()) <= set("*=-") for ln in lines):
                continue  # empty or a heading
            if all(ln.startswith("   ") for ln in lines):
                kind = "code"
            elif not any(ln.startswith(" ") for ln in lines) and len(block) >= 80:
                kind = "prose"
            else:
                continue
            out.append((family.get(name, "other"), kind, "\n".join(ln.strip() for ln in lines)))
    families: dict[str, set[str]] = {}
    for f, _, text in out:
        families.setdefault(text, set()).add(f)
    seen: set[str] = set()
    unique = []  # pydoc repeats some paragraphs across topics: keep each once, drop cross-family ones
    for f, k, text in out:
        if len(families[text]) == 1 and text not in seen:
            seen.add(text)
            unique.append((f, k, text))
    return unique


def _task_split(task: str, paras: list[tuple[str, str, str]]) -> tuple[list, list, list]:
    """(in-distribution [(text, label)], shifted [(text, label)], unlabelled texts)."""
    if task == "code":
        ind = [(t, int(k == "code")) for f, k, t in paras if f in ("statements", "expressions")]
        sh = [(t, int(k == "code")) for f, k, t in paras if f == "types"]
        return ind, sh, [t for f, _, t in paras if f == "other"]
    pos = task
    ind = [(t, int(f == pos)) for f, k, t in paras if k == "prose" and f in (pos, "types")]
    sh = [(t, int(f == pos)) for f, k, t in paras if k == "code" and f in (pos, "types")]
    return ind, sh, [t for f, _, t in paras if f not in (pos, "types")]


def text_probing_data(
    task: str = "code",
    *,
    model: Any = None,
    tokenizer: Any = None,
    layer: int = 2,
    n_tokens: int = 32,
) -> TextProbingData:
    """A binary probing task on real texts, with a causal LM's residual-stream token activations.

    The texts are the paragraphs of CPython's pydoc topics (``pydoc_data.topics``; PSF licence;
    see docs/data-card.md): code blocks vs prose, or the prose of one topic family vs another.
    Each paragraph's first ``n_tokens`` tokens go through the model (right padding; the LM is
    causal, so padding never changes a real token's activation) and ``blocks.{layer}.resid_post``
    is recorded.

    Parameters
    ----------
    task : str, default="code"
        One of :data:`TEXT_TASKS`.
    model, tokenizer : optional
        A causal LM and its tokenizer (``tokenizer.encode(text) -> ids``); default the lab's
        ``small-llama-english`` (:func:`trustlab.lm.load_shipped`).
    layer : int, default=2
        The block whose output is recorded.
    n_tokens : int, default=32
        Tokens kept per paragraph.

    Returns
    -------
    TextProbingData

    References
    ----------
    Kantamneni et al., "Are Sparse Autoencoders Useful? A Case Study in Sparse Probing", ICML 2025.

    Examples
    --------
    >>> d = text_probing_data("code")  # doctest: +SKIP
    >>> d.A.shape[1:], round(d.y.mean(), 2)  # doctest: +SKIP
    ((32, 96), 0.35)
    """
    if task not in TEXT_TASKS:
        raise ParameterError(f"task must be one of {', '.join(TEXT_TASKS)}, got {task!r}.", argument="task")
    if not isinstance(n_tokens, numbers.Integral) or isinstance(n_tokens, bool) or not 2 <= n_tokens <= 64:
        raise ParameterError(
            f"n_tokens must be an integer in [2, 64], got {n_tokens!r}.", argument="n_tokens"
        )
    if not isinstance(layer, numbers.Integral) or isinstance(layer, bool) or layer < 0:
        raise ParameterError(f"layer must be a block index >= 0, got {layer!r}.", argument="layer")
    import torch

    from trustlab.lm import load_shipped
    from trustlab.lm.hooks import run_with_hooks

    if model is None or tokenizer is None:
        model, tokenizer, _ = load_shipped("small-llama-english")
    name = f"blocks.{layer}.resid_post"
    ind, sh, unl = _task_split(task, _paragraphs())

    def acts(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        ids = [list(tokenizer.encode(t))[:n_tokens] for t in texts]
        mask = np.array([[i < len(s) for i in range(n_tokens)] for s in ids])
        padded = [s + [0] * (n_tokens - len(s)) for s in ids]
        out = []
        with torch.no_grad():
            for i in range(0, len(padded), 128):
                out.append(run_with_hooks(model, padded[i : i + 128], [name])[name].float().cpu().numpy())
        return np.concatenate(out).astype(float), mask

    A, m = acts([t for t, _ in ind])
    As, ms = acts([t for t, _ in sh])
    Au, mu = acts(unl)
    return TextProbingData(
        A, m, np.array([lab for _, lab in ind]), As, ms, np.array([lab for _, lab in sh]), Au, mu,
        [t for t, _ in ind], [t for t, _ in sh],
    )  # fmt: skip
