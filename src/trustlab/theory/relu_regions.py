"""ReLU networks with exactly ``2^d`` linear regions: the triangle-wave parameterisation.

A depth-``d``, width-4 ReLU network whose weights are written in terms of triangle peaks
``a_i in (0, 1)`` outputs ``alpha + beta x - sum_i s_i W_i(x)``, ``W_i`` the composition of
``i + 1`` asymmetric triangle functions, and so has exactly ``2^d`` linear regions on
``[0, 1]`` whatever the peaks: at initialisation and all through training in the peak
parameters (Milkert, Hyde & Laine, ICML 2025). :func:`count_linear_regions_1d` counts the
regions of any 1-D ReLU network exactly; :func:`simulate_convex_fit` compares the fitted
parameterisation with randomly initialised networks. See ``docs/theory/relu-regions.md``.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_bounds, check_numeric_array, check_positive_int, make_generator
from trustlab.errors import DataError, ParameterError

__all__ = [
    "ConvexFitComparison",
    "TriangleFit",
    "TriangleNet",
    "count_linear_regions_1d",
    "fit_random_relu",
    "fit_triangle_net",
    "simulate_convex_fit",
    "theorem_scales",
]

Layers = list[tuple[np.ndarray, np.ndarray]]
# Peaks are kept in [margin, 1 - margin] while fitting, so no region shrinks below what
# floating point can resolve (exactly 2^d regions stay countable).
_PEAK_MARGIN = 1e-3
_TARGETS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "x3": lambda x: x**3,
    "x11": lambda x: x**11,
}
_INT1 = Interval(numbers.Integral, 1, None, closed="left")
_FIT_PARAMS: dict[str, list[Any]] = {
    "x": ["array-like"],
    "y": ["array-like"],
    "depth": [_INT1],
    "max_nfev": [_INT1],
    "random_state": ["random_state"],
}


@validate_params({"s0": [Interval(numbers.Real, 0, None, closed="neither")], "peaks": ["array-like"]})
def theorem_scales(s0: float, peaks: Any) -> np.ndarray:
    """Scales ``s_0..s_{d-1}`` from Theorem 3.1: ``s_{i+1} = s_i (1 - a_{i+1}) a_{i+2}``.

    Parameters
    ----------
    s0 : float
        First scale, > 0.
    peaks : array-like
        ``a_0..a_d`` in ``(0, 1)``: the ``d`` layers' peaks and one beyond the last layer.

    Returns
    -------
    numpy.ndarray
        ``d`` positive scales.

    References
    ----------
    M. Milkert, D. Hyde and F. Laine, "Compelling ReLU Networks to Exhibit Exponentially Many
    Linear Regions at Initialization and During Training", ICML 2025, Theorem 3.1.

    Examples
    --------
    >>> theorem_scales(0.25, [0.5, 0.5, 0.5, 0.5]).tolist()  # Yarotsky's 1/4 ratio
    [0.25, 0.0625, 0.015625]
    """
    a = _check_peaks(peaks, "peaks", minimum=2)
    scales = [float(s0)]
    for i in range(len(a) - 2):
        scales.append(scales[-1] * (1 - a[i + 1]) * a[i + 2])
    return np.asarray(scales)


def _check_peaks(peaks: Any, name: str, *, minimum: int = 1) -> np.ndarray:
    a = check_numeric_array(peaks, name, ndim=1, min_rows=minimum)
    if np.any((a <= 0) | (a >= 1)):
        raise ParameterError(
            f"{name} must all lie strictly between 0 and 1, got {a.tolist()}.", argument=name
        )
    return a


@dataclass(frozen=True)
class TriangleNet:
    """``f(x) = alpha + beta x - sum_i scales[i] W_i(x)`` on ``[0, 1]``, ``W_i`` composed triangles.

    Attributes
    ----------
    peaks : numpy.ndarray
        ``a_0..a_{d-1}`` in ``(0, 1)``, one per hidden layer.
    scales : numpy.ndarray
        ``s_0..s_{d-1}`` (> 0 for the convex, Theorem 3.1 form).
    alpha, beta : float
        Intercept and slope of the linear term.

    Examples
    --------
    >>> net = TriangleNet(np.array([0.5, 0.5]), np.array([0.25, 0.0625]), 0.0, 1.0)
    >>> net(np.array([0.0, 0.5, 1.0])).tolist()  # x^2 at the grid points
    [0.0, 0.25, 1.0]
    """

    peaks: np.ndarray
    scales: np.ndarray
    alpha: float
    beta: float

    @property
    def depth(self) -> int:
        """Number of hidden layers ``d`` (``2^d`` linear regions)."""
        return len(self.peaks)

    def waves(self, x: np.ndarray) -> np.ndarray:
        """Return ``W_0(x)..W_{d-1}(x)``, the composed triangle waves.

        Parameters
        ----------
        x : numpy.ndarray
            Points in ``[0, 1]``.

        Returns
        -------
        numpy.ndarray
            Shape ``(d, len(x))``.
        """
        w = np.asarray(x, dtype=float)
        out = []
        for a in self.peaks:
            w = np.where(w <= a, w / a, (1 - w) / (1 - a))
            out.append(w)
        return np.asarray(out)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Evaluate ``f`` at ``x`` (in ``[0, 1]``)."""
        x = np.asarray(x, dtype=float)
        return self.alpha + self.beta * x - self.scales @ self.waves(x)

    def relu_layers(self) -> Layers:
        """The same function as a width-4 ReLU network: ``[(W, b), ...]``, last layer linear.

        Hidden neurons: a running sum ``relu(sum_{j<k} s_j W_j)``, the triangle neurons
        ``relu(W_{k-1})`` and ``relu(W_{k-1} - a_k)``, and a carry ``relu(x)`` of the input.

        Returns
        -------
        list of (numpy.ndarray, numpy.ndarray)
            ``d`` hidden layers of width 4 and a linear output layer.
        """
        a, s = self.peaks, self.scales
        layers: Layers = [(np.array([[0.0], [1.0], [1.0], [1.0]]), np.array([0.0, 0.0, -a[0], 0.0]))]
        for k in range(1, self.depth):
            p, q = 1 / a[k - 1], -1 / (a[k - 1] * (1 - a[k - 1]))
            w = np.array(
                [[1.0, s[k - 1] * p, s[k - 1] * q, 0.0], [0.0, p, q, 0.0], [0.0, p, q, 0.0], [0, 0, 0, 1.0]]
            )
            layers.append((w, np.array([0.0, 0.0, -a[k], 0.0])))
        p, q = 1 / a[-1], -1 / (a[-1] * (1 - a[-1]))
        out = np.array([[-1.0, -s[-1] * p, -s[-1] * q, self.beta]])
        layers.append((out, np.array([self.alpha])))
        return layers


