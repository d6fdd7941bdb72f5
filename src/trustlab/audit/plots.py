"""Plot helpers shared by the audit sections: inline SVG and a consistent look."""

from __future__ import annotations

import io
import re

import matplotlib

matplotlib.use("Agg")  # the audit renders off-screen; no display is needed
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

__all__ = ["figure_to_svg", "new_figure"]

_SVG_START = re.compile(r"^.*?(<svg\b)", re.DOTALL)


def new_figure(width: float = 6.0, height: float = 3.4) -> tuple[Figure, plt.Axes]:
    """Return a new (figure, axes) pair in the report's style, detached from pyplot state."""
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(True, alpha=0.3)
    return fig, ax


def figure_to_svg(fig: Figure) -> str:
    """Serialise a matplotlib figure to an inline ``<svg>`` element (no XML prolog).

    Text is kept as paths-free ``<text>`` so that the report stays small and searchable.
    """
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "trustlab"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = _SVG_START.sub(r"\1", buf.getvalue(), count=1)
    return f'<figure class="plot">{svg}</figure>'
