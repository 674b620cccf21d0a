"""experiments.stats: paired cost differences over tasks and the promotion rule's cost guard."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats as sps

from experiments.runs import TaskScore, Usage
from experiments.stats import COST_METRICS, CostGuard, cost_by_task, paired_cost
from experiments.stats._cost import cost_diffs


def _ts(task: str, completion: int, calls: int = 5, latency: float = 1.0, prompt: int = 900) -> TaskScore:
    return TaskScore(task_id=task, task_type="enumerated", score=5.0,
                     usage=Usage(prompt_tokens=prompt, completion_tokens=completion, llm_calls=calls, latency_s=latency))


def test_cost_by_task_averages_runs_and_leaves_out_what_was_not_measured():
    runs = [[_ts("a", 100), _ts("b", 200)], [_ts("a", 300)], [{"task_id": "c", "completion_tokens": None}]]
    assert cost_by_task(runs, "completion_tokens") == {"a": 200.0, "b": 200.0}
    assert cost_by_task(runs, "wall_s") == {"a": 1.0, "b": 1.0}
    with pytest.raises(ValueError, match="cost metric must be one of"):
        cost_by_task(runs, "dollars")


def test_paired_cost_is_the_t_interval_of_per_task_differences():
    base = {"a": 100.0, "b": 200.0, "c": 150.0, "d": 120.0}
    cand = {"a": 130.0, "b": 260.0, "c": 170.0, "d": 150.0, "e": 999.0}  # e: no baseline, not paired
    cd = paired_cost(cand, base, "completion_tokens", level=0.95)
    d = [30.0, 60.0, 20.0, 30.0]
    assert cd.n == 4 and cd.diff == pytest.approx(sum(d) / 4)
    lo, hi = sps.t.interval(0.95, 3, loc=sum(d) / 4, scale=sps.sem(d))
    assert cd.ci == pytest.approx((lo, hi))
    assert cd.ratio == pytest.approx((sum(cand[t] for t in base) / 4) / (sum(base.values()) / 4) - 1)
    assert "over 4 tasks" in cd.line()
    one = paired_cost({"a": 1.0}, {"a": 2.0}, "llm_calls")
    assert one.ci is None and one.diff == -1.0 and "fewer than 2 tasks" in one.line()
    assert paired_cost({}, {"a": 1.0}, "llm_calls").line() == "llm_calls: not measured"


def test_cost_diffs_covers_every_metric_from_runs():
    base = [[_ts("a", 100, calls=4), _ts("b", 100, calls=4)]]
    cand = [[_ts("a", 200, calls=6), _ts("b", 220, calls=6)]]
    out = cost_diffs(cand, base)
    assert set(out) == set(COST_METRICS)
    assert out["completion_tokens"].diff == pytest.approx(110.0)
    assert out["llm_calls"].diff == pytest.approx(2.0)
    assert out["prompt_tokens"].diff == pytest.approx(0.0)


def test_guard_holds_back_a_much_longer_candidate_and_passes_one_of_equal_cost():
    rng = random.Random(1)
    base = {f"t{i}": 300.0 + rng.gauss(0, 30) for i in range(12)}
    longer = {t: 2.0 * v + rng.gauss(0, 20) for t, v in base.items()}
    same = {t: v + rng.gauss(0, 10) for t, v in base.items()}
    guard = CostGuard("completion_tokens", 0.1, alpha=0.05)
    held = guard.check(longer, base)
    assert not held.passed and held.upper > 0.9 and "not shown below 10%" in held.reason
    ok = guard.check(same, base)
    assert ok.passed and ok.upper < 0.1
    off = CostGuard("completion_tokens", None).check(longer, base)
    assert off.passed and off.reason == "cost guard off" and off.upper > 0.9  # still measured, reported only


def test_guard_refuses_what_it_cannot_measure_and_bad_settings():
    g = CostGuard("llm_calls", 0.2)
    assert not g.check({"a": 5.0}, {"a": 5.0}).passed  # one task: no interval
    assert not g.check({"a": 5.0, "b": 4.0}, {"a": 0.0, "b": 0.0}).passed  # baseline cost 0
    with pytest.raises(ValueError, match="sweep.cost_metric"):
        CostGuard("dollars", 0.1)
    with pytest.raises(ValueError, match="sweep.max_cost_increase"):
        CostGuard("llm_calls", -0.1)
    with pytest.raises(ValueError, match="sweep.max_cost_increase"):
        CostGuard("llm_calls", math.inf)


def test_guard_passes_a_candidate_exactly_at_the_limit_at_most_alpha_of_the_time():
    """The upper bound is a one-sided 95% bound: at a true increase equal to the limit it is below the limit in
    about 5% of designs (Monte Carlo over 8-task holdouts with task-to-task spread in cost)."""
    rng = random.Random(7)
    guard = CostGuard("completion_tokens", 0.2, alpha=0.05)
    passed = 0
    n_sim = 1500
    for _ in range(n_sim):
        base_true = [rng.uniform(200, 600) for _ in range(8)]
        base = {f"t{i}": b + rng.gauss(0, 40) for i, b in enumerate(base_true)}
        cand = {f"t{i}": 1.2 * b + rng.gauss(0, 40) for i, b in enumerate(base_true)}
        passed += guard.check(cand, base).passed
    assert passed / n_sim <= 0.075  # alpha 0.05 plus Monte Carlo error (3 sd is about 0.017)
