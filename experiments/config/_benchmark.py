"""Benchmark task sets: the config's task list as frozen tasks, split into train and holdout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from harness.config import TASK_TYPES

from ._schema import SPLITS, BenchmarkConfig, TaskSpec


@dataclass(frozen=True)
class Task:
    id: str
    task: str
    task_type: str = "research"
    expected_count: int | None = None
    required_terms: tuple[str, ...] = ()
    split: str = "train"

    def criteria(self) -> dict[str, Any]:
        """What the evaluator checks deterministically (passed to Harness.finish as `criteria`)."""
        out: dict[str, Any] = {"required_terms": list(self.required_terms)}
        if self.expected_count is not None:
            out["expected_count"] = self.expected_count
        return out


def task_from_spec(spec: TaskSpec | dict[str, Any]) -> Task:
    get = spec.get if isinstance(spec, dict) else lambda k, d=None: getattr(spec, k, d)
    for key in ("id", "task"):  # a missing or blank one would become the text "None" or an empty task
        value = get(key)
        if value is None or value == "???" or not str(value).strip():
            raise ValueError(f"benchmark task {get('id')!r}: {key}={value!r} is missing or empty; expected a "
                             f"non-empty {key}")
    task = Task(
        id=str(get("id")),
        task=str(get("task")),
        task_type=str(get("task_type", "research")),
        expected_count=get("expected_count"),
        required_terms=tuple(get("required_terms", ()) or ()),
        split=str(get("split", "train")),
    )
    if task.task_type not in TASK_TYPES:
        raise ValueError(f"task {task.id!r}: task_type={task.task_type!r}; expected one of {', '.join(TASK_TYPES)}")
    if task.split not in SPLITS:
        raise ValueError(f"task {task.id!r}: split={task.split!r}; expected one of {', '.join(SPLITS)}")
    return task


def load_tasks(bench: BenchmarkConfig) -> tuple[Task, ...]:
    return tuple(task_from_spec(t) for t in bench.tasks)


def split(tasks: Iterable[Task], name: str) -> tuple[Task, ...]:
    if name not in SPLITS:
        raise ValueError(f"split={name!r}; expected one of {', '.join(SPLITS)}")
    return tuple(t for t in tasks if t.split == name)


def task_types(tasks: Iterable[Task]) -> tuple[str, ...]:
    """Task types present, in the canonical order."""
    present = {t.task_type for t in tasks}
    return tuple(tt for tt in TASK_TYPES if tt in present)
