"""Sparse autoencoders on activations: Matryoshka, BatchTopK, TopK and ReLU, one training loop.

A sparse autoencoder (SAE) maps an activation ``x`` (``d`` numbers) to ``n_latents`` sparse,
non-negative latents ``f(x) = sigma(W_enc (x - b_dec) + b_enc)`` and back,
``x_hat = W_dec f(x) + b_dec``. The four activation rules (``architecture``):

- ``"relu"``: ``sigma = ReLU``, trained with an L1 penalty on ``f_i ||W_dec_i||`` (Anthropic's
  April 2024 recipe);
- ``"topk"``: the ``k`` largest pre-activations of each row are kept (Gao et al.);
- ``"batchtopk"``: the ``batch_size * k`` largest of the batch are kept, so ``k`` is an average;
  at inference a single threshold ``theta``, calibrated on the training data to give mean
  ``L0 = k``, replaces the batch rule (Bussmann et al., 2024);
- ``"matryoshka"``: BatchTopK latents, trained so that every nested prefix of the dictionary
  (sizes ``prefixes``) reconstructs the input on its own: the loss is the *sum* over prefixes
  ``m`` of ``||x - (W_dec[:m] f[:m] + b_dec)||^2`` (Bussmann, Nabeshima, Karvonen, Nanda, 2025).

TopK-style models add Gao et al.'s auxiliary loss (``k_aux = d // 2`` dead latents reconstruct
the residual, weight 1/32). Inputs are scaled to unit mean squared norm while training and the
scale is folded back into the weights (SAEBench's recipe), so ``transform`` takes raw activations.

See docs/explain/matryoshka-sae.md.

References
----------
.. [1] Bussmann, Nabeshima, Karvonen, Nanda. "Learning Multi-Level Features with Matryoshka
   Sparse Autoencoders". ICML 2025.
.. [2] Gao et al. "Scaling and evaluating sparse autoencoders". ICLR 2025 (TopK, AuxK).
.. [3] Bussmann, Leask, Nanda. "BatchTopK Sparse Autoencoders". arXiv:2412.06410, 2024.
.. [4] Anthropic Interpretability Team. "Training Sparse Autoencoders". Circuits update, April 2024.
"""

from __future__ import annotations

import itertools
import numbers
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from trustlab._adam import Adam
from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError

__all__ = ["ARCHITECTURES", "SparseAutoencoder", "default_prefixes"]

ARCHITECTURES = ("matryoshka", "batchtopk", "topk", "relu")
# The paper's five groups: 1/32, 1/16, 1/8, 1/4 and 1/2 + 1/32 of the dictionary (cumulative
# prefixes 1/32, 3/32, 7/32, 15/32, 1; 65,536 latents give 2048, 6144, 14336, 30720, 65536).
_PAPER_PREFIX_FRACTIONS = (1 / 32, 3 / 32, 7 / 32, 15 / 32, 1.0)
_AUX_WEIGHT = 1.0 / 32.0


def default_prefixes(n_latents: int) -> list[int]:
    """The paper's nested dictionary sizes for a dictionary of ``n_latents``.

    Parameters
    ----------
    n_latents : int
        Dictionary size.

    Returns
    -------
    list of int
        Strictly increasing prefix sizes ending at ``n_latents``: the cumulative fractions
        1/32, 3/32, 7/32, 15/32 and 1 (rounded, at least 1, duplicates dropped).

    Examples
    --------
    >>> default_prefixes(65536)
    [2048, 6144, 14336, 30720, 65536]
    >>> default_prefixes(64)
    [2, 6, 14, 30, 64]
    """
    sizes = sorted({max(1, round(f * n_latents)) for f in _PAPER_PREFIX_FRACTIONS})
    return [int(s) for s in sizes]


def _check_prefixes(prefixes: Any, n_latents: int) -> list[int]:
    if prefixes is None:
        return default_prefixes(n_latents)
    try:
        sizes = [int(p) for p in prefixes]
        ok = all(float(p) == int(p) for p in prefixes)
    except (TypeError, ValueError):
        sizes, ok = [], False
    if (
        not ok
        or not sizes
        or sizes[0] < 1
        or sizes[-1] != n_latents
        or any(b <= a for a, b in itertools.pairwise(sizes))
    ):
        raise ParameterError(
            f"prefixes must be strictly increasing integers from >= 1 up to n_latents ({n_latents}), "
            f"got {prefixes!r}; pass e.g. {default_prefixes(n_latents)} or None for the paper's sizes.",
            argument="prefixes",
        )
    return sizes


