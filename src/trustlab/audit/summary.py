"""The report's opening summary: what matters, ranked, with a link and a next action each.

A reader who opens the report first wants to know what went wrong and what to do. The
summary lists, most severe first:

1. **no skill**: the model does not beat chance (ROC AUC) or predicting the majority
   class (accuracy), judged from the intervals of the Performance section's two
   checks; the passes that then say nothing are marked vacuous (:func:`mark_vacuous`);
2. **fails**: every failed check;
3. **warnings**: columns the audit left out of the model (a copy of the target or of
   a sensitive column, a feature that predicts the target alone, an identifier), and a
   panel structure (one entity on several rows) without a group split;
4. **inconclusive** checks: the interval straddles the threshold; more rows would decide;
5. **vacuous passes**, and the checks that could not be evaluated, one line each.

Each finding is one sentence with a link to its section and the next action. The
checks themselves are printed once, in their sections. The layout follows the scan
report of Giskard and the overview of the Responsible AI Toolbox, keeping trustlab's
intervals and stated rules.

References
----------
Giskard, "Scan: automatically detect vulnerabilities of ML models" (giskard.ai, 2023).
Microsoft, "Responsible AI Toolbox: error analysis and model overview" (2022).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from trustlab.audit.section import Check, SectionResult

__all__ = ["SEVERITIES", "collapsed", "findings", "mark_vacuous", "no_skill", "not_in_report"]

SEVERITIES = ("no_skill", "fail", "warning", "inconclusive", "vacuous", "not_evaluable")
"""The summary's kinds of finding, most severe first."""

CHANCE = "Better than chance"
MAJORITY = "Better than the majority class"

_FLAG_ACTION = {
    "target_copy": (
        "left out of the model; find how the copy got into the table (a repeated or recoded column)"
    ),
    "predicts_target": (
        "left out of the model; keep it (--keep {c}, Audit(keep=[...])) only if its value is known "
        "before the outcome"
    ),
    "sensitive_copy": (
        "left out of the model, which would otherwise use {r} while the report says it does not"
    ),
    "row_id": "left out of the model (an identifier predicts nothing about new rows); --keep {c} keeps it",
    "declared_text": "left out of the model as the schema declares it text",
    "free_text": (
        "left out of the model (one-hot encoding so many levels makes the fit slow, and a value seen "
        "once predicts nothing about new rows); group its values into fewer categories, or keep it "
        "with --keep {c}"
    ),
}


def _check(results: Sequence[SectionResult], name: str) -> Check | None:
    for r in results:
        if r.name == "performance":
            return next((c for c in r.checks if c.name == name), None)
    return None


def _head(detail: str) -> str:
    """A check's detail up to its first ';', brackets closed ("ROC AUC 0.62 (95% interval 0.59..0.65)")."""
    head = detail.split(";")[0]
    return head + ")" * max(0, head.count("(") - head.count(")"))


def no_skill(results: Sequence[SectionResult]) -> dict[str, Any] | None:
    """Whether the model has no demonstrated skill, judged from the Performance section's intervals.

    Parameters
    ----------
    results : sequence of SectionResult
        The report's results.

    Returns
    -------
    dict or None
        None when the model beats both chance and the majority class (or when the
        Performance section did not run); else ``chance`` (True when the ROC AUC
        interval does not lie above 0.5), ``majority`` (True when the accuracy gain's
        interval does not lie above 0) and ``reason`` (a sentence).

    Examples
    --------
    >>> from trustlab.audit.section import Check, SectionResult
    >>> perf = SectionResult("performance", "Performance", {}, [
    ...     Check(CHANCE, None, "ROC AUC 0.490 (0.46..0.52)", status="inconclusive"),
    ...     Check(MAJORITY, None, "...", status="fail")])
    >>> no_skill([perf])["chance"]
    True
    """
    chance, majority = _check(results, CHANCE), _check(results, MAJORITY)
    bad = {"fail", "inconclusive"}
    no_chance = chance is not None and chance.status in bad
    no_majority = majority is not None and majority.status in bad
    if not (no_chance or no_majority):
        return None
    if no_chance:
        assert chance is not None
        reason = f"the model does not rank outcomes better than chance ({_head(chance.detail)})"
    else:
        assert majority is not None
        reason = (
            "the model's decisions (threshold 0.5) are not more accurate than predicting the majority "
            f"class for everyone ({majority.detail.split('; difference')[0]})"
        )
        if chance is not None and chance.status == "pass":  # the ranking skill, beside the accuracy
            reason += (
                f", although its scores rank outcomes better than chance ({_head(chance.detail)}); "
                "the 0.5 threshold does not use that ranking"
            )
    return {"chance": no_chance, "majority": no_majority, "reason": reason}


