"""The result of one secure-aggregation run, shared by Janus and the pairwise baseline (private module)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

from trustlab.privacy._wire import ProtocolAbort

__all__ = ["AggregationResult", "make_result"]


@dataclass(frozen=True)
class AggregationResult:
    """The sum every client obtained, and what the run cost per client.

    Attributes
    ----------
    aggregate : ndarray of shape (dim,)
        The verified sum over ``clients`` (fixed-point exact: a multiple of ``2**-frac_bits``).
    clients : tuple of int
        The ids of the clients whose vectors are in the sum.
    bytes_up_per_client, bytes_down_per_client : int
        Bytes one client sent and received (frames with headers; the largest over clients).
    rounds_per_client : int
        Sequential message flights a client takes part in (an upload to both servers at once
        is one flight).
    server_bytes : tuple of int
        Bytes each server sent plus received, client and server-to-server traffic.
    client_seconds : float
        Median wall time of one client's own computation (measurement, not asserted).
    backend : str
        ``"simulator"``, ``"processes"`` or ``"pairwise-simulator"``.

    See Also
    --------
    trustlab.privacy.secure_agg.simulate_janus : builds it (its example prints the aggregate).
    """

    aggregate: np.ndarray
    clients: tuple[int, ...]
    bytes_up_per_client: int
    bytes_down_per_client: int
    rounds_per_client: int
    server_bytes: tuple[int, ...]
    client_seconds: float
    backend: str


def make_result(
    sums: list[np.ndarray],
    kept: list[int],
    up: dict[int, int],
    down: dict[int, int],
    rounds: int,
    sbytes: list[int],
    secs: list[float],
    backend: str,
) -> AggregationResult:
    if any(not np.array_equal(s, sums[0]) for s in sums[1:]):  # cannot happen unless verification is broken
        raise ProtocolAbort("clients obtained different sums", argument="aggregate")
    return AggregationResult(
        aggregate=sums[0],
        clients=tuple(kept),
        bytes_up_per_client=max(up[i] for i in kept),
        bytes_down_per_client=max(down[i] for i in kept),
        rounds_per_client=rounds,
        server_bytes=tuple(sbytes),
        client_seconds=statistics.median(secs),
        backend=backend,
    )
