r"""Out-of-distribution detection for torch classifiers: S&I, GAIA-Z, MSP and energy.

S&I (Zhang et al., ICML 2025) scores an input by the *explanation pattern* of the network
at many intermediate layers. The network is split at each layer ``L`` (head up to ``L``,
remainder after it); starting from the clean feature ``h_0 = head(x)``, the feature is
moved along an adversarial path ``h_{t+1} = h_t + alpha * sign(grad CE(remainder(h_t),
y_hat))`` and the gradients ``g_t`` of the maximum logit w.r.t. ``h_t`` are integrated
along it (multiplied, the authors' default). Per channel, the share ``r_c`` of positions
where the integrated gradient is non-zero is taken; the score is ``mean_c r_c^2`` over the
channels of all split layers, higher meaning more out-of-distribution (the authors' code
returns its negative as an in-distribution score). With one step this is GAIA-Z (Chen et
al., NeurIPS 2023), the gradient baseline S&I improves on.

Every detector here follows one convention: ``fit(X_id)`` on in-distribution data (MSP,
energy and the gradient methods need no statistics; ``fit`` checks the model and the
layers and records the input shape), then ``score_samples(X)`` returns one score per
row, **higher = more out-of-distribution** (pytorch-ood's convention, the negative of
scikit-learn's ``score_samples`` for outlier detectors, which is higher = more normal).

References
----------
.. [1] Zhang, J., Wang, X., Jin, Z., Zhu, Z., Zhou, J., Chen, F., Chen, H. "Splitting &
   Integrating: Out-of-Distribution Detection via Adversarial Gradient Attribution".
   Proceedings of the 42nd International Conference on Machine Learning (ICML 2025),
   PMLR 267:76213-76224. Code: https://github.com/LMBTough/S-I.
.. [2] Chen, J., Li, J., Qu, X., Wang, J., Wan, J., Xiao, J. "GAIA: Delving into
   Gradient-based Attribution Abnormality for Out-of-distribution Detection". NeurIPS 2023.
.. [3] Hendrycks, D., Gimpel, K. "A Baseline for Detecting Misclassified and
   Out-of-Distribution Examples in Neural Networks". ICLR 2017 (MSP).
.. [4] Liu, W., Wang, X., Owens, J., Li, Y. "Energy-based Out-of-distribution Detection".
   NeurIPS 2020.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.metrics import roc_auc_score

from trustlab._param_validation import HasMethods, Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, NotFittedError
from trustlab.security._nets import require_torch
from trustlab.security._ood_layers import as_tensor_batches, resolve_layers, split_integrate_ratios

__all__ = [
    "EnergyDetector",
    "GAIADetector",
    "MSPDetector",
    "OODMetrics",
    "SplitIntegrateDetector",
    "fpr_at_tpr",
    "ood_metrics",
]

_MODEL = [HasMethods(["forward", "named_modules", "eval"])]
_BATCH = [Interval(numbers.Integral, 1, None, closed="left")]


class _TorchDetector(ParamsValidationMixin):
    """Shared fit/score plumbing: input checks, eval mode, batching."""

    model: Any
    batch_size: int

    def _check_X(self, X: Any, name: str) -> np.ndarray:
        arr = check_numeric_array(X, name, dtype=np.float32)
        if arr.ndim < 2:
            raise DataError(
                f"{name} must have one row per sample (at least 2 dimensions), got shape {arr.shape}.",
                argument=name,
            )
        return arr

    def fit(self, X: Any, y: Any = None) -> _TorchDetector:
        """Check the model and the in-distribution data ``X``; record the input shape.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            In-distribution inputs, as the model takes them.
        y : None
            Ignored (present for the scikit-learn contract).

        Returns
        -------
        self
        """
        self._validate_params()
        arr = self._check_X(X, "X")
        self.input_shape_ = tuple(arr.shape[1:])
        self._prepare()
        self._raw(arr[: min(len(arr), 2)])  # runs the model once: checks the layers and logits
        return self

    def _prepare(self) -> None:
        """Resolve what the detector needs from the model (overridden)."""

    def score_samples(self, X: Any) -> np.ndarray:
        """One out-of-distribution score per row of ``X``: higher = more out-of-distribution.

        Parameters
        ----------
        X : array-like of shape (n_samples, ...)
            Inputs of the shape seen in ``fit``.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if not hasattr(self, "input_shape_"):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted yet; call fit(X_in_distribution) first.",
                argument="X",
            )
        arr = self._check_X(X, "X")
        if tuple(arr.shape[1:]) != self.input_shape_:
            raise DataError(
                f"X has rows of shape {tuple(arr.shape[1:])} but the detector was fitted on rows of "
                f"shape {self.input_shape_}; pass inputs shaped as in fit.",
                argument="X",
            )
        return self._raw(arr)

    def _raw(self, arr: np.ndarray) -> np.ndarray:
        torch = require_torch()
        was_training = bool(self.model.training)
        self.model.eval()
        try:
            out = [self._score_batch(x) for x in as_tensor_batches(arr, self.batch_size)]
        except RuntimeError as exc:
            raise DataError(
                f"the model could not run on X of shape {arr.shape} ({str(exc)[:200]}); pass inputs "
                "shaped as the model expects.",
                argument="X",
            ) from None
        finally:
            self.model.train(was_training)
        scores = torch.cat(out).detach().cpu().numpy().astype(np.float64)
        if not np.all(np.isfinite(scores)):
            raise DataError(
                "the model's outputs on X are not finite; check that X is on the scale the model "
                "was trained on.",
                argument="X",
            )
        return scores

    def _score_batch(self, x: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError


class _LogitDetector(_TorchDetector):
    def _logits(self, x: Any) -> Any:
        torch = require_torch()
        with torch.no_grad():
            logits = self.model(x)
        if not isinstance(logits, torch.Tensor) or logits.ndim != 2 or logits.shape[1] < 2:
            shape = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
            raise DataError(
                f"model must return logits of shape (n_samples, n_classes >= 2); got {shape}.",
                argument="model",
            )
        return logits


class MSPDetector(_LogitDetector):
    """Maximum softmax probability baseline: score = ``-max_k softmax(f(x))_k``.

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning logits of shape (n_samples, n_classes).
    batch_size : int, default=256
        Rows per forward pass.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.security._nets import make_net
    >>> det = MSPDetector(make_net("mlp", n_classes=3)).fit(np.zeros((4, 64), np.float32))
    >>> det.score_samples(np.zeros((2, 64), np.float32)).shape
    (2,)

    References
    ----------
    Hendrycks, D., Gimpel, K. "A Baseline for Detecting Misclassified and
    Out-of-Distribution Examples in Neural Networks". ICLR 2017.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {"model": _MODEL, "batch_size": _BATCH}

    def __init__(self, model: Any, *, batch_size: int = 256) -> None:
        self.model = model
        self.batch_size = batch_size

    def _score_batch(self, x: Any) -> Any:
        torch = require_torch()
        return -torch.softmax(self._logits(x), dim=1).max(dim=1).values


class EnergyDetector(_LogitDetector):
    """Energy score: ``-T * logsumexp(f(x) / T)`` (free energy; higher = more OOD).

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning logits.
    temperature : float, default=1.0
        The temperature ``T`` (Liu et al. use 1).
    batch_size : int, default=256
        Rows per forward pass.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.security._nets import make_net
    >>> det = EnergyDetector(make_net("mlp", n_classes=3)).fit(np.zeros((4, 64), np.float32))
    >>> bool(np.isfinite(det.score_samples(np.ones((2, 64), np.float32))).all())
    True

    References
    ----------
    Liu, W., Wang, X., Owens, J., Li, Y. "Energy-based Out-of-distribution Detection".
    NeurIPS 2020.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "model": _MODEL,
        "temperature": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": _BATCH,
    }

    def __init__(self, model: Any, *, temperature: float = 1.0, batch_size: int = 256) -> None:
        self.model = model
        self.temperature = temperature
        self.batch_size = batch_size

    def _score_batch(self, x: Any) -> Any:
        torch = require_torch()
        t = float(self.temperature)
        return -t * torch.logsumexp(self._logits(x) / t, dim=1)


