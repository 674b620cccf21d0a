"""Checks on a composed experiment config, before Hydra writes anything: every setting in range (one line naming
the key, the value and what is allowed), and a design that cannot answer its question refused (reachability,
experiments.stats) unless allow_underpowered. Entry: experiments.config.validate.
"""

from __future__ import annotations

import math
import re
from typing import Any

from experiments.stats import COMPARES, COST_METRICS
from harness.compose import check_choice, check_harness, check_positive, check_range, warn_judge
from harness.config import TASK_TYPES, ConfigError

from ._benchmark import check_benchmark
from ._design import check_calibrate_design, check_sweep_design
from ._schema import (TASK_KINDS, ESTIMATES, HOLDOUT_TESTS, OPERATOR_CHOICES, PARENT_SELECTIONS, REFLECT_FEEDBACKS, SEARCHES, PRUNER_CORRECTIONS, PRUNERS, SAMPLERS,
                      SPLITS, SWEEP_KINDS, TRAIN_FILTERS, ExperimentConfig)


def _check_task_text(i: int, t: Any) -> None:
    """A benchmark task with a blank id or task, or only skill tokens, fails every run it starts: refuse it here,
    before the study and the MLflow store are created."""
    if not str(t.id or "").strip():
        raise ConfigError(f"benchmark.tasks[{i}].id={t.id!r} is empty; expected a non-empty task id")
    if len(str(t.id).encode("utf-8")) > MAX_TASK_ID_BYTES:  # run ids and file names are built from it
        raise ConfigError(f"benchmark.tasks[{i}].id is {len(str(t.id).encode('utf-8'))} bytes long ({str(t.id)[:24]!r}"
                          f"...); expected at most {MAX_TASK_ID_BYTES}: run ids and file names are built from it")
    if not str(t.task or "").strip():
        raise ConfigError(f"benchmark.tasks[{i}].task={t.task!r} (id {t.id!r}) is empty; expected the task as a sentence")
    from harness.agent import parse_skills_detailed

    if not parse_skills_detailed(str(t.task))[0].strip():
        raise ConfigError(f"benchmark.tasks[{i}].task={t.task!r} (id {t.id!r}) has only skill tokens; expected a task "
                          "after them")


# The longest name of a file built from sweep.name and a task id is traces/.<sweep.name>-holdout-<12 hex>-s<seed>-
# <task id>.json.<8 random>.tmp (harness.stores' temporary name): 100 + 80 bytes and 20 seed digits leave it under
# the file system's 255 bytes per name.
MAX_NAME_BYTES, MAX_TASK_ID_BYTES = 100, 80
# The most tasks one generation keeps (tasks.count): 200 generator calls at the default batch; the largest holdout
# the shipped sizing asks for (+0.2 composite points on a noisy 1.5B model) is a few hundred tasks.
MAX_GENERATED = 1000
# The most edits the calibration's edits arm proposes (calibrate.edits): each is one task run per calibration task, and
# the largest of a few spreads is what sizing reads
MAX_CALIBRATION_EDITS = 8


