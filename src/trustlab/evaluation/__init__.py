"""trustlab.evaluation (see docs/catalog.md for what is implemented)."""

__all__: list[str] = []
