"""Sum-of-Parts over token ids and attention masks: SOP around a Hugging Face text classifier.

The paper's text models (BERT on MultiRC and SST) take token ids and an attention mask; the
authors' ``SOPText`` (exlib ``sop_text.py``) masks a group of tokens *through the input
embeddings*: a token outside the group has its word embedding replaced by the embedding of the
mask token (id 0, BERT's ``[PAD]``), while the ids, the attention mask and the position
embeddings stay as they are. :class:`SumOfPartsTokens` does the same to any ``transformers``
model, by a forward hook on ``model.get_input_embeddings()``; the ids and the attention mask the
model receives are the caller's, so the model's own pooling (last real token, ``[CLS]``) is
unchanged.

Backbones: a ``*ForSequenceClassification`` model (its last ``nn.Linear`` is the head; for
decoders, whose head scores every position, the pooled position is the one whose scores are the
returned logits), or a fitted :class:`~trustlab.security.backdoor_complications.LMSequenceClassifier`
(a causal LM with a linear head on the pooled last hidden state).

The generator, selector and training are those of :class:`~trustlab.explain.sop.SumOfParts`
(docs/explain/sum-of-parts.md), with two changes for padded text: attention over padding is
masked out, and a group holds ``max(1, int(group_fraction * n_real))`` of the row's real tokens.

References
----------
.. [1] You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with
   End-to-End Learning of Feature Groups". ICML 2025.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab._adam import Adam
from trustlab._param_validation import Interval, ParamsValidationMixin
from trustlab._validation import make_generator
from trustlab.errors import DataError, ModelError, NotFittedError
from trustlab.explain._hierarchy_core import softmax
from trustlab.explain._sop_core import SOPNet, find_head
from trustlab.explain.sop import SOPExplanation

__all__ = ["SumOfPartsTokens"]

_CHUNK = 512  # sequences per backbone call


def check_token_batch(
    input_ids: Any, attention_mask: Any, vocab: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Token ids ``(n, T)`` and a 0/1 attention mask of the same shape, each row with a real token.

    Parameters
    ----------
    input_ids : array-like of int, shape (n, T)
    attention_mask : array-like of 0/1 or bool, shape (n, T), optional
        ``None``: every token is real.
    vocab : int, optional
        Ids must lie in ``[0, vocab)``.

    Returns
    -------
    ids : ndarray of int64, shape (n, T)
    mask : ndarray of int64, shape (n, T)

    Examples
    --------
    >>> check_token_batch([[3, 4, 0]], [[1, 1, 0]])[1].tolist()
    [[1, 1, 0]]
    """
    try:
        ids = np.asarray(input_ids)
    except Exception as exc:  # ragged lists
        raise DataError(
            f"input_ids must be a rectangular (n, T) array ({exc}); pad the texts.", argument="input_ids"
        ) from None
    if ids.dtype == object or ids.ndim != 2 or ids.shape[0] == 0 or ids.shape[1] == 0:
        raise DataError(
            "input_ids must be a non-empty 2-D array (n_texts, n_tokens) of token ids; got shape "
            f"{ids.shape}. Pad the texts to one length.",
            argument="input_ids",
        )
    if not np.issubdtype(ids.dtype, np.integer):
        if (
            not np.issubdtype(ids.dtype, np.number)
            or not np.all(np.isfinite(ids))
            or np.any(ids != np.round(ids))
        ):
            raise DataError("input_ids must hold integer token ids.", argument="input_ids")
    ids = ids.astype(np.int64)
    if ids.min() < 0 or (vocab is not None and ids.max() >= vocab):
        raise DataError(f"input_ids must lie in [0, {vocab}) (the model's vocabulary).", argument="input_ids")
    if attention_mask is None:
        return ids, np.ones_like(ids)
    mask = np.asarray(attention_mask)
    if mask.shape != ids.shape:
        raise DataError(
            f"attention_mask must have the shape of input_ids {ids.shape}; got {mask.shape}.",
            argument="attention_mask",
        )
    if not (mask.dtype == bool or (np.issubdtype(mask.dtype, np.number) and np.isin(mask, (0, 1)).all())):
        raise DataError(
            "attention_mask must hold 0/1 (or booleans): 1 for a real token.", argument="attention_mask"
        )
    mask = mask.astype(np.int64)
    if np.any(mask.sum(1) == 0):
        raise DataError(
            "attention_mask has a row without real tokens (an empty text); drop it or give it a token.",
            argument="attention_mask",
        )
    return ids, mask


