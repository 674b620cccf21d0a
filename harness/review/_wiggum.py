"""The wiggum loop: evaluate -> revise -> verify, up to cfg.max_rounds evaluated rounds.

Round 1 scores the draft. Below the threshold, the producer revises the best draft so far using the
evaluator's feedback and weaknesses, and the revision is scored in the next round. The loop stops at PASS, at
max_rounds, or when a revision call fails; the best-scoring round is kept, so a regressing revision never
replaces a better earlier draft. A round whose judged score is missing (the judge's reply could not be read:
composite None) never passes and is never kept over a scored round; while no round has a score the draft stays
the one revised and kept. Scoring lives in evaluators/ (the ground truth); this module is only the loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.config import EvaluatorConfig, WiggumConfig
from harness.inference import BackendError
from harness.security import DataMarker
from harness.synthesis import strip_fences
from harness.tracing import current_tracer

__all__ = [
    "RESCORE_SEED_OFFSET", "WiggumRound", "WiggumResult", "rescore_config", "rescore_samples", "revision_messages",
    "wiggum_loop",
]

# Judge seeds of the verify re-score start here: disjoint from the loop's (seed, seed + 1, ... per repeat).
RESCORE_SEED_OFFSET = 1_000_003


def rescore_samples(cfg: EvaluatorConfig) -> bool:
    """Whether verify re-scores the kept text: rescore on and a judge in the composite. Whatever the loop's judge
    temperature: the kept round was chosen by the sample that scored it, so that score is flattered (measured in a
    world where a revision cannot change quality: +0.24 over round one with a greedy judge and no re-score)."""
    return bool(cfg.rescore) and cfg.composite != "deterministic"


def rescore_config(cfg: EvaluatorConfig) -> EvaluatorConfig:
    """The verify re-score's evaluator config: the loop's, sampling at cfg.rescore_temperature when the loop's
    judge is greedy (a greedy judge returns the sample that chose the round whatever the seed)."""
    if cfg.temperature > 0:
        return cfg
    temperature = cfg.rescore_temperature
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0.01 <= temperature <= 2:
        raise ValueError(f"evaluator.rescore_temperature must be in [0.01, 2] when evaluator.temperature is 0, got "
                         f"{temperature!r}")
    return dataclasses.replace(cfg, temperature=float(temperature))


@dataclass(frozen=True)
class WiggumRound:
    round: int
    text: str
    score: float | None  # None: the judged score is missing (the judge's reply could not be read)
    passed: bool
    feedback: str
    weaknesses: tuple[str, ...] = ()
    evaluation: Any = None  # the Evaluation behind the score


@dataclass(frozen=True)
class WiggumResult:
    best_text: str
    best_score: float | None  # None when no round has a judged score
    best_round: int
    rounds: tuple[WiggumRound, ...]
    passed: bool
    stop_reason: str = "passed"  # passed | max_rounds | revision_error | evaluation_error | empty_revision
    error: str | None = None

    @property
    def regressed(self) -> bool:
        """A later round scored below the best one (the best was kept)."""
        if self.best_score is None:
            return False
        return any(r.round > self.best_round and r.score is not None and r.score < self.best_score
                   for r in self.rounds)

    @property
    def judge_failures(self) -> int:
        """Judge replies that could not be read over the loop's rounds (Evaluation.judge_failures)."""
        return sum(int(getattr(r.evaluation, "judge_failures", 0) or 0) for r in self.rounds)

    @property
    def best_evaluation(self) -> Any:
        return self.rounds[self.best_round - 1].evaluation if self.rounds else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "best_score": self.best_score,
            "best_round": self.best_round,
            "passed": self.passed,
            "verdict": "PASS" if self.passed else "FAIL",
            "stop_reason": self.stop_reason,
            "error": self.error,
            "regressed": self.regressed,
            "rounds": [
                {"round": r.round, "score": r.score, "passed": r.passed, "feedback": r.feedback,
                 "weaknesses": list(r.weaknesses), "chars": len(r.text),
                 "judge_failures": int(getattr(r.evaluation, "judge_failures", 0) or 0)}
                for r in self.rounds
            ],
        }


