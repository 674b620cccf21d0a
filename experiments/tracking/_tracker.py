"""What every tracker offers the sweep, the A/B and the calibration (NullTracker: mlflow.enabled=false records
nothing; experiments.tracking._mlflow's MLflowTracker writes MLflow), the params each trial run carries, and the
command that opens the UI."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from experiments.config import ExperimentConfig
from experiments.storage import mask_url

UI_ADDRESS = "http://127.0.0.1:5000"  # where `mlflow ui` serves by default


def ui_command(uri: str) -> str:
    if uri.startswith(("http://", "https://")):  # a tracking server serves its own UI
        return f"open {mask_url(uri)}"
    return f"mlflow ui --backend-store-uri {mask_url(uri)}"


def trial_params(exp: ExperimentConfig) -> dict[str, Any]:
    """Config params logged on every trial run (variant names, toggles, backend, models)."""
    b = exp.backend
    return {
        "synth_variant": exp.synth.variant,
        "planner_mode": exp.planner.mode,
        "skip_prior_knowledge": exp.planner.skip_prior_knowledge,
        "research_cache": exp.research.reuse_cache,
        "wiggum_rounds": exp.wiggum.max_rounds,
        "panel": exp.panel.enabled,
        "evaluator_composite": exp.evaluator.composite,
        "evaluator_repeats": exp.evaluator.repeats,
        "backend": b.kind,
        "planner_model": b.planner_model,
        "producer_model": b.producer_model,
        "evaluator_model": b.evaluator_model,
        "benchmark": exp.benchmark.name,
        "reuse_context": exp.sweep.reuse_context,
        "memory_frozen": exp.memory.frozen,
        "seed": exp.seed,
    }


class NullTracker:
    """mlflow.enabled=false: same interface, records nothing."""

    uri = ""
    parent_id: str | None = None
    enabled = False  # an MLflow store is written
    moved_note = ""  # a line for the caller to print: the store's experiment was moved aside (MLflowTracker)

    def start(self, exp: ExperimentConfig, *, smoke: bool = False) -> None: ...

    def log_trial(self, trial: Any, outcome: Any = None, *, baseline: Mapping[str, str] | None = None) -> None: ...

    def log_trial_once(self, trial: Any, outcome: Any = None, *, baseline: Mapping[str, str] | None = None) -> bool:
        return False

    def sync(self, trials: Iterable[Any], baseline: Mapping[str, str] | None = None) -> int:
        return 0

    def log_child(self, name: str, tags: Mapping[str, str], metrics: Mapping[str, float],
                  texts: Mapping[str, str] = {}, *, params: Mapping[str, Any] | None = None,
                  status: str | None = "FINISHED", splits: Iterable[str] = (),
                  task_scores: Mapping[str, float] | None = None) -> str | None:
        return None

    def logged_child(self, name: str, tags: Mapping[str, str]) -> bool:
        return False

    def tasks(self) -> dict[str, Any]:
        return {}

    def end_child(self, run_id: str | None, status: str = "FINISHED") -> None: ...

    def log_parent(self, *, params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
                   texts: Mapping[str, str] | None = None) -> None: ...

    def child_runs(self, kind: str) -> list[Any]:
        return []

    def kill(self) -> None: ...

    def finish(self, metrics: Mapping[str, float], texts: Mapping[str, str], *, status: str = "FINISHED",
               tags: Mapping[str, str] | None = None) -> None: ...

    def log_files(self, paths: Iterable[Path | str], artifact_path: str) -> None: ...

    def trial_runs(self) -> list[Any]:
        return []

    def ui_command(self) -> str:
        return "(MLflow tracking disabled: mlflow.enabled=false)"

    def ui_url(self) -> str:
        return ""


def metric_key(key: str) -> str:
    """An MLflow metric key from any name: characters MLflow refuses become '_', at most 250 characters."""
    import re

    return re.sub(r"[^A-Za-z0-9_\-. /]", "_", key)[:250]
