"""InfoCons: critical concepts of a point-cloud classifier by an information bottleneck.

Li, Zhang, Wang and Yang (ICML 2025) score every point of a cloud by how much of its
feature must pass a learned bottleneck for the model to keep its prediction: an attention
bottleneck network reads the per-point features ``z`` at a layer of the frozen model and
emits a soft mask ``m`` in (0, 1) per point and channel; the model runs on
``m * z + sg(1 - m) * eps`` with ``eps`` drawn from a Gaussian prior whose mean and
variance are the cloud's own feature statistics (the learnable, unbiased prior), and the
network is trained on ``CE(model(z_hat), y) + beta * KL(p(z_hat | x) || N(mu_z, sigma_z^2))``,
the variational form of ``max I(C; Y) - beta I(X; C)``. A point's score is its mask averaged
over channels; the top-k points are the critical subset, and the ranking splits the cloud
into concepts of decreasing importance. See docs/vision/infocons.md.

Beside it, the baselines the paper compares: PointNet's critical points (the points that
win the max-pool, Qi et al. 2017) and PCSAM's gradient saliency (Zheng et al. 2019), and
the faithfulness measures: the prediction kept when only the subset is kept, and lost when
it is dropped, at equal size.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from trustlab._param_validation import Interval, ParamsValidationMixin
from trustlab._validation import make_generator
from trustlab.errors import NotFittedError, ParameterError
from trustlab.vision.classifiers import check_model, one_thread, require_torch, torch_generator
from trustlab.vision.point_attribution import _features, find_point_layer
from trustlab.vision.pointclouds import check_point_clouds, point_cloud_logits

__all__ = ["InfoCons"]

_POS_INT = [Interval(numbers.Integral, 1, None, closed="left")]


def _run_with(model: Any, Xt: Any, layer: str, axis: int, z_hat: Any) -> Any:
    """Logits of ``model`` on ``Xt`` with the layer's output replaced by ``z_hat`` (b, n, d)."""
    module = dict(model.named_modules())[layer]
    replacement = z_hat if axis == 1 else z_hat.transpose(1, 2)
    handle = module.register_forward_hook(lambda _m, _i, _o: replacement)
    try:
        return model(Xt)
    finally:
        handle.remove()


