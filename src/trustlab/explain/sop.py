"""Sum-of-Parts (SOP): turn a torch classifier into a self-attributing network of feature groups.

SOP predicts with a *sum of parts*: for an input ``x`` it generates ``m`` binary feature groups
``g_1..g_m`` (group generator ``Gamma``), runs the frozen backbone ``h`` on each masked copy
``g_i * x``, and sums the group logits with sparse class-wise weights (group selector
``theta``)::

    f(x)_c = sum_i theta(Gamma(x), x)_{i,c} * h(g_i * x)_c

so the score of each group *is* its share of the prediction: the explanation is faithful by
construction (the group scores add up to the logit exactly). The pieces follow the paper and
the authors' code (exlib ``SOPImageCls``):

- generator: tokens (image patches or tabular features) are embedded, one attention head's
  softmax rows over the tokens are cut at their top ``group_fraction`` (20%) into binary masks,
  and each group's logits are multiplied by ``c = sum(kept attention) - sum(rest)``, the path by
  which the loss trains the generator through the binarisation; ``n_groups`` (20) of the
  ``n_candidates`` (200) query rows are kept, evenly spaced;
- backbone: the user's model, frozen, on zero-occluded copies; the input of its final
  ``nn.Linear`` is the group's feature vector;
- selector: class queries initialised to that layer's weights, identity-initialised
  projections, sparsemax over the groups; cross-entropy on the summed logits.

``grouping="features"`` fixes one group per feature (a per-feature SANN on the same backbone,
the model class whose error the paper bounds from below). See docs/explain/sum-of-parts.md.

References
----------
.. [1] You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with
   End-to-End Learning of Feature Groups". ICML 2025.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab._adam import Adam
from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.explain._sop_core import SOPNet, find_head

__all__ = ["GROUPINGS", "SOPExplanation", "SumOfParts"]

GROUPINGS = ("learned", "features")
_CHUNK = 4096  # backbone rows per forward pass


def _check_inputs(X: Any, name: str = "X") -> np.ndarray:
    arr = check_numeric_array(X, name, min_rows=1, dtype=np.float32)
    if arr.ndim < 2 or arr.shape[1] == 0:
        raise DataError(
            f"{name} must be a batch of shape (n, ...) with at least one feature; got shape {arr.shape}.",
            argument=name,
        )
    return arr


def _check_model(model: Any, name: str = "backbone") -> Any:
    if not isinstance(model, torch.nn.Module):
        raise ModelError(
            f"{name} must be a torch.nn.Module mapping a float batch to logits; got {type(model).__name__}.",
            argument=name,
        )
    return model


@dataclass(frozen=True)
class SOPExplanation:
    """SOP's explanation of a batch: its groups and each group's exact share of each logit.

    Attributes
    ----------
    masks : ndarray of bool, shape (n, m, ...)
        The ``m`` feature groups of each input, in the input's shape.
    group_scores : ndarray of shape (n, m, n_classes)
        Contribution of group ``i`` to the logit of class ``c``: selector weight times the
        group's (scaled) backbone logit. They sum over groups to ``logits`` exactly.
    weights : ndarray of shape (n, m, n_classes)
        Selector weights (sparsemax over the groups, per class: most are exactly 0).
    group_logits : ndarray of shape (n, m, n_classes)
        ``c_i * h(g_i * x)``: the backbone's logits on each group, times the generator scale.
    logits : ndarray of shape (n, n_classes)
        SOP's logits.
    predicted : ndarray of int, shape (n,)
        The class with the largest logit.

    See Also
    --------
    SumOfParts.explain : builds it (the class example shows one).
    """

    masks: np.ndarray
    group_scores: np.ndarray
    weights: np.ndarray
    group_logits: np.ndarray
    logits: np.ndarray
    predicted: np.ndarray

    def feature_attributions(self, target: Any = None) -> np.ndarray:
        """Per-feature map ``sum_i mask_i * score_i / |g_i|`` for class ``target`` (default: predicted).

        Each group's score is spread evenly over its features, so the map adds up to the logit
        (the paper's map ``sum_i mask_i * score_i`` ranks features the same way: SOP's groups
        all have the same size).

        Parameters
        ----------
        target : int or array-like of shape (n,), optional
            Class per row; ``None`` uses :attr:`predicted`.

        Returns
        -------
        ndarray of shape (n, ...)
            In the input's shape (the paper's aggregated group attribution map).
        """
        n = self.group_scores.shape[0]
        t = self.predicted if target is None else np.broadcast_to(np.asarray(target, dtype=int), (n,))
        if t.min() < 0 or t.max() >= self.group_scores.shape[2]:
            raise ParameterError(
                f"target must hold classes in [0, {self.group_scores.shape[2] - 1}]; got {target!r}.",
                argument="target",
            )
        s = self.group_scores[np.arange(n), :, t]  # (n, m)
        sizes = self.masks.reshape(n, s.shape[1], -1).sum(-1).clip(min=1)
        return np.einsum("nm,nm...->n...", s / sizes, self.masks.astype(np.float64))


class SumOfParts(ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """Sum-of-Parts: a self-attributing classifier built around the user's torch model.

    Parameters
    ----------
    backbone : torch.nn.Module
        Any classifier mapping a float batch ``(n, ...)`` to logits ``(n, C)`` whose last layer
        is (or whose ``head`` names) an ``nn.Linear``. It stays frozen (``fit`` puts it in eval
        mode; its weights are never updated).
    n_groups : int, default=20
        Groups per input (the paper's ``num_masks_sample``).
    n_candidates : int, default=200
        Query tokens the groups are drawn from (``num_masks_max``); ``n_groups`` evenly spaced
        ones are kept. Both are capped at the number of tokens.
    group_fraction : float in (0, 1], default=0.2
        Share of the tokens in each group (the paper's top 20%).
    grouping : {"learned", "features"}, default="learned"
        ``"features"``: one fixed group per token (a per-feature SANN; only the selector trains).
    patch_size : int, default=1
        Side of the square patches that are the tokens of ``(n, C, H, W)`` images (the
        authors use 16 on 224-pixel images); other inputs use one token per feature.
    sequence : bool, default=False
        Inputs ``(n, T, d)`` are ``T`` tokens of ``d`` values each (a text's token embeddings):
        groups are sets of tokens, and a masked token's embedding is zeroed.
    hidden_dim : int, default=32
        Width of the generator's token embedding.
    head : str, optional
        Name of the backbone's final ``nn.Linear`` (``dict(backbone.named_modules())`` key);
        ``None`` takes the last ``nn.Linear``.
    gen_scale, sel_scale : float, default=1.0
        Scales of the generator's and selector's attention logits (the authors' defaults).
    n_epochs : int, default=20
        Passes over the data (the authors' 20).
    learning_rate : float, default=1e-3
        Adam's learning rate (the authors fine-tune pretrained projections at 5e-6 with
        AdamW; the generator here is trained from scratch).
    batch_size : int, default=64
        Inputs per step.
    random_state : None, int or numpy Generator, default=0
        Seeds the initial weights and the batch order.

    Attributes
    ----------
    net_ : torch.nn.Module
        The trained generator and selector.
    classes_ : ndarray of int
    n_classes_ : int
    input_shape_ : tuple of int
    n_tokens_, group_size_, n_groups_ : int
    head_ : str
        Name of the head layer used.
    losses_ : ndarray
        Training loss per step.

    References
    ----------
    .. [1] You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with
       End-to-End Learning of Feature Groups". ICML 2025.

    Examples
    --------
    >>> import numpy as np, torch
    >>> torch.manual_seed(0) and None
    >>> net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> X = np.random.default_rng(0).normal(size=(40, 6)).astype("float32")
    >>> y = (X[:, 0] > 0).astype(int)
    >>> sop = SumOfParts(net, n_groups=4, n_epochs=2).fit(X, y)
    >>> e = sop.explain(X[:3])
    >>> e.masks.shape, bool(np.allclose(e.group_scores.sum(1), e.logits, atol=1e-5))
    ((3, 4, 6), True)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "backbone": "no_validation",
        "n_groups": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_candidates": [Interval(numbers.Integral, 1, None, closed="left")],
        "group_fraction": [Interval(numbers.Real, 0, 1, closed="right")],
        "grouping": [Options(set(GROUPINGS))],
        "patch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "sequence": ["boolean"],
        "hidden_dim": [Interval(numbers.Integral, 1, None, closed="left")],
        "head": [None, str],
        "gen_scale": [Interval(numbers.Real, 0, None, closed="neither")],
        "sel_scale": [Interval(numbers.Real, 0, None, closed="neither")],
        "n_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        backbone: Any,
        *,
        n_groups: int = 20,
        n_candidates: int = 200,
        group_fraction: float = 0.2,
        grouping: str = "learned",
        patch_size: int = 1,
        sequence: bool = False,
        hidden_dim: int = 32,
        head: str | None = None,
        gen_scale: float = 1.0,
        sel_scale: float = 1.0,
        n_epochs: int = 20,
        learning_rate: float = 1e-3,
        batch_size: int = 64,
        random_state: Any = 0,
    ) -> None:
        self.backbone = backbone
        self.n_groups = n_groups
        self.n_candidates = n_candidates
        self.group_fraction = group_fraction
        self.grouping = grouping
        self.patch_size = patch_size
        self.sequence = sequence
        self.hidden_dim = hidden_dim
        self.head = head
        self.gen_scale = gen_scale
        self.sel_scale = sel_scale
        self.n_epochs = n_epochs
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.random_state = random_state

    # ------------------------------------------------------------ layout
    def _is_image(self, shape: tuple[int, ...]) -> bool:
        return len(shape) == 3 and not self.sequence

    def _layout(self, shape: tuple[int, ...]) -> tuple[int, int]:
        p = int(self.patch_size)
        if self.sequence:
            if len(shape) != 2 or p != 1:
                raise ParameterError(
                    "sequence=True takes token embeddings of shape (n, T, d) and patch_size=1; got "
                    f"inputs of shape (n, *{shape}) and patch_size={p}.",
                    argument="sequence",
                )
            return shape[0], shape[1]
        if self._is_image(shape):
            ch, h, w = shape
            if h % p or w % p:
                raise ParameterError(
                    f"patch_size must divide the image sides {h} x {w}; got {p}. Pick a divisor.",
                    argument="patch_size",
                )
            return (h // p) * (w // p), ch * p * p
        if p != 1:
            raise ParameterError(
                f"patch_size applies to (n, C, H, W) images only; got inputs of shape (n, *{shape}). "
                "Leave patch_size=1.",
                argument="patch_size",
            )
        return int(np.prod(shape)), 1

    def _tokens(self, Xt: torch.Tensor) -> torch.Tensor:
        n, shape, p = Xt.shape[0], tuple(Xt.shape[1:]), int(self.patch_size)
        if self.sequence:
            return Xt
        if not self._is_image(shape):
            return Xt.reshape(n, -1, 1)
        ch, h, w = shape
        t = Xt.reshape(n, ch, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5)
        return t.reshape(n, (h // p) * (w // p), ch * p * p)

    def _expand(self, masks: torch.Tensor) -> torch.Tensor:
        n, m = masks.shape[:2]
        shape, p = self.input_shape_, int(self.patch_size)
        if self.sequence:
            return masks.unsqueeze(-1)  # (n, m, T, 1): broadcast over the embedding
        if not self._is_image(shape):
            return masks.reshape(n, m, *shape)
        _, h, w = shape
        grid = masks.reshape(n, m, h // p, w // p)
        grid = grid.repeat_interleave(p, dim=2).repeat_interleave(p, dim=3)
        return grid.unsqueeze(2)  # broadcast over channels

    # ------------------------------------------------------------ backbone
    def _run_backbone(self, X: torch.Tensor, grad: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        mod = dict(self.backbone.named_modules())[self.head_]
        logits, feats, store = [], [], []
        handle = mod.register_forward_hook(lambda _m, inp, _o: store.append(inp[0]))
        try:
            with torch.set_grad_enabled(grad):
                for s in range(0, len(X), _CHUNK):
                    logits.append(self.backbone(X[s : s + _CHUNK]))
                    feats.append(store.pop().reshape(len(logits[-1]), -1))
        finally:
            handle.remove()
        return torch.cat(logits), torch.cat(feats)

    def _forward(self, Xt: torch.Tensor, grad: bool = False) -> tuple[torch.Tensor, ...]:
        n = Xt.shape[0]
        masks, c = self.net_.generate(self._tokens(Xt))
        full = self._expand(masks)
        m = masks.shape[1]
        masked = (Xt.unsqueeze(1) * full).reshape(n * m, *self.input_shape_)
        logits_b, feats = self._run_backbone(masked, grad)
        group_logits = logits_b.reshape(n, m, -1) * c.unsqueeze(-1)
        w, out = self.net_.select(group_logits, feats.reshape(n, m, -1))
        return full, w, group_logits, out

    # ------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any) -> SumOfParts:
        """Train the group generator and selector on ``(X, y)``; the backbone stays frozen.

        Parameters
        ----------
        X : array-like of shape (n, ...)
            Inputs in the shape the backbone takes (finite numbers).
        y : array-like of shape (n,)
            Integer class labels in ``[0, C)``, ``C`` the backbone's number of logits.

        Returns
        -------
        SumOfParts
            ``self``, fitted.
        """
        self._validate_params()
        _check_model(self.backbone)
        X = _check_inputs(X)
        y = self._check_labels(y, len(X))
        self.input_shape_ = tuple(int(s) for s in X.shape[1:])
        self.n_tokens_, token_dim = self._layout(self.input_shape_)
        self.head_, mod = find_head(self.backbone, self.head)
        if mod is None:
            raise ModelError(
                "backbone must end in an nn.Linear (or name one with head=...); "
                f"found none{'' if self.head is None else f' named {self.head!r}'}.",
                argument="head" if self.head is not None else "backbone",
            )
        self.backbone.eval()
        Xt = torch.as_tensor(X)
        try:
            with torch.no_grad():
                width = int(self.backbone(Xt[:1]).shape[-1])
        except RuntimeError as exc:
            raise DataError(f"X does not fit the backbone's input ({exc}).", argument="X") from None
        if width != mod.out_features:
            raise ModelError(
                f"the head {self.head_!r} gives {mod.out_features} outputs but the backbone returns "
                f"{width} logits; pass head= naming the backbone's final Linear layer.",
                argument="head",
            )
        self._set_outputs(y, width)
        n_cand = min(int(self.n_candidates), self.n_tokens_)
        self.group_size_ = max(1, int(self.n_tokens_ * float(self.group_fraction)))
        self.n_groups_ = self.n_tokens_ if self.grouping == "features" else min(int(self.n_groups), n_cand)
        seed = int(make_generator(self.random_state).integers(2**62))
        gen = torch.Generator().manual_seed(seed)
        self.net_ = SOPNet(
            token_dim=token_dim,
            n_tokens=self.n_tokens_,
            n_candidates=n_cand,
            hidden_dim=int(self.hidden_dim),
            class_weights=mod.weight,
            grouping=self.grouping,
            n_groups=self.n_groups_,
            group_size=self.group_size_,
            gen_scale=float(self.gen_scale),
            sel_scale=float(self.sel_scale),
            gen=gen,
        )
        self.losses_ = self._train(Xt, torch.as_tensor(y), gen)
        return self

    def _set_outputs(self, y: np.ndarray, width: int) -> None:
        if y.max() >= width:
            raise DataError(f"y holds class {y.max()} but the backbone has {width} logits.", argument="y")
        self.classes_ = np.arange(width)
        self.n_classes_ = width

    def _loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(out, y)

    def _check_labels(self, y: Any, n: int) -> np.ndarray:
        arr = check_numeric_array(y, "y", ndim=1, min_rows=1)
        if len(arr) != n or np.any(arr != np.round(arr)) or arr.min() < 0:
            raise DataError(
                f"y must hold {n} integer class labels >= 0 (one per row of X); got shape {arr.shape}.",
                argument="y",
            )
        if np.unique(arr).size < 2:
            raise DataError("y has a single class; pass labels of at least two classes.", argument="y")
        return arr.astype(np.int64)

    def _train(self, Xt: torch.Tensor, yt: torch.Tensor, gen: torch.Generator) -> np.ndarray:
        params = list(self.net_.parameters())
        if self.grouping == "features":
            params = [self.net_.class_weights, self.net_.sel_q, self.net_.sel_k]
        opt = Adam(params, lr=float(self.learning_rate))
        losses = []
        bs = int(self.batch_size)
        for _ in range(int(self.n_epochs)):
            order = torch.randperm(len(Xt), generator=gen)
            for s in range(0, len(Xt), bs):
                idx = order[s : s + bs]
                out = self._forward(Xt[idx])[-1]
                loss = self._loss(out, yt[idx])
                grads = torch.autograd.grad(loss, params, allow_unused=True)
                zero = [torch.zeros_like(p) for p in params]
                opt.step([z if g is None else g for z, g in zip(zero, grads, strict=True)])
                losses.append(float(loss.detach()))
        return np.asarray(losses)

    # ------------------------------------------------------------ predict / explain
    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit(X, y) first.")

    def _checked(self, X: Any) -> torch.Tensor:
        self._check_fitted()
        arr = _check_inputs(X)
        if tuple(arr.shape[1:]) != self.input_shape_:
            raise DataError(
                f"X must have rows of shape {self.input_shape_} (as in fit); got {tuple(arr.shape[1:])}.",
                argument="X",
            )
        return torch.as_tensor(arr)

    def explain(self, X: Any) -> SOPExplanation:
        """Groups, selector weights and per-group scores of ``X`` (see :class:`SOPExplanation`).

        Parameters
        ----------
        X : array-like of shape (n, ...)

        Returns
        -------
        SOPExplanation
        """
        Xt = self._checked(X)
        parts: list[list[np.ndarray]] = [[], [], [], []]
        step = max(1, _CHUNK // self.n_groups_)
        with torch.no_grad():
            for s in range(0, len(Xt), step):
                full, w, gl, out = self._forward(Xt[s : s + step])
                shape = (len(full), self.n_groups_, *self.input_shape_)
                for lst, v in zip(parts, (full.expand(shape) > 0.5, w, gl, out), strict=True):
                    lst.append(v.numpy())
        masks_a, w_a, gl_a, out_a = (np.concatenate(p) for p in parts)
        return SOPExplanation(
            masks=masks_a,
            group_scores=(w_a * gl_a).astype(np.float64),
            weights=w_a.astype(np.float64),
            group_logits=gl_a.astype(np.float64),
            logits=out_a.astype(np.float64),
            predicted=out_a.argmax(1),
        )

    def to_module(self) -> torch.nn.Module:
        """SOP as a ``torch.nn.Module`` returning its logits, differentiable in the input.

        For torch attribution tools (e.g. :func:`~trustlab.explain.sop_faithfulness.gradient_x_input`)
        applied to SOP itself: gradients flow through the backbone on each group and through the
        generator's scales ``c``; the binary masks are piecewise constant.

        Returns
        -------
        torch.nn.Module
        """
        self._check_fitted()
        return _SOPModule(self)

    def decision_function(self, X: Any) -> np.ndarray:
        """SOP's logits, shape ``(n, n_classes)``.

        Parameters
        ----------
        X : array-like
            Inputs of the shape seen in fit.

        Returns
        -------
        numpy.ndarray of float64, shape (n, n_classes)
            ``sum_i`` of the selector-weighted group logits.
        """
        Xt = self._checked(X)
        step = max(1, _CHUNK // self.n_groups_)
        with torch.no_grad():
            out = [self._forward(Xt[s : s + step])[-1] for s in range(0, len(Xt), step)]
        return torch.cat(out).numpy().astype(np.float64)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Softmax of :meth:`decision_function`.

        Parameters
        ----------
        X : array-like
            Inputs of the shape seen in fit.

        Returns
        -------
        numpy.ndarray of shape (n, n_classes)
            Class probabilities.
        """
        z = self.decision_function(X)
        z = np.exp(z - z.max(1, keepdims=True))
        return z / z.sum(1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted classes.

        Parameters
        ----------
        X : array-like
            Inputs of the shape seen in fit.

        Returns
        -------
        numpy.ndarray of int, shape (n,)
            The argmax of :meth:`decision_function`.
        """
        return self.decision_function(X).argmax(1)


class _SOPModule(torch.nn.Module):
    def __init__(self, sop: SumOfParts) -> None:
        super().__init__()
        self.net = sop.net_
        self._sop = sop

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        return self._sop._forward(X, grad=True)[-1]
