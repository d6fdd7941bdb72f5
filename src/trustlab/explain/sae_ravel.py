"""SAEBench's RAVEL metric: cause, isolation and disentanglement of SAE-latent interchanges.

For each attribute ``A`` of an entity type (RAVEL's cities: country, continent, language),
SAEBench trains a Multitask Differentiable Binary Mask (MDBM, Chaudhary and Geiger 2024) over
the SAE's latents: the latents it selects are copied from a *source* prompt's entity token into
a *base* prompt's entity token, at one hook point, and the rest of the model runs on. The mask
is trained on two kinds of pairs at once:

- *cause* pairs: base and source both query ``A`` and their answers differ; the target is the
  source's answer (the swap should carry ``A`` over);
- *isolation* pairs: base and source both query another attribute ``B`` (answers differ); the
  target is the base's answer (the swap should leave ``B`` alone).

At evaluation the mask is made hard (``mask > 0``): the cause score is the share of held-out
cause pairs whose intervened prediction is the source's answer, the isolation score the share
of isolation pairs that keep the base's answer, and the disentanglement score their mean,
averaged over the attributes (SAEBench's ``disentangle_score``).

References
----------
.. [1] Karvonen, Rager, Lin, Tigges, Bloom, Chanin, Lau, Farrell, McDougall, Ayonrinde, Till,
   Wearden, Conmy, Marks, Nanda. "SAEBench: A Comprehensive Benchmark for Sparse Autoencoders
   in Language Model Interpretability". ICML 2025, section 3.2.4, appendix D, table 7.
.. [2] Huang, Wu, Potts, Geva, Geiger. "RAVEL: Evaluating Interpretability Methods on
   Disentangling Language Model Representations". ACL 2024.
.. [3] Chaudhary, Geiger. "Evaluating Open-Source Sparse Autoencoders on Disentangling Factual
   Knowledge in GPT-2 Small". arXiv:2409.04478, 2024 (MDBM).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError
from trustlab.explain._sae_common import _check_sae, random_rotation, signed_codes

__all__ = ["RandomBasisControl", "RavelResult", "ravel"]

_EDITABLE = ("resid_pre", "resid_post", "attn_out", "mlp_out")


@dataclass(frozen=True)
class RavelResult:
    """SAEBench's RAVEL scores of one SAE (:func:`ravel`).

    Attributes
    ----------
    scores : pandas.DataFrame
        One row per attribute (the index, the attribute the mask is trained to change):
        ``cause``, ``isolation``, ``disentanglement`` (their mean), ``n_cause`` and
        ``n_isolation`` (held-out pairs scored) and ``n_selected`` (latents the hard mask keeps).
    masks : dict of str to ndarray of bool
        The hard mask over latents of each attribute.
    correct : dict of str to ndarray of bool
        Per held-out pair: whether the intervened prediction is the target; with
        ``is_cause`` (same keys) for standard errors.
    is_cause : dict of str to ndarray of bool
        Per held-out pair: cause (True) or isolation (False).
    n_known : int
        Prompts the model answers right without intervention (SAEBench keeps only those).
    pairs : dict of str to pandas.DataFrame
        The held-out pairs of each attribute: ``base`` and ``source`` (row indices into
        ``prompts``) and ``target`` (the token the intervened model should predict).

    See Also
    --------
    ravel
    """

    scores: pd.DataFrame
    masks: dict[str, np.ndarray]
    correct: dict[str, np.ndarray]
    is_cause: dict[str, np.ndarray]
    n_known: int
    pairs: dict[str, pd.DataFrame]

    @property
    def cause(self) -> float:
        """Cause score averaged over the attributes."""
        return float(self.scores["cause"].mean())

    @property
    def isolation(self) -> float:
        """Isolation score averaged over the attributes."""
        return float(self.scores["isolation"].mean())

    @property
    def score(self) -> float:
        """SAEBench's disentanglement score: the mean over attributes of (cause + isolation) / 2."""
        return float(self.scores["disentanglement"].mean())


