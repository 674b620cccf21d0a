"""Shared fixtures: every store (results/, caches, memory, MLflow) points at tmp_path."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_results(tmp_path, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setenv("HARNESS_RESULTS_DIR", str(results))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.delenv("HARNESS_SKIP_PRIOR_KNOWLEDGE", raising=False)
    monkeypatch.delenv("RESEARCH_CACHE", raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    monkeypatch.setenv("DDGS_DISABLED", "1")  # fast suite never touches the network
    yield results
