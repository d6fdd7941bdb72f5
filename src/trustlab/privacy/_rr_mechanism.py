"""Randomized response on labels: the exact coins, the vertex per record, the release (private module)."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from trustlab._param_validation import DELTA, EPSILON, Interval, Options, ParamsValidationMixin
from trustlab._validation import (
    make_generator,
)
from trustlab.errors import ParameterError
from trustlab.privacy._rr_fisher import (
    LINKS,
    check_design,
    check_labels,
    fisher_scoring,
    info_ratio,
    link_function,
)
from trustlab.privacy._rr_geometry import rr_vertices
from trustlab.privacy.release import Release
from trustlab.privacy.samplers import bernoulli

__all__ = [
    "MODES",
    "PrivatizedLabels",
    "RandomizedResponseLabelDP",
    "randomize",
]

MODES = ("pointwise", "global", "symmetric")
_MECHANISM = "randomized response (label DP)"


def _bernoulli(prob: np.ndarray) -> np.ndarray:
    """Independent exact Bernoulli draws with per-entry probabilities (few distinct values)."""
    out = np.zeros(prob.shape[0], dtype=bool)
    for value in np.unique(prob):
        idx = np.flatnonzero(prob == value)
        out[idx] = bernoulli(float(value), idx.size)
    return out


def randomize(y: np.ndarray, p0: np.ndarray, p1: np.ndarray) -> np.ndarray:
    keep = _bernoulli(np.where(y == 1, p1, p0))
    return np.where(keep, y, 1 - y).astype(np.int64)


def _release_labels(
    y: np.ndarray,
    Xd: np.ndarray | None,
    verts: np.ndarray,
    mode: str,
    link: str,
    rho: float,
    rng: np.random.Generator,
    randomize: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, list[str]]:
    """Choose each record's vertex and randomize its label once with ``randomize``.

    ``mode="symmetric"`` (or ``Xd is None``): the symmetric vertex ``verts[0]`` for all.
    Otherwise a pilot share ``rho`` (chosen by ``rng``, public) is released by the
    symmetric vertex, the corrected MLE on it gives ``beta~``, and the remaining records
    get the vertex maximising their information factor (``"pointwise"``) or one vertex
    maximising the summed Fisher trace (``"global"``).
    """
    n = y.shape[0]
    p0 = np.full(n, verts[0, 0])
    p1 = np.full(n, verts[0, 1])
    pilot = np.zeros(n, dtype=bool)
    pilot_coef: np.ndarray | None = None
    notes = ["each label randomized once; vertex choice uses only public X and released labels"]
    if mode == "symmetric" or Xd is None:
        return randomize(y, p0, p1), p0, p1, pilot, None, notes
    m = round(rho * n)
    pilot[rng.permutation(n)[:m]] = True
    y_tilde = np.zeros(n, dtype=np.int64)
    y_tilde[pilot] = randomize(y[pilot], p0[pilot], p1[pilot])
    rest = ~pilot
    if m >= 10 * Xd.shape[1] and np.linalg.matrix_rank(Xd[pilot]) == Xd.shape[1]:
        fit = fisher_scoring(Xd[pilot][None], y_tilde[pilot][None], p0[pilot][None], p1[pilot][None], link)
        if bool(fit.converged[0]) and np.isfinite(fit.beta).all():
            pilot_coef = fit.beta[0]
    if pilot_coef is None:
        notes.append("pilot too small or its fit failed: symmetric vertex for all records")
    else:
        F, f = link_function(Xd[rest] @ pilot_coef, link)
        R = np.stack([info_ratio(v[0], v[1], F) for v in verts])  # (k, n_rest)
        if mode == "pointwise":
            choice = np.argmax(R, axis=0)
        else:
            weight = f * f * np.sum(Xd[rest] ** 2, axis=1)
            choice = np.full(int(rest.sum()), int(np.argmax(R @ weight)))
        p0[rest] = verts[choice, 0]
        p1[rest] = verts[choice, 1]
    y_tilde[rest] = randomize(y[rest], p0[rest], p1[rest])
    return y_tilde, p0, p1, pilot, pilot_coef, notes


@dataclass(frozen=True)
class PrivatizedLabels:
    """Labels released under LabelDP, with the keep probabilities each was released with.

    Attributes
    ----------
    y_tilde : numpy.ndarray of int
        Released labels.
    p0, p1 : numpy.ndarray of float
        Per-record ``P(y~=0 | y=0)`` and ``P(y~=1 | y=1)`` (public).
    pilot : numpy.ndarray of bool
        Records in the pilot share (released by symmetric RR); all False when no pilot ran.
    pilot_coef : numpy.ndarray or None
        The pilot estimate of ``beta`` (intercept first when fitted) that chose the vertices.
    release : Release
        The privacy record: epsilon, delta, mechanism, parameters and notes.

    See Also
    --------
    RandomizedResponseLabelDP.privatize : Releases the labels and builds this result.
    """

    y_tilde: np.ndarray
    p0: np.ndarray
    p1: np.ndarray
    pilot: np.ndarray
    pilot_coef: np.ndarray | None
    release: Release = field(repr=False)

    @property
    def epsilon(self) -> float:
        """Epsilon spent (per label)."""
        return self.release.epsilon

    @property
    def delta(self) -> float:
        """Delta spent (per label)."""
        return self.release.delta


class RandomizedResponseLabelDP(ParamsValidationMixin, BaseEstimator):
    """Release binary labels by Fisher-information-optimal randomized response under LabelDP.

    Each label is randomized once: kept with probability ``p0`` (if 0) or ``p1`` (if 1),
    flipped otherwise. ``(p0, p1)`` is a vertex of the ``(epsilon, delta)``-LabelDP
    polygon (see :func:`rr_vertices`) chosen to maximise the trace of the Fisher
    information of the binary response model.

    - ``delta = 0``: Warner's symmetric RR, keep probability ``e^eps / (1 + e^eps)``,
      is optimal for every record and every ``beta``; all modes give it.
    - ``delta > 0`` and ``mode="pointwise"`` (default): a random pilot share
      (``pilot_fraction``) is released by the symmetric vertex; the corrected MLE on it
      gives ``beta~``; every other record gets the vertex maximising its information
      at ``F(x_i'beta~)``. ``mode="global"`` uses one vertex for all non-pilot
      records (the one maximising the summed trace). ``mode="symmetric"`` uses the
      symmetric vertex for all.

    Vertex choices use only public ``X`` and already released labels, and each label
    is randomized once, so the whole release is ``(epsilon, delta)``-LabelDP.

    Parameters
    ----------
    epsilon : float
        Per-label privacy parameter, > 0.
    delta : float, default 0
        In ``[0, 1)``. The one-sided vertices reveal a true label with probability
        ``delta``; keep ``delta`` well below ``1 / n`` or use ``mode="symmetric"``.
    mode : {"pointwise", "global", "symmetric"}, default "pointwise"
    link : {"logit", "probit", "cloglog"}, default "logit"
        The model whose information is maximised (used only when ``delta > 0``).
    fit_intercept : bool, default True
        Whether that model has an intercept.
    pilot_fraction : float, default 0.2
        Share of records in the pilot (used only when ``delta > 0`` and mode is not
        ``"symmetric"``).
    random_state : None, int or numpy.random.Generator
        Chooses the pilot records (public randomness). The RR coins come from
        OpenDP and cannot be seeded.
    pos_label : scalar, default 1
        The label value released as 1. Every other value (``0``, ``2``, ``"no"``, NaN,
        ...) is released as 0: a fixed public rule, so no exception depends on what the
        private labels are.

    References
    ----------
    Ce Zhang, Yixin Han, Yafei Wang, Xiaodong Yan, Linglong Kong, Ting Li, Bei Jiang.
    "Differentially Private Analysis for Binary Response Models: Optimality,
    Estimation, and Inference". ICML 2025 (PMLR 267:74923-74937).
    Warner. "Randomized Response: A Survey Technique for Eliminating Evasive
    Answer Bias". JASA 1965.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0, 1, 1, 0, 1] * 200)
    >>> released = RandomizedResponseLabelDP(epsilon=1.0).privatize(None, y)
    >>> released.y_tilde.shape, released.epsilon, float(released.p0[0].round(4))
    ((1000,), 1.0, 0.7311)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "epsilon": [EPSILON],
        "delta": [DELTA],
        "mode": [Options(MODES)],
        "link": [Options(LINKS)],
        "fit_intercept": ["boolean"],
        "pilot_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "pos_label": "no_validation",
    }

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        *,
        mode: str = "pointwise",
        link: str = "logit",
        fit_intercept: bool = True,
        pilot_fraction: float = 0.2,
        random_state: Any = None,
        pos_label: Any = 1,
    ) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.mode = mode
        self.link = link
        self.fit_intercept = fit_intercept
        self.pilot_fraction = pilot_fraction
        self.random_state = random_state
        self.pos_label = pos_label

    def vertices(self) -> np.ndarray:
        """The candidate ``(p0, p1)`` pairs for this budget (see :func:`rr_vertices`).

        Depends only on the public ``epsilon`` and ``delta``, not on any data.

        Returns
        -------
        numpy.ndarray of shape (1, 2) or (3, 2)
            The symmetric vertex (row 0) and, when ``delta > 0``, the one-sided
            vertices ``(1, delta)`` and ``(delta, 1)``.

        Examples
        --------
        >>> RandomizedResponseLabelDP(epsilon=1.0, delta=0.01).vertices().shape
        (3, 2)
        """
        return rr_vertices(self.epsilon, self.delta)

    def privatize(self, X: Any, y: Any) -> PrivatizedLabels:
        """Release ``y`` under ``(epsilon, delta)``-LabelDP.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, d), or None
            Public covariates. Needed only when ``delta > 0`` and ``mode`` is not
            ``"symmetric"``; otherwise ``None`` is allowed.
        y : array-like of shape (n,)
            True labels: ``pos_label`` is read as 1, any other value as 0.

        Returns
        -------
        PrivatizedLabels
        """
        self._validate_params()
        epsilon, delta, mode, link = float(self.epsilon), float(self.delta), self.mode, self.link
        rho = float(self.pilot_fraction)
        rng = make_generator(self.random_state)
        ya = check_labels(y, "y", self.pos_label)
        n = ya.shape[0]
        adaptive = delta > 0 and mode != "symmetric"
        if X is None and adaptive:
            raise ParameterError(
                f"X is needed to choose the mechanism per record (delta > 0, mode={mode!r}); "
                "pass the public covariates or use mode='symmetric'.",
                argument="X",
            )
        Xa = None if X is None else check_design(X, n)[0]
        verts = rr_vertices(epsilon, delta)
        Xd = None
        if adaptive:
            assert Xa is not None
            Xd = np.column_stack([np.ones(n), Xa]) if self.fit_intercept else Xa
        y_tilde, p0, p1, pilot, pilot_coef, notes = _release_labels(
            ya, Xd, verts, mode if adaptive else "symmetric", link, rho, rng, randomize
        )
        counts = [int(np.sum((p0 == a) & (p1 == b))) for a, b in verts]
        used = {f"({a:.6g}, {b:.6g})": k for (a, b), k in zip(verts, counts, strict=True)}
        if sum(counts[1:]):
            notes.append(f"one-sided vertices reveal a true label with probability delta={delta:g}")
        release = Release(
            value=y_tilde,
            epsilon=epsilon,
            delta=delta,
            mechanism=_MECHANISM,
            parameters={
                "neighbouring": "change one label, features fixed (LabelDP)",
                "mode": mode if adaptive else "symmetric",
                "link": link,
                "pilot_fraction": rho if adaptive else 0.0,
                "vertices_used": used,
                "coins": "OpenDP exact Bernoulli (make_randomized_response_bitvec)",
                "notes": tuple(notes),
            },
            description=f"{n} binary labels released by randomized response",
        )
        return PrivatizedLabels(
            y_tilde=y_tilde, p0=p0, p1=p1, pilot=pilot, pilot_coef=pilot_coef, release=release
        )
