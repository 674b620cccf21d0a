"""The Markdown reading every criterion shares: heading, list-item and line-prefix patterns, URLs, and the
lines of an answer outside its code fences."""

from __future__ import annotations

import re

from harness.text import code_marks

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_ANY_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+\S")
_LINE_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d{1,3}[.)]\s+|>\s*)+")
_URL = re.compile(r"https?://\S+")


def _lines_outside_code(markdown: str) -> list[str]:
    return [line for line, code in code_marks(markdown) if not code]
