"""Issue 31 items 3 and 7: a judge failure is never rewarded, and the kept round is not flattered by its judge.

Each test here fails on 6cbf984: an unreadable judge reply made the blend the deterministic score alone (9.63 for
an answer the judge scored 4 everywhere, 6.25), the wiggum loop kept that round, no run record or trial counted
judge failures, and with a greedy judge the trial value was the sample that chose the kept round.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import statistics
import threading

import pytest
from pipeline_fake import Router, judge_json, make_harness, numbered
from scripted_harness import EDITS, ScriptedRunner, scripted_propose

from evaluators.composite import evaluate
from evaluators.deterministic import prompt_echo_reasons
from experiments.config import Task, load_tasks
from experiments.runs import TrialFailed, evaluate_candidate
from experiments.runs import TaskOutcome
from experiments.runs import HarnessRunner
from experiments.runs._outcome import outcome_from_result
from experiments.storage import Ledger
from experiments.sweep._study import open_study
from experiments.sweep import run_sweep
from harness.config import EvaluatorConfig, MemoryConfig, WiggumConfig
from harness.inference import ChatResult
from harness.inference._fake import FakeLLM
from harness.inference._roles import fake_roles
from harness.review import rescore_config, wiggum_loop

DIMS = tuple(EvaluatorConfig().dimensions)
TASK = "List 5 best practices for Python asyncio"
ANSWER = """# Asyncio best practices

