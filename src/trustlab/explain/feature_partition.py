"""Feature partitions with Laplacian smoothness: several embeddings at once (catalog row 003-08).

Peterfreund, Lindenbaum, Kluger and Landa, "Partition First, Embed Later: Laplacian-Based
Feature Partitioning for Refined Embedding and Visualization of High-Dimensional Data", ICML
2025. :class:`FeaturePartition` splits the features into groups that are each smooth on their
own affinity graph (alternating minimisation with entropy annealing), so each group can be
embedded on its own; :func:`make_manifold_blocks` generates the paper's kind of simulation.
See docs/explain/feature-partition.md.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import eigsh
from scipy.spatial import cKDTree
from sklearn.base import BaseEstimator

from trustlab._param_validation import Interval, ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, DataTypeError, NotFittedError, ParameterError

__all__ = ["FeaturePartition", "make_manifold_blocks"]

_BISECTION_STEPS = 100
_ENTROPY_TOL = 1e-5  # scikit-learn's t-SNE tolerance on the row entropy


def _gaussian_rows(sqdist: np.ndarray, perplexity: float) -> np.ndarray:
    """Rows ``exp(-beta_i d_ij) / Z_i`` with each row's entropy ``log(perplexity)`` (bisection on beta)."""
    d = sqdist - sqdist.min(axis=1, keepdims=True)
    target = np.log(perplexity)
    lo = np.zeros(d.shape[0])
    hi = np.full(d.shape[0], np.inf)
    positive = d[d > 0]
    beta = np.full(d.shape[0], 1.0 / np.median(positive) if positive.size else 1.0)
    for _ in range(_BISECTION_STEPS):
        p = np.exp(-beta[:, None] * d)
        z = p.sum(axis=1)
        entropy = np.log(z) + beta * (d * p).sum(axis=1) / z
        gap = entropy - target
        if np.all(np.abs(gap) < _ENTROPY_TOL):
            break
        too_flat = gap > 0  # entropy falls as beta grows
        lo = np.where(too_flat, beta, lo)
        hi = np.where(too_flat, hi, beta)
        beta = np.where(np.isfinite(hi), (lo + hi) / 2, beta * 2)
    p = np.exp(-beta[:, None] * d)
    return p / p.sum(axis=1, keepdims=True)


def _affinity(
    x: np.ndarray, weights: np.ndarray, perplexity: float, n_neighbors: int
) -> sparse.csr_matrix | None:
    """The row-stochastic kNN Gaussian affinity under the metric ``diag(weights)``; None if weights are 0."""
    if weights.sum() < 1e-12:
        return None
    xs = x * np.sqrt(weights)[None, :]
    dist, idx = cKDTree(xs).query(xs, k=n_neighbors + 1)
    dist, idx = dist[:, 1:], idx[:, 1:]  # drop the point itself (a duplicate may stand in: W_ii adds 0)
    vals = _gaussian_rows(dist**2, perplexity)
    n = x.shape[0]
    rows = np.repeat(np.arange(n), n_neighbors)
    return sparse.csr_matrix((vals.ravel(), (rows, idx.ravel())), shape=(n, n))


def _scores(x: np.ndarray, w: sparse.csr_matrix | None) -> np.ndarray:
    """Laplacian score per feature: ``(1/N) sum_ij W_ij (x_id - x_jd)^2`` (2 * variance for W = 1/N)."""
    n = x.shape[0]
    if w is None:
        return 2.0 * x.var(axis=0)
    r = np.asarray(w.sum(axis=1)).ravel()
    c = np.asarray(w.sum(axis=0)).ravel()
    wx = w @ x
    return (r @ x**2 + c @ x**2 - 2.0 * np.sum(x * wx, axis=0)) / n


def _entropy_term(omega: np.ndarray) -> float:
    k = omega.shape[0]
    safe = np.where(omega > 0, omega, 1.0)
    return float(np.sum(omega * np.log(safe)) + omega.shape[1] * np.log(k))


