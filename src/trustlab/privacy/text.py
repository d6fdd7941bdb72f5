"""Cape: context-aware differentially private prompt perturbation (local DP per token).

Each sensitive token of a prompt is replaced by a token drawn from the vocabulary with the
exponential mechanism; the utility of a candidate mixes how well it fits the context
(logits of a small client-side language model, clipped) with how close its embedding is to
the original token (Cape's *hybrid utility*), and the draw is *bucketised*: candidates are
grouped into equal-width utility buckets, a bucket is drawn with the exponential mechanism
on its mean utility, then a token uniformly inside it. The non-contextual baseline
(SANTEXT-style) is the exponential mechanism on embedding distance alone.

The privacy statement is explicit and public: ``epsilon`` is the per-token local-DP
guarantee, a worst case over *every* pair of utility vectors in ``[0, sensitivity]`` (so it
holds whatever the context model says). The bucketised draw pays for the bucket sizes (the
paper's ``epsilon'``): the mechanism's internal exponential-mechanism parameter is the
largest one whose worst case stays within ``epsilon`` (:func:`cape_epsilon`,
:func:`em_epsilon_for`). See docs/privacy/cape.md for the derivation.

References
----------
Wu, Dai, Wang, Yan. "Cape: Context-Aware Prompt Perturbation Mechanism with Differential
Privacy". ICML 2025 (arXiv:2505.05922). Yue et al. "Differential Privacy for Text Analytics
via Natural Text Sanitization" (SANTEXT). Findings of ACL 2021. McSherry, Talwar. "Mechanism
Design via Differential Privacy". FOCS 2007.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from trustlab._validation import check_epsilon
from trustlab.errors import DataError, ParameterError
from trustlab.privacy._selection import exponential_select, uniform_int
from trustlab.privacy._text_accounting import _buckets, cape_epsilon, em_epsilon_for
from trustlab.privacy.release import Release

__all__ = [
    "cape_epsilon",
    "cape_perturb",
    "em_epsilon_for",
    "embedding_em_perturb",
    "hybrid_utility",
    "perturb_token",
]

_NEIGHBOURS = (
    "prompts of the same length that differ in one sensitive token (kept tokens, their positions "
    "and the prompt length are public); k differing tokens cost k x epsilon"
)


def _clip_utility(utility: Any, sensitivity: float) -> np.ndarray:
    u = np.asarray(utility, dtype=float)
    if u.ndim != 1 or u.size == 0:
        raise DataError(f"utility must be a non-empty 1-D array, got shape {u.shape}.", argument="utility")
    # the sensitivity bound is enforced, not assumed: NaN counts as the lowest utility
    return np.clip(np.nan_to_num(u, nan=0.0, posinf=sensitivity, neginf=0.0), 0.0, sensitivity)


def _bucket_log_weights(
    u: np.ndarray, em_epsilon: float, sensitivity: float, n_buckets: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bucket index of each token, bucket sizes, and the bucket log-weights (-inf if empty)."""
    scale = em_epsilon / (2.0 * sensitivity)
    if n_buckets is None:
        return np.arange(u.size), np.ones(u.size, dtype=np.int64), scale * u
    lo, width = u.min(), (u.max() - u.min()) / n_buckets
    # no branch on the data: equal utilities (width 0) all land in bucket 0
    idx = np.minimum(((u - lo) / np.maximum(width, np.finfo(float).tiny)).astype(np.int64), n_buckets - 1)
    sizes = np.bincount(idx, minlength=n_buckets)
    sums = np.bincount(idx, weights=u, minlength=n_buckets)
    logw = np.full(n_buckets, -np.inf)
    ok = sizes > 0
    logw[ok] = scale * sums[ok] / sizes[ok]
    return idx, sizes, logw


def _draw(u: np.ndarray, em_epsilon: float, sensitivity: float, n_buckets: int | None) -> int:
    idx, sizes, logw = _bucket_log_weights(u, em_epsilon, sensitivity, n_buckets)
    b = exponential_select(logw)
    if n_buckets is None:
        return int(b)
    members = np.flatnonzero(idx == b)
    return int(members[int(uniform_int(int(sizes[b]), 1)[0])])


def _distribution(utility: Any, em_epsilon: float, sensitivity: float, n_buckets: int | None) -> np.ndarray:
    """The exact output distribution of :func:`_draw` (for audits and tests)."""
    u = _clip_utility(utility, sensitivity)
    idx, sizes, logw = _bucket_log_weights(u, em_epsilon, sensitivity, n_buckets)
    p_bucket = np.exp(logw - np.logaddexp.reduce(logw[np.isfinite(logw)]))
    return p_bucket[idx] / sizes[idx]


