"""MixBridge's inpainting task: free-form and centre masks, noise-filled inputs (I2SB's ``inpaint-*``).

Private helper of :mod:`trustlab.security.mixbridge_lab` (its public names are re-exported there).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trustlab.errors import DataError, ParameterError
from trustlab.vision.classifiers import check_images

MASKS = ("freeform", "center")
"""Inpainting masks: I2SB's ``inpaint-freeform2030`` (the paper's) and ``inpaint-center``."""


def freeform_masks(
    n: int,
    shape: tuple[int, int] = (8, 8),
    *,
    coverage: tuple[float, float] = (0.2, 0.3),
    random_state: Any = 0,
) -> np.ndarray:
    """Free-form inpainting masks: brush strokes covering a share of the image drawn in ``coverage``.

    I2SB's ``inpaint-freeform2030`` (the paper's ImageNet task) reads Palette's pre-drawn free-form
    masks whose holes cover 20-30% of a 256x256 image; at 8x8 we draw our own: the number of hole
    pixels is uniform on ``[ceil(lo * H * W), floor(hi * H * W)]`` (13-19 of 64 by default) and
    one-pixel brush strokes walk the image (keep direction with probability 0.7, else turn;
    a new stroke starts anywhere with probability 0.1) until that many pixels are covered.

    Parameters
    ----------
    n : int
        Number of masks.
    shape : (int, int), default=(8, 8)
        Image height and width.
    coverage : (float, float), default=(0.2, 0.3)
        Range of the hole's share of the image.
    random_state : None, int or numpy.random.Generator, default=0

    Returns
    -------
    numpy.ndarray of float32, shape (n, 1, H, W)
        1 inside the hole, 0 elsewhere.

    Examples
    --------
    >>> m = freeform_masks(3)
    >>> m.shape, [int(k) for k in m.sum(axis=(1, 2, 3))]
    ((3, 1, 8, 8), [18, 15, 16])
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ParameterError(f"n must be a positive integer (masks); got {n!r}.", argument="n")
    if len(shape) != 2 or any(
        isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 2 for v in shape
    ):
        raise ParameterError(f"shape must be (height, width), both >= 2; got {shape!r}.", argument="shape")
    h, w = int(shape[0]), int(shape[1])
    lo_f, hi_f = (float(c) for c in coverage)
    lo, hi = max(1, math.ceil(lo_f * h * w - 1e-9)), math.floor(hi_f * h * w + 1e-9)
    if not 0 < lo_f <= hi_f < 1 or lo > hi:
        raise ParameterError(
            f"coverage must be (lo, hi) with 0 < lo <= hi < 1 holding a whole pixel count of the {h}x{w} "
            f"image; got {coverage!r}.",
            argument="coverage",
        )
    rng = np.random.default_rng(random_state)
    moves = ((0, 1), (1, 0), (0, -1), (-1, 0))
    out = np.zeros((int(n), 1, h, w), dtype=np.float32)
    for m in out[:, 0]:
        target = int(rng.integers(lo, hi + 1))
        y, x, d = int(rng.integers(h)), int(rng.integers(w)), int(rng.integers(4))
        m[y, x], count = 1, 1
        while count < target:
            if rng.random() < 0.1:
                y, x = int(rng.integers(h)), int(rng.integers(w))
            else:
                if rng.random() > 0.7:
                    d = int(rng.integers(4))
                y, x = min(max(y + moves[d][0], 0), h - 1), min(max(x + moves[d][1], 0), w - 1)
            count += int(m[y, x] == 0)
            m[y, x] = 1
    return out


def center_mask(shape: tuple[int, int] = (8, 8)) -> np.ndarray:
    """I2SB's ``inpaint-center`` mask: the central box of half the height and width (25% of the image).

    Parameters
    ----------
    shape : (int, int), default=(8, 8)
        Image height and width.

    Returns
    -------
    numpy.ndarray of float32, shape (1, 1, H, W)
        1 on rows ``H // 4 .. H // 4 + H // 2`` and the same columns, 0 elsewhere.

    Examples
    --------
    >>> int(center_mask().sum()), center_mask()[0, 0, 2:6, 2:6].min()
    (16, np.float32(1.0))
    """
    h, w = int(shape[0]), int(shape[1])
    m = np.zeros((1, 1, h, w), dtype=np.float32)
    m[:, :, h // 4 : h // 4 + h // 2, w // 4 : w // 4 + w // 2] = 1
    return m


def inpaint_inputs(X0: Any, masks: Any, *, random_state: Any = 0) -> np.ndarray:
    """The inpainting bridge's inputs: the holes of ``X0`` filled with Gaussian noise (I2SB's).

    I2SB fills the hole with standard normal noise in the model's ``[-1, 1]`` scale,
    ``x1 = (1 - m) x0 + m z``; the lab's bridge takes images in [0, 1], so the noise is clipped to
    ``[-1, 1]`` (about 32% of the draws) and mapped to [0, 1].

    Parameters
    ----------
    X0 : array-like of shape (n, C, H, W)
        Clean images in [0, 1].
    masks : array-like of shape (n, 1, H, W) or (1, 1, H, W)
        1 inside the hole (:func:`freeform_masks`, :func:`center_mask`).
    random_state : None, int or numpy.random.Generator, default=0
        Seeds the noise.

    Returns
    -------
    numpy.ndarray of float32, shape (n, C, H, W)

    Examples
    --------
    >>> x1 = inpaint_inputs(np.zeros((2, 1, 8, 8)), center_mask())
    >>> float(x1[:, :, :2].max()), bool(x1[:, :, 2:6, 2:6].std() > 0.1)
    (0.0, True)
    """
    x0 = check_images(X0, "X0")
    m = check_images(masks, "masks")
    if x0.ndim != 4:
        raise DataError(f"X0 must be (n, C, H, W) images; got shape {x0.shape}.", argument="X0")
    if m.ndim != 4 or m.shape[1] != 1 or m.shape[2:] != x0.shape[2:] or len(m) not in (1, len(x0)):
        raise DataError(
            f"masks must be (n, 1, H, W) or (1, 1, H, W) matching X0 {x0.shape}; got {m.shape}.",
            argument="masks",
        )
    z = np.random.default_rng(random_state).standard_normal(x0.shape).astype(np.float32)
    fill = (np.clip(z, -1.0, 1.0) + 1.0) / 2.0
    return ((1.0 - m) * x0 + m * fill).astype(np.float32)
