"""Tests of trustlab.privacy.secure_agg (Janus): correctness, backends, cost claims, bad input.

Masks, commitment scalars and seeds come from ``secrets`` (cryptographic randomness that
must not be seedable in use); tests that need reproducibility replace it with a seeded
stand-in (``seeded_secrets``). Data are seeded.
"""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from trustlab.errors import DataError, ParameterError
from trustlab.privacy import _commit, _field, _janus
from trustlab.privacy.secure_agg import (
    JanusParams,
    ProtocolAbort,
    run_janus,
    simulate_janus,
    simulate_pairwise,
)


@pytest.fixture
def seeded_secrets(seed_protocol_secrets):
    return seed_protocol_secrets(12345)


def _updates(n, dim, seed=0, bound=1.0):
    return np.random.default_rng(seed).uniform(-bound, bound, size=(n, dim))


def test_field_arithmetic_matches_python_integers():
    rng = np.random.default_rng(1)
    a = rng.integers(0, _field.PRIME, 1000, dtype=np.uint64)
    b = rng.integers(0, _field.PRIME, 1000, dtype=np.uint64)
    P = _field.PRIME
    assert [int(v) for v in _field.fadd(a, b)] == [(int(x) + int(y)) % P for x, y in zip(a, b, strict=True)]
    assert [int(v) for v in _field.fsub(a, b)] == [(int(x) - int(y)) % P for x, y in zip(a, b, strict=True)]
    assert int(_field.fsum(np.stack([a, b, a]))[0]) == (2 * int(a[0]) + int(b[0])) % P
    k = rng.integers(-(2**59), 2**59, 1000)
    assert np.array_equal(_field.to_signed(_field.from_signed(k)), k)


def test_prg_is_deterministic_per_seed_and_in_range():
    s = bytes(range(32))
    x = _field.prg_field(s, 5000)
    assert np.array_equal(x, _field.prg_field(s, 5000))
    assert np.array_equal(x[:100], _field.prg_field(s, 100))  # a prefix of the same stream
    assert not np.array_equal(x, _field.prg_field(s, 5000, label=b"other"))
    assert x.max() < _field.PRIME and x.dtype == np.uint64
    # uniform on Z_p: the top bit (2**60) is set about half the time; 5 sd = 0.035
    assert abs(np.mean(x >= 2**60) - 0.5) < 0.035


def test_pedersen_commitment_is_homomorphic_and_separable():
    u, v = np.array([3, -5, 0, 7]), np.array([-3, 2, 9, 1])
    a, b = _commit.random_scalar(), _commit.random_scalar()
    assert _commit.add_points([_commit.commit(u, a), _commit.commit(v, b)]) == _commit.commit(u + v, a + b)
    assert _commit.commit(u, a) != _commit.commit(
        u + np.array([1, 0, 0, 0]), a
    )  # binding on every coordinate


def test_sum_equals_the_plaintext_sum_within_fixed_point_precision(seeded_secrets):
    params = JanusParams(dim=8, frac_bits=16, bound=2.0)
    x = _updates(15, 8, bound=2.0)
    res = simulate_janus(x, params)
    # exact on the grid: the sum of the encoded integers, decoded
    enc = np.rint(x * 2**16).astype(np.int64).sum(axis=0)
    assert np.array_equal(res.aggregate, enc / 2**16)
    assert np.max(np.abs(res.aggregate - x.sum(axis=0))) <= 15 * 2.0**-17
    assert res.clients == tuple(range(15))
    assert res.rounds_per_client == 2


def test_processes_over_sockets_give_the_simulators_result_bit_for_bit():
    before = set(multiprocessing.active_children())
    params = JanusParams(dim=4, frac_bits=20, bound=1.0)
    x = _updates(4, 4, seed=3)
    net = run_janus(x, params, n_workers=2, timeout=30)
    sim = simulate_janus(x, params)
    assert net.backend == "processes" and sim.backend == "simulator"
    assert net.aggregate.tobytes() == sim.aggregate.tobytes()
    # bytes and rounds counted on the sockets equal the frames the simulator exchanged
    assert (net.bytes_up_per_client, net.bytes_down_per_client, net.rounds_per_client) == (
        sim.bytes_up_per_client,
        sim.bytes_down_per_client,
        sim.rounds_per_client,
    )
    assert net.server_bytes == sim.server_bytes
    assert set(multiprocessing.active_children()) <= before  # ours are gone (a Dask cluster may run)


