"""ReWOO placeholders (seed 004): a step quotes an earlier step's output with #E1, #E1.summary, #E1.head=N or
#E1.last=N, resolved at run time from the outputs so far."""

from __future__ import annotations

import re
from typing import Mapping

from harness.taskgraph.ids import natural_key

PLACEHOLDER = re.compile(r"#E(\d+)(?!\d)(?:\.(summary)\b|\.head=(\d+)|\.last=(\d+))?", re.IGNORECASE)
ELLIPSIS = "…"


def find_placeholders(text: str) -> tuple[str, ...]:
    """Ids referenced by #E<n> placeholders, in order of appearance (repeats kept)."""
    return tuple(f"E{int(m.group(1))}" for m in PLACEHOLDER.finditer(text or ""))


def _lookup(outputs: Mapping[str, str], tid: str) -> str | None:
    for key in (tid, tid.lower(), tid[1:], f"#{tid}"):
        if key in outputs:
            value = outputs[key]
            return "" if value is None else str(value)
    return None


def resolve_placeholders_detailed(text: str, outputs: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
    """Replace placeholders with step outputs -> (text, problems). A placeholder whose id has no output is
    replaced by a visible marker `[missing output for #E3]` and reported."""
    problems: list[str] = []

    def sub(m: re.Match[str]) -> str:
        tid = f"E{int(m.group(1))}"
        value = _lookup(outputs, tid)
        if value is None:
            problems.append(f"#{tid}: no output for {tid} (available: {', '.join(sorted(outputs, key=natural_key)) or 'none'})")
            return f"[missing output for {m.group(0)}]"
        value = value.strip()
        if m.group(2):
            return next((line.strip() for line in value.splitlines() if line.strip()), "")
        if m.group(3) is not None:
            n = int(m.group(3))
            return value if len(value) <= n else value[:n].rstrip() + ELLIPSIS
        if m.group(4) is not None:
            n = int(m.group(4))
            return value if len(value) <= n else ELLIPSIS + value[len(value) - n :].lstrip()
        return value

    return PLACEHOLDER.sub(sub, text or ""), tuple(problems)


def resolve_placeholders(text: str, outputs: Mapping[str, str]) -> str:
    """#E1 (trimmed output), #E1.summary (first non-empty line), #E1.head=N, #E1.last=N -> text.

    Unknown ids stay visible as `[missing output for #E3]`; use resolve_placeholders_detailed for the list.
    """
    return resolve_placeholders_detailed(text, outputs)[0]
