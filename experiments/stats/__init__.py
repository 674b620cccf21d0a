"""Statistics the verdicts rest on: paired tests and noise floors, power and detectable effects, cost
differences, the study's error budget over holdout looks, and the A/B verdict rule (their text: experiments.report)."""

from __future__ import annotations

from ._cost import (COST_METRICS, CostDiff, CostGuard, GuardResult, cost_by_task, paired_cost, run_costs,
                    train_cost_diffs)
from ._floors import baseline_reference, compare, holm, noise_floor, replication_noise, variance_ratio
from ._looks import Look, first_level, level, next_look, recorded
from ._pareto import pareto_front
from ._decision import DecisionPower, decision_power
from ._power import (FUTILITY_CP, MAX_TASKS, Design, ab_design, detection_rate, futility_bound, interim_looks,
                     look_block, look_z, mde, replications_for_effect, sweep_design, tasks_for_effect)
from ._reach import holdout_min_p, holdout_tasks_needed, min_attainable_p, tasks_needed
from ._signflip import signflip_test
from ._skew import holdout_tasks_for_harm, skew_test
from ._spread import heterogeneity, spread_from_trials
from ._tests import (DIRECTIONS, FLOOR_SE, TESTS, Comparison, NoiseFloor, PairedStats, bootstrap_ci, cohens_dz,
                     finite_array, paired_differences, paired_ttest, rank_biserial, wilcoxon_test)
from ._verdict import (COMPARES, Decision, Preregistration, excluding_bound, explain_verdict, look_level,
                       missing_imbalance, sequential_decision)

__all__ = [
    "COMPARES",
    "COST_METRICS",
    "Comparison",
    "CostDiff",
    "CostGuard",
    "DIRECTIONS",
    "Decision",
    "DecisionPower",
    "Design",
    "FLOOR_SE",
    "FUTILITY_CP",
    "GuardResult",
    "Look",
    "MAX_TASKS",
    "NoiseFloor",
    "PairedStats",
    "Preregistration",
    "TESTS",
    "ab_design",
    "baseline_reference",
    "bootstrap_ci",
    "cohens_dz",
    "compare",
    "cost_by_task",
    "decision_power",
    "detection_rate",
    "excluding_bound",
    "explain_verdict",
    "finite_array",
    "first_level",
    "futility_bound",
    "heterogeneity",
    "holdout_min_p",
    "holdout_tasks_for_harm",
    "holdout_tasks_needed",
    "holm",
    "interim_looks",
    "level",
    "look_block",
    "look_level",
    "look_z",
    "mde",
    "min_attainable_p",
    "missing_imbalance",
    "next_look",
    "noise_floor",
    "paired_cost",
    "paired_differences",
    "paired_ttest",
    "pareto_front",
    "rank_biserial",
    "recorded",
    "replication_noise",
    "replications_for_effect",
    "run_costs",
    "sequential_decision",
    "signflip_test",
    "skew_test",
    "spread_from_trials",
    "sweep_design",
    "tasks_for_effect",
    "tasks_needed",
    "train_cost_diffs",
    "variance_ratio",
    "wilcoxon_test",
]
