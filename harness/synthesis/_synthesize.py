"""Synthesis: the producer writes the answer in Markdown from task, memory, plan and research context.

The instruction (SYNTH_INSTRUCTION) is chosen per task_type and is what the experiments mutate. Tasks that ask
for a number of items get a count check and exactly one retry that says how many were found and how many are
needed; the attempt closer to the count is kept. A reply that echoes the prompt back (echo_reasons, handed over
by the pipeline from its evaluator) is asked for once more, its sections tagged in place of their headings and a
note not to copy them.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.config import TASK_TYPES, SynthConfig
from harness.inference import BackendError
from harness.security import DataMarker
from harness.text import count_items, unwrap_fence

__all__ = [
    "TASK_TYPES",
    "DEFAULT_INSTRUCTIONS",
    "NUMBER_WORDS",
    "SynthResult",
    "instruction_for",
    "instruction_provenance",
    "count_from_task",
    "expected_count",
    "count_items",
    "strip_fences",
    "synthesis_messages",
    "retry_message",
    "echo_retry_messages",
    "ECHO_RETRY_NOTE",
    "SECTION_TAGS",
    "synthesize",
]


DEFAULT_INSTRUCTIONS: dict[str, str] = {
    "enumerated": (
        "Write the answer in Markdown as a numbered list with exactly the number of items the task asks for: "
        "no more, no fewer, and no extra numbered lists. Give each item a bold title followed by 2-3 sentences "
        "that are concrete: name the specific tool, function, setting or number, and say why it matters. "
        "Items must not overlap. No introduction longer than one sentence."
    ),
    "best_practices": (
        "Write technical best-practice guidance in Markdown for a practitioner who will implement it today. "
        "For each practice give the practical implementation: code-level specifics (function names, "
        "parameters, short code snippets where they help), the tools and libraries to use with versions where "
        "relevant, and the pitfalls to avoid. Prefer concrete commands and settings over general advice."
    ),
    "research": (
        "Write a research synthesis in Markdown prose with a few headings. Integrate the sources into one "
        "coherent account rather than summarising them one by one; compare where they agree and disagree. "
        "Cite sources with [n] markers matching the numbered research context, state what is established and "
        "what remains uncertain, and end with the practical implications."
    ),
}

NUMBER_WORDS: dict[str, int] = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "dozen": 12, "a dozen": 12,
}
_MAX_COUNT = 50
_NUM = r"(\d{1,2}|" + "|".join(sorted((re.escape(w) for w in NUMBER_WORDS), key=len, reverse=True)) + r")"
_VERBS = (
    r"list|top|give|name|provide|suggest|outline|share|enumerate|identify|describe|explain|recommend|write|"
    r"summari[sz]e|compare|highlight|present|offer|propose"
)
_AFTER_VERB = re.compile(
    rf"\b(?:{_VERBS})\s+(?:me\s+|us\s+)?(?:the\s+|your\s+)?(?:top\s+|best\s+|key\s+|main\s+)?{_NUM}(?![\w.])",
    re.IGNORECASE,
)
_BEFORE_NOUN = re.compile(
    rf"(?<![\w.]){_NUM}\s+([A-Za-z][\w-]*)(?:\s+[A-Za-z][\w-]*){{0,3}}?s\b",
    re.IGNORECASE,
)
_NOT_ITEMS = {
    "seconds", "second", "minutes", "minute", "hours", "hour", "days", "day", "weeks", "week", "months", "month",
    "years", "year", "times", "percent", "ms", "lines", "bytes", "kb", "mb", "gb", "tb", "x", "cores", "threads",
    "gpus", "pages", "words", "characters", "chars", "tokens",
}
_THINK = re.compile(r"^\s*<think>.*?</think>\s*", re.DOTALL | re.IGNORECASE)
_PROSE_FENCES = ("", "markdown", "md", "text")  # a reply wrapped in one of these is a report, not code


@dataclass(frozen=True)
class SynthResult:
    text: str
    instruction: str
    retried: bool
    expected: int | None
    found: int
    first_found: int | None = None  # count of the first attempt when a retry happened
    retry_error: str | None = None  # the retry call failed; the first attempt was kept
    echo: tuple[str, ...] = ()  # why the first reply was an echo of the prompt (then it was asked once more)
    echo_kept: bool = False  # the echo retry echoed too (or failed): the first reply was kept
    echo_error: str | None = None  # the echo retry's call failed (the first reply was kept)


def instruction_for(task_type: str, cfg: SynthConfig) -> str:
    """cfg.instructions[task_type] when set and non-empty, else the default for that task_type (research when
    the task_type is unknown). A cfg.source that was never resolved is a ValueError, not a silent default."""
    if cfg.source and not cfg.resolved:
        raise ValueError(f"synth.source={cfg.source} was not resolved to texts; build the config with "
                         "experiments.config.to_harness_config (or harness.synthesis.resolve_synth)")
    override = (cfg.instructions or {}).get(task_type)
    if isinstance(override, str) and override.strip():
        return override.strip()
    return DEFAULT_INSTRUCTIONS.get(task_type, DEFAULT_INSTRUCTIONS["research"])


def instruction_provenance(task_type: str, instruction: str, cfg: SynthConfig) -> dict[str, Any]:
    """Where the instruction a run used came from: synth.source, the registered prompt version it resolved to
    (None when the run used another text, e.g. a sweep candidate) and the text's sha256 (12 hex)."""
    pinned = cfg.resolved.get(task_type)
    used = pinned is not None and instruction.strip() == (cfg.instructions.get(task_type) or "").strip()
    return {"source": cfg.source, "uri": pinned if used else None,
            "version": int(pinned.rsplit("/", 1)[1]) if used and pinned else None,
            "sha256": hashlib.sha256(instruction.encode()).hexdigest()[:12]}


