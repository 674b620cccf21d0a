"""Issue 33 items 1-4: nothing lost, nothing run twice, every failure said, through the real CLI.

Each CLI test runs `tests/resume_driver.py` (experiments.run on the fake backend with scripted replies) in a folder of
its own and compares with one uninterrupted run of the same command (tests/resume_harness.py).
bench/faults/resume_after_kill.py prints the same comparison for every moment (docs/RELIABILITY.md).
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import pytest
import resume_harness as h


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted runs (sweep, A/B) every kill is compared with, made once per module."""
    base = tmp_path_factory.mktemp("reference")
    out = {}
    for kind in ("sweep", "ab"):
        run = h.run_cli(base / kind, kind)
        assert run.rc == 0, run.output[-3000:]
        out[kind] = h.outcome(base / kind, kind)
    return base, out


def _folder(reference, name: str) -> Path:
    return reference[0] / name  # beside the reference: the same corpus path, so the same prompts


# -- item 1: a trial killed by the process dying is queued again with its slot and does not count -------------------


def test_kill9_mid_search_trial_resumes_as_if_uninterrupted(reference):
    ref = reference[1]["sweep"]
    folder = _folder(reference, "kill-trial")
    first, second = h.kill_and_resume(folder, "search trial")
    assert first.rc == -signal.SIGKILL and second.rc == 0, second.output[-3000:]
    got = h.outcome(folder)
    # before (6cbf984): the killed trial counted as FAIL, its copy ran under another number's seeds: values differ
    assert got.values == ref.values
    assert got.promoted == ref.promoted
    assert got.trials_total == len(ref.values) + 1  # the killed trial, kept as FAIL, and the copy that replaced it
    assert h.duplicates(got.run_ids) == [] and h.duplicates(got.mlflow_runs) == [] and got.mlflow_running == 0
    assert "marked 1 trial(s) left RUNNING by a dead process as failed: [2]" in second.output


# -- item 2: a step killed half done, then resumed: each run once in runs.jsonl, each MLflow run once ------------


@pytest.mark.parametrize("moment", ["holdout run", "holdout run, MLflow run logged"])
def test_kill9_in_a_holdout_run_records_each_run_once(reference, moment):
    ref = reference[1]["sweep"]
    folder = _folder(reference, moment.replace(" ", "_").replace(",", ""))
    first, second = h.kill_and_resume(folder, moment)
    assert first.rc == -signal.SIGKILL and second.rc == 0, second.output[-3000:]
    got = h.outcome(folder)
    # before: the holdout's finished tasks twice in runs.jsonl (same run id); a second MLflow holdout run
    assert h.duplicates(got.run_ids) == []
    assert h.duplicates(got.mlflow_runs) == []
    assert got.mlflow_running == 0
    assert got.values == ref.values and got.promoted == ref.promoted
    assert set(got.run_ids) == set(ref.run_ids)


def test_kill9_mid_ab_cell_records_each_cell_run_once(reference):
    ref = reference[1]["ab"]
    folder = _folder(reference, "kill-ab")
    first, second = h.kill_and_resume(folder, "A/B cell")
    assert first.rc == -signal.SIGKILL and second.rc == 0, second.output[-3000:]
    got = h.outcome(folder, "ab")
    assert h.duplicates(got.run_ids) == []  # before: the killed cell's run id twice in runs.jsonl
    assert set(got.run_ids) == set(ref.run_ids)
    assert got.ab_cells == ref.ab_cells and h.duplicates(got.mlflow_runs) == [] and got.mlflow_running == 0


# -- item 3: a server that fails after the trials: exit 3 and one line saying how to resume -----------------------


@pytest.mark.parametrize("step", ["-holdout-", "-race-"])
def test_backend_failing_after_the_trials_exits_3_and_resumes(reference, step):
    ref = reference[1]["sweep"]
    folder = _folder(reference, f"fail{step}")
    failed = h.run_cli(folder, "sweep", fail_after=step)
    errors = [ln for ln in failed.output.splitlines() if ln.startswith("error:")]
    # before: exit 0, the failed holdout only in the summary
    assert failed.rc == 3, failed.output[-3000:]
    assert len(errors) == 1 and "sweep did not conclude" in errors[0] and "run the same command again" in errors[0]
    assert ("holdout run of the baseline failed" if step == "-holdout-" else "final race run of") in errors[0]
    resumed = h.run_cli(folder, "sweep")
    assert resumed.rc == 0, resumed.output[-3000:]
    got = h.outcome(folder)
    assert got.values == ref.values and got.promoted == ref.promoted
    parents = _statuses(folder, "sweep_parent")
    assert parents == ["FINISHED"]


