"""MLflow: the sweep's parent and trial runs, their traces and assessments, plots, and instruction diffs."""

from __future__ import annotations

from ._mlflow import UI_ADDRESS, MLflowTracker, NullTracker, make_tracker, trial_params, ui_command
from ._plots import (HEATMAP_PNG, HISTORY_PNG, OPERATORS_PNG, QUALITY_COST_PNG, calibration_plots, history_points,
                     operator_stats, plot_quality_cost, score_matrix, sweep_plots)
from ._textdiff import instruction_diff
from ._traces import (EVALUATION_RUN, RUN_TYPE_TAG, TOKEN_USAGE, ChromeTrace, FailedRun, assessments, exporting_to,
                      log_evaluation_run, log_run_traces, read_chrome_trace, span_attributes, span_tree, with_context)

__all__ = [
    "ChromeTrace",
    "EVALUATION_RUN",
    "FailedRun",
    "HEATMAP_PNG",
    "HISTORY_PNG",
    "MLflowTracker",
    "NullTracker",
    "OPERATORS_PNG",
    "QUALITY_COST_PNG",
    "RUN_TYPE_TAG",
    "TOKEN_USAGE",
    "UI_ADDRESS",
    "assessments",
    "calibration_plots",
    "exporting_to",
    "history_points",
    "instruction_diff",
    "log_evaluation_run",
    "log_run_traces",
    "make_tracker",
    "operator_stats",
    "plot_quality_cost",
    "read_chrome_trace",
    "score_matrix",
    "span_attributes",
    "span_tree",
    "sweep_plots",
    "trial_params",
    "ui_command",
    "with_context",
]