def _to_int(token: str) -> int | None:
    token = token.lower().strip()
    value = int(token) if token.isdigit() else NUMBER_WORDS.get(token)
    return value if value is not None and 1 <= value <= _MAX_COUNT else None


def count_from_task(task: str) -> int | None:
    """The number of items the task text asks for ("List 5 ...", "top 10 ...", "five best practices"), or None.

    A number glued to a capitalised name ("Python 3 features") or part of a version is not a count."""
    if not isinstance(task, str):
        return None
    m = _AFTER_VERB.search(task)
    if m:
        return _to_int(m.group(1))
    for m in _BEFORE_NOUN.finditer(task):
        before = task[: m.start()].rstrip()
        prev = before.split()[-1] if before.split() else ""
        if prev[:1].isupper() and prev.lower() not in {"list", "top", "the", "give", "name"} and m.group(1).isdigit():
            continue
        if m.group(2).lower() in _NOT_ITEMS:
            continue
        value = _to_int(m.group(1))
        if value is not None:
            return value
    return None


def expected_count(task: str, plan: Any = None) -> int | None:
    """Count asked for in the task text, else the plan's expected_sections (when a positive int), else None."""
    found = count_from_task(task)
    if found is not None:
        return found
    sections = getattr(plan, "expected_sections", None)
    if isinstance(sections, bool):
        return None
    if isinstance(sections, int) and 1 <= sections <= _MAX_COUNT:
        return sections
    if isinstance(sections, str) and sections.strip().isdigit():
        return _to_int(sections.strip())
    return None


def strip_fences(text: str) -> str:
    """Drop a leading <think> block and a code fence wrapping the whole reply (```markdown ... ```)."""
    if not isinstance(text, str):
        return ""
    text = _THINK.sub("", text)
    return unwrap_fence(text, _PROSE_FENCES).strip()


def _plan_context(plan: Any) -> str:
    render = getattr(plan, "synthesis_context", None)
    if callable(render):
        try:
            return str(render() or "").strip()
        except Exception:  # noqa: BLE001 - a Plan-like stand-in must not break synthesis
            return ""
    return ""


