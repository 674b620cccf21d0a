"""Which top-k candidates the holdout tests and when it stops testing one (issue 42): the train filter
(sweep.train_filter; experiments/sweep/_promotion.py's docstring) and the futility stop
(sweep.holdout_futility_block). Pure functions on per-task scores; experiments.sweep's decide and the holdout's
blocks (SplitRuns._holdout_blocks) use them.

Futility stop (sweep.holdout_futility_block = B > 0, pinned; issue 42, lever d): the holdout runs in blocks of B
tasks, in one seeded order per study (both arms, all their runs, per block). After each block but the last, a
candidate whose mean difference over the tasks so far is <= 0 stops (`futility_stop`): its row says "stopped for
futility after m of n holdout tasks", it is not confirmed, and the look still counts and is stored (its level is
spent). The stop is non-binding and the claim is only made at the last block, by the same paired t over all n
tasks at the look's level: a stop only turns a possible confirmation into none, so the chance of confirming a
candidate with no real gain is at most what the test without stops has (the level holds), and Holm is monotone
in the p-values (a stopped candidate counts as p = 1), so the family-wise level over the top-k holds too. What it
buys: fewer holdout task runs on a candidate that is losing (about 4% of a default study's calls in
docs/SENSITIVITY.md), at the same power.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from experiments.config import TRAIN_FILTERS
from experiments.stats import Comparison


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


def futility_looks(n_tasks: int, block: int) -> tuple[int, ...]:
    """The numbers of holdout tasks after which the futility stop looks: block, 2 block, ... below n_tasks (none
    when block is 0 or covers the holdout: the last block is the claim's, never a stop)."""
    return tuple(range(block, n_tasks, block)) if block > 0 else ()


def holdout_order(task_ids: Sequence[str], seed: int, block: int) -> list[str]:
    """The order the holdout's blocks take the tasks in: the benchmark's order when there is no futility stop
    (block 0: one block), else one shuffle per study seeded by sweep.seed, so that a block is not one task type of a
    benchmark listed by type, and every resume, candidate and the baseline use the same blocks."""
    ids = list(task_ids)
    if futility_looks(len(ids), block):
        random.Random(f"{seed}-holdout").shuffle(ids)
    return ids


def futility_stop(cand: Mapping[str, float] | None, base: Mapping[str, float] | None, order: Sequence[str],
                  block: int) -> FutilityStop | None:
    """The first futility look (after block, 2 block, ... of the holdout tasks in `order`, not the last) at which the
    candidate's mean per-task difference (candidate - baseline, per-task means over their runs) over the tasks so far
    is <= 0; None when no look stops it, or a look's tasks are not all scored (nothing to judge there yet)."""
    if not cand or not base:
        return None
    for m in futility_looks(len(order), block):
        prefix = order[:m]
        if any(t not in cand or t not in base for t in prefix):
            return None
        mean = sum(float(cand[t]) - float(base[t]) for t in prefix) / m
        if mean <= 0.0:
            return FutilityStop(m, len(order), mean)
    return None
