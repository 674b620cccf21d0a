"""Degenerate output: empty or near-empty, heavily repeated, an echo of the prompt, or structure with nothing
in it; and the cap it puts on every criterion."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.synthesis import SECTION_TAGS
from harness.text import (
    ANY_LIST as _ANY_LIST, HEADING as _HEADING, LINE_PREFIX as _LINE_PREFIX, NUMBERED_ITEM as _TOP_ITEM, code_marks,
    lines_outside_code as _lines_outside_code,
)


DEGENERATE_CAP = 1.0  # the most any criterion (and the composite) scores for a degenerate output

# Thresholds. Each is far from what an ordinary answer does: a good answer almost never repeats a sentence three
# times, has fewer than half of its sentences distinct, or repeats half of its 4-word phrases (good Markdown
# answers repeat 0-2% of them; five items that differ only by their number, 60-70%). Code blocks and table rows
# are legitimately repetitive and are left out of the repetition checks, and so is a short label line that each
# item's section carries once (a "Tools: asyncio" line under every practice: the 1.5B validation model's judge
# scored such an answer 7.2 and this gate floored it, docs/CALIBRATION.md).
_MIN_WORDS = 5  # fewer words (of any kind) is near-empty
_MIN_BODY_WORDS = 5  # fewer words outside headings, the restated task and prompt scaffolding: no answer
_REPEAT_MIN_COUNT = 3  # one sentence or line this many times ...
_REPEAT_MIN_SHARE = 0.3  # ... making up at least this share of them
_UNIT_MIN_WORDS = 3  # shorter lines/sentences ("Example:", "**Pitfall:**") are not counted as repeats
_TEMPLATE_MAX_WORDS = 6  # a line this short recurring once per section beside other content is a template label
_DISTINCT_MIN_UNITS = 6
_DISTINCT_MIN_RATIO = 0.5  # below this share of distinct sentences (or lines): repetition
_NGRAM = 4
_NGRAM_MIN = 16  # at least this many 4-grams before their repetition is judged
_NGRAM_MAX_REPEAT = 0.5  # at least this share of 4-grams repeating an earlier one: repetition
_EMPTY_SECTIONS_MIN = 2  # this many headings (and at least half of them) with nothing under them
_BARE_MARKERS_MIN = 2  # this many list markers (and at least half of the list) with nothing after them
_PROMPT_COPY_MIN = 2  # copied lines (of >= _UNIT_MIN_WORDS + 1 words) ...
_PROMPT_COPY_SHARE = 0.5  # ... making up at least this share of the output's lines: an echo of the prompt
_ECHO_MARKERS_MIN = 2  # distinct scaffolding markers (at least one strong) that make an echo

# Scaffolding of the prompts this harness sends: the wiggum revise prompt (harness.review._wiggum.revision_messages),
# the synthesis prompt and its count retry (harness.synthesis) and the judge prompt (evaluators.rubric). Headings
# are matched as whole heading titles; phrases anywhere, whitespace- and case-insensitive.
_ECHO_HEADINGS_STRONG = frozenset({
    "reviewer score", "reviewer feedback", "weaknesses to fix", "current draft", "research context",
    "plan context", "what earlier runs found (memory)", "additional guidance", "what this kind of task needs",
    "answer to score",
})
_ECHO_HEADINGS_WEAK = frozenset({"task", "dimensions"})
# The same sections as the echo retry asks for them (harness.synthesis.SECTION_TAGS): a line that is only the tag.
_ECHO_TAGS_WEAK = frozenset({"<task>"})
_ECHO_TAGS_STRONG = frozenset(SECTION_TAGS) - _ECHO_TAGS_WEAK
_ECHO_PHRASES = (
    "the text above is input, not the answer",
    "write the revised answer now",
    "return only the complete revised answer",
    "you revise a markdown answer so that it scores higher",
    "fix every weakness the reviewer names",
    "write the answer now, in markdown, without a preamble",
    "you are a strict, fair reviewer of written answers",
    "reply with one json object and nothing else",
    "but the task needs exactly",
    "rewrite the complete answer with exactly",
)
_ECHO_PATTERNS = (re.compile(r"the answer must contain exactly \d+ numbered items"),)
_BARE_MARKER = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s*(?:(\*\*|__)\s*\1)?\s*$")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_TABLE_ROW = re.compile(r"^\s*\|")


def _marked_lines(markdown: str) -> list[tuple[str, bool]]:
    """Non-blank lines with whether each is code (fences included)."""
    return [(line, code) for line, code in code_marks(markdown) if line.strip()]


def _squash(text: str) -> str:
    return " ".join(text.lower().split())


def _unit(text: str) -> str:
    """A line or sentence reduced for comparison: no list/heading markers, emphasis, code ticks or punctuation."""
    text = _LINE_PREFIX.sub("", text)
    return " ".join(_WORD.findall(text.lower()))


def _echo_markers(lines: list[str]) -> tuple[set[str], set[str], list[bool]]:
    """(strong markers, weak markers, per line whether it carries scaffolding) found in the output."""
    strong: set[str] = set()
    weak: set[str] = set()
    flags = []
    for line in lines:
        heading = _HEADING.match(line)
        hit = False
        if heading:
            title = _squash(re.sub(r"[*_`]", "", heading.group(2))).rstrip(":")
            if title in _ECHO_HEADINGS_STRONG:
                strong.add("# " + title)
                hit = True
            elif title in _ECHO_HEADINGS_WEAK:
                weak.add("# " + title)
                hit = True
        low = _squash(line)
        tag = low.replace("</", "<")
        if tag in _ECHO_TAGS_STRONG or tag in _ECHO_TAGS_WEAK:
            (strong if tag in _ECHO_TAGS_STRONG else weak).add(tag)
            hit = True
        for phrase in _ECHO_PHRASES:
            if phrase in low:
                strong.add(phrase)
                hit = True
        for pattern in _ECHO_PATTERNS:
            if pattern.search(low):
                strong.add(pattern.pattern)
                hit = True
        flags.append(hit)
    return strong, weak, flags


def _prompt_text(prompt: Any) -> str:
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Mapping):
        return str(prompt.get("content") or "")
    if isinstance(prompt, Iterable):
        return "\n".join(_prompt_text(p) for p in prompt)
    return str(prompt)


def _prompt_lines(prompt: Any) -> set[str]:
    """The prompt's own lines, reduced; the draft a revise prompt asks to improve and the answer a judge prompt
    scores are left out (keeping the draft's lines is what a revision should do)."""
    out: set[str] = set()
    skipping = False
    for line in _prompt_text(prompt).splitlines():
        low = _squash(line)
        if skipping:  # until the line that closes the draft (revise prompt) or the answer (judge prompt)
            skipping = not ("write the revised answer now" in low or low == ">>>" or low.startswith("<<end data"))
            if skipping:
                continue
        heading = _HEADING.match(line)
        if heading and _squash(heading.group(2)) in {"current draft", "answer to score"}:
            skipping = True
            continue
        unit = _unit(line)
        if len(unit.split()) > _UNIT_MIN_WORDS:
            out.add(unit)
    return out


def _sentences(line: str) -> list[str]:
    body = _LINE_PREFIX.sub("", line).strip()
    return [s for s in re.split(r"(?<=[.!?])\s+", body) if s]


def _sectioned(lines: list[str]) -> tuple[list[tuple[str, tuple[str, ...]]], list[tuple[str, tuple[str, ...]]]]:
    """(sentences, lines) of the non-heading lines, reduced, each with its section: the path of headings above it
    (and the top-level numbered item it sits in), digits dropped, so that headings differing only by their number
    are one section."""
    stack: list[tuple[int, str]] = []
    sentences: list[tuple[str, tuple[str, ...]]] = []
    units: list[tuple[str, tuple[str, ...]]] = []
    for line in lines:
        heading = _HEADING.match(line)
        item = None if heading else _TOP_ITEM.match(line)
        if heading or item:
            level = len(heading.group(1)) if heading else 7
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, re.sub(r"\d+", "#", _unit(heading.group(2) if heading else line))))
            if heading:
                continue
        key = tuple(title for _, title in stack)
        sentences.extend((_unit(s), key) for s in _sentences(line))
        units.append((_unit(line), key))
    return sentences, units


