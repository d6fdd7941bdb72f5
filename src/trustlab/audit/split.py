"""The audit's held-out split: each row's side is a keyed hash of that row's own values.

A stratified, seeded shuffle (scikit-learn's ``train_test_split``) decides every
row's side from the whole table: adding one row reshuffles hundreds of others
(measured on Benefits: 238 rows changed side and the prediction histogram that the
private audit charges as sensitivity 1 moved by L1 = 70). Here each row goes to the
held-out side when a keyed hash of its values, read as a number in ``[0, 1)``, is
below ``test_size``. Adding, removing or changing one row anywhere in the table
moves no other row, so a histogram of held-out rows keeps sensitivity 1.

The hash reads the row's *values*, not its position (inserting a row shifts every
position after it) and not the column's dtype (one missing value turns an ``int64``
column into ``float64``; one ``"unknown"`` makes it text): every value is
canonicalised on its own first. A value that reads as a number is hashed as that
number in float64 (``40``, ``40.0`` and ``"40"`` hash alike; ``-0.0`` as ``0.0``);
any other value as its text; a missing value as a fixed constant. Identical rows
land on the same side.

The key comes from ``seed``: the split is reproducible and public, like the seed.
It drives only this public choice, never privacy noise.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd
from pandas.util import hash_array

from trustlab._stats import splitmix64 as _mix
from trustlab.datasets._cells import cell_text, safe_key, to_float

__all__ = [
    "DEFAULT_SAMPLE_ROWS",
    "group_split",
    "row_hash",
    "row_split",
    "sample_rate",
    "split_from_hash",
    "split_rows",
    "training_sample",
]

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)
_MISSING = np.uint64(0x9E3779B97F4A7C15)
DEFAULT_SAMPLE_ROWS = 200_000
"""Training rows a model trustlab fits is fitted on (a hash sample of the training side)."""
_SAMPLE_KEY = np.uint64(0x5CA1E)  # the training sample's draw: splitmix64(row hash ^ this)


def _key(seed: Any) -> tuple[str, np.uint64]:
    digest = hashlib.blake2b(repr(int(seed)).encode(), digest_size=24, person=b"trustlab-split").digest()
    text_key = digest[:16].hex()[:16]  # pandas' SipHash wants 16 characters
    return text_key, np.uint64(int.from_bytes(digest[16:], "little"))


def _factorize(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Codes (-1 where missing) and distinct values (object array) of a non-numeric column.

    A categorical column gives its codes and categories as they are, a string column
    is factorised in its own (e.g. Arrow) storage: both without one Python object per
    row. The hash reads ``uniques[codes]`` value by value, so the result does not depend
    on the route (nor on the order of the distinct values).
    """
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy(dtype=np.int64), values.cat.categories.to_numpy(dtype=object)
    if pd.api.types.is_string_dtype(values.dtype) and values.dtype != object:
        arrow_codes, arrow_uniques = pd.factorize(values, use_na_sentinel=True)
        return arrow_codes, np.asarray(arrow_uniques, dtype=object)
    obj = values.astype(object)
    try:
        codes, uniques = pd.factorize(obj.to_numpy(), use_na_sentinel=True)
    except Exception:  # cells that do not hash (lists, Decimal("sNaN")): hash their text
        codes, uniques = pd.factorize(obj.map(safe_key).to_numpy(), use_na_sentinel=True)
    return codes, uniques


