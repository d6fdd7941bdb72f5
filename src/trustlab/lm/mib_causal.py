"""MIB's causal-variable localisation track: featurizers aligned to a causal variable, scored by IIA.

A high-level causal model of the task names a variable (e.g. the minimum of the inputs, which the
answer is). For each site (the residual stream entering each block, and leaving the last, at the
answer position) a *featurizer* maps the hidden vector to features, a subset of features is
chosen, and an *interchange intervention* replaces the base input's chosen features by the
counterfactual input's. If the features hold the variable, the network then answers what the
causal model answers with the variable interchanged; the share of pairs where it does is the
interchange intervention accuracy (IIA). MIB [1]_ compares, with featurizers trained on a train
split of counterfactual pairs and IIA measured on a test split:

- ``"full"``: the whole vector (no featurizer, nothing learned);
- ``"das"``: distributed alignment search [2]_, a learned ``k``-dimensional orthonormal subspace;
- ``"dbm"``: desiderata-based masking [3]_, a learned binary mask over the neurons;
- ``"dbm-pca"``: DBM over the principal components of the site's activations;
- ``"dbm-sae"``: DBM over a sparse autoencoder's latents (with its reconstruction error kept);
- ``"random"``: a fixed random ``k``-dimensional orthonormal subspace (a negative control, not MIB's).

See docs/lm-mib.md.

References
----------
.. [1] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
.. [2] Geiger, Wu, Potts, Icard, Goodman. "Finding Alignments Between Interpretable Causal Variables
   and Distributed Neural Representations". CLeaR 2024.
.. [3] Huang, Wu, Potts, Geva, Geiger. "RAVEL: Evaluating Interpretability Methods on Disentangling
   Language Model Representations". ACL 2024.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import DataError, ParameterError
from trustlab.lm._mib_causal_model import (
    CausalModel,
    CounterfactualPairs,
    second_value_causal_model,
    sorting_causal_model,
    sorting_pairs,
)
from trustlab.lm._mib_featurizers import (
    FEATURIZERS,
    MIB_TRAINING,
    Interchange,
    accuracy,
    collect,
    train_interchange,
)
from trustlab.lm.hooks import _layout

__all__ = [
    "FEATURIZERS",
    "MIB_TRAINING",
    "CausalModel",
    "CausalVariableLocalization",
    "CounterfactualPairs",
    "causal_variable_localization",
    "second_value_causal_model",
    "sorting_causal_model",
    "sorting_pairs",
]


@dataclass(frozen=True)
class CausalVariableLocalization:
    """IIA per featurizer and site.

    Attributes
    ----------
    variable : str
        The causal variable localised.
    methods : tuple of str
        Featurizers, the rows of the tables.
    layers : ndarray of int
        Sites, the columns: ``l < n_layers`` is the residual stream entering block ``l``,
        ``n_layers`` the one leaving the last block; all at the answer position. For head sites, the
        block of each head.
    iia : ndarray of float, shape (n_methods, n_layers)
        Interchange intervention accuracy on the test pairs.
    train_iia : ndarray of float, shape (n_methods, n_layers)
        The same on the training pairs.
    n_features : ndarray of int, shape (n_methods, n_layers)
        Features each intervention moves (the vector's width, DAS's ``k`` or a mask's count).
    n_train, n_test : int
        Pairs used after keeping those the model answers correctly on both inputs.
    heads : ndarray of int or None
        For attention-head sites (``heads=`` of :func:`causal_variable_localization`), the head of each
        site in its block ``layers[j]``; ``None`` for residual-stream sites.

    See Also
    --------
    causal_variable_localization : builds it.
    """

    variable: str
    methods: tuple[str, ...]
    layers: np.ndarray
    iia: np.ndarray
    train_iia: np.ndarray
    n_features: np.ndarray
    n_train: int
    n_test: int
    heads: np.ndarray | None = None

    def best(self) -> dict[str, float]:
        """Each featurizer's highest test IIA over the sites.

        Returns
        -------
        dict of str to float
            Featurizer name to its best test IIA.
        """
        return {m: float(self.iia[i].max()) for i, m in enumerate(self.methods)}

    def mean(self) -> dict[str, float]:
        """Each featurizer's test IIA averaged over the sites.

        Returns
        -------
        dict of str to float
            Featurizer name to its mean test IIA.
        """
        return {m: float(self.iia[i].mean()) for i, m in enumerate(self.methods)}

    def to_frame(self) -> pd.DataFrame:
        """One row per featurizer and site: ``iia``, ``train_iia``, ``n_features``.

        Returns
        -------
        pandas.DataFrame
            Columns ``method``, ``layer``, (``head`` for head sites), ``iia``, ``train_iia``, ``n_features``.
        """
        rows = [
            {
                "method": m,
                "layer": int(layer),
                **({} if self.heads is None else {"head": int(self.heads[j])}),
                "iia": float(self.iia[i, j]),
                "train_iia": float(self.train_iia[i, j]),
                "n_features": int(self.n_features[i, j]),
            }
            for i, m in enumerate(self.methods)
            for j, layer in enumerate(self.layers)
        ]
        return pd.DataFrame(rows)


def _check_pairs(pairs: Any, name: str, vocab: int) -> CounterfactualPairs:
    if not isinstance(pairs, CounterfactualPairs):
        raise ParameterError(
            f"{name} must be CounterfactualPairs (e.g. from sorting_pairs), got {type(pairs).__name__}.",
            argument=name,
        )
    top = max(int(pairs.base.max()), int(pairs.counterfactual.max()), int(pairs.labels.max()))
    if top >= vocab:
        raise DataError(f"{name} holds token ids outside the model's vocabulary [0, {vocab}).", argument=name)
    return pairs


def _methods(methods: Any) -> tuple[str, ...]:
    items = (methods,) if isinstance(methods, str) else tuple(methods)
    bad = [m for m in items if m not in FEATURIZERS]
    if not items or bad:
        raise ParameterError(
            f"methods must be a non-empty list of {', '.join(FEATURIZERS)}; got {list(items)}.",
            argument="methods",
        )
    return tuple(dict.fromkeys(items))


def _layers(layers: Any, n_layers: int) -> list[int]:
    if layers is None:
        return list(range(n_layers + 1))
    arr = np.asarray(layers).reshape(-1)
    if arr.size == 0 or not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() > n_layers:
        raise ParameterError(
            f"layers must be site indices in [0, {n_layers}] (block inputs, then the last block's output); "
            f"got {layers!r}.",
            argument="layers",
        )
    return sorted({int(x) for x in arr})


def _heads(heads: Any, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    if isinstance(heads, str) and heads == "all":
        return [(layer, h) for layer in range(n_layers) for h in range(n_heads)]
    arr = np.asarray(heads)
    if (
        arr.ndim != 2
        or arr.shape[1] != 2
        or arr.shape[0] == 0
        or not np.issubdtype(arr.dtype, np.integer)
        or (arr < 0).any()
        or (arr[:, 0] >= n_layers).any()
        or (arr[:, 1] >= n_heads).any()
    ):
        raise ParameterError(
            f"heads must be 'all' or (layer, head) pairs with layer < {n_layers} and head < {n_heads}; "
            f"got {heads!r}.",
            argument="heads",
        )
    return sorted({(int(a), int(b)) for a, b in arr})


def _correct(model: Any, pairs: CounterfactualPairs) -> np.ndarray:
    _, pred_b = collect(model, pairs.base, pairs.positions, [])
    _, pred_c = collect(model, pairs.counterfactual, pairs.positions, [])
    return (pred_b == pairs.base_labels) & (pred_c == pairs.cf_labels)


def _pca_basis(h: np.ndarray) -> np.ndarray:
    """Right singular vectors of the (uncentred) activations, as MIB's TruncatedSVD: ``(d, d)``."""
    _, _, vt = np.linalg.svd(h, full_matrices=True)
    return vt.T


def _fit_sae(model: Any, train: CounterfactualPairs, layer: int, sae: Any, seed: int) -> Any:
    from trustlab.explain.sae import SparseAutoencoder

    if sae is not None:
        fitted = sae.get(layer) if isinstance(sae, dict) else sae
        if fitted is None or not hasattr(fitted, "W_dec_"):
            raise ParameterError(
                f"sae must be a fitted SparseAutoencoder, or a dict of them with one for site {layer}.",
                argument="sae",
            )
        return fitted
    ids = np.concatenate([train.base, train.counterfactual])
    acts, _ = collect(model, ids, np.zeros(len(ids), dtype=np.int64), [layer], every_position=True)
    d = acts[layer].shape[1]
    params = {"n_latents": 4 * d, "k": max(1, d // 4), "batch_size": 512, "n_steps": 300}
    return SparseAutoencoder(**params, learning_rate=3e-3, random_state=seed).fit(acts[layer])


def _setup(method: str, hb: np.ndarray, hc: np.ndarray, extra: Any) -> tuple[np.ndarray, Any, int]:
    """Feature differences, decoder and feature count of one featurizer at one site."""
    d = hb.shape[1]
    if method in ("full", "dbm", "das", "random"):
        return hc - hb, None, d
    if method == "dbm-pca":
        return (hc - hb) @ extra, extra.T, d
    return extra.transform(hc) - extra.transform(hb), extra.W_dec_, int(extra.n_latents)


@validate_params(
    {
        "das_dim": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "mask_l1": [Interval(numbers.Real, 0, None, closed="left")],
        "filter_correct": ["boolean"],
        "random_state": ["random_state"],
    }
)
def causal_variable_localization(
    model: Any,
    train: CounterfactualPairs,
    test: CounterfactualPairs,
    *,
    methods: Any = FEATURIZERS,
    layers: Any = None,
    das_dim: int | None = None,
    sae: Any = None,
    heads: Any = None,
    epochs: int = MIB_TRAINING["epochs"],
    lr: float = MIB_TRAINING["lr"],
    batch_size: int = MIB_TRAINING["batch_size"],
    mask_l1: float = MIB_TRAINING["mask_l1"],
    temperature: tuple[float, float] = MIB_TRAINING["temperature"],
    filter_correct: bool = True,
    random_state: Any = 0,
) -> CausalVariableLocalization:
    """Localise a causal variable with each featurizer at each site; IIA on held-out pairs (MIB).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A decoder-only causal LM (GPT-2, Llama, Mistral, Mixtral, Qwen2 ...).
    train, test : CounterfactualPairs
        Pairs for one variable (e.g. :func:`sorting_pairs`): featurizers are trained on ``train``
        and scored on ``test``, MIB's split.
    methods : list of {"full", "das", "dbm", "dbm-pca", "dbm-sae", "random"}, default=all
        Featurizers to compare (see the module docstring).
    layers : list of int, optional
        Sites ``0 .. n_layers`` (the input of each block, then the output of the last); default all.
    das_dim : int, optional
        Dimension ``k`` of DAS's subspace and of the random one; default ``max(1, d_model // 4)``
        (MIB's 32 would be the whole vector of the lab's 32-wide models).
    sae : SparseAutoencoder or dict of site to SparseAutoencoder, optional
        Fitted autoencoders for ``"dbm-sae"``; default one fitted per site on the site's vectors at
        every position of the training inputs (``4 d`` latents for a site ``d`` wide, Matryoshka,
        ``k = d / 4``, 300 steps of 512 rows at learning rate 3e-3).
    heads : "all" or list of (int, int), optional
        Attention-head sites instead of residual-stream ones (MIB's head units): each head's output
        before the output projection (``d_head`` wide) at the answer position; ``layers`` must then be
        ``None``. DAS's default ``k`` becomes ``max(1, d_head // 4)``.
    epochs, lr, batch_size : int, float, int, default=3, 1e-2, 32
        MIB's training: AdamW (no weight decay) at a constant rate on the cross-entropy of the
        causal model's label at the answer position.
    mask_l1 : float, default=1e-4
        DBM's weight of the L1 norm of the gates.
    temperature : (float, float), default=(1.0, 0.01)
        DBM's gate ``sigmoid(mask / T)``: ``T`` falls linearly over the training steps; evaluation
        keeps the features with ``sigmoid(mask) > 0.5``.
    filter_correct : bool, default=True
        Keep only pairs the model answers correctly on both inputs (as MIB).
    random_state : int, Generator or None, default=0
        Seeds the DAS initialisation, the random subspace, the batch order and the SAE.

    Returns
    -------
    CausalVariableLocalization
        Test and train IIA per featurizer and site.

    Raises
    ------
    ParameterError
        Unknown featurizers, sites or heads, both ``layers`` and ``heads``, pairs of the wrong type, a bad
        temperature.
    DataError
        Token ids outside the vocabulary, or fewer than two pairs left after filtering.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> m = build_model(ModelConfig("llama", vocab_size=13, d_model=16, n_layers=1, n_heads=2))
    >>> tr, te = sorting_pairs(8, n_items=4, seed=0), sorting_pairs(8, n_items=4, seed=1)
    >>> res = causal_variable_localization(m, tr, te, methods=["full"], filter_correct=False)
    >>> res.iia.shape
    (1, 2)
    """
    lay = _layout(model)
    n_layers, vocab = len(lay.layers), int(model.get_input_embeddings().num_embeddings)
    train, test = _check_pairs(train, "train", vocab), _check_pairs(test, "test", vocab)
    method_list = _methods(methods)
    if heads is not None and layers is not None:
        raise ParameterError(
            "give layers (residual-stream sites) or heads (attention-head sites), not both.", argument="heads"
        )
    sites: list[Any] = _layers(layers, n_layers) if heads is None else _heads(heads, n_layers, lay.n_heads)
    temp = tuple(np.asarray(temperature, dtype=float).reshape(-1))
    if len(temp) != 2 or not np.all(np.isfinite(temp)) or min(temp) <= 0:
        raise ParameterError(
            f"temperature must be two positive numbers (start, end), got {temperature!r}.",
            argument="temperature",
        )
    was_training = model.training
    model.eval()
    try:
        if filter_correct:
            keep_tr, keep_te = _correct(model, train), _correct(model, test)
            if keep_tr.sum() < 2 or keep_te.sum() < 1:
                raise DataError(
                    f"{int(keep_tr.sum())} training and {int(keep_te.sum())} test pairs are left after "
                    "keeping those the model answers correctly; train the model further, or pass "
                    "filter_correct=False.",
                    argument="train",
                )
            train, test = train.subset(keep_tr), test.subset(keep_te)
        seed = int(np.random.default_rng(random_state).integers(2**31 - 1))
        hb_tr, _ = collect(model, train.base, train.positions, sites)
        hc_tr, _ = collect(model, train.counterfactual, train.positions, sites)
        hb_te, _ = collect(model, test.base, test.positions, sites)
        hc_te, _ = collect(model, test.counterfactual, test.positions, sites)
        d = hb_tr[sites[0]].shape[1]
        k = min(int(das_dim) if das_dim is not None else max(1, d // 4), d)
        shape = (len(method_list), len(sites))
        iia, train_iia, n_feat = np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=np.int64)
        for j, layer in enumerate(sites):
            for i, method in enumerate(method_list):
                extra = None
                if method == "dbm-pca":
                    extra = _pca_basis(np.concatenate([hb_tr[layer], hc_tr[layer]]))
                elif method == "dbm-sae":
                    extra = _fit_sae(model, train, layer, sae, seed)
                df_tr, decoder, n_f = _setup(method, hb_tr[layer], hc_tr[layer], extra)
                df_te, _, _ = _setup(method, hb_te[layer], hc_te[layer], extra)
                gen = torch.Generator().manual_seed(seed + 7919 * j + 104729 * i)
                module = Interchange(method, n_f, d, k, decoder, gen)
                train_interchange(
                    model,
                    module,
                    train,
                    df_tr,
                    layer,
                    epochs=int(epochs),
                    lr=float(lr),
                    batch_size=int(batch_size),
                    mask_l1=float(mask_l1),
                    temperature=(temp[0], temp[1]),
                    gen=gen,
                )
                iia[i, j] = accuracy(model, module, test, df_te, layer)
                train_iia[i, j] = accuracy(model, module, train, df_tr, layer)
                n_feat[i, j] = module.n_selected(n_f)
    finally:
        model.train(was_training)
    is_head = heads is not None
    return CausalVariableLocalization(
        train.variable or test.variable,
        method_list,
        np.asarray([s[0] for s in sites] if is_head else sites),
        iia,
        train_iia,
        n_feat,
        len(train),
        len(test),
        np.asarray([s[1] for s in sites]) if is_head else None,
    )
