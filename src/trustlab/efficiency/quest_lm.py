"""QuEST on the lab's language models: pre-train a causal LM with quantized linear layers.

:func:`quest_lm_comparison` is the paper's experiment (Section 4.2, Table 1) in miniature:
one model shape (:class:`trustlab.lm.ModelConfig`, e.g. a Llama) is trained from scratch
on the same tokens, with the same optimiser and schedule, once in full precision and once
per quantizer and bit width, every linear layer of every block quantized in weights and
inputs (the embedding and the ``lm_head`` kept in full precision, as in the authors'
code); it reports the held-out perplexity of each run.

References
----------
A. Panferov, J. Chen, S. Tabesh, R. L. Castro, M. Nikdan, D. Alistarh, "QuEST: Stable
Training of LLMs with 1-Bit Weights and Activations", ICML 2025.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from typing import Any

import numpy as np

from trustlab._param_validation import validate_params
from trustlab.efficiency.quest import METHODS, quantize_model
from trustlab.errors import ParameterError
from trustlab.vision.classifiers import one_thread

__all__ = ["FULL_PRECISION", "QuantizedLMComparison", "quest_lm_comparison"]

FULL_PRECISION = "fp32"
"""The method name of the full-precision reference run in :class:`QuantizedLMComparison`."""


@dataclasses.dataclass(frozen=True)
class QuantizedLMComparison:
    """Held-out perplexities of one LM shape trained in full precision and quantized.

    Attributes
    ----------
    perplexity : dict
        ``{(method, bits): ndarray of shape (n_seeds,)}``, one held-out perplexity per seed;
        the full-precision run is ``(FULL_PRECISION, None)``.
    seconds : dict
        The same keys: CPU seconds of each training (this process).
    seeds : tuple of int
        The seeds (each fixes the initial weights, shared by all runs of the seed, and the
        batch order).
    train_config : trustlab.lm.TrainConfig
        The optimiser and schedule of every run (its ``seed`` replaced by each seed).

    See Also
    --------
    quest_lm_comparison
    """

    perplexity: dict[tuple[str, int | None], np.ndarray]
    seconds: dict[tuple[str, int | None], np.ndarray]
    seeds: tuple[int, ...]
    train_config: Any

    def gap(self, method: str, bits: int) -> np.ndarray:
        """Perplexity above full precision of ``method`` at ``bits``, one value per seed.

        Parameters
        ----------
        method : str
            A quantizer of the comparison (see :data:`trustlab.efficiency.METHODS`).
        bits : int
            A bit width of the comparison.

        Returns
        -------
        ndarray of shape (n_seeds,)
            ``perplexity[method, bits] - perplexity[FULL_PRECISION, None]``, seed by seed.
        """
        if (method, bits) not in self.perplexity:
            runs = sorted(k for k in self.perplexity if k[1] is not None)
            raise ParameterError(f"no run ({method!r}, {bits!r}); the runs are {runs}.", argument="method")
        return self.perplexity[method, bits] - self.perplexity[FULL_PRECISION, None]

    def table(self) -> list[dict[str, Any]]:
        """One row per run: method, bits, mean and per-seed perplexity, gap to full precision.

        Returns
        -------
        list of dict
            Keys ``method``, ``bits``, ``perplexity`` (mean over seeds), ``per_seed``,
            ``gap`` (mean perplexity above full precision) and ``cpu_seconds``.
        """
        fp = self.perplexity[FULL_PRECISION, None]
        return [
            {
                "method": method,
                "bits": bits,
                "perplexity": float(np.mean(ppl)),
                "per_seed": [float(v) for v in ppl],
                "gap": float(np.mean(ppl - fp)),
                "cpu_seconds": float(np.mean(self.seconds[method, bits])),
            }
            for (method, bits), ppl in self.perplexity.items()
        ]


def _entries(value: Any, name: str, check: Any, fix: str) -> tuple[Any, ...]:
    items = tuple(value)
    if not items or not all(check(v) for v in items) or len(set(items)) != len(items):
        raise ParameterError(
            f"{name} must be a non-empty list of distinct {fix}, got {value!r}.", argument=name
        )
    return items


def _is_int(v: Any, lo: int, hi: int | None = None) -> bool:
    return bool(
        isinstance(v, int | np.integer) and not isinstance(v, bool) and lo <= v and (hi is None or v <= hi)
    )


@validate_params({"bits": [list, tuple], "methods": [list, tuple], "seeds": [list, tuple]})
def quest_lm_comparison(
    config: Any,
    train: Any,
    held: Any,
    *,
    bits: list[int] | tuple[int, ...] = (4, 2),
    methods: list[str] | tuple[str, ...] = ("quest", "ste", "lsq"),
    train_config: Any = None,
    seeds: list[int] | tuple[int, ...] = (0,),
) -> QuantizedLMComparison:
    """Pre-train one LM shape in full precision and with each quantizer; held-out perplexities.

    For every seed, :func:`trustlab.lm.build_model` gives the initial weights; a copy is
    trained in full precision and, for every bit width and method, a copy wrapped by
    :func:`quantize_model` (every block's linear layers quantized in weights and inputs,
    ``W{b}A{b}``; the embedding and ``lm_head`` in full precision) is trained with the same
    :func:`trustlab.lm.train_model` run (same batches, AdamW, warm-up, cosine decay,
    clipping and learning rate: the paper reuses the full-precision rate for every QuEST
    run). Each model is then scored on ``held``: ``exp`` of the mean next-token loss.
    Torch runs on one thread meanwhile (the models are small).

    Parameters
    ----------
    config : trustlab.lm.ModelConfig
        The model shape (the paper's setting: ``arch="llama"``).
    train : trustlab.lm.TokenData
        Training sequences (e.g. :func:`trustlab.lm.encode_texts` of a corpus).
    held : trustlab.lm.TokenData
        Held-out sequences for the perplexity.
    bits : list of int in [1, 8], default=(4, 2)
        Bit widths of weights and activations.
    methods : list of str, default=("quest", "ste", "lsq")
        Quantizers (:data:`~trustlab.efficiency.METHODS`); LSQ needs at least 2 bits.
    train_config : trustlab.lm.TrainConfig, optional
        Optimiser and schedule; default ``TrainConfig(steps=300, batch_size=32, lr=3e-3,
        warmup=30, weight_decay=0.1)`` (the paper's AdamW with 10 % warm-up, weight decay
        0.1 and clipping at 1.0). Its ``seed`` is replaced by each seed.
    seeds : list of int >= 0, default=(0,)
        One full set of runs per seed.

    Returns
    -------
    QuantizedLMComparison
        Per-seed perplexities and training times.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, TrainConfig, sorting_task
    >>> data = sorting_task(64, 4, n_values=8)
    >>> cfg = ModelConfig("llama", vocab_size=9, d_model=16, n_layers=1, n_heads=2, max_len=16)
    >>> res = quest_lm_comparison(cfg, data, data, bits=[2], methods=["quest"],
    ...                           train_config=TrainConfig(steps=3, batch_size=8))
    >>> sorted(k[0] for k in res.perplexity), res.gap("quest", 2).shape
    (['fp32', 'quest'], (1,))
    """
    from trustlab.lm import ModelConfig, TrainConfig, build_model, evaluate_loss, train_model

    if not isinstance(config, ModelConfig):
        raise ParameterError(
            f"config must be a trustlab.lm.ModelConfig, got {type(config).__name__}.", argument="config"
        )
    widths = _entries(bits, "bits", lambda v: _is_int(v, 1, 8), "integers in [1, 8]")
    quantizers = _entries(methods, "methods", lambda v: v in METHODS, f"methods from {METHODS}")
    seed_list = _entries(seeds, "seeds", lambda v: _is_int(v, 0), "non-negative integers")
    if "lsq" in quantizers and min(widths) < 2:
        raise ParameterError(
            "bits holds 1 but methods holds 'lsq', which needs at least 2 bits; drop one of them.",
            argument="bits",
        )
    if train_config is None:
        train_config = TrainConfig(steps=300, batch_size=32, lr=3e-3, warmup=30, weight_decay=0.1)
    if not isinstance(train_config, TrainConfig):
        raise ParameterError(
            f"train_config must be a trustlab.lm.TrainConfig or None, got {type(train_config).__name__}.",
            argument="train_config",
        )
    runs: list[tuple[str, int | None]] = [(FULL_PRECISION, None)]
    runs += [(m, int(b)) for b in widths for m in quantizers]
    ppl: dict[tuple[str, int | None], list[float]] = {r: [] for r in runs}
    cpu: dict[tuple[str, int | None], list[float]] = {r: [] for r in runs}
    with one_thread():
        for seed in seed_list:
            base = build_model(config, seed=int(seed))
            cfg = dataclasses.replace(train_config, seed=int(seed))
            for method, b in runs:
                model = copy.deepcopy(base) if b is None else quantize_model(base, bits=b, method=method)
                start = time.process_time()
                train_model(model, train, cfg)
                cpu[method, b].append(time.process_time() - start)
                ppl[method, b].append(math.exp(evaluate_loss(model, held)))
    return QuantizedLMComparison(
        {k: np.asarray(v) for k, v in ppl.items()},
        {k: np.asarray(v) for k, v in cpu.items()},
        tuple(int(s) for s in seed_list),
        train_config,
    )
