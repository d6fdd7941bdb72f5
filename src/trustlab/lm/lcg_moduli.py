"""In-context prediction of linear congruential sequences of *unseen moduli* (the UM setting) [1]_.

The paper's second, harder setting: a causal transformer trains on sequences
``x[t+1] = (a x[t] + c) mod m`` of many moduli ``m`` and is tested on a modulus it never saw,
so the next residue needs ``m`` (and ``a``, ``c``) inferred from the context. The data follow
the authors' construction: the training moduli are the integers of ``[min_modulus,
max_modulus]`` other than the test moduli (``max_modulus = int(1.2 * max(test_moduli))`` and
``min_modulus = length``, so that no full-period training sequence repeats inside its
window), optionally a random ``n_train_moduli`` of them; for each modulus, ``n_a`` multipliers
and ``n_c`` increments satisfying the Hull-Dobell theorem (all their pairs); for each test
modulus, ``n_test_a`` x ``n_test_c`` Hull-Dobell pairs; one sequence per triple from a random
seed ``x0``; one token per number ``0 .. max_modulus - 1``.

:func:`unseen_moduli_task` builds the data, :func:`unseen_moduli_model` trains the lab's model on
it with the lab's loop (once: the model is kept in the lab's cache under a digest of the data
and the configs), and :func:`unseen_moduli_accuracy` measures greedy next-token accuracy on the
test moduli at every context position, the accuracy of each residue ``x mod q`` (the paper's
digit-wise picture: the low digits of the prime-power radix are right first) and two
baselines (chance ``1 / m`` and the best previous-token predictor fitted on the training data).

References
----------
.. [1] Tao, Doshi, Kalra, He, Barkeshli. "(How) Can Transformers Predict Pseudo-Random Numbers?".
   ICML 2025 (PMLR 267), arXiv:2502.10390.
"""

from __future__ import annotations

import hashlib
import json
import numbers
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trustlab._cache import publish, spec_digest, staging_dir, trained_dir
from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ModelError, ParameterError
from trustlab.lm.corpora import TokenData, _coprime_increments, _hull_dobell_multipliers
from trustlab.lm.models import ModelConfig, build_model, load_model, save_model
from trustlab.lm.training import TrainConfig, train_model

__all__ = [
    "UnseenModuliAccuracy",
    "UnseenModuliTask",
    "full_period_multipliers",
    "unseen_moduli_accuracy",
    "unseen_moduli_model",
    "unseen_moduli_task",
]


@validate_params({"modulus": [Interval(numbers.Integral, 2, None, closed="left")]})
def full_period_multipliers(modulus: int) -> np.ndarray:
    """The multipliers ``a`` in ``[1, m)`` that give full period with any ``c`` coprime to ``m``.

    Hull-Dobell: ``a - 1`` divisible by every prime factor of ``m``, and by 4 when ``4 | m``.

    Parameters
    ----------
    modulus : int
        The modulus ``m >= 2``.

    Returns
    -------
    ndarray of int64
        The multipliers, ascending (always containing 1).

    Examples
    --------
    >>> full_period_multipliers(32).tolist()
    [1, 5, 9, 13, 17, 21, 25, 29]
    >>> full_period_multipliers(36).tolist()
    [1, 13, 25]
    """
    return np.asarray(_hull_dobell_multipliers(int(modulus)), dtype=np.int64)


@dataclass(frozen=True)
class UnseenModuliTask:
    """Training and test sequences of the unseen-modulus setting.

    Attributes
    ----------
    train : TokenData
        Sequences of the training moduli; latent ``"a"``, ``"c"``, ``"m"``, ``"x0"``.
    test : TokenData
        Sequences of the held-out test moduli (same latent variables).
    train_moduli : ndarray of int64
        The training moduli, ascending.
    test_moduli : ndarray of int64
        The test moduli (none of them in ``train_moduli``).

    See Also
    --------
    unseen_moduli_task
    """

    train: TokenData
    test: TokenData
    train_moduli: np.ndarray
    test_moduli: np.ndarray

    def digest(self) -> str:
        """A short SHA-256 of the token arrays (names the cached model of this data).

        Returns
        -------
        str
            12 hex digits.
        """
        h = hashlib.sha256()
        for arr in (self.train.tokens, self.test.tokens, self.train_moduli, self.test_moduli):
            h.update(np.ascontiguousarray(arr, dtype=np.int64).tobytes())
        return h.hexdigest()[:12]


