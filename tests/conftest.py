"""Shared fixtures: the embedded data, a small synthetic table, and audit reports run once.

Tests marked ``slow`` (thorough privacy audits, long fuzz runs) are skipped unless
``--run-slow`` is given or ``TRUSTLAB_SLOW=1`` is set; CI runs the fast profile.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.datasets import load_default


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run the tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow") or os.environ.get("TRUSTLAB_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow profile: pass --run-slow or set TRUSTLAB_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


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