def relu_forward(layers: Layers, x: np.ndarray) -> np.ndarray:
    """Evaluate a 1-D-input ReLU network given as ``[(W, b), ...]`` (last layer linear)."""
    h = np.asarray(x, dtype=float)[None, :]
    for w, b in layers[:-1]:
        h = np.maximum(w @ h + b[:, None], 0.0)
    w, b = layers[-1]
    return (w @ h + b[:, None])[0]


@validate_params(
    {
        "layers": [list, tuple],
        "interval": ["array-like"],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
    }
)
def count_linear_regions_1d(
    layers: Layers, interval: Sequence[float] = (0.0, 1.0), *, tol: float = 1e-9
) -> int:
    """Exact number of linear regions of a scalar ReLU network on an interval.

    Pieces on which every neuron's pre-activation is affine are split at each zero crossing,
    layer by layer; adjacent pieces with the same affine output (to ``tol``, relative) are
    merged, so the count is of linear regions of the function, not of activation patterns.

    Parameters
    ----------
    layers : list of (W, b)
        Hidden layers then a linear output layer with one output; the input is scalar.
    interval : (lower, upper)
    tol : float

    Returns
    -------
    int

    References
    ----------
    Milkert, Hyde & Laine, ICML 2025 (linear regions of 1-D networks, Section 3).

    Examples
    --------
    >>> peaks = np.array([0.3, 0.6, 0.5, 0.4])
    >>> net = TriangleNet(peaks[:3], theorem_scales(0.2, peaks), 0.0, 1.0)
    >>> count_linear_regions_1d(net.relu_layers())
    8
    """
    lo, hi = check_bounds(interval, "interval")
    _check_layers(layers)
    pieces = [(lo, hi, np.ones(1), np.zeros(1))]
    for w, b in layers[:-1]:
        new = []
        for left, right, slope, icpt in pieces:
            pa, pc = w @ slope, w @ icpt + b
            moving = pa != 0
            roots = np.unique(-pc[moving] / pa[moving])
            guard = 1e-13 * max(1.0, abs(hi - lo))
            cuts = [left, *[r for r in roots if left + guard < r < right - guard], right]
            for a_, b_ in itertools.pairwise(cuts):
                on = (pa * (a_ + b_) / 2 + pc) > 0
                new.append((a_, b_, pa * on, pc * on))
        pieces = new
    w, b = layers[-1]
    affine = [(float((w @ s)[0]), float((w @ c + b)[0])) for _, _, s, c in pieces]
    count = 1
    for (s0, c0), (s1, c1) in itertools.pairwise(affine):
        if abs(s1 - s0) > tol * (1 + abs(s0)) or abs(c1 - c0) > tol * (1 + abs(c0)):
            count += 1
    return count


