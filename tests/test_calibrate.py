"""Calibration (+sweep=calibrate) and the sweep's preflight, on the scripted runner (no LLM).

The scripted world (tests/scripted_harness.py): score = 5 + task difficulty + 1.5 when the instruction names a
concrete tool + seeded noise (sd 0.3, new for every instruction x task x seed); a re-score of a fixed text adds
judge noise (sd 0.1). With "Name a concrete tool for every point." in the baseline, the harmful instruction (which
replaces it) really scores 1.5 lower; with the plain baseline it does not hurt at all.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from conftest import OLD_DESIGN
from scripted_harness import BASE, BOOST, ScriptedRunner, scripted_propose

from experiments.calibration import run_calibration
from experiments.calibration._calibrate import pick_tasks
from experiments.calibration._calibrate import CalibrationFailed
from experiments.calibration._summary import CALIBRATION_BEGIN, CALIBRATION_END, format_calibration
from experiments.config import load_tasks
from experiments.config import ConfigError, compose_config, to_experiment, validate
from experiments.stats import Design, detection_rate, mde, tasks_for_effect
from experiments.stats._tests import wilcoxon_reject
from experiments.stats._power import _normals
from experiments.storage import Cost, find_calibration
from experiments.ab._preflight import ab_preflight_lines
from experiments.sweep._study import open_study
from experiments.sweep import run_sweep
from experiments.sweep._preflight import preflight_lines, project_sweep

optuna.logging.set_verbosity(optuna.logging.WARNING)
ROOT = Path(__file__).resolve().parents[1]
TOOLS = {k: f"{v} Name a {BOOST} for every point." for k, v in BASE.items()}  # the harmful instruction drops it


def cal_exp(exp, *overrides):
    """A +sweep=calibrate experiment on the same benchmark, instructions and stores as `exp` (a make_exp sweep)."""
    c = to_experiment(compose_config(["+sweep=calibrate", "backend=fake", *overrides]))
    c.benchmark = exp.benchmark
    c.synth.instructions = dict(exp.synth.instructions)
    c.mlflow.enabled = exp.mlflow.enabled
    return validate(c)


def calibrate(exp, runner=None, *overrides, lines=None):
    c = cal_exp(exp, *overrides)
    runner = runner or ScriptedRunner(load_tasks(c.benchmark))
    return run_calibration(c, runner, out=lines.append if lines is not None else (lambda s: None)), runner


def sweep(exp, runner=None, lines=None):
    runner = runner or ScriptedRunner(load_tasks(exp.benchmark))
    out = lines.append if lines is not None else (lambda s: None)
    return run_sweep(exp, runner, propose=scripted_propose, out=out), runner


# -- the calibration ---------------------------------------------------------------------------------------------


def test_harmful_instruction_is_detected_and_identical_arms_are_not_significant(make_exp):
    exp = make_exp(mlflow=True)
    exp.synth.instructions = dict(TOOLS)
    lines: list[str] = []
    cal, runner = calibrate(exp, lines=lines)
    assert cal.control.status == "pass" and cal.control.mean_diff == pytest.approx(-1.5, abs=0.5)
    assert cal.control.p < 0.05 and cal.control.alternative == "less"
    assert cal.aa.status == "pass" and cal.aa.p >= 0.05 and cal.aa.alternative == "two-sided"
    assert cal.passed and not cal.failed_out
    # what it measured: generator sd near the world's 0.3 (4 df), judge sd near 0.1, per dimension too
    assert 0.1 < cal.sigma < 0.9 and cal.sigma_ci[0] < 0.3 < cal.sigma_ci[1]
    assert 0.02 < cal.judge_sigma < 0.3 and set(cal.judge_dimensions) == {"depth"} == set(cal.generator_dimensions)
    assert cal.repeats == 2 and cal.n_tasks == 4 and len(cal.runs["judge"]["t0"]) == 3
    # what it ran: 4 contexts, 2 generator runs + 1 control run + 1 A/A' rewrite run (issue 42) per task, 3 re-scores
    assert runner.prepares == 4 and len(runner.run_ids) == 16
    assert sum(rid.startswith("calibrate-gen") for rid in runner.run_ids) == 8
    # the numbers a user asked for, printed in one block
    text = "\n".join(lines)
    block = text[text.index(CALIBRATION_BEGIN):text.index(CALIBRATION_END) + len(CALIBRATION_END)]
    for fragment in ("judge variance (each output re-scored 3x): composite sd", "generator variance (2 seeds)",
                     "A/A (blind arms arm-", "not significant: PASS", "positive control (", "detected: PASS",
                     "noise floor: sigma", "minimum detectable effect (alpha 0.05, power 0.8; simulated): sweep",
                     "target effect 0.5: sweep needs", "cost per task run (median of 12)", "stored: ",
                     "spread of per-task differences, sampled", "levers for this model (sampled figures): "):
        assert fragment in block, fragment
    assert len(block.splitlines()) <= 20
    assert math.isfinite(cal.mde["sweep"]["mde"]) and cal.mde["ab"]["n"] == 14
    # stored under the fingerprint, with everything a later run needs
    stored = json.loads(Path(cal.path).read_text())
    assert Path(cal.path).name == f"{cal.key}.json" and Path(cal.path).parent.name == "calibration"
    assert "sweep_kind" not in stored["fingerprint"] and stored["sigma"] == pytest.approx(cal.sigma)
    assert stored["cost"]["uncached_calls"] == 2 and stored["passed"] is True
    # one MLflow parent run with the plots as artifacts
    from mlflow.tracking import MlflowClient

    from experiments.config import tracking_uri

    client = MlflowClient(tracking_uri(exp))
    runs = client.search_runs([client.get_experiment_by_name("calibrate").experiment_id])
    assert len(runs) == 1 and runs[0].data.tags["kind"] == "calibration" and runs[0].info.status == "FINISHED"
    assert runs[0].data.tags["fingerprint"] == cal.key and runs[0].data.metrics["sigma"] == pytest.approx(cal.sigma)
    artifacts = {a.path for a in client.list_artifacts(runs[0].info.run_id, "plots")}
    assert artifacts == {"plots/scores.png", "plots/differences.png", "plots/power.png"}


def test_a_judge_share_above_100_percent_says_whether_the_estimates_noise_explains_it(make_exp):
    # the generator SD contains the judge's share, so a judge share above 100% is either the estimates' own noise
    # (4 and 8 df here) or a judge that scores a text alone differently from inside a run
    cal, _ = calibrate(make_exp())
    line = lambda c: next(x for x in format_calibration(c).splitlines() if x.startswith("generator variance"))  # noqa: E731
    assert "above 100%" not in line(dataclasses.replace(cal, judge_sigma=cal.sigma * 0.5))
    within = line(dataclasses.replace(cal, judge_sigma=cal.sigma * 1.41))
    assert "judge share of the variance 199% (above 100% within the two estimates' noise: F 1.99 on 8 and 4 df" in within
    beyond = line(dataclasses.replace(cal, judge_sigma=cal.sigma * 4))
    assert "beyond the two estimates' noise: F 16.00 on 8 and 4 df, p 0.00" in beyond


def test_exact_wilcoxon_design_detects_the_control_on_six_tasks(make_exp):
    exp = make_exp()
    exp.synth.instructions = dict(TOOLS)
    cal, _ = calibrate(exp, None, "calibrate.test=wilcoxon", "calibrate.tasks=6")
    assert cal.control.test == "wilcoxon" and cal.control.status == "pass"
    assert cal.control.p == pytest.approx(1 / 64)  # every task lost: the smallest one-sided p over 6 tasks
    assert cal.aa.status == "pass"


def test_a_harmless_control_fails_the_calibration_and_a_sweep_does_not_use_it(make_exp):
    # the sweep's own noise floor from 2 baseline runs (the Wilcoxon + floor filter's design) when the calibration
    # cannot be used; a plain baseline: 'harmful' changes nothing
    exp = make_exp(*OLD_DESIGN, "sweep.n_trials=2", operators=("add_tool",))
    lines: list[str] = []
    cal, _ = calibrate(exp, lines=lines)
    assert cal.control.status == "fail" and not cal.passed and cal.failed_out
    assert "positive control" in cal.stop_reason and "NOT detected: FAIL" in "\n".join(lines)
    assert Path(cal.path).is_file()  # kept for the record
    found, note = find_calibration(exp, ScriptedRunner(load_tasks(exp.benchmark)).identity(), load_tasks(exp.benchmark))
    assert found is None and "is ignored: its positive control check failed" in note
    out: list[str] = []
    _, runner = sweep(exp, lines=out)
    assert any("baseline-s1" in rid for rid in runner.run_ids)  # measured its own noise floor


def test_pick_tasks_spreads_over_task_types_train_first(make_exp):
    tasks = load_tasks(make_exp().benchmark)
    assert [t.id for t in pick_tasks(tasks, 4)] == ["t0", "t1", "t2", "t3"]
    assert {t.task_type for t in pick_tasks(tasks, 2)} == {"enumerated", "research"}
    assert all(t.split == "train" for t in pick_tasks(tasks, 8)) and len(pick_tasks(tasks, 0)) == 14


# -- a later sweep reads it ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("design", ["old", "shipped"])
def test_a_sweep_after_a_calibration_prints_the_preflight_and_uses_the_stored_noise_floor(make_exp, design):
    # the preflight's projection under the gate + final race + 1 + 1 holdout design, and under the shipped default
    pinned = OLD_DESIGN if design == "old" else ()
    exp = make_exp(*pinned, "sweep.n_trials=3", "sweep.baseline_repeats=3", operators=("add_tool",))
    exp.synth.instructions = dict(TOOLS)
    cal, _ = calibrate(exp)
    runner = ScriptedRunner(load_tasks(exp.benchmark))
    lines: list[str] = []
    calls_at: dict[str, int] = {}

    def out(line: str) -> None:
        lines.append(line)
        if "preflight:" in line:
            calls_at.setdefault("preflight", runner.calls)

    s = run_sweep(exp, runner, propose=scripted_propose, out=out)
    text = "\n".join(lines)
    assert f"noise floor from calibration {cal.key}" in text and "the 2 baseline repeat(s) are not run" in text
    assert not any("baseline-s" in rid for rid in runner.run_ids)  # no baseline repeat ran
    assert "baseline_runs" not in open_study(exp).user_attrs
    assert s.noise.sigma == pytest.approx(cal.sigma) and s.noise.repeats == 2
    assert s.train_floor == pytest.approx(cal.noise_floor().floor(8, 1))
    assert f"noise source: calibration {cal.key}" in text and "over 2 calibration runs" in text
    # the preflight comes before the first trial and before any LLM call is spent on trials
    first_pre = next(i for i, ln in enumerate(lines) if "preflight:" in ln)
    first_trial = next(i for i, ln in enumerate(lines) if "trial 1/3" in ln)
    assert first_pre < first_trial and calls_at["preflight"] == 14 * 2  # only the 14 context preparations
    pre = [ln for ln in lines if "] preflight:" in ln]
    assert "budget n_trials=3 (3 left: baseline + 2 proposal(s))" in pre[0]
    # old: baseline + 2 proposals on 8 train tasks (24), the final race of the top 2 on them (16, sweep.race_top),
    # the baseline and the best once each on 6 holdout tasks (12, sweep.holdout_baseline_runs /
    # holdout_candidate_runs); shipped: the 24 train runs, no final race, 3 + 3 runs on each of the 6 holdout tasks
    # (36); 2 uncached calls, 50 tokens each
    runs = {"old": 52, "shipped": 60}[design]
    assert f"{runs} task runs: ~{2 * runs} uncached LLM calls, ~{50 * runs} tokens" in pre[1]
    assert f"calibration {cal.key}" in pre[1]
    # one detectable effect, the design's (issue 52 A7): what the whole decision (train filter and confirmation
    # over the holdout tasks at the first look's level) can confirm, with the calibration's sigma (issue 36)
    assert pre[2].startswith(f"[{exp.sweep.name}] preflight: design power: this design confirms a mean effect of ")
    assert "level 0.025" in pre[2] and "wilcoxon" not in pre[2]
    assert "WARNING: the budget allows only 2 proposal(s) (limited by n_trials=3)" in pre[3]
    assert any("preflight update:" in ln for ln in lines)  # updated from the first trial's measured runs
    # the cost model comes from the calibration's medians, not from a baseline trial that has not run yet
    (cost_line,) = [ln for ln in pre if "preflight: cost model:" in ln]
    co = cal.cost
    assert co.tokens > 0 and co.runs > 0
    assert (f"preflight: cost model: {co.tokens:.0f} tokens (prompt + completion; the calibration does not split "
            f"them), {co.llm_calls:.1f} LLM calls ({co.uncached_calls:.1f} uncached) per task run, medians over "
            f"calibration {cal.key}'s {co.runs} runs; projected {runs * co.tokens:.0f} tokens for {runs} task runs") \
        in cost_line


def test_a_calibration_for_another_model_is_ignored(make_exp):
    # the sweep's own noise floor from 2 baseline runs (the Wilcoxon + floor filter's design) in its place
    exp = make_exp(*OLD_DESIGN, "sweep.n_trials=2", operators=("add_tool",))
    exp.synth.instructions = dict(TOOLS)
    tasks = load_tasks(exp.benchmark)
    calibrate(exp, ScriptedRunner(tasks, model="model-a"))
    lines: list[str] = []
    s, runner = sweep(exp, ScriptedRunner(tasks, model="model-b"), lines=lines)
    text = "\n".join(lines)
    assert "none of the 1 stored calibration(s) matches this fingerprint" in text
    assert "backend.producer.model: model-a -> model-b" in text
    assert any("baseline-s1" in rid for rid in runner.run_ids)  # its own noise floor
    assert "preflight: detectable effect not known yet" in text
    assert "noise source: 2 baseline runs of this study" in text


def test_a_study_keeps_the_noise_source_it_started_with(make_exp):
    exp = make_exp("sweep.n_trials=2", operators=("add_tool",))
    exp.synth.instructions = dict(TOOLS)
    first, _ = sweep(exp)  # no calibration yet: measured its own repeats
    calibrate(exp)
    more = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=3))
    lines: list[str] = []
    second, _ = sweep(more, lines=lines)
    assert "exists, but this study started without it; keeping its own baseline repeats" in "\n".join(lines)
    assert second.noise.sigma == pytest.approx(first.noise.sigma)


def test_calibration_runs_are_runs_of_their_own_not_the_sweeps_baseline_runs_again(make_exp):
    """Issue 31 item 8c. Before (6cbf984) generator run j used seed `seed + j`, the seed of the sweep's baseline trial
    (j = 0), its repeats and its holdout runs; with the response cache keyed on the seed those were the same runs,
    so a sweep pooling the calibration's sigma with its holdout repeats counted them twice."""
    from experiments.calibration._calibrate import generator_seed
    from experiments.runs import evaluate_candidate
    from experiments.runs import baseline_instructions

    exp = make_exp("sweep.n_trials=2", operators=("add_tool",))
    exp.synth.instructions = dict(TOOLS)
    cal, _ = calibrate(exp, None, "calibrate.tasks=0", "calibrate.generator_repeats=3")
    assert cal.passed and set(cal.tasks) == {t.id for t in load_tasks(exp.benchmark)}  # holdout tasks included
    assert cal.design["generator_seeds"] == [generator_seed(exp.seed, j) for j in range(3)]
    s, runner = sweep(exp)
    assert f"calibration {cal.key}" in s.noise_source  # the sweep's noise floor is this calibration's
    trial0 = open_study(exp).trials[0].user_attrs["task_scores"]
    # every seed a sweep's baseline runs with: trial and repeats (seed + k), holdout runs (seed + k), race (seed + 1)
    tasks = load_tasks(exp.benchmark)
    instructions = baseline_instructions(exp, ["enumerated", "research"])
    sweep_runs = [trial0] + [evaluate_candidate(instructions, tasks, runner, seed=exp.seed + k).by_task()
                             for k in range(max(exp.sweep.baseline_repeats, exp.sweep.holdout_baseline_runs))]
    for gen in cal.runs["generator"]:
        shared = [t for t, v in gen.items() for run in sweep_runs if run.get(t) == v]
        assert shared == [], f"calibration runs that are a sweep's baseline runs: {shared}"


