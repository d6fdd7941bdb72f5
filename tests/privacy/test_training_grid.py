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


# -- large epsilon: the exact noise is charged by a pointwise density ratio, not TV * e^epsilon -------
def test_discrete_to_rounded_gaussian_density_ratio_and_tails():
    """|log p(z)/q(z)| <= (|z| + 1/4) / (2 s^2) + 3 e^(-2 pi^2 s^2), tails <= 3 e^(-L^2/2) (40 digits)."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    for s in (1, 3, 8, 20):
        norm = mp.fsum(mp.exp(-(mp.mpf(k) ** 2) / (2 * s * s)) for k in range(-40 * s, 40 * s + 1))
        slack = 3 * mp.exp(-2 * mp.pi**2 * s * s)
        for z in range(0, 8 * s + 1):
            p = mp.exp(-(mp.mpf(z) ** 2) / (2 * s * s)) / norm
            q = mp.ncdf((z + mp.mpf(0.5)) / s) - mp.ncdf((z - mp.mpf(0.5)) / s)
            assert abs(mp.log(p / q)) <= (z + mp.mpf(0.25)) / (2 * s * s) + slack, (s, z)
        for big_l in (1, 2, 3, 5):
            cut = int(mp.floor(big_l * s))
            tail_p = (
                2 * mp.fsum(mp.exp(-(mp.mpf(k) ** 2) / (2 * s * s)) for k in range(cut + 1, 40 * s)) / norm
            )
            tail_q = 2 * mp.ncdf(-(cut + mp.mpf(0.5)) / s)
            assert max(tail_p, tail_q) <= 3 * mp.exp(-(mp.mpf(big_l) ** 2) / 2), (s, big_l)


@pytest.mark.slow  # a full fit at large epsilon (~8 s CPU)
def test_large_epsilon_fits_with_the_default_delta_and_charges_the_grid():
    """epsilon=250 once left no room in delta=1e-6 ((1 + e^250) tau); now it pays a small epsilon share."""
    from trustlab.privacy._training_calibration import Run, run_plan

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(200, 4))
    y = (X[:, 0] > 0).astype(int)
    for eps in (1.0, 250.0):
        clf = DPSGDClassifier(epsilon=eps, delta=1e-6, sample_rate=0.1, epochs=2, n_hint=200).fit(X, y)
        p, rel = clf.release_.parameters, clf.release_
        n = p["steps"] * 5  # T P draws
        if eps == 1.0:
            assert p["grid_epsilon"] == 0.0 and 0 < p["grid_delta"] < 1e-12
        else:
            tail = 0.25e-6
            big_l = math.sqrt(2 * (math.log(3 * n / tail) + eps))
            assert p["grid_epsilon"] >= 2 * n * big_l / 2**27
            assert p["grid_delta"] >= tail
        run = Run("dpsgd", "poisson", p["steps"], 0.1, 2, 1e-6 - p["grid_delta"])
        accounted = run_plan(run, p["accounted_noise_multiplier"]).epsilon
        assert rel.epsilon == pytest.approx(accounted + p["grid_epsilon"], rel=1e-9)
        assert rel.epsilon <= eps * (1 + 1e-12) and rel.delta == 1e-6
