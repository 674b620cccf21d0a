"""mutators."""
