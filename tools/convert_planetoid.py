"""Convert Planetoid's Cora pickles into the shipped ``src/trustlab/datasets/cora.npz``.

A dev-time script, run once; the library never reads a pickle. The source is the
Planetoid repository (https://github.com/kimiyoung/planetoid, MIT licence, Copyright (c)
2016 Zhilin Yang), files ``data/ind.cora.{x,y,tx,ty,allx,ally,graph,test.index}``: Python-2
pickles of scipy sparse matrices, numpy arrays and a dict of adjacency lists.

What it does, as the standard loader (Kipf and Welling's ``gcn/utils.py``) does:

- features = ``vstack(allx, tx)`` and labels = ``vstack(ally, ty)``, then the rows of
  ``tx``/``ty`` are moved to the node ids listed in ``test.index``
  (``features[test_index] = features[sorted(test_index)]``);
- the public split: train = nodes 0..139 (``x``), val = nodes 140..639, test = the 1,000
  ids of ``test.index``;
- the graph: the dict of lists, symmetrised (an undirected citation graph); the 302
  repeated entries of the lists are counted once and self-loops (none in Cora) are dropped.

The npz holds plain arrays only (loads with ``allow_pickle=False``): the undirected edges
once each as ``edge_row < edge_col`` (int16), the binary features as CSR ``feat_indptr``
(int32) and ``feat_indices`` (int16), ``labels`` (int8), the split ids (int16).

Usage::

    python tools/convert_planetoid.py                     # from the local mirror
    python tools/convert_planetoid.py --data DIR          # from a folder of ind.cora.* files
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
OUT = ROOT / "src" / "trustlab" / "datasets" / "cora.npz"
PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph", "test.index")


def _read(name: str, data: Path | None) -> bytes:
    if data is not None:
        return (data / f"ind.cora.{name}").read_bytes()
    cmd = ["git", f"--git-dir={MIRROR}", "show", f"HEAD:data/ind.cora.{name}"]
    return subprocess.run(cmd, check=True, capture_output=True).stdout


def convert(data: Path | None) -> dict[str, np.ndarray]:
    """Read the pickles and return the arrays written to the npz."""
    obj = {}
    with warnings.catch_warnings():  # the pickles name scipy.sparse.csr (deprecated path)
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in PARTS[:-1]:
            obj[name] = pickle.loads(_read(name, data), encoding="latin1")
    test_index = np.array([int(v) for v in _read("test.index", data).split()])
    test_range = np.sort(test_index)

    feats = sp.vstack([obj["allx"], obj["tx"]]).tolil()
    feats[test_index, :] = feats[test_range, :]
    onehot = np.vstack([obj["ally"], obj["ty"]])
    onehot[test_index, :] = onehot[test_range, :]
    assert (onehot.sum(axis=1) == 1).all(), "every Cora node has exactly one label"
    labels = onehot.argmax(axis=1)

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
    assert set(np.unique(x.data)) == {1.0}, "Cora's features are binary"
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
    parser.add_argument("--data", type=Path, default=None, help="folder of ind.cora.* files")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    arrays = convert(args.data)
    np.savez_compressed(args.out, **arrays)  # type: ignore[arg-type]
    n_edges = arrays["edge_row"].size
    lab = arrays["labels"].astype(int)
    same = float(np.mean(lab[arrays["edge_row"]] == lab[arrays["edge_col"]]))
    print(
        f"{args.out}: {args.out.stat().st_size} bytes; {lab.size} nodes, "
        f"{int(arrays['n_features'])} features, {arrays['feat_indices'].size} ones, "
        f"{n_edges} undirected edges, class sizes {np.bincount(lab).tolist()}, "
        f"edge homophily {same:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
