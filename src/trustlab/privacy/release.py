"""The result of every differentially private computation in trustlab."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from trustlab.errors import ParameterError

__all__ = ["DIFFERENTIAL_PRIVACY", "PrivacyMeasure", "Release"]

DIFFERENTIAL_PRIVACY = "differential privacy"


class PrivacyMeasure(StrEnum):
    """How a release's privacy is measured; the :class:`Accountant` composes by it.

    ``PURE``
        ``epsilon``-DP (``delta == 0``), e.g. Laplace, discrete Laplace, the
        exponential mechanism.
    ``APPROXIMATE``
        ``(epsilon, delta)``-DP of unknown shape (e.g. a discrete Gaussian on a grid
        whose ``(epsilon, delta)`` carries a grid term); composed by its
        ``(epsilon, delta)``.
    ``GAUSSIAN``
        The Gaussian mechanism with L2 ``sensitivity`` and noise std ``noise_scale``:
        tight accountants (Renyi, PLD) compose it exactly by its noise multiplier
        ``noise_scale / sensitivity``; its ``(epsilon, delta)`` is what basic
        composition charges.
    ``ZCDP``
        ``rho``-zero-concentrated DP (Bun and Steinke, TCC 2016).

    A string enum: ``PrivacyMeasure.PURE == "pure"``, and it serialises as the string.

    Parameters
    ----------
    value : {"pure", "approximate", "gaussian", "zCDP"}
        The measure's name.

    Examples
    --------
    >>> PrivacyMeasure("zCDP") is PrivacyMeasure.ZCDP, PrivacyMeasure.GAUSSIAN == "gaussian"
    (True, True)
    """

    PURE = "pure"
    APPROXIMATE = "approximate"
    GAUSSIAN = "gaussian"
    ZCDP = "zCDP"


def _optional_positive(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or (not isinstance(value, int | float) and not hasattr(value, "__float__")):
        raise ParameterError(f"{name} must be a positive number or None, got {value!r}.", argument=name)
    x = float(value)
    if not (x > 0 and math.isfinite(x)):
        raise ParameterError(
            f"{name} must be a positive finite number or None, got {value!r}.", argument=name
        )
    return x


@dataclass(frozen=True)
class Release:
    """A value released under differential privacy, with the privacy it spent.

    Parameters
    ----------
    value : Any
        The released (noisy) value: a float, an integer, or a NumPy array. ``None``
        in a *plan*: the release a mechanism states before it draws any noise, which
        an :class:`~trustlab.privacy.accounting.Accountant` checks with
        :meth:`~trustlab.privacy.accounting.Accountant.check`.
    epsilon : float
        The epsilon this release spent.
    delta : float
        The delta this release spent (0 for pure DP).
    mechanism : str
        The mechanism's name, e.g. ``"discrete Laplace"`` (for people; accounting never
        reads it).
    parameters : Mapping[str, Any]
        Everything else public about the release: noise scale, public bounds,
        neighbouring relation, and notes such as "inputs clipped to bounds".
    description : str
        What was released, in words a report reader understands.
    guarantee : str, default "differential privacy"
        The privacy notion the ``(epsilon, delta)`` refer to. Only releases under
        differential privacy can be charged to an
        :class:`~trustlab.privacy.accounting.Accountant`; data-specific
        indistinguishability (DSI) releases say so here.
    measure : PrivacyMeasure or str, optional
        How the privacy is measured (``"pure"``, ``"approximate"``, ``"gaussian"``,
        ``"zCDP"``). Default: ``"pure"`` when ``delta == 0``, else ``"approximate"``.
    sensitivity : float, optional
        The sensitivity the noise was calibrated to (L1 for Laplace-type noise, L2
        for Gaussian noise, the utility's sensitivity for the exponential mechanism).
        Required for ``"gaussian"``.
    noise_scale : float, optional
        The noise's scale (Laplace scale ``b``, Gaussian std ``sigma``), in the units of
        ``sensitivity``. Required for ``"gaussian"``.
    rho : float, optional
        The zCDP parameter. Required for ``"zCDP"``.

    Examples
    --------
    >>> r = Release(3, 0.5, description="count", sensitivity=1, noise_scale=2.0)
    >>> r.measure, r.measure == "pure"
    (<PrivacyMeasure.PURE: 'pure'>, True)
    >>> g = Release(0.0, 1.2, 1e-6, measure="gaussian", sensitivity=1.0, noise_scale=4.0)
    >>> g.noise_multiplier
    4.0
    """

    value: Any
    epsilon: float
    delta: float = 0.0
    mechanism: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    guarantee: str = DIFFERENTIAL_PRIVACY
    measure: PrivacyMeasure | str | None = None
    sensitivity: float | None = None
    noise_scale: float | None = None
    rho: float | None = None

    def __post_init__(self) -> None:
        measure = self.measure
        if measure is None:
            measure = PrivacyMeasure.PURE if self.delta == 0 else PrivacyMeasure.APPROXIMATE
        try:
            measure = PrivacyMeasure(measure)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in PrivacyMeasure)
            raise ParameterError(
                f"measure must be one of {allowed}, got {measure!r}.", argument="measure"
            ) from None
        object.__setattr__(self, "measure", measure)
        for name in ("sensitivity", "noise_scale", "rho"):
            object.__setattr__(self, name, _optional_positive(getattr(self, name), name))
        if measure is PrivacyMeasure.PURE and self.delta != 0:
            raise ParameterError(
                "a pure-DP release has delta = 0; use measure='approximate'.", argument="measure"
            )
        if measure is PrivacyMeasure.GAUSSIAN and (self.sensitivity is None or self.noise_scale is None):
            raise ParameterError(
                "a Gaussian release states its L2 sensitivity and its noise std (noise_scale).",
                argument="sensitivity" if self.sensitivity is None else "noise_scale",
            )
        if measure is PrivacyMeasure.ZCDP and self.rho is None:
            raise ParameterError("a zCDP release states its rho.", argument="rho")

    @property
    def is_dp(self) -> bool:
        """Whether ``(epsilon, delta)`` is a differential-privacy guarantee."""
        return self.guarantee == DIFFERENTIAL_PRIVACY

    @property
    def noise_multiplier(self) -> float | None:
        """``noise_scale / sensitivity`` when both are known, else None."""
        if self.noise_scale is None or self.sensitivity is None:
            return None
        return self.noise_scale / self.sensitivity

    def to_dict(self) -> dict[str, Any]:
        """Return the public metadata of the release (not its value) as plain types.

        Returns
        -------
        dict
            ``description``, ``mechanism``, ``epsilon``, ``delta``, ``guarantee``,
            ``measure`` (its string), ``sensitivity``/``noise_scale``/``rho`` when set,
            and ``parameters`` with NumPy scalars and tuples turned into Python
            numbers and lists (JSON-serialisable when the parameters are). The value
            is left out.

        Examples
        --------
        >>> d = Release(3.0, 0.5, description="noisy count").to_dict()
        >>> d["epsilon"], d["measure"], "value" in d
        (0.5, 'pure', False)
        """
        out: dict[str, Any] = {
            "description": self.description,
            "mechanism": self.mechanism,
            "epsilon": float(self.epsilon),
            "delta": float(self.delta),
            "guarantee": self.guarantee,
            "measure": PrivacyMeasure(str(self.measure)).value,
        }
        for name in ("sensitivity", "noise_scale", "rho"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        out["parameters"] = {k: _plain(v) for k, v in self.parameters.items()}
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value
