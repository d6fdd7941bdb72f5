"""Concept bottleneck models trained with Concept Preference Optimization (CPO) or BCE.

A concept bottleneck model (CBM, Koh et al. 2020) predicts ``k`` human concepts from the input,
``c_hat = sigmoid(g(x))``, and the task only from them, ``y_hat = f(c_hat)``. The concept
encoder ``g`` is usually trained with binary cross-entropy (BCE) against annotated concepts.
Penaloza et al. (ICML 2025) show that mislabeled concept annotations degrade CBMs and train
``g`` instead with CPO, a Direct Preference Optimization objective on concept *preference
pairs*: the annotated value of a concept is preferred over a value sampled from the model's
own concept distribution ``pi_theta(c | x)``::

    L_CPO = - E_{x, j} E_{c_l ~ pi_theta(c_j | x)} [ 1[c_l != c_w]
            log sigmoid( beta log pi(c_w | x) / pi_ref(c_w)  -  beta log pi(c_l | x) / pi_ref(c_l) ) ]

with ``c_w`` the annotation of concept ``j``. A pair whose sample equals the annotation carries
no preference (its log-ratio difference is 0, its gradient 0). The reference ``pi_ref`` is a
prior over each concept (uniform by default, where it cancels). See docs/explain/cbm.md for
what is and is not taken from the paper.

Training follows Koh et al.: ``"sequential"`` (encoder on the concept loss, then the task head
on the frozen encoder's concept probabilities), ``"joint"`` (task cross-entropy plus
``concept_weight`` times the concept loss, end to end) or ``"independent"`` (the head on the
annotated concepts).

References
----------
.. [1] Penaloza, Zhang, Charlin, Espinosa Zarlenga. "Addressing Concept Mislabeling in Concept
   Bottleneck Models Through Preference Optimization". ICML 2025 (arXiv 2504.18026).
.. [2] Koh, Nguyen, Tang, Mussmann, Pierson, Kim, Liang. "Concept Bottleneck Models". ICML 2020.
.. [3] Rafailov, Sharma, Mitchell, Ermon, Manning, Finn. "Direct Preference Optimization: Your
   Language Model is Secretly a Reward Model". NeurIPS 2023.
"""

from __future__ import annotations

import copy
import numbers
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab._adam import Adam
from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError

__all__ = [
    "CONCEPT_LOSSES",
    "PAIRS",
    "TRAININGS",
    "ConceptBottleneckModel",
    "cpo_loss",
    "flip_concepts",
    "make_concept_data",
]

CONCEPT_LOSSES = ("cpo", "bce")
TRAININGS = ("sequential", "joint", "independent")
PAIRS = ("model", "annotation")


