"""Structural causal models with additive noise, for backtracking counterfactuals.

An SCM here is a DAG over the features with one structural equation per node,
``X_i := f_i(X_pa(i)) + U_i``, mutually independent noises and no hidden
confounders. Additive noise makes the model *bijective*: the noise of a row is
recovered exactly by abduction, ``u_i = x_i - f_i(x_pa(i))`` in topological order,
and ``generate(abduct(X)) == X``. That is the assumption BRACE (Fatemi et al.,
ICML 2025) needs (its "bijective generation" mechanisms).

- :class:`LinearSCM`: ``X = B X + c + U`` (linear-Gaussian when the noise is
  Gaussian); coefficients given by the user or fitted by least squares.
- :class:`AdditiveNoiseSCM`: any mechanism ``f_i`` (a callable, or a fitted
  scikit-learn regressor), given by the user or fitted per node from data.

Both follow scikit-learn's contract: ``__init__`` stores the graph and the
user-supplied parts, ``fit(X)`` checks the data against the graph, fits what
is missing and sets ``feature_names_in_``, ``noise_scale_`` (sd of each node's
noise on the data) and ``feature_scale_`` (sd of each feature).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.explain._inputs import as_list, check_magnitude

__all__ = ["AdditiveNoiseSCM", "LinearSCM"]


def _check_graph(graph: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(graph, Mapping) or len(graph) == 0:
        raise ParameterError(
            "graph must be a non-empty mapping {node: [parents]} with one entry per feature "
            f"(roots map to []), got {type(graph).__name__}.",
            argument="graph",
        )
    out: dict[str, tuple[str, ...]] = {}
    for node, parents in graph.items():
        if isinstance(parents, str) or not isinstance(parents, Sequence | tuple | set | frozenset):
            raise ParameterError(
                f"graph[{node!r}] must be a list of parent names, got {parents!r}; use [] for a root.",
                argument="graph",
            )
        ps = tuple(str(p) for p in parents)
        if len(set(ps)) != len(ps) or str(node) in ps:
            raise ParameterError(
                f"graph[{node!r}] lists a parent twice or the node itself: {list(ps)}.", argument="graph"
            )
        out[str(node)] = ps
    unknown = sorted({p for ps in out.values() for p in ps} - set(out))
    if unknown:
        raise ParameterError(
            f"graph names parents {unknown} that are not nodes; add them as keys (roots map to []).",
            argument="graph",
        )
    return out


def _topological_order(graph: Mapping[str, tuple[str, ...]]) -> list[str]:
    order: list[str] = []
    done: set[str] = set()
    remaining = dict(graph)
    while remaining:
        ready = [n for n, ps in remaining.items() if all(p in done for p in ps)]
        if not ready:
            raise ParameterError(
                f"graph has a cycle among {sorted(remaining)}; an SCM needs a DAG.", argument="graph"
            )
        for n in ready:
            order.append(n)
            done.add(n)
            del remaining[n]
    return order


class AdditiveNoiseSCM:
    """Additive-noise structural causal model ``X_i := f_i(X_pa(i)) + U_i`` over a DAG.

    Parameters
    ----------
    graph : mapping of str to list of str
        ``{node: [parents]}``, one entry per feature; roots map to ``[]``. The
        nodes are the feature (column) names.
    mechanisms : mapping of str to callable or regressor, optional
        User-supplied ``f_i`` for some nodes: a callable taking an array of shape
        ``(n, len(parents))`` (columns in the order of ``graph[node]``) and
        returning ``(n,)``, or a *fitted* object with ``predict``. Nodes left out
        are fitted from data by ``estimator``; roots get their mean.
    estimator : scikit-learn regressor, optional
        Cloned and fitted once per non-root node without a supplied mechanism.
        Default: cubic splines (8 knots, linear extrapolation) + ``Ridge(alpha=1e-6)``,
        i.e. a smooth additive model in the parents; pass e.g. an ``MLPRegressor``
        pipeline for interactions. Prefer smooth regressors: tree mechanisms are
        piecewise constant, and a parent value lying exactly on a split threshold
        can then flip under floating-point round-off, so that
        ``generate(abduct(X))`` differs from ``X``.

    Attributes
    ----------
    feature_names_in_ : ndarray of str
        Column order of every array this SCM takes and returns.
    order_ : list of str
        A topological order of the nodes.
    mechanisms_ : dict
        The mechanism used for each node (callable or fitted regressor).
    noise_scale_ : ndarray of shape (d,)
        Standard deviation of each node's noise ``U_i`` on the fit data.
    feature_scale_ : ndarray of shape (d,)
        Standard deviation of each feature on the fit data (BRACE's default scales).

    References
    ----------
    Fatemi, P., Sharifian, E., Yassaee, M. H. "A New Approach to Backtracking
    Counterfactual Explanations: A Unified Causal Framework for Efficient Model
    Interpretability". ICML 2025, PMLR 267:16273-16285.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=500)
    >>> X = pd.DataFrame({"a": a, "b": np.sin(a) + 0.1 * rng.normal(size=500)})
    >>> scm = AdditiveNoiseSCM({"a": [], "b": ["a"]}, mechanisms={"b": np.sin}).fit(X)
    >>> U = scm.abduct(X)
    >>> bool(np.allclose(scm.generate(U), X))
    True
    >>> round(float(scm.noise_scale_[1]), 1)
    0.1
    """

    def __init__(
        self,
        graph: Mapping[str, Sequence[str]],
        mechanisms: Mapping[str, Any] | None = None,
        estimator: Any = None,
    ) -> None:
        self.graph = graph
        self.mechanisms = mechanisms
        self.estimator = estimator

    # ------------------------------------------------------------------ fitting
    def _frame(self, X: Any, name: str, nodes: Sequence[str]) -> np.ndarray:
        if isinstance(X, pd.DataFrame):
            cols = [str(c) for c in X.columns]
            missing = [n for n in nodes if n not in cols]
            extra = [c for c in cols if c not in nodes]
            if missing or extra:
                raise DataError(
                    f"{name} does not match the SCM's graph: columns missing {missing}, columns not in the "
                    f"graph {extra}; give the SCM one node per model feature (graph keys = column names).",
                    argument=name,
                )
            X = X.set_axis(cols, axis=1)[list(nodes)]
        arr = check_magnitude(check_numeric_array(X, name, ndim=2), name)
        if arr.shape[1] != len(nodes):
            raise DataError(
                f"{name} has {arr.shape[1]} columns but the SCM's graph has {len(nodes)} nodes "
                f"{list(nodes)}; "
                "pass a DataFrame whose columns are the graph's nodes, or fix the graph.",
                argument=name,
            )
        return arr

    @staticmethod
    def _nodes_for(X: Any, graph: Mapping[str, tuple[str, ...]]) -> list[str]:
        """Column order: a DataFrame's own (when its columns are the graph's nodes), else the graph's."""
        if isinstance(X, pd.DataFrame):
            cols = [str(c) for c in X.columns]
            if sorted(cols) == sorted(graph):
                return cols
        return list(graph)

    def _prepare(self) -> tuple[dict[str, tuple[str, ...]], list[str]]:
        graph = _check_graph(self.graph)
        order = _topological_order(graph)
        if self.mechanisms is not None and not isinstance(self.mechanisms, Mapping):
            raise ParameterError(
                f"mechanisms must be a mapping node -> callable or fitted regressor, got "
                f"{type(self.mechanisms).__name__}.",
                argument="mechanisms",
            )
        mech = dict(self.mechanisms or {})
        unknown = sorted(set(map(str, mech)) - set(graph))
        if unknown:
            raise ParameterError(
                f"mechanisms names nodes {unknown} that are not in the graph {list(graph)}.",
                argument="mechanisms",
            )
        for node, f in mech.items():
            if not (callable(f) or hasattr(f, "predict")):
                raise ParameterError(
                    f"mechanisms[{node!r}] must be a callable or a fitted regressor with predict.",
                    argument="mechanisms",
                )
        return graph, order

    def _fit_node(self, node: str, parents: tuple[str, ...], Xp: np.ndarray, xi: np.ndarray) -> Any:
        if not parents:
            return float(xi.mean())
        if self.estimator is None:
            from sklearn.linear_model import Ridge
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import SplineTransformer

            est = make_pipeline(SplineTransformer(n_knots=8, extrapolation="linear"), Ridge(alpha=1e-6))
        else:
            from sklearn.base import clone

            est = clone(self.estimator)
        return est.fit(Xp, xi)

    def fit(self, X: Any, y: Any = None) -> AdditiveNoiseSCM:
        """Check ``X`` against the graph, fit the missing mechanisms and the noise scales.

        Parameters
        ----------
        X : DataFrame or array of shape (n, d)
            Data with one column per node (a DataFrame's columns may come in any
            order and fix the SCM's column order; an array's columns follow the
            graph's key order).
        y : ignored

        Returns
        -------
        self
        """
        graph, order = self._prepare()
        nodes = self._nodes_for(X, graph)
        arr = self._frame(X, "X", nodes)
        if arr.shape[0] < 2:
            raise DataError("X needs at least 2 rows to fit the SCM.", argument="X")
        index = {n: j for j, n in enumerate(nodes)}
        supplied = {str(k): v for k, v in (self.mechanisms or {}).items()}
        self.feature_names_in_ = np.array(nodes, dtype=object)
        self.n_features_in_ = len(nodes)
        self.graph_ = graph
        self.order_ = order
        self._index = index
        self._parents_idx = {n: [index[p] for p in graph[n]] for n in nodes}
        self._order_idx = [index[n] for n in order]
        self.mechanisms_ = {}
        for node in order:
            j = index[node]
            if node in supplied:
                self.mechanisms_[node] = supplied[node]
            else:
                self.mechanisms_[node] = self._fit_node(
                    node, graph[node], arr[:, self._parents_idx[node]], arr[:, j]
                )
        U = self.abduct(arr)
        self.noise_scale_ = U.std(axis=0)
        self.noise_mean_ = U.mean(axis=0)
        self.feature_scale_ = arr.std(axis=0)
        if np.any(self.feature_scale_ <= 0):
            const = [nodes[j] for j in np.flatnonzero(self.feature_scale_ <= 0)]
            raise DataError(f"X has constant column(s) {const}; drop them from the graph.", argument="X")
        self.noise_scale_ = np.where(self.noise_scale_ > 0, self.noise_scale_, self.feature_scale_)
        return self

    # ------------------------------------------------------------------ evaluation
    def _check_fitted(self) -> None:
        if not hasattr(self, "mechanisms_"):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted; call fit(X) with data whose columns are "
                "the graph's nodes.",
                argument="scm",
            )

    def _f(self, node: str, Xp: np.ndarray) -> np.ndarray:
        mech = self.mechanisms_[node]
        if isinstance(mech, numbers.Real):
            return np.full(Xp.shape[0], float(mech))
        if hasattr(mech, "predict"):
            if Xp.shape[1] == 0:
                return np.asarray(mech.predict(np.zeros((Xp.shape[0], 0))), dtype=float)
            return np.asarray(mech.predict(Xp), dtype=float).reshape(-1)
        fn: Callable[..., Any] = mech
        out = np.asarray(fn(Xp), dtype=float)
        return np.broadcast_to(out.reshape(-1) if out.ndim else out, (Xp.shape[0],)).astype(float)

    def _rows(self, X: Any, name: str) -> tuple[np.ndarray, bool]:
        self._check_fitted()
        if isinstance(X, pd.Series):
            X = X.to_frame().T
        one = not isinstance(X, pd.DataFrame) and np.ndim(X) == 1
        arr = self._frame(np.atleast_2d(X) if one else X, name, list(self.feature_names_in_))
        return arr, one

    def abduct(self, X: Any) -> np.ndarray:
        """Recover the noise ``U = F^{-1}(X)``: ``u_i = x_i - f_i(x_pa(i))``.

        Parameters
        ----------
        X : DataFrame, array of shape (n, d) or (d,)

        Returns
        -------
        ndarray of the same shape (columns in ``feature_names_in_`` order).
        """
        arr, one = self._rows(X, "X")
        U = np.empty_like(arr)
        for node in self.order_:
            j = self._index[node]
            U[:, j] = arr[:, j] - self._f(node, arr[:, self._parents_idx[node]])
        return U[0] if one else U

    def intervene(self, U: Any, features: Sequence[Any], values: Any) -> np.ndarray:
        """Generate ``X`` from noise ``U`` under ``do(X_A = values)`` (``F_A(U)``).

        Parameters
        ----------
        U : array of shape (n, d) or (d,)
        features : sequence of str or int
            The intervened set ``A`` (names or column positions).
        values : array of shape (n, |A|) or (|A|,)

        Returns
        -------
        ndarray of the shape of ``U``.
        """
        arr, one = self._rows(U, "U")
        idx = [self.feature_index(f, "features") for f in as_list(features, "features")]
        vals = check_magnitude(check_numeric_array(np.atleast_1d(values), "values", min_rows=0), "values")
        if vals.ndim == 1 and vals.shape[0] == len(idx):
            vals = np.broadcast_to(vals, (arr.shape[0], len(idx)))
        if vals.shape != (arr.shape[0], len(idx)):
            raise DataError(
                f"values must have shape ({arr.shape[0]}, {len(idx)}) (one per intervened feature), "
                f"got {vals.shape}.",
                argument="values",
            )
        fixed = dict(zip(idx, vals.T, strict=True))
        X = np.empty_like(arr)
        for node in self.order_:
            j = self._index[node]
            X[:, j] = fixed[j] if j in fixed else self._f(node, X[:, self._parents_idx[node]]) + arr[:, j]
        return X[0] if one else X

    def generate(self, U: Any) -> np.ndarray:
        """Push noise through the equations in topological order: ``X = F(U)``.

        Parameters
        ----------
        U : array of shape (n, d) or (d,)
            Noise, columns in ``feature_names_in_`` order.

        Returns
        -------
        numpy.ndarray of the shape of ``U``
        """
        return self.intervene(U, [], np.zeros(0))

    def feature_index(self, f: Any, name: str = "feature") -> int:
        """Column position of a feature given by name or position.

        Parameters
        ----------
        f : str or int
            Feature name, or its column position in ``feature_names_in_``.
        name : str, default "feature"
            The caller's argument name, used in the error message.

        Returns
        -------
        int

        Examples
        --------
        >>> import pandas as pd
        >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(pd.DataFrame({"a": [0.0, 1, 2], "b": [1.0, 0, 2]}))
        >>> scm.feature_index("b"), scm.feature_index(0)
        (1, 0)
        """
        self._check_fitted()
        if isinstance(f, numbers.Integral) and not isinstance(f, bool):
            if not 0 <= int(f) < self.n_features_in_:
                raise ParameterError(f"{name}: column position {f} out of range.", argument=name)
            return int(f)
        if str(f) not in self._index:
            raise DataError(
                f"{name}: unknown feature {f!r}; the SCM's features are {list(self.feature_names_in_)}.",
                argument=name,
            )
        return self._index[str(f)]

    _feature_index = feature_index  # the name used before it was public

    def descendants(self, feature: Any) -> list[str]:
        """Names of the proper descendants of ``feature`` in the graph.

        Parameters
        ----------
        feature : str or int
            Name or column position.

        Returns
        -------
        list of str
        """
        j = self.feature_index(feature, "feature")
        out: set[int] = set()
        for node in self.order_:
            k = self._index[node]
            if any(p == j or p in out for p in self._parents_idx[node]):
                out.add(k)
        return [str(self.feature_names_in_[k]) for k in sorted(out)]


