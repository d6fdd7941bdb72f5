"""LTM estimators (private rank-k approximation, ridge) and the paper's error metrics (private module)."""

from __future__ import annotations

import math
import numbers
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin

from trustlab._param_validation import (
    DELTA,
    EPSILON,
    Interval,
    Options,
    ParamsValidationMixin,
    validate_params,
)
from trustlab._validation import (
    check_choice,
    check_numeric_array,
    check_positive,
    check_positive_int,
    make_generator,
)
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.privacy._ltm_inputs import (
    KINDS,
    MECHANISMS,
    NEIGHBOURING,
    NOISE,
    check_n_features,
    check_sketch,
    joint,
    make_sketch,
    matrix,
    solve,
)
from trustlab.privacy._ltm_release import release
from trustlab.privacy.release import Release

__all__ = [
    "LTMLowRank",
    "LTMRidge",
    "low_rank_excess",
    "ridge_cost_ratio",
]


def low_rank_excess(A: Any, components: Any) -> float:
    """Return ``||A - A P||_F^2 - ||A - A_k||_F^2`` for the projector ``P`` onto the rows of ``components``.

    The paper's ``psi`` is this excess divided by ``n``; ``k`` is the number of components.
    ``A_k`` is the best rank-``k`` approximation of ``A`` (Eckart-Young), so the excess is
    ``>= 0`` up to rounding and 0 exactly when ``components`` span a best subspace.
    An evaluation metric on the exact data: not a private release.

    Parameters
    ----------
    A : array-like of shape (n, d)
        The data matrix.
    components : array-like of shape (k, d)
        Rows spanning the subspace to judge (need not be orthonormal; they are
        orthonormalised by a QR decomposition).

    Returns
    -------
    float
        The excess squared Frobenius error, in squared units of ``A``.

    Raises
    ------
    DataError
        When ``components`` does not have ``d`` columns.

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025.

    Examples
    --------
    >>> A = np.diag([3.0, 2.0, 1.0])
    >>> low_rank_excess(A, [[0.0, 1.0, 0.0]])
    5.0
    """
    A = matrix(A, "A")
    V = np.atleast_2d(check_numeric_array(components, "components"))
    if V.shape[1] != A.shape[1]:
        raise DataError(
            f"components must have {A.shape[1]} columns, got {V.shape[1]}.", argument="components"
        )
    Q, _ = np.linalg.qr(V.T)
    gram = A.T @ A  # d x d: both terms from it, so tall A costs one pass
    eig = np.linalg.eigvalsh(gram)[::-1]
    captured_best = float(np.sum(eig[: V.shape[0]]))
    captured = float(np.trace(Q.T @ gram @ Q))
    return captured_best - captured


@validate_params({"alpha": [Interval(numbers.Real, 0, None, closed="left")]})
def ridge_cost_ratio(X: Any, y: Any, coef: Any, alpha: float) -> float:
    """Return the paper's ``phi``: the ridge cost of ``coef`` over the optimal ridge cost.

    The ridge cost is ``||X w - y||^2 + alpha ||w||^2`` (no intercept); the optimum is
    solved exactly on ``X`` and ``y``, so the ratio is ``>= 1``, and 1 for the exact
    ridge solution. An evaluation metric on the exact data: not a private release.

    Parameters
    ----------
    X : array-like of shape (n, d)
        Features.
    y : array-like of shape (n,)
        Targets.
    coef : array-like of shape (d,)
        The coefficients to judge (e.g. :attr:`LTMRidge.coef_`).
    alpha : float
        The ridge penalty ``lambda >= 0``.

    Returns
    -------
    float
        ``cost(coef) / cost(optimal coef)``.

    Raises
    ------
    DataError
        When ``coef`` does not have ``d`` entries.

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025.

    Examples
    --------
    >>> X = np.eye(3); y = np.ones(3)
    >>> ridge_cost_ratio(X, y, np.full(3, 0.5), 1.0)
    1.0
    """
    Z = joint(X, y)
    X, yv = Z[:, :-1], Z[:, -1]
    lam = check_positive(alpha, "alpha", allow_zero=True)
    w = check_numeric_array(coef, "coef", ndim=1)
    if w.shape[0] != X.shape[1]:
        raise DataError(f"coef must have {X.shape[1]} entries, got {w.shape[0]}.", argument="coef")
    best = solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ yv)

    def cost(v: np.ndarray) -> float:
        return float(np.sum((X @ v - yv) ** 2) + lam * np.sum(v**2))

    return cost(w) / cost(best)


