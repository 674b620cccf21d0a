"""`+sweep=calibrate`: judge and generator variance, an A/A test and a positive control, stored for the
designs that read them."""

from __future__ import annotations

from ._calibrate import run_calibration

__all__ = ["run_calibration"]
