"""The synth_mutation sweep: the Optuna study, the objective and search, the final race and holdout, the
promotion rule, the Prompt Registry's write side, preflight, progress and the summary."""

from __future__ import annotations

from ._holdout_tests import TaskDiffs
from ._objective import Objective, make_objective
from ._optimizer import (Credit, credit_from, gate, gate_tasks, merge_pair, pareto_leads, pocock_p, pruner_threshold,
                         race_looks, race_step, sample_parent, thompson_choice)
from ._preflight import ab_preflight_lines, preflight_lines, project_sweep
from ._promotion import (Candidate, HoldoutScores, HoldoutTest, candidates, decide, holdout_runs, race, race_runs,
                         ranked, split_scores)
from ._registry import SweepRegistry, register_texts, sweep_evidence
from ._screening import futility_stop, passes_train_filter
from ._search_state import Evaluated, SearchState, candidate_hash, state_from_trials
from ._study import (STUDY_ADVICE, StudyMismatch, baseline_trial, check_decision_rule, frozen_trial, holdout_run,
                     open_store, open_study, store_holdout_run, stored_decision_rule, stored_holdout)
from ._summary import SUMMARY_BEGIN, SUMMARY_END, SweepSummary, format_sweep
from ._sweep import run_sweep

__all__ = [
    "Candidate",
    "Credit",
    "Evaluated",
    "HoldoutScores",
    "HoldoutTest",
    "Objective",
    "STUDY_ADVICE",
    "SUMMARY_BEGIN",
    "SUMMARY_END",
    "SearchState",
    "StudyMismatch",
    "SweepRegistry",
    "SweepSummary",
    "TaskDiffs",
    "ab_preflight_lines",
    "baseline_trial",
    "candidate_hash",
    "candidates",
    "check_decision_rule",
    "credit_from",
    "decide",
    "format_sweep",
    "frozen_trial",
    "futility_stop",
    "gate",
    "gate_tasks",
    "holdout_run",
    "holdout_runs",
    "make_objective",
    "merge_pair",
    "open_store",
    "open_study",
    "pareto_leads",
    "passes_train_filter",
    "pocock_p",
    "preflight_lines",
    "project_sweep",
    "pruner_threshold",
    "race",
    "race_looks",
    "race_runs",
    "race_step",
    "ranked",
    "register_texts",
    "run_sweep",
    "sample_parent",
    "split_scores",
    "state_from_trials",
    "store_holdout_run",
    "stored_decision_rule",
    "stored_holdout",
    "sweep_evidence",
    "thompson_choice",
]