def _vacuous_here(section: str, check: Check, chance: bool) -> bool:
    """Whether a pass says nothing without skill: fairness passes always, calibration ones without chance."""
    if check.status != "pass" or check.name in (CHANCE, MAJORITY):
        return False
    if section == "fairness":
        return True
    return chance and section == "performance"


def mark_vacuous(results: Sequence[SectionResult]) -> tuple[list[SectionResult], dict[str, Any] | None]:
    """Mark the passes that a model without skill makes vacuous.

    Without skill a fairness check passes because a constant or random score treats
    every group alike, and a calibration check passes because a constant base rate is
    calibrated: the pass says nothing about a useful model. When the model does not
    beat chance, every pass of the Fairness and Performance sections (but the skill
    checks themselves) is marked; when it ranks better than chance but its decisions
    do not beat the majority class, the Fairness section's passes are.

    Parameters
    ----------
    results : sequence of SectionResult
        The report's results.

    Returns
    -------
    (list of SectionResult, dict or None)
        The results with vacuous passes marked (``Check.vacuous``, and a sentence added
        to their detail), and :func:`no_skill`'s verdict.

    Examples
    --------
    >>> perf = SectionResult("performance", "Performance", {}, [
    ...     Check(CHANCE, None, "ROC AUC 0.490 (0.46..0.52)", status="inconclusive"),
    ...     Check("ECE <= 0.1", True, "0.02")])
    >>> marked, skill = mark_vacuous([perf])
    >>> [c.vacuous for c in marked[0].checks], skill["chance"]
    ([False, True], True)
    """
    skill = no_skill(results)
    if skill is None:
        return list(results), None
    out = []
    for r in results:
        checks = [
            dataclasses.replace(c, vacuous=True, detail=f"{c.detail}; vacuous: {skill['reason']}")
            if _vacuous_here(r.name, c, skill["chance"])
            else c
            for c in r.checks
        ]
        out.append(dataclasses.replace(r, checks=checks))
    return out, skill


def _action(section: str, check: Check, private: bool = False) -> str:
    """The next action for a failed or inconclusive check."""
    name = check.name
    if check.status == "inconclusive" and private:
        return "a larger --epsilon (less noise) or more rows would narrow the interval and decide"
    if check.status == "inconclusive":
        if section in ("fairness", "performance") and (" across " in name or " of " in name):
            return "collect more held-out rows of the smaller groups named: the interval is too wide to judge"
        return "more held-out rows would narrow the interval and decide"
    if name in (CHANCE, MAJORITY):
        return "check that the features carry signal about the target, and that the target is the one meant"
    if name.startswith("Calibration within"):
        return (
            "recalibrate within the groups named (e.g. multicalibration, trustlab.fairness) "
            "before using the scores"
        )
    if name.startswith("Calibration"):
        return (
            "recalibrate the scores (e.g. isotonic regression on held-out rows) before reading "
            "them as probabilities"
        )
    if name == "Missing values":
        return "impute the columns named, or leave them out with --ignore COL (Audit(ignore=[...]))"
    if section == "fairness":
        return "read the error analysis and evaluate a post-processing (--mitigate equalized_odds)"
    return f"read the {section} section"


