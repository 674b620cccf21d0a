"""A sweep's trials as the tracker and its plots read them: each evaluated trial's operator, value and mean cost per
task (the quality-cost plot's points; its front is experiments.stats.pareto_front), and each trial's train cost
against the baseline trial's (BaselineCosts, logged to MLflow). Pure functions of Optuna FrozenTrials and their attrs.

A trial's cost is its user attr task_costs[metric] (task -> per-task mean, experiments.stats.cost_by_task over its
scored runs, recorded with its task scores by experiments.sweep); a trial without it is not measured, never 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from experiments.stats import train_cost_diffs

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
    its scores); None when the trial recorded none (a study without costs, a failed trial): not measured, never 0."""
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


class BaselineCosts:
    """The tracker's view of the baseline trial's per-task cost (its `task_costs` attr, seen when the tracker logs
    the baseline trial, which runs first), and each later trial's MLflow metrics against it: cost_diff.<metric>
    (mean difference per train task) and cost_diff.<metric>_lo / _hi (its 95% t interval over tasks)."""

    def __init__(self) -> None:
        self.base: Mapping[str, Any] | None = None

    def metrics(self, attrs: Mapping[str, Any]) -> dict[str, float]:
        if attrs.get("operator") == "baseline":  # search_state.BASELINE
            self.base = dict(attrs)
            return {}
        if not self.base or not attrs.get("task_costs") or not self.base.get("task_costs"):
            return {}
        out: dict[str, float] = {}
        for m, d in train_cost_diffs(attrs, self.base).items():
            if d.diff is not None:
                out[f"cost_diff.{m}"] = d.diff
                if d.ci:
                    out[f"cost_diff.{m}_lo"], out[f"cost_diff.{m}_hi"] = d.ci
        return out


# Optuna trial state -> the trial run's MLflow status. A PRUNED trial (raced out, gated out or stopped by the
# pruner) finished what the design asked of it: the search's rule judged it worse on the tasks it ran. It ends
# FINISHED with tags state=PRUNED and pruned=<by what>; KILLED is the status MLflow gives a run a user stopped.
TRIAL_STATUS = {"COMPLETE": "FINISHED", "PRUNED": "FINISHED", "FAIL": "FAILED"}


def pruned_by(attrs: Mapping[str, Any]) -> str:
    """What stopped a PRUNED trial early: "raced out", "gated out" (the minibatch gate) or "pruned" (the pruner)."""
    if attrs.get("raced_out"):
        return "raced out"
    return "gated out" if attrs.get("gated_out") else "pruned"
