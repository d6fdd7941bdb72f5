"""Security tests of Janus (trustlab.privacy.secure_agg): cheating servers, bad frames, views.

A malicious server is played by rewriting its own replies (it knows the reply keys);
replayed, moved and truncated frames are fed to the parties directly. The view tests are
statistical: the protocol's secrets are replaced by a seeded stand-in so the samples are
reproducible, and each two-sample test has a significance level of 1e-4 (it would fail
at once if the mask or the commitment randomness were dropped: see the control cases).
"""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from scipy import stats

from trustlab.privacy import _commit, _field, _janus, _secagg_net, _wire
from trustlab.privacy.secure_agg import JanusParams, ProtocolAbort

DIM = 3


@pytest.fixture
def seeded_secrets(seed_protocol_secrets):
    return seed_protocol_secrets(777)


def _setup(n=4, rnd=1):
    params = JanusParams(dim=DIM)
    s0, s1 = _janus.JanusServer(params, 0), _janus.JanusServer(params, 1)
    clients = [_janus.JanusClient(params, i, (s0.public_key, s1.public_key)) for i in range(n)]
    x = np.random.default_rng(5).uniform(-1, 1, size=(n, DIM))
    frames = [c.upload(x[i], rnd) for i, c in enumerate(clients)]
    return params, s0, s1, clients, x, frames


def _run_servers(s0, s1, frames):
    for f0, f1 in frames:
        s0.receive(f0)
        s1.receive(f1)
    r0, r1 = s0.roster(), s1.roster()
    s0.merge(r1)
    s1.merge(r0)
    return s0.replies(), s1.replies()


def _rewrite(server, i, frame, mutate):
    """The reply ``frame`` for client ``i`` after the (malicious) server applies ``mutate`` to its body."""
    fr = _wire.unpack(frame, "test")
    key = server._got[i][0]
    body = bytearray(ChaCha20Poly1305(key).decrypt(bytes(12), fr.body, fr.header))
    mutate(body)
    return fr.header + ChaCha20Poly1305(key).encrypt(bytes(12), bytes(body), fr.header)


def _shift_vector(body):  # add one grid step to the first coordinate of the returned sum
    y = np.frombuffer(bytes(body[36:44]), dtype="<u8").astype(np.uint64)
    body[36:44] = _field.fadd(y, np.ones(1, dtype=np.uint64)).astype("<u8").tobytes()


def test_honest_run_verifies_for_every_client():
    _, s0, s1, clients, x, frames = _setup()
    rep0, rep1 = _run_servers(s0, s1, frames)
    sums = [c.finish(rep0[i], rep1[i]) for i, c in enumerate(clients)]
    assert all(np.array_equal(s, sums[0]) for s in sums)
    assert np.max(np.abs(sums[0] - x.sum(axis=0))) <= 4 * 2.0**-17


@pytest.mark.claims
@pytest.mark.parametrize("role", [0, 1])
def test_claim_a_tampered_aggregate_is_detected(role):
    """Either server changing its sum, its scalar or its commitment makes every client abort."""
    dim_end = 36 + 8 * DIM
    mutations = {
        "sum": _shift_vector,
        "scalar": lambda b: b.__setitem__(slice(dim_end + 31, dim_end + 32), bytes([b[dim_end + 31] ^ 1])),
        "commitment": lambda b: b.__setitem__(
            slice(dim_end + 32, dim_end + 65), _commit.commit(np.ones(DIM, int), 7)
        ),
        "count": lambda b: b.__setitem__(slice(0, 4), (5).to_bytes(4, "big")),
    }
    for name, mutate in mutations.items():
        _, s0, s1, clients, _, frames = _setup()
        reps = list(_run_servers(s0, s1, frames))
        server = (s0, s1)[role]
        reps[role] = {i: _rewrite(server, i, f, mutate) for i, f in reps[role].items()}
        for i, c in enumerate(clients):
            with pytest.raises(ProtocolAbort, match=r"verification|disagree"):
                c.finish(reps[0][i], reps[1][i])
        assert name  # every mutation above was tried


