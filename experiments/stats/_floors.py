"""Noise floors and the sweep's comparison: sigma from repeated runs (NoiseFloor) or an A/B's replications
(ReplicationNoise), the variance ratio, Holm-Bonferroni, the baseline reference and the sweep's compare. The
methods are stated in experiments.stats._tests' docstring."""

from __future__ import annotations

import math
import statistics
from typing import Mapping, Sequence

import numpy as np
from scipy import stats as sps

from ._tests import FLOOR_SE, Comparison, NoiseFloor, ReplicationNoise, finite_array, wilcoxon_test


def _pooled_sd(groups: Sequence[Sequence[float]]) -> tuple[float, float]:
    """Pooled SD over groups with >= 2 values (weights r_i - 1), and the mean group size over all groups."""
    ss, dof, sizes = 0.0, 0, []
    for g in groups:
        x = finite_array(g, "replications")
        sizes.append(x.size)
        if x.size >= 2:
            ss += float(np.sum((x - x.mean()) ** 2))
            dof += x.size - 1
    sd = math.sqrt(ss / dof) if dof else float("nan")
    return sd, (float(np.mean(sizes)) if sizes else float("nan"))


# -- noise floors and the sweep's comparison ----------------------------------------------------------------------


def noise_floor(runs: Sequence[Mapping[str, float]]) -> NoiseFloor:
    """Noise floor from r runs of one configuration (each a task_id -> score mapping over the same tasks)."""
    runs = [dict(r) for r in runs if r]
    if not runs:
        return NoiseFloor(0.0, 0, 0, 0.0)
    tasks = sorted(set.intersection(*(set(r) for r in runs)))
    per_task = {t: statistics.stdev([r[t] for r in runs]) if len(runs) > 1 else 0.0 for t in tasks}
    sigma = math.sqrt(sum(sd * sd for sd in per_task.values()) / len(per_task)) if per_task else 0.0
    means = [sum(r[t] for t in tasks) / len(tasks) for r in runs] if tasks else [0.0]
    return NoiseFloor(sigma, len(runs), len(tasks), max(means) - min(means), per_task)


def replication_noise(reps_a: Sequence[Sequence[float]], reps_b: Sequence[Sequence[float]]) -> ReplicationNoise:
    """An A/B's noise from replications within each arm; reps_x[i] are task i's replicate values in arm x."""
    if len(reps_a) != len(reps_b):
        raise ValueError(f"need the same tasks in both arms, got {len(reps_a)} (A) and {len(reps_b)} (B)")
    sd_a, r_a = _pooled_sd(reps_a)
    sd_b, r_b = _pooled_sd(reps_b)
    sd_within, _ = _pooled_sd(list(reps_a) + list(reps_b))
    n = len(reps_a)
    sd_task = math.sqrt(sd_a**2 / r_a + sd_b**2 / r_b) if n else float("nan")
    sd_mean = sd_task / math.sqrt(n) if n else float("nan")
    return ReplicationNoise(sd_a, sd_b, sd_within, r_a, r_b, n, sd_task, sd_mean, FLOOR_SE * sd_mean)


def variance_ratio(sd_num: float, df_num: int, sd_den: float, df_den: int) -> tuple[float, float]:
    """F = sd_num^2 / sd_den^2 on (df_num, df_den) degrees of freedom, and the one-sided p of an F that large when
    both estimate the same variance (NaN, NaN when either side has no degrees of freedom or the denominator is 0)."""
    if df_num < 1 or df_den < 1 or not (sd_den > 0) or not math.isfinite(sd_num):
        return float("nan"), float("nan")
    f = sd_num ** 2 / sd_den ** 2
    return f, float(sps.f.sf(f, df_num, df_den))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values, in the input order (NaN treated as 1)."""
    p = np.array([1.0 if (v is None or not np.isfinite(v)) else float(v) for v in pvalues])
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        adjusted[idx] = running
    return adjusted.tolist()


def holm_reject(pvalues: Sequence[float], alpha: float = 0.05) -> list[bool]:
    return [q <= alpha for q in holm(pvalues)]


def baseline_reference(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per-task mean of the baseline runs."""
    tasks = sorted(set.intersection(*(set(r) for r in runs))) if runs else []
    return {t: sum(r[t] for r in runs) / len(runs) for t in tasks}


def compare(candidate: Mapping[str, float], baseline: Mapping[str, float], *, floor: float, alpha: float) -> Comparison:
    """The sweep's rule over the tasks both have: mean difference above the floor, and a one-sided Wilcoxon."""
    tasks = sorted(set(candidate) & set(baseline))
    diffs = [candidate[t] - baseline[t] for t in tasks]
    n = len(diffs)
    diff = sum(diffs) / n if n else 0.0
    nonzero = [d for d in diffs if abs(d) > 1e-12]
    try:
        p = wilcoxon_test(nonzero, alternative="greater").pvalue
    except ValueError:  # a score that is not a finite number: no evidence
        p = 1.0
    min_p = 0.5 ** len(nonzero) if nonzero else 1.0
    return Comparison(diff, p, floor, n, alpha, bool(n and diff > floor and p < alpha), min_p)
