"""Algorithmic collective action on a learning platform (Gauthier, Bach and Jordan, ICML 2025).

A collective of ``n`` of the platform's ``N`` users (``alpha = n / N``) coordinates what
data it submits so that the learned classifier maps a signal ``g(x)`` to a label of its
choosing. Before acting it computes, from its own data only, an a-priori estimate and a
finite-sample lower bound (probability ``>= 1 - delta``) on its success:

* :func:`collective_bound` — the estimate and the certified lower bound;
* :func:`plant_signal` / :func:`unplant_signal` — the coordination algorithms (what the
  members submit);
* :func:`simulate_collective` — the realised effect: trains the platform on the mixed
  data and measures success on fresh test users;
* :func:`make_product_ratings` — a product-evaluation data set like the paper's.

Features are categorical, integer-coded ``0..cardinality-1`` per column; labels are
integers ``0..n_classes-1``. See docs/fairness/collective.md.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from trustlab._param_validation import Interval, Options, validate_params
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, ParameterError
from trustlab.fairness import _collective_core as cc
from trustlab.fairness._collective_data import PRODUCT_CARDINALITIES, PRODUCT_SIGNAL, make_product_ratings
from trustlab.fairness._collective_inputs import _categorical, _estimate_labels, _signal

__all__ = [
    "PRODUCT_CARDINALITIES",
    "PRODUCT_SIGNAL",
    "CollectiveEstimate",
    "CollectiveOutcome",
    "collective_bound",
    "make_product_ratings",
    "plant_signal",
    "simulate_collective",
    "unplant_signal",
]


_CARD: list[Any] = ["array-like", None]
_SIGNAL: dict[str, Any] = {
    "X": ["array-like"],
    "y": ["array-like"],
    "signal": [dict],
    "target": [Interval(numbers.Integral, 0, None, closed="left")],
}
"""The constraints of every function here: the members' data, the signal and the target label."""
_STRATEGY: dict[str, Any] = {
    "strategy": [Options({"feature_label", "feature_only"})],
    "dump_point": ["array-like", None],
}
_ACTION: dict[str, Any] = {
    "goal": [Options({"plant", "unplant"})],
    "n_estimate": [Interval(numbers.Integral, 1, None, closed="left"), None],
    "n_test": [Interval(numbers.Integral, 1, None, closed="left")],
    "delta": [Interval(numbers.Real, 0, 1, closed="neither")],
    "cardinalities": _CARD,
}
"""The constraints :func:`collective_bound` and :func:`simulate_collective` share (the planned action)."""


def _coded(
    X: Any, y: Any, signal: dict[int, int], target: int, cardinalities: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, int], int, int]:
    """The coded data, cardinalities, checked signal, target and label count (at least ``target + 1``)."""
    Xi, yi, card, k = _categorical(X, y, cardinalities, None)
    tgt = int(target)
    return Xi, yi, card, _signal(signal, Xi.shape[1], card), tgt, max(int(k), tgt + 1, 2)


@dataclass(frozen=True)
class CollectiveEstimate:
    """A collective's a-priori assessment of its success, from its own data.

    Attributes
    ----------
    alpha : float
        Share of the platform's training data the acting members submit.
    estimate : float
        Plug-in estimate of the success (no concentration slack).
    lower_bound : float
        Success certified with probability ``>= 1 - delta`` (may be negative: vacuous).
    delta : float
        The failure probability of the bound.
    cell_thresholds : numpy.ndarray
        For each signal cell the members occupy, the plug-in ``alpha`` above which the
        platform's label on that cell flips (``inf`` when it cannot).
    cell_weights : numpy.ndarray
        Share of members whose signal falls in each of those cells.

    See Also
    --------
    collective_bound
    """

    alpha: float
    estimate: float
    lower_bound: float
    delta: float
    cell_thresholds: np.ndarray
    cell_weights: np.ndarray


@dataclass(frozen=True)
class CollectiveOutcome:
    """Realised effect of a collective beside its a-priori assessment.

    Attributes
    ----------
    alpha : float
        Requested collective share.
    n_collective : int
        Members (``round(alpha * n_train)``).
    n_train : int
        Size of the platform's training set.
    success : float
        Realised success on the test users (share whose signal gets the wanted label).
    estimate : float
        The collective's plug-in estimate.
    lower_bound : float
        The collective's certified lower bound.
    assessment : CollectiveEstimate
        The collective's full a-priori assessment (per-cell flip thresholds included).

    See Also
    --------
    simulate_collective
    """

    alpha: float
    n_collective: int
    n_train: int
    success: float
    estimate: float
    lower_bound: float
    assessment: CollectiveEstimate


