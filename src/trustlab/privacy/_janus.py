"""Janus's parties as message-in, message-out state machines (private module).

The public entry points, the simulator and the process runner are in
:mod:`trustlab.privacy.secure_agg`; the protocol is written down in
docs/privacy/secure-aggregation.md. Nothing here touches a socket: every method takes
and returns whole frames (bytes), so the simulator and the socket runner exchange the
very same bytes.
"""

from __future__ import annotations

import hashlib
import secrets
import struct
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from trustlab.errors import DataError, ParameterError
from trustlab.privacy import _commit, _field, _wire
from trustlab.privacy._wire import ProtocolAbort

__all__ = ["JanusClient", "JanusParams", "JanusServer"]

_PT = 32 + 33  # scalar + point
_ROSTER_ITEM = struct.Struct(">I33s")


@dataclass(frozen=True)
class JanusParams:
    """Public parameters of a Janus aggregation session.

    Parameters
    ----------
    dim : int
        Length ``l`` of every client's vector.
    frac_bits : int, default=16
        Fixed-point precision: a value travels as ``round(x * 2**frac_bits)`` (error at most
        ``2**-(frac_bits + 1)`` per value and client).
    bound : float, default=1.0
        Public clip bound: every value must satisfy ``|x| <= bound``.
    min_clients : int, default=2
        A round with fewer kept clients aborts.
    max_clients : int, default=10_000
        Capacity: ``max_clients * round(bound * 2**frac_bits)`` must stay below ``(p-1)/2``
        with ``p = 2**61 - 1`` so that the sum never wraps.
    session : bytes, optional
        16-byte session id bound into every frame (random when omitted).

    Examples
    --------
    >>> p = JanusParams(dim=3, frac_bits=8)
    >>> p.dim, p.bound, len(p.session)
    (3, 1.0, 16)
    """

    dim: int
    frac_bits: int = 16
    bound: float = 1.0
    min_clients: int = 2
    max_clients: int = 10_000
    session: bytes = field(default_factory=lambda: secrets.token_bytes(16))

    def __post_init__(self) -> None:
        for name in ("dim", "frac_bits", "min_clients", "max_clients"):
            v = getattr(self, name)
            if (
                not isinstance(v, int | np.integer)
                or isinstance(v, bool)
                or v < (0 if name == "frac_bits" else 1)
            ):
                raise ParameterError(f"{name} must be a positive integer, got {v!r}", argument=name)
        if self.min_clients < 2:
            raise ParameterError(
                "min_clients must be at least 2 (one client's sum is its input)", argument="min_clients"
            )
        if not (isinstance(self.bound, int | float) and np.isfinite(self.bound) and self.bound > 0):
            raise ParameterError(
                f"bound must be a positive finite number, got {self.bound!r}", argument="bound"
            )
        if self.max_clients * round(self.bound * 2**self.frac_bits) >= (_field.PRIME - 1) // 2:
            raise ParameterError(
                "max_clients * bound * 2**frac_bits must stay below 2**60: "
                "lower frac_bits, bound or max_clients",
                argument="frac_bits",
            )
        if not isinstance(self.session, bytes) or len(self.session) != 16:
            raise ParameterError("session must be 16 bytes", argument="session")


def _roster_digest(params: JanusParams, rnd: int, ids: list[int]) -> bytes:
    h = hashlib.sha256(b"trustlab/janus/roster" + params.session + rnd.to_bytes(4, "big"))
    h.update(np.asarray(sorted(ids), dtype=">u4").tobytes())
    return h.digest()


