"""The synthetic DP-ICL task whose concepts share plausible tokens (row 002-10): layout and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from trustlab.errors import ParameterError
from trustlab.privacy.dp_icl_concepts import SharedTokenConcepts, concept_accuracy


def test_layout_and_emission():
    task = SharedTokenConcepts(n_concepts=3, n_shared=2, n_distinct=2, shared_mass=0.5, length=3)
    e = task.emission()
    assert e.shape == (3, 8) and np.allclose(e.sum(axis=1), 1.0)
    assert np.allclose(e[:, :2], 0.25)  # shared: the same under every concept
    assert (e[:, 2:] > 0).sum(axis=0).tolist() == [1] * 6  # distinctive: one concept each
    assert task.answers.tolist() == [8, 9, 10] and (task.pad, task.delim, task.query) == (11, 12, 13)
    demos = task.demonstrations(1, 5, np.random.default_rng(0))
    assert all(d[0] == task.delim and len(d) == 4 for d in demos)
    assert all(t < 2 or 4 <= t < 6 for d in demos for t in d[1:])  # shared or concept 1's own


def test_episodes_count_tokens_and_answer_not_delimiters():
    task = SharedTokenConcepts(length=3, max_shots=2)
    data = task.episodes(50, seed=0)
    assert data.tokens.shape == (50, 2 * 4 + 2)
    for row, mask, c, n in zip(
        data.tokens, data.loss_mask, data.latent["concept"], data.latent["shots"], strict=True
    ):
        q = 4 * n
        assert row[q] == task.query and row[q + 1] == task.answers[c]
        assert mask[q + 1] and not mask[q] and not mask[0] and not mask[q + 2 :].any()
        assert mask[1:q].sum() == 3 * n  # every demonstration token after the first position


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [({"n_concepts": 1}, "n_concepts"), ({"shared_mass": 1.0}, "shared_mass"), ({"length": 0}, "length")],
)
def test_bad_task(kwargs, argument):
    with pytest.raises(ParameterError) as info:
        SharedTokenConcepts(**kwargs)
    assert info.value.argument == argument


def test_accuracy_checks_lengths():
    with pytest.raises(ParameterError) as info:
        concept_accuracy(None, SharedTokenConcepts(), [[]], [0, 1])
    assert info.value.argument == "concepts"
