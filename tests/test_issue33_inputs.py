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
    from experiments.config import task_from_spec

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


# -- items 7 and 8: names and paths ---------------------------------------------------------------------------------


def run_cli_env(tmp_path: Path, results_dir: str | None, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    env.pop("HARNESS_DEBUG", None)
    env.pop("HARNESS_RESULTS_DIR", None)  # the environment would win over results_dir=
    env["MLFLOW_TRACKING_URI"] = ""  # the default: sqlite:///<results_dir>/mlflow.db
    extra = [] if results_dir is None else [f"results_dir={results_dir}"]
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "experiments.run", *args, *extra], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize(
    "folder, args, fragment",
    [
        # item 7: before, the sqlite:/// URLs were cut at '?' / '#': mlflow.db and optuna.db landed outside the folder
        ("r#1", [], "holds '#', which sqlite:/// store URLs cannot carry; expected a folder without '#', '?' or '%'"),
        ("r?x=1", [], "holds '?'"),
        ("r%41", [], "holds '%'"),
        # item 8: before, the ledger, contexts, plots, summary and promoted_synth.yaml went to results_dir's parent
        ("res", ["sweep.name=.."], "sweep.name='..' is not allowed; expected a folder name inside results_dir"),
        ("res", ["sweep.name=."], "sweep.name='.' is not allowed"),
        # item 8: before, every store landed in the current folder
        ("", [], "results_dir='' is empty; expected a folder"),
    ],
)
def test_results_dir_and_sweep_name_are_checked_like_output_paths(tmp_path, folder, args, fragment):
    results = f"'{tmp_path / folder}'" if folder else "''"  # quoted: Hydra's grammar refuses a bare '#' or '?'
    p = run_cli_env(tmp_path, results, *SWEEP, "sweep.allow_underpowered=true", *args)
    assert p.returncode == 2, p.stderr[-2000:]
    assert p.stderr.splitlines() == [p.stderr.strip()] and p.stderr.startswith("config error: "), p.stderr[-2000:]
    assert fragment in p.stderr, p.stderr
    assert written(tmp_path) == []  # nothing anywhere: not in the folder, its parent or the current folder


def test_the_search_index_opens_in_a_folder_with_uri_characters(tmp_path):
    """Item 7, harness/search/: the read-only index was opened as file:{path}?mode=ro unquoted, so in a folder
    named with '#', '?' or '%' SQLite opened another file and every local search found nothing."""
    from harness.research.search import LocalCorpusProvider

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "formats.md").write_text("# Data formats\nThe json module parses JSON; csv reads rows.\n")
    index_dir = tmp_path / "idx #1 ?a=b %41"
    results = LocalCorpusProvider([corpus], index_dir=index_dir).search("json module", max_results=3)
    assert results and "json" in results[0].snippet.lower()
    # nothing at the path's prefix ("idx "): only the corpus, the index folder and the fixture's results folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", index_dir.name, "results"]


def test_one_of_several_racing_writers_claims_a_name(tmp_path):
    """harness.stores.claim_output: of runs racing for one output name exactly one gets it, the others a name of their
    own (O_EXCL, not check-then-write)."""
    import threading

    from harness.stores import claim_output

    got: list[Path] = []
    barrier = threading.Barrier(8)

    def claim(i: int) -> None:
        barrier.wait()
        got.append(claim_output(tmp_path / "out" / "output.md", f"run-{i}"))

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 8 and sum(p.name == "output.md" for p in got) == 1
    assert claim_output(tmp_path / "out" / "x.md", "a/../b") == tmp_path / "out" / "x.md"
    assert claim_output(tmp_path / "out" / "x.md", "a/../b").name == "x-a_.._b.md"  # one name, no '/' in it
