"""trustlab.evaluation: model-similarity metrics (CAPA, error consistency); see docs/catalog.md."""

from trustlab.evaluation.similarity import capa, capa_matrix, error_consistency

__all__: list[str] = ["capa", "capa_matrix", "error_consistency"]