def _sequences(triples: np.ndarray, length: int, vocab: int, rng: np.random.Generator) -> TokenData:
    a, c, m = triples[:, 0], triples[:, 1], triples[:, 2]
    x = np.empty((len(triples), length), dtype=np.int64)
    x[:, 0] = rng.integers(0, m)
    for t in range(1, length):
        x[:, t] = (a * x[:, t - 1] + c) % m
    mask = np.ones_like(x, dtype=bool)
    mask[:, 0] = False
    latent = {"a": a.copy(), "c": c.copy(), "m": m.copy(), "x0": x[:, 0].copy()}
    return TokenData(x, mask, vocab, latent)


def _pairs(
    m: int, n_a: int, n_c: int, rng: np.random.Generator, ban_a: Any = (), ban_c: Any = ()
) -> np.ndarray:
    a_all = np.setdiff1d(full_period_multipliers(m), np.asarray(ban_a, dtype=np.int64))
    coprime = np.asarray(_coprime_increments(m), dtype=np.int64)
    c_all = np.setdiff1d(coprime, np.asarray(ban_c, dtype=np.int64))
    a = rng.choice(a_all, min(n_a, len(a_all)), replace=False) if len(a_all) else a_all
    c = rng.choice(c_all, min(n_c, len(c_all)), replace=False) if len(c_all) else c_all
    aa, cc = np.meshgrid(np.sort(a), np.sort(c), indexing="ij")
    return np.column_stack([aa.ravel(), cc.ravel(), np.full(aa.size, m)]).astype(np.int64)


_POS = Interval(numbers.Integral, 1, None, closed="left")


