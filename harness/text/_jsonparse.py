"""Tolerant parsing of JSON that language models write.

Models wrap JSON in code fences, put prose before and after it, leave trailing commas, forget to escape quotes
inside strings, write Python literals (True/None) and get cut off by max_tokens. The ladder here is:

1. `json` on the first balanced JSON value found in the text (fences and surrounding prose removed);
2. `dirtyjson` on the same candidate, then on a lightly repaired copy (stray inner quotes escaped, Python
   literals mapped to JSON); both count as the "dirtyjson" rung;
3. `JSONParseError` (a ValueError) saying what was expected and what arrived.

Callers that must not fail (the planner) fall back further with `extract_string_list` / `extract_string_field`,
regex extraction that also works on truncated JSON.
"""

from __future__ import annotations

import json
import re
from typing import Any

import dirtyjson

from ._plain import fenced_bodies

_STRING_BODY = r'"((?:[^"\\]|\\.)*)'  # body of a double-quoted string, closing quote matched by caller
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


class JSONParseError(ValueError):
    """Neither json nor dirtyjson could read the text. `text` keeps the raw input for display."""

    def __init__(self, message: str, text: str = "") -> None:
        super().__init__(message)
        self.text = text


def _preview(text: str, n: int = 80) -> str:
    flat = " ".join(text.split())
    return repr(flat[:n] + ("…" if len(flat) > n else ""))


def _strip_fences(text: str) -> str:
    """The body of the first fenced block that contains a bracket, else the text itself."""
    if "```" not in text:
        return text
    for body in fenced_bodies(text):
        if "{" in body or "[" in body:
            return body
    return text.replace("```", "")


def _string_char(ch: str, escaped: bool) -> tuple[bool, bool]:
    """One character inside a double-quoted string, after a backslash or not: (whether the next character is
    escaped, whether this one is a quote that may close the string). The one string scanner of this module."""
    if escaped:
        return False, False
    return ch == "\\", ch == '"'


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the bracket closing text[start], honouring strings; None when never closed."""
    closer = {"{": "}", "[": "]"}
    stack: list[str] = []
    in_str = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            escaped, closing = _string_char(ch, escaped)
            in_str = not closing
            continue
        if ch == '"':
            in_str = True
        elif ch in closer:
            stack.append(closer[ch])
        elif ch in "}]":
            if not stack or stack[-1] != ch:
                return None
            stack.pop()
            if not stack:
                return i + 1
    return None


def _candidates(text: str, openers: str) -> list[str]:
    """Substrings that may hold the JSON value: balanced span first, then first opener to last closer.

    A balanced span of the raw text that itself contains ``` comes before everything: the backticks are inside
    the value's strings (a key or a value quoting a code fence), and stripping fences would cut them out."""
    out: list[str] = []
    if "```" in text:
        for start in sorted(i for i in (text.find(o) for o in openers) if i >= 0):
            end = _balanced_end(text, start)
            if end is not None and "```" in text[start:end]:
                out.append(text[start:end])
    body = _strip_fences(text).strip()
    starts = sorted(i for i in (body.find(o) for o in openers) if i >= 0)
    for start in starts:
        end = _balanced_end(body, start)
        if end is not None:
            out.append(body[start:end])
        closer = "}" if body[start] == "{" else "]"
        last = body.rfind(closer)
        if last > start:
            out.append(body[start : last + 1])
        out.append(body[start:])
    seen: set[str] = set()
    return [c for c in out if not (c in seen or seen.add(c))]


def _repair(text: str) -> str:
    """Escape quotes that cannot close a string, and map Python literals outside strings to JSON."""
    out: list[str] = []
    in_str = False
    escaped = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if in_str:
            was_escaped = escaped
            escaped, closing = _string_char(ch, escaped)
            if closing:
                j = i + 1
                while j < n and text[j] in " \t\r\n":
                    j += 1
                if j >= n or text[j] in ",}]:":
                    in_str = False
                else:
                    out.append('\\"')
                    i += 1
                    continue
            elif ch == "\n" and not was_escaped:
                out.append("\\n")
                i += 1
                continue
            out.append(ch)
            i += 1
            continue
        if ch == '"':
            in_str = True
        elif ch.isalpha():
            m = re.match(r"[A-Za-z_]\w*", text[i:])
            word = m.group(0) if m else ch
            out.append(_PY_LITERALS.get(word, word))
            i += len(word)
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def to_plain(value: Any) -> Any:
    """dirtyjson's attributed containers -> plain dict/list (recursively)."""
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


