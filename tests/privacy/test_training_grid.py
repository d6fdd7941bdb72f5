"""DP-SGD's released weights carry no low-bit leak, and its noise is calibrated on the PLD accountant.

Issue 27 (section 1 item 5, section 2). One step of DP-SGD with float noise
(``s + Z`` rounded in float32, as Opacus adds it) releases weights whose low bits
depend on the gradient: near zero, ``g + Z`` is an exact float difference (Sterbenz)
whose spacing is that of ``g``, while ``Z`` alone has much finer spacing there, so an
event on the weights' low bits that is impossible with the row happens often without
it. trustlab adds the noise exactly on a public grid (OpenDP's discrete Gaussian), so
every noisy sum is a multiple of the grid step and those events vanish.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("torch")

from trustlab.privacy.audit import clopper_pearson
from trustlab.privacy.training import DPSGDClassifier

D = 200  # features: 201 coordinates released per run
RUNS = 200
EPSILON = 1.5  # what the classifier claims for one step at noise multiplier 4 (it costs less)
KS = tuple(range(19, 35))


def _weights(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    clf = DPSGDClassifier(
        epsilon=EPSILON,
        delta=1e-5,
        sample_rate=1.0,
        epochs=1,  # one step, every row in it
        noise_multiplier=4.0,  # noise std 4: an exact power of two
        clip_norm=1.0,
        learning_rate=0.5,
        n_hint=1,  # divisor 1: weights = -0.5 * noisy sum, exactly
    ).fit(X, y)
    return np.concatenate([clf.coef_.ravel(), clf.intercept_])


def _events(w: np.ndarray) -> np.ndarray:
    """Per k: some coordinate is small (|w| < 2**-7) and not a multiple of 2**-k."""
    small = np.abs(w) < 2.0**-7
    return np.array([bool(np.any(small & (np.mod(w * 2.0**k, 1.0) != 0))) for k in KS])


def test_one_step_weights_have_no_low_bit_leak():
    empty = (np.zeros((0, D)), np.zeros(0))
    one = (np.ones((1, D)), np.zeros(1))  # clipped gradient 0.5/||(1..1,1)|| on every coordinate
    counts = {}
    for name, (X, y) in {"empty": empty, "one": one}.items():
        counts[name] = np.sum([_events(_weights(X, y)) for _ in range(RUNS)], axis=0)
    alpha = 0.05 / (2 * len(KS))  # Bonferroni over the events and both directions
    bound = 0.0
    for a, b in (("empty", "one"), ("one", "empty")):
        for ka, kb in zip(counts[a], counts[b], strict=True):
            lo, _ = clopper_pearson(int(ka), RUNS, alpha)
            _, hi = clopper_pearson(int(kb), RUNS, alpha)
            if lo > 0:
                bound = max(bound, math.log(lo / hi))
    assert bound <= EPSILON, (bound, counts)


def test_noisy_sums_lie_on_the_public_grid():
    clf = DPSGDClassifier(
        epsilon=EPSILON, delta=1e-5, sample_rate=1.0, epochs=1, noise_multiplier=4.0, n_hint=1
    )
    clf.fit(np.ones((3, 4)) * 0.3, np.array([0, 1, 1]))
    h = clf.release_.parameters["grid"]
    assert h == 2.0 ** (math.floor(math.log2(4.0)) - 26)
    w = np.concatenate([clf.coef_.ravel(), clf.intercept_])
    units = w / (-0.5 * h)
    assert np.array_equal(units, np.round(units))