def check_store_paths(exp: ExperimentConfig) -> None:
    """results_dir and sweep.name, checked like output paths: every store lands inside results_dir/<sweep.name>.

    An empty results_dir would put every store in the current folder, and sweep.name '..' the ledger, contexts,
    plots, summary and promoted_synth.yaml in results_dir's parent. '#', '?' and '%' in the folder's absolute path are
    refused: the sqlite:/// URLs of the Optuna and MLflow stores are parsed by SQLAlchemy ('?' starts a query,
    '%XX' is decoded) and by MLflow with urllib ('#' starts a fragment), and no one escaping reads back the same
    through both, so the stores would land at the path's prefix, outside the folder."""
    from pathlib import Path

    if not str(exp.results_dir or "").strip():
        raise ConfigError(f"results_dir={exp.results_dir!r} is empty; expected a folder (set results_dir=<folder> or "
                          "HARNESS_RESULTS_DIR)")
    resolved = str(Path(exp.results_dir).expanduser().resolve())
    bad = sorted({c for c in resolved if c in "#?%"})
    if bad:
        raise ConfigError(f"results_dir={exp.results_dir!r} is not allowed: its path {resolved!r} holds "
                          f"{' '.join(repr(c) for c in bad)}, which sqlite:/// store URLs cannot carry; expected a "
                          "folder without '#', '?' or '%'")
    blocker = next((p for p in (Path(resolved), *Path(resolved).parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():  # a file where Hydra's job folder goes: one line, not a traceback
        raise ConfigError(f"results_dir={exp.results_dir!r} is not allowed: {str(blocker)!r} is a file, not a "
                          "folder; expected a folder (set results_dir=<folder> or HARNESS_RESULTS_DIR)")
    name = exp.sweep.name
    if name in ("", ".", "..") or name != name.strip() or any(c in name for c in "/\\\x00"):
        raise ConfigError(f"sweep.name={name!r} is not allowed; expected a folder name inside results_dir (not "
                          "empty, '.' or '..', without '/', '\\' or surrounding spaces)")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:  # 230 characters: 'File name too long', no runs.jsonl
        raise ConfigError(f"sweep.name is {len(name.encode('utf-8'))} bytes long ({name[:24]!r}...); expected at most "
                          f"{MAX_NAME_BYTES}: run ids and file names are built from it (traces/<sweep.name>-holdout-"
                          "<hash>-s<seed>-<task id>.json), and a file name holds at most 255 bytes")


def check_benchmark_tasks(bench: Any, near_duplicate: float) -> None:
    """ConfigError (one line) on a benchmark the loader refuses: a blank or too long id, a blank task, an unknown
    type or split, a duplicate id, a count below 1, an id that cannot name a file, a holdout task that is a train
    task again (the same or a near-duplicate text). The task supply runs it on a file before writing it."""
    ids = set()
    for i, t in enumerate(bench.tasks):
        _check_task_text(i, t)
        check_choice(f"benchmark.tasks[{i}].task_type", t.task_type, TASK_TYPES)
        check_choice(f"benchmark.tasks[{i}].split", t.split, SPLITS)
        if t.id in ids:
            raise ConfigError(f"benchmark.tasks[{i}].id={t.id!r} is a duplicate; expected unique task ids")
        ids.add(t.id)
        if t.expected_count is not None:
            check_range(f"benchmark.tasks[{i}].expected_count", t.expected_count, 1)
    # task ids that name files, and no holdout task that is a train task again (the same or a near-duplicate text)
    check_benchmark(bench.tasks, near_duplicate, name=bench.name)


def known_operators() -> list[str] | None:
    """Operator names from mutators/, or None when that package does not provide them yet."""
    try:
        from mutators import operator_names
    except ImportError:
        return None
    return list(operator_names())


def validate(exp: ExperimentConfig, *, warn: bool = True) -> ExperimentConfig:
    """Raise ConfigError (one line: key, value, allowed values) on the first invalid setting; then, when `warn`,
    log each judge warning once (harness.compose.warn_judge; a caller with checks of its own to run first passes
    warn=False and warns after them)."""
    check_harness(exp)
    if not re.match(r"^[A-Za-z0-9_.-]+$", exp.mlflow.prompt_prefix):
        raise ConfigError(f"mlflow.prompt_prefix={exp.mlflow.prompt_prefix!r} is not allowed; expected letters, "
                          "digits, '_', '-' or '.' (MLflow prompt names)")
    sw = exp.sweep
    check_choice("sweep.kind", sw.kind, SWEEP_KINDS)
    check_choice("sweep.pruner", sw.pruner, PRUNERS)
    check_choice("sweep.sampler", sw.sampler, SAMPLERS)
    check_choice("sweep.pruner_correction", sw.pruner_correction, PRUNER_CORRECTIONS)
    check_choice("sweep.parent_selection", sw.parent_selection, PARENT_SELECTIONS)
    check_choice("sweep.search", sw.search, SEARCHES)
    check_choice("sweep.reflect_feedback", sw.reflect_feedback, REFLECT_FEEDBACKS)
    check_choice("sweep.estimate", sw.estimate, ESTIMATES)
    check_range("sweep.rejected_z", sw.rejected_z, 0.0, 5.0)
    check_choice("sweep.operator_choice", sw.operator_choice, OPERATOR_CHOICES)
    check_range("sweep.gate_tasks", sw.gate_tasks, 0)
    check_range("sweep.gate_z", sw.gate_z, -3.0, 5.0)
    check_range("sweep.race_block", sw.race_block, 0)  # 0 = off (the gate)
    check_range("sweep.race_z", sw.race_z, 0.0)
    check_range("sweep.max_merges", sw.max_merges, 0)
    check_range("sweep.n_trials", sw.n_trials, 1)
    check_range("sweep.baseline_repeats", sw.baseline_repeats, 1)
    # alpha 0 (or a subnormal such as 1e-320) overflowed the power check; 1 makes every difference significant
    if not 1e-300 <= sw.alpha < 1.0:
        raise ConfigError(f"sweep.alpha={sw.alpha!r} is out of range; expected a value in [1e-300, 1)")
    if not 0.0 < sw.pruner_p < 1.0:
        raise ConfigError(f"sweep.pruner_p={sw.pruner_p!r} is out of range; expected a value in (0, 1)")
    check_range("sweep.max_chars", sw.max_chars, 40)  # mutators.base.MutationContext refuses less
    check_positive("sweep.heartbeat_s", sw.heartbeat_s)
    check_range("sweep.failure_rate_stop", sw.failure_rate_stop, 0.0, 1.0)
    check_range("sweep.holdout_top_k", sw.holdout_top_k, 0)
    check_range("sweep.race_top", sw.race_top, 0)
    check_choice("sweep.holdout_test", sw.holdout_test, HOLDOUT_TESTS)
    check_range("sweep.holdout_baseline_runs", sw.holdout_baseline_runs, 1)
    check_range("sweep.holdout_candidate_runs", sw.holdout_candidate_runs, 1)
    check_choice("sweep.train_filter", sw.train_filter, TRAIN_FILTERS)
    check_range("sweep.holdout_futility_block", sw.holdout_futility_block, 0)  # 0 = off
    check_choice("sweep.holdout_compare", sw.holdout_compare, COMPARES)  # ab.compare's choices
    if sw.holdout_compare == "pairwise" and sw.holdout_test != "tasks":
        raise ConfigError(f"sweep.holdout_compare=pairwise tests preferences over tasks: it needs "
                          f"sweep.holdout_test=tasks, got {sw.holdout_test!r}")
    check_choice("sweep.cost_metric", sw.cost_metric, COST_METRICS)
    mci = sw.max_cost_increase
    if mci is not None and (isinstance(mci, bool) or not isinstance(mci, (int, float)) or not math.isfinite(mci)
                            or mci < 0):
        raise ConfigError(f"sweep.max_cost_increase={mci!r} is out of range; expected a fraction >= 0 (0.1 = at most "
                          f"10% more per task) or null (off)")
    mtl = sw.max_task_loss
    if mtl is not None and (isinstance(mtl, bool) or not isinstance(mtl, (int, float)) or not math.isfinite(mtl)
                            or mtl < 0):
        raise ConfigError(f"sweep.max_task_loss={mtl!r} is out of range; expected composite points >= 0 (the most a "
                          f"promoted candidate may lose on any one holdout task) or null (off)")
    if sw.max_llm_calls is not None:
        check_range("sweep.max_llm_calls", sw.max_llm_calls, 1)
    if sw.timeout_s is not None:
        check_range("sweep.timeout_s", sw.timeout_s, 0.0)
    check_store_paths(exp)
    for tt in sw.mutate_task_types:
        check_choice("sweep.mutate_task_types item", tt, TASK_TYPES)
    if sw.kind == "synth_mutation":
        if not sw.operators:
            raise ConfigError("sweep.operators=[] is not allowed; expected at least one mutation operator")
        ops = known_operators()
        if ops is not None:
            for op in sw.operators:
                check_choice("sweep.operators item", op, ops)
    check_task_supply(exp)
    check_benchmark_tasks(exp.benchmark, exp.task_supply.near_duplicate)
    if sw.kind in ("synth_mutation", "ab") and not exp.tasks("train"):
        raise ConfigError(f"benchmark.tasks has no split='train' task; expected at least one for sweep.kind={sw.kind}")
    if sw.kind == "synth_mutation":
        check_sweep_design(exp)
    if sw.kind == "ab":
        ab = exp.ab
        if ab.a == ab.b:
            raise ConfigError("ab.a and ab.b are identical; expected two different override sets")
        from experiments.stats import DIRECTIONS, TESTS

        check_choice("ab.direction", ab.direction, DIRECTIONS)
        check_choice("ab.test", ab.test, TESTS)
        check_choice("ab.compare", ab.compare, COMPARES)
        if not 0.0 <= ab.min_preference < 1.0:
            raise ConfigError(f"ab.min_preference={ab.min_preference!r} is out of range; expected a value in [0, 1)")
        if ab.compare == "pairwise" and ab.sequential:
            raise ConfigError("ab.compare=pairwise with ab.sequential=true is not allowed: the pairwise sign-flip "
                              "test is fixed-sample; set ab.sequential=false")
        check_choice("ab.split", ab.split, ("all", *SPLITS))
        check_range("ab.replications", ab.replications, 1)
        check_range("ab.min_effect", ab.min_effect, 0.0)
        check_range("ab.looks", ab.looks, 2)
        if not 0.0 < ab.alpha < 1.0:
            raise ConfigError(f"ab.alpha={ab.alpha!r} is out of range; expected a value in (0, 1)")
        if not ab.hypothesis.strip():
            raise ConfigError("ab.hypothesis is empty; expected the hypothesis as a sentence, written before any data")
        if not ab.a_name or ab.a_name == ab.b_name or "/" in ab.a_name + ab.b_name:
            raise ConfigError(f"ab.a_name={ab.a_name!r}, ab.b_name={ab.b_name!r} are not allowed; expected two different non-empty names without '/'")
    check_range("calibrate.edits", exp.calibrate.edits, 0, MAX_CALIBRATION_EDITS)
    if sw.kind == "calibrate":
        check_calibrate_design(exp)
    if warn:
        warn_judge(exp.backend)
    return exp


def check_task_supply(exp: ExperimentConfig) -> None:
    """ConfigError (one line, the key as the user types it: tasks.<key>) on a task-supply setting out of range; the
    name, source and description the command needs, and the source file itself, are checked by experiments.tasks
    before anything is written."""
    ts = exp.task_supply
    if not 0.0 < ts.near_duplicate <= 1.0:
        raise ConfigError(f"tasks.near_duplicate={ts.near_duplicate!r} is out of range; expected a cosine similarity "
                          f"in (0, 1]")
    if exp.sweep.kind not in TASK_KINDS:
        return
    if not 0.0 < ts.holdout_share < 1.0:
        raise ConfigError(f"tasks.holdout_share={ts.holdout_share!r} is out of range; expected a value in (0, 1)")
    if exp.sweep.kind == "generate_tasks":
        count = ts.count
        if not (count == "auto" or (isinstance(count, int) and not isinstance(count, bool)
                                    and 2 <= count <= MAX_GENERATED)
                or (isinstance(count, str) and count.isdigit() and 2 <= int(count) <= MAX_GENERATED)):
            raise ConfigError(f"tasks.count={count!r} is not allowed; expected a number of tasks from 2 to "
                              f"{MAX_GENERATED}, or auto (the holdout and train sizes that confirm tasks.effect, from "
                              f"a stored calibration)")
        check_range("tasks.batch", ts.batch, 1, 50)
        check_range("tasks.max_failed_batches", ts.max_failed_batches, 1)
        check_range("tasks.sweep_trials", ts.sweep_trials, 0)  # 0: the shipped design's sweep.n_trials
        if not 0.0 < ts.effect:
            raise ConfigError(f"tasks.effect={ts.effect!r} is out of range; expected composite points > 0")
        if not 0.0 < ts.power < 1.0:
            raise ConfigError(f"tasks.power={ts.power!r} is out of range; expected a value in (0, 1)")
        for m in ts.generator_models:
            if not str(m).strip():
                raise ConfigError(f"tasks.generator_models={list(ts.generator_models)!r} holds an empty name; "
                                  "expected model names of the configured backend")
        if not 0.0 < ts.headroom_ceiling <= 10.0:
            raise ConfigError(f"tasks.headroom_ceiling={ts.headroom_ceiling!r} is out of range; expected a composite "
                              f"in (0, 10]")
    elif ts.headroom and not 0.0 < ts.headroom_ceiling <= 10.0:  # an import's headroom screen
        raise ConfigError(f"tasks.headroom_ceiling={ts.headroom_ceiling!r} is out of range; expected a composite "
                          f"in (0, 10]")
