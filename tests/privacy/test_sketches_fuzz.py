"""Hostile input to the sketch entry points raises only TrustlabError (never a raw NumPy error)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustlab.errors import TrustlabError
from trustlab.privacy.sketches import BottomKSketch, RobustCardinalityEstimator, attack_standard_estimator

FAST = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.booleans(),
    st.none(),
)
keys_like = st.one_of(
    scalars,
    st.lists(scalars, max_size=20),
    st.lists(st.lists(st.integers(), max_size=3), max_size=4),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=3),
    st.builds(lambda n: np.arange(n).reshape(-1, 1), st.integers(0, 6)),
    st.builds(lambda n: np.full(n, np.nan), st.integers(0, 6)),
)
params = st.one_of(
    st.integers(-3, 300), st.floats(allow_nan=True), st.none(), st.text(max_size=3), st.booleans()
)


def _only_trustlab(fn: Any, *args: Any, **kwargs: Any) -> None:
    try:
        fn(*args, **kwargs)
    except TrustlabError:
        pass


@FAST
@given(keys=keys_like)
def test_sketch_update_and_estimate(keys: Any) -> None:
    s = BottomKSketch(4, salt=0)
    _only_trustlab(lambda: s.update(keys).estimate())


@FAST
@given(
    keys=keys_like,
    k=params,
    acc=params,
    rho=params,
    mp=params,
    mode=st.sampled_from(["basic", "tracking", "x"]),
)
def test_robust_estimate(keys: Any, k: Any, acc: Any, rho: Any, mp: Any, mode: str) -> None:
    est = RobustCardinalityEstimator(
        k, accuracy=acc, rho_per_key=rho, max_participation=mp, mode=mode, salt=1
    )
    _only_trustlab(est.estimate, keys)


@FAST
@given(
    n0=st.one_of(params, st.just(200)),
    m=params,
    k=st.one_of(params, st.just(8)),
    out=st.sampled_from([0.0, -1.0, float("inf"), 5.0, "x"]),
)
def test_attack(n0: Any, m: Any, k: Any, out: Any) -> None:
    _only_trustlab(attack_standard_estimator, lambda keys: out, n_ground=n0, n_queries=m, k=k, random_state=0)
