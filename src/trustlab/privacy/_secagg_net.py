"""Janus over loopback sockets: each server a process, clients in worker processes (private module).

The parties run the state machines of :mod:`trustlab.privacy._janus` on the frames they
read from TCP sockets bound to 127.0.0.1 (ports chosen by the OS). Bytes and frames are
counted on the sockets. A party that fails reports a one-line reason (never a value);
the coordinator then stops every process it started.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import queue
import socket
import time
from typing import Any

import numpy as np

from trustlab.privacy import _wire
from trustlab.privacy._agg_result import make_result
from trustlab.privacy._janus import JanusClient, JanusParams, JanusServer
from trustlab.privacy._wire import MeteredSocket, ProtocolAbort

__all__ = ["join_round", "run_processes", "serve", "serve_pair", "session_info"]


def _report_errors(out: Any, who: str, fn: Any, *args: Any) -> None:
    try:
        out.put(("ok", who, fn(*args)))
    except ProtocolAbort as exc:
        out.put(("abort", who, str(exc)))
    except Exception as exc:  # a bug or an OS error: report its type only, never its values
        out.put(("abort", who, f"{who} failed ({type(exc).__name__})"))


def serve(
    params: JanusParams,
    role: int,
    rnd: int,
    n_expected: int,
    timeout: float,
    listener: socket.socket,
    peer_port: int | None,
    server: JanusServer,
    hello: bytes = b"",
) -> dict[str, int]:
    """Serve one round as server ``role`` on ``listener``; S1 connects to S0 on ``peer_port``.

    A connection that opens with a ``HELLO`` frame is answered with ``hello`` (the public
    session description, see :func:`session_info`) and closed; it does not count as a client.
    """
    server.start_round(rnd)
    conns: dict[int, MeteredSocket] = {}
    peer: MeteredSocket | None = None
    peer_frame = b""
    deadline = time.monotonic() + timeout
    totals = {"bytes": 0, "clients": 0}
    try:
        while len(conns) < n_expected:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            listener.settimeout(left)
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                break
            ms = MeteredSocket(conn, "a client", timeout)
            frame = ms.recv()
            if frame[4] == _wire.ROSTER:
                peer, peer_frame = ms, frame
                continue
            if frame[4] == _wire.HELLO:
                ms.send(_wire.pack(_wire.HELLO, params.session, rnd, _wire.SERVER_ID[role], hello))
                ms.close()
                continue
            conns[server.receive(frame)] = ms
        if role == 0:
            listener.settimeout(timeout)
            while peer is None:  # late clients are turned away: the round is closed
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    raise ProtocolAbort(
                        "server S1 did not answer before the timeout", argument="server S1"
                    ) from None
                ms = MeteredSocket(conn, "server S1", timeout)
                frame = ms.recv()
                if frame[4] == _wire.ROSTER:
                    peer, peer_frame = ms, frame
                else:
                    ms.close()
            peer.where = "server S1"
            peer.send(server.roster())
        else:
            assert peer_port is not None
            peer = MeteredSocket(
                socket.create_connection(("127.0.0.1", peer_port), timeout=timeout), "server S0", timeout
            )
            peer.send(server.roster())
            peer_frame = peer.recv()
        kept = server.merge(peer_frame)
        for i, frame in server.replies().items():
            conns[i].send(frame)
        totals["clients"] = len(kept)
    finally:
        for ms in [*conns.values(), *([peer] if peer else [])]:
            totals["bytes"] += ms.bytes_sent + ms.bytes_received
            ms.close()
        listener.close()
    return totals


def _server_main(
    params: JanusParams, role: int, rnd: int, n: int, timeout: float, out: Any, inbox: Any
) -> None:
    try:
        listener = socket.create_server(("127.0.0.1", 0), backlog=min(n + 16, 4096))
        server = JanusServer(params, role)
        out.put(("ready", f"S{role}", (listener.getsockname()[1], server.public_key)))
        peer_port = inbox.get(timeout=timeout) if role == 1 else None
    except Exception as exc:
        out.put(("abort", f"server S{role}", f"server S{role} could not start ({type(exc).__name__})"))
        return
    _report_errors(out, f"server S{role}", serve, params, role, rnd, n, timeout, listener, peer_port, server)


def _client_work(
    params: JanusParams,
    ids: list[int],
    rows: np.ndarray,
    ports: tuple[int, int],
    keys: tuple[bytes, bytes],
    rnd: int,
    timeout: float,
) -> dict[int, tuple[bytes, int, int, int, float]]:
    clients, socks, secs = {}, {}, {}
    try:
        for i, row in zip(ids, rows, strict=True):
            t0 = time.perf_counter()
            c = JanusClient(params, i, keys)
            frames = c.upload(row, rnd)
            secs[i] = time.perf_counter() - t0
            clients[i] = c
            pair = []
            for role in (0, 1):
                s = socket.create_connection(("127.0.0.1", ports[role]), timeout=timeout)
                ms = MeteredSocket(s, f"server S{role}", timeout)
                pair.append(ms)
                ms.send(frames[role])
            socks[i] = pair
        out = {}
        for i, c in clients.items():
            replies = [ms.recv() for ms in socks[i]]
            t0 = time.perf_counter()
            agg = c.finish(replies[0], replies[1])
            secs[i] += time.perf_counter() - t0
            m0, m1 = socks[i]
            out[i] = (
                agg.tobytes(),
                m0.bytes_sent + m1.bytes_sent,
                m0.bytes_received + m1.bytes_received,
                m0.frames_sent + m0.frames_received,
                secs[i],
            )
        return out
    finally:
        for pair in socks.values():
            for ms in pair:
                ms.close()


def _client_main(*args: Any) -> None:
    *work, out, who = args
    _report_errors(out, who, _client_work, *work)


def _first_cause(out: Any, who: str, message: str) -> ProtocolAbort:
    """The abort to raise: a server's reason if one arrives within 0.5 s (clients then only see EOF)."""
    end = time.monotonic() + 0.5
    while not who.startswith("server") and time.monotonic() < end:
        try:
            status, other, msg = out.get(timeout=max(end - time.monotonic(), 0.01))
        except queue.Empty:
            break
        if status == "abort" and other.startswith("server"):
            who, message = other, msg
    return ProtocolAbort(message, argument=who)


