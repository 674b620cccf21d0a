"""The results ledger: one JSONL row per trial (keep / discard / crash / pruned / gated / duplicate), beside MLflow."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.stores import append_jsonl, file_lock, read_jsonl

STATUSES = ("keep", "discard", "crash", "pruned", "gated", "duplicate")


def ledger_status(state: str, value: float | None, best_before: float | None, duplicate: bool,
                  gated: bool = False) -> str:
    """crash (FAIL), gated (PRUNED by the minibatch gate), pruned (PRUNED), duplicate (reused value), keep (new
    best), else discard."""
    if state == "FAIL":
        return "crash"
    if state == "PRUNED" and gated:
        return "gated"
    if state == "PRUNED":
        return "pruned"
    if duplicate:
        return "duplicate"
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "crash"
    if best_before is None or value > best_before:
        return "keep"
    return "discard"


def row_from_trial(trial: Any, best_before: float | None, base_attrs: Mapping[str, Any] | None = None
                   ) -> dict[str, Any]:
    """A ledger row from an Optuna FrozenTrial (everything needed is in its state, value and user attrs). With the
    baseline trial's attrs, `cost` holds the trial's train cost against the baseline's per metric (the mean
    difference per task with a 95% t interval over the tasks both ran, experiments.stats.CostDiff.to_dict)."""
    attrs = trial.user_attrs
    state = trial.state.name
    value = trial.value if state == "COMPLETE" else attrs.get("partial_value")
    return {
        "trial": trial.number,
        "status": ledger_status(state, value, best_before, attrs.get("duplicate_of") is not None,
                                bool(attrs.get("gated_out"))),
        "state": state,
        "value": value,
        "operator": attrs.get("operator") or trial.params.get("operator"),  # the one used
        "operator_requested": attrs.get("operator_requested") or trial.params.get("operator"),
        "hash": attrs.get("instruction_hash"),
        "parent": attrs.get("parent_hash"),
        "duplicate_of": attrs.get("duplicate_of"),
        "elapsed_s": attrs.get("elapsed_s"),
        "llm_calls": attrs.get("llm_calls"),
        "reason": attrs.get("fail_reason"),  # "gated out on g task(s): ..." for a gated candidate
        "gate": attrs.get("gate"),
        "selection_bias": attrs.get("selection_bias"),
        "judge_failures": int(attrs.get("judge_failures") or 0),  # judge replies that could not be read; 0 when none
        "cost": _cost(attrs, base_attrs),
    }


def _cost(attrs: Mapping[str, Any], base_attrs: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """metric -> paired cost difference against the baseline trial; None when either has no recorded cost."""
    if not base_attrs or not attrs.get("task_costs") or not base_attrs.get("task_costs"):
        return None
    from experiments.stats import train_cost_diffs

    return {m: d.to_dict() for m, d in train_cost_diffs(attrs, base_attrs).items()}


class Ledger:
    """ledger.jsonl of one study. Once `belong_to(study_id)` has run, each row carries the study's id (`study`) and
    a ledger holding another study's rows (optuna.db moved aside, the project's own advice for a damaged one) is
    moved aside whole: the ledger never mixes two studies' trials."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.study_id: str | None = None

    def belong_to(self, study_id: str) -> Path | None:
        """Make this the ledger of study_id: when the file holds a row of another study (or rows written before rows
        carried one), it is renamed to ledger.<their study id>.jsonl (or ledger.before-<this id>.jsonl) and a new
        ledger begins; sync then writes this study's rows. Returns where the old rows went, None when none moved."""
        self.study_id = study_id
        with file_lock(self.path.with_name(self.path.name + ".lock")):
            rows = self.rows()
            others = {str(r.get("study")) for r in rows if r.get("study") != study_id}
            if not others:
                return None
            theirs = next(iter(others)) if len(others) == 1 and "None" not in others else f"before-{study_id}"
            aside = self.path.with_name(f"{self.path.stem}.{theirs[:12]}{self.path.suffix}")
            n = 1
            while aside.exists():
                aside = self.path.with_name(f"{self.path.stem}.{theirs[:12]}-{n}{self.path.suffix}")
                n += 1
            os.replace(self.path, aside)
            return aside

    def rows(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path)

    def trial_numbers(self) -> set[int]:
        return {int(r["trial"]) for r in self.rows() if "trial" in r}

    def append(self, row: dict[str, Any]) -> None:
        if row.get("status") not in STATUSES:
            raise ValueError(f"ledger status {row.get('status')!r}; expected one of {', '.join(STATUSES)}")
        append_jsonl(self.path, row)

    def sync(self, trials: Iterable[Any]) -> int:
        """Append rows for finished trials not yet in the ledger (idempotent). Returns rows written.

        Under a file lock: two workers syncing at once would both see a trial missing and write it twice.
        """
        with file_lock(self.path.with_name(self.path.name + ".lock")):
            return self._sync(trials)

    def _sync(self, trials: Iterable[Any]) -> int:
        have = self.trial_numbers()
        best: float | None = None
        written = 0
        trials = sorted(trials, key=lambda t: t.number)
        base = next((t.user_attrs for t in trials if t.user_attrs.get("operator") == "baseline"
                     and t.state.name == "COMPLETE"), None)  # search_state.BASELINE: each row's cost is against it
        for t in trials:
            if t.state.name not in ("COMPLETE", "PRUNED", "FAIL"):
                continue
            if t.number not in have:
                row = row_from_trial(t, best, base)
                self.append({**row, "study": self.study_id} if self.study_id else row)
                written += 1
            if t.state.name == "COMPLETE" and t.value is not None:
                best = t.value if best is None else max(best, t.value)
        return written
