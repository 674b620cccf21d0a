"""MLflow: the sweep's parent and trial runs, their traces and assessments, plots, and instruction diffs."""

from __future__ import annotations

from ._mlflow import make_tracker
from ._tracker import NullTracker, trial_params, ui_command
from ._plots import calibration_plots, sweep_plots
from ._textdiff import instruction_diff
from ._traces import FailedRun, log_evaluation_run, log_run_traces

__all__ = [
    "FailedRun",
    "NullTracker",
    "calibration_plots",
    "instruction_diff",
    "log_evaluation_run",
    "log_run_traces",
    "make_tracker",
    "sweep_plots",
    "trial_params",
    "ui_command",
]
