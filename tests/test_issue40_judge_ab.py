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
from harness.inference import FakeLLM
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