# ---------------------------------------------------------------------------------------- losses
def cpo_loss(
    logits: torch.Tensor,
    concepts: torch.Tensor,
    *,
    beta: float = 1.0,
    pairs: str = "model",
    n_samples: int = 1,
    reference_logits: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Concept Preference Optimization loss of concept logits against annotated 0/1 concepts.

    Each concept of each row is a preference problem between its two values. A pair is drawn
    (``pairs="model"``: two values from the model's Bernoulli ``sigmoid(logits)``, the one equal
    to the annotation preferred; ``pairs="annotation"``: the annotation preferred over one value
    from the model). A pair of equal values carries no preference and adds 0; otherwise, with
    ``s = 2 c_w - 1`` for the preferred value ``c_w``, DPO's log-ratio difference is
    ``s * (logit - reference_logit)`` and the pair's loss ``softplus(-beta * s * (logit -
    reference_logit))``. The draws are not differentiated (DPO treats its pairs as data); the
    loss is averaged over ``n_samples`` draws, rows and concepts.

    With ``pairs="model"`` and ``beta = 1`` the expected gradient vanishes exactly when
    ``sigmoid(logit)`` equals the probability that the annotation is 1 (the posterior), and a
    concept the model is confident about (either way) is rarely drawn as a differing pair, so a
    mislabeled annotation of it pushes little. ``pairs="annotation"`` stops at
    ``logit(q) / (1 + beta)`` and pushes on such a concept as hard as BCE.

    Parameters
    ----------
    logits : torch.Tensor of shape (n, k)
        Concept logits ``g(x)`` (log-odds of each concept being present).
    concepts : torch.Tensor of shape (n, k)
        Annotated concepts in {0, 1} (possibly mislabeled).
    beta : float, default=1.0
        DPO's inverse temperature on the log-ratios.
    pairs : {"model", "annotation"}, default="model"
        Where the compared values come from (see above).
    n_samples : int, default=1
        Pairs drawn per concept and row.
    reference_logits : torch.Tensor broadcastable to (n, k), optional
        Log-odds of the reference ``pi_ref``; ``None`` is the uniform prior (log-odds 0).
    generator : torch.Generator, optional
        Drives the draws.

    Returns
    -------
    torch.Tensor
        Scalar loss.

    References
    ----------
    Penaloza et al., "Addressing Concept Mislabeling in Concept Bottleneck Models Through
    Preference Optimization", ICML 2025; Rafailov et al., "Direct Preference Optimization",
    NeurIPS 2023.

    Examples
    --------
    >>> import torch
    >>> z, c = torch.tensor([[4.0, -4.0]]), torch.tensor([[1.0, 1.0]])
    >>> g = torch.Generator().manual_seed(0)
    >>> round(float(cpo_loss(z, c, n_samples=4000, generator=g)), 2)  # confident: little pull
    0.08
    >>> round(float(cpo_loss(z, c, pairs="annotation", n_samples=4000, generator=g)), 2)
    1.98
    """
    if not isinstance(logits, torch.Tensor) or not isinstance(concepts, torch.Tensor):
        raise DataError("logits and concepts must be torch tensors of the same shape.", argument="logits")
    if logits.shape != concepts.shape:
        raise DataError(
            f"concepts must have the shape of logits {tuple(logits.shape)}; got {tuple(concepts.shape)}.",
            argument="concepts",
        )
    if not isinstance(beta, numbers.Real) or isinstance(beta, bool) or not beta > 0:
        raise ParameterError(f"beta must be a positive number; got {beta!r}.", argument="beta")
    if pairs not in PAIRS:
        raise ParameterError(f"pairs must be one of {PAIRS}; got {pairs!r}.", argument="pairs")
    if not isinstance(n_samples, numbers.Integral) or isinstance(n_samples, bool) or n_samples < 1:
        raise ParameterError(f"n_samples must be an integer >= 1; got {n_samples!r}.", argument="n_samples")
    c = concepts.to(logits.dtype)
    margin = (2 * c - 1) * (logits if reference_logits is None else logits - reference_logits)
    pair_loss = torch.nn.functional.softplus(-float(beta) * margin)
    with torch.no_grad():
        p = torch.sigmoid(logits)
        shape = (int(n_samples), *logits.shape)
        first = torch.rand(shape, generator=generator, dtype=logits.dtype) < p
        other = (
            c.bool()
            if pairs == "annotation"
            else torch.rand(shape, generator=generator, dtype=logits.dtype) < p
        )
        differs = (first != other).to(logits.dtype).mean(0)
    return (differs * pair_loss).mean()


def _concept_loss(est: Any, logits: torch.Tensor, concepts: torch.Tensor, gen: Any) -> torch.Tensor:
    if est.concept_loss == "bce":
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, concepts)
    return cpo_loss(logits, concepts, beta=est.beta, pairs=est.pairs, n_samples=est.n_samples, generator=gen)


# ---------------------------------------------------------------------------------------- data
@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_features": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_concepts": [Interval(numbers.Integral, 4, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_concept_data(
    n_samples: int = 1000, *, n_features: int = 16, n_concepts: int = 8, random_state: Any = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Synthetic concept data: Gaussian inputs, threshold concepts, a task that is a rule on concepts.

    ``X ~ N(0, I_d)``; concept ``j`` is ``1[x . w_j > 0]`` with ``w_j ~ N(0, I_d / d)`` drawn once
    from ``random_state`` (so the concepts are exact functions of ``x``: any error in the
    annotations is label noise); the task has 4 classes, ``y = 2 c_0 + 1[c_1 + c_2 + c_3 >= 2]``
    (concepts ``4..k-1`` are present but irrelevant to the task).

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int, default=16
    n_concepts : int, default=8
        At least 4.
    random_state : None, int or numpy Generator, default=0

    Returns
    -------
    X : ndarray of float32, shape (n_samples, n_features)
    C : ndarray of float32 in {0, 1}, shape (n_samples, n_concepts)
        The true concepts.
    y : ndarray of int64, shape (n_samples,)

    Examples
    --------
    >>> X, C, y = make_concept_data(5, random_state=0)
    >>> X.shape, C.shape, sorted(set(y) <= {0, 1, 2, 3} for _ in [0])
    ((5, 16), (5, 8), [True])
    """
    rng = make_generator(random_state)
    W = rng.normal(size=(n_features, n_concepts)) / np.sqrt(n_features)
    X = rng.normal(size=(n_samples, n_features))
    C = (X @ W > 0).astype(np.float32)
    y = (2 * C[:, 0] + (C[:, 1:4].sum(1) >= 2)).astype(np.int64)
    return X.astype(np.float32), C, y


