"""GIST: graph counterfactuals by spectral backtracking (catalog row 003-10).

Prenkaj, Zaradoukas and Kasneci, "Graph Inverse Style Transfer for Counterfactual
Explainability", ICML 2025. A forward method perturbs the input until the classifier's label
flips and tends to overshoot the decision boundary; GIST starts from an overshot counterfactual
``G'`` (the content) and backtracks towards the input ``G``'s Laplacian spectrum (the style),
minimising ``(1 - alpha) * style + alpha * content``: the counterfactual is an interpolation
between the two. Here the objective is minimised per instance along a decreasing ``alpha`` path
(the paper amortises it in a trained generator: see docs/explain/graph-counterfactuals.md for
why and what differs). :func:`forward_perturbation` is the forward baseline (random or greedy
edge flips, or iRand as the authors' benchmark runs it). Graphs are dense symmetric 0/1
adjacency matrices or networkx graphs.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from trustlab._param_validation import HasMethods, Interval, Options, ParamsValidationMixin, validate_params
from trustlab._validation import make_generator
from trustlab.errors import DataError, ModelError, NotFittedError, ParameterError
from trustlab.explain._graph_cf_core import (
    backtrack,
    check_graphs,
    oracle_predict,
    pad_spectra,
    reachable,
    spectra,
)
from trustlab.explain._graph_cf_model import GraphGINClassifier, make_house_graphs, make_motif_graphs

__all__ = [
    "GIST",
    "GraphCounterfactuals",
    "GraphGINClassifier",
    "forward_perturbation",
    "make_house_graphs",
    "make_motif_graphs",
    "spectral_distance",
]


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    return float(_distances([a], [b])[0])


def _distances(a: list[np.ndarray], b: list[np.ndarray]) -> np.ndarray:
    """Spectral distance of each pair ``(a[i], b[i])``."""
    size = max(len(g) for g in [*a, *b])
    return np.linalg.norm(spectra(a, size) - spectra(b, size), axis=1)


@validate_params({"a": ["array-like"], "b": ["array-like"]})
def spectral_distance(a: Any, b: Any) -> float:
    """Euclidean distance between the Laplacian spectra of two graphs (zero-padded to one size).

    The ascending eigenvalues of ``L = D - A``; the smaller graph is padded with isolated
    nodes (zero eigenvalues), so graphs of different sizes compare.

    Parameters
    ----------
    a, b : array-like of shape (n, n) and (m, m), or networkx graphs
        Connected simple undirected graphs.

    Returns
    -------
    float

    Examples
    --------
    >>> path = [[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]]
    >>> star = [[0, 1, 1, 1], [1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]
    >>> round(spectral_distance(path, path), 6), round(spectral_distance(path, star), 3)
    (0.0, 1.231)

    References
    ----------
    .. [1] R. C. Wilson, P. Zhu, "A study of graph spectra for comparing graphs and trees",
       Pattern Recognition 41(9), 2008.
    """
    (ga,), (gb,) = check_graphs([a], "a"), check_graphs([b], "b")
    return _distance(ga, gb)


@dataclass(frozen=True)
class GraphCounterfactuals:
    """Counterfactual graphs for a batch of inputs.

    Parameters
    ----------
    graphs : list of ndarray
        The counterfactual adjacency matrices (the input itself where none was found).
    labels : ndarray
        The oracle's label of each input.
    counterfactual_labels : ndarray
        The oracle's label of each counterfactual.
    valid : ndarray of bool
        Whether each counterfactual has the target label (another label than the input's when
        no target was given).
    spectral_distance : ndarray
        :func:`spectral_distance` of each counterfactual to its input.
    alpha : ndarray
        GIST: the ``alpha`` of the chosen point of the backtracking path (1: the overshot graph
        itself; NaN: no counterfactual); the forward baseline: NaN.
    n_edits : ndarray
        Node pairs whose edge status differs between counterfactual and input where both have
        the same nodes (GIST's counterfactuals live on the overshot graph's nodes: -1 there).

    Examples
    --------
    >>> r = GraphCounterfactuals([np.ones((2, 2))], np.array([0]), np.array([1]), np.array([True]),
    ...                          np.array([0.5]), np.array([1.0]), np.array([-1]))
    >>> float(r.validity)
    1.0
    """

    graphs: list[np.ndarray]
    labels: np.ndarray
    counterfactual_labels: np.ndarray
    valid: np.ndarray
    spectral_distance: np.ndarray
    alpha: np.ndarray
    n_edits: np.ndarray

    @property
    def validity(self) -> float:
        """Fraction of inputs whose counterfactual is valid."""
        return float(np.mean(self.valid))


def _targets(labels: np.ndarray, target: Any) -> np.ndarray | None:
    if target is None:
        return None
    t = np.asarray(target)
    if t.ndim == 0:
        t = np.full(labels.shape, t.item(), dtype=np.result_type(t, labels))
    if t.shape != labels.shape:
        raise ParameterError(
            f"target must be one label or one per graph ({labels.size}), got shape {t.shape}.",
            argument="target",
        )
    return t


def _check_oracle(oracle: Any) -> None:
    if oracle is None or not (callable(oracle) or hasattr(oracle, "predict")):
        raise ModelError(
            "oracle must be a fitted classifier with predict(list_of_graphs) or a callable graphs -> labels.",
            argument="oracle",
        )


class GIST(ParamsValidationMixin, BaseEstimator):
    """Graph counterfactuals by spectral backtracking (Graph Inverse Style Transfer).

    ``fit(graphs)`` stores a pool of graphs (the training set) and the oracle's labels of
    them. ``explain(graphs)`` takes each input ``G`` of label ``y`` and

    1. *overshoots*: ``G'`` is the pool graph of another label (or of ``target``) nearest to
       ``G`` in spectral distance (the authors use the DCE perturber, the nearest instance of
       another class); with ``n_overshoots = k``, each of the ``k`` nearest;
    2. *backtracks*: edge weights ``W`` on ``G'``'s nodes minimise
       ``(1 - alpha) * mean|spec(L_W) - spec(L_G)| + alpha * BCE(W, A_G')``, started at ``G'``
       and continued along ``alphas`` (decreasing: from the counterfactual content towards the
       input's spectral style), ``steps`` Adam steps per ``alpha``; each optimum is thresholded
       at 1/2, and ``n_samples`` graphs are drawn from it (independent Bernoulli edges of
       probability ``W``: the authors' generator samples its output edges);
    3. returns, among ``G'`` and the path's graphs that the oracle labels as the target, the one
       nearest to ``G`` in spectral distance: the backtracking stops short of crossing back over
       the decision boundary. With ``fallback=False`` it returns the thresholded optimum at the
       last ``alpha`` whatever its label (the authors' code returns the generator's output
       unchecked).

    Parameters
    ----------
    oracle : object with ``predict(list_of_graphs)``, or a callable
        The graph classifier to explain (fitted).
    alphas : tuple of float, default=(0.9, 0.8, ..., 0.0)
        The backtracking path after ``G'`` (``alpha = 1``): content weights, non-increasing.
        The authors' code trains at ``alpha = 0.5``.
    steps : int, default=40
        Adam steps per ``alpha``.
    learning_rate : float, default=0.1
        Adam's step size on the edge logits.
    margin : float, default=3.0
        Initial edge logits ``margin * (2 A_G' - 1)`` (``sigmoid(3) = 0.95``).
    fallback : bool, default=True
        Pick the nearest valid point of the path (``G'`` included); False: the last point.
    n_samples : int, default=8
        Graphs drawn from the relaxed optimum at each ``alpha`` besides the thresholded one
        (0: thresholded only; ignored with ``fallback=False``).
    random_state : int or None, default=None
        Seeds the draws (None: 0, so results are reproducible either way).
    connected : bool, default=False
        Keep only connected candidates (``G'`` is connected, being a pool graph). The paper's
        objective does not ask for it; draws and thresholding may cut a graph apart.
    n_overshoots : int, default=1
        Overshot graphs to backtrack from per input: the ``n_overshoots`` pool graphs of the
        target class nearest in spectrum (the authors' DCE perturber draws one at random from
        the other class; several draws, each backtracked, and the nearest valid point kept).

    Attributes
    ----------
    pool_ : list of ndarray
        The fitted graphs.
    pool_labels_ : ndarray
        The oracle's labels of them.

    Examples
    --------
    >>> graphs, y = make_house_graphs(30, random_state=0)
    >>> clf = GraphGINClassifier(epochs=40, random_state=0).fit(graphs, y)
    >>> test, _ = make_house_graphs(2, random_state=1)
    >>> cf = GIST(clf, alphas=(0.5, 0.0), steps=5).fit(graphs).explain(test)
    >>> len(cf.graphs), cf.valid.dtype
    (2, dtype('bool'))

    References
    ----------
    .. [1] B. Prenkaj, E. Zaradoukas, G. Kasneci, "Graph Inverse Style Transfer for
       Counterfactual Explainability", ICML 2025.
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "oracle": [HasMethods(["predict"]), callable, None],
        "alphas": ["array-like"],
        "steps": [Interval(numbers.Integral, 1, None, closed="left")],
        "learning_rate": [Interval(numbers.Real, 0, None, closed="neither")],
        "margin": [Interval(numbers.Real, 0, None, closed="neither")],
        "fallback": ["boolean"],
        "n_samples": [Interval(numbers.Integral, 0, None, closed="left")],
        "random_state": [Interval(numbers.Integral, 0, None, closed="left"), None],
        "connected": ["boolean"],
        "n_overshoots": [Interval(numbers.Integral, 1, None, closed="left")],
    }

    def __init__(
        self,
        oracle: Any = None,
        alphas: tuple[float, ...] = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0),
        steps: int = 40,
        learning_rate: float = 0.1,
        margin: float = 3.0,
        fallback: bool = True,
        n_samples: int = 8,
        random_state: int | None = None,
        connected: bool = False,
        n_overshoots: int = 1,
    ) -> None:
        self.oracle = oracle
        self.alphas = alphas
        self.steps = steps
        self.learning_rate = learning_rate
        self.margin = margin
        self.fallback = fallback
        self.n_samples = n_samples
        self.random_state = random_state
        self.connected = connected
        self.n_overshoots = n_overshoots

    def _check_alphas(self) -> list[float]:
        try:
            alphas = np.asarray(self.alphas, dtype=float).ravel()
        except (TypeError, ValueError):
            raise ParameterError("alphas must be numbers in [0, 1].", argument="alphas") from None
        if alphas.size == 0 or not np.all((alphas >= 0) & (alphas <= 1)):
            raise ParameterError(
                f"alphas must be a non-empty sequence of numbers in [0, 1], got {self.alphas!r}.",
                argument="alphas",
            )
        if np.any(np.diff(alphas) > 0):
            raise ParameterError(
                "alphas must be non-increasing: the path goes from the counterfactual content (1) "
                "back towards the input's style (0).",
                argument="alphas",
            )
        return [float(a) for a in alphas]

    def fit(self, graphs: Any, y: Any = None) -> GIST:
        """Store the pool of graphs the overshot counterfactuals come from, with the oracle's labels.

        Parameters
        ----------
        graphs : list of array-like or networkx graphs
            Connected simple undirected graphs (the training set).
        y : None
            Ignored: the labels are the oracle's.

        Returns
        -------
        GIST
        """
        self._validate_params()
        _check_oracle(self.oracle)
        self._check_alphas()
        pool = check_graphs(graphs)
        labels = oracle_predict(self.oracle, pool)
        if np.unique(labels).size < 2:
            raise DataError(
                "the oracle gives every pool graph the same label; counterfactuals need graphs of at "
                "least two predicted classes in graphs.",
                argument="graphs",
            )
        self.pool_, self.pool_labels_ = pool, labels
        self._pool_spectra = spectra(pool, max(len(g) for g in pool))
        return self

    def _overshoot(self, spec: np.ndarray, label: Any, target: Any, pool_spec: np.ndarray) -> list[int]:
        """The ``n_overshoots`` pool graphs of the target class (another class) nearest in spectrum."""
        ok = self.pool_labels_ == target if target is not None else self.pool_labels_ != label
        idx = np.flatnonzero(ok)
        order = np.argsort(np.linalg.norm(pool_spec[idx] - spec, axis=1), kind="stable")
        return [int(i) for i in idx[order[: self.n_overshoots]]]

    def explain(self, graphs: Any, target: Any = None) -> GraphCounterfactuals:
        """Counterfactuals of ``graphs``: overshoot to another class, then backtrack spectrally.

        Parameters
        ----------
        graphs : list of array-like or networkx graphs
            Connected simple undirected graphs to explain.
        target : label, array-like of labels, or None, default=None
            The class each counterfactual should get; None: any class other than the input's.

        Returns
        -------
        GraphCounterfactuals
        """
        if not hasattr(self, "pool_"):
            raise NotFittedError("GIST is not fitted; call fit(graphs) first.", argument="self")
        alphas = self._check_alphas()
        gs = check_graphs(graphs)
        labels = oracle_predict(self.oracle, gs)
        targets = _targets(labels, target)
        size = max(self._pool_spectra.shape[1], max(len(g) for g in gs))
        specs, pool_spec = spectra(gs, size), pad_spectra(self._pool_spectra, size)
        picks = [
            self._overshoot(specs[i], y, None if targets is None else targets[i], pool_spec)
            for i, y in enumerate(labels)
        ]
        # unchecked (fallback=False): the nearest overshoot's last point only
        pairs = [(i, p) for i, ps in enumerate(picks) for p in (ps if self.fallback else ps[:1])]
        paths: dict[int, list[list[np.ndarray]]] = {}
        if pairs:
            overshot = [self.pool_[p] for _, p in pairs]
            found = backtrack(
                [gs[i] for i, _ in pairs],
                overshot,
                alphas,
                steps=self.steps,
                learning_rate=self.learning_rate,
                margin=self.margin,
                n_samples=self.n_samples if self.fallback else 0,
                seed=0 if self.random_state is None else self.random_state,
            )
            for (i, _), o, path in zip(pairs, overshot, found, strict=True):
                paths.setdefault(i, []).extend([[o], *path] if self.fallback else [path[-1][:1]])
        # paths[i]: for each overshoot in turn, G' then one candidate list per alpha (unchecked: one
        # list, the last alpha's thresholded optimum); k % per_path is the point on the path
        per_path = len(alphas) + 1 if self.fallback else 1
        flat = [
            (i, k % per_path, c)
            for i, path in paths.items()
            for k, cands in enumerate(path)
            for c in _unique(cands)
            if c.any() and (k % per_path == 0 or not self.connected or reachable(c).all())
        ]
        cand_labels = oracle_predict(self.oracle, [c for _, _, c in flat]) if flat else np.array([])
        dists = _distances([gs[i] for i, _, _ in flat], [c for _, _, c in flat]) if flat else np.array([])
        best: dict[int, tuple[float, int, np.ndarray, Any]] = {}
        for (i, k, c), lab, d in zip(flat, cand_labels, dists, strict=True):
            ok = lab == targets[i] if targets is not None else lab != labels[i]
            if not self.fallback:
                best[i] = (d, len(alphas), c, lab)  # one candidate per input
            elif ok:
                if i not in best or d < best[i][0] - 1e-12:
                    best[i] = (d, k, c, lab)
        out, new, alpha = [], [], []
        for i, g in enumerate(gs):
            if i in best:
                _, k, c, lab = best[i]
                out.append(c)
                new.append(lab)
                alpha.append(1.0 if k == 0 else alphas[k - 1])
            else:
                out.append(g)
                new.append(labels[i])
                alpha.append(np.nan)
        return _result(gs, out, labels, np.asarray(new), targets, np.asarray(alpha))


def _unique(graphs: list[np.ndarray]) -> list[np.ndarray]:
    """``graphs`` without repeats (the draws of a confident optimum mostly coincide)."""
    seen: dict[bytes, np.ndarray] = {}
    for g in graphs:
        seen.setdefault(g.tobytes(), g)
    return list(seen.values())


def _result(
    gs: list[np.ndarray],
    out: list[np.ndarray],
    labels: np.ndarray,
    new: np.ndarray,
    targets: np.ndarray | None,
    alpha: np.ndarray,
) -> GraphCounterfactuals:
    valid = new == targets if targets is not None else new != labels
    dist = _distances(gs, out)
    edits = np.array(
        [int((g != c).sum() // 2) if g.shape == c.shape else -1 for g, c in zip(gs, out, strict=True)]
    )
    return GraphCounterfactuals(out, labels, new, np.asarray(valid, dtype=bool), dist, alpha, edits)


@validate_params(
    {
        "oracle": [HasMethods(["predict"]), callable],
        "graphs": "no_validation",
        "strategy": [Options({"random", "greedy", "irand"})],
        "max_edits": [
            Interval(numbers.Integral, 1, None, closed="left"),
            Interval(numbers.Real, 0, 1, closed="neither"),
        ],
        "tries": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "target": "no_validation",
    }
)
def forward_perturbation(
    oracle: Any,
    graphs: Any,
    *,
    strategy: str = "random",
    max_edits: int | float = 5,
    tries: int = 3,
    random_state: Any = None,
    target: Any = None,
) -> GraphCounterfactuals:
    """The forward baseline: flip node pairs of each input until the oracle's label changes.

    ``"random"``: flip distinct uniformly random node pairs one at a time, cumulatively. ``"greedy"``:
    at each step flip the pair that most lowers the oracle's probability of the input's label,
    or most raises that of ``target`` (needs ``predict_proba``). Both stop at the first label
    change (to ``target`` when given) or after ``max_edits`` flips (then the last perturbed
    graph is returned, invalid). ``"irand"``: iRand, the random forward baseline of the GIST
    paper's benchmark (the authors' ``IRandExplainer``): for ``i = 1, 2, ..., max_edits`` it
    makes ``tries`` fresh copies of the input with ``i`` random node pairs flipped and returns
    the first that the oracle labels as the target; when none does, the input itself (invalid,
    as the authors' code returns it).

    Parameters
    ----------
    oracle : fitted classifier with ``predict`` (and ``predict_proba`` for greedy), or a callable
        The graph classifier.
    graphs : list of array-like or networkx graphs
        Connected simple undirected graphs to explain.
    strategy : {"random", "greedy", "irand"}, default="random"
    max_edits : int or float in (0, 1), default=5
        Flips allowed per graph; a float is a share ``p`` of the graph's node pairs, as iRand's
        ``p`` (the authors' default 0.1): ``int(p * n_pairs) - 1`` flips (at least 1; their loop
        is ``range(1, int(p * n_pairs))``).
    tries : int, default=3
        iRand: random graphs tried at each number of flips (the authors' ``t``; other strategies
        ignore it).
    random_state : None, int or numpy Generator
        Drives the random flips.
    target : label, array-like of labels, or None, default=None
        The class each counterfactual should get; None: any class other than the input's.

    Returns
    -------
    GraphCounterfactuals

    Examples
    --------
    >>> has_cycle = lambda gs: np.array([int(g.sum() / 2 >= len(g)) for g in gs])
    >>> path = np.diag(np.ones(4), 1) + np.diag(np.ones(4), -1)
    >>> r = forward_perturbation(has_cycle, [path], max_edits=6, random_state=0)
    >>> r.graphs[0].shape
    (5, 5)
    >>> bool(forward_perturbation(has_cycle, [path], strategy="irand", random_state=0).valid[0])
    True

    References
    ----------
    .. [1] B. Prenkaj, E. Zaradoukas, G. Kasneci, "Graph Inverse Style Transfer for
       Counterfactual Explainability", ICML 2025 (iRand: the authors' code,
       ``src/explainer/search/i_rand.py``).
    """
    gs = check_graphs(graphs)
    if strategy == "greedy" and not hasattr(oracle, "predict_proba"):
        raise ModelError("strategy='greedy' needs an oracle with predict_proba.", argument="oracle")
    rng = make_generator(random_state)
    labels = oracle_predict(oracle, gs)
    targets = _targets(labels, target)
    out = []
    for idx, (g, y) in enumerate(zip(gs, labels, strict=True)):
        goal = None if targets is None else targets[idx]
        n = len(g)
        iu, ju = np.triu_indices(n, k=1)
        share = not isinstance(max_edits, numbers.Integral)  # iRand's p: a share of the node pairs
        budget = min(max(1, int(max_edits * iu.size) - 1) if share else int(max_edits), iu.size)
        if strategy == "irand":
            out.append(_irand(oracle, g, y, goal, budget, tries, rng))
            continue
        cur = g.copy()
        order = rng.permutation(iu.size)[:budget] if strategy == "random" else None
        for step in range(budget):
            if order is not None:
                p = int(order[step])
            else:
                cands = []
                for i, j in zip(iu, ju, strict=True):
                    c = cur.copy()
                    c[i, j] = c[j, i] = 1.0 - c[i, j]
                    cands.append(c)
                proba = np.asarray(oracle.predict_proba(cands))
                if goal is None:
                    p = int(np.argmin(proba[:, int(np.flatnonzero(oracle.classes_ == y)[0])]))
                else:
                    p = int(np.argmax(proba[:, _class_index(oracle, goal)]))
            i, j = iu[p], ju[p]
            cur[i, j] = cur[j, i] = 1.0 - cur[i, j]
            now = oracle_predict(oracle, [cur])[0]
            if (now != y) if goal is None else (now == goal):
                break
        out.append(cur)
    new = oracle_predict(oracle, out)
    return _result(gs, out, labels, new, targets, np.full(len(gs), np.nan))


def _irand(oracle: Any, g: np.ndarray, y: Any, goal: Any, budget: int, tries: int, rng: Any) -> np.ndarray:
    """The iRand search on one graph: ``tries`` copies with ``i`` flips, ``i = 1..budget``; the first valid.

    The copies are drawn in the authors' order and labelled 32 to an oracle call (the same result
    as their one-at-a-time loop, which stops at the first valid copy). Flipped pairs are distinct
    (the authors draw with replacement, so a pair drawn twice flips back; here ``i`` flips are
    ``i`` edits).
    """
    iu, ju = np.triu_indices(len(g), k=1)
    sizes = [i for i in range(1, budget + 1) for _ in range(tries)]
    for start in range(0, len(sizes), 32):  # 32 copies per oracle call, in order
        cands = []
        for i in sizes[start : start + 32]:
            c = g.copy()
            pick = rng.choice(iu.size, size=i, replace=False)
            c[iu[pick], ju[pick]] = c[ju[pick], iu[pick]] = 1.0 - c[iu[pick], ju[pick]]
            cands.append(c)
        labs = oracle_predict(oracle, cands)
        ok = labs != y if goal is None else labs == goal
        if ok.any():
            return cands[int(np.argmax(ok))]
    return g.copy()


def _class_index(oracle: Any, label: Any) -> int:
    hit = np.flatnonzero(np.asarray(oracle.classes_) == label)
    if hit.size == 0:
        raise ParameterError(
            f"target {label!r} is not one of the oracle's classes {list(oracle.classes_)}.", argument="target"
        )
    return int(hit[0])