class SplitIntegrateDetector(_TorchDetector):
    """S&I: OOD detection by layer splitting and gradient integration along an adversarial path.

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning logits; used in eval mode (its mode is restored after).
    layers : list of str or None, default=None
        Names (``model.named_modules()``) of the modules at whose outputs the network is
        split. None: every BatchNorm module, or when there is none every Conv/Linear module
        but the last (the head). A model without any such layer raises ModelError.
    steps : int, default=2
        Points on the adversarial attribution path per layer (the authors' code uses 2;
        1 is GAIA-Z).
    alpha : float, default=1/255
        Step of the sign-gradient update of the split feature (the authors' default).
    loss : {"ce", "max"}, default="ce"
        Objective the adversarial step ascends: cross-entropy to the clean prediction, or
        the maximum logit.
    integration : {"multiply", "add"}, default="multiply"
        How the gradients along the path are combined before taking their non-zero pattern.
    batch_size : int, default=256
        Rows per batch.

    Attributes
    ----------
    layers_ : list of str
        The split layers used.
    input_shape_ : tuple of int
        Shape of one input row seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.security._nets import make_net
    >>> net = make_net("mlp", n_classes=3)
    >>> det = SplitIntegrateDetector(net).fit(np.zeros((4, 64), np.float32))
    >>> det.layers_
    ['0', '2']
    >>> s = det.score_samples(np.random.default_rng(0).random((5, 64), dtype=np.float32))
    >>> s.shape, bool(((s >= 0) & (s <= 1)).all())
    ((5,), True)

    References
    ----------
    Zhang, J., Wang, X., Jin, Z., Zhu, Z., Zhou, J., Chen, F., Chen, H. "Splitting &
    Integrating: Out-of-Distribution Detection via Adversarial Gradient Attribution".
    ICML 2025, PMLR 267:76213-76224.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "model": _MODEL,
        "layers": [None, list, tuple],
        "steps": [Interval(numbers.Integral, 1, 100, closed="both")],
        "alpha": [Interval(numbers.Real, 0, None, closed="neither")],
        "loss": [Options({"ce", "max"})],
        "integration": [Options({"multiply", "add"})],
        "batch_size": _BATCH,
    }

    def __init__(
        self,
        model: Any,
        *,
        layers: list[str] | None = None,
        steps: int = 2,
        alpha: float = 1 / 255,
        loss: str = "ce",
        integration: str = "multiply",
        batch_size: int = 256,
    ) -> None:
        self.model = model
        self.layers = layers
        self.steps = steps
        self.alpha = alpha
        self.loss = loss
        self.integration = integration
        self.batch_size = batch_size

    def _prepare(self) -> None:
        self._modules = resolve_layers(self.model, self.layers)
        self.layers_ = [n for n, _ in self._modules]

    def _score_batch(self, x: Any) -> Any:
        ratios = split_integrate_ratios(
            self.model,
            self._modules,
            x,
            steps=int(self.steps),
            alpha=float(self.alpha),
            loss=self.loss,
            integration=self.integration,
        )
        return (ratios**2).mean(dim=1)


class GAIADetector(_TorchDetector):
    """GAIA-Z gradient baseline: the non-zero pattern of clean split-layer gradients.

    The same score as :class:`SplitIntegrateDetector` with one point on the path (no
    adversarial step, no integration): per channel the share of positions where the
    gradient of the maximum logit w.r.t. the layer's output is non-zero, squared and
    averaged over the channels of all split layers.

    Parameters
    ----------
    model : torch.nn.Module
        A classifier returning logits.
    layers : list of str or None, default=None
        Split layers, chosen as for :class:`SplitIntegrateDetector`.
    batch_size : int, default=256
        Rows per batch.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.security._nets import make_net
    >>> det = GAIADetector(make_net("cnn", n_classes=3)).fit(np.zeros((4, 1, 8, 8), np.float32))
    >>> det.layers_
    ['0', '2']

    References
    ----------
    Chen, J. et al. "GAIA: Delving into Gradient-based Attribution Abnormality for
    Out-of-distribution Detection". NeurIPS 2023.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "model": _MODEL,
        "layers": [None, list, tuple],
        "batch_size": _BATCH,
    }

    def __init__(self, model: Any, *, layers: list[str] | None = None, batch_size: int = 256) -> None:
        self.model = model
        self.layers = layers
        self.batch_size = batch_size

    def _prepare(self) -> None:
        self._modules = resolve_layers(self.model, self.layers)
        self.layers_ = [n for n, _ in self._modules]

    def _score_batch(self, x: Any) -> Any:
        ratios = split_integrate_ratios(
            self.model, self._modules, x, steps=1, alpha=1.0, loss="ce", integration="multiply"
        )
        return (ratios**2).mean(dim=1)


