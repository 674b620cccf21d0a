"""Deterministic criteria: scores (0-10) computed from the text alone, no model involved.

These stand beside the LLM judge so a sweep's objective does not rest on one noisy judge: count hit, required
terms, structure, specificity and grounding in the gathered sources. A criterion that does not apply (no
expected count, no required terms, no sources) is None, and `aggregate` averages the ones that do.

A degenerate output (`degenerate_reasons`: empty or near-empty, heavily repeated, an echo of the prompt, or
headings and list markers with nothing under them) has every criterion capped at DEGENERATE_CAP: repeating one
sentence that names the required terms must not score a perfect count, terms or grounding.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.text import STOPWORDS, code_marks, is_fence_line

__all__ = [
    "DEGENERATE_CAP",
    "cap_degenerate",
    "count_items",
    "degenerate_reasons",
    "deterministic_scores",
    "prompt_echo_reasons",
    "aggregate",
    "count_score",
    "terms_score",
    "structure_score",
    "specificity_score",
    "grounding_score",
    "source_text",
]

_NUMBERED_HEADING = re.compile(r"^#{1,6}\s+(?:\*\*|__)?\s*\d{1,3}\s*[.):]\s*\S")
_NUMBERED_ITEM = re.compile(r"^ ?(?:\*\*|__)?\d{1,3}[.)](?:\*\*|__)?\s+\S")
_H2 = re.compile(r"^##\s+(.+?)\s*#*\s*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^[-*+]\s+\S")
_ANY_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")
_BOLD_TITLE = re.compile(r"^\s*(?:[-*+]\s+|\d{1,3}[.)]\s+)?(\*\*|__)[^*_]{2,}\1")

_FRAME_SECTIONS = {
    "introduction", "intro", "overview", "background", "conclusion", "conclusions", "summary", "final thoughts",
    "key takeaways", "takeaways", "references", "sources", "bibliography", "further reading", "notes", "tl;dr",
    "tldr", "resources", "citations",
}
_SOURCE_SECTIONS = {"references", "sources", "bibliography", "further reading", "resources", "citations"}

# Grounding compares the content words of a claim with the sources. Besides the stop words, the filler of advice
# prose makes no claim of its own ("an effective approach to consider"); a query may still want these words, so
# they are this score's own addition, not part of harness.text.STOPWORDS.
_CLAIM_FILLER = frozenset(
    """able allow allows approach approaches based better common commonly consider considering different effective
    effectively ensure example examples following good great help helps important include includes including key
    large new overall practice practices provide provided provides right several small specific useful
    various""".split()
)
_NOT_CONTENT = STOPWORDS | _CLAIM_FILLER


# -- counting ------------------------------------------------------------------------------------------------------


def _lines_outside_code(markdown: str) -> list[str]:
    return [line for line, code in code_marks(markdown) if not code]


def _heading_title(text: str) -> str:
    title = re.sub(r"[*_`#]", "", text).strip().rstrip(":").strip().lower()
    return re.sub(r"^\d{1,3}[.):]\s*", "", title)


def count_items(markdown: str) -> int:
    """Number of top-level items in a Markdown answer.

    In order of preference: numbered headings (`## 1. ...`), top-level numbered list items, `##` headings other
    than framing sections (introduction, conclusion, references ...), top-level bullets. Lines inside code
    fences and items under a references/sources heading are ignored.
    """
    if not isinstance(markdown, str) or not markdown.strip():
        return 0
    numbered_headings = numbered_items = h2 = bullets = 0
    in_sources = False
    for line in _lines_outside_code(markdown):
        heading = _HEADING.match(line)
        if heading:
            title = _heading_title(heading.group(2))
            in_sources = title in _SOURCE_SECTIONS
            if in_sources:
                continue
            if _NUMBERED_HEADING.match(line.lstrip()):
                numbered_headings += 1
            elif _H2.match(line.lstrip()) and title not in _FRAME_SECTIONS:
                h2 += 1
            continue
        if in_sources:
            continue
        if _NUMBERED_ITEM.match(line):
            numbered_items += 1
        elif _BULLET.match(line):
            bullets += 1
    for n in (numbered_headings, numbered_items, h2, bullets):
        if n:
            return n
    return 0


# -- individual criteria -------------------------------------------------------------------------------------------


def count_score(output: str, expected: int | None) -> float | None:
    """10 for exactly the expected count, falling linearly to 0 at a miss of `expected` items; None without one."""
    if expected is None or expected <= 0:
        return None
    found = count_items(output)
    if found == expected:
        return 10.0
    return round(10.0 * max(0.0, 1.0 - abs(found - expected) / expected), 3)


def _term_present(term: str, text: str) -> bool:
    term = term.strip()
    if not term:
        return True
    left = r"(?<!\w)" if term[0].isalnum() or term[0] == "_" else ""
    right = r"(?!\w)" if term[-1].isalnum() or term[-1] == "_" else ""
    return re.search(left + re.escape(term) + right, text, re.IGNORECASE) is not None


def terms_score(output: str, required_terms: Sequence[str]) -> float | None:
    """Share of required terms present (case-insensitive, whole words), 0-10; None when none are required."""
    terms = [t for t in required_terms if t and t.strip()]
    if not terms:
        return None
    present = sum(_term_present(t, output) for t in terms)
    return round(10.0 * present / len(terms), 3)


def _blocks(lines: list[str]) -> list[list[str]]:
    blocks: list[list[str]] = []
    current: list[str] = []
    for line in lines:
        if line.strip():
            current.append(line)
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def structure_score(output: str) -> float:
    """Headings, lists and paragraphs of sane length; a wall of text or an empty answer scores low."""
    if not isinstance(output, str) or not output.strip():
        return 0.0
    lines = _lines_outside_code(output)
    words = len(output.split())
    headings = sum(1 for ln in lines if _HEADING.match(ln))
    list_items = sum(1 for ln in lines if _ANY_LIST.match(ln))
    bold_titles = sum(1 for ln in lines if _BOLD_TITLE.match(ln))
    prose = [
        " ".join(b)
        for b in _blocks(lines)
        if not all(_HEADING.match(ln) or _ANY_LIST.match(ln) for ln in b)
    ]
    prose_words = [len(p.split()) for p in prose]

    organisation = 0.0
    if headings >= 2 or (headings == 1 and bold_titles >= 2):
        organisation += 4.0
    elif headings == 1 or bold_titles >= 2:
        organisation += 2.0
    organisation += 4.0 if list_items >= 3 else 1.5 if list_items >= 1 else 0.0
    score = min(organisation, 6.0)
    if prose_words:
        sane = sum(1 for n in prose_words if n <= 150)
        score += 3.0 * sane / len(prose_words)
    elif list_items or headings:
        score += 3.0
    score += 1.0 if 60 <= words <= 4000 else 0.0

    if not headings and not list_items and not bold_titles and words > 80:
        score = min(score, 2.0)  # wall of text
    if words < 20:
        score = min(score, 2.0)
    return round(min(score, 10.0), 3)


_INLINE_CODE = re.compile(r"`[^`\n]+`")
_URL = re.compile(r"https?://\S+")
_CITATION = re.compile(r"\[\d{1,3}\]")
_LINE_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d{1,3}[.)]\s+|>\s*)+")
_BOLD = re.compile(r"(\*\*|__)(.+?)\1")
_EDGE_PUNCT = "\"'“”‘’,;:!?()[]{}<>*_"
_ABBREV = {"e.g", "i.e", "etc", "vs", "cf"}


def _is_specific(token: str, sentence_start: bool) -> bool:
    if re.search(r"\w\(", token):
        return True
    bare = token.strip(_EDGE_PUNCT).rstrip(".")
    if not bare or bare.lower() in _ABBREV:
        return False
    if re.search(r"\d", bare):
        return True
    if re.search(r"[A-Za-z]_[A-Za-z]", bare) or re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", bare):
        return True
    if re.search(r"[a-z][A-Z]", bare):
        return True
    if re.fullmatch(r"[A-Z]{2,}s?", bare):
        return True
    if not sentence_start and re.fullmatch(r"[A-Z][a-z]+(?:[-'][A-Za-z]+)?", bare) and bare not in {"I"}:
        return True
    return False


def specificity_score(output: str) -> float:
    """Density of concrete detail: numbers, versions, identifiers like_this() or a.b, acronyms, named tools
    (capitalised words mid-sentence), inline code, URLs and code blocks; saturates towards 10."""
    if not isinstance(output, str) or not output.strip():
        return 0.0
    code_blocks = sum(1 for ln in output.splitlines() if is_fence_line(ln)) // 2
    signals = 0
    words = 0
    for line in _lines_outside_code(output):
        if not line.strip():
            continue
        if _HEADING.match(line):
            line = line.lower()
        line = _LINE_PREFIX.sub("", line)
        line = _CITATION.sub(" ", line)
        line = _BOLD.sub(lambda m: m.group(2).lower() if m.start() == 0 else m.group(2), line)
        inline = _INLINE_CODE.findall(line)
        signals += len(inline)
        words += len(inline)
        line = _INLINE_CODE.sub(" ", line)
        urls = _URL.findall(line)
        signals += len(urls)
        words += len(urls)
        line = _URL.sub(" ", line)
        sentence_start = True
        for token in line.split():
            words += 1
            signals += _is_specific(token, sentence_start)
            sentence_start = token.endswith((".", "!", "?", ":")) and token.rstrip(".").lower() not in _ABBREV
    signals += 3 * min(code_blocks, 5)
    words += 3 * min(code_blocks, 5)
    if words == 0:
        return 0.0
    density = 100.0 * signals / words
    return round(10.0 * (1.0 - math.exp(-density / 8.0)), 3)


def _normalise(word: str) -> str:
    word = word.lower().strip(".-_+")
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def _content_words(text: str) -> set[str]:
    """Lower-cased content words of 4+ letters, a plural's "s" dropped; a stopword is checked before and after
    the drop ("always" must not survive as "alway")."""
    out = set()
    for raw in re.findall(r"[A-Za-z][A-Za-z0-9_.+-]*", text):
        if raw.lower().strip(".-_+") in _NOT_CONTENT:
            continue
        word = _normalise(raw)
        if len(word) >= 4 and word not in _NOT_CONTENT:
            out.add(word)
    return out


def source_text(source: Any) -> str:
    """Text of one gathered source: a string, a mapping, or an object with title/snippet/url/content."""
    if isinstance(source, str):
        return source
    fields = ("title", "snippet", "url", "content", "text", "body")
    if isinstance(source, Mapping):
        return " ".join(str(source.get(f) or "") for f in fields)
    return " ".join(str(getattr(source, f, "") or "") for f in fields)


def _claims(output: str) -> list[str]:
    claims: list[str] = []
    for line in _lines_outside_code(output):
        if not line.strip() or _HEADING.match(line):
            continue
        if _ANY_LIST.match(line):
            claims.append(_LINE_PREFIX.sub("", line))
            continue
        claims.extend(s for s in re.split(r"(?<=[.!?])\s+", line.strip()) if s)
    return claims


def grounding_score(output: str, sources: Iterable[Any], *, task: str = "") -> float | None:
    """Share of claims (list items, prose sentences) sharing at least two distinctive content words with the
    gathered sources (words of the task itself do not count), or citing a source URL; 0-10. None without sources."""
    if isinstance(sources, str):
        sources = [sources]
    texts = [source_text(s) for s in sources]
    texts = [t for t in texts if t.strip()]
    if not texts:
        return None
    if not isinstance(output, str) or not output.strip():
        return 0.0
    joined = "\n".join(texts)
    distinctive = _content_words(joined) - _content_words(task)
    urls = set(_URL.findall(joined))
    claims = [c for c in _claims(output) if len(_content_words(c)) >= 3 or _URL.search(c)]
    if not claims:
        return 0.0
    grounded = 0
    for claim in claims:
        if any(u.rstrip(").,") in claim for u in urls):
            grounded += 1
        elif len(_content_words(claim) & distinctive) >= 2:
            grounded += 1
    return round(10.0 * grounded / len(claims), 3)


# -- degenerate output ---------------------------------------------------------------------------------------------

DEGENERATE_CAP = 1.0  # the most any criterion (and the composite) scores for a degenerate output

# Thresholds. Each is far from what an ordinary answer does: a good answer almost never repeats a sentence three
# times, has fewer than half of its sentences distinct, or repeats half of its 4-word phrases (good Markdown
# answers repeat 0-2% of them; five items that differ only by their number, 60-70%). Code blocks and table rows
# are legitimately repetitive and are left out of the repetition checks.
_MIN_WORDS = 5  # fewer words (of any kind) is near-empty
_MIN_BODY_WORDS = 5  # fewer words outside headings, the restated task and prompt scaffolding: no answer
_REPEAT_MIN_COUNT = 3  # one sentence or line this many times ...
_REPEAT_MIN_SHARE = 0.3  # ... making up at least this share of them
_UNIT_MIN_WORDS = 3  # shorter lines/sentences ("Example:", "**Pitfall:**") are not counted as repeats
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

# Scaffolding of the prompts this harness sends: the wiggum revise prompt (harness.wiggum.revision_messages),
# the synthesis prompt and its count retry (harness.synthesis) and the judge prompt (evaluators.rubric). Headings
# are matched as whole heading titles; phrases anywhere, whitespace- and case-insensitive.
_ECHO_HEADINGS_STRONG = frozenset({
    "reviewer score", "reviewer feedback", "weaknesses to fix", "current draft", "research context",
    "plan context", "what earlier runs found (memory)", "additional guidance", "what this kind of task needs",
    "answer to score",
})
_ECHO_HEADINGS_WEAK = frozenset({"task", "dimensions"})
_ECHO_PHRASES = (
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


def _sentences(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        if _HEADING.match(line):
            continue
        body = _LINE_PREFIX.sub("", line).strip()
        out.extend(s for s in re.split(r"(?<=[.!?])\s+", body) if s)
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
    judge prompts (headings such as "# Reviewer feedback", "# Current draft", phrases such as "Write the revised
    answer now"; at least one of them not a plain "# Task"/"# Dimensions"), or, when `prompt` (text or chat
    messages) is given, at least half of the output's lines of 4+ words copied from it, the draft a revise prompt
    asks to improve (and the answer a judge prompt scores) aside."""
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
    of them, fewer than half of them distinct, or half of the 4-word phrases repeating an earlier one); an echo
    of a prompt (two or more of the revise/synthesis/judge prompts' scaffolding headings and phrases, or, when
    `prompt` is given, at least half of the output's lines copied from it, the draft being revised aside);
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
    repeated = _repetition([_unit(s) for s in _sentences(text_lines)], "sentence")
    reasons.extend(repeated or _repetition([_unit(ln) for ln in text_lines if not _HEADING.match(ln)], "line"))
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


# -- the bundle ----------------------------------------------------------------------------------------------------


def deterministic_scores(
    output: str,
    *,
    task: str,
    expected_count: int | None = None,
    required_terms: Sequence[str] = (),
    sources: Sequence[Any] = (),
    prompt: Any = None,
) -> dict[str, float | None]:
    """All deterministic criteria, each 0-10 or None where it does not apply; each capped at DEGENERATE_CAP
    when the output is degenerate (`degenerate_reasons`; `prompt`, when given, is what the output must not echo)."""
    if not isinstance(output, str):
        raise TypeError(f"output must be the answer text (str), got {type(output).__name__}")
    scores = {
        "count": count_score(output, expected_count),
        "terms": terms_score(output, tuple(required_terms or ())),
        "structure": structure_score(output),
        "specificity": specificity_score(output),
        "grounding": grounding_score(output, sources or (), task=task),
    }
    return cap_degenerate(scores, degenerate_reasons(output, task=task, prompt=prompt))


def aggregate(scores: Mapping[str, float | None]) -> float:
    """Mean of the criteria that apply (non-None); 0.0 when none does."""
    values = [float(v) for v in scores.values() if v is not None]
    return round(sum(values) / len(values), 4) if values else 0.0
