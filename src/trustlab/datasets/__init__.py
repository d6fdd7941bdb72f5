"""Datasets: the default data, the shipped Cora graph, loaders for the user's files, public schemas."""

from trustlab.datasets.default import DEFAULT, DatasetInfo, load_benefits, load_default
from trustlab.datasets.draft import draft_schema
from trustlab.datasets.graphs import GraphDataset, load_cora
from trustlab.datasets.loaders import load_table
from trustlab.datasets.schema import ColumnSpec, Schema

__all__ = [
    "DEFAULT",
    "ColumnSpec",
    "DatasetInfo",
    "GraphDataset",
    "Schema",
    "draft_schema",
    "load_benefits",
    "load_cora",
    "load_default",
    "load_table",
]
