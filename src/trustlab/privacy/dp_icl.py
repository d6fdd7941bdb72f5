"""Differentially private synthetic demonstrations for in-context learning (Tang et al.; PTA).

Each token of a synthetic demonstration is chosen by a Gaussian mechanism on next-token
distributions computed from disjoint subsets of the private demonstrations: the public
top-``k`` vocabulary, the sum over subsets, Gaussian noise, the argmax (Tang et al. 2024).
Plausible Token Amplification (Yamasaki et al. 2025) first reweights each subset's
distribution by ``p_base * (p_priv / p_pub) ** alpha`` (their eq. 13), at no extra privacy
cost. See ``docs/privacy/dp-icl.md`` for the accounting and the divergences from the papers.

References
----------
Yamasaki, Niwa, Chijiwa, Fukami, Miura. "Plausible Token Amplification for Improving
Accuracy of Differentially Private In-Context Learning Based on Implicit Bayesian
Inference". ICML 2025. Tang, Shin, Inan, Manoel, Mireshghallah, Lin, Gopi, Kulkarni, Sim.
"Privacy-Preserving In-Context Learning with Differentially Private Few-Shot Generation".
ICLR 2024.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from trustlab._validation import check_delta, check_epsilon, check_positive_int, context_length
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.accounting import Accountant, charge
from trustlab.privacy.calibration import analytic_gaussian_sigma
from trustlab.privacy.dp_icl_subsampling import SUBSAMPLING_NEIGHBOURS, draw_subsets, subsampled_sigma
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import add_gaussian, grid_slack

__all__ = [
    "GRID_K",
    "clip_to_simplex",
    "dp_icl_sigma",
    "generate_dp_demonstrations",
    "private_token",
    "pta_distribution",
    "public_vocabulary",
    "step_sensitivity",
]

GRID_K = -20
"""Outputs of the noisy sums lie on the grid ``2**GRID_K``."""

_FLOOR = 1e-12  # public floor on probabilities before taking logs in eq. (13)
_NEIGHBOURS = "replace one private demonstration (the number of demonstrations is public)"
_METHODS = ("pta", "baseline")

NextTokenFn = Callable[[list[list[int]]], np.ndarray]


def clip_to_simplex(dists: Any) -> np.ndarray:
    """Project rows onto ``{x >= 0, sum(x) <= 1}``: the clipping that enforces the sensitivity.

    NaN and infinite entries become 0, negative entries 0, and a row summing to more than
    1 is divided by its sum. Any two such rows differ by at most ``sqrt(2)`` in L2 norm.

    Parameters
    ----------
    dists : array-like of float, shape (M, V)
        One (claimed) next-token distribution per private subset.

    Returns
    -------
    numpy.ndarray of float, shape (M, V)

    Examples
    --------
    >>> clip_to_simplex([[3.0, 1.0], [-1.0, 0.5]]).tolist()
    [[0.75, 0.25], [0.0, 0.5]]
    """
    x = np.nan_to_num(np.asarray(dists, dtype=float), nan=0.0, posinf=0.0, neginf=0.0)
    x = np.maximum(x, 0.0)
    return x / np.maximum(x.sum(axis=-1, keepdims=True), 1.0)


def public_vocabulary(p_pub: Any, top_k: int, top_p: float = 1.0) -> np.ndarray:
    """The public vocabulary: top-``k`` (Tang et al., eq. 1) cut to top-``p`` (PTA's Algorithm 2).

    ``V'`` holds the ``top_k`` most likely tokens under the public prompt, ``V''`` the fewest
    most likely tokens whose public probabilities sum to at least ``top_p``; the result is
    ``V' ∩ V''`` (Algorithm 2 of Yamasaki et al. 2025; ``top_p = 1`` keeps ``V'``, the default
    P1). Only the public distribution is read. Ties are broken towards the smaller token id.

    Parameters
    ----------
    p_pub : array-like of shape (vocab_size,)
        Next-token probabilities under the public (zero-shot) prompt.
    top_k : int
        Number of tokens to keep (capped at the vocabulary size).
    top_p : float, default 1.0
        Cumulative public probability to reach, in ``(0, 1]`` (the paper searches 0.7-0.9).

    Returns
    -------
    numpy.ndarray of int64
        Token ids, most likely first (at least one).

    Examples
    --------
    >>> public_vocabulary([0.1, 0.5, 0.4], 2).tolist()
    [1, 2]
    >>> public_vocabulary([0.1, 0.5, 0.4], 3, top_p=0.8).tolist()
    [1, 2]
    """
    p = np.asarray(p_pub, dtype=float).ravel()
    k = min(check_positive_int(top_k, "top_k"), p.size)
    top_p = _check_top_p(top_p)
    order = np.argsort(-p, kind="stable")
    if top_p < 1.0:
        cum = np.cumsum(np.maximum(np.nan_to_num(p[order], nan=0.0), 0.0))
        k = min(k, int(np.searchsorted(cum, top_p, side="left")) + 1)
    return order[:k].astype(np.int64)


def _check_top_p(top_p: Any) -> float:
    ok = isinstance(top_p, int | float) and not isinstance(top_p, bool)
    if not (ok and math.isfinite(top_p) and 0.0 < top_p <= 1.0):
        raise ParameterError(
            f"top_p must be a number in (0, 1] (1 turns the top-p cut off), got {top_p!r}.",
            argument="top_p",
        )
    return float(top_p)


def pta_distribution(
    p_priv: Any, p_pub: Any, p_base: Any | None, alpha: float, vocab: Any | None = None
) -> np.ndarray:
    """PTA's reweighted distributions ``p_i ∝ p_base * (p_priv_i / p_pub) ** alpha`` (eq. 13).

    Computed in log space with probabilities floored at ``1e-12``, then normalised
    (Algorithm 1, lines 5-6): over the whole vocabulary, or over ``vocab`` only (zero
    elsewhere) when it is given. ``p_base=None`` drops the base probability (the paper's
    ablation PA3, "PTA w.o. Base Prob.": ``p_i ∝ (p_priv_i / p_pub) ** alpha``).

    Parameters
    ----------
    p_priv : array-like, shape (M, V)
        Next-token distributions under the private prompts.
    p_pub : array-like, shape (V,)
        Under the public prompt.
    p_base : array-like, shape (V,), or None
        Under the generated demonstration alone; ``None`` for PA3.
    alpha : float
        Amplification strength (``alpha = 0`` returns ``p_base``).
    vocab : array-like of int, optional
        The public vocabulary to normalise over (from :func:`public_vocabulary`).

    Returns
    -------
    numpy.ndarray, shape (M, V)

    Examples
    --------
    >>> pta_distribution([[0.5, 0.5]], [0.8, 0.2], [0.5, 0.5], 1.0).round(2).tolist()
    [[0.2, 0.8]]
    >>> pta_distribution([[0.4, 0.4, 0.2]], [0.5, 0.25, 0.25], None, 1.0, vocab=[0, 1]).round(2).tolist()
    [[0.33, 0.67, 0.0]]
    """
    lp = np.log(np.maximum(np.asarray(p_priv, dtype=float), _FLOOR))
    lq = np.log(np.maximum(np.asarray(p_pub, dtype=float), _FLOOR))
    z = float(alpha) * (lp - lq[None, :])
    if p_base is not None:
        z = z + np.log(np.maximum(np.asarray(p_base, dtype=float), _FLOOR))[None, :]
    if vocab is not None:
        keep = np.zeros(z.shape[1], dtype=bool)
        keep[np.asarray(vocab, dtype=np.int64)] = True
        z = np.where(keep[None, :], z, -np.inf)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def step_sensitivity(top_k: int) -> float:
    """L2 sensitivity of one noisy sum over ``top_k`` tokens: ``sqrt(2)`` plus the grid slack.

    Replacing one private prompt changes its probability vector, whose L2 distance to any
    other is at most ``sqrt(2)``; rounding ``top_k`` values to the sampler's grid
    ``2**GRID_K`` adds :func:`~trustlab.privacy.samplers.grid_slack`.

    Parameters
    ----------
    top_k : int
        Number of tokens aggregated per step.

    Returns
    -------
    float
        The L2 sensitivity.

    Examples
    --------
    >>> from trustlab.privacy.dp_icl import step_sensitivity
    >>> round(step_sensitivity(2), 5)
    1.41421
    """
    return math.sqrt(2.0) + grid_slack(GRID_K, check_positive_int(top_k, "top_k"), "l2")


def dp_icl_sigma(epsilon: float, delta: float, n_steps: int, top_k: int) -> float:
    """Noise std per token so that ``n_steps`` tokens together are ``(epsilon, delta)``-DP.

    ``n_steps`` Gaussian mechanisms of sensitivity ``s`` and std ``sigma`` compose exactly
    into one Gaussian mechanism of sensitivity ``sqrt(n_steps) * s`` (Gaussian DP), which is
    calibrated analytically (Balle and Wang 2018).

    Parameters
    ----------
    epsilon : float
        Total epsilon of the generated answer.
    delta : float
        Total delta of the generated answer.
    n_steps : int
        Number of generated tokens (noisy aggregations).
    top_k : int
        Size of the public vocabulary each step aggregates over.

    Returns
    -------
    float
        Gaussian noise standard deviation per step.

    Examples
    --------
    >>> round(dp_icl_sigma(1.0, 1e-5, 1, 2) / dp_icl_sigma(1.0, 1e-5, 4, 2), 6)
    0.5
    """
    n = check_positive_int(n_steps, "n_steps")
    return analytic_gaussian_sigma(
        check_epsilon(epsilon), check_delta(delta), math.sqrt(n) * step_sensitivity(top_k)
    )


def private_token(dists: Any, vocab: Any, sigma: float) -> int:
    """One private token: clip, restrict to ``vocab``, sum over subsets, add noise, argmax.

    Parameters
    ----------
    dists : array-like, shape (M, V)
        One next-token distribution per disjoint private subset.
    vocab : array-like of int
        The public vocabulary (from :func:`public_vocabulary`).
    sigma : float
        Noise std (from :func:`dp_icl_sigma`).

    Returns
    -------
    int
        The chosen token id (post-processing of the Gaussian mechanism's noisy sums).

    Examples
    --------
    >>> private_token([[0.0, 1.0], [0.0, 1.0]], [0, 1], 0.0)
    1
    """
    v = np.asarray(vocab, dtype=np.int64)
    clipped = clip_to_simplex(dists)[:, v]
    noisy = add_gaussian(clipped.sum(axis=0), float(sigma), k=GRID_K)
    return int(v[int(np.argmax(noisy))])


def _ids(seq: Any, name: str, vocab_size: int | None, *, allow_empty: bool = True) -> list[int]:
    arr = np.asarray(list(seq) if not isinstance(seq, np.ndarray) else seq)
    bad_kind = arr.size > 0 and arr.dtype.kind not in "iu"
    if arr.ndim != 1 or bad_kind or (arr.size == 0 and not allow_empty):
        raise DataError(
            f"{name} must be a {'non-empty ' if not allow_empty else ''}1-D sequence of integer token ids, "
            f"got shape {arr.shape} and dtype {arr.dtype}.",
            argument=name,
        )
    if vocab_size is not None and arr.size and (arr.min() < 0 or arr.max() >= vocab_size):
        raise DataError(
            f"{name} must lie in the vocabulary [0, {vocab_size}); tokenise with the model's tokenizer.",
            argument=name,
        )
    return [int(t) for t in arr.tolist()]


def _next_token_fn(model: Any) -> tuple[NextTokenFn, int | None, int | None]:
    """``f(contexts) -> (B, V)`` probabilities, the vocabulary size and the context limit."""
    if hasattr(model, "config") and hasattr(model, "forward"):
        import torch

        cfg = model.config
        vocab = int(getattr(cfg, "vocab_size", 0)) or None
        limit = context_length(model)

        def lm(contexts: list[list[int]]) -> np.ndarray:
            longest = max(len(c) for c in contexts)
            ids = torch.zeros((len(contexts), longest), dtype=torch.long)
            for r, c in enumerate(contexts):  # right padding: a causal LM's last real logit ignores it
                ids[r, : len(c)] = torch.tensor(c, dtype=torch.long)
            last = torch.tensor([len(c) - 1 for c in contexts])
            with torch.no_grad():
                logits = model(input_ids=ids).logits[torch.arange(len(contexts)), last]
            return torch.softmax(logits.double(), dim=-1).numpy()

        return lm, vocab, (int(limit) if limit else None)
    if callable(model):
        return lambda contexts: np.asarray(model(contexts), dtype=float), None, None
    raise ParameterError(
        "model must be a Hugging Face causal LM or a callable mapping a list of token-id lists to "
        f"next-token probabilities of shape (batch, vocab), got {type(model).__name__}.",
        argument="model",
    )


def generate_dp_demonstrations(
    model: Any,
    private: Sequence[Sequence[int]],
    *,
    epsilon: float,
    delta: float,
    label_prompts: Sequence[Sequence[int]],
    shots: int = 1,
    max_tokens: int = 16,
    max_demo_tokens: int | None = None,
    n_demonstrations: int | None = None,
    instruction: Sequence[int] = (),
    delimiter: Sequence[int] = (),
    top_k: int = 50,
    top_p: float = 1.0,
    alpha: float = 1.0,
    method: str = "pta",
    base_probability: bool = True,
    eos_id: int | None = None,
    n_subsets: int | None = None,
    accountant: Accountant | None = None,
) -> Release:
    """Generate ``(epsilon, delta)``-DP synthetic demonstrations (Tang et al. 2024; PTA, 2025).

    By default the private demonstrations are split in their given order into ``M =
    len(private) // shots`` fixed disjoint subsets; with ``n_subsets=M`` every token draws fresh
    subsets instead (Algorithm 3: ``M * shots`` demonstrations without replacement from a CSPRNG,
    amplified by subsampling; see :mod:`trustlab.privacy.dp_icl_subsampling`).
    Synthetic demonstration ``j`` starts with ``label_prompts[j]``;
    each of its tokens is :func:`private_token` applied to the ``M`` subsets' next-token
    distributions (``method="baseline"``: renormalised within the public top-``k``;
    ``method="pta"``: :func:`pta_distribution` with the public prompt and the demonstration
    alone), with noise calibrated by :func:`dp_icl_sigma` over all
    ``n_demonstrations * max_tokens`` steps.

    Parameters
    ----------
    model : transformers causal LM or callable
        The LM (in eval mode), or ``f(list of token-id lists) -> (batch, vocab)`` next-token
        probabilities.
    private : sequence of sequences of int
        The private demonstrations, formatted and tokenised (label and text). Each is cut to
        ``max_demo_tokens``.
    epsilon, delta : float
        The guarantee of the whole release (all demonstrations together).
    label_prompts : sequence of sequences of int
        The public start of each synthetic demonstration (e.g. ``"Label: sports. Text:"``).
    shots : int, default 1
        Private demonstrations per subset (``N`` in the paper).
    max_tokens : int, default 16
        Tokens generated per demonstration (``T``); every step is charged.
    max_demo_tokens : int, optional
        Public cap on a private demonstration's length; default ``max_tokens + 8``.
    n_demonstrations : int, optional
        Default ``len(label_prompts)``; label prompts are cycled.
    instruction, delimiter : sequence of int
        Public task instruction (prompt start) and the tokens after each demonstration.
    top_k : int, default 50
        Size of the public vocabulary (clipped to the vocabulary size).
    top_p : float, default 1.0
        Also cut the public vocabulary to the fewest tokens whose *public* probabilities sum to
        ``top_p`` (Algorithm 2; ``top_p < 1`` with PTA is the paper's ablation PA2, with the
        baseline BA2). Post-processing of public outputs: the cost is unchanged.
    alpha : float, default 1.0
        PTA's amplification strength (ignored by the baseline).
    method : {"pta", "baseline"}, default "pta"
    base_probability : bool, default True
        PTA only: ``False`` drops ``p_base`` from eq. (13) and normalises over the public
        vocabulary (the paper's ablation PA3, "PTA w.o. Base Prob."). The cost is unchanged.
    eos_id : int, optional
        A demonstration ends after this token (its remaining steps are still charged).
    n_subsets : int, optional
        ``M`` for Algorithm 3's random draw: per token, ``M * shots`` private demonstrations are
        drawn without replacement (``secrets``, unseeded) and split into ``M`` subsets; the noise
        is calibrated by the subsampled-Gaussian PLD with rate ``q = M * shots / len(private)``
        (replace-one neighbours) and the release is ``measure="approximate"``. Default ``None``:
        the fixed partition of all demonstrations, Gaussian-DP composition.
    accountant : Accountant, optional
        Checked before any noise is drawn, then charged.

    Returns
    -------
    Release
        ``value``: list of synthetic demonstrations (token-id lists, label prompt included);
        Gaussian measure with ``sensitivity = sqrt(n_steps) * (sqrt(2) + slack)`` and
        ``noise_scale`` the per-token noise std (with ``n_subsets``: approximate measure,
        ``noise_scale`` the per-token std, ``parameters["sampling_rate"]`` the rate ``q``).

    Raises
    ------
    ParameterError
        Bad epsilon/delta/top_k/top_p/alpha/method/shots/base_probability/n_subsets, fewer
        private demonstrations than ``shots`` (or ``n_subsets * shots``), or prompts longer than
        the model's context.
    DataError
        Token ids that are not integers in the model's vocabulary.

    Examples
    --------
    See ``docs/privacy/dp-icl.md``.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    if method not in _METHODS:
        raise ParameterError(f"method must be one of {_METHODS}, got {method!r}.", argument="method")
    if not (isinstance(alpha, int | float) and math.isfinite(alpha) and alpha >= 0):
        raise ParameterError(f"alpha must be a finite number >= 0, got {alpha!r}.", argument="alpha")
    top_p = _check_top_p(top_p)
    if not isinstance(base_probability, bool | np.bool_):
        raise ParameterError(
            f"base_probability must be True or False, got {base_probability!r}.", argument="base_probability"
        )
    if not base_probability and method != "pta":
        raise ParameterError(
            "base_probability=False is PTA's ablation PA3; use it with method='pta'.",
            argument="base_probability",
        )
    shots, max_tokens = check_positive_int(shots, "shots"), check_positive_int(max_tokens, "max_tokens")
    cap = check_positive_int(
        max_demo_tokens if max_demo_tokens is not None else max_tokens + 8, "max_demo_tokens"
    )
    fn, vocab_size, limit = _next_token_fn(model)
    labels = [_ids(p, "label_prompts", vocab_size, allow_empty=False) for p in label_prompts]
    if not labels:
        raise ParameterError("label_prompts must hold at least one label prompt.", argument="label_prompts")
    n_demo = check_positive_int(
        n_demonstrations if n_demonstrations is not None else len(labels), "n_demonstrations"
    )
    instr, delim = _ids(instruction, "instruction", vocab_size), _ids(delimiter, "delimiter", vocab_size)
    if eos_id is not None:  # an id outside the vocabulary would never stop a demonstration
        _ids([eos_id], "eos_id", vocab_size)
    demos = [_ids(d, "private", vocab_size)[:cap] for d in private]
    m = len(demos) // shots if n_subsets is None else check_positive_int(n_subsets, "n_subsets")
    if m * shots > len(demos):
        raise ParameterError(
            f"n_subsets * shots = {m * shots} exceeds the {len(demos)} private demonstrations; "
            "lower n_subsets or shots.",
            argument="n_subsets",
        )
    if m < 1:
        raise ParameterError(
            f"private holds {len(demos)} demonstrations, fewer than shots={shots}; lower shots.",
            argument="shots",
        )
    longest = len(instr) + shots * (cap + len(delim)) + max(map(len, labels)) + max_tokens
    if limit is not None and longest > limit:
        raise ParameterError(
            f"prompts reach {longest} tokens, over the model's context of {limit}; lower shots, "
            "max_tokens or max_demo_tokens.",
            argument="max_demo_tokens",
        )
    check_positive_int(top_k, "top_k")
    n_steps = n_demo * max_tokens
    k_eff = top_k if vocab_size is None else min(top_k, vocab_size)
    sens = math.sqrt(n_steps) * step_sensitivity(k_eff)
    if n_subsets is None:
        sigma = dp_icl_sigma(epsilon, delta, n_steps, k_eff)
    else:  # Algorithm 3: amplification by subsampling without replacement, PLD-calibrated
        sigma = subsampled_sigma(
            epsilon,
            delta,
            n=len(demos),
            sample_size=m * shots,
            n_steps=n_steps,
            sensitivity=step_sensitivity(k_eff),
        )

    def prompts(subsets: list[list[int]]) -> list[list[int]]:
        return [instr + [t for i in sub for t in demos[i] + delim] for sub in subsets]

    fixed = prompts([list(range(i * shots, (i + 1) * shots)) for i in range(m)])

    def draw() -> list[list[int]]:
        out: list[list[int]] = []
        for j in range(n_demo):
            gen = list(labels[j % len(labels)])
            for _ in range(max_tokens):
                prefixes = fixed if n_subsets is None else prompts(draw_subsets(len(demos), m, shots))
                probs = fn([instr + gen, gen] + [pre + gen for pre in prefixes])
                p_pub, p_base, p_priv = probs[0], probs[1], probs[2:]
                vocab = public_vocabulary(p_pub, top_k, top_p)  # public prompt only
                if method == "pta" and base_probability:
                    dists = pta_distribution(p_priv, p_pub, p_base, alpha)
                elif method == "pta":
                    dists = pta_distribution(p_priv, p_pub, None, alpha, vocab=vocab)
                else:
                    dists = clip_to_simplex(p_priv[:, vocab])
                    dists = dists / np.maximum(dists.sum(axis=1, keepdims=True), _FLOOR)
                    full = np.zeros_like(p_priv)
                    full[:, vocab] = dists
                    dists = full
                tok = private_token(dists, vocab, sigma)
                gen.append(tok)
                if eos_id is not None and tok == eos_id:
                    break
            out.append(gen)
        return out

    sampled = n_subsets is not None
    plan = Release(
        None,
        epsilon,
        delta,
        mechanism=f"DP synthetic demonstrations ({'PTA' if method == 'pta' else 'Tang et al.'}): "
        "Gaussian noisy argmax over the public top-k, per token"
        + (", fresh subsets drawn without replacement per token (Algorithm 3)" if sampled else ""),
        parameters={
            "method": method,
            "n_subsets": m,
            "shots": shots,
            "n_demonstrations": n_demo,
            "max_tokens": max_tokens,
            "max_demo_tokens": cap,
            "n_steps": n_steps,
            "top_k": k_eff,
            "top_p": top_p,
            "base_probability": bool(base_probability),
            "alpha": float(alpha),
            "sigma_per_token": sigma,
            "grid": f"2**{GRID_K}",
            "clipping": "each subset's distribution projected onto {x >= 0, sum x <= 1}",
            "neighbouring": SUBSAMPLING_NEIGHBOURS if sampled else _NEIGHBOURS,
            "sampling": "M*N without replacement per token, secrets.SystemRandom" if sampled else "none",
            "n_private": len(demos),
            "sampling_rate": m * shots / len(demos) if sampled else 1.0,
            "accounting": "PLD of the subsampled Gaussian (C_q), replace-one" if sampled else "Gaussian DP",
        },
        description="synthetic in-context demonstrations (token ids)",
        measure="approximate" if sampled else "gaussian",
        sensitivity=None if sampled else sens,
        noise_scale=sigma,
    )
    return charge(accountant, plan, draw)
