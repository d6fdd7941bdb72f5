"""Concept bottleneck models trained with Concept Preference Optimization (CPO) or BCE.

A concept bottleneck model (CBM, Koh et al. 2020) predicts ``k`` human concepts from the input,
``c_hat = sigmoid(g(x))``, and the task only from them, ``y_hat = f(c_hat)``. The concept
encoder ``g`` is usually trained with binary cross-entropy (BCE) against annotated concepts.
Penaloza et al. (ICML 2025) show that mislabeled concept annotations degrade CBMs and train
``g`` instead with CPO, a Direct Preference Optimization objective on concept *preference
pairs*. Here each concept of each row draws two values from the model's own distribution
``pi_theta(c_j | x)``; when they differ, the one equal to the annotation is preferred::

    L_CPO = - E_{x, j} E_{c_a, c_b ~ pi_theta(c_j | x)} [ 1[c_a != c_b]
            log sigmoid( beta log pi(c_w | x) / pi_ref(c_w)  -  beta log pi(c_l | x) / pi_ref(c_l) ) ]

A pair of equal values carries no preference. The reference ``pi_ref`` is a prior over each
concept (uniform by default, where it cancels). With ``beta = 1`` the loss is stationary at the
concept posterior, and a concept the model is confident about is rarely drawn as a differing
pair, so a mislabeled annotation of it pulls little: the paper's two stated properties. Only the
paper's abstract and introduction could be read offline; docs/explain/cbm.md says what is reconstructed.

Training follows Koh et al.: ``"sequential"`` (encoder on the concept loss, then the task head
on the frozen encoder's concept probabilities), ``"joint"`` (task cross-entropy plus
``concept_weight`` times the concept loss, end to end) or ``"independent"`` (the head on the
annotated concepts). ``architecture="cem"`` swaps the bottleneck for a concept embedding model
(Espinosa Zarlenga et al. 2022: two learned embeddings per concept mixed by its probability,
trained jointly with RandInt interventions), one of the architectures in the paper's comparison.

References
----------
.. [1] Penaloza, Zhang, Charlin, Espinosa Zarlenga. "Addressing Concept Mislabeling in Concept
   Bottleneck Models Through Preference Optimization". ICML 2025 (arXiv 2504.18026).
.. [2] Koh, Nguyen, Tang, Mussmann, Pierson, Kim, Liang. "Concept Bottleneck Models". ICML 2020.
.. [3] Rafailov, Sharma, Mitchell, Ermon, Manning, Finn. "Direct Preference Optimization: Your
   Language Model is Secretly a Reward Model". NeurIPS 2023.
.. [4] Espinosa Zarlenga, Barbiero, Ciravegna, Marra, Giannini, Diligenti, Shams, Precioso,
   Melacci, Weller, Lio, Jamnik. "Concept Embedding Models: Beyond the Accuracy-Explainability
   Trade-Off". NeurIPS 2022.
"""

from __future__ import annotations

import copy
import numbers
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab._adam import Adam
from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab._validation import make_generator
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.explain._cbm_core import (
    PAIRS,
    _CEMEncoder,
    _check_concepts,
    _check_inputs,
    _concept_loss,
    _mlp,
    cpo_loss,
    flip_concepts,
    make_concept_data,
)

__all__ = [
    "ARCHITECTURES",
    "CONCEPT_LOSSES",
    "PAIRS",
    "TRAININGS",
    "ConceptBottleneckModel",
    "cpo_loss",
    "flip_concepts",
    "make_concept_data",
]