@validate_params({**_SIGNAL, **_STRATEGY})
def plant_signal(
    X: Any,
    y: Any,
    *,
    signal: dict[int, int],
    target: int,
    strategy: str = "feature_label",
    dump_point: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """What a collective submits to plant a signal (the paper's two planting strategies).

    Parameters
    ----------
    X : array-like of shape (n_members, n_features)
        The members' integer-coded categorical features.
    y : array-like of shape (n_members,)
        Their labels.
    signal : dict
        ``{column: code}``: the transformation ``g`` sets these features.
    target : int
        The label ``y*`` the platform should give to signalled inputs.
    strategy : {"feature_label", "feature_only"}, default "feature_label"
        ``"feature_label"``: every member submits ``(g(x), y*)``. ``"feature_only"``
        (members cannot change labels): members with label ``y*`` submit ``g(x)``, the
        others move their features to ``dump_point`` (so they do not vote against
        ``y*`` on the signal cells).
    dump_point : array-like of shape (n_features,), optional
        Required for ``"feature_only"``.

    Returns
    -------
    X_submitted, y_submitted : numpy.ndarray
        The data the collective submits.

    Examples
    --------
    >>> Xs, ys = plant_signal([[0, 1], [1, 0]], [2, 0], signal={0: 1}, target=3)
    >>> Xs.tolist(), ys.tolist()
    ([[1, 1], [1, 0]], [3, 3])

    References
    ----------
    E. Gauthier, F. Bach, M. I. Jordan. Statistical Collusion by Collectives on
    Learning Platforms. ICML 2025.
    """
    Xi, yi, _, _ = _categorical(X, y, None, None)
    sig = _signal(signal, Xi.shape[1], None)
    Xt = cc.apply_signal(Xi, sig)
    if strategy == "feature_label":
        return Xt, np.full(yi.size, int(target), dtype=np.int64)
    if dump_point is None:
        raise ParameterError(
            "strategy='feature_only' needs dump_point (where non-target members go).", argument="dump_point"
        )
    x0 = check_numeric_array(dump_point, "dump_point", ndim=1)
    if x0.size != Xi.shape[1] or not np.all(x0 == np.round(x0)) or (x0 < 0).any():
        raise DataError("dump_point must give one category code >= 0 per column of X.", argument="dump_point")
    out = np.where((yi == target)[:, None], Xt, x0.astype(np.int64)[None, :])
    return out, yi.copy()


@validate_params(
    {**_SIGNAL, "n_estimate": [Interval(numbers.Integral, 1, None, closed="left")], "cardinalities": _CARD}
)
def unplant_signal(
    X: Any,
    y: Any,
    *,
    signal: dict[int, int],
    target: int,
    n_estimate: int,
    cardinalities: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """What a collective submits to *unplant* a signal: the platform must not say ``y*`` on ``g(x)``.

    The first ``n_estimate`` members estimate, for every signal cell ``c``, the most
    frequent other label ``y_hat(c) = argmax_{y != y*} P(c, y)`` and submit their data
    unchanged; the others submit ``(g(x), y_hat(g(x)))``.

    Parameters
    ----------
    X : array-like of shape (n_members, n_features)
        The members' integer-coded categorical features.
    y : array-like of shape (n_members,)
        Their labels.
    signal : dict
        ``{column: code}`` set by ``g``.
    target : int
        The label ``y*`` to keep off the signal.
    n_estimate : int
        Members used to estimate ``y_hat`` (``1 <= n_estimate < n_members``).
    cardinalities : array-like of shape (n_features,), optional
        Category counts per column (default: the largest code + 1).

    Returns
    -------
    X_submitted, y_submitted : numpy.ndarray
        The estimation members' data followed by the acting members' transformed data.

    Examples
    --------
    >>> X = [[0, 0], [1, 0], [0, 1], [1, 1]]
    >>> Xs, ys = unplant_signal(X, [1, 2, 0, 0], signal={0: 1}, target=0, n_estimate=2)
    >>> Xs.tolist(), ys.tolist()
    ([[0, 0], [1, 0], [1, 1], [1, 1]], [1, 2, 1, 1])

    References
    ----------
    E. Gauthier, F. Bach, M. I. Jordan. Statistical Collusion by Collectives on
    Learning Platforms. ICML 2025.
    """
    Xi, yi, card, sig, tgt, kk = _coded(X, y, signal, target, cardinalities)
    if n_estimate >= Xi.shape[0]:
        raise ParameterError(
            f"n_estimate ({n_estimate}) must be smaller than the collective ({Xi.shape[0]}).",
            argument="n_estimate",
        )
    n_cells = int(np.prod(card))
    est = cc.joint(cc.cells(Xi[:n_estimate], card), yi[:n_estimate], n_cells, kk)
    y_hat = _estimate_labels(est, tgt)
    act = cc.apply_signal(Xi[n_estimate:], sig)
    y_act = y_hat[cc.cells(act, card)]
    return np.vstack([Xi[:n_estimate], act]), np.r_[yi[:n_estimate], y_act]


@validate_params(
    {
        **_SIGNAL,
        **_STRATEGY,
        **_ACTION,
        "n_total": [Interval(numbers.Integral, 2, None, closed="left")],
        "epsilon": [Interval(numbers.Real, 0, 1, closed="left")],
        "n_classes": [Interval(numbers.Integral, 2, None, closed="left"), None],
    }
)
def collective_bound(
    X: Any,
    y: Any,
    *,
    n_total: int,
    signal: dict[int, int],
    target: int,
    goal: str = "plant",
    strategy: str = "feature_label",
    dump_point: Any = None,
    n_estimate: int | None = None,
    n_test: int = 10_000,
    delta: float = 0.05,
    epsilon: float = 0.0,
    cardinalities: Any = None,
    n_classes: int | None = None,
) -> CollectiveEstimate:
    """A-priori estimate and certified lower bound of a collective's success, from its own data.

    The collective's members hold ``X, y`` (drawn like the rest of the platform's
    ``n_total`` users). A signal cell ``c`` is won when the planted mass beats the rest
    of the population's margin there: ``(n/N) P~(c) - ((N-n)/N) Delta(c) - eps/(1-eps) > 0``
    with ``Delta(c) = max_{y' != y*} P(c, y') - P(c, y*)`` (planting) or
    ``P(c, y*) - P(c, y_hat(c))`` (unplanting), all estimated on the members' data. The
    estimate is the share of members whose signal cell is won; the lower bound
    subtracts Hoeffding slacks ``R(d, k) = sqrt(log(1/d) / (2k))`` at a union-bounded
    ``d`` (the paper's Algorithm 1 and its unplanting analogue).

    Parameters
    ----------
    X : array-like of shape (n_members, n_features)
        The members' integer-coded categorical features (before any change).
    y : array-like of shape (n_members,)
        Their labels.
    n_total : int
        ``N``, the size of the platform's training set, members included.
    signal : dict
        ``{column: code}``: the features ``g`` sets.
    target : int
        ``y*``.
    goal : {"plant", "unplant"}, default "plant"
        Make the platform say ``y*`` on ``g(x)``, or keep it from saying ``y*``.
    strategy : {"feature_label", "feature_only"}, default "feature_label"
        Planting strategy (see :func:`plant_signal`).
    dump_point : array-like, optional
        For ``"feature_only"``: where the non-target members move.
    n_estimate : int, optional
        For ``"unplant"``: members who estimate ``y_hat`` (required there).
    n_test : int, default 10000
        Number of test users over which success is measured (its own slack term).
    delta : float, default 0.05
        The bound holds with probability ``>= 1 - delta``; in (0, 1).
    epsilon : float, default 0.0
        The platform's suboptimality (it is ``epsilon``-close to Bayes optimal); in [0, 1).
    cardinalities : array-like of shape (n_features,), optional
        Category counts per column (default: the largest code + 1, widened by the signal).
    n_classes : int, optional
        Number of labels (default: the largest label + 1, at least ``target + 1``).

    Returns
    -------
    CollectiveEstimate
        ``alpha``, the plug-in ``estimate``, the certified ``lower_bound`` and the
        per-cell flip thresholds.

    Examples
    --------
    >>> X, y = make_product_ratings(60_000, random_state=0)
    >>> est = collective_bound(X[:3000], y[:3000], n_total=60_000, signal=PRODUCT_SIGNAL,
    ...                        target=3, cardinalities=PRODUCT_CARDINALITIES)
    >>> round(est.alpha, 3), est.lower_bound <= est.estimate
    (0.05, True)

    References
    ----------
    E. Gauthier, F. Bach, M. I. Jordan. Statistical Collusion by Collectives on
    Learning Platforms. ICML 2025.
    """
    Xi, yi, card, k = _categorical(X, y, cardinalities, n_classes)
    sig = _signal(signal, Xi.shape[1], None)
    if cardinalities is None:
        for j, v in sig.items():
            card[j] = max(card[j], v + 1)
    else:
        sig = _signal(signal, Xi.shape[1], card)
    if n_classes is not None and target >= n_classes:
        raise ParameterError(
            f"target must be a label in 0..{n_classes - 1}; got {target}.", argument="target"
        )
    kk = max(int(k), int(target) + 1, 2)
    tgt = int(target)
    n = Xi.shape[0]
    if n_total <= n:
        raise ParameterError(
            f"n_total ({n_total}) must exceed the collective's size ({n}): the platform has other users.",
            argument="n_total",
        )
    n_cells = int(np.prod(card))
    free = [j for j in range(card.size) if j not in sig]
    c_signal = int(np.prod(card[free])) if free else 1
    if goal == "plant":
        if strategy == "feature_only":
            plant_signal(Xi, yi, signal=sig, target=tgt, strategy=strategy, dump_point=dump_point)
        table = cc.joint(cc.cells(Xi, card), yi, n_cells, kk)
        others = np.delete(table, tgt, axis=1)
        gap = others.max(axis=1) - table[:, tgt]
        member_cells = cc.cells(cc.apply_signal(Xi, sig), card)
        mask = (yi == tgt) if strategy == "feature_only" else np.ones(n, bool)
        planted = np.bincount(member_cells[mask], minlength=n_cells) / n
        d_t = delta / (2 + 2 * c_signal + 2 * c_signal * kk)
        r_n = cc.hoeffding(d_t, n)
        n_act = n
        slack_p, slack_g = 2 * r_n, 2 * r_n + 2 * cc.hoeffding(d_t, n_total - n)
    else:
        if n_estimate is None or n_estimate >= n:
            raise ParameterError(
                f"goal='unplant' needs n_estimate with 1 <= n_estimate < {n} (members who estimate y_hat).",
                argument="n_estimate",
            )
        est = cc.joint(cc.cells(Xi[:n_estimate], card), yi[:n_estimate], n_cells, kk)
        y_hat = _estimate_labels(est, tgt)
        act_X, act_y = Xi[n_estimate:], yi[n_estimate:]
        n_act = act_X.shape[0]
        table = cc.joint(cc.cells(act_X, card), act_y, n_cells, kk)
        gap = table[:, tgt] - est[np.arange(n_cells), y_hat]
        member_cells = cc.cells(cc.apply_signal(act_X, sig), card)
        planted = np.bincount(member_cells, minlength=n_cells) / n_act
        d_t = delta / (2 + 6 * c_signal)
        r_n = cc.hoeffding(d_t, n_act)
        slack_p = 2 * r_n
        slack_g = r_n + cc.hoeffding(d_t, n_estimate) + 2 * cc.hoeffding(d_t, n_total - n_act)
    plug, cert = cc.bound_from_cells(
        member_cells,
        planted,
        gap,
        n_act=n_act,
        n_total=n_total,
        slack_planted=slack_p,
        slack_gap=slack_g,
        epsilon=float(epsilon),
    )
    lower = float(np.mean(cert)) - r_n - cc.hoeffding(d_t, n_test)
    used, counts = np.unique(member_cells, return_counts=True)
    rob = float(epsilon) / (1.0 - float(epsilon))
    p, g = planted[used], gap[used]
    with np.errstate(divide="ignore", invalid="ignore"):
        thr = np.where(p + g > 0, (g + rob) / (p + g), np.inf)
    thr = np.where((g + rob <= 0) & (p > 0), 0.0, thr)
    return CollectiveEstimate(
        alpha=n_act / n_total,
        estimate=float(np.mean(plug)),
        lower_bound=lower,
        delta=float(delta),
        cell_thresholds=thr,
        cell_weights=counts / counts.sum(),
    )


@validate_params(
    {
        **_SIGNAL,
        **_STRATEGY,
        **_ACTION,
        "alpha": [Interval(numbers.Real, 0, 1, closed="right")],
        "n_train": [Interval(numbers.Integral, 2, None, closed="left"), None],
        "random_state": ["random_state"],
    }
)
def simulate_collective(
    X: Any,
    y: Any,
    *,
    alpha: float,
    signal: dict[int, int],
    target: int,
    goal: str = "plant",
    strategy: str = "feature_label",
    dump_point: Any = None,
    n_estimate: int | None = None,
    n_train: int | None = None,
    n_test: int = 10_000,
    delta: float = 0.05,
    cardinalities: Any = None,
    random_state: Any = None,
) -> CollectiveOutcome:
    """Run a collective of share ``alpha`` against the platform and compare with its a-priori bound.

    Draws ``n_train`` training and ``n_test`` test users from ``X, y`` (without
    replacement); the first ``round(alpha * n_train)`` training users form the
    collective, submit what :func:`plant_signal` / :func:`unplant_signal` says, the
    platform fits its Bayes classifier on the mixed data, and success is measured on
    the test users' ``g(x)``.

    Parameters
    ----------
    X : array-like of shape (n_pool, n_features)
        Integer-coded categorical features of the population.
    y : array-like of shape (n_pool,)
        Labels.
    alpha : float
        Collective share of the training data, in (0, 1] (``alpha = 1``: everyone).
    signal, target, goal, strategy, dump_point, n_estimate, delta
        As in :func:`collective_bound`. For ``"unplant"`` the acting share is
        ``alpha - n_estimate / n_train``.
    n_train : int, optional
        Platform training-set size (default: the pool less ``n_test``).
    n_test : int, default 10000
        Test users.
    cardinalities : array-like, optional
        Category counts per column (default: from the pool).
    random_state : int, numpy Generator or None
        Seed of the split.

    Returns
    -------
    CollectiveOutcome
        Realised ``success`` beside the collective's ``estimate`` and ``lower_bound``.

    Examples
    --------
    >>> X, y = make_product_ratings(60_000, random_state=0)
    >>> out = simulate_collective(X, y, alpha=0.05, signal=PRODUCT_SIGNAL, target=3,
    ...                           n_test=10_000, random_state=0)
    >>> out.lower_bound <= out.success
    True

    References
    ----------
    E. Gauthier, F. Bach, M. I. Jordan. Statistical Collusion by Collectives on
    Learning Platforms. ICML 2025.
    """
    Xi, yi, card, sig, tgt, kk = _coded(X, y, signal, target, cardinalities)
    n_pool = Xi.shape[0]
    if n_train is None:
        n_train = n_pool - n_test
    if n_train < 2 or n_train + n_test > n_pool:
        raise ParameterError(
            f"n_train + n_test ({n_train} + {n_test}) must be at most the pool ({n_pool}) with n_train >= 2.",
            argument="n_train",
        )
    n = round(alpha * n_train)
    if n < 1:
        raise ParameterError(
            f"alpha={alpha} gives no member among {n_train} training users; raise alpha or n_train.",
            argument="alpha",
        )
    if n >= n_train:
        n = n_train - 1  # the platform keeps one user of its own: the bound needs N > n
    rng = make_generator(random_state)
    order = rng.permutation(n_pool)
    train, test = order[:n_train], order[n_train : n_train + n_test]
    Xc, yc = Xi[train[:n]], yi[train[:n]]
    if goal == "plant":
        Xs, ys = plant_signal(Xc, yc, signal=sig, target=tgt, strategy=strategy, dump_point=dump_point)
    else:
        if n_estimate is None or n_estimate >= n:
            raise ParameterError(
                f"goal='unplant' needs n_estimate with 1 <= n_estimate < {n} members.", argument="n_estimate"
            )
        Xs, ys = unplant_signal(Xc, yc, signal=sig, target=tgt, n_estimate=n_estimate, cardinalities=card)
    Xm = np.vstack([Xs, Xi[train[n:]]])
    ym = np.r_[ys, yi[train[n:]]]
    n_cells = int(np.prod(card))
    labels = cc.platform_labels(cc.joint(cc.cells(Xm, card), ym, n_cells, kk))
    pred = labels[cc.cells(cc.apply_signal(Xi[test], sig), card)]
    success = float(np.mean(pred == tgt)) if goal == "plant" else float(np.mean(pred != tgt))
    est = collective_bound(
        Xc,
        yc,
        n_total=n_train,
        signal=sig,
        target=tgt,
        goal=goal,
        strategy=strategy,
        dump_point=dump_point,
        n_estimate=n_estimate,
        n_test=n_test,
        delta=delta,
        cardinalities=card,
        n_classes=kk,
    )
    return CollectiveOutcome(
        alpha=float(alpha),
        n_collective=n,
        n_train=int(n_train),
        success=success,
        estimate=est.estimate,
        lower_bound=est.lower_bound,
        assessment=est,
    )