class RandomBasisControl:
    """A random-latent control for SAE metrics: ``2d`` latents along a random orthonormal basis.

    Latents are ``ReLU(Q^T (x - mu))`` and ``ReLU(-Q^T (x - mu))`` for a random rotation ``Q``
    and the data mean ``mu``; decoding is exact, so the control reconstructs perfectly and
    differs from an SAE only in its latents' directions (RAVEL's random-basis baseline).

    Parameters
    ----------
    X : array-like of shape (n_samples, d)
        Activations (for ``mu`` and ``d``).
    random_state : int, default=0
        Seeds the rotation.

    Attributes
    ----------
    W_dec_ : ndarray of shape (2 d, d)
        Decoder rows ``Q^T`` then ``-Q^T``.
    b_dec_ : ndarray of shape (d,)
        The data mean.

    Examples
    --------
    >>> X = np.random.default_rng(0).normal(size=(50, 4))
    >>> c = RandomBasisControl(X)
    >>> bool(np.allclose(c.transform(X) @ c.W_dec_ + c.b_dec_, X))
    True
    """

    def __init__(self, X: Any, random_state: int = 0) -> None:
        X = check_numeric_array(X, "X", ndim=2)
        self._q = random_rotation(X.shape[1], random_state)
        self.b_dec_ = X.mean(0)
        self.W_dec_ = np.concatenate([self._q.T, -self._q.T])

    def transform(self, X: Any) -> np.ndarray:
        """Latents of each row.

        Parameters
        ----------
        X : array-like of shape (n_samples, d)

        Returns
        -------
        ndarray of shape (n_samples, 2 d)
        """
        X = check_numeric_array(X, "X", ndim=2)
        return signed_codes((X - self.b_dec_) @ self._q)


