"""Positional attention for algorithmic execution: value (scale) generalisation.

A *positional* Transformer computes every attention matrix from the positional encodings alone,
``A = softmax((P W_Q)(P W_K)^T)``, while the values ``V = X W_V`` carry the data; a standard
Transformer computes ``Q, K`` from the (data + position) embeddings. Back de Luca et al.
(ICML 2025) prove that positional Transformers simulate parallel algorithms (PCOC) with a
logarithmic depth cost and report that, trained on algorithmic tasks with inputs in ``[-2, 2]``,
they generalise to inputs of much larger magnitude where standard Transformers fail.
:func:`algorithmic_task` generates the paper's tasks, :class:`PositionalTransformerRegressor`
is the paper's architecture (``attention="standard"`` gives the baseline on the same
backbone) and :func:`simulate_value_generalization` trains both and measures test MSE per
input scale. See ``docs/theory/positional-attention.md``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._threads import one_thread
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, MissingDependencyError, NotFittedError, ParameterError

__all__ = [
    "ALGORITHMIC_TASKS",
    "PositionalTransformerRegressor",
    "ValueGeneralization",
    "algorithmic_task",
    "simulate_value_generalization",
]

ALGORITHMIC_TASKS = ("sum", "min", "max", "median", "sort", "maxsub")
_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_POS = Interval(numbers.Real, 0, None, closed="neither")
_REAL = Interval(numbers.Real, None, None, closed="neither")  # finite, not NaN


def _targets(x: np.ndarray, task: str, cumulative: bool) -> np.ndarray:
    """The task's output for each row of ``x`` (``(m, n)``), cumulative over prefixes or not."""
    n = x.shape[1]
    if task == "sort":
        return np.sort(x, axis=1)
    if task == "sum":
        y = np.cumsum(x, axis=1)
    elif task == "min":
        y = np.minimum.accumulate(x, axis=1)
    elif task == "max":
        y = np.maximum.accumulate(x, axis=1)
    elif task == "median":
        y = np.stack([np.median(x[:, : i + 1], axis=1) for i in range(n)], axis=1)
    else:  # maxsub: Kadane's recurrence, best sum of a contiguous subarray of each prefix
        y = np.empty_like(x)
        cur = best = x[:, 0].copy()
        y[:, 0] = best
        for i in range(1, n):
            cur = np.maximum(x[:, i], cur + x[:, i])
            best = np.maximum(best, cur)
            y[:, i] = best
    return y if cumulative else np.repeat(y[:, -1:], n, axis=1)


