from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluators.composite import evaluate
from evaluators.deterministic import prompt_echo_reasons
from harness.config import EvaluatorConfig, WiggumConfig
from harness.inference import BackendError
from harness.inference._fake import FakeLLM
from harness.review import wiggum_loop
from harness.review._wiggum import WiggumResult, revision_messages
from harness.tracing import Tracer, use_tracer


def current_draft(prompt: str) -> str:
    """The draft a revise prompt carries: the data block under "# Current draft", markers left out."""
    block = prompt.split("# Current draft\n", 1)[1].split("\n\nWrite the revised answer now.", 1)[0]
    lines = block.splitlines()
    assert lines[0].startswith("<<DATA ") and lines[-1].startswith("<<END DATA "), block
    return "\n".join(lines[1:-1])


@dataclass(frozen=True)
class FakeEval:
    composite: float
    feedback: str = "be more specific"
    weaknesses: tuple[str, ...] = ("vague",)
    degenerate: tuple[str, ...] = ()


class ScriptedEvaluator:
    """Scores drafts by exact text; records what it was asked to score. Texts in `degenerate` are reported
    degenerate (with their scripted score: an evaluator that flags but does not cap)."""

    def __init__(self, scores: dict[str, float], degenerate=()):
        self.scores = scores
        self.degenerate = set(degenerate)
        self.seen: list[str] = []

    def __call__(self, text: str) -> FakeEval:
        self.seen.append(text)
        reasons = ("repetition: scripted",) if text in self.degenerate else ()
        return FakeEval(self.scores[text], feedback=f"feedback on {text}", weaknesses=(f"weak {text}",),
                        degenerate=reasons)