def test_process_run_aborts_on_a_cheating_server_and_stops_every_process(monkeypatch):
    before = set(multiprocessing.active_children())
    real = _janus.JanusServer.replies

    def tampered(self):
        if self.role == 0:  # S0 shifts every masked vector it holds by one grid step
            for i, (key, vec, a, c) in list(self._got.items()):
                y = np.frombuffer(vec, dtype="<u8").astype(np.uint64)
                self._got[i] = (key, _field.fadd(y, np.ones_like(y)).astype("<u8").tobytes(), a, c)
        return real(self)

    monkeypatch.setattr(_janus.JanusServer, "replies", tampered)  # the forked parties inherit it
    with pytest.raises(ProtocolAbort, match="failed verification") as info:
        run_janus(_updates(3, 2), JanusParams(dim=2), n_workers=1, timeout=30)
    assert "0." not in str(info.value)  # no value in the message
    assert set(multiprocessing.active_children()) <= before  # ours are gone (a Dask cluster may run)


def test_clients_dropping_before_the_second_server_are_left_out(seeded_secrets):
    x = _updates(6, 3)
    res = simulate_janus(x, JanusParams(dim=3), drop_before_s1=[1, 4])
    assert res.clients == (0, 2, 3, 5)
    assert np.max(np.abs(res.aggregate - x[[0, 2, 3, 5]].sum(axis=0))) <= 4 * 2.0**-17
    with pytest.raises(ProtocolAbort, match="too few clients"):
        simulate_janus(x[:3], JanusParams(dim=3, min_clients=2), drop_before_s1=[0, 1])


@pytest.mark.claims
def test_claim_per_client_cost_is_constant_in_n_while_pairwise_masking_grows():
    """Janus: one client's bytes and rounds do not depend on n; pairwise masking's grow with n."""
    params = JanusParams(dim=8)
    janus, pairwise = {}, {}
    for n in (8, 32):
        x = _updates(n, 8, seed=n)
        janus[n] = simulate_janus(x, params)
        pairwise[n] = simulate_pairwise(x, params)
        assert np.array_equal(janus[n].aggregate, pairwise[n].aggregate)  # same work done
    for attr in ("bytes_up_per_client", "bytes_down_per_client", "rounds_per_client"):
        assert getattr(janus[8], attr) == getattr(janus[32], attr)
    # complete-graph pairwise masking: 36 bytes per neighbour key fetched
    assert pairwise[32].bytes_down_per_client - pairwise[8].bytes_down_per_client == 36 * (31 - 7)
    assert pairwise[32].bytes_down_per_client > janus[32].bytes_down_per_client
    assert pairwise[32].rounds_per_client == 4 > janus[32].rounds_per_client == 2
    # a sparse graph of degree k costs O(k) (Flamingo: k = O(log n))
    sparse = simulate_pairwise(_updates(32, 8), params, degree=6)
    assert sparse.bytes_down_per_client - pairwise[8].bytes_down_per_client == 36 * (6 - 7)


@pytest.mark.slow  # 1,000 simulated clients: about a minute
@pytest.mark.claims
def test_claim_constant_cost_at_10_100_1000_clients():
    params = JanusParams(dim=16)
    costs = {n: simulate_janus(_updates(n, 16, seed=n), params) for n in (10, 100, 1000)}
    assert len({(r.bytes_up_per_client, r.bytes_down_per_client) for r in costs.values()}) == 1
    pw = {n: simulate_pairwise(_updates(n, 16, seed=n), params) for n in (10, 100)}
    assert pw[100].bytes_down_per_client > 5 * pw[10].bytes_down_per_client