def _check_inputs(
    prompts: Any, answer: Any, attribute: Any, entity_pos: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ids = np.asarray(prompts)
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise DataError(
            f"prompts must be a 2-D integer array of token ids (prompts of one length), got shape "
            f"{ids.shape} and dtype {ids.dtype}; pad or group your prompts to one length.",
            argument="prompts",
        )
    n, length = ids.shape
    out = []
    for name, value in (("answer", answer), ("attribute", attribute), ("entity_pos", entity_pos)):
        arr = np.asarray(value)
        if arr.ndim != 1 or arr.shape[0] != n:
            raise DataError(
                f"{name} must be 1-D with one entry per prompt ({n}), got shape {arr.shape}.", argument=name
            )
        out.append(arr)
    ans, attr, pos = out
    for name, arr in (("answer", ans), ("entity_pos", pos)):
        if not np.issubdtype(arr.dtype, np.integer):
            raise DataError(
                f"{name} must hold integers (token ids / positions), got {arr.dtype}.", argument=name
            )
    if pos.min() < 0 or pos.max() >= length:
        raise DataError(
            f"entity_pos must lie in [0, {length}) (the entity's last token), got {pos.min()}..{pos.max()}.",
            argument="entity_pos",
        )
    if np.unique(attr).size < 2:
        raise DataError(
            "attribute must name at least two attributes (RAVEL isolates one from the others).",
            argument="attribute",
        )
    return ids, ans, attr, pos


def _pairs(
    rng: np.random.Generator, idx: np.ndarray, ans: np.ndarray, n_pairs: int
) -> tuple[np.ndarray, np.ndarray]:
    """SAEBench's ``get_prompt_pairs`` within one attribute: base prompts and a source of another value."""
    base = rng.choice(idx, min(n_pairs, idx.size), replace=False)
    keep, source = [], []
    for b in base:
        other = idx[ans[idx] != ans[b]]
        if other.size:
            keep.append(b)
            source.append(rng.choice(other))
    return np.asarray(keep, dtype=int), np.asarray(source, dtype=int)


class _Intervention:
    """Runs the model with the base prompts' entity vectors replaced by decoded, mixed latents."""

    def __init__(
        self,
        model: Any,
        hook_point: str,
        ids: np.ndarray,
        pos: np.ndarray,
        Z: np.ndarray,
        sae: Any,
        X: np.ndarray,
        add_error: bool,
    ) -> None:
        from trustlab.lm.hooks import _layout, _parse

        self.lay = _layout(model)
        self.block = _parse([hook_point], len(self.lay.layers))[0][1]
        self.model, self.name = model, hook_point
        dtype = next(model.parameters()).dtype
        self.ids, self.pos = torch.as_tensor(ids), torch.as_tensor(pos)
        self.Z = torch.as_tensor(Z, dtype=dtype)
        self.D = torch.as_tensor(np.asarray(sae.W_dec_), dtype=dtype)
        self.b = torch.as_tensor(np.asarray(sae.b_dec_), dtype=dtype)
        err = X - (Z @ np.asarray(sae.W_dec_) + np.asarray(sae.b_dec_))
        self.err = torch.as_tensor(err, dtype=dtype) if add_error else None

    def logits(self, base: np.ndarray, source: np.ndarray, mask: torch.Tensor) -> torch.Tensor:
        from trustlab.lm.hooks import _block_hooks

        b, s = torch.tensor(np.asarray(base)), torch.tensor(np.asarray(source))
        mixed = (1 - mask) * self.Z[b] + mask * self.Z[s]
        new = mixed @ self.D + self.b
        if self.err is not None:
            new = new + self.err[b]
        rows, cols = torch.arange(len(b)), self.pos[b]

        def edit(x: torch.Tensor) -> torch.Tensor:
            x = x.clone()
            x[rows, cols] = new.to(x.dtype)
            return x

        handles = _block_hooks(self.block, set(), self.lay, {}, {self.name: edit})
        try:
            out = self.model(input_ids=self.ids[b]).logits[:, -1]
        finally:
            for h in handles:
                h.remove()
        return out


@validate_params(
    {
        "n_pairs": [Interval(numbers.Integral, 1, None, closed="left")],
        "train_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
        "epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "add_error": ["boolean"],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def ravel(
    model: Any,
    sae: Any,
    hook_point: str,
    prompts: Any,
    answer: Any,
    attribute: Any,
    entity_pos: Any,
    *,
    n_pairs: int = 5000,
    train_fraction: float = 0.7,
    epochs: int = 2,
    lr: float = 1e-3,
    temperature: tuple[float, float] = (1.0, 1e-4),
    batch_size: int = 8,
    add_error: bool = False,
    random_state: int = 42,
) -> RavelResult:
    """SAEBench's RAVEL evaluation of an SAE at a hook point of a causal LM.

    Steps (SAEBench, appendix D and ``evals/ravel``): keep the prompts the model answers
    right; for each attribute ``A``, draw up to ``n_pairs`` cause pairs (both query ``A``,
    different answers; target the source's answer) and as many isolation pairs pooled from
    the other attributes (target the base's answer); shuffle and split ``train_fraction`` /
    rest; train a mask ``m`` over latents (initialised at 0, Adam at ``lr``, ``epochs``
    passes, soft mask ``sigmoid(m / T)`` with ``T`` annealed log-linearly from
    ``temperature[0]`` to ``temperature[1]``) on the cross-entropy of the intervened
    next-token logits; the intervention replaces the hook point's vector at the base's entity
    token by ``W_dec ((1 - m) f(x_base) + m f(x_source)) + b_dec`` (no error term, as
    SAEBench). Held-out pairs are scored with the hard mask ``m > 0``.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Any decoder-only causal LM that ``trustlab.lm.hook_points`` understands.
    sae : fitted SparseAutoencoder or RandomBasisControl
        Anything with ``transform`` (activations to latents), ``W_dec_`` and ``b_dec_``.
    hook_point : str
        ``blocks.{i}.resid_post`` (or ``resid_pre``, ``attn_out``, ``mlp_out``) the SAE was
        trained on.
    prompts : array-like of int, shape (n_prompts, length)
        Token ids, one length (the answer is predicted after the last token).
    answer : array-like of int, shape (n_prompts,)
        The correct next token (single-token attribute values).
    attribute : array-like of str, shape (n_prompts,)
        The attribute each prompt queries (at least two).
    entity_pos : array-like of int, shape (n_prompts,)
        Position of the entity's last token (where the intervention happens).
    n_pairs : int, default=5000
        Cause pairs per attribute (SAEBench's ``num_pairs_per_attribute``; all prompts of the
        attribute when there are fewer).
    train_fraction : float, default=0.7
        Share of the pairs that trains the mask (SAEBench's ``train_test_split``).
    epochs : int, default=2
        Passes over the training pairs (SAEBench: 2).
    lr : float, default=1e-3
        Adam's learning rate for the mask (SAEBench: 1e-3).
    temperature : tuple of float, default=(1.0, 1e-4)
        Start and end of the annealed temperature (SAEBench's table 7).
    batch_size : int, default=8
        Pairs per step (SAEBench's for Gemma-2-2B: its LLM batch 32 divided by 4; the last
        partial batch of the training pairs is dropped, as there).
    add_error : bool, default=False
        Add the base's SAE reconstruction error back (SAEBench omits it for RAVEL).
    random_state : int, default=42
        Seeds the pairs, the split and the order (SAEBench's ``random_seed`` is 42).

    Returns
    -------
    RavelResult

    Raises
    ------
    DataError
        Ill-shaped prompts or labels, fewer than two attributes, or an attribute the model
        knows for fewer than two values.
    ParameterError
        An SAE without ``transform`` / ``W_dec_`` / ``b_dec_``, an unknown or non-editable
        hook point, or a bad temperature.

    Examples
    --------
    >>> from trustlab.explain.ravel_lab import load_ravel_lab
    >>> from trustlab.explain.sae import SparseAutoencoder
    >>> model, c = load_ravel_lab()  # doctest: +SKIP
    >>> # sae: a SparseAutoencoder fitted on the model's blocks.0.resid_pre activations
    >>> r = ravel(model, sae, "blocks.0.resid_pre", c.prompts, c.answer, c.attribute,
    ...           c.entity_pos)  # doctest: +SKIP
    """
    from trustlab._threads import one_thread

    with one_thread():
        return _ravel(
            model,
            sae,
            hook_point,
            prompts,
            answer,
            attribute,
            entity_pos,
            n_pairs,
            train_fraction,
            epochs,
            lr,
            temperature,
            batch_size,
            add_error,
            random_state,
        )


def _ravel(
    model: Any,
    sae: Any,
    hook_point: str,
    prompts: Any,
    answer: Any,
    attribute: Any,
    entity_pos: Any,
    n_pairs: int,
    train_fraction: float,
    epochs: int,
    lr: float,
    temperature: Any,
    batch_size: int,
    add_error: bool,
    random_state: int,
) -> RavelResult:
    from trustlab.lm.hooks import _layout, _parse, run_with_hooks

    _check_sae(sae)
    try:
        kind = _parse([hook_point], len(_layout(model).layers))[0][2]
    except ParameterError as err:
        raise ParameterError(f"hook_point: {err}", argument="hook_point") from err
    if kind not in _EDITABLE:
        raise ParameterError(
            f"hook_point must be one of blocks.{{i}}.{{{', '.join(_EDITABLE)}}}, got {hook_point!r}.",
            argument="hook_point",
        )
    t0, t1 = (float(t) for t in temperature) if np.size(temperature) == 2 else (0.0, 0.0)
    if not (t0 > 0 and t1 > 0):
        raise ParameterError(
            f"temperature must be two positive numbers (start, end), got {temperature!r}.",
            argument="temperature",
        )
    ids, ans, attr, pos = _check_inputs(prompts, answer, attribute, entity_pos)
    acts = run_with_hooks(model, ids, [hook_point])
    pred = acts["logits"][:, -1].argmax(-1).cpu().numpy()
    X = acts[hook_point][torch.arange(len(ids)), torch.as_tensor(pos)].double().cpu().numpy()
    known = np.flatnonzero(pred == ans)
    Z = np.asarray(sae.transform(X), dtype=float)
    run = _Intervention(model, hook_point, ids, pos, Z, sae, X, add_error)
    names = list(dict.fromkeys(attr.tolist()))
    rows, masks, correct, is_cause, pairs = [], {}, {}, {}, {}
    for a in names:
        rng = np.random.default_rng(random_state)
        cb, cs = _pairs(rng, known[attr[known] == a], ans, n_pairs)
        iso = [_pairs(rng, known[attr[known] == o], ans, n_pairs) for o in names if o != a]
        ib, is_ = np.concatenate([p[0] for p in iso]), np.concatenate([p[1] for p in iso])
        if cb.size < 2 or ib.size < 2:
            raise DataError(
                f"attribute {a!r}: too few known prompts with differing answers to pair; the model "
                "must know the attribute for at least two values.",
                argument="attribute",
            )
        order = rng.permutation(ib.size)[: cb.size]
        base = np.concatenate([cb, ib[order]])
        source = np.concatenate([cs, is_[order]])
        target = np.concatenate([ans[cs], ans[ib[order]]])
        cause = np.concatenate([np.ones(cb.size, bool), np.zeros(order.size, bool)])
        perm = rng.permutation(base.size)
        base, source, target, cause = base[perm], source[perm], target[perm], cause[perm]
        n_train = int(base.size * train_fraction)
        mask = _train_mask(
            run,
            base[:n_train],
            source[:n_train],
            target[:n_train],
            Z.shape[1],
            epochs,
            lr,
            (t0, t1),
            batch_size,
        )
        hard = (mask > 0).to(run.Z.dtype)
        with torch.no_grad():
            logits = torch.cat(
                [
                    run.logits(base[i : i + 256], source[i : i + 256], hard)
                    for i in range(n_train, base.size, 256)
                ]
            )
        ok = logits.argmax(-1).cpu().numpy() == target[n_train:]
        c = cause[n_train:]
        cause_score = float(ok[c].mean()) if c.any() else 0.0
        iso_score = float(ok[~c].mean()) if (~c).any() else 0.0
        rows.append(
            {
                "attribute": a,
                "cause": cause_score,
                "isolation": iso_score,
                "disentanglement": (cause_score + iso_score) / 2,
                "n_cause": int(c.sum()),
                "n_isolation": int((~c).sum()),
                "n_selected": int(hard.sum()),
            }
        )
        masks[a], correct[a], is_cause[a] = hard.cpu().numpy().astype(bool), ok, c
        held = slice(n_train, None)
        pairs[a] = pd.DataFrame({"base": base[held], "source": source[held], "target": target[held]})
    return RavelResult(
        pd.DataFrame(rows).set_index("attribute"), masks, correct, is_cause, int(known.size), pairs
    )


def _train_mask(
    run: _Intervention,
    base: np.ndarray,
    source: np.ndarray,
    target: np.ndarray,
    n_latents: int,
    epochs: int,
    lr: float,
    temps: tuple[float, float],
    batch_size: int,
) -> torch.Tensor:
    """SAEBench's MDBM training: a sigmoid mask annealed to binary, Adam on the cross-entropy."""
    n_batches = max(1, base.size // batch_size)
    mask = torch.zeros(n_latents, dtype=run.Z.dtype, requires_grad=True)
    opt = torch.optim.Adam([mask], lr=lr)
    schedule = np.logspace(np.log10(temps[0]), np.log10(temps[1]), epochs * n_batches)
    tgt = torch.as_tensor(target)
    was_training = run.model.training
    run.model.eval()
    grads = [p.requires_grad for p in run.model.parameters()]
    for p in run.model.parameters():
        p.requires_grad_(False)
    try:
        with torch.enable_grad():
            for step in range(epochs * n_batches):
                sl = slice((step % n_batches) * batch_size, (step % n_batches + 1) * batch_size)
                soft = torch.sigmoid(mask / float(schedule[step]))
                loss = torch.nn.functional.cross_entropy(run.logits(base[sl], source[sl], soft), tgt[sl])
                opt.zero_grad()
                loss.backward()
                opt.step()
    finally:
        for p, g in zip(run.model.parameters(), grads, strict=True):
            p.requires_grad_(g)
        run.model.train(was_training)
    return mask.detach()