def _column_hash(values: pd.Series, text_key: str) -> np.ndarray:
    """Hash each value of a column on its own (the result never depends on the column's dtype)."""
    real = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_complex_dtype(values)
    if real or pd.api.types.is_bool_dtype(values):
        # the same numbers as the object path below gives them: ints and bools as float64
        num = values.to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(num)
        uniques = np.array([], dtype=object)
        codes = np.full(len(values), -1)
    else:
        codes, uniques = _factorize(values)
        # complex cells (and cells pandas cannot read as numbers) hash as their text
        parsed_num = to_float(pd.Series(uniques, dtype=object))
        num = np.where(codes >= 0, parsed_num[np.maximum(codes, 0)] if uniques.size else np.nan, np.nan)
        missing = codes < 0
    is_num = ~np.isnan(num)
    out = np.full(len(values), _MISSING, dtype=np.uint64)
    if is_num.any():
        x = num[is_num] + 0.0  # -0.0 -> 0.0
        out[is_num] = _mix(x.view(np.uint64) ^ np.uint64(0x5555555555555555))
    text = ~is_num & ~missing
    if text.any():  # hash each distinct text once
        strings = np.array([cell_text(v) for v in uniques], dtype=object)
        out[text] = hash_array(strings, hash_key=text_key, categorize=False)[codes[text]]
    return out


def row_hash(data: pd.DataFrame, seed: Any = 0) -> np.ndarray:
    """A keyed 64-bit hash of each row's values (column order matters, row position does not).

    Parameters
    ----------
    data : pandas.DataFrame
        The table; its index is ignored.
    seed : int
        The key (public).

    Returns
    -------
    numpy.ndarray of uint64, one per row.

    Examples
    --------
    >>> import pandas as pd
    >>> a = pd.DataFrame({"age": [40, 50], "sex": ["f", "m"]})
    >>> b = pd.DataFrame({"age": [50.0, None, 40.0], "sex": ["m", "f", "f"]})
    >>> bool(row_hash(a)[0] == row_hash(b)[2]), bool(row_hash(a)[1] == row_hash(b)[0])
    (True, True)
    """
    text_key, word_key = _key(seed)
    h = np.full(len(data), word_key, dtype=np.uint64)
    for j in range(data.shape[1]):
        col = _column_hash(data.iloc[:, j], text_key)
        with np.errstate(over="ignore"):
            h = _mix(h ^ _mix(col + np.uint64(j + 1) * np.uint64(0x9E3779B97F4A7C15)))
    return h


def row_split(data: pd.DataFrame, test_size: float, seed: Any = 0) -> np.ndarray:
    """Boolean mask of held-out rows: row ``i`` is held out when ``u_i < test_size``.

    ``u_i`` is the top 53 bits of :func:`row_hash` read as a number in ``[0, 1)``,
    so each row is held out with probability ``test_size`` over keys, independently
    of every other row, and a row's side depends on that row alone.

    Parameters
    ----------
    data : pandas.DataFrame
        The table (every column enters the row's hash).
    test_size : float
        Share of rows held out, in (0, 1).
    seed : int, default=0
        The key (public).

    Returns
    -------
    numpy.ndarray of bool, shape (n_rows,)
        True for a held-out row.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> df = pd.DataFrame({"x": np.arange(10_000)})
    >>> mask = row_split(df, 0.3, seed=0)
    >>> bool(0.28 < mask.mean() < 0.32)
    True
    >>> bool((row_split(df.iloc[::-1], 0.3, seed=0)[::-1] == mask).all())  # order does not matter
    True
    """
    return split_from_hash(row_hash(data, seed), test_size)


def split_rows(data: pd.DataFrame, test_size: float, seed: Any = 0) -> tuple[np.ndarray, np.ndarray]:
    """:func:`row_split`'s mask and the :func:`row_hash` it read (for :func:`training_sample`).

    Parameters
    ----------
    data : pandas.DataFrame
        The table.
    test_size : float
        Share of rows held out.
    seed : int
        The key (public).

    Returns
    -------
    (numpy.ndarray of bool, numpy.ndarray of uint64)
        The held-out mask and each row's hash.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"x": range(100)})
    >>> mask, h = split_rows(df, 0.3, 1)
    >>> bool((mask == row_split(df, 0.3, 1)).all()), bool((h == row_hash(df, 1)).all())
    (True, True)
    """
    h = row_hash(data, seed)
    return split_from_hash(h, test_size), h


def _unit(h: np.ndarray) -> np.ndarray:
    """The top 53 bits of each hash as a number in ``[0, 1)``."""
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53


