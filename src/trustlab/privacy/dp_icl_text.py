"""DP synthetic demonstrations from private labelled texts (Tang et al. 2024; PTA, Yamasaki et al. 2025).

The text-level front of :func:`trustlab.privacy.dp_icl.generate_dp_demonstrations`: private
``(text, label)`` pairs are formatted as ``"{label}:" + " " + text + separator`` (the prompt
construction of Tang et al.'s Table 5, "News Type: World Text: ..."), grouped by label, and each
label's synthetic demonstrations are generated from that label's texts alone (the paper's
Algorithm 3 draws the subsets from the texts of label ``y~``). The labels and the number of texts
of each label are public; the texts are private. The budget is split evenly over the labels,
``(epsilon / L, delta / L)`` each, so the whole release is ``(epsilon, delta)``-DP by basic
composition whatever neighbouring texts share a label.

References
----------
Yamasaki, Niwa, Chijiwa, Fukami, Miura. "Plausible Token Amplification for Improving Accuracy
of Differentially Private In-Context Learning Based on Implicit Bayesian Inference". ICML 2025.
Tang et al. "Privacy-Preserving In-Context Learning with Differentially Private Few-Shot
Generation". ICLR 2024.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from trustlab._validation import check_delta, check_epsilon, check_positive_int
from trustlab.errors import DataError, ParameterError
from trustlab.privacy.accounting import Accountant
from trustlab.privacy.dp_icl import generate_dp_demonstrations
from trustlab.privacy.release import Release

__all__ = ["TextDemonstrations", "dp_text_demonstrations"]

_NEIGHBOURS = "replace one private text (the labels and the count of texts per label are public)"


@dataclass(frozen=True)
class TextDemonstrations:
    """Synthetic demonstrations of every label and what they cost.

    Attributes
    ----------
    demonstrations : list of (label, text)
        The synthetic demonstrations, label by label.
    releases : list of Release
        One per label (token ids, noise scale, parameters), ``(epsilon / L, delta / L)`` each.
    epsilon, delta : float
        The guarantee of all of them together.

    Examples
    --------
    >>> out = dp_text_demonstrations(model, tok, texts, labels, epsilon=4.0, delta=1e-4)  # doctest: +SKIP
    >>> out.to_dict()["privacy"]["epsilon"]  # doctest: +SKIP
    4.0
    """

    demonstrations: list[tuple[str, str]]
    releases: list[Release] = field(repr=False)
    epsilon: float
    delta: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary: the demonstrations and the privacy spent.

        Returns
        -------
        dict
        """
        return {
            "demonstrations": [{"label": y, "text": t} for y, t in self.demonstrations],
            "privacy": {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "per_label": [
                    {
                        "epsilon": r.epsilon,
                        "delta": r.delta,
                        "sigma_per_token": r.noise_scale,
                        "n_subsets": r.parameters["n_subsets"],
                        "n_steps": r.parameters["n_steps"],
                        "sampling_rate": r.parameters["sampling_rate"],
                    }
                    for r in self.releases
                ],
                "mechanism": self.releases[0].mechanism if self.releases else "",
                "neighbouring": _NEIGHBOURS,
            },
        }


def _encode(tokenizer: Any, text: str) -> list[int]:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return [int(t) for t in ids]


