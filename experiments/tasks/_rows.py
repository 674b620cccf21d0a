"""Task rows read from a user's file (JSONL or CSV) into candidate tasks with their provenance.

A row is refused in one line naming the file and its line number: a task that is missing or blank, a task_type or
split that does not exist, an expected_count that is not a count, required_terms that are not a list of words, an
id that cannot name a file. Nothing is written before every row has been read.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from experiments.config import ConfigError
from experiments.config import id_problem
from harness.config import TASK_TYPES

COLUMNS = ("id", "task", "task_type", "expected_count", "required_terms", "split")
SPLITS = ("train", "holdout")
_BEST_PRACTICES = re.compile(r"\bbest[\s-]+practices?\b|\bguidelines\b|\bdo'?s and don'?ts\b", re.IGNORECASE)


@dataclass(frozen=True)
class Candidate:
    """A task before the split: the benchmark fields, a topic (generated tasks), and where it came from."""

    id: str
    task: str
    task_type: str
    expected_count: int | None = None
    required_terms: tuple[str, ...] = ()
    split: str | None = None  # given by the source; None: the split assigns it
    topic: str = ""
    provenance: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def spec(self, split: str) -> dict[str, Any]:
        """The task as a benchmark YAML entry."""
        out: dict[str, Any] = {"id": self.id, "task": self.task, "task_type": self.task_type}
        if self.expected_count is not None:
            out["expected_count"] = self.expected_count
        out["required_terms"] = list(self.required_terms)
        out["split"] = split
        out["provenance"] = dict(self.provenance)
        return out


def infer_type(task: str) -> tuple[str, int | None]:
    """(task_type, expected_count) read off the text: a text that asks for N items is enumerated with N
    (harness.synthesis.count_from_task, the count the evaluator checks), 'best practices' / 'guidelines' is
    best_practices, anything else research."""
    from harness.synthesis import count_from_task

    n = count_from_task(task)
    if n is not None:
        return "enumerated", n
    return ("best_practices" if _BEST_PRACTICES.search(task) else "research"), None


def slug_id(task: str) -> str:
    """A stable id from the text: its first words (letters and digits, '-') and 6 hex of its hash."""
    words = re.findall(r"[a-z0-9]+", task.lower())[:6]
    return f"{'-'.join(words)[:48] or 'task'}-{hashlib.sha256(task.encode()).hexdigest()[:6]}"


def candidate(row: dict[str, Any], where: str, provenance: dict[str, Any]) -> Candidate:
    """A row as a Candidate, or ConfigError naming `where` (file and line) and the field."""

    def bad(what: str) -> ConfigError:
        return ConfigError(f"{where}: {what}")

    unknown = sorted(set(row) - set(COLUMNS) - {"topic", "persona", "provenance"})
    if unknown:
        raise bad(f"unknown column(s) {', '.join(map(repr, unknown))}; expected {', '.join(COLUMNS)}")
    text = row.get("task")
    if not isinstance(text, str) or not text.strip():
        raise bad(f"task={text!r} is missing or empty; expected the task as a sentence")
    text = " ".join(text.split())
    given = row.get("task_type")
    if given in (None, ""):
        task_type, count = infer_type(text)
    else:
        if given not in TASK_TYPES:
            raise bad(f"task_type={given!r}; expected one of {', '.join(TASK_TYPES)} (or empty: inferred)")
        task_type, count = str(given), None
    raw_count = row.get("expected_count")
    if raw_count not in (None, ""):
        try:
            count = int(str(raw_count).strip()) if not isinstance(raw_count, bool) else None
        except ValueError:
            count = None
        if count is None or count < 1 or str(raw_count).strip() not in (str(count), f"{count}.0"):
            raise bad(f"expected_count={raw_count!r}; expected a whole number >= 1 (or empty)")
    elif given not in (None, "") and task_type == "enumerated":
        count = infer_type(text)[1]
    terms = row.get("required_terms")
    if terms in (None, ""):
        terms = []
    elif isinstance(terms, str):  # CSV: "a; b; c" (or "a, b")
        terms = [t.strip() for t in re.split(r"[;|]" if ";" in terms or "|" in terms else ",", terms) if t.strip()]
    if not isinstance(terms, list) or not all(isinstance(t, str) and t.strip() for t in terms):
        raise bad(f"required_terms={row.get('required_terms')!r}; expected a list of words or phrases")
    split = row.get("split")
    if split in (None, ""):
        split = None
    elif split not in SPLITS:
        raise bad(f"split={split!r}; expected train, holdout or empty (assigned by the split)")
    task_id = row.get("id")
    task_id = slug_id(text) if task_id in (None, "") else str(task_id).strip()
    problem = id_problem(task_id)
    if problem or len(task_id.encode()) > 80:
        raise bad(f"id={row.get('id')!r} {problem or 'is over 80 bytes'}; expected an id that names a file "
                  f"(letters, digits, '-', '_', '.')")
    topic = str(row.get("topic") or "")
    return Candidate(task_id, text, task_type, count, tuple(t.strip() for t in terms), split, topic, provenance)


def read_rows(path: str | Path) -> list[Candidate]:
    """Every row of a .jsonl or .csv file as a Candidate (provenance: the file and its line), or ConfigError naming
    the file and the line of the first bad row. Blank lines are skipped."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConfigError(f"tasks.source={str(path)!r} is not a file; expected a .jsonl or .csv file of tasks")
    suffix = p.suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise ConfigError(f"tasks.source={str(path)!r} is a {suffix or 'extensionless'} file; expected .jsonl (one "
                          f"JSON object a line) or .csv (a header row with a `task` column)")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected a UTF-8 file") from None
    rows = list(_jsonl(text, p) if suffix == ".jsonl" else _csv(text, p))
    out = [candidate(row, f"{p} line {line}", {"source": str(p), "line": line}) for line, row in rows]
    if not out:
        raise ConfigError(f"{p}: no task rows; expected at least one")
    return out


def _jsonl(text: str, p: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p} line {n}: not JSON ({exc.msg}, column {exc.colno}); expected one object a "
                              f"line") from None
        if not isinstance(row, dict):
            raise ConfigError(f"{p} line {n}: a JSON {type(row).__name__}; expected an object with a `task` key")
        yield n, row


def _csv(text: str, p: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.reader(text.splitlines(keepends=True))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        return
    if "task" not in header:
        raise ConfigError(f"{p} line 1: header {header!r} has no `task` column; expected task and optionally "
                          f"{', '.join(c for c in COLUMNS if c != 'task')}")
    start = reader.line_num + 1
    for cells in reader:
        line, start = start, reader.line_num + 1
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise ConfigError(f"{p} line {line}: {len(cells)} cells; expected {len(header)} (the header's columns)")
        yield line, dict(zip(header, cells))
