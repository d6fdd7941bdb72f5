"""The learned token-level early exit of Lioubashevski et al. (ICML 2025): a task-index probe.

The paper [1]_ reads the saturation events of the top-k tokens (see
:func:`trustlab.lm.internals.saturation_layers`) as *task transitions*: while the top-1 token is
not yet fixed the block works on task 1, after the top-1 saturation layer on task 2 (fixing the
second token), and so on. A linear probe on the residual stream predicts the current task, and
the exit rule stops a token as soon as the probe says task 2: the top-1 token has been decided,
the remaining blocks would not change it.

What this module does, after the authors' code (``analysis/create_data_for_task_probing.py``,
``analysis/run_task_transition_probing.py``, ``practical_applications/new_early_exit.py`` of
github.com/daria-lioubashevski/beyond_top1):

- **Labels.** With ``s_1 <= s_2 <= ...`` the saturation blocks (0-based) of the final top-1,
  top-2, ... tokens at a position, block ``l >= min_layer`` of that position is labelled task 1
  for ``l <= s_1``, task ``r`` for ``s_{r-1} < l <= s_r`` (``r = 2 .. n_tasks``); later blocks are
  not labelled, nor is task ``r`` when ``s_r <= min_layer``. Positions whose top-1 saturates
  after ``max_saturation_ratio * n_layers`` are left out.
- **Balance.** At each block, every task keeps as many examples as the rarest task there (the
  first ones); a block where some task has fewer than ``min_per_class`` examples is dropped.
- **Probe.** One classifier for all blocks: standardisation, then one-vs-rest logistic
  regression (``max_iter=1000``) on the residual stream after the block (``resid_post``, before
  the final norm, as the authors read GPT-2's hidden states).
- **Exit.** At blocks ``min_layer, min_layer + 1, ...`` the probe reads the residual stream; the
  token exits at the first block where it predicts task 2 and takes that block's logit-lens
  top-1; otherwise the full model's. Savings, agreement with the full model and next-token
  accuracy are reported as for the stability rule (:func:`trustlab.lm.internals.early_exit`),
  with the oracle (exit at the top-1 saturation block), beside the stability rule and the
  paper's two baselines, the softmax margin and the state cosine (:func:`compare_exit_rules`).

Divergences from the authors' code, each an option or a documented choice: the probe is fitted
once on all the calibration data (the authors keep the best of 5 folds, scored on its own test
fold); exits are only considered from ``min_layer`` on (the authors also query the probe at
blocks it was not trained on); ``min_layer`` defaults to 0 (the authors' 5 is for GPT-2 XL's 48
blocks); blocks used are counted as ``exit + 1`` (the authors count ``exit``);
``exit_on="later"`` exits on any task after the first (the authors' code exits on task 2 only);
``threshold`` replaces the probe's arg-max by a threshold on its probability, to trace the
saving-agreement trade-off; :func:`calibrate_threshold` sets any rule's threshold to a target
agreement on calibration sequences, to compare rules at matched agreement (the paper plots each
rule at its own thresholds).

References
----------
.. [1] Lioubashevski, Schlank, Stanovsky, Goldstein. "Looking Beyond the Top-1: Transformers
   Determine Top Tokens in Order". ICML 2025 (PMLR 267); arXiv:2410.20210.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from trustlab._validation import check_choice, check_positive_int, check_token_ids
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.lm._exit_rules import (
    BASELINES,
    _baseline_scores,
    _first_fire,
    _scored,
    _smallest_reaching,
    _Trace,
    _trace,
)
from trustlab.lm.internals import EarlyExit, _exit_summary, _n_layers, _settled, _stability_exits

__all__ = [
    "SaturationProbe",
    "calibrate_threshold",
    "compare_exit_rules",
    "fit_saturation_probe",
    "probe_early_exit",
    "probe_exit_layers",
]

_EXIT_ON = ("second", "later")
_NARROW = 256  # widths up to which the probe is fitted on one BLAS thread


@dataclass(frozen=True)
class SaturationProbe:
    """A fitted task-index probe (Lioubashevski et al. 2025).

    Attributes
    ----------
    classifier : sklearn.pipeline.Pipeline
        Standardisation and one-vs-rest logistic regression; class ``r`` is task ``r + 1``.
    n_tasks : int
        Tasks the probe tells apart (task ``r``: fixing the final rank-``r`` token).
    min_layer : int
        First block labelled, and first block where a token may exit.
    n_layers : int
        Blocks of the model it was fitted on.
    d_model : int
        Width of the residual stream it reads.
    class_counts : ndarray of int, shape (n_tasks,)
        Training examples per task (equal after balancing).
    layers_used : tuple of int
        Blocks that contributed examples (the others lacked ``min_per_class`` of some task).
    train_balanced_accuracy : float
        Balanced accuracy on the training examples (chance ``1 / n_tasks``).

    See Also
    --------
    fit_saturation_probe
    """

    classifier: Any
    n_tasks: int
    min_layer: int
    n_layers: int
    d_model: int
    class_counts: np.ndarray
    layers_used: tuple[int, ...]
    train_balanced_accuracy: float

    def task_proba(self, hidden: Any) -> np.ndarray:
        """Probability of each task given residual-stream vectors.

        Parameters
        ----------
        hidden : array-like, shape (n, d_model)
            Residual stream after some block.

        Returns
        -------
        ndarray, shape (n, n_tasks)
            Rows sum to 1; column ``r`` is task ``r + 1``.
        """
        x = np.asarray(hidden, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d_model or not np.isfinite(x).all():
            raise DataError(
                f"hidden must be finite vectors of shape (n, {self.d_model}), got shape {x.shape}.",
                argument="hidden",
            )
        return np.asarray(self.classifier.predict_proba(x))


def _check_ids(model: Any, input_ids: Any, *, min_length: int = 1) -> np.ndarray:
    if not isinstance(model, torch.nn.Module) or not hasattr(model, "get_input_embeddings"):
        raise ModelError(
            f"model must be a transformers causal LM, got {type(model).__name__}.", argument="model"
        )
    lm: Any = model  # transformers' methods are not on torch.nn.Module
    ids = check_token_ids(input_ids, "input_ids", vocab=int(lm.get_input_embeddings().num_embeddings))
    if ids.shape[1] < min_length:
        raise DataError(
            f"input_ids need at least {min_length} tokens per sequence (a next token to score), got "
            f"{ids.shape[1]}.",
            argument="input_ids",
        )
    return ids


def _task_examples(
    trace: _Trace, n_tasks: int, min_layer: int, max_saturation_ratio: float
) -> tuple[list[list[list[int]]], int]:
    """Per block and task, the positions labelled with that task (the authors' labelling)."""
    n_layers = trace.topk.shape[0]
    sat = _settled(trace.topk == trace.final[None])  # (P, n_tasks)
    keep = np.flatnonzero(sat[:, 0] <= int(max_saturation_ratio * n_layers))
    examples: list[list[list[int]]] = [[[] for _ in range(n_tasks)] for _ in range(n_layers)]
    for p in keep:
        for r in range(n_tasks):
            if sat[p, r] <= min_layer:
                continue
            start = min_layer if r == 0 else max(min_layer, sat[p, r - 1] + 1)
            for layer in range(start, min(sat[p, r] + 1, n_layers)):
                examples[layer][r].append(int(p))
    return examples, len(keep)


def fit_saturation_probe(
    model: Any,
    input_ids: Any,
    *,
    n_tasks: int = 5,
    min_layer: int = 0,
    max_saturation_ratio: float = 0.85,
    min_per_class: int = 5,
) -> SaturationProbe:
    """Fit the task-index probe on calibration sequences (Lioubashevski et al. 2025, section 5).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM (its blocks are found through :mod:`trustlab.lm.hooks`).
    input_ids : array-like of int, shape (n_sequences, seq)
        Calibration sequences; every position gives examples.
    n_tasks : int, default=5
        Tasks told apart (the paper's GPT-2 XL probe: 5); at least 2.
    min_layer : int, default=0
        First block labelled (the authors' code: 5 of GPT-2 XL's 48); below ``n_layers - 1``.
    max_saturation_ratio : float, default=0.85
        Positions whose top-1 saturates after ``int(ratio * n_layers)`` are left out (the
        authors' value); in ``(0, 1]``.
    min_per_class : int, default=5
        A block contributes only if every task has this many examples there (the authors' 5).

    Returns
    -------
    SaturationProbe
        The fitted probe.

    Raises
    ------
    DataError
        When no block has ``min_per_class`` examples of every task (give more sequences, or
        fewer ``n_tasks``).

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=12, d_model=16, n_layers=4, n_heads=2), seed=0)
    >>> ids = np.random.default_rng(0).integers(0, 12, (20, 10))
    >>> probe = fit_saturation_probe(m, ids, n_tasks=2)
    >>> probe.n_tasks, probe.class_counts.shape
    (2, (2,))
    """
    n_tasks = check_positive_int(n_tasks, "n_tasks", minimum=2)
    min_per_class = check_positive_int(min_per_class, "min_per_class")
    if isinstance(min_layer, bool) or not isinstance(min_layer, int | np.integer) or min_layer < 0:
        raise ParameterError(f"min_layer must be an integer >= 0, got {min_layer!r}.", argument="min_layer")
    if isinstance(max_saturation_ratio, bool) or not isinstance(max_saturation_ratio, int | float):
        raise ParameterError(
            f"max_saturation_ratio must be a number in (0, 1], got {max_saturation_ratio!r}.",
            argument="max_saturation_ratio",
        )
    if not 0 < max_saturation_ratio <= 1:
        raise ParameterError(
            f"max_saturation_ratio must lie in (0, 1], got {max_saturation_ratio!r}.",
            argument="max_saturation_ratio",
        )
    ids = _check_ids(model, input_ids)
    n_layers = _n_layers(model)
    if min_layer >= n_layers - 1:
        raise ParameterError(
            f"min_layer ({min_layer}) must be below the last block ({n_layers - 1}): nothing to save.",
            argument="min_layer",
        )
    vocab = int(model.get_output_embeddings().weight.shape[0])
    if n_tasks > vocab:
        raise ParameterError(f"n_tasks ({n_tasks}) exceeds the vocabulary ({vocab}).", argument="n_tasks")
    trace = _trace(model, ids, n_tasks)
    examples, _ = _task_examples(trace, n_tasks, int(min_layer), float(max_saturation_ratio))
    xs, ys, used = [], [], []
    for layer, per_task in enumerate(examples):
        m = min(len(p) for p in per_task)
        if m < min_per_class:
            continue
        used.append(layer)
        for r, positions in enumerate(per_task):
            xs.append(trace.hidden[layer, positions[:m]])
            ys.append(np.full(m, r))
    if not used:
        raise DataError(
            f"no block has {min_per_class} examples of each of the {n_tasks} tasks: give more calibration "
            "sequences, or fewer n_tasks.",
            argument="input_ids",
        )
    x, y = np.concatenate(xs).astype(np.float64), np.concatenate(ys)
    clf = make_pipeline(StandardScaler(), OneVsRestClassifier(LogisticRegression(max_iter=1000)))
    # narrow residual streams: BLAS threads only contend (30x slower on 2 busy cores)
    with threadpool_limits(limits=1 if x.shape[1] <= _NARROW else None):
        clf.fit(x, y)
    pred = clf.predict(x)
    bacc = float(np.mean([np.mean(pred[y == r] == r) for r in range(n_tasks)]))
    return SaturationProbe(
        classifier=clf,
        n_tasks=n_tasks,
        min_layer=int(min_layer),
        n_layers=n_layers,
        d_model=int(trace.hidden.shape[-1]),
        class_counts=np.bincount(y, minlength=n_tasks),
        layers_used=tuple(used),
        train_balanced_accuracy=bacc,
    )


def _check_probe(model: Any, probe: Any) -> None:
    if not isinstance(probe, SaturationProbe):
        raise ParameterError(
            f"probe must be a SaturationProbe (from fit_saturation_probe), got {type(probe).__name__}.",
            argument="probe",
        )
    if _n_layers(model) != probe.n_layers:
        raise ModelError(
            f"the probe was fitted on a model of {probe.n_layers} blocks, this one has {_n_layers(model)}.",
            argument="model",
        )


def _exit_scores(probe: SaturationProbe, trace: _Trace, exit_on: str) -> np.ndarray:
    """Per block and position, the probe's probability of the exit task(s); nan below ``min_layer``."""
    n_layers, n_pos, _ = trace.hidden.shape
    scores = np.full((n_layers, n_pos), np.nan)
    for layer in range(probe.min_layer, n_layers):
        proba = probe.task_proba(trace.hidden[layer])
        scores[layer] = proba[:, 1] if exit_on == "second" else proba[:, 1:].sum(axis=1)
        if not np.isfinite(scores[layer]).all():  # pragma: no cover - predict_proba is finite
            raise DataError("the probe gave non-finite probabilities.", argument="probe")
    return scores


def _argmax_exits(probe: SaturationProbe, trace: _Trace, exit_on: str) -> np.ndarray:
    n_layers, n_pos, _ = trace.hidden.shape
    fire = np.zeros((n_layers, n_pos), dtype=bool)
    for layer in range(probe.min_layer, n_layers):
        task = probe.task_proba(trace.hidden[layer]).argmax(axis=1)
        fire[layer] = task == 1 if exit_on == "second" else task >= 1
    return _first_fire(fire)


def _check_threshold(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating) or np.isnan(value):
        raise ParameterError(f"{name} must be a number (inf: never exit), got {value!r}.", argument=name)
    return float(value)


def _check_rule(exit_on: Any, threshold: Any) -> None:
    check_choice(exit_on, "exit_on", _EXIT_ON)
    if threshold is not None:
        _check_threshold(threshold, "threshold")


def _exits(probe: SaturationProbe, trace: _Trace, exit_on: str, threshold: float | None) -> np.ndarray:
    if threshold is None:
        return _argmax_exits(probe, trace, exit_on)
    return _first_fire(np.nan_to_num(_exit_scores(probe, trace, exit_on), nan=-np.inf) >= threshold)


def probe_exit_layers(
    model: Any,
    probe: SaturationProbe,
    input_ids: Any,
    *,
    exit_on: str = "second",
    threshold: float | None = None,
) -> np.ndarray:
    """The block at which each position exits under the learned criterion.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model the probe was fitted on.
    probe : SaturationProbe
        From :func:`fit_saturation_probe`.
    input_ids : array-like of int, shape (n_sequences, seq)
        Sequences; every position gets an exit block.
    exit_on : {"second", "later"}, default="second"
        Exit when the probe says task 2 (the authors' rule), or any task after the first.
    threshold : float, optional
        None: the probe's most probable task decides (the paper). A number: exit when the
        probability of the exit task(s) reaches it (larger: later, safer exits; above 1: never).

    Returns
    -------
    ndarray of int, shape (n_sequences * seq,)
        Exit block (0-based) per position, sequence by sequence; ``n_layers - 1`` when the
        probe never fires.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=12, d_model=16, n_layers=4, n_heads=2), seed=0)
    >>> ids = np.random.default_rng(0).integers(0, 12, (20, 10))
    >>> probe = fit_saturation_probe(m, ids, n_tasks=2)
    >>> probe_exit_layers(m, probe, ids[:2]).shape
    (20,)
    """
    _check_probe(model, probe)
    _check_rule(exit_on, threshold)
    ids = _check_ids(model, input_ids)
    return _exits(probe, _trace(model, ids, 1), exit_on, threshold)


def probe_early_exit(
    model: Any,
    probe: SaturationProbe,
    input_ids: Any,
    *,
    exit_on: str = "second",
    threshold: float | None = None,
) -> EarlyExit:
    """Savings and cost of the learned exit criterion (Lioubashevski et al. 2025, section 5).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model the probe was fitted on.
    probe : SaturationProbe
        From :func:`fit_saturation_probe` (fit it on other sequences than these).
    input_ids : array-like of int, shape (n_sequences, seq)
        Held-out sequences, at least 2 tokens; accuracy is on the next token of positions
        ``0 .. seq-2``.
    exit_on : {"second", "later"}, default="second"
        See :func:`probe_exit_layers`.
    threshold : float, optional
        See :func:`probe_exit_layers`.

    Returns
    -------
    EarlyExit
        Blocks saved, agreement with the full model, accuracies, and the oracle saving, as
        :func:`trustlab.lm.internals.early_exit` reports them for the stability rule.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=12, d_model=16, n_layers=4, n_heads=2), seed=0)
    >>> rng = np.random.default_rng(0)
    >>> probe = fit_saturation_probe(m, rng.integers(0, 12, (20, 10)), n_tasks=2)
    >>> 0 <= probe_early_exit(m, probe, rng.integers(0, 12, (5, 10))).layers_saved < 1
    True
    """
    _check_probe(model, probe)
    _check_rule(exit_on, threshold)
    ids = _check_ids(model, input_ids, min_length=2)
    trace = _trace(model, ids, 1)
    top, full, target, sat = _scored(trace)
    exit_at = _exits(probe, trace, exit_on, threshold)[trace.target >= 0]
    return _exit_summary(exit_at, top, full, target, sat)


def calibrate_threshold(
    model: Any,
    probe: SaturationProbe | None,
    input_ids: Any,
    *,
    agreement: float,
    rule: str = "probe",
    exit_on: str = "second",
) -> float:
    """The smallest threshold whose exits agree with the full model at least this often.

    To compare rules at matched agreement (beyond the paper, which reports each rule at its
    own thresholds): on calibration sequences (not those the probe was fitted on, not the test
    ones) the 201 quantiles of the rule's scores are tried, and the smallest (the most saving)
    that reaches ``agreement`` is returned; ``inf`` (never exit) when none does.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model.
    probe : SaturationProbe or None
        From :func:`fit_saturation_probe`; needed for ``rule="probe"`` only.
    input_ids : array-like of int, shape (n_sequences, seq)
        Calibration sequences, at least 2 tokens.
    agreement : float
        Target share of positions whose early prediction equals the full model's, in ``(0, 1]``.
    rule : {"probe", "softmax", "cosine"}, default="probe"
        The probe's probability of the exit task(s), or one of the paper's baselines: the logit
        lens's softmax margin ``p_1 - p_2``, or the cosine of consecutive residual streams.
    exit_on : {"second", "later"}, default="second"
        For the probe; see :func:`probe_exit_layers`.

    Returns
    -------
    float
        The threshold, for ``threshold=`` (the probe) or ``softmax=`` / ``cosine=`` of
        :func:`compare_exit_rules`.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=12, d_model=16, n_layers=4, n_heads=2), seed=0)
    >>> rng = np.random.default_rng(0)
    >>> probe = fit_saturation_probe(m, rng.integers(0, 12, (20, 10)), n_tasks=2)
    >>> 0 <= calibrate_threshold(m, probe, rng.integers(0, 12, (5, 10)), agreement=0.9) <= 1
    True
    """
    rule = check_choice(rule, "rule", ("probe", *BASELINES))
    if rule == "probe" or probe is not None:
        _check_probe(model, probe)
    _check_rule(exit_on, None)
    if isinstance(agreement, bool) or not isinstance(agreement, int | float) or not 0 < agreement <= 1:
        raise ParameterError(f"agreement must be a share in (0, 1], got {agreement!r}.", argument="agreement")
    ids = _check_ids(model, input_ids, min_length=2)
    trace = _trace(model, ids, 1)
    top, full, _, _ = _scored(trace)
    if rule == "probe":
        assert probe is not None  # checked above
        scores = np.nan_to_num(_exit_scores(probe, trace, exit_on), nan=-np.inf)
    else:
        scores = _baseline_scores(trace, rule)
    return _smallest_reaching(scores[:, trace.target >= 0], top, full, float(agreement))


def compare_exit_rules(
    model: Any,
    probe: SaturationProbe,
    input_ids: Any,
    *,
    patience: tuple[int, ...] = (1, 2),
    exit_on: str = "second",
    threshold: float | None = None,
    softmax: tuple[float, ...] = (),
    cosine: tuple[float, ...] = (),
) -> dict[str, EarlyExit]:
    """The learned criterion beside the stability rule, on the same sequences and forward pass.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The model the probe was fitted on.
    probe : SaturationProbe
        From :func:`fit_saturation_probe`.
    input_ids : array-like of int, shape (n_sequences, seq)
        Held-out sequences, at least 2 tokens.
    patience : tuple of int, default=(1, 2)
        Stability rules to report (exit when the lens top-1 equals that of the ``p`` blocks before).
    exit_on : {"second", "later"}, default="second"
        See :func:`probe_exit_layers`.
    threshold : float, optional
        See :func:`probe_exit_layers`.
    softmax, cosine : tuple of float, default=()
        Thresholds of the paper's baselines (:mod:`trustlab.lm._exit_rules`): exit at the first
        block whose lens softmax margin ``p_1 - p_2`` (the authors tried 0.4 ... 0.94), or whose
        residual stream's cosine with the block before (0.986 ... 0.995 for GPT-2 XL), reaches it.

    Returns
    -------
    dict of str to EarlyExit
        ``"probe"``, ``"stability-{p}"`` for each ``p``, ``"softmax-{t}"`` and ``"cosine-{t}"``
        for each threshold; every entry carries the oracle saving.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=12, d_model=16, n_layers=4, n_heads=2), seed=0)
    >>> rng = np.random.default_rng(0)
    >>> probe = fit_saturation_probe(m, rng.integers(0, 12, (20, 10)), n_tasks=2)
    >>> sorted(compare_exit_rules(m, probe, rng.integers(0, 12, (5, 10))))
    ['probe', 'stability-1', 'stability-2']
    """
    _check_probe(model, probe)
    _check_rule(exit_on, threshold)
    if not isinstance(patience, tuple | list) or not patience:
        raise ParameterError(
            f"patience must be a non-empty tuple of integers, got {patience!r}.", argument="patience"
        )
    ps = [check_positive_int(p, "patience") for p in patience]
    ids = _check_ids(model, input_ids, min_length=2)
    trace = _trace(model, ids, 1)
    top, full, target, sat = _scored(trace)
    out = {
        "probe": _exit_summary(
            _exits(probe, trace, exit_on, threshold)[trace.target >= 0], top, full, target, sat
        )
    }
    for p in ps:
        out[f"stability-{p}"] = _exit_summary(_stability_exits(top, p), top, full, target, sat)
    for rule, thresholds in zip(BASELINES, (softmax, cosine), strict=True):
        if not isinstance(thresholds, tuple | list):
            raise ParameterError(f"{rule} must be a tuple of thresholds, got {thresholds!r}.", argument=rule)
        scores = _baseline_scores(trace, rule)[:, trace.target >= 0]
        for t in thresholds:
            exit_at = _first_fire(scores >= _check_threshold(t, rule))
            out[f"{rule}-{t:g}"] = _exit_summary(exit_at, top, full, target, sat)
    return out
