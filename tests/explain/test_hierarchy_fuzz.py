"""Hostile input to the hierarchy entry points raises only TrustlabError."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from trustlab.errors import TrustlabError
from trustlab.explain.hierarchy import LogitsHierarchy, dendrogram_purity, lca_f1, logits_to_hierarchy

FAST = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
arrays = st.one_of(
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=5), elements=floats),
    st.lists(st.lists(st.one_of(floats, st.text(max_size=2), st.none()), max_size=4), max_size=4),
    st.none(),
    st.text(max_size=3),
)


def _only_trustlab(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except TrustlabError:
        pass


@FAST
@given(z=arrays, aggregation=st.sampled_from(["sum", "mean", "max", "x"]))
def test_logits(z: Any, aggregation: str) -> None:
    _only_trustlab(logits_to_hierarchy, z, aggregation)
    _only_trustlab(lambda: LogitsHierarchy(aggregation=aggregation).fit(z).cut(1))


@FAST
@given(tree=arrays, leaf=arrays, y=arrays)
def test_metrics(tree: Any, leaf: Any, y: Any) -> None:
    _only_trustlab(dendrogram_purity, tree, leaf, y)
    _only_trustlab(lca_f1, tree, leaf, y, tree)


ints = st.integers(-3, 12)


@FAST
@given(
    tree=hnp.arrays(np.int64, st.tuples(st.integers(0, 6), st.sampled_from([2, 3, 4])), elements=ints),
    leaf=hnp.arrays(np.int64, st.integers(0, 8), elements=ints),
    y=hnp.arrays(np.int64, st.integers(0, 8), elements=ints),
)
def test_metrics_integer_input(tree: np.ndarray, leaf: np.ndarray, y: np.ndarray) -> None:
    _only_trustlab(dendrogram_purity, tree, leaf, y)
    _only_trustlab(lca_f1, tree, leaf, y, tree)