def test_bad_parameters_and_inputs_raise_named_errors():
    with pytest.raises(ParameterError, match="dim"):
        JanusParams(dim=0)
    with pytest.raises(ParameterError, match="frac_bits"):
        JanusParams(dim=2, frac_bits=52, bound=1.0, max_clients=1000)
    with pytest.raises(ParameterError, match="min_clients"):
        JanusParams(dim=2, min_clients=1)
    with pytest.raises(ParameterError, match="bound"):
        JanusParams(dim=2, bound=float("nan"))
    with pytest.raises(ParameterError, match="session"):
        JanusParams(dim=2, session=b"short")
    params = JanusParams(dim=2)
    with pytest.raises(DataError, match="shape"):
        simulate_janus(np.zeros((3, 3)), params)
    with pytest.raises(DataError, match="NaN"):
        simulate_janus(np.array([[0.0, np.nan], [0.0, 0.0]]), params)
    with pytest.raises(DataError, match="clip bound"):
        simulate_janus(np.array([[0.0, 3.0], [0.0, 0.0]]), params)
    with pytest.raises(DataError, match="min_clients"):
        simulate_janus(np.zeros((1, 2)), params)
    client = _janus.JanusClient(params, 0, (bytes(32), bytes(32)))
    with pytest.raises(DataError, match="values"):
        client.upload(np.zeros(3), 1)
    with pytest.raises(ParameterError, match="index"):
        _janus.JanusClient(params, -1, (bytes(32), bytes(32)))


def _free_port_pair():
    import socket

    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
        try:
            with socket.socket() as b:
                b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    pytest.skip("no two adjacent free ports")


def test_command_line_round_between_server_and_client_processes(capsys):
    before = set(multiprocessing.active_children())
    import threading

    from trustlab.cli import main

    port = _free_port_pair()

    def _serve():
        with pytest.raises(SystemExit):
            main(["secure-agg", "serve", "--clients", "2", "--dim", "2", "--port", str(port)])

    server = threading.Thread(target=_serve)
    server.start()
    codes = []
    outs = []

    def _client(i, values):
        from trustlab.privacy._secagg_net import join_round

        for _ in range(100):  # the servers start in a moment
            try:
                outs.append(join_round("127.0.0.1", port, i, np.array(values), 20.0))
                return
            except ProtocolAbort as exc:
                if "could not reach" not in str(exc):
                    raise
                import time

                time.sleep(0.05)
        codes.append("never reached")

    threads = [threading.Thread(target=_client, args=(i, v)) for i, v in ((0, [0.5, -1.0]), (1, [0.25, 0.5]))]
    for t in threads:
        t.start()
    for t in (*threads, server):
        t.join(60)
    assert codes == [] and len(outs) == 2
    assert np.array_equal(outs[0], [0.75, -0.5]) and np.array_equal(outs[1], outs[0])
    assert "2 clients aggregated" in capsys.readouterr().out
    assert set(multiprocessing.active_children()) <= before  # ours are gone (a Dask cluster may run)


def test_command_line_bad_input_exits_2_with_one_line(capsys):
    from trustlab.cli import main

    with pytest.raises(SystemExit) as info:
        main(["secure-agg", "client", "--index", "0", "--values", "a,b", "--port", "9"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--values" in err
    with pytest.raises(SystemExit) as info:
        main(["secure-agg", "client", "--index", "0", "--values", "1,2", "--port", "9", "--timeout", "1"])
    assert info.value.code == 2
    assert "could not reach the servers" in capsys.readouterr().err


def test_docs_example_runs(run_docs_example):
    from pathlib import Path

    run_docs_example(Path(__file__).parents[2] / "docs" / "privacy" / "secure-aggregation.md")


def test_clients_join_and_leave_between_rounds_with_only_the_servers_public_keys(seeded_secrets):
    """Dynamic participation: round 2 drops client 0 and adds client 3; no client-to-client setup."""
    params = JanusParams(dim=2)
    s0, s1 = _janus.JanusServer(params, 0), _janus.JanusServer(params, 1)
    keys = (s0.public_key, s1.public_key)
    x = _updates(4, 2, seed=9)
    for rnd, members in ((1, (0, 1, 2)), (2, (1, 2, 3))):
        for s in (s0, s1):
            s.start_round(rnd)
        clients = {i: _janus.JanusClient(params, i, keys) for i in members}
        for i, c in clients.items():
            f0, f1 = c.upload(x[i], rnd)
            s0.receive(f0)
            s1.receive(f1)
        r0, r1 = s0.roster(), s1.roster()
        s0.merge(r1)
        s1.merge(r0)
        rep0, rep1 = s0.replies(), s1.replies()
        for i, c in clients.items():
            got = c.finish(rep0[i], rep1[i])
            assert np.max(np.abs(got - x[list(members)].sum(axis=0))) <= 3 * 2.0**-17
