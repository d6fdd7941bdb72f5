"""Tests of trustlab.privacy.mpc_knn (Kona) and its two-party substrate (_mpc2).

Data are seeded; the dealer's randomness comes from ``secrets`` and cannot be seeded, so the
view tests are two-sample tests at significance 1e-4 with a control that must fail.
"""

from __future__ import annotations

import math
import multiprocessing
import threading

import numpy as np
import pytest
from scipy import stats
from sklearn.datasets import load_wine

from trustlab.errors import DataError, ParameterError
from trustlab.privacy import _mpc2, _wire
from trustlab.privacy.mpc_knn import ProtocolAbort, kona_knn, kona_knn_processes


def _pair(run0, run1, requests, timeout=5.0):
    """Run two parties on a queue channel with dealt randomness; returns both outputs and parties."""
    mat0, mat1 = _mpc2.deal(requests)
    ch0, ch1 = _mpc2.QueueChannel.pair(timeout)
    parties = [_mpc2.Party(0, ch0, mat0), _mpc2.Party(1, ch1, mat1)]
    out, errs = [None, None], []

    def go(i, f):
        try:
            out[i] = f(parties[i])
        except ProtocolAbort as exc:
            errs.append(exc)

    ts = [threading.Thread(target=go, args=(i, f)) for i, f in enumerate((run0, run1))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out, parties, errs


def _share(x):
    r = _mpc2.rand_words(x.shape)
    return x - r, r


def test_secure_sign_bit_and_compare_swap_match_plaintext():
    rng = np.random.default_rng(0)
    vals = rng.integers(-(2**62), 2**62, 500).view(np.uint64)
    s0, s1 = _share(vals)
    req = _mpc2.record_requests(lambda p: p.msb(s0))
    (b0, b1), _, errs = _pair(lambda p: p.msb(s0), lambda p: p.msb(s1), req)
    assert not errs and np.array_equal(b0 ^ b1, vals >> np.uint64(63))
    lo = rng.integers(0, 2**40, (300, 3)).astype(np.uint64)
    hi = rng.integers(0, 2**40, (300, 3)).astype(np.uint64)
    (l0, l1), (h0, h1) = _share(lo), _share(hi)
    req = _mpc2.record_requests(lambda p: p.compare_swap(l0, h0))
    (r0, r1), parties, errs = _pair(lambda p: p.compare_swap(l0, h0), lambda p: p.compare_swap(l1, h1), req)
    swap = hi[:, 0] < lo[:, 0]
    assert np.array_equal(r0[0] + r1[0], np.where(swap[:, None], hi, lo))
    assert np.array_equal(r0[1] + r1[1], np.where(swap[:, None], lo, hi))
    assert parties[0].rounds == 9  # 7 (carry-lookahead sign) + 1 (bit to arithmetic) + 1 (swap)


def _wine(n_ref, n_query, seed=0):
    x, y = load_wine(return_X_y=True)
    x = (x - x.min(0)) / (x.max(0) - x.min(0)) * 1.8 - 0.9  # into [-0.9, 0.9]
    idx = np.random.default_rng(seed).permutation(len(y))
    return x[idx[:n_ref]], y[idx[:n_ref]], x[idx[n_ref : n_ref + n_query]]


def _plaintext_knn(ref, y, q, k, frac_bits=8):
    """Plaintext kNN on the same fixed-point grid; None where the k-th distance is tied."""
    s = 2.0**frac_bits
    d = ((np.rint(ref * s) - np.rint(q * s)) ** 2).sum(axis=1)
    order = np.argsort(d, kind="stable")
    if d[order[k - 1]] == d[order[k]]:
        return None
    return np.bincount(y[order[:k]], minlength=3)


@pytest.mark.claims
def test_claim_same_labels_and_votes_as_plaintext_knn_on_wine():
    """Kona's label and vote counts equal plaintext kNN's (fixed-point grid) for every query."""
    ref, y, queries = _wine(32, 6)
    checked = 0
    for q in queries:
        want = _plaintext_knn(ref, y, q, 5)
        res = kona_knn(ref, y, q, k=5, n_classes=3)
        if want is not None:
            checked += 1
            assert np.array_equal(res.counts, want) and res.label == int(np.argmax(want))
    assert checked >= 4
    from sklearn.neighbors import KNeighborsClassifier

    clf = KNeighborsClassifier(5, algorithm="brute").fit(np.rint(ref * 256) / 256, y)
    assert res.label == clf.predict(np.rint(queries[-1:] * 256) / 256)[0]


@pytest.mark.claims
def test_claim_fewer_rounds_and_bytes_than_beaver_distances_with_a_linear_scan():
    """Rounds 9 k log2 n + 2 vs 9 k n + 3; no distance traffic (2 n m words fewer each way)."""
    ref, y, queries = _wine(32, 1)
    n, m, k = 32, ref.shape[1], 3
    kona = kona_knn(ref, y, queries[0], k=k, n_classes=3)
    base = kona_knn(ref, y, queries[0], k=k, n_classes=3, method="beaver-linear")
    assert np.array_equal(kona.counts, base.counts)
    assert kona.rounds == 2 + 9 * sum(math.ceil(math.log2(n - t)) for t in range(k))
    assert base.rounds == 3 + 9 * sum(n - 1 - t for t in range(k))
    assert base.rounds / kona.rounds > 5
    # the compare-and-swaps move the same words (n - 1 per neighbour) in both; the distances do not
    assert base.payload_sent[0] - kona.payload_sent[0] == 8 * 2 * n * m
    assert base.bytes_sent[0] > kona.bytes_sent[0]


def test_processes_over_a_socket_equal_the_thread_simulator():
    before = set(multiprocessing.active_children())
    ref, y, queries = _wine(12, 1)
    a = kona_knn(ref, y, queries[0], k=3, n_classes=3)
    b = kona_knn_processes(ref, y, queries[0], k=3, n_classes=3, timeout=30)
    assert np.array_equal(a.counts, b.counts) and a.label == b.label
    assert (a.rounds, a.bytes_sent, a.payload_sent) == (b.rounds, b.bytes_sent, b.payload_sent)
    assert b.backend == "processes"
    assert set(multiprocessing.active_children()) <= before  # ours are gone (a Dask cluster may run)


def test_dropped_replayed_truncated_and_late_messages_abort():
    x = np.arange(4, dtype=np.uint64)
    ch0, ch1 = _mpc2.QueueChannel.pair(0.2)
    p0 = _mpc2.Party(0, ch0, [])
    frame = _wire.pack(_mpc2.MPC, bytes(16), 2, 1, x.tobytes())  # round 2 where round 1 is due
    ch1.send(frame)
    with pytest.raises(ProtocolAbort, match="round 2 in round 1"):
        p0.exchange(x)
    p0 = _mpc2.Party(0, ch0, [])
    ch1.send(_wire.pack(_mpc2.MPC, bytes(16), 1, 1, x.tobytes())[:-8])
    with pytest.raises(ProtocolAbort, match=r"truncated|length"):
        p0.exchange(x)
    p0 = _mpc2.Party(0, ch0, [])
    ch1.send(_wire.pack(_mpc2.MPC, bytes(16), 1, 0, x.tobytes()))  # its own message reflected back
    with pytest.raises(ProtocolAbort, match="another session or sender"):
        p0.exchange(x)
    p0 = _mpc2.Party(0, ch0, [])
    with pytest.raises(ProtocolAbort, match="did not answer"):
        p0.exchange(x)
    with pytest.raises(ProtocolAbort, match="ran out"):
        _mpc2.Party(0, ch0, []).mul(x, x)


@pytest.mark.claims
def test_claim_each_partys_view_is_independent_of_the_other_partys_input():
    """P0's view of the query (X = x - v) and the words opened in a compare-and-swap are uniform."""
    v = _mpc2.rand_words(400)  # the dealer's masks of the query
    seen_a = (np.uint64(0) - v[:200]) & np.uint64(0xFFFF)  # X = x - v for x = 0 ...
    seen_b = (np.uint64(2**20) - v[200:]) & np.uint64(0xFFFF)  # ... and for x = 2**20
    assert stats.ks_2samp(seen_a.astype(float), seen_b.astype(float)).pvalue > 1e-4
    views = {}
    for name, (lo, hi) in {"close": (5, 6), "far": (5, 2**40)}.items():
        lo_rows = np.full((200, 1), lo, dtype=np.uint64)
        hi_rows = np.full((200, 1), hi, dtype=np.uint64)
        (l0, l1), (h0, h1) = _share(lo_rows), _share(hi_rows)
        req = _mpc2.record_requests(lambda p, a=l0, b=h0: p.compare_swap(a, b))
        got = []
        mat0, mat1 = _mpc2.deal(req)
        ch0, ch1 = _mpc2.QueueChannel.pair(5.0)
        p0, p1 = _mpc2.Party(0, ch0, mat0), _mpc2.Party(1, ch1, mat1)
        real = p1.exchange

        def spy(mine, expect=None, real=real, got=got):
            other = real(mine, expect)
            got.append(other.copy())
            return other

        p1.exchange = spy
        t = threading.Thread(target=p0.compare_swap, args=(l0, h0))
        t.start()
        p1.compare_swap(l1, h1)
        t.join()
        views[name] = np.concatenate(got) & np.uint64(0xFF)
    table = np.array([np.bincount(views[k].astype(int), minlength=256) for k in ("close", "far")])
    table = table.reshape(2, 16, 16).sum(axis=2)  # 16 bins of the low byte
    assert stats.chi2_contingency(table).pvalue > 1e-4
    # control: the unmasked difference hi - lo separates the two cases at once
    assert stats.ks_2samp(np.full(50, 1.0), np.full(50, 2.0**40 - 5)).pvalue < 1e-4


def test_bad_input_raises_named_errors():
    ref, y, q = _wine(10, 1)
    with pytest.raises(ParameterError, match="k"):
        kona_knn(ref, y, q[0], k=11)
    with pytest.raises(ParameterError, match="method"):
        kona_knn(ref, y, q[0], method="fast")
    with pytest.raises(DataError, match="query"):
        kona_knn(ref, y, q[0][:3])
    with pytest.raises(DataError, match="NaN"):
        kona_knn(np.where(ref == ref[0, 0], np.nan, ref), y, q[0])
    with pytest.raises(DataError, match="bound"):
        kona_knn(ref * 3, y, q[0])
    with pytest.raises(DataError, match="labels"):
        kona_knn(ref, y[:5], q[0])
    with pytest.raises(ParameterError, match="n_classes"):
        kona_knn(ref, y, q[0], n_classes=2)
    with pytest.raises(ParameterError, match="frac_bits"):
        kona_knn(ref, y, q[0], frac_bits=30)


def test_docs_example_runs(run_docs_example):
    from pathlib import Path

    run_docs_example(Path(__file__).parents[2] / "docs" / "privacy" / "mpc-knn.md")


def test_a_failing_party_process_aborts_the_run_and_leaves_no_process(monkeypatch):
    before = set(multiprocessing.active_children())
    real = _mpc2.Party.compare_swap

    def failing(self, lo, hi):
        if self.role == 1:
            raise ProtocolAbort("injected failure in party 1", argument="party 1")
        return real(self, lo, hi)

    monkeypatch.setattr(_mpc2.Party, "compare_swap", failing)  # the forked parties inherit it
    ref, y, queries = _wine(6, 1)
    with pytest.raises(ProtocolAbort, match="party"):
        kona_knn_processes(ref, y, queries[0], k=1, n_classes=3, timeout=2)
    assert set(multiprocessing.active_children()) <= before  # ours are gone (a Dask cluster may run)
