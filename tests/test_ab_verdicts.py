"""Verdicts a user can trust: one metric through the whole A/B, designs that cannot answer refused up front,
and the backend pinned to the pre-registration."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.ab._cells import ABDesign
from experiments.ab._run import run_ab
from experiments.ab import check_ab_design
from experiments.ab._cells import PreregistrationMismatch, prereg_path
from experiments.ab._design import ab_metrics
from experiments.ab._entry import run_ab_from_config, summary_metrics
from experiments.ab._report import REPORT_NAME
from experiments.config import ConfigError, compose_config, to_experiment
from experiments.stats import Preregistration
from harness.stores import read_jsonl

ON, OFF = "prior_knowledge_on", "prior_knowledge_off"


def _exp(*overrides: str):
    return to_experiment(compose_config(["+sweep=prior_knowledge_ab", "backend=fake", *overrides]))


class SplitVerdictArm:
    """run_arm double (the seam's dict: score, dimensions, secondary, status): arm B (the prior-knowledge pass
    skipped, or overrides {"b": True}) is better on the composite by `composite` and worse on depth by `depth`."""

    def __init__(self, composite: float = 1.0, depth: float = 1.0, sd: float = 0.1, interrupt_after: int | None = None):
        self.composite, self.depth, self.sd, self.interrupt_after = composite, depth, sd, interrupt_after
        self.calls: list[tuple[str, str, int]] = []

    def __call__(self, arm, overrides, task, replication, seed):
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt
        tid = task if isinstance(task, str) else task.id
        self.calls.append((tid, arm, replication))
        b = bool(overrides.get("planner.skip_prior_knowledge", overrides.get("b", False)))
        rng = np.random.default_rng([seed, int(b)])
        base = 5.0 + (sum(map(ord, tid)) % 7) / 3
        return {
            "status": "ok",
            "error": None,
            "score": base + (self.composite if b else 0.0) + rng.normal(0, self.sd),
            "dimensions": {"depth": base - (self.depth if b else 0.0) + rng.normal(0, self.sd),
                           "structure": 6.0 + rng.normal(0, self.sd)},
            "secondary": {"search_calls": 3 + b, "tokens": 1000 - 100 * b, "wall_s": 1.0, "gaps": 2 - 2 * b},
        }


# -- (a) one metric: statistics, interim looks, per-task table, plots and verdict all on the pre-registered one --


def test_preregistered_dimension_drives_primary_stats_interim_looks_and_verdict(tmp_path):
    # Fails on the experiments/ab/ of 76958cb (HEAD before this change, ab.py as in 72dcb4e): there the primary
    # statistics and the interim looks were the composite ("score", B better by +1, so look 1 stopped for efficacy),
    # only relabelled, while the verdict read depth.
    tasks = tuple(f"task-{i}" for i in range(8))
    prereg = Preregistration("the pass makes answers deeper", metric="depth", min_effect=0.5, alpha=0.05,
                             direction="greater", n_tasks=8, replications=2, sequential=2, test="wilcoxon")
    design = ABDesign(tasks=tasks, arms={"a": {"b": False}, "b": {"b": True}}, replications=2, seed=3)
    ledger = tmp_path / "ab.jsonl"
    result = run_ab(design, prereg, SplitVerdictArm(composite=1.0, depth=1.0), ledger_path=ledger)

    assert result.primary.metric == "depth"
    assert result.primary.mean_diff == pytest.approx(-1.0, abs=0.2)  # depth: B worse (the composite says better)
    assert all(t.diff < 0 for t in result.tasks)  # the per-task table (and the paired-diff plot) show depth
    looks = [r for r in read_jsonl(ledger) if r["kind"] == "look"]
    assert looks and all(lk["mean"] < 0 for lk in looks)  # interim looks tested depth
    # depth's CI lies below the minimum effect at look 1: stop for futility (the composite would stop for efficacy)
    assert result.decision is not None and result.decision.action == "stop_futility" and result.primary.n == 4
    assert result.verdict == "not supported" and "minimum effect" in result.verdict_reason
    assert result.stats_for("depth") is result.primary  # the verdict's statistics are the primary ones
    # the Holm family keeps depth, with the same data and bootstrap as the primary, but its own adjusted p
    fam = result.dimensions["depth"]
    assert fam.diffs == result.primary.diffs and fam.ci == result.primary.ci and "structure" in result.dimensions


def test_preregistered_secondary_metric_is_the_primary(tmp_path):
    prereg = Preregistration("skipping the pass saves tokens", metric="tokens", min_effect=50, direction="less",
                             n_tasks=8, replications=1, test="t")
    design = ABDesign(tasks=tuple(f"t{i}" for i in range(8)), arms={"a": {}, "b": {"b": True}}, replications=1)
    result = run_ab(design, prereg, SplitVerdictArm(), ledger_path=tmp_path / "ab.jsonl")
    assert result.primary.metric == "tokens" and result.primary.mean_diff == pytest.approx(-100)
    assert result.verdict == "supported", result.verdict_reason


def test_depth_ab_summary_report_and_mlflow_metrics_name_the_metric(_isolated_results):
    lines: list[str] = []
    exp = _exp("benchmark=asyncio_practices", "ab.metric=depth", "ab.replications=1", "ab.direction=greater",
               "mlflow.enabled=false")
    run = run_ab_from_config(exp, run_arm=SplitVerdictArm(), out=lines.append)
    r = run.result
    assert r.primary.metric == "depth" and r.primary.n == 24 and r.primary.mean_diff < 0
    assert r.verdict == "not supported" and "opposite direction" in r.verdict_reason
    summary = run.summary.splitlines()
    assert "primary metric: depth (rubric dimension, pre-registered)" in run.summary
    diff_line = next(ln for ln in summary if "diff (B-A)" in ln)
    assert diff_line.startswith("depth: ") and f"{r.primary.mean_diff:+.3f}" in diff_line
    assert next(ln for ln in summary if "Wilcoxon p=" in ln).startswith("depth: ")
    m = summary_metrics(r)
    assert m["primary.depth.mean_diff"] == pytest.approx(r.primary.mean_diff)
    assert not any(k.startswith("primary.composite") for k in m) and "mean_diff" not in m
    report = (run.paths.dir / REPORT_NAME).read_text()
    assert "## Per-task depth" in report and "## Statistics: depth (primary)" in report
    assert "Primary metric: `depth` (rubric dimension, pre-registered)" in report


# -- (b) metric names checked before anything runs ---------------------------------------------------------------


def _nothing_written(results, tmp_path) -> None:
    assert list(results.iterdir()) == []  # no ab/<name>/ folder, ledger, pre-registration or outputs
    assert not (tmp_path / "mlflow.db").exists()  # no MLflow run (MLFLOW_TRACKING_URI points here)


def test_misspelt_metric_is_refused_in_one_line_before_anything_is_written(_isolated_results, tmp_path):
    arm = SplitVerdictArm()
    with pytest.raises(ConfigError) as info:
        run_ab_from_config(_exp("benchmark=asyncio_practices", "ab.metric=dpeth"), run_arm=arm, out=lambda _: None)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("ab.metric='dpeth' is not allowed; expected one of: composite, ")
    for name in ("depth", "relevance", "det_count", "det_terms", "det_structure", "det_specificity",
                 "det_grounding", "search_calls", "tokens", "wall_s", "gaps"):
        assert name in msg.split("expected one of: ")[1].split(", ")
    assert arm.calls == []
    _nothing_written(_isolated_results, tmp_path)


@pytest.mark.parametrize(
    "overrides, ok",
    [
        (["ab.metric=composite"], True),
        (["ab.metric=depth"], True),
        (["ab.metric=det_grounding"], True),
        (["ab.metric=gaps"], True),
        (["ab.metric=score"], False),  # the cells' field name, not a metric name one pre-registers
        (["ab.metric=det_depth"], False),
        (["evaluator=deterministic_only", "ab.metric=det_count"], True),
        (["evaluator=deterministic_only", "ab.metric=depth"], False),  # no rubric runs
    ],
)
def test_metric_names_follow_the_evaluator(overrides, ok):
    exp = _exp("benchmark=asyncio_practices", *overrides)
    if ok:
        check_ab_design(exp)
        assert exp.ab.metric in ab_metrics(exp)
        return
    with pytest.raises(ConfigError, match=rf"^ab\.metric='{exp.ab.metric}' is not allowed") as info:
        check_ab_design(exp)
    assert exp.ab.metric not in ab_metrics(exp)
    if exp.evaluator.composite == "deterministic":
        assert "no rubric runs" in str(info.value) and not set(exp.evaluator.dimensions) & set(ab_metrics(exp))


def test_the_command_line_check_refuses_a_misspelt_metric():
    from experiments.run import checked  # config.validate, then the A/B's design (check_ab_design)

    with pytest.raises(ConfigError, match=r"^ab\.metric='dpeth' is not allowed"):
        checked(_exp("benchmark=asyncio_practices", "ab.metric=dpeth"))


# -- (c) designs that cannot reach alpha are refused unless allowed ---------------------------------------------


def test_underpowered_design_is_refused_before_anything_is_written_and_runs_when_allowed(_isolated_results, tmp_path):
    arm = SplitVerdictArm()
    with pytest.raises(ConfigError) as info:
        run_ab_from_config(_exp("benchmark=smoke", "ab.replications=1", "ab.test=wilcoxon"), run_arm=arm,
                           out=lambda _: None)
    msg = str(info.value)
    assert msg == ("ab: with 5 task pairs (benchmark 'smoke', ab.split=all) the smallest exact two-sided Wilcoxon p "
                   "is 0.0625 >= alpha 0.05: 'supported' is unreachable; use a benchmark with >= 6 tasks "
                   "(benchmark=asyncio_practices has 24), or ab.allow_underpowered=true")
    assert arm.calls == []
    _nothing_written(_isolated_results, tmp_path)

    lines: list[str] = []
    run = run_ab_from_config(_exp("benchmark=smoke", "ab.replications=1", "ab.test=wilcoxon",
                                  "ab.allow_underpowered=true", "mlflow.enabled=false"), run_arm=arm, out=lines.append)
    assert len(arm.calls) == 10 and run.result.primary.n == 5
    assert any("note: with 5 task pairs the smallest exact two-sided Wilcoxon p is 0.0625" in ln for ln in lines)


@pytest.mark.parametrize(
    "overrides, refused",
    [
        (["benchmark=smoke", "ab.test=wilcoxon"], "5 task pairs"),
        (["benchmark=smoke", "ab.test=wilcoxon", "ab.split=train"], "3 task pairs (benchmark 'smoke', ab.split=train)"),
        (["benchmark=asyncio_practices", "ab.test=wilcoxon", "ab.split=holdout"], None),  # 8 holdout pairs: smallest p 2/256
        (["benchmark=smoke", "ab.test=wilcoxon", "ab.alpha=0.07"], None),  # 0.0625 < 0.07
        # the t's p is never below the exact sign-flip floor 2/2^n (0.0625 at 5 pairs): refused like the Wilcoxon
        (["benchmark=smoke", "ab.test=t"], "5 task pairs"),
        (["benchmark=smoke", "ab.sequential=true"], "5 task pairs"),
        (["benchmark=asyncio_practices"], None),  # the default A/B: 24 tasks
    ],
)
def test_reachability(overrides, refused):
    exp = _exp(*overrides)
    if refused is None:
        check_ab_design(exp)
        return
    with pytest.raises(ConfigError, match=r"'supported' is unreachable") as info:
        check_ab_design(exp)
    assert refused in str(info.value)


# -- (d) the backend is part of the pre-registration --------------------------------------------------------------


def _roles(model: str):
    from harness.inference._fake import FakeLLM
    from harness.inference._roles import fake_roles

    return fake_roles(FakeLLM(model=model))


def test_resume_on_another_model_is_refused_listing_the_field(_isolated_results):
    exp = _exp("benchmark=asyncio_practices", "ab.replications=1", "mlflow.enabled=false")
    first = SplitVerdictArm(interrupt_after=5)
    with pytest.raises(KeyboardInterrupt):
        run_ab_from_config(exp, run_arm=first, roles=_roles("model-1"), out=lambda _: None)
    saved = json.loads(prereg_path(_isolated_results / "ab" / "prior_knowledge_ab" / "ledger.jsonl").read_text())
    assert saved["backend"][ON]["producer"] == {"backend": "fake", "model": "model-1"}
    assert set(saved["backend"]) == {ON, OFF}

    other = SplitVerdictArm()
    with pytest.raises(PreregistrationMismatch) as info:
        run_ab_from_config(exp, run_arm=other, roles=_roles("model-2"), out=lambda _: None)
    msg = str(info.value)
    assert f"backend.{ON}.producer.model: model-1 -> model-2" in msg and "cannot change mid-test" in msg
    assert "new sweep.name" in msg and other.calls == []

    same = SplitVerdictArm()
    run = run_ab_from_config(exp, run_arm=same, roles=_roles("model-1"), out=lambda _: None)
    assert len(same.calls) == 48 - 5 and run.result.cells_skipped == 5


def test_prereg_without_a_backend_is_accepted_and_then_records_it(tmp_path):
    from experiments.ab._cells import write_or_check_prereg

    design = ABDesign(tasks=("t1", "t2"), arms={"a": {}, "b": {"b": True}}, replications=1)
    prereg = Preregistration("h", n_tasks=2, replications=1)
    ledger = tmp_path / "ab.jsonl"
    path = write_or_check_prereg(prereg, design, ledger)  # an older file: no backend field
    assert "backend" not in json.loads(path.read_text())
    ident = {"a": {"producer": {"backend": "ollama", "model": "qwen", "digest": "sha256:1"}}, "b": {}}
    write_or_check_prereg(prereg, design, ledger, backend=ident)  # "not recorded": accepted, recorded now
    saved = json.loads(path.read_text())
    assert saved["backend"] == ident and "backend_recorded_at" in saved
    changed = {**ident, "a": {"producer": {**ident["a"]["producer"], "digest": "sha256:2"}}}
    with pytest.raises(PreregistrationMismatch, match=r"backend\.a\.producer\.digest: sha256:1 -> sha256:2"):
        write_or_check_prereg(prereg, design, ledger, backend=changed)


# -- (e) issue 31: the direction comes from the test that gives the significance --------------------------------


TWELVE = tuple(f"task-{i:02d}" for i in range(12))


def _outlier_arm(arm, overrides, task, replication, seed):
    """B 0.1 worse than A on 11 of 12 tasks and 5 better on the last: the mean says B better (+0.325), the signed
    ranks say B worse (W+ 12 vs W- 66, two-sided p 0.033)."""
    base = 5.0 + TWELVE.index(task) / 4
    if not overrides.get("b"):
        return {"status": "ok", "score": base}
    return {"status": "ok", "score": base + (5.0 if task == TWELVE[-1] else -0.1)}


def test_a_b_worse_on_11_of_12_tasks_is_never_supported_as_better(tmp_path):
    # Fails on 6cbf984: verdict "supported" (the direction came from the mean, the significance from the
    # two-sided Wilcoxon, which found B lower).
    design = ABDesign(tasks=TWELVE, arms={"previous": {}, "champion": {"b": True}}, replications=1)
    prereg = Preregistration("the champion scores higher", min_effect=0.3, direction="greater", n_tasks=12,
                             replications=1, test="wilcoxon")
    result = run_ab(design, prereg, _outlier_arm, ledger_path=tmp_path / "ab.jsonl")
    s = result.primary
    assert s.mean_diff == pytest.approx(0.325) and s.wilcoxon.pvalue == pytest.approx(0.0332, abs=1e-4)
    assert (s.wilcoxon.w_plus, s.wilcoxon.w_minus) == (12.0, 66.0)
    assert result.verdict == "not supported", result.verdict_reason
    assert "significant in the opposite direction (W+ 12 vs W- 66" in result.verdict_reason

    for direction in ("two-sided", "less"):  # the test and the mean disagree: no direction can be claimed
        other = Preregistration("the champion changes the score", min_effect=0.3, direction=direction, n_tasks=12,
                                replications=1)
        again = run_ab(design, other, _outlier_arm, ledger_path=tmp_path / f"{direction}.jsonl")
        assert again.verdict == "inconclusive" and "points the other way" in again.verdict_reason


def test_the_t_test_takes_its_direction_from_t(tmp_path):
    design = ABDesign(tasks=TWELVE, arms={"previous": {}, "champion": {"b": True}}, replications=1)
    prereg = Preregistration("h", min_effect=0.3, direction="greater", n_tasks=12, replications=1, test="t")
    result = run_ab(design, prereg, _outlier_arm, ledger_path=tmp_path / "ab.jsonl")
    assert result.primary.ttest.pvalue > 0.4 and result.verdict == "inconclusive"  # t: not significant at all


# -- (f) issue 31: a failure is an outcome of its arm ---------------------------------------------------------------


class HardTaskFailures:
    """run_arm double: B scores 0.8 above A on the 8 easy tasks and fails on the 4 hard ones (the last four), as an
    arm that breaks on hard tasks does; `judge_failures` per arm are reported in the cells (the seam's field)."""

    def __init__(self, fail_hard: bool = True, judge_failures: tuple[int, int] = (0, 0)):
        self.fail_hard, self.judge_failures = fail_hard, judge_failures
        self.calls: list[tuple[str, str, int]] = []

    def __call__(self, arm, overrides, task, replication, seed):
        self.calls.append((task, arm, replication))
        b = bool(overrides.get("b"))
        i = TWELVE.index(task)
        if b and self.fail_hard and i >= 8:
            return {"status": "failed", "error": "wiggum loop: the answer never parsed"}
        noise = np.random.default_rng([seed, int(b)]).normal(0, 0.1)
        return {"status": "ok", "score": 6.0 - i / 4 + (0.8 if b else 0.0) + noise,
                "judge_failures": self.judge_failures[int(b)]}


def _failure_design():
    design = ABDesign(tasks=TWELVE, arms={"previous": {}, "champion": {"b": True}}, replications=1)
    prereg = Preregistration("the champion scores higher", min_effect=0.3, direction="greater", n_tasks=12,
                             replications=1)
    return design, prereg


def test_an_arm_that_fails_on_the_hard_tasks_gets_no_verdict_until_the_failures_are_retried(tmp_path):
    # Fails on 6cbf984: verdict "supported" on the 8 pairs that survived, the 4 failed cells of B dropped unchecked.
    design, prereg = _failure_design()
    ledger = tmp_path / "ab.jsonl"
    result = run_ab(design, prereg, HardTaskFailures(), ledger_path=ledger)
    assert result.primary.n == 8 and result.primary.wilcoxon.pvalue < 0.05  # the survivors alone look convincing
    assert result.verdict == "inconclusive", result.verdict_reason
    assert result.failed_cells == {"previous": 0, "champion": 4}
    assert result.verdict_reason.startswith("failed cells differ between arms (previous 0, champion 4; champion "
                                            "failed on task-08, task-09, task-10, task-11)")
    assert "rerun the same command to retry failed cells" in result.verdict_reason
    assert "the rule would say 'supported'" in result.verdict_reason
    m = summary_metrics(result)
    assert (m["failed_cells.champion"], m["failed_cells.previous"], m["judge_failures.champion"]) == (4, 0, 0)

    retry = HardTaskFailures(fail_hard=False)  # a rerun retries only the failed cells; now they run
    again = run_ab(design, prereg, retry, ledger_path=ledger)
    assert sorted(retry.calls) == [(t, "champion", 0) for t in TWELVE[8:]]
    assert again.failed_cells == {"previous": 0, "champion": 0} and again.verdict == "supported"


def test_failures_in_both_arms_alike_leave_the_verdict_to_the_pairs(tmp_path):
    design, prereg = _failure_design()

    def both_fail_on_the_last(arm, overrides, task, replication, seed):
        if task == TWELVE[-1]:
            return {"status": "failed", "error": "backend down"}
        return HardTaskFailures(fail_hard=False)(arm, overrides, task, replication, seed)

    result = run_ab(design, prereg, both_fail_on_the_last, ledger_path=tmp_path / "ab.jsonl")
    assert result.failed_cells == {"previous": 1, "champion": 1} and result.verdict == "supported"


def test_arms_that_differ_in_unreadable_judge_replies_get_no_verdict(tmp_path):
    design, prereg = _failure_design()
    result = run_ab(design, prereg, HardTaskFailures(fail_hard=False, judge_failures=(0, 1)),
                    ledger_path=tmp_path / "ab.jsonl")
    assert result.judge_failures == {"previous": 0, "champion": 12} and result.verdict == "inconclusive"
    assert result.verdict_reason.startswith("judge replies that could not be read differ between arms "
                                            "(previous 0, champion 12)")
    same = run_ab(design, prereg, HardTaskFailures(fail_hard=False, judge_failures=(1, 1)),
                  ledger_path=tmp_path / "same.jsonl")
    assert same.judge_failures == {"previous": 12, "champion": 12} and same.verdict == "supported"


def test_a_ledger_without_judge_failures_counts_none(tmp_path):
    """Cells written before the count existed (or by a runner that keeps it in meta) are read defensively."""
    from experiments.ab._cells import judge_failures_of

    assert judge_failures_of({"status": "ok", "score": 5.0}) == 0
    assert judge_failures_of({"status": "ok", "score": 5.0, "meta": {"judge_failures": 2}}) == 2
    design, prereg = _failure_design()
    result = run_ab(design, prereg, lambda *a: {"status": "ok", "score": 5.0, "judge_failures": -1},
                    ledger_path=tmp_path / "bad.jsonl")
    assert all("judge_failures must be a count" in e["reason"] for e in result.excluded_pairs)


# -- (g) issue 31: the A/B's detectable effect is that of its verdict, min_effect included ----------------------


def test_the_ab_power_model_is_the_verdicts_rule_at_a_true_effect_equal_to_min_effect():
    # On 6cbf984 the model said the design detects an effect of min_effect almost surely (ab_design had no
    # min_effect: P = 1.00) while the verdict called it 'supported' about half the time.
    from experiments.ab._analysis import paired_stats
    from experiments.stats import ab_design, detection_rate, mde, replications_for_effect
    from experiments.stats._verdict import verdict

    sigma, n, reps, min_effect = 0.1, 12, 2, 0.3  # sd of one task's diff: 0.1 (per-task means of 2 runs per arm)
    prereg = Preregistration("B higher", min_effect=min_effect, direction="greater", n_tasks=n, replications=reps)
    rng = np.random.default_rng(31)
    base = 5.0 + np.arange(n) / 4
    worlds = 300
    supported = 0
    for _ in range(worlds):  # the real verdict on per-task means whose true difference is exactly min_effect
        a = base + rng.normal(0, sigma / np.sqrt(reps), n)
        b = base + min_effect + rng.normal(0, sigma / np.sqrt(reps), n)
        supported += verdict(prereg, paired_stats(a, b, n_boot=200)) == "supported"
    observed = supported / worlds
    design = ab_design(sigma, n, alpha=0.05, replications=reps, test="wilcoxon", min_effect=min_effect)
    predicted = detection_rate(design, min_effect)
    assert 0.4 < observed < 0.6 and abs(predicted - observed) < 0.08, (predicted, observed)
    significance_only = detection_rate(ab_design(sigma, n, alpha=0.05, replications=reps, test="wilcoxon"), min_effect)
    assert significance_only > 0.95  # what the model said before: the min_effect condition left out
    m = mde(design, power=0.8, sims=2000)
    assert min_effect < m < min_effect + 0.1 and "mean >= min_effect 0.3" in design.describe()
    # replications to detect a target effect: none can make min_effect itself a likely 'supported'
    assert replications_for_effect(0.5, n, min_effect, alpha=0.05, test="wilcoxon", sims=1000,
                                   min_effect=min_effect) is None
    r = replications_for_effect(0.5, n, 0.5, alpha=0.05, test="wilcoxon", sims=1000, min_effect=min_effect)
    at = lambda k: detection_rate(ab_design(0.5, n, alpha=0.05, replications=k, test="wilcoxon",  # noqa: E731
                                            min_effect=min_effect), 0.5, sims=1000)
    assert r is not None and at(r) >= 0.8 > at(r - 1)


def test_ab_preflight_warns_that_a_true_effect_of_min_effect_is_a_coin_flip(make_exp):
    from scripted_harness import BASE, BOOST, ScriptedRunner

    from experiments.calibration import run_calibration
    from experiments.config import load_tasks
    from experiments.config import validate
    from experiments.ab._preflight import ab_preflight_lines

    exp = make_exp()
    exp.synth.instructions = {k: f"{v} Name a {BOOST} for every point." for k, v in BASE.items()}  # control hurts
    cal = to_experiment(compose_config(["+sweep=calibrate", "backend=fake"]))
    cal.benchmark, cal.synth.instructions, cal.mlflow.enabled = exp.benchmark, dict(exp.synth.instructions), False
    runner = ScriptedRunner(load_tasks(exp.benchmark))
    stored = run_calibration(validate(cal), runner, out=lambda s: None)
    exp.ab.min_effect = 0.3
    lines = ab_preflight_lines(exp, runner.identity(), load_tasks(exp.benchmark), n_tasks=12, replications=2)
    detect = next(ln for ln in lines if "detectable effect" in ln)
    assert ("'supported': two-sided t p < 0.05, the skew-calibrated one-sided p < 0.025 and mean diff >= "
            "min_effect 0.3") in detect  # the A/B default test
    assert f"from calibration {stored.key}" in detect
    warning = next(ln for ln in lines if "WARNING" in ln)
    p = float(warning.split("with probability ")[1].split(" ")[0])
    assert p <= 0.5 and "the pre-registered minimum effect 0.3, as the true effect" in warning
