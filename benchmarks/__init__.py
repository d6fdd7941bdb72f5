"""Side-by-side benchmarks of trustlab against peer libraries.

Each benchmark is a module ``benchmarks/<name>.py`` exposing
``run(quick: bool = False) -> dict`` that returns
``{"title": str, "rows": [dict, ...], "notes": [str, ...]}``; each row is one
configuration with trustlab's and the peer's median times, their ratio and the
agreement figure. ``python -m benchmarks NAME`` prints the rows as a table and
saves the dict to ``benchmarks/results/NAME.json``.
"""
