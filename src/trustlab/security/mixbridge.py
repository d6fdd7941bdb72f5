"""MixBridge: heterogeneous backdoors in image-to-image Schrödinger bridges, by Divide-and-Merge.

Qin et al. (ICML 2025) show that a diffusion Schrödinger bridge (I2SB,
:mod:`trustlab.vision.bridge`) takes a backdoor by plain training on *poisoned pairs*
(input stamped with a trigger, target an attacker's image), with no change to the SDE; that
one bridge trained on a benign task and several triggers at once follows a geometric mean of
the task distributions and loses attack success or fidelity (conflict); and that
*Divide-and-Merge* avoids it: one expert bridge per task trained apart (Divide), merged by a
router that weighs the experts' outputs from the input image (Merge), the router kept near
uniform by the *Weight Reallocation Scheme* (WRS) so that no expert stands out (stealth).
See docs/security/mixbridge.md.

References
----------
S. Qin, Z. Yang, S. Bao, S. Wang, Q. Xu, Q. Huang, "MixBridge: Heterogeneous Image-to-Image
Backdoor Attack through Mixture of Schrödinger Bridges", ICML 2025.
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from trustlab._param_validation import Interval, ParamsValidationMixin, validate_params
from trustlab.errors import NotFittedError, ParameterError
from trustlab.security._mixbridge_merge import MixtureOfBridges, merge_bridges, train_router, wrs_penalty
from trustlab.security._mixbridge_poison import (
    CORNERS,
    PoisonedPairs,
    _corners,
    _target_sets,
    nearest_targets,
    poison_pairs,
    poison_rate_pairs,
    stamp_trigger,
)
from trustlab.security.mixbridge_metrics import fid_like, lab_features, target_similarity
from trustlab.vision.bridge import I2SBSchedule, bridge_sample, check_pairs, train_bridge
from trustlab.vision.classifiers import check_model, require_torch

__all__ = [
    "CORNERS",
    "BridgeBackdoorReport",
    "MixBridge",
    "MixtureOfBridges",
    "PoisonedPairs",
    "evaluate_bridge_backdoor",
    "merge_bridges",
    "nearest_targets",
    "poison_pairs",
    "poison_rate_pairs",
    "stamp_trigger",
    "train_router",
    "wrs_penalty",
]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]
_RATE = [Interval(numbers.Real, 0, None, closed="neither")]
_UNIT = [Interval(numbers.Real, 0, 1, closed="both")]


@dataclass(frozen=True)
class BridgeBackdoorReport:
    """Utility, specificity and stealth of a (possibly backdoored) bridge, as the paper measures them.

    Attributes
    ----------
    benign_mse : float
        Mean squared error (pixels in [0, 1]) of the benign outputs to the clean images.
    backdoor_mse : tuple of float
        Per trigger, MSE of the triggered outputs to the intended targets (:func:`nearest_targets`).
    attack_success : tuple of float
        Per trigger, the share of triggered outputs within ``threshold`` MSE of some target.
    router_entropy : tuple of float or None
        For a mixture, per task (benign first) the mean Shannon entropy (nats) of the router
        weights; ``log K`` is uniform (most stealthy). None for a single network.
    n : int
        Images per task.
    benign_fid : float or None
        With ``features``: the FID-like distance of the benign outputs to the clean images
        (:func:`~trustlab.security.mixbridge_metrics.fid_like`).
    target_similarity : tuple of float or None
        With ``features``: per trigger, the mean feature cosine of the triggered outputs to the
        intended targets (:func:`~trustlab.security.mixbridge_metrics.target_similarity`).

    See Also
    --------
    evaluate_bridge_backdoor : builds it.
    """

    benign_mse: float
    backdoor_mse: tuple[float, ...]
    attack_success: tuple[float, ...]
    router_entropy: tuple[float, ...] | None
    n: int
    benign_fid: float | None = None
    target_similarity: tuple[float, ...] | None = None


@validate_params({"size": _POS_INT, "value": _UNIT, "threshold": _RATE, "nfe": _POS_INT})
def evaluate_bridge_backdoor(
    model: Any,
    X0: Any,
    X1: Any,
    targets: Any,
    *,
    corners: Any = None,
    size: int = 2,
    value: float = 0.5,
    threshold: float = 0.01,
    nfe: int = 10,
    schedule: I2SBSchedule | None = None,
    random_state: Any = 0,
    features: Any = None,
) -> BridgeBackdoorReport:
    """Sample a bridge on clean and triggered inputs; report benign MSE, backdoor MSE, ASR and entropy.

    The paper scores specificity by MSE and by CLIP similarity above 0.7 (ASR); with no CLIP
    model for 8x8 images, success here is an output within ``threshold`` MSE of one of the
    trigger's target images.

    Parameters
    ----------
    model : torch.nn.Module
        A bridge network (``model(x, t)``) or a :func:`MixtureOfBridges`.
    X0, X1 : array-like of shape (n, C, H, W)
        Held-out benign pairs in [0, 1].
    targets : list of array-like
        Trigger ``k``'s target images.
    corners, size, value
        The triggers, as in :func:`poison_pairs`.
    threshold : float > 0, default=0.01
        Success radius (MSE, pixels in [0, 1]; RMSE 0.1).
    nfe : int, default=10
        Sampling steps (:func:`~trustlab.vision.bridge.bridge_sample`).
    schedule : I2SBSchedule, optional
    random_state : None, int or numpy.random.Generator, default=0
    features : None, "lab" or callable, default=None
        Also report the paper's feature metrics (FID of the benign outputs, CLIP-type similarity
        to the targets) on these features: ``"lab"`` for the tiny-CLIP image tower
        (:func:`~trustlab.security.mixbridge_metrics.lab_features`), or any callable
        images -> ``(n, p)`` array. None skips them.

    Returns
    -------
    BridgeBackdoorReport

    Examples
    --------
    >>> from trustlab.security.mixbridge_lab import digits_backdoor_targets, digits_models, digits_sr_pairs
    >>> single, mixbridge = digits_models()  # shipped lab bridges
    >>> X0, X1 = digits_sr_pairs("test", 8)
    >>> r = evaluate_bridge_backdoor(mixbridge, X0, X1, digits_backdoor_targets(), nfe=2)
    >>> r.n, len(r.attack_success), len(r.router_entropy)  # benign + 3 triggers
    (8, 3, 4)
    """
    torch = require_torch()
    check_model(model)
    x0, x1 = (((t + 1) / 2).numpy() for t in check_pairs(X0, X1))
    sets = _target_sets(targets, x0.shape[1:])
    cs = _corners(corners, len(sets))
    if not (features is None or callable(features) or (isinstance(features, str) and features == "lab")):
        raise ParameterError(
            f"features must be None, 'lab' or a callable images -> (n, p) array; got {features!r}.",
            argument="features",
        )
    feat = lab_features if isinstance(features, str) else features
    kw = {"nfe": nfe, "schedule": schedule, "random_state": random_state}
    out = bridge_sample(model, x1, **kw)
    benign = float(((out - x0) ** 2).mean())
    fid = None if feat is None else fid_like(out, x0, features=feat)
    bd_mse, asr, sim, inputs = [], [], [], [x1]
    for tg, c in zip(sets, cs, strict=True):
        xin = stamp_trigger(x1, corner=c, size=size, value=value)
        inputs.append(xin)
        out = bridge_sample(model, xin, **kw)
        intended = nearest_targets(x0, tg)
        bd_mse.append(float(((out - intended) ** 2).mean()))
        if feat is not None:
            sim.append(target_similarity(out, intended, features=feat))
        d = ((out.reshape(len(out), 1, -1) - tg.reshape(1, len(tg), -1)) ** 2).mean(-1)
        asr.append(float((d.min(1) < threshold).mean()))
    entropy = None
    if hasattr(model, "weights"):
        with torch.no_grad():
            ws = [model.weights(torch.as_tensor(a) * 2 - 1).numpy() for a in inputs]
        entropy = tuple(float(-(w * np.log(np.clip(w, 1e-12, None))).sum(1).mean()) for w in ws)
    return BridgeBackdoorReport(
        benign, tuple(bd_mse), tuple(asr), entropy, len(x0), fid, tuple(sim) if feat is not None else None
    )


class MixBridge(ParamsValidationMixin, BaseEstimator):
    """Divide-and-Merge heterogeneous backdoor attack on an image-to-image bridge (MixBridge).

    ``fit`` poisons the benign pairs with one trigger per target set (:func:`poison_pairs`),
    trains one expert bridge per task on that task's pairs alone (Divide), pre-trains the
    router on the inputs (:func:`train_router`) and merges and fine-tunes them with the WRS
    penalty (:func:`merge_bridges`). ``transform`` translates inputs with the merged bridge.

    Parameters
    ----------
    network : torch.nn.Module
        The bridge network ``net(x, t)`` every expert starts from (deep-copied per task; the
        experts differ by their data and seeds).
    router : torch.nn.Module, optional
        Input images in [0, 1] to ``K + 1`` logits; default the lab's small CNN
        (:func:`~trustlab.vision.make_classifier` ``("cnn", width=8)``).
    expert_steps, router_steps, merge_steps : int, default=(300, 200, 50)
        Adam steps of each expert, of the router's pre-training and of the Merge (the paper:
        2,500, 15,000 and 1,000 at ImageNet scale).
    lr, merge_lr : float, default=(2e-3, 5e-4)
    wrs : float >= 0, default=1.0
        WRS weight (0: no reallocation).
    trigger_size : int, default=2
    trigger_value : float, default=0.5
    corners : sequence of str, optional
        Default the first ``K`` of :data:`CORNERS`.
    batch_size : int, default=64
    schedule : I2SBSchedule, optional
    random_state : int, default=0

    Attributes
    ----------
    experts_ : list of torch.nn.Module
        The Divide stage's bridges (benign first).
    model_ : torch.nn.Module
        The merged :func:`MixtureOfBridges`.
    n_triggers_ : int

    References
    ----------
    S. Qin et al., "MixBridge: Heterogeneous Image-to-Image Backdoor Attack through Mixture of
    Schrödinger Bridges", ICML 2025.

    Examples
    --------
    >>> import torch
    >>> from trustlab.security.mixbridge_lab import digits_backdoor_targets, digits_sr_pairs
    >>> class Net(torch.nn.Module):  # any net(x, t); a real one is a small UNet
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.conv = torch.nn.Conv2d(1, 1, 3, padding=1)
    ...     def forward(self, x, t):
    ...         return self.conv(x)
    >>> X0, X1 = digits_sr_pairs("train", 16)
    >>> attack = MixBridge(Net(), expert_steps=2, router_steps=2, merge_steps=1)
    >>> attack = attack.fit(X0, X1, digits_backdoor_targets(2))
    >>> len(attack.experts_), attack.transform(X1[:2], nfe=2).shape
    (4, (2, 1, 8, 8))
    """

    _parameter_constraints = {  # noqa: RUF012 - as scikit-learn declares them
        "expert_steps": _POS_INT,
        "router_steps": _POS_INT,
        "merge_steps": _POS_INT,
        "lr": _RATE,
        "merge_lr": _RATE,
        "wrs": [Interval(numbers.Real, 0, None, closed="left")],
        "trigger_size": _POS_INT,
        "trigger_value": _UNIT,
        "batch_size": _POS_INT,
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        network: Any,
        *,
        router: Any = None,
        expert_steps: int = 300,
        router_steps: int = 200,
        merge_steps: int = 50,
        lr: float = 2e-3,
        merge_lr: float = 5e-4,
        wrs: float = 1.0,
        trigger_size: int = 2,
        trigger_value: float = 0.5,
        corners: Any = None,
        batch_size: int = 64,
        schedule: I2SBSchedule | None = None,
        random_state: int = 0,
    ) -> None:
        self.network = network
        self.router = router
        self.expert_steps = expert_steps
        self.router_steps = router_steps
        self.merge_steps = merge_steps
        self.lr = lr
        self.merge_lr = merge_lr
        self.wrs = wrs
        self.trigger_size = trigger_size
        self.trigger_value = trigger_value
        self.corners = corners
        self.batch_size = batch_size
        self.schedule = schedule
        self.random_state = random_state

    def poison(self, X0: Any, X1: Any, targets: Any) -> PoisonedPairs:
        """The poisoned training pairs this attack uses (:func:`poison_pairs` with its triggers).

        Parameters
        ----------
        X0, X1, targets
            As in :meth:`fit`.

        Returns
        -------
        PoisonedPairs
        """
        return poison_pairs(
            X0, X1, targets, corners=self.corners, size=self.trigger_size, value=self.trigger_value
        )

    def fit(self, X0: Any, X1: Any, targets: Any) -> MixBridge:
        """Divide (an expert per task) and Merge (router + WRS) on the benign pairs and targets.

        Parameters
        ----------
        X0, X1 : array-like of shape (n, C, H, W)
            Benign pairs (clean target, degraded input) in [0, 1].
        targets : list of array-like of shape (m_k, C, H, W)
            One set of backdoor target images per trigger.

        Returns
        -------
        MixBridge
        """
        from trustlab.vision.classifiers import make_classifier

        self._validate_params()
        check_model(self.network, "network")
        pairs = self.poison(X0, X1, targets)
        seed = int(self.random_state)
        self.experts_ = [
            train_bridge(
                copy.deepcopy(self.network),
                *pairs.of_task(k),
                steps=self.expert_steps,
                lr=self.lr,
                batch_size=self.batch_size,
                schedule=self.schedule,
                random_state=seed + 1 + k,
            )
            for k in range(pairs.n_tasks)
        ]
        if self.router is None:
            if pairs.X1.shape[1:] != (1, 8, 8):
                raise ParameterError(
                    "the default router reads (1, 8, 8) images; pass router= for other image sizes.",
                    argument="router",
                )
            router = make_classifier("cnn", width=8, n_classes=pairs.n_tasks, seed=seed)
        else:
            router = copy.deepcopy(check_model(self.router, "router"))
        router = train_router(
            router, pairs, steps=self.router_steps, lr=3e-3, batch_size=self.batch_size, random_state=seed
        )
        self.model_ = merge_bridges(
            self.experts_,
            router,
            pairs,
            steps=self.merge_steps,
            lr=self.merge_lr,
            wrs=self.wrs,
            batch_size=self.batch_size,
            schedule=self.schedule,
            random_state=seed + 100,
        )
        self.n_triggers_ = pairs.n_tasks - 1
        return self

    def transform(self, X1: Any, *, nfe: int = 10, random_state: Any = 0) -> np.ndarray:
        """Translate input images with the merged bridge (:func:`~trustlab.vision.bridge.bridge_sample`).

        Parameters
        ----------
        X1 : array-like of shape (n, C, H, W)
            Inputs in [0, 1], triggered or not.
        nfe : int, default=10
        random_state : None, int or numpy.random.Generator, default=0

        Returns
        -------
        numpy.ndarray of shape (n, C, H, W)
        """
        if not hasattr(self, "model_"):
            raise NotFittedError("This MixBridge is not fitted yet; call fit(X0, X1, targets) first.")
        return bridge_sample(self.model_, X1, nfe=nfe, schedule=self.schedule, random_state=random_state)
