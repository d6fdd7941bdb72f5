"""trustlab.lm.corpora: the synthetic generators obey their definitions; tokenizers; the English corpus."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trustlab.errors import DataError, ParameterError
from trustlab.lm import (
    encode_texts,
    english_corpus,
    incontext_tasks,
    lcg_parameters,
    lcg_sequences,
    lcg_split,
    number_tokenizer,
    sorting_task,
    train_tokenizer,
)


@pytest.mark.parametrize("m", [8, 12, 64, 97])
def test_lcg_parameters_are_exactly_the_full_period_pairs(m):
    pairs = {tuple(p) for p in lcg_parameters(m).tolist()}
    brute = set()
    for a in range(1, m):
        for c in range(1, m):
            x, seen = 0, set()
            for _ in range(m):
                seen.add(x)
                x = (a * x + c) % m
            if len(seen) == m:
                brute.add((a, c))
    assert pairs == brute


def test_lcg_sequences_follow_the_recurrence_and_split_is_disjoint():
    train, test = lcg_split(64, 0.25, seed=0)
    assert len(train) + len(test) == len(lcg_parameters(64))
    assert not {tuple(p) for p in train.tolist()} & {tuple(p) for p in test.tolist()}
    d = lcg_sequences(test, 64, 20, n_per_param=3, seed=5)
    a, c, x = d.latent["a"][:, None], d.latent["c"][:, None], d.tokens
    assert np.array_equal((a * x[:, :-1] + c) % 64, x[:, 1:])
    assert d.tokens.shape == (3 * len(test), 20) and not d.loss_mask[:, 0].any() and d.loss_mask[:, 1:].all()
    assert np.array_equal(lcg_sequences(test, 64, 20, n_per_param=3, seed=5).tokens, d.tokens)


def test_incontext_tasks_latent_task_determines_every_pair():
    d = incontext_tasks(500, 6, 5, n_values=11, seed=1)
    x, y = d.tokens[:, 0::2], d.tokens[:, 1::2]
    assert np.array_equal((d.latent["k"][:, None] * x + d.latent["b"][:, None]) % 11, y)
    assert set(np.unique(d.latent["task"])) == set(range(5))
    assert all(math.gcd(int(k), 11) == 1 for k in d.latent["k"])
    # a task id always means the same map
    for t in range(5):
        sel = d.latent["task"] == t
        assert len(set(zip(d.latent["k"][sel], d.latent["b"][sel], strict=True))) == 1
    with pytest.raises(ParameterError, match="n_tasks"):
        incontext_tasks(5, 2, 1000, n_values=5)


def test_sorting_task_second_half_is_sorted_first_half():
    d = sorting_task(50, 5, n_values=9, seed=3)
    assert (d.tokens[:, 5] == 9).all() and d.vocab_size == 10
    assert np.array_equal(np.sort(d.tokens[:, :5], axis=1), d.tokens[:, 6:])
    assert d.loss_mask[:, 6:].all() and not d.loss_mask[:, :6].any()


def test_english_corpus_and_trained_tokenizer_roundtrip():
    texts = english_corpus()
    assert len(texts) >= 70 and sum(map(len, texts)) > 300_000
    tok = train_tokenizer(texts[:10], vocab_size=400)
    assert len(tok) == 400
    sample = texts[11][:300]
    assert tok.decode(tok(sample)["input_ids"]) == sample
    d = encode_texts(tok, texts[:3], 32)
    assert d.tokens.shape[1] == 32 and d.tokens.max() < len(tok)


def test_number_tokenizer_maps_text_to_values():
    tok = number_tokenizer(64)
    assert tok("63 0 17")["input_ids"] == [63, 0, 17]
    assert len(tok) == 65  # plus <unk>


def test_empty_or_short_corpus_is_a_data_error():
    with pytest.raises(DataError, match="empty") as info:
        train_tokenizer([" ", ""])
    assert info.value.argument == "texts"
    tok = number_tokenizer(5)
    with pytest.raises(DataError, match="empty"):
        encode_texts(tok, [], 4)
    with pytest.raises(DataError, match="fewer than one block"):
        encode_texts(tok, ["1 2"], 8)
    with pytest.raises(DataError, match="shape"):
        lcg_sequences([1, 2, 3], 8, 4)
