"""Infinite motifs: the last motif of a composition extended to t -> infinity.

Part of :mod:`trustlab.explain.semantic_ode` (catalog row 004-01; Kacprzyk, Piskorz and van der
Schaar, "Skip the Equations", ICML 2025, and Semantic ODE, Kacprzyk and van der Schaar, ICLR 2025).
With infinite motifs a trajectory's composition ends in one of the authors' six unbounded-time
motifs, named by the finite motif plus a letter:

- ``"++f"`` / ``"--f"``: unbounded, accelerating growth or decline; property: *doubling time*
  (of the exponential part) and its scale;
- ``"+-p"`` / ``"-+f"``: unbounded, decelerating growth or decline, logarithmic; property: the
  *incrementing factor* (``A ln 2``: for large t the value grows by ``2 A ln 2`` per doubling of time);
- ``"+-h"`` / ``"-+h"``: a *horizontal asymptote*; properties: the asymptote and the *half-life
  time* (when half of the gap to the asymptote is left, measured from the motif's start).

The finite motifs before it are the cubic pieces of :mod:`._semantic_motifs`; the infinite motif
starts at the last transition point ``tau`` and takes the value, slope and curvature there
(``x''(tau) = 0`` after an inflection, ``x'(tau) = 0`` after an extremum), so the whole trajectory
is C^1 (C^2 at inflections) and keeps the motif's derivative signs on ``[tau, infinity)``:

- exponential: ``x = y0 + y1 u + y2 u^2/2 + s A (e^{Bu} - 1 - Bu - (Bu)^2/2)``, ``B = ln 2 / D``
  (the authors' ``A e^{Bu} + C u^2 + D u + E`` with the same matching; their A is a heuristic of
  y1 and y2, here a free property so that it is never 0 after an inflection);
- logarithmic: the authors' ``y0 + s A log(1 + C u + C^2 u^2 / 2)``, ``C = |y1| / A``;
- asymptotic: ``x = L - s G f(g(u))`` with ``G = |L - y0|``, ``f(z) = 2 / (1 + e^z)`` (the authors'
  sigmoid, ``f(0) = 1``, ``f''(0) = 0``) and the time warp
  ``g(u) = c (rho u + (1 - rho) r tanh(u / r))``, ``c = 2|y1|/G`` (concave, ``g'(0) = c``,
  ``g''(0) = 0``, slope ``c rho`` for large u: an exponential approach); the authors' warp is a
  two-knot cubic spline then linear, the same shape class. The half-life time solves
  ``g(H) = ln 3`` (``f = 1/2``), found by bisection. A lone asymptotic motif (no inflection before
  it) is the authors' single-motif form, exponential: ``L - s G 2^{-u / H}`` with half-life ``H``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from trustlab.explain._semantic_motifs import CompositionShape

__all__ = [
    "INFINITE_MOTIFS",
    "InfiniteCompositionShape",
    "infinite_library",
    "infinite_properties",
    "is_infinite",
]

INFINITE_MOTIFS = {"++f": "exp", "--f": "exp", "+-p": "log", "-+f": "log", "+-h": "asym", "-+h": "asym"}
_EXTENSIONS = {"++": ("++f",), "--": ("--f",), "+-": ("+-p", "+-h"), "-+": ("-+f", "-+h")}


def is_infinite(comp: tuple[str, ...]) -> bool:
    """Whether a composition ends in an infinite motif."""
    return comp[-1] in INFINITE_MOTIFS


def infinite_library(finite: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The authors' infinite library: each composition with its last motif replaced by its extensions."""
    out = [(*c[:-1], ext) for c in finite for ext in _EXTENSIONS[c[-1]]]
    return sorted(set(out), key=lambda c: (len(c), c))


