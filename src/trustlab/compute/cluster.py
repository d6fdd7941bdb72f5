"""Connect to a Dask cluster (an existing scheduler, or a local one) with a timeout."""

from __future__ import annotations

import numbers
import re
import socket
import struct
import time
from typing import Any

from trustlab._param_validation import Interval, validate_params
from trustlab.errors import MissingDependencyError, ParameterError

__all__ = ["connect"]

_LOCAL = re.compile(r"^local(?::(\d+))?$")


@validate_params(
    {
        "scheduler": [str],
        "timeout": [Interval(numbers.Real, 0, 3600, closed="neither")],
        "threads_per_worker": [Interval(numbers.Integral, 1, 1024, closed="both")],
        "memory_limit": [None, str],
    }
)
def connect(
    scheduler: str,
    *,
    timeout: float = 10.0,
    threads_per_worker: int = 1,
    memory_limit: str | None = None,
) -> Any:
    """A ``dask.distributed.Client`` on an existing scheduler or on a new local cluster.

    Parameters
    ----------
    scheduler : str
        ``"tcp://HOST:PORT"`` (or ``HOST:PORT``) of a running scheduler; ``"local"`` for a
        :class:`~dask.distributed.LocalCluster` of 2 worker processes; ``"local:N"`` for
        ``N`` worker processes.
    timeout : float, default 10
        Seconds to wait for the scheduler before giving up.
    threads_per_worker : int, default 1
        Threads of each local worker (local clusters only). One thread per process keeps
        NumPy and scikit-learn from oversubscribing the cores (see docs/scale.md).
    memory_limit : str, optional
        Per-worker memory limit of a local cluster (e.g. ``"3GiB"``); Dask's default
        (the machine's memory shared evenly) when None.

    Returns
    -------
    dask.distributed.Client
        Close it (``client.close()``; for a local cluster also ``client.cluster.close()``)
        or use it as a context manager.

    Raises
    ------
    ParameterError
        ``scheduler`` is malformed, or no scheduler answered within ``timeout`` seconds
        (``argument="dask"``: the message names the address and the fix).
    MissingDependencyError
        ``dask[distributed]`` is not installed (``pip install 'trustlab[scale]'``).

    Examples
    --------
    >>> connect("tcp://127.0.0.1:1", timeout=0.5)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: no Dask scheduler answered at tcp://127.0.0.1:1 within 0.5 s...
    """
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise MissingDependencyError(
            "--dask needs dask[distributed]: pip install 'trustlab[scale]'.", argument="dask"
        ) from None
    local = _LOCAL.match(scheduler.strip())
    if local:
        n = int(local.group(1) or 2)
        if not 1 <= n <= 256:
            raise ParameterError(f"local:N needs 1 <= N <= 256 workers, got {n}.", argument="dask")
        kwargs: dict[str, Any] = {"memory_limit": memory_limit} if memory_limit else {}
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=int(threads_per_worker),
            processes=True,
            dashboard_address=None,
            **kwargs,
        )
        return Client(cluster, timeout=timeout)
    address = scheduler.strip()
    if not re.match(r"^([a-z]+://)?[A-Za-z0-9_.\-\[\]:]+:\d+$", address):
        raise ParameterError(
            f"--dask must be a scheduler address such as tcp://10.0.0.5:8786, or local / local:N; "
            f"got {scheduler!r}.",
            argument="dask",
        )
    if "://" not in address:
        address = "tcp://" + address
    try:
        if address.startswith("tcp://"):
            _probe(address, float(timeout))
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError) as exc:
        raise ParameterError(
            f"no Dask scheduler answered at {address} within {timeout:g} s ({type(exc).__name__}); "
            "start one (dask scheduler) and check the address and port, or use --dask local.",
            argument="dask",
        ) from None


_MAX_HANDSHAKE_FRAMES = 64  # a scheduler's first message has a few frames; "HTTP/1.1" reads as ~3.6e18


def _probe(address: str, timeout: float) -> None:
    """Check, within ``timeout`` seconds, that a Dask scheduler speaks at the ``tcp://`` ``address``.

    A scheduler writes its handshake as soon as it accepts a connection; its first eight
    bytes are the message's frame count (little-endian). A service that stays silent, or
    whose first bytes are not a plausible count (an HTTP server's reply), is not one:
    without this check the Dask client waits past its timeout on a silent service, and on
    an HTTP reply tries to allocate exabytes.

    Raises
    ------
    ParameterError
        ``argument="dask"``: the service is not a Dask scheduler.
    OSError
        Nothing accepts connections there (the caller says so).
    """
    host, _, port = address[len("tcp://") :].rpartition(":")
    host = host.strip("[]")
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, int(port)), timeout=timeout) as conn:
        head = b""
        why = ""
        while len(head) < 8:
            left = deadline - time.monotonic()
            if left <= 0:
                why = f"the service there accepted the connection but said nothing within {timeout:g} s"
                break
            conn.settimeout(left)
            try:
                chunk = conn.recv(8 - len(head))
            except TimeoutError:
                continue
            if not chunk:
                why = "the service there closed the connection without a Dask handshake"
                break
            head += chunk
    if not why:
        (frames,) = struct.unpack("<Q", head)
        if 1 <= frames <= _MAX_HANDSHAKE_FRAMES:
            return
        shown = head.decode("ascii", "replace") if head[:4].isascii() and head[:4].isalpha() else head.hex()
        why = f"the service there answered {shown!r}..., not a Dask handshake (an HTTP or other server?)"
    raise ParameterError(
        f"no Dask scheduler at {address}: {why}; check the address and port (a scheduler listens on 8786 "
        "by default), or use --dask local.",
        argument="dask",
    )
