r"""Robustness of a tabular model: how unlike the training data rows are, and label flips.

Two checks, the library behind the audit's Robustness section:

* :class:`KNNShiftDetector` / :func:`tabular_ood_scores`: a model-agnostic OOD score for
  table rows, the distance to the ``k``-th nearest training row in a standardised
  encoding (numeric columns centred on the training median and divided by the training
  IQR; categories one-hot). It works for any model, trees included, and its unit is
  readable ("4.2 IQRs from the 5th nearest training row"). Chosen over an isolation forest
  because it is deterministic, monotone in a shift (moving a row away from all training
  rows can only raise its score) and its threshold comes from the training rows' own
  leave-one-out distances (the 95th percentile), following the nearest-neighbour OOD
  detector of Sun et al. (ICML 2022).
* :func:`prediction_flips`: for each row, whether the predicted label changes under some
  perturbation of the numeric features inside the L-inf box ``|delta_j| <= eps * s_j``,
  where ``s_j`` is the feature's scale: its IQR on the reference rows (default), its range,
  or a public scale the caller passes. Searched by projected gradient for torch models
  and scikit-learn ``LogisticRegression`` / ``MLPClassifier`` (exact gradients from their
  weights), else by a black-box search (finite-difference secants across the box plus
  random box corners) stated as such in the result. A search finds flips, it cannot
  prove their absence: the shares are lower bounds. Tree models are piecewise constant
  and get the OOD score only (``method="search"`` may still be asked for explicitly).

References
----------
.. [1] Sun, Y., Ming, Y., Zhu, X., Li, Y. "Out-of-Distribution Detection with Deep
   Nearest Neighbors". ICML 2022.
.. [2] Madry, A., Makelov, A., Schmidt, L., Tsipras, D., Vladu, A. "Towards Deep Learning
   Models Resistant to Adversarial Attacks". ICLR 2018.
.. [3] Wilson, E. B. "Probable inference, the law of succession, and statistical
   inference". JASA 22 (1927).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import check_numeric_array
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.security._robustness_flips import gradient_flips, search_flips, wilson
from trustlab.security._robustness_models import model_kind, torch_logits

__all__ = ["FlipResult", "KNNShiftDetector", "TabularOODResult", "prediction_flips", "tabular_ood_scores"]


def _frame(X: Any, name: str) -> pd.DataFrame:
    if isinstance(X, pd.DataFrame):
        if len(X) == 0 or X.shape[1] == 0:
            raise DataError(
                f"{name} must have at least one row and one column, got shape {X.shape}.", argument=name
            )
        return X
    arr = check_numeric_array(X, name, ndim=2)
    if arr.shape[1] == 0:
        raise DataError(f"{name} must have at least one column.", argument=name)
    return pd.DataFrame(arr, columns=[f"x{j}" for j in range(arr.shape[1])])


def _iqr_scale(values: np.ndarray) -> np.ndarray:
    q1, q3 = np.nanpercentile(values, [25, 75], axis=0)
    scale = q3 - q1
    rng = np.nanmax(values, axis=0) - np.nanmin(values, axis=0)
    scale = np.where(scale > 0, scale, rng)
    return np.where(scale > 0, scale, 1.0)


_LIMIT = 1e100
"""Standardised values are clipped to +-this, so that squared distances stay finite."""


class KNNShiftDetector(ParamsValidationMixin):
    """Distance to the ``k``-th nearest training row in a standardised encoding.

    Parameters
    ----------
    n_neighbors : int, default=5
        ``k``.
    quantile : float, default=0.95
        Quantile of the training rows' leave-one-out scores used as ``threshold_``.

    Attributes
    ----------
    threshold_ : float
        The ``quantile`` of the training rows' scores (each scored against the others).
    columns_ : list
        The training columns.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> det = KNNShiftDetector().fit(X)
    >>> s = det.score_samples(np.array([[0.0, 0.0, 0.0], [8.0, 8.0, 8.0]]))
    >>> bool(s[1] > det.threshold_ > s[0])
    True

    References
    ----------
    Sun, Y., Ming, Y., Zhu, X., Li, Y. "Out-of-Distribution Detection with Deep Nearest
    Neighbors". ICML 2022.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "n_neighbors": [Interval(numbers.Integral, 1, None, closed="left")],
        "quantile": [Interval(numbers.Real, 0, 1, closed="neither")],
    }

    def __init__(self, n_neighbors: int = 5, quantile: float = 0.95) -> None:
        self.n_neighbors = n_neighbors
        self.quantile = quantile

    def _encode(self, frame: pd.DataFrame, name: str) -> np.ndarray:
        missing = [c for c in self.columns_ if c not in frame.columns]
        if missing:
            raise DataError(f"{name} lacks the training columns {missing[:5]}.", argument=name)
        parts = []
        if self.numeric_:
            num = frame[self.numeric_].to_numpy(dtype=float, na_value=np.nan)
            if not np.all(np.isfinite(num)):
                raise DataError(
                    f"{name} has NaN or infinite numeric values; impute or drop them first.", argument=name
                )
            with np.errstate(over="ignore"):  # a value near the float limit: standardised to +-inf
                z = (num - self.center_) / self.scale_
            parts.append(np.clip(z, -_LIMIT, _LIMIT))  # squared distances stay finite
        for c, cats in self.categories_.items():
            col = frame[c].astype(object)
            values = col.where(col.notna(), None).to_numpy()  # pandas' NA compares as ambiguous
            parts.append((values[:, None] == np.asarray(cats, dtype=object)[None, :]).astype(float))
        return np.hstack(parts) if parts else np.zeros((len(frame), 0))

    def fit(self, X: Any, y: Any = None) -> KNNShiftDetector:
        """Learn the encoding and the neighbour index from the training rows ``X``.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Training rows (numeric and categorical columns).
        y : None
            Ignored.

        Returns
        -------
        self
        """
        from sklearn.neighbors import NearestNeighbors

        self._validate_params()
        frame = _frame(X, "X")
        k = int(self.n_neighbors)
        if len(frame) < k + 1:
            raise DataError(
                f"X needs at least n_neighbors + 1 = {k + 1} rows, got {len(frame)}.", argument="X"
            )
        self.columns_ = list(frame.columns)
        self.numeric_ = [
            c
            for c in frame.columns
            if pd.api.types.is_numeric_dtype(frame[c]) and not isinstance(frame[c].dtype, pd.CategoricalDtype)
        ]
        values = frame[self.numeric_].to_numpy(dtype=float) if self.numeric_ else np.zeros((len(frame), 0))
        if values.size and not np.all(np.isfinite(values)):
            raise DataError("X has NaN or infinite numeric values; impute or drop them first.", argument="X")
        self.center_ = np.median(values, axis=0) if values.size else np.zeros(0)
        self.scale_ = _iqr_scale(values) if values.size else np.zeros(0)
        self.categories_ = {
            c: sorted(frame[c].astype(object).dropna().unique().tolist(), key=str)
            for c in frame.columns
            if c not in self.numeric_
        }
        Z = self._encode(frame, "X")
        self.index_ = NearestNeighbors(n_neighbors=k + 1).fit(Z)
        dist, _ = self.index_.kneighbors(Z)
        self.train_scores_ = dist[:, k]  # the row itself is its own nearest neighbour
        self.threshold_ = float(np.quantile(self.train_scores_, float(self.quantile)))
        return self

    def score_samples(self, X: Any) -> np.ndarray:
        """Distance of each row to its ``k``-th nearest training row (higher = more unlike).

        Parameters
        ----------
        X : DataFrame or array-like
            Rows with the training columns.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if not hasattr(self, "index_"):
            raise NotFittedError("KNNShiftDetector is not fitted; call fit(X_train) first.", argument="X")
        frame = _frame(X, "X")
        if not isinstance(X, pd.DataFrame) and frame.shape[1] != len(self.columns_):
            raise DataError(
                f"X has {frame.shape[1]} columns, the training rows had {len(self.columns_)}.", argument="X"
            )
        dist, _ = self.index_.kneighbors(self._encode(frame, "X"), n_neighbors=int(self.n_neighbors))
        return dist[:, -1]


@dataclass(frozen=True)
class TabularOODResult:
    """OOD scores of evaluation rows against training rows.

    Attributes
    ----------
    scores : ndarray
        Distance of each evaluation row to its k-th nearest training row.
    threshold : float
        The ``quantile`` of the training rows' leave-one-out scores.
    share_above, share_interval : float, tuple
        Share of evaluation rows scoring above ``threshold`` and its Wilson interval
        (about ``1 - quantile`` when the rows come from the training distribution).
    top_index : ndarray
        Positions (0-based, in the evaluation rows) of the ``n_top`` highest scores.
    top_scores : ndarray
        Their scores, highest first.
    n_neighbors : int
        ``k``.

    See Also
    --------
    tabular_ood_scores : builds it.
    """

    scores: np.ndarray
    threshold: float
    share_above: float
    share_interval: tuple[float, float]
    top_index: np.ndarray
    top_scores: np.ndarray
    n_neighbors: int


@validate_params(
    {
        "n_neighbors": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_top": [Interval(numbers.Integral, 0, None, closed="left")],
        "quantile": [Interval(numbers.Real, 0, 1, closed="neither")],
    }
)
def tabular_ood_scores(
    X_train: Any, X_eval: Any, *, n_neighbors: int = 5, n_top: int = 10, quantile: float = 0.95
) -> TabularOODResult:
    """Score evaluation rows by their distance to the training rows; list the most unlike.

    Parameters
    ----------
    X_train : DataFrame or array-like
        The training rows.
    X_eval : DataFrame or array-like
        The rows to score (e.g. the held-out rows), with the training columns.
    n_neighbors : int, default=5
        ``k`` of the k-th nearest neighbour distance.
    n_top : int, default=10
        How many of the most unlike rows to list.
    quantile : float, default=0.95
        Quantile of the training rows' own scores that sets the threshold.

    Returns
    -------
    TabularOODResult

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> res = tabular_ood_scores(rng.normal(size=(300, 2)), np.r_[rng.normal(size=(50, 2)), [[9.0, 9.0]]])
    >>> int(res.top_index[0])
    50

    References
    ----------
    Sun, Y. et al. "Out-of-Distribution Detection with Deep Nearest Neighbors". ICML 2022.
    """
    det = KNNShiftDetector(n_neighbors=n_neighbors, quantile=quantile).fit(X_train)
    scores = det.score_samples(X_eval)
    above = int((scores > det.threshold_).sum())
    order = np.argsort(-scores, kind="stable")[: int(n_top)]
    return TabularOODResult(
        scores=scores,
        threshold=det.threshold_,
        share_above=above / len(scores),
        share_interval=wilson(above, len(scores)),
        top_index=order,
        top_scores=scores[order],
        n_neighbors=int(n_neighbors),
    )


@dataclass(frozen=True)
class FlipResult:
    """Which rows' predicted labels flip inside the perturbation box.

    Attributes
    ----------
    flipped : ndarray of bool
        Per row: a flip was found.
    share, interval : float, tuple
        Share of rows with a flip and its 95% Wilson interval (a lower bound on the true
        share: a search can miss flips).
    by_group : DataFrame or None
        Per sensitive group: ``n``, ``flipped``, ``share``, ``low``, ``high``.
    method : str
        How the box was searched, in words (gradient or black-box search).
    eps : float
        The box radius as a multiple of each feature's scale.
    columns : list
        The perturbed columns.
    radius : ndarray
        The box half-width per perturbed column (``eps * scale``).

    See Also
    --------
    prediction_flips : builds it.
    """

    flipped: np.ndarray
    share: float
    interval: tuple[float, float]
    by_group: pd.DataFrame | None
    method: str
    eps: float
    columns: list[Any]
    radius: np.ndarray


def _scales(scale: Any, reference: pd.DataFrame, cols: list[Any]) -> np.ndarray:
    values = reference[cols].to_numpy(dtype=float)
    if isinstance(scale, str):
        if scale == "iqr":
            return _iqr_scale(values)
        rng = np.nanmax(values, axis=0) - np.nanmin(values, axis=0)
        return np.where(rng > 0, rng, 1.0)
    arr = check_numeric_array(scale, "scale", ndim=1)
    if arr.shape != (len(cols),) or not np.all(arr > 0):
        raise ParameterError(
            f"scale must be 'iqr', 'range' or one positive number per perturbed column ({len(cols)}).",
            argument="scale",
        )
    return arr


@validate_params(
    {
        "eps": [Interval(numbers.Real, 0, 1000, closed="right")],  # in feature scales: more is absurd
        "scale": [Options({"iqr", "range"}), "array-like"],
        "method": [Options({"auto", "gradient", "search"})],
        "n_steps": [Interval(numbers.Integral, 1, 1000, closed="both")],
        "n_random": [Interval(numbers.Integral, 0, 1000, closed="both")],
        "random_state": ["random_state"],
    }
)
def prediction_flips(
    model: Any,
    X: Any,
    *,
    eps: float = 0.05,
    scale: Any = "iqr",
    reference: Any = None,
    columns: list[Any] | None = None,
    sensitive_features: Any = None,
    method: str = "auto",
    n_steps: int = 10,
    n_random: int = 16,
    random_state: Any = 0,
) -> FlipResult:
    """Share of rows whose predicted label flips within an L-inf box on the numeric features.

    Parameters
    ----------
    model : classifier
        A torch module returning logits, or an estimator with ``predict``.
    X : DataFrame or array-like of shape (n_samples, n_features)
        The rows to perturb, as the model takes them.
    eps : float, default=0.05
        Box radius per feature as a multiple of the feature's scale, in (0, 1000].
    scale : {"iqr", "range"} or array-like, default="iqr"
        Each perturbed feature's scale: its IQR (range where the IQR is 0) or range on
        ``reference``, or one public number per perturbed column.
    reference : DataFrame or array-like, optional
        Rows the scales are read from (e.g. the training rows); default ``X``.
    columns : list, optional
        Columns to perturb; default every numeric column (array input: all columns).
    sensitive_features : array-like, optional
        One group label per row, for the per-group shares.
    method : {"auto", "gradient", "search"}, default="auto"
        "gradient" for torch / LogisticRegression / MLPClassifier, "search" (black-box)
        otherwise; "auto" picks and raises ModelError for tree models.
    n_steps : int, default=10
        Projected-gradient steps after the first full-radius step.
    n_random : int, default=16
        Random box corners per row in the black-box search.
    random_state : int, Generator or None, default=0
        Seeds the random corners (public choices only).

    Returns
    -------
    FlipResult

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2)); y = (X[:, 0] > 0).astype(int)
    >>> res = prediction_flips(LogisticRegression().fit(X, y), X, eps=0.1)
    >>> res.method.startswith("gradient"), 0 < res.share < 0.3
    (True, True)

    References
    ----------
    Madry, A. et al. "Towards Deep Learning Models Resistant to Adversarial Attacks". ICLR 2018.
    """
    kind = model_kind(model)
    if method == "auto" and kind == "tree":
        raise ModelError(
            f"{type(model).__name__} is a tree model: its predictions are piecewise constant and have "
            "no gradient; use tabular_ood_scores for it, or pass method='search' for a black-box search.",
            argument="model",
        )
    if method == "gradient" and kind not in ("torch", "logistic", "mlp"):
        raise ModelError(
            f"method='gradient' needs a torch module, LogisticRegression or MLPClassifier; got "
            f"{type(model).__name__}. Use method='search'.",
            argument="model",
        )
    if kind != "torch" and not hasattr(model, "predict"):
        raise ModelError(
            f"model must be a torch module or have predict; got {type(model).__name__}.", argument="model"
        )
    use_gradient = kind in ("torch", "logistic", "mlp") and method != "search"
    frame = _frame(X, "X")
    ref = frame if reference is None else _frame(reference, "reference")
    if columns is None:
        cols = [
            c
            for c in frame.columns
            if pd.api.types.is_numeric_dtype(frame[c]) and not isinstance(frame[c].dtype, pd.CategoricalDtype)
        ]
    else:
        cols = list(columns)
        unknown = [c for c in cols if c not in frame.columns]
        if unknown:
            raise DataError(f"columns {unknown} are not columns of X.", argument="columns")
    if not cols:
        raise DataError("X has no numeric column to perturb; pass columns=[...].", argument="columns")
    values = frame[cols].to_numpy(dtype=float)
    if not np.all(np.isfinite(values)):
        raise DataError(
            "X has NaN or infinite values in the perturbed columns; impute them first.", argument="X"
        )
    radius = float(eps) * _scales(scale, ref, cols)
    reach = np.abs(values).max(axis=0) + radius if len(values) else radius
    if not np.all(np.isfinite(reach)):
        raise ParameterError(
            f"eps={eps!r} is too large: the box around the rows leaves the floating-point range; pass a "
            "radius of a few feature scales at most (e.g. eps=0.05).",
            argument="eps",
        )
    if use_gradient:
        if len(cols) != frame.shape[1]:
            raise DataError(
                "the gradient search perturbs every column of a numeric X; pass columns=None.",
                argument="columns",
            )
        flipped = gradient_flips(torch_logits(model, kind), values, radius, n_steps=int(n_steps))
        how = {"torch": "torch autograd", "logistic": "analytic, from coef_", "mlp": "analytic, from coefs_"}[
            kind
        ]
        described = f"gradient search ({how}): projected gradient, {n_steps} steps after a full-radius step"
    else:
        from trustlab._validation import make_generator

        rng = make_generator(random_state)
        X_in = X if isinstance(X, pd.DataFrame) else np.asarray(X, dtype=float)
        idx = [frame.columns.get_loc(c) for c in cols] if not isinstance(X, pd.DataFrame) else cols
        flipped = search_flips(model, X_in, idx, radius, n_random=int(n_random), rng=rng)
        described = (
            f"black-box search (no gradient): finite-difference secants across the box and "
            f"{n_random} random box corners per row"
        )
    n = len(flipped)
    by_group = None
    if sensitive_features is not None:
        groups = np.asarray(sensitive_features)
        if groups.ndim != 1 or len(groups) != n:
            raise DataError(
                f"sensitive_features must hold one label per row of X ({n}).", argument="sensitive_features"
            )
        rows = []
        for g in pd.unique(groups):
            m = groups == g
            k = int(flipped[m].sum())
            lo, hi = wilson(k, int(m.sum()))
            rows.append(
                {
                    "group": g,
                    "n": int(m.sum()),
                    "flipped": k,
                    "share": k / int(m.sum()),
                    "low": lo,
                    "high": hi,
                }
            )
        by_group = pd.DataFrame(rows)
    k = int(flipped.sum())
    return FlipResult(
        flipped=flipped,
        share=k / n,
        interval=wilson(k, n),
        by_group=by_group,
        method=described,
        eps=float(eps),
        columns=cols,
        radius=radius,
    )
