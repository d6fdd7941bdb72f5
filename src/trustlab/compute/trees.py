"""FastPD's per-tree background statistics as a mergeable statistic (Liu et al., ICML 2025).

FastPD reads its background only through the number of rows whose code on each leaf
is each value (which of the path's constraints the row meets): a sum over rows. So
the background can be every row of a table that does not fit in memory: the counts
are computed per partition (in process or on Dask workers), added, and FastPD is
fitted from the merged state (:meth:`trustlab.explain.FastPD.fit_background_state`)
while the explained rows are a small sample on the client.

References
----------
.. [1] Liu, J., Steensgaard, T., Wright, M. N., Pfister, N., Hiabu, M. "Fast
   Estimation of Partial Dependence Functions using Trees". ICML 2025, PMLR 267.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from typing_extensions import override

from trustlab._param_validation import HasMethods, Interval, validate_params
from trustlab.compute.statistics import MergeableStatistic
from trustlab.errors import DataError
from trustlab.explain._fastpd_leaves import LeafTables
from trustlab.explain._fastpd_state import FastPDBackgroundState, merge_states, partial_state
from trustlab.explain._trees import ensemble_from_model

__all__ = ["FastPDBackground", "FastPDBackgroundState"]


class FastPDBackground(MergeableStatistic[FastPDBackgroundState, FastPDBackgroundState]):
    """FastPD's background statistics of a tree model: counts of rows by leaf code, mergeable.

    ``partial`` counts a partition's rows by their code on every leaf of every tree
    (the table FastPD's augmentation step builds, before its superset-sum), ``merge``
    adds the counts, and ``finalize`` returns the merged
    :class:`FastPDBackgroundState`, which
    :meth:`FastPD.fit_background_state <trustlab.explain.FastPD.fit_background_state>`
    reads in place of background rows. The state also keeps a hash sample of
    ``n_sample`` rows (the same on any partitioning) for default PD grids.

    Parameters
    ----------
    model : fitted tree model
        The model FastPD will explain (what :class:`~trustlab.explain.FastPD` accepts).
    columns : sequence of str, optional
        Columns of each partition to read, in the model's order (default: all).
    preprocessor : fitted transformer, optional
        Applied to each partition's ``columns`` before the trees (e.g. the first
        steps of a scikit-learn Pipeline whose last step is ``model``).
    n_sample : int, default=1000
        Rows kept in the state's hash sample.

    Notes
    -----
    A partial state holds one int64 per (leaf, code): ``sum over leaves of 2**k`` with
    ``k`` the leaf's number of distinct path features (see ``FastPDBackgroundState.nbytes``),
    whatever the number of rows; FastPD's in-process ``fit`` builds the same table.

    References
    ----------
    .. [1] Liu, J., Steensgaard, T., Wright, M. N., Pfister, N., Hiabu, M. "Fast
       Estimation of Partial Dependence Functions using Trees". ICML 2025, PMLR 267.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sklearn.ensemble import HistGradientBoostingRegressor
    >>> from trustlab.compute import compute
    >>> from trustlab.explain import FastPD
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame(rng.normal(size=(2000, 3)), columns=["a", "b", "c"])
    >>> model = HistGradientBoostingRegressor(max_iter=20).fit(X, X.a + X.a * X.b)
    >>> state = compute(FastPDBackground(model), X, chunksize=500)
    >>> state.n_rows
    2000
    >>> fpd = FastPD(model).fit_background_state(state)
    >>> phi = fpd.shap_values(X[:3])
    >>> bool(np.allclose(fpd.expected_value_ + phi.sum(axis=1), model.predict(X[:3])))
    True
    """

    @validate_params(
        {
            "model": "no_validation",
            "columns": [None, list, tuple],
            "preprocessor": [None, HasMethods(["transform"])],
            "n_sample": [Interval(numbers.Integral, 1, None, closed="left")],
        }
    )
    def __init__(
        self,
        model: Any,
        *,
        columns: Sequence[str] | None = None,
        preprocessor: Any = None,
        n_sample: int = 1000,
    ) -> None:
        self.model = model
        self.columns = None if columns is None else list(columns)
        self.preprocessor = preprocessor
        self.n_sample = int(n_sample)
        self._leaves: LeafTables | None = LeafTables(ensemble_from_model(model))

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the parsed trees (re-read from the model where the state is computed)."""
        state = dict(self.__dict__)
        state["_leaves"] = None
        return state

    def _tables(self) -> LeafTables:
        if self._leaves is None:
            self._leaves = LeafTables(ensemble_from_model(self.model))
        return self._leaves

    def _rows(self, chunk: Any) -> Any:
        """The partition's rows as the trees take them (columns selected, preprocessor applied)."""
        X: Any = chunk
        if isinstance(chunk, pd.DataFrame):
            if self.columns is not None:
                missing = [c for c in self.columns if c not in chunk.columns]
                if missing:
                    raise DataError(
                        f"a partition lacks the column(s) {missing[:10]}; give every partition the "
                        "model's columns.",
                        argument="data",
                    )
                X = chunk[self.columns]
        elif not (isinstance(chunk, np.ndarray) and self.columns is None):
            raise DataError(
                f"a partition must be a pandas DataFrame, got {type(chunk).__name__}.", argument="data"
            )
        if self.preprocessor is None:
            return X
        if not len(X):  # an empty partition: no rows to transform
            return np.zeros((0, self._tables().ens.n_features))
        try:
            X = self.preprocessor.transform(X)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise DataError(
                f"the preprocessor could not transform a partition ({type(exc).__name__}: "
                f"{str(exc)[:200]}); pass rows with the columns it was fitted on.",
                argument="data",
            ) from None
        return X.toarray() if hasattr(X, "toarray") else X

    @override
    def partial(self, chunk: pd.DataFrame) -> FastPDBackgroundState:
        return partial_state(
            self._tables(), self._rows(chunk), n_sample=self.n_sample, model=type(self.model).__name__
        )

    @override
    def merge(self, a: FastPDBackgroundState, b: FastPDBackgroundState) -> FastPDBackgroundState:
        return merge_states(a, b)

    @override
    def finalize(self, state: FastPDBackgroundState) -> FastPDBackgroundState:
        return state
