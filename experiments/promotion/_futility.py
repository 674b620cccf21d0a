"""Which top-k candidates the holdout tests and when it stops testing one: the train filter (sweep.train_filter;
the rule in experiments/promotion/_decide.py's docstring) and the futility stop (sweep.holdout_futility_block).
Pure functions on per-task scores: decide and the sweep's holdout blocks (HoldoutBlocks) use them.

Futility stop (sweep.holdout_futility_block = B > 0, pinned): the holdout runs in blocks, in one seeded order per
study (both arms, all their runs, per block). A block is B tasks on a small holdout and a quarter of the holdout
when that is larger (experiments.stats.interim_looks: 4 and 8 of 12 tasks, 36, 72 and 108 of 144, 28, 56 and 84 of
114), so a grown holdout keeps the same few looks at the same fractions instead of looking at its first noisy
prefixes; what the blocks leave over joins the last block, so no look falls one block short of the end. After each
block but the last, a candidate stops (`futility_stop`) when the conditional power of the final test, under the
effect the design detects with probability 0.8, is below 0.1 given its paired t so far
(experiments.stats.futility_bound, at the first holdout look's level experiments.stats.first_level(sweep.alpha) and
the design power calibrate.power, the level and power the design power line and tasks.count=auto's sizing take: z
below about -2.5 at a quarter, -0.5 at half, +0.7 at three quarters at alpha 0.05 and power 0.8): a loss
beyond the noise stops early, a noisy first block of a real gain does not (a rule that stops on "mean so far <= 0
every 4 tasks" stops a +0.77 candidate whose first 8 of 144 tasks happen to average below 0). Its row says "stopped
for futility after m of n holdout tasks", it is not confirmed, and the look still counts and is stored (its level
is spent). The stop is non-binding and the claim is only made at the last block, by the same paired t over all n
tasks at the look's level: a stop only turns a possible confirmation into none, so the chance of confirming a
candidate with no real gain is at most what the test without stops has (the level holds), and Holm is monotone
in the p-values (a stopped candidate counts as p = 1), so the family-wise level over the top-k holds too. What it
buys: fewer holdout task runs on a candidate that is losing, at nearly the same power (docs/SENSITIVITY.md).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from experiments.config import TRAIN_FILTERS
from experiments.stats import FUTILITY_CP, Comparison, first_level, futility_bound, interim_looks, look_z


def passes_train_filter(cmp: Comparison, rule: str = "wilcoxon") -> bool:
    """Whether a train comparison (experiments.stats.compare against the baseline reference) passes the train
    filter `rule` (sweep.train_filter): "wilcoxon" its claim (mean above the floor, one-sided Wilcoxon p < alpha),
    "positive" a train mean above the baseline's on the tasks both have (cmp.diff > 0 over cmp.n >= 1 tasks),
    "none" always."""
    if rule not in TRAIN_FILTERS:
        raise ValueError(f"train filter must be one of {TRAIN_FILTERS}, got {rule!r}")
    if rule == "wilcoxon":
        return bool(cmp.claimed)
    if rule == "positive":
        return cmp.n >= 1 and cmp.diff > 0
    return True


@dataclass(frozen=True)
class FutilityStop:
    """Where a candidate stopped for futility: after `after` of `of` holdout tasks, with this mean difference."""

    after: int
    of: int
    mean: float
    z: float | None = None  # the z of the paired t so far (experiments.stats.look_z) that fell below the bound


def futility_looks(n_tasks: int, block: int) -> tuple[int, ...]:
    """The numbers of holdout tasks after which the futility stop looks: a block (block tasks, or a quarter of the
    holdout when larger: experiments.stats.interim_looks), twice it, ... below n_tasks (none when block is 0 or
    covers the holdout: the last block is the claim's, never a stop)."""
    return interim_looks(n_tasks, block)


def holdout_order(task_ids: Sequence[str], seed: int, block: int) -> list[str]:
    """The order the holdout's blocks take the tasks in: the benchmark's order when there is no futility stop
    (block 0: one block), else one shuffle per study seeded by sweep.seed, so that a block is not one task type of a
    benchmark listed by type, and every resume, candidate and the baseline use the same blocks."""
    ids = list(task_ids)
    if futility_looks(len(ids), block):
        random.Random(f"{seed}-holdout").shuffle(ids)
    return ids


def futility_stop(cand: Mapping[str, float] | None, base: Mapping[str, float] | None, order: Sequence[str],
                  block: int, *, level: float, power: float, min_cp: float = FUTILITY_CP) -> FutilityStop | None:
    """The first futility look (futility_looks of the holdout tasks in `order`, not the last) at which the
    candidate's per-task differences (candidate - baseline, per-task means over their runs) over the tasks so far
    give a one-sided paired t whose z (experiments.stats.look_z) is below experiments.stats.futility_bound: the
    conditional power of the final test at `level` (the first holdout look's, experiments.stats.first_level of the
    sweep's alpha), under the effect the design detects with probability `power` (calibrate.power), is below
    `min_cp`. None when no look stops it, or a look's
    tasks are not all scored (nothing to judge there yet)."""
    if not cand or not base:
        return None
    n = len(order)
    for m in futility_looks(n, block):
        prefix = order[:m]
        if any(t not in cand or t not in base for t in prefix):
            return None
        d = np.array([float(cand[t]) - float(base[t]) for t in prefix])
        z = float(look_z(d))
        if z < futility_bound(m, n, level=level, power=power, min_cp=min_cp):
            return FutilityStop(m, n, float(d.mean()), z)
    return None


@dataclass(frozen=True)
class HoldoutBlocks:
    """The holdout's blocks for one study: the order its tasks run in (holdout_order), the number of tasks after
    each block (`ends`: the futility looks, then every task) and the futility stop after a block (`stop`) at the
    first look's `level` and the design `power`."""

    order: tuple[str, ...]
    block: int
    level: float
    power: float

    @classmethod
    def of(cls, task_ids: Sequence[str], seed: int, block: int, *, alpha: float, power: float) -> "HoldoutBlocks":
        """The blocks of sweep.holdout_futility_block tasks (0: one block of every task), seeded by sweep.seed, the
        stop's bound at the first look's level of sweep.alpha (experiments.stats.first_level) and at `power`
        (calibrate.power: the power the design power line states)."""
        return cls(tuple(holdout_order(task_ids, seed, block)), block, first_level(alpha), power)

    @property
    def ends(self) -> list[int]:
        """The holdout tasks run after each block: the futility looks, then all of them."""
        return [*futility_looks(len(self.order), self.block), len(self.order)]

    def stop(self, cand: Mapping[str, float] | None, base: Mapping[str, float] | None) -> FutilityStop | None:
        """Where the futility stop stopped a candidate with these per-task scores (futility_stop), or None."""
        return futility_stop(cand, base, self.order, self.block, level=self.level, power=self.power)