def synthesis_messages(
    task: str,
    *,
    instruction: str,
    plan: Any = None,
    research_context: str = "",
    memory_context: str = "",
    injections: Sequence[str] = (),
    expected: int | None = None,
    marker: DataMarker | None = None,
    tagged: bool = False,
) -> list[dict[str, str]]:
    """System: the instruction. User: task, memory context, plan context, research context, skill injections.

    Memory and research context are untrusted (web pages, files, earlier runs): each goes in a data block of
    `marker` (default: the one derived from the task), announced after the task and recalled at the end.
    tagged: each section opens with a tag (`<task>`, `<research_context>`, ...) in place of its Markdown heading,
    the form the echo retry asks in (a small producer continues a prompt's headings as its answer's)."""
    marker = marker if marker is not None else DataMarker.for_run(task)

    def head(key: str) -> str:
        return f"<{key}>" if tagged else f"# {SECTION_TITLES[key]}"

    parts = [f"{head('task')}\n{task.strip()}"]
    memory = memory_context.strip() if isinstance(memory_context, str) else ""
    research = research_context.strip() if isinstance(research_context, str) else ""
    if (memory or research) and marker.enabled:
        parts.append(marker.notice())
    if memory:
        parts.append(f"{head('memory')}\n{marker.wrap(memory, 'memory')}")
    plan_ctx = _plan_context(plan)
    if plan_ctx:
        parts.append(f"{head('plan_context')}\n{plan_ctx}")
    if research:
        parts.append(f"{head('research_context')}\n{marker.wrap(research, 'research context')}")
    extra = [s.strip() for s in injections if isinstance(s, str) and s.strip()]
    if extra:
        parts.append(f"{head('guidance')}\n" + "\n\n".join(extra))
    closing = "Write the answer now, in Markdown, without a preamble about what you are going to do."
    if expected:
        closing = f"The answer must contain exactly {expected} numbered items. " + closing
    if (memory or research) and marker.enabled:
        closing = f"{marker.reminder()} {closing}"
    parts.append(closing)
    return [
        {"role": "system", "content": instruction.strip()},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


# The user message's sections: their Markdown headings, and their tags in the echo retry's form.
SECTION_TITLES = {
    "task": "Task", "memory": "What earlier runs found (memory)", "plan_context": "Plan context",
    "research_context": "Research context", "guidance": "Additional guidance",
}
SECTION_TAGS = tuple(f"<{key}>" for key in SECTION_TITLES)

ECHO_RETRY_NOTE = (
    "The text above is input, not the answer: do not copy it or its headings. Now write only the answer to this task:"
)


def echo_retry_messages(tagged: list[dict[str, str]], task: str) -> list[dict[str, str]]:
    """The echo retry's messages: the synthesis messages as `tagged` (synthesis_messages(..., tagged=True)) built
    them, each section opened by a tag in place of its heading, the user message closed by ECHO_RETRY_NOTE and the
    task. Chosen on the 1.5B validation model's echoes (docs/CALIBRATION.md): the note alone under the same
    headings answered 3 of its calibration's 7 and none of the gil research task's 4; the tagged form answered all
    7 there (and 5 of 5 of the embedded model's), none then floored by the gate."""
    *head, user = tagged
    return [*head, {**user, "content": f"{user['content']}\n\n{ECHO_RETRY_NOTE} {task.strip()}"}]


def retry_message(found: int, expected: int) -> str:
    return (
        f"Your answer has {found} items, but the task needs exactly {expected}. Rewrite the complete answer with "
        f"exactly {expected} numbered items (1. to {expected}.), keeping the best content. Return only the answer."
    )


def _count_applies(task: str, plan: Any, expected: int | None) -> bool:
    if expected is None:
        return False
    return getattr(plan, "task_type", None) == "enumerated" or count_from_task(task) is not None


def synthesize(
    task: str,
    *,
    plan: Any,
    research_context: str,
    memory_context: str,
    instruction: str,
    llm: Any,
    cfg: SynthConfig,
    injections: Sequence[str] = (),
    seed: int | None = None,
    marker: DataMarker | None = None,
    echo_reasons: Callable[..., tuple[str, ...]] | None = None,
) -> SynthResult:
    """One producer call; for counted tasks a count check and at most one retry. Backend errors of the first
    call propagate; a failed retry keeps the first attempt and records why.

    echo_reasons(text, *, prompt): when given and the reply echoes the prompt's scaffolding (its headings and
    phrases, what the degenerate-answer gate floors to 1: a small producer copies the user message back, research
    context included, on 7 of 28 runs of the 1.5B validation model), the producer is asked once more with
    echo_retry_messages (the sections tagged, the task restated after ECHO_RETRY_NOTE) at seed + 2 (cfg.echo_retry);
    the retry is kept unless it echoes too or fails. Asked without the prompt: lines merely copied from the context
    are not floored by the gate, and a retry there replaced an answer the judge scored 7.97 by one it scored 3.44.
    The count check then runs on the kept reply.

    marker: how untrusted context is marked; default the run's (DataMarker.for_run(task, seed)), so the same task
    and seed give the same prompt on every start (the response cache keys on it). Markers the model echoes are
    removed from its answer."""
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError("synthesis instruction is empty; expected the SYNTH_INSTRUCTION text for this task_type")
    expected = expected_count(task, plan)
    counted = _count_applies(task, plan, expected)
    marker = marker if marker is not None else DataMarker.for_run(task, seed)
    prompt = functools.partial(
        synthesis_messages,
        task,
        instruction=instruction,
        plan=plan,
        research_context=research_context,
        memory_context=memory_context,
        injections=injections,
        expected=expected if counted else None,
        marker=marker,
    )
    messages = prompt()
    reply = llm.chat(messages, temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=seed)
    text = marker.clean(strip_fences(reply.text))
    echo: tuple[str, ...] = ()
    echo_kept = False
    echo_error = None
    if echo_reasons is not None and cfg.echo_retry:
        echo = tuple(echo_reasons(text, prompt=None))
        if echo:
            asked = echo_retry_messages(prompt(tagged=True), task)
            try:
                again = llm.chat(asked, temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                                 seed=None if seed is None else seed + 2)
                second = marker.clean(strip_fences(again.text))
            except BackendError as exc:
                second, echo_error = "", f"{type(exc).__name__}: {exc}"[:300]
            if second and not echo_reasons(second, prompt=None):
                text, messages = second, asked
            else:
                echo_kept = True
    echoed = {"echo": echo, "echo_kept": echo_kept, "echo_error": echo_error}
    found = count_items(text)
    if not (counted and cfg.count_retry and found != expected):
        return SynthResult(text, instruction, False, expected, found, **echoed)

    retry = [*messages, {"role": "assistant", "content": text}, {"role": "user", "content": retry_message(found, expected)}]
    try:
        again = llm.chat(retry, temperature=cfg.temperature, max_tokens=cfg.max_tokens, seed=None if seed is None else seed + 1)
    except BackendError as exc:
        return SynthResult(text, instruction, True, expected, found, found, f"{type(exc).__name__}: {exc}"[:300],
                           **echoed)
    second = marker.clean(strip_fences(again.text))
    second_found = count_items(second)
    if abs(second_found - expected) <= abs(found - expected) and second:
        return SynthResult(second, instruction, True, expected, second_found, found, **echoed)
    return SynthResult(text, instruction, True, expected, found, found, **echoed)
