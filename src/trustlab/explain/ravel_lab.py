"""A planted-knowledge substrate for SAEBench's RAVEL metric: entities with known attributes.

RAVEL (Huang et al., 2024) asks whether an interpretability method can change one attribute
of an entity ("Paris is in France") inside a language model without touching another ("people
in Paris speak French"). SAEBench (Karvonen et al., 2025) scores sparse autoencoders on it
with Gemma-2-2B and the RAVEL city / Nobel-laureate data. No such model can be downloaded
here, so :func:`make_entity_corpus` plants the knowledge: random "city" tokens with three
categorical attributes, correlated as in RAVEL's cities, queried by prompt templates; and
:func:`load_ravel_lab` trains a tiny causal LM (``trustlab.lm``) on it once into the cache.

Generative process (``make_entity_corpus``, all draws from one NumPy generator)
------------------------------------------------------------------------------
- ``n_entities`` entity tokens; ``country`` is balanced: entity ``e`` gets country
  ``perm[e] % n_countries`` for a random permutation ``perm``.
- ``continent = country // 2`` (each continent holds two countries): determined by the
  country, as in RAVEL.
- ``language``: with probability ``p_official`` the country's official language
  ``country % n_languages``, otherwise uniform over the other languages: correlated with the
  country but not determined by it.
- Templates: ``BOS, s1, s2, s3, s4, ->`` where two of the four slots hold the entity and one of
  the attribute's two keyword synonyms (either order), the other two hold filler tokens.
  ``n_templates`` distinct templates per attribute; the last ``n_heldout`` of each attribute's
  are held out of training. A sequence is a template filled with an entity plus the answer
  token (the attribute's value), the loss counting only the answer.

References
----------
.. [1] Karvonen, Rager, Lin, Tigges, Bloom, Chanin, Lau, Farrell, McDougall, Ayonrinde, Till,
   Wearden, Conmy, Marks, Nanda. "SAEBench: A Comprehensive Benchmark for Sparse Autoencoders
   in Language Model Interpretability". ICML 2025, section 3.2.4 and appendix D (RAVEL).
.. [2] Huang, Wu, Potts, Geva, Geiger. "RAVEL: Evaluating Interpretability Methods on
   Disentangling Language Model Representations". ACL 2024.
"""

from __future__ import annotations

import json
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trustlab._cache import publish, spec_digest, staging_dir, trained_dir
from trustlab._param_validation import Interval, validate_params
from trustlab.errors import ParameterError
from trustlab.explain._sae_common import random_rotation, signed_codes

__all__ = ["AttributeDictionary", "EntityCorpus", "load_ravel_lab", "make_entity_corpus"]

ATTRIBUTES = ("country", "continent", "language")
_LEN = 6  # BOS + four slots + arrow; the answer is token 6


@dataclass(frozen=True)
class EntityCorpus:
    """Prompts about planted entity attributes (:func:`make_entity_corpus`).

    Attributes
    ----------
    prompts : ndarray of int64, shape (n_prompts, 6)
        Every template of every attribute filled with every entity (without the answer).
    answer : ndarray of int64, shape (n_prompts,)
        The answer token (the entity's value of the queried attribute).
    entity : ndarray of int, shape (n_prompts,)
        Entity index (``0 .. n_entities - 1``); its token is ``entity_tokens[entity]``.
    entity_pos : ndarray of int, shape (n_prompts,)
        Position of the entity token in the prompt (RAVEL intervenes there).
    attribute : ndarray of str, shape (n_prompts,)
        The queried attribute (``"country"``, ``"continent"`` or ``"language"``).
    template : ndarray of int, shape (n_prompts,)
        Template index within the attribute.
    heldout : ndarray of bool, shape (n_prompts,)
        Whether the template is held out of training.
    values : dict of str to ndarray
        Each attribute's value index per entity, shape ``(n_entities,)``.
    entity_tokens : ndarray of int
        Token id of each entity.
    value_tokens : dict of str to ndarray
        Token id of each value of each attribute.
    vocab_size : int
        Number of token ids.

    See Also
    --------
    make_entity_corpus
    """

    prompts: np.ndarray
    answer: np.ndarray
    entity: np.ndarray
    entity_pos: np.ndarray
    attribute: np.ndarray
    template: np.ndarray
    heldout: np.ndarray
    values: dict[str, np.ndarray]
    entity_tokens: np.ndarray
    value_tokens: dict[str, np.ndarray]
    vocab_size: int

    def training_data(self) -> Any:
        """The training templates' prompts with their answers, as a ``trustlab.lm.TokenData``.

        Returns
        -------
        trustlab.lm.TokenData
            Sequences of length 7 (prompt + answer), loss on the answer only.
        """
        from trustlab.lm.corpora import TokenData

        keep = ~self.heldout
        tokens = np.concatenate([self.prompts[keep], self.answer[keep, None]], axis=1)
        mask = np.zeros(tokens.shape, dtype=bool)
        mask[:, -1] = True
        return TokenData(tokens.astype(np.int64), mask, self.vocab_size, {"entity": self.entity[keep]})


