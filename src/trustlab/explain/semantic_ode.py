"""Semantic modelling of multi-dimensional trajectories from static features (catalog row 004-01).

Kacprzyk, Piskorz and van der Schaar, "Skip the Equations: Learning Behavior of Personalized
Dynamical Systems Directly From Data", ICML 2025 (EPISODE, extending Semantic ODE). Instead of an
ODE, :class:`SemanticTrajectoryModel` predicts each trajectory's *semantic representation*: a
composition (the sequence of motifs such as "increasing and concave", chosen by a decision tree on
the static features) and its properties (transition points and end slopes, one generalised
additive model per composition); the trajectory is drawn from them by cubic pieces that have the
composition's shape exactly. Each dimension of a multi-dimensional trajectory gets its own
composition tree and property maps (the paper's channel-independent strategy). Optionally the last
motif extends to t -> infinity (the authors' infinite motifs: horizontal asymptote, unbounded
growth) and the tree depth and property-map optimiser are tuned on a validation split.
:func:`make_pk_trajectories` simulates the pharmacokinetic data with a planted semantic structure.
See docs/explain/semantic-trajectories.md.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from itertools import pairwise
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator

from trustlab._param_validation import Interval, ParamsValidationMixin
from trustlab._threads import one_thread
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.explain._semantic_infinite import (
    INFINITE_MOTIFS,
    InfiniteCompositionShape,
    infinite_library,
    infinite_properties,
    is_infinite,
)
from trustlab.explain._semantic_motifs import (
    CompositionShape,
    composition_library,
    describe_tree,
    fit_samples,
    spline_design,
    transition_type,
)
from trustlab.explain._semantic_pk import make_pk_trajectories
from trustlab.explain._semantic_tree import (
    LR_RANGE,
    WEIGHT_DECAY_RANGE,
    adam_property_map,
    grow_tree,
    leaves,
    split_train_val,
    tune_tree_depth,
)

__all__ = ["SemanticTrajectoryModel", "TrajectorySemantics", "make_pk_trajectories"]


@dataclass(frozen=True)
class TrajectorySemantics:
    """The semantic representation of one trajectory dimension.

    Attributes
    ----------
    composition : tuple of str
        The motifs in order (``"+-"``: increasing and concave; first sign x', second x'').
    transitions : tuple of str
        ``"start"``, then ``"extremum"`` or ``"inflection"`` between motifs, then ``"end"`` (or
        ``"infinity"`` when the last motif is infinite).
    times, values : numpy.ndarray
        The transition points (start, between motifs, end) in the data's time and units; with an
        infinite last motif the last point is ``(inf, limit)``: the horizontal asymptote or +-inf.
    properties : dict of str to float
        The infinite motif's properties (``"horizontal asymptote"`` and ``"half-life time"``,
        ``"doubling time"`` and ``"scale"``, or ``"incrementing factor"``); empty when finite.

    See Also
    --------
    SemanticTrajectoryModel.semantic_representation : builds it.
    """

    composition: tuple[str, ...]
    transitions: tuple[str, ...]
    times: np.ndarray
    values: np.ndarray
    properties: dict[str, float] = field(default_factory=dict)


def _shape(comps: list[tuple[str, ...]], min_width: float) -> Any:
    """The trajectory predictor of compositions of one length (and one kind of infinite motif)."""
    if is_infinite(comps[0]):
        return InfiniteCompositionShape(comps, min_width)
    return CompositionShape(comps, min_width)


class SemanticTrajectoryModel(ParamsValidationMixin, BaseEstimator):
    """Predict multi-dimensional trajectories from static features through their semantics.

    For each trajectory dimension: (1) every training trajectory is fitted alone under every
    allowed composition (the *composition scores*: mean squared error times ``1 + relative_motif_cost
    * n_motifs``); (2) a decision tree on the static features picks, per leaf, the composition with
    the smallest summed score (the *composition map*); (3) per leaf, a generalised additive model
    (B-spline shape functions per feature) maps the features to the composition's properties,
    trained by Adam on the trajectory error (the *property map*). The prediction is drawn by the
    cubic trajectory predictor, so every predicted trajectory has exactly its leaf's composition:
    restricting ``compositions`` (prior knowledge) is a behavioural constraint that always holds.

    Parameters
    ----------
    max_motifs : int, default=4
        Longest composition in the library (the authors' experiments use 4).
    compositions : list of tuples of str, dict or None, default=None
        Allowed compositions, e.g. ``[("+-", "--", "-+")]``; a dict maps a dimension index to its own
        list. None allows every composition of at most ``max_motifs`` motifs.
    max_depth, min_samples_leaf, min_relative_gain_to_split, relative_motif_cost
        The composition tree (the authors' defaults 3, 10, 0.01, 0.01).
    n_basis : int, default=6
        Basis functions per feature in the property maps (5 cubic B-splines plus a linear term).
    n_epochs, learning_rate, weight_decay : default 200, 0.1, 0.0
        Adam on the property maps (the authors' experimental settings).
    min_motif_width : float, default=0.01
        Shortest motif as a fraction of the time range (the authors' minimum transition-point
        separation). About two sampling intervals keeps a motif from hiding between observations.
    infinite_motifs : bool, default=False
        Let the last motif extend to t -> infinity (the authors' infinite compositions): the default
        library becomes each composition with its last motif replaced by ``"++f"``/``"--f"``
        (unbounded, accelerating), ``"+-p"``/``"-+f"`` (unbounded, logarithmic) or ``"+-h"``/
        ``"-+h"`` (horizontal asymptote); ``predict`` then accepts times after the fitted range.
        Such motifs may also be named in ``compositions`` (last place only).
    dof_correction : bool, default=False
        Divide each composition score by ``(1 - k/m)^2`` (``k = 2 L + 2`` free properties, ``m``
        observation times; generalised cross-validation), so that extra motifs fitted to noise stop
        paying. Not in the paper (off by default); see the docs page.
    tune_depth : bool, default=False
        Pick the tree depth in ``0..max_depth`` on a validation split (the authors' ``tune_depth``:
        80/20 split, smallest mean regret of the held-out composition scores), then refit the tree
        on all trajectories with that depth.
    n_tune : int, default=0
        Validation trials per property map (the authors tune with optuna; here random search over
        their ranges, learning rate log-uniform in [1e-4, 1] and weight decay in [1e-5, 1e-2]); each
        map is then trained on 80 % of its leaf and kept at the epoch of smallest validation loss.
        0 (default) trains on the whole leaf with ``learning_rate`` and ``weight_decay``.
    n_init, score_max_iter : int, default 2, 50
        Starts and L-BFGS iterations per trajectory in the composition scores.
    random_state : int, Generator or None
        Seeds the extra starts of the composition scores.

    Attributes
    ----------
    compositions_ : list of list of tuple
        The library per dimension.
    trees_ : list of dict
        The composition map of each dimension (see :meth:`describe`).
    composition_scores_ : list of numpy.ndarray
        The (n_samples, n_compositions) scores per dimension.
    depth_regrets_ : list of dict
        With ``tune_depth``: validation regret per tried depth, per dimension (else empty).

    References
    ----------
    K. Kacprzyk, J. Piskorz, M. van der Schaar, "Skip the Equations: Learning Behavior of
    Personalized Dynamical Systems Directly From Data", ICML 2025.

    Examples
    --------
    >>> from trustlab.explain.semantic_ode import SemanticTrajectoryModel, make_pk_trajectories
    >>> X, y, t, truth = make_pk_trajectories(30, n_times=8, random_state=0)
    >>> model = SemanticTrajectoryModel(
    ...     compositions={0: [("+-",), ("+-", "--", "-+")], 1: [("++",), ("++", "+-")]},
    ...     n_epochs=10, score_max_iter=10, random_state=0,
    ... ).fit(X, y, times=t)
    >>> model.predict(X[:2]).shape
    (2, 8, 2)
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "max_motifs": [Interval(numbers.Integral, 1, 6, closed="both")],
        "compositions": [None, list, tuple, dict],
        "max_depth": [Interval(numbers.Integral, 0, None, closed="left")],
        "min_samples_leaf": [Interval(numbers.Integral, 1, None, closed="left")],
        "min_relative_gain_to_split": [Interval(numbers.Real, 0, None, closed="left")],
        "relative_motif_cost": [Interval(numbers.Real, 0, None, closed="left")],
        "n_basis": [Interval(numbers.Integral, 5, None, closed="left")],
        "n_epochs": [Interval(numbers.Integral, 0, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "weight_decay": [Interval(numbers.Real, 0, None, closed="left")],
        "min_motif_width": [Interval(numbers.Real, 0, 1, closed="neither")],
        "dof_correction": ["boolean"],
        "infinite_motifs": ["boolean"],
        "tune_depth": ["boolean"],
        "n_tune": [Interval(numbers.Integral, 0, None, closed="left")],
        "n_init": [Interval(numbers.Integral, 1, None, closed="left")],
        "score_max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        max_motifs: int = 4,
        compositions: Any = None,
        max_depth: int = 3,
        min_samples_leaf: int = 10,
        min_relative_gain_to_split: float = 1e-2,
        relative_motif_cost: float = 1e-2,
        n_basis: int = 6,
        n_epochs: int = 200,
        learning_rate: float = 0.1,
        weight_decay: float = 0.0,
        min_motif_width: float = 0.01,
        infinite_motifs: bool = False,
        dof_correction: bool = False,
        tune_depth: bool = False,
        n_tune: int = 0,
        n_init: int = 2,
        score_max_iter: int = 50,
        random_state: Any = None,
    ) -> None:
        self.max_motifs = max_motifs
        self.compositions = compositions
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.min_relative_gain_to_split = min_relative_gain_to_split
        self.relative_motif_cost = relative_motif_cost
        self.n_basis = n_basis
        self.n_epochs = n_epochs
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.min_motif_width = min_motif_width
        self.infinite_motifs = infinite_motifs
        self.dof_correction = dof_correction
        self.tune_depth = tune_depth
        self.n_tune = n_tune
        self.n_init = n_init
        self.score_max_iter = score_max_iter
        self.random_state = random_state

    # ----------------------------------------------------------------- validation
    def _library(self, dim: int) -> list[tuple[str, ...]]:
        spec = self.compositions
        if isinstance(spec, dict):
            spec = spec.get(dim)
        if spec is None:
            lib = composition_library(self.max_motifs)
            return infinite_library(lib) if self.infinite_motifs else lib
        if isinstance(spec, str) or not len(spec):
            raise ParameterError(
                "compositions must be a non-empty list of motif tuples such as [('+-', '--')].",
                argument="compositions",
            )
        out = []
        for comp in spec:
            comp = (comp,) if isinstance(comp, str) else tuple(comp)
            try:
                if not comp or any(m not in ("++", "+-", "-+", "--") for m in comp[:-1]):
                    raise ValueError("motifs are '++', '+-', '-+' and '--'")
                if comp[-1] not in ("++", "+-", "-+", "--", *INFINITE_MOTIFS):
                    raise ValueError(f"the last motif may also be infinite: one of {sorted(INFINITE_MOTIFS)}")
                for a, b in pairwise(m[:2] for m in comp):
                    transition_type(a, b)
            except ValueError as exc:
                raise ParameterError(
                    f"compositions: {comp!r} is not a valid composition ({exc}); consecutive motifs must "
                    "share the sign of x' or of x''.",
                    argument="compositions",
                ) from None
            out.append(comp)
        return sorted(set(out), key=lambda c: (len(c), c))

    def _check_x(self, X: Any, fitted: bool) -> np.ndarray:
        x = check_numeric_array(X, "X", ndim=2, min_rows=1)
        if fitted and x.shape[1] != self.n_features_in_:
            raise DataError(
                f"X has {x.shape[1]} features but the model was fitted on {self.n_features_in_}.",
                argument="X",
            )
        return x

    def _check_times(self, times: Any, n: int, m: int | None) -> np.ndarray:
        t = check_numeric_array(times, "times", min_rows=1)
        if t.ndim == 1:
            t = np.broadcast_to(t, (n, t.shape[0]))
        if t.ndim != 2 or t.shape[0] != n or (m is not None and t.shape[1] != m):
            raise DataError(
                "times must have shape (n_times,) or (n_samples, n_times) matching y; got "
                f"{np.shape(times)}. "
                "Resample trajectories of different lengths onto a common number of time points.",
                argument="times",
            )
        if t.shape[1] > 1 and np.any(np.diff(t, axis=1) <= 0):
            raise DataError("times must be strictly increasing along each trajectory.", argument="times")
        return np.ascontiguousarray(t, dtype=float)

    # ----------------------------------------------------------------- fit
    def fit(self, X: Any, y: Any, *, times: Any = None) -> SemanticTrajectoryModel:
        """Fit the composition maps and property maps.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Static features (covariates, initial conditions).
        y : array-like of shape (n_samples, n_times) or (n_samples, n_times, n_dims)
            The observed trajectories.
        times : array-like of shape (n_times,) or (n_samples, n_times), optional
            Observation times; default ``linspace(0, 1, n_times)``.

        Returns
        -------
        self
        """
        self._validate_params()
        x = self._check_x(X, fitted=False)
        yy = check_numeric_array(y, "y", min_rows=1)
        if yy.ndim not in (2, 3) or yy.shape[0] != x.shape[0] or yy.shape[1] < 3:
            raise DataError(
                f"y must have shape (n_samples, n_times) or (n_samples, n_times, n_dims) with n_samples = "
                f"{x.shape[0]} (rows of X) and at least 3 times; got {yy.shape}.",
                argument="y",
            )
        if x.shape[0] < 2:
            raise DataError("fit needs at least 2 trajectories.", argument="X")
        self.output_ndim_ = yy.ndim
        yy = yy if yy.ndim == 3 else yy[:, :, None]
        n, m, d = yy.shape
        t = self._check_times(np.linspace(0.0, 1.0, m) if times is None else times, n, m)
        self.t_range_ = (float(t.min()), float(t.max()))
        self.times_ = t[0].copy()
        self.n_features_in_, self.n_dims_ = x.shape[1], d
        self.feature_ranges_ = np.column_stack([x.min(axis=0), x.max(axis=0)])
        self.y_mean_ = yy.mean(axis=(0, 1))
        self.y_scale_ = np.where(yy.std(axis=(0, 1)) > 0, yy.std(axis=(0, 1)), 1.0)
        z = (yy - self.y_mean_) / self.y_scale_
        gen = make_generator(self.random_state)
        self.compositions_, self.trees_, self.composition_scores_, self.property_maps_ = [], [], [], []
        self.depth_regrets_: list[dict[int, float]] = []
        phi = self._design(x)
        with one_thread():
            tt = torch.as_tensor(t)
            for dim in range(d):
                lib = self._library(dim)
                yd = torch.as_tensor(z[:, :, dim])
                scores, raw = self._scores(lib, tt, yd, gen)
                est: Any = self
                if self.tune_depth:
                    depth, regrets = tune_tree_depth(scores, x, self, gen)
                    self.depth_regrets_.append(regrets)
                    est = SimpleNamespace(**{**self.get_params(), "max_depth": depth})
                tree = grow_tree(scores, x, np.arange(n), 0, est)
                maps = {}
                for path, leaf, idx in leaves(tree, x, np.arange(n)):
                    comp = lib[leaf["composition"]]
                    maps[path] = self._fit_property_map(
                        comp, phi[idx], raw[idx, leaf["composition"]], tt[idx], yd[idx], gen
                    )
                self.compositions_.append(lib)
                self.trees_.append(tree)
                self.composition_scores_.append(scores)
                self.property_maps_.append(maps)
        return self

    def _scores(
        self, lib: list[tuple[str, ...]], t: torch.Tensor, y: torch.Tensor, gen: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        n = y.shape[0]
        width = 2 * max(len(c) for c in lib) + 4
        scores = np.empty((n, len(lib)))
        raw = np.zeros((n, len(lib), width))
        groups = sorted({(len(c), INFINITE_MOTIFS.get(c[-1], "")) for c in lib})
        for length, kind in groups:
            cols = [
                i for i, c in enumerate(lib) if (len(c), INFINITE_MOTIFS.get(c[-1], "")) == (length, kind)
            ]
            shape = _shape([lib[i] for i in cols], self.min_motif_width)
            mse, params = fit_samples(
                shape, t, y, *self.t_range_, n_init=self.n_init, max_iter=self.score_max_iter, generator=gen
            )
            scores[:, cols] = mse.T * (1.0 + self.relative_motif_cost * length)
            if self.dof_correction:  # generalised cross-validation: MSE / (1 - k/m)^2, k = 2 L + 2
                scores[:, cols] /= max(1.0 - (2 * length + 2) / y.shape[1], 1e-3) ** 2
            raw[:, cols, : shape.n_params] = params.transpose(1, 0, 2)
        scores[~np.isfinite(scores)] = np.finfo(float).max / (10 * n * len(lib))
        return scores, raw

    def _design(self, x: np.ndarray) -> np.ndarray:
        cols = [np.ones((x.shape[0], 1))]
        for f, (lo, hi) in enumerate(self.feature_ranges_):
            cols.append(spline_design(x[:, f], lo, hi, self.n_basis))
        return np.hstack(cols)

    def _fit_property_map(
        self,
        comp: tuple[str, ...],
        phi: np.ndarray,
        raw0: np.ndarray,
        t: torch.Tensor,
        y: torch.Tensor,
        gen: np.random.Generator,
    ) -> np.ndarray:
        shape = _shape([comp], self.min_motif_width)
        target = raw0[:, : shape.n_params]
        # Warm start: ridge regression of the per-trajectory properties on the basis.
        gram = phi.T @ phi + np.eye(phi.shape[1])
        theta0 = np.linalg.solve(gram, phi.T @ target)
        design = torch.as_tensor(phi)

        def loss_on(rows: np.ndarray) -> Any:
            zero = torch.zeros(len(rows), dtype=torch.long)
            return lambda th: (
                (shape.curve(design[rows] @ th, zero, t[rows], *self.t_range_) - y[rows]) ** 2
            ).mean()

        everything = np.arange(len(phi))
        if self.n_tune == 0 or len(phi) < 5:
            return adam_property_map(
                loss_on(everything),
                theta0,
                n_epochs=self.n_epochs,
                learning_rate=self.learning_rate,
                weight_decay=self.weight_decay,
            )[0]
        train, val = split_train_val(len(phi), gen)
        best, best_val = theta0, np.inf
        for _ in range(self.n_tune):
            lr = float(np.exp(gen.uniform(*np.log(LR_RANGE))))
            wd = float(np.exp(gen.uniform(*np.log(WEIGHT_DECAY_RANGE))))
            theta, val_loss = adam_property_map(
                loss_on(train),
                theta0,
                n_epochs=self.n_epochs,
                learning_rate=lr,
                weight_decay=wd,
                val_loss_fn=loss_on(val),
            )
            if val_loss < best_val:
                best, best_val = theta, val_loss
        return best

    # ----------------------------------------------------------------- predict
    def _check_fitted(self) -> None:
        if not hasattr(self, "trees_"):
            raise NotFittedError(
                "SemanticTrajectoryModel is not fitted; call fit(X, y) first.", argument="self"
            )

    def _raw(self, x: np.ndarray, dim: int) -> list[tuple[tuple[str, ...], np.ndarray, np.ndarray]]:
        phi = self._design(x)
        out = []
        for path, leaf, idx in leaves(self.trees_[dim], x, np.arange(len(x))):
            if len(idx):
                comp = self.compositions_[dim][leaf["composition"]]
                out.append((comp, idx, phi[idx] @ self.property_maps_[dim][path]))
        return out

    def predict(self, X: Any, times: Any = None) -> np.ndarray:
        """Predicted trajectories, shape (n_samples, n_times[, n_dims]) as ``y`` in fit.

        ``times`` (default: the fit's time grid) must lie within the fitted time range; with an
        infinite last motif, any time after its start is allowed.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Static features.
        times : array-like of shape (n_times,) or (n_samples, n_times), optional
            Where to evaluate the trajectories (default: the fit's grid).

        Returns
        -------
        numpy.ndarray
            Shape ``(n_samples, n_times, n_dims)``, or ``(n_samples, n_times)`` when ``y`` was
            2-D in fit; every trajectory has its leaf's composition.
        """
        self._check_fitted()
        x = self._check_x(X, fitted=True)
        t = self._check_times(self.times_ if times is None else times, len(x), None)
        lo, hi = self.t_range_
        out = np.empty((len(x), t.shape[1], self.n_dims_))
        with one_thread(), torch.no_grad():
            for dim in range(self.n_dims_):
                for comp, idx, raw in self._raw(x, dim):
                    if t[idx].min() < lo - 1e-12 or (t[idx].max() > hi + 1e-12 and not is_infinite(comp)):
                        raise DataError(
                            f"times must lie within the fitted range [{lo:g}, {hi:g}] (after {lo:g} for "
                            f"an infinite last motif); composition {comp} of dimension {dim} describes the "
                            "trajectory only there (set infinite_motifs=True to extrapolate).",
                            argument="times",
                        )
                    curve = _shape([comp], self.min_motif_width).curve(
                        torch.as_tensor(raw),
                        torch.zeros(len(idx), dtype=torch.long),
                        torch.as_tensor(t[idx]),
                        lo,
                        hi,
                    )
                    out[idx, :, dim] = curve.numpy() * self.y_scale_[dim] + self.y_mean_[dim]
        return out if self.output_ndim_ == 3 else out[:, :, 0]

    def semantic_representation(self, X: Any) -> list[list[TrajectorySemantics]]:
        """The composition and transition points of each sample's predicted trajectory, per dimension.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Static features.

        Returns
        -------
        list of list of TrajectorySemantics
            ``out[i][d]``: sample ``i``'s semantics in dimension ``d``.
        """
        self._check_fitted()
        x = self._check_x(X, fitted=True)
        out: list[list[Any]] = [[None] * self.n_dims_ for _ in range(len(x))]
        with one_thread(), torch.no_grad():
            for dim in range(self.n_dims_):
                for comp, idx, raw in self._raw(x, dim):
                    shape = _shape([comp], self.min_motif_width)
                    rr, zero = torch.as_tensor(raw), torch.zeros(len(idx), dtype=torch.long)
                    times, values = shape.knots(rr, zero, *self.t_range_)
                    infinite = is_infinite(comp)
                    kinds = (
                        "start",
                        *(transition_type(a[:2], b[:2]) for a, b in pairwise(comp)),
                        "infinity" if infinite else "end",
                    )
                    vals = values.numpy() * self.y_scale_[dim] + self.y_mean_[dim]
                    props = infinite_properties(
                        shape, rr, self.t_range_, self.y_scale_[dim], self.y_mean_[dim]
                    )
                    for row, i in enumerate(idx):
                        named = {k: float(v[row]) for k, v in props.items()}
                        out[i][dim] = TrajectorySemantics(comp, kinds, times[row].numpy(), vals[row], named)
        return out

    def predict_composition(self, X: Any) -> list[list[tuple[str, ...]]]:
        """The composition chosen by the composition map for each sample and dimension.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Static features.

        Returns
        -------
        list of list of tuple of str
            ``out[i][d]``: the motifs of sample ``i``'s trajectory in dimension ``d``.
        """
        return [[s.composition for s in row] for row in self.semantic_representation(X)]

    def describe(self, feature_names: list[str] | None = None) -> str:
        """The composition map of every dimension as readable if/else text.

        Parameters
        ----------
        feature_names : list of str, optional
            One name per feature (default ``x0, x1, ...``).

        Returns
        -------
        str
            One block per dimension: the tree's splits and each leaf's composition and size.
        """
        self._check_fitted()
        names = (
            list(feature_names)
            if feature_names is not None
            else [f"x{i}" for i in range(self.n_features_in_)]
        )
        if len(names) != self.n_features_in_:
            raise ParameterError(
                f"feature_names has {len(names)} names for {self.n_features_in_} features.",
                argument="feature_names",
            )
        lines = []
        for dim, tree in enumerate(self.trees_):
            lines += [f"dimension {dim}:", *describe_tree(tree, names, self.compositions_[dim], "    ")]
        return "\n".join(lines)
