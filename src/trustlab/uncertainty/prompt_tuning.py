"""Prompt tuning of a CLIP-like dual encoder that keeps its calibration: CoOp, KgCoOp and DOR.

CoOp learns context vectors in place of the words of a hand-written prompt ("a photo of a"),
by cross-entropy on a few images of the *base* classes; the context is then reused with any
class names. KgCoOp adds the distance of the tuned base-class text features from the zero-shot
ones. Dynamic Outlier Regularization (DOR) instead keeps the text features of *novel* labels,
drawn afresh each step from a vocabulary, near their zero-shot features, so the base labels may
diverge (accuracy and confidence rise together) while new labels keep zero-shot calibration.
See docs/uncertainty/dor.md. Needs torch; takes any dual encoder (:class:`DualEncoder`).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.uncertainty._prompt_model import (
    check_dual_encoder,
    encode_images,
    encode_prompts,
    prompt_tokens,
    require_torch,
    torch_threads,
)
from trustlab.uncertainty.calibration import expected_calibration_error

__all__ = [
    "METHODS",
    "DualEncoder",
    "PromptTuner",
    "TopLabelCalibration",
    "text_feature_divergence",
    "top_label_calibration",
    "zero_shot_proba",
]

METHODS = ("coop", "kgcoop", "dor", "kgcoop+dor")
"""The tuners :class:`PromptTuner` runs: plain CoOp, CoOp + KgCoOp's penalty, CoOp + DOR, and
KgCoOp + DOR (both penalties, as the paper's Table 1 combines them)."""


@dataclass(frozen=True)
class DualEncoder:
    """A user's CLIP-like model, as the callables prompt tuning needs.

    Parameters
    ----------
    image_encoder : callable
        ``image_encoder(images) -> (n, D)`` features from a float tensor of images (any torch
        module, e.g. CLIP's ``visual``).
    token_embedding : callable
        ``token_embedding(ids) -> (n, L, d)`` from an int64 tensor of token ids (CLIP's
        ``token_embedding``).
    text_encoder : callable
        ``text_encoder(embeddings, eot_index) -> (n, D)``: the frozen text tower from token
        embeddings to features, pooled at position ``eot_index`` (CLIP's ``encode_text`` after
        its embedding lookup). Must be differentiable in ``embeddings``.
    tokenize : callable
        ``tokenize(texts) -> (ids, eot_index)``: int arrays of shape ``(n, L)`` and ``(n,)``.
    logit_scale : float
        The temperature's inverse (CLIP's ``logit_scale.exp()``, 100).
    n_prefix : int, default=1
        Tokens before the first word (CLIP's ``<sos>``); the context replaces the tokens right
        after them.
    pixel_range : (float, float) or None, default=None
        The value range the image encoder was trained on (the lab's tiny CLIP: ``(0, 1)``);
        images outside it are refused (``DataError`` naming ``X``). None: any values.

    Examples
    --------
    >>> from trustlab.vision.tiny_clip import tiny_clip
    >>> m = tiny_clip()
    >>> enc = DualEncoder(m.image_encoder, m.token_embedding, m.text_encoder, m.tokenize, m.logit_scale)
    >>> enc.n_prefix
    1
    """

    image_encoder: Callable[[Any], Any]
    token_embedding: Callable[[Any], Any]
    text_encoder: Callable[[Any, Any], Any]
    tokenize: Callable[[Sequence[str]], tuple[Any, Any]]
    logit_scale: float
    n_prefix: int = 1
    pixel_range: tuple[float, float] | None = None


@dataclass(frozen=True)
class TopLabelCalibration:
    """Accuracy, mean top-label confidence and top-label ECE of a classifier's probabilities.

    Attributes
    ----------
    accuracy : float
        Share of rows whose top class is the true one.
    confidence : float
        Mean top-class probability.
    ece : float
        Top-label expected calibration error.
    n : int
        Rows.

    See Also
    --------
    top_label_calibration : builds it.
    """

    accuracy: float
    confidence: float
    ece: float
    n: int


@validate_params({"n_bins": [Interval(numbers.Integral, 1, None, closed="left")]})
def top_label_calibration(y_true: Any, proba: Any, *, n_bins: int = 10) -> TopLabelCalibration:
    """Top-label calibration of class probabilities (the metric of the DOR paper's tables).

    The ECE is trustlab's :func:`~trustlab.uncertainty.expected_calibration_error` of the
    pairs (prediction correct, top probability), with ``n_bins`` equal-width bins.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        Class indices (columns of ``proba``).
    proba : array-like of shape (n, n_classes)
        Rows of probabilities (summing to 1).
    n_bins : int, default=10
        Equal-width confidence bins.

    Returns
    -------
    TopLabelCalibration

    References
    ----------
    Guo, Pleiss, Sun, Weinberger. "On Calibration of Modern Neural Networks". ICML 2017.

    Examples
    --------
    >>> top_label_calibration([0, 1], [[0.9, 0.1], [0.6, 0.4]]).accuracy
    0.5
    """
    p = check_numeric_array(proba, "proba", ndim=2)
    y = check_numeric_array(y_true, "y_true", ndim=1)
    if y.shape[0] != p.shape[0]:
        raise DataError(f"y_true has {y.shape[0]} rows but proba has {p.shape[0]}.", argument="y_true")
    if (p < 0).any() or not np.allclose(p.sum(1), 1.0, atol=1e-4):
        raise DataError("proba rows must be probabilities summing to 1.", argument="proba")
    if (y != np.round(y)).any() or (y < 0).any() or (y >= p.shape[1]).any():
        raise DataError(f"y_true must be class indices in [0, {p.shape[1]}).", argument="y_true")
    correct = (p.argmax(1) == y).astype(float)
    conf = np.clip(p.max(1), 0.0, 1.0)
    ece = expected_calibration_error(correct, conf, n_bins=n_bins)
    return TopLabelCalibration(float(correct.mean()), float(conf.mean()), ece, int(y.shape[0]))


@validate_params({"n_neighbors": [Interval(numbers.Integral, 1, None, closed="left")]})
def text_feature_divergence(features: Any, *, n_neighbors: int = 3) -> float:
    """The paper's feature-divergence (FD) score of a set of label text features.

    The mean, over labels, of the mean Euclidean distance of a label's unit-normalised text
    feature to its ``n_neighbors`` nearest other labels. Prompt tuning that raises it widens
    logit gaps, hence confidence.

    Parameters
    ----------
    features : array-like of shape (n_labels, D)
        Text features (normalised here).
    n_neighbors : int, default=3
        Neighbours per label (capped at ``n_labels - 1``; the paper's ``M`` is not stated).

    Returns
    -------
    float

    References
    ----------
    Wang, Li, Wei. "Understanding and Mitigating Miscalibration in Prompt Tuning for
    Vision-Language Models". ICML 2025 (Definition 3.1).

    Examples
    --------
    >>> round(text_feature_divergence([[1, 0], [0, 1]], n_neighbors=1), 4)
    1.4142
    """
    f = check_numeric_array(features, "features", ndim=2, min_rows=2)
    norms = np.linalg.norm(f, axis=1, keepdims=True)
    if (norms == 0).any():
        raise DataError("features has an all-zero row; it has no direction.", argument="features")
    f = f / norms
    d = np.sqrt(np.maximum(((f[:, None, :] - f[None, :, :]) ** 2).sum(-1), 0.0))
    np.fill_diagonal(d, np.inf)
    k = min(int(n_neighbors), f.shape[0] - 1)
    return float(np.sort(d, axis=1)[:, :k].mean())


def _check_names(class_names: Any, name: str = "class_names", min_len: int = 2) -> list[str]:
    if isinstance(class_names, str) or not isinstance(class_names, Sequence | np.ndarray):
        raise DataError(f"{name} must be a list of label strings.", argument=name)
    names = [str(c) for c in class_names]
    if len(names) < min_len or len(set(names)) != len(names) or any(not c.strip() for c in names):
        raise DataError(f"{name} must hold at least {min_len} distinct, non-empty labels.", argument=name)
    return names


def _softmax_proba(model: Any, image_features: Any, text_features: Any) -> np.ndarray:
    logits = float(model.logit_scale) * image_features @ text_features.T
    return logits.softmax(1).detach().numpy().astype(np.float64)


@validate_params({"template": [str]})
def zero_shot_proba(model: Any, X: Any, class_names: Any, *, template: str = "a photo of a {}") -> np.ndarray:
    """Zero-shot class probabilities of a frozen dual encoder with a hand-written prompt.

    Parameters
    ----------
    model : DualEncoder or object with the same attributes
        The frozen model (:class:`DualEncoder`).
    X : array-like of shape (n, ...)
        Images, as ``model.image_encoder`` takes them.
    class_names : sequence of str
        The labels to choose among.
    template : str, default="a photo of a {}"
        The prompt, with ``{}`` for the class name.

    Returns
    -------
    numpy.ndarray of shape (n, n_classes)

    References
    ----------
    Radford et al. "Learning Transferable Visual Models From Natural Language Supervision". ICML 2021.

    Examples
    --------
    >>> from trustlab.vision.tiny_clip import digit_task, tiny_clip
    >>> task = digit_task(n_draws=1)
    >>> p = zero_shot_proba(tiny_clip(), task.X_new, task.new_names, template="a photo of the digit {}")
    >>> p.shape
    (269, 5)
    """
    if "{}" not in template:
        raise ParameterError("template must contain '{}' where the class name goes.", argument="template")
    torch = require_torch()
    model = check_dual_encoder(model)
    names = _check_names(class_names)
    with torch.no_grad():
        fi = encode_images(model, X)
        ids, eot = prompt_tokens(model, [template.format(c) for c in names], "class_names")
        ft = encode_prompts(model, ids, eot)
    return _softmax_proba(model, fi, ft)


class _Adam:
    """Adam on one tensor, in place (torch.optim's first use imports torch._dynamo: ~2 s of CPU)."""

    def __init__(self, param: Any, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.param, self.lr, self.betas, self.eps, self.t = param, lr, betas, eps, 0
        self.m = param.detach().clone().zero_()
        self.v = param.detach().clone().zero_()

    def step(self, grad: Any) -> None:
        torch = require_torch()
        b1, b2 = self.betas
        self.t += 1
        self.m.mul_(b1).add_(grad, alpha=1 - b1)
        self.v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        m_hat = self.m / (1 - b1**self.t)
        v_hat = self.v / (1 - b2**self.t)
        with torch.no_grad():
            self.param.sub_(self.lr * m_hat / (v_hat.sqrt() + self.eps))


class PromptTuner(ParamsValidationMixin, BaseEstimator):
    """CoOp prompt tuning of a frozen dual encoder, plain or with KgCoOp's or DOR's regulariser.

    The words of ``ctx_init`` are replaced by learned context vectors, shared by all classes,
    initialised from their embeddings (CoOp). ``method="kgcoop"`` adds ``reg_weight`` times the
    mean squared distance of the tuned base-class text features from the zero-shot ones;
    ``method="dor"`` adds ``reg_weight * (1 - mean cos)`` between the tuned and zero-shot text
    features of ``n_outliers`` words drawn afresh each step from the top ``outlier_top_k`` of
    ``outlier_words`` (minus the base class names) ranked by mean zero-shot similarity to the
    base classes; ``method="kgcoop+dor"`` adds both (KgCoOp's at ``kgcoop_weight``). The
    zero-shot features are those of the hand-written prompt ``zs_template`` (KgCoOp's and the
    paper's anchor), which need not be the words the context starts from.

    Parameters
    ----------
    model : DualEncoder or object with the same attributes
        The frozen dual encoder (:class:`DualEncoder`; e.g. :func:`trustlab.vision.tiny_clip.tiny_clip`).
    method : {"dor", "coop", "kgcoop", "kgcoop+dor"}, default="dor"
        The tuner.
    ctx_init : str, default="a photo of a"
        The hand-written prompt whose words become the context (CoOp's initialisation).
    zs_template : str, optional
        The zero-shot prompt, with ``{}`` for the label, whose text features the regularisers
        hold the tuned ones to (KgCoOp's hand-crafted prompt, the paper's zero-shot CLIP; the
        outlier pool is ranked with it too). Default ``ctx_init + " {}"``.
    reg_weight : float, default=8.0
        The paper's lambda (8 for CoOp + DOR, 2 for DOR added to the other tuners; KgCoOp's own
        default is 8): the weight of KgCoOp's penalty for "kgcoop", of DOR's for "dor" and
        "kgcoop+dor". Unused by "coop".
    kgcoop_weight : float, default=8.0
        KgCoOp's weight within "kgcoop+dor" (KgCoOp's default); unused by the other methods.
    outlier_words : sequence of str, optional
        DOR's vocabulary (WordNet nouns in the paper); required for ``method="dor"``.
    outlier_top_k : int, default=5000
        Size of the near-OOD pool kept from the vocabulary (the paper's K).
    n_outliers : int, default=16
        Outliers per step (capped at the pool size).
    n_steps : int, default=150
        Adam steps, full batch.
    lr : float, default=0.02
        Adam learning rate.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the outlier draws.
    n_threads : int or None, default=1
        Torch threads during fit and predict (restored after); one suits small models on a
        shared CPU, ``None`` leaves torch's setting (a large model, a GPU).

    Attributes
    ----------
    context_ : numpy.ndarray of shape (n_ctx, d)
        The learned context vectors.
    class_names_ : list of str
        The base classes of ``fit``.
    outlier_pool_ : list of str
        DOR's ranked pool (empty for the other methods).
    loss_ : float
        The final training loss.

    References
    ----------
    Wang, Li, Wei. "Understanding and Mitigating Miscalibration in Prompt Tuning for
    Vision-Language Models". ICML 2025. Zhou, Yang, Loy, Liu. "Learning to Prompt for
    Vision-Language Models". IJCV 2022 (CoOp). Yao, Zhang, Xu. "Visual-Language Prompt Tuning
    with Knowledge-guided Context Optimization". CVPR 2023 (KgCoOp).

    Examples
    --------
    >>> from trustlab.vision.tiny_clip import digit_task, outlier_vocabulary, tiny_clip
    >>> task = digit_task(shots=4, n_draws=1)
    >>> tuner = PromptTuner(tiny_clip(), ctx_init="a photo of the digit", n_steps=3, n_outliers=4,
    ...                     outlier_words=outlier_vocabulary(task.base_names))
    >>> tuner = tuner.fit(task.X_shots, task.y_shots, class_names=task.base_names)
    >>> tuner.predict_proba(task.X_new, class_names=task.new_names).shape
    (269, 5)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "method": [Options(METHODS)],
        "ctx_init": [str],
        "zs_template": [None, str],
        "reg_weight": [Interval(numbers.Real, 0, None, closed="left")],
        "kgcoop_weight": [Interval(numbers.Real, 0, None, closed="left")],
        "outlier_words": [None, list, tuple, np.ndarray],
        "outlier_top_k": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_outliers": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
        "n_threads": [None, Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        model: Any,
        *,
        method: str = "dor",
        ctx_init: str = "a photo of a",
        zs_template: str | None = None,
        reg_weight: float = 8.0,
        kgcoop_weight: float = 8.0,
        outlier_words: Sequence[str] | None = None,
        outlier_top_k: int = 5000,
        n_outliers: int = 16,
        n_steps: int = 150,
        lr: float = 0.02,
        random_state: Any = 0,
        n_threads: int | None = 1,
    ) -> None:
        self.model = model
        self.method = method
        self.ctx_init = ctx_init
        self.zs_template = zs_template
        self.reg_weight = reg_weight
        self.kgcoop_weight = kgcoop_weight
        self.outlier_words = outlier_words
        self.outlier_top_k = outlier_top_k
        self.n_outliers = n_outliers
        self.n_steps = n_steps
        self.lr = lr
        self.random_state = random_state
        self.n_threads = n_threads

    def _context_slots(self, model: Any) -> tuple[int, Any]:
        ids, eot = prompt_tokens(model, [self.ctx_init], "ctx_init")
        n_ctx = int(eot[0]) - int(model.n_prefix)
        if n_ctx < 1:
            raise ParameterError("ctx_init must hold at least one word.", argument="ctx_init")
        return n_ctx, ids

    def _tuned_features(self, model: Any, context: Any, names: Sequence[str]) -> Any:
        ids, eot = prompt_tokens(model, [f"{self.ctx_init} {c}" for c in names], "class_names")
        return encode_prompts(model, ids, eot, context=context)

    def _zero_shot_features(self, model: Any, names: Sequence[str], argument: str) -> Any:
        template = f"{self.ctx_init} {{}}" if self.zs_template is None else self.zs_template
        if "{}" not in template:
            raise ParameterError(
                "zs_template must contain '{}' where the label goes.", argument="zs_template"
            )
        ids, eot = prompt_tokens(model, [template.format(c) for c in names], argument)
        return encode_prompts(model, ids, eot)

    def _outlier_pool(self, model: Any, names: list[str], base_zs: Any) -> tuple[list[str], Any]:
        if self.outlier_words is None:
            raise ParameterError(
                "method='dor' needs outlier_words, a vocabulary of labels outside the task (e.g. "
                "trustlab.vision.tiny_clip.outlier_vocabulary(base_names)).",
                argument="outlier_words",
            )
        taken = {c.lower() for c in names}
        words = [w for w in dict.fromkeys(str(w) for w in self.outlier_words) if w.lower() not in taken]
        if not words or any(not w.strip() for w in words):
            raise DataError(
                "outlier_words must hold non-empty labels that are not the base class names.",
                argument="outlier_words",
            )
        zs = self._zero_shot_features(model, words, "outlier_words")
        order = np.argsort(-(zs @ base_zs.T).mean(1).numpy(), kind="stable")[: int(self.outlier_top_k)]
        return [words[i] for i in order], zs[order.copy()]

    def fit(self, X: Any, y: Any, *, class_names: Any) -> PromptTuner:
        """Learn the context on images ``X`` of the base classes ``class_names``.

        Parameters
        ----------
        X : array-like of shape (n, ...)
            Training images (few-shot), as ``model.image_encoder`` takes them.
        y : array-like of shape (n,)
            Class indices into ``class_names``.
        class_names : sequence of str
            The base classes.

        Returns
        -------
        PromptTuner
            ``self``.
        """
        self._validate_params()
        with torch_threads(self.n_threads):
            return self._fit(X, y, class_names)

    def _fit(self, X: Any, y: Any, class_names: Any) -> PromptTuner:
        torch = require_torch()
        model = check_dual_encoder(self.model)
        names = _check_names(class_names)
        yy = check_numeric_array(y, "y", ndim=1)
        if (yy != np.round(yy)).any() or (yy < 0).any() or (yy >= len(names)).any():
            raise DataError(f"y must be class indices in [0, {len(names)}).", argument="y")
        rng = make_generator(self.random_state)
        with torch.no_grad():
            fi = encode_images(model, X)
            if fi.shape[0] != yy.shape[0]:
                raise DataError(f"X has {fi.shape[0]} images but y has {yy.shape[0]} labels.", argument="y")
            n_ctx, init_ids = self._context_slots(model)
            start = int(model.n_prefix)
            init = model.token_embedding(torch.as_tensor(init_ids))[0, start : start + n_ctx].detach().clone()
            base_zs = self._zero_shot_features(model, names, "class_names")
            pool: list[str] = []
            pool_zs: Any = None
            if self.method.endswith("dor"):
                pool, pool_zs = self._outlier_pool(model, names, base_zs)
        target = torch.as_tensor(yy.astype(np.int64))
        context = init.float().requires_grad_(True)
        adam = _Adam(context, float(self.lr))
        scale = float(model.logit_scale)
        loss = torch.zeros(())
        for _ in range(int(self.n_steps)):
            ft = self._tuned_features(model, context, names)
            loss = torch.nn.functional.cross_entropy(scale * fi @ ft.T, target)
            if self.method.startswith("kgcoop"):
                kg = float(self.reg_weight if self.method == "kgcoop" else self.kgcoop_weight)
                loss = loss + kg * ((ft - base_zs) ** 2).sum(1).mean()
            if self.method.endswith("dor"):
                pick = rng.choice(len(pool), min(int(self.n_outliers), len(pool)), replace=False)
                fo = self._tuned_features(model, context, [pool[i] for i in pick])
                cos = (fo * pool_zs[torch.as_tensor(pick)]).sum(1)
                loss = loss + float(self.reg_weight) * (1.0 - cos).mean()
            (grad,) = torch.autograd.grad(loss, context)
            adam.step(grad)
        if not np.isfinite(float(loss.detach())):
            raise ModelError("training diverged (non-finite loss); lower lr.", argument="lr")
        self.context_ = context.detach().numpy().copy()
        self.class_names_ = names
        self.outlier_pool_ = pool
        self.loss_ = float(loss.detach())
        return self

    def text_features(self, class_names: Any = None) -> np.ndarray:
        """Unit-norm text features of ``class_names`` (default: the base classes) under the learned context.

        Parameters
        ----------
        class_names : sequence of str, optional
            Any labels.

        Returns
        -------
        numpy.ndarray of shape (n_classes, D)
        """
        torch = require_torch()
        if not hasattr(self, "context_"):
            raise NotFittedError("call fit before text_features/predict_proba.", argument="self")
        names = self.class_names_ if class_names is None else _check_names(class_names, min_len=1)
        model = check_dual_encoder(self.model)
        with torch.no_grad():
            return (
                self._tuned_features(model, torch.as_tensor(self.context_), names).numpy().astype(np.float64)
            )

    def predict_proba(self, X: Any, class_names: Any = None) -> np.ndarray:
        """Class probabilities among ``class_names`` (default: the base classes; new ones allowed).

        Parameters
        ----------
        X : array-like of shape (n, ...)
            Images.
        class_names : sequence of str, optional
            The labels to choose among.

        Returns
        -------
        numpy.ndarray of shape (n, n_classes)
        """
        torch = require_torch()
        if not hasattr(self, "context_"):
            raise NotFittedError("call fit before text_features/predict_proba.", argument="self")
        names = self.class_names_ if class_names is None else _check_names(class_names)
        model = check_dual_encoder(self.model)
        with torch_threads(self.n_threads), torch.no_grad():
            ft = self._tuned_features(model, torch.as_tensor(self.context_), names)
            return _softmax_proba(model, encode_images(model, X), ft)

    def predict(self, X: Any, class_names: Any = None) -> np.ndarray:
        """Index of the most probable class (see :meth:`predict_proba`).

        Parameters
        ----------
        X : array-like of shape (n, ...)
            Images.
        class_names : sequence of str, optional
            The labels to choose among.

        Returns
        -------
        numpy.ndarray of shape (n,)
        """
        return self.predict_proba(X, class_names).argmax(1)
