"""Two-party computation on additive shares in ``Z_{2**64}`` with dealer-made triples (private module).

Each party runs the same code on its own shares; every interaction is one
:meth:`Party.exchange` (both send, both receive: one round), whose frames carry a round
counter so that a dropped, replayed or reordered message aborts. Correlated randomness
(Beaver triples, AND triples on 64-bit words, doubly shared bits) comes from a dealer
before the online phase: :func:`record_requests` replays the data-independent schedule to
learn what is needed and :func:`deal` makes it from ``secrets`` randomness.

References
----------
Beaver, "Efficient Multiparty Protocols Using Circuit Randomization", CRYPTO 1991;
Kogge and Stone, "A Parallel Algorithm for the Efficient Solution of a General Class of
Recurrence Equations", IEEE Trans. Computers 1973 (the carry-lookahead comparison).
"""

from __future__ import annotations

import queue
import secrets
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from trustlab.privacy import _wire
from trustlab.privacy._wire import ProtocolAbort

__all__ = ["Party", "QueueChannel", "SocketChannel", "deal", "rand_words", "record_requests"]

U64 = np.uint64
_LOW63 = U64((1 << 63) - 1)
MPC = 10  # frame type


def rand_words(shape: tuple[int, ...] | int) -> np.ndarray:
    """Uniform words of ``Z_{2**64}`` from the OS's cryptographic generator."""
    n = int(np.prod(shape))
    return np.frombuffer(secrets.token_bytes(8 * n), dtype=np.uint64).reshape(shape).copy()


class QueueChannel:
    """One end of an in-memory duplex channel (the simulator's threads)."""

    def __init__(self, inbox: queue.Queue, outbox: queue.Queue, timeout: float) -> None:
        self.inbox, self.outbox, self.timeout = inbox, outbox, timeout

    @staticmethod
    def pair(timeout: float) -> tuple[QueueChannel, QueueChannel]:
        a: queue.Queue = queue.Queue()
        b: queue.Queue = queue.Queue()
        return QueueChannel(a, b, timeout), QueueChannel(b, a, timeout)

    def send(self, frame: bytes) -> None:
        self.outbox.put(frame)

    def recv(self) -> bytes:
        try:
            frame: bytes = self.inbox.get(timeout=self.timeout)
        except queue.Empty:
            raise ProtocolAbort(
                "the other party did not answer before the timeout", argument="party"
            ) from None
        return frame


class SocketChannel:
    """A :class:`~trustlab.privacy._wire.MeteredSocket` as a channel."""

    def __init__(self, sock: _wire.MeteredSocket) -> None:
        self.sock = sock

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def recv(self) -> bytes:
        return self.sock.recv()


