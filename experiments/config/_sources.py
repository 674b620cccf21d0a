"""Where an experiment's MLflow tracking store is (and the Prompt Registry in it): harness.stores given the
experiment's mlflow.tracking_uri and results_dir."""

from __future__ import annotations

from harness import stores

from ._schema import ExperimentConfig


def tracking_uri(exp: ExperimentConfig) -> str:
    """mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else sqlite:///<results_dir>/mlflow.db."""
    return stores.resolve_tracking_uri(exp.mlflow.tracking_uri, exp.results_dir)


def registry_uri(exp: ExperimentConfig) -> str:
    """The registry lives in the tracking store."""
    return tracking_uri(exp)