def _finite_epsilon(epsilon: Any, estimator: str, alternative: str) -> None:
    """Private estimators refuse ``epsilon=inf``: a DP estimator never silently fits without noise."""
    if isinstance(epsilon, numbers.Real) and not isinstance(epsilon, bool) and math.isinf(float(epsilon)):
        raise ParameterError(
            f"{estimator} is a private estimator and epsilon must be finite, got {epsilon!r}; for the "
            f"non-private fit use {alternative} (or ltm_release(..., epsilon=math.inf) for the exact "
            "sketch).",
            argument="epsilon",
        )


_POSITIVE_INT = Interval(numbers.Integral, 1, None, closed="left")
_LTM_CONSTRAINTS: dict[str, Any] = {
    "epsilon": [EPSILON],
    "delta": [DELTA],
    "row_bound": [Interval(numbers.Real, 0, None, closed="neither")],
    "sketch_rows": [None, _POSITIVE_INT],
    "sketch": [Options(KINDS), "array-like", sp.spmatrix, sp.sparray],
    "sparsity": [_POSITIVE_INT],
    "mechanism": [Options(MECHANISMS)],
    "honest_fraction": [Interval(numbers.Real, 0, 1, closed="right")],
    "neighbouring": [Options(NEIGHBOURING)],
    "noise": [Options(NOISE)],
    "n_servers": [Interval(numbers.Integral, 2, None, closed="left")],
    "random_state": ["random_state"],
}
"""What every LTM estimator parameter may be (scikit-learn's ``_parameter_constraints``)."""


def _estimator_sketch(
    sketch: Any, sketch_rows: Any, sparsity: Any, rng: np.random.Generator, n: int, default_rows: int
) -> sp.csr_matrix:
    if isinstance(sketch, str):
        kind = check_choice(sketch, "sketch", KINDS)
        m = default_rows if sketch_rows is None else check_positive_int(sketch_rows, "sketch_rows")
        return check_sketch(make_sketch(m, n, kind, sparsity, rng), n)
    return check_sketch(sketch, n)


class _LTMBase(ParamsValidationMixin):
    """What the two LTM estimators share: the fitted check and the sketch release of their data."""

    epsilon: Any
    delta: Any
    row_bound: Any
    sketch: Any
    sketch_rows: Any
    sparsity: Any
    mechanism: Any
    honest_fraction: Any
    neighbouring: Any
    noise: Any
    n_servers: Any
    random_state: Any

    def __sklearn_tags__(self) -> Any:
        # Every fit draws fresh DP noise (never seeded): two fits differ, and scikit-learn's
        # checks that compare fits are skipped by this tag.
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.non_deterministic = True
        return tags

    def _check_fitted(self, attr: str) -> None:
        if not hasattr(self, attr):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit first.", argument="fit")

    def _sketch_release(
        self, A: np.ndarray, default_rows: int, min_rows: int = 1
    ) -> tuple[sp.csr_matrix, Release]:
        """Draw (or check) the public sketch and release ``S A + E`` with the estimator's parameters."""
        rng = make_generator(self.random_state)
        S = _estimator_sketch(self.sketch, self.sketch_rows, self.sparsity, rng, A.shape[0], default_rows)
        if S.shape[0] < min_rows:
            raise ParameterError(
                f"sketch_rows must be >= n_components={min_rows}, got {S.shape[0]}.", argument="sketch_rows"
            )
        rel = release(
            A,
            S,
            self.epsilon,
            self.delta,
            self.row_bound,
            mechanism=self.mechanism,
            honest_fraction=self.honest_fraction,
            p=1.0,
            neighbouring=self.neighbouring,
            noise=self.noise,
            n_servers=self.n_servers,
            withholding=None,
            random_state=rng,
            name="X",
        )
        return S, rel


