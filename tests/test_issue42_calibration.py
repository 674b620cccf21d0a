"""Issue 42 item 1: +sweep=calibrate says where the spread of per-task differences comes from, and which levers pay.

A scripted world of known parts (the model of docs/SENSITIVITY.md): score = 5 + task difficulty + u(text, task)
+ run noise. u is the task x variant part (sd tau / sqrt 2 per text, so a difference of two texts has sd tau);
run noise has sd sigma and is shared with correlation rho by two texts run at the same seed. Under greedy decoding
(at_temperature(0)) the answer is frozen per (text, task): no run noise but the judge's own (sd j_run per scoring),
and the judge's per-answer error (sd JUDGE, what a re-score measures) is frozen into u.
"""

from __future__ import annotations

import hashlib
import math
import random

import pytest
from test_calibrate import calibrate

from experiments.runs import TaskOutcome, Usage


def _z(*key) -> float:
    h = hashlib.sha256("|".join(map(str, key)).encode()).hexdigest()
    return random.Random(int(h[:12], 16)).gauss(0, 1)


class World:
    """The runner protocol (prepare, finish, rescore, identity, llm_calls) on the world above; real TaskOutcomes."""

    def __init__(self, tasks, *, sigma: float, tau: float, rho: float, judge: float = 0.1, greedy: bool = False,
                 harm: float = 3.0) -> None:
        self.tasks, self.sigma, self.tau, self.rho, self.judge, self.greedy = tasks, sigma, tau, rho, judge, greedy
        self.types = {t.task: t.task_type for t in tasks}
        self.harm, self.calls, self.run_ids, self.prepares = harm, 0, [], 0

    def identity(self):
        return {role: {"backend": "scripted", "model": "world-1"} for role in ("planner", "producer", "evaluator")}

    def at_temperature(self, t: float) -> "World":
        assert t == 0.0
        twin = World(self.tasks, sigma=self.sigma, tau=self.tau, rho=self.rho, judge=self.judge, greedy=True,
                     harm=self.harm)
        twin.run_ids = self.run_ids
        return twin

    def prepare(self, task):
        self.prepares += 1
        return {"task": task, "task_type": self.types[task]}

    def _usage(self, calls=3):
        return Usage(prompt_tokens=30, completion_tokens=20, latency_s=0.01, llm_calls=calls, cached_calls=0)

    def _quality(self, instr: str, task: str) -> float:
        difficulty = int(hashlib.sha256(task.encode()).hexdigest()[:4], 16) % 20 / 10
        bad = self.harm if "cannot help" in instr else 0.0
        return 5.0 + difficulty - bad + self.tau / math.sqrt(2) * _z("u", instr, task)

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0) -> TaskOutcome:
        self.calls += 3
        self.run_ids.append(run_id)
        instr, task = instructions[prepared["task_type"]], prepared["task"]
        q = self._quality(instr, task)
        if self.greedy:  # the same answer whatever the seed: its judge error frozen, a fresh judge sample per run
            text = f"greedy answer to {task} under {instr[:40]}"
            score = q + self.judge * _z("frozen", text) + 0.05 * _z("judge-run", text, seed)
        else:
            text = f"answer to {task} under {instr[:40]} seed {seed}"
            e = math.sqrt(self.rho) * _z("shared", task, seed) + math.sqrt(1 - self.rho) * _z("own", instr, task, seed)
            score = q + self.sigma * e
        return TaskOutcome(status="ok", score=score, selection_score=score, dimensions={"depth": score}, judge_sd=0.0,
                           usage=self._usage(), output_text=text, rescored=True)

    def rescore(self, prepared, output_text, *, criteria=None, seed=0, run_seed=None) -> TaskOutcome:
        self.calls += 1
        score = 5.0 + self.judge * _z("rescore", output_text, seed)
        return TaskOutcome(status="ok", score=score, dimensions={"depth": score}, judge_sd=0.0,
                           usage=self._usage(1), output_text=output_text, rescored=True)

    def llm_calls(self) -> int:
        return self.calls


WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec "
         "romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def world_cal(make_exp, *overrides, n=240, **world):
    exp = make_exp(n_train=n // 2, n_holdout=n - n // 2)
    from experiments.config import load_tasks

    # a world of distinct tasks gets distinct texts, which the benchmark's leak check (same_task) keeps apart
    for spec in exp.benchmark.tasks:
        i = int(spec.id[1:])
        spec.task = f"task {WORDS[i % 26]} {WORDS[(i // 26) % 26]} {i}"

    runner = World(load_tasks(exp.benchmark), **world)
    lines: list[str] = []
    cal, _ = calibrate(exp, runner, "calibrate.tasks=0", "calibrate.sims=200", *overrides, lines=lines)
    return cal, runner, "\n".join(lines)


def _lever(cal, name):
    levers = (cal.decomposition or {}).get("levers") if hasattr(cal, "decomposition") else None
    assert levers, "the calibration printed no lever verdicts"
    return next(x for x in levers if x["lever"] == name)


def test_run_noise_dominated_world_recovers_sigma_tau_rho_and_says_k_and_crn_pay(make_exp):
    cal, runner, text = world_cal(make_exp, sigma=1.0, tau=0.4, rho=0.6)
    dec = getattr(cal, "decomposition", None)
    assert dec is not None and "sampled" in dec, "no decomposition of the per-task differences"
    s = dec["sampled"]
    assert s["sigma"] == pytest.approx(1.0, abs=0.12)
    assert s["rho"] == pytest.approx(0.6, abs=0.2) and s["rho_se"] < 0.15
    assert s["tau"] == pytest.approx(0.4, abs=0.3)
    # the A/A' arm ran once per task at the seed of the first baseline run
    rewrites = [rid for rid in runner.run_ids if "rewrite" in rid]
    assert len(rewrites) == 240
    assert "levers for this model (sampled figures): " in text
    assert _lever(cal, "k samples per task")["pays"] is True
    assert _lever(cal, "CRN")["pays"] is True
    assert _lever(cal, "pairwise")["pays"] is None  # not measured by default


def test_task_spread_dominated_world_says_spend_on_tasks_not_k_and_no_crn_without_correlation(make_exp):
    cal, _, text = world_cal(make_exp, sigma=0.3, tau=2.0, rho=0.0)
    dec = getattr(cal, "decomposition", None)
    assert dec is not None, "no decomposition of the per-task differences"
    s = dec["sampled"]
    assert s["tau"] == pytest.approx(2.0, rel=0.15)
    assert s["sigma"] == pytest.approx(0.3, abs=0.05)
    assert s["rho_se"] > 0.3  # tau dominates: the runs cannot tell rho, and it would not matter
    assert _lever(cal, "k samples per task")["pays"] is False
    assert _lever(cal, "CRN")["pays"] is False
    more = _lever(cal, "more tasks")
    assert more["pays"] is True and "tasks are the lever" in more["why"]


def test_greedy_decoding_estimates_the_frozen_judge_share(make_exp):
    # greedy: the frozen per-answer judge error (sd 0.5: a re-score's sd) over a true task x variant spread of 0.5:
    # a difference of two answers carries 2 j^2 = 0.5 of judge error beside tau_true^2 = 0.25: f = 2/3
    cal, runner, text = world_cal(make_exp, "calibrate.decodings=[sampled,greedy]", sigma=1.0, tau=0.5, rho=0.3,
                                  judge=0.5)
    dec = getattr(cal, "decomposition", None)
    assert dec is not None and "greedy" in dec, "no greedy decomposition"
    g = dec["greedy"]
    assert g["tau"] ** 2 == pytest.approx(0.75, rel=0.25)
    assert g["f"] == pytest.approx(2 / 3, abs=0.15)
    assert g["sigma"] < 0.15  # greedy: the same answer at every seed; only the judge's sample moves
    assert sum("greedy" in rid for rid in runner.run_ids) == 240 * 3  # 2 baseline runs + 1 A/A' per task
    assert "spread of per-task differences, greedy" in text and "frozen judge share f" in text


def test_a_bad_decoding_is_refused_in_one_line(make_exp):
    from experiments.config import ConfigError

    with pytest.raises(ConfigError, match=r"calibrate.decodings=.*expected a list of distinct values from sampled"):
        calibrate(make_exp(), None, "calibrate.decodings=[beam]")


def test_the_default_rewrite_is_written_for_default_instructions_and_a_rule_otherwise():
    from experiments.calibration._arms import rewrite_of
    from harness.synthesis import DEFAULT_INSTRUCTIONS

    for tt, text in DEFAULT_INSTRUCTIONS.items():
        new, source = rewrite_of(tt, text)
        assert source == "written" and new != text
    new, source = rewrite_of("enumerated", "First do A. Then do B.")
    assert (new, source) == ("Then do B. First do A.", "rule")
    assert rewrite_of("research", "x", "Say it otherwise.") == ("Say it otherwise.", "config")


class PairWorld(World):
    """World with a side-by-side judge: the better answer by quality wins both orders, except that a close pair
    (|quality gap| < 0.5) goes to the answer shown first (position bias)."""

    def compare_pair(self, prepared, candidate, baseline, *, seed=0):
        from evaluators.pairwise import combine_orders, PairResult

        def quality(text):
            return -self.harm if "cannot help" in text else 0.0
        gap = quality(candidate) - quality(baseline)
        v1 = ("A" if gap > 0 else "B") if abs(gap) >= 0.5 else "A"  # candidate shown first
        v2 = ("B" if gap > 0 else "A") if abs(gap) >= 0.5 else "A"  # baseline shown first
        pref = combine_orders(1.0 if v1 == "A" else -1.0, 1.0 if v2 == "B" else -1.0)
        return PairResult(pref, (v1, v2), (v1 == "A", v2 == "A"))

    def finish(self, prepared, **kw):
        out = super().finish(prepared, **kw)
        instr = kw["instructions"][prepared["task_type"]]
        import dataclasses

        return dataclasses.replace(out, output_text=out.output_text + (" cannot help" if "cannot help" in instr else ""))


def test_pairwise_reports_position_bias_and_g(make_exp):
    exp = make_exp(n_train=8, n_holdout=4)
    from experiments.config import load_tasks

    runner = PairWorld(load_tasks(exp.benchmark), sigma=1.0, tau=0.4, rho=0.0)
    lines: list[str] = []
    cal, _ = calibrate(exp, runner, "calibrate.tasks=0", "calibrate.sims=200", "calibrate.pairwise=true",
                       lines=lines)
    pw = cal.pairwise
    assert pw["n"] == 12 and pw["calls"] == 48
    assert pw["first_wins"] == 36 and pw["decided"] == 48  # A/A: the first shown both orders; control: one order
    assert pw["aa_mean"] == 0 and pw["control_mean"] == -1.0 and pw["g"] == 0.0
    text = "\n".join(lines)
    assert "position bias: the answer shown first won 36 of 48" in text
    assert _lever(cal, "pairwise")["pays"] is True