class JanusClient:
    """One client: :meth:`upload` makes its two sealed messages, :meth:`finish` verifies the sum.

    Parameters
    ----------
    params : JanusParams
        The session's public parameters.
    index : int
        This client's id (``0 <= index < 2**32 - 16``), unique in a round.
    server_keys : tuple of bytes
        The raw X25519 public keys of S0 and S1.

    Examples
    --------
    One round by hand (:func:`~trustlab.privacy.secure_agg.simulate_janus` does the same):

    >>> import numpy as np
    >>> p = JanusParams(dim=2)
    >>> s0, s1 = JanusServer(p, 0), JanusServer(p, 1)
    >>> keys = (s0.public_key, s1.public_key)
    >>> clients = [JanusClient(p, i, keys) for i in range(2)]
    >>> for c, x in zip(clients, ([0.5, -0.25], [0.25, 0.5])):
    ...     f0, f1 = c.upload(np.array(x), rnd=1)
    ...     _ = s0.receive(f0), s1.receive(f1)
    >>> r0, r1 = s0.roster(), s1.roster()
    >>> s0.merge(r1), s1.merge(r0)
    ([0, 1], [0, 1])
    >>> rep0, rep1 = s0.replies(), s1.replies()
    >>> clients[0].finish(rep0[0], rep1[0])
    array([0.75, 0.25])
    """

    def __init__(self, params: JanusParams, index: int, server_keys: tuple[bytes, bytes]) -> None:
        if not isinstance(index, int | np.integer) or not 0 <= index < _wire.SERVER_ID[0]:
            raise ParameterError(
                f"index must be an integer in [0, 2**32 - 16), got {index!r}", argument="index"
            )
        self.params = params
        self.index = int(index)
        self.server_keys = server_keys
        self._round = -1
        self._reply_keys: tuple[bytes, bytes] = (b"", b"")

    def upload(self, values: np.ndarray, rnd: int) -> tuple[bytes, bytes]:
        """Mask, commit and seal ``values`` for round ``rnd``: the frames for S0 and S1.

        Parameters
        ----------
        values : numpy.ndarray of shape (params.dim,)
            This client's vector, ``|x| <= params.bound``.
        rnd : int
            The round number (bound into both frames).

        Returns
        -------
        tuple of (bytes, bytes)
            The sealed frame for S0 (masked vector, its share of the commitment randomness,
            the commitment) and for S1 (the mask seed, the other share, the commitment).
        """
        p = self.params
        arr = np.asarray(values, dtype=float)
        if arr.shape != (p.dim,):
            raise DataError(f"values must have shape ({p.dim},), got {arr.shape}", argument="values")
        v = _field.encode_fixed(arr, p.frac_bits, p.bound)
        seed = secrets.token_bytes(32)
        y = _field.fadd(_field.from_signed(v), _field.prg_field(seed, p.dim))
        a, b = _commit.random_scalar(), _commit.random_scalar()
        c = _commit.commit(v, a + b)
        self._round = int(rnd)
        self._reply_keys = (secrets.token_bytes(32), secrets.token_bytes(32))
        body0 = self._reply_keys[0] + a.to_bytes(32, "big") + c + y.astype("<u8").tobytes()
        body1 = self._reply_keys[1] + seed + b.to_bytes(32, "big") + c
        frames = []
        for role, (kind, body) in enumerate(((_wire.UP0, body0), (_wire.UP1, body1))):
            header = _wire.with_sealed_header(kind, p.session, self._round, self.index, len(body))
            frames.append(header + _wire.seal(self.server_keys[role], header, body))
        return frames[0], frames[1]

    def _open_reply(self, role: int, data: bytes) -> tuple[int, bytes, np.ndarray, int, bytes]:
        where = f"server S{role}"
        fr = _wire.unpack(data, where)
        if (fr.kind, fr.session, fr.round, fr.sender) != (
            _wire.RESULT,
            self.params.session,
            self._round,
            _wire.SERVER_ID[role],
        ):
            raise ProtocolAbort(f"reply from {where} is for another round, session or server", argument=where)
        try:
            body = ChaCha20Poly1305(self._reply_keys[role]).decrypt(bytes(12), fr.body, fr.header)
        except Exception as exc:  # InvalidTag or a short body
            raise ProtocolAbort(f"reply from {where} could not be authenticated", argument=where) from exc
        n_vec = 8 * self.params.dim
        if len(body) != 4 + 32 + n_vec + _PT:
            raise ProtocolAbort(f"malformed reply from {where} (wrong length)", argument=where)
        count = int.from_bytes(body[:4], "big")
        digest = body[4:36]
        vec = np.frombuffer(body[36 : 36 + n_vec], dtype="<u8").astype(np.uint64)
        scalar = int.from_bytes(body[36 + n_vec : 68 + n_vec], "big")
        return count, digest, vec, scalar, body[68 + n_vec :]

    def finish(self, reply0: bytes, reply1: bytes) -> np.ndarray:
        """Check both servers' replies against each other and the commitment; return the sum.

        Parameters
        ----------
        reply0, reply1 : bytes
            The reply frames of S0 and S1 for this client.

        Returns
        -------
        numpy.ndarray of shape (params.dim,)
            The verified sum of the kept clients' vectors (fixed-point decoded).

        Raises
        ------
        ProtocolAbort
            If the servers disagree on the participants or the commitment, or the sum does
            not open the commitment (a server tampered), or a reply is malformed or late.
        """
        n0, h0, y, a, c0 = self._open_reply(0, reply0)
        n1, h1, k, b, c1 = self._open_reply(1, reply1)
        if n0 != n1 or h0 != h1:
            raise ProtocolAbort("the servers disagree on the participants of the round", argument="roster")
        if n0 < self.params.min_clients:
            raise ProtocolAbort(f"too few clients in the round ({n0} < min_clients)", argument="min_clients")
        if c0 != c1:
            raise ProtocolAbort("the servers disagree on the aggregate commitment", argument="commitment")
        x = _field.to_signed(_field.fsub(y, k))
        if np.any(np.abs(x) > n0 * round(self.params.bound * 2**self.params.frac_bits)):
            raise ProtocolAbort("the aggregate failed verification (out of range)", argument="aggregate")
        try:
            ok = _commit.commit(x, (a + b) % _commit.ORDER) == c0
        except ValueError:
            ok = False
        if not ok:
            raise ProtocolAbort(
                "the aggregate failed verification against the commitment", argument="aggregate"
            )
        return _field.decode_fixed(x, self.params.frac_bits)