@validate_params(
    {
        "rate": [Interval(numbers.Real, 0, 1, closed="both")],
        "random_state": ["random_state"],
    }
)
def flip_concepts(C: Any, rate: float, *, random_state: Any = None) -> np.ndarray:
    """Mislabel concept annotations: flip each 0/1 entry independently with probability ``rate``.

    The symmetric concept noise injected in the paper's robustness experiments.

    Parameters
    ----------
    C : array-like of shape (n, k)
        Concepts in {0, 1}.
    rate : float in [0, 1]
        Flip probability.
    random_state : None, int or numpy Generator

    Returns
    -------
    ndarray of float32, shape (n, k)

    Examples
    --------
    >>> flip_concepts([[0, 1], [1, 1]], 1.0).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    arr = _check_concepts(C, "C")
    flips = make_generator(random_state).random(arr.shape) < float(rate)
    return np.where(flips, 1 - arr, arr).astype(np.float32)


# ---------------------------------------------------------------------------------------- checks
def _check_inputs(X: Any, name: str = "X") -> np.ndarray:
    arr = check_numeric_array(X, name, ndim=2, min_rows=1, dtype=np.float32)
    if arr.shape[1] == 0:
        raise DataError(
            f"{name} must have at least one feature column; got shape {arr.shape}.", argument=name
        )
    return arr


def _check_concepts(C: Any, name: str = "C", n: int | None = None) -> np.ndarray:
    arr = check_numeric_array(C, name, ndim=2, min_rows=1, dtype=np.float64)
    if arr.shape[1] == 0 or not np.isin(arr, (0.0, 1.0)).all():
        raise DataError(
            f"{name} must hold one 0/1 column per concept (1 = present); binarise graded annotations first.",
            argument=name,
        )
    if n is not None and len(arr) != n:
        raise DataError(f"{name} must have one row per row of X ({n}); got {len(arr)}.", argument=name)
    return arr.astype(np.float32)


def _mlp(sizes: list[int]) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------- model
class ConceptBottleneckModel(ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """Concept bottleneck classifier whose concept encoder is trained with CPO (default) or BCE.

    Parameters
    ----------
    concept_loss : {"cpo", "bce"}, default="cpo"
        Loss of the concept encoder against the annotated concepts: Concept Preference
        Optimization (:func:`cpo_loss`) or binary cross-entropy (the usual CBM).
    training : {"sequential", "joint", "independent"}, default="sequential"
        Koh et al.'s regimes: encoder first, then the head on its concept probabilities
        (``"sequential"``); both at once on ``task CE + concept_weight * concept loss``
        (``"joint"``); or the head on the annotated concepts (``"independent"``).
    beta : float, default=1.0
        CPO's inverse temperature (ignored by BCE).
    pairs : {"model", "annotation"}, default="model"
        CPO's preference pairs: two values drawn from the model, ranked by the annotation, or
        the annotation against one drawn value (see :func:`cpo_loss`).
    n_samples : int, default=1
        CPO's pairs drawn per concept and row.
    concept_weight : float, default=1.0
        Weight of the concept loss in joint training.
    encoder : torch.nn.Module, optional
        The user's concept encoder, mapping a float batch ``(n, d)`` to ``k`` logits; it is
        copied, not trained in place. ``None`` builds an MLP of ``hidden_dims``.
    hidden_dims : tuple of int, default=(64, 64)
        Hidden widths of the default encoder.
    head_hidden_dims : tuple of int, default=()
        Hidden widths of the task head on the concepts; ``()`` is a linear head (the
        interpretable choice).
    n_epochs : int, default=30
        Passes over the data per stage.
    learning_rate : float, default=1e-2
        Adam's learning rate.
    batch_size : int, default=64
    random_state : None, int or numpy Generator, default=0
        Seeds the weights, the batch order and CPO's draws.

    Attributes
    ----------
    encoder_ : torch.nn.Module
        The trained concept encoder (logits).
    head_ : torch.nn.Module
        The trained task head (on concept probabilities).
    classes_ : ndarray
    n_concepts_ : int
    n_features_in_ : int
    losses_ : ndarray
        Training loss per step (all stages, in order).

    References
    ----------
    .. [1] Penaloza, Zhang, Charlin, Espinosa Zarlenga. "Addressing Concept Mislabeling in
       Concept Bottleneck Models Through Preference Optimization". ICML 2025.
    .. [2] Koh et al. "Concept Bottleneck Models". ICML 2020.

    Examples
    --------
    >>> X, C, y = make_concept_data(300, random_state=0)
    >>> cbm = ConceptBottleneckModel(n_epochs=5).fit(X, C, y)
    >>> cbm.predict_concepts(X[:2]).shape, cbm.predict(X[:2]).shape
    ((2, 8), (2,))
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "concept_loss": [Options(set(CONCEPT_LOSSES))],
        "training": [Options(set(TRAININGS))],
        "beta": [Interval(numbers.Real, 0, None, closed="neither")],
        "pairs": [Options(set(PAIRS))],
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "concept_weight": [Interval(numbers.Real, 0, None, closed="left")],
        "encoder": "no_validation",
        "hidden_dims": [tuple, list],
        "head_hidden_dims": [tuple, list],
        "n_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        concept_loss: str = "cpo",
        training: str = "sequential",
        beta: float = 1.0,
        pairs: str = "model",
        n_samples: int = 1,
        concept_weight: float = 1.0,
        encoder: Any = None,
        hidden_dims: tuple[int, ...] = (64, 64),
        head_hidden_dims: tuple[int, ...] = (),
        n_epochs: int = 30,
        learning_rate: float = 1e-2,
        batch_size: int = 64,
        random_state: Any = 0,
    ) -> None:
        self.concept_loss = concept_loss
        self.training = training
        self.beta = beta
        self.pairs = pairs
        self.n_samples = n_samples
        self.concept_weight = concept_weight
        self.encoder = encoder
        self.hidden_dims = hidden_dims
        self.head_hidden_dims = head_hidden_dims
        self.n_epochs = n_epochs
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.random_state = random_state

    # ------------------------------------------------------------ fit
    def _widths(self, name: str) -> list[int]:
        dims = getattr(self, name)
        if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and int(d) >= 1 for d in dims):
            raise ParameterError(f"{name} must be a tuple of positive integers; got {dims!r}.", argument=name)
        return [int(d) for d in dims]

    def _build_encoder(self, d: int, k: int) -> torch.nn.Module:
        if self.encoder is None:
            return _mlp([d, *self._widths("hidden_dims"), k])
        if not isinstance(self.encoder, torch.nn.Module):
            raise ModelError(
                f"encoder must be a torch.nn.Module mapping (n, {d}) floats to {k} concept logits; "
                f"got {type(self.encoder).__name__}.",
                argument="encoder",
            )
        enc = copy.deepcopy(self.encoder)
        try:
            with torch.no_grad():
                out = enc(torch.zeros(2, d))
        except RuntimeError as exc:
            raise ModelError(f"encoder does not take (n, {d}) inputs ({exc}).", argument="encoder") from None
        if tuple(out.shape) != (2, k):
            raise ModelError(
                f"encoder must return (n, {k}) concept logits (one per column of C); got {tuple(out.shape)}.",
                argument="encoder",
            )
        return enc

    def fit(self, X: Any, C: Any, y: Any) -> ConceptBottleneckModel:
        """Train the concept encoder and the task head.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Inputs (finite numbers).
        C : array-like of shape (n, k)
            Annotated concepts in {0, 1} (the annotations may be mislabeled: that is CPO's case).
        y : array-like of shape (n,)
            Task labels (any hashable classes; at least two).

        Returns
        -------
        ConceptBottleneckModel
            ``self``, fitted.
        """
        self._validate_params()
        Xa = _check_inputs(X)
        Ca = _check_concepts(C, "C", len(Xa))
        y_arr = np.asarray(y)
        if y_arr.ndim != 1 or len(y_arr) != len(Xa):
            raise DataError(
                f"y must be 1-D with one label per row of X ({len(Xa)}); got {y_arr.shape}.", argument="y"
            )
        self.classes_, y_idx = np.unique(y_arr, return_inverse=True)
        if len(self.classes_) < 2:
            raise DataError("y must hold at least two classes; got one.", argument="y")
        self.n_features_in_, self.n_concepts_ = Xa.shape[1], Ca.shape[1]
        seed = int(make_generator(self.random_state).integers(2**62))
        gen = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.encoder_ = self._build_encoder(self.n_features_in_, self.n_concepts_)
            self.head_ = _mlp([self.n_concepts_, *self._widths("head_hidden_dims"), len(self.classes_)])
        Xt, Ct, yt = torch.as_tensor(Xa), torch.as_tensor(Ca), torch.as_tensor(y_idx.astype(np.int64))
        losses: list[float] = []
        if self.training == "joint":
            self._train(Xt, Ct, yt, gen, losses, concept=True, task=True)
        else:
            self._train(Xt, Ct, yt, gen, losses, concept=True, task=False)
            with torch.no_grad():
                inputs = Ct if self.training == "independent" else torch.sigmoid(self.encoder_(Xt))
            self._train(inputs, Ct, yt, gen, losses, concept=False, task=True)
        self.losses_ = np.asarray(losses)
        return self

    def _train(
        self,
        Xt: torch.Tensor,
        Ct: torch.Tensor,
        yt: torch.Tensor,
        gen: torch.Generator,
        losses: list[float],
        *,
        concept: bool,
        task: bool,
    ) -> None:
        """One stage: concept loss on the encoder and/or task cross-entropy (on the head's input)."""
        params = (list(self.encoder_.parameters()) if concept else []) + (
            list(self.head_.parameters()) if task else []
        )
        opt = Adam(params, lr=float(self.learning_rate))
        bs, cw = int(self.batch_size), float(self.concept_weight)
        for _ in range(int(self.n_epochs)):
            order = torch.randperm(len(Xt), generator=gen)
            for s in range(0, len(Xt), bs):
                idx = order[s : s + bs]
                if concept:
                    z = self.encoder_(Xt[idx])
                    loss = _concept_loss(self, z, Ct[idx], gen)
                    if task:
                        ce = torch.nn.functional.cross_entropy(self.head_(torch.sigmoid(z)), yt[idx])
                        loss = ce + cw * loss
                else:  # the head alone, on fixed concept inputs
                    loss = torch.nn.functional.cross_entropy(self.head_(Xt[idx]), yt[idx])
                opt.step(torch.autograd.grad(loss, params))
                losses.append(float(loss.detach()))

    # ------------------------------------------------------------ predict
    def _checked(self, X: Any) -> torch.Tensor:
        if not hasattr(self, "encoder_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit(X, C, y) first.")
        arr = _check_inputs(X)
        if arr.shape[1] != self.n_features_in_:
            raise DataError(
                f"X must have {self.n_features_in_} columns (as in fit); got {arr.shape[1]}.", argument="X"
            )
        return torch.as_tensor(arr)

    def concept_logits(self, X: Any) -> np.ndarray:
        """Concept log-odds ``g(x)``, shape ``(n, k)``."""
        Xt = self._checked(X)
        with torch.no_grad():
            return self.encoder_(Xt).numpy().astype(np.float64)

    def predict_concept_proba(self, X: Any) -> np.ndarray:
        """Probability of each concept being present, shape ``(n, k)``."""
        return 1.0 / (1.0 + np.exp(-self.concept_logits(X)))

    def predict_concepts(self, X: Any) -> np.ndarray:
        """Predicted concepts in {0, 1}, shape ``(n, k)``."""
        return (self.concept_logits(X) > 0).astype(np.int64)

    def decision_function(self, X: Any, *, intervene: Any = None, concepts: Any = None) -> np.ndarray:
        """Task logits from the predicted concepts, optionally with some concepts set by a user.

        Parameters
        ----------
        X : array-like of shape (n, d)
        intervene : array-like of bool, shape (k,) or (n, k), optional
            Concepts to replace (a test-time intervention: an expert corrects them).
        concepts : array-like of shape (n, k), optional
            The 0/1 values to put in place of the intervened concepts.

        Returns
        -------
        ndarray of shape (n, n_classes)
        """
        probs = torch.as_tensor(self.predict_concept_proba(X).astype(np.float32))
        if intervene is not None or concepts is not None:
            if intervene is None or concepts is None:
                raise ParameterError(
                    "pass both intervene= (which concepts) and concepts= (their values).",
                    argument="intervene" if intervene is None else "concepts",
                )
            Cv = torch.as_tensor(_check_concepts(concepts, "concepts", len(probs)))
            if Cv.shape[1] != self.n_concepts_:
                raise DataError(
                    f"concepts must have {self.n_concepts_} columns; got {Cv.shape[1]}.", argument="concepts"
                )
            mask = np.asarray(intervene)
            if mask.dtype != bool or mask.shape not in ((self.n_concepts_,), tuple(probs.shape)):
                raise ParameterError(
                    f"intervene must be a bool mask of shape ({self.n_concepts_},) or {tuple(probs.shape)}; "
                    "True marks a concept to replace.",
                    argument="intervene",
                )
            probs = torch.where(torch.as_tensor(mask), Cv, probs)
        with torch.no_grad():
            return self.head_(probs).numpy().astype(np.float64)

    def predict_proba(self, X: Any, **kwargs: Any) -> np.ndarray:
        """Softmax of :meth:`decision_function` (same keyword arguments)."""
        z = self.decision_function(X, **kwargs)
        z = np.exp(z - z.max(1, keepdims=True))
        return z / z.sum(1, keepdims=True)

    def predict(self, X: Any, **kwargs: Any) -> np.ndarray:
        """Predicted task classes (same keyword arguments as :meth:`decision_function`)."""
        best = self.decision_function(X, **kwargs).argmax(1)
        return self.classes_[best]

    def concept_accuracy(self, X: Any, C: Any) -> float:
        """Share of concept entries predicted right against ``C`` (n, k)."""
        pred = self.predict_concepts(X)
        Ca = _check_concepts(C, "C", len(pred))
        if Ca.shape[1] != self.n_concepts_:
            raise DataError(f"C must have {self.n_concepts_} columns; got {Ca.shape[1]}.", argument="C")
        return float(np.mean(pred == Ca))
