"""Issue 52, items A7, B7 and B8: the preflight's detectable effect is the configured design's, a calibration whose
side-by-side judge is never readable is a failed measurement that says so, and a calibration run again keeps (and
names) the one it replaces.

Scripted runners (tests/scripted_harness.py) through the project's entry points: run_sweep, run_calibration and the
command line's cli (its runner the scripted one, as make_runner would build the real one)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from scripted_harness import ScriptedRunner, scripted_propose
from test_calibrate import TOOLS, cal_exp, calibrate

from experiments.config import load_tasks
from experiments.sweep import run_sweep


def _sweep_lines(exp, runner=None) -> list[str]:
    lines: list[str] = []
    run_sweep(exp, runner or ScriptedRunner(load_tasks(exp.benchmark)), propose=scripted_propose, out=lines.append)
    return "\n".join(lines).splitlines()


# -- A7: one detectable effect, the design's ------------------------------------------------------------------


def test_a7_the_preflight_prints_the_shipped_designs_power_not_a_wilcoxon_rule_it_does_not_run(make_exp):
    # the shipped design: train filter 'positive', confirmation by the holdout's paired t over tasks (futility looks)
    exp = make_exp("sweep.n_trials=1", "calibrate.sims=400", n_train=8, n_holdout=12, operators=("add_tool",))
    exp.synth.instructions = dict(TOOLS)
    assert exp.sweep.train_filter == "positive" and exp.sweep.holdout_test == "tasks"
    calibrate(exp, None, "calibrate.tasks=8", "calibrate.sims=400")
    lines = _sweep_lines(exp)
    figures = [ln for ln in lines if "] preflight:" in ln and ("detectable effect" in ln or "design power" in ln)]
    # one figure, and not the train Wilcoxon's (the design filters by the train mean and confirms by the t)
    assert len(figures) == 1, figures
    assert "wilcoxon" not in figures[0] and "preflight: design power: this design confirms a mean effect of" in figures[0]
    assert "after a train mean above the baseline's on 8 train tasks" in figures[0]
    # the summary's design power line (nothing ran on the holdout: the same tau, sigma and level) says the same
    summary = next(ln for ln in lines if ln.startswith("design power:"))
    assert figures[0].split("preflight: ", 1)[1] == summary


def test_a7_the_measured_noise_line_describes_the_configured_design_too(make_exp):
    # no calibration, 2 baseline runs: the line printed once they measured the noise is the design's power
    exp = make_exp("sweep.n_trials=1", "sweep.baseline_repeats=2", operators=("add_tool",))
    exp.synth.instructions = dict(TOOLS)
    (line,) = [ln for ln in _sweep_lines(exp) if "noise measured from 2 baseline runs" in ln]
    assert "wilcoxon" not in line and "design power: this design confirms a mean effect of" in line


# -- B7: a side-by-side judge never readable is a failed measurement, and the summary says why ----------------


PROSE = "Both answers have their merits; it is hard to say which one is better overall."


class ProseJudgeRunner(ScriptedRunner):
    """The scripted world with a side-by-side judge (the real evaluators.pairwise.compare_pair on the scripted fake
    backend) that answers in prose: no verdict can be read from any reply."""

    def __init__(self, tasks, reply: str = PROSE, **kw) -> None:
        from harness.inference._fake import FakeLLM

        super().__init__(tasks, **kw)
        self.judge = FakeLLM(keyed={"": reply}, model="scripted-1")

    def compare_pair(self, prepared, candidate, baseline, *, seed=0):
        from evaluators.pairwise import compare_pair

        return compare_pair(prepared["task"], candidate, baseline, self.judge, seed=seed, judge_retries=0)


def _cli(exp, runner, monkeypatch, capsys) -> tuple[int, str, str]:
    """`python -m experiments.run +sweep=calibrate ...` on `exp`, its runner `runner`: (exit code, stdout, stderr)."""
    import experiments.run as entry

    monkeypatch.setattr(entry, "make_runner", lambda _exp: runner)
    code = 0
    try:
        entry.cli(exp)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_b7_a_pairwise_judge_never_readable_fails_the_calibration_and_says_how_often_and_why(make_exp, monkeypatch,
                                                                                            capsys):
    exp = make_exp()
    exp.synth.instructions = dict(TOOLS)
    c = cal_exp(exp, "calibrate.pairwise=true", "calibrate.sims=200")
    runner = ProseJudgeRunner(load_tasks(c.benchmark))
    code, out, err = _cli(c, runner, monkeypatch, capsys)
    # 4 tasks x 2 pairs (the A/A and the control) x 2 orders: 16 replies, none readable
    assert len(runner.judge.calls) == 16
    assert code != 0, "a calibration that measured no g because its judge failed ended as a success"
    assert "judge failed: the side-by-side judge's replies were unreadable in 16 of 16" in out
    assert "0 of 4 A/A pairs and 0 of 4 positive-control pairs judged in both orders" in out
    assert "an unreadable reply: 'Both answers have their merits; it is hard to say which one is better" in out
    assert "calibrate.pairwise=true judges" not in out  # no advice to turn on what is on
    assert "calibrate.pairwise measured nothing" in err
    # the rest of the measurement is stored and still read by a sweep (its checks passed)
    stored = json.loads(next((Path(c.results_dir) / "calibration").glob("*.json")).read_text())
    assert stored["passed"] is True and stored["pairwise"]["judge_failures"] == 16
    assert stored["pairwise"]["not_measured"] and stored["pairwise"]["g"] is None


def test_b7_some_unreadable_replies_are_counted_beside_the_g_they_left(make_exp):
    # the A/A's replies readable, one control pair's not: g is measured, and the summary counts what was missing
    exp = make_exp()
    exp.synth.instructions = dict(TOOLS)
    tasks = load_tasks(exp.benchmark)
    first = '{"verdict": "A", "reason": "more specific"}'
    runner = ProseJudgeRunner(tasks, reply=first)
    runner.judge.keyed = {"Do not answer": [PROSE], "": first}  # the first control pair's first order: prose
    lines: list[str] = []
    cal, _ = calibrate(exp, runner, "calibrate.pairwise=true", "calibrate.sims=200", lines=lines)
    (line,) = [ln for ln in "\n".join(lines).splitlines() if ln.startswith("pairwise (both orders")]
    assert "judge failures: 1 unreadable reply (4 of 4 A/A and 3 of 4 control pairs judged in both orders" in line
    assert "an unreadable reply: 'Both answers have their merits" in line
    assert cal.pairwise["judge_failures"] == 1 and cal.pairwise["g"] is not None and not cal.failed_out


# -- B8: a calibration run again keeps, and names, the one it replaces ---------------------------------------


def test_b8_a_smaller_rerun_keeps_the_bigger_calibration_and_says_what_it_replaces(make_exp, monkeypatch, capsys):
    exp = make_exp()
    exp.synth.instructions = dict(TOOLS)
    tasks = load_tasks(exp.benchmark)

    def good(messages) -> str:  # the refusal loses wherever it is shown; two baseline answers tie
        user = messages[-1]["content"]
        if "Do not answer" not in user:
            return '{"reason": "alike", "verdict": "tie"}'
        return '{"reason": "a refusal", "verdict": "%s"}' % (
            "B" if user.index("Do not answer") < user.index("# Answer B") else "A")

    big = cal_exp(exp, "calibrate.tasks=8", "calibrate.pairwise=true",
                  "calibrate.decodings=[sampled,greedy]", "calibrate.sims=200")

    class Greedy(ProseJudgeRunner):
        def at_temperature(self, t):
            return self

    code, out, err = _cli(big, Greedy(tasks, reply=good), monkeypatch, capsys)
    folder = Path(big.results_dir) / "calibration"
    assert code == 0, err[-800:]
    (path,) = folder.glob("*.json")
    before = json.loads(path.read_text())
    assert code == 0, err[-600:]
    assert before["n_tasks"] == 8 and before["pairwise"]["g"] is not None
    assert before["decomposition"].get("greedy")

    small = cal_exp(exp, "calibrate.sims=200")  # the defaults: 4 tasks x 2 runs, no g, no greedy arm
    code, out, _ = _cli(small, ScriptedRunner(tasks), monkeypatch, capsys)
    assert code == 0
    # said before it ran, and in the summary: what the stored one measured that this one does not, where it is kept
    warned = [ln for ln in out.splitlines() if "a calibration of this fingerprint is stored" in ln]
    assert len(warned) == 1, "a smaller rerun replaced the stored calibration without a word before it ran"
    warn = warned[0]
    assert out.index(warn) < out.index("generator run 1/2")
    for what in ("more degrees of freedom for sigma (8 from 8 tasks x 2 runs, against 4)", "g ",
                 "the greedy decomposition"):
        assert what in warn, what
    (replaced,) = [ln for ln in out.splitlines() if ln.startswith("replaced the calibration stored before")]
    kept = Path(re.search(r"kept as (\S+?);", replaced).group(1))
    assert kept.parent == folder / "replaced" and f"mv {kept} {path}" in replaced
    assert json.loads(kept.read_text()) == before  # nothing lost: the bigger one, byte for byte as it was read
    now = json.loads(path.read_text())
    assert now["n_tasks"] == 4 and now["pairwise"] is None  # the new one is what sweeps read, as the line says
    assert sorted(p.name for p in folder.glob("*.json")) == [path.name]  # the kept one is not a second candidate
