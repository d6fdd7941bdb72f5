"""The audit computes without matplotlib and never changes a user's matplotlib backend (issue 12 §4)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

HIDE = """
import sys

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("matplotlib hidden by the test")

sys.meta_path.insert(0, Hide())
"""


def _run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def test_audit_computes_without_matplotlib():
    code = HIDE + textwrap.dedent(
        """
        import json
        import trustlab, trustlab.audit
        from trustlab.audit import Audit
        from trustlab.datasets import load_default
        from trustlab.errors import MissingDependencyError

        df, info, schema = load_default()
        frame = df.sample(800, random_state=0)
        report = Audit(model="hgb").run(frame, target="ui", sensitive=["sex"])
        names = [r.name for r in report.results]
        built_in = ["data", "performance", "fairness", "errors", "targeting", "explain", "uncertainty"]
        built_in += ["unlearning", "robustness"]
        assert names == built_in, names
        assert json.loads(report.to_json())["sections"]["explain"]["figures"]["pd_curves"]
        private = Audit(private=True, epsilon=1.0, schema=schema, model="logistic").run(
            frame, target="ui", sensitive=["sex"]
        )
        private.to_json()
        try:
            report.to_html()
        except MissingDependencyError as exc:
            assert exc.argument == "matplotlib" and "pip install matplotlib" in str(exc), exc
        else:
            raise AssertionError("rendering without matplotlib did not raise")
        assert not any(m == "matplotlib" or m.startswith("matplotlib.") for m in sys.modules)
        print("ok")
        """
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"


def test_rendering_keeps_the_users_backend_and_settings():
    """``matplotlib.use("Agg")`` on import once replaced a user's backend (MPLBACKEND=svg became Agg)."""
    code = textwrap.dedent(
        """
        import matplotlib
        before = (matplotlib.get_backend(), dict(matplotlib.rcParams))
        import trustlab.audit
        import trustlab.audit.plots
        from trustlab.audit import Audit
        from trustlab.datasets import load_default

        df, info, schema = load_default()
        report = Audit(model="logistic").run(
            df.sample(600, random_state=0), target="ui", sensitive=["sex"]
        )
        html = report.to_html()
        assert html.count("<svg") >= 4
        after = (matplotlib.get_backend(), dict(matplotlib.rcParams))
        assert before[0] == after[0] == "svg", (before[0], after[0])
        changed = sorted(k for k in before[1] if str(before[1][k]) != str(after[1][k]))
        assert not changed, changed
        print("ok")
        """
    )
    out = _run(code, env={"MPLBACKEND": "svg"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"
