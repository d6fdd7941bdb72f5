"""Data and model of :mod:`trustlab.lm.task_vectors_regression` (the paper's sparse-regression mixture).

Kept apart so that the public module stays short; every name here is re-exported there.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError, ModelError, ParameterError

__all__ = ["RegressionPrompts", "RegressionTransformer", "sparse_regression_prompts"]

_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_INT0 = Interval(numbers.Integral, 0, None, closed="left")


@dataclass(frozen=True)
class RegressionPrompts:
    """Prompts of the mixture of sparse linear regressions (:func:`sparse_regression_prompts`).

    Attributes
    ----------
    xs : ndarray of float32, shape (n, n_points, n_dims)
        The inputs ``x_i``.
    ys : ndarray of float32, shape (n, n_points)
        The outputs ``y_i = w . x_i + eps_i``.
    basis : ndarray of int, shape (n,)
        The latent basis of each prompt.
    weights : ndarray of float, shape (n, n_dims)
        The weights ``w`` (zero outside the basis's coordinates).
    rank : int
        Coordinates per basis.
    n_bases : int
        Number of bases.

    See Also
    --------
    sparse_regression_prompts
    """

    xs: np.ndarray
    ys: np.ndarray
    basis: np.ndarray
    weights: np.ndarray
    rank: int
    n_bases: int


@validate_params(
    {
        "n": [_INT1],
        "n_dims": [_INT1],
        "rank": [_INT1],
        "n_bases": [_INT1],
        "n_points": [_INT1],
        "noise": [Interval(numbers.Real, 0, None, closed="left")],
        "basis": [None, _INT0],
        "seed": [_INT0],
    }
)
def sparse_regression_prompts(
    n: int,
    *,
    n_dims: int = 16,
    rank: int = 4,
    n_bases: int = 4,
    n_points: int = 20,
    noise: float = 0.1,
    basis: int | None = None,
    seed: int = 0,
) -> RegressionPrompts:
    """Draw prompts of the paper's mixture of sparse linear regressions (its section 3.3, App. D.2).

    Basis ``b`` is the coordinate set ``{b * rank, ..., (b + 1) * rank - 1}``: the bases do not
    overlap and are orthogonal. Per prompt: a basis uniformly (or ``basis``), ``w ~ N(0, I_rank)``
    on its coordinates (zero elsewhere), ``x_i ~ N(0, I_D)`` and ``y_i = w . x_i + eps_i`` with
    ``eps_i ~ N(0, noise^2)``.

    Parameters
    ----------
    n : int
        Prompts.
    n_dims : int, default=16
        ``D`` (the paper's 16).
    rank : int, default=4
        Coordinates per basis (the paper's 4); ``n_bases * rank`` must not exceed ``n_dims``.
    n_bases : int, default=4
        Latent bases (the paper's 4).
    n_points : int, default=20
        ``(x, y)`` pairs per prompt (the paper's 20).
    noise : float, default=0.1
        Standard deviation of ``eps`` (the paper's variance 0.01).
    basis : int, optional
        Draw every prompt from this basis.
    seed : int, default=0
        Seeds the draw.

    Returns
    -------
    RegressionPrompts
        The prompts.

    Examples
    --------
    >>> p = sparse_regression_prompts(3, n_dims=8, rank=2, n_points=5, seed=1)
    >>> p.xs.shape, p.ys.shape, bool((p.weights[np.arange(3), 2 * p.basis] != 0).all())
    ((3, 5, 8), (3, 5), True)
    """
    if n_bases * rank > n_dims:
        raise ParameterError(
            f"n_bases * rank ({n_bases} x {rank}) must not exceed n_dims ({n_dims}); the bases "
            "are disjoint coordinate sets. Raise n_dims or lower rank.",
            argument="n_dims",
        )
    if basis is not None and basis >= n_bases:
        raise ParameterError(f"basis must be below n_bases ({n_bases}), got {basis}.", argument="basis")
    rng = np.random.default_rng(seed)
    b = rng.integers(0, n_bases, n) if basis is None else np.full(n, basis)
    xs = rng.standard_normal((n, n_points, n_dims))
    w = np.zeros((n, n_dims))
    cols = b[:, None] * rank + np.arange(rank)[None, :]
    w[np.arange(n)[:, None], cols] = rng.standard_normal((n, rank))
    ys = np.einsum("nkd,nd->nk", xs, w) + noise * rng.standard_normal((n, n_points))
    return RegressionPrompts(xs.astype(np.float32), ys.astype(np.float32), b, w, rank, n_bases)


class RegressionTransformer(torch.nn.Module):
    """A GPT-2 on continuous tokens (Garg et al. [2]_), the paper's synthetic model [1]_.

    ``x`` tokens are ``x_i``, ``y`` tokens ``(y_i, 0, ..., 0)`` (with ``mark_y``, one more
    coordinate, 1 on ``y`` tokens and 0 on ``x`` tokens); a linear read-in maps them to the width,
    ``transformers.GPT2Model`` (dropout 0) runs on ``inputs_embeds``, and a linear read-out of the
    last hidden state at each ``x_i`` predicts ``y_i``.

    Parameters
    ----------
    n_dims : int, default=16
        ``D``.
    n_points : int, default=20
        Longest prompt in pairs (positions ``2 * n_points``).
    n_layers : int, default=12
        Blocks (the paper's 12).
    width : int, default=256
        Embedding width (the paper's 256; its section 3.3 says 128).
    n_heads : int, default=8
        Attention heads (the paper's 8).
    mark_y : bool, default=False
        Add the ``y``-token indicator coordinate (not in Garg et al. or the paper).
    pair_y : bool, default=False
        ``y`` tokens carry their ``x`` too: ``(x_i, y_i)`` in ``n_dims + 1`` coordinates, ``x``
        tokens ``(x_i, 0)`` (not in the paper; the pair is otherwise split over two tokens, and
        joining it spares the model the copy step behind the long loss plateau of this format).
    seed : int, default=0
        Seeds the initial weights.

    Examples
    --------
    >>> m = RegressionTransformer(4, 3, n_layers=1, width=8, n_heads=2)
    >>> p = sparse_regression_prompts(2, n_dims=4, rank=1, n_points=3)
    >>> tuple(m(torch.tensor(p.xs), torch.tensor(p.ys)).shape)
    (2, 3)
    """

    def __init__(
        self,
        n_dims: int = 16,
        n_points: int = 20,
        *,
        n_layers: int = 12,
        width: int = 256,
        n_heads: int = 8,
        mark_y: bool = False,
        pair_y: bool = False,
        seed: int = 0,
    ) -> None:
        from transformers import GPT2Config, GPT2Model

        super().__init__()
        if width % n_heads:
            raise ParameterError(
                f"width ({width}) must be a multiple of n_heads ({n_heads}).", argument="width"
            )
        self.n_dims, self.n_points, self.mark_y, self.pair_y = n_dims, n_points, mark_y, pair_y
        cfg = GPT2Config(
            n_positions=2 * n_points,
            n_embd=width,
            n_layer=n_layers,
            n_head=n_heads,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            use_cache=False,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.read_in = torch.nn.Linear(n_dims + int(pair_y) + int(mark_y), width)
            self.backbone = GPT2Model(cfg)
            self.read_out = torch.nn.Linear(width, 1)

    @property
    def blocks(self) -> Any:
        """The transformer blocks (``backbone.h``), whose outputs are the residual stream."""
        return self.backbone.h

    def tokens(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """Interleave ``x`` and ``y`` tokens.

        Parameters
        ----------
        xs : torch.Tensor, shape (n, k, n_dims)
            Inputs.
        ys : torch.Tensor, shape (n, k)
            Outputs.

        Returns
        -------
        torch.Tensor, shape (n, 2 * k, n_dims [+ 1] [+ 1])
            ``x1, (y1, 0, ...), x2, ...`` (with ``pair_y``: ``(x1, 0), (x1, y1), (x2, 0), ...``).
        """
        n, k, d = xs.shape
        p = int(self.pair_y)
        z = xs.new_zeros(n, 2 * k, d + p + int(self.mark_y))
        z[:, 0::2, :d] = xs
        if p:
            z[:, 1::2, :d] = xs
        z[:, 1::2, d if p else 0] = ys
        if self.mark_y:
            z[:, 1::2, d + p] = 1.0
        return z

    def forward(self, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        """Predict every ``y_i`` from the prefix up to ``x_i``.

        Parameters
        ----------
        xs : torch.Tensor, shape (n, k, n_dims)
            Inputs (``k <= n_points``).
        ys : torch.Tensor, shape (n, k)
            Outputs.

        Returns
        -------
        torch.Tensor, shape (n, k)
            The predictions.
        """
        if (
            xs.ndim != 3
            or xs.shape[2] != self.n_dims
            or xs.shape[1] > self.n_points
            or ys.shape != xs.shape[:2]
        ):
            raise DataError(
                f"xs must be (n, <= {self.n_points}, {self.n_dims}) and ys (n, k); got "
                f"{tuple(xs.shape)} and {tuple(ys.shape)}.",
                argument="xs",
            )
        hidden = self.backbone(inputs_embeds=self.read_in(self.tokens(xs, ys))).last_hidden_state
        return self.read_out(hidden[:, 0::2]).squeeze(-1)


def _check_model(model: Any) -> None:
    if not isinstance(model, RegressionTransformer):
        raise ModelError(
            f"model must be a RegressionTransformer, got {type(model).__name__}.", argument="model"
        )


def _check_prompts(model: RegressionTransformer, prompts: Any) -> None:
    if not isinstance(prompts, RegressionPrompts):
        raise DataError(
            "prompts must be RegressionPrompts (from sparse_regression_prompts).", argument="prompts"
        )
    if prompts.xs.shape[2] != model.n_dims or prompts.xs.shape[1] > model.n_points:
        raise DataError(
            f"prompts have {prompts.xs.shape[1]} points of dimension {prompts.xs.shape[2]}; the model "
            f"takes at most {model.n_points} of dimension {model.n_dims}.",
            argument="prompts",
        )


def _tensors(prompts: RegressionPrompts) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(prompts.xs), torch.from_numpy(prompts.ys)


@contextmanager
def _block_hooks(
    model: RegressionTransformer, record: dict[int, torch.Tensor], patch: Any = None
) -> Iterator[None]:
    """Record each block's output (the residual stream); ``patch(layer, hidden)`` may edit it."""

    def hook(layer: int) -> Any:
        def fn(module: Any, args: Any, out: Any) -> Any:
            hidden = out[0] if isinstance(out, tuple) else out
            if patch is not None:
                hidden = patch(layer, hidden)
            record[layer] = hidden.detach()
            return (hidden, *out[1:]) if isinstance(out, tuple) else hidden

        return fn

    handles = [blk.register_forward_hook(hook(i)) for i, blk in enumerate(model.blocks)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
