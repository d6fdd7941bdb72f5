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

__all__ = ["digits", "make_net", "predict", "require_torch", "train"]


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


def make_net(kind: str = "mlp", *, n_classes: int = 10, hidden: int = 64, seed: int = 0) -> Any:
    """A small classifier: ``"mlp"`` on (N, 64) inputs or ``"cnn"`` on (N, 1, 8, 8) inputs.

    The MLP is Linear(64, hidden) - ReLU - Linear(hidden, hidden) - ReLU - Linear(hidden, C);
    the CNN is two 3x3 convolutions (16, 32 channels, ReLU, the second with stride 2) then a
    linear layer on the flattened (32, 4, 4) map.
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
    raise ParameterError(f"kind must be 'mlp' or 'cnn', got {kind!r}.", argument="kind")


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
