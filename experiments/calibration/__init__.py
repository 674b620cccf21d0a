"""`+sweep=calibrate`: judge and generator variance, an A/A test and a positive control, stored for the
designs that read them."""

from __future__ import annotations

from ._calibrate import CalibrationFailed, generator_seed, paired_check, pick_tasks, run_calibration
from ._summary import CALIBRATION_BEGIN, CALIBRATION_END, format_calibration

__all__ = [
    "CALIBRATION_BEGIN",
    "CALIBRATION_END",
    "CalibrationFailed",
    "format_calibration",
    "generator_seed",
    "paired_check",
    "pick_tasks",
    "run_calibration",
]
