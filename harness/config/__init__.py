"""The typed configuration every package reads: one dataclass per node (backend, planner, search, research,
memory, synth, evaluator, wiggum, panel, orchestrator, mlflow) under `HarnessConfig`, the allowed values, the
environment toggles (`apply_env`) and the config hash. Hydra composition and the checks of the values are in
harness.compose, which imports the backends and the prompt registry; this package imports nothing of harness.

- _typed: the dataclasses, `ROLES` and the allowed values, `apply_env`, `results_dir_in`, `to_dict`,
  `config_hash`, `resolve_concurrency`, `ConfigError`.
"""

from ._typed import (
    COMPOSITES,
    MAX_WORKERS,
    ORCHESTRATOR_MODES,
    PLANNER_MODES,
    ROLES,
    SEARCH_PROVIDERS,
    TASK_TYPES,
    BackendConfig,
    ConfigError,
    EvaluatorConfig,
    HarnessConfig,
    MemoryConfig,
    MLflowConfig,
    OrchestratorConfig,
    PlannerConfig,
    ResearchConfig,
    SearchConfig,
    SynthConfig,
    WiggumConfig,
    apply_env,
    config_hash,
    resolve_concurrency,
    results_dir_in,
    to_dict,
)

__all__ = [
    "ROLES",
    "TASK_TYPES",
    "PLANNER_MODES",
    "SEARCH_PROVIDERS",
    "COMPOSITES",
    "ORCHESTRATOR_MODES",
    "MAX_WORKERS",
    "ConfigError",
    "BackendConfig",
    "PlannerConfig",
    "SearchConfig",
    "ResearchConfig",
    "MemoryConfig",
    "SynthConfig",
    "EvaluatorConfig",
    "WiggumConfig",
    "OrchestratorConfig",
    "MLflowConfig",
    "HarnessConfig",
    "apply_env",
    "results_dir_in",
    "to_dict",
    "config_hash",
    "resolve_concurrency",
]
