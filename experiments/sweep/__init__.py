"""The synth_mutation sweep: the Optuna study, the objective and search, the final race and holdout, the
promotion rule, the Prompt Registry's write side, preflight, progress and the summary."""

from __future__ import annotations

from ._holdout_tests import TaskDiffs
from ._optimizer import (credit_from, gate, gate_tasks, merge_pair, pareto_leads, pruner_threshold, race_looks,
                         race_step, sample_parent, thompson_choice)
from ._promotion import Candidate, HoldoutScores, HoldoutTest, decide, race, ranked
from ._screening import futility_stop, passes_train_filter
from ._search_state import candidate_hash
from ._study import STUDY_ADVICE, StudyMismatch, check_decision_rule, open_study, stored_decision_rule
from ._summary import SweepSummary
from ._sweep import run_sweep

__all__ = [
    "Candidate",
    "HoldoutScores",
    "HoldoutTest",
    "STUDY_ADVICE",
    "StudyMismatch",
    "SweepSummary",
    "TaskDiffs",
    "candidate_hash",
    "check_decision_rule",
    "credit_from",
    "decide",
    "futility_stop",
    "gate",
    "gate_tasks",
    "merge_pair",
    "open_study",
    "pareto_leads",
    "passes_train_filter",
    "pruner_threshold",
    "race",
    "race_looks",
    "race_step",
    "ranked",
    "run_sweep",
    "sample_parent",
    "stored_decision_rule",
    "thompson_choice",
]
