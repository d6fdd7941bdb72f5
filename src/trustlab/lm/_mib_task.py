"""Clean / counterfactual pairs for :mod:`trustlab.lm.mib` (MIB's circuit-localisation track).

References
----------
.. [1] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_token_ids
from trustlab.errors import DataError, ParameterError
from trustlab.lm._mib_graph import _weights, edge_graph, graph_forward
from trustlab.lm._mib_oa import fit_optimal_ablation, mean_values

__all__ = ["ABLATIONS", "PatchingTask", "min_pairs"]

ABLATIONS = ("patching", "mean", "optimal")
OA_DEFAULTS: dict[str, Any] = {"steps": 1000, "lr": 1e-3, "patience": 3, "check_every": 10}  # MIB's oa.py


@dataclass(frozen=True)
class PatchingTask:
    """Clean / counterfactual input pairs and the answers the metric compares.

    Attributes
    ----------
    clean, corrupted : ndarray of int, shape (n_items, seq)
        Token ids; the counterfactual (``corrupted``) rows have the clean rows' shape.
    answers, cf_answers : ndarray of int, shape (n_items,)
        The clean answer token and the counterfactual's answer token.
    positions : ndarray of int, shape (n_items,), optional
        Where the answer is predicted; default the last position.

    Notes
    -----
    The metric is the mean logit difference ``logit[answer] - logit[cf_answer]`` at ``positions``.

    See Also
    --------
    min_pairs : pairs for the lab's sorting task.

    Examples
    --------
    >>> task = PatchingTask(clean=[[3, 5, 9]], corrupted=[[7, 5, 9]], answers=[3], cf_answers=[5])
    >>> len(task), task.positions.tolist()  # answers read at the last position by default
    (1, [2])
    """

    clean: np.ndarray
    corrupted: np.ndarray
    answers: np.ndarray
    cf_answers: np.ndarray
    positions: np.ndarray | None = None

    def __post_init__(self) -> None:
        clean, corrupted = check_token_ids(self.clean, "clean"), check_token_ids(self.corrupted, "corrupted")
        if clean.shape != corrupted.shape:
            raise DataError(
                f"corrupted has shape {corrupted.shape} but clean has {clean.shape}: every clean input "
                "needs a counterfactual of the same length (pad or cut them to one length).",
                argument="corrupted",
            )
        n, seq = clean.shape
        pos = np.full(n, seq - 1) if self.positions is None else np.asarray(self.positions).reshape(-1)
        values = {"answers": self.answers, "cf_answers": self.cf_answers, "positions": pos}
        for name, value in values.items():
            arr = np.asarray(value).reshape(-1)
            if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer) or (arr < 0).any():
                raise DataError(
                    f"{name} must hold one non-negative integer per item ({n}), "
                    f"got {np.asarray(value).shape}.",
                    argument=name,
                )
            object.__setattr__(self, name, arr.astype(np.int64))
        if (np.asarray(self.positions) >= seq).any():
            raise DataError(f"positions must lie in [0, {seq}).", argument="positions")
        object.__setattr__(self, "clean", clean)
        object.__setattr__(self, "corrupted", corrupted)

    def __len__(self) -> int:
        return int(self.clean.shape[0])


@validate_params(
    {
        "n": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_items": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_values": [Interval(numbers.Integral, 3, None, closed="left")],
        "seed": ["random_state"],
    }
)
def min_pairs(n: int, *, n_items: int = 6, n_values: int = 12, seed: Any = 0) -> PatchingTask:
    """Clean / counterfactual pairs for the lab's sorting task: the first sorted value.

    A clean input is ``v1 .. vn SEP`` (as in :func:`~trustlab.lm.sorting_task`, ``SEP = n_values``)
    with a unique minimum; the model's answer at ``SEP`` is the minimum. The counterfactual raises
    the minimal value, so its minimum (the counterfactual answer) is a different token.

    Parameters
    ----------
    n : int
        Number of pairs.
    n_items : int, default=6
        Values per sequence.
    n_values : int, default=12
        Values are ``0 .. n_values - 1``.
    seed : int, default=0
        Seeds the values.

    Returns
    -------
    PatchingTask
        Sequences of length ``n_items + 1``, answers read at the last position.

    Examples
    --------
    >>> t = min_pairs(2, n_items=4, n_values=12, seed=0)
    >>> t.clean.shape, bool((t.answers != t.cf_answers).all())
    ((2, 5), True)
    """
    rng = np.random.default_rng(seed)
    rows: list[np.ndarray] = []
    while len(rows) < n:
        v = rng.integers(0, n_values, size=(2 * n, n_items))
        s = np.sort(v, axis=1)
        rows += list(v[s[:, 0] < s[:, 1]])
    values = np.asarray(rows[:n])
    idx = values.argmin(axis=1)
    low = values.min(axis=1)
    raised = rng.integers(low + 1, n_values)
    cf_values = values.copy()
    cf_values[np.arange(n), idx] = raised
    sep = np.full((n, 1), n_values)
    clean = np.concatenate([values, sep], axis=1)
    corrupted = np.concatenate([cf_values, sep], axis=1)
    return PatchingTask(clean, corrupted, low, cf_values.min(axis=1))


class _Context:
    """One task on one model: tensors, the clean run, the ablated sources' values, m(N) and m(∅).

    ``ablation``: ``"patching"`` (a source off the circuit reads its output on the counterfactual
    input), ``"mean"`` (its mean output over the task's clean inputs), ``"optimal"`` (its optimal
    ablation constant fitted on them) or an array of shape ``(n_sources, d_model)`` of constants.
    """

    def __init__(self, model: Any, task: PatchingTask, ablation: Any = "patching") -> None:
        if not isinstance(task, PatchingTask):
            raise ParameterError(f"task must be a PatchingTask, got {type(task).__name__}.", argument="task")
        is_name = isinstance(ablation, str)
        if is_name and ablation not in ABLATIONS:
            raise ParameterError(
                f"ablation must be one of {', '.join(ABLATIONS)} or an array of one constant per source node "
                f"(see mean_ablation / optimal_ablation), got {ablation!r}.",
                argument="ablation",
            )
        self.model, self.graph = model, edge_graph(model)
        self.weights = _weights(model)
        vocab = int(model.get_input_embeddings().num_embeddings)
        ids = np.concatenate([task.clean, task.corrupted])
        answers = np.concatenate([task.answers, task.cf_answers])
        if ids.max() >= vocab or answers.max() >= vocab:
            raise DataError(
                f"task holds token ids outside the model's vocabulary [0, {vocab}); encode with the model's "
                "tokenizer.",
                argument="task",
            )
        ctx = self.weights.lay.max_len
        if ctx is not None and task.clean.shape[1] > int(ctx):
            raise DataError(
                f"task sequences have {task.clean.shape[1]} tokens, longer than the model's context ({ctx}).",
                argument="task",
            )
        window = getattr(model.config, "sliding_window", None)
        if window and getattr(model.config, "use_sliding_window", True) and task.clean.shape[1] > int(window):
            raise DataError(
                f"task sequences have {task.clean.shape[1]} tokens, more than the model's sliding attention "
                f"window ({window}), which the edge-patched pass does not model; cut them.",
                argument="task",
            )
        device = next(model.parameters()).device
        self.clean = torch.as_tensor(task.clean, device=device)
        self.corrupted = torch.as_tensor(task.corrupted, device=device)
        self.pos = torch.as_tensor(task.positions, device=device)
        self.ans = torch.as_tensor(task.answers, device=device)
        self.cf = torch.as_tensor(task.cf_answers, device=device)
        self.was_training = model.training
        model.eval()
        self.ablation = ablation if is_name else "constant"
        with torch.no_grad():
            logits, self.clean_acts, _ = self.run(self.clean)
            self.m_full = self.metric(logits).item()
            if self.ablation == "patching":
                logits, self.corrupt_acts, _ = self.run(self.corrupted)
                self.m_empty = self.metric(logits).item()
        if self.ablation != "patching":
            self.values = self._values(ablation)
            self.corrupt_acts = self.values[None, None].expand_as(self.clean_acts)
            self.m_empty = self.circuit_metric(np.zeros(self.graph.valid.shape))
        if not np.isfinite([self.m_empty, self.m_full]).all():
            raise DataError("the model's logits hold NaN or inf; check the checkpoint.", argument="model")
        if abs(self.m_full - self.m_empty) < 1e-6:
            raise DataError(
                "task: the clean and ablated runs give the same logit difference, so faithfulness "
                "is undefined; use pairs whose answers the model tells apart.",
                argument="task",
            )

    def _values(self, ablation: Any, **oa: Any) -> torch.Tensor:
        """The constants that stand in for ablated sources, shape ``(n_sources, d_model)``."""
        mean = mean_values(self.clean_acts)
        if isinstance(ablation, str) and ablation == "mean":
            return mean
        if isinstance(ablation, str) and ablation == "optimal":
            kw = OA_DEFAULTS | oa
            values, self.oa_trace = fit_optimal_ablation(
                self.model, self.graph, self.weights, self.clean, self.pos, mean, **kw
            )
            return values
        arr = np.asarray(ablation, dtype=float)
        if arr.shape != tuple(mean.shape) or not np.isfinite(arr).all():
            raise DataError(
                f"ablation values must be finite with shape {tuple(mean.shape)} (one constant per source "
                f"node: {', '.join(self.graph.sources)}), got shape {arr.shape}.",
                argument="ablation",
            )
        return torch.as_tensor(arr, dtype=mean.dtype, device=mean.device)

    def run(self, ids: torch.Tensor, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        return graph_forward(self.model, self.graph, ids, self.pos, weights=self.weights, **kwargs)

    def metric(self, logits: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(logits.shape[0], device=logits.device)
        return (logits[rows, self.ans] - logits[rows, self.cf]).mean()

    @torch.no_grad()
    def circuit_metric(self, mask: np.ndarray) -> float:
        m = torch.as_tensor(mask, dtype=self.corrupt_acts.dtype, device=self.corrupt_acts.device)
        logits, _, _ = self.run(self.clean, mask=m, corrupt=self.corrupt_acts)
        return float(self.metric(logits))

    def faithfulness(self, mask: np.ndarray) -> float:
        return (self.circuit_metric(mask) - self.m_empty) / (self.m_full - self.m_empty)

    def close(self) -> None:
        self.model.train(self.was_training)
