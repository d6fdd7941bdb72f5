"""BiMark: multi-bit, unbiased, multilayer watermarking of language-model text.

Feng, Zhang, Zhang, Zhang & Pan, "BiMark: Unbiased Multilayer Watermarking for Large
Language Models", ICML 2025 (PMLR 267:17049-17067, arXiv:2506.21602). See
``docs/security/watermark.md`` for the method, what is implemented and every divergence.

The reweighting and the extraction are NumPy; the ``transformers`` ``LogitsProcessor``
(:meth:`BiMark.processor`) imports torch and ``transformers`` only when it is built, so
``import trustlab.security`` stays light.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab.errors import DataError, ParameterError

__all__ = ["BiMark", "Extraction", "MPACBaseline", "generate_watermarked"]


def _int(name: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ParameterError(f"{name} must be an integer, got {value!r}; pass an int.", argument=name)
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ParameterError(f"{name} must be {bound}, got {value}; pass a value {bound}.", argument=name)
    return int(value)


def _key_bytes(key: Any) -> bytes:
    if isinstance(key, (bytes, bytearray)) and len(key) > 0:
        return bytes(key)
    if isinstance(key, str) and key:
        return key.encode()
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and 0 <= key < 2**128:
        return int(key).to_bytes(16, "little", signed=False)
    raise ParameterError(
        f"key must be a non-empty bytes/str or an int in [0, 2**128) (16 bytes), got {key!r}; pass a "
        "secret key (a longer secret as bytes or str).",
        argument="key",
    )


@dataclass(frozen=True)
class Extraction:
    """A message read back from token ids.

    Attributes
    ----------
    bits : ndarray of int, shape (n_bits,)
        Decoded bits; ``-1`` where the bit is undecidable (no vote, or a tie).
    message : str or None
        The decoded bits as a ``"0"/"1"`` string, or ``None`` when any bit is undecidable
        (the text is too short: an explicit "undecidable", not a guess).
    p_value : float
        Exact probability, for text not watermarked with this key, of a majority-vote total
        at least as large as observed (1.0 when nothing was scored).
    n_scored : int
        Token positions scored (after the context window, repeated contexts skipped).
    votes : ndarray of int, shape (n_bits, 2)
        ``votes[j, b]``: votes for bit ``j`` being ``b``.

    See Also
    --------
    BiMark.extract : builds it.
    """

    bits: np.ndarray
    message: str | None
    p_value: float
    n_scored: int
    votes: np.ndarray = field(repr=False)

    @property
    def decided(self) -> bool:
        """Whether every bit was decided."""
        return self.message is not None


def _check_message(message: Any, n_bits: int) -> np.ndarray:
    if isinstance(message, str) and set(message) <= {"0", "1"}:
        bits = np.array([int(ch) for ch in message], dtype=np.int64)
    else:
        try:
            bits = np.asarray(message, dtype=np.int64).ravel()
        except (TypeError, ValueError):
            bits = np.array([-1])
    if bits.size != n_bits or not np.isin(bits, (0, 1)).all():
        valid = bits.size > 0 and bool(np.isin(bits, (0, 1)).all())
        other = f" or build the watermark with n_bits={bits.size}" if valid else ""
        raise ParameterError(
            f"message must be {n_bits} bits (a '0'/'1' string or 0/1 array), got {message!r}; "
            f"pass exactly n_bits={n_bits} bits{other}.",
            argument="message",
        )
    return bits


def _check_ids(token_ids: Any, vocab_size: int) -> np.ndarray:
    ids = np.asarray(token_ids)
    if ids.ndim == 1 and ids.size == 0:  # an empty text: too short to decode (undecidable), not bad input
        ids = ids.astype(np.int64)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise DataError(
            "token_ids must be a 1-D sequence of integer token ids; pass one text's ids (e.g. ids[0]).",
            argument="token_ids",
        )
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise DataError(
            f"token_ids hold ids outside [0, {vocab_size}); the tokenizer does not match the "
            "watermark's vocab_size: build the watermark with the model's vocabulary size.",
            argument="token_ids",
        )
    return ids.astype(np.int64)


def _majority_p_value(votes: np.ndarray) -> float:
    """Exact P(sum_j max(X_j, n_j - X_j) >= observed), X_j ~ Bin(n_j, 1/2) independent."""
    from scipy.stats import binom

    observed = int(votes.max(axis=1).sum())
    dist = np.array([1.0])
    for n in votes.sum(axis=1):
        n = int(n)
        pmf = binom.pmf(np.arange(n + 1), n, 0.5)
        m = np.zeros(n + 1)
        for x in range(n + 1):
            m[max(x, n - x)] += pmf[x]
        dist = np.convolve(dist, m)
    return float(min(1.0, dist[observed:].sum()))


class _PrefixKeyed:
    """Shared machinery: a key, a context window, and per-position pseudorandom draws."""

    def __init__(self, vocab_size: int, key: Any, n_bits: int, window: int) -> None:
        self.vocab_size = _int("vocab_size", vocab_size, 2)
        self.n_bits = _int("n_bits", n_bits, 1, 256)
        self.window = _int("window", window, 1)
        self._key = _key_bytes(key)

    def _digest(self, prefix: np.ndarray) -> bytes:
        data = self._key + b"|" + np.asarray(prefix, dtype="<i8").tobytes()
        return hashlib.blake2b(data, digest_size=16).digest()

    def _bit_index(self, digest: bytes) -> int:
        return int.from_bytes(digest[:8], "little") % self.n_bits

    def _positions(self, ids: np.ndarray, start: int):
        """Yield (t, digest) for each scorable position t >= start, skipping repeated contexts."""
        seen: set[bytes] = set()
        for t in range(max(start, self.window), ids.size):
            prefix = ids[t - self.window : t]
            raw = prefix.tobytes()
            if raw in seen:
                continue
            seen.add(raw)
            yield t, self._digest(prefix)

    def _votes(self, ids: np.ndarray, t: int, digest: bytes) -> tuple[int, np.ndarray]:
        raise NotImplementedError

    def _step(self, probs: np.ndarray, digest: bytes, bits: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def extract(self, token_ids: Any, *, start: int = 0) -> Extraction:
        """Read the message back from token ids; no model needed (model-agnostic).

        Parameters
        ----------
        token_ids : array-like of int, shape (length,)
            One text's token ids, including at least ``window`` tokens of context before
            the first generated token.
        start : int, default=0
            First position that was generated (``len(prompt_ids)``); earlier ones are not scored.

        Returns
        -------
        Extraction
        """
        ids = _check_ids(token_ids, self.vocab_size)
        start = _int("start", start, 0)
        votes = np.zeros((self.n_bits, 2), dtype=np.int64)
        n_scored = 0
        for t, digest in self._positions(ids, start):
            j, bit_votes = self._votes(ids, t, digest)
            votes[j, 1] += int(bit_votes.sum())
            votes[j, 0] += int(bit_votes.size - bit_votes.sum())
            n_scored += 1
        bits = np.where(votes[:, 1] > votes[:, 0], 1, np.where(votes[:, 0] > votes[:, 1], 0, -1))
        message = None if (bits < 0).any() else "".join(str(int(b)) for b in bits)
        p = _majority_p_value(votes) if n_scored else 1.0
        return Extraction(bits, message, p, n_scored, votes)

    def processor(self, message: Any) -> Any:
        """A ``transformers`` ``LogitsProcessor`` embedding ``message`` in sampled text.

        Put it last in the processor list (after temperature/top-k, if any); sample, do not
        decode greedily. One processor per ``generate`` call: it remembers the contexts it
        has watermarked, as :meth:`extract` skips repeated ones.
        """
        bits = _check_message(message, self.n_bits)
        from trustlab.security._watermark_torch import make_processor

        return make_processor(self, bits)


class BiMark(_PrefixKeyed):
    """BiMark watermark (Feng et al., ICML 2025): bit-flip unbiased multilayer reweighting.

    Each of ``n_layers`` layers splits the vocabulary into two fixed halves ``V0, V1`` (from
    the key). At each step the last ``window`` tokens and the key give one message-bit index
    ``j`` and ``n_layers`` fair pseudorandom bits ``c_i``; layer ``i`` scales the mass of
    ``V0`` by ``1 + s_i delta_i`` and of ``V1`` by ``1 - s_i delta_i P(V0)/P(V1)`` with
    ``s_i = +1`` if ``c_i XOR m_j = 1`` else ``-1`` and ``delta_i = min(delta, P(V1)/P(V0))``,
    applied to the distribution left by layer ``i - 1``. As ``c_i`` is a fair coin, each layer
    leaves the distribution unchanged in expectation over keys (unbiased); detection and
    extraction need only the key (model-agnostic): the token's side of each partition
    XOR ``c_i`` is a vote for ``m_j``.

    Parameters
    ----------
    vocab_size : int
        The model's vocabulary size (length of the logits).
    key : bytes, str or int
        The secret key.
    n_bits : int, default=8
        Message length.
    n_layers : int, default=10
        Reweighting layers (the paper's multilayer scheme; 1-64).
    delta : float, default=1.0
        Scaling factor in ``(0, 1]``.
    window : int, default=2
        Context tokens that seed each step's pseudorandom draws.

    Examples
    --------
    >>> wm = BiMark(16, key=7, n_bits=4, n_layers=3)
    >>> p = np.full(16, 1 / 16)
    >>> q = wm.reweight(p, [1, 2], "1010")
    >>> round(float(q.sum()), 12), bool((q >= 0).all())
    (1.0, True)
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        key: Any,
        n_bits: int = 8,
        n_layers: int = 10,
        delta: float = 1.0,
        window: int = 2,
    ) -> None:
        super().__init__(vocab_size, key, n_bits, window)
        self.n_layers = _int("n_layers", n_layers, 1, 64)
        if not isinstance(delta, (int, float)) or not 0.0 < float(delta) <= 1.0:
            raise ParameterError(
                f"delta must be in (0, 1], got {delta!r}; pass e.g. delta=1.0.", argument="delta"
            )
        self.delta = float(delta)
        rng = np.random.default_rng(
            int.from_bytes(hashlib.blake2b(self._key + b"|partitions").digest()[:8], "little")
        )
        self.partitions = np.zeros((self.n_layers, self.vocab_size), dtype=bool)
        for i in range(self.n_layers):
            self.partitions[i, rng.permutation(self.vocab_size)[: self.vocab_size // 2]] = True
        self._masks = self.partitions.astype(np.float64)

    def _draws(self, digest: bytes) -> tuple[int, np.ndarray]:
        v = int.from_bytes(digest[8:], "little")
        return self._bit_index(digest), np.array([(v >> i) & 1 for i in range(self.n_layers)], dtype=np.int64)

    def _apply(self, probs: np.ndarray, c: np.ndarray, bit: int) -> np.ndarray:
        q = np.array(probs, dtype=np.float64)
        for i in range(self.n_layers):
            mask = self._masks[i]
            p0 = float(q @ mask)
            if p0 <= 1e-12 or p0 >= 1.0 - 1e-12:
                continue
            d = min(self.delta, (1.0 - p0) / p0)
            s = 1.0 if (int(c[i]) ^ bit) == 1 else -1.0
            up, down = 1.0 + s * d, max(0.0, 1.0 - s * d * p0 / (1.0 - p0))
            q *= down + (up - down) * mask  # V0 scaled by `up`, V1 by `down`
            q /= q.sum()
        return q

    def reweight(self, probs: Any, context: Any, message: Any) -> np.ndarray:
        """The watermarked next-token distribution after ``context`` (its last ``window`` ids).

        Parameters
        ----------
        probs : array-like of float, shape (vocab_size,)
            The model's next-token distribution.
        context : array-like of int
            The tokens so far (at least ``window``).
        message : str or array-like of 0/1
            The ``n_bits``-bit message.

        Returns
        -------
        ndarray of float64, shape (vocab_size,)
        """
        bits = _check_message(message, self.n_bits)
        p = np.asarray(probs, dtype=np.float64)
        if (
            p.shape != (self.vocab_size,)
            or not np.isfinite(p).all()
            or (p < 0).any()
            or abs(p.sum() - 1) > 1e-6
        ):
            raise DataError(
                f"probs must be a probability vector of length vocab_size={self.vocab_size}; "
                "pass softmax(logits).",
                argument="probs",
            )
        ctx = _check_ids(context, self.vocab_size)
        if ctx.size < self.window:
            raise DataError(
                f"context needs at least window={self.window} tokens; pass a longer prompt.",
                argument="context",
            )
        j, c = self._draws(self._digest(ctx[-self.window :]))
        return self._apply(p, c, int(bits[j]))

    def _step(self, probs: np.ndarray, digest: bytes, bits: np.ndarray) -> np.ndarray:
        j, c = self._draws(digest)
        return self._apply(probs, c, int(bits[j]))

    def _votes(self, ids: np.ndarray, t: int, digest: bytes) -> tuple[int, np.ndarray]:
        j, c = self._draws(digest)
        side = self.partitions[:, ids[t]].astype(np.int64)
        return j, side ^ c


class MPACBaseline(_PrefixKeyed):
    """Baseline multi-bit watermark in the style of MPAC (Yoo et al., NAACL 2024), binary.

    At each step the context picks a message bit ``j`` and a fresh random half of the
    vocabulary; logits of the half indexed by ``m_j`` get ``+delta`` (Kirchenbauer et al.'s
    green list, which is biased). Extraction: a token in the first half votes 0, else 1.

    Parameters
    ----------
    vocab_size, key, n_bits, window
        As for :class:`BiMark`.
    delta : float, default=2.0
        Logit bias (> 0).

    Examples
    --------
    >>> wm = MPACBaseline(16, key=7, n_bits=4)
    >>> ex = wm.extract(np.arange(10))  # unwatermarked ids: a p-value, no evidence
    >>> ex.n_scored, ex.bits.shape
    (8, (4,))
    """

    def __init__(
        self, vocab_size: int, *, key: Any, n_bits: int = 8, delta: float = 2.0, window: int = 2
    ) -> None:
        super().__init__(vocab_size, key, n_bits, window)
        if not isinstance(delta, (int, float)) or not float(delta) > 0:
            raise ParameterError(f"delta must be > 0, got {delta!r}; pass e.g. delta=2.0.", argument="delta")
        self.delta = float(delta)

    def _half(self, digest: bytes) -> np.ndarray:
        rng = np.random.default_rng(int.from_bytes(digest[8:], "little"))
        half = np.zeros(self.vocab_size, dtype=bool)
        half[rng.permutation(self.vocab_size)[: self.vocab_size // 2]] = True
        return half

    def _step(self, probs: np.ndarray, digest: bytes, bits: np.ndarray) -> np.ndarray:
        j = self._bit_index(digest)
        green = self._half(digest) if bits[j] == 0 else ~self._half(digest)
        q = np.array(probs, dtype=np.float64) * np.where(green, np.exp(self.delta), 1.0)
        return q / q.sum()

    def _votes(self, ids: np.ndarray, t: int, digest: bytes) -> tuple[int, np.ndarray]:
        return self._bit_index(digest), np.array([0 if self._half(digest)[ids[t]] else 1])


def generate_watermarked(
    model: Any,
    prompt_ids: Any,
    watermark: BiMark | MPACBaseline | None,
    message: Any = None,
    *,
    max_new_tokens: int = 50,
    seed: int = 0,
) -> np.ndarray:
    """Sample from any local ``transformers`` causal LM with the watermark embedded.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM; its output vocabulary must equal ``watermark.vocab_size``.
    prompt_ids : array-like of int, shape (batch, prompt_len)
        Prompts (e.g. ``tokenizer(texts, return_tensors="np").input_ids``), same length.
    watermark : BiMark, MPACBaseline or None
        ``None`` samples without a watermark (the reference).
    message : str or array-like of 0/1
        The message (ignored when ``watermark`` is None).
    max_new_tokens : int, default=50
    seed : int, default=0
        Seeds the sampling (torch's generator).

    Returns
    -------
    ndarray of int64, shape (batch, prompt_len + max_new_tokens)
        The prompts followed by the sampled tokens.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> lm = build_model(ModelConfig(arch="llama", vocab_size=16, d_model=8, n_layers=1,
    ...                              n_heads=2, max_len=32))
    >>> wm = BiMark(16, key=7, n_bits=4, n_layers=3)
    >>> ids = generate_watermarked(lm, [[1, 2, 3]], wm, "1010", max_new_tokens=8)
    >>> ids.shape, ids[0, :3].tolist()
    ((1, 11), [1, 2, 3])
    >>> wm.extract(ids[0], start=3).n_scored <= 8
    True
    """
    from trustlab.security._watermark_torch import sample

    return sample(model, prompt_ids, watermark, message, max_new_tokens=max_new_tokens, seed=seed)
