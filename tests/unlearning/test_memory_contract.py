"""KNNMemory passes scikit-learn's estimator checks, and hostile input raises only TrustlabError."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.utils.estimator_checks import parametrize_with_checks

from trustlab.errors import TrustlabError
from trustlab.unlearning import _memory_index
from trustlab.unlearning.memory import KNNMemory, rank_vote, softmax_vote

ESTIMATORS = [KNNMemory(k=5, backend="numpy")]
if _memory_index.faiss_available():
    ESTIMATORS.append(KNNMemory(k=5, backend="faiss"))


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible(estimator: Any, check: Any) -> None:
    check(estimator)


FAST = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
)
arrays = st.one_of(
    scalars,
    st.lists(scalars, max_size=6),
    st.lists(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=0, max_size=3), max_size=5),
    st.lists(st.lists(scalars, max_size=3), max_size=4),
    st.builds(lambda n, d: np.zeros((n, d)), st.integers(0, 4), st.integers(0, 3)),
    st.builds(lambda n: np.full((n, 2), np.nan), st.integers(0, 3)),
)


def _only_trustlab(fn: Any) -> None:
    try:
        fn()
    except TrustlabError:
        pass


@FAST
@given(X=arrays, y=arrays, ids=arrays, k=scalars)
def test_fit_predict_hostile(X: Any, y: Any, ids: Any, k: Any) -> None:
    _only_trustlab(
        lambda: KNNMemory(k=k if isinstance(k, int) else 3, backend="numpy").fit(X, y, ids=ids).predict(X)
    )


@FAST
@given(X=arrays, y=arrays, ids=arrays, weights=arrays, sources=arrays)
def test_memory_operations_hostile(X: Any, y: Any, ids: Any, weights: Any, sources: Any) -> None:
    memory = KNNMemory(k=2, backend="numpy").fit(np.eye(3), [0, 1, 1], ids=[1, 2, 3], sources=["a", "b", "a"])
    _only_trustlab(lambda: memory.add(X, y, ids=ids, weights=weights, sources=sources))
    _only_trustlab(lambda: memory.remove(ids))
    _only_trustlab(lambda: memory.set_weights(ids, weights))
    _only_trustlab(lambda: memory.exclude(ids))
    _only_trustlab(lambda: memory.block_source(X))
    _only_trustlab(lambda: memory.explain(X, k=2))
    _only_trustlab(lambda: memory.prune("hard", top_k=y if isinstance(y, int) else 2))


@FAST
@given(labels=arrays, distances=arrays, weights=arrays, offset=scalars)
def test_votes_hostile(labels: Any, distances: Any, weights: Any, offset: Any) -> None:
    _only_trustlab(lambda: rank_vote(labels, weights=weights, offset=offset))
    _only_trustlab(lambda: softmax_vote(labels, distances, weights=weights, temperature=offset))
