"""Skills: `/name` tokens at the start of a task that switch on extra behaviour at fixed stages.

`/annotate /deep Research RAG ... and save to output.md` -> task "Research RAG ... and save to output.md",
active {"annotate", "deep"}. Skill names are stored without the slash. Hooks per stage:

- pre_synthesis(**ctx) -> str: text injected into the synthesis prompt;
- post_wiggum(**ctx) -> dict: flags for the rest of the run (e.g. {"panel": True});
- post_synthesis(output: str, **ctx) -> str: the final output, transformed (hooks are chained).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

STAGES = ("pre_synthesis", "post_wiggum", "post_synthesis")

_LEADING_TOKEN = re.compile(r"^\s*/([A-Za-z][\w-]*)(?=\s|$)")
_DEEP_WORDS = re.compile(r"\b(comprehensive|exhaustive|in[\s-]depth|deep[\s-]dive)\b", re.IGNORECASE)
_ANNOTATE_WORDS = re.compile(r"\b(papers?|abstracts?|surveys?)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    hooks: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    research_rounds_bonus: int = 0

    def __post_init__(self) -> None:
        bad = sorted(set(self.hooks) - set(STAGES))
        if bad:
            raise ValueError(f"skill {self.name!r}: unknown hook stage(s) {bad}; expected one of {STAGES}")
        object.__setattr__(self, "hooks", MappingProxyType(dict(self.hooks)))


# -- hooks -------------------------------------------------------------------------------------------

DEEP_INSTRUCTION = (
    "Depth requested (/deep): go beyond a summary. For each point explain the mechanism and why it holds, "
    "the trade-offs and failure cases, and give concrete specifics (names, versions, numbers, short code or "
    "command examples) drawn from the research context."
)
BRIEF_INSTRUCTION = (
    "Brevity requested (/brief): answer in at most about 250 words. Keep only the most important points, one "
    "or two sentences each, no preamble and no closing summary."
)
ANNOTATED_HEADING = "## Annotated sources"


def _deep_pre_synthesis(**_: Any) -> str:
    return DEEP_INSTRUCTION


def _brief_pre_synthesis(**_: Any) -> str:
    return BRIEF_INSTRUCTION


def _panel_post_wiggum(**_: Any) -> dict[str, Any]:
    return {"panel": True}


def _field(source: Any, name: str) -> str:
    value = source.get(name, "") if isinstance(source, Mapping) else getattr(source, name, "")
    return " ".join(str(value or "").split())


def annotated_sources_section(sources: Iterable[Any], *, snippet_chars: int = 200) -> str:
    """Markdown section listing sources (SearchResult-like objects or dicts), deduplicated by URL."""
    lines: list[str] = []
    seen: set[str] = set()
    for src in sources or ():
        url, title = _field(src, "url"), _field(src, "title")
        key = url or title
        if not key or key in seen:
            continue
        seen.add(key)
        title = (title or url).replace("[", "(").replace("]", ")")
        snippet = _field(src, "snippet")
        if len(snippet) > snippet_chars:
            snippet = snippet[: snippet_chars - 1].rstrip() + "…"
        provider = _field(src, "source")
        line = f"{len(lines) + 1}. [{title}]({url})" if url else f"{len(lines) + 1}. {title}"
        if snippet:
            line += f" — {snippet}"
        if provider:
            line += f" _({provider})_"
        lines.append(line)
    if not lines:
        lines = ["_No external sources were gathered for this run (answer drawn from memory and model knowledge)._"]
    return f"{ANNOTATED_HEADING}\n\n" + "\n".join(lines) + "\n"


def _annotate_post_synthesis(output: str = "", sources: Iterable[Any] = (), **_: Any) -> str:
    if ANNOTATED_HEADING in output:
        return output
    return output.rstrip() + "\n\n" + annotated_sources_section(sources)


SKILLS: dict[str, Skill] = {
    s.name: s
    for s in (
        Skill(
            "deep",
            "More depth: an extra synthesis instruction and more research rounds.",
            {"pre_synthesis": _deep_pre_synthesis},
            research_rounds_bonus=2,
        ),
        Skill("brief", "A concise answer.", {"pre_synthesis": _brief_pre_synthesis}),
        Skill("panel", "Persona panel review after the wiggum loop.", {"post_wiggum": _panel_post_wiggum}),
        Skill(
            "annotate",
            "Append an annotated list of the gathered sources to the output.",
            {"post_synthesis": _annotate_post_synthesis},
        ),
    )
}


# -- parsing and activation ----------------------------------------------------------------------------


def parse_skills_detailed(task: str) -> tuple[str, frozenset[str], tuple[str, ...]]:
    """Strip leading /tokens -> (task, active known skills, unknown token names in order of appearance)."""
    rest = task or ""
    active: set[str] = set()
    unknown: list[str] = []
    while m := _LEADING_TOKEN.match(rest):
        name = m.group(1).lower()
        if name in SKILLS:
            active.add(name)
        elif name not in unknown:
            unknown.append(name)
        rest = rest[m.end() :]
    return rest.strip(), frozenset(active), tuple(unknown)


def parse_skills(task: str) -> tuple[str, frozenset[str]]:
    """Strip leading /skill tokens -> (task, active skill names). Unknown tokens are dropped."""
    text, active, _ = parse_skills_detailed(task)
    return text, active


def auto_activate(task: str, plan: Any, active: Iterable[str]) -> frozenset[str]:
    """Add skills the task or plan calls for: deep (comprehensive/exhaustive/deep dive), panel (complexity
    high), annotate (paper/abstract/survey)."""
    out = set(active)
    if _DEEP_WORDS.search(task or ""):
        out.add("deep")
    if getattr(plan, "complexity", None) == "high":
        out.add("panel")
    if _ANNOTATE_WORDS.search(task or ""):
        out.add("annotate")
    return frozenset(out)


def _ordered(active: Iterable[str]) -> list[Skill]:
    names = set(active)
    return [skill for name, skill in SKILLS.items() if name in names]


def run_hooks(stage: str, active: Iterable[str], **ctx: Any) -> list[Any]:
    """Call the `stage` hooks of active skills in registry order; returns their non-None results.

    For post_synthesis the output is chained: each hook receives the previous hook's output as `output`.
    """
    if stage not in STAGES:
        raise ValueError(f"unknown skill stage {stage!r}; expected one of {STAGES}")
    results: list[Any] = []
    for skill in _ordered(active):
        hook = skill.hooks.get(stage)
        if hook is None:
            continue
        value = hook(**ctx)
        if value is None:
            continue
        if stage == "post_synthesis" and isinstance(value, str):
            ctx["output"] = value
        results.append(value)
    return results


def pre_synthesis_injections(active: Iterable[str], **ctx: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in run_hooks("pre_synthesis", active, **ctx) if str(v).strip())


def post_wiggum_flags(active: Iterable[str], **ctx: Any) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for value in run_hooks("post_wiggum", active, **ctx):
        if isinstance(value, Mapping):
            flags.update(value)
    return flags


def apply_post_synthesis(active: Iterable[str], output: str, **ctx: Any) -> str:
    results = [v for v in run_hooks("post_synthesis", active, output=output, **ctx) if isinstance(v, str)]
    return results[-1] if results else output


def research_rounds_bonus(active: Iterable[str]) -> int:
    """Extra research rounds the active skills ask for (/deep: +2)."""
    return sum(skill.research_rounds_bonus for skill in _ordered(active))