# -- refusals: one line, nothing written ---------------------------------------------------------------------------


@pytest.mark.parametrize("overrides, fragment", [
    (["calibrate.test=wilcoxon"], "over 4 task(s) with test=wilcoxon, the A/A test (two-sided) cannot go below "
                                  "p=0.125 and the positive control (one-sided) cannot go below p=0.0625 >= alpha"),
    (["calibrate.test=wilcoxon", "calibrate.tasks=5"], "the A/A test (two-sided) cannot go below p=0.0625 >= alpha"),
    (["calibrate.tasks=99"], "calibrate.tasks=99 is out of range; benchmark 'asyncio_practices' has 24 task(s)"),
    (["calibrate.generator_repeats=1"], "calibrate.generator_repeats=1 measures no generator variance"),
    (["calibrate.judge_repeats=1"], "calibrate.judge_repeats=1 measures no judge variance"),
    (["calibrate.alpha=1.5"], "calibrate.alpha=1.5 is out of range"),
    (["calibrate.power=0.01"], "calibrate.power=0.01 is not above calibrate.alpha=0.05"),
    (["calibrate.target_effect=0"], "calibrate.target_effect=0.0 is out of range"),
    (["calibrate.harmful_instruction=' '"], "calibrate.harmful_instruction is empty"),
    (["calibrate.test=anova"], "calibrate.test='anova' is not allowed; expected one of: wilcoxon, t"),
])
def test_bad_calibration_designs_are_refused_in_one_line(overrides, fragment):
    exp = to_experiment(compose_config(["+sweep=calibrate", *overrides]))
    with pytest.raises(ConfigError) as info:
        validate(exp)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_an_unreachable_design_runs_when_allowed_and_says_its_checks_are_unchecked(make_exp):
    exp = make_exp()
    exp.synth.instructions = dict(TOOLS)
    lines: list[str] = []
    cal, _ = calibrate(exp, None, "calibrate.test=wilcoxon", "calibrate.allow_underpowered=true", lines=lines)
    assert cal.aa.status == cal.control.status == "unreachable" and cal.passed
    assert "UNCHECKED: 4 tasks cannot reach alpha" in "\n".join(lines)


