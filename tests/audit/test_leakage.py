"""Target leakage and copies of sensitive columns (issue 26 §1.1)."""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd
import pytest

from trustlab.cli import main
from trustlab.datasets import load_table
from trustlab.errors import DataError


def _frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame(
        {
            "x": x,
            "z": rng.uniform(size=n),
            "race": rng.choice(["a", "b", "c"], n),
            "y": np.where(x + rng.normal(size=n) > 0, "yes", "no"),
        }
    )


def test_duplicate_header_is_refused_naming_it(tmp_path):
    df = _frame()
    text = df.assign(y2=df["y"]).to_csv(index=False).replace("y2", "y", 1)
    path = tmp_path / "dup.csv"
    path.write_text(text)
    assert pd.read_csv(path).columns[-1] == "y.1"  # what pandas does silently
    with pytest.raises(DataError, match=r"'y'.*twice|'y'.*more than once") as info:
        load_table(path)
    assert info.value.argument == "data"
    gz = tmp_path / "dup.csv.gz"
    gz.write_bytes(gzip.compress(text.encode()))
    with pytest.raises(DataError, match="'y'"):
        load_table(gz)


def test_duplicate_header_cli_exit_2(tmp_path, capsys):
    df = _frame()
    path = tmp_path / "dup.csv"
    path.write_text(df.assign(r2=df["race"]).to_csv(index=False).replace("r2", "race", 1))
    with pytest.raises(SystemExit) as stop:
        main(["audit", str(path), "--target", "y", "--sensitive", "race", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "race" in err and len(err.strip().splitlines()) == 1