@pytest.mark.claims
def test_claim_a_consistent_forgery_by_one_server_is_caught_by_the_other_servers_commitment():
    """S0 shifts its sum and its commitment by Com(delta, 0): consistent on its own side, caught."""
    params = JanusParams(dim=DIM)
    s0, s1 = _janus.JanusServer(params, 0), _janus.JanusServer(params, 1)
    clients = [_janus.JanusClient(params, i, (s0.public_key, s1.public_key)) for i in range(4)]
    frames = [c.upload(np.zeros(DIM), 1) for c in clients]
    rep0, rep1 = _run_servers(s0, s1, frames)
    delta = np.array([1, 0, 0])

    def forge(body):
        _shift_vector(body)
        c = bytes(body[36 + 8 * DIM + 32 :])
        body[36 + 8 * DIM + 32 :] = _commit.add_points([c, _commit.commit(delta, 1)])
        # the scalar absorbs the extra H term so that S0's own view is self-consistent
        a = (int.from_bytes(bytes(body[36 + 8 * DIM : 68 + 8 * DIM]), "big") + 1) % _commit.ORDER
        body[36 + 8 * DIM : 68 + 8 * DIM] = a.to_bytes(32, "big")

    forged = {i: _rewrite(s0, i, f, forge) for i, f in rep0.items()}
    for i, c in enumerate(clients):
        with pytest.raises(ProtocolAbort, match="disagree on the aggregate commitment"):
            c.finish(forged[i], rep1[i])


@pytest.mark.claims
def test_claim_a_model_inconsistency_attack_on_one_client_is_detected_and_the_others_agree():
    _, s0, s1, clients, _, frames = _setup()
    rep0, rep1 = _run_servers(s0, s1, frames)
    rep0[2] = _rewrite(s0, 2, rep0[2], _shift_vector)  # a different sum for client 2 only
    with pytest.raises(ProtocolAbort, match="verification"):
        clients[2].finish(rep0[2], rep1[2])
    sums = [clients[i].finish(rep0[i], rep1[i]) for i in (0, 1, 3)]
    assert all(np.array_equal(s, sums[0]) for s in sums)


def test_replayed_moved_truncated_and_malformed_uploads_abort():
    params, s0, s1, _, _, frames = _setup()
    s0.receive(frames[0][0])
    with pytest.raises(ProtocolAbort, match="second message from client 0"):
        s0.receive(frames[0][0])
    with pytest.raises(ProtocolAbort, match="another type"):
        s0.receive(frames[1][1])  # S1's frame sent to S0
    with pytest.raises(ProtocolAbort, match="truncated"):
        s0.receive(frames[1][0][:-1])
    with pytest.raises(ProtocolAbort, match="malformed"):
        s0.receive(b"XXXX" + frames[1][0][4:])
    # a bit flipped inside the sealed body
    flipped = bytearray(frames[2][0])
    flipped[-3] ^= 1
    with pytest.raises(ProtocolAbort, match="could not be authenticated"):
        s0.receive(bytes(flipped))
    # a frame of round 1 replayed in round 2, as is and with its header's round rewritten
    s0.start_round(2)
    with pytest.raises(ProtocolAbort, match="round 1 in round 2"):
        s0.receive(frames[1][0])
    moved = bytearray(frames[1][0])
    moved[21:25] = (2).to_bytes(4, "big")
    with pytest.raises(ProtocolAbort, match="could not be authenticated"):
        s0.receive(bytes(moved))
    # a client of another vector length (same session, same server keys)
    other = _janus.JanusClient(
        JanusParams(dim=DIM + 1, session=params.session), 9, (s0.public_key, s1.public_key)
    )
    with pytest.raises(ProtocolAbort, match="wrong length"):
        s0.receive(other.upload(np.zeros(DIM + 1), 2)[0])


