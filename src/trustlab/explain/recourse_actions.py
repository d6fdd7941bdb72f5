"""Action sets for recourse: which features a person may change, how far, and jointly how.

An :class:`ActionSet` describes, for every feature ``j`` of a linear classifier,

- its type (``"float"``, ``"int"`` or ``"bool"``) and feasible range ``[lb_j, ub_j]``
  (every reachable point ``x + a`` must lie in it);
- the population region ``[population_lb_j, population_ub_j]`` searched for
  confined regions (the feasible range by default);
- the action bounds ``step_lb_j <= a_j <= step_ub_j`` (immutable: both 0;
  only-increase: ``step_lb_j = 0``; only-decrease: ``step_ub_j = 0``);
- linear constraints that tie features together (:class:`OneHot`,
  :class:`Thermometer`, :class:`DirectionalLinkage`).

Everything is linear, which is what the confined-region MIQCP of Lawless et al.
(ICML 2025) needs: each constraint contributes rows ``G x + H a <= g``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ParameterError
from trustlab.explain._inputs import as_list

__all__ = ["ActionSet", "DirectionalLinkage", "OneHot", "Thermometer"]

_DTYPES = ("float", "int", "bool")

# Largest |bound| of a feature: the solvers' big-M constants are spans of the population
# region, and their feasibility tolerances (1e-9) are relative to constants of order 1.
MAX_BOUND = 1e12
# Smallest non-zero size max(|lb_j|, |ub_j|) of a feature's range, for the same reason.
MIN_RANGE = 1e-12


def _names(names: Any, argument: str) -> tuple[str, ...]:
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise ParameterError(f"{argument} must be a list of feature names, got {names!r}.", argument=argument)
    out = tuple(str(n) for n in names)
    if len(out) < 1 or len(set(out)) != len(out):
        raise ParameterError(
            f"{argument} must name at least one feature, each once; got {list(out)}.", argument=argument
        )
    return out


def _difference(index: Mapping[str, int], d: int, plus: str, minus: str, k: float) -> np.ndarray:
    """The row vector of ``v[plus] - k * v[minus]`` over the ``d`` features."""
    r = np.zeros(d)
    r[index[plus]] += 1.0
    r[index[minus]] -= k
    return r


@dataclass(frozen=True)
class _FeatureGroup:
    """Named features that a joint constraint ties together (checked, at least one, each once)."""

    names: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", _names(self.names, "names"))


@dataclass(frozen=True)
class OneHot(_FeatureGroup):
    """The features form a one-hot group: exactly one is 1, before and after the action.

    Parameters
    ----------
    names : sequence of str
        The indicator features of one categorical variable (each must be ``bool``).

    Examples
    --------
    >>> from trustlab.explain.recourse_actions import OneHot
    >>> OneHot(["job=a", "job=b"]).names
    ('job=a', 'job=b')
    """

    def rows(self, index: Mapping[str, int], d: int) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """Rows ``(G_i, H_i, g_i)`` of ``G x + H a <= g``: ``sum(x + a) = 1`` and ``sum(x) = 1``.

        Parameters
        ----------
        index : mapping of str to int
            Feature name to column position (:attr:`ActionSet.index`).
        d : int
            Number of features.

        Returns
        -------
        list of (numpy.ndarray, numpy.ndarray, float)
            One ``(G_i, H_i, g_i)`` per row.
        """
        e = np.zeros(d)
        e[[index[n] for n in self.names]] = 1.0
        z = np.zeros(d)
        return [(e, e, 1.0), (-e, -e, -1.0), (e, z, 1.0), (-e, z, -1.0)]


@dataclass(frozen=True)
class Thermometer(_FeatureGroup):
    """Thermometer encoding: ``names[0] >= names[1] >= ...`` before and after the action.

    Parameters
    ----------
    names : sequence of str
        Indicators such as ``["income>=10k", "income>=20k", "income>=50k"]``.

    Examples
    --------
    >>> from trustlab.explain.recourse_actions import Thermometer
    >>> len(Thermometer(["income>=10k", "income>=20k"]).rows({"income>=10k": 0, "income>=20k": 1}, 2))
    2
    """

    def rows(self, index: Mapping[str, int], d: int) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """Rows ``x_{k+1} + a_{k+1} - x_k - a_k <= 0`` and ``x_{k+1} - x_k <= 0``.

        Parameters
        ----------
        index, d
            As in :meth:`OneHot.rows`.

        Returns
        -------
        list of (numpy.ndarray, numpy.ndarray, float)
            As in :meth:`OneHot.rows`; two per adjacent pair of indicators.
        """
        out = []
        z = np.zeros(d)
        for hi, lo in zip(self.names[:-1], self.names[1:], strict=True):
            r = _difference(index, d, lo, hi, 1.0)
            out += [(r, r.copy(), 0.0), (r.copy(), z, 0.0)]
        return out


@dataclass(frozen=True)
class DirectionalLinkage:
    """Changing ``source`` by ``a`` changes each target by ``scale * a``.

    For example ``DirectionalLinkage("years_since_default", ("age",), (1.0,))``: a
    person who waits a year is also a year older. Encoded as the equality
    ``a_target = scale * a_source`` (the spec's choice; reachml's constraint of the
    same name is one-directional).

    Parameters
    ----------
    source : str
    targets : sequence of str
    scales : sequence of float
        One per target.

    Examples
    --------
    >>> from trustlab.explain.recourse_actions import DirectionalLinkage
    >>> DirectionalLinkage("years_since_default", ("age",), (1.0,)).names
    ('years_since_default', 'age')
    """

    source: str
    targets: tuple[str, ...]
    scales: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", _names(self.targets, "targets"))
        try:
            scales = tuple(float(s) for s in self.scales)
        except (TypeError, ValueError):
            raise ParameterError(f"scales must be numbers, got {self.scales!r}.", argument="scales") from None
        if len(scales) != len(self.targets) or not np.all(np.isfinite(scales)):
            raise ParameterError(
                f"scales must hold one finite number per target ({len(self.targets)}), got {self.scales!r}.",
                argument="scales",
            )
        object.__setattr__(self, "scales", scales)

    @property
    def names(self) -> tuple[str, ...]:
        """The source, then the targets."""
        return (self.source, *self.targets)

    def rows(self, index: Mapping[str, int], d: int) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """Rows ``a_t - k a_s <= 0`` and ``-(a_t - k a_s) <= 0`` per target.

        Parameters
        ----------
        index, d
            As in :meth:`OneHot.rows`.

        Returns
        -------
        list of (numpy.ndarray, numpy.ndarray, float)
            As in :meth:`OneHot.rows`; two per target.
        """
        out = []
        z = np.zeros(d)
        for t, k in zip(self.targets, self.scales, strict=True):
            r = _difference(index, d, t, self.source, k)
            out += [(z, r, 0.0), (z, -r, 0.0)]
        return out


Constraint = OneHot | Thermometer | DirectionalLinkage


def _mapping(value: Any, name: str) -> Mapping[Any, Any]:
    """``value`` (None: empty) when it is a mapping, else a :class:`ParameterError`."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ParameterError(
            f"{name} must be a mapping feature -> value, got {type(value).__name__}.", argument=name
        )
    return value


