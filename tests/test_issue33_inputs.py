"""Issue 33, items 10-13: bad config values and bad benchmark tasks are refused up front by the real command
(`python -m experiments.run`), with one line on stderr, exit status 2 and nothing written: no study, no MLflow
store, no Hydra job folder. Before the fix each of these was accepted (and failed later, after writing) or ended in
a multi-line traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["+sweep=synth_mutation", "backend=fake"]


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    env.pop("HARNESS_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "experiments.run", *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)


def written(tmp_path: Path) -> list[str]:
    """Every file under tmp_path (the results folder, the MLflow store beside it, Hydra's folder)."""
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    "override, fragment",
    [
        # item 10: an OverflowError traceback of 26 lines before
        ("sweep.alpha=0", "sweep.alpha=0.0 is out of range; expected a value in [1e-300, 1)"),
        ("sweep.alpha=1e-320", "sweep.alpha=1e-320 is out of range"),
        # item 13: accepted before, each failing later (after mlflow.db was written) or misreporting
        ("sweep.max_chars=0", "sweep.max_chars=0 is out of range; expected a value in [40, inf]"),
        ("sweep.pruner_p=0", "sweep.pruner_p=0.0 is out of range; expected a value in (0, 1)"),
        ("backend.timeout_s=0", "backend.timeout_s=0.0 is out of range; expected a value > 0"),
        ("backend.retries=-1", "backend.retries=-1 is out of range"),
        ("evaluator.temperature=-0.5", "evaluator.temperature=-0.5 is out of range"),
        ("sweep.heartbeat_s=0", "sweep.heartbeat_s=0 is out of range; expected a value > 0"),
        # item 11: a 63-line omegaconf traceback before
        ("benchmark.tasks=[{id: a, split: train}]",
         "benchmark.tasks[0].task is missing; expected a value (a benchmark task needs both `id` and `task`)"),
        ("benchmark.tasks=[{task: 'List 3 modules', split: train}]", "benchmark.tasks[0].id is missing"),
        # item 12: the study and the MLflow store were created before "task is empty", the parent run left RUNNING
        ("benchmark.tasks=[{id: a, task: '   ', split: train}]",
         "benchmark.tasks[0].task='   ' (id 'a') is empty; expected the task as a sentence"),
        ("benchmark.tasks=[{id: a, task: '/panel', split: train}]", "has only skill tokens"),
    ],
)
def test_bad_values_are_one_line_exit_2_and_nothing_written(tmp_path, override, fragment):
    p = run_cli(tmp_path, *SWEEP, "sweep.allow_underpowered=true", override)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.splitlines() == [p.stderr.strip()], p.stderr[-2000:]
    assert p.stderr.startswith("config error: ") and fragment in p.stderr, p.stderr
    assert written(tmp_path) == []


def test_task_from_spec_refuses_a_missing_or_blank_id_or_task():
    from experiments.benchmark import task_from_spec

    for spec, key in (({"task": "x"}, "id"), ({"id": "a"}, "task"), ({"id": "a", "task": "  "}, "task")):
        with pytest.raises(ValueError, match=f"{key}=.* is missing or empty") as info:
            task_from_spec(spec)
        assert "\n" not in str(info.value)
    assert task_from_spec({"id": "a", "task": "List 3 modules"}).task == "List 3 modules"


@pytest.mark.parametrize("override", ["sweep.alpha=0.05", "sweep.alpha=1e-300", "sweep.max_chars=40",
                                      "backend.retries=0", "evaluator.temperature=0", "sweep.pruner_p=0.5"])
def test_edge_values_that_work_are_still_accepted(override):
    from experiments.config import compose_config, to_experiment, validate

    exp = validate(to_experiment(compose_config([*SWEEP, "sweep.allow_underpowered=true", override])))
    assert exp.sweep.kind == "synth_mutation"
