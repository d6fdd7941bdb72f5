"""Datasets: the embedded default data, loaders for the user's files, public schemas."""

from trustlab.datasets.default import DEFAULT, DatasetInfo, load_benefits, load_default
from trustlab.datasets.draft import draft_schema
from trustlab.datasets.loaders import load_table
from trustlab.datasets.schema import ColumnSpec, Schema

__all__ = [
    "DEFAULT",
    "ColumnSpec",
    "DatasetInfo",
    "Schema",
    "draft_schema",
    "load_benefits",
    "load_default",
    "load_table",
]
