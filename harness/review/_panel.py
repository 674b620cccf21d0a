"""The review panel: personas read the final answer and each give a bounded verdict (accept / revise / reject,
a 1-10 score, a short comment). Advisory only: a reply that cannot be read is recorded as "unparsed" and a
backend failure as "error"; the panel never raises for a persona's sake."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.inference import BackendError
from harness.security import DataMarker
from harness.text import JSONParseError, extract_number_field, extract_string_field, parse_json_object

__all__ = [
    "DEFAULT_PERSONAS",
    "PERSONA_BRIEFS",
    "VERDICTS",
    "PanelVerdict",
    "panel_schema",
    "panel_messages",
    "parse_verdict",
    "run_panel",
    "summarize",
]

DEFAULT_PERSONAS = ("domain practitioner", "critical reviewer", "informed newcomer")
VERDICTS = ("accept", "revise", "reject")
COMMENT_MAX_CHARS = 300
MAX_ANSWER_CHARS = 10000

PERSONA_BRIEFS: dict[str, str] = {
    "domain practitioner": "You work in this field every day. Judge whether the answer is correct and usable in practice.",
    "critical reviewer": "You review for a demanding journal. Look for unsupported claims, gaps and vagueness.",
    "informed newcomer": "You know the basics but not this topic. Judge whether the answer is clear and teaches you what you asked.",
}

_SYNONYMS = {
    "accept": "accept", "accepted": "accept", "approve": "accept", "approved": "accept", "pass": "accept",
    "revise": "revise", "revision": "revise", "minor revision": "revise", "major revision": "revise",
    "revise and resubmit": "revise", "needs revision": "revise", "improve": "revise",
    "reject": "reject", "rejected": "reject", "fail": "reject",
}


@dataclass(frozen=True)
class PanelVerdict:
    persona: str
    verdict: str  # accept | revise | reject | unparsed | error
    score: float | None
    comment: str
    parser: str = "json"  # json | dirtyjson | regex | failed | error

    def to_dict(self) -> dict[str, Any]:
        return {"persona": self.persona, "verdict": self.verdict, "score": self.score, "comment": self.comment,
                "parser": self.parser}


def panel_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": list(VERDICTS)},
            "score": {"type": "integer", "minimum": 1, "maximum": 10},
            "comment": {"type": "string", "maxLength": COMMENT_MAX_CHARS},
        },
        "required": ["verdict", "score", "comment"],
        "additionalProperties": False,
    }


def panel_messages(task: str, output: str, persona: str) -> list[dict[str, str]]:
    brief = PERSONA_BRIEFS.get(persona.lower(), f"You review answers as a {persona}.")
    answer = output if len(output) <= MAX_ANSWER_CHARS else output[:MAX_ANSWER_CHARS] + "\n[... truncated]"
    system = (
        f"You are a {persona} on a review panel. {brief} Reply with one JSON object: "
        '{"verdict": "accept" | "revise" | "reject", "score": <1-10>, "comment": "<one or two sentences>"}.'
    )
    marker = DataMarker.for_run(task)  # the answer may carry an instruction planted in a source: data, not orders
    user = f"# Task\n{task.strip()}\n\n{marker.notice()}\n\n# Answer under review\n{marker.wrap(answer, 'answer')}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _verdict(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    key = " ".join(value.lower().strip().strip(".!\"'").split())
    return _SYNONYMS.get(key)


def _score(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        m = re.match(r"\s*(\d+(?:\.\d+)?)", value)
        value = float(m.group(1)) if m else None
    if not isinstance(value, (int, float)):
        return None
    return float(min(10.0, max(1.0, value)))


def _comment(value: Any) -> str:
    return " ".join(str(value or "").split())[:COMMENT_MAX_CHARS]


def parse_verdict(persona: str, text: str) -> PanelVerdict:
    """Read one persona's reply: json -> dirtyjson -> regex on the fields -> "unparsed". Never raises."""
    text = text if isinstance(text, str) else ""
    try:
        obj, parser = parse_json_object(text)
    except JSONParseError:
        obj, parser = None, "failed"
    if obj is not None:
        lowered = {str(k).lower(): v for k, v in obj.items()}
        verdict = _verdict(lowered.get("verdict") or lowered.get("decision"))
        if verdict:
            return PanelVerdict(persona, verdict, _score(lowered.get("score")), _comment(lowered.get("comment")), parser)
    verdict = _verdict(extract_string_field(text, "verdict") or "")
    if verdict is None:
        m = re.search(r"\bverdict\b\W{0,4}(accept\w*|revise|revision|reject\w*)", text, re.IGNORECASE)
        verdict = _verdict(m.group(1)) if m else None
    if verdict is None:
        return PanelVerdict(persona, "unparsed", None, _comment(text)[:COMMENT_MAX_CHARS], "failed")
    return PanelVerdict(
        persona, verdict, _score(extract_number_field(text, "score")), _comment(extract_string_field(text, "comment")), "regex"
    )


def run_panel(
    task: str,
    output: str,
    llm: Any,
    personas: Sequence[str] = DEFAULT_PERSONAS,
    *,
    temperature: float = 0.3,
    max_tokens: int = 200,
    seed: int | None = 0,
) -> tuple[PanelVerdict, ...]:
    """One bounded-JSON call per persona, in order."""
    verdicts = []
    schema = panel_schema()
    for i, persona in enumerate(p for p in personas if isinstance(p, str) and p.strip()):
        try:
            reply = llm.chat(
                panel_messages(task, output, persona), schema=schema, temperature=temperature,
                max_tokens=max_tokens, seed=None if seed is None else seed + i,
            )
        except BackendError as exc:
            verdicts.append(PanelVerdict(persona, "error", None, f"{type(exc).__name__}: {exc}"[:COMMENT_MAX_CHARS], "error"))
            continue
        verdicts.append(parse_verdict(persona, reply.text))
    return tuple(verdicts)


def summarize(verdicts: Sequence[PanelVerdict]) -> dict[str, Any]:
    """Counts per verdict and the mean score of the readable verdicts (for the run record)."""
    counts = {v: 0 for v in (*VERDICTS, "unparsed", "error")}
    for v in verdicts:
        counts[v.verdict] = counts.get(v.verdict, 0) + 1
    scores = [v.score for v in verdicts if v.score is not None]
    return {
        "verdicts": counts,
        "mean_score": round(sum(scores) / len(scores), 3) if scores else None,
        "accepted": counts["accept"],
        "n": len(verdicts),
    }
