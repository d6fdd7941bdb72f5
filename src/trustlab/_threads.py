"""One torch and BLAS thread inside a block, for the training loops of tiny models.

On small matrices torch's and BLAS's thread pools cost more than they gain, and on a shared or
busy machine their spinning threads oversubscribe the cores: a looped-transformer study took 7 s
of CPU on one thread and 110 s on two threads beside another busy process. The caller's settings
are restored afterwards. Usable as ``with one_thread():`` or as the decorator ``@one_thread()``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import threadpool_limits

__all__ = ["one_thread"]


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch (if imported here) and BLAS on one thread inside the block, then restore them.

    Yields
    ------
    None
    """
    try:
        import torch
    except ImportError:  # the caller reports the missing extra itself
        with threadpool_limits(limits=1):
            yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(threads)
