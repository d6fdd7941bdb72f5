"""High-level causal models and counterfactual pairs for MIB's causal-variable track.

A causal model is a set of named variables, each computed from its parents by a mechanism; an
*interchange intervention* on variable ``V`` runs the model on a base input with ``V`` fixed to
the value it takes on a counterfactual input, and the model's output then is the label the
neural network should produce under the matching intervention on its features [1]_, [2]_.

References
----------
.. [1] Mueller, Geiger, Wiegreffe et al. "MIB: A Mechanistic Interpretability Benchmark". ICML 2025.
.. [2] Geiger, Wu, Potts, Icard, Goodman. "Finding Alignments Between Interpretable Causal Variables
   and Distributed Neural Representations". CLeaR 2024.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, validate_params
from trustlab._validation import check_token_ids
from trustlab.errors import DataError, ParameterError

__all__ = [
    "CausalModel",
    "CounterfactualPairs",
    "second_value_causal_model",
    "sorting_causal_model",
    "sorting_pairs",
]


@dataclass(frozen=True)
class CausalModel:
    """A high-level causal model: input variables, mechanisms and one output variable.

    Parameters
    ----------
    inputs : tuple of str
        Names of the input variables (set from the data).
    mechanisms : dict of str to (tuple of str, callable)
        ``{name: (parents, f)}`` in topological order: ``f(*parent_values)`` computes the
        variable from arrays of its parents' values (vectorised over items). A parent must be
        an input or a variable listed before.
    output : str
        The variable read as the model's answer.

    Examples
    --------
    >>> import numpy as np
    >>> cm = CausalModel(("a", "b"), {"s": (("a", "b"), np.add)}, "s")
    >>> int(cm.interchange({"a": [1], "b": [2]}, {"a": [5], "b": [7]}, "a")[0])
    7
    """

    inputs: tuple[str, ...]
    mechanisms: dict[str, tuple[tuple[str, ...], Callable[..., Any]]] = field(repr=False)
    output: str

    def __post_init__(self) -> None:
        known = list(self.inputs)
        if not known or len(set(known)) != len(known):
            raise ParameterError("inputs must name at least one variable, each once.", argument="inputs")
        for name, spec in self.mechanisms.items():
            parents, fn = spec if isinstance(spec, tuple) and len(spec) == 2 else ((), None)
            missing = [p for p in parents if p not in known]
            if not callable(fn) or missing or name in known:
                raise ParameterError(
                    f"mechanisms[{name!r}] must be (parents, callable) with parents among the inputs and the "
                    f"variables listed before it ({', '.join(known)}); missing {missing}.",
                    argument="mechanisms",
                )
            known.append(name)
        if self.output not in known:
            raise ParameterError(f"output must be one of {', '.join(known)}.", argument="output")

    @property
    def variables(self) -> list[str]:
        """Every variable, inputs first, in topological order."""
        return [*self.inputs, *self.mechanisms]

    def run(
        self, values: Mapping[str, Any], interventions: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Values of every variable given the inputs, with some variables fixed.

        Parameters
        ----------
        values : mapping of str to array-like
            One array per input variable (one entry per item).
        interventions : mapping of str to array-like, optional
            Variables whose value is set instead of computed.

        Returns
        -------
        dict of str to ndarray
        """
        fixed = dict(interventions or {})
        unknown = [v for v in fixed if v not in self.variables]
        if unknown:
            raise ParameterError(
                f"interventions name unknown variables {unknown}; variables: {', '.join(self.variables)}.",
                argument="interventions",
            )
        missing = [v for v in self.inputs if v not in values and v not in fixed]
        if missing:
            raise DataError(f"values lack the input variables {missing}.", argument="values")
        out = {v: np.asarray(fixed[v] if v in fixed else values[v]) for v in self.inputs}
        for name, (parents, fn) in self.mechanisms.items():
            out[name] = np.asarray(fixed[name] if name in fixed else fn(*(out[p] for p in parents)))
        return out

    def interchange(
        self, base: Mapping[str, Any], counterfactual: Mapping[str, Any], variable: str
    ) -> np.ndarray:
        """The output on ``base`` with ``variable`` set to its value on ``counterfactual``.

        Parameters
        ----------
        base, counterfactual : mapping of str to array-like
            Input values of the two inputs of each pair.
        variable : str
            The variable interchanged.

        Returns
        -------
        ndarray
            The output variable's value per pair (the label an aligned intervention must produce).
        """
        if variable not in self.variables:
            raise ParameterError(
                f"variable must be one of {', '.join(self.variables)}, got {variable!r}.", argument="variable"
            )
        source = self.run(counterfactual)[variable]
        return self.run(base, {variable: source})[self.output]


