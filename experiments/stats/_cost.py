"""What a candidate costs beside what it scores: paired cost differences over tasks, with confidence.

On a local model the price of an instruction is time: one that makes answers twice as long, or needs more wiggum
rounds to pass, halves how many tasks the user's machine serves. Every figure here is paired with the baseline
over the same tasks, like the quality claim: per task, the candidate's mean cost minus the baseline's, and a
Student's t interval over tasks (the task is the unit of replication; the spread of per-task differences holds
the task-by-variant spread and run noise together).

Metrics (per harness run of one task, from experiments.runs.TaskScore):
- completion_tokens: tokens the models generated (synthesis, revisions, judge replies, plans);
- prompt_tokens: tokens the models read;
- llm_calls: model calls, cached ones included (wiggum rounds count here);
- wall_s: seconds spent in uncached model calls (TaskScore.latency_s: what a machine actually spent; a reused
  context's cached calls cost nothing).

The guard (`CostGuard`, sweep.cost_metric / sweep.max_cost_increase): a candidate passes when its cost per task,
as a ratio to the baseline's, is shown below 1 + L with the confidence the quality claim uses, and the ratio of
its total cost to the baseline's (mean(c) / mean(b)) is observed below 1 + L too. The bound: per-task cost ratios
r_i = c_i / b_i, modelled lognormal over tasks (log r_i ~ N(mu, s^2)); the claim is about their mean over tasks
like these, E[r] = exp(mu + s^2 / 2) (the ratio of total costs when a task's ratio does not depend on its size),
and its one-sided upper bound at level 1 - alpha is the generalized pivotal bound (Krishnamoorthy & Mathew 2003,
seeded Monte Carlo of the pivot). Per-task ratios make every task count once, whatever its size: a t interval on
c_i - (1 + L) b_i passes lognormal costs at the limit 0.035-0.039 of the time at level
0.025 and 0.075-0.078 at 0.05 (8 and 24 tasks), and a candidate 20% cheaper whose cost one heavy task dominates
passed 0.000 of the time at 8 tasks (no bound found); this bound passes them at the limit 0.024-0.025 and
0.045-0.050, normal costs 0.011-0.013 and 0.024-0.035, one heavy task 0.021 and 0.040-0.043, and at a true 20%
saving over 8 tasks passes normal costs 0.99, lognormal 0.34 / 0.50, one heavy task 0.54 / 0.70
(bench/power/cost_guard_and_decision_power.py, 2,000 worlds). A task both texts ran at cost 0 is left out (no cost either way); a
task at cost 0 for one text only, a negative or a non-finite cost holds the candidate back with a line naming it.
What 8 tasks cannot see: a candidate that raises only tasks absent from the holdout. With no limit (None, the
default) every candidate passes and the figures are reported only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

__all__ = ["COST_METRICS", "CostDiff", "CostGuard", "GuardResult", "cost_by_task", "paired_cost", "cost_diffs",
           "run_costs", "train_cost_diffs"]

COST_METRICS = ("completion_tokens", "prompt_tokens", "llm_calls", "wall_s")
_FIELD = {"completion_tokens": "completion_tokens", "prompt_tokens": "prompt_tokens", "llm_calls": "llm_calls",
          "wall_s": "latency_s"}


def _value(score: Any, metric: str) -> float | None:
    name = _FIELD[metric]
    v = score.get(name) if isinstance(score, Mapping) else getattr(score, name, None)
    if v is None or isinstance(v, bool):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def cost_by_task(runs: Iterable[Iterable[Any]], metric: str) -> dict[str, float]:
    """Per-task mean cost over one text's runs (each run: TaskScore-likes or ledger dicts with task_id).
    A task with no measured value is left out, never counted as 0."""
    if metric not in COST_METRICS:
        raise ValueError(f"cost metric must be one of {', '.join(COST_METRICS)}, got {metric!r}")
    sums: dict[str, list[float]] = {}
    for run in runs:
        for s in run:
            tid = s.get("task_id") if isinstance(s, Mapping) else getattr(s, "task_id", None)
            v = _value(s, metric)
            if tid is not None and v is not None:
                sums.setdefault(str(tid), []).append(v)
    return {t: sum(v) / len(v) for t, v in sums.items()}


@dataclass(frozen=True)
class CostDiff:
    """A candidate's cost against the baseline's over the tasks both have, one metric."""

    metric: str
    n: int  # tasks both have
    base_mean: float | None
    cand_mean: float | None
    diff: float | None  # mean over tasks of (candidate - baseline)
    ci: tuple[float, float] | None  # two-sided interval at `level` for diff; None below 2 tasks
    level: float

    @property
    def ratio(self) -> float | None:
        """Relative change of the mean cost, (cand - base) / base; None when the baseline's mean is 0 or missing."""
        if self.base_mean is None or self.cand_mean is None or self.base_mean <= 0:
            return None
        return self.cand_mean / self.base_mean - 1.0

    @property
    def ratio_ci(self) -> tuple[float, float] | None:
        """The interval of `diff` divided by the baseline's mean (the baseline's mean taken as fixed)."""
        if self.ci is None or self.base_mean is None or self.base_mean <= 0:
            return None
        return (self.ci[0] / self.base_mean, self.ci[1] / self.base_mean)

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "n": self.n, "base_mean": self.base_mean, "cand_mean": self.cand_mean,
                "diff": self.diff, "ci": list(self.ci) if self.ci else None, "level": self.level,
                "ratio": self.ratio, "ratio_ci": list(self.ratio_ci) if self.ratio_ci else None}

    def line(self) -> str:
        """One line for a summary: 'completion_tokens +112.0 per task [+80.1, +143.9] (+31% ...) over 8 tasks'."""
        if self.diff is None:
            return f"{self.metric}: not measured"
        ci = f" [{self.ci[0]:+.1f}, {self.ci[1]:+.1f}]" if self.ci else " (no interval: fewer than 2 tasks)"
        rel = ""
        if self.ratio is not None:
            rci = self.ratio_ci
            rel = f" ({self.ratio:+.0%}" + (f", {rci[0]:+.0%} to {rci[1]:+.0%}" if rci else "") + ")"
        return (f"{self.metric} {self.diff:+.1f} per task{ci}{rel}, baseline {self.base_mean:.1f}, "
                f"{self.level:.0%} interval over {self.n} tasks")


