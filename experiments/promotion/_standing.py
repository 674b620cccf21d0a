"""The study's standing winner: a conclusion's winner is stored in the study; a later conclusion whose look confirms
no candidate, or only one with a lower holdout mean (the same stored baseline holdout runs), keeps it: the earlier
look's confirmation stands at that look's level, so the summary, the registry line and promoted_synth.yaml keep
agreeing with the alias it moved. A better confirmed candidate replaces it."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ._costs import holdout_cost_diffs
from ._verdict import HoldoutRow, Promotion, row_from_record, row_record

STANDING_ATTR = "standing_winner"  # the study's promoted row: carried forward by later conclusions


def standing_winner(study: Any, verdict: Promotion, base_key: str, looks: Sequence[Mapping[str, Any]]) -> Promotion:
    """The verdict with the study's standing winner: its winner stored as the standing one (with the number of the
    stored look, of `looks`, whose family holds it), or the standing one carried forward as a row of its own and
    the winner when this look promotes nothing better."""
    rec = study.user_attrs.get(STANDING_ATTR)
    new = verdict.winner
    if new is not None and (rec is None or rec["row"]["hash"] == new.hash
                            or new.holdout_mean > float(rec["row"]["holdout_mean"])):
        study.set_user_attr(STANDING_ATTR, {"row": row_record(new), "look": _look_number(looks, new)})
        return verdict
    if rec is None:
        return verdict
    why = ("this look confirmed no candidate" if new is None else
           f"this look's winner trial #{new.trial} has a lower holdout mean ({new.holdout_mean:.3f} < "
           f"{float(rec['row']['holdout_mean']):.3f})")
    look = f"holdout look {rec['look']} of these holdout tasks" if rec.get("look") else "an earlier look"
    row = row_from_record(rec["row"], cost_diffs=holdout_cost_diffs(study.user_attrs, rec["row"]["hash"], base_key),
                          standing=f"the study's standing winner, confirmed at {look} (level "
                                   f"{float(rec['row']['holdout_level']):.4g}); kept: {why}")
    return Promotion((*verdict.rows, row), row, verdict.pick or row)


def _look_number(looks: Sequence[Mapping[str, Any]], row: HoldoutRow) -> int | None:
    """The number of the stored look whose family holds the row's candidate (the latest such)."""
    found = [int(e.get("number", i + 1)) for i, e in enumerate(looks) if row.hash in e.get("family", ())]
    return found[-1] if found else None
