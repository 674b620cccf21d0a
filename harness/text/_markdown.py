"""Reading an answer's Markdown: heading, list-item and line-prefix patterns, URLs, the lines outside its code
fences, and how many top-level items it lists (count_items: synthesis checks an enumeration with it, the
deterministic criteria score one)."""

from __future__ import annotations

import re

from ._plain import code_marks

HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
ANY_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")
LINE_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d{1,3}[.)]\s+|>\s*)+")
URL = re.compile(r"https?://\S+")


def lines_outside_code(markdown: str) -> list[str]:
    """The lines of markdown outside its code fences."""
    return [line for line, code in code_marks(markdown) if not code]


NUMBERED_HEADING = re.compile(r"^#{1,6}\s+(?:\*\*|__)?\s*\d{1,3}\s*[.):]\s*\S")
NUMBERED_ITEM = re.compile(r"^ ?(?:\*\*|__)?\d{1,3}[.)](?:\*\*|__)?\s+\S")
H2 = re.compile(r"^##\s+(.+?)\s*#*\s*$")
BULLET = re.compile(r"^[-*+]\s+\S")

FRAME_SECTIONS = {
    "introduction", "intro", "overview", "background", "conclusion", "conclusions", "summary", "final thoughts",
    "key takeaways", "takeaways", "references", "sources", "bibliography", "further reading", "notes", "tl;dr",
    "tldr", "resources", "citations",
}
SOURCE_SECTIONS = {"references", "sources", "bibliography", "further reading", "resources", "citations"}


# -- counting top-level items ------------------------------------------------------------------------------------------------------


def heading_title(text: str) -> str:
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
    for line in lines_outside_code(markdown):
        heading = HEADING.match(line)
        if heading:
            title = heading_title(heading.group(2))
            in_sources = title in SOURCE_SECTIONS
            if in_sources:
                continue
            if NUMBERED_HEADING.match(line.lstrip()):
                numbered_headings += 1
            elif H2.match(line.lstrip()) and title not in FRAME_SECTIONS:
                h2 += 1
            continue
        if in_sources:
            continue
        if NUMBERED_ITEM.match(line):
            numbered_items += 1
        elif BULLET.match(line):
            bullets += 1
    for n in (numbered_headings, numbered_items, h2, bullets):
        if n:
            return n
    return 0
