"""The holdout's evidence and its tests: a candidate's holdout scores (HoldoutScores), the holdout test of a look
(HoldoutTest: rule "tasks", the paired t over tasks with its skew requirement, TaskDiffs; or the fixed-task rules
"bound" and "floor"), and the per-task-type differences that hold a changed type back (TypeDiff). The rule they
serve and its model are in experiments.sweep._promotion's docstring."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from scipy import stats as sps

from experiments.config import HOLDOUT_TESTS
from experiments.stats import NoiseFloor, skew_test


@dataclass(frozen=True)
class HoldoutScores:
    """A candidate's (or the baseline's) per-task holdout scores, averaged over `runs` runs, or why there are none."""

    scores: Mapping[str, float] | None
    error: str | None = None
    runs: int = 1
    within_ss: float = 0.0  # sum over tasks of the squared deviations of each run from the task's mean
    within_df: int = 0  # its degrees of freedom: tasks x (runs - 1)

    @property
    def mean(self) -> float | None:
        return sum(self.scores.values()) / len(self.scores) if self.scores else None

    @classmethod
    def of_runs(cls, runs: Sequence[Mapping[str, float]]) -> "HoldoutScores":
        """Per-task means over the runs (the tasks every run has), and the run-to-run spread around them."""
        tasks = sorted(set.intersection(*(set(r) for r in runs))) if runs else []
        if not tasks:
            return cls(None, "no holdout scores")
        means = {t: sum(float(r[t]) for r in runs) / len(runs) for t in tasks}
        ss = sum((float(r[t]) - means[t]) ** 2 for r in runs for t in tasks)
        return cls(means, None, len(runs), ss, len(tasks) * (len(runs) - 1))


@dataclass(frozen=True)
class HoldoutTest:
    """How a holdout difference confirms a candidate (module docstring): rule "tasks" (one-sided paired t over the
    holdout tasks at `alpha`, Holm over the train-filtered candidates), or the fixed-task statements "bound"
    (one-sided t at the run noise) and "floor" (diff > 2 SE). `alpha` is the level of this look (the study's
    budget spent so far taken out: experiments.stats)."""

    sigma: float  # run-to-run sd of one task score (rules "bound" and "floor")
    df: int | None  # degrees of freedom of sigma's estimate; None: sigma taken as known (normal quantiles)
    alpha: float
    rule: str = "tasks"

    def __post_init__(self) -> None:
        if self.rule not in HOLDOUT_TESTS:
            raise ValueError(f"holdout test rule must be one of {HOLDOUT_TESTS}, got {self.rule!r}")

    @property
    def over_tasks(self) -> bool:
        """True when a confirmation is a claim about tasks like these (and may move an alias)."""
        return self.rule == "tasks"

    @classmethod
    def of(cls, nf: NoiseFloor, *, alpha: float, rule: str = "tasks") -> "HoldoutTest":
        """The test at the sweep's noise floor: sigma and its df from the runs that measured it."""
        df = nf.n_tasks * (nf.repeats - 1)
        return cls(nf.sigma if nf.repeats >= 2 else 0.0, df if df > 0 else None, alpha, rule)

    def se(self, n_tasks: int, candidate_runs: int, baseline_runs: int) -> float:
        """Standard error of the mean holdout difference from run noise alone (the fixed-task rules)."""
        if n_tasks < 1:
            return float("inf")
        return self.sigma * math.sqrt((1.0 / max(candidate_runs, 1) + 1.0 / max(baseline_runs, 1)) / n_tasks)

    def pooled(self, scores: Sequence[HoldoutScores]) -> "HoldoutTest":
        """The "bound" test with sigma pooled over the noise floor's runs and the holdout's own repeated runs.

        Each text's runs on a holdout task scatter around that text's task mean by run noise alone, so the within-
        task sums of squares estimate sigma^2 with tasks x (runs - 1) more degrees of freedom. Under normal noise a
        sample variance is independent of the sample means (Cochran), so t = diff / SE keeps its Student's t law
        with the pooled df. With no noise floor measured (sigma 0, df None: one baseline run) the holdout's repeats
        alone estimate sigma (issue 31: discarding them left SE 0 and anything confirmed). A known sigma (df None,
        sigma > 0) and the other rules are returned as they are."""
        extra_ss = sum(s.within_ss for s in scores if s is not None and s.scores)
        extra_df = sum(s.within_df for s in scores if s is not None and s.scores)
        if self.rule != "bound" or extra_df < 1:
            return self
        if not self.df:
            if self.sigma > 0:
                return self
            return dataclasses.replace(self, sigma=math.sqrt(extra_ss / extra_df), df=extra_df)
        sigma = math.sqrt((self.sigma ** 2 * self.df + extra_ss) / (self.df + extra_df))
        return dataclasses.replace(self, sigma=sigma, df=self.df + extra_df)

    def p_value(self, diff: float, se: float) -> float | None:
        """One-sided p of diff > 0 given its standard error (Student's t with df, normal without); None when the
        standard error was not measured (0): an unmeasured noise confirms nothing."""
        if se <= 0:
            return None
        t = diff / se
        return float(sps.t.sf(t, self.df) if self.df else sps.norm.sf(t))


