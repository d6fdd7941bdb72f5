"""The vision lab's point-cloud substrate: synthetic shapes with planted parts, PointNet, training."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from trustlab.errors import DataError, ModelError, ParameterError  # noqa: E402
from trustlab.vision import (  # noqa: E402
    PARTS,
    check_point_clouds,
    make_pointnet,
    make_shape_clouds,
    point_cloud_logits,
    shape_pointnet,
    train_point_classifier,
    train_shape_pointnet,
)


def test_shapes_are_seeded_balanced_and_the_part_is_where_stated():
    X, y, part = make_shape_clouds(40, n_points=64, random_state=0)
    X2, y2, part2 = make_shape_clouds(40, n_points=64, random_state=0)
    assert np.array_equal(X, X2) and np.array_equal(y, y2) and np.array_equal(part, part2)
    assert X.shape == (40, 64, 3) and X.dtype == np.float32
    assert np.all(np.bincount(y, minlength=len(PARTS)) == 10)
    assert np.all(part.sum(axis=1) == 16)
    # the part sits about 1.4 from the origin (its 16-point mean within 0.15), above the body
    centres = np.array([X[i][part[i]].mean(axis=0) for i in range(40)])
    assert np.all(np.abs(np.linalg.norm(centres, axis=1) - 1.4) < 0.15)
    assert np.all(centres[:, 2] > 0.5)
    assert np.all(np.linalg.norm(X[~part], axis=1) < 1.6)


def test_shipped_pointnet_reads_the_part():
    """The shipped weights classify fresh clouds (accuracy > 0.9 on 300, 4 classes)."""
    net = shape_pointnet()
    X, y, _ = make_shape_clouds(300, n_points=64, random_state=7)
    assert (point_cloud_logits(net, X).argmax(1).numpy() == y).mean() > 0.9


@pytest.mark.slow  # about a minute of training: the recipe of the shipped weights
def test_recipe_reproduces_the_shipped_accuracy():
    X, y, _ = make_shape_clouds(400, n_points=64, random_state=1)
    acc = (point_cloud_logits(train_shape_pointnet(), X).argmax(1).numpy() == y).mean()
    assert acc > 0.93


def test_training_lowers_the_loss_and_returns_eval_mode():
    X, y, _ = make_shape_clouds(32, n_points=16, random_state=0)
    net = make_pointnet(width=4)
    before = torch.nn.functional.cross_entropy(point_cloud_logits(net, X), torch.as_tensor(y))
    train_point_classifier(net, X, y, epochs=3, lr=1e-2, batch_size=8)
    after = torch.nn.functional.cross_entropy(point_cloud_logits(net, X), torch.as_tensor(y))
    assert float(after) < float(before) and not net.training


def test_bad_inputs():
    with pytest.raises(DataError, match="X"):
        check_point_clouds(np.zeros((2, 5, 2)))
    with pytest.raises(DataError, match="X"):
        check_point_clouds(np.zeros((0, 5, 3)))
    with pytest.raises(DataError, match="X"):
        check_point_clouds("clouds")
    with pytest.raises(ParameterError, match="n_points"):
        make_shape_clouds(4, n_points=4)
    with pytest.raises(ParameterError, match="part_fraction"):
        make_shape_clouds(4, part_fraction=1.0)
    with pytest.raises(ModelError, match="model"):
        point_cloud_logits(object(), np.zeros((1, 4, 3)))
    with pytest.raises(DataError, match="y"):
        train_point_classifier(make_pointnet(width=2), np.zeros((3, 4, 3)), [0, 1, 9])
