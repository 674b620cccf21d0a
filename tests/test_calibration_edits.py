"""Issue 59 item 4: the calibration's edits arm (calibrate.edits) measures the spread across tasks of edits the
mutators propose, and tasks.count=auto sizes by it when it is the largest spread measured.

The world: tests/scripted_harness.ScriptedRunner (score = 5 + task difficulty + seeded run noise, sd 0.3; the
harmful instruction and the A/A' rewrite change nothing on the plain baseline), where an instruction that carries a
proposed edit ("Focus on ...") moves each task by its own amount (sd EDIT_SD per edit and task): an edit that helps
some tasks far more than others, which neither the positive control nor the A/A' arm shows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from pathlib import Path

import pytest
from scripted_harness import ScriptedRunner
from test_calibrate import cal_exp

from experiments.calibration import run_calibration
from experiments.calibration._calibrate import CalibrationFailed
from experiments.calibration._summary import format_calibration
from experiments.config import ConfigError, load_tasks
from experiments.storage import Calibration
from experiments.storage._calibration_store import load_calibration
from experiments.tasks._sizing import spread
from mutators import MutationFailed
from mutators.base import Candidate

EDIT_SD = 2.0
MARK = "Focus on"


def _z(*key) -> float:
    h = hashlib.sha256("|".join(map(str, key)).encode()).hexdigest()
    return random.Random(int(h[:12], 16)).gauss(0, 1)


class EditWorld(ScriptedRunner):
    """ScriptedRunner where a text holding MARK (a proposed edit) adds EDIT_SD * z(text, task) to the task's score."""

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
        out = super().finish(prepared, instructions=instructions, run_id=run_id, criteria=criteria, seed=seed)
        instr = instructions[prepared["task_type"]]
        if MARK not in instr or out.status != "ok":
            return out
        bump = EDIT_SD * _z(instr, prepared["task"])
        return dataclasses.replace(out, score=out.score + bump, selection_score=out.score + bump,
                                   dimensions={"depth": out.score + bump})


def reflect_edit(name, ctx, llm, *, seen=frozenset()):
    """mutators.propose's contract for the one operator the arm asks for here: a new text per seed."""
    assert name == "reflect" and ctx.feedback, (name, ctx.feedback)  # the generator runs' judge feedback
    text = f"{ctx.base} {MARK} the weakest point the judge named (variant {ctx.seed})."
    return Candidate.make(text, name, (ctx.base_hash,), "scripted reflect")


def run(make_exp, *overrides, runner=None, propose=reflect_edit, lines=None):
    exp = make_exp()
    c = cal_exp(exp, "calibrate.tasks=8", *overrides)
    runner = runner or EditWorld(load_tasks(c.benchmark))
    out = lines.append if lines is not None else (lambda s: None)
    return run_calibration(c, runner, out=out, propose=propose), runner


def test_edits_that_differ_by_task_give_a_positive_tau_and_the_sizing_reads_it(make_exp):
    lines: list[str] = []
    cal, runner = run(make_exp, "calibrate.edits=2", lines=lines)
    rec = cal.edits
    assert rec["asked"] == 2 and rec["k"] == 2 and rec["n"] == 8 and rec["not_proposed"] == []
    # two different texts, each run once per task at generator run 1's seed
    texts = [e["instructions"]["enumerated"] for e in rec["edits"]]
    assert len(set(texts)) == 2 and all(MARK in t for t in texts)
    assert sum(str(rid).startswith("calibrate-edit") for rid in runner.run_ids) == 16
    # each edit's spread across tasks, the run noise taken out: near EDIT_SD, far above the noise (sd 0.3)
    assert all(e["tau"] > 1.0 and len(e["diffs"]) == 8 for e in rec["edits"])
    assert rec["largest_tau"] == max(e["tau"] for e in rec["edits"])
    assert rec["noise_sd"] == pytest.approx(cal.sigma * (1 + 1 / 2) ** 0.5)
    # the control (no harm on this baseline) and the A/A' rewrite (no effect here) spread little: the edits win
    tau, source = spread(cal)
    assert tau == rec["largest_tau"] and (cal.heterogeneity or {}).get("tau", 0.0) < tau
    assert source.startswith("its edits arm's largest spread across tasks, from 2 edits the mutators proposed")
    assert "(8 tasks)" in source
    # the budget line counts the edit runs; the summary has one line for the arm
    assert any("up to 16 edit task runs (2 edits the mutators propose)" in x for x in lines)
    summary = format_calibration(cal)
    arm = [x for x in summary.splitlines() if x.startswith("edits arm")]
    assert len(arm) == 1 and "2 of 2 edit(s)" in arm[0] and f"largest tau {rec['largest_tau']:.3f}" in arm[0]
    assert all(f"tau {e['tau']:.3f}" in arm[0] and f"diff {e['mean']:+.3f}" in arm[0] for e in rec["edits"])
    # stored and read back with the arm
    assert load_calibration(Path(cal.path)).edits["largest_tau"] == pytest.approx(rec["largest_tau"])


