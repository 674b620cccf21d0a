"""`+sweep=import_tasks tasks.source=FILE tasks.name=NAME`: the user's own tasks as a benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from experiments.config import ExperimentConfig

from ._rows import Candidate, read_rows
from ._select import Selection, assign_split, deduplicate
from ._write import benchmark_yaml, summary_lines, target, write_benchmark


def plan_import(exp: ExperimentConfig) -> tuple[list[Candidate], Selection, list[tuple[Candidate, str]]]:
    """Read, deduplicate and split the source; ConfigError (one line, file and line) on a bad row. Nothing written."""
    ts = exp.task_supply
    rows = read_rows(ts.source)
    sel = deduplicate(rows, ts.near_duplicate)
    return rows, sel, assign_split(sel.kept, ts.holdout_share, ts.seed, ts.near_duplicate)


def run_import(exp: ExperimentConfig, *, out: Callable[[str], None] = print) -> Path:
    ts = exp.task_supply
    rows, sel, tasks = plan_import(exp)
    path = target(exp)
    header = [f"Imported by `python -m experiments.run +sweep=import_tasks tasks.source={ts.source} tasks.name={ts.name}`"
              f" from {Path(ts.source).name}: {len(rows)} rows, {len(sel.dropped)} dropped as duplicates (cosine >= "
              f"{ts.near_duplicate:g} on the hashing embedding).",
              f"The split was assigned before any run (holdout share {ts.holdout_share:g} per task type, seed "
              f"{ts.seed}); each task's provenance names its file and line. The user's own tasks."]
    text = benchmark_yaml(ts.name, f"imported from {Path(ts.source).name}", header, tasks)
    write_benchmark(path, text)
    for line in summary_lines("import", f"rows: {len(rows)}", sel, tasks, path):
        out(line)
    return path
