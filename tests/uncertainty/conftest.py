"""Single-threaded BLAS for these tests.

On a shared 2-core machine, OpenBLAS's default threads oversubscribe the cores: a 1000 x 100
SVD measured 1.1 s instead of 0.02 s under load, making this folder 40x slower. The results
do not depend on the thread count.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="module")
def _single_thread_blas() -> Iterator[None]:
    with threadpool_limits(limits=1, user_api="blas"):
        yield