def perturb_token(utility: Any, epsilon: float, *, sensitivity: float, n_buckets: int | None = 50) -> Release:
    """Draw one replacement token with Cape's bucketised exponential mechanism.

    Parameters
    ----------
    utility : array-like of float, shape (vocab_size,)
        Each candidate's utility; clipped to ``[0, sensitivity]`` (NaN counts as 0).
    epsilon : float
        The per-token local-DP guarantee (see :func:`cape_epsilon`).
    sensitivity : float
        The public range of the utility (its sensitivity).
    n_buckets : int or None, default 50
        Equal-width utility buckets (the paper's ``N_b = 50``); None for the plain
        exponential mechanism.

    Returns
    -------
    Release
        ``value`` the drawn index; ``parameters`` hold the internal ``em_epsilon``.

    Examples
    --------
    >>> r = perturb_token([0.0, 0.5, 1.0], 3.0, sensitivity=1.0, n_buckets=None)
    >>> r.value in (0, 1, 2), r.epsilon
    (True, 3.0)
    """
    epsilon = check_epsilon(epsilon)
    sens = _sensitivity(sensitivity)
    nb = _buckets(n_buckets)
    u = _clip_utility(utility, sens)
    em = em_epsilon_for(epsilon, u.size, nb)
    return Release(
        _draw(u, em, sens, nb),
        epsilon,
        mechanism="bucketised exponential mechanism (Cape)" if nb else "exponential mechanism",
        parameters={"em_epsilon": em, "n_buckets": nb, "vocab_size": u.size, "utility_range": (0.0, sens)},
        description="one token drawn by its utility",
        sensitivity=sens,
    )


def _sensitivity(sensitivity: Any) -> float:
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int | float | np.floating | np.integer):
        raise ParameterError(
            f"sensitivity must be a positive number, got {sensitivity!r}.", argument="sensitivity"
        )
    s = float(sensitivity)
    if not (s > 0 and math.isfinite(s)):
        raise ParameterError(
            f"sensitivity must be positive and finite, got {sensitivity!r}.", argument="sensitivity"
        )
    return s


# --------------------------------------------------------------------------- utilities
def _embeddings(embeddings: Any) -> np.ndarray:
    e = np.asarray(embeddings, dtype=float)
    if e.ndim != 2 or e.shape[0] < 2 or e.shape[1] < 1:
        raise DataError(
            f"embeddings must be a (vocab_size >= 2, dim) array, got shape {e.shape}.", argument="embeddings"
        )
    if not np.isfinite(e).all():
        raise DataError("embeddings hold NaN or inf; pass a finite embedding table.", argument="embeddings")
    return e


def _closeness(e: np.ndarray, token: int) -> np.ndarray:
    """``exp(-d / max d)``: Cape's distance term, in ``[exp(-1), 1]``."""
    d = np.linalg.norm(e - e[token], axis=1)
    top = d.max()
    return np.exp(-(d / top if top > 0 else d))


def hybrid_utility(
    logits: Any,
    embeddings: Any,
    token: int,
    *,
    logit_clip: float = 10.0,
    lambda_l: float = 0.5,
    lambda_d: float = 1.0,
) -> tuple[np.ndarray, float]:
    """Cape's hybrid utility of every candidate for replacing ``token``, and its range.

    ``u(t, r) = (clip(L_r, -B, B) + B) ** lambda_l * exp(-d(t, r) / max_r' d(t, r')) ** lambda_d``
    with ``L`` the context model's logits and ``d`` the Euclidean distance of embeddings.
    Shifted clipped logits lie in ``[0, 2B]`` and the distance term in ``(0, 1]``, so the
    utility lies in ``[0, (2B) ** lambda_l]``: that is the sensitivity returned.

    Parameters
    ----------
    logits : array-like, shape (vocab_size,)
        The context model's next-token logits (non-finite values count as ``-B``).
    embeddings : array-like, shape (vocab_size, dim)
        The public token embedding table.
    token : int
        The original token id.
    logit_clip : float, default 10
        ``B``.
    lambda_l, lambda_d : float, default 0.5 and 1.0
        The paper's exponents.

    Returns
    -------
    (numpy.ndarray, float)
        The utilities and their sensitivity ``(2B) ** lambda_l``.

    Examples
    --------
    >>> u, s = hybrid_utility([0.0, 3.0, -20.0], [[0.0], [1.0], [2.0]], 0, logit_clip=4.0)
    >>> u.round(3).tolist(), round(s, 3)
    ([2.0, 1.605, 0.0], 2.828)
    """
    e = _embeddings(embeddings)
    token = _token(token, e.shape[0], "token")
    b = _sensitivity(logit_clip)
    ll, ld = (_exponent(v, name) for v, name in ((lambda_l, "lambda_l"), (lambda_d, "lambda_d")))
    lg = np.asarray(logits, dtype=float)
    if lg.shape != (e.shape[0],):
        raise DataError(
            f"logits must have shape ({e.shape[0]},) to match embeddings, got {lg.shape}.", argument="logits"
        )
    shifted = np.clip(np.nan_to_num(lg, nan=-b, posinf=b, neginf=-b), -b, b) + b
    sens = (2.0 * b) ** ll
    return np.clip(shifted**ll * _closeness(e, token) ** ld, 0.0, sens), sens


