"""Every public name of trustlab.explain is documented numpydoc-style (issue 12, section 1).

Functions and methods: a Parameters section when they take arguments, a Returns section
when they return something; public functions and classes: an Examples section (doctested
by ``--doctest-modules``), or, for result objects a function builds, a See Also naming
it. Dataclasses document their fields under Attributes.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

import pytest

import trustlab.explain as explain


def _sections(doc: str) -> set[str]:
    return set(re.findall(r"^\s*([A-Z][A-Za-z ]+)\n\s*-{3,}\s*$", doc, re.M))


def _arguments(obj: Any) -> list[str]:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters if p not in ("self", "cls")]


def _returns_something(obj: Any) -> bool:
    ret = inspect.signature(obj).return_annotation
    return ret not in ("None", None, inspect.Signature.empty)


def _members() -> list[tuple[str, Any, str]]:
    out = []
    for name in explain.__all__:
        obj = getattr(explain, name)
        if inspect.isclass(obj):
            out.append((name, obj, "class"))
            for attr, value in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(value, staticmethod | classmethod):
                    value = value.__func__
                if inspect.isfunction(value):
                    out.append((f"{name}.{attr}", value, "method"))
                elif isinstance(value, property) and value.fget is not None:
                    out.append((f"{name}.{attr}", value.fget, "property"))
        else:
            out.append((name, obj, "function"))
    return out


@pytest.mark.parametrize(("name", "obj", "kind"), _members(), ids=[m[0] for m in _members()])
def test_numpydoc_sections(name: str, obj: Any, kind: str) -> None:
    doc = inspect.getdoc(obj) or ""
    assert doc.strip(), f"{name} has no docstring"
    sections = _sections(doc)
    if kind == "property":
        return
    is_dataclass = kind == "class" and dataclasses.is_dataclass(obj)
    args = _arguments(obj.__init__ if kind == "class" else obj)
    if args:
        wanted = {"Attributes", "Parameters"} if is_dataclass else {"Parameters"}
        assert sections & wanted, f"{name} lacks a {' or '.join(sorted(wanted))} section"
    if kind in ("function", "method") and _returns_something(obj):
        assert sections & {"Returns", "Yields"}, f"{name} lacks a Returns section"
    if kind in ("function", "class"):
        assert sections & {"Examples", "See Also"}, f"{name} lacks an Examples (or See Also) section"
        if kind == "function" or not is_dataclass:
            assert "Examples" in sections, f"{name} lacks an Examples section"


def test_public_names_are_exactly_the_documented_set() -> None:
    """The package's public names (the lead's compatibility contract for this refactor)."""
    assert sorted(explain.__all__) == sorted(
        [
            "ActionSet", "AdditiveNoiseSCM", "AmenableLime", "Box", "ConfinedRegionFinder",
            "ConfinedRegions", "CounterfactualResult", "DirectionalLinkage", "ExplanationProof",
            "FastPD", "LimeCertificate", "LimeExplanation", "LimeStability", "LimeTabular",
            "LinearSCM", "OneHot", "PDCurveDisplay", "RawLinearModel", "RecourseCheck", "Thermometer",
            "TreeArrays",
            "TreeEnsemble", "VerifiableExplanation", "VerificationReport", "ZKExplanationProof",
            "ZKPublic", "ZKSetup", "brace", "brace_path", "causal_recourse", "check_certificate",
            "commit_model", "counterfactual_metrics", "counterfactuals", "deep_backtracking",
            "default_action_set", "derive_seed", "ensemble_from_model", "find_border_point",
            "has_recourse", "linearize", "max_reachable_score", "prove_explanation", "recourse_check",
            "trees_from_lightgbm", "trees_from_sklearn", "trees_from_xgboost", "verify_explanation",
            "wachter", "zk_prove_explanation", "zk_setup", "zk_verify_explanation",
        ]
    )  # fmt: skip
    for name in explain.__all__:
        assert getattr(explain, name).__module__.startswith("trustlab.explain")
