"""The holdout confirmation of a look: a candidate's holdout scores (HoldoutScores), the holdout test (HoldoutTest:
rule "tasks", the paired t over tasks with its skew requirement, TaskDiffs, or the sign-flip test on pairwise
preferences; or the fixed-task rules "bound" and "floor"), and `confirm`: each tested row's p, then Holm over the
train-filtered family at the look's level (or the 2-SE floor). The rule they serve and its model are in
experiments/promotion/_decide.py's docstring."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from scipy import stats as sps

from experiments.config import HOLDOUT_TESTS
from experiments.stats import FLOOR_SE, NoiseFloor, holm, signflip_test, skew_test

from ._verdict import HoldoutRow


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
        alone estimate sigma (discarding them would leave SE 0, and anything would confirm). A known sigma (df None,
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


def confirm(rows: Sequence[HoldoutRow], paired: Sequence[tuple[Mapping[str, float], Mapping[str, float]] | None],
            test: HoldoutTest, preferences: Mapping[str, Mapping[str, float]] | None = None) -> list[HoldoutRow]:
    """Which rows win. Each row with a holdout difference and no futility stop (`paired`, in the rows' order: its
    per-task candidate and baseline scores over the tasks it is judged on; None for the others) gets its holdout
    p: the sign-flip test on its pairwise `preferences` when it has them, else the paired t over tasks (TaskDiffs)
    under rule "tasks", else the fixed-task bound at the run noise. Then the rows that passed the train filter are
    confirmed by Holm at the look's level ("tasks", "bound") or by the 2-SE floor ("floor")."""
    tested = [_tested(r, *scores, test, preferences or {}) if scores is not None else r
              for r, scores in zip(rows, paired)]
    return _family(tested, test)


def _tested(row: HoldoutRow, cand: Mapping[str, float], base: Mapping[str, float], test: HoldoutTest,
            preferences: Mapping[str, Mapping[str, float]]) -> HoldoutRow:
    """The row with its holdout p, its standard error and the tasks it rests on (confirm)."""
    if test.over_tasks and row.hash in preferences:
        prefs = [float(v) for t, v in preferences[row.hash].items() if t in cand]
        p = signflip_test(prefs, alternative="greater").pvalue if prefs else 1.0
        return dataclasses.replace(row, holdout_p=p, holdout_n=len(prefs),
                                   preference=sum(prefs) / len(prefs) if prefs else None)
    if test.over_tasks:
        td = TaskDiffs.of(cand, base)
        return dataclasses.replace(row, holdout_se=td.se, holdout_p=td.p, holdout_df=td.df, holdout_n=td.n)
    se = test.se(len(cand), *row.runs)
    return dataclasses.replace(row, holdout_se=se, holdout_p=test.p_value(row.holdout_diff, se), holdout_df=test.df,
                               holdout_n=len(cand))


def _family(rows: list[HoldoutRow], test: HoldoutTest) -> list[HoldoutRow]:
    """Which rows win: train filter passed and the holdout confirms, by Holm over the train-filtered family at the
    look's level ("tasks", "bound") or by the 2-SE floor ("floor"). A row without a measured p (a futility stop
    among them) never wins."""
    family = [i for i, r in enumerate(rows) if r.passes_filter]
    out = list(rows)
    if test.rule == "floor":
        for i in family:
            r = rows[i]
            level = FLOOR_SE * r.holdout_se if r.holdout_se is not None else None
            out[i] = dataclasses.replace(r, holdout_level=level, holdout_rule=test.rule,
                                         wins=r.holdout_diff is not None and level is not None and level > 0
                                         and r.stopped_after is None and r.holdout_diff > level)
        return out
    ps = [rows[i].holdout_p if rows[i].holdout_p is not None else 1.0 for i in family]
    order = sorted(range(len(family)), key=lambda j: ps[j])  # Holm: the j-th smallest p meets alpha / (F - j)
    adjusted = holm(ps)
    for rank, j in enumerate(order):
        i = family[j]
        out[i] = dataclasses.replace(rows[i], holdout_level=test.alpha / (len(family) - rank), holdout_rule=test.rule,
                                     wins=rows[i].holdout_p is not None and test.alpha > 0
                                     and adjusted[j] <= test.alpha)
    return out
