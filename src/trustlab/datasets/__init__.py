"""Datasets: the default data, shipped Cora, CiteSeer and MUTAG graphs, loaders for user files, schemas."""

from trustlab.datasets.default import DEFAULT, DatasetInfo, load_benefits, load_default
from trustlab.datasets.draft import draft_schema
from trustlab.datasets.graphs import GraphDataset, load_citeseer, load_cora, load_planetoid
from trustlab.datasets.loaders import load_table
from trustlab.datasets.molecules import MoleculeDataset, load_mutag
from trustlab.datasets.schema import ColumnSpec, Schema

__all__ = [
    "DEFAULT",
    "ColumnSpec",
    "DatasetInfo",
    "GraphDataset",
    "MoleculeDataset",
    "Schema",
    "draft_schema",
    "load_benefits",
    "load_citeseer",
    "load_cora",
    "load_default",
    "load_mutag",
    "load_planetoid",
    "load_table",
]
