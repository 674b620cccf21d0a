"""Sensitivity, power and level of the project's decisions (A/B, sweep, calibration), mostly in simulation."""
