"""Issue 52, the A/B's items (A2, A3, A5, B1, B2 and B4 A/B halves, B10), through run_ab, run_ab_from_config (the
command's own function) and the command line. Each test fails on ac27838.

The arms are scripted (tests/test_ab_pairwise.py's AnswerArm writes real answer files; the judge is the real
evaluators.pairwise.compare_pair on a scripted FakeLLM); the ledger, pre-registration, analysis and verdict are the
real ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_ab_pairwise import AnswerArm, _exp, _run, judge_llm

import experiments
from experiments.ab import check_ab_design
from experiments.ab._cells import ABDesign
from experiments.ab._run import run_ab
from experiments.ab._pairwise import pairwise_verdict
from experiments.config import ConfigError, compose_config, to_experiment
from experiments.stats import Preregistration, signflip_test
from harness.inference._fake import FakeLLM
from harness.stores import read_jsonl

ROOT = Path(experiments.__file__).resolve().parents[1]


class ShiftArm:
    """run_arm: task i scores 5 + i in arm A; arm B adds shift(task index) (no noise unless sd > 0)."""

    def __init__(self, shift, sd: float = 0.0):
        self.shift, self.sd, self.calls = shift, sd, 0

    def __call__(self, arm, overrides, task, replication, seed):
        self.calls += 1
        i = int(task[1:])
        noise = np.random.default_rng(seed + (arm == "B")).normal(0, self.sd) if self.sd else 0.0
        return {"score": 5.0 + i + (self.shift(i) if arm == "B" else 0.0) + noise, "status": "ok"}


def _design(n: int, reps: int = 1) -> ABDesign:
    return ABDesign(tasks=[f"t{i}" for i in range(n)], arms={"A": {"x": 0}, "B": {"x": 1}}, replications=reps)


def _prereg(n: int, **kw) -> Preregistration:
    base = dict(hypothesis="B changes the score", metric="score", min_effect=0.3, alpha=0.05,
                direction="two-sided", n_tasks=n, replications=1, test="t")
    return Preregistration(**{**base, **kw})


# -- A2: the t on equal differences ------------------------------------------------------------------------------


def test_a2_three_equal_differences_have_the_exact_p_not_0(tmp_path):
    """3 tasks each +1.0: before, "t p (Holm) = 0 ... supported"; the exact sign-flip p of 3 equal differences is
    2/8 = 0.25, which the t now never goes below."""
    res = run_ab(_design(3), _prereg(3), ShiftArm(lambda i: 1.0), ledger_path=tmp_path / "l.jsonl")
    assert res.primary.ttest.pvalue == pytest.approx(0.25) and res.primary.p_holm == pytest.approx(0.25)
    assert res.verdict == "inconclusive", res.verdict_reason


def test_a2_a_sequential_first_look_on_equal_differences_does_not_stop_for_efficacy(tmp_path):
    """Look 1 of 4 after 4 tasks each +1.0: before, a [1.0, 1.0] interval stopped for efficacy (exact p 0.125)."""
    res = run_ab(_design(16), _prereg(16, sequential=4), ShiftArm(lambda i: 1.0), ledger_path=tmp_path / "l.jsonl")
    first = res.looks[0]
    assert first.look == 1 and first.n == 4 and first.action == "continue", first
    assert "cannot give an exact p below 2/2^4 = 0.125" in first.reason
    assert res.decision.action != "stop_efficacy" or res.decision.n >= 8


def test_a2_the_design_check_holds_the_t_to_the_exact_floor():
    """5 smoke tasks: 2/2^5 = 0.0625 >= alpha 0.05. Before, ab.test=t passed the check (the t has "no floor") and a
    Wilcoxon design was told to use ab.test=t."""
    t = to_experiment(compose_config(["+sweep=prior_knowledge_ab", "backend=fake", "benchmark=smoke", "ab.test=t"]))
    with pytest.raises(ConfigError, match=r"paired t p .*0\.0625 >= alpha 0\.05"):
        check_ab_design(t)
    w = to_experiment(compose_config(["+sweep=prior_knowledge_ab", "backend=fake", "benchmark=smoke",
                                      "ab.test=wilcoxon"]))
    with pytest.raises(ConfigError) as info:
        check_ab_design(w)
    assert "ab.test=t" not in str(info.value)


# -- A3: no spread, no 'not supported' ---------------------------------------------------------------------------


def test_a3_equal_differences_below_min_effect_are_not_a_not_supported(tmp_path):
    """3 tasks each +0.1 against min_effect 0.3: before, the bound was 0.1 and the verdict 'not supported'."""
    res = run_ab(_design(3), _prereg(3), ShiftArm(lambda i: 0.1), ledger_path=tmp_path / "l.jsonl")
    assert res.verdict == "inconclusive", res.verdict_reason


# -- A5: pairwise 'not supported' at the boundary ----------------------------------------------------------------


def test_a5_pairwise_not_supported_holds_its_level_at_the_boundary():
    """A judge that never ties, B preferred on 55% of pairs (true mean preference 0.1 = min_preference), 3
    replications, 12 tasks: 'not supported' must come at most alpha / 2 = 0.025 of the time. Before: 0.030."""
    prereg = Preregistration("B's answers are preferred", direction="greater", alpha=0.05, min_preference=0.1,
                             compare="pairwise", n_tasks=12, replications=3)
    rng = np.random.default_rng(52)
    prefs = np.where(rng.random((2000, 12, 3)) < 0.55, 1.0, -1.0).mean(-1)
    rate = np.mean([pairwise_verdict(prereg, list(x), signflip_test(list(x)).pvalue)[0] == "not supported"
                    for x in prefs])
    assert rate <= 0.025, rate


# -- B1: the objective is pinned ---------------------------------------------------------------------------------


def _dead_judge() -> FakeLLM:
    def dead(messages):
        raise ConnectionError("judge server refused the connection")

    return FakeLLM(keyed={"# Answer A": dead})


@pytest.mark.parametrize("change", ["judge", "task"])
def test_b1_an_interrupted_pairwise_ab_refuses_another_judge_setting_or_task_text(_isolated_results, tmp_path,
                                                                                   change):
    exp = _exp("ab.replications=1", "ab.split=train")
    first, _ = _run(exp, AnswerArm(tmp_path), _dead_judge())
    assert first.unconcluded  # the CLI exits 3: the same command judges the pairs
    if change == "judge":
        again = _exp("ab.replications=1", "ab.split=train", "evaluator.rubric_weight=0.2", "evaluator.temperature=0.9")
    else:
        again = _exp("ab.replications=1", "ab.split=train")
        next(t for t in again.benchmark.tasks if t.split == "train").task += " Answer in French."
    arm = AnswerArm(tmp_path)
    with pytest.raises(ConfigError, match="another objective") as info:
        _run(again, arm, judge_llm())
    assert ("evaluator.rubric_weight: 0.6 -> 0.2" in str(info.value)) == (change == "judge")
    assert ("benchmark.sha256" in str(info.value)) == (change == "task")
    assert arm.calls == 0 and not [r for r in read_jsonl(first.paths.ledger) if r.get("status") == "ok"
                                   and r.get("kind") == "pair"]


def _cli(folder: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), HARNESS_RESULTS_DIR=str(folder / "results"),
               MLFLOW_TRACKING_URI=f"sqlite:///{folder / 'mlflow.db'}", DDGS_DISABLED="1")
    env.pop("HARNESS_DEBUG", None)
    args = ["+sweep=prior_knowledge_ab", "backend=fake", "evaluator=deterministic_only", "planner=single_pass",
            "wiggum.max_rounds=1", "research.max_rounds=1", "research.compress=false", "research.enrich_urls=0",
            "search.provider=local", "benchmark=smoke", "ab.allow_underpowered=true", "ab.replications=1",
            "ab.split=train", "mlflow.enabled=false", *extra]
    return subprocess.run([sys.executable, "-m", "experiments.run", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)


def test_b1_the_command_refuses_a_changed_judge_setting_with_exit_2_and_one_line(tmp_path):
    first = _cli(tmp_path)
    assert first.returncode in (0, 3), first.stderr[-2000:]
    p = _cli(tmp_path, "evaluator.rubric_weight=0.2", "evaluator.temperature=0.9")
    errors = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == 2, p.stderr[-2000:]  # before: exit 0 and a verdict on the mixture
    assert len(errors) == 1 and errors[0].startswith("config error:") and "evaluator.temperature: 0.0 -> 0.9" in errors[0]


# -- B2: lost answers are run again ------------------------------------------------------------------------------


def test_b2_moved_answers_are_said_and_their_cells_run_again(_isolated_results, tmp_path):
    exp = _exp("ab.replications=1", "ab.split=train")
    answers = tmp_path / "answers"
    answers.mkdir()
    first, _ = _run(exp, AnswerArm(answers), _dead_judge())
    assert first.unconcluded
    answers.rename(tmp_path / "answers_moved")  # the answers are gone; the pairs were never judged
    answers.mkdir()
    arm = AnswerArm(answers)
    second, out = _run(exp, arm, judge_llm())
    assert "24 answer file(s) of pairs not yet judged are gone" in out  # before: exit 3, 'not on disk', every rerun
    assert arm.calls == 24 and not second.unconcluded, second.unconcluded
    assert second.result.pairwise.n == 12 and second.result.verdict == "supported"


# -- B4: a judge that reads nothing --------------------------------------------------------------------------------


def test_b4_a_judge_never_readable_is_a_failed_judge_and_the_rerun_judges_again(_isolated_results, tmp_path):
    exp = _exp("ab.replications=1", "ab.split=train")
    arm = AnswerArm(tmp_path)
    prose = FakeLLM(keyed={"# Answer A": "Both answers have merit; I would lean towards the first."})
    first, _ = _run(exp, arm, prose)
    # before: 'inconclusive: only 0 tasks with a judged pair', exit 0, and nothing judged again
    assert first.unconcluded and "could not be read on any of the 12 judged pair(s)" in first.unconcluded[0]
    assert "I would lean towards the first" in first.unconcluded[0]
    healthy = judge_llm()
    second, _ = _run(exp, arm, healthy)
    assert len(healthy.calls) == 12 * 2 and not second.unconcluded
    assert second.result.pairwise.n == 12 and second.result.verdict == "supported", second.result.verdict_reason


# -- B10: each look once -----------------------------------------------------------------------------------------


def test_b10_a_rerun_appends_no_look_again(tmp_path):
    ledger = tmp_path / "l.jsonl"
    design, prereg = _design(9), _prereg(9, sequential=3)
    arm = ShiftArm(lambda i: 0.2 * (-1) ** i, sd=0.5)
    first = run_ab(design, prereg, arm, ledger_path=ledger)
    for _ in range(2):
        again = run_ab(design, prereg, arm, ledger_path=ledger)
        assert again.looks == first.looks and again.verdict == first.verdict
    looks = [r["look"] for r in read_jsonl(ledger) if r.get("kind") == "look"]
    assert looks == [d.look for d in first.looks], looks  # before: 3 looks -> 7 lines after two reruns
