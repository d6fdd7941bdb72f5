"""Safety-aware decoding with an explicit safety classifier (a ``[CLS]`` safety head).

Li & Kim, "Safety Alignment Can Be Not Superficial With Explicit Safety Signals", ICML 2025
(arXiv:2505.17072). Safety is made an explicit binary task: a classifier token ``[CLS]``
reads the query and the response so far through the model's own attention, and a head on
its hidden state says benign or malicious. During generation the classifier is re-run at
the steps an annealed schedule picks, its attention span set by the paper's *strategic
attention* rules, and *strategic decoding* inserts a refusal opening when the query is
malicious or when the response turns malicious for ``tau`` consecutive checks.

Here the model stays frozen: :class:`SafetyHead` learns the ``[CLS]`` input embedding and a
logistic head on the model's hidden state, so it applies to any local Hugging Face causal LM
(the paper fine-tunes the whole model with ``L_sft + lambda * L_cls``; see
docs/security/safety-decoding.md for every divergence). The ``[CLS]`` token is appended
after the sequence, with the KV cache, and never kept in it: it attends to what the rules
allow, no other token attends to it (the paper's attention routing), unless the head was trained
with the ``[CLS]`` visible to the response (``joint_safety_finetune(cls_visible=True)``).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from trustlab._param_validation import Interval, ParamsValidationMixin
from trustlab._validation import check_token_ids
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.security._safety_loop import decode
from trustlab.security._safety_rules import _check_context, _Monitor, _rules
from trustlab.security._safety_visible import _cache_kw, _out_cache

__all__ = ["SafeGeneration", "SafetyHead", "safe_generate", "safety_logits_processor"]


def _check_model(model: Any) -> Any:
    import torch

    if not isinstance(model, torch.nn.Module) or not hasattr(model, "config") or not callable(model):
        raise ModelError(
            f"model must be a transformers causal LM, got {type(model).__name__}; load one with "
            "trustlab.lm.load_model.",
            argument="model",
        )
    return next(model.parameters()).device


class SafetyHead(ParamsValidationMixin):
    """A binary safety classifier read from a ``[CLS]`` token appended to the sequence.

    The ``[CLS]`` input embedding (initialised to the mean token embedding) and a logistic
    head on the hidden state of layer ``layer`` at that token are learned with Adam on
    labelled sequences; the model's weights are frozen. ``key_mask`` says which positions the
    ``[CLS]`` token attends to (the strategic-attention windows); the sequence itself is
    encoded with ordinary causal attention and never sees the ``[CLS]`` token.

    Parameters
    ----------
    model : transformers causal LM
        Any local Hugging Face causal LM (GPT-2, Llama, Mistral, Qwen2, ...).
    layer : int, default=-1
        Index into the model's ``hidden_states`` (``-1``: the last, after the final norm).
    steps : int, default=300
        Adam steps.
    lr : float, default=0.05
        Learning rate.
    batch_size : int, default=256
        Sequences per step.
    random_state : int, default=0
        Seeds the batch order.
    pad_id : int, optional
        Left padding of the sequences given to ``fit`` and ``predict``: masked out of the
        encoding (position ids counted from the first real token) and of the ``[CLS]``
        token's attention, so that sequences of different lengths share one array.

    Attributes
    ----------
    cls_embedding_ : torch.Tensor, shape (d_model,)
    coef_ : torch.Tensor, shape (d_hidden,)
    intercept_ : torch.Tensor, shape ()
    losses_ : ndarray of float, shape (steps,)
        Binary cross-entropy of each step's batch.
    cls_visible_, cls_skip_ids_ : bool, tuple of int
        Only on a head from ``joint_safety_finetune(cls_visible=True)``: the response attends to a
        ``[CLS]`` reading the query minus these ids (:func:`safe_generate` inserts it).

    References
    ----------
    Li, Kim. "Safety Alignment Can Be Not Superficial With Explicit Safety Signals". ICML 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.lm import ModelConfig, build_model
    >>> import torch
    >>> model = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=1, n_heads=2))
    >>> g = torch.Generator().manual_seed(0)  # O(1) random weights: tokens reach the [CLS] state
    >>> _ = [p.data.normal_(0, 0.5, generator=g) for p in model.parameters() if p.ndim == 2]
    >>> x = np.array([[1, 2, 3], [1, 5, 3]] * 8); y = np.array([0, 1] * 8)
    >>> head = SafetyHead(model, steps=30).fit(x, y)
    >>> head.predict(x[:2]).tolist()
    [0, 1]
    """

    cls_visible_: bool  # set by joint_safety_finetune(cls_visible=True)
    cls_skip_ids_: tuple[int, ...]
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "layer": [Interval(numbers.Integral, None, None, closed="neither")],
        "steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
        "pad_id": [Interval(numbers.Integral, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        model: Any,
        *,
        layer: int = -1,
        steps: int = 300,
        lr: float = 0.05,
        batch_size: int = 256,
        random_state: int = 0,
        pad_id: int | None = None,
    ) -> None:
        self.model = model
        self.pad_id = pad_id
        self.layer = layer
        self.steps = steps
        self.lr = lr
        self.batch_size = batch_size
        self.random_state = random_state

    # -- the [CLS] pass --------------------------------------------------------------
    def _vocab(self) -> int:
        return int(self.model.get_input_embeddings().num_embeddings)

    def _masks(self, ids: np.ndarray, key_mask: Any) -> np.ndarray:
        if key_mask is None:
            return np.ones(ids.shape, dtype=bool)
        km = np.asarray(key_mask)
        if km.shape != ids.shape or km.dtype != bool:
            raise DataError(
                f"key_mask must be a boolean array of the sequences' shape {ids.shape}, got "
                f"{km.dtype} {km.shape}.",
                argument="key_mask",
            )
        if not km.any(axis=1).all():
            raise DataError(
                "key_mask leaves a sequence with no position to attend to; allow at least one.",
                argument="key_mask",
            )
        return km

    def cls_logits(self, cache: Any, key_mask: Any, position: Any, *, keep: bool = False) -> Any:
        """Logits of the ``[CLS]`` token appended after a KV cache; the cache is left as it was.

        Parameters
        ----------
        cache : transformers Cache
            The cache of the sequences (length ``position``).
        key_mask : torch.Tensor of bool, shape (n, position)
            Positions the ``[CLS]`` token attends to.
        position : int or torch.Tensor of shape (n,)
            The ``[CLS]`` token's position id (the number of real tokens before it).
        keep : bool, default=False
            Leave the ``[CLS]`` token in the cache, where later tokens attend to it.

        Returns
        -------
        torch.Tensor, shape (n,)
            Malicious-vs-benign logits.
        """
        import torch

        n = key_mask.shape[0]
        emb = self.cls_embedding_.to(self.model.dtype).expand(n, 1, -1)
        attn = torch.cat([key_mask.long(), torch.ones(n, 1, dtype=torch.long, device=key_mask.device)], 1)
        pos = torch.as_tensor(position, dtype=torch.long, device=key_mask.device).expand(n).reshape(n, 1)
        out = self.model(
            inputs_embeds=emb,
            attention_mask=attn,
            position_ids=pos,
            use_cache=True,
            output_hidden_states=True,
            **{_cache_kw(self.model): cache},
        )
        if not keep:
            cache.crop(-1)
        h = out.hidden_states[self.layer][:, -1].float()
        return h @ self.coef_ + self.intercept_

    def _encode(self, ids: np.ndarray, key_mask: np.ndarray) -> tuple[Any, Any, Any]:
        """Cache of the sequences, the key mask without padding, the [CLS] positions."""
        import torch

        device = next(self.model.parameters()).device
        real = np.ones(ids.shape, dtype=bool)
        if self.pad_id is not None:
            real = np.cumsum(ids != self.pad_id, axis=1) > 0
        pos = np.clip(np.cumsum(real, axis=1) - 1, 0, None)
        with torch.no_grad():
            out = self.model(
                input_ids=torch.as_tensor(ids, device=device),
                attention_mask=torch.as_tensor(real.astype(np.int64), device=device),
                position_ids=torch.as_tensor(pos, device=device),
                use_cache=True,
            )
        km = torch.as_tensor(key_mask & real, device=device)
        return _out_cache(out), km, torch.as_tensor(real.sum(axis=1), device=device)

    # -- estimator -------------------------------------------------------------------
    def fit(self, sequences: Any, y: Any, *, key_mask: Any = None) -> SafetyHead:
        """Learn the ``[CLS]`` embedding and the head on labelled sequences.

        Parameters
        ----------
        sequences : array-like of int, shape (n, length)
            Token ids (equal length; mask padding out of ``key_mask``).
        y : array-like of {0, 1}, shape (n,)
            1 = malicious.
        key_mask : array-like of bool, shape (n, length), optional
            Positions the ``[CLS]`` token may attend to; default all.

        Returns
        -------
        SafetyHead
            ``self``.
        """
        import torch
        from transformers import DynamicCache

        from trustlab._adam import Adam

        self._validate_params()
        device = _check_model(self.model)
        ids = check_token_ids(sequences, "sequences", vocab=self._vocab())
        labels = np.asarray(y)
        if labels.shape != (ids.shape[0],) or not np.isin(labels, (0, 1)).all():
            raise DataError(f"y must hold one 0/1 label per sequence ({ids.shape[0]}).", argument="y")
        if np.unique(labels).size < 2:
            raise DataError(
                "y holds one class only; the head needs malicious and benign examples.", argument="y"
            )
        cache, km, position = self._encode(ids, self._masks(ids, key_mask))
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        emb = self.model.get_input_embeddings().weight.detach()
        hidden = int(getattr(self.model.config, "hidden_size", emb.shape[1]))
        self.cls_embedding_ = emb.float().mean(0).clone().requires_grad_(True)
        self.coef_ = torch.zeros(hidden, device=device, requires_grad=True)
        self.intercept_ = torch.zeros((), device=device, requires_grad=True)
        params = [self.cls_embedding_, self.coef_, self.intercept_]
        opt = Adam(params, lr=float(self.lr))
        target = torch.as_tensor(labels, dtype=torch.float32, device=device)
        rng = np.random.default_rng(self.random_state)
        frozen = [p for p in self.model.parameters() if p.requires_grad]
        losses = np.empty(self.steps)
        try:
            for p in frozen:
                p.requires_grad_(False)
            for step in range(self.steps):
                idx = torch.as_tensor(rng.integers(0, len(ids), size=min(self.batch_size, len(ids))))
                batch = DynamicCache()
                for i, (k, v) in enumerate(layers):
                    batch.update(k[idx], v[idx], i)
                logits = self.cls_logits(batch, km[idx], position[idx])
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, target[idx])
                grads = torch.autograd.grad(loss, params)
                opt.step(grads, lr_scale=0.55 + 0.45 * np.cos(np.pi * step / self.steps))
                losses[step] = float(loss.detach())
        finally:
            for p in frozen:
                p.requires_grad_(True)
        for p in params:
            p.requires_grad_(False)
        self.losses_ = losses
        return self

    def decision_function(self, sequences: Any, *, key_mask: Any = None) -> np.ndarray:
        """Malicious-vs-benign logit of each sequence.

        Parameters
        ----------
        sequences : array-like of int, shape (n, length)
        key_mask : array-like of bool, shape (n, length), optional

        Returns
        -------
        ndarray of float, shape (n,)
        """
        import torch

        if not hasattr(self, "coef_"):
            raise NotFittedError("This SafetyHead is not fitted; call fit first.", argument="fit")
        _check_model(self.model)
        ids = check_token_ids(sequences, "sequences", vocab=self._vocab())
        cache, km, position = self._encode(ids, self._masks(ids, key_mask))
        with torch.no_grad():
            return self.cls_logits(cache, km, position).cpu().numpy().astype(np.float64)

    def predict_proba(self, sequences: Any, *, key_mask: Any = None) -> np.ndarray:
        """Probabilities of benign (column 0) and malicious (column 1).

        Parameters
        ----------
        sequences : array-like of int, shape (n, length)
        key_mask : array-like of bool, shape (n, length), optional

        Returns
        -------
        ndarray of float, shape (n, 2)
        """
        p = 1.0 / (1.0 + np.exp(-self.decision_function(sequences, key_mask=key_mask)))
        return np.column_stack([1.0 - p, p])

    def predict(self, sequences: Any, *, key_mask: Any = None, threshold: float = 0.5) -> np.ndarray:
        """1 where the malicious probability reaches ``threshold``.

        Parameters
        ----------
        sequences : array-like of int, shape (n, length)
        key_mask : array-like of bool, shape (n, length), optional
        threshold : float, default=0.5

        Returns
        -------
        ndarray of int64, shape (n,)
        """
        return (self.predict_proba(sequences, key_mask=key_mask)[:, 1] >= threshold).astype(np.int64)


@dataclass(frozen=True)
class SafeGeneration:
    """What :func:`safe_generate` produced.

    Attributes
    ----------
    tokens : ndarray of int64, shape (n, prompt_length + n_prefill + max_new_tokens)
        Prompts, the forced prefill, and the generated tokens.
    refused_at : ndarray of int64, shape (n,)
        Response position (prefill included) where the refusal was inserted; -1 where none was.
    n_checks : int
        Batched ``[CLS]`` evaluations run (each one ``[CLS]`` row per sequence, riding in a
        decoding pass; a pass of its own where the model's attention takes no 4-D mask from us).
    prompt_length : int
        Length of the prompts.

    Examples
    --------
    >>> import numpy as np
    >>> out = SafeGeneration(np.array([[1, 2, 5, 6]]), np.array([0]), 1, 2)
    >>> out.responses.tolist()
    [[5, 6]]
    """

    tokens: np.ndarray
    refused_at: np.ndarray
    n_checks: int
    prompt_length: int

    @property
    def responses(self) -> np.ndarray:
        """The response part (prefill included)."""
        return self.tokens[:, self.prompt_length :]


def safe_generate(
    model: Any,
    head: SafetyHead | None,
    prompt_ids: Any,
    *,
    refusal_ids: Any,
    max_new_tokens: int = 16,
    prefill_ids: Any = None,
    tau: int = 3,
    r1: int = 10,
    r2: int = 10,
    r3: int = 10,
    threshold: float = 0.5,
    schedule: str = "annealing",
    period: int = 10,
    skip_ids: Any = (),
    eos_id: int | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    strategic_decoding: bool = True,
) -> SafeGeneration:
    """Generate with the safety head re-evaluated during decoding (strategic attention + decoding).

    At the first free step the ``[CLS]`` token reads the query and the first ``r1`` response
    tokens (Rule 1); if malicious, the refusal opening ``refusal_ids`` is inserted at once.
    Otherwise it re-reads the last ``r2`` response tokens at the steps ``schedule`` picks
    (Rule 2); a malicious verdict marks a transition point ``S_t``, after which it reads
    ``[S_t - r2, S_t + r3)`` every step (Rule 3) and inserts the refusal after ``tau``
    consecutive malicious verdicts, or falls back to Rule 2 on a benign one. ``skip_ids``
    (padding, BOS, template tokens) are never attended to (Rule 4). With ``head=None`` this
    is the same decoding loop without the safety head (the baseline). A head trained with
    ``joint_safety_finetune(cls_visible=True)`` also keeps a ``[CLS]`` reading the query in the
    cache, before its last token, where the model attends to it (the paper's implicit channel).

    Parameters
    ----------
    model : transformers causal LM
        The generator (frozen; the head was fitted on it).
    head : SafetyHead or None
        A fitted head, or ``None`` for base decoding.
    prompt_ids : array-like of int, shape (n, prompt_length)
        Prompts of equal length.
    refusal_ids : array-like of int
        The refusal opening to insert (the paper's "Sorry, I cannot fulfill your request because").
    max_new_tokens : int, default=16
        Tokens generated after the prefill.
    prefill_ids : array-like of int, shape (k,) or (n, k), optional
        A forced response opening (a prefilling attack); counted as response tokens.
    tau : int, default=3
        Consecutive malicious verdicts that confirm a transition (the paper uses <= 3).
    r1, r2, r3 : int, default=10
        Attention windows of Rules 1-3 (the paper's values).
    threshold : float, default=0.5
        Malicious probability at which a verdict is malicious.
    schedule : {"annealing", "every", "periodic", "first"}, default="annealing"
        When Rule 2 re-classifies: gaps 1, 1, 2, 4, ... capped at ``r2``; every step; every
        ``period`` steps; or only the first step.
    period : int, default=10
        Gap of the periodic schedule.
    skip_ids : array-like of int, default=()
        Auxiliary token ids the ``[CLS]`` token skips.
    eos_id : int, optional
        End of response: a row that emitted it is padded with it and no longer checked.
    temperature : float, default=0.0
        0 for greedy decoding, else sampling at this temperature.
    seed : int, default=0
        Seeds the sampling.
    strategic_decoding : bool, default=True
        ``False``: no check runs and no refusal is inserted; only the persistent ``[CLS]`` of a
        head trained with ``joint_safety_finetune(cls_visible=True)`` acts, through attention
        (the paper's ablation without strategic decoding). A head whose ``[CLS]`` is not visible
        then decodes as ``head=None``.

    Returns
    -------
    SafeGeneration

    References
    ----------
    Li, Kim. "Safety Alignment Can Be Not Superficial With Explicit Safety Signals". ICML 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.lm import ModelConfig, build_model
    >>> import torch
    >>> model = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=1, n_heads=2))
    >>> g = torch.Generator().manual_seed(0)
    >>> _ = [p.data.normal_(0, 0.5, generator=g) for p in model.parameters() if p.ndim == 2]
    >>> x = np.array([[1, 2, 3], [1, 5, 3]] * 8)
    >>> head = SafetyHead(model, steps=30).fit(x, np.array([0, 1] * 8))
    >>> out = safe_generate(model, head, x[:2], refusal_ids=[6, 7], max_new_tokens=3)
    >>> out.refused_at.tolist(), out.responses[1, :2].tolist()
    ([-1, 0], [6, 7])
    """
    import torch

    device = _check_model(model)
    vocab = int(model.get_input_embeddings().num_embeddings)
    prompts = check_token_ids(prompt_ids, "prompt_ids", vocab=vocab)
    if head is not None and (not isinstance(head, SafetyHead) or not hasattr(head, "coef_")):
        raise ParameterError("head must be a fitted SafetyHead or None.", argument="head")
    if head is not None and head.model is not model:
        raise ParameterError("head was fitted on another model; fit it on this one.", argument="head")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ParameterError(
            f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}.", argument="max_new_tokens"
        )
    if not isinstance(strategic_decoding, bool):
        raise ParameterError("strategic_decoding must be True or False.", argument="strategic_decoding")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature >= 0:
        raise ParameterError(f"temperature must be >= 0, got {temperature!r}.", argument="temperature")
    n = prompts.shape[0]
    if prefill_ids is not None:
        pre = np.asarray(prefill_ids)
        pre = np.broadcast_to(pre, (n, pre.shape[-1])) if pre.ndim == 1 else pre
        ids = np.concatenate([prompts, check_token_ids(pre, "prefill_ids", vocab=vocab)], axis=1)
    else:
        ids = prompts
    rules = _rules(
        prompts.shape[1], refusal_ids, tau=tau, r1=r1, r2=r2, r3=r3, threshold=threshold,
        schedule=schedule, period=period, skip_ids=skip_ids, eos_id=eos_id,
    )  # fmt: skip
    _check_context(model, ids.shape[1], max_new_tokens)
    visible, lp = head is not None and getattr(head, "cls_visible_", False), prompts.shape[1]
    if visible and lp < 2:
        raise DataError("a head with a visible [CLS] needs prompts of >= 2 tokens.", argument="prompt_ids")
    mon = _Monitor(n, rules)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            tokens = decode(
                model, head, torch.as_tensor(ids, device=device), mon, max_new_tokens=max_new_tokens,
                visible=visible, check=head is not None and strategic_decoding,
                temperature=float(temperature), seed=seed,
            )  # fmt: skip
    finally:
        model.train(was_training)
    return SafeGeneration(tokens.cpu().numpy(), mon.refused_at, mon.checks, rules.prompt_length)


def safety_logits_processor(head: SafetyHead, prompt_length: int, *, refusal_ids: Any, **rules: Any) -> Any:
    """The same strategic decoding as a ``transformers`` ``LogitsProcessor`` for ``model.generate``.

    Each check re-encodes the sequence (``generate`` does not hand its KV cache to logits
    processors), so it costs a full forward pass; :func:`safe_generate` reuses the cache.
    Make one processor per ``generate`` call.

    Parameters
    ----------
    head : SafetyHead
        A fitted head.
    prompt_length : int
        Length of the (equal-length) prompts; later tokens are the response (a prefill too).
    refusal_ids : array-like of int
        The refusal opening.
    **rules
        ``tau``, ``r1``, ``r2``, ``r3``, ``threshold``, ``schedule``, ``period``, ``skip_ids``,
        ``eos_id`` as in :func:`safe_generate`.

    Returns
    -------
    transformers.LogitsProcessor
        Call as ``model.generate(ids, logits_processor=LogitsProcessorList([proc]), ...)``.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.lm import ModelConfig, build_model
    >>> model = build_model(ModelConfig("llama", vocab_size=8, d_model=16, n_layers=1, n_heads=2))
    >>> x = np.array([[1, 2, 3], [1, 5, 3]] * 8)
    >>> head = SafetyHead(model, steps=2).fit(x, np.array([0, 1] * 8))
    >>> proc = safety_logits_processor(head, 3, refusal_ids=[6, 7], tau=2)
    >>> type(proc).__name__
    'SafetyLogitsProcessor'
    """
    from trustlab.security._safety_torch import SafetyLogitsProcessor

    if not isinstance(head, SafetyHead) or not hasattr(head, "coef_"):
        raise ParameterError("head must be a fitted SafetyHead.", argument="head")
    if getattr(head, "cls_visible_", False):
        raise ParameterError(
            "this head's [CLS] is visible to the response (joint_safety_finetune(cls_visible=True)); "
            "model.generate cannot insert it: decode with safe_generate.",
            argument="head",
        )
    if isinstance(prompt_length, bool) or not isinstance(prompt_length, int) or prompt_length < 1:
        raise ParameterError(
            f"prompt_length must be an int >= 1, got {prompt_length!r}.", argument="prompt_length"
        )
    return SafetyLogitsProcessor(head, _rules(prompt_length, refusal_ids, **rules), _Monitor)
