"""Tabular LIME: local weighted linear surrogates of a black-box model.

For an instance ``x`` the explainer draws ``n`` neighbours ``z_i ~ N(x, diag(std^2))``
(``std`` learned by :meth:`LimeTabular.fit` from training data), labels them with
the model, weights them by the exponential kernel of their distance to ``x`` in
standardised units, ``pi_i = sqrt(exp(-||(z_i - x) / std||^2 / w^2))`` with
``w = 0.75 * sqrt(d)``, and fits a weighted linear surrogate (Ridge with
``alpha = 1`` and an intercept, as ``lime`` does; or the Lasso ExpProof uses). The
explanation is the surrogate's coefficients on standardised features and the
``top_k`` of them by absolute value.

This is ``lime.lime_tabular.LimeTabularExplainer`` with ``discretize_continuous=False``,
``sample_around_instance=True`` and ``feature_selection="none"`` (the "parity mode"
of the ExpProof spec): given the same samples both return the same coefficients
(see ``tests/explain/test_lime.py``). The verifiable, fixed-point variant lives in
:mod:`trustlab.explain.verifiable`.

References
----------
.. [1] Ribeiro, M. T., Singh, S., Guestrin, C. "'Why Should I Trust You?':
   Explaining the Predictions of Any Classifier". KDD 2016.
.. [2] Yadav, C., Laufer, E. M., Boneh, D., Chaudhuri, K. "ExpProof:
   Operationalizing Explanations for Confidential Models with ZKPs". Proceedings
   of the 42nd International Conference on Machine Learning (ICML 2025), PMLR 267.
"""

from __future__ import annotations

import copy
import itertools
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab._validation import (
    check_numeric_array,
    check_positive_int,
    make_generator,
)
from trustlab.errors import DataError, NotFittedError, ParameterError
from trustlab.explain._inputs import check_instance, check_magnitude
from trustlab.explain._lime_core import (
    check_label,
    check_predict_fn,
    default_kernel_width,
    model_column,
    topk_order,
    weighted_lasso,
    weighted_ridge,
)

__all__ = ["LimeExplanation", "LimeStability", "LimeTabular"]

_SURROGATES = ("ridge", "lasso")
_DEFAULT_ALPHA = {"ridge": 1.0, "lasso": 0.01}


@dataclass(frozen=True)
class LimeExplanation:
    """One LIME explanation.

    Attributes
    ----------
    coef : numpy.ndarray
        Surrogate coefficients, one per feature, on standardised features.
    intercept : float
        Surrogate intercept.
    top_k : tuple of int
        Indices of the ``k`` largest ``|coef|``, largest first.
    feature_names : tuple of str
        Names of all features.
    score : float
        Weighted R^2 of the surrogate on the neighbourhood samples (``lime``'s ``score``).
    local_pred : float
        Surrogate prediction at the explained instance.
    model_pred : float
        Model output (the explained column) at the instance.
    n_samples : int
        Neighbourhood size, including the instance itself.
    kernel_width : float
        Kernel width used.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from trustlab.explain.lime import LimeTabular
    >>> X = pd.DataFrame(np.random.default_rng(1).normal(size=(200, 3)), columns=["age", "debt", "tenure"])
    >>> exp = LimeTabular(n_samples=500, top_k=1).fit(X).explain(lambda Z: 2 * Z[:, 1], X.iloc[0])
    >>> exp.as_series().index.tolist(), round(exp.score, 3)
    (['debt'], 1.0)
    """

    coef: np.ndarray
    intercept: float
    top_k: tuple[int, ...]
    feature_names: tuple[str, ...]
    score: float
    local_pred: float
    model_pred: float
    n_samples: int
    kernel_width: float

    def as_series(self) -> pd.Series:
        """The ``top_k`` coefficients, largest ``|coef|`` first.

        Returns
        -------
        pandas.Series
            Indexed by feature name, named ``"lime_coef"``.
        """
        return pd.Series(
            [float(self.coef[j]) for j in self.top_k],
            index=[self.feature_names[j] for j in self.top_k],
            name="lime_coef",
        )


@dataclass(frozen=True)
class LimeStability:
    """How stable LIME's top-k set is over random seeds.

    Attributes
    ----------
    mean_jaccard : float
        Mean Jaccard index of the top-k sets over all pairs of seeds (1 = always the same set).
    same_set_share : float
        Share of seeds whose top-k set equals the most frequent one.
    selection_frequency : numpy.ndarray
        Per feature, the share of seeds that put it in the top k.
    coef_std : numpy.ndarray
        Per feature, the standard deviation of its coefficient over seeds.
    n_seeds : int
        Number of seeds.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.lime import LimeTabular
    >>> X = np.random.default_rng(2).normal(size=(200, 3))
    >>> f = lambda Z: Z[:, 0] - Z[:, 2]
    >>> st = LimeTabular(n_samples=300).fit(X).stability(f, X[0], seeds=range(3), k=2)
    >>> st.mean_jaccard, st.selection_frequency.tolist()
    (1.0, [1.0, 0.0, 1.0])
    """

    mean_jaccard: float
    same_set_share: float
    selection_frequency: np.ndarray
    coef_std: np.ndarray
    n_seeds: int