1. **Use asyncio.run() as the entry point.** Call `asyncio.run(main())` once; it creates and closes the event loop. Since Python 3.7 this replaces manual loop handling.
2. **Prefer TaskGroup for structured concurrency.** In Python 3.11, `asyncio.TaskGroup` cancels siblings when one task fails, unlike `gather()`.
3. **Never block the loop.** Move CPU-bound work to `loop.run_in_executor()` or `asyncio.to_thread()`; a 100 ms blocking call stalls every coroutine.
4. **Set timeouts.** Wrap network calls in `asyncio.timeout(5)` (3.11+) or `wait_for`.
5. **Bound concurrency with a Semaphore.** Use `asyncio.Semaphore(10)` to cap open connections to PostgreSQL via asyncpg.
"""


def _reply(score: int) -> str:
    return json.dumps({"answers_task": True, "weaknesses": ["few versions"], "feedback": "Add versions.",
                       **{d: score for d in DIMS}})


FOUR = _reply(4)
CUT = FOUR[:60]  # the same reply cut off at max_tokens: nothing can be read from it


# -- item 3: a judged score is never replaced by the deterministic one ------------------------------------------


def test_an_unreadable_judge_reply_is_a_missing_score_never_the_deterministic_score():
    read = evaluate(TASK, ANSWER, FakeLLM([FOUR]), EvaluatorConfig(), expected_count=5)
    assert read.composite == pytest.approx(0.6 * 4 + 0.4 * read.deterministic_score, abs=1e-3)
    assert read.composite == pytest.approx(6.252, abs=1e-3) and read.judge_failures == 0

    cut = evaluate(TASK, ANSWER, FakeLLM([CUT, CUT]), EvaluatorConfig(), expected_count=5)
    # 6cbf984: 9.63, the deterministic score alone, 3.4 points above the same answer judged
    assert cut.composite is None and cut.missing and cut.judge_failures == 2
    assert "judged blend score is missing" in cut.fallback

    judge = FakeLLM([CUT, FOUR])  # cut once, read on the re-ask: the score the readable judge gave
    retried = evaluate(TASK, ANSWER, judge, EvaluatorConfig(), expected_count=5, seed=3)
    assert retried.composite == read.composite and retried.judge_failures == 1
    first, again = judge.calls
    assert (first.max_tokens, again.max_tokens) == (420, 840) and first.seed == 3 and again.seed != 3

    assert evaluate(TASK, ANSWER, FakeLLM([CUT]), EvaluatorConfig(judge_retries=0)).judge_failures == 1
    with pytest.raises(ValueError, match=r"evaluator.judge_retries must be an integer 0-5, got -1"):
        evaluate(TASK, ANSWER, FakeLLM([FOUR]), EvaluatorConfig(judge_retries=-1))
    # deterministic_only never asks a judge: unaffected
    det = evaluate(TASK, ANSWER, None, EvaluatorConfig(composite="deterministic", rubric_weight=0.0), expected_count=5)
    assert det.composite == det.deterministic_score and det.judge_failures == 0 and det.fallback is None


def test_the_wiggum_loop_never_keeps_a_round_because_its_judge_failed():
    # round 1: the judge reads the draft (4 everywhere); round 2: the revision's judge reply is cut off twice
    judge = FakeLLM(keyed={"Use asyncio.run()": [FOUR], "Prefer TaskGroup": [CUT, CUT]})
    revised = ANSWER.replace("Use asyncio.run()", "Prefer TaskGroup first")
    producer = FakeLLM([revised])
    result = wiggum_loop(TASK, ANSWER, producer=producer,
                         evaluate=lambda text: evaluate(TASK, text, judge, EvaluatorConfig(), expected_count=5),
                         echo_reasons=prompt_echo_reasons, cfg=WiggumConfig(max_rounds=2, threshold=7.0))
    r1, r2 = result.rounds
    assert r1.score == pytest.approx(6.252, abs=1e-3) and r2.score is None and not r2.passed
    # 6cbf984: round 2 scored its deterministic 9.x, passed and was kept
    assert result.best_round == 1 and result.best_text == ANSWER and result.best_score == r1.score
    assert not result.passed and result.judge_failures == 2
    recorded = result.to_dict()["rounds"][1]
    assert (recorded["score"], recorded["passed"], recorded["judge_failures"]) == (None, False, 2)


def test_a_draft_whose_judge_failed_is_replaced_by_the_first_scored_round():
    judge = FakeLLM(keyed={"Use asyncio.run()": [CUT, CUT], "Prefer TaskGroup": [_reply(3)]})
    revised = ANSWER.replace("Use asyncio.run()", "Prefer TaskGroup first")
    result = wiggum_loop(TASK, ANSWER, producer=FakeLLM([revised]),
                         evaluate=lambda text: evaluate(TASK, text, judge, EvaluatorConfig(), expected_count=5),
                         echo_reasons=prompt_echo_reasons, cfg=WiggumConfig(max_rounds=2))
    assert [r.score is None for r in result.rounds] == [True, False]
    assert result.best_round == 2 and result.best_score == result.rounds[1].score


def test_a_run_whose_judge_cannot_be_read_is_a_failed_task_with_its_judge_failures_recorded(tmp_path):
    router = Router(judge="I liked it a lot, well done.")
    result = make_harness(tmp_path, router).run("List 5 best practices for asyncio")
    rec = result.record
    assert router.calls["judge"] == 4  # the round and the verify re-score, each asked twice
    assert rec["judge_failures"] == 4 and rec["scores"]["composite"] is None
    assert "judge reply unreadable" in rec["scores"]["missing"]
    assert rec["wiggum"]["rounds"][0]["score"] is None and rec["wiggum"]["selection_bias"] is None
    outcome = outcome_from_result(result)
    assert not outcome.ok and outcome.judge_failures == 4 and "the judged score is missing" in outcome.error

    def boom(messages):
        raise RuntimeError("synthesis down")

    failed = make_harness(tmp_path / "b", Router(synth=boom)).run("List 5 best practices for asyncio")
    assert failed.status == "failed" and failed.record["judge_failures"] == 0  # in every record, 0 when none


def _runner(tmp_path, judge) -> HarnessRunner:
    h = make_harness(tmp_path, Router(judge=judge))
    return HarnessRunner(h.cfg, h.roles)


TASKS = (Task("t0", "List 5 best practices for asyncio", "enumerated", 5),
         Task("t1", "List 5 best practices for asyncio queues", "enumerated", 5))


def test_a_candidate_with_a_missing_score_fails_and_counts_its_judge_failures(tmp_path):
    def judge(messages):
        return "no scores here" if "asyncio queues" in messages[1]["content"] else judge_json(7)

    with pytest.raises(TrialFailed, match="task 't1' failed: the judged score is missing") as info:
        evaluate_candidate({"enumerated": "Write the list."}, TASKS, _runner(tmp_path / "a", judge))
    assert info.value.judge_failures == 4 and info.value.failed.judge_failures == 4

    replies = iter([CUT])  # the first judge reply of the candidate is cut; its re-ask and all others are read

    def once_cut(messages):
        return next(replies, judge_json(7))

    ev = evaluate_candidate({"enumerated": "Write the list."}, TASKS, _runner(tmp_path / "b", once_cut))
    assert [s.judge_failures for s in ev.scores] == [1, 0] and ev.judge_failures == 1
    assert ev.scores[0].score == ev.scores[1].score  # the re-asked judgement, on the same scale


class _JudgeFailing(ScriptedRunner):
    """The scripted benchmark; task t0 needs one re-asked judge reply, and the add_tool candidate's t3 judge never
    answers readably (its score is missing: a failed task)."""

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0) -> TaskOutcome:
        out = super().finish(prepared, instructions=instructions, run_id=run_id, criteria=criteria, seed=seed)
        task, instr = prepared["task"], instructions[prepared["task_type"]]
        if task == "task number 3" and EDITS["add_tool"].strip() in instr:
            return TaskOutcome.failed("the judged score is missing: judge reply unreadable (2 unreadable replies)",
                                      usage=out.usage, judge_failures=2)
        if task == "task number 0":
            return TaskOutcome(status="ok", score=out.score, selection_score=out.selection_score, usage=out.usage,
                               rescored=True, judge_failures=1)
        return out


def test_trials_and_ledger_rows_count_judge_failures_and_a_missing_score_fails_the_trial(make_exp):
    exp = make_exp("sweep.n_trials=2", "sweep.gate_tasks=0", operators=("add_tool",))
    lines: list[str] = []
    run_sweep(exp, _JudgeFailing(load_tasks(exp.benchmark)), propose=scripted_propose, out=lines.append)
    trials = {t.number: t for t in open_study(exp).trials}
    rows = {r["trial"]: r for r in Ledger(exp.sweep_dir / "ledger.jsonl").rows()}
    assert trials[0].state.name == "COMPLETE" and trials[0].user_attrs["judge_failures"] == 1
    assert rows[0]["judge_failures"] == 1 and rows[0]["status"] == "keep"
    assert trials[1].state.name == "FAIL" and "judged score is missing" in trials[1].user_attrs["fail_reason"]
    assert rows[1]["status"] == "crash" and rows[1]["judge_failures"] >= 2
    text = "\n".join(lines)
    assert f"judge failures: {1 + rows[1]['judge_failures']} judge replies could not be read" in text


@pytest.mark.parametrize("override, message", [
    ("evaluator.judge_retries=-1", "evaluator.judge_retries=-1 is out of range; expected a value in [0, 5]"),
    ("evaluator.rescore_temperature=0", "evaluator.rescore_temperature=0.0 is out of range; expected a value in "
                                        "[0.01, 2.0]"),
])
def test_judge_settings_out_of_range_are_refused_in_one_line(override, message):
    from experiments.config import ConfigError, compose_config, to_experiment, validate

    with pytest.raises(ConfigError) as info:
        validate(to_experiment(compose_config(["+sweep=single", "backend=fake", override])))
    assert str(info.value) == message
    with pytest.raises(ValueError, match=r"rescore_temperature must be in \[0.01, 2\]"):
        rescore_config(EvaluatorConfig(rescore_temperature=0.0))
    assert rescore_config(EvaluatorConfig(temperature=0.3)).temperature == 0.3  # a sampling judge: its own
    assert rescore_config(EvaluatorConfig()).temperature == 0.7


class _NotRescored(ScriptedRunner):
    """evaluator.rescore=false: the run's score is the loop's own best round (no independent judgement)."""

    def finish(self, prepared, **kw) -> TaskOutcome:
        out = super().finish(prepared, **kw)
        return TaskOutcome(status="ok", score=out.selection_score, usage=out.usage, rescored=False)


def test_the_summary_does_not_print_a_selection_bias_it_did_not_measure(make_exp):
    exp = make_exp("sweep.n_trials=1", operators=("add_tool",))
    lines: list[str] = []
    run_sweep(exp, _NotRescored(load_tasks(exp.benchmark)), propose=scripted_propose, out=lines.append)
    text = "\n".join(lines)
    # 6cbf984: "selection bias ... +0.000; greedy judge (evaluator.temperature 0): a re-score would be the same sample"
    assert ("selection bias (wiggum best round - trial value): not measured (evaluator.rescore=false): trial values "
            "are the loop's own best-round scores") in text
    assert "+0.000" not in text.split("selection bias")[1].splitlines()[0]
    assert "judge failures: 0 judge replies could not be read" in text


# -- item 7: the stand-in world where a revision cannot change quality ------------------------------------------


QUALITY = {f"t{i}": 4.5 + 0.25 * (i % 5) for i in range(12)}  # each task's fixed quality, whatever is written


class NoiseJudge:
    """The stand-in world's judge: every dimension is the task's fixed quality plus noise (sd 1), whatever the
    answer says. Greedy (temperature 0) the noise is a function of the answer alone, as a greedy model's quirks
    are; sampling, of the answer and the seed. An LLM of the protocol: it answers chat() with a ChatResult."""

    backend, model = "fake", "noise-judge"

    def __init__(self) -> None:
        self.temperatures: list[float] = []
        self._lock = threading.Lock()

    def chat(self, messages, *, schema=None, temperature=0.7, max_tokens=512, seed=None) -> ChatResult:
        user = messages[-1]["content"]
        task_id = re.search(r"\(id (t\d+)\)", user).group(1)
        answer = user[user.index("# Answer to score"):]
        key = answer if temperature == 0 else f"{answer}|{seed}|{temperature}"
        rng = random.Random(hashlib.sha256(key.encode()).hexdigest())
        dims = {d: min(10, max(1, round(QUALITY[task_id] + rng.gauss(0, 1.0)))) for d in DIMS}
        with self._lock:
            self.temperatures.append(temperature)
        text = json.dumps({"answers_task": True, "weaknesses": ["vague"], "feedback": "Be specific.", **dims})
        return ChatResult(text, len(user.split()), len(text.split()), 0.0, self.model, self.backend)


def _stand_in_world(tmp_path):
    counter = itertools.count()

    def write(messages):  # every draft and revision a new text of the same quality
        return numbered(5, topic=f"asyncio v{next(counter)}")

    router = Router(synth=write, revise=write, retry=write)
    h = make_harness(tmp_path, router, memory=MemoryConfig(enabled=False),
                     evaluator=EvaluatorConfig(composite="rubric", temperature=0.0),
                     wiggum=WiggumConfig(max_rounds=3, threshold=7.0))
    judge = NoiseJudge()
    roles = fake_roles({"planner": h.roles.planner.inner, "producer": h.roles.producer.inner,
                        "compressor": h.roles.compressor.inner, "evaluator": judge})
    runner = HarnessRunner(h.cfg, roles)
    tasks = tuple(Task(t, f"List 5 best practices for asyncio (id {t})", "enumerated", 5) for t in QUALITY)
    contexts = {t.id: runner.prepare(t.task) for t in tasks}
    return runner, tasks, contexts, judge


def test_in_a_world_where_revisions_cannot_change_quality_the_trial_value_is_not_inflated(tmp_path):
    runner, tasks, contexts, judge = _stand_in_world(tmp_path)
    evals = [evaluate_candidate({"enumerated": "Write the list."}, tasks, runner, contexts=contexts, seed=seed)
             for seed in range(4)]
    scores = [s for ev in evals for s in ev.scores]
    quality = statistics.fmean(QUALITY[s.task_id] for s in scores)
    kept_independent = statistics.fmean(s.score for s in scores)
    kept_selection = statistics.fmean(s.selection_score for s in scores)
    trial_values, trial_biases = [ev.mean for ev in evals], [ev.selection_bias for ev in evals]
    print(f"stand-in world: {len(scores)} runs, quality {quality:.3f}; kept round's own score {kept_selection:.3f} "
          f"({kept_selection - quality:+.3f}); independent score of the kept text {kept_independent:.3f} "
          f"({kept_independent - quality:+.3f}); trial selection bias {statistics.fmean(trial_biases):+.3f}")
    # the loop's choice flatters the round it kept (the world does show a winner's curse) ...
    assert kept_selection - quality > 0.2
    # ... and the trial value, the independent judgement of the kept text, is not inflated (6cbf984: it was the
    # selection score, +0.3 here)
    assert abs(kept_independent - quality) < 0.1
    assert all(s.rescored for s in scores) and 0.0 in judge.temperatures and 0.7 in judge.temperatures
    # the selection bias the summary prints measures what it names: kept round's own score - independent score
    assert statistics.fmean(trial_biases) == pytest.approx(kept_selection - kept_independent, abs=1e-9)
    assert statistics.fmean(trial_biases) > 0.2  # 6cbf984: +0.000 ("a re-score would be the same sample")
    assert statistics.fmean(trial_values) == pytest.approx(kept_independent, abs=1e-9)