class LinearSCM(AdditiveNoiseSCM):
    """Linear SCM ``X = B X + c + U`` over a DAG (linear-Gaussian for Gaussian noise).

    Parameters
    ----------
    graph : mapping of str to list of str
        ``{node: [parents]}``; roots map to ``[]``.
    coef : mapping of str to mapping of str to float, optional
        ``coef[node][parent]`` is the weight of ``parent`` in ``node``'s equation.
        Nodes left out (or all, when None) are fitted by least squares.
    intercept : mapping of str to float, optional
        ``c_node``; fitted (mean of the residual) where left out.

    Attributes
    ----------
    B_ : ndarray of shape (d, d)
        ``B_[i, j]`` = weight of feature ``j`` in the equation of feature ``i``.
    c_ : ndarray of shape (d,)
    noise_scale_, feature_scale_, feature_names_in_, order_ : see :class:`AdditiveNoiseSCM`.

    References
    ----------
    Fatemi, Sharifian, Yassaee, ICML 2025 (in full under :class:`AdditiveNoiseSCM`).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> rng = np.random.default_rng(0)
    >>> a = rng.normal(size=2000)
    >>> X = pd.DataFrame({"a": a, "b": 2 * a + 1 + rng.normal(size=2000)})
    >>> scm = LinearSCM({"a": [], "b": ["a"]}).fit(X)
    >>> round(float(scm.B_[1, 0]), 1), round(float(scm.c_[1]), 1)
    (2.0, 1.0)
    >>> x_do = scm.intervene(scm.abduct(X.iloc[0].to_numpy()), ["a"], [0.0])
    >>> bool(np.isclose(x_do[1], X.b[0] - scm.B_[1, 0] * X.a[0]))
    True
    """

    def __init__(
        self,
        graph: Mapping[str, Sequence[str]],
        coef: Mapping[str, Mapping[str, float]] | None = None,
        intercept: Mapping[str, float] | None = None,
    ) -> None:
        self.graph = graph
        self.coef = coef
        self.intercept = intercept

    def fit(self, X: Any, y: Any = None) -> LinearSCM:
        """Check ``X`` against the graph and fit the coefficients not given by least squares.

        Parameters
        ----------
        X : DataFrame or array of shape (n, d)
        y : ignored

        Returns
        -------
        self
        """
        graph = _check_graph(self.graph)
        order = _topological_order(graph)
        for name, given in (("coef", self.coef), ("intercept", self.intercept)):
            if given is not None and not isinstance(given, Mapping):
                raise ParameterError(
                    f"{name} must be a mapping node -> "
                    + ("{parent: weight}" if name == "coef" else "number")
                    + f", got {type(given).__name__}.",
                    argument=name,
                )
        coef: dict[str, dict[str, float]] = {}
        for key, weights in (self.coef or {}).items():
            if not isinstance(weights, Mapping):
                raise ParameterError(
                    f"coef[{key!r}] must be a mapping parent -> weight, got {weights!r}.", argument="coef"
                )
            coef[str(key)] = dict(weights)
        inter = {str(k): v for k, v in (self.intercept or {}).items()}
        for name, given in (("coef", coef), ("intercept", inter)):
            unknown = sorted(set(given) - set(graph))
            if unknown:
                raise ParameterError(
                    f"{name} names nodes {unknown} that are not in the graph.", argument=name
                )
        for node, w in coef.items():
            if set(map(str, w)) != set(graph[node]):
                raise ParameterError(
                    f"coef[{node!r}] must give one weight per parent {list(graph[node])}, got {sorted(w)}.",
                    argument="coef",
                )
            if not all(isinstance(v, numbers.Real) and np.isfinite(v) for v in w.values()):
                raise ParameterError(f"coef[{node!r}] must hold finite numbers.", argument="coef")
        for node, v in inter.items():
            if not (isinstance(v, numbers.Real) and np.isfinite(v)):
                raise ParameterError(f"intercept[{node!r}] must be a finite number.", argument="intercept")
        nodes = self._nodes_for(X, graph)
        arr = self._frame(X, "X", nodes)
        if arr.shape[0] < 2:
            raise DataError("X needs at least 2 rows to fit the SCM.", argument="X")
        idx = {n: j for j, n in enumerate(nodes)}
        d = len(nodes)
        B = np.zeros((d, d))
        c = np.zeros(d)
        for node in order:
            i = idx[node]
            pa = [idx[p] for p in graph[node]]
            if node in coef:
                B[i, pa] = [float(coef[node][p]) for p in graph[node]]
            elif pa:
                Z = np.column_stack([arr[:, pa], np.ones(len(arr))])
                sol, *_ = np.linalg.lstsq(Z, arr[:, i], rcond=None)
                B[i, pa] = sol[:-1]
            resid = arr[:, i] - arr @ B[i]
            c[i] = float(inter[node]) if node in inter else float(resid.mean())
        self.B_ = B
        self.c_ = c
        self.feature_names_in_ = np.array(nodes, dtype=object)
        self.n_features_in_ = d
        self.graph_ = graph
        self.order_ = order
        self._index = idx
        self._parents_idx = {n: [idx[p] for p in graph[n]] for n in nodes}
        self._order_idx = [idx[n] for n in order]
        self.mechanisms_ = {n: _LinearMechanism(B[idx[n], self._parents_idx[n]], c[idx[n]]) for n in nodes}
        self.total_effect_ = np.linalg.inv(np.eye(d) - B)
        U = self.abduct(arr)
        self.noise_mean_ = U.mean(axis=0)
        self.feature_scale_ = arr.std(axis=0)
        if np.any(self.feature_scale_ <= 0):
            const = [nodes[j] for j in np.flatnonzero(self.feature_scale_ <= 0)]
            raise DataError(f"X has constant column(s) {const}; drop them from the graph.", argument="X")
        sd = U.std(axis=0)
        self.noise_scale_ = np.where(sd > 0, sd, self.feature_scale_)
        return self

    def abduct(self, X: Any) -> np.ndarray:
        """Recover the noise ``U = (I - B) X - c`` (see :meth:`AdditiveNoiseSCM.abduct`).

        Parameters
        ----------
        X : DataFrame, array of shape (n, d) or (d,)

        Returns
        -------
        numpy.ndarray of the same shape
        """
        arr, one = self._rows(X, "X")
        U = arr - arr @ self.B_.T - self.c_
        return U[0] if one else U

    def generate(self, U: Any) -> np.ndarray:
        """``X = (I - B)^{-1} (c + U)``.

        Parameters
        ----------
        U : array of shape (n, d) or (d,)

        Returns
        -------
        numpy.ndarray of the shape of ``U``
        """
        arr, one = self._rows(U, "U")
        X = (arr + self.c_) @ self.total_effect_.T
        return X[0] if one else X


class _LinearMechanism:
    """``f(x_pa) = w . x_pa + c`` as an object with ``predict`` (keeps LinearSCM inspectable)."""

    def __init__(self, w: np.ndarray, c: float) -> None:
        self.w = np.asarray(w, dtype=float)
        self.c = float(c)

    def predict(self, Xp: np.ndarray) -> np.ndarray:
        return Xp @ self.w + self.c if self.w.size else np.full(Xp.shape[0], self.c)
