"""The audit's built-in sections, one module per pillar."""
