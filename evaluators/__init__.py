"""evaluators."""
