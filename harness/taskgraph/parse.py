"""Lenient reading of planner output into steps (seed 001's telemetry contract): JSON text with fences or prose,
a mapping or a list; the aliases planners use are normalised into the canonical fields (`exit_criteria`,
`done_when`, `success_criteria` on a step -> `criteria`; `tool_scores` -> `affinity`; `deps`/`after` ->
`depends_on`; ...). Affinity outside [0, 1] is clamped with a one-line warning; ids are canonicalised (1 -> E1).

Only input with no list of steps at all raises `GraphError`; everything else is kept and reported as warnings,
and structural problems are left to `TaskGraph.validate()`.
"""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, NamedTuple, Sequence

from harness.taskgraph.ids import ID_LIKE, canonical_id
from harness.taskgraph.nodes import GraphError, TaskNode
from harness.text import JSONParseError, parse_json

TASK_LIST_KEYS = ("tasks", "steps", "plan", "subtasks", "nodes", "graph", "task_graph")
ID_KEYS = ("id", "task_id", "step_id", "step", "key", "name")
QUESTION_KEYS = ("question", "task", "prompt", "query", "instruction", "description", "goal", "title", "text")
SUBQ_KEYS = ("sub_questions", "subquestions", "sub_queries", "questions", "follow_ups")
TOOLS_KEYS = ("tools", "tool", "tools_required", "agents", "agent")
AFFINITY_KEYS = ("affinity", "tool_affinity", "tool_scores", "affinities", "scores")
DEPS_KEYS = ("depends_on", "deps", "dependencies", "after", "requires", "needs", "parents", "prerequisites")
CRITERIA_KEYS = (
    "criteria",
    "completion_criteria",
    "success_criteria",
    "done_when",
    "acceptance_criteria",
    "exit_criteria",
)
OBJECTIVE_KEYS = ("objectives", "objective", "goals", "goal", "aims")
EXIT_KEYS = ("exit_criteria", "exit", "done_when", "success_criteria", "exit_conditions", "stop_criteria")
EXPLANATION_KEYS = ("explanation", "rationale", "reasoning", "summary", "explain", "notes")

_NUMBER = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")


class ParsedPlan(NamedTuple):
    """The fields of a TaskGraph, read off planner output."""

    tasks: tuple[TaskNode, ...]
    objectives: tuple[str, ...]
    exit_criteria: tuple[str, ...]
    explanation: str
    warnings: tuple[str, ...]


def parse_planner_output(data: Any) -> ParsedPlan:
    """JSON text (fences/prose tolerated), a mapping (steps under tasks/steps/plan/...) or a list of steps.

    Raises GraphError (with the raw input kept) only when no list of steps can be found at all.
    """
    raw = data
    if isinstance(data, (bytes, bytearray)):
        data = data.decode("utf-8", "replace")
    if isinstance(data, str):
        try:
            data, _ = parse_json(data)
        except JSONParseError as exc:
            raise GraphError(f"planner output is not a task graph: {exc}", raw) from exc
    warnings: list[str] = []
    top: Mapping[str, Any] = {}
    if isinstance(data, Mapping):
        top = data
        items = find_task_list(data)
        if items is None:
            keys = sorted(map(str, data))[:10]
            raise GraphError(
                f"planner output has no list of steps: expected a list under one of {TASK_LIST_KEYS}, got keys {keys}",
                raw if isinstance(raw, str) else repr(raw),
            )
    elif isinstance(data, (list, tuple)):
        items = list(data)
    else:
        raise GraphError(
            f"planner output is not a task graph: expected JSON text, a mapping or a list, got {type(data).__name__}",
            raw,
        )
    if not items:
        warnings.append("plan has no steps")
    tasks = tuple(parse_step(item, i, warnings) for i, item in enumerate(items))
    return ParsedPlan(
        tasks=tasks,
        objectives=strings(first(top, OBJECTIVE_KEYS)[1]),
        exit_criteria=strings(first(top, EXIT_KEYS)[1]),
        explanation=" ".join(strings(first(top, EXPLANATION_KEYS)[1])),
        warnings=tuple(warnings),
    )


def find_task_list(data: Mapping[str, Any]) -> list[Any] | None:
    """The list of steps in a planner mapping (possibly nested under plan/graph), or the mapping itself when it
    is one step; None when there is none."""
    key, value = first(data, TASK_LIST_KEYS)
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Mapping):
        nested = find_task_list(value)
        if nested is not None:
            return nested
    if key is None and any(k in data for k in QUESTION_KEYS):
        return [data]
    return None