@dataclass(frozen=True)
class OODMetrics:
    """AUROC and FPR at 95% TPR of an OOD score on an ID and an OOD sample.

    Attributes
    ----------
    auroc : float
        Probability that a random OOD row scores above a random ID row (ties count half).
    fpr95 : float
        Share of OOD rows accepted as ID at the threshold that accepts 95% of ID rows.
    n_id, n_ood : int
        Sample sizes.

    See Also
    --------
    ood_metrics : builds it.
    """

    auroc: float
    fpr95: float
    n_id: int
    n_ood: int


def _scores(x: Any, name: str) -> np.ndarray:
    arr = check_numeric_array(x, name)
    if arr.ndim != 1:
        raise DataError(
            f"{name} must be 1-dimensional (one score per row), got shape {arr.shape}.", argument=name
        )
    return arr


@validate_params({"tpr": [Interval(numbers.Real, 0, 1, closed="right")]})
def fpr_at_tpr(y_true: Any, y_score: Any, *, tpr: float = 0.95) -> float:
    """False-positive rate at the first threshold whose true-positive rate reaches ``tpr``.

    Parameters
    ----------
    y_true : array-like of shape (n,)
        1 for positives, 0 for negatives (both present).
    y_score : array-like of shape (n,)
        Higher = more positive.
    tpr : float, default=0.95
        Target true-positive rate in (0, 1].

    Returns
    -------
    float
        The smallest false-positive rate over thresholds with TPR >= ``tpr``.

    Examples
    --------
    >>> fpr_at_tpr([1, 1, 0, 0], [0.9, 0.8, 0.85, 0.1], tpr=1.0)
    0.5
    """
    from sklearn.metrics import roc_curve

    yt = check_numeric_array(y_true, "y_true")
    ys = _scores(y_score, "y_score")
    if yt.shape != ys.shape or yt.ndim != 1:
        raise DataError(
            f"y_true and y_score must be 1-dimensional of equal length; got {yt.shape} and {ys.shape}.",
            argument="y_true",
        )
    if not np.isin(yt, (0, 1)).all() or len(np.unique(yt)) != 2:
        raise DataError(
            "y_true must hold both 0 (negatives) and 1 (positives) and nothing else.", argument="y_true"
        )
    fpr, tpr_curve, _ = roc_curve(yt, ys, drop_intermediate=False)
    return float(fpr[np.argmax(tpr_curve >= float(tpr) - 1e-12)])