def _flag_findings(meta: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for f in meta.get("column_flags", []):
        c, r = f["column"], f.get("related")
        if f["kind"] == "entity_id":
            if meta.get("group"):
                continue
            text = (
                f"Panel structure: '{c}' identifies an entity observed on several rows ({f['detail']}); "
                "rows were split one by one, so held-out rows share entities with training rows and the "
                "held-out figures overstate how the model does on new entities."
            )
            action = (
                f"declare '{c}' as the group: --group {c} (Audit(group='{c}')); '{c}' was left out "
                "of the model"
            )
        elif f["kind"] == "declared_text" and f.get("dropped"):
            continue  # the schema's declaration, not a finding (stated in the Data section)
        else:
            text = f"'{c}' {f['meaning']} ({f['detail']})."
            action = _FLAG_ACTION[f["kind"]].format(c=c, r=r)
            if not f.get("dropped"):
                action = f"kept as a feature as asked (--keep {c}); the figures may be too good to be true"
        if meta.get("scale") and ("--keep" in action or "--group" in action):
            action += " (the command line takes --keep and --group in process only, not with --dask yet)"
        out.append({"severity": "warning", "section": "data", "text": text, "action": action})
    return out


def _model_findings(meta: dict[str, Any]) -> list[dict[str, Any]]:
    """Private mode: say at the top when the audited model is not the one the user named."""
    status = str(meta.get("model_status", ""))
    if not meta.get("private") or "no DP trainer" not in status:
        return []
    asked = status.split("; '")[1].split("'")[0] if "; '" in status else "the model named"
    return [
        {
            "severity": "warning",
            "section": "performance",
            "text": f"The audited model is trustlab's {meta.get('model')}, trained under the privacy "
            f"budget, not '{asked}': trustlab has no DP trainer for it. Its figures describe the DP "
            "model, which usually scores below a non-private one.",
            "action": "to audit your own model privately, train it on other data and pass it with "
            "--model PATH",
        }
    ]


def _slice_findings(results: Sequence[SectionResult]) -> list[dict[str, Any]]:
    """Error-analysis slices whose interval lies wholly above the overall error rate (3 at most)."""
    out = []
    for r in results:
        if r.name != "errors":
            continue
        o = r.figures["overall"]
        above = [s for s in r.figures["slices"] if s["judged"] and s["interval"][0] > o["error_rate"]]
        for s in above[:3]:
            lo, hi = s["interval"]
            out.append(
                {
                    "severity": "warning",
                    "section": "errors",
                    "text": f"The model errs more where {' and '.join(s['conditions'])}: error rate "
                    f"{s['error_rate']:.1%} [{lo:.1%}, {hi:.1%}] on {s['rows']:,} rows, against "
                    f"{o['error_rate']:.1%} overall.",
                    "action": "look at these rows: collect more like them, add a feature that "
                    "describes them, or check their labels",
                }
            )
    return out


def findings(results: Sequence[SectionResult], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's findings, most severe first (see the module notes).

    Parameters
    ----------
    results : sequence of SectionResult
        The report's results (vacuous passes already marked).
    meta : dict
        The report's metadata: ``column_flags``, ``group`` and ``no_skill`` are read.

    Returns
    -------
    list of dict
        ``severity`` (one of :data:`SEVERITIES`), ``section`` (the anchor to link),
        ``text`` (one sentence) and ``action`` (the next step; may be empty).

    Examples
    --------
    >>> from trustlab.audit.section import Check, SectionResult
    >>> r = SectionResult("fairness", "Fairness", {}, [Check("Gap", None, "0.3 [0.2, 0.4]", status="fail")])
    >>> [f["severity"] for f in findings([r], {})]
    ['fail']
    """
    out: list[dict[str, Any]] = []
    skill = meta.get("no_skill")
    if skill:
        n = sum(c.vacuous for r in results for c in r.checks)
        ranks = not skill["chance"] and "better than chance" in skill["reason"]
        out.append(
            {
                "severity": "no_skill",
                "badge": "NO DECISION SKILL" if ranks else "NO SKILL",
                "section": "performance",
                "text": f"{'No decision skill' if ranks else 'No skill'}: {skill['reason']}."
                + (f" {n} pass(es) below are vacuous and marked so." if n else ""),
                "action": (
                    "do not read the fairness passes as good news (they judge the decisions at 0.5); "
                    "choose a decision threshold for your costs from the scores' ranking, or improve "
                    "the model"
                    if ranks
                    else "do not read the fairness or calibration passes as good news; improve the model "
                    "or check the target first"
                ),
            }
        )
    by = {s: [] for s in SEVERITIES}  # type: dict[str, list[dict[str, Any]]]
    for r in results:
        for c in r.checks:
            kind = "vacuous" if c.vacuous else c.status
            if kind == "pass":
                continue
            if kind == "vacuous":
                action = ""
            elif kind == "not_evaluable":
                action = c.hint  # what would make it evaluable (may be "")
            elif skill and c.name in (CHANCE, MAJORITY):
                continue  # stated at the top
            else:
                action = _action(r.name, c, bool(meta.get("private")))
            by[kind].append(
                {
                    "severity": kind,
                    "section": r.name,
                    "text": f"{r.title}: {c.name}: {c.detail.split('; vacuous:')[0]}.",
                    "action": action,
                }
            )
    by["warning"] = _model_findings(meta) + _flag_findings(meta) + _slice_findings(results)
    for kind in SEVERITIES[1:]:
        out += by[kind]
    return out


def collapsed(result: SectionResult) -> bool:
    """Whether a section computed nothing (no check, nothing released): one line, not a heading.

    Parameters
    ----------
    result : SectionResult
        A section's result.

    Returns
    -------
    bool
        True when its ``released`` figure is False and it has no check.

    Examples
    --------
    >>> collapsed(SectionResult("robustness", "Robustness", {"released": False}, [], ["Left out ..."]))
    True
    """
    return result.figures.get("released") is False and not result.checks


_WHY = {
    "private": "private mode (they read individual rows and trustlab has no differentially private "
    "release of them; nothing was spent on them)",
    "distributed": "distributed run (--dask: they need the rows in one place)",
    "other": "see each reason below",
}


def not_in_report(results: Sequence[SectionResult], meta: dict[str, Any]) -> list[dict[str, str]]:
    """What this report does not hold, and why: the report's "not in this report" line.

    Sections a private audit does not run (``meta["private_left_out"]``: the ``raw_only``
    ones), sections that computed nothing (:func:`collapsed`: every section that reads
    individual rows, in private mode), parts a section left out (its ``left_out``
    figure, e.g. multicalibration in private mode), sections a distributed run leaves
    out (``meta["scale"]["sections_left_out"]``) and the column screening when it did
    not run (``meta["screening"]``). Decided from the mode and the arguments only,
    never from the rows.

    Parameters
    ----------
    results : sequence of SectionResult
        The report's results.
    meta : dict
        The report's metadata.

    Returns
    -------
    list of dict
        ``name`` (what is missing), ``why`` (``"private"``, ``"distributed"`` or
        ``"other"``) and ``reason`` (the full sentence).

    Examples
    --------
    >>> left = SectionResult("errors", "Error analysis", {"released": False}, [], ["Left out: rows."])
    >>> not_in_report([left], {"private": True})
    [{'name': 'Error analysis', 'why': 'private', 'reason': 'Left out: rows.'}]
    """
    mode = "private" if meta.get("private") else "other"
    out = [
        {"name": str(item["name"]), "why": "private", "reason": str(item["reason"])}
        for item in meta.get("private_left_out") or []
    ]
    for r in results:
        if collapsed(r):
            out.append({"name": r.title, "why": mode, "reason": r.notes[0] if r.notes else ""})
        for part in r.figures.get("left_out", []) if isinstance(r.figures.get("left_out"), list) else []:
            reason = next((n for n in r.notes if n.startswith("Left out")), "")
            out.append({"name": f"{part} ({r.title})", "why": mode, "reason": reason})
    scale = meta.get("scale") or {}
    for name in scale.get("sections_left_out", []):
        out.append(
            {"name": str(name).capitalize(), "why": "distributed", "reason": str(scale.get("note", ""))}
        )
    screening = meta.get("screening") or {}
    if screening and not screening.get("ran", True):
        why = "private" if meta.get("private") else "other"
        out.append(
            {
                "name": "column screening (leakage, copies, identifiers, free text)",
                "why": why,
                "reason": screening["note"],
            }
        )
    return out


def not_in_report_line(items: Sequence[dict[str, str]]) -> list[tuple[str, list[str]]]:
    """The items grouped by why, each group as (the reason in words, the names).

    Examples
    --------
    >>> not_in_report_line([{"name": "Robustness", "why": "distributed", "reason": ""}])
    [('distributed run (--dask: they need the rows in one place)', ['Robustness'])]
    """
    groups: dict[str, list[str]] = {}
    for it in items:
        groups.setdefault(it["why"], []).append(it["name"])
    return [(_WHY[w], names) for w, names in groups.items()]
