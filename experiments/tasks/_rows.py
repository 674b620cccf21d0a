"""Task rows read from the user's source into candidate tasks with their provenance: a JSONL or CSV file of rows, the
harness's own runs.jsonl (each run's task and type, its run id as provenance; the answers are not tasks), or a
folder of .txt / .md files (one task a file, its path as provenance).

A row is refused in one line naming the file and its line number: a task that is missing, blank or longer than
MAX_TASK_CHARS, a task_type or split that does not exist, an expected_count that is not a count, required_terms
that are not a list of words, an id that cannot name a file. Nothing is written before every row has been read.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from experiments.config import ConfigError
from experiments.config import id_problem
from harness.config import TASK_TYPES

COLUMNS = ("id", "task", "task_type", "expected_count", "required_terms", "split")
SPLITS = ("train", "holdout")
# The longest task text a source may give: a task is a request (the shipped ones are under 200 characters, a
# generated one at most 600); a document belongs in a file the task names. A 2.4-million-word task made every load
# of its benchmark take a minute and overflows every model's context.
MAX_TASK_CHARS = 10_000
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
    if len(text) > MAX_TASK_CHARS:
        raise bad(f"the task is {len(text):,} characters long ({text[:40]!r}...); expected at most "
                  f"{MAX_TASK_CHARS:,} (a request: put a long document in a file the task names)")
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


def read_rows(path: str | Path, *, folders: bool = False) -> list[Candidate]:
    """Every row of a .jsonl or .csv file as a Candidate (provenance: the file and its line), or ConfigError naming
    the file and the line of the first bad row. Blank lines are skipped; a UTF-8 byte order mark (Excel's "CSV
    UTF-8") is read past. A .jsonl whose first record is a harness run (run_id and plan) is a runs.jsonl
    (read_runs); with `folders`, a folder is one task per .txt / .md file (read_folder)."""
    p = Path(path).expanduser()
    if folders and p.is_dir():
        return read_folder(p)
    if not p.is_file():
        raise ConfigError(f"tasks.source={str(path)!r} is not a file; expected a .jsonl or .csv file of tasks"
                          + (", or a folder of .txt / .md files (one task a file)" if folders else ""))
    suffix = p.suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise ConfigError(f"tasks.source={str(path)!r} is a {suffix or 'extensionless'} file; expected .jsonl (one "
                          f"JSON object a line) or .csv (a header row with a `task` column)")
    text = _read_text(p)
    rows = list(_jsonl(text, p) if suffix == ".jsonl" else _csv(text, p))
    if suffix == ".jsonl" and rows and {"run_id", "plan"} <= set(rows[0][1]):
        return read_runs(p, rows)
    out = [candidate(row, f"{p} line {line}", {"source": str(p), "line": line}) for line, row in rows]
    if not out:
        raise ConfigError(f"{p}: no task rows; expected at least one")
    return out


def _read_text(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected a UTF-8 file") from None


def read_runs(p: Path, rows: list[tuple[int, dict[str, Any]]]) -> list[Candidate]:
    """The tasks of a harness runs.jsonl: each top-level run's task (as the user gave it) and its planned
    task_type, with the file, line and run id as provenance. A sub-question an orchestrated run asked itself (a
    record with parent_run_id) is not a task the user gave, and is left out; so is every answer."""
    out = []
    for line, rec in rows:
        if rec.get("parent_run_id"):
            continue
        where = f"{p} line {line}"
        plan = rec.get("plan") if isinstance(rec.get("plan"), dict) else {}
        task_type = plan.get("task_type") if plan.get("task_type") in TASK_TYPES else None
        prov = {"source": str(p), "line": line, "run_id": str(rec.get("run_id") or "")}
        out.append(candidate({"task": rec.get("task"), "task_type": task_type}, where, prov))
    if not out:
        raise ConfigError(f"{p}: a runs.jsonl with no top-level run; expected at least one run's task")
    return out


def read_folder(p: Path) -> list[Candidate]:
    """One task per .txt / .md file of the folder and its subfolders (sorted by path): the file's text, its name
    (without the suffix) as the id where that can name a file, its path as provenance."""
    files = sorted(f for f in p.rglob("*") if f.suffix.lower() in (".txt", ".md") and f.is_file())
    if not files:
        raise ConfigError(f"tasks.source={str(p)!r} is a folder with no .txt or .md file; expected one task a file")
    out = []
    for f in files:
        stem = f.stem.strip()
        row = {"task": _read_text(f), "id": stem if stem and not id_problem(stem) and len(stem.encode()) <= 80
               else ""}
        out.append(candidate(row, str(f), {"source": str(f)}))
    return out


def unique_ids(cands: Sequence[Candidate], taken: Sequence[Candidate] = ()) -> tuple[list[Candidate], list[str]]:
    """The candidates with every id unique among them and `taken`, and one line per renamed one. A candidate whose id
    an earlier one (or one of `taken`) holds with another text gets the id with the first free suffix -2, -3, ...
    (free: held by no candidate, given or renamed); one with the same text keeps its id (it is dropped as an exact
    duplicate)."""
    from experiments.config import normalized_text

    used = {c.id for c in taken} | {c.id for c in cands}
    holder = {c.id: normalized_text(c.task) for c in taken}
    out, lines = [], []
    for c in cands:
        text = normalized_text(c.task)
        if c.id in holder and holder[c.id] != text:
            n = 2
            while f"{c.id}-{n}" in used:
                n += 1
            new = f"{c.id}-{n}"
            used.add(new)
            lines.append(f"renamed {c.id!r} ({where(c)}) to {new!r}: {c.id!r} is the id of another task")
            c = dataclasses.replace(c, id=new)
        holder.setdefault(c.id, text)
        out.append(c)
    return out, lines


def where(c: Candidate) -> str:
    """Where a candidate came from, in a few words: 'line 8', 'run <id>', a file's name, 'generator call 3 item 2'."""
    p = c.provenance
    if p.get("run_id"):
        return f"line {p.get('line')}, run {p['run_id']}"
    if p.get("line"):
        return f"line {p['line']}"
    if "call" in p:
        return f"generator call {p['call']} item {p.get('item')}"
    return str(p.get("source") or "generated")


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
