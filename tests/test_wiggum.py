from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from evaluators.composite import evaluate
from harness.config import EvaluatorConfig, WiggumConfig
from harness.inference import BackendError, FakeLLM
from harness.logger import Tracer, use_tracer
from harness.wiggum import WiggumResult, revision_messages, wiggum_loop


@dataclass(frozen=True)
class FakeEval:
    composite: float
    feedback: str = "be more specific"
    weaknesses: tuple[str, ...] = ("vague",)


class ScriptedEvaluator:
    """Scores drafts by exact text; records what it was asked to score."""

    def __init__(self, scores: dict[str, float]):
        self.scores = scores
        self.seen: list[str] = []

    def __call__(self, text: str) -> FakeEval:
        self.seen.append(text)
        return FakeEval(self.scores[text], feedback=f"feedback on {text}", weaknesses=(f"weak {text}",))


def run(scores, revisions, *, max_rounds=3, threshold=7.0):
    producer = FakeLLM(revisions)
    evaluator = ScriptedEvaluator(scores)
    tracer = Tracer("t")
    with use_tracer(tracer):
        result = wiggum_loop("Task T", "d0", producer=producer, evaluate=evaluator,
                             cfg=WiggumConfig(max_rounds=max_rounds, threshold=threshold), seed=5)
    return result, producer, evaluator, tracer


def test_passes_first_round_one_round_no_revision():
    result, producer, evaluator, tracer = run({"d0": 8.0}, [])
    assert isinstance(result, WiggumResult)
    assert result.passed and result.best_round == 1 and len(result.rounds) == 1 and result.best_text == "d0"
    assert producer.calls == [] and result.stop_reason == "passed"
    spans = [e for e in tracer.events if e["name"] == "wiggum.round"]
    assert len(spans) == 1 and spans[0]["args"]["score"] == 8.0 and spans[0]["args"]["passed"] is True


def test_improves_then_passes():
    result, producer, evaluator, _ = run({"d0": 5.0, "d1": 6.0, "d2": 7.5}, ["d1", "```markdown\nd2\n```"])
    assert evaluator.seen == ["d0", "d1", "d2"]
    assert [r.score for r in result.rounds] == [5.0, 6.0, 7.5]
    assert result.passed and result.best_round == 3 and result.best_text == "d2" and result.best_score == 7.5
    prompt = producer.calls[0].messages[1]["content"]
    assert "feedback on d0" in prompt and "weak d0" in prompt and "d0" in prompt and "Task T" in prompt
    assert [c.seed for c in producer.calls] == [6, 7]


def test_regression_keeps_best_round_and_revises_from_best():
    result, producer, evaluator, _ = run({"d0": 5.0, "d1": 6.5, "d2": 4.0}, ["d1", "d2"])
    assert not result.passed and result.stop_reason == "max_rounds"
    assert result.best_round == 2 and result.best_text == "d1" and result.best_score == 6.5
    assert result.regressed
    assert [r.score for r in result.rounds] == [5.0, 6.5, 4.0]


def test_regression_then_revision_starts_from_best_draft():
    result, producer, _, _ = run({"d0": 6.0, "d1": 3.0, "d2": 6.5}, ["d1", "d2"])
    second_prompt = producer.calls[1].messages[1]["content"]
    assert "# Current draft\nd0" in second_prompt and "feedback on d0" in second_prompt
    assert result.best_round == 3 and result.best_text == "d2"


@pytest.mark.parametrize("max_rounds", [1, 2, 3, 5])
def test_max_rounds_respected(max_rounds):
    revisions = [f"d{i}" for i in range(1, 10)]
    scores = {f"d{i}": 1.0 + i * 0.1 for i in range(10)}
    result, producer, evaluator, tracer = run(scores, revisions, max_rounds=max_rounds)
    assert len(result.rounds) == max_rounds == len(evaluator.seen)
    assert len(producer.calls) == max_rounds - 1
    assert len([e for e in tracer.events if e["name"] == "wiggum.round"]) == max_rounds
    assert not result.passed and result.best_round == max_rounds


def test_threshold_is_inclusive():
    result, *_ = run({"d0": 7.0}, [])
    assert result.passed and len(result.rounds) == 1


def test_revision_backend_error_ends_loop_keeping_best():
    class Down:
        backend, model = "fake", "m"

        def chat(self, *a, **k):
            raise BackendError("fake: server down")

    evaluator = ScriptedEvaluator({"d0": 4.0})
    result = wiggum_loop("T", "d0", producer=Down(), evaluate=evaluator, cfg=WiggumConfig())
    assert result.stop_reason == "revision_error" and "server down" in result.error
    assert result.best_text == "d0" and len(result.rounds) == 1 and not result.passed


def test_empty_revision_stops():
    result, *_ = run({"d0": 4.0}, ["   "])
    assert result.stop_reason == "empty_revision" and result.best_text == "d0"


def test_first_evaluation_error_propagates_later_one_is_recorded():
    def broken(text):
        raise BackendError("judge down")

    with pytest.raises(BackendError):
        wiggum_loop("T", "d0", producer=FakeLLM(), evaluate=broken, cfg=WiggumConfig())

    calls = []

    def flaky(text):
        calls.append(text)
        if len(calls) > 1:
            raise BackendError("judge down")
        return FakeEval(3.0)

    result = wiggum_loop("T", "d0", producer=FakeLLM(["d1"]), evaluate=flaky, cfg=WiggumConfig())
    assert result.stop_reason == "evaluation_error" and result.best_text == "d0" and len(result.rounds) == 1


def test_invalid_config_refused():
    with pytest.raises(ValueError, match="max_rounds"):
        wiggum_loop("T", "d0", producer=FakeLLM(), evaluate=ScriptedEvaluator({}), cfg=WiggumConfig(max_rounds=0))


def test_revision_prompt_lists_weaknesses():
    msgs = revision_messages("T", "draft", "fb", ("w1", "w2"), 5.25)
    assert "- w1\n- w2" in msgs[1]["content"] and "5.2 / 10" in msgs[1]["content"]


def test_with_real_evaluator_and_fake_judge():
    # realistic texts: a two-word draft or a revision of one-letter items is degenerate (near-empty) and capped
    judge = FakeLLM(keyed={"# Answer to score\n<<<\nfirst": json.dumps({"relevance": 4, "feedback": "add items",
                                                                         "weaknesses": ["too short"]}),
                           "# Answer to score\n<<<\n1.": json.dumps({"relevance": 9})})
    cfg = EvaluatorConfig(dimensions={"relevance": 1.0}, composite="rubric")
    producer = FakeLLM(["1. **Use asyncio.run().** It creates and closes the event loop.\n"
                        "2. **Use TaskGroup.** It cancels the sibling tasks when one of them fails."])
    result = wiggum_loop("List 2 things", "first draft: use asyncio.run() as the entry point", producer=producer,
                         evaluate=lambda text: evaluate("List 2 things", text, judge, cfg, expected_count=2),
                         cfg=WiggumConfig())
    assert [r.score for r in result.rounds] == [4.0, 9.0] and result.passed and result.best_round == 2
    assert "add items" in producer.calls[0].messages[1]["content"]
    json.dumps(result.to_dict())
