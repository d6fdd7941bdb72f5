"""A kNN memory classifier: frozen embeddings, nearest-neighbour retrieval, editable records.

Geirhos et al., "Towards flexible perception with visual memory" (ICML 2025): the
knowledge of a classifier lives in a database of ``(embedding, label, id)`` records, not
in weights. A frozen encoder gives the similarity, an index (FAISS flat or IVF, or an
exact NumPy fallback) gives the search, and a vote over the neighbours gives the label.
Records can be added (single samples, whole classes, millions of rows), removed for good
(exact unlearning), pruned, reweighted or excluded, and each prediction can be explained
by the records that voted. See ``docs/unlearning/knn-memory.md``.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from trustlab._param_validation import Interval, Options, ParamsValidationMixin
from trustlab._validation import check_numeric_array, make_generator
from trustlab.errors import DataError, NotFittedError
from trustlab.unlearning._memory_index import (
    FaissIndex,
    NumpyFlatIndex,
    calibrate_ivf,
    default_n_lists,
    faiss_available,
)
from trustlab.unlearning._memory_inputs import check_labels, embed
from trustlab.unlearning._memory_ops import MemoryOpsMixin
from trustlab.unlearning._memory_public_votes import distance_vote, plurality_vote, rank_vote, softmax_vote
from trustlab.unlearning._memory_records import Records, check_ids
from trustlab.unlearning._memory_results import MemoryExplanation, MemoryNeighbour, PruneResult
from trustlab.unlearning._memory_votes import AGGREGATORS, running_vote, vote_weights

__all__ = [
    "KNNMemory",
    "MemoryExplanation",
    "MemoryNeighbour",
    "PruneResult",
    "distance_vote",
    "plurality_vote",
    "rank_vote",
    "softmax_vote",
]


class KNNMemory(MemoryOpsMixin, ParamsValidationMixin, ClassifierMixin, BaseEstimator):
    """Classification by nearest-neighbour retrieval from an editable memory of embeddings.

    ``fit(X, y)`` embeds ``X`` with the frozen ``encoder`` (any callable; none: ``X`` is
    the embedding), L2-normalises it for ``metric="cosine"`` and stores one record
    ``(embedding, label, id, source, weight)`` per row in the index. ``predict`` retrieves
    the ``k`` nearest records (excluded ones skipped and the rest re-ranked) and votes:
    ``score_c = sum_{r < k, y_r = c} w_r * omega(r, d_r)`` with ``omega = 1 / (r + a)``
    for the paper's RankVoting (default, ``a = 2``), ``1`` for Plurality,
    ``exp(-p d)`` for DistanceVoting and ``exp((1 - d) / tau)`` for SoftmaxVoting; ties
    keep the class that reached the top score first.

    Memory operations: :meth:`add` (rows, single samples or a whole new class, no
    training), :meth:`remove` (exact unlearning: the vectors are deleted from the index,
    a removed id is never retrieved again), :meth:`remove_class`, :meth:`prune` (hard:
    exclude records often retrieved for queries of another label; soft: down-weight
    them), :meth:`exclude`/:meth:`include`, :meth:`set_weights`,
    :meth:`set_source_weight`/:meth:`block_source`/:meth:`unblock_source`
    (interventions), :meth:`explain` (the neighbours and their votes),
    :meth:`predict_all_k` (the prediction for every ``k`` in one pass) and
    :meth:`ood_score` (median distance to the neighbours).

    Parameters
    ----------
    encoder : callable, optional
        Maps a batch ``X`` to an array of embeddings ``(n, dim)``; frozen (never fitted
        here). None: ``X`` is numeric and is the embedding.
    k : int, default 20
        Neighbours that vote (clipped to the number of records).
    aggregator : {"rank", "plurality", "distance", "softmax"}, default "rank"
        The voting rule.
    metric : {"cosine", "euclidean"}, default "cosine"
        ``"cosine"``: embeddings are L2-normalised and ``d = 1 - <q, v>``;
        ``"euclidean"``: raw embeddings and the Euclidean distance.
    index : {"flat", "ivf"}, default "flat"
        ``"flat"``: exact search; ``"ivf"``: FAISS ``IndexIVFFlat`` (approximate, for
        large memories; trained on the rows given to ``fit``; needs faiss).
    backend : {"auto", "faiss", "numpy"}, default "auto"
        ``"auto"``: faiss when it is installed, else the exact NumPy index.
    rank_offset : float, default 2.0
        ``a`` of RankVoting (at least 0.1).
    rank_exponent : float, default 1.0
        ``p`` of RankVoting's ``(r + a) ** -p``.
    temperature : float, default 0.07
        ``tau`` of SoftmaxVoting.
    distance_power : float, default 1.0
        ``p`` of DistanceVoting.
    n_lists : int, optional
        IVF lists (default ``min(4 sqrt(n), n / 39)``).
    n_probe : int or "auto", default "auto"
        IVF lists searched per query. ``"auto"``: the fewest of 1, 2, 4, ... lists whose
        recall@k, measured at ``fit`` on up to 200 rows of the memory as queries, reaches
        ``target_recall`` (a fixed 8 of 494 lists gave recall@10 0.81 on MiniLM embeddings
        of 19,295 texts). The reached recall is ``recall_``.
    target_recall : float in (0, 1], default 0.95
        The recall@k that ``n_probe="auto"`` aims at.
    random_state : None, int or numpy.random.Generator
        Drives only the choice of IVF training rows.

    Attributes
    ----------
    classes_ : numpy.ndarray
        Every label ever added (a class whose records were all removed keeps its
        column in ``predict_proba``, with probability 0).
    n_features_in_ : int
        Columns of ``X`` when ``encoder`` is None.
    dim_ : int
        Embedding dimension.
    backend_ : str
        ``"faiss"`` or ``"numpy"``.
    n_probe_ : int or None
        IVF: the lists searched per query (chosen or given); None for a flat index.
    recall_ : float
        Recall@k of the index measured at ``fit`` (rows of the memory as queries, each
        against the others; a neighbour counts when it is at most the exact k-th
        distance away): 1.0 for a flat index. Not re-measured after ``add``/``remove``.

    References
    ----------
    R. Geirhos, P. Jaini, A. Stone, S. Medapati, X. Yi, G. Toderici, A. Ogale and
    J. Shlens. "Towards flexible perception with visual memory". ICML 2025 (PMLR 267).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> memory = KNNMemory(k=3, backend="numpy").fit(X, ["a", "a", "b", "b"], ids=[10, 11, 12, 13])
    >>> memory.predict([[0.2, 0.8]]).tolist()
    ['b']
    >>> memory.remove([12, 13]).predict([[0.2, 0.8]]).tolist()
    ['a']
    """

    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "encoder": [None, callable],
        "k": [Interval(numbers.Integral, 1, None, closed="left")],
        "aggregator": [Options(AGGREGATORS)],
        "metric": [Options({"cosine", "euclidean"})],
        "index": [Options({"flat", "ivf"})],
        "backend": [Options({"auto", "faiss", "numpy"})],
        "rank_offset": [Interval(numbers.Real, 0.1, None, closed="left")],
        "rank_exponent": [Interval(numbers.Real, 0, None, closed="neither")],
        "temperature": [Interval(numbers.Real, 0, None, closed="neither")],
        "distance_power": [Interval(numbers.Real, 0, None, closed="left")],
        "n_lists": [None, Interval(numbers.Integral, 1, None, closed="left")],
        "n_probe": [Options({"auto"}), Interval(numbers.Integral, 1, None, closed="left")],
        "target_recall": [Interval(numbers.Real, 0, 1, closed="right")],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        encoder: Any = None,
        *,
        k: int = 20,
        aggregator: str = "rank",
        metric: str = "cosine",
        index: str = "flat",
        backend: str = "auto",
        rank_offset: float = 2.0,
        rank_exponent: float = 1.0,
        temperature: float = 0.07,
        distance_power: float = 1.0,
        n_lists: int | None = None,
        n_probe: int | str = "auto",
        target_recall: float = 0.95,
        random_state: Any = None,
    ) -> None:
        self.encoder = encoder
        self.k = k
        self.aggregator = aggregator
        self.metric = metric
        self.index = index
        self.backend = backend
        self.rank_offset = rank_offset
        self.rank_exponent = rank_exponent
        self.temperature = temperature
        self.distance_power = distance_power
        self.n_lists = n_lists
        self.n_probe = n_probe
        self.target_recall = target_recall
        self.random_state = random_state

    # ------------------------------------------------------------------ inputs
    def _embed(self, X: Any, *, reset: bool) -> np.ndarray:
        return embed(self, X, reset=reset)

    def _labels(self, y: Any, n: int) -> np.ndarray:
        return check_labels(y, n)

    def _check_fitted(self) -> None:
        if not hasattr(self, "_records"):
            raise NotFittedError("this KNNMemory is not fitted yet; call fit(X, y) first.", argument="self")

    # ------------------------------------------------------------------ building
    def fit(self, X: Any, y: Any, *, ids: Any = None, sources: Any = None, weights: Any = None) -> KNNMemory:
        """Build the memory from scratch: one record per row of ``X``.

        Parameters
        ----------
        X : array-like or whatever ``encoder`` takes
            The rows to store.
        y : array-like of shape (n,)
            Their labels.
        ids : array-like of int, optional
            Unique int64 record ids (default ``0..n-1``).
        sources : array-like of shape (n,), optional
            Each row's source (any hashable: a file, a contributor), for interventions.
        weights : array-like of shape (n,), optional
            Non-negative record weights (default 1).

        Returns
        -------
        KNNMemory
            ``self``.
        """
        self._validate_params()
        emb = self._embed(X, reset=True)
        labels = self._labels(y, emb.shape[0])
        try:
            self.classes_ = np.unique(labels)
        except TypeError:
            raise DataError("y's labels must be mutually comparable.", argument="y") from None
        self.dim_ = emb.shape[1]
        use_faiss = (
            self.backend == "faiss" or self.index == "ivf" or (self.backend == "auto" and faiss_available())
        )
        if self.backend == "numpy" and self.index == "ivf":
            raise DataError(
                "index='ivf' needs backend='faiss' (or 'auto'); the NumPy index is flat.", argument="index"
            )
        if use_faiss:
            n_lists = None
            if self.index == "ivf":
                n_lists = self.n_lists or default_n_lists(emb.shape[0])
                if emb.shape[0] < n_lists:
                    raise DataError(
                        f"index='ivf' trains {n_lists} lists but X has {emb.shape[0]} rows; give more rows "
                        "or a smaller n_lists (or use index='flat').",
                        argument="n_lists",
                    )
            fixed = None if self.n_probe == "auto" else int(self.n_probe)
            store: Any = FaissIndex(self.dim_, self.metric, self.index, n_lists, fixed or 1)
            if self.index == "ivf":
                rng = make_generator(self.random_state)
                n_train = min(emb.shape[0], 64 * int(n_lists or 1))
                rows = np.sort(rng.choice(emb.shape[0], n_train, replace=False))
                store.train(emb[rows])
        else:
            store = NumpyFlatIndex(self.dim_, self.metric)
        self.backend_ = store.backend
        self._store = store
        self._records = Records()
        self._source_values: list[Any] = []
        self._source_codes: dict[Any, int] = {}
        self._source_weight = np.ones(0)
        self._source_blocked = np.zeros(0, dtype=bool)
        self._insert(emb, labels, ids, sources, weights)
        self.n_probe_, self.recall_ = None, 1.0
        if self.index == "ivf":  # fresh records: keys 0..n-1 in row order
            self.n_probe_, self.recall_ = calibrate_ivf(
                store, emb, int(self.k), fixed, float(self.target_recall), rng
            )
        return self

    def add(self, X: Any, y: Any, *, ids: Any = None, sources: Any = None, weights: Any = None) -> KNNMemory:
        """Add records: single samples, many rows or a whole new class, without any training.

        Parameters
        ----------
        X : array-like or whatever ``encoder`` takes
            The rows to add (a single sample as one row).
        y : array-like of shape (n,)
            Their labels; new labels become new classes.
        ids : array-like of int, optional
            Unique ids not already in the memory (default: consecutive ids after the
            largest id ever used; removed ids may be added again).
        sources : array-like of shape (n,), optional
            Each row's source.
        weights : array-like of shape (n,), optional
            Non-negative record weights.

        Returns
        -------
        KNNMemory
            ``self`` (an unfitted memory is fitted).
        """
        if not hasattr(self, "_records"):
            return self.fit(X, y, ids=ids, sources=sources, weights=weights)
        emb = self._embed(X, reset=False)
        labels = self._labels(y, emb.shape[0])
        try:
            classes = np.unique(np.concatenate([self.classes_, labels]))
        except TypeError:
            raise DataError(
                "y's labels must be comparable with the memory's classes_.", argument="y"
            ) from None
        if classes.size != self.classes_.size:
            recode = np.searchsorted(classes, self.classes_)
            live = self._records.live_keys()
            self._records.set(live, labels=recode[self._records.labels[live]])
            self.classes_ = classes
        self._insert(emb, labels, ids, sources, weights)
        return self

    def _insert(self, emb: np.ndarray, labels: np.ndarray, ids: Any, sources: Any, weights: Any) -> None:
        n = emb.shape[0]
        rec = self._records
        if ids is None:
            id_arr = np.arange(rec.next_id, rec.next_id + n, dtype=np.int64)
        else:
            id_arr = check_ids(ids, n)
            present = rec.contains(id_arr)
            if np.any(present):
                shown = ", ".join(str(int(i)) for i in id_arr[present][:10])
                raise DataError(
                    f"ids already in the memory: {shown}; remove them first or pick new ids.", argument="ids"
                )
        w = np.ones(n)
        if weights is not None:
            w = check_numeric_array(weights, "weights", ndim=1)
            if w.shape[0] != n or np.any(w < 0):
                raise DataError(f"weights must be {n} non-negative numbers.", argument="weights")
        src = np.full(n, -1, dtype=np.int64)
        if sources is not None:
            src_list = (
                list(np.asarray(sources, dtype=object).ravel()) if not isinstance(sources, str) else None
            )
            if src_list is None or len(src_list) != n:
                raise DataError(f"sources must hold {n} values (one per row of X).", argument="sources")
            try:
                src = np.array([self._source_code(s) for s in src_list], dtype=np.int64)
            except TypeError:
                raise DataError(
                    "sources must be hashable values (strings, ints).", argument="sources"
                ) from None
        codes = np.searchsorted(self.classes_, labels)
        keys = rec.new_keys(n)
        rec.set(keys, ids=id_arr, labels=codes, sources=src, weights=w, alive=True)
        self._store.add(emb, keys)
        if n:
            rec.next_id = max(rec.next_id, int(id_arr.max()) + 1)

    def _source_code(self, source: Any) -> int:
        if source is None:
            return -1
        code = self._source_codes.get(source)
        if code is None:
            code = len(self._source_values)
            self._source_codes[source] = code
            self._source_values.append(source)
            self._source_weight = np.r_[self._source_weight, 1.0]
            self._source_blocked = np.r_[self._source_blocked, False]
        return code

    # ------------------------------------------------------------------ retrieval
    def _retrieve(self, emb: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The ``k`` records that vote: (distances, keys, used mask, exclusions-ignored per row)."""
        rec = self._records
        n_live = self._store.ntotal
        if n_live == 0:
            raise DataError(
                "the memory is empty (every record was removed); add records first.", argument="X"
            )
        blocked = rec.excluded | rec.pruned
        if self._source_blocked.any():
            src = rec.sources
            blocked = blocked | ((src >= 0) & self._source_blocked[np.maximum(src, 0)])
        n_blocked = int(np.count_nonzero(blocked & rec.alive))
        k_eff = min(k, n_live)
        dist, keys = self._store.search(emb, min(n_live, k_eff + n_blocked))
        valid = keys >= 0
        ok = valid & ~blocked[np.where(valid, keys, 0)]
        ignored = ~ok.any(axis=1)
        use = np.where(ignored[:, None], valid, ok)
        order = np.argsort(~use, axis=1, kind="stable")[:, :k_eff]
        return (
            np.take_along_axis(dist, order, axis=1),
            np.take_along_axis(keys, order, axis=1),
            np.take_along_axis(use, order, axis=1),
            ignored,
        )

    def _votes(
        self, X: Any, k: int | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        self._check_fitted()
        if k is None:
            k = int(self.k)
        emb = self._embed(X, reset=False)
        dist, keys, used, _ = self._retrieve(emb, k)
        rec = self._records
        safe = np.where(used, keys, 0)
        codes = np.where(used, rec.labels[safe], np.where(used[:, :1], rec.labels[safe[:, :1]], 0))
        src = rec.sources[safe]
        w = rec.weights[safe] * rec.prune_weights[safe]
        if self._source_weight.size:
            w = w * np.where(src >= 0, self._source_weight[np.maximum(src, 0)], 1.0)
        omega = vote_weights(
            self.aggregator,
            np.where(used, dist, 0.0),
            offset=float(self.rank_offset),
            exponent=float(self.rank_exponent),
            temperature=float(self.temperature),
            power=float(self.distance_power),
        )
        votes = np.where(used, omega * w, 0.0)
        return dist, keys, used, votes, codes

    def predict_all_k(self, X: Any, k_max: int | None = None) -> np.ndarray:
        """Predictions for every ``k = 1..k_max`` in one pass of running sums.

        Parameters
        ----------
        X : array-like
            Queries.
        k_max : int, optional
            Largest ``k`` (default ``self.k``; clipped to the number of records).

        Returns
        -------
        numpy.ndarray of shape (n_queries, k_max)
            Column ``k - 1`` is the prediction with ``k`` neighbours.
        """
        if k_max is not None:
            Interval(numbers.Integral, 1, None, closed="left").is_satisfied_by(k_max) or _bad_k(
                k_max, "k_max"
            )
        _, _, _, votes, codes = self._votes(X, k_max)
        predictions, _ = running_vote(codes, votes, self.classes_.size)
        return self.classes_[predictions]

    def predict(self, X: Any) -> np.ndarray:
        """Predict the label of each query by the vote of its ``k`` nearest records.

        Parameters
        ----------
        X : array-like
            Queries.

        Returns
        -------
        numpy.ndarray of shape (n_queries,)
            Predicted labels.
        """
        return self.predict_all_k(X)[:, -1]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class scores of the vote, normalised to sum to 1 (uniform when every vote is 0).

        Parameters
        ----------
        X : array-like
            Queries.

        Returns
        -------
        numpy.ndarray of shape (n_queries, n_classes)
            Columns in the order of ``classes_``.
        """
        _, _, _, votes, codes = self._votes(X, None)
        _, scores = running_vote(codes, votes, self.classes_.size)
        total = scores.sum(axis=1, keepdims=True)
        return np.where(total > 0, scores / np.where(total > 0, total, 1.0), 1.0 / self.classes_.size)

    def kneighbors(self, X: Any, n_neighbors: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The records that vote for each query: distances and ids, nearest first.

        Parameters
        ----------
        X : array-like
            Queries.
        n_neighbors : int, optional
            Neighbours (default ``self.k``, clipped to the number of records).

        Returns
        -------
        distances : numpy.ndarray of shape (n_queries, n_neighbors)
            Distances (``inf`` where fewer records were found).
        ids : numpy.ndarray of shape (n_queries, n_neighbors)
            Record ids (``-1`` where fewer records were found).
        """
        if n_neighbors is not None:
            Interval(numbers.Integral, 1, None, closed="left").is_satisfied_by(n_neighbors) or _bad_k(
                n_neighbors, "n_neighbors"
            )
        dist, keys, used, _, _ = self._votes(X, n_neighbors)
        ids = np.where(used, self._records.ids[np.where(used, keys, 0)], -1)
        return np.where(used, dist, np.inf), ids

    def explain(self, X: Any, k: int | None = None) -> tuple[MemoryExplanation, ...]:
        """Explain each prediction: the records that voted, their labels, sources and votes.

        Parameters
        ----------
        X : array-like
            Queries.
        k : int, optional
            Neighbours (default ``self.k``).

        Returns
        -------
        tuple of MemoryExplanation
            One per query.
        """
        if k is not None:
            Interval(numbers.Integral, 1, None, closed="left").is_satisfied_by(k) or _bad_k(k, "k")
        self._check_fitted()
        emb = self._embed(X, reset=False)
        _, _, _, ignored = self._retrieve(emb, int(self.k) if k is None else k)
        dist, keys, used, votes, codes = self._votes(X, k)
        predictions, scores = running_vote(codes, votes, self.classes_.size)
        rec = self._records
        out = []
        for q in range(keys.shape[0]):
            neighbours = []
            for r in np.flatnonzero(used[q]):
                key = int(keys[q, r])
                src = int(rec.sources[key])
                weight = float(rec.weights[key] * rec.prune_weights[key])
                if src >= 0:
                    weight *= float(self._source_weight[src])
                neighbours.append(
                    MemoryNeighbour(
                        id=int(rec.ids[key]),
                        label=self.classes_[rec.labels[key]].item(),
                        source=self._source_values[src] if src >= 0 else None,
                        rank=int(r),
                        distance=float(dist[q, r]),
                        weight=weight,
                        vote=float(votes[q, r]),
                    )
                )
            label_scores = {
                self.classes_[c].item(): float(scores[q, c]) for c in np.flatnonzero(scores[q] > 0)
            }
            out.append(
                MemoryExplanation(
                    prediction=self.classes_[predictions[q, -1]].item(),
                    scores=label_scores,
                    neighbours=tuple(neighbours),
                    exclusions_ignored=bool(ignored[q]),
                )
            )
        return tuple(out)

    def ood_score(self, X: Any, k: int | None = None) -> np.ndarray:
        """Median distance to the ``k`` nearest records: larger for out-of-distribution queries.

        Parameters
        ----------
        X : array-like
            Queries.
        k : int, optional
            Neighbours (default ``self.k``).

        Returns
        -------
        numpy.ndarray of shape (n_queries,)
            The median neighbour distance of each query.
        """
        dist, _ = self.kneighbors(X, k)
        return np.asarray(np.median(np.where(np.isfinite(dist), dist, np.nan), axis=1))


def _bad_k(value: Any, name: str) -> bool:
    from trustlab.errors import ParameterError

    raise ParameterError(f"{name} must be an int >= 1; got {value!r}.", argument=name)