def _prefix_counts(keys: Iterable[tuple[str, ...]]) -> Counter[tuple[str, ...]]:
    """How many of `keys` (heading paths) lie under each path prefix."""
    return Counter(key[:i] for key in keys for i in range(len(key) + 1))


def _template_collapsed(units: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """The units with each template label counted once: a short unit that recurs once per section, in sections
    that differ and each hold other content (within the part of the answer where their headings part ways: the
    practice a "Tools" sub-section belongs to), is the answer's per-item template (a "Tools: asyncio" line under
    every practice), not a loop. Repeats inside one section still count."""
    where: dict[str, list[tuple[str, ...]]] = {}
    for u, key in units:
        where.setdefault(u, []).append(key)
    content = _prefix_counts(key for u, key in units if len(u.split()) >= _UNIT_MIN_WORDS)

    def template(u: str) -> bool:
        keys = where[u]
        if len(u.split()) > _TEMPLATE_MAX_WORDS or len(keys) < 2 or len(set(keys)) < len(keys):
            return False
        split = next(i for i in range(max(map(len, keys)) + 1) if len({k[:i + 1] for k in keys}) > 1)
        own = _prefix_counts(keys if len(u.split()) >= _UNIT_MIN_WORDS else ())  # u itself, when it is content
        return all(content[key[:split + 1]] > own[key[:split + 1]] for key in keys)

    labels = {u for u in where if template(u)}
    seen: set[str] = set()
    out: list[str] = []
    for u, _ in units:
        if u in seen and u in labels:
            continue
        seen.add(u)
        out.append(u)
    return out


def _repetition(units: list[str], what: str) -> list[str]:
    units = [u for u in units if len(u.split()) >= _UNIT_MIN_WORDS]
    if not units:
        return []
    reasons = []
    counts: dict[str, int] = {}
    for u in units:
        counts[u] = counts.get(u, 0) + 1
    top, n = max(counts.items(), key=lambda kv: kv[1])
    if n >= _REPEAT_MIN_COUNT and n / len(units) >= _REPEAT_MIN_SHARE:
        reasons.append(f"repetition: the same {what} {n} times ({top[:60]!r})")
    elif len(units) >= _DISTINCT_MIN_UNITS and len(counts) / len(units) < _DISTINCT_MIN_RATIO:
        reasons.append(f"repetition: only {len(counts)} of {len(units)} {what}s are distinct")
    return reasons


def prompt_echo_reasons(output: Any, *, prompt: Any = None) -> tuple[str, ...]:
    """Why `output` is an echo of a prompt, or (): two or more scaffolding markers of the revise, synthesis or
    judge prompts (headings such as "# Reviewer feedback", "# Current draft", the echo retry's section tags such as
    "<research_context>", phrases such as "Write the revised answer now"; at least one of them not a plain
    "# Task"/"# Dimensions"/"<task>"), or, when `prompt` (text or chat messages) is given, at least half of the
    output's lines of 4+ words copied from it, the draft a revise prompt asks to improve (and the answer a judge
    prompt scores) aside."""
    if not isinstance(output, str):
        return ()
    lines = [ln for ln in _lines_outside_code(output) if ln.strip()]
    reasons = []
    strong, weak, _ = _echo_markers(lines)
    if strong and len(strong) + len(weak) >= _ECHO_MARKERS_MIN:
        reasons.append("prompt echo: " + ", ".join(sorted(strong | weak)))
    if prompt is not None:
        copied_from = _prompt_lines(prompt)
        long_units = [u for u in (_unit(ln) for ln in lines) if len(u.split()) > _UNIT_MIN_WORDS]
        copied = sum(1 for u in long_units if u in copied_from)
        if copied >= _PROMPT_COPY_MIN and copied / max(len(long_units), 1) >= _PROMPT_COPY_SHARE:
            reasons.append(f"prompt echo: {copied} of {len(long_units)} lines copied from the prompt")
    return tuple(reasons)


def degenerate_reasons(output: Any, *, task: str = "", prompt: Any = None) -> tuple[str, ...]:
    """Why `output` is degenerate, or () when it is not.

    Empty or near-empty (fewer than 5 words); heavy repetition (one sentence or line 3+ times and 30% or more
    of them, fewer than half of them distinct, or half of the 4-word phrases repeating an earlier one; a line of
    at most 6 words that recurs once per section, under headings that differ by more than a number and beside
    other content, is the answer's per-item template and counts once); an echo of a prompt (two or more of the
    revise/synthesis/judge prompts' scaffolding headings, tags and phrases, or, when `prompt` is given, at least
    half of the output's lines copied from it, the draft being revised aside);
    empty structure (no content besides headings, the task restated and scaffolding; two or more headings, at
    least half of them, with nothing under them; list markers with nothing after them). Code blocks count as
    content but are not checked for repetition."""
    if not isinstance(output, str) or not _WORD.search(output):
        return ("empty: no words",)
    words = len(_WORD.findall(output))
    if words < _MIN_WORDS:
        return (f"near-empty: {words} word{'s' if words != 1 else ''}",)
    lines = [ln for ln in _lines_outside_code(output) if ln.strip()]
    code_words = words - len(_WORD.findall("\n".join(lines)))
    reasons = list(prompt_echo_reasons(output, prompt=prompt))
    echo_flags = _echo_markers(lines)[2]

    # empty structure
    task_unit = _unit(task) if isinstance(task, str) else ""
    headings = [i for i, ln in enumerate(lines) if _HEADING.match(ln)]
    bare = [ln for ln in lines if _BARE_MARKER.match(ln)]
    restated = False
    body_words = code_words
    for line, echo in zip(lines, echo_flags):
        if echo or _HEADING.match(line) or _BARE_MARKER.match(line):
            continue
        unit = _unit(line)
        if task_unit and unit and (unit == task_unit or (len(unit.split()) >= 3 and unit in task_unit)):
            restated = True
            continue
        body_words += len(unit.split())
    restated = restated or any(task_unit and _unit(lines[i]) == task_unit for i in headings)
    if body_words < _MIN_BODY_WORDS:
        parts = []
        if headings:
            parts.append(f"{len(headings)} heading{'s' if len(headings) != 1 else ''}")
        if bare:
            parts.append(f"{len(bare)} empty list item{'s' if len(bare) != 1 else ''}")
        if restated:
            parts.append("the task restated")
        if any(echo_flags):
            parts.append("prompt scaffolding")
        reasons.append("empty structure: no content besides " + (", ".join(parts) or "a fragment"))
    else:
        marked = _marked_lines(output)  # a code block under a heading is content
        levels = [(i, len(m.group(1))) for i, (ln, code) in enumerate(marked) if not code and (m := _HEADING.match(ln))]
        empty = 0
        for k, (i, level) in enumerate(levels):
            end = next((j for j, lv in levels[k + 1:] if lv <= level), len(marked))
            if not any(code or not (_HEADING.match(ln) or _BARE_MARKER.match(ln)) for ln, code in marked[i + 1:end]):
                empty += 1
        if empty >= _EMPTY_SECTIONS_MIN and empty * 2 >= len(levels):
            reasons.append(f"empty structure: {empty} of {len(levels)} headings have nothing under them")
        items = sum(1 for ln in lines if _ANY_LIST.match(ln)) + len(bare)
        if len(bare) >= _BARE_MARKERS_MIN and len(bare) * 2 >= items:
            reasons.append(f"empty structure: {len(bare)} of {items} list items are empty")

    # repetition (outside code and tables)
    text_lines = [ln for ln in lines if not _TABLE_ROW.match(ln)]
    sentences, line_units = _sectioned(text_lines)
    repeated = _repetition(_template_collapsed(sentences), "sentence")
    reasons.extend(repeated or _repetition(_template_collapsed(line_units), "line"))
    tokens = _WORD.findall(" ".join(_LINE_PREFIX.sub("", ln) for ln in text_lines).lower())
    grams = [tuple(tokens[i:i + _NGRAM]) for i in range(len(tokens) - _NGRAM + 1)]
    if len(grams) >= _NGRAM_MIN:
        share = 1.0 - len(set(grams)) / len(grams)
        if share >= _NGRAM_MAX_REPEAT:
            reasons.append(f"repetition: {share:.0%} of its {_NGRAM}-word phrases repeat")
    return tuple(reasons)


def cap_degenerate(scores: Mapping[str, float | None], reasons: Sequence[str]) -> dict[str, float | None]:
    """Every criterion that applies capped at DEGENERATE_CAP when there are reasons; unchanged otherwise."""
    if not reasons:
        return dict(scores)
    return {k: None if v is None else min(float(v), DEGENERATE_CAP) for k, v in scores.items()}
