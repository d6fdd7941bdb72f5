"""``trustlab lm report``: one self-contained HTML + JSON page on a causal LM's internals.

:func:`inspect_model` runs the measurements of :mod:`trustlab.lm.internals` (massive values in
Q/K/V, top-k saturation layers, early-exit savings, attention summaries) on held-out tokens and
returns an :class:`LMReport`; :meth:`LMReport.save` writes ``report.html`` and ``report.json``
atomically through the audit's report machinery. The report renders; it never recomputes.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab.lm.internals import attention_summary, early_exit, massive_values, saturation_layers
from trustlab.lm.massive import rope_base, rope_frequency_profile

__all__ = ["LMReport", "inspect_model"]

_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
    "table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.2rem .5rem;"
    "text-align:right;font-variant-numeric:tabular-nums}th{background:#f3f3f3}caption{text-align:left;"
    "font-weight:600;padding:.3rem 0}.note{color:#555;font-size:.9rem}"
)


@dataclass(frozen=True)
class LMReport:
    """The measurements of :func:`inspect_model`, ready to render.

    Attributes
    ----------
    model : str
        Label of the model (name or folder) and its class.
    n_layers, n_heads, n_tokens : int
        Blocks, heads per block, tokens measured.
    massive : dict
        ``{"lam", "counts": {q,k,v: [[per head] per block]}, "concentration": {...}, "rope"}``;
        ``rope`` is None for a model without (Llama-layout) RoPE, else ``{"theta", "length",
        "rotation", "energy_share": {q, k}}`` from
        :func:`~trustlab.lm.massive.rope_frequency_profile`.
    saturation : dict
        ``{"k", "mean_layers", "in_order_rate"}``.
    early_exit : dict
        The fields of :class:`~trustlab.lm.internals.EarlyExit`.
    attention : dict
        ``{"entropy", "first_token", "previous_token", "self_token"}``, each per block and head.

    See Also
    --------
    inspect_model
    """

    model: str
    n_layers: int
    n_heads: int
    n_tokens: int
    massive: dict[str, Any]
    saturation: dict[str, Any]
    early_exit: dict[str, Any]
    attention: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data.

        Returns
        -------
        dict
            Every field.
        """
        return {
            "model": self.model,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_tokens": self.n_tokens,
            "massive_values": self.massive,
            "saturation": self.saturation,
            "early_exit": self.early_exit,
            "attention": self.attention,
        }

    def to_json(self) -> str:
        """The report as JSON text.

        Returns
        -------
        str
            Indented JSON.
        """
        return json.dumps(self.to_dict(), indent=2, allow_nan=True) + "\n"

    def to_html(self) -> str:
        """The report as one self-contained HTML page (no script, no external file).

        Returns
        -------
        str
            The page.
        """
        e = html.escape
        parts = [
            "<!doctype html><html lang=en><meta charset=utf-8>",
            f"<title>trustlab lm report: {e(self.model)}</title>",
            f"<style>{_CSS}</style><h1>Language-model report</h1>",
            f"<p>{e(self.model)}: {self.n_layers} blocks, {self.n_heads} heads, "
            f"measured on {self.n_tokens} tokens.</p>",
            "<h2>Massive values in Q, K and V</h2><p class=note>Dimensions whose L2 norm over all tokens "
            "exceeds "
            f"{self.massive['lam']:g} x the head's mean (Jin et al., ICML 2025); Q and K before RoPE. "
            "Concentration: max / mean of the norms.</p>",
        ]
        counts = {x: np.asarray(self.massive["counts"][x]) for x in "qkv"}
        if not any(c.any() for c in counts.values()):
            parts.append("<p>No dimension of Q, K or V passes the threshold in any head.</p>")
        else:
            parts.append(_grid("massive dimensions per head (Q / K / V)", _cells(counts, "{:d}"), ""))
        conc = {x: np.asarray(self.massive["concentration"][x]) for x in "qkv"}
        parts.append(_grid("concentration per head (Q / K / V)", _cells(conc, "{:.2f}"), ""))
        rope = self.massive.get("rope")
        if rope:
            parts.append(
                "<p class=note>Where Q and K keep their energy among RoPE's frequencies (index 0 turns "
                f"fastest; base {rope['theta']:g}): the paper finds the massive values of large models "
                f"in the frequencies that barely turn over the context ({rope['length']} tokens here).</p>"
                + _grid(
                    "RoPE frequencies: turn over the context (rad) and share of the squared norm",
                    [rope["rotation"], rope["energy_share"]["q"], rope["energy_share"]["k"]],
                    "{:.3g}",
                    rows="",
                    cols="j = ",
                    row_labels=("turn (rad)", "Q share", "K share"),
                )
            )
        sat = self.saturation
        parts.append(
            "<h2>Top-k saturation</h2><p class=note>Block (0-based) from which the logit lens ranks each "
            "final top-k token at its rank for good (Lioubashevski et al.). In order (top-1 first) at "
            f"{sat['in_order_rate']:.1%} of positions.</p>"
            + _grid("mean saturation block per rank", [sat["mean_layers"]], "{:.2f}", rows="", cols="rank ")
        )
        ex = self.early_exit
        parts.append(
            "<h2>Early exit</h2><table><tr><th>rule</th><th>blocks saved</th><th>agreement with full</th>"
            "<th>next-token accuracy</th></tr>"
            f"<tr><td>full model</td><td>0%</td><td>100%</td><td>{ex['accuracy_full']:.1%}</td></tr>"
            f"<tr><td>top-1 unchanged for one block</td><td>{ex['layers_saved']:.1%}</td>"
            f"<td>{ex['agreement']:.1%}</td><td>{ex['accuracy_exit']:.1%}</td></tr>"
            f"<tr><td>oracle (saturation block)</td><td>{ex['oracle_layers_saved']:.1%}</td><td>100%</td>"
            f"<td>{ex['accuracy_full']:.1%}</td></tr></table>"
        )
        parts.append(
            "<h2>Attention</h2>"
            + _grid(
                "per head: mean row entropy (nats) / weight on the first token (sink) / on the previous "
                "token / on itself",
                _cells({key: np.asarray(self.attention[key]) for key in _ATTENTION}, "{:.2f}"),
                "",
            )
        )
        return "".join(parts) + "</html>\n"

    def save(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``report.html`` and ``report.json`` into ``out_dir`` (replaced atomically).

        Parameters
        ----------
        out_dir : str or Path
            A new folder, or one holding only an earlier report.

        Returns
        -------
        tuple of Path
            The two files.
        """
        from trustlab.audit.report import _replace_folder, check_out_dir

        check_out_dir(out_dir)
        out = Path(out_dir)
        _replace_folder(out, {"report.html": self.to_html(), "report.json": self.to_json()})
        return out / "report.html", out / "report.json"


_ATTENTION = ("entropy", "first_token", "previous_token", "self_token")


def _cells(arrays: dict[str, np.ndarray], fmt: str) -> list[list[str]]:
    """One grid of 'a / b / c' cells from equally shaped (block, head) arrays."""
    stacked = np.stack(list(arrays.values()), axis=-1)
    conv = int if fmt == "{:d}" else float
    return [[" / ".join(fmt.format(conv(v)) for v in cell) for cell in row] for row in stacked.tolist()]


def _grid(
    caption: str,
    values: Any,
    fmt: str,
    *,
    rows: str = "block ",
    cols: str = "head ",
    row_labels: tuple[str, ...] | None = None,
) -> str:
    arr = np.asarray(values)
    head = "".join(f"<th>{cols}{j}</th>" for j in range(arr.shape[1]))
    body = []
    for i, row in enumerate(arr):
        cells = "".join(
            f"<td>{html.escape(v)}</td>"
            if isinstance(v, str)
            else f"<td>{fmt.format(int(v) if fmt == '{:d}' else float(v))}</td>"
            if not (isinstance(v, float) and math.isnan(v))
            else "<td>-</td>"
            for v in row.tolist()
        )
        label = html.escape(row_labels[i]) if row_labels else f"{rows}{i}" if rows else ""
        body.append(f"<tr><th>{label}</th>{cells}</tr>")
    return f"<table><caption>{html.escape(caption)}</caption><tr><th></th>{head}</tr>{''.join(body)}</table>"


def inspect_model(
    model: Any, input_ids: Any, *, label: str = "model", k: int = 3, lam: float = 5.0
) -> LMReport:
    """Measure a causal LM's internals on held-out tokens.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Any decoder-only causal LM.
    input_ids : array-like of int, shape (batch, seq)
        Held-out token ids (at least 2 per sequence).
    label : str, default="model"
        Names the model in the report.
    k : int, default=3
        Ranks followed by the saturation analysis.
    lam : float, default=5.0
        Massive-value threshold factor.

    Returns
    -------
    LMReport
        Ready to save.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=16, n_layers=2, n_heads=2))
    >>> inspect_model(m, [[1, 2, 3, 4]]).n_layers
    2
    """
    ids = np.asarray(input_ids)
    ids = ids[None] if ids.ndim == 1 else ids
    mv = massive_values(model, ids, lam=lam)
    theta = rope_base(model.config)
    rope = None
    if theta is not None:
        prof = {x: rope_frequency_profile(mv.norms[x], length=ids.shape[1], theta=theta) for x in "qk"}
        rope = {
            "theta": theta,
            "length": int(ids.shape[1]),
            "rotation": prof["q"].rotation.round(4).tolist(),
            "energy_share": {x: p.energy_share.round(4).tolist() for x, p in prof.items()},
        }
    sat = saturation_layers(model, ids, k=k)
    ex = early_exit(model, ids)
    att = attention_summary(model, ids)
    return LMReport(
        model=f"{label} ({type(model).__name__})",
        n_layers=int(mv.norms["q"].shape[0]),
        n_heads=int(mv.norms["q"].shape[1]),
        n_tokens=int(ids.size),
        massive={
            "lam": mv.lam,
            "counts": {x: v.tolist() for x, v in mv.counts().items()},
            "concentration": {x: v.round(4).tolist() for x, v in mv.concentration().items()},
            "rope": rope,
        },
        saturation={
            "k": k,
            "mean_layers": sat.mean_layers().round(4).tolist(),
            "in_order_rate": sat.in_order_rate(),
        },
        early_exit={name: float(getattr(ex, name)) for name in ex.__dataclass_fields__},
        attention={name: getattr(att, name).round(4).tolist() for name in att.__dataclass_fields__},
    )