@dataclass(frozen=True)
class CounterfactualPairs:
    """Base / counterfactual inputs and the label an interchange intervention should produce.

    Attributes
    ----------
    base, counterfactual : ndarray of int, shape (n_items, seq)
        Token ids, equal shapes.
    labels : ndarray of int, shape (n_items,)
        The answer token the causal model gives on the base input with the variable interchanged.
    base_labels, cf_labels : ndarray of int, shape (n_items,)
        The causal model's answer tokens on the base and on the counterfactual input (used to keep
        only the pairs the network answers correctly, as MIB does).
    positions : ndarray of int, shape (n_items,), optional
        The answer position, where the intervention is made and the answer read; default the last.
    variable : str, default=""
        The interchanged variable's name (for reports).

    Examples
    --------
    >>> pairs = CounterfactualPairs([[1, 2, 9]], [[3, 4, 9]], [3], [1], [3], variable="min")
    >>> len(pairs), pairs.positions.tolist()  # the answer is read at the last position by default
    (1, [2])
    >>> len(pairs.subset([True]))
    1
    """

    base: np.ndarray
    counterfactual: np.ndarray
    labels: np.ndarray
    base_labels: np.ndarray
    cf_labels: np.ndarray
    positions: np.ndarray | None = None
    variable: str = ""

    def __post_init__(self) -> None:
        base = check_token_ids(self.base, "base")
        cf = check_token_ids(self.counterfactual, "counterfactual")
        if base.shape != cf.shape:
            raise DataError(
                f"counterfactual has shape {cf.shape} but base has {base.shape}: pair inputs of one length.",
                argument="counterfactual",
            )
        n, seq = base.shape
        pos = np.full(n, seq - 1) if self.positions is None else self.positions
        checks = (
            ("labels", self.labels),
            ("base_labels", self.base_labels),
            ("cf_labels", self.cf_labels),
            ("positions", pos),
        )
        for name, value in checks:
            arr = np.asarray(value).reshape(-1)
            if arr.shape != (n,) or not np.issubdtype(arr.dtype, np.integer) or (arr < 0).any():
                raise DataError(
                    f"{name} must hold one non-negative integer per pair ({n}), got shape {np.shape(value)}.",
                    argument=name,
                )
            object.__setattr__(self, name, arr.astype(np.int64))
        if (np.asarray(self.positions) >= seq).any():
            raise DataError(f"positions must lie in [0, {seq}).", argument="positions")
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "counterfactual", cf)

    def __len__(self) -> int:
        return int(self.base.shape[0])

    def subset(self, keep: Any) -> CounterfactualPairs:
        """The pairs selected by a boolean mask or indices.

        Parameters
        ----------
        keep : array-like of bool, shape (n_items,), or array-like of int
            A mask over the pairs, or the indices of the pairs to keep.

        Returns
        -------
        CounterfactualPairs
            The selected pairs, in the order given.
        """
        idx = np.flatnonzero(keep) if np.asarray(keep).dtype == bool else np.asarray(keep, dtype=np.int64)
        pos = self.positions
        return CounterfactualPairs(
            self.base[idx],
            self.counterfactual[idx],
            self.labels[idx],
            self.base_labels[idx],
            self.cf_labels[idx],
            None if pos is None else pos[idx],
            self.variable,
        )


