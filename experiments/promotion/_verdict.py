"""What a look concludes: one HoldoutRow per top-k candidate (its train comparison, its holdout difference and
test, its guards and what it rests on) and the Promotion (the rows and the winner), with the JSON-able record of a
promoted row that a study keeps (row_record, row_from_record: the standing winner)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from experiments.stats import Comparison, CostDiff, GuardResult

from ._evidence import TypeDiff
from ._futility import passes_train_filter

FIXED_TASK_RULES = ("bound", "floor")  # statements about the holdout tasks as they are: they promote nothing


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
    holdout_se: float | None = None  # standard error of holdout_diff from run noise
    holdout_p: float | None = None  # one-sided p of the holdout difference (rule "bound")
    holdout_level: float | None = None  # the level it had to reach: Holm's alpha / (family left), or the 2-SE floor
    runs: tuple[int, int] = (1, 1)  # holdout runs (candidate, baseline)
    holdout_rule: str = ""  # HoldoutTest.rule that judged it; "" when not tested (no train claim)
    holdout_df: int | None = None  # degrees of freedom of the test (rule "tasks": holdout tasks - 1)
    holdout_n: int = 0  # holdout tasks both texts have
    cost: GuardResult | None = None  # the cost guard on its holdout cost (None: not checked, no holdout difference)
    cost_diffs: Mapping[str, CostDiff] = field(default_factory=dict)  # holdout cost vs the baseline, every metric
    worst_task: str | None = None  # the holdout task with the lowest difference (candidate - baseline)
    worst_diff: float | None = None  # that difference
    max_task_loss: float | None = None  # sweep.max_task_loss it was judged under (None: off)
    type_diffs: Mapping[str, TypeDiff] = field(default_factory=dict)  # task type -> its holdout tasks' differences
    held_types: Mapping[str, str] = field(default_factory=dict)  # changed task type -> why its alias is held back
    changed_types: tuple[str, ...] = ()  # the task types whose text differs from the baseline's
    standing: str = ""  # non-empty: a winner of an earlier look of this study, carried forward (what it rests on)
    train_filter: str = "wilcoxon"  # sweep.train_filter that chose whether it is tested (passes_filter)
    stopped_after: int | None = None  # futility stop: the holdout tasks it ran (of futility_of) before it stopped
    futility_of: int = 0  # the holdout tasks a futility-stopped candidate would have run in full
    preference: float | None = None  # sweep.holdout_compare=pairwise: mean over tasks of the per-task preference
    # "generated" / "own" -> its holdout tasks' differences (task_sources): what the claim rests on, described only
    source_diffs: Mapping[str, TypeDiff] = field(default_factory=dict)

    @property
    def passes_filter(self) -> bool:
        """Whether the train filter sends it to the holdout test (train_filtered's rule on this row's comparison)."""
        return self.train is not None and passes_train_filter(self.train, self.train_filter)

    @property
    def cut_by_filter(self) -> bool:
        """Cut by the train filter before the holdout: no holdout run, no error, never tested."""
        return self.holdout_mean is None and not self.error and not self.passes_filter

    @property
    def futility_text(self) -> str:
        """"stopped for futility after m of n holdout tasks (mean diff so far D)", or "" when it was not stopped."""
        if self.stopped_after is None:
            return ""
        return (f"stopped for futility after {self.stopped_after} of {self.futility_of} holdout tasks (mean diff so "
                f"far {self.holdout_diff:+.3f})")

    @property
    def held_by_cost(self) -> bool:
        """Confirmed on quality but held back by the cost guard."""
        return self.wins and self.cost is not None and not self.cost.passed

    @property
    def held_by_task_loss(self) -> bool:
        """Confirmed on quality but held back: it lost more than sweep.max_task_loss on some holdout task."""
        return (self.wins and self.max_task_loss is not None and self.worst_diff is not None
                and self.worst_diff < -self.max_task_loss)

    @property
    def promotes(self) -> bool:
        """Confirmed, not held back by a guard, and at least one changed task type may move."""
        if not self.wins or self.held_by_cost or self.held_by_task_loss:
            return False
        return not self.changed_types or any(tt not in self.held_types for tt in self.changed_types)

    @property
    def fixed_task(self) -> bool:
        """Judged by a fixed-task rule: a statement about these holdout tasks only, which promotes nothing."""
        return self.holdout_rule in FIXED_TASK_RULES


@dataclass(frozen=True)
class Promotion:
    rows: tuple[HoldoutRow, ...]
    winner: HoldoutRow | None  # None: the baseline is kept (always under a fixed-task rule)
    pick: HoldoutRow | None = None  # the best winning row under any rule (a fixed-task rule's choice, for comparison)


def row_record(row: HoldoutRow) -> dict[str, Any]:
    """A promoted HoldoutRow as JSON-able values (its cost_diffs left out: recomputed from the study)."""
    d = dataclasses.asdict(row)
    d.pop("cost_diffs")
    d["type_diffs"] = {tt: [v.n, v.mean, v.worst] for tt, v in row.type_diffs.items()}
    d["source_diffs"] = {k: [v.n, v.mean, v.worst] for k, v in row.source_diffs.items()}
    return d


def row_from_record(d: Mapping[str, Any], *, standing: str = "",
                    cost_diffs: Mapping[str, CostDiff] | None = None) -> HoldoutRow:
    """The HoldoutRow row_record stored, marked `standing` (what it rests on)."""
    d = dict(d)
    d["train"] = Comparison(**d["train"]) if d.get("train") else None
    d["cost"] = GuardResult(**d["cost"]) if d.get("cost") else None
    d["runs"] = tuple(d.get("runs", (1, 1)))
    d["changed_types"] = tuple(d.get("changed_types", ()))
    d["type_diffs"] = {tt: TypeDiff(*v) for tt, v in dict(d.get("type_diffs", {})).items()}
    d["source_diffs"] = {k: TypeDiff(*v) for k, v in dict(d.get("source_diffs", {})).items()}
    d["held_types"] = dict(d.get("held_types", {}))
    d["standing"] = standing
    known = {f.name for f in dataclasses.fields(HoldoutRow)} - {"cost_diffs"}
    return HoldoutRow(**{k: v for k, v in d.items() if k in known}, cost_diffs=dict(cost_diffs or {}))
