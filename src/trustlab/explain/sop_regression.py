"""Sum-of-Parts for regression: group scores that add up to the predicted value.

The paper's CosmoGrid experiment turns a CNN regressor (two cosmological parameters,
``Omega_m`` and ``sigma_8``) into a group-based self-attributing network with the same three
pieces as the classifier (:class:`~trustlab.explain.sop.SumOfParts`)::

    f(x)_k = sum_i theta(Gamma(x), x)_{i,k} * c_i * h(g_i * x)_k

one selector query per *output* (initialised to that output's row of the backbone's final
``nn.Linear``, as the class queries are for a classifier), sparsemax over the groups, trained
with the mean squared error instead of cross-entropy. Each group's score is its exact share of
the prediction. See docs/explain/sum-of-parts.md.

References
----------
.. [1] You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with
   End-to-End Learning of Feature Groups". ICML 2025 (CosmoGrid, Table 1: MSE).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.base import RegressorMixin
from sklearn.utils.metaestimators import available_if

from trustlab._validation import check_numeric_array
from trustlab.errors import DataError
from trustlab.explain.sop import SumOfParts

__all__ = ["SumOfPartsRegressor"]


def _never(_est: Any) -> bool:
    return False


class SumOfPartsRegressor(RegressorMixin, SumOfParts):
    """Sum-of-Parts around the user's torch *regressor*: group scores sum to the predicted value.

    Same parameters, groups and selector as :class:`~trustlab.explain.sop.SumOfParts` (see it
    for each parameter); only the targets and the loss differ. The backbone maps a float batch
    to ``(n, k)`` outputs through a final ``nn.Linear`` with ``k`` outputs; the selector has one
    query per output (that output's head row) and the generator and selector are trained with
    the mean squared error (the paper's CosmoGrid loss).

    Parameters
    ----------
    backbone : torch.nn.Module
        Maps ``(n, ...)`` to ``(n, k)`` predictions; frozen.
    n_groups : int, default=20
    n_candidates : int, default=200
    group_fraction : float in (0, 1], default=0.2
    grouping : {"learned", "features"}, default="learned"
    patch_size : int, default=1
    sequence : bool, default=False
    hidden_dim : int, default=32
    head : str, optional
    gen_scale, sel_scale : float, default=1.0
    n_epochs : int, default=20
    learning_rate : float, default=1e-3
    batch_size : int, default=64
    random_state : None, int or numpy Generator, default=0
        All as in :class:`~trustlab.explain.sop.SumOfParts`.

    Attributes
    ----------
    net_ : torch.nn.Module
    n_outputs_ : int
        ``k``, the backbone's number of outputs.
    input_shape_ : tuple of int
    n_tokens_, group_size_, n_groups_ : int
    head_ : str
    losses_ : ndarray
        Mean squared error per training step.

    Notes
    -----
    :meth:`explain` returns the classifier's :class:`~trustlab.explain.sop.SOPExplanation`:
    ``logits`` holds the predictions ``(n, k)``, ``group_scores`` ``(n, m, k)`` add up to them,
    and ``feature_attributions(target=j)`` maps output ``j`` (``target=0`` for one output).

    References
    ----------
    .. [1] You, Qu, Gatti, Jain, Wong. "Sum-of-Parts: Self-Attributing Neural Networks with
       End-to-End Learning of Feature Groups". ICML 2025.

    Examples
    --------
    >>> import numpy as np, torch
    >>> torch.manual_seed(0) and None
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    >>> X = np.random.default_rng(0).normal(size=(40, 4)).astype("float32")
    >>> sop = SumOfPartsRegressor(net, n_groups=3, n_epochs=2).fit(X, X[:, 0] * X[:, 1])
    >>> e, p = sop.explain(X[:5]), sop.predict(X[:5])
    >>> p.shape, bool(np.allclose(e.group_scores.sum(1)[:, 0], p, atol=1e-5))
    ((5,), True)
    """

    def fit(self, X: Any, y: Any) -> SumOfPartsRegressor:
        """Train the group generator and selector on ``(X, y)`` by mean squared error.

        Parameters
        ----------
        X : array-like of shape (n, ...)
            Inputs in the shape the backbone takes (finite numbers).
        y : array-like of shape (n,) or (n, k)
            Real targets, one column per backbone output (``(n,)`` for one output).

        Returns
        -------
        SumOfPartsRegressor
            ``self``, fitted; the backbone stays frozen.
        """
        super().fit(X, y)
        return self

    def _check_labels(self, y: Any, n: int) -> np.ndarray:
        arr = check_numeric_array(y, "y", min_rows=1)
        if arr.ndim not in (1, 2) or len(arr) != n:
            raise DataError(
                f"y must hold {n} real targets (shape (n,) or (n, k), one row per row of X); "
                f"got shape {arr.shape}.",
                argument="y",
            )
        if np.any(np.ptp(arr.reshape(n, -1), axis=0) == 0):
            raise DataError("y has a column with a single value; pass targets that vary.", argument="y")
        self._one_output = arr.ndim == 1
        return arr.reshape(n, -1).astype(np.float32)

    def _set_outputs(self, y: np.ndarray, width: int) -> None:
        if y.shape[1] != width:
            raise DataError(
                f"y has {y.shape[1]} target column(s) but the backbone returns {width} outputs; "
                "pass one column per output.",
                argument="y",
            )
        self.n_outputs_ = width

    def _loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.mse_loss(out, y)

    def predict(self, X: Any) -> np.ndarray:
        """SOP's predictions: the sum over groups of the selector-weighted group outputs.

        Parameters
        ----------
        X : array-like
            Inputs of the shape seen in fit.

        Returns
        -------
        numpy.ndarray of float64, shape (n,) or (n, k)
            ``(n,)`` when ``fit`` got a 1-D ``y``.
        """
        out = self.decision_function(X)
        return out[:, 0] if self._one_output else out

    @available_if(_never)
    def predict_proba(self, X: Any) -> np.ndarray:  # pragma: no cover - hidden by available_if
        """Not available: a regressor has no class probabilities.

        Parameters
        ----------
        X : array-like
            Unused.

        Returns
        -------
        numpy.ndarray
            Never returns.
        """
        raise AttributeError("SumOfPartsRegressor has no predict_proba.")
