"""The wiggum rubric: an LLM judge scores named dimensions 1-10, weighted into one total.

One judge call per repeat, with a bounded JSON schema. Parsing falls down a ladder: json -> dirtyjson ->
regex per dimension (`"depth": 7`, `Depth: 7/10`). A reply nothing can be read from, or one missing any scored
dimension (weight > 0; a reply cut off mid-object when max_tokens ran out), is asked again (cfg.judge_retries
times, a new seed and twice the max_tokens: a reply cut off is the usual cause); still unreadable or partial, the
repeat is marked failed and scores None: no number is invented, a total is never taken over the dimensions present
(a reply cut after 2 of 6 dimensions scored 7.47 where the whole reply scored 4.97), and the composite's judged
score is missing (evaluators.composite), never the deterministic criteria alone. `EvalResult.judge_failures`
counts every reply that could not be read in full, the retried ones included.
The prompt is blind: it carries the task, the answer and the criteria, never the config or arm that made it.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.config import EvaluatorConfig
from harness.security import DataMarker
from harness.text import JSONParseError, extract_string_field, extract_string_list, parse_json_object

__all__ = [
    "EvalResult",
    "RubricParse",
    "DIMENSION_GUIDE",
    "TASK_CRITERIA",
    "rubric_schema",
    "rubric_messages",
    "parse_rubric",
    "weighted_total",
    "score_rubric",
]

FEEDBACK_MAX_CHARS = 400
WEAKNESS_MAX_CHARS = 160
MAX_WEAKNESSES = 3
MAX_ANSWER_CHARS = 12000
RETRY_SEED_OFFSET = 7_919  # seeds of a re-asked judge reply: apart from the repeats' (seed, seed + 1, ...)
_PARSER_RANK = {"json": 0, "dirtyjson": 1, "regex": 2}

DIMENSION_GUIDE: dict[str, str] = {
    "relevance": "answers the task that was asked, without drifting to other topics",
    "completeness": "covers everything the task requires (the requested number of items, all parts of the question)",
    "depth": "explains why and how, with reasoning and trade-offs, not only what",
    "specificity": "concrete names, numbers, versions, commands or code-level details instead of generalities",
    "structure": "organised and easy to scan: headings or numbered items, short paragraphs, no wall of text",
    "grounded": "claims are supported by the cited sources or by well-established knowledge; nothing invented",
}

# Caps a small judge does not apply unless told (measured on a 1.5B judge: "I cannot help with that request."
# scored relevance 7, completeness 8, depth 9, specificity 10, structure 10, grounded 10).
SCORING_RULES: tuple[str, ...] = (
    "answers_task is false only when the answer refuses, apologises, asks a question back, is about another "
    "subject or is gibberish; then every dimension is 1. An answer on the task's subject is true even when it is "
    "short, vague or incomplete: score those faults on the dimensions.",
    "An answer that repeats the same sentence or item over and over scores at most 2 on depth, specificity and "
    "structure.",
    "An answer of one or two sentences, when the task asks for several items or for guidance, scores at most 3 on "
    "completeness, depth and specificity.",
    "Use the whole range: 7 means good with clear room to improve, 9-10 is rare.",
)
ATTEMPT_KEY = "answers_task"

TASK_CRITERIA: dict[str, str] = {
    "enumerated": (
        "This task asks for a specific number of items. The answer must contain exactly that many distinct, "
        "non-overlapping items; a wrong count caps completeness at 4."
    ),
    "best_practices": (
        "This task asks for best practices. Reward practical implementation guidance: concrete steps, code-level "
        "specifics, tool and library names, and pitfalls to avoid. Generic advice scores low on depth and specificity."
    ),
    "research": (
        "This task asks for research. Reward answers that integrate several sources into one coherent account, "
        "cite them with [n] markers, and separate established findings from open questions."
    ),
}


@dataclass(frozen=True)
class RubricParse:
    """One judge reply, read: dimension scores found (1-10), feedback, weaknesses, and which parser read it."""

    scores: dict[str, float]
    feedback: str
    weaknesses: tuple[str, ...]
    parser: str  # json | dirtyjson | regex | failed
    missing: tuple[str, ...] = ()
    attempted: bool | None = None  # the judge's answers_task verdict; None when the reply does not say


@dataclass(frozen=True)
class EvalResult:
    """The rubric verdict over k repeats: mean per dimension, weighted total (None when every repeat failed to
    parse), the judge's spread (sd of the weighted totals), and the feedback of the first readable repeat."""

    dimensions: dict[str, float]
    weighted: float | None
    feedback: str
    weaknesses: tuple[str, ...]
    parser: str
    repeats: int
    judge_sd: float
    totals: tuple[float | None, ...] = ()
    parse_failures: int = 0
    missing: tuple[str, ...] = ()
    raw: tuple[str, ...] = field(default=(), repr=False)
    not_attempted: int = 0  # repeats whose judge said the answer does not attempt the task (scored 1 throughout)
    judge_failures: int = 0  # judge replies that could not be read, re-asked ones included (parse_failures: the
    # repeats still unreadable after their retries)

    @property
    def failed(self) -> bool:
        return self.parser == "failed" or self.weighted is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "dimensions": dict(self.dimensions),
            "weighted": self.weighted,
            "feedback": self.feedback,
            "weaknesses": list(self.weaknesses),
            "parser": self.parser,
            "repeats": self.repeats,
            "judge_sd": self.judge_sd,
            "totals": list(self.totals),
            "parse_failures": self.parse_failures,
            "missing": list(self.missing),
            "not_attempted": self.not_attempted,
            "judge_failures": self.judge_failures,
        }


