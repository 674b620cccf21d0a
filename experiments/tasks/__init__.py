"""The task supply: benchmarks imported from the user's file or written by a generator model, deduplicated on the
memory's embedding and split before any run, sized from a stored calibration (`tasks.count=auto`).

Entry: `run_task_supply(exp)` (experiments.run dispatches sweep.kind import_tasks / generate_tasks), `check_task_supply`
(everything refused before anything is written), `cli_keys` (the command line's `tasks.<key>`)."""

from __future__ import annotations

from ._entry import check_task_supply, cli_keys, run_task_supply

__all__ = ["check_task_supply", "cli_keys", "run_task_supply"]
