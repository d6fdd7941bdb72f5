"""Shared fixtures: the embedded data, a small synthetic table, and audit reports run once.

Tests marked ``slow`` (thorough privacy audits, long fuzz runs) are skipped unless
``--run-slow`` is given or ``TRUSTLAB_SLOW=1`` is set; CI runs the fast profile.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pytest

from trustlab.audit import Audit
from trustlab.datasets import load_default


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run the tests marked slow")


_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def pytest_configure(config):
    """Under pytest-xdist, one native thread per worker process, unless the user chose a number.

    The workers (``-n auto``: one per core) already fill the cores; OpenMP/BLAS/torch pools of
    one thread per core on top of them oversubscribe the machine, and HistGradientBoosting's
    OpenMP fit slows down ~15x on busy cores (src/trustlab/audit/_scale_threads.py). The
    controller sets the variables before it starts the workers, which inherit them.
    """
    workers = getattr(config.option, "numprocesses", None) or 0
    if workers > 1 and not os.environ.get("PYTEST_XDIST_WORKER"):
        for name in _THREAD_VARIABLES:
            os.environ.setdefault(name, "1")
    _hypothesis_profile(config)


def _hypothesis_profile(config) -> None:
    """Fixed (derandomised) hypothesis examples in the fast profile, fresh random ones in the slow one.

    CI's verdict then depends on the code alone: a random fuzz that finds a bug once in many runs
    turns a landing red at random (as tests/security/test_robustness.py's did with eps=1e308). The
    slow profile, and ``tools/mutants.py``, keep exploring with new examples on every run.
    """
    from hypothesis import HealthCheck, settings

    # No deadline and no too_slow health check in either profile: both are timings, and CI's two
    # cores are shared (an example that takes 150 ms alone can take 400 ms there and fail with
    # DeadlineExceeded or Flaky "unreliable timings"). Every @given in tests/ already sets
    # deadline=None; the profile makes it the default for new ones.
    timing = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    settings.register_profile("trustlab-fast", derandomize=True, **timing)
    settings.register_profile("trustlab-slow", derandomize=False, **timing)
    settings.load_profile("trustlab-slow" if _slow_profile(config) else "trustlab-fast")


def pytest_collection_modifyitems(config, items):
    if _slow_profile(config):
        return
    skip = pytest.mark.skip(reason="slow profile: pass --run-slow or set TRUSTLAB_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def _slow_profile(config) -> bool:
    return bool(config.getoption("--run-slow") or os.environ.get("TRUSTLAB_SLOW") == "1")


class AuditTrials:
    """Trial counts of the empirical privacy audits, by profile.

    The slow profile (and ``tools/mutants.py``, which sets ``TRUSTLAB_SLOW=1``) runs each
    audit at the count its power was measured at, with its negative control; the fast
    profile runs the honest arm at a quarter of it (at least 400). A lower count only
    lowers the audit's lower bound, so the honest assertion (bound <= claim) keeps its
    false-alarm rate; what the fast profile gives up is power against small leaks.
    """

    def __init__(self, full: bool) -> None:
        self.full = full

    def __call__(self, n_trials: int) -> int:
        return n_trials if self.full else max(400, n_trials // 4)


@pytest.fixture
def audit_trials(request) -> AuditTrials:
    return AuditTrials(_slow_profile(request.config))


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module of tiny-tensor tests, restored afterwards.

    On the 2 shared cores of CI, torch's intra-op threads only contend on small matrices. Use it
    with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")`` (module-scoped, so a
    module's trained-once fixtures run under it too).
    """
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


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


@pytest.fixture(scope="session")
def raw_html(raw_report):
    """``raw_report.to_html()``, rendered once per worker (a rendering costs seconds)."""
    return raw_report.to_html()


@pytest.fixture(scope="session")
def private_html(private_report):
    """``private_report.to_html()``, rendered once per worker."""
    return private_report.to_html()


# The test files that use the Dask cluster. xdist sends them to one worker as one unit (see
# pytest_xdist_make_scheduler), where they run back to back on one cluster, closed after the last.
DASK_FILES = frozenset(
    {
        "tests/compute/test_dask_backend.py",
        "tests/compute/test_trees_dask.py",
        "tests/compute/test_quantiles_dask.py",
        "tests/audit/test_scale.py",
        "tests/audit/test_scale_private.py",
    }
)
_CLUSTER: dict[str, Any] = {}


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, except that the files of DASK_FILES form one unit (one worker, one cluster)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class DaskFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "dask-cluster-files" if path in DASK_FILES else path

    return DaskFilesTogether(config, log)


@pytest.fixture()
def client():
    """A Dask client on a LocalCluster of 2 worker processes, shared by consecutive Dask tests.

    Started by the first test that asks for it and closed once the next test is outside
    DASK_FILES (pytest_runtest_teardown below): an idle cluster (scheduler
    heartbeats, two worker processes) costs about 9% of a core for as long as it lives, and
    each start ~5 s of CPU, so the Dask files run back to back on one cluster. Ports are the
    operating system's choice (scheduler port 0, no dashboard), so parallel pytest workers and
    other sessions on the machine never collide.
    """
    distributed = pytest.importorskip("dask.distributed")
    if "client" not in _CLUSTER:
        cluster = distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, scheduler_port=0, dashboard_address=None
        )
        _CLUSTER.update(cluster=cluster, client=distributed.Client(cluster))
    return _CLUSTER["client"]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Close the cluster once the next test is outside the Dask files (or there is none)."""
    if _CLUSTER and (nextitem is None or nextitem.nodeid.split("::", 1)[0] not in DASK_FILES):
        _CLUSTER.pop("client").close()
        _CLUSTER.pop("cluster").close()


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


_DECIMAL = r"-?\d+\.\d+(?:e[-+]?\d+)?"


@pytest.fixture()
def docs_printout(capsys):
    """Runs a docs page's ```python blocks; the i-th must print the i-th ```text block after "prints".

    Words, integers and layout must match exactly; decimal numbers may differ by ``atol``. An
    example that trains a model prints figures that move between CPUs in their last digit (the
    Sum-of-Parts page's SOP accuracy read 0.74 on an Intel host and 0.76 on an AMD EPYC one), so a
    page that trains passes the tolerance it can stand; one that only computes passes 0.
    """
    import re

    def run(page, atol=0.0):
        text = page.read_text()
        blocks = re.findall(r"```python\n(.*?)```", text, re.S)
        expected = re.findall(r"prints\n\n```text\n(.*?)```", text, re.S)
        assert blocks and expected, f"{page.name} needs a python block and a 'prints' text block"
        for block, printed in zip(blocks, expected, strict=False):  # the i-th block prints the i-th text
            exec(compile(block, str(page), "exec"), {"__name__": "docs_example"})
            out, want = capsys.readouterr().out.strip(), printed.strip()
            assert re.sub(_DECIMAL, "#", out) == re.sub(_DECIMAL, "#", want), out
            got, ref = (np.array(re.findall(_DECIMAL, t), dtype=float) for t in (out, want))
            assert np.all(np.abs(got - ref) <= atol), out

    return run


@pytest.fixture()
def run_docs_example(capsys):
    """Runs a docs page's ```python blocks in order, in one namespace; the example must print."""
    import re

    def run(page):
        blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
        assert blocks, f"{page.name} has no python example"
        namespace: dict = {"__name__": "docs_example"}
        for block in blocks:
            exec(compile(block, str(page), "exec"), namespace)
        assert capsys.readouterr().out.strip(), "the example prints its results"

    return run
