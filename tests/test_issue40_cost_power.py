"""Issue 40, findings G and I and D(3)'s design refusal: the cost guard holds its level for skewed costs and finds
bounds below 1; the design power line costs little for any noise and says zero noise as such; a holdout too small
to reach the look's level is refused before anything is written."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from experiments.stats import CostGuard


def _lognormal_world(rng: np.random.Generator, n: int, increase: float) -> tuple[dict, dict]:
    """Task base costs lognormal over tasks (median 300 tokens, log sd 1); the candidate's per-task ratio lognormal
    (log sd 0.4) with mean 1 + increase, so the ratio of total costs is 1 + increase in expectation."""
    b = np.exp(rng.normal(math.log(300.0), 1.0, n))
    r = (1.0 + increase) * np.exp(rng.normal(-0.08, 0.4, n))
    return {f"t{i}": float(x) for i, x in enumerate(b * r)}, {f"t{i}": float(x) for i, x in enumerate(b)}


@pytest.mark.parametrize("n", [8, 24])
def test_cost_guard_holds_its_level_at_the_limit_for_lognormal_costs(n):
    """3306971's t on c - (1 + L) b passed these candidates, whose cost is exactly at the 10% limit, 0.070 (8
    tasks) and 0.074 (24 tasks) of the time at level 0.05 (a right-skewed difference undercovers); now 0.045 and
    0.047."""
    rng = np.random.default_rng([40, n])
    guard = CostGuard("completion_tokens", 0.1, alpha=0.05)
    worlds = 2000
    passed = sum(guard.check(*_lognormal_world(rng, n, 0.1)).passed for _ in range(worlds))
    assert passed / worlds <= 0.06  # level 0.05 plus 2 Monte Carlo sd (0.005)


def test_a_cheaper_candidate_dominated_by_one_heavy_task_gets_a_bound_below_zero():
    """One task costs 3,000 tokens, seven about 100; the candidate halves every one. 3306971 searched the bound only
    upward from 1 and held it back as 'fewer than 2 tasks with a cost, or a baseline cost of 0' with 8 tasks."""
    base = {f"t{i}": 100.0 + 3 * i for i in range(7)} | {"heavy": 3000.0}
    cand = {t: 0.5 * v * (1.03 if i % 2 else 0.97) for i, (t, v) in enumerate(base.items())}
    res = CostGuard("completion_tokens", 0.1, alpha=0.025).check(cand, base)
    assert res.passed, res.reason
    assert res.upper is not None and -0.6 < res.upper < -0.4
    assert "fewer than 2" not in res.reason


@pytest.mark.parametrize("bad", [-50.0, math.nan])
def test_a_negative_or_nan_cost_holds_the_candidate_back_with_one_line_naming_it(bad):
    base = {f"t{i}": 100.0 + i for i in range(8)}
    cand = {t: 0.8 * v for t, v in base.items()} | {"t3": bad}
    res = CostGuard("completion_tokens", 0.1).check(cand, base)
    assert not res.passed and res.upper is None
    assert "t3" in res.reason and "expected a finite cost >= 0" in res.reason and "\n" not in res.reason
