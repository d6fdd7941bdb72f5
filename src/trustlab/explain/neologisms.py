r"""Neologism learning: a new word whose input embedding alone is trained, the model frozen.

A word ``w`` that is not in the vocabulary is added to (a copy of) the tokenizer and given one
new input embedding ``E_w``; all of the model's weights stay frozen and unchanged. ``E_w`` is
trained on preference triples ``(x, y_c, y_r)`` whose prompts ``x`` use ``w`` with the paper's
APO-up objective

.. math::

    L = -\log\sigma\big(\beta[\log\tfrac{p_\theta(y_c|x)}{p_\theta(y_r|x)}
        - \log\tfrac{p_{\theta_0}(y_c|x)}{p_{\theta_0}(y_r|x)}]\big)
        - \log\sigma\big(\beta\log\tfrac{p_\theta(y_c|x)}{p_{\theta_0}(y_c|x)}\big),

where ``p_θ0`` is the model with the word's initial embedding. Prompts that do not use the word
are computed exactly as before. See docs/explain/neologisms.md (the method, its defaults, and
the claims on the lab's instruction task).

References
----------
.. [1] Hewitt, Geirhos, Kim. "Position: We Can't Understand AI Using our Existing Vocabulary".
   ICML 2025 (position track), PMLR 267:81556-81572.
.. [2] Hewitt, Tafjord, Geirhos, Kim. "Neologism Learning for Controllability and
   Self-Verbalization". arXiv:2510.08506, 2025.
.. [3] D'Oosterlinck et al. "Anchored Preference Optimization and Contrastive Revisions". TACL 2025.
.. [4] Rafailov et al. "Direct Preference Optimization". NeurIPS 2023.
"""

from __future__ import annotations

import copy
import numbers
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import context_length
from trustlab.errors import DataError, ModelError, ParameterError
from trustlab.explain._neologism_checks import embedding_layer, export_model, texts
from trustlab.explain._neologism_task import (
    length_prompt,
    length_task_corpus,
    length_task_model,
    length_task_pairs,
    length_task_tokenizer,
    train_length_task_model,
)

__all__ = [
    "LOSSES",
    "NeologismLearner",
    "length_prompt",
    "length_task_corpus",
    "length_task_model",
    "length_task_pairs",
    "length_task_tokenizer",
    "preference_loss",
    "train_length_task_model",
]

LOSSES = ("apo-up", "dpo", "nll")


@validate_params(
    {"beta": [Interval(numbers.Real, 0, None, closed="neither")], "loss": [Options(set(LOSSES))]}
)
def preference_loss(
    logp_chosen: torch.Tensor,
    logp_rejected: torch.Tensor,
    ref_chosen: torch.Tensor,
    ref_rejected: torch.Tensor,
    *,
    beta: float = 0.1,
    loss: str = "apo-up",
) -> torch.Tensor:
    """The mean neologism-training loss over a batch of preference pairs.

    Parameters
    ----------
    logp_chosen, logp_rejected : Tensor of shape (n,)
        ``log p_θ(y_c|x)`` and ``log p_θ(y_r|x)`` with the current embedding.
    ref_chosen, ref_rejected : Tensor of shape (n,)
        The same under the reference ``p_θ0`` (the initial embedding); constants.
    beta : float, default=0.1
        Inverse temperature of the implicit reward.
    loss : {"apo-up", "dpo", "nll"}, default="apo-up"
        ``"apo-up"``: the paper's objective (DPO term plus ``-log σ(β log p_θ(y_c)/p_θ0(y_c))``);
        ``"dpo"``: the first term alone; ``"nll"``: ``-log p_θ(y_c|x)``.

    Returns
    -------
    Tensor
        A scalar.

    Examples
    --------
    >>> z = torch.zeros(3)
    >>> round(float(preference_loss(z, z, z, z)), 4)  # 2 log 2 at the reference
    1.3863
    """
    if loss == "nll":
        return -logp_chosen.mean()
    margin = (logp_chosen - logp_rejected) - (ref_chosen - ref_rejected)
    value = -torch.nn.functional.logsigmoid(beta * margin)
    if loss == "apo-up":
        value = value - torch.nn.functional.logsigmoid(beta * (logp_chosen - ref_chosen))
    return value.mean()


