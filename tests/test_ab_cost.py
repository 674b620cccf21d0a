"""Issue 34 item 3: the A/B report's cost figures. Each cell keeps its run's usage; the analysis gives both arms'
mean cost per task and the paired difference B - A with its interval over tasks; the report, the MLflow metrics
and the printed summary show them. All fail on 6cbf984 (no cell usage, no result.cost)."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.ab._cells import ABDesign
from experiments.ab._run import run_ab
from experiments.ab._analysis import load_result
from experiments.ab._entry import run_ab_from_config, summary_metrics
from experiments.ab._report import render_markdown
from experiments.stats import Preregistration
from harness.stores import read_jsonl

TASKS = tuple(f"task-{i}" for i in range(6))
ARMS = {"short": {"long": False}, "long": {"long": True}}
PREREG = Preregistration("Longer answers score higher", metric="score", min_effect=0.0, alpha=0.05,
                         direction="greater", n_tasks=6, replications=2)


class CostlyArm:
    """Arm "long" writes 100 more completion tokens per run (+/- 5), takes one more call and 2 s more."""

    def __init__(self, usage: bool = True, bad_usage: dict | None = None):
        self.usage, self.bad_usage = usage, bad_usage

    def __call__(self, arm, overrides, task, replication, seed):
        rng = np.random.default_rng([seed, int(overrides["long"])])
        i = TASKS.index(task)
        extra = 100 + rng.normal(0, 5) if overrides["long"] else 0.0
        out = {"score": 5.0 + 0.3 * i + rng.normal(0, 0.2), "status": "ok",
               "meta": {"llm_calls": 4 + int(overrides["long"])}}
        if self.usage:
            out["usage"] = {"completion_tokens": 300 + 50 * i + extra, "prompt_tokens": 1000 + 10 * i,
                            "llm_calls": 4 + int(overrides["long"]), "latency_s": 3.0 + 2.0 * overrides["long"]}
        if self.bad_usage is not None:
            out["usage"] = self.bad_usage
        return out


def _run(tmp_path, arm) -> tuple:
    design = ABDesign(tasks=TASKS, arms=ARMS, replications=2, seed=3)
    return run_ab(design, PREREG, arm, ledger_path=tmp_path / "ab.jsonl"), design


def test_cells_keep_usage_and_the_result_pairs_both_arms_costs_over_tasks(tmp_path):
    result, design = _run(tmp_path, CostlyArm())
    cells = [r for r in read_jsonl(tmp_path / "ab.jsonl") if r.get("kind") == "cell"]
    assert all(set(c["usage"]) == {"completion_tokens", "prompt_tokens", "llm_calls", "latency_s"} for c in cells)
    tok = result.cost["completion_tokens"]
    assert tok.n == 6 and tok.level == pytest.approx(0.95)
    assert tok.base_mean == pytest.approx(300 + 50 * 2.5)  # arm A = short, the mean over tasks 0..5
    assert tok.cand_mean - tok.base_mean == pytest.approx(tok.diff)
    assert 90 < tok.diff < 110 and tok.ci[0] < tok.diff < tok.ci[1] and tok.ci[0] > 80 and tok.ci[1] < 120
    assert result.cost["llm_calls"].diff == pytest.approx(1.0) and result.cost["wall_s"].diff == pytest.approx(2.0)
    assert result.cost["prompt_tokens"].diff == pytest.approx(0.0)
    # the same figures again from the ledger alone
    again = load_result(design, PREREG, tmp_path / "ab.jsonl")
    assert again.cost["completion_tokens"].diff == pytest.approx(tok.diff)

    md = render_markdown(result, PREREG)
    section = md[md.index("## Cost"):md.index("## Plots")]
    row = next(ln for ln in section.splitlines() if ln.startswith("| completion_tokens |"))
    cells_md = [c.strip() for c in row.strip("|").split("|")]
    assert cells_md[1] == "6" and float(cells_md[2]) == pytest.approx(425.0) and 90 < float(cells_md[4]) < 110
    assert "| metric | tasks | short | long | diff | 95% CI | relative |" in section
    assert "wall_s is the seconds spent in uncached model calls" in section


def test_a_ledger_without_usage_is_not_measured_never_zero(tmp_path):
    result, _ = _run(tmp_path, CostlyArm(usage=False))
    tok = result.cost["completion_tokens"]
    assert tok.n == 0 and tok.diff is None and tok.base_mean is None  # not 0 tokens: not measured
    assert result.cost["llm_calls"].diff == pytest.approx(1.0)  # the meta's count, kept before "usage" existed
    md = render_markdown(result, PREREG)
    assert "| completion_tokens | 0 | not measured | not measured | - | - | - |" in md
    m = summary_metrics(result)
    assert not any(k.startswith(("cost.completion_tokens", "cost_diff.completion_tokens")) for k in m)
    assert m["cost_diff.llm_calls"] == pytest.approx(1.0) and m["cost.llm_calls.long"] == pytest.approx(5.0)


@pytest.mark.parametrize("bad, message", [
    ({"tokens": 5}, "run_arm usage must be a dict with keys among completion_tokens, prompt_tokens"),
    ({"completion_tokens": -1}, "run_arm usage values must be >= 0"),
    ({"completion_tokens": "many"}, "usage 'completion_tokens' must be a number, got 'many'"),
])
def test_bad_usage_fails_the_cell_with_one_line(tmp_path, bad, message):
    result, _ = _run(tmp_path, CostlyArm(bad_usage=bad))
    cells = [r for r in read_jsonl(tmp_path / "ab.jsonl") if r.get("kind") == "cell"]
    assert all(c["status"] == "failed" and message in c["error"] and "\n" not in c["error"] for c in cells)
    assert result.cost["completion_tokens"].diff is None


def test_mlflow_metrics_carry_both_arms_and_the_interval(tmp_path):
    result, _ = _run(tmp_path, CostlyArm())
    m = summary_metrics(result)
    tok = result.cost["completion_tokens"]
    assert m["cost.completion_tokens.short"] == pytest.approx(tok.base_mean)
    assert m["cost.completion_tokens.long"] == pytest.approx(tok.cand_mean)
    assert m["cost_diff.completion_tokens"] == pytest.approx(tok.diff)
    assert (m["cost_diff.completion_tokens_lo"], m["cost_diff.completion_tokens_hi"]) == pytest.approx(tok.ci)
    assert {f"cost_diff.{k}" for k in ("prompt_tokens", "llm_calls", "wall_s")} <= set(m)


def test_the_printed_summary_has_the_cost_block(_isolated_results):
    from experiments.ab._report import AB_BEGIN, AB_END
    from experiments.config import compose_config, to_experiment

    def arm(name, overrides, task, replication, seed):
        skip = overrides.get("planner.skip_prior_knowledge", False)
        return {"score": 5.0 + 0.01 * (seed % 5), "status": "ok",
                "usage": {"completion_tokens": 400 - 150 * skip + (seed % 7), "llm_calls": 6 - skip}}

    exp = to_experiment(compose_config(["+sweep=prior_knowledge_ab", "backend=fake", "benchmark=smoke",
                                        "ab.allow_underpowered=true", "ab.replications=1", "mlflow.enabled=false"]))
    lines: list[str] = []
    run = run_ab_from_config(exp, run_arm=arm, out=lines.append)
    block = run.summary[run.summary.index(AB_BEGIN):run.summary.index(AB_END)].splitlines()  # inside the block
    cost = [ln for ln in block if ln.startswith("cost (B-A) ")]
    assert len(cost) == 4 and cost == [ln for ln in "\n".join(lines).splitlines() if ln.startswith("cost (B-A) ")]  # printed as well
    assert "completion_tokens -150.0 per task [" in cost[0] and "over 5 tasks" in cost[0]
    assert cost[1] == "cost (B-A) prompt_tokens: not measured" and "llm_calls -1.0 per task" in cost[2]
    assert run.paths.summary.read_text(encoding="utf-8").rstrip("\n") == run.summary
    assert "## Cost" in run.report.read_text(encoding="utf-8")


def test_real_harness_cells_record_their_usage(_isolated_results):
    from test_ab_entry import _exp, _fake_llm

    from harness.inference._roles import fake_roles

    exp = _exp("ab.replications=1", "ab.split=train", "wiggum.max_rounds=1", "research.max_rounds=1",
               "research.enrich_urls=0", "search.provider=local", "orchestrator.mode=off", "mlflow.enabled=false")
    run = run_ab_from_config(exp, roles=fake_roles(_fake_llm()), out=lambda _: None)
    cells = [r for r in read_jsonl(run.paths.ledger) if r.get("kind") == "cell"]
    assert cells and all(c["status"] == "ok" for c in cells)
    for c in cells:
        u = c["usage"]
        assert u["completion_tokens"] > 0 and u["prompt_tokens"] > 0 and u["latency_s"] >= 0
        assert u["llm_calls"] == c["meta"]["llm_calls"] > 0
        assert u["completion_tokens"] + u["prompt_tokens"] == c["secondary"]["tokens"]
    assert run.result.cost["completion_tokens"].n == 3 and run.result.cost["llm_calls"].diff is not None
