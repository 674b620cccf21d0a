"""The verify re-score's second voice on answers_task (harness.review.verify_rescore, issue 42).

A sampled small judge writes answers_task false about good answers (the 1.5B: 6 of 15 re-scores of answers its
greedy round had scored 7.4-8.0), and that one word scores every dimension 1. Where the re-score's verdict and the
loop judge's on the same text differ, a third judgement decides and is the run's score. Before this rule a single
flipped sample floored the run (the first pipeline test fails on 1ebf837)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from evaluators.composite import Evaluation
from evaluators.rubric import EvalResult
from harness.config import EvaluatorConfig
from harness.review import RESCORE_SEED_OFFSET, TIEBREAK_SEED_OFFSET, verify_rescore
from pipeline_fake import Router, judge_json, make_harness

DIMS = ("relevance", "completeness", "depth", "specificity", "structure", "grounded")


def not_attempted_json() -> str:
    """A judge that states the verdict and then writes its usual numbers (the rubric floors them)."""
    return json.dumps({"answers_task": False, **{d: 8 for d in DIMS}, "feedback": "Off the task.",
                       "weaknesses": ["does not provide the requested number of items"]})


def attempted_json(score: int) -> str:
    return json.dumps({"answers_task": True, **{d: score for d in DIMS}, "feedback": "Add versions.",
                       "weaknesses": ["few versions"]})


def evaluation(score: float, *, not_attempted: int = 0, repeats: int = 1, failures: int = 0,
               degenerate: tuple[str, ...] = ()) -> Evaluation:
    rubric = EvalResult(dimensions={d: score for d in DIMS}, weighted=None if failures >= repeats else score,
                        feedback="", weaknesses=(), parser="failed" if failures >= repeats else "json",
                        repeats=repeats, judge_sd=0.0, parse_failures=failures, not_attempted=not_attempted)
    return Evaluation(rubric=rubric, deterministic={}, composite=None if rubric.failed else score,
                      degenerate=degenerate)


class Judge:
    """Scripted judgements by seed; records the seeds and temperatures it was asked at."""

    def __init__(self, by_offset: dict[int, Evaluation]) -> None:
        self.by_offset = by_offset
        self.asked: list[tuple[int, float]] = []

    def __call__(self, seed: int, cfg: EvaluatorConfig) -> Evaluation:
        self.asked.append((seed, cfg.temperature))
        return self.by_offset[seed - 100]


@pytest.mark.parametrize("repeats,not_attempted,failures,expected", [
    (1, 0, 0, True), (1, 1, 0, False), (3, 2, 0, False), (3, 1, 0, True), (2, 1, 0, True),
    (3, 1, 1, True), (3, 2, 1, False), (1, 0, 1, None),
])
def test_the_attempt_verdict_is_the_majority_of_the_readable_repeats(repeats, not_attempted, failures, expected):
    assert evaluation(7.0, not_attempted=not_attempted, repeats=repeats, failures=failures).attempted is expected
    assert Evaluation(rubric=None, deterministic={}, composite=6.0, mode="deterministic").attempted is None


def test_agreeing_verdicts_keep_the_re_score_and_ask_nothing_more():
    judge = Judge({0: evaluation(1.0, not_attempted=1)})
    asked_reference = []
    out = verify_rescore(judge, reference=lambda: asked_reference.append(1) or evaluation(1.0, not_attempted=1),
                         seed=100, cfg=EvaluatorConfig())
    assert out.evaluation is judge.by_offset[0] and not out.tiebreak and asked_reference == [1]
    assert judge.asked == [(100, 0.7)]  # the re-score samples at rescore_temperature under a greedy loop judge
    assert out.to_dict() == {"asked": False, "loop": False, "rescore": False, "tiebreak": None}


@pytest.mark.parametrize("tiebreak_attempts", [True, False])
def test_a_disagreement_is_decided_by_a_third_judgement_which_is_the_score(tiebreak_attempts):
    third = evaluation(7.5) if tiebreak_attempts else evaluation(1.0, not_attempted=1)
    judge = Judge({0: evaluation(1.0, not_attempted=1), TIEBREAK_SEED_OFFSET: third})
    out = verify_rescore(judge, reference=lambda: evaluation(7.8), seed=100, cfg=EvaluatorConfig())
    assert out.tiebreak and out.evaluation is third
    assert judge.asked == [(100, 0.7), (100 + TIEBREAK_SEED_OFFSET, 0.7)]
    assert out.to_dict() == {"asked": True, "loop": True, "rescore": False, "tiebreak": tiebreak_attempts}


def test_the_rule_is_symmetric_a_re_score_that_lifts_a_loop_refusal_is_checked_too():
    third = evaluation(1.0, not_attempted=1)
    judge = Judge({0: evaluation(8.0), TIEBREAK_SEED_OFFSET: third})
    out = verify_rescore(judge, reference=lambda: evaluation(1.0, not_attempted=1), seed=100, cfg=EvaluatorConfig())
    assert out.tiebreak and out.evaluation.composite == 1.0


def test_an_unreadable_tie_break_leaves_the_re_score_as_it_came():
    rescore = evaluation(1.0, not_attempted=1)
    judge = Judge({0: rescore, TIEBREAK_SEED_OFFSET: evaluation(5.0, failures=1)})
    out = verify_rescore(judge, reference=lambda: evaluation(7.8), seed=100, cfg=EvaluatorConfig())
    assert out.tiebreak and out.evaluation is rescore and out.tiebreak_attempted is None


def test_no_tie_break_when_off_degenerate_or_a_verdict_is_unknown():
    def reference_never():
        raise AssertionError("the loop judge's verdict was asked for")

    off = EvaluatorConfig(rescore_tiebreak=False)
    for cfg, rescore in [(off, evaluation(1.0, not_attempted=1)),
                         (EvaluatorConfig(), evaluation(1.0, not_attempted=1, degenerate=("prompt echo: # task",))),
                         (EvaluatorConfig(), evaluation(5.0, failures=1))]:
        judge = Judge({0: rescore})
        out = verify_rescore(judge, reference=reference_never, seed=100, cfg=cfg)
        assert out.evaluation is rescore and not out.tiebreak and len(judge.asked) == 1
    judge = Judge({0: evaluation(1.0, not_attempted=1)})
    out = verify_rescore(judge, reference=lambda: evaluation(5.0, failures=1), seed=100, cfg=EvaluatorConfig())
    assert not out.tiebreak and out.loop_attempted is None and len(judge.asked) == 1


# -- through the whole run ------------------------------------------------------------------------------------------


def _run(tmp_path, judge_replies, **evaluator_over):
    router = Router(judge=list(judge_replies))
    h = make_harness(tmp_path, router)
    h.cfg.evaluator = dataclasses.replace(h.cfg.evaluator, **evaluator_over)
    llm = h.roles.evaluator.inner
    result = h.run("List 5 best practices for asyncio")
    seeds = [c.seed for c in llm.calls if c.seed is not None and c.seed >= h.cfg.seed + RESCORE_SEED_OFFSET]
    return result, router, seeds, h.cfg.seed


def test_a_flipped_re_score_no_longer_floors_a_run_the_loop_judge_called_an_attempt(tmp_path):
    # round 1 (greedy): an attempt scored 8; the re-score sample: answers_task false; the tie-break: an attempt, 7
    result, router, seeds, seed = _run(tmp_path, [attempted_json(8), not_attempted_json(), attempted_json(7)])
    assert router.calls["judge"] == 3
    assert seeds == [seed + RESCORE_SEED_OFFSET, seed + RESCORE_SEED_OFFSET + TIEBREAK_SEED_OFFSET]
    assert result.evaluation.rubric.dimensions == {d: 7.0 for d in DIMS}  # the tie-break's judgement is the score
    assert result.record["wiggum"]["attempt_verdicts"] == {"asked": True, "loop": True, "rescore": False,
                                                          "tiebreak": True}
    off, _, _, _ = _run(tmp_path / "off", [attempted_json(8), not_attempted_json()], rescore_tiebreak=False)
    assert off.evaluation.rubric.dimensions == {d: 1.0 for d in DIMS}  # the old rule: one sample floors the run
    assert result.score > off.score + 2


def test_a_refusal_both_judgements_call_one_is_floored_without_a_third_call(tmp_path):
    result, router, seeds, _ = _run(tmp_path, [not_attempted_json(), not_attempted_json(), attempted_json(9)])
    assert router.calls["judge"] == 2 and len(seeds) == 1
    assert result.evaluation.rubric.dimensions == {d: 1.0 for d in DIMS}
    assert result.record["wiggum"]["attempt_verdicts"]["asked"] is False


def test_judges_that_agree_cost_no_extra_call(tmp_path):
    result, router, _, _ = _run(tmp_path, [judge_json(8), judge_json(6)])
    assert router.calls["judge"] == 2 and result.evaluation.rubric.dimensions == {d: 6.0 for d in DIMS}
