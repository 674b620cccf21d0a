"""The paired A/B test: design and pre-registration, the cells and their ledger, the analysis and verdict,
the report and the summary."""

from __future__ import annotations

from ._analysis import load_result, paired_stats
from ._cells import ABDesign
from ._design import ab_paths, arm_configs, check_ab_design, design_from_config, observed_power_line
from ._entry import run_ab_test
from ._pairwise import PairwiseResult, analyse_pairwise, judge_pairs, make_judge, pairwise_verdict
from ._run import run_ab

__all__ = [
    "ABDesign",
    "PairwiseResult",
    "ab_paths",
    "analyse_pairwise",
    "arm_configs",
    "check_ab_design",
    "design_from_config",
    "judge_pairs",
    "make_judge",
    "load_result",
    "observed_power_line",
    "paired_stats",
    "pairwise_verdict",
    "run_ab",
    "run_ab_test",
]
