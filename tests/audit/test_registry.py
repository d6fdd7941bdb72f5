"""The audit's section registry: sections keyed by name, loaded lazily, open to users' own sections."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from trustlab.audit import (
    SECTIONS,
    Audit,
    Section,
    SectionResult,
    default_sections,
    get_section,
    register_section,
    registry,
    section_names,
    unregister_section,
)
from trustlab.errors import ParameterError

BUILT_IN = [
    "data",
    "performance",
    "fairness",
    "errors",
    "targeting",
    "privacy",
    "explain",
    "uncertainty",
    "unlearning",
    "robustness",
]


@pytest.fixture(autouse=True)
def _restore_registry():
    saved = dict(registry._REGISTRY)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


class RowCount(Section):
    """A user's section: how many held-out rows the model predicted positive."""

    name = "row_count"
    title = "Row count"
    budget_weight = 0.2

    def compute(self, ctx, budget):
        n_pos = int((ctx.proba_test >= 0.5).sum())
        return SectionResult(
            self.name, self.title, {"held_out": len(ctx.test_index), "predicted_positive": n_pos}
        )

    def render(self, result):
        return f"<p class='rowcount'>{result.figures['held_out']} held-out rows</p>"


def test_built_in_sections_in_report_order():
    assert section_names() == BUILT_IN
    assert [s.name for s in default_sections()] == BUILT_IN
    assert [c.name for c in SECTIONS] == BUILT_IN and len(SECTIONS) == len(BUILT_IN)
    assert get_section("fairness").__name__ == "FairnessSection"


def test_import_loads_no_section_module():
    code = textwrap.dedent(
        """
        import sys
        import trustlab.audit
        from trustlab.audit import section_names
        assert section_names()[0] == "data"
        loaded = sorted(m for m in sys.modules if m.startswith("trustlab.audit.sections")
                        or m.startswith("trustlab.audit.render"))
        print(loaded)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_duplicate_name_is_refused_with_a_clear_error():
    class OtherFairness(RowCount):
        name = "fairness"
        title = "My fairness"

    with pytest.raises(ParameterError, match="named 'fairness' is already registered") as err:
        register_section(OtherFairness)
    assert err.value.argument == "section"
    assert "replace=True" in str(err.value)
    assert section_names() == BUILT_IN  # nothing changed


def test_same_class_twice_is_a_no_op_and_replace_keeps_the_place():
    register_section(RowCount)
    register_section(RowCount)
    assert section_names().count("row_count") == 1

    class Replacement(RowCount):
        title = "Fairness, my way"
        name = "fairness"

    register_section(Replacement, replace=True)
    assert section_names() == [*BUILT_IN, "row_count"]
    assert get_section("fairness") is Replacement


def test_placement_before_after_position():
    register_section(RowCount, after="data")
    assert section_names()[:3] == ["data", "row_count", "performance"]
    unregister_section("row_count")
    register_section(RowCount, before="data")
    assert section_names()[0] == "row_count"
    unregister_section("row_count")
    register_section(RowCount, position=-1)
    assert section_names()[-1] == "row_count"
    with pytest.raises(ParameterError, match="no registered section named 'nope'"):
        register_section(RowCount, after="nope", replace=True)
    with pytest.raises(ParameterError, match="at most one"):
        register_section(RowCount, before="data", after="data", replace=True)


@pytest.mark.parametrize(
    "bad, match",
    [
        (int, "Section subclass"),
        ("not.a.path", "module:ClassName"),
        (type("NoName", (RowCount,), {"name": ""}), "needs a name"),
        (type("Upper", (RowCount,), {"name": "Bad Name"}), "needs a name"),
        (type("NoTitle", (RowCount,), {"name": "t", "title": ""}), "non-empty title"),
        (type("NegWeight", (RowCount,), {"name": "w", "budget_weight": -1.0}), "budget_weight"),
    ],
)
def test_invalid_sections_are_refused(bad, match):
    with pytest.raises(ParameterError, match=match):
        register_section(bad)


def test_abstract_section_is_refused():
    class Half(Section):
        name = "half"
        title = "Half"

        def compute(self, ctx, budget):
            return SectionResult(self.name, self.title, {})

    with pytest.raises(ParameterError, match="does not implement render"):
        register_section(Half)


def test_unknown_names():
    with pytest.raises(ParameterError, match="no section named 'nope'"):
        get_section("nope")
    with pytest.raises(ParameterError, match="no section named 'nope'"):
        unregister_section("nope")


def test_lazy_path_registration_checks_on_first_use():
    register_section("trustlab.audit.sections.data:DataSection", name="data_copy")
    with pytest.raises(ParameterError, match="whose name is 'data'"):
        get_section("data_copy")


def test_registered_section_appears_in_the_report(benefits):
    """End to end: a user's section runs in a default audit and shows in JSON and HTML."""
    register_section(RowCount, after="performance")
    df, info, _schema = benefits
    frame = df.sample(700, random_state=0)
    report = Audit(model="hgb").run(frame, target=info.target, sensitive=["sex"])
    assert [r.name for r in report.results][:3] == ["data", "performance", "row_count"]
    section = report.to_dict()["sections"]["row_count"]
    assert section["figures"]["held_out"] == int(report["performance"].figures["overall"]["count"])
    html = report.to_html()
    assert "<p class='rowcount'>" in html and 'href="#row_count"' in html
    assert html.index('id="performance"') < html.index('id="row_count"') < html.index('id="fairness"')


def test_registered_section_gets_its_budget_share_in_private_mode(benefits):
    """A user's section takes part in the budget split and must spend its share."""
    spent = {}

    class Spender(RowCount):
        name = "spender"
        title = "Spender"

        def compute(self, ctx, budget):
            spent["share"] = budget.total_epsilon
            budget.spend(budget.remaining_epsilon, description="spender: nothing", mechanism="none")
            return SectionResult(self.name, self.title, {})

    register_section(Spender)
    df, info, schema = benefits
    report = Audit(private=True, epsilon=1.0, schema=schema, model="logistic").run(
        df.sample(600, random_state=0), target=info.target, sensitive=["sex"]
    )
    assert "spender" in [r.name for r in report.results]
    assert report.epsilon_spent == pytest.approx(1.0)
    assert 0 < spent["share"] < 1.0


def test_docs_example_runs():
    """docs/audit.md's "Your own section" example runs as written."""
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "audit.md").read_text()
    part = text[text.index("## Your own section") :]
    code = part[part.index("```python") + len("```python") : part.index("```", part.index("```python") + 9)]
    namespace: dict = {}
    exec(compile(code, "docs/audit.md", "exec"), namespace)
    assert "positive_share" not in section_names()