class FeaturePartition(ParamsValidationMixin, BaseEstimator):
    """Partition the features into groups that are each smooth on their own affinity graph.

    Minimises ``(1/N) sum_k sum_ij W^k_ij ||x_i - x_j||^2_{omega_k}`` over feature weights
    ``omega`` (a partition at the end) and per-partition affinities ``W^k`` whose rows are
    Gaussians of fixed perplexity, by alternating exact minimisation: W-step (t-SNE's
    conditional Gaussians under each partition's metric), omega-step (softmax of the negative
    Laplacian scores at temperature ``delta``, argmin at ``delta = 0``), with ``delta``
    annealed from the paper's initial value to 0 and ``n_restarts`` random starts.

    Parameters
    ----------
    n_partitions : int, default 2
        K, the number of feature groups (>= 2, at most the number of features).
    perplexity : float, default 30
        Effective number of neighbours of each affinity row; below ``n_samples - 1``.
    n_restarts : int, default 5
        Random initialisations of ``omega``; the best delta = 0 objective is kept.
    delta_steps : int, default 10
        Number of positive temperatures before the final ``delta = 0`` stage.
    delta_decay : float, default 2.0
        Factor (> 1) by which ``delta`` shrinks at each stage.
    max_iter : int, default 100
        Alternating steps per temperature at most.
    tol : float, default 1e-4
        Move to the next temperature when the objective improves by less than this (relative).
    random_state : int, Generator or None, default None
        Drives the initial weights of each restart.

    Attributes
    ----------
    labels_ : ndarray of shape (n_features,)
        Partition of each feature (0..K-1).
    partitions_ : list of ndarray
        Feature indices of each partition.
    weights_ : ndarray of shape (K, n_features)
        The final one-hot ``omega``.
    affinities_ : list of scipy.sparse.csr_matrix or None
        Row-stochastic kNN affinity of each partition on the fitted samples (None: empty).
    objective_ : float
        The delta = 0 objective of the kept partition.
    n_iter_ : int
        Alternating steps taken over all restarts.

    Examples
    --------
    >>> from sklearn.metrics import adjusted_rand_score
    >>> X, truth, _ = make_manifold_blocks(n_samples=150, random_state=0)
    >>> fp = FeaturePartition(perplexity=10, n_restarts=1, random_state=0).fit(X)
    >>> float(adjusted_rand_score(truth, fp.labels_))
    1.0

    References
    ----------
    .. [1] E. Peterfreund, O. Lindenbaum, Y. Kluger, B. Landa, "Partition First, Embed Later:
       Laplacian-Based Feature Partitioning for Refined Embedding and Visualization of
       High-Dimensional Data", ICML 2025.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "n_partitions": [Interval(numbers.Integral, 2, None, closed="left")],
        "perplexity": [Interval(numbers.Real, 1, None, closed="neither")],
        "n_restarts": [Interval(numbers.Integral, 1, None, closed="left")],
        "delta_steps": [Interval(numbers.Integral, 0, None, closed="left")],
        "delta_decay": [Interval(numbers.Real, 1, None, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_partitions: int = 2,
        perplexity: float = 30.0,
        n_restarts: int = 5,
        delta_steps: int = 10,
        delta_decay: float = 2.0,
        max_iter: int = 100,
        tol: float = 1e-4,
        random_state: Any = None,
    ) -> None:
        self.n_partitions = n_partitions
        self.perplexity = perplexity
        self.n_restarts = n_restarts
        self.delta_steps = delta_steps
        self.delta_decay = delta_decay
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _check_x(self, X: Any) -> np.ndarray:
        if sparse.issparse(X):
            raise DataTypeError("X: sparse input is not supported; pass a dense array.", argument="X")
        if np.iscomplexobj(X):
            raise DataError("X: Complex data not supported; pass real numbers.", argument="X")
        x = check_numeric_array(X, "X", ndim=2, min_rows=1)
        n, d = x.shape
        if d == 0:
            raise DataError(
                f"X has 0 feature(s) (shape={x.shape}) while a minimum of {self.n_partitions} is required.",
                argument="X",
            )
        if n < 3:
            raise DataError(
                f"X has n_samples={n}; the affinity graphs need at least 3 samples.", argument="X"
            )
        if d < self.n_partitions:
            raise ParameterError(
                f"n_partitions={self.n_partitions} exceeds the n_features={d} of X; "
                "ask for at most as many partitions as features.",
                argument="n_partitions",
            )
        if self.perplexity >= n - 1:
            raise ParameterError(
                f"perplexity={self.perplexity} must be below n_samples - 1 = {n - 1}; "
                "lower it or pass more samples.",
                argument="perplexity",
            )
        return x

    def _sweep(
        self, x: np.ndarray, omega: np.ndarray, delta: float, k_nn: int
    ) -> tuple[np.ndarray, list, float, int]:
        """Alternate W- and omega-steps at temperature ``delta``; return omega, W, objective, steps."""
        last = np.inf
        value = np.inf
        w: list = []
        steps = 0
        for step in range(self.max_iter):
            steps += 1
            w = [_affinity(x, omega[k], self.perplexity, k_nn) for k in range(self.n_partitions)]
            s = np.stack([_scores(x, wk) for wk in w])
            if delta > 0:
                z = -s / delta
                z -= z.max(axis=0, keepdims=True)
                omega = np.exp(z)
                omega /= omega.sum(axis=0, keepdims=True)
            else:
                omega = np.zeros_like(s)
                omega[np.argmin(s, axis=0), np.arange(s.shape[1])] = 1.0
            value = float(np.sum(omega * s)) + (delta * _entropy_term(omega) if delta > 0 else 0.0)
            if step > 0 and last - value <= abs(last) * self.tol:
                break
            last = value
        return omega, w, value, steps

    def fit(self, X: Any, y: Any = None) -> FeaturePartition:
        """Learn the feature partition of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Finite data, at least 3 samples and ``n_partitions`` features.
        y : None
            Ignored.

        Returns
        -------
        FeaturePartition
        """
        self._validate_params()
        x = self._check_x(X)
        n, d = x.shape
        k = self.n_partitions
        k_nn = int(min(n - 1, max(1, np.ceil(3 * self.perplexity))))
        rng = make_generator(self.random_state)
        uniform = np.full((k, d), 1.0 / k)
        w0 = [_affinity(x, uniform[j], self.perplexity, k_nn) for j in range(k)]
        smooth0 = float(sum(np.sum(uniform[j] * _scores(x, w0[j])) for j in range(k)))
        delta0 = smooth0 / (d * np.log(k))
        deltas = [delta0 / self.delta_decay**t for t in range(self.delta_steps)] + [0.0]
        best: tuple[float, np.ndarray, list] | None = None
        total = 0
        for _ in range(self.n_restarts):
            omega = rng.random((k, d))
            omega /= omega.sum(axis=0, keepdims=True)
            for delta in deltas:
                if delta > 0 and np.all(omega.max(axis=0) > 1 - 1e-6):
                    delta = 0.0
                omega, w, value, steps = self._sweep(x, omega, delta, k_nn)
                total += steps
                if delta == 0.0:
                    break
            if best is None or value < best[0]:
                best = (value, omega, w)
        assert best is not None
        self.objective_, self.weights_, self.affinities_ = best
        self.labels_ = np.argmax(self.weights_, axis=0)
        self.partitions_ = [np.flatnonzero(self.labels_ == j) for j in range(k)]
        self.n_iter_ = total
        self.n_features_in_ = d
        self.n_samples_fit_ = n
        return self

    def embed(self, n_components: int = 2) -> list[np.ndarray]:
        """One Laplacian-eigenmaps embedding of the fitted samples per partition.

        Uses each partition's learned affinity, symmetrised; the trivial eigenvector is dropped.

        Parameters
        ----------
        n_components : int, default 2
            Dimensions of each embedding (below the number of samples - 1).

        Returns
        -------
        list of ndarray of shape (n_samples, n_components)
            Empty partitions give zeros.
        """
        if not hasattr(self, "affinities_"):
            raise NotFittedError("FeaturePartition is not fitted; call fit(X) first.", argument="self")
        n = self.n_samples_fit_
        if (
            not isinstance(n_components, numbers.Integral)
            or isinstance(n_components, bool)
            or not 1 <= n_components < n - 1
        ):
            raise ParameterError(
                f"n_components must be an int in [1, n_samples - 2 = {n - 2}]; got {n_components!r}.",
                argument="n_components",
            )
        out = []
        for w in self.affinities_:
            if w is None:
                out.append(np.zeros((n, n_components)))
                continue
            a = (w + w.T) / 2
            deg = np.asarray(a.sum(axis=1)).ravel()
            inv = sparse.diags(1.0 / np.sqrt(deg))
            m = inv @ a @ inv
            vals, vecs = eigsh(m, k=n_components + 1, which="LA", v0=np.full(n, 1.0 / np.sqrt(n)))
            order = np.argsort(vals)[::-1]
            vecs = vecs[:, order] / np.sqrt(deg)[:, None]
            out.append(vecs[:, 1 : n_components + 1])
        return out


@validate_params(
    {
        "n_samples": [Interval(numbers.Integral, 10, None, closed="left")],
        "noise": [Interval(numbers.Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }
)
def make_manifold_blocks(
    n_samples: int = 500, *, noise: float = 0.05, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A closed loop and a helix with independent latents, each in its own three of six features.

    The paper's simulation (its Figure 1): loop ``(2 cos t, 2 sin t, 0)`` with ``t ~ U(0, 2 pi)``
    and helix ``(cos 4 pi s, sin 4 pi s, 3 s)`` with ``s ~ U(0, 1)`` independent of ``t``; each is
    centred, turned by its own random rotation of R^3, the six columns are shuffled and
    Gaussian noise of standard deviation ``noise`` is added.

    Parameters
    ----------
    n_samples : int, default 500
        Rows (>= 10).
    noise : float, default 0.05
        Noise standard deviation.
    random_state : int, Generator or None, default None
        Drives latents, rotations, the shuffle and the noise.

    Returns
    -------
    X : ndarray of shape (n_samples, 6)
    feature_labels : ndarray of shape (6,)
        0 for the loop's features, 1 for the helix's.
    manifolds : ndarray of shape (2, n_samples, 3)
        The clean (noise-free, unrotated) coordinates of each manifold.

    Examples
    --------
    >>> X, labels, clean = make_manifold_blocks(50, random_state=1)
    >>> X.shape, sorted(labels.tolist()), clean.shape
    ((50, 6), [0, 0, 0, 1, 1, 1], (2, 50, 3))
    """
    rng = make_generator(random_state)
    t = rng.uniform(0, 2 * np.pi, n_samples)
    s = rng.uniform(0, 1, n_samples)
    loop = np.column_stack([2 * np.cos(t), 2 * np.sin(t), np.zeros(n_samples)])
    helix = np.column_stack([np.cos(4 * np.pi * s), np.sin(4 * np.pi * s), 3 * s])
    blocks = []
    for m in (loop, helix):
        q, r = np.linalg.qr(rng.normal(size=(3, 3)))
        blocks.append((m - m.mean(axis=0)) @ (q * np.sign(np.diag(r))))
    x = np.hstack(blocks)
    perm = rng.permutation(6)
    labels = np.repeat([0, 1], 3)[perm]
    x = x[:, perm] + noise * rng.normal(size=x.shape)
    if not np.all(np.isfinite(x)):  # pragma: no cover - defensive
        raise DataError("generated data is not finite; lower noise.", argument="noise")
    return x, labels, np.stack([loop, helix])
