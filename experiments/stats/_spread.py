"""The task x variant spread of a real effect, measured from data: a calibration's positive control
(heterogeneity) or a sweep's own candidates (spread_from_trials), for the power designs to read."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def heterogeneity(diffs: Sequence[float], noise_var: float) -> dict[str, float] | None:
    """How much a real effect varied across tasks, from per-task differences of a known effect (a calibration's
    positive control): tau^2 = var(diffs) - noise_var (the variance the runs' noise alone gives a difference,
    e.g. sigma^2 (1/R + 1/r) for R control runs against r baseline runs per task), floored at 0, and effect_cv =
    tau / |mean|, the spread relative to the effect (Design.effect_cv). None with fewer than 3 tasks or a mean of
    0. A rough estimate: n - 1 degrees of freedom, so the calibration prints it with its task count."""
    n = len(diffs)
    if n < 3:
        return None
    arr = np.asarray(diffs, dtype=float)
    mean, sd = float(arr.mean()), float(arr.std(ddof=1))
    if mean == 0.0 or not math.isfinite(mean):
        return None
    tau = math.sqrt(max(sd ** 2 - noise_var, 0.0))
    return {"n": n, "mean": mean, "sd": sd, "noise_sd": math.sqrt(max(noise_var, 0.0)), "tau": tau,
            "effect_cv": tau / abs(mean)}


def spread_from_trials(candidate_diffs: Sequence[Sequence[float]], noise_var: float) -> tuple[float, int] | None:
    """tau, the task x variant spread, from a sweep's own candidates: each candidate's per-task train differences
    against the baseline reference vary by its task-to-task effect and by run noise (noise_var, e.g. sigma^2
    (1 + 1/b) for one candidate run against b baseline runs). The within-candidate variances are pooled (weights
    n - 1), the noise taken out, floored at 0. Returns (tau, degrees of freedom), None below 3 tasks in all."""
    ss, df = 0.0, 0
    for d in candidate_diffs:
        arr = np.asarray(list(d), dtype=float)
        if arr.size >= 2 and np.all(np.isfinite(arr)):
            ss += float(((arr - arr.mean()) ** 2).sum())
            df += arr.size - 1
    if df < 2:
        return None
    return math.sqrt(max(ss / df - max(noise_var, 0.0), 0.0)), df