def test_edits_off_leaves_the_record_and_the_summary_as_they_were(make_exp):
    cal0, runner0 = run(make_exp)
    assert cal0.edits is None and json.loads(Path(cal0.path).read_text())["edits"] is None
    cal2, _ = run(make_exp, "calibrate.edits=2")  # the same fingerprint: it replaces cal0's record
    assert not any(str(rid).startswith("calibrate-edit") for rid in runner0.run_ids)
    assert "edits arm" not in format_calibration(cal0)
    # the same seeds: every other measurement is the same, and so is every other line of the summary
    same = dataclasses.replace(cal2, edits=None, elapsed_s=cal0.elapsed_s, created=cal0.created)
    assert format_calibration(same) == format_calibration(cal0)
    assert spread(cal0)[1] == spread(same)[1] and "edits" not in spread(cal0)[1]
    # a rerun without the arm says, before it runs, that the stored one measured what it will not
    lines: list[str] = []
    run(make_exp, lines=lines)
    assert any(f"the edits arm's spread (largest tau {cal2.edits['largest_tau']:.3f} over 2 edits)" in x
               and "Ctrl-C now keeps it" in x for x in lines)


def test_a_calibration_stored_before_the_edits_arm_still_loads(make_exp):
    cal, _ = run(make_exp)
    old = json.loads(Path(cal.path).read_text())
    del old["edits"]
    Path(cal.path).write_text(json.dumps(old))
    back = load_calibration(Path(cal.path))
    assert back.edits is None and back.sigma == pytest.approx(cal.sigma)
    assert spread(back) == spread(cal) and "edits arm" not in format_calibration(back)


@pytest.mark.parametrize("value", [-1, 9])
def test_the_config_check_refuses_an_edits_count_out_of_range(make_exp, value):
    with pytest.raises(ConfigError, match=r"calibrate\.edits") as err:
        cal_exp(make_exp(), f"calibrate.edits={value}")
    assert "\n" not in str(err.value)


def test_a_failure_to_propose_leaves_fewer_edits_and_says_why(make_exp):
    def one_fails(name, ctx, llm, *, seen=frozenset()):
        if ctx.seed % 2:
            raise MutationFailed("scripted: the mutation model is down")
        return reflect_edit(name, ctx, llm, seen=seen)

    lines: list[str] = []
    cal, _ = run(make_exp, "calibrate.edits=2", propose=one_fails, lines=lines)
    rec = cal.edits
    assert rec["asked"] == 2 and rec["k"] == 1 and len(rec["not_proposed"]) == 1
    assert rec["not_proposed"][0]["edit"] == 1 and "the mutation model is down" in rec["not_proposed"][0]["why"][0]
    said = [x for x in lines if "edits arm: 1 of 2 edit(s) proposed" in x]
    assert len(said) == 1 and "the mutation model is down" in said[0]
    assert "1 of 2 edit(s)" in format_calibration(cal) and Path(cal.path).is_file()


def test_no_mutation_model_gives_no_edit_and_the_calibration_stands(make_exp):
    # the real mutators.propose without a model falls back to a deterministic edit: not the mutators' edit
    cal, runner = run(make_exp, "calibrate.edits=2", propose=None)
    rec = cal.edits
    assert rec["k"] == 0 and rec["largest_tau"] is None and len(rec["not_proposed"]) == 2
    assert all("needs an LLM" in w for m in rec["not_proposed"] for w in m["why"])
    assert not any(str(rid).startswith("calibrate-edit") for rid in runner.run_ids)
    assert "edits" not in spread(cal)[1] and Path(cal.path).is_file()
    line = next(x for x in format_calibration(cal).splitlines() if x.startswith("edits arm"))
    assert "none ran" in line and "needs an LLM" in line


def test_a_failed_edit_run_stops_the_calibration_as_a_failed_control_run_does(make_exp):
    def crashing(name, ctx, llm, *, seen=frozenset()):
        return Candidate.make(f"{ctx.base} CRASH {ctx.seed}.", name, (ctx.base_hash,), "scripted")

    exp = make_exp()
    c = cal_exp(exp, "calibrate.tasks=8", "calibrate.edits=1")
    with pytest.raises(CalibrationFailed, match="edit 1/1"):
        run_calibration(c, EditWorld(load_tasks(c.benchmark)), out=lambda s: None, propose=crashing)
    assert not list(Path(c.results_dir, "calibration").glob("*.json"))
    assert Calibration.__dataclass_fields__["edits"].default is None
