"""Issue 41, items 4 and 11-15 and the over-long sweep.name: what a user types or leaves on disk, through the real
command (`python -m experiments.run`, `python -m harness`). A bad input is one line on stderr, exit 2 and nothing
written; a run redone on resume leaves its result in runs.jsonl; a second Ctrl-C does not undo the first's
bookkeeping. Each test failed on 3306971 (the assertion named in its comment)."""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import resume_harness as h

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["+sweep=synth_mutation", "backend=fake", "benchmark=smoke", "sweep.allow_underpowered=true",
         "sweep.n_trials=1"]


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", DDGS_DISABLED="1")
    env.pop("HARNESS_DEBUG", None)
    env.update(extra)
    return env


def run_cli(cwd: Path, *args: str, env: dict[str, str] | None = None, module: str = "experiments.run",
            timeout: float = 300) -> subprocess.CompletedProcess:
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", module, *args], env=env or cli_env(), cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def written(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def one_config_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout[-1500:], p.stderr[-1500:])
    assert p.stderr.splitlines() == [p.stderr.strip()] and p.stderr.startswith("config error: "), p.stderr[-2000:]
    return p.stderr.strip()


# -- item 4: a failed run redone on resume: its successful record is in runs.jsonl --------------------------------


def last_records(folder: Path) -> dict[str, dict]:
    """run id -> its last runs.jsonl record (a redone run's record follows its failed one)."""
    out: dict[str, dict] = {}
    for line in (folder / "results" / "runs.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["run_id"]] = rec
    return out


@pytest.mark.parametrize("kind, fail", [("ab", "^ab-(what-is-gil|logging-tips)-"), ("sweep", "-holdout-")])
def test_a_failed_run_redone_on_resume_is_in_runs_jsonl(tmp_path, kind, fail):
    folder = tmp_path / kind
    first = h.run_cli(folder, kind, fail_after=fail)  # these runs fail (the server answers 500 to them)
    failed = {k for k, r in last_records(folder).items() if r["status"] == "failed"}
    assert failed, first.output[-3000:]
    second = h.run_cli(folder, kind)  # the server answers again: the same command redoes them
    assert second.rc == 0, second.output[-3000:]
    last = last_records(folder)
    # before (3306971): the redone runs' records were dropped (same run id): {'failed'} for each of them
    assert {last[k]["status"] for k in failed} == {"ok"}
    assert collections.Counter(r["status"] for r in last.values()) == {"ok": len(last)}


def test_append_jsonl_lets_a_success_supersede_a_failure_only(tmp_path):
    from harness.stores import append_jsonl, read_jsonl

    path = tmp_path / "runs.jsonl"
    assert append_jsonl(path, {"run_id": "a", "status": "failed", "n": 1}, unique="run_id")
    assert not append_jsonl(path, {"run_id": "a", "status": "failed", "n": 2}, unique="run_id")  # failed again
    assert append_jsonl(path, {"run_id": "a", "status": "ok", "n": 3}, unique="run_id")  # redone: supersedes
    assert not append_jsonl(path, {"run_id": "a", "status": "ok", "n": 4}, unique="run_id")  # done: one success
    assert not append_jsonl(path, {"run_id": "a", "status": "failed", "n": 5}, unique="run_id")
    assert append_jsonl(path, {"run_id": "b", "status": "ok", "n": 6}, unique="run_id")
    assert not append_jsonl(path, {"run_id": "b", "status": "ok", "n": 7}, unique="run_id")  # a resumed step
    assert [r["n"] for r in read_jsonl(path)] == [1, 3, 6]


# -- item 11: NaN and infinity refused up front ------------------------------------------------------------------


@pytest.mark.parametrize("override, fragment", [
    ("evaluator.rubric_weight=nan", "evaluator.rubric_weight=nan is out of range; expected a finite value in [0.0, 1.0]"),
    ("sweep.gate_z=nan", "sweep.gate_z=nan is out of range"),
    ("sweep.gate_z=inf", "sweep.gate_z=inf is out of range"),
    ("evaluator.dimensions.depth=nan", "evaluator.dimensions.depth=nan is out of range; expected a finite number"),
    ("wiggum.threshold=nan", "wiggum.threshold=nan is out of range"),
    ("backend.timeout_s=inf", "backend.timeout_s=inf is out of range; expected a finite value > 0"),
    ("sweep.timeout_s=inf", "sweep.timeout_s=inf is out of range"),
])
def test_nan_and_infinity_are_refused_up_front(tmp_path, override, fragment):
    results = tmp_path / "results"
    p = run_cli(tmp_path / "cwd", *SWEEP, override, env=cli_env(HARNESS_RESULTS_DIR=str(results)))
    # before: exit 0 after a sweep whose every run failed ('ValueError ... got nan'), or nan/inf accepted silently
    assert fragment in one_config_error(p)
    assert written(tmp_path) == []


def test_nan_is_refused_by_python_m_harness_too(tmp_path):
    p = run_cli(tmp_path / "cwd", "List 3 modules", "backend=fake", "evaluator.rubric_weight=nan", module="harness",
                env=cli_env(HARNESS_RESULTS_DIR=str(tmp_path / "results")))
    assert "evaluator.rubric_weight=nan is out of range" in one_config_error(p)
    assert written(tmp_path) == []


# -- item 12: a benchmark YAML that is not UTF-8 ----------------------------------------------------------------

LATIN1 = (b'name: latin\ndescription: "' + b"x" * 700 + b'"\ntasks:\n  - id: a\n    task: "List 3 modules for caf\xe9 '
          b'data"\n    split: train\n')


@pytest.mark.parametrize("where", ["conf", "searchpath"])
def test_a_latin1_benchmark_is_one_line_naming_the_file_and_offset(tmp_path, where):
    if where == "conf":  # conf/benchmark/latin.yaml, in a copy of conf/ found first on the path
        shutil.copytree(ROOT / "conf", tmp_path / "pkg" / "conf")
        path = tmp_path / "pkg" / "conf" / "benchmark" / "latin.yaml"
        env = cli_env(PYTHONPATH=f"{tmp_path / 'pkg'}{os.pathsep}{ROOT}")
        extra = []
    else:  # a folder of the user's on Hydra's search path
        path = tmp_path / "extra" / "benchmark" / "latin.yaml"
        env, extra = cli_env(), [f"hydra.searchpath=[file://{tmp_path / 'extra'}]"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(LATIN1)
    env["HARNESS_RESULTS_DIR"] = str(tmp_path / "res")
    offset = LATIN1.index(b"\xe9")
    for module, args in (("experiments.run", ["+sweep=single", "backend=fake"]),
                         ("harness", ["List 3 modules", "backend=fake"])):
        p = run_cli(tmp_path / "cwd", *args, *extra, "benchmark=latin", env=env, module=module)
        # before: a 65-line UnicodeDecodeError traceback naming no file, exit 1
        assert one_config_error(p) == (f"config error: {path} is not UTF-8: byte 0xe9 at offset {offset} (line 5); "
                                       "expected UTF-8 text: save the file as UTF-8")
    assert not (tmp_path / "res").exists() and written(tmp_path / "cwd") == []


# -- items 14 and 15: where a run writes: `~` expanded in every path, Hydra's folder inside results_dir -----------

DRIVER_ARGS = ["+sweep=single", "backend=fake", "benchmark=smoke", "evaluator=deterministic_only",
               "planner=single_pass", "wiggum.max_rounds=1", "research.max_rounds=1", "research.compress=false",
               "research.enrich_urls=0", "search.provider=local"]


def run_driver(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """The real experiments.run on the scripted fake backend (tests/resume_driver.py): every run succeeds."""
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, str(ROOT / "tests" / "resume_driver.py"), *DRIVER_ARGS, *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_a_literal_tilde_in_results_dir_is_expanded_for_every_store(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    env = cli_env(HOME=str(home), HARNESS_RESULTS_DIR="~/x", MLFLOW_TRACKING_URI="")
    p = run_driver(cwd, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    x = home / "x"
    # before: runs.jsonl, traces, mlflow.db, optuna.db and Hydra's folder in ./~/x, the outputs in $HOME/x/outputs
    assert written(cwd) == []
    assert (x / "runs.jsonl").is_file() and (x / "mlflow.db").is_file() and any((x / "outputs").iterdir())
    assert any((x / "hydra").rglob("*")) and any((x / "traces").iterdir())
    # python -m harness: the same rule (the command line wins over the variable, and is expanded too)
    p = run_cli(cwd, "List 3 modules", "backend=fake", "results_dir='~/y'", module="harness", env=env)
    assert (home / "y" / "runs.jsonl").is_file() and written(cwd) == [], p.stderr[-2000:]


def test_hydra_writes_inside_results_dir_not_in_the_current_folder(tmp_path):
    cwd, res = tmp_path / "cwd", tmp_path / "res"
    cwd.mkdir()
    cwd.chmod(0o555)  # a read-only working directory (root writes there anyway: the check is that nothing is)
    env = cli_env(MLFLOW_TRACKING_URI="")
    env.pop("HARNESS_RESULTS_DIR", None)
    try:
        p = run_driver(cwd, f"results_dir={res}", env=env)
    finally:
        cwd.chmod(0o755)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    # before: Hydra's job folder in ./results/hydra (a PermissionError traceback where the folder is read-only)
    assert written(cwd) == []
    assert any(f.name.endswith(".log") for f in (res / "hydra").rglob("*"))


@pytest.mark.parametrize("where", ["afile", "afile/sub"])
def test_a_file_as_results_dir_is_one_line(tmp_path, where):
    (tmp_path / "afile").write_text("not a folder\n")
    p = run_cli(tmp_path / "cwd", "+sweep=single", "backend=fake",
                env=cli_env(HARNESS_RESULTS_DIR=str(tmp_path / where), MLFLOW_TRACKING_URI=""))
    # before: a Hydra traceback (FileExistsError / NotADirectoryError making its job folder)
    assert f"{str(tmp_path / 'afile')!r} is a file, not a folder" in one_config_error(p)
    assert written(tmp_path / "cwd") == []


# -- the over-long sweep.name (issue 41 item 1's row) and task id ----------------------------------------------


@pytest.mark.parametrize("override, fragment", [
    ("sweep.name=" + "n" * 230, "sweep.name is 230 bytes long ('nnnnnnnnnnnnnnnnnnnnnnnn'...); expected at most 100"),
    ("sweep.name='" + "é" * 60 + "'", "sweep.name is 120 bytes long"),
    ("benchmark.tasks=[{id: " + "t" * 81 + ", task: 'List 3 modules', split: train}]",
     "benchmark.tasks[0].id is 81 bytes long"),
])
def test_a_name_too_long_for_a_file_name_is_refused_up_front(tmp_path, override, fragment):
    results = tmp_path / "res"
    p = run_cli(tmp_path / "cwd", *SWEEP, override, env=cli_env(HARNESS_RESULTS_DIR=str(results)))
    # before: 'File name too long' in every run, no runs.jsonl, exit 0
    assert fragment in one_config_error(p)
    assert not results.exists() and written(tmp_path / "cwd") == []


def test_a_name_at_the_limit_runs(tmp_path):
    name = "n" * 100
    p = run_driver(tmp_path / "cwd", f"sweep.name={name}", env=cli_env(HARNESS_RESULTS_DIR=str(tmp_path / "res")))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    records = [json.loads(ln) for ln in (tmp_path / "res" / "runs.jsonl").read_text().splitlines()]
    assert {r["status"] for r in records} == {"ok"} and any(r["run_id"].startswith(name) for r in records)


# -- item 13: a second signal while the first one's stop is under way changes nothing ----------------------------


@pytest.fixture(scope="module")
def sweep_reference(tmp_path_factory):
    """An uninterrupted run of the resume harness's sweep: what an interrupted and resumed one must equal."""
    base = tmp_path_factory.mktemp("reference41")
    run = h.run_cli(base / "sweep", "sweep")
    assert run.rc == 0, run.output[-3000:]
    return base, h.outcome(base / "sweep")


def mlflow_status(folder: Path) -> dict[str, str]:
    import sqlite3

    with sqlite3.connect(folder / "mlflow.db") as conn:
        return dict(conn.execute("SELECT name, status FROM runs WHERE lifecycle_stage = 'active'").fetchall())


@pytest.mark.parametrize("first, second, gap", [("SIGINT", "SIGINT", 0.01), ("SIGINT", "SIGINT", 0.05),
                                                ("SIGTERM", "SIGINT", 0.01)])
def test_a_second_signal_during_the_stop_does_not_undo_it(sweep_reference, first, second, gap):
    import signal
    import time

    base, ref = sweep_reference
    folder = base / f"twice-{first}-{second}-{gap}"
    folder.mkdir()
    p, lines, reader = h.start_mid_trial(folder, base, poll_s=0.02)  # as a terminal's Ctrl-C finds it
    p.send_signal(getattr(signal, first))
    time.sleep(gap)
    p.send_signal(getattr(signal, second))
    rc = p.wait(120)
    reader.join(10)
    out = "\n".join(lines)
    assert rc == (143 if first == "SIGTERM" else 130), out[-3000:]
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trials = optuna.load_study(study_name=h.SWEEP, storage=f"sqlite:///{folder / 'results' / 'optuna.db'}").get_trials()
    states = {t.number: t.state.name for t in trials}
    # before (3306971): trial #1 RUNNING or FAIL 'queued again for the next start' with no copy queued
    assert states[1] == "FAIL" and states.get(2) == "WAITING", (states, out[-2000:])
    assert trials[2].system_attrs["failed_trial"] == 1
    status = mlflow_status(folder)
    assert "RUNNING" not in status.values() and status["synth_mutation"] == "KILLED", status
    resumed = h.run_cli(folder, "sweep")
    assert resumed.rc == 0, resumed.output[-3000:]
    got = h.outcome(folder)
    # before: the resume counted the interrupted trial toward n_trials (2 complete trials, not the reference's)
    assert got.values == ref.values and got.promoted == ref.promoted and got.mlflow_running == 0
