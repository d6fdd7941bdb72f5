"""Shared fixtures: the embedded data, a small synthetic table, and audit reports run once."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.datasets import load_default


@pytest.fixture(scope="session")
def benefits():
    return load_default()


@pytest.fixture(scope="session")
def raw_report(benefits):
    df, info, _schema = benefits
    return Audit(random_state=0).run(
        df, target=info.target, sensitive=list(info.sensitive), dataset_name="benefits"
    )


@pytest.fixture(scope="session")
def private_report(benefits):
    df, info, schema = benefits
    return Audit(private=True, epsilon=1.0, schema=schema, random_state=0).run(
        df, target=info.target, sensitive=list(info.sensitive), dataset_name="benefits"
    )


@pytest.fixture()
def small_frame():
    rng = np.random.default_rng(0)
    n = 400
    x = rng.normal(size=n)
    group = rng.choice(["a", "b"], size=n)
    y = (x + 0.5 * (group == "a") + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return pd.DataFrame(
        {"x": x, "z": rng.uniform(size=n), "group": group, "label": np.where(y == 1, "yes", "no")}
    )
