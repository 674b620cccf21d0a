"""The side-by-side judge: which of two answers to the same task is better, asked in both orders.

A pointwise 1-10 score carries the judge's own noise on each answer: a greedy judge gives the same number for the
same text, but a slightly different text draws a new error, and that error lands in the per-task difference of two
arms as if it were a task x variant effect. Judging the two answers side by side asks the judge the question the
experiment asks ("is B better than A on this task?"); Arena-Hard-Auto (arXiv 2406.11939) reports intervals about
3x tighter than pointwise scores that way. Judges prefer the answer shown first (about 63% across 27 judges), so
each pair is judged in both orders and the two verdicts combined:

- both orders pick the same answer: +1 (candidate) or -1 (baseline);
- the orders disagree (each picked the answer shown first, or each the one shown second): 0, a tie;
- one order says tie, the other picks: +-0.5.

`PairResult.preference` is that value, in [-1, 1], from the candidate's side: the paired unit of one task. A reply
that cannot be read is asked again (`judge_retries`, a new seed and twice the max_tokens); still unreadable, the
preference is missing (None) and `judge_failures` counts it: never a tie, which would pull the mean to 0 and
reward whichever arm's answers made the judge fail. `position_bias` reads how often the first-shown answer won.

Both answers go in data blocks (harness.security.DataMarker): an answer written from untrusted sources may carry
an instruction aimed at the judge ("prefer this answer"). The prompt is blind: it never says which is the
candidate; the order is the only thing that changes between the two calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from harness.security import DataMarker
from harness.text import JSONParseError, extract_string_field, parse_json_object

__all__ = ["PairResult", "PositionBias", "VERDICTS", "combine_orders", "compare_pair", "disagreement_rate", "pairwise_messages",
           "pairwise_schema", "parse_preference", "position_bias"]

VERDICTS = ("A", "B", "tie")
REASON_MAX_CHARS = 400
MAX_ANSWER_CHARS = 8000  # each of the two answers; the rubric judge sees one answer of up to 12,000
RETRY_SEED_OFFSET = 7_919
SECOND_ORDER_SEED_OFFSET = 104_729  # the swapped order's seeds: apart from the first order's and its retries'

_CRITERIA = (
    "Prefer the answer that does the task better: it answers what was asked, covers all of it (the requested "
    "number of items, every part of the question), explains why and how with concrete specifics, is organised, "
    "and claims nothing it cannot support. Length is not quality: a longer answer wins only when the extra text "
    "adds something the task needs. Say tie only when neither is better on the whole."
)


def pairwise_schema() -> dict[str, Any]:
    """Reason first, then the verdict: a small model fills a verdict from a template when it comes first."""
    return {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": REASON_MAX_CHARS},
            "verdict": {"type": "string", "enum": list(VERDICTS)},
        },
        "required": ["reason", "verdict"],
        "additionalProperties": False,
    }


def _clip(text: str) -> str:
    return text if len(text) <= MAX_ANSWER_CHARS else text[:MAX_ANSWER_CHARS] + "\n[... answer truncated]"


def pairwise_messages(task: str, first: str, second: str, *, expected_count: int | None = None) -> list[dict[str, str]]:
    """The prompt for one order: `first` is shown as answer A, `second` as answer B."""
    marker = DataMarker.for_run(task)
    criteria = _CRITERIA + (f" The task asks for exactly {expected_count} items." if expected_count else "")
    system = (
        "You are a strict, fair reviewer comparing two written answers to the same task. Judge only what the "
        "answers say. The order in which they are shown means nothing. First give your reason in at most two "
        "sentences, then your verdict: A, B or tie.\nReply with one JSON object and nothing else."
    )
    user = (
        f"# Task\n{task.strip()}\n\n# How to compare\n{criteria}\n\n{marker.notice()}\n\n"
        f"# Answer A\n{marker.wrap(_clip(first), 'answer A')}\n\n# Answer B\n{marker.wrap(_clip(second), 'answer B')}\n\n"
        'Reply as JSON: {"reason": "<at most 2 sentences>", "verdict": "<A, B or tie>"}'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _verdict_of(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    v = value.strip().strip("\"'`*. ").lower()
    v = re.sub(r"^(answer|response)\s+", "", v)
    return {"a": "A", "b": "B", "tie": "tie", "draw": "tie", "equal": "tie", "both": "tie"}.get(v)


def parse_preference(text: str) -> tuple[str | None, str]:
    """One reply -> (verdict A | B | tie, or None when none can be read; the reason). Never raises."""
    text = text if isinstance(text, str) else ""
    try:
        obj, _ = parse_json_object(text)
    except JSONParseError:
        obj = None
    if isinstance(obj, dict):
        lowered = {str(k).lower().strip(): v for k, v in obj.items()}
        verdict = _verdict_of(lowered.get("verdict", lowered.get("winner", lowered.get("better"))))
        reason = " ".join(str(lowered.get("reason") or "").split())[:REASON_MAX_CHARS]
        if verdict is not None:
            return verdict, reason
    # a reply cut after the verdict's value, or prose around it: the verdict field alone, never a guess from prose
    verdict = _verdict_of(extract_string_field(text, "verdict") or "")
    reason = " ".join((extract_string_field(text, "reason") or "").split())[:REASON_MAX_CHARS]
    return verdict, reason


def _to_candidate(verdict: str | None, candidate_is: str) -> float | None:
    """A verdict in one order -> +1 candidate better, -1 baseline better, 0 tie (None: unreadable)."""
    if verdict is None:
        return None
    if verdict == "tie":
        return 0.0
    return 1.0 if verdict == candidate_is else -1.0


def combine_orders(first: float | None, second: float | None) -> float | None:
    """The two orders' candidate-side verdicts -> one preference: agreement counts, a disagreement is a tie (their
    mean: +1 and -1 give 0; a tie and a pick give +-0.5). None when either order is missing."""
    if first is None or second is None:
        return None
    return (first + second) / 2.0


@dataclass(frozen=True)
class PairResult:
    """Both orders of one task's comparison, from the candidate's side."""

    preference: float | None  # in [-1, 1]; None: a judge failure (missing, never a tie)
    verdicts: tuple[str | None, str | None]  # raw verdicts: order 1 (candidate shown as A), order 2 (as B)
    first_won: tuple[bool | None, bool | None]  # per order: the answer shown first won (None: tie or unreadable)
    reasons: tuple[str, str] = ("", "")
    judge_failures: int = 0  # replies that could not be read, re-asked ones included
    raw: tuple[str, ...] = field(default=(), repr=False)

    @property
    def failed(self) -> bool:
        return self.preference is None

    @property
    def disagreed(self) -> bool:
        """The two orders picked opposite answers (each the one in the same position): a tie by disagreement."""
        return not self.failed and (set(self.verdicts) == {"A"} or set(self.verdicts) == {"B"})

    @property
    def calls(self) -> int:
        """Judge calls made: one per order, plus one re-ask per unreadable reply that was not its order's last (an
        order that ended unreadable made as many calls as it had unreadable replies)."""
        return 2 + self.judge_failures - sum(1 for v in self.verdicts if v is None)

    def to_dict(self) -> dict[str, Any]:
        return {"preference": self.preference, "verdicts": list(self.verdicts), "first_won": list(self.first_won),
                "reasons": list(self.reasons), "judge_failures": self.judge_failures}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PairResult":
        """The inverse of to_dict (a ledger line); the raw replies are not kept there."""
        return cls(data.get("preference"), tuple(data.get("verdicts") or (None, None)),  # type: ignore[arg-type]
                   tuple(data.get("first_won") or (None, None)), tuple(data.get("reasons") or ("", "")),
                   int(data.get("judge_failures") or 0))


def _ask(llm: Any, messages: list[dict[str, str]], *, temperature: float, max_tokens: int, seed: int,
         retries: int) -> tuple[str | None, str, int, list[str]]:
    unreadable, raws = 0, []
    verdict, reason = None, ""
    for attempt in range(retries + 1):
        reply = llm.chat(messages, schema=pairwise_schema(), temperature=temperature,
                         max_tokens=max_tokens * (2 if attempt else 1), seed=seed + RETRY_SEED_OFFSET * attempt)
        raws.append(reply.text[:1000])
        verdict, reason = parse_preference(reply.text)
        if verdict is not None:
            break
        unreadable += 1
    return verdict, reason, unreadable, raws


def compare_pair(task: str, candidate: str, baseline: str, llm: Any, *, seed: int = 0, temperature: float = 0.0,
                 max_tokens: int = 200, judge_retries: int = 1, expected_count: int | None = None) -> PairResult:
    """Judge `candidate` against `baseline` on `task` in both orders (two judge calls, more on a re-ask).
    Backend errors propagate; an unreadable reply is a judge failure (preference None)."""
    if isinstance(judge_retries, bool) or not isinstance(judge_retries, int) or not 0 <= judge_retries <= 5:
        raise ValueError(f"evaluator.judge_retries must be an integer 0-5, got {judge_retries!r}")
    v1, r1, f1, raw1 = _ask(llm, pairwise_messages(task, candidate, baseline, expected_count=expected_count),
                            temperature=temperature, max_tokens=max_tokens, seed=seed, retries=judge_retries)
    v2, r2, f2, raw2 = _ask(llm, pairwise_messages(task, baseline, candidate, expected_count=expected_count),
                            temperature=temperature, max_tokens=max_tokens, seed=seed + SECOND_ORDER_SEED_OFFSET,
                            retries=judge_retries)
    pref = combine_orders(_to_candidate(v1, "A"), _to_candidate(v2, "B"))
    first_won = tuple(None if v in (None, "tie") else v == "A" for v in (v1, v2))
    return PairResult(pref, (v1, v2), first_won, (r1, r2), f1 + f2, tuple(raw1 + raw2))  # type: ignore[arg-type]


@dataclass(frozen=True)
class PositionBias:
    """How often the answer shown first won, over the decided (non-tie, readable) verdicts of both orders. With no
    position bias and candidate quality balanced by the two orders, `rate` is near 0.5."""

    first_wins: int
    decided: int

    @property
    def rate(self) -> float | None:
        return self.first_wins / self.decided if self.decided else None

    def line(self) -> str:
        if not self.decided:
            return "position bias: no decided verdicts"
        return (f"position bias: the answer shown first won {self.first_wins} of {self.decided} decided verdicts "
                f"({self.rate:.0%}; 50% is none)")


def position_bias(results: Iterable[PairResult]) -> PositionBias:
    wins = decided = 0
    for r in results:
        for w in r.first_won:
            if w is not None:
                decided += 1
                wins += bool(w)
    return PositionBias(wins, decided)


def disagreement_rate(results: Sequence[PairResult]) -> float | None:
    """Share of readable pairs whose two orders picked opposite answers (a tie by disagreement)."""
    both = [r for r in results if not r.failed]
    if not both:
        return None
    return sum(r.disagreed for r in both) / len(both)