class SparseAutoencoder(ParamsValidationMixin, TransformerMixin, BaseEstimator):
    """A sparse autoencoder on activations: Matryoshka, BatchTopK, TopK or ReLU.

    Parameters
    ----------
    n_latents : int, default=64
        Dictionary size (number of latents).
    architecture : {"matryoshka", "batchtopk", "topk", "relu"}, default="matryoshka"
        Activation rule and loss (see the module docstring).
    k : int, default=8
        Active latents per row (``topk``) or on average (``batchtopk``, ``matryoshka``); must lie
        in ``[1, n_latents]``. Unused by ``relu``.
    prefixes : list of int, optional
        Nested dictionary sizes of the Matryoshka loss, strictly increasing and ending at
        ``n_latents``; ``None``: :func:`default_prefixes` (the paper's five groups). For the other
        architectures they are the sizes :meth:`prefix_metrics` reports by default.
    l1_coefficient : float, default=5.0
        ReLU only: weight of the penalty ``sum_i f_i ||W_dec_i||`` (Anthropic's value, for inputs
        scaled to mean squared norm ``d``; on the unit-norm inputs used here the same objective
        has weight ``l1_coefficient / sqrt(d)``, which is what is applied). Warmed up from 0
        over the first 5% of steps.
    learning_rate : float, default=3e-4
        Adam's learning rate (the paper's); linear warm-up over the first 5% of steps (at most
        1,000) and linear decay to 0 over the last 20%.
    batch_size : int, default=2048
        Rows per step (the paper's).
    n_steps : int, default=2000
        Optimisation steps.
    dead_after : int, default=200
        TopK-style models: a latent silent for this many steps is *dead* and joins the
        auxiliary loss.
    random_state : int, numpy Generator or None, default=0
        Seeds the initialisation and the batch order (the same seed gives the same model).

    Attributes
    ----------
    W_enc_ : ndarray of shape (d, n_latents)
    b_enc_ : ndarray of shape (n_latents,)
    W_dec_ : ndarray of shape (n_latents, d)
        Decoder rows (latent directions) in the input's units.
    b_dec_ : ndarray of shape (d,)
    threshold_ : float
        BatchTopK / Matryoshka inference threshold (``0`` for the others).
    prefixes_ : list of int
        The validated nested sizes.
    order_ : ndarray of int
        Latents in prefix order: ``arange`` for Matryoshka; by decreasing firing frequency on the
        training data for the others (so their "truncated" dictionaries keep their most used
        latents, the fairest truncation of an unordered dictionary).
    losses_ : ndarray
        Training loss per step.
    n_features_in_ : int

    References
    ----------
    .. [1] Bussmann, Nabeshima, Karvonen, Nanda. "Learning Multi-Level Features with Matryoshka
       Sparse Autoencoders". ICML 2025.
    .. [2] Gao et al. "Scaling and evaluating sparse autoencoders". ICLR 2025.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(500, 8))
    >>> sae = SparseAutoencoder(16, k=2, batch_size=100, n_steps=50, learning_rate=1e-2).fit(X)
    >>> sae.transform(X).shape, sae.prefixes_
    ((500, 16), [1, 2, 4, 8, 16])
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "n_latents": [Interval(numbers.Integral, 1, None, closed="left")],
        "architecture": [Options(set(ARCHITECTURES))],
        "k": [Interval(numbers.Integral, 1, None, closed="left")],
        "prefixes": [None, "array-like"],
        "l1_coefficient": [Interval(numbers.Real, 0, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "dead_after": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_latents: int = 64,
        *,
        architecture: str = "matryoshka",
        k: int = 8,
        prefixes: Any = None,
        l1_coefficient: float = 5.0,
        learning_rate: float = 3e-4,
        batch_size: int = 2048,
        n_steps: int = 2000,
        dead_after: int = 200,
        random_state: Any = 0,
    ) -> None:
        self.n_latents = n_latents
        self.architecture = architecture
        self.k = k
        self.prefixes = prefixes
        self.l1_coefficient = l1_coefficient
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.n_steps = n_steps
        self.dead_after = dead_after
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any = None) -> SparseAutoencoder:
        """Train the autoencoder on activations ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, d)
            Activations (finite numbers); e.g. from
            :func:`trustlab.explain.sae_data.collect_activations`.
        y : ignored

        Returns
        -------
        SparseAutoencoder
            ``self``, fitted.
        """
        self._validate_params()
        if self.k > self.n_latents:
            raise ParameterError(
                f"k must lie in [1, n_latents = {self.n_latents}], got {self.k}; lower k or raise n_latents.",
                argument="k",
            )
        self.prefixes_ = _check_prefixes(self.prefixes, self.n_latents)
        X = check_numeric_array(X, "X", ndim=2, min_rows=2)
        if X.shape[1] < 1:
            raise DataError("X must have at least one column (activation dimension).", argument="X")
        seed = int(make_generator(self.random_state).integers(2**31 - 1))
        gen = torch.Generator().manual_seed(seed)
        Xt = torch.as_tensor(X, dtype=torch.float32)
        scale = float(torch.sqrt((Xt**2).sum(1).mean()).clamp_min(1e-12))
        params, losses = _train(self, Xt / scale, gen)
        W_enc, b_enc, W_dec, b_dec = (p.detach() for p in params)
        # Fold the input scale into the weights: f(x) is unchanged, x_hat comes out in x's units.
        self.W_enc_ = (W_enc / scale).numpy().astype(np.float64)
        self.b_enc_ = (b_enc - b_dec @ W_enc).numpy().astype(np.float64)
        self.W_dec_ = (W_dec * scale).numpy().astype(np.float64)
        self.b_dec_ = (b_dec * scale).numpy().astype(np.float64)
        self.n_features_in_ = X.shape[1]
        self.losses_ = np.asarray(losses)
        self.threshold_ = 0.0
        if self.architecture in ("batchtopk", "matryoshka"):
            pre = self._pre(X)
            flat = np.sort(pre.ravel())[::-1]
            n_keep = min(flat.size, X.shape[0] * self.k)
            self.threshold_ = float(max(flat[n_keep - 1], 0.0))
        if self.architecture == "matryoshka":
            self.order_ = np.arange(self.n_latents)
        else:
            freq = (self._encode(X) > 0).mean(0)
            self.order_ = np.argsort(-freq, kind="stable")
        return self

    # ------------------------------------------------------------- encode
    def _pre(self, X: np.ndarray) -> np.ndarray:
        return np.maximum(X @ self.W_enc_ + self.b_enc_, 0.0)

    def _encode(self, X: np.ndarray) -> np.ndarray:
        pre = self._pre(X)
        if self.architecture == "topk":
            idx = np.argpartition(-pre, self.k - 1, axis=1)[:, : self.k]
            out = np.zeros_like(pre)
            np.put_along_axis(out, idx, np.take_along_axis(pre, idx, 1), 1)
            return out
        if self.architecture in ("batchtopk", "matryoshka"):
            return np.where(pre > self.threshold_, pre, 0.0)
        return pre

    def _check_X(self, X: Any, name: str = "X") -> np.ndarray:
        check_is_fitted(self, "W_enc_")
        X = check_numeric_array(X, name, ndim=2)
        if X.shape[1] != self.n_features_in_:
            raise DataError(
                f"{name} has {X.shape[1]} columns but the autoencoder was fitted on {self.n_features_in_}; "
                "pass activations from the same hook point.",
                argument=name,
            )
        return X

    def transform(self, X: Any) -> np.ndarray:
        """The sparse latents ``f(x)`` of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, d)

        Returns
        -------
        ndarray of shape (n_samples, n_latents)
            Non-negative latents (BatchTopK and Matryoshka use the calibrated threshold).
        """
        return self._encode(self._check_X(X))

    def inverse_transform(self, Z: Any) -> np.ndarray:
        """Decode latents: ``W_dec f + b_dec``.

        Parameters
        ----------
        Z : array-like of shape (n_samples, n_latents)

        Returns
        -------
        ndarray of shape (n_samples, d)
        """
        check_is_fitted(self, "W_enc_")
        Z = check_numeric_array(Z, "Z", ndim=2)
        if Z.shape[1] != self.n_latents:
            raise DataError(
                f"Z must have {self.n_latents} columns (latents), got {Z.shape[1]}.", argument="Z"
            )
        return Z @ self.W_dec_ + self.b_dec_

    def reconstruct(self, X: Any, n_prefix: int | None = None) -> np.ndarray:
        """Reconstruction of ``X`` by the whole dictionary or by its first ``n_prefix`` latents.

        Parameters
        ----------
        X : array-like of shape (n_samples, d)
        n_prefix : int, optional
            Keep only the first ``n_prefix`` latents of :attr:`order_` (a nested sub-SAE).

        Returns
        -------
        ndarray of shape (n_samples, d)
        """
        X = self._check_X(X)
        Z = self._encode(X)
        if n_prefix is not None:
            Z = self._truncate(Z, n_prefix)
        return Z @ self.W_dec_ + self.b_dec_

    def _truncate(self, Z: np.ndarray, n_prefix: Any) -> np.ndarray:
        if isinstance(n_prefix, bool) or not isinstance(n_prefix, numbers.Integral):
            raise ParameterError(f"n_prefix must be an int, got {n_prefix!r}.", argument="n_prefix")
        if not 1 <= int(n_prefix) <= self.n_latents:
            raise ParameterError(
                f"n_prefix must lie in [1, n_latents = {self.n_latents}], got {n_prefix}.",
                argument="n_prefix",
            )
        keep = np.zeros(self.n_latents, dtype=bool)
        keep[self.order_[: int(n_prefix)]] = True
        return np.where(keep, Z, 0.0)

    def prefix_metrics(self, X: Any, sizes: Any = None) -> pd.DataFrame:
        """Reconstruction and sparsity of each nested sub-dictionary.

        Parameters
        ----------
        X : array-like of shape (n_samples, d)
            Held-out activations.
        sizes : list of int, optional
            Prefix sizes; default :attr:`prefixes_`.

        Returns
        -------
        pandas.DataFrame
            One row per size with ``size``, ``l0`` (mean active latents among the prefix),
            ``fvu`` (fraction of variance unexplained, ``sum ||x - x_hat||^2 / sum ||x - mean||^2``)
            and ``cosine`` (mean cosine similarity of ``x`` and ``x_hat``).
        """
        X = self._check_X(X)
        sizes = self.prefixes_ if sizes is None else _check_prefixes_loose(sizes, self.n_latents)
        Z = self._encode(X)
        rows = []
        for m in sizes:
            Zm = self._truncate(Z, int(m))
            X_hat = Zm @ self.W_dec_ + self.b_dec_
            rows.append(
                {
                    "size": int(m),
                    "l0": float((Zm > 0).sum(1).mean()),
                    "fvu": _fvu(X, X_hat),
                    "cosine": _cosine(X, X_hat),
                }
            )
        return pd.DataFrame(rows)


def _check_prefixes_loose(sizes: Any, n_latents: int) -> list[int]:
    try:
        out = [int(s) for s in sizes]
    except (TypeError, ValueError):
        out = []
    if not out or any(s < 1 or s > n_latents for s in out):
        raise ParameterError(f"sizes must be integers in [1, {n_latents}], got {sizes!r}.", argument="sizes")
    return out


def _fvu(X: np.ndarray, X_hat: np.ndarray) -> float:
    total = float(((X - X.mean(0)) ** 2).sum())
    return float(((X - X_hat) ** 2).sum() / total) if total > 0 else float("nan")


def _cosine(X: np.ndarray, X_hat: np.ndarray) -> float:
    nx = np.linalg.norm(X, axis=1)
    keep = nx > 0  # an all-zero activation has no direction to match
    if not keep.any():
        return float("nan")
    num = (X[keep] * X_hat[keep]).sum(1)
    den = nx[keep] * np.linalg.norm(X_hat[keep], axis=1)
    return float(np.mean(np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)))


# ---------------------------------------------------------------- training
def _lr_factor(step: int, n_steps: int) -> float:
    warm = max(1, min(1000, n_steps // 20))
    decay_start = int(0.8 * n_steps)
    if step < warm:
        return (step + 1) / warm
    if step >= decay_start:
        return max(0.0, (n_steps - step) / max(1, n_steps - decay_start))
    return 1.0


def _batch_topk(pre: torch.Tensor, k: int) -> torch.Tensor:
    flat = pre.flatten()
    n_keep = min(flat.numel(), pre.shape[0] * k)
    vals, idx = flat.topk(n_keep, sorted=False)
    out = torch.zeros_like(flat).scatter(0, idx, vals)
    return out.view_as(pre)


def _row_topk(pre: torch.Tensor, k: int) -> torch.Tensor:
    vals, idx = pre.topk(k, dim=1, sorted=False)
    return torch.zeros_like(pre).scatter(1, idx, vals)


def _train(
    sae: SparseAutoencoder, X: torch.Tensor, gen: torch.Generator
) -> tuple[list[torch.Tensor], list[float]]:
    """One loop for all four architectures; ``X`` has unit mean squared norm."""
    n, d = X.shape
    m, arch, k = sae.n_latents, sae.architecture, sae.k
    bound = 1.0 / np.sqrt(d)
    W_dec = (torch.rand(m, d, generator=gen) * 2 - 1) * bound
    W_dec = W_dec / W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)
    W_enc = W_dec.T.clone()  # transpose initialisation (SAEBench: avoids dead latents)
    b_enc = torch.zeros(m)
    b_dec = X.mean(0).clone()
    params = [p.requires_grad_(True) for p in (W_enc, b_enc, W_dec, b_dec)]
    adam = Adam(params, sae.learning_rate)
    bs = min(sae.batch_size, n)
    topk_style = arch != "relu"
    k_aux = max(1, d // 2)
    since_fired = torch.zeros(m, dtype=torch.long)
    prefixes = sae.prefixes_ if arch == "matryoshka" else [m]
    l1_warm = max(1, sae.n_steps // 20)
    losses: list[float] = []
    perm = torch.randperm(n, generator=gen)
    pos = 0
    for step in range(sae.n_steps):
        if pos + bs > n:
            perm, pos = torch.randperm(n, generator=gen), 0
        x = X[perm[pos : pos + bs]]
        pos += bs
        pre = torch.relu((x - b_dec) @ W_enc + b_enc)
        if arch == "topk":
            f = _row_topk(pre, k)
        elif arch in ("batchtopk", "matryoshka"):
            f = _batch_topk(pre, k)
        else:
            f = pre
        loss = x.new_zeros(())
        recon = b_dec.expand_as(x)
        start = 0
        for end in prefixes:  # cumulative reconstructions; their summed error is the loss
            recon = recon + f[:, start:end] @ W_dec[start:end]
            loss = loss + ((x - recon) ** 2).sum(1).mean()
            start = end
        if arch == "relu":
            lam = sae.l1_coefficient / np.sqrt(d) * min(1.0, (step + 1) / l1_warm)
            loss = loss + lam * (f * W_dec.norm(dim=1)).sum(1).mean()
        active = (f > 0).any(0)
        since_fired = torch.where(active, torch.zeros_like(since_fired), since_fired + bs)
        dead = since_fired >= sae.dead_after * bs
        if topk_style and bool(dead.any()):
            resid = (x - recon).detach()
            aux_pre = torch.where(dead, pre, torch.zeros_like(pre))
            aux_f = _row_topk(aux_pre, min(k_aux, int(dead.sum())))
            denom = ((resid - resid.mean(0)) ** 2).sum(1).mean().clamp_min(1e-12)
            aux = ((aux_f @ W_dec - resid) ** 2).sum(1).mean() / denom
            loss = loss + _AUX_WEIGHT * aux
        grads = torch.autograd.grad(loss, params)
        norm = float(torch.sqrt(sum((g**2).sum() for g in grads)))  # type: ignore[arg-type]
        clip = min(1.0, 1.0 / (norm + 1e-6))  # gradient-norm clipping at 1
        adam.step([g * clip for g in grads], _lr_factor(step, sae.n_steps))
        if topk_style:  # unit-norm decoder rows (the TopK family's constraint)
            with torch.no_grad():
                W_dec /= W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)
        losses.append(float(loss.detach()))
    return params, losses