def paired_cost(cand: Mapping[str, float], base: Mapping[str, float], metric: str, *,
                level: float = 0.95) -> CostDiff:
    """The paired difference of per-task mean costs over the tasks both texts have, with a t interval."""
    if not 0 < level < 1:
        raise ValueError(f"confidence level must be in (0, 1), got {level!r}")
    tasks = sorted(set(cand) & set(base))
    n = len(tasks)
    if n == 0:
        return CostDiff(metric, 0, None, None, None, None, level)
    b = [float(base[t]) for t in tasks]
    c = [float(cand[t]) for t in tasks]
    d = [ci - bi for ci, bi in zip(c, b)]
    mean = sum(d) / n
    ci = None
    if n >= 2:
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
        half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
        ci = (mean - half, mean + half)
    return CostDiff(metric, n, sum(b) / n, sum(c) / n, mean, ci, level)


def cost_diffs(cand_runs: Sequence[Iterable[Any]], base_runs: Sequence[Iterable[Any]], *,
               level: float = 0.95, metrics: Sequence[str] = COST_METRICS) -> dict[str, CostDiff]:
    """Every cost metric of a candidate against the baseline, from their runs (lists of TaskScore-likes)."""
    return {m: paired_cost(cost_by_task(cand_runs, m), cost_by_task(base_runs, m), m, level=level) for m in metrics}


@dataclass(frozen=True)
class GuardResult:
    passed: bool
    upper: float | None  # one-sided upper bound of the relative increase at 1 - alpha (None: not measured)
    reason: str


