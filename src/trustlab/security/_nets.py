"""Small torch classifiers and the digits data the security methods' tests and examples use.

Private helpers shared by the security modules (backdoor purification, OOD detection,
adversarial training): the methods themselves take any ``torch.nn.Module``; these are only
the small models and data that ship (scikit-learn's 8x8 digits) so that tests, docs and
benchmarks train their own models in seconds on a CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trustlab.errors import ParameterError

__all__ = ["digits", "far_ood", "make_net", "predict", "require_torch", "train"]


def require_torch() -> Any:
    """Import torch or raise a ParameterError naming the extra to install."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is in the dev extra
        raise ParameterError(
            "trustlab.security needs torch; install it with `pip install trustlab[torch]`.",
            argument="model",
        ) from exc
    return torch


def digits(image: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Return scikit-learn's digits scaled to [0, 1] as float32 (N, 64) or (N, 1, 8, 8)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    X = (bunch.data / 16.0).astype(np.float32)
    y = bunch.target.astype(np.int64)
    return (X.reshape(-1, 1, 8, 8) if image else X), y


def far_ood(n: int, kind: str = "patches", *, image: bool = False, seed: int = 0) -> np.ndarray:
    """``n`` far-out-of-distribution inputs for the digits models, on the digits' scale.

    ``"patches"``: grey crops (side 16 to 64 pixels, a multiple of 8) of scikit-learn's two
    bundled photographs (``load_sample_images``), block-averaged to 8x8. ``"textures"``:
    synthetic 8x8 stripes (random angle, frequency, phase), checkerboards (cell 1-3) and
    Gaussian blobs (1-3), in turn. Each input is stretched to [0, 1] and rounded to the
    digits' 17 grey levels; returned as float32 (n, 64), or (n, 1, 8, 8) with ``image``.
    """
    rng = np.random.default_rng(seed)
    if kind == "patches":
        from sklearn.datasets import load_sample_images

        photos = [im.mean(2) / 255.0 for im in load_sample_images().images]
        out = []
        for i in range(n):
            im = photos[i % 2]
            side = int(rng.integers(2, 9)) * 8
            r, c = int(rng.integers(0, im.shape[0] - side)), int(rng.integers(0, im.shape[1] - side))
            out.append(im[r : r + side, c : c + side].reshape(8, side // 8, 8, side // 8).mean((1, 3)))
    elif kind == "textures":
        yy, xx = np.mgrid[0:8, 0:8].astype(float)
        out = []
        for i in range(n):
            if i % 3 == 0:
                angle, freq, phase = rng.uniform(0, np.pi), rng.uniform(0.5, 2.0), rng.uniform(0, 2 * np.pi)
                out.append(np.sin(freq * (np.cos(angle) * xx + np.sin(angle) * yy) + phase))
            elif i % 3 == 1:
                cell = int(rng.integers(1, 4))
                out.append(((yy // cell + xx // cell) % 2) * rng.choice([-1.0, 1.0]))
            else:
                blobs = np.zeros((8, 8))
                for _ in range(int(rng.integers(1, 4))):
                    cy, cx, s = rng.uniform(0, 8), rng.uniform(0, 8), rng.uniform(0.8, 2.5)
                    blobs += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
                out.append(blobs)
    else:
        raise ParameterError(f"kind must be 'patches' or 'textures', got {kind!r}.", argument="kind")
    arr = np.stack(out) if out else np.zeros((0, 8, 8))
    low, high = arr.min((1, 2), keepdims=True), arr.max((1, 2), keepdims=True)
    arr = np.round((arr - low) / np.maximum(high - low, 1e-6) * 16) / 16
    return arr.reshape(-1, 1, 8, 8).astype(np.float32) if image else arr.reshape(-1, 64).astype(np.float32)


def make_net(kind: str = "mlp", *, n_classes: int = 10, hidden: int = 64, seed: int = 0) -> Any:
    """A small classifier: ``"mlp"`` on (N, 64) inputs, ``"cnn"``/``"cnn_bn"`` on (N, 1, 8, 8).

    The MLP is Linear(64, hidden) - ReLU - Linear(hidden, hidden) - ReLU - Linear(hidden, C);
    the CNN is two 3x3 convolutions (16, 32 channels, ReLU, the second with stride 2) then a
    linear layer on the flattened (32, 4, 4) map. ``"cnn_bn"`` is the same CNN with a
    BatchNorm2d after each convolution (Conv - BN - ReLU, as in a ResNet).
    """
    torch = require_torch()
    nn = torch.nn
    torch.manual_seed(seed)
    if kind == "mlp":
        return nn.Sequential(
            nn.Linear(64, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n_classes),
        )
    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, stride=2),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, n_classes),
        )
    if kind == "cnn_bn":
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, stride=2),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, n_classes),
        )
    raise ParameterError(f"kind must be 'mlp', 'cnn' or 'cnn_bn', got {kind!r}.", argument="kind")


def train(
    net: Any,
    X: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int = 30,
    lr: float = 1e-2,
    batch_size: int = 64,
    seed: int = 0,
    after_step: Any = None,
) -> Any:
    """Train ``net`` in place with Adam and cross-entropy; return it in eval mode.

    ``after_step()``, when given, runs after every optimiser step (e.g. to re-apply a
    pruning mask).
    """
    torch = require_torch()
    gen = torch.Generator().manual_seed(seed)
    Xt = torch.as_tensor(X, dtype=torch.float32)
    yt = torch.as_tensor(y, dtype=torch.int64)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    net.train()
    for _ in range(epochs):
        order = torch.randperm(len(Xt), generator=gen)
        for start in range(0, len(Xt), batch_size):
            idx = order[start : start + batch_size]
            opt.zero_grad()
            loss_fn(net(Xt[idx]), yt[idx]).backward()
            opt.step()
            if after_step is not None:
                after_step()
    return net.eval()


def predict(net: Any, X: np.ndarray) -> np.ndarray:
    """Predicted labels of ``net`` on ``X`` (no gradients)."""
    torch = require_torch()
    with torch.no_grad():
        return net(torch.as_tensor(X, dtype=torch.float32)).argmax(1).numpy()
