"""The headroom screen of generated tasks (`+sweep=generate_tasks ... tasks.headroom=true`) through the command line
on backend=fake: a task whose baseline run fails and one that scores at the ceiling are dropped and never reach the
YAML, the others are kept; a failed model call mid-screen stops with exit 3 and nothing written, and the rerun
resumes from the journal without running a screened task again.

The generator answers from the scripted replies of tests/test_tasks_supply.py's driver; the screen's runner is
injected through experiments.tasks._headroom.screen_runner, scoring each baseline run from the list in
$HEADROOM_TEST_SCORES (a number: the composite; "fail": a run without a judged score; "down": a failed model call;
the last entry repeats) and logging each task it runs to $HEADROOM_TEST_LOG."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.test_tasks_supply import DRIVER, env, one_error

SCREEN = r'''
from experiments.runs import TaskOutcome
from experiments.tasks import _headroom

plan = json.loads(os.environ.get("HEADROOM_TEST_SCORES", '["5.0"]'))
screened = [0]

class Screener:
    smoke = False

    def identity(self):
        return {}

    def llm_calls(self):
        return screened[0]

    def prepare(self, task):
        return task

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
        screened[0] += 1
        with open(os.environ["HEADROOM_TEST_LOG"], "a", encoding="utf-8") as f:
            f.write(prepared + "\n")
        r = plan[min(screened[0] - 1, len(plan) - 1)]
        if r == "fail":
            return TaskOutcome.failed("the judged score is missing: an unreadable judge reply")
        if r == "down":
            return TaskOutcome.failed("BackendUnavailable: the server stopped answering")
        return TaskOutcome(status="ok", score=float(r))

_headroom.screen_runner = lambda exp: Screener()
'''

GEN = ["+sweep=generate_tasks", "tasks.name=gen", "tasks.description=Python standard library modules",
       "tasks.count=6", "tasks.headroom=true"]


def driver(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.replace("from experiments import run\n", SCREEN + "from experiments import run\n"),
                      encoding="utf-8")
    extra.setdefault("HEADROOM_TEST_LOG", str(tmp_path / "screened.log"))
    return subprocess.run([sys.executable, str(script), f"results_dir={tmp_path / 'res'}", "backend=fake", *args],
                          env=env(**extra), cwd=tmp_path, capture_output=True, text=True, timeout=300)


def journal(tmp_path: Path) -> list[dict]:
    path = tmp_path / "res" / "tasks" / "gen.headroom.jsonl"
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def test_failed_and_ceiling_tasks_are_dropped_and_the_rest_kept(tmp_path):
    out = tmp_path / "gen.yaml"
    scores = json.dumps(["5.0", "fail", "9.8", "6.5", "9.5", "4.0"])
    p = driver(tmp_path, *GEN, f"tasks.out={out}", HEADROOM_TEST_SCORES=scores)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = journal(tmp_path)
    assert [r["status"] for r in recs] == ["ok", "failed", "ok", "ok", "ok", "ok"]
    dropped = {recs[1]["id"], recs[2]["id"], recs[4]["id"]}  # failed, 9.8 and 9.5 (>= the 9.5 ceiling)
    tasks = yaml.safe_load(out.read_text(encoding="utf-8"))["tasks"]
    ids = {t["id"] for t in tasks}
    assert ids == {r["id"] for r in recs} - dropped and len(ids) == 3
    assert {t["split"] for t in tasks} == {"train", "holdout"}
    assert ("headroom screen: 6 screened (0 from the journal, 6 run in" in p.stdout
            and "dropped for failing: 1; dropped at the ceiling (composite >= 9.5): 2; kept: 3, baseline composite "
                "4.00-6.50" in p.stdout), p.stdout[-3000:]
    assert "headroom screen: 3 of the 6 tasks asked remain" in p.stdout
    assert "kept: 3 (" in p.stdout


def test_a_failed_model_call_stops_with_exit_3_and_the_rerun_resumes_from_the_journal(tmp_path):
    out = tmp_path / "gen.yaml"
    p = driver(tmp_path, *GEN, f"tasks.out={out}", HEADROOM_TEST_SCORES=json.dumps(["5.0", "6.0", "down"]))
    err = one_error(p, 3)
    assert "BackendUnavailable" in err and "run the same command again to resume" in err, err
    assert not out.exists()
    first = journal(tmp_path)
    assert [r["status"] for r in first] == ["ok", "ok"]  # the run that met the failed call is not journalled
    log = tmp_path / "screened.log"
    assert len(log.read_text().splitlines()) == 3
    log.unlink()
    p = driver(tmp_path, *GEN, f"tasks.out={out}", HEADROOM_TEST_SCORES=json.dumps(["7.0"]))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "resuming from" in p.stdout and "2 result(s) journalled" in p.stdout
    again = log.read_text().splitlines()
    assert len(again) == 4 and not {r["task"] for r in first} & set(again)  # the done tasks are not run again
    assert "6 screened (2 from the journal, 4 run in" in p.stdout and "baseline composite 5.00-7.00" in p.stdout
    assert len(yaml.safe_load(out.read_text(encoding="utf-8"))["tasks"]) == 6
    assert "tasks asked remain" not in p.stdout


def test_the_screen_is_off_by_default_and_its_ceiling_is_checked(tmp_path):
    out = tmp_path / "gen.yaml"
    p = driver(tmp_path, *GEN[:-1], f"tasks.out={out}")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "headroom" not in p.stdout and not (tmp_path / "screened.log").exists()
    err = one_error(driver(tmp_path, *GEN, "tasks.headroom_ceiling=12"))
    assert "tasks.headroom_ceiling=12" in err and "(0, 10]" in err, err


REAL = r'''
sys.path.insert(0, os.path.join(os.environ["TASKS_TEST_ROOT"], "tests"))
from pipeline_fake import Router, pipeline_llm
from experiments.config import to_harness_config
from experiments.runs import HarnessRunner
from experiments.tasks import _headroom
from harness.inference._roles import fake_roles

# the real harness run (planning, research, synthesis, the judge) on a model scripted per stage
_headroom.screen_runner = lambda exp: HarnessRunner(to_harness_config(exp), roles=fake_roles(pipeline_llm(Router())))
'''


def test_the_screen_runs_the_real_harness_with_the_baseline_instructions(tmp_path):
    out = tmp_path / "gen.yaml"
    script = tmp_path / "real.py"
    script.write_text(DRIVER.replace("from experiments import run\n", REAL + "from experiments import run\n"),
                      encoding="utf-8")
    p = subprocess.run([sys.executable, str(script), f"results_dir={tmp_path / 'res'}", "backend=fake",
                        "search.provider=local", *GEN, f"tasks.out={out}"],
                       env=env(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    recs = journal(tmp_path)
    assert len(recs) == 6 and all(r["status"] == "ok" and 0 < r["score"] < 9.5 for r in recs), recs
    assert len(yaml.safe_load(out.read_text(encoding="utf-8"))["tasks"]) == 6
    assert "6 screened (0 from the journal, 6 run in" in p.stdout