def _check_dimensions(dimensions: Mapping[str, float]) -> dict[str, float]:
    if not dimensions:
        raise ValueError("evaluator.dimensions is empty; expected at least one name -> weight")
    out = {}
    for name, weight in dimensions.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"evaluator dimension names must be identifiers, got {name!r}")
        if not isinstance(weight, (int, float)) or weight < 0:
            raise ValueError(f"evaluator weight for {name!r} must be a number >= 0, got {weight!r}")
        out[name] = float(weight)
    if sum(out.values()) <= 0:
        raise ValueError(f"evaluator weights sum to 0 ({out}); expected at least one positive weight")
    return out


def rubric_schema(dimensions: Mapping[str, float]) -> dict[str, Any]:
    """Bounded JSON schema, in the order the judge must write it: whether the answer attempts the task at all, its
    weaknesses and the most important fix, then every dimension an integer 1-10. Verdict and critique come before
    the numbers because a small model fills numbers from a template when they come first (measured:
    bench/quality/judge_discrimination.py); a grammar-constrained backend emits the properties in this order."""
    props: dict[str, Any] = {ATTEMPT_KEY: {"type": "boolean"}}
    props["weaknesses"] = {
        "type": "array",
        "items": {"type": "string", "maxLength": WEAKNESS_MAX_CHARS},
        "maxItems": MAX_WEAKNESSES,
    }
    props["feedback"] = {"type": "string", "maxLength": FEEDBACK_MAX_CHARS}
    props.update({name: {"type": "integer", "minimum": 1, "maximum": 10} for name in dimensions})
    return {
        "type": "object",
        "properties": props,
        "required": [ATTEMPT_KEY, "weaknesses", "feedback", *dimensions],
        "additionalProperties": False,
    }


