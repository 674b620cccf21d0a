"""When a research task is compound (seed 003): a complexity score fitted to research, not to coding.

Seed 004's score (harness.taskgraph.complexity) counts coding verbs, files and sequencers; a research harness
gets "Research A and B, then synthesize into a unified guide" as 4 of 10 there and never decomposes it. Here a
task is compound when it spans several distinct topics and asks for them to be put together:

- topics: the research clauses of the task (cut at sequencers and semicolons; clauses that only produce the
  output, "write a guide", "save to x.md", are not topics), each split further at "and"/commas when every part
  names a topic of its own (two content words: "pandas and Polars for CSV" stays one topic, so does "the
  difference between A and B", and "... and how it applies to B" follows up on the same topic);
- research verbs (research, compare, survey, synthesize, combine, ...), capped;
- an assembly step ("synthesize into", "combine both", "a unified guide", "compare them");
- output artefacts (file names) and sequencers, capped at one point each;
- the planner's subtasks: two or more researchable ones add points (a small planner lists subtasks for plain
  tasks too, so they count as evidence, not as a verdict).

`route_score` returns the points per signal and their total; `orchestrator.decide_route` orchestrates when the
total reaches `OrchestratorConfig.threshold` and the task spans at least `min_topics` topics (from the text or the
planner's subtasks).
"""

from __future__ import annotations

import re
from typing import Sequence

from harness.taskgraph.complexity import FILE_RE, SEQUENCER_RE
from harness.text import STOPWORDS

_RESEARCH_VERBS = re.compile(
    r"\b(research|investigate|survey|study|compare|contrast|analy[sz]e|review|explore|examine|evaluate|assess|"
    r"summari[sz]e|explain|synthesi[sz]e|combine|merge|assemble|integrate|unify|consolidate|compile|"
    r"reconcile|connect)(?:s|d|ed|ing)?\b",
    re.IGNORECASE,
)
_ASSEMBLY = re.compile(
    r"\b(?:synthesi[sz]\w*|combin\w*|merg\w*|assembl\w*|integrat\w*|unif\w*|consolidat\w*|compil\w*)\s+"
    r"(?:\w+\s+){0,4}?(?:into|in)\b"
    r"|\b(?:synthesi[sz]e|combine|merge|assemble|integrate|unify|consolidate|connects?|compare|contrast|relate)\s+"
    r"(?:both|them|the two|all three|all of them|the findings|the results)\b"
    r"|\b(?:unified|single|one|combined|joint|consolidated)\s+(?:\w+\s+){0,2}?(?:guide|report|document|overview|"
    r"checklist|summary|table|recommendation|reference|playbook|handbook|article|doc)\b"
    r"|\bcomparison of (?:their|the two|both)\b",
    re.IGNORECASE,
)
_CLAUSES = re.compile(r"\s*(?:;|[.?!](?:\s|$)|,?\s*\b(?:and then|then|after that|afterwards|finally|lastly|next)\b,?)\s*",
                      re.IGNORECASE)
_LEAD = re.compile(r"^(?:and\s+|also\s+)*", re.IGNORECASE)
_OUTPUT_CLAUSE = re.compile(
    r"^(?:write|produce|create|draft|save|put|make|turn|present|format|output|export|store|deliver)\b"
    r"|^(?:synthesi[sz]\w*|combin\w*|merg\w*|assembl\w*|integrat\w*|unif\w*|consolidat\w*)\b",
    re.IGNORECASE,
)
_TOPIC_LEAD = re.compile(
    r"^(?:(?:research|investigate|survey|study|compare|contrast|analy[sz]e|review|explore|examine|evaluate|assess|"
    r"summari[sz]e|explain|describe|find|look up|compile|collect|gather|list|name|give|suggest)\s+)?",
    re.IGNORECASE,
)
_TRAILING = re.compile(r"[\s,]*\b(?:and|or)$", re.IGNORECASE)
_PARTS = re.compile(r"\s*(?:,\s*and\s+|,\s*|\s+and\s+)\s*", re.IGNORECASE)
_FOLLOW_UP = re.compile(r"^(?:how|why|where|when|what|whether)?\s*(?:it|its|they|their|them|this|these|those)\b",
                        re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9][a-z0-9_\-]{1,}")