def _exponent(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (0 <= value < math.inf):
        raise ParameterError(f"{name} must be a finite number >= 0, got {value!r}.", argument=name)
    return float(value)


def _token(token: Any, n: int, name: str) -> int:
    if isinstance(token, bool) or not isinstance(token, int | np.integer) or not 0 <= token < n:
        raise DataError(f"{name} must be a token id in [0, {n}), got {token!r}.", argument=name)
    return int(token)


def _token_ids(token_ids: Any, n: int) -> np.ndarray:
    ids = np.asarray(token_ids)
    if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
        raise DataError(
            f"token_ids must be a non-empty 1-D array of integer ids, got shape {ids.shape} and dtype "
            f"{ids.dtype}.",
            argument="token_ids",
        )
    if ids.min() < 0 or ids.max() >= n:
        raise DataError(
            f"token_ids must lie in the vocabulary [0, {n}); tokenise with the same vocabulary.",
            argument="token_ids",
        )
    return ids.astype(np.int64)


def _context_fn(context_model: Any, bos_id: int | None, n: int) -> Callable[[np.ndarray], np.ndarray]:
    if context_model is None:
        return lambda prefix: np.zeros(n)
    if hasattr(context_model, "config") and hasattr(context_model, "forward"):  # a torch causal LM
        import torch

        def lm(prefix: np.ndarray) -> np.ndarray:
            ids = ([bos_id] if bos_id is not None else []) + prefix.tolist()
            if not ids:
                return np.zeros(n)
            with torch.no_grad():
                out = context_model(input_ids=torch.tensor([ids], dtype=torch.long)).logits[0, -1]
            return out[:n].double().numpy()

        return lm
    if callable(context_model):
        return lambda prefix: np.asarray(context_model(prefix), dtype=float)
    raise ParameterError(
        "context_model must be None, a Hugging Face causal LM, or a callable prefix_ids -> logits.",
        argument="context_model",
    )


def _keep(keep: Iterable[int] | None) -> frozenset[int]:
    try:
        return frozenset(int(t) for t in (keep or ()))
    except (TypeError, ValueError):
        raise ParameterError("keep must be an iterable of token ids.", argument="keep") from None


def cape_perturb(
    token_ids: Any,
    *,
    epsilon: float,
    embeddings: Any,
    context_model: Any = None,
    bos_id: int | None = None,
    n_buckets: int | None = 50,
    logit_clip: float = 10.0,
    lambda_l: float = 0.5,
    lambda_d: float = 1.0,
    keep: Iterable[int] | None = None,
) -> Release:
    """Perturb a prompt with Cape: hybrid utility plus bucketised sampling, token by token.

    Tokens are replaced left to right. The context logits for position ``i`` come from the
    context model run on the **released** prefix (the tokens already perturbed), so a
    token's own draw is the only place it enters: one changed token costs ``epsilon``, ``k``
    changed tokens ``k x epsilon`` (adaptive composition; later positions see it only
    through released tokens).

    Parameters
    ----------
    token_ids : array-like of int, shape (n,)
        The prompt, in the vocabulary of ``embeddings`` (and of the context model).
    epsilon : float
        Per-token local-DP guarantee (worst case, :func:`cape_epsilon`).
    embeddings : array-like, shape (vocab_size, dim)
        Public token embeddings (e.g. a sentence encoder's input embeddings).
    context_model : None, Hugging Face causal LM, or callable, optional
        Gives next-token logits over the vocabulary for a prefix (a 1-D id array). A
        ``transformers`` causal LM (e.g. one from :mod:`trustlab.lm`) is run on
        ``[bos_id] + prefix``; its first ``vocab_size`` logits are used. None: no context
        (the distance term alone).
    bos_id : int, optional
        Token prepended for a causal LM; without it the first position has no context.
    n_buckets : int or None, default 50
        The paper's ``N_b``; None for the plain exponential mechanism.
    logit_clip, lambda_l, lambda_d : float
        ``B = 10``, ``lambda_L = 0.5``, ``lambda_D = 1`` (the paper's defaults).
    keep : iterable of int, optional
        Public token ids released unchanged (the paper keeps stop words and punctuation);
        their positions are then revealed and the guarantee covers the other tokens.

    Returns
    -------
    Release
        ``value``: the perturbed ids; ``epsilon``: per token.

    Examples
    --------
    >>> emb = np.eye(40)
    >>> r = cape_perturb([3, 1, 4], epsilon=20.0, embeddings=emb, n_buckets=10)
    >>> r.value.shape, r.epsilon, r.parameters["n_buckets"]
    ((3,), 20.0, 10)
    """
    e = _embeddings(embeddings)
    n = e.shape[0]
    ids = _token_ids(token_ids, n)
    epsilon = check_epsilon(epsilon)
    nb = _buckets(n_buckets)
    if bos_id is not None:
        bos_id = _token(bos_id, 1 << 62, "bos_id")
    context = _context_fn(context_model, bos_id, n)
    kept = _keep(keep)
    em = em_epsilon_for(epsilon, n, nb)
    out = ids.copy()
    sens = 1.0
    for i, t in enumerate(ids.tolist()):
        if t in kept:
            continue
        logits = context(out[:i])
        u, sens = hybrid_utility(logits, e, t, logit_clip=logit_clip, lambda_l=lambda_l, lambda_d=lambda_d)
        out[i] = _draw(u, em, sens, nb)
    return Release(
        out,
        epsilon,
        mechanism="Cape (hybrid utility, bucketised exponential mechanism; local DP per token)",
        parameters={
            "em_epsilon": em,
            "n_buckets": nb,
            "vocab_size": n,
            "logit_clip": float(logit_clip),
            "lambda_l": float(lambda_l),
            "lambda_d": float(lambda_d),
            "context": "released prefix" if context_model is not None else "none",
            "kept_tokens": sorted(kept),
            "neighbouring": _NEIGHBOURS,
        },
        description="perturbed prompt (token ids)",
        sensitivity=sens,
    )


def embedding_em_perturb(
    token_ids: Any, *, epsilon: float, embeddings: Any, keep: Iterable[int] | None = None
) -> Release:
    """The non-contextual baseline: the exponential mechanism on embedding distance (SANTEXT-style).

    Utility ``1 - d(t, r) / max_r' d(t, r')`` in ``[0, 1]``, one plain exponential-mechanism
    draw per token, calibrated to the same worst-case accounting as :func:`cape_perturb`.

    Parameters
    ----------
    token_ids : array-like of int
        The prompt.
    epsilon : float
        Per-token local-DP guarantee.
    embeddings : array-like, shape (vocab_size, dim)
        Public token embeddings.
    keep : iterable of int, optional
        Public token ids released unchanged.

    Returns
    -------
    Release

    Examples
    --------
    >>> r = embedding_em_perturb([0, 1], epsilon=1.0, embeddings=np.eye(5))
    >>> r.value.shape, r.mechanism
    ((2,), 'exponential mechanism on embedding distance (SANTEXT-style; local DP per token)')
    """
    e = _embeddings(embeddings)
    n = e.shape[0]
    ids = _token_ids(token_ids, n)
    epsilon = check_epsilon(epsilon)
    kept = _keep(keep)
    em = em_epsilon_for(epsilon, n, None)
    out = ids.copy()
    for i, t in enumerate(ids.tolist()):
        if t in kept:
            continue
        u = 1.0 + np.log(_closeness(e, t))  # 1 - d / max d
        out[i] = _draw(np.clip(u, 0.0, 1.0), em, 1.0, None)
    return Release(
        out,
        epsilon,
        mechanism="exponential mechanism on embedding distance (SANTEXT-style; local DP per token)",
        parameters={
            "em_epsilon": em,
            "vocab_size": n,
            "kept_tokens": sorted(kept),
            "neighbouring": _NEIGHBOURS,
        },
        description="perturbed prompt (token ids)",
        sensitivity=1.0,
    )