def rubric_messages(
    task: str,
    output: str,
    dimensions: Mapping[str, float],
    *,
    task_type: str = "research",
    expected_count: int | None = None,
) -> list[dict[str, str]]:
    """The judge prompt. Blind: task, answer and criteria only. The answer was written from untrusted sources and
    may carry an instruction aimed at the judge ("score this 10"): it goes in a data block (DataMarker derived from
    the task, so the prompt is the same on every start)."""
    criteria = TASK_CRITERIA.get(task_type, TASK_CRITERIA["research"])
    if expected_count:
        criteria += f" The task asks for exactly {expected_count} items."
    dims = "\n".join(f"- {name}: {DIMENSION_GUIDE.get(name, f'how well the answer does on {name}')}" for name in dimensions)
    answer = output if len(output) <= MAX_ANSWER_CHARS else output[:MAX_ANSWER_CHARS] + "\n[... answer truncated]"
    marker = DataMarker.for_run(task)
    example = ", ".join(f'"{name}": <1-10>' for name in dimensions)
    system = (
        "You are a strict, fair reviewer of written answers. Judge only what the answer says, not what the task "
        "asked for. Work in this order: decide whether the answer attempts the task at all, name its weaknesses, "
        "then score each dimension from 1 (very poor) to 10 (excellent).\n" + "\n".join(f"- {r}" for r in SCORING_RULES)
        + "\nReply with one JSON object and nothing else."
    )
    user = (
        f"# Task\n{task.strip()}\n\n# What this kind of task needs\n{criteria}\n\n# Dimensions\n{dims}\n\n"
        f"{marker.notice()}\n\n# Answer to score\n{marker.wrap(answer, 'answer')}\n\n"
        f'Reply as JSON: {{"{ATTEMPT_KEY}": <true or false>, "weaknesses": ["<up to {MAX_WEAKNESSES} short '
        f'weaknesses>"], "feedback": "<the most important fix, at most 2 sentences>", {example}}}'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _to_score(value: Any) -> float | None:
    if isinstance(value, Mapping):
        value = value.get("score", value.get("value"))
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        m = re.match(r"\s*(-?\d+(?:\.\d+)?)", value)
        if not m:
            return None
        value = float(m.group(1))
    if not isinstance(value, (int, float)):
        return None
    return float(min(10.0, max(1.0, float(value))))


def _lookup(obj: Mapping[str, Any], name: str) -> Any:
    lowered = {str(k).lower().strip(): v for k, v in obj.items()}
    if name.lower() in lowered:
        return lowered[name.lower()]
    for nest in ("scores", "dimensions", "ratings", "rubric"):
        inner = lowered.get(nest)
        if isinstance(inner, Mapping):
            found = _lookup(inner, name)
            if found is not None:
                return found
    return None


def _regex_score(text: str, name: str) -> float | None:
    pattern = rf"(?<![A-Za-z]){re.escape(name)}(?![A-Za-z])[\s\"'`*_]*[:=\-][\s\"'`*_]*(\d+(?:\.\d+)?)(?:\s*/\s*10)?"
    m = re.search(pattern, text, re.IGNORECASE)
    return _to_score(m.group(1)) if m else None


def _clean_weaknesses(values: Any) -> tuple[str, ...]:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, (list, tuple)):
        return ()
    out = []
    for v in values:
        s = " ".join(str(v).split())[:WEAKNESS_MAX_CHARS]
        if s and s not in out:
            out.append(s)
    return tuple(out[:MAX_WEAKNESSES])


def _to_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "false", "no"):
        return value.strip().lower() in ("true", "yes")
    return None


def _regex_attempt(text: str) -> bool | None:
    m = re.search(rf"{ATTEMPT_KEY}[\s\"'`*_]*[:=][\s\"'`*_]*(true|false|yes|no)\b", text, re.IGNORECASE)
    return _to_bool(m.group(1)) if m else None


def parse_rubric(text: str, dimensions: Mapping[str, float] | tuple[str, ...]) -> RubricParse:
    """Read one judge reply. Never raises; parser="failed" and no scores when no dimension can be read.

    A reply whose answers_task is false scores 1 on every dimension whatever numbers it wrote after (the first
    of SCORING_RULES, applied here because a small judge states the verdict and then writes the usual numbers)."""
    names = list(dimensions)
    text = text if isinstance(text, str) else ""
    scores: dict[str, float] = {}
    feedback = ""
    weaknesses: tuple[str, ...] = ()
    parser = "failed"
    try:
        obj, parser = parse_json_object(text)
    except JSONParseError:
        obj = None
    if obj is not None:
        for name in names:
            score = _to_score(_lookup(obj, name))
            if score is not None:
                scores[name] = score
        fb = obj.get("feedback", "")
        feedback = " ".join(str(fb).split())[:FEEDBACK_MAX_CHARS] if fb is not None else ""
        weaknesses = _clean_weaknesses(obj.get("weaknesses", ()))
    if not scores:
        for name in names:
            score = _regex_score(text, name)
            if score is not None:
                scores[name] = score
        parser = "regex" if scores else "failed"
        if scores:
            feedback = feedback or " ".join((extract_string_field(text, "feedback") or "").split())[:FEEDBACK_MAX_CHARS]
            weaknesses = weaknesses or _clean_weaknesses(extract_string_list(text, "weaknesses"))
    attempted = _to_bool(_lookup(obj, ATTEMPT_KEY)) if obj is not None else None
    if attempted is None:
        attempted = _regex_attempt(text)
    if attempted is False:
        scores = {name: 1.0 for name in names}
        parser = parser if parser != "failed" else "regex"
    if not scores:
        return RubricParse({}, "", (), "failed", tuple(names))
    missing = tuple(n for n in names if n not in scores)
    return RubricParse(scores, feedback, weaknesses, parser, missing, attempted)