def run(scores, revisions, *, max_rounds=3, threshold=7.0, degenerate=()):
    producer = FakeLLM(revisions)
    evaluator = ScriptedEvaluator(scores, degenerate)
    tracer = Tracer("t")
    with use_tracer(tracer):
        result = wiggum_loop("Task T", "d0", producer=producer, evaluate=evaluator, echo_reasons=prompt_echo_reasons,
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
    assert current_draft(second_prompt) == "d0" and "feedback on d0" in second_prompt
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
    result = wiggum_loop("T", "d0", producer=Down(), evaluate=evaluator, echo_reasons=prompt_echo_reasons, cfg=WiggumConfig())
    assert result.stop_reason == "revision_error" and "server down" in result.error
    assert result.best_text == "d0" and len(result.rounds) == 1 and not result.passed


def test_empty_revision_stops():
    result, *_ = run({"d0": 4.0}, ["   "])
    assert result.stop_reason == "empty_revision" and result.best_text == "d0"


def test_first_evaluation_error_propagates_later_one_is_recorded():
    def broken(text):
        raise BackendError("judge down")

    with pytest.raises(BackendError):
        wiggum_loop("T", "d0", producer=FakeLLM(), evaluate=broken, echo_reasons=prompt_echo_reasons, cfg=WiggumConfig())

    calls = []

    def flaky(text):
        calls.append(text)
        if len(calls) > 1:
            raise BackendError("judge down")
        return FakeEval(3.0)

    result = wiggum_loop("T", "d0", producer=FakeLLM(["d1"]), evaluate=flaky, echo_reasons=prompt_echo_reasons, cfg=WiggumConfig())
    assert result.stop_reason == "evaluation_error" and result.best_text == "d0" and len(result.rounds) == 1


def test_invalid_config_refused():
    with pytest.raises(ValueError, match="max_rounds"):
        wiggum_loop("T", "d0", producer=FakeLLM(), evaluate=ScriptedEvaluator({}),
                    echo_reasons=prompt_echo_reasons, cfg=WiggumConfig(max_rounds=0))


def test_revision_prompt_lists_weaknesses():
    msgs = revision_messages("T", "draft", "fb", ("w1", "w2"), 5.25)
    assert "- w1\n- w2" in msgs[1]["content"] and "5.2 / 10" in msgs[1]["content"]


def test_with_real_evaluator_and_fake_judge():
    # realistic texts: a two-word draft or a revision of one-letter items is degenerate (near-empty) and capped
    judge = FakeLLM(keyed={"answer>>\nfirst": json.dumps({"relevance": 4, "feedback": "add items",
                                                          "weaknesses": ["too short"]}),
                           "answer>>\n1.": json.dumps({"relevance": 9})})
    cfg = EvaluatorConfig(dimensions={"relevance": 1.0}, composite="rubric")
    producer = FakeLLM(["1. **Use asyncio.run().** It creates and closes the event loop.\n"
                        "2. **Use TaskGroup.** It cancels the sibling tasks when one of them fails."])
    result = wiggum_loop("List 2 things", "first draft: use asyncio.run() as the entry point", producer=producer,
                         evaluate=lambda text: evaluate("List 2 things", text, judge, cfg, expected_count=2),
                         echo_reasons=prompt_echo_reasons, cfg=WiggumConfig())
    assert [r.score for r in result.rounds] == [4.0, 9.0] and result.passed and result.best_round == 2
    assert "add items" in producer.calls[0].messages[1]["content"]
    json.dumps(result.to_dict())


# -- degenerate revisions are never kept (tests fail on f6dbdd5, where the best was max score alone) -------------


@pytest.mark.parametrize("revision_score", [5.0, 6.0, 9.0], ids=["tie", "higher", "passing"])
def test_degenerate_revision_is_never_kept_even_on_a_tie(revision_score):
    result, producer, evaluator, tracer = run({"d0": 5.0, "d1": revision_score}, ["d1"], max_rounds=2,
                                              degenerate={"d1"})
    assert result.best_round == 1 and result.best_text == "d0" and result.best_score == 5.0
    assert not result.passed and not result.rounds[1].passed and result.stop_reason == "max_rounds"
    spans = [e for e in tracer.events if e["name"] == "wiggum.round"]
    assert spans[1]["args"]["degenerate"] == ["repetition: scripted"] and spans[1]["args"]["best_round"] == 1


def test_degenerate_revision_does_not_stop_the_loop_and_the_next_revision_starts_from_the_best():
    result, producer, _, _ = run({"d0": 5.0, "d1": 9.0, "d2": 7.5}, ["d1", "d2"], degenerate={"d1"})
    assert [r.passed for r in result.rounds] == [False, False, True]
    assert current_draft(producer.calls[1].messages[1]["content"]) == "d0"
    assert result.best_round == 3 and result.best_text == "d2" and result.passed


def test_degenerate_draft_gives_way_to_a_clean_revision_on_a_tie_but_not_below():
    tie, *_ = run({"d0": 1.0, "d1": 1.0}, ["d1"], max_rounds=2, degenerate={"d0"})
    assert tie.best_round == 2 and tie.best_text == "d1"
    lower, *_ = run({"d0": 1.0, "d1": 0.5}, ["d1"], max_rounds=2, degenerate={"d0"})
    assert lower.best_round == 1 and lower.best_score == 1.0
    # a degenerate draft never passes, whatever its score: the loop revises it
    flagged, producer, *_ = run({"d0": 9.0, "d1": 9.5}, ["d1"], max_rounds=2, degenerate={"d0"})
    assert len(producer.calls) == 1 and flagged.best_round == 2 and flagged.passed


def test_echo_of_the_revise_prompt_is_caught_by_the_loop_even_when_the_evaluator_is_fooled():
    """The evaluator scores the echo 9.5 and reports nothing; the loop knows the prompt it sent."""
    echo = FakeLLM(keyed={"": lambda messages: messages[1]["content"]})
    scores = {"d0": 5.0}
    evaluator = lambda text: FakeEval(scores.get(text, 9.5))  # noqa: E731
    result = wiggum_loop("Task T", "d0", producer=echo, evaluate=evaluator, echo_reasons=prompt_echo_reasons, cfg=WiggumConfig(max_rounds=3))
    assert [r.score for r in result.rounds] == [5.0, 9.5, 9.5] and not any(r.passed for r in result.rounds[1:])
    assert result.best_round == 1 and result.best_text == "d0" and not result.passed


def test_revision_copying_the_prompt_lines_is_not_kept():
    """No scaffolding heading copied, only the feedback and weaknesses lines: caught against the prompt text."""
    feedback = "Explain why each of the five practices matters in production."
    weaknesses = ("no explanation of why each practice matters", "no Python versions named anywhere")
    copy = f"{feedback}\n\n" + "\n".join(f"- {w}" for w in weaknesses)

    def evaluator(text):
        return FakeEval(5.0 if text == "d0" else 9.0, feedback=feedback, weaknesses=weaknesses)

    result = wiggum_loop("Task T", "d0", producer=FakeLLM([copy]), evaluate=evaluator, echo_reasons=prompt_echo_reasons, cfg=WiggumConfig(max_rounds=2))
    assert result.best_text == "d0" and not result.passed and result.rounds[1].score == 9.0


JUDGE_DIMS = EvaluatorConfig().dimensions
DRAFT = """1. **Use `asyncio.run()`** as the single entry point.
2. **Use `asyncio.TaskGroup`** (3.11+) so failures cancel siblings.
3. **Offload blocking calls** with `asyncio.to_thread()`.
4. **Add timeouts** with `asyncio.timeout()`.
5. **Limit concurrency** with `asyncio.Semaphore`.
"""
SENTENCE = "Use asyncio TaskGroup with a Semaphore and a timeout, and offload blocking calls with run_in_executor."


def _fooled_judge():
    """5/10 for the draft, 9/10 for anything else: a judge that would keep any revision."""
    def reply(score):
        return json.dumps({**{d: score for d in JUDGE_DIMS}, "feedback": "Explain each item.", "weaknesses": ["terse"]})
    return FakeLLM(keyed={"answer>>\n1. **Use `asyncio.run()`**": reply(5), "# Answer to score": reply(9)})


@pytest.mark.parametrize(
    "name, revise",
    [
        ("echoes the revise prompt", lambda messages: messages[1]["content"]),
        ("repeats one sentence", lambda messages: "\n".join(f"{i}. {SENTENCE}" for i in range(1, 6))
         + "\n\n" + " ".join([SENTENCE] * 7)),
        ("headings only", lambda messages: "\n\n".join(f"## {i}. Practice {i}" for i in range(1, 6))),
        ("empty-ish", lambda messages: "..."),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_real_evaluator_round_one_is_kept_when_revisions_degenerate(name, revise):
    task = "List 5 best practices for Python asyncio"
    judge = _fooled_judge()
    producer = FakeLLM(keyed={"": revise})
    result = wiggum_loop(task, DRAFT, producer=producer,
                         evaluate=lambda text: evaluate(task, text, judge, EvaluatorConfig(), expected_count=5),
                         echo_reasons=prompt_echo_reasons, cfg=WiggumConfig(max_rounds=3), seed=1)
    draft_score = result.rounds[0].score
    assert 5.0 < draft_score < 7.0  # the judge's 5 blended with the draft's deterministic criteria
    assert [r.score for r in result.rounds[1:]] == [1.0, 1.0]  # the judge said 9; capped
    assert all(r.evaluation.degenerate for r in result.rounds[1:])
    assert result.best_round == 1 and result.best_text == DRAFT
    assert result.best_score == draft_score and not result.passed and result.stop_reason == "max_rounds"
    assert all(current_draft(c.messages[1]["content"]) == DRAFT.strip() for c in producer.calls)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 20).map(lambda x: x / 2), st.booleans()), min_size=1, max_size=5),
    st.integers(1, 21).map(lambda x: x / 2),
)
def test_kept_text_is_never_worse_than_the_draft(rounds, threshold):
    """Whatever the scores and flags: the kept round scores at least the draft's; a degenerate revision is never
    kept; the kept round is the best-scoring clean one (earliest on ties) unless the draft beats them all."""
    scores = {f"d{i}": score for i, (score, _) in enumerate(rounds)}
    flagged = {f"d{i}" for i, (_, bad) in enumerate(rounds) if bad}
    result, *_ = run(scores, [f"d{i}" for i in range(1, len(rounds))], max_rounds=len(rounds),
                     threshold=threshold, degenerate=flagged)
    seen = result.rounds
    draft = seen[0]
    assert result.best_score >= draft.score
    assert result.best_round == 1 or result.best_text not in flagged
    assert result.passed == (result.best_score >= threshold and result.best_text not in flagged)
    clean_later = [r for r in seen[1:] if r.text not in flagged]
    better = [r for r in clean_later if r.score > draft.score or (r.score == draft.score and draft.text in flagged)]
    if better:
        top = max(r.score for r in better)
        assert result.best_score == top and result.best_round == min(r.round for r in better if r.score == top)
    else:
        assert result.best_round == 1
