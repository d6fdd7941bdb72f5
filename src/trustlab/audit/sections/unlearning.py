"""The Unlearning section: what the model remembers of its training rows, and what forgetting some would cost.

Two questions an auditor asks once a person may request deletion:

1. **Does the model remember its training rows?** The best loss-threshold
   membership-inference attack (Yeom et al. 2018; :func:`trustlab.unlearning.membership_advantage`)
   separates the training rows from the held-out rows with some *advantage*; the
   check judges its 95% interval (Dvoretzky-Kiefer-Wolfowitz-Massart bounds on the two
   empirical loss distributions) against ``max_advantage``.
2. **What does honouring a deletion request for k rows cost?** For a logistic
   regression (alone or at the end of a scikit-learn pipeline) trustlab can unlearn with
   a certificate: :class:`trustlab.unlearning.NoisyFinetuneUnlearner` (Koloskova et al.,
   ICML 2025) beside retraining from scratch on the remaining rows
   (:func:`trustlab.unlearning.compare_to_retraining`): accuracies, the attack's
   advantage on the forgotten rows, gradient evaluations and the certificate. Other
   models are named as needing retraining.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from typing_extensions import override

from trustlab.audit.section import AuditContext, Check, SectionResult, interval_verdict
from trustlab.audit.sections._base import RawOnlySection
from trustlab.models import MODEL_NAMES

__all__ = ["UNSEEDED", "UnlearningSection", "advantage_interval"]

UNSEEDED = ("models.unlearned", "compute_ratio")
"""The deletion comparison's figures that a seed does not fix (the unlearner's DP noise)."""

_PRIVATE_NOTE = (
    "Left out in private mode: the membership attack and the deletion comparison read "
    "individual training rows and trustlab has no DP release of them; nothing was spent on "
    "this section."
)


def advantage_interval(advantage: float, m: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """A ``1 - alpha`` interval for the true advantage of the best loss-threshold attack.

    The advantage is ``sup_t (F(t) - G(t))^+`` for the members' and non-members' loss
    distributions ``F`` and ``G``; the supremum moves by at most the sup-norm errors of
    the two empirical CDFs, each below ``sqrt(ln(4 / alpha) / (2 m))`` (resp. ``n``) with
    probability ``1 - alpha / 2`` (Dvoretzky-Kiefer-Wolfowitz with Massart's constant).

    Parameters
    ----------
    advantage : float
        The measured advantage.
    m, n : int
        Members and non-members attacked (both >= 1).
    alpha : float, default 0.05
        One minus the confidence level.

    Returns
    -------
    (float, float)
        The interval, clipped to ``[0, 1]``.

    Examples
    --------
    >>> lo, hi = advantage_interval(0.05, 3000, 1500)
    >>> round(lo, 3), round(hi, 3)
    (0.0, 0.115)
    """
    half = math.sqrt(math.log(4.0 / alpha) / 2.0) * (1.0 / math.sqrt(m) + 1.0 / math.sqrt(n))
    return max(0.0, advantage - half), min(1.0, advantage + half)


def _logistic_parts(model: Any) -> tuple[Any, Any] | None:
    """``(preprocessing or None, LogisticRegression)`` when trustlab can unlearn the model."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline

    if isinstance(model, LogisticRegression):
        return None, model
    if isinstance(model, Pipeline) and isinstance(model[-1], LogisticRegression):
        return model[:-1], model[-1]
    return None


def _power_of_two_above(x: float) -> float:
    return float(2.0 ** math.ceil(math.log2(max(x, 1.0))))


class UnlearningSection(RawOnlySection):
    """Membership inference on the training rows and the cost of a deletion request.

    Attributes
    ----------
    max_advantage : float, default 0.1
        The membership attack's advantage may reach this before the check fails.
    deletion_rows : int, default 50
        Rows in the simulated deletion request (at most a tenth of the training rows).

    References
    ----------
    S. Yeom, I. Giacomelli, M. Fredrikson, S. Jha. "Privacy Risk in Machine Learning:
    Analyzing the Connection to Overfitting". IEEE CSF 2018. A. Koloskova, Y. Allouah,
    A. Jha, R. Guerraoui, S. Koyejo. "Certified Unlearning for Neural Networks". ICML 2025.

    Examples
    --------
    >>> section = UnlearningSection()
    >>> section.name, section.title
    ('unlearning', 'Unlearning')
    """

    name = "unlearning"
    title = "Unlearning"
    private_note = _PRIVATE_NOTE
    max_advantage: float = 0.1
    deletion_rows: int = 50

    @override
    def _raw(self, ctx: AuditContext) -> SectionResult:
        """The membership check and, for a logistic regression, the deletion comparison."""
        if ctx.model_name not in MODEL_NAMES:
            note = (
                "Not evaluated: the model was supplied, so trustlab does not know which rows it was "
                "trained on (the attack compares training rows with rows never trained on)."
            )
            return SectionResult(self.name, self.title, {"released": False}, [], [note])
        from trustlab.unlearning import membership_advantage

        X = ctx.data[ctx.features]
        X_tr, X_te = X.iloc[ctx.train_index], X.iloc[ctx.test_index]
        y_tr, y_te = ctx.y[ctx.train_index], ctx.y[ctx.test_index]
        adv = float(membership_advantage(ctx.model, X_tr, y_tr, X_te, y_te))
        low, high = advantage_interval(adv, len(y_tr), len(y_te))
        figures: dict[str, Any] = {
            "released": True,
            "membership": {
                "advantage": [adv, low, high],
                "members": len(y_tr),
                "non_members": len(y_te),
            },
        }
        rule = (
            f"pass when the 95% interval of the attack's advantage lies at or below {self.max_advantage}, "
            "fail when it lies above, inconclusive otherwise"
        )
        detail = (
            f"advantage {adv:.3f} (95% interval {low:.3f}..{high:.3f}; threshold {self.max_advantage}) "
            f"separating {len(y_tr):,} training rows from {len(y_te):,} held-out rows"
        )
        status = interval_verdict(low, high, float(self.max_advantage), at_most=True)
        checks = [Check("Membership inference on training rows", None, detail, status=status, rule=rule)]
        notes = [
            "Membership attack: the best threshold on each row's cross-entropy loss, calling a row "
            "'trained on' when its loss is at most the threshold (Yeom et al. 2018); advantage = true "
            "positive rate - false positive rate at the best threshold, 0 for a model that remembers "
            "nothing it could not have learned from the population."
        ]
        parts = _logistic_parts(ctx.model)
        if parts is None:
            notes.append(
                f"Deletion requests: trustlab has no certified unlearning for '{ctx.model_name}'; honouring "
                "one means retraining on the remaining rows. A logistic regression (--model logistic) or a "
                "kNN memory (trustlab.unlearning.KNNMemory) can forget rows without retraining."
            )
            return SectionResult(self.name, self.title, figures, checks, notes)
        figures["deletion"] = self._deletion(ctx, parts, X_tr, y_tr, X_te, y_te)
        d = figures["deletion"]
        notes.append(
            f"Deletion request: {d['rows']} training rows drawn at random (seed {ctx.random_state}). "
            f"Certified unlearning (Koloskova et al., ICML 2025): parameters projected into the ball of "
            f"radius C0 = {d['C0']:g} (the fitted norm {d['norm']:.3g} rounded up to a power of two "
            f"after doubling: a deployment fixes C0 before any request), {d['noisy_steps']} noisy "
            "gradient steps on the remaining rows, then noise-free fine-tuning; the certificate says the "
            "unlearned model is (epsilon, delta)-indistinguishable from one produced the same way from a "
            "model retrained without the rows. The preprocessing step of the pipeline (scaling, one-hot "
            "categories) is kept as fitted: it is not unlearned.",
        )
        notes.append(
            "Not reproducible from the seed (unseeded): the unlearned model's figures and the compute "
            "ratio change from run to run with the same --seed, because certified unlearning's noise "
            "comes from the secure sampler, which a seed never drives (a predictable noise would void "
            "the certificate). The rows deleted, the original and the retrained models' figures and "
            "the membership check are seeded."
        )
        return SectionResult(self.name, self.title, figures, checks, notes)

    def _deletion(
        self, ctx: AuditContext, parts: tuple[Any, Any], X_tr: Any, y_tr: Any, X_te: Any, y_te: Any
    ) -> dict[str, Any]:
        from trustlab.unlearning import NoisyFinetuneUnlearner, compare_to_retraining

        pre, clf = parts
        Z_tr = np.asarray(X_tr if pre is None else pre.transform(X_tr), dtype=float)
        Z_te = np.asarray(X_te if pre is None else pre.transform(X_te), dtype=float)
        k = int(min(int(self.deletion_rows), max(1, len(y_tr) // 10)))
        rng = np.random.default_rng(ctx.random_state)
        forget = np.sort(rng.choice(len(y_tr), size=k, replace=False))
        norm = float(np.sqrt(np.sum(clf.coef_**2) + np.sum(clf.intercept_**2)))
        C0 = _power_of_two_above(2.0 * norm)
        unlearner = NoisyFinetuneUnlearner(C0=C0, random_state=ctx.random_state)
        out = compare_to_retraining(unlearner, clf, Z_tr, y_tr, forget, Z_te, y_te)
        table = out.table
        models = {
            str(name): {col: float(table.loc[name, col]) for col in table.columns} for name in table.index
        }
        rel = out.release
        return {
            "rows": k,
            "C0": C0,
            "norm": norm,
            "noisy_steps": int(rel.parameters.get("n_steps", 0)),
            "epsilon": float(rel.epsilon),
            "delta": float(rel.delta),
            "compute_ratio": float(out.compute_ratio),
            "mia_noise_level": float(out.mia_noise_level),
            "models": models,
            "unseeded": list(UNSEEDED),
        }

    def render(self, result: SectionResult) -> str:
        """The section's HTML: the membership check and the deletion comparison table.

        Parameters
        ----------
        result : SectionResult
            What :meth:`compute` returned.

        Returns
        -------
        str
            The section's HTML body.
        """
        from trustlab.audit.render._unlearning import render_unlearning

        return render_unlearning(result)