@validate_params(
    {
        "n_entities": [Interval(numbers.Integral, 8, None, closed="left")],
        "n_countries": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_languages": [Interval(numbers.Integral, 2, None, closed="left")],
        "p_official": [Interval(numbers.Real, 0, 1, closed="both")],
        "n_templates": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_heldout": [Interval(numbers.Integral, 0, None, closed="left")],
        "n_fillers": [Interval(numbers.Integral, 2, None, closed="left")],
        "seed": [Interval(numbers.Integral, 0, None, closed="left")],
    }
)
def make_entity_corpus(
    n_entities: int = 64,
    *,
    n_countries: int = 8,
    n_languages: int = 6,
    p_official: float = 0.6,
    n_templates: int = 16,
    n_heldout: int = 4,
    n_fillers: int = 8,
    seed: int = 0,
) -> EntityCorpus:
    """Entities with country, continent and language, and prompt templates querying them.

    The generative process is in the module docstring; RAVEL's city attributes
    (SAEBench's ``"city": ["Country", "Continent", "Language"]``) with their dependence:
    continent determined by country, language correlated with it.

    Parameters
    ----------
    n_entities : int, default=64
        Entity ("city") tokens.
    n_countries : int, default=8
        Countries (even: two per continent).
    n_languages : int, default=6
        Languages.
    p_official : float, default=0.6
        Probability that an entity's language is its country's official one.
    n_templates : int, default=16
        Templates per attribute (at most 48, the distinct slot layouts and keywords).
    n_heldout : int, default=4
        Templates per attribute held out of training (fewer than ``n_templates``).
    n_fillers : int, default=8
        Filler tokens.
    seed : int, default=0
        Seeds every draw.

    Returns
    -------
    EntityCorpus

    Raises
    ------
    ParameterError
        An odd ``n_countries``, ``n_templates`` above 48 or ``n_heldout >= n_templates``.

    Examples
    --------
    >>> c = make_entity_corpus(16, seed=0)
    >>> c.prompts.shape, c.vocab_size
    ((768, 6), 50)
    >>> bool((c.values["continent"] == c.values["country"] // 2).all())
    True
    """
    if n_countries % 2:
        raise ParameterError(
            f"n_countries must be even (two countries per continent), got {n_countries}.",
            argument="n_countries",
        )
    if n_templates > 48 or n_heldout >= n_templates:
        raise ParameterError(
            f"n_templates must be at most 48 and n_heldout below it, got {n_templates} and {n_heldout}.",
            argument="n_templates",
        )
    rng = np.random.default_rng(seed)
    country = rng.permutation(n_entities) % n_countries
    official = country % n_languages
    other = (official + rng.integers(1, n_languages, n_entities)) % n_languages
    language = np.where(rng.random(n_entities) < p_official, official, other)
    values = {"country": country, "continent": country // 2, "language": language}
    sizes = {"country": n_countries, "continent": n_countries // 2, "language": n_languages}
    # token ids: 0 BOS, 1 arrow, fillers, keywords (2 per attribute), values, entities
    nxt = 2
    fillers = np.arange(nxt, nxt + n_fillers)
    nxt += n_fillers
    keywords = {a: np.arange(nxt + 2 * i, nxt + 2 * i + 2) for i, a in enumerate(ATTRIBUTES)}
    nxt += 2 * len(ATTRIBUTES)
    value_tokens = {}
    for a in ATTRIBUTES:
        value_tokens[a] = np.arange(nxt, nxt + sizes[a])
        nxt += sizes[a]
    entity_tokens = np.arange(nxt, nxt + n_entities)
    vocab = int(nxt + n_entities)
    layouts = [(e, k) for e in range(4) for k in range(4) if e != k]  # 12 ordered slot pairs
    rows: list[tuple[np.ndarray, int, str, int]] = []
    for a in ATTRIBUTES:
        combos = rng.permutation(len(layouts) * 2 * 2)[:n_templates]  # layout x keyword x fillers
        for t, code in enumerate(combos):
            e_slot, k_slot = layouts[code % 12]
            kw = keywords[a][(code // 12) % 2]
            fill = rng.choice(fillers, 2, replace=True)
            slots = np.zeros(4, dtype=np.int64)
            free = [s for s in range(4) if s not in (e_slot, k_slot)]
            slots[free] = fill
            slots[k_slot] = kw
            rows.append((slots, 1 + e_slot, a, t))
    prompts, answer, entity, pos, attr, tmpl = [], [], [], [], [], []
    for slots, e_pos, a, t in rows:
        for e in range(n_entities):
            p = np.concatenate([[0], slots, [1]])
            p[e_pos] = entity_tokens[e]
            prompts.append(p)
            answer.append(value_tokens[a][values[a][e]])
            entity.append(e)
            pos.append(e_pos)
            attr.append(a)
            tmpl.append(t)
    tmpl_arr = np.asarray(tmpl)
    return EntityCorpus(
        prompts=np.asarray(prompts, dtype=np.int64),
        answer=np.asarray(answer, dtype=np.int64),
        entity=np.asarray(entity),
        entity_pos=np.asarray(pos),
        attribute=np.asarray(attr),
        template=tmpl_arr,
        heldout=tmpl_arr >= n_templates - n_heldout,
        values=values,
        entity_tokens=entity_tokens,
        value_tokens=value_tokens,
        vocab_size=vocab,
    )


_RAVEL_LAB: dict[str, Any] = {
    "data": {"n_entities": 64, "seed": 0},
    "model": {"arch": "llama", "d_model": 64, "n_layers": 2, "n_heads": 4, "max_len": 8, "seed": 0},
    "train": {"steps": 600, "batch_size": 64, "lr": 1e-2, "warmup": 30, "seed": 0},
}


def load_ravel_lab(*, cache_dir: str | Path | None = None) -> tuple[Any, EntityCorpus]:
    """The RAVEL substrate: a 2-block width-64 Llama that knows the planted attributes.

    Trained once on :func:`make_entity_corpus` (64 entities, 12 training templates per
    attribute) into the cache, on one torch thread, then loaded from there.

    Parameters
    ----------
    cache_dir : str or Path, optional
        Where the checkpoint lives (default ``$TRUSTLAB_CACHE/lm`` or ``~/.cache/trustlab/lm``).

    Returns
    -------
    model : transformers.PreTrainedModel
        In eval mode.
    corpus : EntityCorpus
        The corpus it was trained on (held-out templates included).

    Examples
    --------
    >>> model, corpus = load_ravel_lab()  # trained on first use  # doctest: +SKIP
    """
    from trustlab._threads import one_thread
    from trustlab.lm.models import ModelConfig, build_model, load_model, save_model
    from trustlab.lm.training import TrainConfig, train_model

    corpus = make_entity_corpus(**_RAVEL_LAB["data"])
    path = trained_dir(cache_dir, "lm", f"ravel-{spec_digest(_RAVEL_LAB)}")
    if (path / "done").is_file():
        return load_model(path).eval(), corpus
    m = dict(_RAVEL_LAB["model"])
    seed, arch = m.pop("seed"), m.pop("arch")
    with one_thread():
        model = build_model(ModelConfig(arch, vocab_size=corpus.vocab_size, **m), seed=seed)
        train_model(model, corpus.training_data(), TrainConfig(**_RAVEL_LAB["train"]))
    tmp = staging_dir(path)
    save_model(model, tmp)
    (tmp / "recipe.json").write_text(json.dumps(_RAVEL_LAB, indent=1))
    (tmp / "done").write_text("ok\n")
    publish(tmp, path)
    return model.eval(), corpus


class AttributeDictionary:
    """A reference dictionary aligned with the planted attributes, for RAVEL at the embedding.

    At ``blocks.0.resid_pre`` the entity token's vector is its embedding ``e``. Least squares
    fits ``e - mu ~ C[country] + L[language]`` over the entities; the dictionary's first
    latents are the one-hot country and language codes (decoder rows ``C`` and ``L``), the
    rest code the remainder ``r = e - mu - C[country] - L[language]`` along a random
    orthonormal basis as ``ReLU(Q^T r)`` and ``ReLU(-Q^T r)``. Decoding is exact. The encoder
    reads the attributes of the nearest entity embedding, so it is meant for the entity
    tokens' embeddings only: the disentangled upper reference for :func:`~trustlab.explain.sae_ravel.ravel`.
    Continent is not a separate latent (the planted continent is a function of the country).

    Parameters
    ----------
    model : transformers.PreTrainedModel
        The lab model (:func:`load_ravel_lab`).
    corpus : EntityCorpus
        Its corpus.
    random_state : int, default=0
        Seeds the basis of the remainder.

    Attributes
    ----------
    W_dec_ : ndarray of shape (n_countries + n_languages + 2 d, d)
    b_dec_ : ndarray of shape (d,)
    r2_ : float
        Share of the entity embeddings' variance the attribute codes explain.

    Examples
    --------
    >>> from trustlab.lm import ModelConfig, build_model
    >>> c = make_entity_corpus(16)
    >>> m = build_model(ModelConfig("gpt2", vocab_size=c.vocab_size, d_model=16, n_layers=1, n_heads=2))
    >>> ref = AttributeDictionary(m, c)
    >>> E = m.get_input_embeddings().weight.detach().double().numpy()[c.entity_tokens]
    >>> bool(np.allclose(ref.transform(E) @ ref.W_dec_ + ref.b_dec_, E))
    True
    """

    def __init__(self, model: Any, corpus: EntityCorpus, random_state: int = 0) -> None:
        emb = model.get_input_embeddings().weight.detach().double().cpu().numpy()[corpus.entity_tokens]
        self._emb, self.b_dec_ = emb, emb.mean(0)
        n_c, n_l = corpus.value_tokens["country"].size, corpus.value_tokens["language"].size
        self._codes = np.concatenate(
            [np.eye(n_c)[corpus.values["country"]], np.eye(n_l)[corpus.values["language"]]], 1
        )
        coef = np.linalg.lstsq(self._codes, emb - self.b_dec_, rcond=None)[0]
        resid = emb - self.b_dec_ - self._codes @ coef
        self.r2_ = float(1 - (resid**2).sum() / ((emb - self.b_dec_) ** 2).sum())
        d = emb.shape[1]
        self._q = random_rotation(d, random_state)
        self.W_dec_ = np.concatenate([coef, self._q.T, -self._q.T])

    def transform(self, X: Any) -> np.ndarray:
        """Latents of entity embeddings.

        Parameters
        ----------
        X : array-like of shape (n_samples, d)

        Returns
        -------
        ndarray of shape (n_samples, n_latents)
        """
        X = np.asarray(X, dtype=float)
        nearest = ((X[:, None] - self._emb[None]) ** 2).sum(-1).argmin(1)
        codes = self._codes[nearest]
        r = (X - self.b_dec_ - codes @ self.W_dec_[: codes.shape[1]]) @ self._q
        return np.concatenate([codes, signed_codes(r)], 1)
