"""Quality against cost of a sweep's candidates: each evaluated trial's value beside its mean cost per task, and
the Pareto front (higher quality, lower cost). Pure functions of Optuna FrozenTrials; experiments.tracking draws them.

A trial's cost is its user attr task_costs[metric] (task -> per-task mean, experiments.stats.cost_by_task over its
scored runs, recorded with its task scores by experiments.sweep); a trial without it is not measured, never 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

__all__ = ["CostPoint", "trial_cost", "trial_operator", "trial_value", "quality_cost_points", "pareto_front"]


def trial_operator(t: Any) -> str:
    """The operator that made a trial's candidate ('?' when neither attr nor param names it)."""
    return t.user_attrs.get("operator") or t.params.get("operator") or "?"


def trial_value(t: Any) -> float | None:
    """Final value of a COMPLETE trial, the partial mean of a PRUNED one (as experiments.tracking), else None."""
    if t.state.name == "COMPLETE" and t.value is not None:
        return float(t.value)
    if t.state.name == "PRUNED" and isinstance(t.user_attrs.get("partial_value"), (int, float)):
        return float(t.user_attrs["partial_value"])
    return None


@dataclass(frozen=True)
class CostPoint:
    number: int
    operator: str
    value: float  # the trial's value (COMPLETE) or partial mean (PRUNED): mean score over its tasks
    cost: float  # mean per task of the cost metric over the same trial's tasks
    pruned: bool


def trial_cost(t: Any, metric: str) -> float | None:
    """Mean per task of a trial's cost metric (user attr task_costs[metric]: task -> per-task mean, recorded with
    its scores); None when the trial recorded none (an older study, a failed trial): not measured, never 0."""
    per_task = (t.user_attrs.get("task_costs") or {}).get(metric) or {}
    values = [float(v) for v in per_task.values() if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(values) / len(values) if values else None


def quality_cost_points(trials: Sequence[Any], metric: str = "completion_tokens") -> list[CostPoint]:
    """Every evaluated candidate with both a value and a cost: COMPLETE and PRUNED trials, duplicates left out
    (their text is another trial's)."""
    out = []
    for t in sorted(trials, key=lambda t: t.number):
        value, cost = trial_value(t), trial_cost(t, metric)
        if value is None or cost is None or t.user_attrs.get("duplicate_of") is not None:
            continue
        out.append(CostPoint(t.number, trial_operator(t), value, cost, t.state.name == "PRUNED"))
    return out


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the (quality, cost) points no other point dominates (quality at least as high and cost at most
    as low, one of them strictly), ordered by cost. Equal points are all on the front."""
    front = []
    for i, (q, c) in enumerate(points):
        if not any((q2 >= q and c2 <= c) and (q2 > q or c2 < c) for j, (q2, c2) in enumerate(points) if j != i):
            front.append(i)
    return sorted(front, key=lambda i: (points[i][1], -points[i][0]))