def split_from_hash(h: np.ndarray, test_size: float) -> np.ndarray:
    """The held-out mask of :func:`row_split` from the rows' :func:`row_hash` (computed once).

    Parameters
    ----------
    h : numpy.ndarray of uint64
        :func:`row_hash` of the rows, with the split's seed.
    test_size : float
        Share of rows held out.

    Returns
    -------
    numpy.ndarray of bool
        True where the row is held out.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"x": range(1000)})
    >>> bool((split_from_hash(row_hash(df, 3), 0.3) == row_split(df, 0.3, 3)).all())
    True
    """
    return _unit(h) < float(test_size)


def sample_rate(sample_rows: int | None, rows: float, test_size: float) -> float:
    """The rate that keeps about ``sample_rows`` of the training side of ``rows`` rows (at most 1).

    Parameters
    ----------
    sample_rows : int or None
        The wanted number of training rows; None keeps them all.
    rows : float
        The table's row count (the training side is ``rows * (1 - test_size)``).
    test_size : float
        Share of rows held out.

    Returns
    -------
    float
        The rate in ``(0, 1]`` that :func:`training_sample` compares each row's hash with.

    Examples
    --------
    >>> sample_rate(200_000, 1_000_000, 0.3), sample_rate(None, 10, 0.3), sample_rate(500, 100, 0.3)
    (0.2857142857142857, 1.0, 1.0)
    """
    if sample_rows is None:
        return 1.0
    return min(1.0, sample_rows / max(1.0, rows * (1.0 - float(test_size))))


def training_sample(h: np.ndarray, rate: float) -> np.ndarray:
    """Which rows a model fitted on a sample keeps: an independent keyed hash of each row below ``rate``.

    The draw is ``splitmix64(h ^ K)`` for the row's split hash ``h`` and a fixed
    constant ``K``: a function of the row's values alone, independent of the split's
    top bits, so the same rows are kept on any partitioning (in process or on Dask)
    and adding a row changes no other row's draw.

    Parameters
    ----------
    h : numpy.ndarray of uint64
        :func:`row_hash` of the rows, with the split's seed.
    rate : float
        Share of rows kept (:func:`sample_rate`).

    Returns
    -------
    numpy.ndarray of bool

    Examples
    --------
    >>> import pandas as pd
    >>> h = row_hash(pd.DataFrame({"x": range(10_000)}), 0)
    >>> bool(0.18 < training_sample(h, 0.2).mean() < 0.22), bool(training_sample(h, 1.0).all())
    (True, True)
    """
    return _unit(_mix(h ^ _SAMPLE_KEY)) < float(rate)


def group_split(data: pd.DataFrame, group: Any, test_size: float, seed: Any = 0) -> np.ndarray:
    """Held-out mask that keeps every entity on one side: the keyed hash of the ``group`` value alone.

    :func:`row_hash` of the one-column frame ``data[[group]]`` decides the side
    (:func:`split_from_hash`), so all rows of one entity (a person observed in several
    years) are held out together or trained on together, and held-out figures measure
    the model on entities it has not seen. About ``test_size`` of the entities (not
    exactly of the rows) are held out. Rows with a missing group value share one side.

    Parameters
    ----------
    data : pandas.DataFrame
        The table.
    group : str
        The entity column.
    test_size : float
        Share of entities held out.
    seed : int
        The key (public).

    Returns
    -------
    numpy.ndarray of bool
        True where the row is held out.

    References
    ----------
    Roberts et al. "Cross-validation strategies for data with temporal, spatial,
    hierarchical, or phylogenetic structure." Ecography 40(8), 2017.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"person": [p for p in range(100) for _ in range(4)], "x": range(400)})
    >>> held = group_split(df, "person", 0.3, seed=0)
    >>> bool(pd.Series(held).groupby(df["person"]).nunique().max() == 1)  # one side per person
    True
    """
    return split_from_hash(row_hash(data[[group]], seed), test_size)
