"""Plots of explanations (kept apart from the computations, as in fairlearn)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["plot_importance", "plot_pd_curve"]


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0, 3.4), layout="constrained")
    return fig.add_subplot()


def plot_pd_curve(
    grid: np.ndarray,
    values: np.ndarray,
    feature_name: str,
    *,
    ax: Any = None,
    ylabel: str = "partial dependence (raw model output)",
    title: str | None = None,
    **line_kwargs: Any,
) -> Any:
    """Draw one PD curve ``values`` over ``grid``; return the matplotlib Axes."""
    ax = _axes(ax)
    ax.plot(grid, values, **({"color": "C0", "lw": 2} | line_kwargs))
    ax.set_xlabel(feature_name)
    ax.set_ylabel(ylabel)
    ax.set_title(title if title is not None else f"Partial dependence on {feature_name}")
    return ax


def plot_importance(importance: Any, *, ax: Any = None, top: int = 10, title: str = "Mean |SHAP|") -> Any:
    """Horizontal bar chart of the ``top`` largest entries of a pandas Series."""
    ax = _axes(ax)
    s = importance.sort_values(ascending=False).iloc[:top][::-1]
    ax.barh([str(i) for i in s.index], s.to_numpy(), color="C0")
    ax.set_xlabel("mean |contribution| (raw model output)")
    ax.set_title(title)
    return ax
