"""Running the A/B's cells: every (task, replication) pair in both arms, in the pre-registered order, resumed from
the ledger, with the interim looks of a sequential design (the cells and the ledger: ._cells; the analysis:
._analysis, which this module runs at every look and at the end)."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any, Callable, Collection, Mapping

from experiments.runs import SERIAL, RunPool
from experiments.stats import Decision, Preregistration, sequential_decision
from harness.stores import append_jsonl, read_jsonl

from ._analysis import analyse, family_of, task_results
from ._cells import (ABDesign, ABResult, RunArm, arm_order, cell_key, load_cells, normalise, pair_seed,
                     write_or_check_prereg)


def look_points_of(n_tasks: int, n_looks: int) -> list[int]:
    """Task counts after which each interim look happens (equally spaced, last = all tasks)."""
    return sorted({max(1, math.ceil(k * n_tasks / n_looks)) for k in range(1, n_looks + 1)})


def recorded_looks(ledger_path: str | Path) -> dict[int, Decision]:
    """The interim looks the ledger records, by look number (the first line of each: older ledgers appended a look
    again on every rerun)."""
    names = {f.name for f in dataclasses.fields(Decision)}
    out: dict[int, Decision] = {}
    for rec in read_jsonl(Path(ledger_path)):
        if rec.get("kind") == "look" and int(rec.get("look", 0)) not in out:
            out[int(rec["look"])] = Decision(**{k: v for k, v in rec.items() if k in names})
    return out


def run_ab(
    design: ABDesign,
    prereg: Preregistration,
    run_arm: RunArm,
    *,
    ledger_path: str | Path,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    backend: Mapping[str, Any] | None = None,
    new_test: str = "use a new ledger path",
    pool: RunPool | None = None,
    objective: Mapping[str, Any] | None = None,
    redo: Collection[tuple[str, str, int]] = (),
) -> ABResult:
    """Run (or resume) the A/B test and analyse it; see the module docstring.

    `backend` is the arms' backend identity and `objective` what a score means (experiments.ab.objective_of), both
    registered with the pre-registration (see write_or_check_prereg). `redo`: cell keys (task, arm, replication)
    run again although the ledger has them ok (a pairwise A/B's cell whose answer file is gone before its pair was
    judged). A look the ledger records is taken once: a rerun reuses its recorded decision and appends nothing.
    """
    if prereg.n_tasks != len(design.tasks) or prereg.replications != design.replications:
        raise ValueError(
            f"design does not match the pre-registration: registered n_tasks={prereg.n_tasks}, "
            f"replications={prereg.replications}; design has {len(design.tasks)} tasks, "
            f"{design.replications} replications"
        )
    ledger_path = Path(ledger_path)
    write_or_check_prereg(prereg, design, ledger_path, backend=backend, new_test=new_test, objective=objective)
    cells = load_cells(ledger_path)
    recorded = recorded_looks(ledger_path)
    names = design.arm_names
    ids = design.task_ids
    total = len(ids) * design.replications * 2
    look_points = look_points_of(len(ids), prereg.sequential) if prereg.sequential > 1 else []
    run = skipped = done = 0
    started = time.perf_counter()
    orders: dict[str, list[str]] = {}
    looks: list[Decision] = []
    decision: Decision | None = None
    plan = []  # every cell in the sequential order: (task number j, task, id, replication, pair seed, arm order, position, arm)
    for j, (task, tid) in enumerate(zip(design.tasks, ids), start=1):
        for rep in range(design.replications):
            seed = pair_seed(design.seed, tid, rep)
            order = arm_order(names, seed, design.randomise_order)
            plan.extend((j, task, tid, rep, seed, order, position, arm) for position, arm in enumerate(order))
    last_of_task = {cell[0]: i for i, cell in enumerate(plan)}
    redo = set(redo)
    already = {k for k, c in cells.items() if c.get("status") == "ok" and k not in redo}  # done in an earlier invocation

    def run_cell(cell: tuple) -> tuple[dict[str, Any] | None, float]:
        j, task, tid, rep, seed, order, position, arm = cell
        if cell_key(tid, arm, rep) in already:
            return None, 0.0
        t0 = time.perf_counter()
        try:
            rec = normalise(run_arm(arm, design.arms[arm], task, rep, seed))
        except Exception as exc:  # a failed cell is data
            rec = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:500]}
        return rec, time.perf_counter() - t0

    # cells run (pool or SERIAL).workers at once; their ledger rows, progress and looks follow the plan's order on
    # this thread, so the ledger and every decision are those of concurrency 1
    with (pool or SERIAL).ordered(run_cell, plan) as results:
        for i, ((j, task, tid, rep, seed, order, position, arm), fut) in enumerate(results):
            orders[f"{tid}#{rep}"] = list(order)
            done += 1
            rec, elapsed = fut.result()
            if rec is None:
                skipped += 1
            else:
                if rec["status"] == "ok":
                    rec["secondary"].setdefault("wall_s", elapsed)
                rec = {"kind": "cell", "task": tid, "arm": arm, "replication": rep, "pair_seed": seed,
                       "order": list(order), "position": position, "elapsed_s": elapsed, **rec}
                append_jsonl(ledger_path, rec)
                cells[cell_key(tid, arm, rep)] = rec
                run += 1
                if on_progress is not None:
                    on_progress({"cell": done, "cells": total, "task": j, "tasks": len(ids), "task_id": tid,
                                 "arm": arm, "replication": rep, "status": rec["status"], "score": rec.get("score"),
                                 "error": rec.get("error"), "elapsed_s": time.perf_counter() - started,
                                 "skipped": skipped})
            if i != last_of_task[j] or not (look_points and j in look_points):
                continue
            look = look_points.index(j) + 1
            if look in recorded:  # taken by an earlier invocation: the same look, not a second one
                decision = recorded[look]
            else:
                family = family_of(prereg.metric, cells)
                diffs = [t.diff for t in task_results(cells, ids[:j], names, design.replications, prereg.metric,
                                                       family)[0]]
                decision = sequential_decision(diffs, look=look, n_looks=len(look_points), alpha=prereg.alpha,
                                               min_effect=prereg.min_effect, direction=prereg.direction)
                append_jsonl(ledger_path, {"kind": "look", **dataclasses.asdict(decision)})
                recorded[look] = decision
            looks.append(decision)
            if decision.stop:
                results.cancel()  # cells of later tasks in flight finish; their results are not recorded
                break
    analysed = ids[: look_points[len(looks) - 1]] if looks else ids
    return analyse(cells, design, prereg, task_ids=analysed, decision=decision, looks=tuple(looks),
                   orders=orders, cells_run=run, cells_skipped=skipped, ledger_path=str(ledger_path))
