"""harness/backends."""
