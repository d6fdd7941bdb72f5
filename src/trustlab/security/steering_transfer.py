"""Transferring steering vectors between two language models through a learned activation mapping.

A mapper (a small ReLU autoencoder, or an affine map) is trained on *paired activations*: the
same token sequences run through a source model A and a target model B, A's residual stream at
hook point ``l`` as input, B's at ``l'`` as the regression target (mean squared error). A
steering vector found on A by difference of means [2]_ is carried to B by mapping A's
contrastive activations and taking the difference of the mapped means; it is then added to
(or subtracted from) B's stream at ``l'``. For a backdoor, the paper's *prompt steering* maps
one contrastive pair per prompt (the trigger swapped for a benign one) at the trigger position
and adds it there only (``steer(..., positions=)``). The same mapper, trained from a fine-tuned model's
activations to its base model's and spliced into one layer, is a switch between the two
behaviours (on: the base behaviour; off: the fine-tuned one).

Works with any two local ``transformers`` causal LMs with the hook points of
:mod:`trustlab.lm.hooks` that share a vocabulary (the token ids fed to both must mean the
same). torch is imported inside the functions: importing :mod:`trustlab.security` stays light.

References
----------
.. [1] Oozeer, Nathawani, Prakash, Lan, Harrasse, Abdullah. "Activation Space Interventions Can
   Be Transferred Between Large Language Models". ICML 2025, arXiv:2503.04429.
.. [2] Panickssery, Gabrieli, Schulz, Tong, Hubinger, Turner. "Steering Llama 2 via Contrastive
   Activation Addition". arXiv:2312.06681, 2023; Arditi et al. "Refusal in Language Models Is
   Mediated by a Single Direction". NeurIPS 2024.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_token_ids
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.security._steering_hooks import (
    _edit_hook,
    _hook,
    _rows,
    _vocab_size,
    check_vocabularies,
    greedy_generate,
    steer,
)
from trustlab.security._steering_lab import load_transfer_lab

__all__ = [
    "ActivationMapper",
    "MappingQuality",
    "activation_switch",
    "check_vocabularies",
    "collect_activations",
    "greedy_generate",
    "load_transfer_lab",
    "paired_activations",
    "steer",
    "steering_vector",
]


# -- activations and steering vectors ------------------------------------------------------
def collect_activations(
    model: Any, sequences: Any, *, hook: str, position: Any = -1, pad_id: int | None = None
) -> np.ndarray:
    """The activation at one hook point, at one position or at every (non-padding) position.

    Parameters
    ----------
    model : transformers causal LM
        The model.
    sequences : array-like of int, shape (n, length)
        Token ids (right-padded with ``pad_id`` when of unequal length).
    hook : str
        ``blocks.{i}.resid_post`` (or ``resid_pre`` / ``attn_out`` / ``mlp_out``); ``i`` may be negative.
    position : int, array-like of int of shape (n,), or None, default=-1
        The token position to read (``-1``: the last), or one per sequence (e.g. each
        prompt's trigger position, for the paper's prompt steering); ``None``: every position
        not equal to ``pad_id``, stacked row-wise.
    pad_id : int, optional
        Padding id left out when ``position`` is ``None``.

    Returns
    -------
    ndarray of float32, shape (n, d) or (n_tokens, d)
        One activation row per sequence (or per kept token).

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.lm import ModelConfig, build_model
    >>> lm = build_model(ModelConfig(arch="llama", vocab_size=16, d_model=8, n_layers=1,
    ...                              n_heads=2, max_len=16))
    >>> ids = np.array([[1, 2, 3], [4, 5, 6]])
    >>> collect_activations(lm, ids, hook="blocks.0.resid_post").shape
    (2, 8)
    >>> collect_activations(lm, ids, hook="blocks.0.resid_post", position=None).shape
    (6, 8)
    """
    from trustlab.lm.hooks import run_with_hooks

    name, _, _ = _hook(model, hook, "hook", "model")
    ids = check_token_ids(sequences, "sequences", vocab=_vocab_size(model))
    where = None if position is None else np.asarray(position)
    if where is not None and (
        where.ndim not in (0, 1 if where.size == len(ids) else 0)
        or not np.issubdtype(where.dtype, np.integer)
        or not ((-ids.shape[1] <= where) & (where < ids.shape[1])).all()
    ):
        raise ParameterError(
            f"position must be an integer in [-{ids.shape[1]}, {ids.shape[1]}), one per sequence, or None, "
            f"got {position!r}.",
            argument="position",
        )
    out = []
    for s in range(0, len(ids), 512):
        act = run_with_hooks(model, ids[s : s + 512], [name])[name].float().cpu().numpy()
        if where is not None:
            at = where if where.ndim == 0 else where[s : s + 512]
            out.append(act[np.arange(len(act)), at])
        else:
            keep = np.ones(ids[s : s + 512].shape, bool) if pad_id is None else ids[s : s + 512] != pad_id
            out.append(act[keep])
    return np.concatenate(out).astype(np.float32)


@validate_params({"hook": [str], "position": [numbers.Integral]})
def steering_vector(model: Any, undesired: Any, desired: Any, *, hook: str, position: int = -1) -> np.ndarray:
    """Difference of means: mean activation on ``undesired`` minus mean on ``desired`` prompts.

    Parameters
    ----------
    model : transformers causal LM
        The model the vector is found on.
    undesired, desired : array-like of int, shape (n, length)
        Contrastive prompt sets (e.g. harmful and harmless instructions: the refusal direction).
    hook : str
        ``blocks.{i}.resid_post`` (or ``resid_pre`` / ``attn_out`` / ``mlp_out``).
    position : int, default=-1
        Token position read (the last: where the response starts).

    Returns
    -------
    ndarray of float32, shape (d_model,)
        ``v = mu_undesired - mu_desired`` (the paper's Appendix A, Eq. 3-4).

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=8, n_layers=2, n_heads=2))
    >>> steering_vector(m, [[1, 2, 3]], [[1, 2, 4]], hook="blocks.0.resid_post").shape
    (8,)
    """
    a = collect_activations(model, undesired, hook=hook, position=position)
    b = collect_activations(model, desired, hook=hook, position=position)
    return (a.mean(0) - b.mean(0)).astype(np.float32)


def paired_activations(
    source: Any,
    target: Any,
    sequences: Any,
    *,
    source_hook: str,
    target_hook: str,
    pad_id: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Activations of the same tokens in two models: the mapper's training pairs.

    Parameters
    ----------
    source, target : transformers causal LM
        Models sharing a vocabulary (checked by :func:`check_vocabularies`).
    sequences : array-like of int, shape (n, length)
        Shared token sequences (prompts and responses), right-padded with ``pad_id``.
    source_hook, target_hook : str
        ``blocks.{i}.resid_post`` of each model (the paper's layers ``l`` and ``l'``).
    pad_id : int, optional
        Padding positions are left out (the paper's attention mask ``m_i``).

    Returns
    -------
    X : ndarray of float32, shape (n_tokens, d_source)
        The source's activations at ``source_hook``, one row per non-padding token.
    Y : ndarray of float32, shape (n_tokens, d_target)
        The target's activations of the same tokens at ``target_hook``.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.lm import ModelConfig, build_model
    >>> a = build_model(ModelConfig(arch="llama", vocab_size=16, d_model=8, n_layers=1,
    ...                             n_heads=2, max_len=16))
    >>> b = build_model(ModelConfig(arch="llama", vocab_size=16, d_model=16, n_layers=2,
    ...                             n_heads=2, max_len=16), seed=1)
    >>> X, Y = paired_activations(a, b, np.array([[1, 2, 3], [4, 5, 0]]), pad_id=0,
    ...                           source_hook="blocks.0.resid_post",
    ...                           target_hook="blocks.-1.resid_post")
    >>> X.shape, Y.shape
    ((5, 8), (5, 16))
    """
    check_vocabularies(source, target)
    _hook(source, source_hook, "source_hook", "source")
    _hook(target, target_hook, "target_hook", "target")
    x = collect_activations(source, sequences, hook=source_hook, position=None, pad_id=pad_id)
    y = collect_activations(target, sequences, hook=target_hook, position=None, pad_id=pad_id)
    return x, y


