"""Motifs, compositions and the cubic trajectory predictor of semantic trajectory models.

The building blocks of :mod:`trustlab.explain.semantic_ode` (catalog row 004-01): Kacprzyk,
Piskorz and van der Schaar, "Skip the Equations: Learning Behavior of Personalized Dynamical
Systems Directly From Data", ICML 2025. A *motif* is the sign pair of a trajectory's first and
second derivative on an interval (``"+-"``: increasing and concave); a *composition* is the
sequence of motifs of a whole trajectory; its *properties* are the transition points between
motifs (and the free slopes at the two ends). Given a composition and properties, each motif is
drawn as the unique cubic that meets the transition conditions (zero slope at an extremum, zero
curvature at an inflection), with the free end slopes confined to ranges that keep every piece's
derivative signs those of its motif, so the predicted trajectory has the composition's shape
exactly. See docs/explain/semantic-trajectories.md.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from scipy.interpolate import BSpline
from scipy.optimize import minimize

__all__ = [
    "MOTIFS",
    "CompositionShape",
    "composition_library",
    "describe_tree",
    "fit_samples",
    "spline_design",
    "transition_type",
]

MOTIFS = ("++", "+-", "-+", "--")  # (sign of x', sign of x'')
_SUCCESSORS = {"+-": ("--", "++"), "-+": ("--", "++"), "--": ("-+",), "++": ("+-",)}
# Slope ranges, as multiples of the chord (x_right - x_left) of the motif in local time u in [0, 1],
# that keep the cubic's derivative signs those of the motif (the authors' ranges; each checked on the
# Hermite form). Left end (the trajectory's start) by (motif, type of the right end):
_LEFT = {
    ("++", "end"): (0.0, 1.0),
    ("++", "inflection"): (0.0, 1.0),
    ("--", "end"): (0.0, 1.0),
    ("--", "inflection"): (0.0, 1.0),
    ("+-", "end"): (1.0, 3.0),
    ("-+", "end"): (1.0, 3.0),
    ("+-", "extremum"): (1.5, 3.0),
    ("-+", "extremum"): (1.5, 3.0),
    ("+-", "inflection"): (1.0, 3.0),
    ("-+", "inflection"): (1.0, 3.0),
}
# Right end (the trajectory's end) by (motif, type of the left end):
_RIGHT = {
    ("++", "inflection"): (1.0, 3.0),
    ("--", "inflection"): (1.0, 3.0),
    ("++", "extremum"): (1.5, 3.0),
    ("--", "extremum"): (1.5, 3.0),
    ("+-", "inflection"): (0.0, 1.0),
    ("-+", "inflection"): (0.0, 1.0),
}


def composition_library(max_motifs: int = 4, *, simplified: bool = True) -> list[tuple[str, ...]]:
    """All compositions of 1..``max_motifs`` motifs that a smooth trajectory can have.

    A motif may only be followed by one that shares its sign of x' or x'' (the derivative signs change
    one at a time: at an extremum or at an inflection). ``simplified`` (the authors' default) drops
    compositions that repeat a motif two places later (e.g. ``+-, ++, +-``), which a smooth
    trajectory can only have through a degenerate wiggle.
    """
    out: list[tuple[str, ...]] = []

    def grow(prefix: tuple[str, ...]) -> None:
        if prefix:
            out.append(prefix)
        if len(prefix) == max_motifs:
            return
        for m in _SUCCESSORS[prefix[-1]] if prefix else MOTIFS:
            grow((*prefix, m))

    grow(())
    if simplified:
        out = [c for c in out if all(c[i] != c[i - 2] for i in range(2, len(c)))]
    return sorted(out, key=lambda c: (len(c), c))


def transition_type(left: str, right: str) -> str:
    """``"extremum"`` where x' changes sign between two motifs, ``"inflection"`` where x'' does."""
    if right not in _SUCCESSORS[left]:
        raise ValueError(f"motif {right!r} cannot follow {left!r}")
    return "extremum" if left[0] != right[0] else "inflection"


def spline_design(x: np.ndarray, lo: float, hi: float, n_basis: int) -> np.ndarray:
    """Per-feature GAM basis: ``n_basis - 1`` clamped cubic B-splines on [lo, hi] plus a linear term.

    The authors' basis (``BSplineBasisFunctions(n_basis=6, k=3, include_linear=True)``); values
    outside the training range are clipped to it (a constant extrapolation).
    """
    k = 3
    n_b = n_basis - 1
    if hi <= lo:
        return np.zeros((x.shape[0], n_basis))
    xc = np.clip(x, lo, hi)
    knots = np.r_[[lo] * k, np.linspace(lo, hi, n_b - k + 1), [hi] * k]
    b = BSpline.design_matrix(xc, knots, k).toarray()
    return np.column_stack([b, (xc - lo) / (hi - lo)])


class CompositionShape:
    """The cubic trajectory predictor of compositions with the same number of motifs, in torch.

    Each row (sample) has a composition (``comp`` indexes ``compositions``) and a raw property
    vector (unconstrained reals, length ``n_params = 2 L + 3``):
    ``[x_start, h_1..h_L, v_1..v_L, r_start, r_end]``. Motif widths are ``softmax(h)`` of the time
    range (each at least ``min_width`` of it, the authors' 0.01 by default, at most 0.9 / L), the
    rise or fall of motif j is ``softplus(v_j)``
    signed by the motif, and the free end slopes are ``lo + sigmoid(r) (hi - lo)`` within the
    ranges above. A lone motif is a cubic whose end-slope range depends on its start slope (the
    authors use the quadratic, one member of that family).
    Batching several compositions of one length in one call is what makes scoring them cheap.
    """

    def __init__(self, compositions: list[tuple[str, ...]], min_width: float = 0.01) -> None:
        comps = [tuple(c) for c in compositions]
        n = len(comps[0])
        if any(len(c) != n for c in comps):
            raise ValueError("compositions of one CompositionShape must have the same length")
        self.compositions = comps
        self.n_motifs = n
        self.min_width = min(min_width, 0.9 / n)
        self.n_params = 2 * n + 3
        inv, tables = zip(*(_piece_systems(c) for c in comps), strict=True)
        self.inverses = torch.stack(list(inv))  # (C, L, 3, 3)
        self.tables = torch.stack(list(tables))  # (C, L, 6): left on/lo/hi, right on/lo/hi
        self.signs = torch.tensor(
            [[1.0 if m[0] == "+" else -1.0 for m in c] for c in comps], dtype=torch.float64
        )

    def knots(
        self, raw: torch.Tensor, comp: torch.Tensor, t0: float, t1: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Transition points ``(times (n, L+1), values (n, L+1))`` from raw properties."""
        n = self.n_motifs
        w = self.min_width + (1.0 - n * self.min_width) * torch.softmax(raw[:, 1 : n + 1], dim=1)
        times = t0 + (t1 - t0) * torch.cat([torch.zeros_like(w[:, :1]), torch.cumsum(w, dim=1)], dim=1)
        rise = torch.nn.functional.softplus(raw[:, n + 1 : 2 * n + 1]) * self.signs[comp]
        values = raw[:, :1] + torch.cat([torch.zeros_like(rise[:, :1]), torch.cumsum(rise, dim=1)], dim=1)
        return times, values

    def coefficients(self, raw: torch.Tensor, comp: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """Cubic coefficients ``(c1, c2, c3)`` of each motif in local time, shape (n, L, 3)."""
        n = self.n_motifs
        delta = values[:, 1:] - values[:, :-1]
        tab = self.tables[comp]
        s_start = torch.sigmoid(raw[:, 2 * n + 1 : 2 * n + 2])
        s_end = torch.sigmoid(raw[:, 2 * n + 2 : 2 * n + 3])
        left = tab[:, :, 0] * (tab[:, :, 1] + s_start * (tab[:, :, 2] - tab[:, :, 1]))
        if n == 1:
            # Exact joint ranges for a lone cubic (chord units; x'' keeps its sign at both ends):
            # convex-like (++, --): m0 in [0, 1], m1 in [(3 - m0)/2, 3 - 2 m0];
            # concave-like (+-, -+): m0 in [1, 3], m1 in [max(0, 3 - 2 m0), (3 - m0)/2].
            convex = tab[:, :, 5] > 0
            lo = torch.where(convex, (3 - left) / 2, torch.clamp(3 - 2 * left, min=0.0))
            hi = torch.where(convex, 3 - 2 * left, (3 - left) / 2)
            right = lo + s_end * (hi - lo)
        else:
            right = tab[:, :, 3] * (tab[:, :, 4] + s_end * (tab[:, :, 5] - tab[:, :, 4]))
        rhs = delta[:, :, None] * torch.stack([torch.ones_like(left), left, right], dim=2)
        return (self.inverses[comp] @ rhs[..., None]).squeeze(-1)

    def curve(
        self, raw: torch.Tensor, comp: torch.Tensor, t: torch.Tensor, t0: float, t1: float
    ) -> torch.Tensor:
        """The trajectory at times ``t`` (n, m) for raw properties ``raw`` (n, n_params)."""
        times, values = self.knots(raw, comp, t0, t1)
        coef = self.coefficients(raw, comp, values)
        piece = (t[:, None, :] >= times[:, 1:-1, None]).sum(dim=1)  # (n, m) index of the motif
        a = torch.gather(times, 1, piece)
        w = torch.gather(times[:, 1:] - times[:, :-1], 1, piece)
        y0 = torch.gather(values, 1, piece)
        u = (t - a) / w
        c = [torch.gather(coef[:, :, i], 1, piece) for i in range(3)]
        return y0 + u * (c[0] + u * (c[1] + u * c[2]))


@lru_cache(maxsize=256)
def _piece_systems(comp: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per motif: the inverse of the 3x3 system for (c1, c2, c3) and where its free slopes enter.

    Rows: ``c1 + c2 + c3 = delta``; the left condition (start: ``c1 = slope``; extremum: ``c1 = 0``;
    inflection: ``c2 = 0``); the right condition (end: ``c1 + 2 c2 + 3 c3 = slope``; extremum:
    ``c1 + 2 c2 + 3 c3 = 0``;
    inflection: ``2 c2 + 6 c3 = 0``). The table holds, per motif, whether the start slope enters
    the second right-hand side and its range, then the same for the end slope and the third.
    """
    n = len(comp)
    inverses, tables = [], []
    for j, motif in enumerate(comp):
        left = "start" if j == 0 else transition_type(comp[j - 1], motif)
        right = "end" if j == n - 1 else transition_type(motif, comp[j + 1])
        rows = [[1.0, 1.0, 1.0]]
        table = [0.0] * 6
        rows.append([0.0, 1.0, 0.0] if left == "inflection" else [1.0, 0.0, 0.0])
        if left == "start":
            table[0:3] = [1.0, *_LEFT[(motif, right)]]
        if right == "inflection":
            rows.append([0.0, 2.0, 6.0])
        else:
            rows.append([1.0, 2.0, 3.0])
            if right == "end" and n > 1:
                table[3:6] = [1.0, *_RIGHT[(motif, left)]]
            elif right == "end":  # a lone motif: the end slope's range depends on the start slope's
                table[3:6] = [1.0, 0.0, 1.0 if motif in ("++", "--") else -1.0]
        inverses.append(np.linalg.inv(np.array(rows)))
        tables.append(table)
    return torch.tensor(np.array(inverses)), torch.tensor(tables, dtype=torch.float64)


def fit_samples(
    shape: CompositionShape,
    t: torch.Tensor,
    y: torch.Tensor,
    t0: float,
    t1: float,
    *,
    n_init: int,
    max_iter: int,
    generator: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Best raw properties of each sample's own trajectory under each composition of ``shape``.

    The inner fit of the composition scores. Every (composition, sample, start) triple is fitted at
    once with scipy's L-BFGS-B (gradients by torch autograd) on the sum of the per-row mean squared
    errors (the problems are independent,
    so the sum's gradient is each one's own). Returns the per-row MSE (C, n) and raw properties
    (C, n, n_params) of the best of ``n_init`` starts (the first start is the deterministic one:
    equal widths, the observed range split evenly, mid-range slopes).
    """
    n, n_comp, L = y.shape[0], len(shape.compositions), shape.n_motifs
    base = torch.zeros((n, shape.n_params), dtype=torch.float64)
    base[:, 0] = y[:, 0]
    span = (y.max(dim=1).values - y.min(dim=1).values).clamp_min(1e-3) / L
    base[:, L + 1 : 2 * L + 1] = torch.log(torch.expm1(span))[:, None]
    starts = [base.repeat(n_comp, 1)]
    for _ in range(n_init - 1):
        jitter = torch.as_tensor(generator.normal(0.0, 1.0, size=starts[0].shape), dtype=torch.float64)
        jitter[:, 0] = 0.0
        starts.append(starts[0] + jitter)
    start = torch.cat(starts, dim=0)
    comp = torch.arange(n_comp).repeat_interleave(n).repeat(n_init)
    tt, yy = t.repeat(n_comp * n_init, 1), y.repeat(n_comp * n_init, 1)

    def loss_and_grad(flat: np.ndarray) -> tuple[float, np.ndarray]:
        r = torch.as_tensor(flat.reshape(start.shape)).requires_grad_(True)
        loss = ((shape.curve(r, comp, tt, t0, t1) - yy) ** 2).mean(dim=1).sum()
        loss.backward()
        assert r.grad is not None
        value, grad = float(loss.detach()), r.grad.numpy().ravel()
        if not np.isfinite(value):  # a step too far: report a wall, L-BFGS-B backtracks
            return 1e300, np.zeros_like(flat)
        return value, grad

    res = minimize(
        loss_and_grad, start.numpy().ravel(), jac=True, method="L-BFGS-B", options={"maxiter": max_iter}
    )
    raw = torch.as_tensor(res.x.reshape(start.shape))
    with torch.no_grad():
        mse = ((shape.curve(raw, comp, tt, t0, t1) - yy) ** 2).mean(dim=1).reshape(n_init, n_comp, n)
        mse = torch.nan_to_num(mse, nan=np.inf)
        best = mse.argmin(dim=0)  # (C, n)
        params = raw.reshape(n_init, n_comp, n, -1)
        ci, si = torch.meshgrid(torch.arange(n_comp), torch.arange(n), indexing="ij")
        return mse[best, ci, si].numpy(), params[best, ci, si].numpy()


def describe_tree(node: dict, names: list[str], comps: list[tuple[str, ...]], indent: str = "") -> list[str]:
    """A composition tree as indented if/else text (leaves show the composition and sample count)."""
    if "feature" not in node:
        return [f"{indent}-> ({', '.join(comps[node['composition']])})  [{node['n']} samples]"]
    name = names[node["feature"]]
    return [
        f"{indent}if {name} <= {node['threshold']:.4g}:",
        *describe_tree(node["left"], names, comps, indent + "    "),
        f"{indent}else:  # {name} > {node['threshold']:.4g}",
        *describe_tree(node["right"], names, comps, indent + "    "),
    ]
