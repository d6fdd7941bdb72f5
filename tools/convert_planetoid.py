"""Convert Planetoid's Cora / CiteSeer pickles into ``src/trustlab/datasets/{cora,citeseer}.npz``.

A dev-time script, run once; the library never reads a pickle. The source is the
Planetoid repository (https://github.com/kimiyoung/planetoid, MIT licence, Copyright (c)
2016 Zhilin Yang), files ``data/ind.{cora,citeseer}.{x,y,tx,ty,allx,ally,graph,test.index}``: Python-2
pickles of scipy sparse matrices, numpy arrays and a dict of adjacency lists.

What it does, as the standard loader (Kipf and Welling's ``gcn/utils.py``) does:

- features = ``vstack(allx, tx)`` and labels = ``vstack(ally, ty)``, then the rows of
  ``tx``/``ty`` are moved to the node ids listed in ``test.index``
  (``features[test_index] = features[sorted(test_index)]``);
- the public split: train = nodes 0..139 (``x``), val = nodes 140..639, test = the 1,000
  ids of ``test.index``;
- CiteSeer only: ``test.index`` spans ids 2,312..3,326 but lists 1,000 of those 1,015 ids;
  the 15 others are isolated papers of the citation graph absent from the labelled release
  (3,312 labelled papers). The standard loader extends ``tx``/``ty`` to the full range with
  zero rows; so does this script, so those 15 nodes have no feature (an all-zero row) and no
  label: their label is written as ``-1`` (the standard loader's ``argmax`` would call them
  class 0). They keep their node ids, so the graph and the split match published work;
- the graph: the dict of lists, symmetrised (an undirected citation graph); repeated
  entries (302 in Cora) are counted once and self-loops (none in Cora, 124 in CiteSeer)
  are dropped.

The npz holds plain arrays only (loads with ``allow_pickle=False``): the undirected edges
once each as ``edge_row < edge_col`` (int16), the binary features as CSR ``feat_indptr``
(int32) and ``feat_indices`` (int16), ``labels`` (int8), the split ids (int16).

Usage::

    python tools/convert_planetoid.py                     # Cora, from the local mirror
    python tools/convert_planetoid.py --name citeseer     # CiteSeer
    python tools/convert_planetoid.py --data DIR          # from a folder of ind.<name>.* files
"""

from __future__ import annotations

import argparse
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path("/work/.mirror/kimiyoung+planetoid/repo/.git")
OUT_DIR = ROOT / "src" / "trustlab" / "datasets"
NAMES = ("cora", "citeseer")
PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


def _read(dataset: str, name: str, data: Path | None) -> bytes:
    if data is not None:
        return (data / f"ind.{dataset}.{name}").read_bytes()
    cmd = ["git", f"--git-dir={MIRROR}", "show", f"HEAD:data/ind.{dataset}.{name}"]
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def convert(data: Path | None, dataset: str = "cora") -> dict[str, np.ndarray]:
    """Read the pickles of ``dataset`` and return the arrays written to the npz."""
    obj = {}
    with warnings.catch_warnings():  # the pickles name scipy.sparse.csr (deprecated path)
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in PARTS[:-1]:
            obj[name] = pickle.loads(_read(dataset, name, data), encoding="latin1")
    test_index = np.array([int(v) for v in _read(dataset, "test.index", data).split()])
    test_range = np.sort(test_index)
    tx, ty = obj["tx"], obj["ty"]
    full = np.arange(test_range[0], test_range[-1] + 1)
    if full.size > test_range.size:  # CiteSeer: pad the ids test.index skips with zero rows
        tx_ext = sp.lil_matrix((full.size, tx.shape[1]), dtype=tx.dtype)
        tx_ext[test_range - test_range[0], :] = tx
        ty_ext = np.zeros((full.size, ty.shape[1]), dtype=ty.dtype)
        ty_ext[test_range - test_range[0], :] = ty
        tx, ty = tx_ext.tocsr(), ty_ext

    feats = sp.vstack([obj["allx"], tx]).tolil()
    feats[test_index, :] = feats[test_range, :]
    onehot = np.vstack([obj["ally"], ty])
    onehot[test_index, :] = onehot[test_range, :]
    n_labels = onehot.sum(axis=1)
    assert set(np.unique(n_labels)) <= {0, 1}, "a node has at most one label"
    padded = np.setdiff1d(full, test_range)
    assert np.array_equal(np.flatnonzero(n_labels == 0), padded), "only padded nodes lack a label"
    labels = np.where(n_labels == 1, onehot.argmax(axis=1), -1)

    n = feats.shape[0]
    graph = obj["graph"]
    rows, cols = [], []
    for u, nbrs in graph.items():
        for v in nbrs:
            if u != v:
                rows.append(min(u, v))
                cols.append(max(u, v))
    und = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)).tocsr()
    und.sum_duplicates()
    und = und.tocoo()
    order = np.lexsort((und.col, und.row))

    x = feats.tocsr()
    x.sort_indices()
    assert set(np.unique(x.data)) == {1.0}, "the features are binary"
    return {
        "edge_row": und.row[order].astype(np.int16),
        "edge_col": und.col[order].astype(np.int16),
        "feat_indptr": x.indptr.astype(np.int32),
        "feat_indices": x.indices.astype(np.int16),
        "n_features": np.array(x.shape[1], dtype=np.int32),
        "labels": labels.astype(np.int8),
        "train": np.arange(obj["y"].shape[0], dtype=np.int16),
        "val": np.arange(obj["y"].shape[0], obj["y"].shape[0] + 500, dtype=np.int16),
        "test": test_range.astype(np.int16),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", choices=NAMES, default="cora")
    parser.add_argument("--data", type=Path, default=None, help="folder of ind.<name>.* files")
    parser.add_argument("--out", type=Path, default=None, help="default: the shipped <name>.npz")
    args = parser.parse_args(argv)
    out = args.out or OUT_DIR / f"{args.name}.npz"
    arrays = convert(args.data, args.name)
    np.savez_compressed(out, **arrays)  # type: ignore[arg-type]
    n_edges = arrays["edge_row"].size
    lab = arrays["labels"].astype(int)
    r, c = arrays["edge_row"].astype(int), arrays["edge_col"].astype(int)
    both = (lab[r] >= 0) & (lab[c] >= 0)
    same = float(np.mean(lab[r][both] == lab[c][both]))
    deg = np.bincount(np.concatenate([r, c]), minlength=lab.size)
    print(
        f"{out}: {out.stat().st_size} bytes; {lab.size} nodes ({int(np.sum(lab < 0))} unlabelled), "
        f"{int(arrays['n_features'])} features, {arrays['feat_indices'].size} ones, "
        f"{n_edges} undirected edges, {int(np.sum(deg == 0))} isolated nodes, "
        f"class sizes {np.bincount(lab[lab >= 0]).tolist()}, edge homophily {same:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
