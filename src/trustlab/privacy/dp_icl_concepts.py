"""A GINC-like task whose concepts share their most plausible tokens, and its tiny cached LM.

The setting in which Plausible Token Amplification (Yamasaki et al. 2025) should beat Tang et
al.'s baseline: every latent concept emits a few *shared* tokens (plausible under every
concept, so they say nothing about which concept it is) and a few *distinctive* tokens of its
own. A demonstration is ``DELIM t1 ... tT``, each token drawn independently from the concept's
emission distribution; after ``n`` demonstrations comes ``QUERY`` and the concept's answer
token, so in-context accuracy measures how well the demonstrations identify the concept (the
concept inference of Xie et al. 2022, the paper's Section 2.2). A small Llama trained on such
episodes (``n`` from 0 to 4) approximates the Bayesian predictive; it is trained once into the
lab's cache (``$TRUSTLAB_CACHE/lm`` or ``~/.cache/trustlab/lm``) under a digest of the recipe.

References
----------
Yamasaki, Niwa, Chijiwa, Fukami, Miura. "Plausible Token Amplification for Improving Accuracy
of Differentially Private In-Context Learning Based on Implicit Bayesian Inference". ICML 2025
(synthetic GINC experiments, Section 5 and Appendix F.3). Xie, Raghunathan, Liang, Ma. "An
Explanation of In-context Learning as Implicit Bayesian Inference". ICLR 2022.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import publish, spec_digest, staging_dir, trained_dir
from trustlab._validation import check_positive_int
from trustlab.errors import ParameterError

__all__ = ["SharedTokenConcepts", "concept_accuracy", "concept_model"]


@dataclass(frozen=True)
class SharedTokenConcepts:
    """Concepts that share plausible tokens (the layout of the synthetic DP-ICL task).

    Token ids: ``0 .. n_shared-1`` shared tokens; then ``n_distinct`` distinctive tokens per
    concept; then one answer token per concept; then ``PAD``, ``DELIM`` and ``QUERY``.

    Attributes
    ----------
    n_concepts : int, default 5
        Latent concepts (GINC has 5).
    n_shared : int, default 4
        Tokens emitted by every concept, each with probability ``shared_mass / n_shared``.
    n_distinct : int, default 2
        Tokens of each concept alone, each with probability ``(1 - shared_mass) / n_distinct``.
    shared_mass : float, default 0.6
        Probability of a shared token. At 0.6 a shared token (0.15) is almost as likely as a
        distinctive one (0.2) under the true concept, and far more likely under the prior.
    length : int, default 6
        Tokens per demonstration after ``DELIM`` (``T``).
    max_shots : int, default 4
        Most demonstrations before ``QUERY`` in the training episodes.

    Examples
    --------
    >>> task = SharedTokenConcepts()
    >>> task.vocab_size, task.emission().shape
    (22, (5, 14))
    """

    n_concepts: int = 5
    n_shared: int = 4
    n_distinct: int = 2
    shared_mass: float = 0.6
    length: int = 6
    max_shots: int = 4

    def __post_init__(self) -> None:
        for name in ("n_concepts", "n_shared", "n_distinct", "length", "max_shots"):
            check_positive_int(getattr(self, name), name)
        if self.n_concepts < 2:
            raise ParameterError("n_concepts must be at least 2.", argument="n_concepts")
        if not 0.0 <= float(self.shared_mass) < 1.0:
            raise ParameterError(
                f"shared_mass must lie in [0, 1), got {self.shared_mass!r}.", argument="shared_mass"
            )

    @property
    def n_content(self) -> int:
        """Number of content (shared + distinctive) tokens."""
        return self.n_shared + self.n_concepts * self.n_distinct

    @property
    def answers(self) -> np.ndarray:
        """The answer token of each concept."""
        return np.arange(self.n_concepts) + self.n_content

    @property
    def pad(self) -> int:
        """Padding token (never predicted)."""
        return self.n_content + self.n_concepts

    @property
    def delim(self) -> int:
        """Token that starts every demonstration (the label prompt of a synthetic one)."""
        return self.pad + 1

    @property
    def query(self) -> int:
        """Token after the demonstrations; the concept's answer follows it."""
        return self.pad + 2

    @property
    def vocab_size(self) -> int:
        """Number of token ids."""
        return self.pad + 3

    def emission(self) -> np.ndarray:
        """Each concept's distribution over the content tokens.

        Returns
        -------
        numpy.ndarray, shape ``(n_concepts, n_content)``
            Rows sum to 1.
        """
        e = np.zeros((self.n_concepts, self.n_content))
        e[:, : self.n_shared] = self.shared_mass / self.n_shared
        for c in range(self.n_concepts):
            lo = self.n_shared + c * self.n_distinct
            e[c, lo : lo + self.n_distinct] = (1.0 - self.shared_mass) / self.n_distinct
        return e

    def demonstrations(self, concept: int, n: int, rng: np.random.Generator) -> list[list[int]]:
        """``n`` demonstrations ``[DELIM, t1, ..., tT]`` of one concept.

        Parameters
        ----------
        concept : int
            The concept, in ``[0, n_concepts)``.
        n : int
            How many.
        rng : numpy.random.Generator
            Source of the tokens.

        Returns
        -------
        list of list of int
        """
        p = self.emission()[int(concept)]
        toks = rng.choice(self.n_content, size=(int(n), self.length), p=p)
        return [[self.delim, *map(int, row)] for row in toks]

    def episodes(self, n_sequences: int, seed: int = 0) -> Any:
        """Training episodes: ``n ~ U{0..max_shots}`` demonstrations, ``QUERY``, the answer, padding.

        The loss counts the demonstrations' tokens (so the LM learns the Bayesian predictive
        of the next token given the concept's evidence so far) and the answer.

        Parameters
        ----------
        n_sequences : int
            Number of episodes.
        seed : int, default 0
            Seeds the concepts, the shot counts and the tokens.

        Returns
        -------
        trustlab.lm.TokenData
            With the latent ``"concept"`` and ``"shots"`` of each episode.
        """
        from trustlab.lm.corpora import TokenData

        rng = np.random.default_rng(seed)
        n = check_positive_int(n_sequences, "n_sequences")
        width = self.max_shots * (self.length + 1) + 2
        tokens = np.full((n, width), self.pad, dtype=np.int64)
        mask = np.zeros((n, width), dtype=bool)
        concepts = rng.integers(0, self.n_concepts, n)
        shots = rng.integers(0, self.max_shots + 1, n)
        for r in range(n):
            seq = [t for d in self.demonstrations(concepts[r], shots[r], rng) for t in d]
            seq += [self.query, int(self.answers[concepts[r]])]
            tokens[r, : len(seq)] = seq
            # where the next demonstration or the query starts is not learnt (random shot count)
            counted = ~np.isin(seq, [self.delim, self.query])
            mask[r, : len(seq)] = counted
        return TokenData(tokens, mask, self.vocab_size, {"concept": concepts, "shots": shots})