def _check_layers(layers: Any) -> None:
    if not isinstance(layers, list | tuple) or len(layers) < 1:
        raise DataError("layers must be a non-empty list of (W, b) pairs.", argument="layers")
    width = 1
    for i, pair in enumerate(layers):
        try:
            w, b = (np.asarray(v, dtype=float) for v in pair)
        except (TypeError, ValueError):
            raise DataError(f"layers[{i}] must be a (W, b) pair of arrays.", argument="layers") from None
        if w.ndim != 2 or b.shape != (w.shape[0],) or w.shape[1] != width:
            raise DataError(
                f"layers[{i}] has W of shape {w.shape} and b of shape {b.shape}; expected W with "
                f"{width} column(s) (the previous layer's width) and one bias per row.",
                argument="layers",
            )
        if not (np.all(np.isfinite(w)) and np.all(np.isfinite(b))):
            raise DataError(f"layers[{i}] contains NaN or infinite weights.", argument="layers")
        width = w.shape[0]
    if width != 1:
        raise DataError("the last layer of layers must have one output.", argument="layers")


# ---------------------------------------------------------------- fitting


@dataclass(frozen=True)
class TriangleFit:
    """A fitted network and its training error.

    Attributes
    ----------
    net : TriangleNet or None
        The parameterised network (None for a random-init baseline).
    layers : list of (W, b)
        The ReLU network actually fitted (after ``refine``, the raw weights).
    mse : float
        Mean squared error on the training points.
    n_regions : int
        Exact number of linear regions on ``[0, 1]``.

    See Also
    --------
    fit_triangle_net, fit_random_relu : build it.
    """

    net: TriangleNet | None
    layers: Layers
    mse: float
    n_regions: int


