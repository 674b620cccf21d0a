"""Deterministic criteria: scores (0-10) computed from the text alone, no model involved.

These stand beside the LLM judge so a sweep's objective does not rest on one noisy judge: count hit, required
terms, structure, specificity and grounding in the gathered sources. A criterion that does not apply (no
expected count, no required terms, no sources) is None, and `aggregate` averages the ones that do.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "count_items",
    "deterministic_scores",
    "aggregate",
    "count_score",
    "terms_score",
    "structure_score",
    "specificity_score",
    "grounding_score",
    "source_text",
]

_FENCE_LINE = re.compile(r"^\s*(```|~~~)")
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

_STOPWORDS = frozenset(
    """a about above after again against all also although always among an and another any are aren't around as at
    be because been before being below between both but by can cannot could did do does doing done down during each
    either else enough even ever every few for from further get gets getting give given gives good great had has
    have having he her here hers him his how however i if in into is isn't it its itself just keep know known large
    less let like likely made make makes making many may maybe me might more most much must my need needs never new
    no nor not now of off often on once one only or other others otherwise our ours out over own part per perhaps
    rather really right same see several shall she should since small so some something sometimes such than that the
    their theirs them then there these they thing things this those though through thus to too toward under until up
    upon us use used useful uses using usually very via want was way ways we well were what whatever when where
    whether which while who whom whose why will with within without would yet you your yours best practice practices
    important ensure example examples first second third next last include includes including provide provides
    provided help helps allow allows able based different each following like specific various overall several key
    consider considering approach approaches better common commonly effective effectively""".split()
)


# -- counting ------------------------------------------------------------------------------------------------------


def _lines_outside_code(markdown: str) -> list[str]:
    lines: list[str] = []
    in_code = False
    for line in markdown.splitlines():
        if _FENCE_LINE.match(line):
            in_code = not in_code
            continue
        if not in_code:
            lines.append(line)
    return lines


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
    code_blocks = sum(1 for ln in output.splitlines() if _FENCE_LINE.match(ln)) // 2
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
    out = set()
    for raw in re.findall(r"[A-Za-z][A-Za-z0-9_.+-]*", text):
        word = _normalise(raw)
        if len(word) >= 4 and word not in _STOPWORDS:
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


# -- the bundle ----------------------------------------------------------------------------------------------------


def deterministic_scores(
    output: str,
    *,
    task: str,
    expected_count: int | None = None,
    required_terms: Sequence[str] = (),
    sources: Sequence[Any] = (),
) -> dict[str, float | None]:
    """All deterministic criteria, each 0-10 or None where it does not apply."""
    if not isinstance(output, str):
        raise TypeError(f"output must be the answer text (str), got {type(output).__name__}")
    return {
        "count": count_score(output, expected_count),
        "terms": terms_score(output, tuple(required_terms or ())),
        "structure": structure_score(output),
        "specificity": specificity_score(output),
        "grounding": grounding_score(output, sources or (), task=task),
    }


def aggregate(scores: Mapping[str, float | None]) -> float:
    """Mean of the criteria that apply (non-None); 0.0 when none does."""
    values = [float(v) for v in scores.values() if v is not None]
    return round(sum(values) / len(values), 4) if values else 0.0