class LimeTabular(ParamsValidationMixin):
    """Tabular LIME with continuous features, as ``lime``'s ``LimeTabularExplainer`` computes it.

    Parameters
    ----------
    n_samples : int, default 5000
        Neighbourhood size, the instance itself included (``lime``'s ``num_samples``).
    kernel_width : float, optional
        Width ``w`` of the kernel ``sqrt(exp(-dist^2 / w^2))``; default ``0.75 * sqrt(d)``.
    surrogate : {"ridge", "lasso"}, default "ridge"
        Weighted Ridge (``lime``'s default) or weighted Lasso (ExpProof's surrogate).
    alpha : float, optional
        Regularisation; default 1.0 for Ridge (``lime``), 0.01 for Lasso (ExpProof).
    top_k : int, optional
        Number of features reported in ``LimeExplanation.top_k``; default all.
    sample_around_instance : bool, default True
        Centre the Gaussian neighbourhood on the instance (``lime``'s option of the same
        name); ``False`` centres it on the training mean.
    random_state : int, Generator or None, default 0
        Seed of the neighbourhood sampler. An int gives the same samples on every call.

    Attributes
    ----------
    mean_ : numpy.ndarray
        Training means per feature.
    scale_ : numpy.ndarray
        Training standard deviations (``ddof=0``; 1 where a feature is constant).
    kernel_width_ : float
        The kernel width in use.
    n_features_in_ : int
        Number of features.
    feature_names_in_ : numpy.ndarray
        Column names, when ``fit`` got a DataFrame.

    References
    ----------
    .. [1] Ribeiro, M. T., Singh, S., Guestrin, C. "'Why Should I Trust You?':
       Explaining the Predictions of Any Classifier". KDD 2016.
    .. [2] Yadav, C., Laufer, E. M., Boneh, D., Chaudhuri, K. "ExpProof:
       Operationalizing Explanations for Confidential Models with ZKPs". ICML 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from trustlab.explain.lime import LimeTabular
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(500, 4))
    >>> f = lambda Z: 1 / (1 + np.exp(-(3 * Z[:, 0] - 2 * Z[:, 2])))
    >>> exp = LimeTabular(n_samples=2000, top_k=2).fit(X).explain(f, X[0])
    >>> exp.top_k
    (0, 2)
    >>> bool(exp.coef[0] > 0 > exp.coef[2])
    True
    """

    def __init__(
        self,
        n_samples: int = 5000,
        kernel_width: float | None = None,
        surrogate: str = "ridge",
        alpha: float | None = None,
        top_k: int | None = None,
        sample_around_instance: bool = True,
        random_state: Any = 0,
    ) -> None:
        self.n_samples = n_samples
        self.kernel_width = kernel_width
        self.surrogate = surrogate
        self.alpha = alpha
        self.top_k = top_k
        self.sample_around_instance = sample_around_instance
        self.random_state = random_state

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "n_samples": [Interval(numbers.Integral, 2, None, closed="left")],
        "kernel_width": [None, Interval(numbers.Real, 0, None, closed="neither")],
        "surrogate": [Options(_SURROGATES)],
        "alpha": [None, Interval(numbers.Real, 0, None, closed="left")],
        "top_k": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "sample_around_instance": ["boolean"],
        "random_state": ["random_state"],
    }

    # -- parameters --------------------------------------------------------------
    def _check_params(self, d: int) -> tuple[int, float, str, float, int]:
        self._validate_params()
        alpha = _DEFAULT_ALPHA[self.surrogate] if self.alpha is None else self.alpha
        if alpha == 0 and self.surrogate == "lasso":
            raise ParameterError("alpha must be > 0 for the Lasso surrogate; got 0.", argument="alpha")
        kw = default_kernel_width(d) if self.kernel_width is None else self.kernel_width
        k = d if self.top_k is None else int(self.top_k)
        if k > d:
            raise ParameterError(
                f"top_k={k} exceeds the number of features ({d}); pass top_k <= {d}.", argument="top_k"
            )
        return int(self.n_samples), float(kw), self.surrogate, float(alpha), k

    # -- fit ---------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> LimeTabular:
        """Learn per-feature means and standard deviations from training data.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, d)
            Training features (numeric; column names are kept).
        y : ignored

        Returns
        -------
        LimeTabular
            ``self``.
        """
        names = None
        if isinstance(X, pd.DataFrame):
            bad = [c for c in X.columns if not pd.api.types.is_numeric_dtype(X[c])]
            if bad:
                raise DataError(
                    f"X has non-numeric column(s) {bad[:5]}; encode them as numbers first.", argument="X"
                )
            names = np.asarray([str(c) for c in X.columns], dtype=object)
        arr = check_magnitude(check_numeric_array(X, "X", ndim=2), "X")
        kernel_width = self._check_params(arr.shape[1])[1]
        self.mean_ = arr.mean(axis=0)
        scale = arr.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, 1.0)
        self.n_features_in_ = arr.shape[1]
        if names is not None:
            self.feature_names_in_ = names
        self.kernel_width_ = kernel_width
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "scale_"):
            raise NotFittedError("This LimeTabular is not fitted; call fit(X_train) first.", argument="fit")

    # -- explain -----------------------------------------------------------------
    def explain(self, predict_fn: Any, x: Any, *, label: int = 1, samples: Any = None) -> LimeExplanation:
        """Explain the model's output at one instance.

        Parameters
        ----------
        predict_fn : callable
            Maps an ``(m, d)`` array to ``(m,)`` scores or ``(m, n_classes)`` probabilities.
        x : array-like of shape (d,), Series or one-row DataFrame
            The instance, in the units of the training data.
        label : int, default 1
            Column of ``predict_fn``'s output to explain when it returns 2-D output.
        samples : array-like of shape (m, d), optional
            Use these neighbourhood rows (original units; row 0 should be ``x``)
            instead of drawing them; e.g. to reproduce another tool's samples.

        Returns
        -------
        LimeExplanation
        """
        self._check_fitted()
        fn = check_predict_fn(predict_fn)
        row = check_instance(x, self.n_features_in_, getattr(self, "feature_names_in_", None))
        d = row.shape[0]
        n, kw, surrogate, alpha, k = self._check_params(d)
        label = check_label(label)
        if samples is None:
            rng = make_generator(self.random_state)
            centre = row if self.sample_around_instance else self.mean_
            data = rng.standard_normal((n, d)) * self.scale_ + centre
            data[0] = row
        else:
            data = check_magnitude(check_numeric_array(samples, "samples", ndim=2, min_rows=2), "samples")
            if data.shape[1] != d:
                raise DataError(f"samples has {data.shape[1]} columns but x has {d}.", argument="samples")
        scaled = (data - self.mean_) / self.scale_
        dist2 = ((scaled - scaled[0]) ** 2).sum(axis=1)
        weights = np.sqrt(np.exp(-dist2 / kw**2))
        if not weights.sum() > 0:
            raise ParameterError(
                "All kernel weights underflowed to 0; increase kernel_width.", argument="kernel_width"
            )
        y = model_column(fn(data), data.shape[0], int(label))
        if surrogate == "ridge":
            coef, intercept = weighted_ridge(scaled, y, weights, alpha)
        else:
            seed = self.random_state if isinstance(self.random_state, numbers.Integral) else 0
            coef, intercept = weighted_lasso(scaled, y, weights, alpha, int(seed))
        pred = scaled @ coef + intercept
        ybar = float(weights @ y / weights.sum())
        ss_tot = float(weights @ (y - ybar) ** 2)
        score = 1.0 - float(weights @ (y - pred) ** 2) / ss_tot if ss_tot > 0 else 1.0
        order = topk_order(coef)
        names = (
            tuple(self.feature_names_in_)
            if hasattr(self, "feature_names_in_")
            else tuple(f"x{j}" for j in range(d))
        )
        return LimeExplanation(
            coef=coef,
            intercept=float(intercept),
            top_k=tuple(int(j) for j in order[:k]),
            feature_names=names,
            score=score,
            local_pred=float(pred[0]),
            model_pred=float(y[0]),
            n_samples=data.shape[0],
            kernel_width=kw,
        )

    def stability(
        self, predict_fn: Any, x: Any, *, seeds: Iterable[int] = range(10), k: int = 5, label: int = 1
    ) -> LimeStability:
        """Measure how much the top-``k`` features change across sampling seeds.

        Parameters
        ----------
        predict_fn, x, label
            As in :meth:`explain`.
        seeds : iterable of int, default range(10)
            Seeds of the neighbourhood sampler (at least 2).
        k : int, default 5
            Size of the compared top sets.

        Returns
        -------
        LimeStability
        """
        self._check_fitted()
        seed_list = list(seeds) if isinstance(seeds, Iterable) and not isinstance(seeds, str | bytes) else []
        if len(seed_list) < 2 or not all(
            isinstance(sd, numbers.Integral) and not isinstance(sd, bool) and sd >= 0 for sd in seed_list
        ):
            raise ParameterError(
                f"seeds must hold at least 2 non-negative int seeds (e.g. range(10)), got {seeds!r}.",
                argument="seeds",
            )
        k = check_positive_int(k, "k")
        d = self.n_features_in_
        if k > d:
            raise ParameterError(f"k={k} exceeds the number of features ({d}).", argument="k")
        other = copy.copy(self)  # shares the fitted statistics
        other.top_k = k
        sets: list[frozenset[int]] = []
        coefs = []
        for s in seed_list:
            other.random_state = s
            e = other.explain(predict_fn, x, label=label)
            sets.append(frozenset(e.top_k))
            coefs.append(e.coef)
        jac = [len(a & b) / len(a | b) for a, b in itertools.combinations(sets, 2)]
        modal = max(set(sets), key=sets.count)
        freq = np.zeros(d)
        for st in sets:
            freq[list(st)] += 1
        return LimeStability(
            mean_jaccard=float(np.mean(jac)),
            same_set_share=sets.count(modal) / len(sets),
            selection_frequency=freq / len(sets),
            coef_std=np.std(np.asarray(coefs), axis=0),
            n_seeds=len(sets),
        )
