"""Where an experiment's MLflow tracking store is (and the Prompt Registry in it), and its synth.source resolved
from there: harness.stores and harness.synthesis given the experiment's mlflow.tracking_uri and results_dir."""

from __future__ import annotations

from harness import stores, synthesis
from harness.config import SynthConfig

from ._schema import ExperimentConfig


def tracking_uri(exp: ExperimentConfig) -> str:
    """mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else sqlite:///<results_dir>/mlflow.db."""
    return stores.tracking_uri(exp.mlflow.tracking_uri, exp.results_dir)


def registry_uri(exp: ExperimentConfig) -> str:
    """The registry lives in the tracking store."""
    return tracking_uri(exp)


def resolve_synth(synth: SynthConfig, exp: ExperimentConfig) -> SynthConfig:
    """synth with the texts synth.source names in `instructions` and their pinned URIs in `resolved`."""
    return synthesis.resolve_synth(synth, registry_uri(exp))