def revision_messages(
    task: str, draft: str, feedback: str, weaknesses: tuple[str, ...], score: float | None,
    marker: DataMarker | None = None,
) -> list[dict[str, str]]:
    """The producer's revision prompt: the evaluator's feedback and weaknesses, and the draft to improve.

    The draft was written from untrusted research context and may carry an instruction planted there: it goes in a
    data block of `marker` (default: the one derived from the task), to be revised, never obeyed."""
    marker = marker if marker is not None else DataMarker.for_run(task)
    weak = "\n".join(f"- {w}" for w in weaknesses) if weaknesses else "- (none listed)"
    shown = f"{score:.1f} / 10" if score is not None else "(none: the reviewer's reply could not be read)"
    system = (
        "You revise a Markdown answer so that it scores higher with a strict reviewer. Fix every weakness the "
        "reviewer names, keep what already works, keep the same format and the number of items the task asks "
        "for. Return only the complete revised answer."
    )
    notice = f"{marker.notice()}\n\n" if marker.enabled else ""
    user = (
        f"# Task\n{task.strip()}\n\n{notice}# Reviewer score\n{shown}\n\n# Reviewer feedback\n"
        f"{feedback.strip()}\n\n# Weaknesses to fix\n{weak}\n\n# Current draft\n{marker.wrap(draft, 'draft')}\n\n"
        "Write the revised answer now."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _score(evaluation: Any) -> float | None:
    value = getattr(evaluation, "composite", evaluation)
    if value is None:  # the judged score is missing
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"evaluate() must return an Evaluation with a numeric or None composite, got {value!r}")
    return float(value)


def _replaces(score: float | None, degenerate: bool, best: WiggumRound, best_degenerate: bool) -> bool:
    """Whether a round replaces the best so far. A round without a judged score never does; a scored round
    always replaces an unscored best (a failed judge is never a reason to keep a round); otherwise a degenerate
    round never does, and a higher score, or a tie with a degenerate best, does."""
    if score is None:
        return False
    if best.score is None:
        return True
    return not degenerate and (score > best.score or (score == best.score and best_degenerate))


def wiggum_loop(
    task: str,
    draft: str,
    *,
    producer: Any,
    evaluate: Callable[[str], Any],
    echo_reasons: Callable[..., tuple[str, ...]],
    cfg: WiggumConfig,
    temperature: float = 0.3,
    max_tokens: int = 900,
    seed: int | None = None,
) -> WiggumResult:
    """Evaluate, revise, verify; never more than cfg.max_rounds evaluations (and max_rounds - 1 revisions).

    An evaluation error in round 1 propagates (there is nothing to keep); later evaluation errors and revision
    BackendErrors end the loop with the best round so far and the reason recorded."""
    if cfg.max_rounds < 1:
        raise ValueError(f"wiggum.max_rounds must be >= 1, got {cfg.max_rounds!r}")
    tracer = current_tracer()
    rounds: list[WiggumRound] = []
    best: WiggumRound | None = None
    best_degenerate = False
    messages: list[dict[str, str]] = []
    text = draft
    stop_reason, error = "max_rounds", None
    marker = DataMarker.for_run(task, seed)  # one per run: the same task and seed give the same prompts on resume

    for n in range(1, cfg.max_rounds + 1):
        with tracer.span("wiggum.round", cat="round", round=n) as span:
            try:
                evaluation = evaluate(text)
            except BackendError as exc:
                if best is None:
                    raise
                stop_reason, error = "evaluation_error", f"{type(exc).__name__}: {exc}"[:300]
                span.update(error=error)
                break
            score = _score(evaluation)
            # keep-best: a degenerate round (the evaluator's Evaluation.degenerate reasons, or a revision that
            # echoes the revise prompt it was given, which only the loop sees) never passes and never replaces
            # the best round, not even on a tie; the draft (round 1) stays the best until a non-degenerate
            # revision scores above it (or ties it when the draft itself is degenerate)
            degenerate = tuple(getattr(evaluation, "degenerate", None) or ())
            if not degenerate and n > 1:
                degenerate = echo_reasons(text, prompt=messages)
            passed = score is not None and score >= cfg.threshold and not degenerate
            current = WiggumRound(
                n, text, score, passed,
                str(getattr(evaluation, "feedback", "") or ""),
                tuple(getattr(evaluation, "weaknesses", ()) or ()),
                evaluation,
            )
            rounds.append(current)
            if best is None or _replaces(score, bool(degenerate), best, best_degenerate):
                best, best_degenerate = current, bool(degenerate)
            span.update(score=None if score is None else round(score, 4), passed=passed, best_round=best.round)
            if degenerate:
                span.update(degenerate=list(degenerate))
            if passed:
                stop_reason = "passed"
                break
            if n == cfg.max_rounds:
                break
            messages = revision_messages(task, best.text, best.feedback, best.weaknesses, best.score, marker)
            try:
                reply = producer.chat(
                    messages, temperature=temperature, max_tokens=max_tokens, seed=None if seed is None else seed + n
                )
            except BackendError as exc:
                stop_reason, error = "revision_error", f"{type(exc).__name__}: {exc}"[:300]
                span.update(error=error)
                break
            text = marker.clean(strip_fences(reply.text))
            if not text:
                stop_reason, error = "empty_revision", f"round {n}: the producer returned an empty revision"
                span.update(error=error)
                break

    assert best is not None
    return WiggumResult(
        best_text=best.text,
        best_score=best.score,
        best_round=best.round,
        rounds=tuple(rounds),
        passed=best.passed,  # best.score >= threshold, and the kept round is not degenerate
        stop_reason=stop_reason,
        error=error,
    )