@dataclass(frozen=True)
class CostGuard:
    """sweep.cost_metric and sweep.max_cost_increase: the promotion rule's cost condition (module docstring)."""

    metric: str = "completion_tokens"
    max_increase: float | None = None  # a fraction (0.1 = at most 10% more); None: off
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if self.metric not in COST_METRICS:
            raise ValueError(f"sweep.cost_metric must be one of {', '.join(COST_METRICS)}, got {self.metric!r}")
        if self.max_increase is not None and (isinstance(self.max_increase, bool)
                                              or not isinstance(self.max_increase, (int, float))
                                              or not math.isfinite(self.max_increase) or self.max_increase < 0):
            raise ValueError(f"sweep.max_cost_increase must be a fraction >= 0 or null, got {self.max_increase!r}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"cost guard alpha must be in (0, 1), got {self.alpha!r}")

    @property
    def on(self) -> bool:
        return self.max_increase is not None

    def check(self, cand: Mapping[str, float], base: Mapping[str, float]) -> GuardResult:
        """Whether the candidate's cost increase is below the limit with confidence 1 - alpha (per-task mean
        costs of each text; module docstring). Off: passes. Fewer than 2 common tasks with a cost, a task at cost 0
        for one text only, or a negative or non-finite cost: not measured, held back with the reason."""
        upper, problem = None, _cost_problem(cand, base)
        tasks = [t for t in sorted(set(cand) & set(base)) if float(cand[t]) > 0 or float(base[t]) > 0]
        if problem is None and len(tasks) < 2:
            problem = f"fewer than 2 tasks with a cost ({len(tasks)})"
        if problem is None:
            logs = [math.log(float(cand[t]) / float(base[t])) for t in tasks]
            upper = math.expm1(ratio_upper_log(logs, self.alpha))
            total = sum(float(cand[t]) for t in tasks) / sum(float(base[t]) for t in tasks) - 1.0
        if not self.on:
            return GuardResult(True, upper, "cost guard off")
        if upper is None:
            return GuardResult(False, None, f"{self.metric} increase not measured ({problem}): held back")
        shown = f"upper bound {upper:+.0%} at {1 - self.alpha:.0%}, total {total:+.0%}"
        if upper < self.max_increase and total < self.max_increase:
            return GuardResult(True, upper, f"{self.metric} increase below {self.max_increase:.0%} ({shown})")
        return GuardResult(False, upper, f"{self.metric} increase not shown below {self.max_increase:.0%}: {shown}")


def _cost_problem(cand: Mapping[str, float], base: Mapping[str, float]) -> str | None:
    """Why these per-task costs cannot be compared as ratios (one line naming the first bad task), or None."""
    for t in sorted(set(cand) & set(base)):
        for who, v in (("candidate", cand[t]), ("baseline", base[t])):
            x = float(v)
            if not math.isfinite(x) or x < 0:
                return f"task {t!r} has {who} cost {x!r}; expected a finite cost >= 0"
        if (float(cand[t]) > 0) != (float(base[t]) > 0):
            return (f"task {t!r} costs {float(cand[t]):g} for the candidate and {float(base[t]):g} for the baseline: "
                    f"a ratio to or from 0")
    return None


GPQ_DRAWS = 20000  # draws of the pivot: at 8 tasks the bound moves ~1% of its distance from the mean between seeds


@functools.lru_cache(maxsize=64)
def _pivot_draws(n: int, draws: int = GPQ_DRAWS) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([40, n, draws])
    return rng.standard_normal(draws), rng.chisquare(n - 1, draws)


def ratio_upper_log(logs: Sequence[float], alpha: float) -> float:
    """The one-sided 1 - alpha upper bound of log E[r] from per-task log ratios (lognormal over tasks): the
    generalized pivotal quantity T = mean - Z sqrt(V / n) + V / 2, V = (n - 1) s^2 / U, Z ~ N(0, 1), U ~ chi2(n - 1)
    (Krishnamoorthy & Mathew 2003), its 1 - alpha quantile over seeded draws."""
    y = np.asarray(logs, dtype=float)
    n = y.size
    if n < 2 or not np.all(np.isfinite(y)):
        raise ValueError(f"need at least 2 finite log ratios, got {n}")
    z, u = _pivot_draws(n)
    v = (n - 1) * float(y.var(ddof=1)) / u
    return float(np.quantile(float(y.mean()) - z * np.sqrt(v / n) + v / 2.0, 1.0 - alpha))


def run_costs(scores: Iterable[Any]) -> dict[str, dict[str, float]]:
    """metric -> task -> cost of one run (TaskScores), every metric."""
    runs = [list(scores)]
    return {m: {t: round(v, 4) for t, v in cost_by_task(runs, m).items()} for m in COST_METRICS}


def train_cost_diffs(trial_attrs: Mapping[str, Any], base_attrs: Mapping[str, Any], *,
                     level: float = 0.95) -> dict[str, CostDiff]:
    """A trial's train cost against the baseline trial's (their `task_costs` attrs), paired over tasks."""
    cand, base = dict(trial_attrs.get("task_costs") or {}), dict(base_attrs.get("task_costs") or {})
    return {m: paired_cost(dict(cand.get(m, {})), dict(base.get(m, {})), m, level=level) for m in COST_METRICS}
