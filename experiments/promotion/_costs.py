"""The holdout runs' cost in the sweep's study: each run's per-task cost (experiments.stats.run_costs) stored as a
study attr beside its scores, read back per text as a per-task mean, and paired with the baseline's
(experiments.stats.paired_cost): the cost guard's evidence. The statistics are experiments.stats'; the attr is
written by the sweep's holdout runs and read here."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from experiments.stats import COST_METRICS, CostDiff, paired_cost

# the holdout runs' cost, stored in the study beside their scores: attr "holdout_costs" {hash: {seed: {metric:
# {task: cost}}}} (scores live in "holdout"/"holdout_repeats"; a stored run without a cost entry is not measured)

HOLDOUT_COSTS = "holdout_costs"


def store_holdout_cost(study: Any, key: str, seed: int, costs: Mapping[str, Mapping[str, float]]) -> None:
    """Store one holdout run's per-task cost (run_costs) for text `key` (call under the study-attrs lock)."""
    stored = {h: dict(v) for h, v in dict(study.user_attrs.get(HOLDOUT_COSTS, {})).items()}
    stored.setdefault(key, {})[str(seed)] = {m: dict(v) for m, v in costs.items()}
    study.set_user_attr(HOLDOUT_COSTS, stored)


def holdout_cost(user_attrs: Mapping[str, Any], key: str, metric: str) -> dict[str, float]:
    """Per-task mean cost of one text over its stored holdout runs ({} when none was measured)."""
    runs = dict(dict(user_attrs.get(HOLDOUT_COSTS, {})).get(key, {})).values()
    return _mean_runs([dict(r.get(metric, {})) for r in runs])


def holdout_cost_diffs(user_attrs: Mapping[str, Any], key: str, base_key: str, *,
                       level: float = 0.95) -> dict[str, CostDiff]:
    """Every metric of a text's holdout cost against the baseline's, paired over tasks."""
    return {m: paired_cost(holdout_cost(user_attrs, key, m), holdout_cost(user_attrs, base_key, m), m, level=level)
            for m in COST_METRICS}


def _mean_runs(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for r in runs:
        for t, v in r.items():
            sums.setdefault(str(t), []).append(float(v))
    return {t: sum(v) / len(v) for t, v in sums.items()}