class InfiniteCompositionShape:
    """The trajectory predictor of compositions of one length ending in one kind of infinite motif.

    Same interface as :class:`CompositionShape` (raw properties of length ``2 L + 4``), read as:
    ``x_start``; widths ``h_1..h_L`` (``h_L`` is the share of the observed window in the infinite
    motif); rises ``v_1..v_{L-1}``; ``v_L`` the infinite motif's first property (scale ``A`` or the
    gap to the asymptote, ``softplus``); ``r_start`` the start slope (a lone infinite motif: its
    magnitude, ``softplus``, per time range); ``r_end`` the second property (doubling time or warp
    scale ``r``, ``softplus`` times the time range); then ``rho`` of the asymptotic warp (``sigmoid``).
    """

    def __init__(self, compositions: list[tuple[str, ...]], min_width: float = 0.01) -> None:
        comps = [tuple(c) for c in compositions]
        kinds = {INFINITE_MOTIFS.get(c[-1]) for c in comps}
        n = len(comps[0])
        if any(len(c) != n for c in comps) or len(kinds) != 1 or None in kinds:
            raise ValueError("compositions must have one length and end in one kind of infinite motif")
        self.compositions, self.n_motifs, self.kind = comps, n, kinds.pop()
        self.min_width = min(min_width, 0.9 / n)
        self.n_params = 2 * n + 4
        self.signs = torch.tensor([1.0 if c[-1][0] == "+" else -1.0 for c in comps], dtype=torch.float64)
        # The finite cubics: the library's systems for the base motifs (the last one's rows unused).
        self.finite = CompositionShape([(*c[:-1], c[-1][:2]) for c in comps], min_width) if n > 1 else None

    def _junction(self, raw: torch.Tensor, comp: torch.Tensor, t0: float, t1: float) -> tuple[Any, ...]:
        """Knot times and values of the finite part, cubic coefficients, and (tau, y0, y1, y2)."""
        n, span = self.n_motifs, t1 - t0
        if self.finite is None:
            s = self.signs[comp][:, None]
            y1 = s * torch.nn.functional.softplus(raw[:, 2 * n + 1 : 2 * n + 2]) / span
            times = torch.full_like(raw[:, :1], t0)
            values = raw[:, :1]
            return times, values, None, times[:, 0], values[:, 0], y1[:, 0], torch.zeros_like(y1[:, 0])
        times, values = self.finite.knots(raw, comp, t0, t1)
        coef = self.finite.coefficients(raw, comp, values)
        w = times[:, n - 1] - times[:, n - 2]
        c = coef[:, n - 2]
        y1 = (c[:, 0] + 2 * c[:, 1] + 3 * c[:, 2]) / w
        y2 = (2 * c[:, 1] + 6 * c[:, 2]) / w**2
        return times[:, :n], values[:, :n], coef, times[:, n - 1], values[:, n - 1], y1, y2

    def _tail(
        self, raw: torch.Tensor, comp: torch.Tensor, u: torch.Tensor, t0: float, t1: float
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The infinite motif at ``u = t - tau >= 0`` and its properties (value units, then times)."""
        n, span = self.n_motifs, t1 - t0
        *_, tau, y0, y1, y2 = self._junction(raw, comp, t0, t1)
        s = self.signs[comp]
        p1 = torch.nn.functional.softplus(raw[:, 2 * n])
        p2 = torch.nn.functional.softplus(raw[:, 2 * n + 2]) * span
        col = (lambda v: v[:, None]) if u.ndim == 2 else (lambda v: v)
        if self.kind == "exp":
            bu = col(math.log(2.0) / p2) * u
            x = col(y0) + col(y1) * u + col(y2) * u**2 / 2 + col(s * p1) * (torch.expm1(bu) - bu - bu**2 / 2)
            return x, {"scale": p1, "doubling time": p2}
        if self.kind == "log":
            c = torch.clamp(s * y1, min=0.0) / p1
            cu = col(c) * u
            x = col(y0) + col(s * p1) * torch.log1p(cu + cu**2 / 2)
            return x, {"incrementing factor": p1 * math.log(2.0)}
        limit = y0 + s * p1
        if self.finite is None:  # the authors' lone asymptotic motif: A e^{-Bu} + C, half-life ln 2 / B
            x = col(limit) - col(s * p1) * torch.exp(-math.log(2.0) * u / col(p2))
            return x, {"horizontal asymptote": limit, "half-life time": tau + p2}
        c = 2 * torch.clamp(s * y1, min=0.0) / p1
        rho = torch.sigmoid(raw[:, 2 * n + 3])

        def warp(v: torch.Tensor) -> torch.Tensor:
            return col(c) * (col(rho) * v + col(1 - rho) * col(p2) * torch.tanh(v / col(p2)))

        x = col(limit) - col(s * p1) * 2 * torch.sigmoid(-warp(u))
        with torch.no_grad():  # half-life: warp(H) = ln 3, bisection on [0, ln 3 / (c rho)]
            col = lambda v: v  # noqa: E731
            lo, hi = torch.zeros_like(c), math.log(3.0) / (c * rho)
            for _ in range(60):
                mid = (lo + hi) / 2
                below = warp(mid) < math.log(3.0)
                lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
        return x, {"horizontal asymptote": limit, "half-life time": tau + (lo + hi) / 2}

    def knots(
        self, raw: torch.Tensor, comp: torch.Tensor, t0: float, t1: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Transition points ``(n, L+1)``: the finite ones, then ``(inf, limit as t -> inf)``."""
        times, values, *_ = self._junction(raw, comp, t0, t1)
        if self.kind == "asym":
            limit = self.properties(raw, comp, t0, t1)["horizontal asymptote"]
        else:
            limit = self.signs[comp] * torch.inf
        ends = torch.full_like(times[:, :1], torch.inf)
        return torch.cat([times, ends], 1), torch.cat([values, limit[:, None]], 1)

    def properties(
        self, raw: torch.Tensor, comp: torch.Tensor, t0: float, t1: float
    ) -> dict[str, torch.Tensor]:
        """The infinite motif's named properties (standardised value units; times in data units)."""
        return self._tail(raw, comp, torch.zeros_like(raw[:, 0]), t0, t1)[1]

    def curve(
        self, raw: torch.Tensor, comp: torch.Tensor, t: torch.Tensor, t0: float, t1: float
    ) -> torch.Tensor:
        """The trajectory at times ``t`` (n, m), any ``t >= t0``."""
        times, values, coef, tau, *_ = self._junction(raw, comp, t0, t1)
        tail, _ = self._tail(raw, comp, torch.clamp(t - tau[:, None], min=0.0), t0, t1)
        if coef is None:
            return tail
        piece = (t[:, None, :] >= times[:, 1:-1, None]).sum(dim=1)  # finite motif index, <= L - 2
        a = torch.gather(times, 1, piece)
        w = torch.gather(times[:, 1:] - times[:, :-1], 1, piece)
        y0 = torch.gather(values, 1, piece)
        u = torch.clamp((t - a) / w, max=1.0)
        c = [torch.gather(coef[:, :, i], 1, piece) for i in range(3)]
        head = y0 + u * (c[0] + u * (c[1] + u * c[2]))
        return torch.where(t < tau[:, None], head, tail)


def infinite_properties(
    shape: Any, raw: torch.Tensor, t_range: tuple[float, float], scale: float, mean: float
) -> dict[str, Any]:
    """Named infinite-motif properties per row in the data's units (empty for a finite shape)."""
    if not isinstance(shape, InfiniteCompositionShape):
        return {}
    zero = torch.zeros(len(raw), dtype=torch.long)
    props = {k: v.numpy() for k, v in shape.properties(raw, zero, *t_range).items()}
    if "horizontal asymptote" in props:
        props["horizontal asymptote"] = props["horizontal asymptote"] * scale + mean
    for name in ("scale", "incrementing factor"):
        if name in props:
            props[name] = props[name] * scale
    return props
