"""Which candidate a sweep promotes, and the evidence for it: pure functions on typed values, no I/O.

The rule: rank the complete, distinct, non-baseline candidates by train mean; the top `holdout_top_k` are run on
the holdout (by the sweep, before `decide`); a candidate wins when its train comparison claims an improvement
(experiments.stats.compare: mean difference above the noise floor and one-sided Wilcoxon p < alpha) AND its
holdout mean beats the baseline's holdout mean by more than the holdout noise floor. Among the winners the best
holdout mean is promoted (the earlier trial on a tie); with none, the baseline is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from experiments.search_state import BASELINE
from experiments.stats import Comparison, bootstrap_ci, compare


@dataclass(frozen=True)
class Candidate:
    """A complete search trial as promotion sees it."""

    number: int
    hash: str
    operator: str
    train_mean: float
    train_scores: Mapping[str, float] = field(default_factory=dict)
    instructions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HoldoutScores:
    """A candidate's (or the baseline's) per-task holdout scores, or why there are none."""

    scores: Mapping[str, float] | None
    error: str | None = None

    @property
    def mean(self) -> float | None:
        return sum(self.scores.values()) / len(self.scores) if self.scores else None


@dataclass(frozen=True)
class HoldoutRow:
    trial: int | None  # None for the baseline
    hash: str
    operator: str
    train_mean: float
    holdout_mean: float | None
    holdout_diff: float | None
    train: Comparison | None
    wins: bool
    error: str | None = None


@dataclass(frozen=True)
class Promotion:
    rows: tuple[HoldoutRow, ...]
    winner: HoldoutRow | None  # None: the baseline is kept


def candidates(trials: Sequence[Any], baseline_hash: str) -> list[Candidate]:
    """COMPLETE trials that are not the baseline, not a duplicate and not the baseline's text, best train mean
    first (the earlier trial on a tie). `trials` are Optuna FrozenTrials."""
    out = [Candidate(t.number, t.user_attrs.get("instruction_hash", ""), t.user_attrs.get("operator", "?"), t.value,
                     dict(t.user_attrs.get("task_scores", {})), dict(t.user_attrs.get("instructions", {})))
           for t in trials
           if t.state.name == "COMPLETE" and t.user_attrs.get("operator") != BASELINE
           and t.user_attrs.get("duplicate_of") is None and t.user_attrs.get("instruction_hash") != baseline_hash]
    return sorted(out, key=lambda c: (-c.train_mean, c.number))


def decide(top: Sequence[Candidate], reference: Mapping[str, float], baseline_holdout: HoldoutScores | None,
           holdout: Mapping[str, HoldoutScores], *, train_floor: float, holdout_floor: float,
           alpha: float) -> Promotion:
    """The verdict on the top candidates (see the module docstring). baseline_holdout None: no holdout ran (no
    holdout tasks or no candidate), so no row and no winner; a failed baseline holdout fails every row."""
    if baseline_holdout is None or not top:
        return Promotion((), None)
    rows = []
    for c in top:
        hold = holdout.get(c.hash) if baseline_holdout.scores else HoldoutScores(None, baseline_holdout.error)
        hold = hold or HoldoutScores(None, "not evaluated on the holdout")
        mean, bmean = hold.mean, baseline_holdout.mean
        diff = (mean - bmean) if (mean is not None and bmean is not None) else None
        cmp = compare(c.train_scores, reference, floor=train_floor, alpha=alpha)
        wins = bool(cmp.claimed and diff is not None and diff > holdout_floor)
        rows.append(HoldoutRow(c.number, c.hash, c.operator, c.train_mean, mean, diff, cmp, wins, hold.error))
    winners = [r for r in rows if r.wins]
    return Promotion(tuple(rows), max(winners, key=lambda r: (r.holdout_mean, -r.trial)) if winners else None)


# -- evidence: a candidate's scores next to the baseline's -------------------------------------------------------


@dataclass(frozen=True)
class SplitScores:
    """A candidate's scores on one split next to the baseline's, each with a 95% bootstrap CI over tasks."""

    split: str
    n: int
    mean: float | None = None
    ci: tuple[float, float] | None = None
    baseline_mean: float | None = None
    baseline_ci: tuple[float, float] | None = None
    diff: float | None = None
    diff_ci: tuple[float, float] | None = None
    note: str = ""  # why there are no scores (holdout not evaluated, ...)


def split_scores(split_name: str, cand: Mapping[str, float] | None, base: Mapping[str, float] | None,
                 *, note: str = "") -> SplitScores:
    """Means and paired differences over the tasks both have, with bootstrap CIs (undefined below 2 tasks)."""
    tasks = sorted(set(cand or {}) & set(base or {}))
    if not tasks:
        return SplitScores(split_name, 0, note=note or "not evaluated")

    def mean_ci(values: list[float]) -> tuple[float, tuple[float, float] | None]:
        ci = bootstrap_ci(values, method="percentile", seed=0)
        return sum(values) / len(values), ((ci.low, ci.high) if math.isfinite(ci.low) else None)

    c = [float(cand[t]) for t in tasks]
    b = [float(base[t]) for t in tasks]
    m, mci = mean_ci(c)
    bm, bci = mean_ci(b)
    d, dci = mean_ci([x - y for x, y in zip(c, b)])
    return SplitScores(split_name, len(tasks), m, mci, bm, bci, d, dci, note)