def _parse(text: str, openers: str, want: type | tuple[type, ...], what: str) -> tuple[Any, str]:
    if not isinstance(text, str):
        raise JSONParseError(f"expected {what} as text, got {type(text).__name__}", str(text))
    if not text.strip():
        raise JSONParseError(f"expected {what}, got empty text", text)
    candidates = _candidates(text, openers)
    if not candidates:
        raise JSONParseError(f"expected {what}, found no '{openers[0]}' in {_preview(text)}", text)
    errors: list[str] = []
    for parser, loads in (("json", json.loads), ("dirtyjson", dirtyjson.loads)):
        attempts = candidates if parser == "json" else candidates + [_repair(c) for c in candidates]
        for cand in attempts:
            try:
                value = to_plain(loads(cand))
            except Exception as exc:  # noqa: BLE001 - both parsers raise assorted ValueErrors
                errors.append(f"{parser}: {exc}")
                continue
            if isinstance(value, want):
                return value, parser
            errors.append(f"{parser}: parsed a {type(value).__name__}, not {what}")
    raise JSONParseError(f"expected {what}; json and dirtyjson both failed on {_preview(text)} ({errors[-1]})", text)


def parse_json(text: str) -> tuple[Any, str]:
    """First JSON object or array in text -> (value, "json" | "dirtyjson"); raises JSONParseError."""
    return _parse(text, "{[", (dict, list), "a JSON object or array")


def parse_json_object(text: str) -> tuple[dict, str]:
    """First JSON object in text -> (dict, "json" | "dirtyjson"); raises JSONParseError."""
    return _parse(text, "{", dict, "a JSON object")


def _unescape(body: str) -> str:
    try:
        return json.loads(f'"{body}"')
    except ValueError:
        return body.replace('\\"', '"').replace("\\n", "\n")


def _key_pattern(key: str) -> str:
    return r"""["']?""" + re.escape(key) + r"""["']?\s*:\s*"""


def extract_string_list(text: str, key: str) -> list[str]:
    """Values of `"key": ["a", "b", ...]` by regex; tolerant of truncation (an unterminated last item is dropped).

    Returns [] when the key is absent or holds no strings.
    """
    if not isinstance(text, str):
        return []
    m = re.search(_key_pattern(key) + r"\[", text)
    if not m:
        return []
    items: list[str] = []
    pos = m.end()
    item = re.compile(r"\s*,?\s*" + _STRING_BODY + r'"')
    other = re.compile(r"\s*,?\s*[^\s,\"\]]+")
    while pos < len(text):
        if re.match(r"\s*,?\s*\]", text[pos:]):
            break
        sm = item.match(text, pos)
        if sm:
            items.append(_unescape(sm.group(1)))
            pos = sm.end()
            continue
        om = other.match(text, pos)
        if not om or om.end() == pos:
            break
        pos = om.end()
    return [s.strip() for s in items if s.strip()]


def extract_string_field(text: str, key: str) -> str | None:
    """Value of `"key": "value"` by regex, or None. A truncated value is returned as far as it goes."""
    if not isinstance(text, str):
        return None
    m = re.search(_key_pattern(key) + _STRING_BODY + r'("?)', text)
    if not m:
        return None
    return _unescape(m.group(1)).strip()


def extract_number_field(text: str, key: str) -> float | None:
    """Value of `"key": 12` by regex, or None."""
    if not isinstance(text, str):
        return None
    m = re.search(_key_pattern(key) + r"""["']?(-?\d+(?:\.\d+)?)""", text)
    return float(m.group(1)) if m else None