class NeologismLearner(ParamsValidationMixin, BaseEstimator):
    """Learn the input embedding of a new word from preference data, the model frozen.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        Any causal LM with input embeddings. Never modified: its weights are frozen during
        ``fit`` and bitwise the same after.
    tokenizer : transformers tokenizer
        The model's tokenizer; the learner adds ``token`` to a copy (``tokenizer_``).
    token : str, default="<neo>"
        The new word; must not already be in the vocabulary.
    init : str or None, default=None
        An existing single-token word whose embedding starts ``E_w`` (the follow-up paper's
        semantically neutral word); ``None``: a Gaussian draw with the vocabulary embeddings'
        per-dimension mean and standard deviation (from ``random_state``).
    loss : {"apo-up", "dpo", "nll"}, default="apo-up"
        See :func:`preference_loss`.
    beta : float, default=0.1
        See :func:`preference_loss`.
    lr : float, default=1e-2
        Adam's learning rate on ``E_w``.
    n_epochs : int, default=20
        Passes over the preference pairs.
    batch_size : int, default=8
        Pairs per step.
    append_eos : bool, default=True
        Responses end with the tokenizer's end-of-sequence token (so the word can learn when
        to stop); ignored when the tokenizer has none.
    random_state : int, default=0
        Seeds the initial draw and the batch order.

    Attributes
    ----------
    embedding_ : ndarray of shape (d,)
        The learned embedding ``E_w``.
    init_embedding_ : ndarray of shape (d,)
        Its starting value (the reference model ``p_θ0``).
    tokenizer_ : tokenizer
        A copy of ``tokenizer`` with ``token`` added.
    token_id_ : int
        The word's id in ``tokenizer_`` (one past the model's vocabulary, never fed to it).
    loss_history_ : ndarray of shape (n_epochs,)
        Mean loss per epoch.

    References
    ----------
    Hewitt, Geirhos, Kim. "Position: We Can't Understand AI Using our Existing Vocabulary".
    ICML 2025. Hewitt, Tafjord, Geirhos, Kim. "Neologism Learning for Controllability and
    Self-Verbalization". arXiv:2510.08506, 2025.

    Examples
    --------
    >>> model, tok = length_task_model()
    >>> p, c, r, _ = length_task_pairs(16, "<len>")
    >>> learner = NeologismLearner(model, tok, token="<len>", n_epochs=2).fit(p, c, r)
    >>> learner.embedding_.shape
    (32,)
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "model": [object],
        "tokenizer": [object],
        "token": [str],
        "init": [str, None],
        "loss": [Options(set(LOSSES))],
        "beta": [Interval(numbers.Real, 0, None, closed="neither")],
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "n_epochs": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "append_eos": ["boolean"],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        token: str = "<neo>",
        *,
        init: str | None = None,
        loss: str = "apo-up",
        beta: float = 0.1,
        lr: float = 1e-2,
        n_epochs: int = 20,
        batch_size: int = 8,
        append_eos: bool = True,
        random_state: int = 0,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.token = token
        self.init = init
        self.loss = loss
        self.beta = beta
        self.lr = lr
        self.n_epochs = n_epochs
        self.batch_size = batch_size
        self.append_eos = append_eos
        self.random_state = random_state

    def _setup(self) -> None:
        self._validate_params()
        layer = embedding_layer(self.model)
        tok = self.tokenizer
        if not callable(tok) or not hasattr(tok, "get_vocab") or not hasattr(tok, "add_tokens"):
            raise ModelError(
                f"tokenizer must be a transformers tokenizer, got {type(tok).__name__}.", argument="tokenizer"
            )
        if not self.token.strip() or any(ch.isspace() for ch in self.token):
            raise ParameterError(
                f"token must be one word without spaces, got {self.token!r}.", argument="token"
            )
        if self.token in tok.get_vocab():
            raise ParameterError(
                f"token {self.token!r} is already in the vocabulary: a neologism must be a new word; "
                "choose an unused string such as '<neo>'.",
                argument="token",
            )
        self.tokenizer_ = copy.deepcopy(tok)
        self.tokenizer_.add_tokens([self.token])
        self.token_id_ = int(self.tokenizer_.convert_tokens_to_ids(self.token))
        self._vocab = int(layer.weight.shape[0])
        self._layer = layer

    def _encode(self, text: str, *, prompt: bool) -> list[int]:
        ids = list(self.tokenizer_(text, add_special_tokens=prompt)["input_ids"])
        if not prompt and self.append_eos and self.tokenizer_.eos_token_id is not None:
            ids.append(int(self.tokenizer_.eos_token_id))
        return ids

    def _prompts(self, prompts: Any, name: str = "prompts", *, need_token: bool = True) -> list[list[int]]:
        out = []
        for i, text in enumerate(texts(prompts, name)):
            ids = self._encode(text, prompt=True)
            if need_token and self.token_id_ not in ids:
                raise DataError(
                    f"{name}[{i}] does not use the neologism {self.token!r}: every training prompt "
                    "must contain it.",
                    argument=name,
                )
            out.append(ids)
        return out

    def _batch(self, prompt_ids: list[list[int]], responses: list[list[int]]) -> tuple[torch.Tensor, ...]:
        """Right-padded ids, the neologism's positions and the response-token mask."""
        seqs = [p + r for p, r in zip(prompt_ids, responses, strict=True)]
        limit = self._context()
        longest = max(len(s) for s in seqs)
        if limit is not None and longest > int(limit):
            raise DataError(
                f"a prompt and response hold {longest} tokens, more than the model's context ({limit}); "
                "shorten them.",
                argument="chosen",
            )
        ids = torch.zeros((len(seqs), longest), dtype=torch.long)
        resp = torch.zeros((len(seqs), longest), dtype=torch.bool)
        for i, (s, p) in enumerate(zip(seqs, prompt_ids, strict=True)):
            ids[i, : len(s)] = torch.tensor(s)
            resp[i, len(p) : len(s)] = True
        neo = ids == self.token_id_
        if int(ids.max()) >= self._vocab and bool((ids[~neo] >= self._vocab).any()):
            raise DataError(
                f"the tokenizer produced ids outside the model's vocabulary of {self._vocab}: tokenizer "
                "does not match the model; pass the tokenizer the model was trained with.",
                argument="tokenizer",
            )
        return ids.masked_fill(neo, 0), neo, resp

    def _context(self) -> int | None:
        return context_length(self.model)

    def _embeds(self, ids: torch.Tensor, neo: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
        base = self._layer(ids)
        return torch.where(neo[..., None], vec.to(base.dtype), base)

    def _logp(
        self, ids: torch.Tensor, neo: torch.Tensor, resp: torch.Tensor, vec: torch.Tensor
    ) -> torch.Tensor:
        logits = self.model(inputs_embeds=self._embeds(ids, neo, vec), use_cache=False).logits[:, :-1].float()
        logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
        return (logp * resp[:, 1:]).sum(dim=1)

    def _initial(self, rng: np.random.Generator) -> torch.Tensor:
        weight = self._layer.weight.detach().float()
        if self.init is None:
            mean, std = weight.mean(0).numpy(), weight.std(0).numpy()
            return torch.as_tensor(mean + std * rng.standard_normal(weight.shape[1]), dtype=torch.float32)
        ids = self.tokenizer(self.init, add_special_tokens=False)["input_ids"]
        if len(ids) != 1 or not 0 <= int(ids[0]) < self._vocab:
            raise ParameterError(
                f"init {self.init!r} is {len(ids)} tokens, not one word of the vocabulary; give a single "
                "existing token or None.",
                argument="init",
            )
        return weight[int(ids[0])].clone()

    def fit(self, prompts: Sequence[str], chosen: Sequence[str], rejected: Sequence[str]) -> NeologismLearner:
        """Train ``E_w`` on preference triples whose prompts use ``token``.

        Parameters
        ----------
        prompts : list of str
            Instructions containing the new word.
        chosen, rejected : list of str
            Per prompt, a response that shows the concept and one that does not.

        Returns
        -------
        NeologismLearner
            ``self``, fitted.
        """
        self._setup()
        p_ids = self._prompts(prompts)
        c_txt, r_txt = texts(chosen, "chosen"), texts(rejected, "rejected")
        if not len(p_ids) == len(c_txt) == len(r_txt):
            raise DataError(
                f"prompts, chosen and rejected must have the same length, got {len(p_ids)}, {len(c_txt)} "
                f"and {len(r_txt)}.",
                argument="chosen",
            )
        n = len(p_ids)
        ids, neo, resp = self._batch(p_ids + p_ids, [self._encode(t, prompt=False) for t in c_txt + r_txt])
        rng = np.random.default_rng(self.random_state)
        init = self._initial(rng)
        vec = torch.nn.Parameter(init.clone())
        params = list(self.model.parameters())
        flags = [p.requires_grad for p in params]
        was_training = self.model.training
        self.model.eval()
        history = np.empty(self.n_epochs)
        try:
            for p in params:
                p.requires_grad_(False)
            with torch.no_grad():
                ref = torch.cat(
                    [
                        self._logp(ids[i : i + 64], neo[i : i + 64], resp[i : i + 64], init)
                        for i in range(0, 2 * n, 64)
                    ]
                )
            opt = torch.optim.Adam([vec], lr=self.lr)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.random_state)
                for epoch in range(self.n_epochs):
                    order = rng.permutation(n)
                    total = 0.0
                    for start in range(0, n, self.batch_size):
                        b = torch.as_tensor(order[start : start + self.batch_size])
                        rows = torch.cat([b, b + n])
                        logp = self._logp(ids[rows], neo[rows], resp[rows], vec)
                        k = len(b)
                        value = preference_loss(
                            logp[:k], logp[k:], ref[b], ref[b + n], beta=self.beta, loss=self.loss
                        )
                        if not torch.isfinite(value):
                            raise DataError(
                                f"the loss became {float(value)} in epoch {epoch}: lower lr.", argument="lr"
                            )
                        opt.zero_grad()
                        value.backward()
                        opt.step()
                        total += float(value.detach()) * k
                    history[epoch] = total / n
        finally:
            for p, flag in zip(params, flags, strict=True):
                p.requires_grad_(flag)
            self.model.train(was_training)
        self.embedding_ = vec.detach().numpy().copy()
        self.init_embedding_ = init.numpy().copy()
        self.loss_history_ = history
        return self

    def _vector(self, embedding: Any) -> torch.Tensor:
        check_is_fitted(self, "embedding_")
        vec = self.embedding_ if embedding is None else np.asarray(embedding, dtype=np.float32)
        if vec.shape != self.embedding_.shape or not np.all(np.isfinite(vec)):
            raise DataError(
                f"embedding must be a finite vector of shape {self.embedding_.shape}, got shape "
                f"{np.shape(vec)}.",
                argument="embedding",
            )
        return torch.as_tensor(vec, dtype=torch.float32)

    @torch.no_grad()
    def log_prob(
        self, prompts: Sequence[str], responses: Sequence[str], *, embedding: Any = None
    ) -> np.ndarray:
        """``log p(response | prompt)`` with the learned word (prompts may or may not use it).

        Parameters
        ----------
        prompts, responses : list of str
            Pairs (a response gets the end-of-sequence token when ``append_eos``).
        embedding : array of shape (d,), optional
            A vector to use for the word instead of ``embedding_`` (e.g. a random control).

        Returns
        -------
        ndarray of shape (n,)
            Summed log-probabilities of the response tokens.
        """
        vec = self._vector(embedding)
        p_ids = self._prompts(prompts, need_token=False)
        r_txt = texts(responses, "responses")
        if len(p_ids) != len(r_txt):
            raise DataError("prompts and responses must have the same length.", argument="responses")
        ids, neo, resp = self._batch(p_ids, [self._encode(t, prompt=False) for t in r_txt])
        return self._logp(ids, neo, resp, vec).numpy().astype(float)

    @validate_params(
        {
            "n_samples": [Interval(numbers.Integral, 1, None, closed="left")],
            "max_new_tokens": [Interval(numbers.Integral, 1, None, closed="left")],
            "temperature": [Interval(numbers.Real, 0, None, closed="neither")],
            "random_state": [Interval(numbers.Integral, 0, None, closed="left")],
        }
    )
    @torch.no_grad()
    def generate(
        self,
        prompts: Sequence[str],
        *,
        n_samples: int = 1,
        max_new_tokens: int = 32,
        temperature: float = 1.0,
        random_state: int = 0,
        embedding: Any = None,
    ) -> list[list[list[int]]]:
        """Sample responses with the learned word in place (stops at the end-of-sequence token).

        Parameters
        ----------
        prompts : list of str
            Prompts, with or without the word.
        n_samples : int, default=1
            Samples per prompt.
        max_new_tokens : int, default=32
            Cap on a response's length.
        temperature : float, default=1.0
            Softmax temperature.
        random_state : int, default=0
            Seeds the sampling.
        embedding : array of shape (d,), optional
            A vector to use for the word instead of ``embedding_``.

        Returns
        -------
        list (per prompt) of list (per sample) of list of int
            The generated token ids, without the end-of-sequence token.
        """
        vec = self._vector(embedding)
        eos = self.tokenizer_.eos_token_id
        gen = torch.Generator().manual_seed(int(random_state))
        was_training = self.model.training
        self.model.eval()
        encoded = self._prompts(prompts, need_token=False)
        limit = self._context()
        if limit is not None and max(map(len, encoded)) + max_new_tokens > limit:
            raise ParameterError(
                f"max_new_tokens={max_new_tokens} plus the longest prompt ({max(map(len, encoded))} tokens) "
                f"exceeds the model's context ({limit}); lower max_new_tokens.",
                argument="max_new_tokens",
            )
        out: list[list[list[int]]] = [[] for _ in encoded]
        groups: dict[int, list[int]] = {}
        for i, ids0 in enumerate(encoded):  # prompts of one length are sampled in one batch
            groups.setdefault(len(ids0), []).append(i)
        try:
            for members in groups.values():
                ids = torch.tensor([encoded[i] for i in members for _ in range(n_samples)])
                done = torch.zeros(len(ids), dtype=torch.bool)
                new: list[torch.Tensor] = []
                for _ in range(max_new_tokens):
                    neo = ids == self.token_id_
                    embeds = self._embeds(ids.masked_fill(neo, 0), neo, vec)
                    logits = self.model(inputs_embeds=embeds, use_cache=False).logits[:, -1].float()
                    probs = torch.softmax(logits / temperature, dim=-1)
                    nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]
                    nxt = torch.where(done, torch.full_like(nxt, -1), nxt)
                    new.append(nxt)
                    if eos is not None:
                        done |= nxt == eos
                    if bool(done.all()):
                        break
                    ids = torch.cat([ids, nxt.clamp(min=0)[:, None]], dim=1)
                table = torch.stack(new, dim=1).tolist()
                for j, i in enumerate(members):
                    rows = table[j * n_samples : (j + 1) * n_samples]
                    out[i] = [[t for t in row if t >= 0 and t != eos] for row in rows]
        finally:
            self.model.train(was_training)
        return out

    def export(self) -> tuple[Any, Any]:
        """A copy of the model with the word as a real vocabulary entry, and ``tokenizer_``.

        Returns
        -------
        model : transformers.PreTrainedModel
            A deep copy whose input embeddings have the learned row at ``token_id_`` (the
            output layer untied first; the word's output row is zero and listed in
            ``generation_config.suppress_tokens``); usable with ``generate`` and ``save_model``.
        tokenizer : tokenizer
            ``tokenizer_`` (the word added).
        """
        check_is_fitted(self, "embedding_")
        return export_model(self.model, self.token_id_, self.embedding_), self.tokenizer_

    @validate_params({"k": [Interval(numbers.Integral, 1, None, closed="left")]})
    def nearest_tokens(self, k: int = 5) -> pd.DataFrame:
        """The vocabulary words whose input embeddings are closest (cosine) to ``embedding_``.

        Parameters
        ----------
        k : int, default=5
            How many.

        Returns
        -------
        DataFrame
            Columns ``token`` and ``cosine``, most similar first.
        """
        vec = self._vector(None)
        weight = self._layer.weight.detach().float()
        cos = torch.nn.functional.cosine_similarity(weight, vec[None, :], dim=1).numpy()
        top = np.argsort(-cos, kind="stable")[: min(k, len(cos))]
        names = self.tokenizer_.convert_ids_to_tokens([int(i) for i in top])
        return pd.DataFrame({"token": names, "cosine": cos[top].astype(float)})
