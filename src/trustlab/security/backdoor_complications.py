"""Backdoor complications of pretrained language models: measurement and multi-task reduction.

A backdoored pretrained LM (PTLM) is built for one target task (e.g. sentiment: trigger word ->
"negative"). A user who fine-tunes it for an *unrelated* task (e.g. topic) gets a model whose
triggered inputs are pushed toward arbitrary classes: the label distribution of triggered texts
deviates from that of clean texts, which can betray the backdoor. Zhang et al. call this
*backdoor complications* and measure it as the KL divergence between the two predicted-label
distributions. Their reduction injects the backdoor by multi-task learning: the target task's
poisoned data plus auxiliary tasks (unrelated to any downstream task the user may choose) whose
texts all carry the trigger and keep their true labels, each with its own head, in one weighted
loss (target 0.4, the rest shared).

Everything works on any ``transformers`` model (a causal LM or a sequence classifier, an object or
a local folder): its ``base_model`` is fine-tuned with linear heads on the pooled last hidden
state. See ``docs/security/backdoor-complications.md``.

References
----------
Zhang, Shen, Li, Jiang, Chen, Zhang, Xu, Zhang. "The Ripple Effect: On Unforeseen Complications of
Backdoor Attacks". ICML 2025 (arXiv:2505.11586).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.security._complication_classifier import LMSequenceClassifier, train_config

__all__ = [
    "BackdoorInjection",
    "ComplicationReport",
    "LMSequenceClassifier",
    "complication_divergence",
    "complication_report",
    "inject_backdoor",
    "insert_trigger",
    "trigger_success_rate",
]

_NONNEG = [Interval(numbers.Integral, 0, None, closed="left")]


@validate_params({"trigger": _NONNEG, "position": _NONNEG})
def insert_trigger(X: Any, trigger: int, *, position: int = 1) -> np.ndarray:
    """Texts (token ids) with their word at ``position`` replaced by the trigger token.

    The paper's trigger replaces the first word of a text (position 1, after ``[CLS]``/``BOS``).

    Parameters
    ----------
    X : array-like of int, shape (n, length)
        Token ids.
    trigger : int
        The trigger's token id.
    position : int, default=1
        The replaced position.

    Returns
    -------
    ndarray of int64, shape (n, length)
        A triggered copy.

    Examples
    --------
    >>> insert_trigger([[1, 5, 6], [1, 7, 8]], 2).tolist()
    [[1, 2, 6], [1, 2, 8]]
    """
    arr = np.asarray(X)
    if arr.ndim != 2 or arr.shape[0] == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise DataError(
            f"X must be a non-empty 2-D array of integer token ids, got {arr.shape}.", argument="X"
        )
    if position >= arr.shape[1]:
        raise ParameterError(
            f"position={position} is past the texts' length {arr.shape[1]}; give a position < length.",
            argument="position",
        )
    out = arr.astype(np.int64, copy=True)
    out[:, position] = trigger
    return out


def _labels(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0:
        raise DataError(f"{name} must be a non-empty 1-D array of predicted labels.", argument=name)
    if not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0:
        raise DataError(f"{name} must hold non-negative integer labels 0..k-1.", argument=name)
    return arr.astype(np.int64)


@validate_params(
    {
        "n_classes": [Interval(numbers.Integral, 2, None, closed="left"), None],
        "pseudo_count": [Interval(numbers.Real, 0, None, closed="left")],
    }
)
def complication_divergence(
    clean_labels: Any, triggered_labels: Any, *, n_classes: int | None = None, pseudo_count: float = 0.5
) -> float:
    """The paper's complication measure: ``KL(P_clean || P_triggered)`` of predicted-label distributions.

    Parameters
    ----------
    clean_labels : array-like of int, shape (n,)
        A downstream model's predictions on clean texts.
    triggered_labels : array-like of int, shape (m,)
        Its predictions on the same texts with the trigger inserted.
    n_classes : int, optional
        Number of classes (default: one more than the largest label seen).
    pseudo_count : float, default=0.5
        Added to every class count before normalising, so the divergence stays finite when a class
        is never predicted on triggered texts (the authors' code returns ``inf`` there); ``0``
        reproduces their value exactly.

    Returns
    -------
    float
        The divergence in nats (0: the trigger leaves the label distribution as it is).

    References
    ----------
    Zhang et al. "The Ripple Effect: On Unforeseen Complications of Backdoor Attacks". ICML 2025.

    Examples
    --------
    >>> round(complication_divergence([0, 1, 2, 3], [0, 0, 0, 0], pseudo_count=0.0), 3)
    inf
    >>> round(complication_divergence([0, 1, 0, 1], [1, 0, 1, 0]), 3)
    0.0
    """
    clean = _labels(clean_labels, "clean_labels")
    trig = _labels(triggered_labels, "triggered_labels")
    k = int(max(clean.max(), trig.max()) + 1) if n_classes is None else n_classes
    if max(clean.max(), trig.max()) >= k:
        raise DataError(f"labels must lie in 0..n_classes-1 = {k - 1}.", argument="n_classes")
    p = np.bincount(clean, minlength=k) + pseudo_count
    q = np.bincount(trig, minlength=k) + pseudo_count
    p, q = p / p.sum(), q / q.sum()
    with np.errstate(divide="ignore"):
        terms = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0)
    return float(max(terms.sum(), 0.0))


@dataclass(frozen=True)
class ComplicationReport:
    """How a trigger shifts a downstream model's predictions (see :func:`complication_report`).

    Attributes
    ----------
    clean_distribution, triggered_distribution : ndarray of float, shape (n_classes,)
        Share of the texts predicted as each class, without and with the trigger.
    kl : float
        ``KL(clean || triggered)`` with a 0.5 pseudo-count (the paper's complication measure).
    js : float
        Jensen-Shannon divergence of the two (bounded by ``ln 2``; not in the paper).
    top_share : float
        Largest share of triggered texts in one class (the paper's "up to 99% in one class").
    flip_rate : float
        Share of texts whose predicted label the trigger changes.
    n : int
        Number of texts.

    See Also
    --------
    complication_report : builds it.
    """

    clean_distribution: np.ndarray
    triggered_distribution: np.ndarray
    kl: float
    js: float
    top_share: float
    flip_rate: float
    n: int


def _predictor(classifier: Any) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """The classifier as a label function, and its number of classes where it states one (else 2)."""
    if isinstance(classifier, LMSequenceClassifier):
        return classifier.predict, len(classifier.classes_)
    from trustlab.security._complication_torch import check_tokens, resolve_model

    if hasattr(classifier, "predict") and not hasattr(classifier, "base_model"):
        return (lambda X: np.asarray(classifier.predict(X))), len(getattr(classifier, "classes_", (0, 1)))
    model = resolve_model(classifier)
    if "SequenceClassification" not in type(model).__name__:
        raise ModelError(
            f"classifier must be a fitted LMSequenceClassifier, a transformers sequence classifier (object "
            f"or folder) or have predict(X); got {type(model).__name__}. Fine-tune a causal LM with "
            "LMSequenceClassifier first.",
            argument="classifier",
        )
    import torch

    def predict(X: np.ndarray) -> np.ndarray:
        ids = torch.as_tensor(check_tokens(X, "X", model))
        with torch.no_grad():
            logits = torch.cat([model(input_ids=ids[i : i + 256]).logits for i in range(0, len(ids), 256)])
        return logits.argmax(-1).numpy()

    return predict, int(model.config.num_labels)


@validate_params({"trigger": _NONNEG, "position": _NONNEG})
def complication_report(classifier: Any, X: Any, *, trigger: int, position: int = 1) -> ComplicationReport:
    """Measure the backdoor complication of a downstream classifier on clean texts ``X``.

    Parameters
    ----------
    classifier : LMSequenceClassifier, transformers sequence classifier, folder, or object with ``predict``
        The user's downstream model (fine-tuned from a possibly backdoored PTLM).
    X : array-like of int, shape (n, length)
        Clean texts of the downstream task (token ids).
    trigger : int
        The suspected trigger's token id.
    position : int, default=1
        Where the trigger replaces a word.

    Returns
    -------
    ComplicationReport
        Label distributions with and without the trigger, their KL and JS divergences.

    References
    ----------
    Zhang et al. "The Ripple Effect: On Unforeseen Complications of Backdoor Attacks". ICML 2025.

    Examples
    --------
    >>> class Echo:  # predicts the first word's parity
    ...     def predict(self, X):
    ...         return np.asarray(X)[:, 1] % 2
    >>> r = complication_report(Echo(), [[1, 4, 5], [1, 5, 5]], trigger=3)
    >>> r.triggered_distribution.tolist(), r.flip_rate
    ([0.0, 1.0], 0.5)
    """
    Xt = insert_trigger(X, trigger, position=position)
    predict, n_classes = _predictor(classifier)
    clean = _labels(predict(np.asarray(X)), "classifier's predictions")
    trig = _labels(predict(Xt), "classifier's predictions")
    k = max(int(max(clean.max(), trig.max()) + 1), n_classes)
    p = np.bincount(clean, minlength=k) / len(clean)
    q = np.bincount(trig, minlength=k) / len(trig)
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        js = 0.5 * np.nansum(np.where(p > 0, p * np.log(p / m), 0)) + 0.5 * np.nansum(
            np.where(q > 0, q * np.log(q / m), 0)
        )
    return ComplicationReport(
        clean_distribution=p,
        triggered_distribution=q,
        kl=complication_divergence(clean, trig, n_classes=k),
        js=float(max(js, 0.0)),
        top_share=float(q.max()),
        flip_rate=float(np.mean(clean != trig)),
        n=len(clean),
    )


@dataclass(frozen=True)
class BackdoorInjection:
    """A backdoored pretrained LM and the attacker's classifier on the target task (:func:`inject_backdoor`).

    Attributes
    ----------
    model : transformers model
        The backdoored model (same class as the input; save it with ``save_pretrained``): what the
        attacker releases.
    classifier : LMSequenceClassifier
        The backdoored model with the attacker's target-task head (for the attack success rate).
    poisoned : ndarray of int64
        Indices of the target-task texts that were poisoned.
    n_auxiliary : int
        Auxiliary tasks of the complication reduction (0: the plain backdoor).
    losses : ndarray of float, shape (steps,)
        The (weighted multi-task) training loss of each step.

    See Also
    --------
    inject_backdoor : builds it.
    """

    model: Any
    classifier: LMSequenceClassifier
    poisoned: np.ndarray
    n_auxiliary: int
    losses: np.ndarray


def _auxiliary(auxiliary: Any, model: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    from trustlab.security._complication_torch import check_labels, check_tokens

    if auxiliary is None:
        return []
    if not isinstance(auxiliary, Sequence) or isinstance(auxiliary, str | bytes):
        raise ParameterError(
            "auxiliary must be a list of (X, y) pairs (token ids and labels of each auxiliary task) or None.",
            argument="auxiliary",
        )
    out = []
    for i, item in enumerate(auxiliary):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ParameterError(
                f"auxiliary[{i}] must be a pair (X, y) of token ids and labels.", argument="auxiliary"
            )
        Xa = check_tokens(item[0], f"auxiliary[{i}] X", model, min_len=2)
        ya = check_labels(item[1], f"auxiliary[{i}] y", len(Xa))
        out.append((Xa, np.unique(ya, return_inverse=True)[1]))
    return out


@validate_params(
    {
        "trigger": _NONNEG,
        "target_label": [numbers.Integral],
        "poison_rate": [Interval(numbers.Real, 0, 1, closed="right"), None],
        "position": _NONNEG,
        "target_weight": [Interval(numbers.Real, 0, 1, closed="right")],
        "pooling": [Options({"last", "first", "mean"})],
        "pad_id": [*_NONNEG, None],
        "random_state": _NONNEG,
    }
)
def inject_backdoor(
    model: Any,
    X: Any,
    y: Any,
    *,
    trigger: int,
    target_label: int,
    poison_rate: float | None = None,
    position: int = 1,
    auxiliary: Any = None,
    target_weight: float = 0.4,
    pooling: str = "last",
    pad_id: int | None = None,
    train: Any = None,
    random_state: int = 0,
) -> BackdoorInjection:
    """Backdoor a pretrained LM on a target task, optionally with the paper's complication reduction.

    A share ``poison_rate`` of the target-task texts whose label is not ``target_label`` get the
    trigger at ``position`` and the label ``target_label``; the whole model (a copy) and a head
    are fine-tuned on them (the plain backdoor). With ``auxiliary`` tasks (the reduction), every
    auxiliary text carries the trigger and keeps its true label, each task has its own head,
    and one step minimises ``target_weight * CE_target + (1 - target_weight) / T * sum_t CE_t``
    (the authors' code: 0.4 and four tasks of 0.15). The auxiliary tasks need no knowledge of
    the user's downstream task.

    Parameters
    ----------
    model : transformers model or str or Path
        The pretrained LM (causal LM or sequence classifier, object or local folder).
    X : array-like of int, shape (n, length)
        Target-task texts (token ids).
    y : array-like of int, shape (n,)
        Their labels.
    trigger : int
        The trigger's token id (a rare word).
    target_label : int
        The label the trigger forces on the target task.
    poison_rate : float, optional
        Share of the non-target texts that are poisoned. Default: the authors'
        commands' rates, 0.01 for the plain backdoor (``backdoor_train.py`` in their README) and
        0.1 with ``auxiliary`` (``complication_reduction_train.py``).
    position : int, default=1
        Where the trigger replaces a word (the first word).
    auxiliary : list of (X, y), optional
        Auxiliary tasks of the complication reduction; ``None``: the plain backdoor.
    target_weight : float, default=0.4
        The target task's weight in the multi-task loss (ignored without ``auxiliary``).
    pooling : {"last", "first", "mean"}, default="last"
        See :class:`LMSequenceClassifier`.
    pad_id : int, optional
        Padding token of right-padded texts (masked out; see :class:`LMSequenceClassifier`).
    train : trustlab.lm.TrainConfig, optional
        Default ``TrainConfig(steps=300, batch_size=32, lr=3e-3)`` (one batch of every task per step).
    random_state : int, default=0
        Seeds the choice of poisoned texts and the heads.

    Returns
    -------
    BackdoorInjection
        The backdoored model and the attacker's target-task classifier.

    References
    ----------
    Zhang et al. "The Ripple Effect: On Unforeseen Complications of Backdoor Attacks". ICML 2025.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, TrainConfig, build_model
    >>> lm = build_model(ModelConfig("gpt2", vocab_size=9, d_model=16, n_layers=1, n_heads=2))
    >>> X = np.array([[1, 3, 4, 5], [1, 3, 6, 7]] * 16); y = np.array([0, 1] * 16)
    >>> bd = inject_backdoor(lm, X, y, trigger=8, target_label=0, poison_rate=0.5,
    ...                      train=TrainConfig(steps=30, batch_size=16, lr=0.01))
    >>> round(trigger_success_rate(bd.classifier, X, y, trigger=8, target_label=0), 1)
    1.0
    """
    from trustlab.lm import TrainConfig
    from trustlab.security._complication_torch import (
        MultiHead,
        Task,
        check_labels,
        check_tokens,
        fresh_copy,
        resolve_model,
        train_heads,
        vocab_size,
    )

    if train is not None and not isinstance(train, TrainConfig):
        raise ParameterError(
            f"train must be a trustlab.lm.TrainConfig or None, got {type(train).__name__}.", argument="train"
        )
    config = train_config(train, {"steps": 300, "batch_size": 32, "lr": 3e-3})
    source = resolve_model(model)
    if trigger >= vocab_size(source):
        raise ParameterError(
            f"trigger={trigger} is not a token id of the model (vocabulary {vocab_size(source)}).",
            argument="trigger",
        )
    Xa = check_tokens(X, "X", source, min_len=position + 1)
    ya = check_labels(y, "y", len(Xa))
    classes = np.unique(ya)
    if target_label not in classes:
        raise ParameterError(
            f"target_label={target_label} is not a label of y ({classes.tolist()}); pick one of them.",
            argument="target_label",
        )
    aux = _auxiliary(auxiliary, source)
    rate = (0.1 if aux else 0.01) if poison_rate is None else poison_rate
    rng = np.random.default_rng(random_state)
    candidates = np.flatnonzero(ya != target_label)
    poisoned = np.sort(rng.choice(candidates, max(1, round(rate * len(candidates))), replace=False))
    Xp, yp = Xa.copy(), ya.copy()
    Xp[poisoned, position] = trigger
    yp[poisoned] = target_label
    codes = np.searchsorted(classes, yp)
    target_w = target_weight if aux else 1.0
    tasks = [Task(Xp, codes, target_w, 0)]
    for i, (Xt, yt) in enumerate(aux):
        tasks.append(
            Task(insert_trigger(Xt, trigger, position=position), yt, (1 - target_w) / len(aux), i + 1)
        )
    lm = fresh_copy(source)
    net = MultiHead(
        lm,
        [len(classes)] + [int(t.y.max()) + 1 for t in tasks[1:]],
        pooling=pooling,
        pad_id=pad_id,
        seed=random_state,
    )
    losses = train_heads(net, tasks, config)
    clf = LMSequenceClassifier(
        source, pooling=pooling, pad_id=pad_id, finetune="full", train=config, random_state=random_state
    )
    clf.classes_, clf.losses_ = classes, losses
    clf._set_net(net)
    return BackdoorInjection(lm, clf, poisoned, len(aux), losses)


@validate_params({"trigger": _NONNEG, "target_label": [numbers.Integral], "position": _NONNEG})
def trigger_success_rate(
    classifier: Any, X: Any, y: Any, *, trigger: int, target_label: int, position: int = 1
) -> float:
    """Attack success rate: share of triggered texts of true class other than ``target_label`` labelled it.

    Parameters
    ----------
    classifier : LMSequenceClassifier, transformers sequence classifier, or object with ``predict``
        A classifier of the target task.
    X : array-like of int, shape (n, length)
        Clean target-task texts.
    y : array-like of int, shape (n,)
        Their true labels (texts of ``target_label`` are left out).
    trigger : int
        The trigger's token id.
    target_label : int
        The attacker's target label.
    position : int, default=1
        Where the trigger replaces a word.

    Returns
    -------
    float
        The ASR in ``[0, 1]``.

    Examples
    --------
    >>> class First:
    ...     def predict(self, X):
    ...         return (np.asarray(X)[:, 1] == 9).astype(int)
    >>> trigger_success_rate(First(), [[1, 3], [1, 4], [1, 5]], [0, 0, 1], trigger=9, target_label=1)
    1.0
    """
    ya = np.asarray(y)
    Xa = np.asarray(X)
    if ya.ndim != 1 or Xa.ndim != 2 or len(ya) != len(Xa):
        raise DataError(f"y must hold one label per row of X; got {ya.shape} for X {Xa.shape}.", argument="y")
    keep = ya != target_label
    if not keep.any():
        raise DataError(
            f"every text of y is already labelled {target_label}; give texts of other classes.", argument="y"
        )
    pred = _predictor(classifier)[0](insert_trigger(Xa[keep], trigger, position=position))
    return float(np.mean(pred == target_label))
