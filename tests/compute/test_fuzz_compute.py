"""Hostile input to the public entry points of trustlab.compute raises only TrustlabError."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from trustlab.compute.backend import compute
from trustlab.compute.bootstrap import poisson_weights
from trustlab.compute.cluster import connect
from trustlab.compute.groups import GridHistogram
from trustlab.compute.statistics import Moments
from trustlab.errors import TrustlabError

junk = st.one_of(
    st.none(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(-3, 3), max_size=4),
    st.booleans(),
)


@settings(max_examples=40, deadline=None)
@given(positions=junk, n_boot=junk, seed=junk)
def test_fuzz_poisson_weights(positions, n_boot, seed):
    try:
        w = poisson_weights(positions, n_boot, seed)
    except TrustlabError:
        return
    assert w.dtype == np.uint8


@settings(max_examples=30, deadline=None)
@given(data=junk, chunksize=junk)
def test_fuzz_compute(data, chunksize):
    try:
        compute(Moments("x"), data, chunksize=chunksize)
    except TrustlabError:
        pass


@settings(max_examples=30, deadline=None)
@given(lower=junk, upper=junk, n_bins=junk)
def test_fuzz_grid_histogram(lower, upper, n_bins):
    try:
        h = compute(GridHistogram("x", lower, upper, n_bins), pd.DataFrame({"x": [0.5, np.nan]}))
    except TrustlabError:
        return
    assert h.counts.sum() == 1 and h.missing == 1


@settings(max_examples=20, deadline=None)
@given(scheduler=st.one_of(st.none(), st.integers(), st.text(alphabet="abc :/", max_size=8)))
def test_fuzz_connect_refuses_malformed_addresses(scheduler):
    if isinstance(scheduler, str) and scheduler.strip().startswith("local"):
        return  # would start a cluster
    try:
        connect(scheduler, timeout=0.2)
    except TrustlabError:
        pass