class Party:
    """One of the two parties: its role, channel, correlated randomness and counters.

    With ``channel=None`` the party only records which randomness the schedule needs
    (openings return zeros): see :func:`record_requests`.
    """

    def __init__(
        self,
        role: int,
        channel: Any,
        material: list[tuple[str, tuple[int, ...], tuple]] | None,
        session: bytes = bytes(16),
    ) -> None:
        self.role, self.channel, self.session = role, channel, session
        self.material = deque(material or [])
        self.requests: list[tuple[str, tuple[int, ...]]] = []
        self.rounds = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.payload_sent = 0

    # -- plumbing ---------------------------------------------------------------------------
    def take(self, kind: str, shape: tuple[int, ...]) -> tuple:
        if self.channel is None:
            self.requests.append((kind, shape))
            n = {"beaver": 3, "and": 3, "dabit": 2}[kind]
            return tuple(np.zeros(shape, dtype=np.uint64) for _ in range(n))
        if not self.material:
            raise ProtocolAbort("correlated randomness ran out (schedule mismatch)", argument="dealer")
        got_kind, got_shape, arrays = self.material.popleft()
        if (got_kind, got_shape) != (kind, shape):
            raise ProtocolAbort("correlated randomness does not match the schedule", argument="dealer")
        return arrays

    def exchange(self, mine: np.ndarray, expect: int | None = None) -> np.ndarray:
        """Send ``mine`` and receive the other party's array of ``expect`` words (default: as many)."""
        data = np.ascontiguousarray(mine, dtype=np.uint64)
        words = data.size if expect is None else expect
        self.rounds += 1
        if self.channel is None:
            return np.zeros(words, dtype=np.uint64)
        frame = _wire.pack(MPC, self.session, self.rounds, self.role, data.tobytes())
        self.channel.send(frame)
        self.bytes_sent += len(frame)
        self.payload_sent += data.nbytes
        raw = self.channel.recv()
        self.bytes_received += len(raw)
        fr = _wire.unpack(raw, f"party {1 - self.role}")
        if (fr.kind, fr.session, fr.sender) != (MPC, self.session, 1 - self.role):
            raise ProtocolAbort(
                f"message from party {1 - self.role} of another session or sender", argument="frame"
            )
        if fr.round != self.rounds:
            raise ProtocolAbort(
                f"message for round {fr.round} in round {self.rounds} from party {1 - self.role} "
                "(replayed or dropped?)",
                argument="round",
            )
        if len(fr.body) != 8 * words:
            raise ProtocolAbort(f"message of the wrong length from party {1 - self.role}", argument="frame")
        return np.frombuffer(fr.body, dtype=np.uint64).copy()

    # -- arithmetic ---------------------------------------------------------------------------
    def open(self, share: np.ndarray) -> np.ndarray:
        """Reveal an additively shared array to both parties."""
        return share + self.exchange(share).reshape(share.shape)

    def mul(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Shares of ``x * y`` (elementwise, mod 2**64) by one Beaver triple per element."""
        a, b, c = self.take("beaver", x.shape)
        e_f = self.open(np.concatenate([(x - a).ravel(), (y - b).ravel()]))
        e, f = e_f[: x.size].reshape(x.shape), e_f[x.size :].reshape(x.shape)
        z = c + e * b + f * a
        return z + e * f if self.role == 0 else z

    def and_(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """XOR shares of ``x & y`` on 64-bit words by one AND triple per word."""
        a, b, c = self.take("and", x.shape)
        mine = np.concatenate([(x ^ a).ravel(), (y ^ b).ravel()])
        both = mine ^ self.exchange(mine)
        e, f = both[: x.size].reshape(x.shape), both[x.size :].reshape(x.shape)
        z = c ^ (e & b) ^ (f & a)
        return z ^ (e & f) if self.role == 0 else z

    def msb(self, s: np.ndarray) -> np.ndarray:
        """XOR shares (0/1 words) of the top bit of the shared value: 7 rounds (Kogge-Stone carry)."""
        low = s & _LOW63
        zero = np.zeros_like(low)
        g = self.and_(low, zero) if self.role == 0 else self.and_(zero, low)
        p = low
        for shift in (1, 2, 4, 8, 16, 32):
            sh = U64(shift)
            both = self.and_(np.concatenate([p, p]), np.concatenate([g << sh, p << sh]))
            g, p = g ^ both[: low.size], both[low.size :]
        return ((s >> U64(63)) ^ (g >> U64(62))) & U64(1)

    def b2a(self, bits: np.ndarray) -> np.ndarray:
        """Additive shares of XOR-shared bits (one doubly shared random bit each, 1 round)."""
        r_bool, r_arith = self.take("dabit", bits.shape)
        mine = bits ^ r_bool
        c = mine ^ self.exchange(mine)
        out = r_arith - U64(2) * c * r_arith
        return out + c if self.role == 0 else out

    def compare_swap(self, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``lo``, ``hi`` (column 0 the key) swapped where ``hi``'s key is smaller: 9 rounds."""
        bit = self.b2a(self.msb(hi[:, 0] - lo[:, 0]))
        t = self.mul(np.repeat(bit[:, None], lo.shape[1], axis=1), hi - lo)
        return lo + t, hi - t


def record_requests(run: Callable[[Party], Any]) -> list[tuple[str, tuple[int, ...]]]:
    """The randomness a party's schedule consumes, in order (``run`` is called on a recorder)."""
    recorder = Party(0, None, None)
    run(recorder)
    return recorder.requests


def deal(requests: list[tuple[str, tuple[int, ...]]]) -> tuple[list, list]:
    """The dealer: both parties' correlated randomness for ``requests`` (from ``secrets``)."""
    mats: tuple[list, list] = ([], [])
    parts: tuple[tuple[Any, ...], tuple[Any, ...]]
    for kind, shape in requests:
        if kind == "beaver":
            a0, a1, b0, b1, c0 = (rand_words(shape) for _ in range(5))
            c1 = (a0 + a1) * (b0 + b1) - c0
            parts = ((a0, b0, c0), (a1, b1, c1))
        elif kind == "and":
            a0, a1, b0, b1, c0 = (rand_words(shape) for _ in range(5))
            c1 = ((a0 ^ a1) & (b0 ^ b1)) ^ c0
            parts = ((a0, b0, c0), (a1, b1, c1))
        else:  # dabit: a random bit, XOR-shared and additively shared
            r = rand_words(shape) & U64(1)
            x0 = rand_words(shape) & U64(1)
            s0 = rand_words(shape)
            parts = ((x0, s0), (x0 ^ r, r - s0))
        for role in (0, 1):
            mats[role].append((kind, shape, parts[role]))
    return mats
