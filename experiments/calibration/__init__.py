"""`+sweep=calibrate`: judge and generator variance, an A/A test and a positive control, stored for the
designs that read them."""

from __future__ import annotations

from ._arms import REWRITES, rewrite_of, rewrite_rule, runner_at
from ._calibrate import CalibrationFailed, generator_seed, paired_check, pick_tasks, run_calibration
from ._decompose import decompose, frozen_share, levers, pairwise_g
from ._summary import CALIBRATION_BEGIN, CALIBRATION_END, format_calibration

__all__ = [
    "CALIBRATION_BEGIN",
    "CALIBRATION_END",
    "CalibrationFailed",
    "REWRITES",
    "decompose",
    "frozen_share",
    "levers",
    "pairwise_g",
    "rewrite_of",
    "rewrite_rule",
    "runner_at",
    "format_calibration",
    "generator_seed",
    "paired_check",
    "pick_tasks",
    "run_calibration",
]
