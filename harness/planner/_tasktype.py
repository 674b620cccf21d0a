"""Task typing: the task_type, complexity and section count of a plan read from the model's words, with the
task text's own reading (a stated count, "best practices") as the fallback and the check."""

from __future__ import annotations

import re
from typing import Any

from ._plan import MAX_SECTIONS

_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_TASK_TYPE_ALIASES = {
    "enumerated": "enumerated",
    "enumeration": "enumerated",
    "enumerate": "enumerated",
    "list": "enumerated",
    "listicle": "enumerated",
    "count": "enumerated",
    "numbered_list": "enumerated",
    "top_n": "enumerated",
    "best_practices": "best_practices",
    "best_practice": "best_practices",
    "bestpractices": "best_practices",
    "practices": "best_practices",
    "guidelines": "best_practices",
    "recommendations": "best_practices",
    "research": "research",
    "analysis": "research",
    "explanation": "research",
    "explain": "research",
    "report": "research",
    "overview": "research",
    "comparison": "research",
    "technical": "research",
}
_COMPLEXITY_ALIASES = {
    "low": "low",
    "simple": "low",
    "easy": "low",
    "trivial": "low",
    "basic": "low",
    "medium": "medium",
    "moderate": "medium",
    "mid": "medium",
    "normal": "medium",
    "average": "medium",
    "high": "high",
    "complex": "high",
    "hard": "high",
    "difficult": "high",
    "very_high": "high",
}
_ENUMERATED_TASK = re.compile(
    r"\b(?:list|top|name|give(?:\s+me)?|enumerate|provide|suggest|recommend)\s+(?:the\s+)?(?:\d+|"
    + "|".join(_NUMBER_WORDS)
    + r")\b|\b(?:\d+|"
    + "|".join(list(_NUMBER_WORDS)[2:])
    + r")\s+(?:\w+\s+){0,2}(?:ways|tips|tools|reasons|examples|ideas|steps|mistakes|patterns|practices|"
    r"libraries|techniques|strategies|methods|items|things|questions)\b",
    re.IGNORECASE,
)
_BEST_PRACTICES_TASK = re.compile(r"\bbest[\s-]+practices?\b|\bguidelines\b|\bdo'?s and don'?ts\b", re.IGNORECASE)


def infer_task_type(task: str) -> str:
    """Task-text heuristic used when the model's task_type is missing or unknown."""
    if _ENUMERATED_TASK.search(task or ""):
        return "enumerated"
    if _BEST_PRACTICES_TASK.search(task or ""):
        return "best_practices"
    return "research"


def normalize_task_type(value: Any, task: str = "") -> tuple[str, str | None]:
    """-> (task_type, note); note explains a fallback to the heuristic."""
    key = re.sub(r"[\s\-/]+", "_", str(value or "").strip().lower())
    if key in _TASK_TYPE_ALIASES:
        return _TASK_TYPE_ALIASES[key], None
    guess = infer_task_type(task)
    return guess, f"task_type {value!r} unknown; inferred {guess!r} from the task text"


def reconcile_task_type(task_type: str, task: str) -> tuple[str, str | None]:
    """"enumerated" means the task states a count: a task that states one is enumerated whatever the model said,
    and "enumerated" without one becomes the text's reading (best_practices or research). -> (type, note)."""
    counted = bool(_ENUMERATED_TASK.search(task or ""))
    if counted and task_type != "enumerated":
        return "enumerated", f"task_type {task_type!r}, but the task states a count: 'enumerated'"
    if not counted and task_type == "enumerated" and task:
        guess = infer_task_type(task)
        return guess, f"task_type 'enumerated', but the task states no count: {guess!r}"
    return task_type, None


def normalize_complexity(value: Any) -> tuple[str, str | None]:
    key = re.sub(r"[\s\-]+", "_", str(value or "").strip().lower())
    if key in _COMPLEXITY_ALIASES:
        return _COMPLEXITY_ALIASES[key], None
    return "medium", f"complexity {value!r} unknown; using 'medium'"


def normalize_sections(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        text = value.strip().lower()
        m = re.search(r"\d+", text)
        value = int(m.group(0)) if m else _NUMBER_WORDS.get(text)
    if isinstance(value, int) and 1 <= value <= MAX_SECTIONS:
        return value
    return None
