"""`+sweep=import_tasks tasks.source=SOURCE tasks.name=NAME`: the user's own tasks as a benchmark. SOURCE is a .jsonl
or .csv file of rows, a harness runs.jsonl, or a folder of .txt / .md files (experiments.tasks._rows); with
tasks.headroom=true each distinct task gets one baseline run first, as generated ones do
(experiments.tasks._headroom)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from experiments.config import ConfigError, ExperimentConfig

from ._headroom import screen
from ._rows import Candidate, read_rows, unique_ids
from ._select import Selection, assign_split, deduplicate
from ._write import benchmark_yaml, holdout_note, summary_lines, write_benchmark


def plan_import(exp: ExperimentConfig) -> tuple[list[Candidate], Selection, list[tuple[Candidate, str]], list[str]]:
    """Read, deduplicate and split the source; ConfigError (one line, file and line) on a bad row. Nothing written.
    The last item: one line per task whose id was renamed (two tasks gave one id)."""
    ts = exp.task_supply
    rows, renamed = unique_ids(read_rows(ts.source, folders=True))
    sel = deduplicate(rows, ts.near_duplicate)
    return rows, sel, assign_split(sel.kept, ts.holdout_share, ts.seed, ts.near_duplicate), renamed


def run_import(exp: ExperimentConfig, *, out: Callable[[str], None] = print) -> Path:
    ts = exp.task_supply
    rows, sel, tasks, renamed = plan_import(exp)
    extra = list(renamed)
    header_extra = []
    if ts.headroom:
        # one baseline run per distinct task: one that fails or already scores at the ceiling cannot show a gain
        scr = screen(exp, list(sel.kept), out)
        extra += scr.lines(ts.headroom_ceiling)
        if len(scr.kept) < 2:
            raise ConfigError(f"the headroom screen left {len(scr.kept)} of your {scr.screened} task(s) "
                              f"({len(scr.failed)} failed, {len(scr.ceiling)} at composite >= "
                              f"{ts.headroom_ceiling:g}); expected at least 2: raise tasks.headroom_ceiling or add "
                              f"tasks (screened tasks are not run again); nothing written")
        tasks = assign_split(scr.kept, ts.holdout_share, ts.seed, ts.near_duplicate)
        header_extra.append(f"Headroom screen: {scr.screened} screened by one baseline run each; {len(scr.failed)} "
                            f"dropped for failing, {len(scr.ceiling)} at the ceiling (composite >= "
                            f"{ts.headroom_ceiling:g}).")
    note = holdout_note(exp, tasks)
    if note:
        extra.append(note)
    header = [f"Imported by `python -m experiments.run +sweep=import_tasks tasks.source={ts.source} tasks.name={ts.name}`"
              f" from {Path(ts.source).name}: {len(rows)} rows, {len(sel.dropped)} dropped as duplicates (paraphrases: "
              f"MiniLM cosine >= {ts.near_duplicate:g} with the same counts).",
              f"The split was assigned before any run (holdout share {ts.holdout_share:g} per task type, seed "
              f"{ts.seed}); each task's provenance names its file and line. The user's own tasks.", *header_extra]
    text = benchmark_yaml(ts.name, f"imported from {Path(ts.source).name}", header, tasks)
    path = write_benchmark(exp, text)
    for line in summary_lines("import", f"rows: {len(rows)}", sel, tasks, path, extra):
        out(line)
    return path