def parse_step(item: Any, index: int, warnings: list[str]) -> TaskNode:
    """One step (a mapping with any of the aliases, or a bare string) -> TaskNode; problems go to warnings."""
    fallback_id = f"E{index + 1}"
    if isinstance(item, str):
        return TaskNode(id=fallback_id, question=" ".join(item.split()))
    if not isinstance(item, Mapping):
        warnings.append(f"step {index + 1}: expected an object or a string, got {type(item).__name__}; kept as text")
        return TaskNode(id=fallback_id, question=str(item))
    _, raw_id = first(item, ID_KEYS)
    question_text = " ".join(strings(first(item, QUESTION_KEYS)[1]))
    if raw_id is not None and not isinstance(raw_id, bool) and ID_LIKE.fullmatch(str(raw_id).strip()):
        tid = canonical_id(raw_id)
    else:
        tid = fallback_id
        warnings.append(f"step {index + 1}: no usable id (got {raw_id!r}); assigned {tid}")
        if raw_id is not None and not question_text:
            question_text = " ".join(strings(raw_id))
    tools = strings(first(item, TOOLS_KEYS)[1])
    return TaskNode(
        id=tid,
        question=question_text,
        sub_questions=strings(first(item, SUBQ_KEYS)[1]),
        tools=tools,
        affinity=affinity(first(item, AFFINITY_KEYS)[1], tid, tools, warnings),
        depends_on=dependency_ids(first(item, DEPS_KEYS)[1]),
        criteria=strings(first(item, CRITERIA_KEYS)[1]),
    )


def affinity(value: Any, tid: str, tools: Sequence[str], warnings: list[str]) -> dict[str, float]:
    """tool -> score in [0, 1]. A mapping {tool: score}, a list of tools or {tool, score} objects (a bare tool
    scores 1), or one number that scores every tool in `tools`. Out-of-range scores are clamped, unusable ones
    dropped, each with a one-line warning."""
    if value is None:
        return {}
    if _is_number(value):
        score = _unit_score(value, "affinity", tid, warnings)
        if score is None:
            return {}
        if not tools:
            warnings.append(f"task {tid}: affinity {value!r} names no tool (tools is empty); ignored")
            return {}
        return {tool: score for tool in tools}
    if isinstance(value, str):
        value = [value]
    if isinstance(value, (list, tuple)):
        out: dict[str, float] = {}
        for item in value:
            if isinstance(item, Mapping):
                _, name = first(item, ("tool", "name", "id"))
                _, score = first(item, ("score", "affinity", "value", "weight"))
                out.update(affinity({str(name): score}, tid, tools, warnings) if name is not None else {})
            elif str(item).strip():
                out[str(item).strip()] = 1.0
        return out
    if not isinstance(value, Mapping):
        warnings.append(f"task {tid}: affinity expected a number or a mapping tool -> score in [0, 1], got {value!r}; ignored")
        return {}
    out = {}
    for tool, raw in value.items():
        score = _unit_score(raw, f"affinity for {tool!r}", tid, warnings)
        if score is not None:
            out[str(tool).strip()] = score
    return out


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or (isinstance(value, str) and bool(_NUMBER.fullmatch(value)))


def _unit_score(raw: Any, what: str, tid: str, warnings: list[str]) -> float | None:
    """raw as a float in [0, 1] (clamped, with a warning), or None (with a warning) when it is not a number."""
    try:
        score = float(raw)
    except (TypeError, ValueError):
        warnings.append(f"task {tid}: {what} is not a number ({raw!r}); ignored")
        return None
    if math.isnan(score):
        warnings.append(f"task {tid}: {what} is NaN; ignored")
        return None
    clamped = min(1.0, max(0.0, score))
    if clamped != score:
        warnings.append(f"task {tid}: {what} = {score:g} clamped to {clamped:g}")
    return clamped


def first(mapping: Mapping[str, Any], keys: Sequence[str]) -> tuple[str | None, Any]:
    """(alias, value) of the first of `keys` present in mapping (case-insensitive); (None, None) when none is."""
    lowered = {str(k).strip().lower(): k for k in mapping}
    for key in keys:
        if key in lowered:
            return key, mapping[lowered[key]]
    return None, None


def strings(value: Any) -> tuple[str, ...]:
    """A string, number, list or mapping of them (objects read by their text field) -> whitespace-normalised
    strings, empty ones dropped."""
    if value is None or isinstance(value, bool):
        return ()
    if isinstance(value, (str, int, float)):
        text = " ".join(str(value).split())
        return (text,) if text else ()
    if isinstance(value, Mapping):
        value = list(value.values())
    out: list[str] = []
    for item in value if isinstance(value, (list, tuple)) else ():
        if isinstance(item, Mapping):
            _, item = first(item, QUESTION_KEYS + ("criterion", "value"))
        out.extend(strings(item))
    return tuple(out)


def dependency_ids(value: Any) -> tuple[str, ...]:
    """"E1, E2", [1, {"id": 2}], "#E3" ... -> canonical ids, first occurrence kept."""
    if value is None or isinstance(value, bool):
        return ()
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s;]+", value) if v]
    elif not isinstance(value, (list, tuple)):
        value = [value]
    out: list[str] = []
    for item in value:
        if isinstance(item, Mapping):
            _, item = first(item, ID_KEYS)
        if item is None or str(item).strip() == "":
            continue
        dep = canonical_id(item)
        if dep not in out:
            out.append(dep)
    return tuple(out)
