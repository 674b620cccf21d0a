"""The criteria read from the answer alone (item count, required terms, structure, specificity) and the
bundle of all deterministic criteria with its mean."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from harness.text import (
    ANY_LIST as _ANY_LIST, HEADING as _HEADING, LINE_PREFIX as _LINE_PREFIX, URL as _URL, count_items, is_fence_line,
    lines_outside_code as _lines_outside_code,
)

from ._degenerate import cap_degenerate, degenerate_reasons
from ._grounding import grounding_score

_BOLD_TITLE = re.compile(r"^\s*(?:[-*+]\s+|\d{1,3}[.)]\s+)?(\*\*|__)[^*_]{2,}\1")


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
_CITATION = re.compile(r"\[\d{1,3}\]")
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
