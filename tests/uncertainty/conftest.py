"""Single-threaded BLAS for these tests, and the noisy instruction items of the label-smoothing tests.

On a shared 2-core machine, OpenBLAS's default threads oversubscribe the cores: a 1000 x 100
SVD measured 1.1 s instead of 0.02 s under load, making this folder 40x slower. The results
do not depend on the thread count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="module")
def _single_thread_blas() -> Iterator[None]:
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _noisy_answer_items(n: int, seed: int, noise: float = 0.4) -> tuple[Any, np.ndarray]:
    """Instruction-style items ``x1 x2 x3 SEP answer``: answer ``12 + x1 mod 4``, else a random one."""
    from trustlab.lm.corpora import TokenData

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, (n, 3))
    y = np.where(rng.random(n) < noise, rng.integers(0, 4, n), x[:, 0] % 4)
    tokens = np.c_[x, np.full(n, 11), 12 + y]
    mask = np.zeros_like(tokens, dtype=bool)
    mask[:, -1] = True  # only the response is supervised
    return TokenData(tokens, mask, 16), 12 + y


@pytest.fixture(scope="session")
def noisy_answers() -> Callable[..., tuple[Any, np.ndarray]]:
    """``noisy_answers(n, seed, noise=0.4) -> (TokenData, answer token ids)``."""
    return _noisy_answer_items
