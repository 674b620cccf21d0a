"""The synth_mutation sweep: the Optuna study, the objective and search, the final race and the holdout runs, the
Prompt Registry's write side, preflight, progress and the summary. Whether a candidate is promoted is
experiments.promotion's rule."""

from __future__ import annotations

from ._study import STUDY_ADVICE, check_decision_rule, stored_decision_rule
from ._summary import SweepSummary
from ._sweep import run_sweep

__all__ = [
    "STUDY_ADVICE",
    "SweepSummary",
    "check_decision_rule",
    "run_sweep",
    "stored_decision_rule",
]
