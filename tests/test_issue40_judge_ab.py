"""Issue 40, findings A, B and H: a judge reply cut off mid-object is a judge failure, A/B arms whose failed cells
fall on different tasks get no verdict the worst case does not confirm, and "not supported" holds its level.

Each test fails on 3306971: there a judge reply with 2 of its 6 dimensions scored 7.469 (the whole reply 4.969)
with no judge failure, `python -m harness` printed `status ok` from it; arms failing 3 tasks each, on different
tasks, were 'supported' (p 0.031); 'not supported' came from a BCa interval that undercovers (0.21 at n = 6 on
skewed data, 0.077 on normal data, against 0.025).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evaluators.composite import evaluate
from evaluators.rubric import score_rubric
from harness.config import EvaluatorConfig
from harness.inference._fake import FakeLLM
from ollama_stub import OllamaStub, StubModel, StubReply, schema_reply

ROOT = Path(__file__).resolve().parents[1]
DIMS = tuple(EvaluatorConfig().dimensions)
TASK = "List 5 best practices for Python asyncio"
ANSWER = """# Asyncio best practices

1. **Use asyncio.run() as the entry point.** Call `asyncio.run(main())` once; it creates and closes the event loop.
2. **Prefer TaskGroup for structured concurrency.** In Python 3.11, `asyncio.TaskGroup` cancels siblings on failure.
3. **Never block the loop.** Move CPU-bound work to `loop.run_in_executor()` or `asyncio.to_thread()`.
4. **Set timeouts.** Wrap network calls in `asyncio.timeout(5)` (3.11+) or `wait_for`.
5. **Bound concurrency with a Semaphore.** Use `asyncio.Semaphore(10)` to cap open connections.
"""


# -- A: a judge reply missing a scored dimension ------------------------------------------------------------------


def judge_reply(first_two: int = 9, rest: int = 3) -> str:
    """A whole judge reply: the first two dimensions score `first_two`, the other four `rest`."""
    scores = {d: (first_two if i < 2 else rest) for i, d in enumerate(DIMS)}
    return json.dumps({"answers_task": True, "weaknesses": ["few versions"], "feedback": "Add versions.", **scores})


def cut_after_two_scores(reply: str) -> str:
    """The reply as num_predict leaves it: cut just after its second score field, mid-object."""
    name = DIMS[2]
    return reply[: reply.index(f'"{name}"')] + f'"{name[:2]}'


WHOLE = judge_reply()
CUT = cut_after_two_scores(WHOLE)


def test_a_judge_reply_cut_after_two_dimensions_is_re_asked_then_a_judge_failure():
    cfg = EvaluatorConfig()
    whole = score_rubric(TASK, ANSWER, FakeLLM([WHOLE]), cfg)
    assert whole.weighted is not None and not whole.failed and whole.judge_failures == 0

    judge = FakeLLM([CUT, CUT])
    cut = score_rubric(TASK, ANSWER, judge, cfg)
    # 3306971: weighted 9.0 over the two dimensions present, judge_failures 0, asked once
    assert len(judge.calls) == 2 and judge.calls[1].max_tokens == 2 * judge.calls[0].max_tokens
    assert cut.failed and cut.weighted is None and cut.judge_failures == 2 and cut.parse_failures == 1

    ev = evaluate(TASK, ANSWER, FakeLLM([CUT, CUT]), cfg, expected_count=5)
    assert ev.composite is None and ev.missing and ev.judge_failures == 2 and "judge reply unreadable" in ev.fallback

    healed = evaluate(TASK, ANSWER, FakeLLM([CUT, WHOLE]), cfg, expected_count=5)  # the re-ask reads in full
    read = evaluate(TASK, ANSWER, FakeLLM([WHOLE]), cfg, expected_count=5)
    assert healed.composite == read.composite and healed.judge_failures == 1

    # with three repeats, the one whose every reply is partial is a failed repeat, never a total over 2 dimensions
    three = score_rubric(TASK, ANSWER, FakeLLM([WHOLE, CUT, CUT, WHOLE]), EvaluatorConfig(repeats=3))
    assert three.weighted == whole.weighted and three.parse_failures == 1 and three.judge_failures == 2
    assert three.totals[1] is None


def test_a_zero_weight_dimension_is_not_a_scored_one():
    weights = {d: (0.0 if d == DIMS[-1] else 1.0) for d in DIMS}
    reply = json.loads(judge_reply())
    reply.pop(DIMS[-1])
    got = score_rubric(TASK, ANSWER, FakeLLM([json.dumps(reply)]), EvaluatorConfig(dimensions=weights))
    assert not got.failed and got.judge_failures == 0


STUB_MODELS = [StubModel("glm4:9b", 131072, family="glm4"), StubModel("qwen2.5:32b", 32768, family="qwen2"),
               StubModel("gemma3:27b", 131072, family="gemma3")]
PLAIN = "1. **TaskGroup**: cancel siblings on failure.\n2. **Timeouts**: use asyncio.timeout.\n3. **Queues**: bound them."
COMPOUND = ("Research Python asyncio task cancellation and structured concurrency, then synthesize a unified guide "
            "and save to guide.md")


def test_python_m_harness_with_every_judge_reply_cut_after_two_scores_is_not_ok(tmp_path):
    others = schema_reply(PLAIN)

    def reply(body: dict):
        props = (body.get("format") or {}).get("properties") or {}
        if "answers_task" in props and all(d in props for d in DIMS):  # the judge: cut where num_predict ran out
            return StubReply(cut_after_two_scores(judge_reply(first_two=9, rest=3)), done_reason="length")
        return others(body)

    with OllamaStub(models=STUB_MODELS, default_reply=reply) as stub:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("HARNESS_DEBUG", None)
        proc = subprocess.run(
            [sys.executable, "-m", "harness", COMPOUND, "backend=ollama", f"backend.host={stub.url}",
             "backend.retries=0", "search.provider=local", "research.enrich_urls=0", "wiggum.max_rounds=1",
             f"results_dir={tmp_path / 'results'}"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        judged = [r for r in stub.chat_requests() if "answers_task" in str((r.body.get("format") or {}))]
    assert proc.returncode == 0, proc.stderr[-2000:]
    score = next(line for line in proc.stdout.splitlines() if line.startswith("score:"))
    record = [json.loads(x) for x in (tmp_path / "results" / "runs.jsonl").read_text().splitlines()][-1]
    # 3306971: `status: ok` and `score: 7.55`, a composite from the two dimensions present, judge_failures 0
    assert score.split()[1] == "None", (score, proc.stdout[-2000:])  # the run completed; its judged score is missing
    assert record["scores"]["composite"] is None and "judge reply unreadable" in record["scores"]["missing"]
    assert record["scores"]["rubric"]["weighted"] is None
    budgets = sorted(r.body["options"]["num_predict"] for r in judged)
    assert budgets == sorted([420, 840] * (len(judged) // 2)) and judged  # every cut reply re-asked, with room
    assert record["judge_failures"] >= 2  # counted in the run record


# -- B: failed A/B cells on different tasks -------------------------------------------------------------------------

from experiments.ab._cells import ABDesign
from experiments.ab._run import run_ab
from experiments.ab._report import write_report  # noqa: E402
from experiments.stats import Preregistration  # noqa: E402

TWELVE = tuple(f"task-{i:02d}" for i in range(12))


class FailsOnOwnTasks:
    """run_arm double (the seam's dict): B scores `gain` above A; A fails on `a_fails`, B on `b_fails`."""

    def __init__(self, tasks, a_fails=(), b_fails=(), gain=0.8):
        self.tasks, self.a_fails, self.b_fails, self.gain = tasks, set(a_fails), set(b_fails), gain

    def __call__(self, arm, overrides, task, replication, seed):
        b = bool(overrides.get("b"))
        if task in (self.b_fails if b else self.a_fails):
            return {"status": "failed", "error": "RuntimeError: the backend went away"}
        noise = np.random.default_rng([seed, int(b)]).normal(0, 0.1)
        return {"status": "ok", "score": 6.0 - self.tasks.index(task) / 8 + (self.gain if b else 0.0) + noise}


def _ab(tasks):
    design = ABDesign(tasks=tasks, arms={"previous": {}, "champion": {"b": True}}, replications=1)
    prereg = Preregistration("the champion scores higher", min_effect=0.3, direction="greater", n_tasks=len(tasks),
                             replications=1)
    return design, prereg


def test_arms_failing_as_many_cells_on_different_tasks_get_no_verdict_the_worst_case_refuses(tmp_path):
    design, prereg = _ab(TWELVE)
    arm = FailsOnOwnTasks(TWELVE, a_fails=TWELVE[:3], b_fails=TWELVE[9:])  # B crashes on the 3 hard tasks
    result = run_ab(design, prereg, arm, ledger_path=tmp_path / "ab.jsonl")
    assert result.failed_cells == {"previous": 3, "champion": 3} and result.primary.n == 6
    assert result.primary.wilcoxon.pvalue == pytest.approx(0.03125)  # the 6 survivors alone: all B higher
    # 3306971: 'supported' (the counts are equal, so nothing was checked)
    assert result.verdict == "inconclusive", result.verdict_reason
    assert result.verdict_reason.startswith("failed cells fall on different tasks (previous failed on task-00, "
                                            "task-01, task-02; champion failed on task-09, task-10, task-11)")
    assert "on the complete pairs alone it would say 'supported'" in result.verdict_reason
    assert result.failed_tasks == {"previous": ("task-00", "task-01", "task-02"),
                                   "champion": ("task-09", "task-10", "task-11")}
    report = write_report(result, prereg, tmp_path / "report").read_text()
    assert "- failed tasks per arm: previous: task-00, task-01, task-02; champion: task-09, task-10, task-11" in report


def test_a_verdict_that_holds_in_the_worst_case_stands_and_says_so(tmp_path):
    tasks = tuple(f"task-{i:02d}" for i in range(24))
    design, prereg = _ab(tasks)
    arm = FailsOnOwnTasks(tasks, a_fails=tasks[:1], b_fails=tasks[-1:], gain=1.5)
    result = run_ab(design, prereg, arm, ledger_path=tmp_path / "ab.jsonl")
    assert result.failed_cells == {"previous": 1, "champion": 1} and result.verdict == "supported", result.verdict_reason
    assert "failed cells fall on different tasks (previous failed on task-00; champion failed on task-23) and the " \
           "verdict holds with champion's failed cells at" in result.verdict_reason

    def same_task(arm_name, overrides, task, replication, seed):  # both fail the same cell: no arm favoured
        if task == tasks[0]:
            return {"status": "failed", "error": "RuntimeError: down"}
        return FailsOnOwnTasks(tasks, gain=1.5)(arm_name, overrides, task, replication, seed)

    same = run_ab(design, prereg, same_task, ledger_path=tmp_path / "same.jsonl")
    assert same.verdict == "supported" and "different tasks" not in same.verdict_reason


def test_a_not_supported_verdict_must_survive_the_fill_that_favours_b(tmp_path):
    design, prereg = _ab(TWELVE)
    worse = FailsOnOwnTasks(TWELVE, a_fails=TWELVE[:3], b_fails=TWELVE[9:], gain=-0.8)  # B lower on the survivors
    result = run_ab(design, prereg, worse, ledger_path=tmp_path / "ab.jsonl")
    # with B's failed cells at the highest value seen and A's at the lowest, B is no longer shown lower
    assert result.verdict == "inconclusive" and "on the complete pairs alone it would say 'not supported'" in \
        result.verdict_reason


# -- H: 'not supported' holds its level at a true effect equal to min_effect ---------------------------------------

from experiments.ab._analysis import paired_stats  # noqa: E402
from experiments.stats import explain_verdict  # noqa: E402


def _not_supported_rate(shape: str, n: int, worlds: int, seed: int = 40) -> float:
    """How often the real rule says 'not supported' when every world's true mean difference is min_effect 0.5
    (sd 1): normal differences, or right-skewed ones (a lognormal with sigma 1, shifted and scaled to that mean and
    sd: most tasks a little below 0.5, a few far above)."""
    prereg = Preregistration("B is better by 0.5", min_effect=0.5, alpha=0.05, direction="greater", n_tasks=n)
    rng = np.random.default_rng([seed, n])
    hits = 0
    for w in range(worlds):
        if shape == "normal":
            e = rng.normal(0.0, 1.0, n)
        else:
            z = rng.lognormal(0.0, 1.0, n)
            e = (z - np.exp(0.5)) / np.sqrt((np.e - 1) * np.e)
        stats = paired_stats(np.zeros(n), 0.5 + e, alpha=0.05, n_boot=300, seed=w)
        hits += explain_verdict(prereg, stats)[0] == "not supported"
    return hits / worlds


def test_not_supported_holds_its_level_at_the_boundary_for_normal_and_skewed_differences():
    # 3306971 (BCa interval): 0.21 skewed and 0.077 normal at n = 6 against 0.025; 1,500 worlds: sd of a rate of
    # 0.025 is 0.004, so 0.035 is 2.5 sd above the level and 0.2 below the old skewed rate
    assert _not_supported_rate("skewed", 6, 1500) <= 0.035
    assert _not_supported_rate("normal", 6, 1500) <= 0.035


def test_not_supported_still_answers_a_clear_shortfall_and_two_sided_and_less_mirror_it():
    prereg = Preregistration("h", min_effect=0.5, direction="greater", n_tasks=8)
    tight = [0.2, 0.25, 0.3, 0.15, 0.22, 0.28, 0.18, 0.2]
    v, why = explain_verdict(prereg, paired_stats(np.zeros(8), tight))
    assert v == "not supported" and "skew-robust 97.5% bound mean <=" in why and "minimum effect 0.5" in why
    less = Preregistration("h", min_effect=0.5, direction="less", n_tasks=8)
    assert explain_verdict(less, paired_stats(np.zeros(8), [-x for x in tight]))[0] == "not supported"
    both = Preregistration("h", min_effect=0.5, direction="two-sided", n_tasks=8)
    near_zero = [0.02, -0.03, 0.01, 0.0, -0.01, 0.02, -0.02, 0.01]
    assert explain_verdict(both, paired_stats(np.zeros(8), near_zero))[0] == "not supported"
