"""Kona: two-party private kNN classification (Euclidean triples, divide-and-conquer bubble top-k).

Party 0 holds labelled reference points, party 1 a query; party 1 learns the kNN label
(and the vote counts), party 0 nothing. Distances cost no online messages thanks to
dealer-made Euclidean triples, and the ``k`` nearest are selected in ``O(k log n)``
rounds. ``method="beaver-linear"`` is the baseline: Beaver-triple distances and a linear
bubble scan. The protocol and our reconstruction choices are in docs/privacy/mpc-knn.md.

References
----------
Guopeng Lin, Ruisheng Zhou, Shuyu Chen, Weili Han, Jin Tan, Wenjing Fang, Lei Wang, Tao Wei.
"Kona: An Efficient Privacy-Preservation Framework for KNN Classification by Communication
Optimization". ICML 2025 (PMLR 267:37996-38012).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import socket
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab.errors import DataError, ParameterError
from trustlab.privacy import _mpc2, _wire
from trustlab.privacy._mpc2 import Party, deal, rand_words, record_requests
from trustlab.privacy._wire import ProtocolAbort

__all__ = ["KNNResult", "ProtocolAbort", "kona_knn", "kona_knn_processes"]

METHODS = ("kona", "beaver-linear")


@dataclass(frozen=True)
class KNNResult:
    """Party 1's output and the cost of the online phase.

    Attributes
    ----------
    label : int
        The predicted class (most votes among the ``k`` nearest; ties to the smaller class).
    counts : ndarray of shape (n_classes,)
        Votes per class among the ``k`` nearest (party 1 learns them).
    rounds : int
        Online rounds (one round: both parties send, then both receive).
    bytes_sent : tuple of int
        Online bytes each party sent (frames with their 33-byte headers), inputs included.
    payload_sent : tuple of int
        The same without the headers (the ring elements alone, 8 bytes each).
    offline_words : int
        64-bit words of dealer randomness each party received.
    method, backend : str
        ``"kona"`` or ``"beaver-linear"``; ``"threads"`` or ``"processes"``.

    See Also
    --------
    kona_knn : builds it (its example prints one).
    """

    label: int
    counts: np.ndarray
    rounds: int
    bytes_sent: tuple[int, int]
    payload_sent: tuple[int, int]
    offline_words: int
    method: str
    backend: str


def _encode(values: np.ndarray, name: str, bound: float, frac_bits: int) -> np.ndarray:
    if not np.all(np.isfinite(values)):
        raise DataError(f"{name} holds NaN or inf: pass finite numbers", argument=name)
    if np.any(np.abs(values) > bound):
        raise DataError(f"{name} exceeds the public bound {bound}: clip or rescale it", argument=name)
    return np.rint(values * float(2**frac_bits)).astype(np.int64).view(np.uint64)


def _validate(reference, labels, query, k, n_classes, bound, frac_bits, method):
    ref = np.asarray(reference, dtype=float)
    q = np.asarray(query, dtype=float)
    lab = np.asarray(labels)
    if ref.ndim != 2 or ref.shape[0] < 1:
        raise DataError(
            f"reference must be a non-empty 2-D array, got shape {ref.shape}", argument="reference"
        )
    if q.shape != (ref.shape[1],):
        raise DataError(f"query must have shape ({ref.shape[1]},), got {q.shape}", argument="query")
    if lab.shape != (ref.shape[0],) or not np.issubdtype(lab.dtype, np.integer):
        raise DataError("labels must be integers, one per reference row", argument="labels")
    if not isinstance(n_classes, int) or n_classes < 2 or lab.min() < 0 or lab.max() >= n_classes:
        raise ParameterError("n_classes must be an integer >= 2 covering every label", argument="n_classes")
    if not isinstance(k, int) or not 1 <= k <= ref.shape[0]:
        raise ParameterError(f"k must be an integer in [1, {ref.shape[0]}], got {k!r}", argument="k")
    if method not in METHODS:
        raise ParameterError(f"method must be one of {METHODS}, got {method!r}", argument="method")
    if not (np.isfinite(bound) and bound > 0):
        raise ParameterError("bound must be a positive finite number", argument="bound")
    if ref.shape[1] * (2 * bound * 2**frac_bits) ** 2 >= 2.0**62:
        raise ParameterError(
            "squared distances would overflow: m * (2 * bound * 2**frac_bits)**2 must stay below 2**62; "
            "lower frac_bits or bound",
            argument="frac_bits",
        )
    onehot = np.zeros((ref.shape[0], n_classes), dtype=np.uint64)
    onehot[np.arange(ref.shape[0]), lab] = 1
    return _encode(ref, "reference", bound, frac_bits), onehot, _encode(q, "query", bound, frac_bits)


def _protocol(party: Party, inp: dict[str, np.ndarray], n: int, m: int, c: int, k: int, method: str):
    role = party.role
    if role == 0:  # P0 masks its points (Kona) or shares them (baseline), and shares its labels
        r_lab = rand_words((n, c)) if party.channel is not None else np.zeros((n, c), np.uint64)
        a_msg = inp["a"] - inp["u"]
        got = party.exchange(np.concatenate([a_msg.ravel(), r_lab.ravel()]), expect=m)
        lab, x_msg = inp["onehot"] - r_lab, got
    else:
        got = party.exchange(inp["x"] - inp["v"], expect=n * m + n * c)
        a_msg, lab, x_msg = got[: n * m].reshape(n, m), got[n * m :].reshape(n, c), inp["x"] - inp["v"]
    if method == "kona":  # D = X - A is public; the Euclidean triple turns |D + v - u|^2 into local sums
        D = x_msg[None, :] - a_msg
        if role == 0:
            d = (D * D).sum(axis=1) - np.uint64(2) * (D * inp["u"]).sum(axis=1) + inp["w"]
        else:
            d = np.uint64(2) * (D * inp["v"][None, :]).sum(axis=1) + inp["w"]
    else:  # baseline: A and X are the other party's additive shares of a and x (u, v its own)
        diff = (x_msg[None, :] - inp["u"]) if role == 0 else (inp["v"][None, :] - a_msg)
        d = party.mul(diff, diff).sum(axis=1)
    rows = np.column_stack([d, lab])
    chosen = []
    for _ in range(k):
        cur, length = rows, rows.shape[0]
        if method == "kona":  # divide-and-conquer bubble: halve the active prefix
            cur = cur.copy()
            while length > 1:
                h, off = length // 2, length - length // 2
                lo, hi = party.compare_swap(cur[:h], cur[off : off + h])
                cur[:h], cur[off : off + h] = lo, hi
                length = off
        else:  # linear bubble scan: one compare-and-swap after the other
            cur = cur.copy()
            for i in range(length - 1, 0, -1):
                lo, hi = party.compare_swap(cur[i - 1 : i], cur[i : i + 1])
                cur[i - 1 : i], cur[i : i + 1] = lo, hi
        chosen.append(cur[0, 1:])
        rows = cur[1:]
    counts = np.asarray(np.sum(chosen, axis=0, dtype=np.uint64))
    got = party.exchange(counts if role == 0 else np.zeros(0, np.uint64), expect=0 if role == 0 else c)
    return None if role == 0 else (counts + got).astype(np.int64)


def _inputs(reference, onehot, query, method):
    """The dealer's offline masks and Euclidean triples, and each party's input dict."""
    n, m = reference.shape
    u, v = rand_words((n, m)), rand_words(m)
    w0 = rand_words(n)
    w = ((u - v[None, :]) ** np.uint64(2)).sum(axis=1) if method == "kona" else np.zeros(n, np.uint64)
    return (
        {"a": reference, "onehot": onehot, "u": u, "w": w0 if method == "kona" else w},
        {"x": query, "v": v, "w": w - w0 if method == "kona" else w},
        2 * n * m + m + 2 * n,
    )


def _prepare(reference, labels, query, k, n_classes, bound, frac_bits, method):
    ref, onehot, q = _validate(reference, labels, query, k, n_classes, bound, frac_bits, method)
    n, m = ref.shape
    zeros = {"a": ref * 0, "onehot": onehot * 0, "u": ref * 0, "w": np.zeros(n, np.uint64)}
    requests = record_requests(lambda p: _protocol(p, zeros, n, m, n_classes, k, method))
    mat0, mat1 = deal(requests)
    in0, in1, mask_words = _inputs(ref, onehot, q, method)
    words = mask_words + sum(
        3 * int(np.prod(s)) if kind != "dabit" else 2 * int(np.prod(s)) for kind, s in requests
    )
    return (n, m), (in0, in1), (mat0, mat1), words // 2


def _result(counts, parties, words, method, backend):
    if counts is None:
        raise ProtocolAbort("party 1 obtained no result", argument="party 1")
    rounds = {p["rounds"] for p in parties}
    return KNNResult(
        label=int(np.argmax(counts)),
        counts=counts,
        rounds=max(rounds),
        bytes_sent=(parties[0]["bytes"], parties[1]["bytes"]),
        payload_sent=(parties[0]["payload"], parties[1]["payload"]),
        offline_words=words,
        method=method,
        backend=backend,
    )


def kona_knn(
    reference: Any,
    labels: Any,
    query: Any,
    *,
    k: int = 5,
    n_classes: int | None = None,
    bound: float = 1.0,
    frac_bits: int = 8,
    method: str = "kona",
    timeout: float = 60.0,
) -> KNNResult:
    """Classify ``query`` by its ``k`` nearest ``reference`` rows, privately between two parties.

    Both parties run in this process (two threads) and exchange the real frames through
    in-memory queues; :func:`kona_knn_processes` runs them as processes over a socket and
    gives the same result, rounds and bytes.

    Parameters
    ----------
    reference : array-like of shape (n, m)
        Party 0's points, ``|value| <= bound``.
    labels : array-like of int, shape (n,)
        Party 0's labels in ``0..n_classes-1``.
    query : array-like of shape (m,)
        Party 1's point.
    k : int, default=5
        Neighbours.
    n_classes : int, optional
        Number of classes (public); default ``max(labels) + 1``.
    bound : float, default=1.0
        Public bound on every feature.
    frac_bits : int, default=8
        Fixed-point precision of the features (distances are exact on that grid).
    method : {"kona", "beaver-linear"}, default="kona"
        Kona, or the baseline (Beaver-triple distances, linear bubble scan).
    timeout : float, default=60.0
        Seconds a party waits for the other before aborting.

    Returns
    -------
    KNNResult
        Party 1's label and vote counts, and the online rounds and bytes.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.mpc_knn import kona_knn
    >>> ref = np.array([[0.0, 0.0], [0.1, 0.0], [0.9, 1.0], [1.0, 0.9], [0.0, 0.1]])
    >>> kona_knn(ref, np.array([0, 0, 1, 1, 0]), np.array([0.8, 0.8]), k=3).label
    1
    """
    n_classes = int(np.max(labels)) + 1 if n_classes is None else n_classes
    (n, m), (in0, in1), (mat0, mat1), words = _prepare(
        reference, labels, query, k, n_classes, bound, frac_bits, method
    )
    ch0, ch1 = _mpc2.QueueChannel.pair(timeout)
    parties = [Party(0, ch0, mat0), Party(1, ch1, mat1)]
    out: list[Any] = [None, None]
    errors: list[BaseException] = []

    def _run(role, inp):
        try:
            out[role] = _protocol(parties[role], inp, n, m, n_classes, k, method)
        except BaseException as exc:  # reported below, after both threads end
            errors.append(exc)

    threads = [threading.Thread(target=_run, args=(r, i)) for r, i in ((0, in0), (1, in1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    stats = [{"rounds": p.rounds, "bytes": p.bytes_sent, "payload": p.payload_sent} for p in parties]
    return _result(out[1], stats, words, method, "threads")


def _party_process(role, inp, mat, dims, port, timeout, out):
    n, m, c, k, method = dims
    try:
        if role == 0:
            listener = socket.create_server(("127.0.0.1", 0))
            listener.settimeout(timeout)
            out.put(("port", role, listener.getsockname()[1]))
            conn, _ = listener.accept()
            listener.close()
        else:
            conn = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        ms = _wire.MeteredSocket(conn, f"party {1 - role}", timeout)
        party = Party(role, _mpc2.SocketChannel(ms), mat)
        counts = _protocol(party, inp, n, m, c, k, method)
        ms.close()
        out.put(
            (
                "ok",
                role,
                (counts, {"rounds": party.rounds, "bytes": party.bytes_sent, "payload": party.payload_sent}),
            )
        )
    except ProtocolAbort as exc:
        out.put(("abort", role, str(exc)))
    except Exception as exc:  # never a value in the message
        out.put(("abort", role, f"party {role} failed ({type(exc).__name__})"))


def kona_knn_processes(
    reference: Any,
    labels: Any,
    query: Any,
    *,
    k: int = 5,
    n_classes: int | None = None,
    bound: float = 1.0,
    frac_bits: int = 8,
    method: str = "kona",
    timeout: float = 60.0,
) -> KNNResult:
    """:func:`kona_knn` with each party in its own process, messages over a loopback socket.

    Parameters
    ----------
    reference : array-like of shape (n, m)
        Party 0's points, ``|value| <= bound``.
    labels : array-like of int, shape (n,)
        Party 0's labels in ``0..n_classes-1``.
    query : array-like of shape (m,)
        Party 1's point.
    k : int, default=5
        Neighbours.
    n_classes : int, optional
        Number of classes (public); default ``max(labels) + 1``.
    bound : float, default=1.0
        Public bound on every feature.
    frac_bits : int, default=8
        Fixed-point precision of the features.
    method : {"kona", "beaver-linear"}, default="kona"
        Kona, or the baseline.
    timeout : float, default=60.0
        Seconds a party waits for the other (and this process for both) before aborting.

    Returns
    -------
    KNNResult
        The same label, counts, rounds and bytes as :func:`kona_knn`, with
        ``backend="processes"``.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.mpc_knn import kona_knn_processes
    >>> ref = np.array([[0.0, 0.0], [0.1, 0.0], [0.9, 1.0], [1.0, 0.9], [0.0, 0.1]])
    >>> res = kona_knn_processes(ref, np.array([0, 0, 1, 1, 0]), np.array([0.8, 0.8]), k=3)
    >>> res.label, res.counts.tolist(), res.backend
    (1, [1, 2], 'processes')
    """
    from trustlab.privacy._secagg_net import _stop

    n_classes = int(np.max(labels)) + 1 if n_classes is None else n_classes
    (n, m), inputs, mats, words = _prepare(reference, labels, query, k, n_classes, bound, frac_bits, method)
    ctx: Any = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    out = ctx.Queue()
    dims = (n, m, n_classes, k, method)
    procs = [
        ctx.Process(target=_party_process, args=(0, inputs[0], mats[0], dims, 0, timeout, out), daemon=True)
    ]
    results: dict[int, Any] = {}
    try:
        procs[0].start()
        status, role, port = out.get(timeout=timeout)
        if status != "port":
            raise ProtocolAbort(port, argument=f"party {role}")
        procs.append(
            ctx.Process(
                target=_party_process, args=(1, inputs[1], mats[1], dims, port, timeout, out), daemon=True
            )
        )
        procs[1].start()
        while len(results) < 2:
            try:
                status, role, payload = out.get(timeout=timeout)
            except queue.Empty:
                raise ProtocolAbort(
                    "the parties did not finish before the timeout", argument="timeout"
                ) from None
            if status != "ok":
                raise ProtocolAbort(payload, argument=f"party {role}")
            results[role] = payload
    finally:
        _stop(procs)
    return _result(results[1][0], [results[0][1], results[1][1]], words, method, "processes")