@validate_params(
    {
        "task": [Options(ALGORITHMIC_TASKS)],
        "n_samples": [_INT1],
        "length": [_INT1],
        "low": [_REAL],
        "high": [_REAL],
        "reject_low": [_REAL, None],
        "reject_high": [_REAL, None],
        "cumulative": ["boolean"],
        "random_state": ["random_state"],
    }
)
def algorithmic_task(
    task: str,
    n_samples: int,
    length: int,
    *,
    low: float = -2.0,
    high: float = 2.0,
    reject_low: float | None = None,
    reject_high: float | None = None,
    cumulative: bool = True,
    random_state: Any = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample inputs and targets of one of the paper's algorithmic tasks.

    Each sequence first draws its own range ``[a, b]`` (two uniform points of ``[low, high]``,
    sorted), then ``length`` values uniformly in ``[a, b]``, as in the authors' data generator.
    With ``reject_low``/``reject_high`` a range lying inside ``[reject_low, reject_high]`` is
    redrawn, so that out-of-distribution test sets hold no in-distribution sequence.

    Parameters
    ----------
    task : {"sum", "min", "max", "median", "sort", "maxsub"}
        ``maxsub`` is the maximum sum of a contiguous subarray; ``sort`` is never cumulative.
    n_samples, length : int
    low, high : float, default -2, 2
        The value range (the paper trains on ``[-2, 2]`` and tests on ``[-c, c]``).
    reject_low, reject_high : float, optional
        The in-distribution range to reject (both or neither).
    cumulative : bool, default True
        Output at position ``i`` is the task on the prefix ``x_1..x_i`` (the paper's setting);
        otherwise every position holds the task on the whole sequence.
    random_state : int, Generator or None, default 0

    Returns
    -------
    X, Y : numpy.ndarray
        ``(n_samples, length)`` each.

    References
    ----------
    A. Back de Luca, G. Giapitzakis, S. Yang, P. Velickovic and K. Fountoulakis, "Positional
    Attention: Expressivity and Learnability of Algorithmic Computation", ICML 2025 (PMLR 267).

    Examples
    --------
    >>> X, Y = algorithmic_task("min", 2, 3, random_state=0)
    >>> bool((Y == np.minimum.accumulate(X, axis=1)).all()), X.shape
    (True, (2, 3))
    """
    if not high > low:
        raise ParameterError(f"high must exceed low; got low={low}, high={high}.", argument="high")
    if (reject_low is None) != (reject_high is None):
        raise ParameterError("give both reject_low and reject_high, or neither.", argument="reject_low")
    rng = make_generator(random_state)
    ends = np.sort(rng.uniform(low, high, (n_samples, 2)), axis=1)
    if reject_low is not None and reject_high is not None:
        if reject_low <= low and reject_high >= high:
            raise ParameterError(
                f"[reject_low, reject_high] = [{reject_low}, {reject_high}] covers [low, high]; "
                "every range would be rejected. Widen [low, high].",
                argument="reject_low",
            )
        for _ in range(10_000):
            inside = (ends[:, 0] >= reject_low) & (ends[:, 1] <= reject_high)
            if not inside.any():
                break
            ends[inside] = np.sort(rng.uniform(low, high, (int(inside.sum()), 2)), axis=1)
    x = ends[:, :1] + (ends[:, 1:] - ends[:, :1]) * rng.uniform(size=(n_samples, length))
    return x, _targets(x, task, cumulative)


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the torch extra
        raise MissingDependencyError(
            "PositionalTransformerRegressor needs torch; install it with `pip install trustlab[torch]`."
        ) from exc
    return torch


def _build(torch: Any, n_pos: int, width: int, heads: int, layers: int, hidden: int, positional: bool) -> Any:
    nn, functional = torch.nn, torch.nn.functional

    class Block(nn.Module):  # type: ignore[name-defined]
        """Attention, then an MLP on ``[h, attention output]`` (the authors' layer; no norm)."""

        def __init__(self) -> None:
            super().__init__()
            self.dk = n_pos if positional else width
            self.qk = nn.Linear(self.dk, 2 * self.dk * heads)
            self.v = nn.Linear(width, width)
            self.o = nn.Linear(width, width)
            self.mlp = nn.Sequential(nn.Linear(2 * width, hidden), nn.ReLU(), nn.Linear(hidden, width))
            for lin in (self.qk, self.v, self.o):
                nn.init.xavier_uniform_(lin.weight)
                nn.init.zeros_(lin.bias)

        def forward(self, h: Any, p: Any) -> Any:
            b, n, _ = h.shape
            if positional:  # scores from the positions only: one matrix per head for every input
                q, k = self.qk(p).reshape(n, heads, 2 * self.dk).transpose(0, 1).chunk(2, dim=-1)
            else:
                q, k = self.qk(h).reshape(b, n, heads, 2 * self.dk).transpose(1, 2).chunk(2, dim=-1)
            v = self.v(h).reshape(b, n, heads, width // heads).transpose(1, 2)
            self.weights = functional.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dk), dim=-1)
            a = (self.weights @ v).transpose(1, 2).reshape(b, n, width)
            return self.mlp(torch.cat([h, self.o(a)], dim=-1))

    class Net(nn.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("pos", torch.eye(n_pos))
            self.enc = nn.Linear(1 if positional else 1 + n_pos, width)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.dec = nn.Linear(width, 1)

        def forward(self, x: Any) -> Any:
            b, n = x.shape
            h = torch.cat([x, x.new_zeros(b, n_pos - n)], dim=1).unsqueeze(-1)  # zero scratch nodes
            if not positional:  # the standard Transformer sees the positions in its input
                h = torch.cat([h, self.pos.expand(b, -1, -1)], dim=-1)
            h = self.enc(h)
            for block in self.blocks:
                h = block(h, self.pos)
            return self.dec(h)[:, :n, 0]

    return Net()


class PositionalTransformerRegressor(ParamsValidationMixin, RegressorMixin, BaseEstimator):
    """A Transformer with positional (or standard) attention for sequence-to-sequence regression.

    Fits ``Y`` (``(m, n)``) from ``X`` (``(m, n)``): each of the ``n`` values is a token, plus
    ``n_scratch`` zero tokens (the paper's additional node); positions are one-hot (the paper's
    identity encoding). Each layer is attention followed by a two-layer ReLU MLP on the
    concatenation of its input and the attention output, as in the authors' code. Requires torch.

    Parameters
    ----------
    attention : {"positional", "standard"}, default "positional"
        ``positional``: ``Q, K`` from the positional encodings only, ``V`` from the data;
        ``standard``: ``Q, K, V`` from the embedding of ``[x, position]``.
    n_layers : int, optional
        Default ``floor(log2 n) + 1`` (the paper's depth).
    width, n_heads, mlp_hidden : int, default 64, 2, 64
        Embedding width, heads, MLP hidden width (the paper's values).
    n_scratch : int, default 1
    steps, batch_size : int, default 3000, 256
        Adam steps on minibatches drawn with replacement.
    learning_rate : float, default 1e-3
        Adam's rate, cosine-annealed to zero (the paper: 5e-4 with reduce-on-plateau for 2001
        epochs of 30,000 samples).
    random_state : int, default 0

    Attributes
    ----------
    model_ : torch.nn.Module
    n_positions_ : int
        The sequence length seen in ``fit`` (the one-hot encodings fix it).
    loss_ : float
        Training MSE of the last step.

    References
    ----------
    A. Back de Luca et al., "Positional Attention: Expressivity and Learnability of Algorithmic
    Computation", ICML 2025 (PMLR 267); architecture as in the authors' code.

    Examples
    --------
    >>> X, Y = algorithmic_task("sum", 64, 4, random_state=0)
    >>> reg = PositionalTransformerRegressor(width=8, mlp_hidden=8, steps=5).fit(X, Y)
    >>> reg.predict(X).shape
    (64, 4)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "attention": [Options({"positional", "standard"})],
        "n_layers": [_INT1, None],
        "width": [_INT1],
        "n_heads": [_INT1],
        "mlp_hidden": [_INT1],
        "n_scratch": [Interval(numbers.Integral, 0, None, closed="left")],
        "steps": [_INT1],
        "batch_size": [_INT1],
        "learning_rate": [_POS],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        attention: str = "positional",
        *,
        n_layers: int | None = None,
        width: int = 64,
        n_heads: int = 2,
        mlp_hidden: int = 64,
        n_scratch: int = 1,
        steps: int = 3000,
        batch_size: int = 256,
        learning_rate: float = 1e-3,
        random_state: int = 0,
    ) -> None:
        self.attention = attention
        self.n_layers = n_layers
        self.width = width
        self.n_heads = n_heads
        self.mlp_hidden = mlp_hidden
        self.n_scratch = n_scratch
        self.steps = steps
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.random_state = random_state

    def fit(self, X: Any, y: Any) -> PositionalTransformerRegressor:
        """Train on sequences ``X`` with per-position targets ``y``.

        Parameters
        ----------
        X : array-like ``(m, n)``
        y : array-like ``(m, n)``

        Returns
        -------
        PositionalTransformerRegressor
            ``self``.
        """
        self._validate_params()
        if self.width % self.n_heads:
            raise ParameterError(
                f"width ({self.width}) must be a multiple of n_heads ({self.n_heads}).", argument="width"
            )
        x = check_numeric_array(X, "X", ndim=2)
        t = check_numeric_array(y, "y", ndim=2)
        if t.shape != x.shape:
            raise DataError(f"y must have the shape of X {x.shape}, got {t.shape}.", argument="y")
        torch = _torch()
        n = x.shape[1]
        layers = self.n_layers if self.n_layers is not None else math.floor(math.log2(n)) + 1
        torch.manual_seed(self.random_state)
        net = _build(
            torch,
            n + self.n_scratch,
            self.width,
            self.n_heads,
            layers,
            self.mlp_hidden,
            self.attention == "positional",
        )
        opt = torch.optim.Adam(net.parameters(), lr=self.learning_rate, fused=True)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, self.steps)
        xt = torch.tensor(x, dtype=torch.float32)
        yt = torch.tensor(t, dtype=torch.float32)
        gen = torch.Generator().manual_seed(self.random_state)
        loss = torch.zeros(())
        with one_thread():  # tiny matrices: one thread is fastest, and spares busy cores
            for _ in range(self.steps):
                idx = torch.randint(0, len(xt), (min(self.batch_size, len(xt)),), generator=gen)
                loss = ((net(xt[idx]) - yt[idx]) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        net.eval()
        self.model_, self.n_positions_, self.loss_ = net, n, float(loss.detach())
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Per-position predictions for sequences of the length seen in ``fit``.

        Parameters
        ----------
        X : array-like ``(m, n)``

        Returns
        -------
        numpy.ndarray ``(m, n)``
        """
        if not hasattr(self, "model_"):
            raise NotFittedError("PositionalTransformerRegressor is not fitted; call fit(X, y) first.")
        x = check_numeric_array(X, "X", ndim=2)
        if x.shape[1] != self.n_positions_:
            raise DataError(
                f"X must have {self.n_positions_} columns (the length seen in fit), got {x.shape[1]}; "
                "one-hot positional encodings fix the length.",
                argument="X",
            )
        torch = _torch()
        with torch.no_grad():
            out = self.model_(torch.tensor(x, dtype=torch.float32))
        return np.asarray(out.numpy(), dtype=float)

    def attention_weights(self, X: Any) -> np.ndarray:
        """Attention matrices of every layer and head for sequences ``X``.

        Parameters
        ----------
        X : array-like ``(m, n)``

        Returns
        -------
        numpy.ndarray
            ``(n_layers, m, n_heads, n + n_scratch, n + n_scratch)``; for positional attention
            every input gets the same matrices.
        """
        self.predict(X)
        x = np.asarray(X, dtype=float)
        return np.stack(
            [
                np.broadcast_to(blk.weights.numpy(), (len(x), *blk.weights.shape[-3:]))
                for blk in self.model_.blocks
            ]
        )


@dataclass(frozen=True)
class ValueGeneralization:
    """Test MSE of positional and standard attention per input scale.

    Attributes
    ----------
    task : str
    scales : numpy.ndarray
        Test ranges ``[-c, c]`` (``c`` equal to the training bound is in-distribution).
    positional, standard : numpy.ndarray
        Test MSE per scale (``(n_seeds, n_scales)``).
    difference_se : numpy.ndarray
        Standard error of the paired per-sequence difference ``standard - positional`` of the
        squared error, per seed and scale (the sample-size tolerance of the comparison).
    train_loss : numpy.ndarray
        ``(n_seeds, 2)``: final training MSE of positional and standard.

    See Also
    --------
    simulate_value_generalization : computes it.
    """

    task: str
    scales: np.ndarray
    positional: np.ndarray
    standard: np.ndarray
    difference_se: np.ndarray
    train_loss: np.ndarray

    @property
    def ratio(self) -> np.ndarray:
        """``standard / positional`` MSE per scale, geometric mean over seeds."""
        return np.asarray(np.exp(np.mean(np.log(self.standard / self.positional), axis=0)))


@validate_params(
    {
        "task": [Options(ALGORITHMIC_TASKS)],
        "scales": ["array-like"],
        "length": [_INT1],
        "n_train": [_INT1],
        "n_test": [Interval(numbers.Integral, 2, None, closed="left")],
        "train_bound": [_POS],
        "n_seeds": [_INT1],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
        "estimator_params": [dict, None],
    }
)
def simulate_value_generalization(
    task: str = "sum",
    scales: Any = (2, 4, 8),
    *,
    length: int = 8,
    n_train: int = 30_000,
    n_test: int = 1000,
    train_bound: float = 2.0,
    n_seeds: int = 1,
    random_state: int = 0,
    estimator_params: dict[str, Any] | None = None,
) -> ValueGeneralization:
    """Train positional and standard Transformers in ``[-b, b]``; test MSE on ``[-c, c]`` per scale.

    Test sets at ``c > b`` reject ranges inside ``[-b, b]`` (the authors' protocol). Both
    models get the same data, architecture and budget (``estimator_params``).

    Parameters
    ----------
    task : str, default "sum"
        One of :data:`ALGORITHMIC_TASKS` (cumulative version).
    scales : array-like of float, default (2, 4, 8)
        Test bounds ``c >= train_bound``.
    length : int, default 8
    n_train, n_test : int, default 30000, 1000
    train_bound : float, default 2
    n_seeds : int, default 1
    random_state : int, default 0
    estimator_params : dict, optional
        Passed to :class:`PositionalTransformerRegressor`.

    Returns
    -------
    ValueGeneralization

    References
    ----------
    A. Back de Luca et al., ICML 2025: value generalisation, Figure 4 (train on ``[-2, 2]``, test on
    ``[-2c, 2c]``; Figure 2 of the arXiv v1), as summarised and in the authors' code.

    Examples
    --------
    >>> r = simulate_value_generalization("min", [2, 4], length=4, n_train=64, n_test=16,
    ...     estimator_params={"width": 8, "mlp_hidden": 8, "steps": 3})
    >>> r.positional.shape
    (1, 2)
    """
    cs = check_numeric_array(scales, "scales", ndim=1)
    if np.any(cs < train_bound):
        raise DataError(
            f"scales must all be >= train_bound ({train_bound}), got {cs.tolist()}.", argument="scales"
        )
    params = dict(estimator_params or {})
    if "attention" in params or "random_state" in params:
        raise ParameterError(
            "estimator_params sets attention/random_state; they are set per run, remove them.",
            argument="estimator_params",
        )
    b = float(train_bound)
    res = np.zeros((2, n_seeds, len(cs)))
    se = np.zeros((n_seeds, len(cs)))
    losses = np.zeros((n_seeds, 2))
    for s in range(n_seeds):
        seed = random_state + 1000 * s
        x, y = algorithmic_task(task, n_train, length, low=-b, high=b, random_state=seed)
        tests = [
            algorithmic_task(
                task,
                n_test,
                length,
                low=-float(c),
                high=float(c),
                reject_low=None if c == b else -b,
                reject_high=None if c == b else b,
                random_state=seed + 1 + j,
            )
            for j, c in enumerate(cs)
        ]
        sq = []
        for k, kind in enumerate(("positional", "standard")):
            reg = PositionalTransformerRegressor(kind, random_state=seed, **params).fit(x, y)
            losses[s, k] = reg.loss_
            errs = [((reg.predict(xt) - yt) ** 2).mean(axis=1) for xt, yt in tests]
            sq.append(errs)
            res[k, s] = [e.mean() for e in errs]
        for j in range(len(cs)):
            diff = sq[1][j] - sq[0][j]
            se[s, j] = diff.std(ddof=1) / math.sqrt(len(diff))
    return ValueGeneralization(task, cs, res[0], res[1], se, losses)
