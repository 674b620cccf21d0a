"""The experiment's configuration: the schema Hydra validates conf/ against, benchmarks, fingerprints, the
prompt and store locations, and the checks a config passes before anything runs."""

from __future__ import annotations

from harness.config import ConfigError  # an experiment's config errors are the harness's

from ._benchmark import (Task, embed, id_problem, load_tasks, normalized_text, split, split_leaks, task_from_spec,
                         task_types)
from ._design import sweep_design_problem
from ._near_duplicate import PAIR_BLOCK, TaskTexts
from ._convert import apply_overrides, experiment_dict, to_experiment, to_harness_config
from ._fingerprint import (backend_identity, decision_rule, fingerprint_diff, holdout_set, study_fingerprint,
                           tasks_digest, with_rule_defaults)
from ._schema import (BASELINE, HOLDOUT_TESTS, TASK_KINDS, TRAIN_FILTERS, BenchmarkConfig, ExperimentConfig,
                      compose_config, task_supply_keys)
from ._sources import registry_uri, tracking_uri
from ._literal import escape_all as escape_interpolation
from ._literal import literal_benchmark
from ._validation import MAX_GENERATED, check_benchmark_tasks, validate

__all__ = [
    "TASK_KINDS",
    "MAX_GENERATED",
    "check_benchmark_tasks",
    "escape_interpolation",
    "literal_benchmark",
    "embed",
    "PAIR_BLOCK",
    "TaskTexts",
    "id_problem",
    "normalized_text",
    "split_leaks",
    "task_supply_keys",
    "BASELINE",
    "BenchmarkConfig",
    "ConfigError",
    "ExperimentConfig",
    "HOLDOUT_TESTS",
    "TRAIN_FILTERS",
    "Task",
    "apply_overrides",
    "backend_identity",
    "compose_config",
    "decision_rule",
    "experiment_dict",
    "fingerprint_diff",
    "holdout_set",
    "tasks_digest",
    "load_tasks",
    "registry_uri",
    "split",
    "study_fingerprint",
    "sweep_design_problem",
    "task_from_spec",
    "task_types",
    "to_experiment",
    "to_harness_config",
    "tracking_uri",
    "validate",
    "with_rule_defaults",
]