def test_the_cli_refuses_an_unreachable_calibration_in_one_line_and_writes_nothing(tmp_path):
    results = tmp_path / "fresh-results"
    env = {"PATH": "/usr/bin:/bin", "HARNESS_RESULTS_DIR": str(results), "DDGS_DISABLED": "1"}
    proc = subprocess.run([sys.executable, "-m", "experiments.run", "+sweep=calibrate", "backend=fake",
                           "calibrate.test=wilcoxon", f"results_dir={results}"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("config error: calibrate: over 4 task(s) with test=wilcoxon")
    assert not results.exists()


def test_a_runner_without_rescore_is_refused_before_anything_runs(make_exp):
    exp = make_exp()

    class NoRescore:
        def __init__(self, tasks):
            self.inner = ScriptedRunner(tasks)

        def __getattr__(self, name):
            if name == "rescore":
                raise AttributeError(name)
            return getattr(self.inner, name)

    runner = NoRescore(load_tasks(exp.benchmark))
    with pytest.raises(TypeError, match=r"has no rescore\(prepared, text") as info:
        run_calibration(cal_exp(exp), runner, out=lambda s: None)
    assert "\n" not in str(info.value) and runner.inner.prepares == 0
    assert not (Path(exp.results_dir) / "calibration").exists()


def test_a_failed_task_run_stops_the_calibration_and_stores_nothing(make_exp):
    exp = make_exp(mlflow=True)
    with pytest.raises(CalibrationFailed) as info:
        calibrate(exp, None, "calibrate.harmful_instruction=CRASH now")  # the control's runs fail
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("calibration stopped in positive control 1/1") and "nothing stored" in msg
    assert not (Path(exp.results_dir) / "calibration").exists()
    from mlflow.tracking import MlflowClient

    from experiments.config import tracking_uri

    assert MlflowClient(tracking_uri(exp)).get_experiment_by_name("calibrate") is None


# -- power by simulation -------------------------------------------------------------------------------------------


def test_the_wilcoxon_shortcut_gives_the_stats_module_decision_row_by_row():
    import numpy as np

    from experiments.stats import wilcoxon_test

    for alternative in ("greater", "two-sided", "less"):
        for n in (6, 9, 55):
            d = 0.3 + np.asarray(_normals(200, n, 3))
            direct = np.array([wilcoxon_test(row, alternative=alternative).pvalue < 0.05 for row in d])
            assert (wilcoxon_reject(d, 0.05, alternative=alternative) == direct).all()


def test_mde_is_where_detection_reaches_the_power_and_matches_the_t_formula_for_the_t_test():
    from scipy import stats as sps

    d = Design("t", 10, 0.5, 0.05, "greater", "t")
    m = mde(d, power=0.8, sims=4000)
    assert detection_rate(d, m, sims=4000) >= 0.8 > detection_rate(d, m * 0.97, sims=4000)
    formula = (sps.t.ppf(0.95, 9) + sps.t.ppf(0.8, 9)) * 0.5 / math.sqrt(10)  # normal approximation, t-corrected
    assert m == pytest.approx(formula, rel=0.05)
    assert detection_rate(d, 0.0, sims=4000) <= 0.06  # no effect: alpha
    assert mde(Design("w", 3, 0.5, 0.05, "greater", "wilcoxon")) == math.inf  # 1/8 >= 0.05: unreachable
    sweep_d = Design("sweep", 8, 0.5, 0.05, "greater", "wilcoxon", 2.0)
    n = tasks_for_effect(sweep_d, 0.4)
    assert mde(dataclasses.replace(sweep_d, n=n)) <= 0.4 < mde(dataclasses.replace(sweep_d, n=n - 1))


# -- preflight -----------------------------------------------------------------------------------------------------


def test_preflight_projects_cost_and_warns_when_a_cap_allows_few_proposals():
    exp = to_experiment(compose_config(["+sweep=synth_mutation", "sweep.n_trials=20", "sweep.max_llm_calls=180"]))
    cost = Cost(llm_calls=10, uncached_calls=5, tokens=1000, wall_s=120.0)
    p = project_sweep(exp, finished=0, baseline_done=False, repeats_left=1, holdout_left=8, cost=cost,
                      source="calibration x", mutation_calls=2)
    # baseline + 1 repeat on 12 train tasks = 24 runs = 120 calls; each proposal 12 x 5 + 2 = 62 calls: 60 left ->
    # 1 proposal started
    assert (p.proposals, p.limited_by) == (1, "max_llm_calls=180")
    assert p.task_runs == 24 + 1 * 12 + 8 and p.llm_calls == p.task_runs * 5 + 1 * 2
    assert p.wall_s == p.task_runs * 120.0
    lines = preflight_lines(exp, p, sigma=0.3, baseline_runs=1, noise_source="calibration x")
    assert "WARNING: the budget allows only 1 proposal(s) (limited by max_llm_calls=180)" in lines[-1]
    assert "design power: this design confirms" in lines[2] and "12 train tasks" in lines[2]  # the design's figure
    exp.sweep.max_llm_calls, exp.sweep.timeout_s = None, 3600.0
    p = project_sweep(exp, finished=0, baseline_done=True, repeats_left=0, holdout_left=0, cost=cost, source="x")
    assert (p.proposals, p.limited_by) == (3, "timeout_s=3600")  # 12 x 120 s per trial: 2.5 -> 3 started
    exp.sweep.timeout_s = None
    p = project_sweep(exp, finished=1, baseline_done=True, repeats_left=0, holdout_left=0, cost=None, source="none")
    assert p.proposals == 19 and p.llm_calls is None
    assert not any("WARNING" in ln for ln in preflight_lines(exp, p, sigma=None, baseline_runs=2, noise_source="-"))


def test_ab_preflight_reads_the_stored_calibration(make_exp):
    exp = make_exp()
    exp.synth.instructions = dict(TOOLS)
    cal, runner = calibrate(exp)
    tasks = load_tasks(exp.benchmark)
    exp.ab.min_effect = 0.05
    lines = ab_preflight_lines(exp, runner.identity(), tasks, n_tasks=12, replications=2)
    assert lines[0] == "preflight: A/B 12 tasks x 2 arms x 2 replication(s) = 48 task runs"
    assert f"from calibration {cal.key}" in lines[1] and "detectable effect" in lines[2]
    assert "WARNING: the pre-registered minimum effect 0.05" in lines[3]
    other = ab_preflight_lines(exp, ScriptedRunner(tasks, model="x").identity(), tasks, n_tasks=12)
    assert "cost and detectable effect unknown" in other[1]


# -- the real harness's rescore ------------------------------------------------------------------------------------


def test_harness_runner_rescore_scores_a_fixed_text_with_the_evaluator_alone(tmp_path):
    from pipeline_fake import Router, judge_json, make_harness, numbered

    from evaluators.composite import evaluate
    from experiments.runs import HarnessRunner

    router = Router(judge=[judge_json(7), judge_json(4)])
    h = make_harness(tmp_path, router)
    prepared = h.prepare("List 5 best practices for asyncio")
    runner = HarnessRunner(h.cfg, h.roles)
    before = dict(router.calls)
    text = numbered(5)
    o = runner.rescore(prepared, text, criteria={"required_terms": ["gather"]}, seed=11)
    # the re-score and the loop judge's verdict on the same text (harness.review.verify_rescore); they agree: no more
    assert o.ok and o.rescored and o.output_text == text and o.usage.llm_calls == 2
    assert {k: v - before.get(k, 0) for k, v in router.calls.items() if v != before.get(k, 0)} == {"judge": 2}
    assert "relevance" in o.dimensions and "det_terms" in o.dimensions
    router2 = Router(judge=[judge_json(7)])
    h2 = make_harness(tmp_path / "b", router2)
    ev = evaluate(prepared.clean_task, text, h2.roles.evaluator, h.cfg.evaluator, expected_count=5,
                  required_terms=("gather",), sources=prepared.research.sources, task_type=prepared.plan.task_type)
    assert o.score == pytest.approx(ev.composite)


def test_the_calibration_re_scores_with_the_judge_behind_a_run_s_score(tmp_path):
    """A run's score is the verify re-score, a sample at evaluator.rescore_temperature when the loop's judge is
    greedy; the calibration's judge re-scores must be that judgement (they judged at temperature 0 before, so every
    re-score repeated the first and the judge noise was 0 by construction)."""
    import dataclasses

    from pipeline_fake import Router, judge_json, make_harness, numbered

    from experiments.runs import HarnessRunner

    h = make_harness(tmp_path, Router(judge=[judge_json(7)]))
    assert h.cfg.evaluator.temperature == 0 and h.cfg.evaluator.rescore
    prepared = h.prepare("List 5 best practices for asyncio")
    llm = h.roles.evaluator.inner  # the FakeLLM behind the role: it records each call's temperature and seed
    runner = HarnessRunner(h.cfg, h.roles)
    n = len(llm.calls)
    assert runner.rescore(prepared, numbered(5), seed=11).ok
    # the re-score, then the loop judge's verdict on the same text (greedy) that decides whether a tie-break is asked
    assert [c.temperature for c in llm.calls[n:]] == [h.cfg.evaluator.rescore_temperature, 0.0]

    finished = h.finish(prepared, instructions={}, run_id="r1")  # the run's own verify re-score judges alike
    assert finished.score is not None
    verify = [c.temperature for c in llm.calls if c.seed is not None and c.seed >= h.cfg.seed + 1_000_003]
    assert verify and set(verify) == {h.cfg.evaluator.rescore_temperature}

    off = dataclasses.replace(h.cfg, evaluator=dataclasses.replace(h.cfg.evaluator, rescore=False))
    n = len(llm.calls)
    assert HarnessRunner(off, h.roles).rescore(prepared, numbered(5), seed=11).ok
    assert [c.temperature for c in llm.calls[n:]] == [0.0]  # no verify re-score: a run's score is the loop's judge


def test_the_entry_point_dispatches_calibrate_and_a_failed_check_is_not_a_success(make_exp):
    from experiments.run import run_experiment

    exp = make_exp()  # plain baseline: the 'harmful' instruction does not hurt, so the control fails
    c = cal_exp(exp)
    lines: list[str] = []
    result = run_experiment(c, runner=ScriptedRunner(load_tasks(c.benchmark)), out=lines.append)
    assert result.failed_out and result.stop_reason.startswith("calibration checks failed: positive control")
    assert any(CALIBRATION_BEGIN in ln for ln in lines)


# -- the label: which model file, and whether a calibration showed its judge discriminates ------------------------


EMBEDDED = {"producer": {"backend": "embedded", "model": "qwen-1.5b", "file": "qwen-1.5b.gguf", "sha256": "ab"},
            "evaluator": {"backend": "embedded", "model": "qwen-1.5b", "file": "qwen-1.5b.gguf", "sha256": "ab"}}


def test_label_names_the_file_and_stays_smoke_unless_the_judge_detected_the_control(make_exp):
    import dataclasses

    from experiments.storage import Check, run_label

    exp = make_exp()
    exp.synth.instructions = dict(TOOLS)
    cal, _ = calibrate(exp)
    # the scripted world's harmful instruction lowers every dimension: the rubric alone detects it
    assert cal.judge_control is not None and cal.judge_control.status == "pass" and cal.judge_discriminates
    assert run_label({"producer": {"backend": "scripted", "model": "x"}}, cal) is None  # no embedded role
    assert run_label(EMBEDDED) == "SMOKE RUN (embedded qwen-1.5b.gguf): structure check only, not research quality"
    assert run_label(EMBEDDED, cal).startswith(
        f"EMBEDDED MODEL (qwen-1.5b.gguf): its judge discriminates per calibration {cal.key} (positive control on "
        "the rubric: diff ")
    # the control detected by the deterministic criteria alone says nothing about the judge: still a smoke run
    blind = dataclasses.replace(cal, judge_control=Check("judge on the positive control", "t", "less", 4, 0.0, 0.6,
                                                         0.0, "fail"))
    assert blind.control.status == "pass" and not blind.judge_discriminates
    assert run_label(EMBEDDED, blind).startswith("SMOKE RUN (embedded qwen-1.5b.gguf)")
    stored = json.loads(Path(cal.path).read_text())
    from experiments.storage import Calibration

    assert Calibration.from_dict(stored).judge_control == cal.judge_control  # stored and read back


def test_a_deterministic_evaluator_has_no_judge_to_calibrate(make_exp):
    exp = make_exp("evaluator=deterministic_only")
    exp.synth.instructions = dict(TOOLS)
    cal, _ = calibrate(exp, None, "evaluator=deterministic_only")
    assert cal.judge_control is None and not cal.judge_discriminates


def test_the_reported_mde_is_predictive_over_sigmas_uncertainty(make_exp):
    """A known-sigma MDE planted at each calibration's own estimate was detected 69% of the time with 4 df (a small
    sample's sigma is more often low): the calibration reports the MDE with power averaged over the sigma its
    estimate allows, which bench/power/calibration_sim.py measures at ~0.79 (4 df) and ~0.82 (12 df)."""
    import dataclasses

    from experiments.stats import sweep_design

    known = sweep_design(0.5, 8, alpha=0.05)
    few, many = dataclasses.replace(known, sigma_df=4), dataclasses.replace(known, sigma_df=400)
    assert mde(few) > 1.05 * mde(known)  # little information about sigma: a larger effect is needed for power 0.8
    assert mde(many) == pytest.approx(mde(known), rel=0.05)  # a well-measured sigma: the known-sigma answer
    assert detection_rate(few, mde(few)) >= 0.8
    exp = make_exp()
    exp.synth.instructions = dict(TOOLS)
    cal, _ = calibrate(exp)
    df = cal.n_tasks * (cal.repeats - 1)
    stored = cal.mde["sweep"]["mde"]
    assert stored == pytest.approx(mde(dataclasses.replace(sweep_design(cal.sigma, 8, alpha=0.05), sigma_df=df)))
    assert stored > mde(sweep_design(cal.sigma, 8, alpha=0.05))


# -- effects that vary across tasks --------------------------------------------------------------------------------


def test_a_spread_effect_needs_more_tasks_and_a_large_spread_has_no_mde_on_few_tasks():
    from experiments.stats import sweep_design

    uniform = sweep_design(0.3, 8, alpha=0.05)
    mild, wild = dataclasses.replace(uniform, effect_cv=0.5), dataclasses.replace(uniform, effect_cv=1.3)
    assert detection_rate(mild, 0.0) == detection_rate(uniform, 0.0)  # no effect, no spread: the false positives
    assert mde(uniform) < mde(mild) < math.inf
    assert detection_rate(mild, mde(mild)) >= 0.8 > detection_rate(mild, mde(mild) * 0.95)
    # a spread of 1.3x the effect: some tasks lose however large the mean gain, so 8 tasks never reach power 0.8
    assert detection_rate(wild, 1e4) < 0.8 and mde(wild) == math.inf
    n = tasks_for_effect(wild, 0.5)
    assert n is not None and n > 8 and mde(dataclasses.replace(wild, n=n)) <= 0.5
    assert tasks_for_effect(mild, 0.5) <= n


def test_heterogeneity_removes_the_noise_share_of_the_spread():
    from experiments.stats import heterogeneity

    # the 1.5B model's subtle control (docs/BENCHMARKS.md): -3.93, -4.45, -2.87, +2.03 with noise sigma 0.203
    h = heterogeneity([-3.93, -4.45, -2.87, 2.03], 0.203 ** 2 * (1 / 1 + 1 / 2))
    assert h["mean"] == pytest.approx(-2.305) and h["sd"] == pytest.approx(2.964, abs=1e-3)
    assert h["tau"] == pytest.approx(math.sqrt(h["sd"] ** 2 - 0.203 ** 2 * 1.5)) and h["effect_cv"] == pytest.approx(1.28, abs=0.01)
    same = heterogeneity([-1.0, -1.1, -0.9, -1.0], 0.3 ** 2)  # spread below the noise's: no heterogeneity left
    assert same["tau"] == 0.0 and same["effect_cv"] == 0.0
    assert heterogeneity([-1.0, 1.0], 0.1) is None and heterogeneity([1.0, -1.0, 0.0], 0.1) is None


class SpreadRunner(ScriptedRunner):
    """The harmful instruction (the shipped refusal) costs 3 points on most tasks and gains 1 on every fourth."""

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
        out = super().finish(prepared, instructions=instructions, run_id=run_id, criteria=criteria, seed=seed)
        if out.ok and "cannot help with it" in instructions[prepared["task_type"]].lower():
            shift = 1.0 if int(prepared["task"].split()[-1]) % 4 == 3 else -3.0
            out = dataclasses.replace(out, score=out.score + shift, dimensions={"depth": out.score + shift})
        return out


def test_the_calibration_reports_the_controls_spread_and_sizes_designs_with_it(make_exp):
    # seed 2: its A/A passes (seed 0's fails at p 0.04 with the calibration's own generator seeds, as any seed's does
    # 5% of the time), so the sweep below uses the calibration; the A/A is not what this test is about
    exp = make_exp("seed=2")
    tasks = load_tasks(exp.benchmark)
    assert all(t.task.split()[-1].isdigit() for t in tasks)  # SpreadRunner keys on the task's number
    lines: list[str] = []
    cal, _ = calibrate(exp, SpreadRunner(tasks), "calibrate.tasks=8", "seed=2", lines=lines)
    assert cal.passed
    h = cal.heterogeneity
    assert h["n"] == 8 and h["tau"] > 1.0 and h["effect_cv"] > 0.5 and 0.5 < h["control_power"] <= 1.0
    assert cal.mde["sweep_spread"]["effect_cv"] == pytest.approx(h["effect_cv"])
    assert cal.mde["sweep_spread"]["mde"] > cal.mde["sweep"]["mde"]
    spread_need, need = cal.needed["sweep_train_tasks_spread"], cal.needed["sweep_train_tasks"]
    assert spread_need is None or spread_need > need
    text = "\n".join(lines)
    assert "effect spread (positive control, 8 tasks, a rough estimate)" in text
    assert "for an effect that varies as much: sweep" in text
    stored = json.loads(Path(cal.path).read_text())
    assert stored["heterogeneity"]["tau"] == pytest.approx(h["tau"])
    # a sweep on this fingerprint sizes its design power with that spread before the first trial (issue 52 A7: the
    # design's one figure, with the control's tau, in place of a Wilcoxon figure for a rule it does not run)
    out: list[str] = []
    exp.sweep.n_trials = 1
    sweep(exp, SpreadRunner(tasks), lines=out)
    assert any("preflight: design power:" in ln and f"tau {h['tau']:.3f} from calibration {cal.key}'s positive "
               f"control (8 tasks)" in ln for ln in out)
    # a uniform control: no spread beyond noise, the two MDEs agree
    exp2 = make_exp()
    exp2.synth.instructions = dict(TOOLS)
    cal2, _ = calibrate(exp2)
    assert cal2.heterogeneity["effect_cv"] < 0.3