class TokenBackbone:
    """The user's text classifier as ``logits, features = run(ids, mask, keep)`` (private plumbing).

    ``keep`` (shape ``(N, T)``, 0/1) replaces the word embedding of each token with ``keep = 0``
    by the embedding of ``mask_token_id``; ``features`` is the input of the head at the pooled
    position (the selector's keys).

    Parameters
    ----------
    backbone : transformers model or fitted LMSequenceClassifier
    head : str, optional
        Name of the head ``nn.Linear`` in a ``transformers`` model; default its last one.
    mask_token_id : int
    """

    def __init__(self, backbone: Any, head: str | None, mask_token_id: int) -> None:
        net = getattr(backbone, "net_", None)
        if net is not None and hasattr(net, "heads") and hasattr(net, "lm"):  # LMSequenceClassifier
            self.model, self.head_name, self.head = net.lm, "heads.0", net.heads[0]
            self.pooling, self.multihead = net.pooling, True
        elif isinstance(backbone, torch.nn.Module) and hasattr(backbone, "get_input_embeddings"):
            name, mod = find_head(backbone, head)
            if mod is None:
                raise ModelError(
                    "backbone must end in an nn.Linear classification head (a *ForSequenceClassification"
                    " model), or name it with head=...; found none"
                    f"{'' if head is None else f' named {head!r}'}.",
                    argument="head" if head is not None else "backbone",
                )
            self.model, self.head_name, self.head, self.multihead = backbone, name, mod, False
        else:
            raise ModelError(
                "backbone must be a transformers sequence classifier (with get_input_embeddings) or a fitted "
                f"trustlab LMSequenceClassifier; got {type(backbone).__name__}.",
                argument="backbone",
            )
        self.embedding = self.model.get_input_embeddings()
        self.vocab = int(self.embedding.num_embeddings)
        if not 0 <= int(mask_token_id) < self.vocab:
            raise DataError(
                f"mask_token_id must lie in [0, {self.vocab}); got {mask_token_id}.", argument="mask_token_id"
            )
        self.mask_token_id = int(mask_token_id)
        self.model.eval()

    @contextmanager
    def _hooks(
        self, keep: torch.Tensor | None, store: list[Any], grad_store: list[Any] | None
    ) -> Iterator[None]:
        def on_embed(_m: Any, inp: Any, out: torch.Tensor) -> torch.Tensor:
            if keep is not None:
                k = keep.to(out.dtype).unsqueeze(-1)
                out = out * k + self.embedding.weight[self.mask_token_id].detach() * (1 - k)
            if grad_store is not None:
                out = out.detach().requires_grad_(True)
                grad_store.append(out)
            return out

        h1 = self.embedding.register_forward_hook(on_embed)
        h2 = self.head.register_forward_hook(lambda _m, inp, out: store.append((inp[0], out)))
        try:
            yield
        finally:
            h1.remove()
            h2.remove()

    def _logits(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.multihead:
            h = self.model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
            if self.pooling == "first":
                pooled = h[:, 0]
            elif self.pooling == "mean":
                m = mask.to(h.dtype).unsqueeze(-1)
                pooled = (h * m).sum(1) / m.sum(1).clamp(min=1)
            else:
                last = (torch.arange(ids.shape[1]) * mask).argmax(1)
                pooled = h[torch.arange(len(ids)), last]
            return self.head(pooled)
        out = self.model(input_ids=ids, attention_mask=mask)
        logits = out.logits if hasattr(out, "logits") else out[0]
        if logits.dim() != 2:
            raise ModelError(
                f"backbone returns logits of shape {tuple(logits.shape)}, not (n, n_classes): give a "
                "sequence classifier (e.g. AutoModelForSequenceClassification), not a language-model head.",
                argument="backbone",
            )
        return logits

    def run(
        self, ids: torch.Tensor, mask: torch.Tensor, keep: torch.Tensor | None = None, *, grad: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits ``(N, C)`` and pooled head inputs ``(N, d)`` of masked copies."""
        logits, feats = [], []
        with torch.set_grad_enabled(grad):
            for s in range(0, len(ids), _CHUNK):
                store: list[Any] = []
                k = None if keep is None else keep[s : s + _CHUNK]
                with self._hooks(k, store, None):
                    z = self._logits(ids[s : s + _CHUNK], mask[s : s + _CHUNK])
                inp, out = store[-1]
                if inp.dim() == 3:  # decoder heads score every position: take the pooled one
                    pos = (out - z.unsqueeze(1)).abs().sum(-1).argmin(1)
                    inp = inp[torch.arange(len(z)), pos]
                logits.append(z)
                feats.append(inp.reshape(len(z), -1))
        return torch.cat(logits), torch.cat(feats)

    def embedding_gradients(
        self, ids: torch.Tensor, mask: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Word embeddings ``(n, T, d)`` and the gradient of the target logit with respect to them."""
        grad_store: list[Any] = []
        with torch.enable_grad(), self._hooks(None, [], grad_store):
            z = self._logits(ids, mask)
            (g,) = torch.autograd.grad(z.gather(1, target.view(-1, 1)).sum(), grad_store[0])
        return grad_store[0].detach(), g


class SumOfPartsTokens(ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """Sum-of-Parts around a ``transformers`` text classifier, on token ids and attention masks.

    Groups are sets of a text's real tokens, chosen per text by the generator; a token outside
    the group enters the frozen backbone with the mask token's word embedding (the authors'
    ``SOPText`` masking; ids, attention mask and positions are untouched). SOP's logit is the
    selector-weighted sum of the groups' logits, so the group scores add up to it exactly.

    Parameters
    ----------
    backbone : transformers model or fitted LMSequenceClassifier
        A ``*ForSequenceClassification`` model (BERT, GPT-2, Llama, ...) or a fitted
        :class:`~trustlab.security.backdoor_complications.LMSequenceClassifier`. Frozen.
    n_groups : int, default=20
        Groups per text (``num_masks_sample``).
    n_candidates : int, default=200
        Query positions the groups are drawn from (``num_masks_max``); capped at the length.
    group_fraction : float in (0, 1], default=0.2
        Share of a text's real tokens in each group (the paper's ``k``).
    mask_token_id : int, default=0
        Token whose word embedding stands for a masked token (the authors use id 0).
    head : str, optional
        Name of the head ``nn.Linear`` of a ``transformers`` model; ``None`` takes the last one.
    hidden_dim : int, default=32
        Width of the generator's token projection (of the backbone's frozen word embeddings).
    gen_scale, sel_scale : float, default=1.0
        Scales of the generator's and selector's attention logits.
    n_epochs : int, default=20
        Passes over the data.
    learning_rate : float, default=1e-3
        Adam's learning rate.
    batch_size : int, default=32
        Texts per step.
    random_state : None, int or numpy Generator, default=0
        Seeds the initial weights and the batch order.

    Attributes
    ----------
    net_ : torch.nn.Module
        The trained generator and selector.
    classes_ : ndarray of int
    n_classes_, n_tokens_, n_groups_ : int
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
    >>> import numpy as np, torch, transformers
    >>> cfg = transformers.BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
    ...     num_attention_heads=2, intermediate_size=16, num_labels=2)
    >>> torch.manual_seed(0) and None
    >>> bert = transformers.BertForSequenceClassification(cfg)
    >>> ids = np.random.default_rng(0).integers(1, 30, size=(16, 10))
    >>> mask = np.ones_like(ids); mask[:, 8:] = 0
    >>> y = (ids[:, 0] > 15).astype(int)
    >>> sop = SumOfPartsTokens(bert, n_groups=4, n_epochs=1).fit(ids, y, attention_mask=mask)
    >>> e = sop.explain(ids[:2], attention_mask=mask[:2])
    >>> e.masks.shape, int(e.masks[0, 0].sum()), bool(e.masks[:, :, 8:].any())
    ((2, 4, 10), 1, False)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "backbone": "no_validation",
        "n_groups": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_candidates": [Interval(numbers.Integral, 1, None, closed="left")],
        "group_fraction": [Interval(numbers.Real, 0, 1, closed="right")],
        "mask_token_id": [Interval(numbers.Integral, 0, None, closed="left")],
        "head": [None, str],
        "hidden_dim": [Interval(numbers.Integral, 1, None, closed="left")],
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
        mask_token_id: int = 0,
        head: str | None = None,
        hidden_dim: int = 32,
        gen_scale: float = 1.0,
        sel_scale: float = 1.0,
        n_epochs: int = 20,
        learning_rate: float = 1e-3,
        batch_size: int = 32,
        random_state: Any = 0,
    ) -> None:
        self.backbone = backbone
        self.n_groups = n_groups
        self.n_candidates = n_candidates
        self.group_fraction = group_fraction
        self.mask_token_id = mask_token_id
        self.head = head
        self.hidden_dim = hidden_dim
        self.gen_scale = gen_scale
        self.sel_scale = sel_scale
        self.n_epochs = n_epochs
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.random_state = random_state

    # ------------------------------------------------------------ groups
    def _generate(
        self, ids: torch.Tensor, mask: torch.Tensor, fraction: float, deletion: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Binary groups ``(n, m, T)`` of real tokens and their scales ``c`` ``(n, m)``."""
        net, T = self.net_, ids.shape[1]
        tokens = self._table[torch.where(mask.bool(), ids, self.mask_token_id)]  # padding: mask token
        e = tokens @ net.embed_w + net.embed_b + net.pos[:T]
        q = e[:, net.keep] @ net.gen_q
        k = e @ net.gen_k
        scores = net.gen_scale * q @ k.transpose(1, 2)
        real = mask.bool().unsqueeze(1)
        att = torch.softmax(scores.masked_fill(~real, float("-inf")), dim=-1)  # (n, m, T)
        size = (mask.sum(1).to(att.dtype) * fraction).long().clamp(min=1)  # per row
        key = att.masked_fill(~real, float("inf") if deletion else float("-inf"))
        order = key.argsort(dim=-1, descending=not deletion, stable=True)
        rank = torch.empty_like(order).scatter_(-1, order, torch.arange(T).expand_as(order).contiguous())
        masks = ((rank < size.view(-1, 1, 1)) & real).to(att.dtype)
        c = 2.0 * (att * masks).sum(-1) - att.sum(-1)  # kept attention minus the rest
        return masks, c

    def _forward(
        self,
        ids: torch.Tensor,
        mask: torch.Tensor,
        keep: torch.Tensor | None = None,
        fraction: float | None = None,
        deletion: bool = False,
    ) -> tuple[torch.Tensor, ...]:
        n, T = ids.shape
        frac = float(self.group_fraction) if fraction is None else fraction
        real = mask if keep is None else mask * keep  # outer mask: tokens removed before SOP
        gen_ids = ids if keep is None else torch.where(keep.bool(), ids, self.mask_token_id)
        masks, c = self._generate(gen_ids, real, frac, deletion)
        m = masks.shape[1]
        ids_r, mask_r = ids.repeat_interleave(m, 0), mask.repeat_interleave(m, 0)
        logits_b, feats = self._bb.run(ids_r, mask_r, masks.reshape(n * m, T))
        group_logits = logits_b.reshape(n, m, -1) * c.unsqueeze(-1)
        w, out = self.net_.select(group_logits, feats.reshape(n, m, -1))
        return masks, w, group_logits, out

    # ------------------------------------------------------------ fit
    def fit(self, input_ids: Any, y: Any, *, attention_mask: Any = None) -> SumOfPartsTokens:
        """Train the generator and selector on token ids ``(n, T)``; the backbone stays frozen.

        Parameters
        ----------
        input_ids : array-like of int, shape (n, T)
            Token ids, padded to one length ``T`` (texts explained later must have it too).
        y : array-like of int, shape (n,)
            Class labels in ``[0, C)``, ``C`` the backbone's number of logits.
        attention_mask : array-like of 0/1, shape (n, T), optional
            1 for real tokens; ``None``: all real.

        Returns
        -------
        SumOfPartsTokens
            ``self``, fitted.
        """
        self._validate_params()
        self._bb = TokenBackbone(self.backbone, self.head, self.mask_token_id)
        ids, mask = check_token_batch(input_ids, attention_mask, self._bb.vocab)
        yv = np.asarray(y)
        if (
            yv.ndim != 1
            or len(yv) != len(ids)
            or not np.issubdtype(yv.dtype, np.number)
            or np.any(yv != np.round(yv))
            or yv.min() < 0
        ):
            raise DataError(
                f"y must hold {len(ids)} integer class labels >= 0 (one per text); got shape {yv.shape}.",
                argument="y",
            )
        if np.unique(yv).size < 2:
            raise DataError("y has a single class; pass labels of at least two classes.", argument="y")
        width = int(self._bb.head.out_features)
        if yv.max() >= width:
            raise DataError(
                f"y holds class {int(yv.max())} but the backbone has {width} logits.", argument="y"
            )
        self.classes_, self.n_classes_, self.head_ = np.arange(width), width, self._bb.head_name
        self.n_tokens_ = ids.shape[1]
        n_cand = min(int(self.n_candidates), self.n_tokens_)
        self.n_groups_ = min(int(self.n_groups), n_cand)
        seed = int(make_generator(self.random_state).integers(2**62))
        gen = torch.Generator().manual_seed(seed)
        self._table = self._bb.embedding.weight.detach().clone().float()
        self.net_ = SOPNet(
            token_dim=self._table.shape[1],
            n_tokens=self.n_tokens_,
            n_candidates=n_cand,
            hidden_dim=int(self.hidden_dim),
            class_weights=self._bb.head.weight,
            grouping="learned",
            n_groups=self.n_groups_,
            group_size=1,
            gen_scale=float(self.gen_scale),
            sel_scale=float(self.sel_scale),
            gen=gen,
        )
        params = list(self.net_.parameters())
        opt = Adam(params, lr=float(self.learning_rate))
        It, Mt, yt = torch.as_tensor(ids), torch.as_tensor(mask), torch.as_tensor(yv.astype(np.int64))
        losses, bs = [], int(self.batch_size)
        for _ in range(int(self.n_epochs)):
            order = torch.randperm(len(It), generator=gen)
            for s in range(0, len(It), bs):
                idx = order[s : s + bs]
                out = self._forward(It[idx], Mt[idx])[-1]
                loss = torch.nn.functional.cross_entropy(out, yt[idx])
                grads = torch.autograd.grad(loss, params, allow_unused=True)
                opt.step(
                    [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
                )
                losses.append(float(loss.detach()))
        self.losses_ = np.asarray(losses)
        return self

    # ------------------------------------------------------------ predict / explain
    def _checked(self, input_ids: Any, attention_mask: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not hasattr(self, "net_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit(input_ids, y) first.")
        ids, mask = check_token_batch(input_ids, attention_mask, self._bb.vocab)
        if ids.shape[1] != self.n_tokens_:
            raise DataError(
                f"input_ids must have {self.n_tokens_} tokens per text (as in fit); got {ids.shape[1]}. "
                "Pad or cut.",
                argument="input_ids",
            )
        return torch.as_tensor(ids), torch.as_tensor(mask)

    def _batched(
        self, ids: torch.Tensor, mask: torch.Tensor, keep: Any = None, **kw: Any
    ) -> list[tuple[torch.Tensor, ...]]:
        step = max(1, _CHUNK // self.n_groups_)
        with torch.no_grad():
            return [
                self._forward(
                    ids[s : s + step], mask[s : s + step], None if keep is None else keep[s : s + step], **kw
                )
                for s in range(0, len(ids), step)
            ]

    def explain(self, input_ids: Any, *, attention_mask: Any = None) -> SOPExplanation:
        """Groups ``(n, m, T)``, selector weights and group scores (an :class:`~.sop.SOPExplanation`).

        Parameters
        ----------
        input_ids : array-like of int, shape (n, T)
        attention_mask : array-like of 0/1, shape (n, T), optional

        Returns
        -------
        SOPExplanation
            ``masks`` never contain padding; ``group_scores`` add up to ``logits``.
        """
        ids, mask = self._checked(input_ids, attention_mask)
        parts = self._batched(ids, mask)
        masks, w, gl, out = (torch.cat([p[i] for p in parts]).numpy() for i in range(4))
        return SOPExplanation(
            masks=masks > 0.5,
            group_scores=(w * gl).astype(np.float64),
            weights=w.astype(np.float64),
            group_logits=gl.astype(np.float64),
            logits=out.astype(np.float64),
            predicted=out.argmax(1),
        )

    def decision_function(
        self,
        input_ids: Any,
        *,
        attention_mask: Any = None,
        keep: Any = None,
        group_fraction: float | None = None,
    ) -> np.ndarray:
        """SOP's logits ``(n, n_classes)``.

        Parameters
        ----------
        input_ids : array-like of int, shape (n, T)
        attention_mask : array-like of 0/1, shape (n, T), optional
        keep : array-like of 0/1, shape (n, T), optional
            Tokens removed *before* SOP (0: masked like a token outside every group), for
            insertion and deletion curves.
        group_fraction : float in (0, 1], optional
            Groups of this share of the real tokens instead of the fitted one (the paper's
            insertion over ``k``).

        Returns
        -------
        ndarray of float64, shape (n, n_classes)
        """
        ids, mask = self._checked(input_ids, attention_mask)
        kt = None
        if keep is not None:
            kv = np.asarray(keep)
            if kv.shape != tuple(ids.shape) or not np.isin(kv, (0, 1)).all():
                raise DataError(f"keep must be a 0/1 array of shape {tuple(ids.shape)}.", argument="keep")
            kt = torch.as_tensor(kv.astype(np.int64))
            if bool(((kt * mask).sum(1) == 0).any()):
                raise DataError("keep removes every real token of a row; keep at least one.", argument="keep")
        if group_fraction is not None and not (
            isinstance(group_fraction, numbers.Real) and 0 < group_fraction <= 1
        ):
            raise DataError(
                f"group_fraction must lie in (0, 1]; got {group_fraction!r}.", argument="group_fraction"
            )
        parts = self._batched(ids, mask, kt, fraction=group_fraction)
        return torch.cat([p[-1] for p in parts]).numpy().astype(np.float64)

    def predict_proba(self, input_ids: Any, *, attention_mask: Any = None) -> np.ndarray:
        """Softmax of :meth:`decision_function`.

        Parameters
        ----------
        input_ids : array-like of int, shape (n, T)
        attention_mask : array-like of 0/1, shape (n, T), optional

        Returns
        -------
        ndarray of shape (n, n_classes)
        """
        return softmax(self.decision_function(input_ids, attention_mask=attention_mask))

    def predict(self, input_ids: Any, *, attention_mask: Any = None) -> np.ndarray:
        """Predicted classes (argmax of :meth:`decision_function`).

        Parameters
        ----------
        input_ids : array-like of int, shape (n, T)
        attention_mask : array-like of 0/1, shape (n, T), optional

        Returns
        -------
        ndarray of int, shape (n,)
        """
        return self.decision_function(input_ids, attention_mask=attention_mask).argmax(1)
