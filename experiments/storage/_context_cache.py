"""Planning + research context per task, computed once per study and reused by every trial.

Stored as JSON under results/<sweep>/context/<task id>-<key>.json. The key covers everything the context
depends on (task text, planner/search/research/memory config, models, seed), so a changed config never
reuses a stale context. Writes are atomic (tmp file + rename): a killed sweep leaves no half-written file.
A context whose preparation met a failed model call (`incomplete` says why) is never written, and a stored one
that records such a call reads back as a miss: prepared again, never reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from experiments.config import Task
from harness.stores import atomic_write_json

log = logging.getLogger("experiments.storage")


@dataclass(frozen=True)
class CachedContext:
    task_id: str
    prepared: Any
    hit: bool
    path: Path


def context_key(task: Task, depends_on: Mapping[str, Any]) -> str:
    blob = json.dumps({"task": task.task, "depends_on": depends_on}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _to_jsonable(prepared: Any) -> Any:
    if hasattr(prepared, "to_dict"):
        return prepared.to_dict()
    return prepared


class ContextCache:
    """get_or_prepare(task, prepare) -> CachedContext; `load` turns stored JSON back into a prepared object."""

    def __init__(
        self,
        directory: str | Path,
        depends_on: Mapping[str, Any],
        *,
        load: Callable[[dict[str, Any]], Any] | None = None,
        incomplete: Callable[[Any], str | None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.depends_on = dict(depends_on)
        self.load = load or (lambda d: d)
        self.incomplete = incomplete or (lambda prepared: None)  # why a prepared context must not be reused

    def path_for(self, task: Task) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in task.id)
        return self.directory / f"{safe}-{context_key(task, self.depends_on)}.json"

    def get(self, task: Task) -> Any | None:
        """The stored context, or None (a miss). A file that does not read back as this task's context (bad JSON,
        missing keys, another task's record, a shape `load` refuses) is a miss too, logged with its path: the
        context is prepared again and the file overwritten, never an error folded into a trial."""
        path = self.path_for(task)
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("task") != task.task or "prepared" not in data:
                raise ValueError("not this task's context record")
            prepared = self.load(data["prepared"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("context cache %s does not read back (%s: %s); preparing the context again", path,
                        type(exc).__name__, str(exc)[:120])
            return None
        why = self.incomplete(prepared)
        if why:
            log.warning("context cache %s was prepared while a model call failed (%s); preparing it again", path,
                        why[:160])
            return None
        return prepared

    def put(self, task: Task, prepared: Any) -> Path:
        why = self.incomplete(prepared)
        if why:
            raise ValueError(f"context of task {task.id!r} not cached: it was prepared while a model call failed "
                             f"({why[:200]})")
        path = self.path_for(task)
        record = {"task_id": task.id, "task": task.task, "depends_on": self.depends_on, "prepared": _to_jsonable(prepared)}
        atomic_write_json(path, record, default=str, ensure_ascii=False, indent=1)
        return path

    def get_or_prepare(self, task: Task, prepare: Callable[[str], Any]) -> CachedContext:
        cached = self.get(task)
        if cached is not None:
            return CachedContext(task.id, cached, True, self.path_for(task))
        prepared = prepare(task.task)
        if self.incomplete(prepared):  # a runner that degrades instead of raising: used this once, never stored
            return CachedContext(task.id, prepared, False, self.path_for(task))
        path = self.put(task, prepared)
        return CachedContext(task.id, self.load(_to_jsonable(prepared)), False, path)
