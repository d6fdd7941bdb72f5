"""The Targeting section: who is reached when the top share of predicted risk is served.

A model's scores are often used to allocate a scarce service: serve the ``capacity``
share of people with the highest predicted probability. The section asks, for the
held-out rows, what share of the people the service is meant for (the rows whose outcome
is the positive label) is reached overall and in each sensitive group, with Wilson
intervals, and what the model is worth against capacity: the capacity increase that
would reach as many more people as a prediction improvement of ``+0.05`` R^2 would
(Fischer-Abaigar, Kern and Perdomo, ICML 2025; :func:`trustlab.fairness.targeting_reach`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from trustlab.audit.section import AuditContext, Check, Section, SectionResult, interval_verdict
from trustlab.audit.sections._columns import group_labels

__all__ = ["TargetingSection"]

_PRIVATE_NOTE = (
    "Left out in private mode: the reach figures and their bootstrap read individual held-out "
    "rows and trustlab has no DP release of them yet; nothing was spent on this section."
)


class TargetingSection(Section):
    """Reach of the people the service is for when the top ``capacity`` of risk is served.

    Attributes
    ----------
    capacity : float, default 0.2
        Share of held-out rows served (the top of the model's scores).
    max_shortfall : float, default 0.1
        A group's reach may fall this far below the overall reach before its check fails.
    min_group : int, default 30
        Fewest target rows (positive outcome) a group needs to be judged.
    delta_r2 : float, default 0.05
        The prediction improvement priced in capacity.

    References
    ----------
    U. Fischer-Abaigar, C. Kern, J. C. Perdomo, "The Value of Prediction in Identifying the
    Worst-Off", ICML 2025.

    Examples
    --------
    >>> section = TargetingSection()
    >>> section.name, section.title
    ('targeting', 'Targeting')
    """

    name = "targeting"
    title = "Targeting"
    budget_weight = 0.0  # releases nothing in private mode
    capacity: float = 0.2
    max_shortfall: float = 0.1
    min_group: int = 30
    delta_r2: float = 0.05

    def compute(self, ctx: AuditContext, budget: Any = None) -> SectionResult:
        """Reach overall and by group at the capacity, the shortfall checks and the capacity comparison.

        Parameters
        ----------
        ctx : AuditContext
            The audit's context (its held-out probabilities are reused).
        budget : Accountant or None
            Unused: in private mode the section releases nothing.

        Returns
        -------
        SectionResult
        """
        from trustlab.fairness import targeting_reach

        capacity = float(self.capacity)
        if ctx.private:
            left_out: dict[str, Any] = {"released": False, "capacity": capacity}
            return SectionResult(self.name, self.title, left_out, [], [_PRIVATE_NOTE])
        scores = np.asarray(ctx.proba_test, dtype=float)
        target = np.asarray(ctx.y_test, dtype=int)
        rule = (
            f"pass when the 95% interval of (overall reach - group reach) lies at or below "
            f"{self.max_shortfall}, fail when it lies above, inconclusive otherwise; a group needs "
            f"{self.min_group} held-out rows with the positive outcome"
        )
        figures: dict[str, Any] = {
            "released": True,
            "capacity": capacity,
            "target_label": str(ctx.positive_label),
            "by_attribute": {},
        }
        checks: list[Check] = []
        comparison = None
        if target.sum() == 0 or target.size == 0:
            notes = [f"No held-out row has the outcome {ctx.positive_label!r}: reach is undefined."]
            figures["released"] = False
            return SectionResult(self.name, self.title, figures, checks, notes)
        for attr in ctx.sensitive:
            labels = group_labels(ctx.sensitive_test[attr])
            res = targeting_reach(
                scores,
                target,
                capacity=capacity,
                sensitive_features=labels,
                delta_r2=float(self.delta_r2) if comparison is None else None,
                empty_groups="drop",
                random_state=ctx.random_state,
            )
            comparison = comparison or res.comparison
            table: pd.DataFrame = res.table
            overall = float(table["reach"].iloc[0])
            rows = table.iloc[1:]
            groups = []
            judged: list[tuple[str, float, float, float]] = []  # group, shortfall, low, high
            small: list[str] = []
            for group, row in rows.iterrows():
                ok = int(row["n_worst_off"]) >= self.min_group
                reach = [float(row["reach"]), float(row["reach_low"]), float(row["reach_high"])]
                groups.append(
                    {
                        "group": str(group),
                        "rows": int(row["n"]),
                        "target_rows": int(row["n_worst_off"]),
                        "served_share": float(row["served_share"]),
                        "reach": reach,
                        "evaluated": ok,
                    }
                )
                if ok:
                    judged.append((str(group), overall - reach[0], overall - reach[2], overall - reach[1]))
                else:
                    small.append(f"{group} ({int(row['n_worst_off'])} target rows)")
            figures["by_attribute"][attr] = {
                "overall": [overall, float(table["reach_low"].iloc[0]), float(table["reach_high"].iloc[0])],
                "rows": int(table["n"].iloc[0]),
                "target_rows": int(table["n_worst_off"].iloc[0]),
                "groups": groups,
            }
            name = f"Reach across {attr} at capacity {capacity:g}"
            too_small = f"; too small to judge: {', '.join(small)}" if small else ""
            if not judged:
                detail = f"not evaluable: no group of {attr} has {self.min_group} target rows{too_small}"
                hint = (
                    f"evaluable with at least {self.min_group} held-out target rows in one group of {attr}: "
                    "more data, a larger --test-size, or a larger capacity"
                )
                checks.append(Check(name, None, detail, status="not_evaluable", rule=rule, hint=hint))
                continue
            group, short, lo, hi = max(judged, key=lambda t: t[3])
            detail = (
                f"overall reach {overall:.3f}; largest shortfall {short:.3f} ({group}; 95% interval "
                f"{lo:.3f}..{hi:.3f}; threshold {self.max_shortfall}){too_small}"
            )
            status = interval_verdict(lo, hi, float(self.max_shortfall), at_most=True)
            checks.append(Check(name, None, detail, status=status, rule=rule))
        if comparison is not None:
            iv = comparison.intervals
            figures["comparison"] = {
                "reach": comparison.reach,
                "r2_equivalent": comparison.r2_equivalent,
                "prediction_access_ratio": comparison.prediction_access_ratio,
                "delta_r2": comparison.delta_r2,
                "reach_gain": comparison.reach_gain,
                "capacity_increase": comparison.capacity_increase,
                "intervals": {k: [float(iv.loc[k, "low"]), float(iv.loc[k, "high"])] for k in iv.index},
            }
        notes = [
            f"Serving rule: the {capacity:.0%} of held-out rows with the highest predicted probability of "
            f"{ctx.positive_label!r}; the people the service is for are the rows whose outcome is "
            f"{ctx.positive_label!r}. Reach: the share of them served; intervals: 95% Wilson over the "
            "group's target rows (a group's shortfall interval ignores the overall reach's own "
            "uncertainty, which is smaller).",
            f"Prediction vs capacity (Fischer-Abaigar, Kern and Perdomo, ICML 2025): the Gaussian "
            f"screening model matched to the observed reach gives the model an equivalent R^2; a "
            f"prediction improvement of +{self.delta_r2:g} R^2 reaches as many more people as the "
            "capacity increase shown (read off the empirical reach curve); bootstrap intervals.",
        ]
        return SectionResult(self.name, self.title, figures, checks, notes)

    def render(self, result: SectionResult) -> str:
        """The section's HTML: checks, one reach table per attribute and the capacity comparison.

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            The section's HTML body.
        """
        from trustlab.audit.render._targeting import render_targeting

        return render_targeting(result)
