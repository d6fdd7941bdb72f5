"""The result of every differentially private computation in trustlab."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DIFFERENTIAL_PRIVACY", "Release"]

DIFFERENTIAL_PRIVACY = "differential privacy"


@dataclass(frozen=True)
class Release:
    """A value released under differential privacy, with the privacy it spent.

    Parameters
    ----------
    value : Any
        The released (noisy) value: a float, an integer, or a NumPy array.
    epsilon : float
        The epsilon this release spent.
    delta : float
        The delta this release spent (0 for pure DP).
    mechanism : str
        The mechanism's name, e.g. ``"discrete Laplace"``.
    parameters : Mapping[str, Any]
        Everything public about the release: sensitivity, noise scale, public
        bounds, neighbouring relation, and notes such as "inputs clipped to bounds".
    description : str
        What was released, in words a report reader understands.
    guarantee : str, default "differential privacy"
        The privacy notion the ``(epsilon, delta)`` refer to. Only releases under
        differential privacy can be charged to an
        :class:`~trustlab.privacy.accounting.Accountant`; data-specific
        indistinguishability (DSI) releases say so here.
    """

    value: Any
    epsilon: float
    delta: float = 0.0
    mechanism: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    guarantee: str = DIFFERENTIAL_PRIVACY

    @property
    def is_dp(self) -> bool:
        """Whether ``(epsilon, delta)`` is a differential-privacy guarantee."""
        return self.guarantee == DIFFERENTIAL_PRIVACY

    def to_dict(self) -> dict[str, Any]:
        """Return the public metadata of the release (not its value) as plain types."""
        return {
            "description": self.description,
            "mechanism": self.mechanism,
            "epsilon": float(self.epsilon),
            "delta": float(self.delta),
            "guarantee": self.guarantee,
            "parameters": {k: _plain(v) for k, v in self.parameters.items()},
        }


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value