def _per_feature(value: Any, d: int, name: str, default: float) -> np.ndarray:
    if value is None:
        return np.full(d, default, dtype=float)
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ParameterError(
            f"{name} must be numbers, one per feature, got {value!r}.", argument=name
        ) from None
    arr = np.broadcast_to(arr, (d,)).copy() if arr.ndim == 0 else arr
    if arr.shape != (d,) or np.isnan(arr).any():
        raise ParameterError(
            f"{name} must hold one number per feature ({d}), without NaN; got shape {arr.shape}.",
            argument=name,
        )
    return arr


class ActionSet:
    """Feature types, bounds, allowed actions and joint constraints for recourse.

    Parameters
    ----------
    names : sequence of str
        Feature names, in the model's column order.
    lb, ub : array-like of shape (d,)
        Feasible range of every feature; ``x + a`` must stay inside. Finite.
    dtype : sequence of {"float", "int", "bool"}, optional
        Feature types (``"float"`` for all by default). ``bool`` features have
        ``lb = 0`` and ``ub = 1``.
    actionable : array-like of bool, optional
        False makes a feature immutable (``step_lb = step_ub = 0``). All True by default.
    step_lb, step_ub : array-like, optional
        Bounds on the action ``a_j`` (default: the full range ``-(ub - lb)`` to
        ``ub - lb``). Use ``step_lb = 0`` for only-increase features.
    population_lb, population_ub : array-like, optional
        The population region searched for confined regions (default: ``lb``, ``ub``).
    constraints : sequence of OneHot, Thermometer or DirectionalLinkage
        Joint constraints, by feature name.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[20, 0, 1.5], [35, 4, 0.5], [60, 10, 2.0]])
    >>> A = ActionSet.from_data(X, names=["age", "years_since_default", "debt"],
    ...                         immutable=["age"], increase_only=["years_since_default"])
    >>> A.to_frame()[["dtype", "lb", "ub", "step_lb", "step_ub"]]
                         dtype    lb    ub  step_lb  step_ub
    age                    int  20.0  60.0      0.0      0.0
    years_since_default    int   0.0  10.0      0.0     10.0
    debt                 float   0.5   2.0     -1.5      1.5
    """

    def __init__(
        self,
        names: Sequence[str],
        lb: Any,
        ub: Any,
        *,
        dtype: Sequence[str] | None = None,
        actionable: Any = None,
        step_lb: Any = None,
        step_ub: Any = None,
        population_lb: Any = None,
        population_ub: Any = None,
        constraints: Sequence[Constraint] = (),
    ) -> None:
        self.names = _names(names, "names")
        d = len(self.names)
        self.lb = _per_feature(lb, d, "lb", np.nan)
        self.ub = _per_feature(ub, d, "ub", np.nan)
        if not (np.all(np.isfinite(self.lb)) and np.all(np.isfinite(self.ub))):
            raise ParameterError("lb and ub must be finite for every feature.", argument="lb")
        for arg, values in (("lb", self.lb), ("ub", self.ub)):
            if np.any(np.abs(values) > MAX_BOUND):
                raise ParameterError(
                    f"{arg} holds {float(values[np.argmax(np.abs(values))]):.3g}; feature ranges must lie "
                    f"within +-{MAX_BOUND:.0e}, where the MILP/MIQCP solvers stay exact (HiGHS reads 1e20 "
                    "as infinite). Rescale the feature (e.g. thousands).",
                    argument=arg,
                )
        if np.any(self.lb > self.ub):
            bad = [self.names[j] for j in np.flatnonzero(self.lb > self.ub)]
            raise ParameterError(f"lb must be <= ub; violated for {bad}.", argument="lb")
        size = np.maximum(np.abs(self.lb), np.abs(self.ub))
        tiny = (size > 0) & (size < MIN_RANGE)
        if tiny.any():
            raise ParameterError(
                f"the range of {self.names[int(np.argmax(tiny))]!r} lies within +-{MIN_RANGE:.0e}; the "
                "solvers' tolerances would swallow it. Rescale the feature (other units).",
                argument="ub",
            )
        if dtype is not None and (isinstance(dtype, str | bytes) or not isinstance(dtype, Iterable)):
            raise ParameterError(
                f"dtype must hold one of {_DTYPES} per feature ({d}), got {dtype!r}.", argument="dtype"
            )
        dt = tuple(dtype) if dtype is not None else ("float",) * d
        if len(dt) != d or any(t not in _DTYPES for t in dt):
            raise ParameterError(
                f"dtype must hold one of {_DTYPES} per feature ({d}), got {dt!r}.", argument="dtype"
            )
        self.dtype = dt
        integral = np.array([t != "float" for t in dt])
        if np.any(integral & ((self.lb != np.round(self.lb)) | (self.ub != np.round(self.ub)))):
            raise ParameterError("int and bool features need integer lb and ub.", argument="dtype")
        if actionable is None:
            self.actionable = np.ones(d, dtype=bool)
        else:
            act = np.asarray(actionable)
            if act.shape != (d,) or act.dtype != bool:
                raise ParameterError(
                    f"actionable must be {d} booleans, got {actionable!r}.", argument="actionable"
                )
            self.actionable = act.copy()
        span = self.ub - self.lb
        self.step_lb = np.minimum(_per_feature(step_lb, d, "step_lb", -np.inf), 0.0)
        self.step_ub = np.maximum(_per_feature(step_ub, d, "step_ub", np.inf), 0.0)
        self.step_lb = np.maximum(self.step_lb, -span)
        self.step_ub = np.minimum(self.step_ub, span)
        self.step_lb[~self.actionable] = 0.0
        self.step_ub[~self.actionable] = 0.0
        self.population_lb = (
            _per_feature(population_lb, d, "population_lb", 0.0)
            if population_lb is not None
            else self.lb.copy()
        )
        self.population_ub = (
            _per_feature(population_ub, d, "population_ub", 0.0)
            if population_ub is not None
            else self.ub.copy()
        )
        if (
            np.any(self.population_lb < self.lb)
            or np.any(self.population_ub > self.ub)
            or np.any(self.population_lb > self.population_ub)
        ):
            raise ParameterError(
                "the population region must lie inside [lb, ub] with population_lb <= population_ub.",
                argument="population_lb",
            )
        self.constraints: list[Constraint] = []
        for c in constraints:
            self.add_constraint(c)

    @property
    def index(self) -> dict[str, int]:
        """Feature name to column position."""
        return {n: j for j, n in enumerate(self.names)}

    def __len__(self) -> int:
        return len(self.names)

    def add_constraint(self, constraint: Constraint) -> ActionSet:
        """Add a joint constraint (checked against the feature names).

        Parameters
        ----------
        constraint : OneHot, Thermometer or DirectionalLinkage

        Returns
        -------
        ActionSet
            ``self``.
        """
        if not isinstance(constraint, OneHot | Thermometer | DirectionalLinkage):
            raise ParameterError(
                "constraint must be OneHot, Thermometer or DirectionalLinkage, got "
                f"{type(constraint).__name__}.",
                argument="constraint",
            )
        unknown = [n for n in constraint.names if n not in self.index]
        if unknown:
            raise DataError(
                f"constraint names unknown feature(s) {unknown}; the action set has {list(self.names)}.",
                argument="constraint",
            )
        if isinstance(constraint, OneHot | Thermometer):
            nonbool = [n for n in constraint.names if self.dtype[self.index[n]] != "bool"]
            if nonbool:
                raise ParameterError(
                    f"{type(constraint).__name__} needs bool features; {nonbool} are not.",
                    argument="constraint",
                )
        self.constraints.append(constraint)
        return self

    def constraint_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All joint-constraint rows as ``(G, H, g)`` with ``G x + H a <= g``.

        Returns
        -------
        G, H : numpy.ndarray of shape (m, d)
        g : numpy.ndarray of shape (m,)
        """
        d = len(self)
        rows = [r for c in self.constraints for r in c.rows(self.index, d)]
        if not rows:
            return np.zeros((0, d)), np.zeros((0, d)), np.zeros(0)
        G = np.array([r[0] for r in rows], dtype=float)
        H = np.array([r[1] for r in rows], dtype=float)
        g = np.array([r[2] for r in rows], dtype=float)
        return G, H, g

    @property
    def separable(self) -> bool:
        """True when no joint constraint involves an actionable feature."""
        idx = self.index
        return not any(any(self.actionable[idx[n]] for n in c.names) for c in self.constraints)

    def to_frame(self) -> pd.DataFrame:
        """One row per feature: type, bounds, action bounds, population region.

        Returns
        -------
        pandas.DataFrame
            Indexed by feature name.
        """
        return pd.DataFrame(
            {
                "dtype": list(self.dtype),
                "actionable": self.actionable,
                "lb": self.lb,
                "ub": self.ub,
                "step_lb": self.step_lb,
                "step_ub": self.step_ub,
                "population_lb": self.population_lb,
                "population_ub": self.population_ub,
            },
            index=pd.Index(list(self.names), name="feature"),
        ).rename_axis(None)

    def __repr__(self) -> str:
        n_act = int(self.actionable.sum())
        return f"ActionSet({len(self)} features, {n_act} actionable, {len(self.constraints)} constraints)"

    @classmethod
    def from_data(
        cls,
        X: Any,
        names: Sequence[str] | None = None,
        *,
        immutable: Iterable[str] = (),
        increase_only: Iterable[str] = (),
        decrease_only: Iterable[str] = (),
        bounds: Mapping[str, tuple[float, float]] | None = None,
        dtype: Mapping[str, str] | None = None,
        constraints: Sequence[Constraint] = (),
    ) -> ActionSet:
        """Build an action set from a data sample: types and ranges read off ``X``.

        Columns whose values are all 0/1 become ``bool``, other integer-valued
        columns ``int``, the rest ``float``; ranges are the column min and max
        unless ``bounds`` gives them. Everything is actionable in both directions
        unless named in ``immutable``, ``increase_only`` or ``decrease_only``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, d)
            The sample (values within +-1e12).
        names : sequence of str, optional
            Feature names; default the DataFrame's columns or ``x0, x1, ...``.
        immutable, increase_only, decrease_only : str or sequence of str
            Features held fixed, or allowed to move one way only.
        bounds : mapping of str to (float, float), optional
            Feasible ranges that replace the sample's min and max.
        dtype : mapping of str to {"float", "int", "bool"}, optional
            Types that replace the inferred ones.
        constraints : sequence of OneHot, Thermometer or DirectionalLinkage

        Returns
        -------
        ActionSet
        """
        if names is None and isinstance(X, pd.DataFrame):
            names = [str(c) for c in X.columns]
        arr = check_numeric_array(X, "X", ndim=2)
        if np.any(np.abs(arr) > MAX_BOUND):
            raise DataError(
                f"X holds values beyond +-{MAX_BOUND:.0e}, the largest feature range the recourse solvers "
                "take; rescale the feature (e.g. thousands).",
                argument="X",
            )
        d = arr.shape[1]
        names = _names(names if names is not None else [f"x{j}" for j in range(d)], "names")
        if len(names) != d:
            raise DataError(f"names has {len(names)} entries but X has {d} columns.", argument="names")
        index = {n: j for j, n in enumerate(names)}
        immutable, increase_only, decrease_only = (
            [str(c) for c in as_list(v, arg)]
            for v, arg in (
                (immutable, "immutable"),
                (increase_only, "increase_only"),
                (decrease_only, "decrease_only"),
            )
        )
        sets = {"immutable": immutable, "increase_only": increase_only, "decrease_only": decrease_only}
        for arg, cols in sets.items():
            unknown = [c for c in cols if c not in index]
            if unknown:
                raise DataError(f"{arg}: unknown feature(s) {unknown}; known: {list(names)}.", argument=arg)
        lb, ub = arr.min(axis=0), arr.max(axis=0)
        for name, pair in _mapping(bounds, "bounds").items():
            if name not in index:
                raise DataError(f"bounds: unknown feature {name!r}.", argument="bounds")
            try:
                lo, hi = (float(v) for v in pair)
            except (TypeError, ValueError):
                raise ParameterError(
                    f"bounds[{name!r}] must be a pair (low, high) of numbers, got {pair!r}.",
                    argument="bounds",
                ) from None
            lb[index[name]], ub[index[name]] = lo, hi
        integral = np.all(arr == np.round(arr), axis=0)
        binary = np.all((arr == 0) | (arr == 1), axis=0)
        types = ["bool" if b else ("int" if i else "float") for b, i in zip(binary, integral, strict=True)]
        for name, t in _mapping(dtype, "dtype").items():
            if name not in index:
                raise DataError(f"dtype: unknown feature {name!r}.", argument="dtype")
            types[index[name]] = t
        for j, t in enumerate(types):
            if t == "bool":
                lb[j], ub[j] = 0.0, 1.0
            elif t == "int":
                lb[j], ub[j] = np.floor(lb[j]), np.ceil(ub[j])
        actionable = np.array([n not in set(immutable) for n in names])
        step_lb = np.full(d, -np.inf)
        step_ub = np.full(d, np.inf)
        step_lb[[index[n] for n in increase_only]] = 0.0
        step_ub[[index[n] for n in decrease_only]] = 0.0
        return cls(
            names,
            lb,
            ub,
            dtype=types,
            actionable=actionable,
            step_lb=step_lb,
            step_ub=step_ub,
            constraints=constraints,
        )