def _statuses(folder: Path, tag: str, value: str = "true") -> list[str]:
    with sqlite3.connect(folder / "mlflow.db") as conn:
        return [s for (s,) in conn.execute(
            "SELECT r.status FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid WHERE t.key = ? AND t.value = ? "
            "AND r.lifecycle_stage = 'active'", (tag, value))]


# -- item 4: SIGTERM and SIGINT stop like Ctrl-C and close what they opened -----------------------------------------


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_close_the_runs_and_resume(reference, sig, code):
    ref = reference[1]["sweep"]
    folder = _folder(reference, f"signal-{sig.name}")
    folder.mkdir()
    # SIGINT as a terminal's Ctrl-C finds it (resume_harness.start_mid_trial)
    p, lines, reader = h.start_mid_trial(folder, folder.parent)
    p.send_signal(sig)
    rc = p.wait(120)
    reader.join(10)
    out = "\n".join(lines)
    assert rc == code, out[-3000:]
    assert out.strip().splitlines()[-1] == ("terminated (SIGTERM)" if sig == signal.SIGTERM else "interrupted") + \
        ": run the same command again to resume"
    # before: SIGTERM killed the process where it stood (rc -15), SIGINT left the parent run RUNNING
    assert _statuses(folder, "sweep_parent") == ["KILLED"]
    assert _statuses(folder, "kind", "trial").count("RUNNING") == 0
    import optuna

    trials = optuna.load_study(study_name=h.SWEEP, storage=f"sqlite:///{folder / 'results' / 'optuna.db'}").get_trials()
    states = {t.number: t.state.name for t in trials}
    assert "RUNNING" not in states.values() and states[1] == "FAIL" and states[2] == "WAITING"
    assert trials[2].system_attrs["failed_trial"] == 1 and trials[2].user_attrs["slot"] == 1
    resumed = h.run_cli(folder, "sweep")
    assert resumed.rc == 0, resumed.output[-3000:]
    got = h.outcome(folder)
    assert got.values == ref.values and got.promoted == ref.promoted and h.duplicates(got.mlflow_runs) == []
    assert _statuses(folder, "sweep_parent") == ["FINISHED"] and got.mlflow_running == 0


# -- the seams, without a process ---------------------------------------------------------------------------------


def test_append_jsonl_with_a_unique_key_appends_a_run_id_once(tmp_path):
    from harness.stores import append_jsonl, read_jsonl

    path = tmp_path / "runs.jsonl"
    assert append_jsonl(path, {"run_id": "a", "n": 1}, unique="run_id") is True
    assert append_jsonl(path, {"run_id": "b", "n": 2}, unique="run_id") is True
    with path.open("a") as fh:  # another process appends, then is killed mid-line
        fh.write(json.dumps({"run_id": "c", "n": 3}) + "\n" + '{"run_id": "d", ')
    assert append_jsonl(path, {"run_id": "a", "n": 9}, unique="run_id") is False
    assert append_jsonl(path, {"run_id": "c", "n": 9}, unique="run_id") is False  # written by the other process
    assert append_jsonl(path, {"run_id": "d", "n": 4}, unique="run_id") is True  # the torn line is no record
    assert append_jsonl(path, {"run_id": "a", "n": 5}) is True  # no key: appended as before
    assert [r["n"] for r in read_jsonl(path)] == [1, 2, 3, 4, 5]


def test_an_evaluation_run_is_logged_once_and_a_half_logged_one_is_replaced(make_exp):
    from experiments.runs import CandidateEval, TaskScore
    from experiments.tracking import log_evaluation_run
    from experiments.tracking._mlflow import MLflowTracker

    exp = make_exp(mlflow=True)
    tracker = MLflowTracker(exp)
    tracker.start(exp)
    ev = CandidateEval(scores=(TaskScore(task_id="t0", task_type="research", score=6.0),))
    tags = {"kind": "holdout", "instruction_hash": "abc"}
    tracker.log_child("holdout-abc", tags, {"composite": 1.0}, status=None)  # a kill mid-logging left it RUNNING
    log_evaluation_run(tracker, "holdout-abc", tags, ev)  # the resume
    log_evaluation_run(tracker, "holdout-abc", tags, ev)  # killed after logging, before the study stored it
    log_evaluation_run(tracker, "holdout-abc-seed1", {**tags, "seed": "1"}, ev)  # another run of the same text
    runs = tracker.child_runs("holdout")
    assert sorted((r.data.tags["mlflow.runName"], r.info.status) for r in runs) == [
        ("holdout-abc", "FINISHED"), ("holdout-abc-seed1", "FINISHED")]
    assert [r.data.metrics["composite"] for r in runs if r.data.tags["mlflow.runName"] == "holdout-abc"] == [6.0]
