"""Janus: dual-server verifiable secure aggregation, simulated in process or run over sockets.

Clients mask their fixed-point vectors with one-time pads whose seeds go sealed to the
second server, commit to them with Pedersen vector commitments whose randomness is split
between the servers, and check the sum the two servers return against the summed
commitment. Per-client messages and work do not depend on the number of clients. The
protocol, the security model and our reconstruction choices are in
docs/privacy/secure-aggregation.md.

References
----------
Lang Pu, Jingjing Gu, Chao Lin, Xinyi Huang. "Janus: Dual-Server Multi-Round Secure
Aggregation with Verifiability for Federated Learning". ICML 2025.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np

from trustlab.errors import DataError
from trustlab.privacy._agg_result import AggregationResult, make_result
from trustlab.privacy._janus import JanusClient, JanusParams, JanusServer
from trustlab.privacy._wire import ProtocolAbort

__all__ = [
    "AggregationResult",
    "JanusClient",
    "JanusParams",
    "JanusServer",
    "ProtocolAbort",
    "check_updates",
    "run_janus",
    "simulate_janus",
    "simulate_pairwise",
]


def check_updates(updates: object, params: JanusParams) -> np.ndarray:
    """Validate the clients' vectors: a finite 2-D array with ``params.dim`` columns, 2+ rows.

    Parameters
    ----------
    updates : array-like of shape (n_clients, params.dim)
        One row per client.
    params : JanusParams
        Public parameters: ``dim``, ``min_clients``, ``max_clients`` and the clip ``bound``.

    Returns
    -------
    numpy.ndarray
        ``updates`` as a float array. A wrong shape, a row count outside
        ``[min_clients, max_clients]``, NaN or inf, or a value beyond ``bound`` raises
        :class:`~trustlab.errors.DataError` naming ``updates``.

    Examples
    --------
    >>> from trustlab.privacy.secure_agg import JanusParams, check_updates
    >>> check_updates([[0.5, 0.0], [1, -1]], JanusParams(dim=2)).dtype
    dtype('float64')
    """
    arr = np.asarray(updates, dtype=float) if not isinstance(updates, np.ndarray) else updates.astype(float)
    if arr.ndim != 2 or arr.shape[1] != params.dim:
        raise DataError(
            f"updates must have shape (n_clients, {params.dim}), got {arr.shape}", argument="updates"
        )
    if not params.min_clients <= arr.shape[0] <= params.max_clients:
        raise DataError(
            f"updates must have between min_clients={params.min_clients} and "
            f"max_clients={params.max_clients} rows",
            argument="updates",
        )
    if not np.all(np.isfinite(arr)):
        raise DataError("updates holds NaN or inf: pass finite numbers", argument="updates")
    if np.any(np.abs(arr) > params.bound):
        raise DataError(
            f"updates exceed the public clip bound {params.bound}: clip them first", argument="updates"
        )
    return arr


def simulate_janus(
    updates: object, params: JanusParams, *, rnd: int = 1, drop_before_s1: Iterable[int] = ()
) -> AggregationResult:
    """Run one Janus round with every party in this process, exchanging the real frames.

    Parameters
    ----------
    updates : array-like of shape (n_clients, dim)
        Client ``i``'s vector is row ``i``; ``|x| <= params.bound``.
    params : JanusParams
        Public parameters.
    rnd : int, default=1
        Round number bound into every frame.
    drop_before_s1 : iterable of int
        Clients that reach S0 but drop before their message to S1 (left out of the sum).

    Returns
    -------
    AggregationResult

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.secure_agg import JanusParams, simulate_janus
    >>> x = np.array([[0.5, -1.0], [0.25, 0.75], [0.125, 0.0]])
    >>> simulate_janus(x, JanusParams(dim=2)).aggregate
    array([ 0.875, -0.25 ])
    """
    arr = check_updates(updates, params)
    dropped = set(drop_before_s1)
    s0, s1 = JanusServer(params, 0), JanusServer(params, 1)
    for s in (s0, s1):
        s.start_round(rnd)
    clients = [JanusClient(params, i, (s0.public_key, s1.public_key)) for i in range(arr.shape[0])]
    up: dict[int, int] = {}
    secs: dict[int, float] = {}
    sbytes = [0, 0]
    for i, client in enumerate(clients):
        t0 = time.perf_counter()
        f0, f1 = client.upload(arr[i], rnd)
        secs[i] = time.perf_counter() - t0
        s0.receive(f0)
        up[i], sbytes[0] = len(f0), sbytes[0] + len(f0)
        if i not in dropped:
            s1.receive(f1)
            up[i], sbytes[1] = up[i] + len(f1), sbytes[1] + len(f1)
    r0, r1 = s0.roster(), s1.roster()
    s0.merge(r1)
    kept = s1.merge(r0)
    sbytes = [sbytes[0] + len(r0) + len(r1), sbytes[1] + len(r0) + len(r1)]
    rep0, rep1 = s0.replies(), s1.replies()
    sums, down = [], {}
    for i in kept:
        t0 = time.perf_counter()
        sums.append(clients[i].finish(rep0[i], rep1[i]))
        secs[i] += time.perf_counter() - t0
        down[i] = len(rep0[i]) + len(rep1[i])
        sbytes[0] += len(rep0[i])
        sbytes[1] += len(rep1[i])
    return make_result(sums, kept, up, down, 2, sbytes, [secs[i] for i in kept], "simulator")


def run_janus(
    updates: object, params: JanusParams, *, rnd: int = 1, n_workers: int = 2, timeout: float = 60.0
) -> AggregationResult:
    """Run one Janus round with each server in its own process and clients in worker processes.

    Every message crosses a TCP socket on 127.0.0.1 (ports chosen by the OS); bytes are
    counted on the sockets. Any party's failure or a timeout raises :class:`ProtocolAbort`
    and every process started here is stopped.

    Parameters
    ----------
    updates : array-like of shape (n_clients, dim)
        Client ``i``'s vector is row ``i``.
    params : JanusParams
        Public parameters.
    rnd : int, default=1
        Round number.
    n_workers : int, default=2
        Client processes (clients are split between them; each client has its own sockets).
    timeout : float, default=60.0
        Seconds any party waits for a message before aborting.

    Returns
    -------
    AggregationResult
        The verified sum and the bytes counted on the sockets (``backend="processes"``).

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.secure_agg import JanusParams, run_janus
    >>> x = np.array([[0.5, -1.0], [0.25, 0.75], [0.125, 0.0]])
    >>> run_janus(x, JanusParams(dim=2), n_workers=1).aggregate
    array([ 0.875, -0.25 ])
    """
    from trustlab.privacy._secagg_net import run_processes

    arr = check_updates(updates, params)
    return run_processes(arr, params, rnd=rnd, n_workers=n_workers, timeout=timeout)


def simulate_pairwise(
    updates: object, params: JanusParams, *, degree: int | None = None
) -> AggregationResult:
    """The pairwise-masking baseline (SecAgg-style, no dropout recovery) in process.

    Each pair of clients shares a pad that one adds and the other subtracts, so the pads
    cancel in the sum; nothing is verified. See
    :func:`trustlab.privacy._pairwise.simulate_pairwise`.

    Parameters
    ----------
    updates : array-like of shape (n_clients, dim)
        Client ``i``'s vector is row ``i``; ``|x| <= params.bound``.
    params : JanusParams
        Public parameters (the same encoding as Janus).
    degree : int, optional
        Neighbours each client masks with: an even number >= 2 gives a public random
        ``degree``-regular ring; None (or ``n_clients - 1`` or more) the complete graph.

    Returns
    -------
    AggregationResult
        The sum and the per-client cost (``backend="pairwise-simulator"``).

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.privacy.secure_agg import JanusParams, simulate_pairwise
    >>> x = np.array([[0.5, -1.0], [0.25, 0.75], [0.125, 0.0]])
    >>> simulate_pairwise(x, JanusParams(dim=2)).aggregate
    array([ 0.875, -0.25 ])
    """
    from trustlab.privacy._pairwise import simulate_pairwise as _run

    return _run(check_updates(updates, params), params, degree=degree)
