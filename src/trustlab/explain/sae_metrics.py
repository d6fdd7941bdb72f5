"""SAEBench metrics that apply at small scale.

Sparsity-fidelity, dead latents, loss (or embedding) recovered, k-sparse probing, feature absorption,
targeted probe perturbation, spurious correlation removal (:func:`spurious_correlation_removal`,
implemented in ``_sae_scr``) and feature recovery against planted ground truth.

Every function takes a fitted :class:`~trustlab.explain.sae.SparseAutoencoder` (or anything with
``transform``, ``W_dec_`` and ``b_dec_``) and activations as arrays; :func:`loss_recovered` also
takes a ``transformers`` causal LM and a hook point (a ``trustlab.lm`` name or a submodule name),
:func:`embedding_recovered` any torch model (a sentence encoder) and a submodule name. Metrics
that need an LLM judge (automated interpretability) or large labelled corpora and a capable
model (unlearning) are not here (RAVEL is in ``sae_ravel``); see docs/explain/sae-metrics.md.

References
----------
.. [1] Karvonen, Rager, Lin, Tigges, Bloom, Chanin, Lau, Farrell, McDougall, Ayonrinde, Till,
   Wearden, Conmy, Marks, Nanda. "SAEBench: A Comprehensive Benchmark for Sparse Autoencoders
   in Language Model Interpretability". ICML 2025.
.. [2] Chanin, Wilken-Smith, Dulka, Bhatnagar, Bloom. "A is for Absorption: Studying Feature
   Splitting and Absorption in Sparse Autoencoders". arXiv:2409.14507, 2024.
.. [3] Gurnee et al. "Finding Neurons in a Haystack: Case Studies with Sparse Probing". TMLR 2023.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import f1_score
from sklearn.model_selection import train_test_split

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError
from trustlab.explain._sae_common import (
    _ablate,
    _check_sae,
    _probe,
    _rank_by_mean_difference,
    _unit_rows,
    binary_labels,
)
from trustlab.explain._sae_hooks import embedding_recovered, forward_with_edit, resolve_hook_point, sae_splice
from trustlab.explain._sae_scr import SCRResult, spurious_correlation_removal

__all__ = [
    "AbsorptionResult",
    "SCRResult",
    "core_metrics",
    "embedding_recovered",
    "feature_absorption",
    "feature_recovery",
    "k_sparse_probing",
    "loss_recovered",
    "spurious_correlation_removal",
    "targeted_probe_perturbation",
]


def core_metrics(sae: Any, X: Any) -> dict[str, float]:
    """SAEBench's core metrics: sparsity, fidelity, dead latents and decoder similarity.

    Parameters
    ----------
    sae : SparseAutoencoder
        Fitted.
    X : array-like of shape (n_samples, d)
        Held-out activations.

    Returns
    -------
    dict
        ``l0`` (mean active latents a row), ``fvu`` (fraction of variance unexplained),
        ``explained_variance`` (``1 - fvu``), ``cosine`` (mean cosine of ``x`` and ``x_hat`` over
        non-zero rows), ``mse`` (mean squared error a row), ``dead_fraction`` (latents never active
        on ``X``), ``dense_fraction`` (latents active on more than 10% of rows: SAEBench's
        high-frequency latents) and ``mean_max_cosine`` (mean over latents of the largest cosine
        with another decoder direction: feature composition, Bussmann et al. Fig. 8).

    Examples
    --------
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> X = np.random.default_rng(0).normal(size=(300, 6))
    >>> sae = SparseAutoencoder(12, k=3, batch_size=100, n_steps=30, learning_rate=1e-2).fit(X)
    >>> sorted(core_metrics(sae, X))[:3]
    ['cosine', 'dead_fraction', 'dense_fraction']
    """
    sae = _check_sae(sae)
    X = check_numeric_array(X, "X", ndim=2, min_rows=2)
    Z = sae.transform(X)
    X_hat = Z @ sae.W_dec_ + sae.b_dec_
    total = float(((X - X.mean(0)) ** 2).sum())
    fvu = float(((X - X_hat) ** 2).sum() / total) if total > 0 else float("nan")
    nx = np.linalg.norm(X, axis=1)
    keep = nx > 0
    nh = np.linalg.norm(X_hat[keep], axis=1)
    cos = (X[keep] * X_hat[keep]).sum(1) / np.maximum(nx[keep] * nh, 1e-12)
    freq = (Z > 0).mean(0)
    D = _unit_rows(np.asarray(sae.W_dec_))
    sims = D @ D.T
    np.fill_diagonal(sims, -np.inf)
    return {
        "l0": float((Z > 0).sum(1).mean()),
        "fvu": fvu,
        "explained_variance": 1.0 - fvu,
        "cosine": float(cos.mean()) if keep.any() else float("nan"),
        "mse": float(((X - X_hat) ** 2).sum(1).mean()),
        "dead_fraction": float((freq == 0).mean()),
        "dense_fraction": float((freq > 0.1).mean()),
        "mean_max_cosine": float(sims.max(1).mean()) if D.shape[0] > 1 else float("nan"),
    }


def k_sparse_probing(
    Z: Any, y: Any, *, ks: Any = (1, 2, 5), test_size: float = 0.2, random_state: int = 0
) -> pd.DataFrame:
    """k-sparse probing (Gurnee et al.; SAEBench).

    A logistic probe on the ``k`` latents whose mean activations differ most between the classes.

    Parameters
    ----------
    Z : array-like of shape (n_samples, n_latents)
        SAE latents (``sae.transform(X)``) or any features (raw activations give the baseline).
    y : array-like of shape (n_samples,)
        A binary concept label.
    ks : iterable of int, default=(1, 2, 5)
        Probe sizes (SAEBench's).
    test_size : float, default=0.2
        Held-out fraction (stratified split); latents are chosen and probes fitted on the rest.
    random_state : int, default=0
        Seeds the split.

    Returns
    -------
    pandas.DataFrame
        One row per ``k``: ``k``, ``accuracy`` (held-out), ``latents`` (the chosen indices).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 200)
    >>> Z = np.c_[rng.random((200, 3)), y + 0.1 * rng.random(200)]
    >>> k_sparse_probing(Z, y, ks=[1])["latents"].iloc[0]
    [3]
    """
    Z = check_numeric_array(Z, "Z", ndim=2, min_rows=4)
    y01 = binary_labels(y, Z.shape[0])
    try:
        ks = [int(k) for k in ks]
    except (TypeError, ValueError):
        ks = []
    if not ks or any(k < 1 or k > Z.shape[1] for k in ks):
        raise ParameterError(f"ks must be integers in [1, {Z.shape[1]}], got {ks!r}.", argument="ks")
    tr_Z, te_Z, tr_y, te_y = train_test_split(
        Z, y01, test_size=test_size, stratify=y01, random_state=random_state
    )
    order = _rank_by_mean_difference(tr_Z, tr_y)
    rows = []
    for k in ks:
        idx = order[:k]
        acc = float(_probe(tr_Z[:, idx], tr_y).score(te_Z[:, idx], te_y))
        rows.append({"k": k, "accuracy": acc, "latents": [int(i) for i in idx]})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class AbsorptionResult:
    """Feature absorption of one concept (SAEBench's absorption metric).

    Attributes
    ----------
    mean_absorption_fraction : float
        Mean over the evaluated rows of the share of the SAE's representation of the concept
        carried by latents other than its main latents (0: none absorbed; SAEBench reports
        ``1 -`` this as the score).
    full_absorption_rate : float
        Share of evaluated rows where no main latent fires and one other latent carries at least
        40% of the concept's projection.
    main_latents : tuple of int
        The concept's main latents (1-sparse probe latent plus feature splits).
    n_evaluated : int
        Held-out positive rows that the ground-truth probe classifies correctly.
    fractions : ndarray of shape (n_evaluated,)
        The absorption fraction of each evaluated row (for standard errors).

    See Also
    --------
    feature_absorption : builds it.

    Examples
    --------
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> from trustlab.explain.sae_data import make_hierarchical_activations
    >>> data = make_hierarchical_activations(500, n_parents=2, n_children=2, d=8)
    >>> sae = SparseAutoencoder(6, k=2, batch_size=100, n_steps=30, learning_rate=1e-2).fit(data.X)
    >>> r = feature_absorption(sae, data.X, data.features[:, 0] > 0, probe_direction=data.directions[0])
    >>> r.fractions.shape == (r.n_evaluated,), len(r.main_latents) >= 1
    (True, True)
    """

    mean_absorption_fraction: float
    full_absorption_rate: float
    main_latents: tuple[int, ...]
    n_evaluated: int
    fractions: np.ndarray


def _main_latents(Z: np.ndarray, y: np.ndarray, max_k: int, jump: float, seed: int) -> list[int]:
    tr_Z, te_Z, tr_y, te_y = train_test_split(Z, y, test_size=0.3, stratify=y, random_state=seed)
    order = _rank_by_mean_difference(tr_Z, tr_y)
    main = [int(order[0])]
    f1_prev = None
    for k in range(1, min(max_k, Z.shape[1]) + 1):
        idx = order[:k]
        f1 = float(f1_score(te_y, _probe(tr_Z[:, idx], tr_y).predict(te_Z[:, idx]), zero_division=0))
        if f1_prev is not None and f1 - f1_prev > jump:
            main.append(int(order[k - 1]))
        f1_prev = f1
    return main


def feature_absorption(
    sae: Any,
    X: Any,
    y: Any,
    *,
    probe_direction: Any = None,
    max_k: int = 10,
    f1_jump: float = 0.03,
    cos_threshold: float = -1.0,
    projection_threshold: float = 0.0,
    max_absorbing: int | None = None,
    test_size: float = 0.2,
    random_state: int = 0,
) -> AbsorptionResult:
    """SAEBench's feature-absorption fraction for one binary concept.

    A ground-truth probe direction ``p`` (given, or a logistic probe on ``X``) defines the
    concept. Its main latents are the 1-sparse probe's latent plus each latent whose addition
    raises the k-sparse probe's F1 by more than ``f1_jump`` (feature splits). On each held-out
    positive row the probe gets right, with ``a_i`` the latents and ``d_i`` the unit decoder
    directions: if the main latents' projection ``sum_main a_i d_i . p`` falls short of the
    activation's ``x . p`` and the other latents (cosine with ``p`` at least ``cos_threshold``,
    positive projection, the ``max_absorbing`` largest) carry at least ``projection_threshold``
    of ``x . p``, the absorbed share is ``A / (A + M)`` with ``M`` the main projection and ``A``
    the others' projection capped at the shortfall (``1`` when ``M <= 0``); otherwise ``0``.

    Parameters
    ----------
    sae : SparseAutoencoder
        Fitted.
    X : array-like of shape (n_samples, d)
        Activations.
    y : array-like of shape (n_samples,)
        Binary concept label (e.g. a planted parent feature's presence).
    probe_direction : array-like of shape (d,), optional
        The concept's true direction (planted data); default: a logistic probe fitted on the
        training split, as SAEBench does.
    max_k : int, default=10
        Largest k-sparse probe when looking for feature splits (SAEBench: 10).
    f1_jump : float, default=0.03
        ``tau_fs`` (SAEBench and Chanin et al.: 0.03).
    cos_threshold : float, default=-1.0
        ``tau_ps`` (SAEBench paper, Table 8: -1; its released code uses 0.1).
    projection_threshold : float, default=0.0
        ``tau_pa`` (paper: 0; released code: 0.4).
    max_absorbing : int, optional
        ``A_max`` (paper: the dictionary size, ``None``; released code: 3).
    test_size : float, default=0.2
        Held-out fraction (SAEBench: 80/20).
    random_state : int, default=0
        Seeds the splits.

    Returns
    -------
    AbsorptionResult

    Examples
    --------
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> from trustlab.explain.sae_data import make_hierarchical_activations
    >>> data = make_hierarchical_activations(1000, n_parents=2, n_children=2, d=8)
    >>> sae = SparseAutoencoder(6, k=2, batch_size=100, n_steps=50, learning_rate=1e-2).fit(data.X)
    >>> r = feature_absorption(sae, data.X, data.features[:, 0] > 0, probe_direction=data.directions[0])
    >>> 0.0 <= r.mean_absorption_fraction <= 1.0
    True
    """
    sae = _check_sae(sae)
    X = check_numeric_array(X, "X", ndim=2, min_rows=10)
    y01 = binary_labels(y, X.shape[0])
    if isinstance(max_k, bool) or not isinstance(max_k, numbers.Integral) or max_k < 1:
        raise ParameterError(f"max_k must be a positive int, got {max_k!r}.", argument="max_k")
    if max_absorbing is not None and (not isinstance(max_absorbing, numbers.Integral) or max_absorbing < 1):
        raise ParameterError(
            f"max_absorbing must be None or a positive int, got {max_absorbing!r}.", argument="max_absorbing"
        )
    tr_X, te_X, tr_y, te_y = train_test_split(
        X, y01, test_size=test_size, stratify=y01, random_state=random_state
    )
    if probe_direction is None:
        probe = _probe(tr_X, tr_y)
        p = probe.coef_[0].copy()
        correct = probe.predict(te_X) == 1
    else:
        p = check_numeric_array(probe_direction, "probe_direction", ndim=1)
        if p.shape[0] != X.shape[1] or not np.linalg.norm(p) > 0:
            raise DataError(
                f"probe_direction must be a non-zero vector of length {X.shape[1]}.",
                argument="probe_direction",
            )
        probe = _probe((tr_X @ p)[:, None], tr_y)
        correct = probe.predict((te_X @ p)[:, None]) == 1
    p = p / np.linalg.norm(p)
    main = _main_latents(sae.transform(tr_X), tr_y, max_k, f1_jump, random_state)
    rows = np.flatnonzero((te_y == 1) & correct)
    Z = sae.transform(te_X[rows])
    cos = _unit_rows(np.asarray(sae.W_dec_)) @ p
    proj = Z * cos
    act = te_X[rows] @ p
    others = np.ones(Z.shape[1], dtype=bool)
    others[main] = False
    others &= cos >= cos_threshold
    fractions, full = [], []
    for i in range(len(rows)):
        m_proj = float(proj[i, main].sum())
        cand = proj[i, others]
        cand = np.sort(cand[cand > 0])[::-1][: max_absorbing or None]
        a_total = float(cand.sum())
        if m_proj >= act[i] or (act[i] > 0 and a_total / act[i] < projection_threshold):
            frac = 0.0
        elif m_proj <= 0:
            frac = 1.0 if a_total > 0 or projection_threshold <= 0 else 0.0
        else:
            absorbed = min(a_total, float(act[i]) - m_proj)
            frac = float(np.clip(absorbed / (absorbed + m_proj), 0.0, 1.0))
        fractions.append(frac)
        top = int(np.argmax(proj[i]))
        full.append(
            bool(np.all(Z[i, main] == 0))
            and cos[top] >= 0.025
            and act[i] > 0
            and proj[i, top] / act[i] >= 0.4
        )
    return AbsorptionResult(
        mean_absorption_fraction=float(np.mean(fractions)) if fractions else float("nan"),
        full_absorption_rate=float(np.mean(full)) if full else float("nan"),
        main_latents=tuple(main),
        n_evaluated=len(rows),
        fractions=np.asarray(fractions, dtype=float),
    )


def feature_recovery(sae: Any, directions: Any) -> dict[str, Any]:
    """How well the decoder recovers known feature directions (planted ground truth).

    Parameters
    ----------
    sae : SparseAutoencoder
        Fitted.
    directions : array-like of shape (n_features, d)
        True feature directions.

    Returns
    -------
    dict
        ``mmcs`` (mean over true features of the best decoder cosine), ``best_cosine`` (per
        feature), ``best_latent`` (per feature), ``cosines`` (the ``(n_features, n_latents)``
        matrix, Bussmann et al. Fig. 2).

    Examples
    --------
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> from trustlab.explain.sae_data import make_hierarchical_activations
    >>> data = make_hierarchical_activations(500, n_parents=2, n_children=2, d=8)
    >>> sae = SparseAutoencoder(6, k=2, batch_size=100, n_steps=30, learning_rate=1e-2).fit(data.X)
    >>> rec = feature_recovery(sae, data.directions)
    >>> rec["cosines"].shape, rec["best_latent"].shape
    ((6, 6), (6,))
    >>> bool(0.0 < rec["mmcs"] <= 1.0)
    True
    """
    sae = _check_sae(sae)
    T = check_numeric_array(directions, "directions", ndim=2)
    if T.shape[1] != np.asarray(sae.W_dec_).shape[1]:
        raise DataError(
            f"directions must have {np.asarray(sae.W_dec_).shape[1]} columns, got {T.shape[1]}.",
            argument="directions",
        )
    C = _unit_rows(T) @ _unit_rows(np.asarray(sae.W_dec_)).T
    return {
        "mmcs": float(C.max(1).mean()),
        "best_cosine": C.max(1),
        "best_latent": C.argmax(1),
        "cosines": C,
    }


def loss_recovered(model: Any, input_ids: Any, hook_point: str, sae: Any) -> dict[str, float]:
    """Cross-entropy loss recovered when the SAE's reconstruction replaces the activation.

    ``score = (H_zero - H_sae) / (H_zero - H_orig)`` with ``H_orig`` the model's next-token loss,
    ``H_sae`` the loss with the activation at ``hook_point`` replaced by its reconstruction, and
    ``H_zero`` with it zero-ablated (SAEBench section 3.2.1). For a model without a next-token
    loss (a sentence encoder), see :func:`embedding_recovered`.

    Parameters
    ----------
    model : transformers causal LM
        Any model whose output has ``logits`` over the vocabulary (a ``transformers`` causal LM).
    input_ids : array-like of int, shape (batch, seq)
        Evaluation tokens.
    hook_point : str
        A ``trustlab.lm`` hook point whose value is ``(batch, seq, d)`` (e.g. ``blocks.0.resid_post``),
        or the name of a submodule (``model.named_modules()``, e.g. ``model.layers.0``; its output,
        or the first element of a tuple output, is replaced).
    sae : SparseAutoencoder
        Fitted on activations from that point.

    Returns
    -------
    dict
        ``ce_orig``, ``ce_sae``, ``ce_zero`` and ``score``.

    Raises
    ------
    ParameterError
        ``hook_point`` is not a hook point of the model (the message lists some that are).

    Examples
    --------
    >>> import torch
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> from trustlab.explain.sae_data import collect_activations
    >>> from trustlab.lm.models import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=10, d_model=16, n_layers=1, n_heads=2))
    >>> ids = torch.randint(0, 10, (4, 8), generator=torch.Generator().manual_seed(0))
    >>> acts = collect_activations(m, ids, "blocks.0.resid_post")
    >>> sae = SparseAutoencoder(32, k=4, batch_size=16, n_steps=20, learning_rate=1e-2).fit(acts)
    >>> sorted(loss_recovered(m, ids, "blocks.0.resid_post", sae))
    ['ce_orig', 'ce_sae', 'ce_zero', 'score']
    """
    import torch

    sae = _check_sae(sae)
    module = resolve_hook_point(model, hook_point)
    ids = torch.as_tensor(np.asarray(input_ids)).long()
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise DataError(
            f"input_ids must be (batch, seq) with seq >= 2, got shape {tuple(ids.shape)}.",
            argument="input_ids",
        )

    def ce(edit: Any) -> float:
        out = forward_with_edit(model, {"input_ids": ids}, hook_point, module, edit)
        logits = out if isinstance(out, torch.Tensor) else out.logits
        return float(
            torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1)
            )
        )

    h_orig = ce(None)
    h_sae = ce(sae_splice(sae))
    h_zero = ce(torch.zeros_like)
    denom = h_zero - h_orig
    return {
        "ce_orig": h_orig,
        "ce_sae": h_sae,
        "ce_zero": h_zero,
        "score": float((h_zero - h_sae) / denom) if denom != 0 else float("nan"),
    }


def targeted_probe_perturbation(
    sae: Any, X: Any, labels: Any, *, k: int = 20, test_size: float = 0.2, random_state: int = 0
) -> dict[str, Any]:
    """Targeted probe perturbation (TPP, SAEBench section 3.4): do a class's latents move only its probe.

    For each class ``i``: a one-vs-rest logistic probe ``C_i`` on the activations; its ``k``
    latents ``L_i`` with the largest signed attribution ``mean_{y=i}(a_l) (d_l . w_i)`` (what
    each latent adds to the probe's logit on the class's rows).
    Zero-ablating ``L_i`` (``x - sum_{l in L_i} a_l W_dec_l``: the reconstruction
    error is kept) gives accuracy ``A_{i,j}`` of probe ``j`` on its held-out class-``j``-vs-rest
    data, ``A_j`` unablated. ``TPP = mean_{i=j}(A_j - A_{i,j}) - mean_{i!=j}(A_j - A_{i,j})``.

    Parameters
    ----------
    sae : SparseAutoencoder
        Fitted.
    X : array-like of shape (n_samples, d)
        Activations.
    labels : array-like of shape (n_samples,)
        One class per row, at least two classes.
    k : int, default=20
        Latents ablated per class (SAEBench's main setting), at most ``n_latents``.
    test_size : float, default=0.2
        Held-out fraction (stratified).
    random_state : int, default=0
        Seeds the split.

    Returns
    -------
    dict
        ``score`` (TPP), ``accuracy`` (the ``A_{i,j}`` matrix as a DataFrame, rows the ablated
        class, columns the probe's class), ``base_accuracy`` (``A_j``), ``latents`` (``L_i``).

    Examples
    --------
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> from trustlab.explain.sae_data import make_hierarchical_activations
    >>> data = make_hierarchical_activations(500, n_parents=2, n_children=2, d=8)
    >>> sae = SparseAutoencoder(6, k=2, batch_size=100, n_steps=30, learning_rate=1e-2).fit(data.X)
    >>> on = data.features[:, :2] > 0
    >>> labels = np.where(on.any(1), on.argmax(1) + 1, 0)  # none, parent 0 or parent 1 (first)
    >>> tpp = targeted_probe_perturbation(sae, data.X, labels, k=2)
    >>> tpp["accuracy"].shape, [len(v) for v in tpp["latents"].values()]
    ((3, 3), [2, 2, 2])
    """
    sae = _check_sae(sae)
    X = check_numeric_array(X, "X", ndim=2, min_rows=10)
    y = np.asarray(labels)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise DataError(f"labels must be 1-D with one class per row ({X.shape[0]}).", argument="labels")
    classes = np.unique(y)
    if classes.size < 2:
        raise DataError(
            "labels must hold at least two classes; a target with one value cannot be probed.",
            argument="labels",
        )
    D = np.asarray(sae.W_dec_)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= D.shape[0]:
        raise ParameterError(f"k must be an int in [1, {D.shape[0]}], got {k!r}.", argument="k")
    tr_X, te_X, tr_y, te_y = train_test_split(
        X, y, test_size=test_size, stratify=y, random_state=random_state
    )
    tr_Z, te_Z = sae.transform(tr_X), sae.transform(te_X)
    probes, chosen = [], []
    for c in classes:
        probe = _probe(tr_X, (tr_y == c).astype(int))
        probes.append(probe)
        effect = tr_Z[tr_y == c].mean(0) * (D @ probe.coef_[0])  # what each latent adds on class c
        chosen.append(np.argsort(-effect, kind="stable")[:k])
    base = np.array([p.score(te_X, (te_y == c).astype(int)) for p, c in zip(probes, classes, strict=True)])
    acc = np.empty((classes.size, classes.size))
    for i, lat in enumerate(chosen):
        ablated = _ablate(te_X, te_Z, D, lat)
        for j, (p, c) in enumerate(zip(probes, classes, strict=True)):
            acc[i, j] = p.score(ablated, (te_y == c).astype(int))
    drop = base[None, :] - acc
    off = ~np.eye(classes.size, dtype=bool)
    return {
        "score": float(np.diag(drop).mean() - drop[off].mean()),
        "accuracy": pd.DataFrame(acc, index=classes, columns=classes),
        "base_accuracy": pd.Series(base, index=classes),
        "latents": {c: [int(v) for v in lat] for c, lat in zip(classes, chosen, strict=True)},
    }
