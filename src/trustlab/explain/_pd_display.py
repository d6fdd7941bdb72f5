"""Drawing partial dependence: a display object kept apart from :class:`FastPD`'s computations.

As scikit-learn's ``PartialDependenceDisplay`` and fairlearn's ``_plotting`` module do,
the estimator computes and the display draws; matplotlib is imported only when a
curve is drawn, so computing with :mod:`trustlab.explain` works without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.errors import MissingDependencyError

__all__ = ["PDCurveDisplay", "new_axes"]

_YLABEL = "partial dependence (raw model output)"


def new_axes(figsize: tuple[float, float] = (5.0, 3.4)) -> Any:
    """A fresh matplotlib Axes on its own ``Figure`` (no pyplot, no global backend change).

    Parameters
    ----------
    figsize : tuple of float, default (5.0, 3.4)
        Figure size in inches.

    Returns
    -------
    matplotlib.axes.Axes
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - matplotlib is a dependency; tested by hiding it
        raise MissingDependencyError(
            "drawing needs matplotlib (pip install matplotlib); the computations do not.",
            argument="matplotlib",
        ) from None
    return Figure(figsize=figsize, layout="constrained").add_subplot()


class PDCurveDisplay:
    """The partial dependence curve of one feature, and its drawing.

    Parameters
    ----------
    grid : array-like of shape (n,)
        Feature values (numbers, or category values for a categorical feature).
    values : array-like of shape (n,)
        Partial dependence at each grid value.
    feature_name : str
        Label of the x axis.
    ylabel : str, default "partial dependence (raw model output)"
        Label of the y axis.

    Attributes
    ----------
    ax_ : matplotlib.axes.Axes
        The Axes drawn on (after :meth:`plot`).
    figure_ : matplotlib.figure.Figure
        Its figure.
    line_ : matplotlib.lines.Line2D
        The curve.

    See Also
    --------
    trustlab.explain.FastPD.pd_curve : computes ``grid`` and ``values``.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.fastpd import PDCurveDisplay
    >>> disp = PDCurveDisplay(np.linspace(0, 1, 5), np.arange(5.0), "age").plot()
    >>> disp.ax_.get_xlabel(), len(disp.line_.get_xdata())
    ('age', 5)
    """

    def __init__(self, grid: Any, values: Any, feature_name: str, *, ylabel: str = _YLABEL) -> None:
        self.grid = np.asarray(grid)
        self.values = np.asarray(values, dtype=float)
        self.feature_name = str(feature_name)
        self.ylabel = ylabel

    @classmethod
    def from_estimator(
        cls,
        estimator: Any,
        feature: Any,
        *,
        grid: Any = None,
        grid_resolution: int = 50,
        ax: Any = None,
        **line_kwargs: Any,
    ) -> PDCurveDisplay:
        """Compute a fitted FastPD's PD curve of ``feature`` and draw it.

        Parameters
        ----------
        estimator : FastPD
            Fitted.
        feature : int or str
            Feature index or name.
        grid : array-like, optional
            Values to evaluate at (default: see :meth:`FastPD.pd_curve`).
        grid_resolution : int, default 50
            Size of the default grid.
        ax : matplotlib.axes.Axes, optional
            Where to draw; a new Axes when None.
        **line_kwargs
            Passed to ``Axes.plot`` (e.g. ``color``).

        Returns
        -------
        PDCurveDisplay

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.ensemble import GradientBoostingRegressor
        >>> from trustlab.explain import FastPD
        >>> from trustlab.explain.fastpd import PDCurveDisplay
        >>> X = np.random.default_rng(0).normal(size=(100, 2))
        >>> fpd = FastPD(GradientBoostingRegressor(n_estimators=5).fit(X, X[:, 0])).fit(X)
        >>> PDCurveDisplay.from_estimator(fpd, 0, grid_resolution=10).ax_.get_title()
        'Partial dependence on x0'
        """
        g, v = estimator.pd_curve(feature, grid, grid_resolution=grid_resolution)
        name = feature if isinstance(feature, str) else estimator.feature_names_in_[int(feature)]
        return cls(g, v, str(name)).plot(ax=ax, **line_kwargs)

    def plot(self, ax: Any = None, *, title: str | None = None, **line_kwargs: Any) -> PDCurveDisplay:
        """Draw the curve on ``ax`` (a new Axes when None).

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw.
        title : str, optional
            Default ``"Partial dependence on <feature>"``.
        **line_kwargs
            Passed to ``Axes.plot``.

        Returns
        -------
        PDCurveDisplay
            ``self``, with ``ax_``, ``figure_`` and ``line_`` set.
        """
        ax = new_axes() if ax is None else ax
        grid = [str(v) for v in self.grid] if self.grid.dtype == object else self.grid
        (self.line_,) = ax.plot(grid, self.values, **({"color": "C0", "lw": 2} | line_kwargs))
        ax.set_xlabel(self.feature_name)
        ax.set_ylabel(self.ylabel)
        ax.set_title(title if title is not None else f"Partial dependence on {self.feature_name}")
        self.ax_ = ax
        self.figure_ = ax.figure
        return self
