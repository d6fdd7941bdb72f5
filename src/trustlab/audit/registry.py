"""The audit's section registry: which sections a default audit runs, in report order.

Sections are keyed by name. The built-in ones are registered by dotted path and imported
on first use, so ``import trustlab.audit`` loads none of them (nor what they import:
scikit-learn's metrics, the DP mechanisms, FastPD). A user adds a section with
:func:`register_section`; a second section under a name already taken is refused with a
:class:`~trustlab.errors.ParameterError` naming it, unless ``replace=True`` says so.

Examples
--------
>>> from trustlab.audit import Section, SectionResult, register_section, section_names
>>> class RowCount(Section):
...     name = "row_count"
...     title = "Row count"
...     def compute(self, ctx, budget):
...         return SectionResult(self.name, self.title, {"rows": len(ctx.data)})
...     def render(self, result):
...         return f"<p>{result.figures['rows']} rows</p>"
>>> _ = register_section(RowCount)
>>> section_names()[-1]
'row_count'
>>> from trustlab.audit import unregister_section
>>> unregister_section("row_count")
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterator, Sequence
from typing import Any, overload

from trustlab.audit.section import Section
from trustlab.errors import ParameterError

__all__ = [
    "SECTIONS",
    "default_sections",
    "get_section",
    "register_section",
    "section_names",
    "unregister_section",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

# name -> a Section subclass, or "module:Class" imported on first use (report order)
_REGISTRY: dict[str, type[Section] | str] = {
    "data": "trustlab.audit.sections.data:DataSection",
    "performance": "trustlab.audit.sections.performance:PerformanceSection",
    "fairness": "trustlab.audit.sections.fairness:FairnessSection",
    "errors": "trustlab.audit.sections.errors:ErrorAnalysisSection",
    "targeting": "trustlab.audit.sections.targeting:TargetingSection",
    "privacy": "trustlab.audit.sections.privacy:PrivacySection",
    "explain": "trustlab.audit.sections.explain:ExplainSection",
    "uncertainty": "trustlab.audit.sections.uncertainty:UncertaintySection",
    "unlearning": "trustlab.audit.sections.unlearning:UnlearningSection",
    "robustness": "trustlab.audit.sections.robustness:RobustnessSection",
}


def _load(name: str) -> type[Section]:
    entry = _REGISTRY[name]
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        cls = getattr(importlib.import_module(module), attr)
        if not (isinstance(cls, type) and issubclass(cls, Section)):
            raise ParameterError(
                f"section {name!r} is registered as {entry!r}, which is not a Section subclass.",
                argument="section",
            )
        if cls.name != name:
            raise ParameterError(
                f"section {name!r} is registered as {entry!r}, whose name is {cls.name!r}.",
                argument="section",
            )
        _REGISTRY[name] = cls
        return cls
    return entry


def _check_class(cls: Any) -> type[Section]:
    if not (isinstance(cls, type) and issubclass(cls, Section)):
        raise ParameterError(
            f"register_section takes a Section subclass (or 'module:Class'), got {cls!r}.",
            argument="section",
        )
    name = getattr(cls, "name", "")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise ParameterError(
            f"section class {cls.__name__} does not implement {missing}; a section defines "
            "compute(ctx, budget) and render(result).",
            argument="section",
        )
    if not isinstance(name, str) or not _NAME.match(name):
        raise ParameterError(
            f"section class {cls.__name__} needs a name of lower-case letters, digits and '_' "
            f"starting with a letter (it is the report.json key and the HTML anchor), got {name!r}.",
            argument="section",
        )
    if not isinstance(getattr(cls, "title", None), str) or not cls.title:
        raise ParameterError(f"section {name!r} needs a non-empty title.", argument="section")
    weight = getattr(cls, "budget_weight", None)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight < float("inf"):
        raise ParameterError(
            f"section {name!r} needs a finite budget_weight >= 0 (0: it releases nothing in private "
            f"mode), got {weight!r}.",
            argument="section",
        )
    return cls


def register_section(
    section: type[Section] | str,
    *,
    name: str | None = None,
    position: int | None = None,
    before: str | None = None,
    after: str | None = None,
    replace: bool = False,
) -> Any:
    """Add a section to the default audit (usable as a class decorator).

    Parameters
    ----------
    section : Section subclass or str
        The class, or ``"package.module:ClassName"`` to import it on first use (then
        ``name`` is required: the module is not imported to read it).
    name : str, optional
        The section's name; by default the class's ``name`` attribute. It is the key in
        ``report.json`` and in the registry.
    position : int, optional
        Index in report order (default: last). At most one of ``position``, ``before``
        and ``after``.
    before, after : str, optional
        Place the section just before or after the registered section of that name.
    replace : bool, default False
        Replace a section registered under the same name (keeping its place unless a
        position is given). Without it, a name already taken by another section raises
        (registering the very same class again changes nothing).

    Returns
    -------
    Section subclass or str
        ``section`` unchanged, so that ``@register_section`` leaves the class as it is.

    Raises
    ------
    trustlab.errors.ParameterError
        When the name is taken (and ``replace`` is False), the class is not a
        :class:`~trustlab.audit.Section` with a valid ``name``, ``title`` and
        ``budget_weight``, or ``before`` / ``after`` name no registered section.

    Examples
    --------
    >>> from trustlab.audit import Section, SectionResult, register_section, unregister_section
    >>> @register_section
    ... class Hello(Section):
    ...     name = "hello"
    ...     title = "Hello"
    ...     def compute(self, ctx, budget):
    ...         return SectionResult(self.name, self.title, {})
    ...     def render(self, result):
    ...         return "<p>hello</p>"
    >>> class Other(Hello):
    ...     pass
    >>> register_section(Other)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trustlab.errors.ParameterError: a section named 'hello' is already registered (...Hello); ...
    >>> unregister_section("hello")
    """
    if isinstance(section, str):
        if ":" not in section or name is None:
            raise ParameterError(
                "a section given by path needs the form 'package.module:ClassName' and a name= "
                f"(the module is imported on first use), got {section!r}.",
                argument="section",
            )
        key = name
        if not _NAME.match(key):
            raise ParameterError(f"invalid section name {key!r}.", argument="name")
    else:
        _check_class(section)
        key = section.name if name is None else name
        if key != section.name:
            raise ParameterError(
                f"name={key!r} differs from the class's name {section.name!r}; the report uses the "
                "class's name, so give the same one (or leave name out).",
                argument="name",
            )
    if not isinstance(replace, bool):
        raise ParameterError(f"replace must be True or False, got {replace!r}.", argument="replace")
    if sum(x is not None for x in (position, before, after)) > 1:
        raise ParameterError("give at most one of position, before and after.", argument="position")
    if key in _REGISTRY and _REGISTRY[key] is section and (position, before, after) == (None, None, None):
        return section  # the very same class again (e.g. a module imported twice): nothing to do
    if key in _REGISTRY and not replace:
        current = _REGISTRY[key]
        where = current if isinstance(current, str) else f"{current.__module__}.{current.__qualname__}"
        raise ParameterError(
            f"a section named {key!r} is already registered ({where}); choose another name, or pass "
            "replace=True to replace it.",
            argument="section",
        )
    order = [k for k in _REGISTRY if k != key]
    if before is not None or after is not None:
        anchor = before if before is not None else after
        if anchor not in order:
            raise ParameterError(
                f"no registered section named {anchor!r} to place {key!r} next to; registered: {order}.",
                argument="before" if before is not None else "after",
            )
        index = order.index(anchor) + (1 if after is not None else 0)
    elif position is not None:
        if isinstance(position, bool) or not isinstance(position, int):
            raise ParameterError(f"position must be an int, got {position!r}.", argument="position")
        index = position if position >= 0 else len(order) + 1 + position
        index = min(max(index, 0), len(order))
    elif key in _REGISTRY:
        index = list(_REGISTRY).index(key)
    else:
        index = len(order)
    order.insert(index, key)
    entries = {k: _REGISTRY[k] for k in order if k != key}
    entries[key] = section
    _REGISTRY.clear()
    _REGISTRY.update({k: entries[k] for k in order})
    return section


def unregister_section(name: str) -> None:
    """Remove the section registered under ``name`` from the default audit.

    Parameters
    ----------
    name : str
        A registered section's name.

    Raises
    ------
    trustlab.errors.ParameterError
        When no section of that name is registered.

    Examples
    --------
    >>> from trustlab.audit import register_section, section_names, unregister_section
    >>> _ = register_section("trustlab.audit.sections.data:DataSection", name="data_again")
    >>> unregister_section("data_again")
    >>> "data_again" in section_names()
    False
    """
    if name not in _REGISTRY:
        raise ParameterError(
            f"no section named {name!r} is registered; registered: {list(_REGISTRY)}.", argument="name"
        )
    del _REGISTRY[name]


def section_names() -> list[str]:
    """Names of the registered sections, in report order (nothing is imported).

    Returns
    -------
    list of str

    Examples
    --------
    >>> section_names()[:5]
    ['data', 'performance', 'fairness', 'errors', 'targeting']
    """
    return list(_REGISTRY)


def get_section(name: str) -> type[Section]:
    """The section class registered under ``name`` (importing it on first use).

    Parameters
    ----------
    name : str
        A registered section's name.

    Returns
    -------
    Section subclass

    Raises
    ------
    trustlab.errors.ParameterError
        When no section of that name is registered.

    Examples
    --------
    >>> get_section("fairness").__name__
    'FairnessSection'
    """
    if name not in _REGISTRY:
        raise ParameterError(
            f"no section named {name!r} is registered; registered: {list(_REGISTRY)}.", argument="name"
        )
    return _load(name)


def default_sections() -> list[Section]:
    """Fresh instances of every registered section, in report order.

    Returns
    -------
    list of Section

    Examples
    --------
    >>> [s.name for s in default_sections()][:5]
    ['data', 'performance', 'fairness', 'errors', 'targeting']
    """
    return [_load(name)() for name in list(_REGISTRY)]


class _SectionClasses(Sequence[type[Section]]):
    """A read-only view of the registered section classes, in report order (imports on access).

    Kept for callers of the former module-level list ``SECTIONS``; register and remove
    sections with :func:`register_section` and :func:`unregister_section`.
    """

    def __len__(self) -> int:
        return len(_REGISTRY)

    @overload
    def __getitem__(self, index: int) -> type[Section]: ...

    @overload
    def __getitem__(self, index: slice) -> list[type[Section]]: ...

    def __getitem__(self, index: int | slice) -> type[Section] | list[type[Section]]:
        names = list(_REGISTRY)
        if isinstance(index, slice):
            return [_load(n) for n in names[index]]
        return _load(names[index])

    def __iter__(self) -> Iterator[type[Section]]:
        return iter([_load(n) for n in list(_REGISTRY)])

    def __repr__(self) -> str:
        return f"SECTIONS({list(_REGISTRY)})"


SECTIONS: Sequence[type[Section]] = _SectionClasses()
"""The registered section classes in report order: a read-only view (see :func:`register_section`)."""