def _check_xy(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    xa = check_numeric_array(x, "x", ndim=1, min_rows=2)
    ya = check_numeric_array(y, "y", ndim=1, min_rows=2)
    if len(xa) != len(ya):
        raise DataError(f"x and y differ in length ({len(xa)} vs {len(ya)}).", argument="y")
    if np.any((xa < 0) | (xa > 1)):
        raise DataError("x must lie in [0, 1]; rescale it with (x - lo) / (hi - lo) first.", argument="x")
    return xa, ya


def _unpack(theta: np.ndarray, depth: int, theorem: bool) -> TriangleNet:
    peaks = _PEAK_MARGIN + (1 - 2 * _PEAK_MARGIN) / (1 + np.exp(-np.clip(theta[: depth + 1], -50, 50)))
    if theorem:
        scales = theorem_scales(float(np.exp(np.clip(theta[depth + 1], -50, 50))), peaks)
        alpha, beta = theta[depth + 2], theta[depth + 3]
    else:
        scales = np.exp(np.clip(theta[depth + 1 : 2 * depth + 1], -50, 50))
        alpha, beta = theta[2 * depth + 1], theta[2 * depth + 2]
    return TriangleNet(peaks[:depth], scales, float(alpha), float(beta))


def _flatten(layers: Layers) -> np.ndarray:
    return np.concatenate([np.concatenate([w.ravel(), b]) for w, b in layers])


def _unflatten(theta: np.ndarray, shapes: list[tuple[int, int]]) -> Layers:
    out, pos = [], 0
    for rows, cols in shapes:
        w = theta[pos : pos + rows * cols].reshape(rows, cols)
        pos += rows * cols
        out.append((w, theta[pos : pos + rows]))
        pos += rows
    return out


def _jacobian(layers: Layers, x: np.ndarray) -> np.ndarray:
    """Jacobian of the output in the flattened weights, one row per input, by backpropagation."""
    acts = [x[:, None]]
    pres = []
    for w, b in layers[:-1]:
        pre = acts[-1] @ w.T + b
        pres.append(pre)
        acts.append(np.maximum(pre, 0.0))
    grad = np.ones((len(x), 1))
    blocks: list[np.ndarray] = []
    for idx in range(len(layers) - 1, -1, -1):
        w, _ = layers[idx]
        blocks.append(
            np.concatenate([(grad[:, :, None] * acts[idx][:, None, :]).reshape(len(x), -1), grad], 1)
        )
        if idx:
            grad = (grad @ w) * (pres[idx - 1] > 0)
    return np.concatenate(blocks[::-1], axis=1)


def _train_raw(layers: Layers, x: np.ndarray, y: np.ndarray, max_nfev: int) -> Layers:
    shapes = [w.shape for w, _ in layers]
    result = least_squares(
        lambda t: relu_forward(_unflatten(t, shapes), x) - y,
        _flatten(layers),
        jac=lambda t: _jacobian(_unflatten(t, shapes), x),
        method="lm" if len(x) >= sum(r * c + r for r, c in shapes) else "trf",
        tr_solver="exact",
        max_nfev=max_nfev,
    )
    return _unflatten(result.x, shapes)


@validate_params(_FIT_PARAMS | {"theorem_scaling": ["boolean"], "refine": ["boolean"]})
def fit_triangle_net(
    x: Any,
    y: Any,
    *,
    depth: int = 5,
    theorem_scaling: bool = True,
    refine: bool = False,
    max_nfev: int = 400,
    random_state: Any = None,
) -> TriangleFit:
    """Fit the ``2^d``-region parameterisation to ``(x, y)`` on ``[0, 1]`` by least squares.

    Parameters
    ----------
    x, y : array-like
        Training inputs in ``[0, 1]`` and targets (a convex target suits the construction).
    depth : int, default 5
        Hidden layers ``d`` (the paper's 4 x 5 network).
    theorem_scaling : bool, default True
        Tie the scales to the peaks by Theorem 3.1; False leaves each ``s_i > 0`` free.
    refine : bool, default False
        Afterwards train the raw ReLU weights from the fitted network (the paper's last stage;
        the region count is then no longer guaranteed).
    max_nfev : int, default 400
        Function-evaluation budget of each least-squares stage.
    random_state : None, int or numpy.random.Generator
        Draws the initial peaks (logits from N(0, 0.5^2)).

    Returns
    -------
    TriangleFit

    References
    ----------
    M. Milkert, D. Hyde and F. Laine, "Compelling ReLU Networks to Exhibit Exponentially Many
    Linear Regions at Initialization and During Training", ICML 2025.

    Examples
    --------
    >>> x = np.linspace(0, 1, 200)
    >>> fit = fit_triangle_net(x, x**3, depth=4, random_state=0)
    >>> fit.n_regions, fit.mse < 1e-4
    (16, True)
    """
    xa, ya = _check_xy(x, y)
    d = check_positive_int(depth, "depth")
    budget = check_positive_int(max_nfev, "max_nfev")
    rng = make_generator(random_state)
    n_free = 1 if theorem_scaling else d
    theta0 = np.concatenate([rng.normal(0, 0.5, d + 1), np.full(n_free, math.log(0.25)), [0.0, 1.0]])
    if not theorem_scaling:
        theta0[d + 1 : 2 * d + 1] = np.log(0.25 * 0.25 ** np.arange(d))
    fit = least_squares(lambda t: _unpack(t, d, theorem_scaling)(xa) - ya, theta0, max_nfev=budget)
    net = _unpack(fit.x, d, theorem_scaling)
    layers = net.relu_layers()
    if refine:
        layers = _train_raw(layers, xa, ya, budget)
    mse = float(np.mean((relu_forward(layers, xa) - ya) ** 2))
    return TriangleFit(net=net, layers=layers, mse=mse, n_regions=count_linear_regions_1d(layers))


@validate_params(_FIT_PARAMS | {"width": [_INT1]})
def fit_random_relu(
    x: Any, y: Any, *, depth: int = 5, width: int = 4, max_nfev: int = 400, random_state: Any = None
) -> TriangleFit:
    """Baseline: a ReLU network with Kaiming-normal weights (zero biases) trained by least squares.

    Parameters
    ----------
    x, y : array-like
        As in :func:`fit_triangle_net`.
    depth, width : int
        Hidden layers and neurons per layer (default the same 4 x 5 network).
    max_nfev : int
        Least-squares budget.
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    TriangleFit
        With ``net=None``.

    References
    ----------
    Milkert, Hyde & Laine, ICML 2025 (the "Kaiming init" rows of its comparison).

    Examples
    --------
    >>> x = np.linspace(0, 1, 100)
    >>> fit_random_relu(x, x**3, depth=2, random_state=0).n_regions <= 9
    True
    """
    xa, ya = _check_xy(x, y)
    d = check_positive_int(depth, "depth")
    wd = check_positive_int(width, "width")
    budget = check_positive_int(max_nfev, "max_nfev")
    rng = make_generator(random_state)
    fan_in = [1] + [wd] * d
    rows = [wd] * d + [1]
    layers = [
        (rng.normal(0, math.sqrt(2 / f), (r, f)), np.zeros(r)) for r, f in zip(rows, fan_in, strict=True)
    ]
    layers = _train_raw(layers, xa, ya, budget)
    mse = float(np.mean((relu_forward(layers, xa) - ya) ** 2))
    return TriangleFit(net=None, layers=layers, mse=mse, n_regions=count_linear_regions_1d(layers))


@dataclass(frozen=True)
class ConvexFitComparison:
    """Training MSE and region counts over runs: the parameterisation vs random initialisation.

    Attributes
    ----------
    triangle_mse, random_mse : numpy.ndarray
        Per-run training MSE.
    triangle_regions, random_regions : numpy.ndarray
        Per-run exact linear-region counts on ``[0, 1]``.
    depth : int

    See Also
    --------
    simulate_convex_fit : builds it.
    """

    triangle_mse: np.ndarray
    random_mse: np.ndarray
    triangle_regions: np.ndarray
    random_regions: np.ndarray
    depth: int

    @property
    def triangle_median_mse(self) -> float:
        """Median MSE of the parameterised network."""
        return float(np.median(self.triangle_mse))

    @property
    def random_median_mse(self) -> float:
        """Median MSE of the randomly initialised network."""
        return float(np.median(self.random_mse))

    @property
    def mean_mse_ratio(self) -> float:
        """Mean MSE of the random networks over that of the parameterised ones (the paper's mean rows)."""
        return float(np.mean(self.random_mse) / np.mean(self.triangle_mse))


@validate_params(
    {
        "target": [Options(_TARGETS), callable],
        "depth": [_INT1],
        "n_points": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_runs": [_INT1],
        "refine": ["boolean"],
        "max_nfev": [_INT1],
        "random_state": ["random_state"],
    }
)
def simulate_convex_fit(
    target: str | Callable[[np.ndarray], np.ndarray] = "x3",
    *,
    depth: int = 5,
    n_points: int = 500,
    n_runs: int = 30,
    refine: bool = False,
    max_nfev: int = 400,
    random_state: Any = None,
) -> ConvexFitComparison:
    """Fit a convex 1-D target with both networks over several seeds (the paper's experiment).

    Parameters
    ----------
    target : {"x3", "x11"} or callable, default "x3"
        Function on ``[0, 1]`` sampled at ``n_points`` evenly spaced points.
    depth : int, default 5
    n_points : int, default 500
    n_runs : int, default 30
    refine : bool, default False
        Also train the raw weights after the parameterised fit.
    max_nfev : int, default 400
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    ConvexFitComparison

    References
    ----------
    Milkert, Hyde & Laine, ICML 2025 (the 1-D convex-function table).

    Examples
    --------
    >>> sim = simulate_convex_fit("x3", depth=3, n_points=100, n_runs=2, random_state=0)
    >>> sim.triangle_regions.tolist()
    [8, 8]
    """
    func = target if callable(target) else _TARGETS[target]  # declared: "x3", "x11" or a callable
    n = check_positive_int(n_points, "n_points", minimum=2)
    runs = check_positive_int(n_runs, "n_runs")
    rng = make_generator(random_state)
    x = np.linspace(0.0, 1.0, n)
    y = check_numeric_array(func(x), "target(x)", ndim=1, min_rows=n)
    tri, rnd = [], []
    for _ in range(runs):
        seed = int(rng.integers(2**31))
        tri.append(fit_triangle_net(x, y, depth=depth, refine=refine, max_nfev=max_nfev, random_state=seed))
        rnd.append(fit_random_relu(x, y, depth=depth, max_nfev=max_nfev, random_state=seed))
    return ConvexFitComparison(
        triangle_mse=np.array([f.mse for f in tri]),
        random_mse=np.array([f.mse for f in rnd]),
        triangle_regions=np.array([f.n_regions for f in tri]),
        random_regions=np.array([f.n_regions for f in rnd]),
        depth=int(depth),
    )
