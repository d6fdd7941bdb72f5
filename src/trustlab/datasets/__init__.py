"""Datasets: the default data, shipped Cora and CiteSeer graphs, loaders for user files, public schemas."""

from trustlab.datasets.default import DEFAULT, DatasetInfo, load_benefits, load_default
from trustlab.datasets.draft import draft_schema
from trustlab.datasets.graphs import GraphDataset, load_citeseer, load_cora, load_planetoid
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
    "load_citeseer",
    "load_cora",
    "load_default",
    "load_planetoid",
    "load_table",
]
