"""The verify re-score with a second voice on the attempt verdict.

The run's score is an independent judgement of the kept text (`rescore_config`: a sample at
evaluator.rescore_temperature when the loop's judge is greedy). One line of the rubric decides more than any other:
answers_task false scores every dimension 1 (evaluators.rubric.SCORING_RULES, meant for refusals). A sampled
small judge flips it on good answers: on the 1.5B validation model the re-score wrote answers_task false on 6 of 15
runs whose greedy round it had scored 7.4-8.0 (docs/CALIBRATION.md), about 4 points of run noise that is neither
the answer nor the instruction. So where the re-score's attempt verdict differs from the loop judge's verdict on the
same text, the judge is asked once more (seeds of its own) and that third judgement is the run's score: the verdict
is the majority of three, and the score an independent sample still (the tie-break is chosen by the two earlier
verdicts, never by its own score). Both arms of any comparison run the same rule. `evaluator.rescore_tiebreak:
false` keeps the re-score as it came.

Costs one judge call per disagreement and nothing otherwise. Not asked when the re-score is degenerate (the
deterministic checks cap that score whatever the judge says) or when either verdict is unknown (an unreadable
reply, no judge in the composite).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.config import EvaluatorConfig

from ._wiggum import rescore_config

__all__ = ["TIEBREAK_SEED_OFFSET", "Verified", "attempt_verdict", "verify_rescore"]

# Judge seeds of a tie-break start this far past the re-score's: apart from its repeats and its re-asks.
TIEBREAK_SEED_OFFSET = 500_009


def attempt_verdict(evaluation: Any) -> bool | None:
    """The judge's verdict on whether the answer attempts the task (Evaluation.attempted): None when unknown."""
    verdict = getattr(evaluation, "attempted", None)
    return verdict if isinstance(verdict, bool) else None


@dataclass(frozen=True)
class Verified:
    """The run's evaluation after verify, and what the attempt verdicts were (None: not asked or unknown)."""

    evaluation: Any
    loop_attempted: bool | None = None
    rescore_attempted: bool | None = None
    tiebreak_attempted: bool | None = None
    tiebreak: bool = False  # a third judgement was asked

    def to_dict(self) -> dict[str, Any]:
        return {"asked": self.tiebreak, "loop": self.loop_attempted, "rescore": self.rescore_attempted,
                "tiebreak": self.tiebreak_attempted}


def verify_rescore(
    judge: Callable[[int, EvaluatorConfig], Any],
    *,
    reference: Callable[[], Any],
    seed: int,
    cfg: EvaluatorConfig,
) -> Verified:
    """Re-score with `judge(seed, rescore_config(cfg))`; where its attempt verdict and the loop judge's
    (`reference()`, the loop's evaluation of the same text, asked only when the re-score's verdict is known) differ,
    judge once more at seed + TIEBREAK_SEED_OFFSET and keep that judgement (the re-score's when the tie-break's
    verdict is unknown: its reply could not be read). Backend errors propagate, as the re-score's always did."""
    judge_cfg = rescore_config(cfg)
    evaluation = judge(seed, judge_cfg)
    rescored = attempt_verdict(evaluation)
    if not getattr(cfg, "rescore_tiebreak", True) or rescored is None or getattr(evaluation, "degenerate", ()):
        return Verified(evaluation, rescore_attempted=rescored)
    loop = attempt_verdict(reference())
    if loop is None or loop == rescored:
        return Verified(evaluation, loop_attempted=loop, rescore_attempted=rescored)
    third = judge(seed + TIEBREAK_SEED_OFFSET, judge_cfg)
    verdict = attempt_verdict(third)
    return Verified(evaluation if verdict is None else third, loop_attempted=loop, rescore_attempted=rescored,
                    tiebreak_attempted=verdict, tiebreak=True)