ARCHITECTURES = ("cbm", "cem")
CONCEPT_LOSSES = ("cpo", "bce")
TRAININGS = ("sequential", "joint", "independent")


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
    architecture : {"cbm", "cem"}, default="cbm"
        ``"cbm"``: the head reads the concept probabilities. ``"cem"``: a concept embedding
        model (Espinosa Zarlenga et al. 2022): each concept has two learned embeddings (present /
        absent) of size ``embedding_size`` mixed by its probability, and the head reads the
        mixed embeddings; needs ``training="joint"`` and the default MLP encoder (``hidden_dims``).
    embedding_size : int, default=16
        CEM's embedding size per concept (the CEM paper's default).
    intervention_prob : float, default=0.25
        CEM's RandInt: during training each concept's probability is replaced by its annotation
        with this probability (the CEM paper's 0.25), so that test-time interventions work.
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
        The trained task head (on concept probabilities, or on the mixed embeddings for CEM).
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
    >>> X, C, y = make_concept_data(64, random_state=0)
    >>> cbm = ConceptBottleneckModel(hidden_dims=(8,), n_epochs=2).fit(X, C, y)
    >>> cbm.predict_concepts(X[:2]).shape, cbm.predict(X[:2]).shape
    ((2, 8), (2,))
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "concept_loss": [Options(set(CONCEPT_LOSSES))],
        "training": [Options(set(TRAININGS))],
        "beta": [Interval(numbers.Real, 0, None, closed="neither")],
        "pairs": [Options(set(PAIRS))],
        "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
        "architecture": [Options(set(ARCHITECTURES))],
        "embedding_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "intervention_prob": [Interval(numbers.Real, 0, 1, closed="both")],
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
        architecture: str = "cbm",
        embedding_size: int = 16,
        intervention_prob: float = 0.25,
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
        self.architecture = architecture
        self.embedding_size = embedding_size
        self.intervention_prob = intervention_prob
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
        if self.architecture == "cem":
            if self.encoder is not None:
                raise ParameterError(
                    "architecture='cem' builds its own encoder from hidden_dims; pass encoder=None.",
                    argument="encoder",
                )
            return _CEMEncoder([d, *self._widths("hidden_dims")], k, int(self.embedding_size))
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
        if self.architecture == "cem" and self.training != "joint":
            raise ParameterError(
                f"architecture='cem' is trained end to end (its head reads learned embeddings); "
                f"set training='joint' (got {self.training!r}).",
                argument="training",
            )
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
            width = self.n_concepts_ * (int(self.embedding_size) if self.architecture == "cem" else 1)
            self.head_ = _mlp([width, *self._widths("head_hidden_dims"), len(self.classes_)])
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
                        probs = torch.sigmoid(z)
                        if isinstance(self.encoder_, _CEMEncoder):  # RandInt: concepts set to annotations
                            hit = torch.rand(probs.shape, generator=gen) < float(self.intervention_prob)
                            probs = self.encoder_.embed(Xt[idx], torch.where(hit, Ct[idx], probs))
                        ce = torch.nn.functional.cross_entropy(self.head_(probs), yt[idx])
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
        """Concept log-odds ``g(x)``.

        Parameters
        ----------
        X : array-like of shape (n, d)

        Returns
        -------
        ndarray of shape (n, k)
        """
        Xt = self._checked(X)
        with torch.no_grad():
            return self.encoder_(Xt).numpy().astype(np.float64)

    def predict_concept_proba(self, X: Any) -> np.ndarray:
        """Probability of each concept being present.

        Parameters
        ----------
        X : array-like of shape (n, d)

        Returns
        -------
        ndarray of shape (n, k)
        """
        return 1.0 / (1.0 + np.exp(-self.concept_logits(X)))

    def predict_concepts(self, X: Any) -> np.ndarray:
        """Predicted concepts in {0, 1} (probability above 0.5).

        Parameters
        ----------
        X : array-like of shape (n, d)

        Returns
        -------
        ndarray of int, shape (n, k)
        """
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
            if isinstance(self.encoder_, _CEMEncoder):
                probs = self.encoder_.embed(self._checked(X), probs)
            return self.head_(probs).numpy().astype(np.float64)

    def predict_proba(self, X: Any, **kwargs: Any) -> np.ndarray:
        """Class probabilities: the softmax of :meth:`decision_function`.

        Parameters
        ----------
        X : array-like of shape (n, d)
        **kwargs
            ``intervene=`` and ``concepts=``, as in :meth:`decision_function`.

        Returns
        -------
        ndarray of shape (n, n_classes)
        """
        z = self.decision_function(X, **kwargs)
        z = np.exp(z - z.max(1, keepdims=True))
        return z / z.sum(1, keepdims=True)

    def predict(self, X: Any, **kwargs: Any) -> np.ndarray:
        """Predicted task classes.

        Parameters
        ----------
        X : array-like of shape (n, d)
        **kwargs
            ``intervene=`` and ``concepts=``, as in :meth:`decision_function`.

        Returns
        -------
        ndarray of shape (n,)
            Entries of :attr:`classes_`.
        """
        best = self.decision_function(X, **kwargs).argmax(1)
        return self.classes_[best]

    def concept_accuracy(self, X: Any, C: Any) -> float:
        """Share of concept entries predicted right.

        Parameters
        ----------
        X : array-like of shape (n, d)
        C : array-like of shape (n, k)
            Reference concepts in {0, 1} (clean ones, to measure what the model learned).

        Returns
        -------
        float
        """
        pred = self.predict_concepts(X)
        Ca = _check_concepts(C, "C", len(pred))
        if Ca.shape[1] != self.n_concepts_:
            raise DataError(f"C must have {self.n_concepts_} columns; got {Ca.shape[1]}.", argument="C")
        return float(np.mean(pred == Ca))