VERB_CAP = 2
TOPIC_POINTS, TOPIC_CAP = 3, 6  # per topic beyond the first
ASSEMBLY_POINTS = 2
SUBTASK_POINTS = 2


def _topic_words(text: str) -> int:
    return sum(1 for w in _WORD.findall(text.lower()) if w not in STOPWORDS and not w.isdigit())


def research_topics(task: str) -> list[str]:
    """The distinct topics a task asks to research, read off its text (see the module docstring)."""
    topics: list[str] = []
    for clause in _CLAUSES.split(task or ""):
        clause = _TRAILING.sub("", _LEAD.sub("", clause.strip(" .,:")))
        if not clause or _OUTPUT_CLAUSE.match(clause) or _ASSEMBLY.match(clause):
            continue
        body = _TOPIC_LEAD.sub("", clause, count=1)
        parts = [p.strip(" .,:") for p in _PARTS.split(body)] if not re.search(r"\bbetween\b", body, re.I) else [body]
        parts = [p for p in parts if p and not _ASSEMBLY.search(p) and not _OUTPUT_CLAUSE.match(p)]
        separate = len(parts) >= 2 and all(_topic_words(p) >= 2 and not _FOLLOW_UP.match(p) for p in parts)
        if separate:
            topics += parts
        elif _topic_words(body) >= 1 and not (parts and _ASSEMBLY.search(clause) and len(parts) < 2):
            topics.append(body)
    return topics


def route_score(task: str, subtasks: Sequence[str] = ()) -> dict[str, int]:
    """Points per signal and their total ("score"); "topics" is the count the min_topics gate reads."""
    text = task or ""
    topics = len(research_topics(text))
    verbs = min(len({m.group(1).lower()[:6] for m in _RESEARCH_VERBS.finditer(text)}), VERB_CAP)
    assembly = ASSEMBLY_POINTS if _ASSEMBLY.search(text) else 0
    files = min(len({m.group(0) for m in FILE_RE.finditer(text)}), 1)
    sequencers = min(len(SEQUENCER_RE.findall(text)), 1)
    planned = len(subtasks)
    points = {
        "verbs": verbs,
        "topics_points": min(max(topics - 1, 0) * TOPIC_POINTS, TOPIC_CAP),
        "assembly": assembly,
        "files": files,
        "sequencers": sequencers,
        "subtasks_points": SUBTASK_POINTS if planned >= 2 else 0,
    }
    return {**points, "topics": max(topics, planned), "text_topics": topics, "subtasks": planned,
            "score": sum(points.values())}


def route_points(breakdown: dict[str, int]) -> str:
    """One line for --plan-preview: 'topics 2 (+3), verbs 2, assembly 2, ...'."""
    b = breakdown
    return (f"topics {b['topics']} (+{b['topics_points']}), research verbs {b['verbs']}, assembly {b['assembly']}, "
            f"files {b['files']}, sequencers {b['sequencers']}, subtasks {b['subtasks']} (+{b['subtasks_points']})")


def _stems(text: str) -> set[str]:
    return {w.rstrip("s") for w in _WORD.findall(text.lower()) if w not in STOPWORDS and not w.isdigit()}


def uncovered_topics(task: str, questions: Sequence[str]) -> list[str]:
    """The task's topics (research_topics, when it names two or more) that no step question covers: a question
    covers a topic when it holds more than half of the topic's content words (plurals folded)."""
    topics = research_topics(task)
    if len(topics) < 2:
        return []
    asked = [_stems(q) for q in questions]
    return [t for t in topics
            if not any(len(_stems(t) & q) * 2 > len(_stems(t)) for q in asked)]
