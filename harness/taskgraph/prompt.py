"""The step-graph planner's prompt and bounded JSON schema (seeds 001 and 004): ids, questions, dependencies,
the tools each step uses with the planner's affinity for them, and completion criteria."""

from __future__ import annotations

from typing import Any

from harness.planner import memory_block

# What a step's research run can use: web search, the observations of earlier runs, files the question names.
STEP_TOOLS = ("search", "memory", "files")


def graph_schema(max_tasks: int = 4) -> dict[str, Any]:
    """Bounded JSON schema for a planner asked to emit a step graph."""
    short = {"type": "string", "maxLength": 160}
    return {
        "type": "object",
        "properties": {
            "objectives": {"type": "array", "items": short, "maxItems": 3},
            "tasks": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_tasks,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "maxLength": 8},
                        "question": {"type": "string", "maxLength": 240},
                        "depends_on": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": max_tasks},
                        "tools": {"type": "array", "items": {"type": "string", "enum": list(STEP_TOOLS)},
                                  "maxItems": len(STEP_TOOLS)},
                        "affinity": {"type": "number", "minimum": 0, "maximum": 1},
                        "criteria": {"type": "array", "items": short, "maxItems": 2},
                    },
                    "required": ["id", "question", "depends_on"],
                    "additionalProperties": False,
                },
            },
            "exit_criteria": {"type": "array", "items": short, "maxItems": 3},
            "explanation": {"type": "string", "maxLength": 300},
        },
        "required": ["objectives", "tasks", "exit_criteria", "explanation"],
        "additionalProperties": False,
    }


GRAPH_SYSTEM = (
    "You split a compound research task into at most {max_tasks} self-contained research steps. Reply with one "
    "JSON object only: objectives, tasks, exit_criteria, explanation. Each task has an id E1, E2, ..., a "
    "question that web research can answer, depends_on (ids of earlier steps whose output it needs; [] when "
    "independent), tools (the ones it needs, from: {tools}), affinity (0 to 1: how strongly the step relies on "
    "those tools) and criteria (when the step is done). A question may quote an earlier step's output with "
    "#E1 (full), #E1.summary (first line) or #E1.head=200. Prefer independent steps so they run in parallel. "
    "Do not add a step that synthesizes, assembles or writes the final answer: that happens afterwards."
)


def graph_messages(task: str, memory_context: str = "", max_tasks: int = 4) -> list[dict[str, str]]:
    """System and user messages for the step-graph planner; memory goes in the planner's data block."""
    system = GRAPH_SYSTEM.replace("{max_tasks}", str(max_tasks)).replace("{tools}", ", ".join(STEP_TOOLS))
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Task: {task}\n\n{memory_block(task, memory_context)}"},
    ]