@dataclass(frozen=True)
class TaskDiffs:
    """The holdout test over tasks (rule "tasks") on per-task mean differences: experiments.stats.skew_test, the
    paired t that also holds its level when the differences are skewed (p = max of the t's p and the
    skew-calibrated p; the exact sign-flip p when every difference is equal)."""

    n: int
    mean: float | None
    se: float | None  # sd(d) / sqrt(n): task x variant spread and run noise together
    df: int
    p: float | None  # one-sided p of mean > 0; None below 2 tasks (nothing measured)
    t_p: float | None = None  # the paired t's own p (None at zero spread)
    skew_p: float | None = None  # the skew-calibrated p (None at zero spread)

    @classmethod
    def of(cls, cand: Mapping[str, float] | None, base: Mapping[str, float] | None) -> "TaskDiffs":
        tasks = sorted(set(cand or {}) & set(base or {}))
        d = [float(cand[t]) - float(base[t]) for t in tasks]
        r = skew_test(d)
        if r.n < 2:
            return cls(r.n, r.mean, None, 0, None)
        return cls(r.n, r.mean, r.se, r.n - 1, r.p, r.t_p, r.skew_p)


@dataclass(frozen=True)
class TypeDiff:
    """One task type's holdout tasks: how many, their mean difference (candidate - baseline) and the worst."""

    n: int
    mean: float
    worst: float

    @property
    def text(self) -> str:
        return f"mean {self.mean:+.3f} over {self.n} holdout task(s), worst {self.worst:+.3f}"


def type_diffs(cand: Mapping[str, float] | None, base: Mapping[str, float] | None,
               task_types: Mapping[str, str]) -> dict[str, TypeDiff]:
    """Per task type, the holdout differences of the tasks both texts have (task_types: task id -> type)."""
    by: dict[str, list[float]] = {}
    for t in sorted(set(cand or {}) & set(base or {})):
        if t in task_types:
            by.setdefault(task_types[t], []).append(float(cand[t]) - float(base[t]))
    return {tt: TypeDiff(len(d), sum(d) / len(d), min(d)) for tt, d in sorted(by.items())}


GENERATED, OWN = "generated", "own"  # where a task came from: a generator model, or the user (imported or written)


def task_sources(specs: Sequence[Any]) -> dict[str, str]:
    """Task id -> GENERATED when its provenance names a generator model (experiments.tasks' generated tasks), else
    OWN (an imported row or a hand-written task): read off the benchmark's task specs, as the frozen tasks carry
    no provenance (it is no part of their fingerprint)."""
    out = {}
    for t in specs:
        prov = (t.get("provenance") if isinstance(t, Mapping) else getattr(t, "provenance", None)) or {}
        task_id = t.get("id") if isinstance(t, Mapping) else getattr(t, "id", None)
        out[str(task_id)] = GENERATED if prov.get("generator") else OWN
    return out


def held_types(changed: Sequence[str], diffs: Mapping[str, TypeDiff]) -> dict[str, str]:
    """The changed task types whose alias may not move (module docstring, "Per task type"), with the reason."""
    out = {}
    for tt in changed:
        d = diffs.get(tt)
        if d is None:
            out[tt] = "no holdout task of this type: its change was not tested"
        elif d.mean < 0:
            out[tt] = f"its own holdout tasks lost: {d.text}"
    return out


def changed_types(instructions: Mapping[str, str], baseline: Mapping[str, str]) -> tuple[str, ...]:
    """The task types whose text differs from the baseline's (whitespace at the ends ignored)."""
    return tuple(sorted(tt for tt, text in instructions.items()
                        if str(text).strip() != str(baseline.get(tt, "")).strip()))


def kept_instructions(instructions: Mapping[str, str], baseline: Mapping[str, str],
                      held: Mapping[str, str]) -> dict[str, str]:
    """A winner's texts with the held-back task types' texts left at the baseline's: what is promoted."""
    return {**dict(instructions), **{tt: baseline[tt] for tt in held if tt in baseline}}