class LTMLowRank(TransformerMixin, _LTMBase, BaseEstimator):
    """Private rank-``k`` approximation from an LTM sketch (top right singular vectors of ``S A + E``).

    Parameters
    ----------
    n_components : int, default 2
        The rank ``k``.
    epsilon, delta : float, default 1.0, 1e-5
        Privacy of the sketch release (everything after is post-processing); epsilon
        must be finite (a private estimator never fits without noise).
    row_bound : float, default 1.0
        Public L2 bound on each client's row; rows are clipped to it.
    sketch_rows : int, optional
        Sketch rows ``m``; default ``20 * n_components``.
    sketch : {"osnap", "dense"} or matrix, default "osnap"
        The public sketch kind, or a fixed ``(m, n)`` matrix.
    sparsity : int, default 2
        Non-zeros per column of the OSNAP sketch.
    mechanism, honest_fraction, neighbouring, noise, n_servers
        Passed to :func:`ltm_release`.
    random_state : None, int or Generator
        Seeds the public sketch and the masks (not the DP noise).

    Attributes
    ----------
    components_ : ndarray, shape (n_components, d)
        Orthonormal rows spanning the private rank-``k`` subspace ``X'``.
    projector_ : ndarray, shape (d, d)
        ``X' X'^T``.
    release_ : Release
        The noisy sketch release (the privacy spent).

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025 (Theorems 4.3-4.4).

    Examples
    --------
    >>> A = np.outer(np.linspace(-1, 1, 2000), [0.6, 0.8, 0.0])
    >>> est = LTMLowRank(n_components=1, random_state=0).fit(A)
    >>> est.components_.shape, est.release_.epsilon
    ((1, 3), 1.0)
    """

    def __init__(
        self,
        n_components: int = 2,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        row_bound: float = 1.0,
        sketch_rows: int | None = None,
        sketch: Any = "osnap",
        sparsity: int = 2,
        mechanism: str = "gaussian",
        honest_fraction: float = 1.0,
        neighbouring: str = "replace",
        noise: str = "aggregated",
        n_servers: int = 2,
        random_state: Any = None,
    ) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.row_bound = row_bound
        self.sketch_rows = sketch_rows
        self.sketch = sketch
        self.sparsity = sparsity
        self.mechanism = mechanism
        self.honest_fraction = honest_fraction
        self.neighbouring = neighbouring
        self.noise = noise
        self.n_servers = n_servers
        self.random_state = random_state

    _parameter_constraints: ClassVar[dict[str, Any]] = {"n_components": [_POSITIVE_INT], **_LTM_CONSTRAINTS}

    def fit(self, X: Any, y: Any = None) -> LTMLowRank:
        """Release the sketch of ``X`` and keep its top ``n_components`` right singular vectors.

        Each fit charges ``(epsilon, delta)`` for the sketch release (recorded in
        ``release_``) and draws fresh DP noise; ``random_state`` only fixes the public
        sketch and masks, so two fits with the same seed still differ.

        Parameters
        ----------
        X : array-like of shape (n, d)
            The private data, one client per row; rows are clipped to ``row_bound``.
        y : None
            Ignored (scikit-learn convention).

        Returns
        -------
        LTMLowRank
            The fitted estimator.

        Raises
        ------
        ParameterError
            When ``epsilon`` is infinite, ``n_components > d``, or ``sketch_rows`` is
            below ``n_components``.
        """
        _finite_epsilon(self.epsilon, "LTMLowRank", "sklearn.decomposition.TruncatedSVD")
        self._validate_params()
        A = matrix(X, "X", private=True)
        k = int(self.n_components)
        if k > A.shape[1]:
            raise ParameterError(
                f"n_components must be <= the number of columns ({A.shape[1]}), got {k}.",
                argument="n_components",
            )
        _, rel = self._sketch_release(A, 20 * k, min_rows=k)
        _, _, vt = np.linalg.svd(rel.value, full_matrices=False)
        self.components_ = vt[:k]
        self.projector_ = self.components_.T @ self.components_
        self.release_ = rel
        self.n_features_in_ = A.shape[1]
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Project ``X`` onto the private subspace: ``X @ components_.T``.

        Post-processing of the released subspace: costs no further budget (``X`` itself
        is not clipped or protected here).

        Parameters
        ----------
        X : array-like of shape (n, d)
            Data with the fitted number of columns.

        Returns
        -------
        ndarray of shape (n, n_components)
            The coordinates of ``X`` in the private subspace.

        Raises
        ------
        NotFittedError
            When called before :meth:`fit`.
        """
        self._check_fitted("components_")
        A = matrix(X, "X")
        check_n_features(A, self.n_features_in_, "LTMLowRank")
        return A @ self.components_.T


class LTMRidge(RegressorMixin, _LTMBase, BaseEstimator):
    """Private ridge regression from an LTM sketch of ``[X | y]``.

    Solves ``coef = (A~^T A~ + alpha I)^-1 A~^T b~`` on the noisy sketch
    ``[A~ | b~] = S [X | y] + E`` (no intercept, as in the paper; centre the data
    with public values if needed). ``E^T E`` adds about ``m sigma_c**2 I`` of extra
    ridge; ``debias=True`` subtracts its expectation (a library option, off by default).

    Parameters
    ----------
    alpha : float, default 1.0
        The ridge penalty ``lambda``.
    epsilon, delta, row_bound, sketch_rows, sketch, sparsity : see LTMLowRank
    mechanism, honest_fraction, neighbouring, noise, n_servers, random_state : see LTMLowRank
        As in :class:`LTMLowRank`; each ``[x_i, y_i]`` is clipped jointly to ``row_bound``;
        ``sketch_rows`` defaults to ``20 * n_features``.
    debias : bool, default False
        Subtract the expected ``E^T E`` from the sketched Gram matrix.

    Attributes
    ----------
    coef_ : ndarray, shape (d,)
    release_ : Release

    References
    ----------
    Burkhardt, Keller, Orlandi, Schwiegelshohn. "Distributed Differentially Private
    Data Analytics via Secure Sketching". ICML 2025 (Theorem 4.5).

    Examples
    --------
    >>> X = np.random.default_rng(0).uniform(-0.5, 0.5, size=(5000, 2))
    >>> est = LTMRidge(alpha=1.0, random_state=0).fit(X, X @ [0.5, -0.5])
    >>> est.coef_.shape, est.predict(X[:3]).shape
    ((2,), (3,))
    """

    def __init__(
        self,
        alpha: float = 1.0,
        epsilon: float = 1.0,
        delta: float = 1e-5,
        row_bound: float = 1.0,
        sketch_rows: int | None = None,
        sketch: Any = "osnap",
        sparsity: int = 2,
        mechanism: str = "gaussian",
        honest_fraction: float = 1.0,
        neighbouring: str = "replace",
        noise: str = "aggregated",
        n_servers: int = 2,
        debias: bool = False,
        random_state: Any = None,
    ) -> None:
        self.alpha = alpha
        self.epsilon = epsilon
        self.delta = delta
        self.row_bound = row_bound
        self.sketch_rows = sketch_rows
        self.sketch = sketch
        self.sparsity = sparsity
        self.mechanism = mechanism
        self.honest_fraction = honest_fraction
        self.neighbouring = neighbouring
        self.noise = noise
        self.n_servers = n_servers
        self.debias = debias
        self.random_state = random_state

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "alpha": [Interval(numbers.Real, 0, None, closed="left")],
        "debias": ["boolean"],
        **_LTM_CONSTRAINTS,
    }

    def fit(self, X: Any, y: Any) -> LTMRidge:
        """Release the sketch of ``[X | y]`` and solve the ridge problem on it.

        Each fit charges ``(epsilon, delta)`` for the sketch release (recorded in
        ``release_``) and draws fresh DP noise; ``random_state`` only fixes the public
        sketch and masks. Solving on the released sketch is post-processing.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Private features, one client per row.
        y : array-like of shape (n,)
            Private targets; each ``[x_i, y_i]`` is clipped jointly to ``row_bound``.

        Returns
        -------
        LTMRidge
            The fitted estimator.

        Raises
        ------
        ParameterError
            When ``epsilon`` is infinite or another parameter is invalid.
        """
        _finite_epsilon(self.epsilon, "LTMRidge", "sklearn.linear_model.Ridge(fit_intercept=False)")
        self._validate_params()
        Z = joint(X, y, private=True, estimator="LTMRidge")
        lam = float(self.alpha)
        d = Z.shape[1] - 1
        S, rel = self._sketch_release(Z, 20 * d)
        At, bt = rel.value[:, :d], rel.value[:, d]
        gram = At.T @ At + lam * np.eye(d)
        if self.debias:
            n_j = np.diff(S.indptr)
            per_entry = rel.parameters["sigma_c"] ** 2 / float(rel.parameters["honest_fraction"])
            gram = gram - per_entry * float(np.count_nonzero(n_j)) * np.eye(d)
        self.coef_ = solve(gram, At.T @ bt)
        self.release_ = rel
        self.n_features_in_ = d
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Return ``X @ coef_``.

        Post-processing of the released coefficients: costs no further budget.

        Parameters
        ----------
        X : array-like of shape (n, d)
            Features with the fitted number of columns.

        Returns
        -------
        ndarray of shape (n,)
            The predictions (no intercept).

        Raises
        ------
        NotFittedError
            When called before :meth:`fit`.
        """
        self._check_fitted("coef_")
        A = matrix(X, "X")
        check_n_features(A, self.n_features_in_, "LTMRidge")
        return A @ self.coef_
