"""One error budget for a study's life: every holdout conclusion it ever made spends from sweep.alpha.

A study that is resumed ("raise sweep.n_trials, rerun to continue") concludes again, and a new top candidate is
tested on the same holdout tasks. Testing each at full alpha lets the chance that some no-better candidate is
promoted grow with every conclusion (issue 36: 4.7% -> 17.2% over five). Here look k (the k-th distinct family
of train-filtered candidates a study tested on its holdout) is tested at alpha / 2^k, so the levels of all looks
ever made sum to less than alpha (Bonferroni over looks: it holds whatever the dependence between them, and the
same holdout tasks make them dependent). A conclusion that tests the same family again (a resume with no new
trial) is the same look at the same level: it spends nothing more. A conclusion that tests nothing (no candidate
passed the train filter) is no look.

The looks are stored in the study (user attr holdout_looks, a list of {"family": [hashes], "level": float}), so
every worker and every resume reads the same budget. Pure functions; the sweep stores what they return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

LOOKS_ATTR = "holdout_looks"


@dataclass(frozen=True)
class Look:
    """One holdout conclusion of a study: its number, its level, and what earlier looks spent."""

    number: int  # 1-based: the k-th distinct family this study tested on its holdout
    level: float  # alpha / 2^number
    family: tuple[str, ...]  # the hashes tested (sorted)
    spent_before: float  # levels of the earlier looks, summed
    alpha: float  # the study's whole budget
    new: bool  # True: not stored yet (the caller stores it once the test ran)

    @property
    def line(self) -> str:
        again = "" if self.new else " (the same candidates as before: the same look, nothing more spent)"
        return (f"holdout look {self.number} of this study: level {self.level:.4g} = alpha {self.alpha:g} / "
                f"2^{self.number}; earlier looks spent {self.spent_before:.4g}; every look together stays under "
                f"alpha {self.alpha:g}{again}")


def level(alpha: float, number: int) -> float:
    """The level of look `number` (1-based): alpha / 2^number."""
    if number < 1:
        raise ValueError(f"a look number starts at 1, got {number}")
    return alpha / 2.0 ** number


def next_look(stored: Sequence[Mapping[str, Any]], family: Sequence[str], alpha: float) -> Look | None:
    """The look a conclusion testing `family` makes (None: an empty family tests nothing). An earlier look of the
    same family is returned as it was stored."""
    fam = tuple(sorted(set(family)))
    if not fam:
        return None
    spent = 0.0
    for i, entry in enumerate(stored):
        if tuple(sorted(entry.get("family", ()))) == fam:
            return Look(i + 1, float(entry["level"]), fam, spent, alpha, False)
        spent += float(entry["level"])
    k = len(stored) + 1
    return Look(k, level(alpha, k), fam, spent, alpha, True)


def recorded(stored: Sequence[Mapping[str, Any]], look: Look) -> list[dict[str, Any]]:
    """The stored looks with `look` added (unchanged when it was stored already)."""
    out = [dict(e) for e in stored]
    if look.new:
        out.append({"family": list(look.family), "level": look.level})
    return out