def sorting_causal_model(n_items: int = 6) -> CausalModel:
    """The causal model of "the first sorted value" (the minimum) of the lab's sorting task.

    Inputs ``x0 .. x{n-1}``; ``argmin`` (a pointer: where the minimum is) from the inputs; ``min``
    (the value at the pointer) from the pointer and the inputs; the output ``answer`` is ``min``.
    Interchanging ``min`` makes the answer the counterfactual's minimum; interchanging ``argmin``
    makes it the base's value at the counterfactual's argmin position.

    Parameters
    ----------
    n_items : int, default=6
        Values per sequence.

    Returns
    -------
    CausalModel

    Examples
    --------
    >>> cm = sorting_causal_model(3)
    >>> base = {"x0": [4], "x1": [1], "x2": [7]}
    >>> cf = {"x0": [9], "x1": [8], "x2": [0]}
    >>> int(cm.interchange(base, cf, "min")[0]), int(cm.interchange(base, cf, "argmin")[0])
    (0, 7)
    """
    names = tuple(f"x{i}" for i in range(int(n_items)))

    def argmin(*xs: np.ndarray) -> np.ndarray:
        return np.argmin(np.stack(xs, axis=-1), axis=-1)

    def pick(ptr: np.ndarray, *xs: np.ndarray) -> np.ndarray:
        return np.take_along_axis(np.stack(xs, axis=-1), ptr[..., None], axis=-1)[..., 0]

    mechanisms: dict[str, tuple[tuple[str, ...], Callable[..., Any]]] = {
        "argmin": (names, argmin),
        "min": (("argmin", *names), pick),
        "answer": (("min",), lambda m: m),
    }
    return CausalModel(names, mechanisms, "answer")


def second_value_causal_model(n_items: int = 6) -> CausalModel:
    """The causal model of "the second sorted value" of the lab's sorting task (distinct inputs).

    The model has emitted the first sorted value and reads it back as its last input token; the
    answer is the smallest input above it. Inputs ``x0 .. x{n-1}``; ``first`` (the emitted value, the
    minimum) from the inputs; the output ``second`` = the smallest input above ``first`` (-1 if none).
    Interchanging ``first`` makes the answer the smallest *base* input above the counterfactual's
    first value: the network must move the threshold it compares against, not the counterfactual's
    answer.

    Parameters
    ----------
    n_items : int, default=6
        Values per sequence.

    Returns
    -------
    CausalModel

    Examples
    --------
    >>> cm = second_value_causal_model(3)
    >>> base, cf = {"x0": [4], "x1": [1], "x2": [7]}, {"x0": [9], "x1": [5], "x2": [8]}
    >>> int(cm.run(base)["second"][0]), int(cm.interchange(base, cf, "first")[0])
    (4, 7)
    """
    names = tuple(f"x{i}" for i in range(int(n_items)))

    def first(*xs: np.ndarray) -> np.ndarray:
        return np.min(np.stack(xs, axis=-1), axis=-1)

    def above(t: np.ndarray, *xs: np.ndarray) -> np.ndarray:
        x = np.stack(xs, axis=-1)
        big = np.where(x > t[..., None], x, np.iinfo(np.int64).max).min(axis=-1)
        return np.where(big == np.iinfo(np.int64).max, -1, big)

    mechanisms: dict[str, tuple[tuple[str, ...], Callable[..., Any]]] = {
        "first": (names, first),
        "second": (("first", *names), above),
    }
    return CausalModel(names, mechanisms, "second")


def _distinct_rows(rng: np.random.Generator, n: int, n_items: int, n_values: int) -> np.ndarray:
    rows = [rng.permutation(n_values)[:n_items] for _ in range(n)]
    return np.asarray(rows)


def _first_pairs(rng: np.random.Generator, n: int, n_items: int, n_values: int) -> tuple[np.ndarray, ...]:
    """Pairs for ``first``: sequences ``v1 .. vn SEP min``; answer the second sorted value."""
    cm = second_value_causal_model(n_items)
    parts: list[tuple[np.ndarray, ...]] = []
    total = 0
    while total < n:
        b = _distinct_rows(rng, 2 * n, n_items, n_values)
        c = _distinct_rows(rng, 2 * n, n_items, n_values)
        bv = {f"x{i}": b[:, i] for i in range(n_items)}
        cv = {f"x{i}": c[:, i] for i in range(n_items)}
        labels = cm.interchange(bv, cv, "first")
        base_out, cf_out = cm.run(bv)["second"], cm.run(cv)["second"]
        keep = (labels >= 0) & (labels != base_out) & (labels != cf_out)
        sep = np.full((int(keep.sum()), 1), n_values)
        seq_b = np.concatenate([b[keep], sep, b[keep].min(1, keepdims=True)], axis=1)
        seq_c = np.concatenate([c[keep], sep, c[keep].min(1, keepdims=True)], axis=1)
        parts.append((seq_b, seq_c, labels[keep], base_out[keep], cf_out[keep]))
        total += int(keep.sum())
    return tuple(np.concatenate(x)[:n] for x in zip(*parts, strict=True))


