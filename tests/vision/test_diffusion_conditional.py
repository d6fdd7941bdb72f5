"""The vision lab's class-conditional digit DDPM: shapes, training, guidance, the shipped weights."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab.errors import TrustlabError  # noqa: E402
from trustlab.unlearning._saeuron_hooks import guided_eps  # noqa: E402
from trustlab.vision import (  # noqa: E402
    ConditionalDDPMRecipe,
    DDPMSchedule,
    digits_conditional_ddpm,
    make_conditional_unet,
    make_unet,
    train_conditional_ddpm,
)
from trustlab.vision.diffusion import ddim_loop, ddim_timesteps  # noqa: E402


def test_label_changes_the_prediction_and_none_is_the_null_class() -> None:
    # width 16: GroupNorm groups of two channels (at width <= 8 each group is one channel and
    # the per-channel time/class offset is normalised away)
    net = make_conditional_unet(channels=16, n_classes=3)
    x = torch.as_tensor(np.random.default_rng(0).standard_normal((2, 1, 8, 8)), dtype=torch.float32)
    t = torch.tensor([500, 500])
    with torch.no_grad():
        a = net(x, t, class_labels=torch.tensor([0, 0]))
        b = net(x, t, class_labels=torch.tensor([1, 1]))
        torch.testing.assert_close(net(x, t), net(x, t, class_labels=torch.tensor([3, 3])))
    assert float((a - b).abs().max()) > 1e-3


def test_training_moves_the_weights() -> None:
    net = make_conditional_unet(channels=4, n_classes=2)
    before = net.class_embedding.weight.detach().clone()
    X = np.random.default_rng(0).random((8, 1, 8, 8)).astype(np.float32)
    train_conditional_ddpm(net, X, np.arange(8) % 2, steps=3, batch_size=4)
    assert not torch.allclose(before, net.class_embedding.weight)
    assert not net.training


def test_shipped_model_draws_the_prompted_digit() -> None:
    """Guidance w = 2, 10 DDIM steps: nearest-class-mean judge agrees with the prompt on >= 85%."""
    from sklearn.datasets import load_digits

    net = digits_conditional_ddpm()
    d = load_digits()
    means = np.stack([d.data[d.target == c].mean(0) / 16.0 for c in range(10)])
    y = np.repeat(np.arange(10), 4)
    x = torch.as_tensor(np.random.default_rng(0).standard_normal((len(y), 1, 8, 8)), dtype=torch.float32)
    eps = guided_eps(net, torch.as_tensor(y), 2.0, 10)
    with torch.no_grad():
        x0 = ddim_loop(eps, x, DDPMSchedule().alphas_cumprod, ddim_timesteps(1000, 10))
    img = ((x0.clamp(-1, 1) + 1) / 2).reshape(len(y), -1).numpy()
    pred = ((img[:, None, :] - means[None]) ** 2).sum(-1).argmin(1)
    assert (pred == y).mean() >= 0.85


def test_bad_inputs() -> None:
    X = np.zeros((4, 1, 8, 8), dtype=np.float32)
    with pytest.raises(TrustlabError, match="y"):
        train_conditional_ddpm(make_conditional_unet(channels=4, n_classes=2), X, [0, 1, 2, 0], steps=1)
    with pytest.raises(TrustlabError, match="model"):
        train_conditional_ddpm(make_unet(channels=4), X, [0, 1, 0, 1], steps=1)
    with pytest.raises(TrustlabError, match="p_uncond"):
        train_conditional_ddpm(make_conditional_unet(channels=4), X, [0, 1, 0, 1], p_uncond=1.0)
    with pytest.raises(TrustlabError, match="recipe"):
        digits_conditional_ddpm("default")  # type: ignore[arg-type]
    with pytest.raises(TrustlabError, match="n_classes"):
        make_conditional_unet(n_classes=0)
    assert len(ConditionalDDPMRecipe(seed=1).fingerprint()) == 12