def test_replayed_truncated_or_foreign_replies_abort_at_the_client():
    _, s0, s1, clients, _, frames = _setup()
    rep0, rep1 = _run_servers(s0, s1, frames)
    with pytest.raises(ProtocolAbort, match="truncated"):
        clients[0].finish(rep0[0][:-5], rep1[0])
    with pytest.raises(ProtocolAbort, match="could not be authenticated"):
        clients[0].finish(rep0[1], rep1[0])  # client 1's reply: sealed under another key
    with pytest.raises(ProtocolAbort, match="another round"):
        clients[0].finish(rep1[0], rep1[0])  # S1's reply where S0's belongs
    old = rep0[0]
    clients[0].upload(np.zeros(DIM), 2)  # client 0 moves on to round 2; the old reply is replayed
    with pytest.raises(ProtocolAbort, match="another round"):
        clients[0].finish(old, rep1[0])


def test_a_server_that_never_answers_times_out():
    params = JanusParams(dim=DIM)
    listener = socket.create_server(("127.0.0.1", 0))
    server = _janus.JanusServer(params, 0)
    with pytest.raises(ProtocolAbort, match="S1 did not answer"):  # no clients and no S1: S0 gives up
        _secagg_net.serve(params, 0, 1, 2, 0.2, listener, None, server)
    silent = socket.create_server(("127.0.0.1", 0))
    sock = _wire.MeteredSocket(socket.create_connection(silent.getsockname()), "server S0", 0.2)
    with pytest.raises(ProtocolAbort, match="S0 did not answer before the timeout"):
        sock.recv()
    sock.close()
    silent.close()
    assert threading.active_count() >= 1


def _views(value, n_samples, seeded):
    """S0's and S1's views of one honest client's upload of ``value`` (colluders know the rest)."""
    params = JanusParams(dim=1, frac_bits=16, bound=1.0, session=bytes(16))
    s0, s1 = _janus.JanusServer(params, 0), _janus.JanusServer(params, 1)
    y, c_low = [], []
    for _ in range(n_samples):
        client = _janus.JanusClient(params, 0, (s0.public_key, s1.public_key))
        f0, f1 = client.upload(np.array([value]), 1)
        b0 = _wire.open_sealed(s0.key, f0[: _wire.HEADER.size], f0[_wire.HEADER.size :], "c")
        b1 = _wire.open_sealed(s1.key, f1[: _wire.HEADER.size], f1[_wire.HEADER.size :], "c")
        y.append(int.from_bytes(b0[97:105], "little"))  # S0: the masked value
        c_low.append(b1[-1] & 15)  # S1 (knows the seed and b): low bits of the commitment
    return np.array(y, dtype=float), np.array(c_low)


@pytest.mark.claims
def test_claim_each_servers_view_is_independent_of_an_honest_input(seeded_secrets):
    """Two-sample tests on S0's masked value and S1's commitment for inputs -1 and +1 (alpha 1e-4)."""
    y_neg, c_neg = _views(-1.0, 200, seeded_secrets)
    y_pos, c_pos = _views(1.0, 200, seeded_secrets)
    assert stats.ks_2samp(y_neg, y_pos).pvalue > 1e-4
    assert stats.kstest(y_pos / _field.PRIME, "uniform").pvalue > 1e-4
    table = np.array([np.bincount(c_neg, minlength=16), np.bincount(c_pos, minlength=16)])
    assert stats.chi2_contingency(table).pvalue > 1e-4
    # control: the same tests see the input when the mask or the hiding randomness is left out
    unmasked = np.rint(np.array([-1.0] * 200 + [1.0] * 200) * 2**16) % _field.PRIME
    assert stats.ks_2samp(unmasked[:200], unmasked[200:]).pvalue < 1e-4
    fixed = [_commit.commit(np.array([v]), 1)[-1] & 15 for v in (-(2**16), 2**16)]
    assert fixed[0] != fixed[1]  # without fresh randomness the commitment is a function of the input


def test_a_commitment_that_is_not_a_curve_point_aborts(monkeypatch):
    _, s0, _, clients, x, _ = _setup()
    monkeypatch.setattr(_commit, "commit", lambda values, r: b"\x05" + bytes(32))
    f0, _ = clients[0].upload(x[0], 1)
    with pytest.raises(ProtocolAbort, match="not a curve point"):
        s0.receive(f0)
