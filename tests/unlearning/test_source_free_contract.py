"""Hostile input to the source-free unlearning entry points raises only TrustlabError."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from trustlab.errors import TrustlabError  # noqa: E402
from trustlab.unlearning.source_free import (  # noqa: E402
    SourceFreeUnlearner,
    conflict_averse_direction,
    synthesize,
)

FAST = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
scalars = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.booleans(),
    st.none(),
)
arrays = st.one_of(
    scalars,
    st.lists(scalars, max_size=4),
    st.tuples(scalars, scalars),
    st.lists(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3), max_size=4),
    st.builds(lambda n, d: np.zeros((n, d)), st.integers(0, 3), st.integers(0, 4)),
)
# Counts that are valid ints stay small (a valid 2**70 steps would simply run for ever).
counts = st.one_of(
    st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=2), st.none(), st.booleans()
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _model() -> Any:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))


def _only_trustlab(fn: Any) -> None:
    try:
        fn()
    except TrustlabError:
        pass


@FAST
@given(
    classes=arrays, n=counts, steps=counts, alpha=scalars, dt=scalars, shape=arrays, box=arrays, eta=scalars
)
def test_synthesize_hostile(
    classes: Any, n: Any, steps: Any, alpha: Any, dt: Any, shape: Any, box: Any, eta: Any
) -> None:
    model = _model()
    _only_trustlab(
        lambda: synthesize(
            model, classes, n, steps=steps, alpha=alpha, dt=dt, input_shape=shape, input_range=box, eta=eta
        )
    )


@FAST
@given(forget=arrays, weights=arrays, c=scalars, lr=scalars, momentum=scalars)
def test_unlearner_hostile(forget: Any, weights: Any, c: Any, lr: Any, momentum: Any):
    unlearner = SourceFreeUnlearner(
        n_per_class=4, steps=2, epochs=1, keep="all", weights=weights, c=c, lr=lr, momentum=momentum
    )
    _only_trustlab(lambda: unlearner.fit(_model(), forget))


_FITTED: list[Any] = []


@FAST
@given(X=arrays)
def test_predict_hostile(X: Any):
    if not _FITTED:
        _FITTED.append(SourceFreeUnlearner(n_per_class=4, steps=2, epochs=1, keep="all").fit(_model(), [1]))
    _only_trustlab(lambda: _FITTED[0].predict(X))


@FAST
@given(grads=arrays, weights=arrays, c=scalars)
def test_conflict_averse_direction_hostile(grads: Any, weights: Any, c: Any):
    _only_trustlab(lambda: conflict_averse_direction(grads, weights=weights, c=c))


def test_hostile_models_raise_trustlab_errors():
    class Raises(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x):
            raise RuntimeError("boom")

    class Ints(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x):
            return (x[:, :2] * 0).long()

    class Detached(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.lin(x.detach()).detach()

    models = (Raises(), Ints(), Detached(), torch.nn.ReLU(), torch.nn.Linear(3, 1), _model().half())
    for model in models:
        unlearner = SourceFreeUnlearner(n_per_class=3, steps=1, epochs=1)
        _only_trustlab(lambda model=model, unlearner=unlearner: unlearner.fit(model, [0]))