def _unique_min_rows(rng: np.random.Generator, n: int, n_items: int, n_values: int) -> np.ndarray:
    rows: list[np.ndarray] = []
    while len(rows) < n:
        v = rng.integers(0, n_values, size=(2 * n + 8, n_items))
        s = np.sort(v, axis=1)
        rows += list(v[s[:, 0] < s[:, 1]])
    return np.asarray(rows[:n])


@validate_params(
    {
        "n": [Interval(numbers.Integral, 1, None, closed="left")],
        "variable": [str],
        "n_items": [Interval(numbers.Integral, 2, None, closed="left")],
        "n_values": [Interval(numbers.Integral, 3, None, closed="left")],
        "seed": ["random_state"],
    }
)
def sorting_pairs(
    n: int, *, variable: str = "min", n_items: int = 6, n_values: int = 12, seed: Any = 0
) -> CounterfactualPairs:
    """Counterfactual pairs for one variable of :func:`sorting_causal_model`.

    Base and counterfactual are independent random inputs ``v1 .. vn SEP`` (``SEP = n_values``,
    the lab's sorting format) with a unique minimum each; pairs whose interchange leaves the answer
    unchanged are dropped, so a null intervention scores IIA 0 and every correct answer needs the
    variable's value moved from the counterfactual. ``variable="first"`` uses
    :func:`second_value_causal_model` instead: distinct values, the sequences ``v1 .. vn SEP min``
    (the model has emitted the first sorted value), the answer (the second sorted value) read at the
    last position, and also dropped the pairs whose label is the counterfactual's own answer, so
    moving the counterfactual's whole state scores 0 too.

    Parameters
    ----------
    n : int
        Number of pairs.
    variable : {"min", "argmin", "first"}, default="min"
        The variable interchanged: of :func:`sorting_causal_model` (answer at ``SEP``) or ``first`` of
        :func:`second_value_causal_model` (answer after the emitted first value).
    n_items : int, default=6
        Values per sequence.
    n_values : int, default=12
        Values are ``0 .. n_values - 1``.
    seed : int or Generator, default=0
        Seeds the inputs.

    Returns
    -------
    CounterfactualPairs

    Examples
    --------
    >>> p = sorting_pairs(4, n_items=4, seed=0)
    >>> p.base.shape, bool((p.labels == p.counterfactual[:, :4].min(1)).all())
    ((4, 5), True)
    """
    if variable not in ("min", "argmin", "first"):
        raise ParameterError(
            f"variable must be 'min', 'argmin' or 'first', got {variable!r}.", argument="variable"
        )
    rng = np.random.default_rng(seed)
    if variable == "first":
        if n_items > n_values - 1:
            raise ParameterError(
                f"variable 'first' needs distinct values: n_items ({n_items}) < n_values ({n_values}).",
                argument="n_items",
            )
        seq_b, seq_c, lab, out_b, out_c = _first_pairs(rng, n, n_items, n_values)
        return CounterfactualPairs(seq_b, seq_c, lab, out_b, out_c, variable=variable)
    cm = sorting_causal_model(n_items)
    parts: list[tuple[np.ndarray, ...]] = []
    total = 0
    while total < n:
        b = _unique_min_rows(rng, 2 * n, n_items, n_values)
        c = _unique_min_rows(rng, 2 * n, n_items, n_values)
        bv = {f"x{i}": b[:, i] for i in range(n_items)}
        cv = {f"x{i}": c[:, i] for i in range(n_items)}
        labels = cm.interchange(bv, cv, variable)
        base_out, cf_out = cm.run(bv)["answer"], cm.run(cv)["answer"]
        keep = labels != base_out
        parts.append((b[keep], c[keep], labels[keep], base_out[keep], cf_out[keep]))
        total += int(keep.sum())
    b, c, labels, base_out, cf_out = (np.concatenate(x)[:n] for x in zip(*parts, strict=True))
    sep = np.full((n, 1), n_values)
    return CounterfactualPairs(
        np.concatenate([b, sep], axis=1),
        np.concatenate([c, sep], axis=1),
        labels,
        base_out,
        cf_out,
        variable=variable,
    )
