"""FastPD's background statistics through trustlab.compute: merged states equal the whole table's."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingClassifier
from sklearn.tree import DecisionTreeRegressor
from threadpoolctl import threadpool_limits

from trustlab.compute.backend import compute
from trustlab.compute.trees import FastPDBackground, FastPDBackgroundState
from trustlab.errors import DataError, ParameterError, TrustlabError
from trustlab.explain._fastpd import FastPD


def _table(n: int = 3001, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "cat": rng.integers(0, 5, n).astype(float),  # a native categorical feature
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": rng.uniform(-2, 2, n),
        }
    )
    X.loc[rng.random(n) < 0.08, "a"] = np.nan
    X.loc[rng.random(n) < 0.05, "cat"] = np.nan
    logit = np.array([0.0, 1.0, -1.0, 0.5, 2.0])[np.nan_to_num(X["cat"], nan=0).astype(int)]
    logit = logit + np.nan_to_num(X["a"]) * X["b"] + np.sin(2 * X["c"])
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    return X, y


@pytest.fixture(scope="module")
def fitted() -> tuple[HistGradientBoostingClassifier, pd.DataFrame]:
    X, y = _table()
    model = HistGradientBoostingClassifier(max_iter=30, max_depth=5, categorical_features=[0], random_state=0)
    with threadpool_limits(limits=1):  # HGB's OpenMP fit crawls on busy cores
        return model.fit(X, y), X


@pytest.fixture(scope="module")
def string_model() -> tuple[HistGradientBoostingClassifier, pd.DataFrame]:
    """A HistGradientBoosting model fitted on a column of strings (the user's values in the state)."""
    X, y = _table(1500, seed=1)
    X = X.assign(cat=X["cat"].map({0.0: "u", 1.0: "v", 2.0: "w", 3.0: "x", 4.0: "y"}).astype("category"))
    model = HistGradientBoostingClassifier(
        max_iter=15, max_depth=4, categorical_features="from_dtype", random_state=0
    )
    with threadpool_limits(limits=1):
        return model.fit(X, y), X


def _pieces(X: pd.DataFrame, rng: np.random.Generator) -> list[pd.DataFrame]:
    """A random partitioning in a random row order, with empty partitions."""
    order = rng.permutation(len(X))
    cuts = np.sort(rng.integers(0, len(X), rng.integers(2, 9)))
    cuts = np.concatenate([[0], cuts, cuts[:1], [len(X)]])  # a repeated cut: an empty piece
    cuts.sort()
    return [X.iloc[order[a:b]] for a, b in itertools.pairwise(cuts)]


def _merged(stat: FastPDBackground, pieces: list[pd.DataFrame]) -> FastPDBackgroundState:
    states = [stat.partial(p) for p in pieces]
    rng = np.random.default_rng(len(pieces))
    while len(states) > 1:  # merge in a random tree
        i = int(rng.integers(0, len(states) - 1))
        states[i : i + 2] = [stat.merge(states[i], states[i + 1])]
    return stat.finalize(states[0])


def _same_state(a: FastPDBackgroundState, b: FastPDBackgroundState) -> None:
    assert a.n_rows == b.n_rows and a.n_missing == b.n_missing
    assert len(a.counts) == len(b.counts)
    for x, y in zip(a.counts, b.counts, strict=True):
        assert x.dtype == np.int64 and np.array_equal(x, y)  # counts: bit for bit
    np.testing.assert_array_equal(a.sample, b.sample)
    np.testing.assert_array_equal(a.sample_hash, b.sample_hash)
    np.testing.assert_array_equal(a.missing, b.missing)


@pytest.mark.parametrize("seed", range(4))
def test_merged_state_equals_whole_table(fitted, seed: int) -> None:
    model, X = fitted
    stat = FastPDBackground(model, n_sample=200)
    whole = stat.partial(X)
    merged = _merged(stat, _pieces(X, np.random.default_rng(seed)))
    _same_state(merged, whole)
    assert whole.n_missing == int(X.isna().any(axis=1).sum()) > 0
    assert all(int(c.sum()) == len(X) * c.shape[0] for c in whole.counts)


def test_fastpd_from_state_equals_fit(fitted) -> None:
    model, X = fitted
    state = _merged(FastPDBackground(model), _pieces(X, np.random.default_rng(11)))
    a = FastPD(model).fit(X)
    b = FastPD(model).fit_background_state(state)
    Q = X.iloc[:200]
    np.testing.assert_allclose(b.shap_values(Q), a.shap_values(Q), rtol=0, atol=1e-12)
    assert abs(a.expected_value_ - b.expected_value_) < 1e-12
    pa = a.pd(Q, [(0,), (1,), (1, 2), (0, 1, 3)])
    pb = b.pd(Q, [(0,), (1,), (1, 2), (0, 1, 3)])
    for key in pa:
        np.testing.assert_allclose(pb[key], pa[key], rtol=0, atol=1e-12)
    grid = np.linspace(-1, 1, 7)
    np.testing.assert_allclose(b.pd_curve(2, grid)[1], a.pd_curve(2, grid)[1], rtol=0, atol=1e-12)
    _ia, ca = a.components(Q, max_order=2)
    _ib, cb = b.components(Q, max_order=2)
    assert list(ca.columns) == list(cb.columns)
    np.testing.assert_allclose(cb.to_numpy(), ca.to_numpy(), rtol=0, atol=1e-12)
    # the default grid comes from the hash sample, within the background's range
    g, _ = b.pd_curve("c")
    assert X["c"].min() <= g.min() < g.max() <= X["c"].max()


def test_string_categories(string_model) -> None:
    model, X = string_model
    stat = FastPDBackground(model, n_sample=50)
    whole = stat.partial(X)
    merged = _merged(stat, _pieces(X, np.random.default_rng(3)))
    _same_state(merged, whole)
    assert merged.sample_frame is not None and len(merged.sample_frame) == 50
    b = FastPD(model).fit_background_state(pickle.loads(pickle.dumps(merged)))
    a = FastPD(model).fit(X)
    np.testing.assert_allclose(b.shap_values(X[:50]), a.shap_values(X[:50]), rtol=0, atol=1e-12)
    assert set(b.pd_curve("cat")[0]) <= {"u", "v", "w", "x", "y"}


def test_preprocessor_and_columns() -> None:
    """A Pipeline's first steps run on each partition; extra columns are ignored."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _table(800, seed=2)
    X = X.fillna(0.0)
    pipe = make_pipeline(StandardScaler(), GradientBoostingRegressor(n_estimators=10, max_depth=3)).fit(X, y)
    frame = X.assign(extra=np.arange(len(X)), target=y)
    stat = FastPDBackground(pipe[-1], columns=list(X.columns), preprocessor=pipe[:-1])
    state = compute(stat, frame, chunksize=130)
    Z = pipe[:-1].transform(X)
    a, b = FastPD(pipe[-1]).fit(Z), FastPD(pipe[-1]).fit_background_state(state)
    np.testing.assert_allclose(b.shap_values(Z[:40]), a.shap_values(Z[:40]), rtol=0, atol=1e-12)
    with pytest.raises(DataError, match="lacks the column"):
        stat.partial(frame.drop(columns="b"))


def test_bad_state() -> None:
    X, y = _table(400, seed=3)
    X = X.fillna(0.0)
    m1 = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    m2 = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y[::-1])
    s1 = FastPDBackground(m1).partial(X)
    with pytest.raises(DataError, match="another model"):
        FastPD(m2).fit_background_state(s1)
    with pytest.raises(DataError, match="different models"):
        FastPDBackground(m1).merge(s1, FastPDBackground(m2).partial(X))
    with pytest.raises(ParameterError, match="FastPDBackgroundState"):
        FastPD(m1).fit_background_state(X)
    with pytest.raises(DataError, match=r"no background rows|inconsistent"):
        FastPD(m1).fit_background_state(FastPDBackground(m1).partial(X.iloc[:0]))
    with pytest.raises(DataError, match="infinite"):
        FastPDBackground(m1).partial(X.assign(a=np.inf))


@st.composite
def _hostile_state(draw: st.DrawFn, base: FastPDBackgroundState) -> FastPDBackgroundState:
    from dataclasses import replace

    field = draw(
        st.sampled_from(["n_rows", "counts", "sample", "missing", "n_missing", "fingerprint", "layout"])
    )
    junk = draw(
        st.one_of(
            st.none(),
            st.integers(-5, 10**6),
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(max_size=5),
            st.just(()),
            st.just(tuple(c * -1 for c in base.counts)),
            st.just(tuple(c.astype(float) for c in base.counts)),
            st.just(np.full((3, base.sample.shape[1]), np.inf)),
            st.just(np.zeros((0, base.sample.shape[1]))),
            st.just(((1, 1),)),
        )
    )
    return replace(base, **{field: junk})


_FUZZ_X, _FUZZ_Y = _table(300, seed=4)
_FUZZ_MODEL = GradientBoostingRegressor(n_estimators=5, max_depth=3, random_state=0).fit(
    _FUZZ_X.fillna(0.0), _FUZZ_Y
)
_FUZZ_BASE = FastPDBackground(_FUZZ_MODEL).partial(_FUZZ_X.fillna(0.0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_hostile_state(_FUZZ_BASE))
def test_fuzz_fit_background_state(state: FastPDBackgroundState) -> None:
    try:
        FastPD(_FUZZ_MODEL).fit_background_state(state)
    except TrustlabError:
        pass


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3), st.none()),
        min_size=0,
        max_size=12,
    ),
    st.integers(0, 6),
)
def test_fuzz_partial(values: list, n_cols: int) -> None:
    rows = len(values) // max(n_cols, 1)
    chunk = pd.DataFrame(
        np.array(values[: rows * n_cols], dtype=object).reshape(rows, n_cols),
        columns=[f"x{i}" for i in range(n_cols)],
    )
    try:
        FastPDBackground(_FUZZ_MODEL).partial(chunk)
    except TrustlabError:
        pass


def test_cells_equal_coding_every_row() -> None:
    """Counting by tree cells (one coded row per cell) equals coding every row (bit for bit)."""
    from trustlab.explain._fastpd_leaves import LeafTables, _cells, codes
    from trustlab.explain._trees import ensemble_from_model

    X, y = _table(12_000, seed=9)
    model = HistGradientBoostingClassifier(max_iter=25, categorical_features=[0], random_state=0)
    with threadpool_limits(limits=1):
        model.fit(X, y)
    leaves = LeafTables(ensemble_from_model(model))
    Xc = X.to_numpy()
    BT, has_nan = leaves.bin(Xc)
    used = [_cells(BT, *plan[:3])[0] is not None for plan in leaves._tree_plans()]
    assert any(used)  # the cell path ran (and maybe the every-row path too)
    for g, got in zip(leaves.groups.values(), leaves.background_counts(Xc), strict=True):
        L, m = len(g.value), 1 << g.k
        flat = (codes(BT, g, has_nan) + (np.arange(L) * m)[:, None]).ravel()
        assert np.array_equal(np.bincount(flat, minlength=L * m).reshape(L, m), got)
