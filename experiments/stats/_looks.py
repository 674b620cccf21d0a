"""One error budget for a holdout set's life: every holdout conclusion ever drawn in one storage on holdout tasks
that share a task with these spends from one alpha, whatever the study is called.

A study that is resumed ("raise sweep.n_trials, rerun to continue") concludes again, and a new top candidate is
tested on the same holdout tasks. Testing each at full alpha lets the chance that some no-better candidate is
promoted grow with every conclusion (4.7% -> 17.2% over five). Here look k (the k-th distinct family
of train-filtered candidates tested on these holdout tasks) is tested at alpha / 2^k, so the levels of all looks
ever made sum to less than alpha (Bonferroni over looks: it holds whatever the dependence between them, and the
same holdout tasks make them dependent). A conclusion of one study that tests the same family again (a resume with
no new trial: the same stored runs) is the same look at the same level: it spends nothing more. A conclusion that
tests nothing (no candidate passed the train filter) is no look.

The count is per holdout set, not per study (a new sweep.name on the same storage would otherwise start again at
alpha / 2 and could promote a candidate another study had already failed to confirm), and a set that shares any
task with an earlier one is not a new set (moving 4 tasks between the splits would otherwise give 12 holdout tasks,
8 of them looked at, a fresh budget). `others` are the looks other studies in the storage made on holdout tasks overlapping
these (experiments.sweep finds them by each holdout task's id and content hash): they count and spend, and they
are never "the same look" (another study ran its holdout runs anew). Counting a partly shared set in full is
conservative: its looks tested on the shared tasks, and no bound on their dependence is cheaper than Bonferroni.
The budget is the smallest alpha any of those looks was made under; a look never spends more than half of what
the earlier ones left (with one alpha throughout that is alpha / 2^k). Another storage is another budget.

The looks are stored in each study (user attr holdout_looks, experiments.sweep's LOOKS_ATTR, a list of {"family": [hashes], "level": float, ...}),
so every worker and every resume reads the same budget. Pure functions; the sweep stores what they return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class Look:
    """One holdout conclusion: its number among the looks on these holdout tasks, its level, and what earlier
    looks spent."""

    number: int  # 1-based: the k-th distinct family tested on these holdout tasks (every study in the storage)
    level: float  # alpha / 2^number, or half of what earlier looks left of the budget when that is less
    family: tuple[str, ...]  # the hashes tested (sorted)
    spent_before: float  # levels of the earlier looks, summed
    alpha: float  # the whole budget: the smallest alpha any look on these holdout tasks was made under
    new: bool  # True: not stored yet (the caller stores it once the test ran)
    by_others: int = 0  # earlier looks on these holdout tasks made by other studies in the storage

    @property
    def line(self) -> str:
        again = "" if self.new else " (the same candidates as before: the same look, nothing more spent)"
        others = f" ({self.by_others} of the earlier ones by other studies in this storage)" if self.by_others else ""
        how = (f"alpha {self.alpha:g} / 2^{self.number}" if _close(self.level, level(self.alpha, self.number))
               else f"half of what earlier looks left of alpha {self.alpha:g}")
        return (f"holdout look {self.number} of these holdout tasks{others}: level {self.level:.4g} = {how}; "
                f"earlier looks spent {self.spent_before:.4g}; every look on these holdout tasks in this storage "
                f"together stays under alpha {self.alpha:g}{again}")


def level(alpha: float, number: int) -> float:
    """The level of look `number` (1-based): alpha / 2^number."""
    if number < 1:
        raise ValueError(f"a look number starts at 1, got {number}")
    return alpha / 2.0 ** number


def first_level(alpha: float) -> float:
    """The level of a holdout set's first look, level(alpha, 1): the one definition the design check, the futility
    stop's bound, the design power line of a new study and tasks.count=auto's sizing all take."""
    return level(alpha, 1)


def next_look(stored: Sequence[Mapping[str, Any]], family: Sequence[str], alpha: float,
              others: Sequence[Mapping[str, Any]] = ()) -> Look | None:
    """The look a conclusion testing `family` makes (None: an empty family tests nothing). `stored`: this study's
    looks; `others`: the looks other studies made on holdout tasks overlapping these. An earlier look of this study
    on the same family is returned as it was stored."""
    fam = tuple(sorted(set(family)))
    if not fam:
        return None
    spent = sum(float(e["level"]) for e in others)
    for i, entry in enumerate(stored):
        if tuple(sorted(entry.get("family", ()))) == fam:
            return Look(int(entry.get("number", i + 1)), float(entry["level"]), fam,
                        float(entry.get("spent_before", spent)), float(entry.get("alpha", alpha)), False,
                        int(entry.get("by_others", 0)))
        spent += float(entry["level"])
    earlier = [*others, *stored]
    budget = min([alpha, *(float(e["alpha"]) for e in earlier if e.get("alpha") is not None)])
    k = len(earlier) + 1
    lv = level(budget, k)
    left = max(budget - spent, 0.0) / 2.0
    if left < lv and not _close(left, lv):  # earlier looks were made under a larger alpha
        lv = left
    return Look(k, lv, fam, spent, budget, True, len(others))


def recorded(stored: Sequence[Mapping[str, Any]], look: Look) -> list[dict[str, Any]]:
    """The stored looks with `look` added (unchanged when it was stored already)."""
    out = [dict(e) for e in stored]
    if look.new:
        out.append({"family": list(look.family), "level": look.level, "number": look.number, "alpha": look.alpha,
                    "spent_before": look.spent_before, "by_others": look.by_others})
    return out


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)
