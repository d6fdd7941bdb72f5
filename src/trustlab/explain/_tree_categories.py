"""Native categorical splits of tree ensembles: category bins per feature, as each library makes them.

See :mod:`trustlab.explain._trees` for the semantics (HistGradientBoosting's bitsets and
its internal ``OrdinalEncoder``, LightGBM's and XGBoost's category lists).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from trustlab.errors import ModelError

if TYPE_CHECKING:
    from trustlab.explain._tree_arrays import TreeArrays

__all__ = [
    "categorical_widths",
    "encoder_hist",
    "encoder_lightgbm",
    "encoder_xgboost",
    "hist_layout",
    "pad_categories",
    "unpack_bitset",
]


def unpack_bitset(words: np.ndarray) -> np.ndarray:
    """scikit-learn's 8 x uint32 bitset as 256 booleans (bit ``v`` = category ``v``)."""
    v = np.arange(256)
    return ((np.asarray(words, dtype=np.uint32)[v // 32] >> (v % 32).astype(np.uint32)) & 1).astype(bool)


def pad_categories(trees: list[TreeArrays], *, other_left: bool) -> list[TreeArrays]:
    """Give every categorical split of a feature the same bins: ``0..C-1`` plus OTHER.

    ``C`` is one more than the largest category any split of the feature lists; the
    last bin (OTHER) holds negative and larger values, which go left when
    ``other_left`` (XGBoost: unlisted values go left) and right otherwise
    (LightGBM: unlisted values go right).
    """
    width: dict[int, int] = {}
    for t in trees:
        for node, mask in t.cat_left.items():
            f = int(t.feature[node])
            width[f] = max(width.get(f, 0), len(mask) + 1)
    for t in trees:
        for node, mask in list(t.cat_left.items()):
            w = width[int(t.feature[node])]
            full = np.full(w, other_left, dtype=bool)
            full[: len(mask)] = mask
            t.cat_left[node] = full
    return trees


def categorical_widths(trees: tuple[TreeArrays, ...] | list[TreeArrays]) -> dict[int, int]:
    """Feature -> number of category bins; reject features split both ways."""
    width: dict[int, int] = {}
    numeric: set[int] = set()
    for t in trees:
        internal = np.nonzero(t.left != -1)[0]
        for node in internal:
            f = int(t.feature[node])
            if int(node) in t.cat_left:
                width[f] = max(width.get(f, 0), len(t.cat_left[int(node)]))
            else:
                numeric.add(f)
    both = sorted(set(width) & numeric)
    if both:
        raise ModelError(
            f"feature(s) {both[:10]} have both numerical and categorical splits; FastPD "
            "supports a feature being one or the other.",
            argument="model",
        )
    return width


def trunc_bins(col: np.ndarray, width: int, valid: np.ndarray) -> np.ndarray:
    """Truncate ``valid`` values to integer categories; NaN -> -1; the rest -> OTHER."""
    out = np.full(len(col), width - 1, dtype=np.int32)
    with np.errstate(invalid="ignore"):
        ok = valid & (col < width - 1)
    out[ok] = np.trunc(col[ok]).astype(np.int32)
    out[np.isnan(col)] = -1
    return out


def encoder_xgboost(widths: dict[int, int]) -> Callable[[int, np.ndarray], np.ndarray]:
    def encode(f: int, col: np.ndarray) -> np.ndarray:
        # float32 value; a negative value is an invalid category and goes left
        col = np.asarray(col, dtype=np.float32).astype(np.float64)
        with np.errstate(invalid="ignore"):
            return trunc_bins(col, widths[f], col >= 0)

    return encode


def encoder_lightgbm(widths: dict[int, int]) -> Callable[[int, np.ndarray], np.ndarray]:
    def encode(f: int, col: np.ndarray) -> np.ndarray:
        # cast to int first (-0.5 -> 0), so only values <= -1 are negative (go right)
        col = np.asarray(col, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return trunc_bins(col, widths[f], col > -1)

    return encode


def hist_layout(model: Any) -> tuple[np.ndarray, dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Internal column -> input column of a HistGradientBoosting model, and categories.

    With categorical features, scikit-learn (>= 1.4) puts an internal
    ``OrdinalEncoder`` in front of the trees: categorical columns first (coded
    0..K-1 in sorted order of their values, unseen or missing values as NaN), then
    the numerical ones. Returns the input column of each internal column; per
    numeric categorical input column, its sorted known values (empty without an
    encoder, or for non-numeric categories: the input is then the code itself);
    and per non-numeric categorical input column (strings, pandas ``category``
    columns of strings), its known values in code order (missing value excluded).
    """
    n = int(model.n_features_in_)
    pre = getattr(model, "_preprocessor", None)
    if pre is None:
        is_cat = getattr(model, "is_categorical_", None)
        cats: dict[int, np.ndarray] = (
            {} if is_cat is None else {int(f): np.empty(0) for f in np.nonzero(is_cat)[0]}
        )
        return np.arange(n), cats, {}
    is_cat = np.asarray(model.is_categorical_, dtype=bool)
    order = np.concatenate([np.nonzero(is_cat)[0], np.nonzero(~is_cat)[0]])
    encoder = pre.named_transformers_["encoder"]
    cats = {}
    strings: dict[int, np.ndarray] = {}
    for f, values in zip(np.nonzero(is_cat)[0], encoder.categories_, strict=True):
        values = np.asarray(values)
        if values.dtype.kind not in "biuf":
            # OrdinalEncoder puts a missing value (NaN / None) last; it is encoded as NaN
            known = [v for v in values.tolist() if not is_missing(v)]
            strings[int(f)] = np.asarray(known, dtype=object)
            cats[int(f)] = np.empty(0)
            continue
        cats[int(f)] = values.astype(np.float64)
    return order.astype(np.int64), cats, strings


def is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and v != v) or type(v).__name__ in ("NAType", "NaTType")


def encoder_hist(model: Any) -> Callable[[int, np.ndarray], np.ndarray]:
    known_words, f_idx_map = model._bin_mapper.make_known_categories_bitsets()
    to_input, cats, _ = hist_layout(model)
    internal = np.empty(len(to_input), dtype=np.int64)
    internal[to_input] = np.arange(len(to_input))

    def encode(f: int, col: np.ndarray) -> np.ndarray:
        col = np.asarray(col, dtype=np.float64)
        values = cats.get(f)
        if values is not None and len(values):
            # the model's own OrdinalEncoder: exact match to a known value, else NaN
            pos = np.clip(np.searchsorted(values, col), 0, len(values) - 1)
            col = np.where(values[pos] == col, pos.astype(np.float64), np.nan)
        known = unpack_bitset(known_words[int(f_idx_map[internal[f]])])
        out = np.full(len(col), -1, dtype=np.int32)
        with np.errstate(invalid="ignore"):
            ok = (col >= 0) & (col < 256)
        v = np.trunc(col[ok]).astype(np.int32)
        out[ok] = np.where(known[v], v, -1)  # unseen categories take the missing route
        return out

    return encode
