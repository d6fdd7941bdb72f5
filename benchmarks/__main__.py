"""Run one benchmark: ``python -m benchmarks NAME [--quick]``; ``python -m benchmarks`` lists them."""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import platform
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).parent


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)]) if not m.name.startswith("_"))


def _table(title: str, rows: list[dict]) -> Table:
    table = Table(title=title)
    for col in rows[0].keys() if rows else []:
        table.add_column(str(col))
    for row in rows:
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()))
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("name", nargs="?", help="benchmark to run")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = parser.parse_args(argv)
    console = Console()
    if not args.name:
        console.print("benchmarks: " + ", ".join(available()))
        return 0
    if args.name not in available():
        console.print(f"unknown benchmark {args.name!r}; choose from {', '.join(available())}")
        return 2
    module = importlib.import_module(f"benchmarks.{args.name}")
    start = time.perf_counter()
    result = module.run(quick=args.quick)
    result.setdefault("machine", f"{platform.machine()}, {platform.python_version()}")
    result["wall_s"] = round(time.perf_counter() - start, 2)
    result["quick"] = args.quick
    tables = {result.get("title", args.name): result.get("rows", []), **result.get("tables", {})}
    for title, rows in tables.items():
        console.print(_table(title, rows))
    for note in result.get("notes", []):
        console.print(f"- {note}")
    out = HERE / "results" / f"{args.name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str))
    console.print(f"saved {out.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
