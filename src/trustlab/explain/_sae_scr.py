"""SAEBench's spurious-correlation-removal metric (SCR, automated SHIFT); re-exported by sae_metrics.

References
----------
.. [1] Karvonen, Rager, Lin, Tigges, Bloom, Chanin, Lau, Farrell, McDougall, Ayonrinde, Till,
   Wearden, Conmy, Marks, Nanda. "SAEBench: A Comprehensive Benchmark for Sparse Autoencoders
   in Language Model Interpretability". ICML 2025, section 3.4 and appendix D.
.. [2] Marks, Rager, Michaud, Belinkov, Bau, Mueller. "Sparse Feature Circuits: Discovering and
   Editing Interpretable Causal Graphs in Language Models" (SHIFT). ICLR 2025.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.explain._sae_common import _ablate, _check_sae, _probe, binary_labels

__all__ = ["SCRResult", "spurious_correlation_removal"]

#: SAEBench's released ablation sizes (its paper plots 5 .. 500 and reports 20).
SCR_N_VALUES = (2, 5, 10, 20, 50, 100, 500)


@dataclass(frozen=True)
class SCRResult:
    """Spurious correlation removal of one concept pair (SAEBench's SCR).

    Attributes
    ----------
    scores : pandas.DataFrame
        One row per ablation size ``n`` (the index): ``scr`` (the reported direction's
        ``S_SHIFT``), ``scr_ablate_spurious`` and ``scr_ablate_target`` (both directions),
        ``accuracy_ablate_spurious`` (the biased probe's accuracy on the target after
        ablating the spurious concept's ``n`` latents) and ``accuracy_ablate_target`` (on
        the spurious concept after ablating the target's).
    direction : str
        ``"ablate_spurious"`` or ``"ablate_target"``: the direction ``scr`` reports.
        SAEBench reports the concept the biased probe reads less (lower base accuracy)
        as the one to recover, and ablates the other.
    base_accuracy : dict
        ``A_base``: the biased probe's held-out accuracy on the balanced set, keyed by the
        concept it is scored on (``"target"``, ``"spurious"``).
    oracle_accuracy : dict
        ``A_oracle``: a probe trained on the balanced set for that concept, same keys.
    latents : dict
        Latents ranked for ablation, best first (``max(n_values)`` of them): ``"spurious"``
        (ablated to recover the target) and ``"target"``.
    n_test : int
        Held-out rows (balanced over the four cells).
    correct : dict of ndarray
        Whether the biased probe is right on each held-out row (for paired standard errors):
        ``"base_target"`` and ``"base_spurious"`` of shape ``(n_test,)``, ``"ablate_spurious"``
        (scored on the target) and ``"ablate_target"`` of shape ``(len(n_values), n_test)``.

    See Also
    --------
    spurious_correlation_removal
    """

    scores: pd.DataFrame
    direction: str
    base_accuracy: dict[str, float]
    oracle_accuracy: dict[str, float]
    latents: dict[str, list[int]]
    n_test: int
    correct: dict[str, np.ndarray]

    @property
    def score(self) -> float:
        """SAEBench's headline SCR: ``scr`` at ``n = 20`` (else at the largest ``n``)."""
        n = 20 if 20 in self.scores.index else int(self.scores.index.max())
        return float(self.scores["scr"].to_dict()[n])


def _balanced_cells(t: np.ndarray, s: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Row indices with equally many rows of each (t, s) cell (subsampled to the smallest)."""
    cells = [np.flatnonzero((t == a) & (s == b)) for a in (0, 1) for b in (0, 1)]
    m = min(len(c) for c in cells)
    return np.sort(np.concatenate([rng.choice(c, m, replace=False) for c in cells]))


def _check_n_values(n_values: Any, n_latents: int) -> list[int]:
    if n_values is None:
        return [n for n in SCR_N_VALUES if n <= n_latents] or [n_latents]
    try:
        ns = sorted({int(n) for n in n_values})
        ok = all(not isinstance(n, bool) and float(n) == int(n) for n in n_values)
    except (TypeError, ValueError):
        ns, ok = [], False
    if not ns or not ok or ns[0] < 1 or ns[-1] > n_latents:
        raise ParameterError(
            f"n_values must be integers in [1, {n_latents}] (latents to ablate), got {n_values!r}.",
            argument="n_values",
        )
    return ns


def _selection(
    selection: str, Z: np.ndarray, y: np.ndarray, D: np.ndarray, w: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Latents ranked for ablation: by absolute probe attribution, or at random (the baseline)."""
    if selection == "random":
        return rng.permutation(D.shape[0])
    effect = np.abs((Z[y == 1].mean(0) - Z[y == 0].mean(0)) * (D @ w))
    order = np.argsort(-effect, kind="stable")
    return order[effect[order] > 0]  # SAEBench ablates only latents with a non-zero effect


def spurious_correlation_removal(
    sae: Any,
    X: Any,
    y_target: Any,
    y_spurious: Any,
    *,
    n_values: Any = None,
    selection: str = "attribution",
    test_size: float = 0.2,
    random_state: int = 0,
) -> SCRResult:
    """Spurious correlation removal (SCR, SAEBench section 3.4): debias a probe by ablating latents.

    SAEBench's automated SHIFT (Marks et al.). The rows are subsampled to a balanced set (all four
    combinations of the two binary concepts equally often) and split (stratified by cell). On
    the training split: the biased probe ``C_b`` is a logistic probe trained on the biased subset
    (only the cells where target and spurious labels agree, e.g. male professors and female
    nurses), in which the two concepts are perfectly correlated; the oracle probes are trained on
    the balanced split, one per concept. For the concept to ablate, its probe ``w`` ranks latents
    by absolute probe attribution ``|(mean_{c=1}(a_l) - mean_{c=0}(a_l)) (d_l . w)|`` (latents with
    no effect are never chosen); the top ``n`` are zero-ablated in the held-out activations keeping
    the reconstruction error (``x - sum_{l in L} a_l d_l``). ``S_SHIFT = (A_abl - A_base) /
    (A_oracle - A_base)`` with ``A_abl`` and ``A_base`` the biased probe's held-out accuracy on the
    other concept with and without the ablation and ``A_oracle`` that concept's oracle probe's.
    Both directions are scored; as SAEBench does, ``scr`` reports the direction whose ``A_base``
    is lower (the concept the biased probe neglects is recovered by ablating the other).

    Parameters
    ----------
    sae : SparseAutoencoder
        Fitted (anything with ``transform``, ``W_dec_`` and ``b_dec_``).
    X : array-like of shape (n_samples, d)
        Activations (SAEBench: mean-pooled residual stream of each text).
    y_target : array-like of shape (n_samples,)
        The intended binary concept (SAEBench: profession, e.g. professor / nurse).
    y_spurious : array-like of shape (n_samples,)
        The spurious binary concept (SAEBench: gender); every combination with ``y_target``
        must occur (at least 10 rows each).
    n_values : iterable of int, optional
        Ablation sizes ``n``; default SAEBench's (2, 5, 10, 20, 50, 100, 500) up to the number
        of latents (its paper reports ``n = 20``).
    selection : {"attribution", "random"}, default="attribution"
        How latents are chosen: SAEBench's probe attribution, or uniformly at random (a baseline
        whose expected score is about 0).
    test_size : float, default=0.2
        Held-out fraction (SAEBench: 4,000 train and 1,000 test texts).
    random_state : int, default=0
        Seeds the balancing, the split and the random selection.

    Returns
    -------
    SCRResult

    Examples
    --------
    >>> class Identity:  # latents: target yes / no, spurious yes / no
    ...     W_dec_, b_dec_ = np.eye(4), np.zeros(4)
    ...     def transform(self, X): return np.maximum(X, 0)
    >>> rng = np.random.default_rng(0)
    >>> t, s = rng.integers(0, 2, 800), rng.integers(0, 2, 800)
    >>> X = np.c_[t, 1 - t, 2 * s, 2 - 2 * s] + rng.normal(0, 0.3, (800, 4))
    >>> r = spurious_correlation_removal(Identity(), X, t, s, n_values=[2])
    >>> r.direction, sorted(r.latents["spurious"]), bool(r.score > 0.8)
    ('ablate_spurious', [2, 3], True)
    """
    sae = _check_sae(sae)
    X = check_numeric_array(X, "X", ndim=2, min_rows=40)
    t = binary_labels(y_target, X.shape[0], "y_target")
    s = binary_labels(y_spurious, X.shape[0], "y_spurious")
    D = np.asarray(sae.W_dec_, dtype=float)
    if D.ndim != 2 or D.shape[1] != X.shape[1]:
        raise DataError(
            f"X must have the autoencoder's {D.shape[-1]} columns, got {X.shape[1]}.", argument="X"
        )
    ns = _check_n_values(n_values, D.shape[0])
    if selection not in ("attribution", "random"):
        raise ParameterError(
            f"selection must be 'attribution' or 'random', got {selection!r}.", argument="selection"
        )
    if isinstance(test_size, bool) or not isinstance(test_size, numbers.Real) or not 0 < test_size < 1:
        raise ParameterError(f"test_size must be in (0, 1), got {test_size!r}.", argument="test_size")
    counts = [int(((t == a) & (s == b)).sum()) for a in (0, 1) for b in (0, 1)]
    if min(counts) < 10:
        raise DataError(
            f"every combination of y_target and y_spurious needs at least 10 rows, got {counts} "
            "(cells 00, 01, 10, 11): SCR scores the biased probe on a balanced set.",
            argument="y_spurious",
        )
    rng = make_generator(random_state)
    keep = _balanced_cells(t, s, rng)
    X, t, s = X[keep], t[keep], s[keep]
    seed = int(rng.integers(2**31 - 1))
    tr, te = train_test_split(np.arange(len(t)), test_size=test_size, stratify=2 * t + s, random_state=seed)
    biased_rows = tr[t[tr] == s[tr]]
    biased = _probe(X[biased_rows], t[biased_rows])  # label 1 = target 1 and spurious 1
    oracle = {"target": _probe(X[tr], t[tr]), "spurious": _probe(X[tr], s[tr])}
    truth = {"target": t, "spurious": s}
    Z_tr, Z_te = sae.transform(X[tr]), sae.transform(X[te])
    hits = {f"base_{c}": biased.predict(X[te]) == truth[c][te] for c in truth}
    base = {c: float(hits[f"base_{c}"].mean()) for c in truth}
    best = {c: float(oracle[c].score(X[te], truth[c][te])) for c in truth}
    ranked = {
        c: _selection(selection, Z_tr, truth[c][tr], D, oracle[c].coef_[0], rng)
        for c in ("spurious", "target")
    }
    other = {"spurious": "target", "target": "spurious"}
    for ablated, measured in other.items():
        hits[f"ablate_{ablated}"] = np.array(
            [biased.predict(_ablate(X[te], Z_te, D, ranked[ablated][:n])) == truth[measured][te] for n in ns]
        )
    rows = []
    for i, n in enumerate(ns):
        row: dict[str, float] = {"n": n}
        for ablated, measured in other.items():
            acc = float(hits[f"ablate_{ablated}"][i].mean())
            gap = best[measured] - base[measured]
            row[f"accuracy_ablate_{ablated}"] = acc
            row[f"scr_ablate_{ablated}"] = (acc - base[measured]) / gap if gap != 0 else float("nan")
        rows.append(row)
    scores = pd.DataFrame(rows).set_index("n")
    direction = "ablate_spurious" if base["target"] < base["spurious"] else "ablate_target"
    scores.insert(0, "scr", scores[f"scr_{direction}"])
    return SCRResult(
        scores=scores,
        direction=direction,
        base_accuracy=base,
        oracle_accuracy=best,
        latents={c: [int(v) for v in ranked[c][: max(ns)]] for c in ranked},
        n_test=len(te),
        correct=hits,
    )
