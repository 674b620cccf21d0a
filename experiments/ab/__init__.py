"""The paired A/B test: design and pre-registration, the cells and their ledger, the analysis and verdict,
the report and the summary."""

from __future__ import annotations

from ._analysis import load_result, paired_stats
from ._cells import (ABDesign, PreregistrationMismatch, arm_order, judge_failures_of, pair_seed, prereg_path,
                     write_or_check_prereg)
from ._design import ab_metrics, ab_paths, arm_configs, cell_plan, check_ab_design, design_from_config, selection_note
from ._run import run_ab
from ._entry import run_ab_from_config, run_ab_test, summary_metrics
from ._report import AB_BEGIN, AB_END, DIFF_PNG, FOREST_PNG, REPORT_NAME, render_markdown, write_report

__all__ = [
    "ABDesign",
    "AB_BEGIN",
    "AB_END",
    "DIFF_PNG",
    "FOREST_PNG",
    "PreregistrationMismatch",
    "REPORT_NAME",
    "ab_metrics",
    "ab_paths",
    "arm_configs",
    "arm_order",
    "cell_plan",
    "check_ab_design",
    "design_from_config",
    "judge_failures_of",
    "load_result",
    "pair_seed",
    "paired_stats",
    "prereg_path",
    "render_markdown",
    "run_ab",
    "run_ab_from_config",
    "run_ab_test",
    "selection_note",
    "summary_metrics",
    "write_or_check_prereg",
    "write_report",
]
