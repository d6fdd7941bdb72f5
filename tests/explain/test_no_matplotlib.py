"""trustlab.explain imports and computes without matplotlib; only drawing needs it (as fairlearn's test)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_explain_works_without_matplotlib() -> None:
    code = textwrap.dedent(
        """
        import sys

        class Hide:
            def find_spec(self, name, path=None, target=None):
                if name == "matplotlib" or name.startswith("matplotlib."):
                    raise ImportError("matplotlib hidden by the test")

        sys.meta_path.insert(0, Hide())
        import numpy as np
        from sklearn.ensemble import GradientBoostingRegressor
        from trustlab.errors import TrustlabError
        from trustlab.explain import FastPD, LimeTabular
        from trustlab.explain.fastpd import PDCurveDisplay

        X = np.random.default_rng(0).normal(size=(60, 2))
        fpd = FastPD(GradientBoostingRegressor(n_estimators=5).fit(X, X[:, 0])).fit(X)
        phi = fpd.shap_values(X[:3])
        grid, values = fpd.pd_curve(0, grid_resolution=5)
        LimeTabular(n_samples=50).fit(X).explain(lambda Z: Z[:, 0], X[0])
        try:
            fpd.plot_pd(0)
        except TrustlabError as exc:
            assert "matplotlib" in str(exc) and exc.argument == "matplotlib"
        else:
            raise AssertionError("drawing without matplotlib did not raise")
        try:
            PDCurveDisplay(grid, values, "x0").plot()
        except TrustlabError:
            pass
        else:
            raise AssertionError("drawing without matplotlib did not raise")
        assert not any(m == "matplotlib" or m.startswith("matplotlib.") for m in sys.modules), "imported"
        print("ok", phi.shape)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok (3, 2)"
