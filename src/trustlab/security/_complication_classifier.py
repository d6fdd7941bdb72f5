"""The user's side of backdoor complications: any ``transformers`` model fine-tuned as a text classifier.

:class:`LMSequenceClassifier` is re-exported by :mod:`trustlab.security.backdoor_complications`.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab.errors import NotFittedError, ParameterError

__all__ = ["LMSequenceClassifier", "train_config"]

_NONNEG = [Interval(numbers.Integral, 0, None, closed="left")]


def train_config(train: Any, default: dict[str, Any]) -> Any:
    from trustlab.lm import TrainConfig

    return TrainConfig(**default) if train is None else train


class LMSequenceClassifier(ParamsValidationMixin):
    """Fine-tune a ``transformers`` model (causal LM or sequence classifier) as a text classifier.

    The user's side of the paper's pipeline: a fresh linear head on the pooled last hidden state
    of the model's ``base_model``, trained with AdamW on the cross-entropy. By default only the
    head is trained and the backbone is frozen, as in the authors' ``downstream_finetune.py``
    (every parameter but BERT's ``classifier``, GPT-2's ``score`` or BART's
    ``classification_head`` has ``requires_grad = False``); ``finetune="full"`` trains head and
    backbone together. The model passed in is not changed (a copy is used).

    Parameters
    ----------
    model : transformers model or str or Path
        A causal LM (GPT-2, Llama, ...) or a sequence classifier, or its local checkpoint folder.
    pooling : {"last", "first", "mean", "final"}, default="last"
        Hidden state read by the head: the last real token (decoders, as GPT-2's classifier
        does), the first (encoders' ``[CLS]``, as BERT's), the mean over real tokens, or the
        final position even when it is padding (``"final"``: what the authors' GPT-2 runs read,
        where ``pad_token_id`` is set to the end-of-text id while texts are right-padded to
        ``max_seq_length`` with an added ``[PAD]``; pad the texts, the pads stay masked as keys).
    pad_id : int, optional
        Padding token (right padding): masked out of attention and pooling.
    finetune : {"head", "full"}, default="head"
        ``"head"``: the backbone is frozen and only the new head learns (the paper's downstream
        protocol); ``"full"``: full fine-tuning of head and backbone.
    train : trustlab.lm.TrainConfig, optional
        Steps, batch size, learning rate; default ``TrainConfig(steps=150, batch_size=32, lr=1e-3)``.
    random_state : int, default=0
        Seeds the head's initialisation.

    Attributes
    ----------
    model_ : transformers model
        The copy the head reads (fine-tuned with ``finetune="full"``, else as given).
    classes_ : ndarray
        The labels seen in ``fit``.
    losses_ : ndarray of float, shape (steps,)
        Loss of each step.

    References
    ----------
    Zhang et al. "The Ripple Effect: On Unforeseen Complications of Backdoor Attacks". ICML 2025.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, TrainConfig, build_model
    >>> lm = build_model(ModelConfig("gpt2", vocab_size=8, d_model=16, n_layers=1, n_heads=2))
    >>> X = np.array([[1, 2, 3], [1, 4, 5]] * 8); y = np.array([0, 1] * 8)
    >>> cfg = TrainConfig(steps=30, batch_size=8, lr=0.01)
    >>> clf = LMSequenceClassifier(lm, finetune="full", train=cfg).fit(X, y)
    >>> clf.predict(X[:2]).tolist()
    [0, 1]
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "pooling": [Options({"last", "first", "mean", "final"})],
        "pad_id": [Interval(numbers.Integral, 0, None, closed="left"), None],
        "finetune": [Options({"head", "full"})],
        "random_state": _NONNEG,
    }
    _DEFAULT: ClassVar[dict[str, Any]] = {"steps": 150, "batch_size": 32, "lr": 1e-3}

    def __init__(
        self,
        model: Any,
        *,
        pooling: str = "last",
        pad_id: int | None = None,
        finetune: str = "head",
        train: Any = None,
        random_state: int = 0,
    ) -> None:
        self.model = model
        self.pooling = pooling
        self.pad_id = pad_id
        self.finetune = finetune
        self.train = train
        self.random_state = random_state

    def _check_train(self) -> Any:
        from trustlab.lm import TrainConfig

        if self.train is not None and not isinstance(self.train, TrainConfig):
            raise ParameterError(
                f"train must be a trustlab.lm.TrainConfig or None, got {type(self.train).__name__}.",
                argument="train",
            )
        return train_config(self.train, self._DEFAULT)

    def fit(self, X: Any, y: Any) -> LMSequenceClassifier:
        """Fine-tune a copy of the model with a fresh head on token ids ``X`` and labels ``y``.

        Parameters
        ----------
        X : array-like of int, shape (n, length)
            Token ids (same length; right-pad with ``pad_id``).
        y : array-like of int, shape (n,)
            Class labels.

        Returns
        -------
        LMSequenceClassifier
            ``self``.
        """
        self._validate_params()
        config = self._check_train()
        from trustlab.security._complication_torch import (
            MultiHead,
            Task,
            check_labels,
            check_tokens,
            fresh_copy,
            resolve_model,
            train_heads,
        )

        model = fresh_copy(resolve_model(self.model))
        if self.finetune == "head":  # the authors' downstream step: the PTLM stays as released
            for p in model.parameters():
                p.requires_grad_(False)
        Xa = check_tokens(X, "X", model)
        ya = check_labels(y, "y", len(Xa))
        self.classes_, codes = np.unique(ya, return_inverse=True)
        net = MultiHead(
            model, [len(self.classes_)], pooling=self.pooling, pad_id=self.pad_id, seed=self.random_state
        )
        self.losses_ = train_heads(net, [Task(Xa, codes, 1.0, 0)], config)
        self._set_net(net)
        return self

    def _set_net(self, net: Any) -> None:
        self.net_ = net
        self.model_ = net.lm

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of token ids ``X``.

        Parameters
        ----------
        X : array-like of int, shape (n, length)
            Token ids.

        Returns
        -------
        ndarray of float, shape (n, n_classes)
            Softmax of the head's logits.
        """
        if not hasattr(self, "net_"):
            raise NotFittedError("LMSequenceClassifier is not fitted; call fit(X, y) first.", argument="self")
        from trustlab.security._complication_torch import check_tokens, predict_logits

        logits = predict_logits(self.net_, check_tokens(X, "X", self.model_))
        e = np.exp(logits - logits.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class of token ids ``X``.

        Parameters
        ----------
        X : array-like of int, shape (n, length)
            Token ids.

        Returns
        -------
        ndarray, shape (n,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)
        return np.asarray(self.classes_)[proba.argmax(1)]
