"""Building the lab's config dataclasses from plain mappings (one rule for every config)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

from trustlab.errors import ParameterError

T = TypeVar("T")


def from_fields(cls: type[T], data: dict[str, Any], *, name: str) -> T:
    """``cls(**data)`` after checking that every key names a field of the dataclass ``cls``.

    Parameters
    ----------
    cls : type
        A dataclass.
    data : dict
        Its fields by name.
    name : str
        The config's name (``"model"``, ``"train"``): in the message and as the argument the
        error names.

    Returns
    -------
    object
        The instance (its ``__post_init__`` validates the values).

    Raises
    ------
    ParameterError
        When ``data`` has keys that are not fields of ``cls``.
    """
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise ParameterError(f"unknown {name} field(s) {unknown}; allowed: {sorted(known)}.", argument=name)
    return cls(**data)
