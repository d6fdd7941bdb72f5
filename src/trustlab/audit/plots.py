"""Plot helpers shared by the audit's renderers: inline SVG and a consistent look.

matplotlib is imported lazily, here and only here, when a report is rendered: ``import
trustlab`` and every computation (``Audit.run``, the sections' results, ``to_dict`` /
``to_json``) work without it. Figures are :class:`matplotlib.figure.Figure` objects
drawn without pyplot, so no backend is selected and a user's backend (``MPLBACKEND``,
``matplotlib.use``) is left as it was.
"""

from __future__ import annotations

import io
import re
from typing import Any

from trustlab.errors import MissingDependencyError

__all__ = [
    "LEGEND_FONTSIZE",
    "MEASURE_COLOURS",
    "PALETTE",
    "bar_legend",
    "figure_to_svg",
    "new_figure",
    "new_grid",
    "require_matplotlib",
]

_SVG_START = re.compile(r"^.*?(<svg\b)", re.DOTALL)

PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
"""Colours of the groups, in order (colour-blind friendly, as seaborn's "deep"): reserved for groups,
so that a colour means one group in every chart of the report."""

MEASURE_COLOURS = ("#3B3B3B", "#9A9A9A")
"""Colours of things that are not groups (measures, methods): greys, never a group's colour."""

LEGEND_FONTSIZE = 9.0
"""Legend font size in points (readable where a figure is shown at its own width)."""


def require_matplotlib() -> Any:
    """Import and return :mod:`matplotlib`, or raise a clear error when it is not installed.

    Returns
    -------
    module
        The :mod:`matplotlib` package (its :mod:`matplotlib.figure` submodule imported).

    Raises
    ------
    trustlab.errors.MissingDependencyError
        When matplotlib cannot be imported; ``argument`` is ``"matplotlib"``.

    Examples
    --------
    >>> require_matplotlib().__name__
    'matplotlib'
    """
    try:
        import matplotlib
        import matplotlib.figure
    except ImportError:
        raise MissingDependencyError(
            "rendering the audit's HTML report needs matplotlib (pip install matplotlib); the "
            "audit's figures (Audit.run, report.to_dict() / to_json()) do not.",
            argument="matplotlib",
        ) from None
    return matplotlib


def new_figure(width: float = 6.0, height: float = 3.4) -> tuple[Any, Any]:
    """A new (figure, axes) pair in the report's style, detached from pyplot state.

    Parameters
    ----------
    width, height : float
        Size in inches (100 dpi).

    Returns
    -------
    (matplotlib.figure.Figure, matplotlib.axes.Axes)
        The figure and its single axes (with a light grid).

    Examples
    --------
    >>> fig, ax = new_figure(4.0, 2.0)
    >>> fig.get_size_inches().tolist(), ax in fig.axes
    ([4.0, 2.0], True)
    """
    fig, axes = new_grid(1, 1, width=width, height=height)
    return fig, axes[0][0]


def new_grid(
    nrows: int, ncols: int, *, width: float, height: float, **kwargs: Any
) -> tuple[Any, list[list[Any]]]:
    """A figure of ``nrows x ncols`` axes (small multiples), detached from pyplot state.

    Parameters
    ----------
    nrows, ncols : int
        Shape of the grid.
    width, height : float
        Size of the whole figure in inches.
    **kwargs
        Passed to :meth:`matplotlib.figure.Figure.subplots` (e.g. ``width_ratios``).

    Returns
    -------
    (matplotlib.figure.Figure, list of list of matplotlib.axes.Axes)
        The axes as rows of columns, every axes with a light grid.

    Examples
    --------
    >>> fig, axes = new_grid(2, 3, width=6.0, height=4.0)
    >>> len(axes), len(axes[0])
    (2, 3)
    """
    mpl = require_matplotlib()
    fig = mpl.figure.Figure(figsize=(width, height), dpi=100, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kwargs)
    for ax in axes.ravel():
        ax.grid(True, alpha=0.3)
    return fig, [list(row) for row in axes]


def figure_to_svg(fig: Any, *, alt: str = "") -> str:
    """Serialise a matplotlib figure to an inline ``<figure><svg>`` element (no XML prolog).

    Text is kept as ``<text>`` (not paths) so that the report stays small and searchable.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure to serialise.
    alt : str, optional
        A one-line description, written as the figure's caption-free ``aria-label``.

    Returns
    -------
    str
        ``<figure class="plot">`` holding the ``<svg>``.

    Examples
    --------
    >>> fig, ax = new_figure(2.0, 1.0)
    >>> svg = figure_to_svg(fig, alt="an empty panel")
    >>> svg.startswith('<figure class="plot" aria-label="an empty panel"><svg'), svg.endswith("</figure>")
    (True, True)
    """
    mpl = require_matplotlib()
    buf = io.StringIO()
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": "trustlab"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = _SVG_START.sub(r"\1", buf.getvalue(), count=1)
    label = f' aria-label="{_attr(alt)}"' if alt else ""
    return f'<figure class="plot"{label}>{svg}</figure>'


def _attr(text: str) -> str:
    from html import escape

    return escape(text, quote=True)


def bar_legend(ax: Any, *, fontsize: float = LEGEND_FONTSIZE, loc: str = "outside") -> None:
    """Finish a bar panel: its legend and no vertical grid lines between the bars.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel.
    fontsize : float, default LEGEND_FONTSIZE
        The legend's font size (points).
    loc : str, default "outside"
        The legend's place (matplotlib's ``loc``), or ``"outside"``: right of the panel,
        where it can cover no bar.

    Examples
    --------
    >>> fig, ax = new_figure()
    >>> _ = ax.bar([0, 1], [0.2, 0.4], label="accuracy")
    >>> bar_legend(ax)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['accuracy']
    """
    if loc == "outside":
        ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    else:
        ax.legend(fontsize=fontsize, loc=loc)
    ax.grid(False, axis="x")