def dp_text_demonstrations(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    labels: Sequence[Any],
    *,
    epsilon: float,
    delta: float,
    n_per_label: int = 1,
    shots: int = 1,
    max_tokens: int = 16,
    top_k: int = 50,
    top_p: float = 1.0,
    alpha: float = 1.0,
    method: str = "pta",
    base_probability: bool = True,
    separator: str = "\n",
    n_subsets: int | None = None,
    accountant: Accountant | None = None,
) -> TextDemonstrations:
    """``(epsilon, delta)``-DP synthetic demonstrations of each label from private labelled texts.

    Parameters
    ----------
    model : transformers causal LM
        In eval mode.
    tokenizer : transformers tokenizer
        The model's tokenizer.
    texts : sequence of str
        The private texts.
    labels : sequence
        Their labels (public, with their counts); written with ``str``.
    epsilon, delta : float
        The guarantee of the whole output (split evenly over the labels).
    n_per_label : int, default 1
        Synthetic demonstrations per label.
    shots : int, default 1
        Private texts per subset (``N``); each label needs at least ``shots`` texts.
    max_tokens : int, default 16
        Tokens generated per demonstration (``T``).
    top_k : int, default 50
        Public vocabulary size (eq. 1).
    top_p : float, default 1.0
        Top-``p`` cut of the public vocabulary (Algorithm 2; ablations PA2/BA2 below 1).
    alpha : float, default 1.0
        PTA's amplification (ignored by ``method="baseline"``).
    method : {"pta", "baseline"}, default "pta"
    base_probability : bool, default True
        ``False``: PTA without ``p_base`` (ablation PA3); ``method="pta"`` only.
    separator : str, default newline
        Ends each private demonstration; a generated one stops at it when it is one token.
    n_subsets : int, optional
        Algorithm 3: per token, ``n_subsets * shots`` of the label's texts drawn without
        replacement (CSPRNG) into ``n_subsets`` subsets, with the subsampled-Gaussian PLD
        accounting (replace-one; :mod:`trustlab.privacy.dp_icl_subsampling`). Default: fixed
        subsets of all the label's texts.
    accountant : Accountant, optional
        Charged once per label, ``(epsilon / L, delta / L)`` each, before its noise is drawn.

    Returns
    -------
    TextDemonstrations

    Raises
    ------
    DataError
        ``texts`` not strings, or ``labels`` of another length.
    ParameterError
        Bad budget or generation parameters (see :func:`~trustlab.privacy.dp_icl.generate_dp_demonstrations`).

    Examples
    --------
    See ``docs/privacy/dp-icl.md``.
    """
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    n_per_label = check_positive_int(n_per_label, "n_per_label")
    texts, labels = list(texts), list(labels)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise DataError("texts must be a non-empty list of strings.", argument="texts")
    if len(labels) != len(texts):
        raise DataError(
            f"labels holds {len(labels)} entries for {len(texts)} texts; give one label per text.",
            argument="labels",
        )
    if not isinstance(separator, str):
        raise ParameterError(f"separator must be a string, got {separator!r}.", argument="separator")
    names = sorted({str(y) for y in labels})
    shots = check_positive_int(shots, "shots")
    fewest = min(sum(str(y) == name for y in labels) for name in names)  # counts are public
    if fewest < shots:
        raise ParameterError(  # checked for every label before any label's release is drawn
            f"a label holds {fewest} texts, fewer than shots={shots}; lower shots.", argument="shots"
        )
    if n_subsets is not None and fewest < check_positive_int(n_subsets, "n_subsets") * shots:
        raise ParameterError(
            f"a label holds {fewest} texts, fewer than n_subsets * shots = {n_subsets * shots}; "
            "lower n_subsets or shots.",
            argument="n_subsets",
        )
    sep = _encode(tokenizer, separator)
    eos = sep[0] if len(sep) == 1 else None
    share_eps, share_delta = epsilon / len(names), delta / len(names)
    demos: list[tuple[str, str]] = []
    releases: list[Release] = []
    for name in names:
        prompt = _encode(tokenizer, f"{name}:")
        private = [
            prompt + _encode(tokenizer, " " + t) + sep
            for t, y in zip(texts, labels, strict=True)
            if str(y) == name
        ]
        rel = generate_dp_demonstrations(
            model,
            private,
            epsilon=share_eps,
            delta=share_delta,
            label_prompts=[prompt],
            n_demonstrations=n_per_label,
            shots=shots,
            max_tokens=max_tokens,
            max_demo_tokens=len(prompt) + max_tokens + len(sep),
            top_k=top_k,
            top_p=top_p,
            alpha=alpha,
            method=method,
            base_probability=base_probability,
            eos_id=eos,
            n_subsets=n_subsets,
            accountant=accountant,
        )
        releases.append(rel)
        for ids in rel.value:
            body = ids[len(prompt) :]
            if eos is not None and body and body[-1] == eos:
                body = body[:-1]
            demos.append((name, tokenizer.decode(body).strip()))
    return TextDemonstrations(demos, releases, epsilon, delta)
