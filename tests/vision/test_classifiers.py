"""The vision lab's substrate: digits split, small classifiers, the training loop, input checks."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ModelError, ParameterError  # noqa: E402
from trustlab.vision import (  # noqa: E402
    KINDS,
    accuracy,
    check_images,
    check_labels,
    digits_split,
    make_classifier,
    predict,
    train_classifier,
)


@pytest.fixture(scope="module")
def data():
    return digits_split()


def test_split_is_stratified_scaled_and_seeded(data):
    X_tr, X_te, y_tr, y_te = data
    assert X_tr.shape == (1257, 1, 8, 8) and X_te.shape == (540, 1, 8, 8)
    assert X_tr.dtype == np.float32 and X_tr.min() == 0.0 and X_tr.max() == 1.0
    # stratified: each class's share within one image of the full data's
    assert np.all(np.abs(np.bincount(y_te) / len(y_te) - np.bincount(y_tr) / len(y_tr)) < 2 / len(y_te))
    again = digits_split()
    assert np.array_equal(again[0], X_tr)
    flat = digits_split(image=False)[0]
    assert flat.shape == (1257, 64)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_maps_images_to_logits(kind):
    net = make_classifier(kind, width=4, n_classes=7)
    assert net(torch.zeros(3, 1, 8, 8)).shape == (3, 7)


def test_same_seed_same_model_and_training(data):
    X_tr, _, y_tr, _ = data
    a = train_classifier(
        make_classifier("mlp", width=4, seed=3), X_tr[:200], y_tr[:200], epochs=2, random_state=1
    )
    b = train_classifier(
        make_classifier("mlp", width=4, seed=3), X_tr[:200], y_tr[:200], epochs=2, random_state=1
    )
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)
    c = make_classifier("mlp", width=4, seed=4)
    assert not torch.equal(next(c.parameters()), next(make_classifier("mlp", width=4, seed=3).parameters()))


def test_training_learns_digits(data):
    X_tr, X_te, y_tr, y_te = data
    net = train_classifier(make_classifier("relu_mlp", width=8), X_tr, y_tr, epochs=4)
    # chance is 0.1; 4 epochs of a 32-unit MLP reach > 0.85 (binomial SE on 540 images ~ 0.015)
    assert accuracy(net, X_te, y_te) > 0.85
    assert predict(net, X_te[:5]).shape == (5,)


@pytest.mark.parametrize(
    ("images", "fix"),
    [
        (np.full((2, 1, 8, 8), 2.0), "Scale the images"),
        (np.full((2, 1, 8, 8), np.nan), "NaN"),
        (np.zeros((0, 1, 8, 8)), "non-empty"),
        (np.zeros(5), "shape"),
        ("images", "array of images"),
    ],
)
def test_bad_images_name_the_argument(images, fix):
    with pytest.raises(DataError, match=fix) as err:
        check_images(images, "X")
    assert err.value.argument == "X"


def test_reversed_and_strided_images_are_accepted():
    """A reversed or strided view (X[::-1]) becomes a contiguous copy that torch can wrap."""
    from trustlab.vision import make_unet, train_ddpm

    X = np.random.default_rng(0).random((4, 1, 8, 8)).astype(np.float32)
    assert check_images(X[::-1]).flags.c_contiguous and check_images(X[:, :, ::2]).flags.c_contiguous
    assert not train_ddpm(make_unet(channels=8), X[::-1], steps=1, batch_size=2).training


def test_bad_labels_and_models():
    with pytest.raises(DataError, match="3 labels"):
        check_labels([0, 1], 3)
    with pytest.raises(DataError, match=r"0\.\.9"):
        check_labels([0, 10], 2, 10)
    with pytest.raises(DataError, match="integer"):
        check_labels([0.5, 1.0], 2)
    with pytest.raises(ModelError, match=r"torch\.nn\.Module"):
        predict("not a model", np.zeros((1, 1, 8, 8)))
    with pytest.raises(ParameterError) as err:
        make_classifier("resnet")
    assert err.value.argument == "kind"
    with pytest.raises(DataError, match="shape the model takes"):
        train_classifier(make_classifier("mlp", width=4), np.zeros((4, 1, 4, 4)), [0, 1, 2, 3], epochs=1)