def _make_bottleneck(d: int, hidden: int, seed: int) -> Any:
    """The attention bottleneck network: channel attention, then a point-wise MLP to a mask."""
    torch = require_torch()
    nn = torch.nn

    class AttentionBottleneck(nn.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.query = nn.Linear(d, hidden, bias=False)
            self.value = nn.Linear(d, hidden)
            self.out = nn.Sequential(nn.Linear(hidden + d, hidden), nn.ReLU(), nn.Linear(hidden, d))
            nn.init.constant_(self.out[2].bias, 5.0)  # start open (mask ~ 0.99), as IBA does

        def forward(self, zn: Any) -> Any:  # zn: (b, n, d), normalised per cloud and channel
            q = self.query(zn)  # (b, n, h)
            att = torch.softmax(q.transpose(1, 2) @ zn / zn.shape[-1] ** 0.5, dim=-1)  # (b, h, d)
            h = (zn @ att.transpose(1, 2)) * torch.sigmoid(self.value(zn))  # (b, n, h)
            return self.out(torch.cat([h, zn], dim=-1))  # mask logits (b, n, d)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AttentionBottleneck()


@contextlib.contextmanager
def _frozen(model: Any) -> Iterator[None]:
    """Eval mode and no parameter gradients inside the block; the user's settings restored after."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    training = model.training
    model.eval()
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)
        model.train(training)


def _stats(z: Any) -> tuple[Any, Any]:
    """The prior's parameters: each cloud's per-channel mean and standard deviation over points."""
    mu = z.mean(dim=1, keepdim=True)
    return mu, z.std(dim=1, keepdim=True).clamp_min(1e-4)


def _bottleneck_loss(
    model: Any, Xt: Any, layer: str, axis: int, z: Any, logits: Any, target: Any, beta: float, gen: Any
) -> Any:
    """Per-cloud loss: cross-entropy through ``z_hat`` plus ``beta`` times the mean KL term."""
    torch = require_torch()
    mu, sd = _stats(z)
    m = torch.sigmoid(logits)
    eps = mu + sd * torch.randn(z.shape, generator=gen)
    z_hat = m * z + (1.0 - m).detach() * eps  # sg(1 - m): the noise branch carries no gradient
    ce = torch.nn.functional.cross_entropy(_run_with(model, Xt, layer, axis, z_hat), target, reduction="none")
    zn = (z - mu) / sd
    # KL(N(m z + (1-m) mu, (1-m)^2 sd^2) || N(mu, sd^2)) per element, with log(1-m) = logsigmoid(-a)
    kl = -torch.nn.functional.logsigmoid(-logits) + 0.5 * ((1.0 - m) ** 2 + (m * zn) ** 2) - 0.5
    return ce + float(beta) * kl.mean(dim=(1, 2))


class InfoCons(ParamsValidationMixin, BaseEstimator):
    """Critical concepts of a point-cloud classifier by an attention information bottleneck.

    ``fit(X)`` trains the attention bottleneck on clouds ``X`` (the model stays frozen; the
    targets are the model's own predictions); ``score_points`` scores every point in one pass
    (``n_iter=0``, the paper's "1pass") or refines each cloud's mask for ``n_iter`` more steps
    (the paper's "20iter").

    Parameters
    ----------
    model : torch.nn.Module
        Any classifier mapping ``(batch, n_points, 3)`` clouds to logits.
    layer : str, optional
        The point-wise layer to put the bottleneck on; default: the last one before pooling
        (:func:`find_point_layer`).
    beta : float > 0, default=1.0
        Weight of the compression term ``I(X; C)`` (its KL bound, averaged over points and
        channels) against the cross-entropy bound of ``I(C; Y)``.
    hidden : int >= 1, default=64
        Width of the attention bottleneck network.
    epochs : int >= 1, default=10
        Passes over ``X`` when training the network.
    lr : float > 0, default=1e-2
        Adam's learning rate for the network.
    batch_size : int >= 1, default=16
        Minibatch size.
    n_iter : int >= 0, default=0
        Per-cloud refinement steps of the mask logits in ``score_points`` (Adam, ``iter_lr``).
    iter_lr : float > 0, default=0.1
        Learning rate of the refinement.
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the network's weights, the batch order and the prior's noise.

    Attributes
    ----------
    layer_ : str
        The layer the bottleneck sits on.
    points_axis_ : int
        The points axis of that layer's output (1 or 2).
    bottleneck_ : torch.nn.Module
        The trained attention bottleneck network.
    loss_ : float
        Mean training loss of the last epoch.

    References
    ----------
    F. Li, M. Zhang, Z. Wang, M. Yang, "InfoCons: Identifying Interpretable Critical Concepts
    in Point Clouds via Information Theory", ICML 2025. K. Schulz, L. Sixt, F. Tombari,
    T. Landgraf, "Restricting the Flow: Information Bottlenecks for Attribution", ICLR 2020.

    Examples
    --------
    >>> from trustlab.vision.pointclouds import make_pointnet, make_shape_clouds
    >>> X, y, part = make_shape_clouds(16, n_points=32)
    >>> ic = InfoCons(make_pointnet(width=4), epochs=1).fit(X)
    >>> ic.score_points(X).shape
    (16, 32)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "layer": [None, str],
        "beta": [Interval(numbers.Real, 0, None, closed="neither")],
        "hidden": _POS_INT,
        "epochs": _POS_INT,
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": _POS_INT,
        "n_iter": [Interval(numbers.Integral, 0, None, closed="left")],
        "iter_lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        model: Any,
        *,
        layer: str | None = None,
        beta: float = 1.0,
        hidden: int = 64,
        epochs: int = 10,
        lr: float = 1e-2,
        batch_size: int = 16,
        n_iter: int = 0,
        iter_lr: float = 0.1,
        random_state: Any = 0,
    ) -> None:
        self.model = model
        self.layer = layer
        self.beta = beta
        self.hidden = hidden
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.n_iter = n_iter
        self.iter_lr = iter_lr
        self.random_state = random_state

    def fit(self, X: Any, y: Any = None) -> InfoCons:
        """Train the attention bottleneck on clouds ``X`` against the model's own predictions.

        Parameters
        ----------
        X : array-like of shape (n, n_points, 3)
            Training clouds.
        y : None
            Ignored (the targets are the model's predictions, so the explanation is of the
            model, right or wrong).

        Returns
        -------
        InfoCons
            ``self``.
        """
        self._validate_params()
        torch = require_torch()
        check_model(self.model)
        arr = check_point_clouds(X)
        self.layer_, self.points_axis_ = find_point_layer(self.model, arr[:1], self.layer)
        Xt = torch.as_tensor(arr)
        target = point_cloud_logits(self.model, arr).argmax(1)
        with torch.no_grad():
            z_all = _features(self.model, Xt, self.layer_, self.points_axis_)
        rng = make_generator(self.random_state)
        gen = torch_generator(rng)
        self.bottleneck_ = _make_bottleneck(z_all.shape[-1], int(self.hidden), int(rng.integers(2**31)))
        opt = torch.optim.Adam(self.bottleneck_.parameters(), lr=float(self.lr))
        bs = int(self.batch_size)
        with one_thread(), _frozen(self.model):
            for _ in range(int(self.epochs)):
                order, total = torch.randperm(len(Xt), generator=gen), 0.0
                for start in range(0, len(Xt), bs):
                    idx = order[start : start + bs]
                    z = z_all[idx]
                    logits = self.bottleneck_((z - _stats(z)[0]) / _stats(z)[1])
                    loss = _bottleneck_loss(
                        self.model,
                        Xt[idx],
                        self.layer_,
                        self.points_axis_,
                        z,
                        logits,
                        target[idx],
                        self.beta,
                        gen,
                    ).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * len(idx)
                self.loss_ = total / len(Xt)
        self.bottleneck_.eval()
        self._iter_seed = int(rng.integers(2**62))
        return self

    def score_points(self, X: Any) -> np.ndarray:
        """Critical score of every point: its bottleneck mask averaged over channels.

        Parameters
        ----------
        X : array-like of shape (n, n_points, 3)
            Clouds to explain (any number of points the model takes).

        Returns
        -------
        numpy.ndarray of shape (n, n_points)
            Scores in (0, 1); higher is more critical.
        """
        if not hasattr(self, "bottleneck_"):
            raise NotFittedError("InfoCons is not fitted; call fit(X) on a few clouds first.")
        torch = require_torch()
        arr = check_point_clouds(X)
        Xt = torch.as_tensor(arr)
        with torch.no_grad(), one_thread():
            z = _features(self.model, Xt, self.layer_, self.points_axis_)
            logits = self.bottleneck_((z - _stats(z)[0]) / _stats(z)[1])
        if self.n_iter:
            target = point_cloud_logits(self.model, arr).argmax(1)
            a = logits.clone().requires_grad_(True)
            opt = torch.optim.Adam([a], lr=float(self.iter_lr))
            gen = torch.Generator().manual_seed(self._iter_seed)  # the same noise on every call
            with one_thread(), _frozen(self.model):
                for _ in range(int(self.n_iter)):
                    # summed over clouds: each cloud's logits get only its own gradient
                    loss = _bottleneck_loss(
                        self.model, Xt, self.layer_, self.points_axis_, z, a, target, self.beta, gen
                    ).sum()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            logits = a.detach()
        return torch.sigmoid(logits).mean(dim=2).numpy().astype(np.float64)

    def concepts(self, X: Any, n_concepts: int = 4) -> np.ndarray:
        """Split each cloud into ``n_concepts`` equal-size concepts by rank of critical score.

        Parameters
        ----------
        X : array-like of shape (n, n_points, 3)
            Clouds.
        n_concepts : int >= 1, default=4
            Number of concepts.

        Returns
        -------
        numpy.ndarray of shape (n, n_points), int
            Concept of each point: 0 the most critical ``n_points / n_concepts`` points, 1 the
            next, and so on.
        """
        if isinstance(n_concepts, bool) or not isinstance(n_concepts, numbers.Integral) or n_concepts < 1:
            raise ParameterError(
                f"n_concepts must be an integer >= 1; got {n_concepts!r}.", argument="n_concepts"
            )
        scores = self.score_points(X)
        rank = np.argsort(np.argsort(-scores, axis=1, kind="stable"), axis=1)
        return (rank * int(n_concepts)) // scores.shape[1]