def _stop(procs: list[Any]) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(5)
        if p.is_alive():  # pragma: no cover - terminate was ignored
            p.kill()
            p.join()


def run_processes(arr: np.ndarray, params: JanusParams, *, rnd: int, n_workers: int, timeout: float) -> Any:
    """Run one round as separate processes; returns an ``AggregationResult``."""
    # fork: the parties inherit the imported modules (spawn re-imports trustlab in each, seconds apiece)
    ctx: Any = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    out, inbox = ctx.Queue(), ctx.Queue()
    n = arr.shape[0]
    procs = [
        ctx.Process(
            target=_server_main,
            args=(params, role, rnd, n, timeout, out, inbox),
            daemon=True,
            name=f"server S{role}",
        )
        for role in (0, 1)
    ]
    deadline = time.monotonic() + 3 * timeout + 30
    try:
        for p in procs:
            p.start()
        ready: dict[str, Any] = {}
        results: dict[str, Any] = {}

        def _next() -> tuple[str, str, Any]:
            while True:
                try:
                    return out.get(timeout=0.2)
                except queue.Empty:
                    pass
                dead = [p.name for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise ProtocolAbort(f"{dead[0]} exited without answering", argument=dead[0])
                if time.monotonic() > deadline:
                    raise ProtocolAbort("the protocol did not finish before the timeout", argument="timeout")

        while len(ready) < 2:
            status, who, payload = _next()
            if status != "ready":
                raise ProtocolAbort(payload, argument=who)
            ready[who] = payload
        inbox.put(ready["S0"][0])
        ports = (ready["S0"][0], ready["S1"][0])
        keys = (ready["S0"][1], ready["S1"][1])
        chunks = [c for c in np.array_split(np.arange(n), max(1, min(n_workers, n))) if c.size]
        for w, idx in enumerate(chunks):
            args = (params, idx.tolist(), arr[idx], ports, keys, rnd, timeout, out, f"client worker {w}")
            procs.append(ctx.Process(target=_client_main, args=args, daemon=True, name=f"client worker {w}"))
            procs[-1].start()
        while len(results) < 2 + len(chunks):
            status, who, payload = _next()
            if status != "ok":
                raise _first_cause(out, who, payload)
            results[who] = payload
        for p in procs:
            p.join(timeout)
    finally:
        _stop(procs)
        with contextlib.suppress(Exception):
            out.close()
            inbox.close()
    per_client: dict[int, Any] = {}
    for who, payload in results.items():
        if who.startswith("client"):
            per_client.update(payload)
    kept = sorted(per_client)
    sums = [np.frombuffer(per_client[i][0], dtype=float).copy() for i in kept]
    rounds = max(per_client[i][3] for i in kept)
    return make_result(
        sums,
        kept,
        {i: per_client[i][1] for i in kept},
        {i: per_client[i][2] for i in kept},
        rounds,
        [results["server S0"]["bytes"], results["server S1"]["bytes"]],
        [per_client[i][4] for i in kept],
        "processes",
    )


def session_info(params: JanusParams, public_key: bytes, peer_port: int | None) -> bytes:
    """The public description a server hands to a joining client (JSON)."""
    return json.dumps(
        {
            "dim": params.dim,
            "frac_bits": params.frac_bits,
            "bound": params.bound,
            "min_clients": params.min_clients,
            "max_clients": params.max_clients,
            "session": params.session.hex(),
            "public_key": public_key.hex(),
            "peer_port": peer_port,
        }
    ).encode()


def _serve_fixed(
    params: JanusParams, role: int, n: int, timeout: float, ports: tuple[int, int], out: Any
) -> None:
    try:
        listener = socket.create_server(("127.0.0.1", ports[role]), backlog=min(n + 16, 4096))
        server = JanusServer(params, role)
        hello = session_info(params, server.public_key, ports[1] if role == 0 else None)
    except OSError as exc:
        out.put(
            (
                "abort",
                f"server S{role}",
                f"server S{role} could not listen on port {ports[role]} ({exc.strerror})",
            )
        )
        return
    peer = ports[0] if role == 1 else None
    _report_errors(out, f"server S{role}", serve, params, role, 1, n, timeout, listener, peer, server, hello)


def serve_pair(params: JanusParams, n_clients: int, port: int, timeout: float) -> dict[str, Any]:
    """Run S0 on ``port`` and S1 on ``port + 1`` (two processes) for one round of ``n_clients``."""
    ctx: Any = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_serve_fixed, args=(params, r, n_clients, timeout, (port, port + 1), out), name=f"S{r}"
        )
        for r in (0, 1)
    ]
    results: dict[str, Any] = {}
    try:
        for p in procs:
            p.start()
        while len(results) < 2:
            try:
                status, who, payload = out.get(timeout=2 * timeout + 10)
            except queue.Empty:
                raise ProtocolAbort(
                    "the servers did not finish before the timeout", argument="timeout"
                ) from None
            if status != "ok":
                raise ProtocolAbort(payload, argument=who)
            results[who] = payload
    finally:
        _stop(procs)
    return results


