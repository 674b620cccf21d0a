"""Observations: what memory keeps of a finished run, read from the model's JSON or built from the output when
that fails, and the Markdown block the prompts see."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any, Iterable

from harness.text import code_marks

TITLE_MAX, NARRATIVE_MAX, FACT_MAX, FACTS_MAX = 120, 600, 200, 5

_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+(.+?)\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Observation:
    title: str
    narrative: str
    key_facts: tuple[str, ...]
    task: str
    run_id: str
    created: float

    def document(self) -> str:
        """The text both indices see."""
        return "\n".join([self.title, self.narrative, *self.key_facts, self.task])

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "narrative": self.narrative,
            "key_facts": list(self.key_facts),
            "task": self.task,
            "run_id": self.run_id,
            "created": self.created,
        }


def _truncate(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


def _strip_markdown(text: str) -> str:
    text = re.sub(r"[*_`]+", "", text)
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).strip()


def list_items(markdown: str, limit: int = FACTS_MAX) -> list[str]:
    """The first bullet or numbered items of a Markdown text, markup removed."""
    items = []
    for line in markdown.splitlines():
        m = _LIST_ITEM.match(line)
        if m:
            item = _truncate(_strip_markdown(m.group(1)), FACT_MAX)
            if item:
                items.append(item)
        if len(items) >= limit:
            break
    return items


def first_sentences(markdown: str, limit: int = 400) -> str:
    """Leading prose of a Markdown text (headings, fences and list markers dropped) up to about limit chars."""
    lines = []
    for line, code in code_marks(markdown):
        if code or line.lstrip().startswith("#") or not line.strip():
            continue
        m = _LIST_ITEM.match(line)
        lines.append(m.group(1) if m else line.strip())
    prose = _strip_markdown(" ".join(lines))
    out = ""
    for sentence in _SENTENCE_END.split(prose):
        if out and len(out) + len(sentence) + 1 > limit:
            break
        out = f"{out} {sentence}".strip()
    return _truncate(out, limit)


def fallback_observation(task: str, output: str, run_id: str, created: float | None = None) -> Observation:
    """Deterministic observation when the model's reply cannot be used."""
    return Observation(
        title=_truncate(task, 80) or "untitled run",
        narrative=first_sentences(output or ""),
        key_facts=tuple(list_items(output or "")),
        task=task,
        run_id=run_id,
        created=time.time() if created is None else created,
    )


def observation_from_model(data: dict[str, Any], task: str, run_id: str, created: float | None = None) -> Observation:
    """Validate the model's JSON object; raises ValueError saying what was expected and what arrived."""
    title = data.get("title")
    narrative = data.get("narrative", "")
    facts = data.get("key_facts", [])
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"expected a non-empty string 'title', got {title!r:.80}")
    if not isinstance(narrative, str):
        raise ValueError(f"expected a string 'narrative', got {type(narrative).__name__}")
    if isinstance(facts, str):
        facts = [facts]
    if not isinstance(facts, list):
        raise ValueError(f"expected a list 'key_facts', got {type(facts).__name__}")
    clean = [_truncate(str(f), FACT_MAX) for f in facts if isinstance(f, (str, int, float)) and str(f).strip()]
    return Observation(
        title=_truncate(title, TITLE_MAX),
        narrative=_truncate(narrative, NARRATIVE_MAX),
        key_facts=tuple(clean[:FACTS_MAX]),
        task=task,
        run_id=run_id,
        created=time.time() if created is None else created,
    )


def format_context(observations: Iterable[Observation]) -> str:
    """Compact Markdown block of past observations for the planning and synthesis prompts ("" when none)."""
    obs = list(observations)
    if not obs:
        return ""
    lines = [f"## Memory: {len(obs)} related past run{'s' if len(obs) != 1 else ''}"]
    for i, o in enumerate(obs, start=1):
        day = time.strftime("%Y-%m-%d", time.gmtime(o.created))
        lines.append(f"### {i}. {o.title} ({day})")
        if o.narrative:
            lines.append(_truncate(o.narrative, 400))
        lines.extend(f"- {_truncate(f, FACT_MAX)}" for f in o.key_facts[:FACTS_MAX])
    return "\n".join(lines)