def concept_model(task: SharedTokenConcepts | None = None, *, cache_dir: str | Path | None = None) -> Any:
    """The lab's Llama for :class:`SharedTokenConcepts`, trained on first use, then cached.

    2 blocks of width 48, 4 heads; 400 AdamW steps of 64 episodes (lr 3e-3, 20 warm-up steps)
    on 20,000 episodes (seed 0). The folder ``{cache}/dp-icl-concepts-{digest}`` is named by a
    digest of the task and both configs, so a changed recipe retrains.

    Parameters
    ----------
    task : SharedTokenConcepts, optional
        Default: ``SharedTokenConcepts()``.
    cache_dir : str or Path, optional
        Where the checkpoint is kept (default: the lab's ``lm`` cache).

    Returns
    -------
    transformers.PreTrainedModel
        In eval mode.

    Examples
    --------
    >>> model = concept_model()  # doctest: +SKIP
    >>> model.config.vocab_size  # doctest: +SKIP
    22
    """
    from trustlab.lm import ModelConfig, TrainConfig, build_model, load_model, save_model, train_model

    task = task or SharedTokenConcepts()
    if not isinstance(task, SharedTokenConcepts):
        raise ParameterError(
            f"task must be a SharedTokenConcepts, got {type(task).__name__}.", argument="task"
        )
    width = task.max_shots * (task.length + 1) + 2
    cfg = ModelConfig("llama", vocab_size=task.vocab_size, d_model=48, n_layers=2, n_heads=4, max_len=width)
    tcfg = TrainConfig(steps=400, batch_size=64, lr=3e-3, warmup=20, seed=0)
    spec = {"task": asdict(task), "model": cfg.to_dict(), "train": tcfg.to_dict(), "n_sequences": 20000}
    path = trained_dir(cache_dir, "lm", f"dp-icl-concepts-{spec_digest(spec)}")
    if (path / "done").is_file():
        return load_model(path).eval()
    model = build_model(cfg, seed=0)
    train_model(model, task.episodes(20000, seed=0), tcfg)
    tmp = staging_dir(path)
    save_model(model, tmp)
    (tmp / "recipe.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    (tmp / "done").write_text("ok\n", encoding="utf-8")
    publish(tmp, path)
    return model.eval()


def concept_accuracy(
    model: Any, task: SharedTokenConcepts, demonstrations: Sequence[Sequence[Sequence[int]]], concepts: Any
) -> np.ndarray:
    """Whether the LM names each prompt's concept after its demonstrations (argmax over answers).

    Parameters
    ----------
    model : transformers causal LM
        From :func:`concept_model`.
    task : SharedTokenConcepts
        The task.
    demonstrations : sequence of (sequence of token-id lists)
        One prompt's demonstrations per entry (may be empty: zero-shot).
    concepts : array-like of int
        The true concept of each prompt.

    Returns
    -------
    numpy.ndarray of bool
        One entry per prompt.

    Examples
    --------
    >>> task = SharedTokenConcepts()
    >>> demos = task.demonstrations(3, 4, np.random.default_rng(0))
    >>> concept_accuracy(concept_model(task), task, [demos, []], [3, 3])  # doctest: +SKIP
    array([ True, False])
    """
    import torch

    truth = np.asarray(concepts, dtype=np.int64).ravel()
    if len(demonstrations) != truth.size:
        raise ParameterError(
            f"demonstrations holds {len(demonstrations)} prompts but concepts {truth.size}.",
            argument="concepts",
        )
    prompts = [[t for d in demos for t in d] + [task.query] for demos in demonstrations]
    longest = max(map(len, prompts))
    ids = torch.full((len(prompts), longest), task.pad, dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, : len(p)] = torch.tensor(p)
    last = torch.tensor([len(p) - 1 for p in prompts])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[torch.arange(len(prompts)), last]
    pred = logits[:, torch.as_tensor(task.answers)].argmax(-1).numpy()
    return np.asarray(pred == truth)