class JanusServer:
    """Server S0 (``role=0``: masked vectors) or S1 (``role=1``: mask seeds).

    Parameters
    ----------
    params : JanusParams
        The session's public parameters.
    role : {0, 1}
        Which server.
    key : X25519PrivateKey, optional
        Long-term key (generated when omitted); :attr:`public_key` is what clients need.

    Examples
    --------
    >>> s0 = JanusServer(JanusParams(dim=4), role=0)
    >>> len(s0.public_key), s0.round
    (32, 1)

    See Also
    --------
    JanusClient : a whole round, server and client side.
    """

    def __init__(self, params: JanusParams, role: int, key: X25519PrivateKey | None = None) -> None:
        if role not in (0, 1):
            raise ParameterError(f"role must be 0 or 1, got {role!r}", argument="role")
        self.params, self.role = params, role
        self.key = key if key is not None else X25519PrivateKey.generate()
        self.public_key = _wire.public_bytes(self.key)
        self.start_round(1)

    def start_round(self, rnd: int) -> None:
        """Forget the previous round's messages and accept frames of round ``rnd``.

        Parameters
        ----------
        rnd : int
            The new round number.
        """
        self.round = int(rnd)
        self._got: dict[
            int, tuple[bytes, bytes, int, bytes]
        ] = {}  # id -> (reply key, vector/seed, scalar, C)
        self.kept: list[int] = []

    def receive(self, data: bytes) -> int:
        """Take one client's upload frame; returns the client id. Any defect aborts the round.

        Parameters
        ----------
        data : bytes
            A frame from :meth:`JanusClient.upload` meant for this server.

        Returns
        -------
        int
            The sending client's id. A frame of another kind, session or round, a replay, a
            wrong length or a commitment off the curve raises :class:`ProtocolAbort`.
        """
        p, where = self.params, f"client upload to S{self.role}"
        fr = _wire.unpack(data, where)
        if fr.kind != (_wire.UP0, _wire.UP1)[self.role] or fr.session != p.session:
            raise ProtocolAbort(f"{where}: frame of another type or session", argument="frame")
        if fr.round != self.round:
            raise ProtocolAbort(
                f"{where}: frame for round {fr.round} in round {self.round} (replayed?)", argument="round"
            )
        if fr.sender in self._got:
            raise ProtocolAbort(
                f"{where}: second message from client {fr.sender} in one round (replayed?)", argument="frame"
            )
        body = _wire.open_sealed(self.key, fr.header, fr.body, f"client {fr.sender}")
        want = 32 + _PT + (8 * p.dim if self.role == 0 else 32)
        if len(body) != want:
            raise ProtocolAbort(
                f"{where}: client {fr.sender} sent a vector of the wrong length", argument="dim"
            )
        if self.role == 0:
            vec, sc, c = body[32 + _PT :], body[32:64], body[64 : 64 + 33]
        else:
            vec, sc, c = body[32:64], body[64:96], body[96:129]
        if not _commit.check_point(c):
            raise ProtocolAbort(
                f"{where}: client {fr.sender} sent a commitment that is not a curve point", argument="frame"
            )
        self._got[fr.sender] = (body[:32], vec, int.from_bytes(sc, "big"), c)
        return fr.sender

    def roster(self) -> bytes:
        """The frame telling the other server which clients (and commitments) reached this one.

        Returns
        -------
        bytes
            A roster frame: (client id, commitment) for every upload received this round.
        """
        items = b"".join(_ROSTER_ITEM.pack(i, v[3]) for i, v in sorted(self._got.items()))
        return _wire.pack(_wire.ROSTER, self.params.session, self.round, _wire.SERVER_ID[self.role], items)

    def merge(self, peer_roster: bytes) -> list[int]:
        """Keep the clients that reached both servers with one commitment; returns their ids.

        Parameters
        ----------
        peer_roster : bytes
            The other server's :meth:`roster` frame.

        Returns
        -------
        list of int
            Sorted ids of the clients kept; fewer than ``params.min_clients`` raises
            :class:`ProtocolAbort`.
        """
        fr = _wire.unpack(peer_roster, f"server S{1 - self.role}")
        if (fr.kind, fr.session, fr.round, fr.sender) != (
            _wire.ROSTER,
            self.params.session,
            self.round,
            _wire.SERVER_ID[1 - self.role],
        ) or len(fr.body) % _ROSTER_ITEM.size:
            raise ProtocolAbort(f"malformed roster from server S{1 - self.role}", argument="roster")
        peer = dict(_ROSTER_ITEM.iter_unpack(fr.body))
        self.kept = sorted(i for i, v in self._got.items() if peer.get(i) == v[3])
        if len(self.kept) < self.params.min_clients:
            raise ProtocolAbort(
                f"too few clients reached both servers ({len(self.kept)} < "
                f"min_clients={self.params.min_clients})",
                argument="min_clients",
            )
        return self.kept

    def replies(self) -> dict[int, bytes]:
        """Aggregate over the kept clients; the sealed reply frame for each of them.

        Returns
        -------
        dict of int to bytes
            For each kept client, the reply frame (count, roster digest, this server's
            aggregate share, summed randomness and commitment), encrypted with the reply key
            the client sent.
        """
        p = self.params
        rows = [self._got[i] for i in self.kept]
        if self.role == 0:
            vec = _field.fsum(np.stack([np.frombuffer(r[1], dtype="<u8").astype(np.uint64) for r in rows]))
        else:
            vec = _field.fsum(np.stack([_field.prg_field(r[1], p.dim) for r in rows]))
        scalar = sum(r[2] for r in rows) % _commit.ORDER
        try:
            c = _commit.add_points([r[3] for r in rows])
        except ValueError as exc:
            raise ProtocolAbort("a client's commitment is not a curve point", argument="commitment") from exc
        body = (
            len(self.kept).to_bytes(4, "big")
            + _roster_digest(p, self.round, self.kept)
            + vec.astype("<u8").tobytes()
            + scalar.to_bytes(32, "big")
            + c
        )
        out = {}
        for i, r in zip(self.kept, rows, strict=True):
            header = _wire.HEADER.pack(
                _wire.MAGIC, _wire.RESULT, p.session, self.round, _wire.SERVER_ID[self.role], len(body) + 16
            )
            out[i] = header + ChaCha20Poly1305(r[0]).encrypt(bytes(12), body, header)
        return out