def _hello(host: str, port: int, timeout: float, who: str) -> dict[str, Any]:
    ms = MeteredSocket(socket.create_connection((host, port), timeout=timeout), who, timeout)
    try:
        ms.send(_wire.pack(_wire.HELLO, bytes(16), 0, 0, b""))
        fr = _wire.unpack(ms.recv(), who)
        info: dict[str, Any] = json.loads(fr.body)
        return info
    except (ValueError, KeyError) as exc:
        raise ProtocolAbort(f"malformed session description from {who}", argument=who) from exc
    finally:
        ms.close()


def join_round(host: str, port: int, index: int, values: np.ndarray, timeout: float) -> np.ndarray:
    """Join a round served by :func:`serve_pair` at ``host:port`` as client ``index``; returns the sum.

    The servers' public keys are fetched from the servers themselves (trust on first use:
    fine on loopback, in deployment pin them or fetch them over TLS).
    """
    try:
        info0 = _hello(host, port, timeout, "server S0")
        info1 = _hello(host, int(info0["peer_port"]), timeout, "server S1")
        params = JanusParams(
            dim=int(info0["dim"]),
            frac_bits=int(info0["frac_bits"]),
            bound=float(info0["bound"]),
            min_clients=int(info0["min_clients"]),
            max_clients=int(info0["max_clients"]),
            session=bytes.fromhex(info0["session"]),
        )
        keys = (bytes.fromhex(info0["public_key"]), bytes.fromhex(info1["public_key"]))
    except OSError as exc:
        raise ProtocolAbort(
            f"could not reach the servers at {host}:{port} ({exc.strerror})", argument="port"
        ) from exc
    except (KeyError, ValueError, TypeError) as exc:
        raise ProtocolAbort("malformed session description from the servers", argument="server S0") from exc
    if info1.get("session") != info0["session"]:
        raise ProtocolAbort("the two servers run different sessions", argument="server S1")
    client = JanusClient(params, index, keys)
    frames = client.upload(values, 1)
    socks = [
        MeteredSocket(socket.create_connection((host, p), timeout=timeout), f"server S{r}", timeout)
        for r, p in enumerate((port, int(info0["peer_port"])))
    ]
    try:
        for ms, frame in zip(socks, frames, strict=True):
            ms.send(frame)
        return client.finish(socks[0].recv(), socks[1].recv())
    finally:
        for ms in socks:
            ms.close()