@validate_params(
    {
        "test_moduli": ["array-like"],
        "length": [Interval(numbers.Integral, 4, None, closed="left")],
        "min_modulus": [Interval(numbers.Integral, 2, None, closed="left"), None],
        "max_modulus": [Interval(numbers.Integral, 3, None, closed="left"), None],
        "n_train_moduli": [_POS, None],
        "n_a": [_POS],
        "n_c": [_POS],
        "n_test_a": [_POS],
        "n_test_c": [_POS],
        "n_per_triple": [_POS],
        "exclude_test_values": ["boolean"],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def unseen_moduli_task(
    test_moduli: Any = (2048,),
    *,
    length: int = 257,
    min_modulus: int | None = None,
    max_modulus: int | None = None,
    n_train_moduli: int | None = None,
    n_a: int = 32,
    n_c: int = 32,
    n_test_a: int = 64,
    n_test_c: int = 64,
    n_per_triple: int = 1,
    exclude_test_values: bool = False,
    seed: int = 0,
) -> UnseenModuliTask:
    """Training sequences of many moduli and test sequences of held-out moduli.

    Defaults are the authors' UM interpretability setting (``m_test = 2048``, a context of 256
    numbers, training moduli ``[257, 2457]``, 32 x 32 training and 64 x 64 test pairs per
    modulus); the toy claims of docs/lm-lcg.md use ``m_test = 64`` and 24 numbers.

    Parameters
    ----------
    test_moduli : array-like of int
        The held-out moduli (each in ``[2, max_modulus]``).
    length : int, default=257
        Numbers per sequence (the context plus the last target).
    min_modulus : int, optional
        Smallest training modulus; default ``length`` (no training sequence repeats).
    max_modulus : int, optional
        Largest training modulus and the vocabulary size; default ``int(1.2 * max(test_moduli))``.
    n_train_moduli : int, optional
        Train on a random subset of this many moduli (the authors' ``num_ps``); default all.
    n_a, n_c : int, default=32
        Hull-Dobell multipliers and coprime increments drawn per training modulus (all when
        fewer exist); every pair of them gives ``n_per_triple`` sequences.
    n_test_a, n_test_c : int, default=64
        The same per test modulus.
    n_per_triple : int, default=1
        Sequences (random seeds ``x0``) per training triple ``(a, c, m)``.
    exclude_test_values : bool, default=False
        Leave the test multipliers and increments out of every training modulus (the authors'
        code); off by default because at toy moduli it removes most coprime increments.
    seed : int, default=0
        Seeds the moduli subset, the pairs and the seeds ``x0``.

    Returns
    -------
    UnseenModuliTask

    Examples
    --------
    >>> task = unseen_moduli_task([16], length=8, n_test_a=2, n_test_c=4)
    >>> task.train_moduli.tolist()[:3], int(task.train.vocab_size), len(task.test)
    ([8, 9, 10], 19, 8)
    >>> x, m = task.test.tokens[0], 16
    >>> bool(((task.test.latent["a"][0] * x[:-1] + task.test.latent["c"][0]) % m == x[1:]).all())
    True
    """
    tests = np.unique(np.asarray(test_moduli, dtype=np.int64).ravel())
    if tests.size == 0:
        raise ParameterError("test_moduli must hold at least one modulus, got none.", argument="test_moduli")
    hi = int(1.2 * int(tests.max())) if max_modulus is None else int(max_modulus)
    lo = int(length) if min_modulus is None else int(min_modulus)
    if hi >= 2**31:
        raise ParameterError(
            f"max_modulus must be below 2**31 (a * x must fit in int64), got {hi}.", argument="max_modulus"
        )
    if tests.min() < 2 or tests.max() > hi:
        raise ParameterError(
            f"test_moduli must lie in [2, max_modulus={hi}], got {tests.tolist()}; raise max_modulus.",
            argument="test_moduli",
        )
    train_m = np.setdiff1d(np.arange(lo, hi + 1, dtype=np.int64), tests)
    if train_m.size == 0:
        raise ParameterError(
            f"no training modulus left in [min_modulus={lo}, max_modulus={hi}] once the test moduli are "
            "removed; lower min_modulus or raise max_modulus.",
            argument="min_modulus",
        )
    rng = np.random.default_rng(seed)
    if n_train_moduli is not None and n_train_moduli < train_m.size:
        train_m = np.sort(rng.choice(train_m, int(n_train_moduli), replace=False))
    test_triples = np.concatenate([_pairs(int(m), n_test_a, n_test_c, rng) for m in tests])
    ban_a = np.unique(test_triples[:, 0]) if exclude_test_values else ()
    ban_c = np.unique(test_triples[:, 1]) if exclude_test_values else ()
    parts = [_pairs(int(m), n_a, n_c, rng, ban_a, ban_c) for m in train_m]
    kept = [p for p in parts if len(p)]
    if not kept:
        raise ParameterError(
            "exclude_test_values left no training pair; set it to False or widen the moduli.",
            argument="exclude_test_values",
        )
    used = np.array([m for m, p in zip(train_m, parts, strict=True) if len(p)], dtype=np.int64)
    triples = np.repeat(np.concatenate(kept), int(n_per_triple), axis=0)
    train = _sequences(triples, int(length), hi, rng)
    test = _sequences(test_triples, int(length), hi, rng)
    return UnseenModuliTask(train, test, used, tests)


@validate_params(
    {
        "task": [UnseenModuliTask],
        "model_config": [ModelConfig, None],
        "train_config": [TrainConfig, None],
        "cache_dir": [str, Path, None],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def unseen_moduli_model(
    task: UnseenModuliTask,
    model_config: ModelConfig | None = None,
    train_config: TrainConfig | None = None,
    *,
    cache_dir: str | Path | None = None,
    seed: int = 0,
) -> Any:
    """The lab's causal LM trained on the task's training moduli (trained once, then cached).

    The checkpoint lives in ``{cache}/lcg-um-{digest}`` (default cache ``$TRUSTLAB_CACHE/lm`` or
    ``~/.cache/trustlab/lm``), the digest covering the data and both configs, so a changed
    recipe retrains and an unchanged one loads.

    Parameters
    ----------
    task : UnseenModuliTask
        From :func:`unseen_moduli_task`.
    model_config : ModelConfig, optional
        Default: Llama (RoPE, as the paper's models), width 64, 2 blocks, 4 heads;
        ``vocab_size`` and ``max_len`` are set from the task.
    train_config : TrainConfig, optional
        Default: 1000 steps of 64 sequences, lr 3e-3, 50 warm-up steps, weight decay 0.1.
    cache_dir : str or Path, optional
        Where the checkpoint is kept.
    seed : int, default=0
        Seeds the weights.

    Returns
    -------
    transformers.PreTrainedModel
        In eval mode.

    Examples
    --------
    >>> task = unseen_moduli_task([16], length=8, n_test_a=2, n_test_c=4)
    >>> cfg = ModelConfig("gpt2", vocab_size=2, d_model=16, n_layers=1, n_heads=2)
    >>> model = unseen_moduli_model(task, cfg, TrainConfig(steps=2), cache_dir=getfixture("tmp_path"))
    >>> model.config.vocab_size
    19
    """
    base = model_config or ModelConfig("llama", vocab_size=2, d_model=64, n_layers=2, n_heads=4)
    length = task.train.tokens.shape[1]
    cfg = ModelConfig.from_dict({**base.to_dict(), "vocab_size": task.train.vocab_size, "max_len": length})
    tcfg = train_config or TrainConfig(
        steps=1000, batch_size=64, lr=3e-3, warmup=50, weight_decay=0.1, seed=seed
    )
    spec = {"data": task.digest(), "model": cfg.to_dict(), "train": asdict(tcfg), "seed": int(seed)}
    path = trained_dir(cache_dir, "lm", f"lcg-um-{spec_digest(json.loads(json.dumps(spec, default=str)))}")
    if (path / "done").is_file():
        return load_model(path).eval()
    model = build_model(cfg, seed=seed)
    train_model(model, task.train, tcfg)
    tmp = staging_dir(path)
    save_model(model, tmp)
    (tmp / "recipe.json").write_text(json.dumps(spec, indent=1, default=str))
    (tmp / "done").write_text("ok\n")
    publish(tmp, path)
    return model.eval()


@dataclass(frozen=True)
class UnseenModuliAccuracy:
    """Next-token accuracy on the held-out moduli along the context.

    Position ``k`` (1-based) is the prediction of number ``k`` from the ``k`` numbers before it.

    Attributes
    ----------
    accuracy : ndarray of float, shape (length - 1,)
        Share of test sequences predicted exactly at each position.
    stderr : ndarray of float, shape (length - 1,)
        Binomial standard error of ``accuracy``.
    hits : ndarray of bool, shape (n_sequences, length - 1)
        Exact hits, one row per test sequence (for paired comparisons of positions).
    residue_accuracy : dict
        ``{q: ndarray (length - 1,)}``: share with prediction ``= target (mod q)``.
    per_modulus : dict
        ``{m: accuracy}`` over the second half of the positions, per test modulus.
    above_max : ndarray of float, shape (length - 1,)
        Share of predictions above every number of their context (the modulus-estimation
        signature: a model that takes the largest number seen as its estimate of ``m`` rarely
        predicts beyond it).
    target_above_max : ndarray of float, shape (length - 1,)
        The same share for the true next numbers.
    chance : float
        Mean ``1 / m`` over the test sequences (a uniform guess that knows ``m``).
    bigram_baseline : float
        Accuracy, second half of the positions, of the most frequent next number given the
        previous one in the training data (no in-context inference).
    n_sequences : int
        Test sequences evaluated.

    See Also
    --------
    unseen_moduli_accuracy
    """

    accuracy: np.ndarray
    stderr: np.ndarray
    hits: np.ndarray
    residue_accuracy: dict[int, np.ndarray]
    per_modulus: dict[int, float]
    above_max: np.ndarray
    target_above_max: np.ndarray
    chance: float
    bigram_baseline: float
    n_sequences: int

    def band(self, start: int, stop: int | None = None) -> tuple[float, float]:
        """Mean accuracy over positions ``start .. stop - 1`` (1-based) and its standard error.

        The standard error is over the test sequences (each sequence's mean over the band).

        Parameters
        ----------
        start : int
            First position counted (>= 1).
        stop : int, optional
            One past the last position; default the end.

        Returns
        -------
        mean, stderr : float
        """
        return _band_accuracy(self.hits, start, stop)


def _bigram(train: TokenData, test: TokenData, start: int) -> float:
    v = int(max(train.vocab_size, test.vocab_size))
    counts = np.zeros((v, v), dtype=np.int64)
    np.add.at(counts, (train.tokens[:, :-1].ravel(), train.tokens[:, 1:].ravel()), 1)
    guess = counts.argmax(axis=1)
    hit = guess[test.tokens[:, :-1]] == test.tokens[:, 1:]
    return float(hit[:, start - 1 :].mean())


@validate_params({"task": [UnseenModuliTask], "divisors": [list, tuple, None]})
@torch.no_grad()
def unseen_moduli_accuracy(model: Any, task: UnseenModuliTask, divisors: Any = None) -> UnseenModuliAccuracy:
    """Greedy next-token accuracy on the test moduli at each context position, with baselines.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A causal LM over the task's vocabulary (e.g. from :func:`unseen_moduli_model`).
    task : UnseenModuliTask
        The data; its ``test`` sequences are evaluated.
    divisors : list of int, optional
        The ``q`` whose residue accuracy is reported; default the divisors ``> 1`` of the
        smallest test modulus below it (e.g. 2, 4, 8, 16, 32 for ``m = 64``).

    Returns
    -------
    UnseenModuliAccuracy

    Examples
    --------
    >>> task = unseen_moduli_task([16], length=8, n_test_a=2, n_test_c=4)
    >>> model = build_model(ModelConfig("gpt2", vocab_size=19, d_model=16, n_layers=1, n_heads=2))
    >>> res = unseen_moduli_accuracy(model, task)
    >>> res.accuracy.shape, sorted(res.residue_accuracy), round(res.chance, 4)
    ((7,), [2, 4, 8], 0.0625)
    """
    if not callable(model) or not hasattr(model, "get_input_embeddings"):
        raise ModelError(f"model must be a causal LM, got {type(model).__name__}.", argument="model")
    n_vocab = model.get_input_embeddings().weight.shape[0]
    if n_vocab < task.test.vocab_size:
        raise ModelError(
            f"the model's vocabulary ({n_vocab}) is smaller than the task's ({task.test.vocab_size}); "
            "train it with unseen_moduli_model.",
            argument="model",
        )
    m0 = int(task.test_moduli.min())
    qs = [q for q in range(2, m0) if m0 % q == 0] if divisors is None else list(divisors)
    if any(isinstance(q, bool) or not isinstance(q, int | np.integer) or q < 2 for q in qs):
        raise ParameterError(f"divisors must be integers >= 2, got {qs}.", argument="divisors")
    x = task.test.tokens
    pred = model(input_ids=torch.as_tensor(x, dtype=torch.long)).logits[:, :-1].argmax(-1).numpy()
    target = x[:, 1:]
    hits = pred == target
    n = len(x)
    acc = hits.mean(axis=0)
    half = x.shape[1] // 2
    m_of = task.test.latent["m"]
    per_mod = {int(m): float(hits[m_of == m, half - 1 :].mean()) for m in task.test_moduli}
    seen_max = np.maximum.accumulate(x, axis=1)[:, :-1]
    return UnseenModuliAccuracy(
        accuracy=acc,
        stderr=np.sqrt(acc * (1 - acc) / n),
        hits=hits,
        residue_accuracy={int(q): ((pred - target) % q == 0).mean(axis=0) for q in qs},
        per_modulus=per_mod,
        above_max=(pred > seen_max).mean(axis=0),
        target_above_max=(target > seen_max).mean(axis=0),
        chance=float(np.mean(1.0 / m_of)),
        bigram_baseline=_bigram(task.train, task.test, half),
        n_sequences=n,
    )


def _band_accuracy(hits: np.ndarray, start: int, stop: int | None = None) -> tuple[float, float]:
    """Mean of ``hits`` (sequences x positions) over positions ``start .. stop - 1`` (1-based), and its SE.

    The standard error is over sequences (each sequence's mean over the band); shared by the
    unseen-modulus and radix results.
    """
    per_seq = hits[:, start - 1 : None if stop is None else stop - 1].mean(axis=1)
    return float(per_seq.mean()), float(per_seq.std(ddof=1) / np.sqrt(len(per_seq)))