@validate_params({"tpr": [Interval(numbers.Real, 0, 1, closed="right")]})
def ood_metrics(id_scores: Any, ood_scores: Any, *, tpr: float = 0.95) -> OODMetrics:
    """AUROC and FPR@``tpr`` of OOD scores (higher = more OOD) on an ID and an OOD sample.

    In-distribution is the positive class of the TPR, as in the OOD literature (and the
    S&I paper): FPR95 is the share of OOD rows scoring at or below the threshold that
    keeps 95% of the ID rows.

    Parameters
    ----------
    id_scores, ood_scores : array-like of shape (n_id,), (n_ood,)
        Scores from ``score_samples`` of a detector.
    tpr : float, default=0.95
        The ID acceptance rate at which the FPR is read.

    Returns
    -------
    OODMetrics

    Examples
    --------
    >>> m = ood_metrics([0.1, 0.2, 0.3, 0.4], [0.35, 0.5, 0.6, 0.7])
    >>> m.auroc, m.fpr95
    (0.9375, 0.25)
    """
    a = _scores(id_scores, "id_scores")
    b = _scores(ood_scores, "ood_scores")
    y = np.r_[np.ones(len(a)), np.zeros(len(b))]
    s = -np.r_[a, b]
    return OODMetrics(
        auroc=float(roc_auc_score(1 - y, -s)),
        fpr95=fpr_at_tpr(y, s, tpr=tpr),
        n_id=len(a),
        n_ood=len(b),
    )
