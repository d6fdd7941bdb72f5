"""Frames, sealed messages and socket I/O for the secure-aggregation protocols (private module).

A frame is a 33-byte header (magic ``TLJ1``, type, 16-byte session id, round, sender,
body length) and a body. Messages to a server are sealed to its X25519 public key
(ephemeral X25519, HKDF-SHA256, ChaCha20-Poly1305) with the header as associated data,
so a frame cannot be replayed into another round, session, server or sender id. Every
failure is a :class:`ProtocolAbort` that names the step and party, never a value.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from trustlab.errors import TrustlabError

__all__ = [
    "HEADER",
    "Frame",
    "MeteredSocket",
    "ProtocolAbort",
    "open_sealed",
    "pack",
    "public_bytes",
    "seal",
    "unpack",
]

MAGIC = b"TLJ1"
HEADER = struct.Struct(">4sB16sIII")
MAX_BODY = 1 << 30
SEAL_OVERHEAD = 32 + 16  # ephemeral key + Poly1305 tag

# frame types
UP0, UP1, ROSTER, RESULT, PW_KEY, PW_KEYS, PW_MASKED, PW_RESULT, HELLO = range(1, 10)
SERVER_ID = (0xFFFFFFF0, 0xFFFFFFF1)


class ProtocolAbort(TrustlabError, RuntimeError):
    """A secure-aggregation run stopped: a message was malformed, replayed, late or inconsistent.

    The message names the step and the party (``argument``) that failed; it never holds a
    party's input.
    """


@dataclass(frozen=True)
class Frame:
    """One parsed frame: header fields and the raw body."""

    kind: int
    session: bytes
    round: int
    sender: int
    body: bytes

    @property
    def header(self) -> bytes:
        return HEADER.pack(MAGIC, self.kind, self.session, self.round, self.sender, len(self.body))


def pack(kind: int, session: bytes, rnd: int, sender: int, body: bytes) -> bytes:
    """Serialise a frame."""
    return HEADER.pack(MAGIC, kind, session, rnd, sender, len(body)) + body


def unpack(data: bytes, where: str) -> Frame:
    """Parse one whole frame; a short, long or foreign frame aborts."""
    if len(data) < HEADER.size:
        raise ProtocolAbort(f"truncated frame from {where}", argument=where)
    magic, kind, session, rnd, sender, length = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ProtocolAbort(f"malformed frame from {where} (bad magic)", argument=where)
    if len(data) != HEADER.size + length:
        raise ProtocolAbort(f"truncated frame from {where} (length mismatch)", argument=where)
    return Frame(kind, session, rnd, sender, data[HEADER.size :])


def public_bytes(key: X25519PrivateKey) -> bytes:
    """The raw 32-byte public key of an X25519 private key."""
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _kdf(shared: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"trustlab/janus/v1" + info).derive(
        shared
    )


def seal(server_pk: bytes, header: bytes, payload: bytes) -> bytes:
    """``eph_pk || ChaCha20-Poly1305(payload)`` under a key agreed with ``server_pk``; header as AD."""
    eph = X25519PrivateKey.generate()
    eph_pk = public_bytes(eph)
    key = _kdf(eph.exchange(X25519PublicKey.from_public_bytes(server_pk)), eph_pk + server_pk)
    return eph_pk + ChaCha20Poly1305(key).encrypt(bytes(12), payload, header)


def open_sealed(server_sk: X25519PrivateKey, header: bytes, blob: bytes, where: str) -> bytes:
    """Open :func:`seal`'s output; a forged, moved or truncated message aborts."""
    if len(blob) < SEAL_OVERHEAD:
        raise ProtocolAbort(f"truncated sealed message from {where}", argument=where)
    eph_pk, ct = blob[:32], blob[32:]
    try:
        shared = server_sk.exchange(X25519PublicKey.from_public_bytes(eph_pk))
        key = _kdf(shared, eph_pk + public_bytes(server_sk))
        return ChaCha20Poly1305(key).decrypt(bytes(12), ct, header)
    except (InvalidTag, ValueError) as exc:
        raise ProtocolAbort(
            f"message from {where} could not be authenticated (tampered, replayed or for another round)",
            argument=where,
        ) from exc


def with_sealed_header(kind: int, session: bytes, rnd: int, sender: int, payload_len: int) -> bytes:
    """The header of a frame whose body will be a sealed ``payload_len``-byte payload."""
    return HEADER.pack(MAGIC, kind, session, rnd, sender, payload_len + SEAL_OVERHEAD)


class MeteredSocket:
    """A socket that sends and receives whole frames and counts every byte and frame."""

    def __init__(self, sock: socket.socket, where: str, timeout: float) -> None:
        self.sock = sock
        self.where = where
        sock.settimeout(timeout)
        self.bytes_sent = 0
        self.bytes_received = 0
        self.frames_sent = 0
        self.frames_received = 0

    def send(self, frame: bytes) -> None:
        try:
            self.sock.sendall(frame)
        except OSError as exc:
            raise ProtocolAbort(
                f"could not send to {self.where}: connection lost", argument=self.where
            ) from exc
        self.bytes_sent += len(frame)
        self.frames_sent += 1

    def _exact(self, n: int) -> bytes:
        chunks, got = [], 0
        while got < n:
            try:
                chunk = self.sock.recv(min(n - got, 1 << 20))
            except TimeoutError as exc:
                raise ProtocolAbort(
                    f"{self.where} did not answer before the timeout", argument=self.where
                ) from exc
            except OSError as exc:
                raise ProtocolAbort(f"connection to {self.where} failed", argument=self.where) from exc
            if not chunk:
                raise ProtocolAbort(
                    f"truncated frame from {self.where} (connection closed)", argument=self.where
                )
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def recv(self) -> bytes:
        head = self._exact(HEADER.size)
        magic, *_, length = HEADER.unpack(head)
        if magic != MAGIC or length > MAX_BODY:
            raise ProtocolAbort(f"malformed frame from {self.where}", argument=self.where)
        frame = head + self._exact(length)
        self.bytes_received += len(frame)
        self.frames_received += 1
        return frame

    def close(self) -> None:
        self.sock.close()
