"""Benchmark task sets: the config's task list as frozen tasks, split into train and holdout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from harness.config import TASK_TYPES

from ._near_duplicate import NEAR_DUPLICATE, PAIR_BLOCK, TaskTexts, embed, normalized_text
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


# -- what a benchmark may hold: task ids that name files, and a holdout that is not the train split again ---------

# When two task texts are one task (the same text, or a paraphrase of it; not a sibling of the same form with another
# subject or count): experiments.config._near_duplicate holds the rule and the measurements behind its constants.
_BAD_ID_CHARS = ("/", "\\", "\x00")


def id_problem(task_id: str) -> str | None:
    """Why a task id cannot name the files built from it (traces, outputs, run ids), or None: '/' or '\\' (a trace
    written outside results_dir, or two ids that differ only there writing one file), '..', or a control character."""
    text = str(task_id)
    if any(c in text for c in _BAD_ID_CHARS) or ".." in text:
        return "holds '/', '\\\\' or '..'"
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return "holds a control character"
    if text != text.strip():
        return "starts or ends with a space"
    return None


def similarity(a: str, b: str) -> float:
    """Cosine similarity of two task texts on the MiniLM embedding (1.0 for the same normalized text)."""
    if normalized_text(a) == normalized_text(b):
        return 1.0
    va, vb = embed([a, b])
    return float(va @ vb)


def split_leaks(tasks: Iterable[Any], threshold: float = NEAR_DUPLICATE) -> list[tuple[str, str, float]]:
    """(train id, holdout id, similarity) for every holdout task that is a train task again: the same text, or one
    task with it under the near-duplicate rule (same_task at `threshold`); the closest such train task per holdout
    task, the closest pairs first. The model is loaded only when both splits hold tasks."""
    items = [(str(_get(t, "id")), str(_get(t, "task")), str(_get(t, "split") or "train")) for t in tasks]
    train = [(i, x) for i, x, s in items if s == "train"]
    hold = [(i, x) for i, x, s in items if s == "holdout"]
    if not train or not hold:
        return []
    texts = TaskTexts([x for _, x in hold] + [x for _, x in train])
    out = []
    for start in range(0, len(hold), PAIR_BLOCK):
        rows = slice(start, min(start + PAIR_BLOCK, len(hold)))
        near, sims = texts.judge(rows, slice(len(hold), len(texts)), threshold)
        sims = np.where(near, sims, -np.inf)
        for h in range(near.shape[0]):
            j = int(sims[h].argmax())
            if near[h, j]:
                out.append((train[j][0], hold[rows.start + h][0], float(min(sims[h, j], 1.0))))
    return sorted(out, key=lambda r: -r[2])


def check_benchmark(tasks: Iterable[Any], threshold: float = NEAR_DUPLICATE, *, name: str = "") -> None:
    """ConfigError (one line) on a task id that cannot name a file, or on a holdout task that is a train task again
    (the same text, or a near-duplicate at `threshold`): the holdout would then confirm on a task the search tuned on."""
    from harness.config import ConfigError

    tasks = list(tasks)
    for i, t in enumerate(tasks):
        problem = id_problem(_get(t, "id"))
        if problem:
            raise ConfigError(f"benchmark.tasks[{i}].id={_get(t, 'id')!r} {problem}; expected an id that names a "
                              f"file inside results_dir (letters, digits, '-', '_', '.')")
    leaks = split_leaks(tasks, threshold)
    if leaks:
        tr, ho, sim = leaks[0]
        what = ("has the same text as" if sim >= 1.0 else
                f"is a near-duplicate of (a paraphrase by the task supply's rule: MiniLM cosine {sim:.2f} >= "
                f"{threshold:g}, the same counts, not a sibling of one template)")
        more = f" ({len(leaks) - 1} more such pair(s))" if len(leaks) > 1 else ""
        raise ConfigError(f"benchmark{f' {name!r}' if name else ''}: holdout task {ho!r} {what} train task {tr!r}"
                          f"{more}; the holdout would confirm on a task the search tuned on: drop one, or move both "
                          f"to one split")


def _get(t: Any, key: str) -> Any:
    return t.get(key) if isinstance(t, dict) else getattr(t, key, None)