# -- the mapper ----------------------------------------------------------------------------
@dataclass(frozen=True)
class MappingQuality:
    """How well mapped activations reconstruct the target's (the paper's Appendix D metrics).

    Attributes
    ----------
    mse : float
        Mean squared error per coordinate (the training loss).
    fvu : float
        Fraction of variance unexplained, ``sum ||y_hat - y||^2 / sum ||y - mean(y)||^2``.
    cosine : float
        Mean cosine similarity of mapped and true activation vectors.

    Examples
    --------
    >>> MappingQuality(mse=0.1, fvu=0.05, cosine=0.98).fvu
    0.05
    """

    mse: float
    fvu: float
    cosine: float


class ActivationMapper(ParamsValidationMixin):
    """A learned map from one model's activation space to another's (autoencoder or affine).

    ``kind="autoencoder"``: ``y_hat = W2 ReLU(W1 x + b1) + b2`` with hidden width
    ``sqrt(d_source * d_target)`` (the paper's Sec. 3.3 and Table 22); ``kind="affine"``:
    ``y_hat = W x + b`` (its Sec. 6 baseline). Trained with AdamW on the mean squared error of
    paired activations, ``validation_fraction`` held out for :attr:`validation_`.

    Parameters
    ----------
    kind : {"autoencoder", "affine"}, default="autoencoder"
    hidden_dim : int, optional
        Autoencoder width; ``None``: ``round(sqrt(d_source * d_target))``.
    lr : float, default=1e-3
        AdamW learning rate (the paper's 1e-4 at far more steps; see the docs page).
    epochs : int, default=3
        Passes over the training rows (the paper's 3).
    batch_size : int, default=64
        Activation rows per step (the paper: 16 sequences, 4 accumulation steps).
    weight_decay : float, default=0.01
        AdamW's decoupled weight decay (torch's default).
    validation_fraction : float, default=0.1
        Share of rows held out (the paper's 10%); 0 disables it.
    random_state : int, default=0
        Seeds the initialisation, the split and the batch order.

    Attributes
    ----------
    n_features_in_, n_outputs_ : int
    net_ : torch.nn.Module
        The map between the standardised spaces.
    scaling_ : tuple
        ``(mean_x, std_x, mean_y, std_y)``: inputs are centred and divided by their overall std
        before ``net_``, outputs multiplied and shifted back.
    losses_ : ndarray of float, shape (n_steps,)
        Training MSE per step (in the target's units).
    validation_ : MappingQuality or None
        Quality on the held-out rows.

    References
    ----------
    Oozeer et al. "Activation Space Interventions Can Be Transferred Between Large Language
    Models". ICML 2025.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(600, 4)); y = x @ rng.normal(size=(4, 6)) + 1.0
    >>> m = ActivationMapper(kind="affine", lr=0.05, epochs=6).fit(x, y)
    >>> m.transform(x).shape, m.validation_.fvu < 0.01
    ((600, 6), True)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "kind": [Options({"autoencoder", "affine"})],
        "hidden_dim": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "weight_decay": [Interval(numbers.Real, 0, 1, closed="left")],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="left")],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        kind: str = "autoencoder",
        *,
        hidden_dim: int | None = None,
        lr: float = 1e-3,
        epochs: int = 3,
        batch_size: int = 64,
        weight_decay: float = 0.01,
        validation_fraction: float = 0.1,
        random_state: int = 0,
    ) -> None:
        self.kind = kind
        self.hidden_dim = hidden_dim
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def _net(self, d_in: int, d_out: int) -> Any:
        import torch

        if self.kind == "affine":
            return torch.nn.Linear(d_in, d_out)
        h = self.hidden_dim or max(1, round(math.sqrt(d_in * d_out)))
        return torch.nn.Sequential(torch.nn.Linear(d_in, h), torch.nn.ReLU(), torch.nn.Linear(h, d_out))

    def fit(self, X: Any, Y: Any) -> ActivationMapper:
        """Learns the map from source activations ``X`` to target activations ``Y``.

        Parameters
        ----------
        X : array-like of float, shape (n, d_source)
        Y : array-like of float, shape (n, d_target)
            Row ``i`` of both: the same token in the two models (:func:`paired_activations`).

        Returns
        -------
        ActivationMapper
            ``self``.
        """
        import torch

        self._validate_params()
        x, y = _rows(X, "X"), _rows(Y, "Y")
        if len(x) != len(y):
            raise DataError(f"X and Y must pair row by row, got {len(x)} and {len(y)} rows.", argument="Y")
        rng = np.random.default_rng(self.random_state)
        order = rng.permutation(len(x))
        n_val = int(len(x) * self.validation_fraction)
        if len(x) - n_val < 2:
            raise DataError(f"X has {len(x)} rows; fit needs at least 2 training rows.", argument="X")
        val, tr = order[:n_val], order[n_val:]
        # centre and scale each side by its training mean and overall std (one scalar): the map's
        # family is unchanged (the affine scalings fold into its first and last layers) and
        # AdamW's steps do not depend on the models' activation scales
        mx, my = x[tr].mean(0), y[tr].mean(0)
        sx, sy = float(x[tr].std()) or 1.0, float(y[tr].std()) or 1.0
        self.scaling_ = (torch.as_tensor(mx), sx, torch.as_tensor(my), sy)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.random_state)
            net = self._net(x.shape[1], y.shape[1])
        opt = torch.optim.AdamW(net.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        xt, yt = torch.as_tensor((x - mx) / sx), torch.as_tensor((y - my) / sy)
        losses = []
        for _ in range(self.epochs):
            perm = tr[rng.permutation(len(tr))]
            for s in range(0, len(perm), self.batch_size):
                b = torch.as_tensor(perm[s : s + self.batch_size])
                loss = torch.mean((net(xt[b]) - yt[b]) ** 2)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()) * sy**2)
        self.net_ = net.eval()
        self.n_features_in_, self.n_outputs_ = x.shape[1], y.shape[1]
        self.losses_ = np.asarray(losses)
        self.validation_ = self.quality(x[val], y[val]) if n_val else None
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise NotFittedError(
                "this ActivationMapper is not fitted; call fit(X, Y) first.", argument="self"
            )

    def transform(self, X: Any) -> np.ndarray:
        """Maps source activations into the target's space.

        Parameters
        ----------
        X : array-like of float, shape (n, d_source)

        Returns
        -------
        ndarray of float32, shape (n, d_target)
        """
        import torch

        self._check_fitted()
        x = _rows(X, "X", self.n_features_in_)
        with torch.no_grad():
            return self._forward(torch.as_tensor(x)).numpy()

    def _forward(self, x: Any) -> Any:
        mx, sx, my, sy = self.scaling_
        net = self.net_.to(x.device)
        return net((x.float() - mx.to(x.device)) / sx) * sy + my.to(x.device)

    def quality(self, X: Any, Y: Any) -> MappingQuality:
        """Reconstruction of ``Y`` from ``X``: MSE, fraction of variance unexplained, cosine.

        Parameters
        ----------
        X : array-like of float, shape (n, d_source)
        Y : array-like of float, shape (n, d_target)

        Returns
        -------
        MappingQuality
        """
        y = _rows(Y, "Y", getattr(self, "n_outputs_", None)).astype(np.float64)
        p = self.transform(X).astype(np.float64)
        if len(p) != len(y):
            raise DataError(f"X and Y must pair row by row, got {len(p)} and {len(y)}.", argument="Y")
        err = ((p - y) ** 2).sum()
        var = ((y - y.mean(0)) ** 2).sum()
        cos = (p * y).sum(1) / np.maximum(np.linalg.norm(p, axis=1) * np.linalg.norm(y, axis=1), 1e-12)
        return MappingQuality(float(err / p.size), float(err / max(var, 1e-12)), float(cos.mean()))

    def score(self, X: Any, Y: Any) -> float:
        """``1 - FVU`` of the mapped activations (scikit-learn's R^2 convention, pooled).

        Parameters
        ----------
        X : array-like of float, shape (n, d_source)
        Y : array-like of float, shape (n, d_target)

        Returns
        -------
        float
        """
        return 1.0 - self.quality(X, Y).fvu

    def map_vector(self, undesired: Any, desired: Any) -> np.ndarray:
        """The mapped steering vector: mean of mapped ``undesired`` minus mean of mapped ``desired``.

        Parameters
        ----------
        undesired, desired : array-like of float, shape (n, d_source)
            The source model's contrastive activations (e.g. from :func:`collect_activations`).

        Returns
        -------
        ndarray of float32, shape (d_target,)
            For an affine map this equals ``W (mu_undesired - mu_desired)``.
        """
        return (self.transform(undesired).mean(0) - self.transform(desired).mean(0)).astype(np.float32)


# -- the switch: on while the context is open, off after ---------------------------------------
@contextmanager
def activation_switch(model: Any, mapper: ActivationMapper, *, hook: str) -> Iterator[Any]:
    """Replaces ``model``'s activation at ``hook`` by ``mapper(activation)`` while the block is open.

    With a mapper fitted from a fine-tuned model's activations to its base model's (same
    sequences, same hook), the fine-tuned model behaves as the base model inside the block and
    as itself outside: the paper's "lightweight safety switch" (Sec. 4.4).

    Parameters
    ----------
    model : transformers causal LM
    mapper : ActivationMapper
        Fitted, from ``model``'s width to ``model``'s width.
    hook : str
        ``blocks.{i}.resid_post`` (or ``resid_pre`` / ``attn_out`` / ``mlp_out``).

    Yields
    ------
    model

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=8, n_layers=1, n_heads=2))
    >>> x = collect_activations(m, [[1, 2, 3], [4, 5, 6]], hook="blocks.0.resid_post", position=None)
    >>> identity = ActivationMapper("affine", epochs=1).fit(x, x)
    >>> with activation_switch(m, identity, hook="blocks.0.resid_post"):
    ...     on = greedy_generate(m, [[1, 2, 3]], max_new_tokens=3)
    >>> on.shape
    (1, 3)
    """
    import torch

    if not isinstance(mapper, ActivationMapper):
        raise ParameterError(
            f"mapper must be an ActivationMapper, got {type(mapper).__name__}.", argument="mapper"
        )
    mapper._check_fitted()
    width = int(model.get_input_embeddings().embedding_dim)
    if (mapper.n_features_in_, mapper.n_outputs_) != (width, width):
        raise DataError(
            f"mapper maps {mapper.n_features_in_} -> {mapper.n_outputs_} dimensions but model's stream "
            f"has {width}; fit it on this model's activations (both sides).",
            argument="mapper",
        )

    def edit(x: Any) -> Any:
        with torch.no_grad():
            return mapper._forward(x).to(x.dtype)

    handle = _edit_hook(model, hook, edit)
    try:
        yield model
    finally:
        handle.remove()