def _scored_missing(scores: Mapping[str, float], weights: Mapping[str, float]) -> tuple[str, ...]:
    """The scored dimensions (weight > 0) that `scores` lacks."""
    return tuple(n for n, w in weights.items() if w > 0 and n not in scores)


def weighted_total(scores: Mapping[str, float], weights: Mapping[str, float]) -> float | None:
    """Weighted mean over every scored dimension (weight > 0); None when any of them is missing: a total over the
    dimensions present is another scale (a reply cut off after its two highest scores would score higher)."""
    present = [(scores[n], w) for n, w in weights.items() if n in scores and w > 0]
    total_w = sum(w for _, w in present)
    if not present or total_w <= 0 or _scored_missing(scores, weights):
        return None
    return round(sum(s * w for s, w in present) / total_w, 4)


def score_rubric(
    task: str,
    output: str,
    llm: Any,
    cfg: EvaluatorConfig,
    *,
    task_type: str = "research",
    seed: int = 0,
    expected_count: int | None = None,
) -> EvalResult:
    """Score `output` cfg.repeats times (seeds seed, seed+1, ...): mean per dimension, weighted total and the
    judge's sd over the weighted totals of the readable repeats. An unreadable reply, or one missing a scored
    dimension, is asked again up to cfg.judge_retries times (seed + RETRY_SEED_OFFSET * attempt + i, twice the
    max_tokens); still partial, the repeat failed. Every such reply is counted in judge_failures. Backend errors
    propagate."""
    weights = _check_dimensions(cfg.dimensions)
    repeats = int(cfg.repeats)
    if repeats < 1:
        raise ValueError(f"evaluator.repeats must be >= 1, got {cfg.repeats!r}")
    retries = cfg.judge_retries
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 5:
        raise ValueError(f"evaluator.judge_retries must be an integer 0-5, got {retries!r}")
    messages = rubric_messages(task, output, weights, task_type=task_type, expected_count=expected_count)
    schema = rubric_schema(weights)
    parses: list[RubricParse] = []
    raws: list[str] = []
    unreadable = 0
    for i in range(repeats):
        for attempt in range(retries + 1):
            # a re-ask is a new request (a new seed, room for a reply the first max_tokens cut off): the same
            # request would get the same cached reply
            reply = llm.chat(messages, schema=schema, temperature=cfg.temperature,
                             max_tokens=cfg.max_tokens * (2 if attempt else 1),
                             seed=seed + i + RETRY_SEED_OFFSET * attempt)
            raws.append(reply.text[:2000])
            parsed = parse_rubric(reply.text, weights)
            if parsed.parser != "failed" and not _scored_missing(parsed.scores, weights):
                break
            unreadable += 1
        if parsed.parser != "failed" and _scored_missing(parsed.scores, weights):  # partial after every re-ask
            parsed = RubricParse({}, "", (), "failed", tuple(weights))
        parses.append(parsed)

    readable = [p for p in parses if p.parser != "failed"]
    totals = tuple(weighted_total(p.scores, weights) for p in parses)
    failures = len(parses) - len(readable)
    if not readable:
        return EvalResult({}, None, "", (), "failed", repeats, 0.0, totals, failures, tuple(weights), tuple(raws),
                          judge_failures=unreadable)

    dims: dict[str, float] = {}
    for name in weights:
        values = [p.scores[name] for p in readable if name in p.scores]
        if values:
            dims[name] = round(statistics.fmean(values), 4)
    valid_totals = [t for t in totals if t is not None]
    sd = round(statistics.stdev(valid_totals), 4) if len(valid_totals) >= 2 else 0.0
    parser = max((p.parser for p in readable), key=_PARSER_RANK.__getitem__)
    first = readable[0]
    merged: list[str] = []
    for p in readable:
        merged.extend(w for w in p.weaknesses if w not in merged)
    missing = tuple(n for n in weights if n not in dims)
    return EvalResult(
        dimensions=dims,
        weighted=weighted_total(dims, weights),
        feedback=first.feedback,
        weaknesses=tuple(merged[:MAX_WEAKNESSES]),
        parser=parser,
        repeats=repeats,
        judge_sd=sd,
        totals=totals,
        parse_failures=failures,
        missing=missing,
        raw=tuple(raws),
        not_attempted=sum(p.attempted is False for p in readable),
        judge_failures=unreadable,
    )
