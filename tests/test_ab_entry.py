"""The A/B entry point: config -> design, arm overrides, resume, MLflow runs, report; the real harness on a fake LLM."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments.ab._design import design_from_config
from experiments.ab._cells import prereg_path
from experiments.ab._design import arm_configs, cell_plan
from experiments.ab._entry import run_ab_from_config
from experiments.ab._report import DIFF_PNG, FOREST_PNG, REPORT_NAME
from experiments.ab._report import AB_BEGIN, AB_END
from experiments.config import ConfigError, compose_config, to_experiment
from experiments.runs import HarnessCells
from experiments.stats import min_attainable_p
from harness.stores import read_jsonl

ON, OFF = "prior_knowledge_on", "prior_knowledge_off"
SMOKE_IDS = ["list-json-modules", "file-handling-tips", "what-is-gil", "list-testing-tools", "logging-tips"]


def _exp(*overrides: str, underpowered_ok: bool = True):
    """The A/B on the 5-task smoke benchmark. Its two-sided exact Wilcoxon cannot reach alpha 0.05 (smallest p
    0.0625), so a Wilcoxon design is refused unless ab.allow_underpowered=true, which these tests set by default."""
    allow = ["ab.allow_underpowered=true"] if underpowered_ok else []
    return to_experiment(compose_config(["+sweep=prior_knowledge_ab", "backend=fake", "benchmark=smoke", *allow,
                                         *overrides]))


class ScriptedArm:
    """run_arm stand-in: score = 5 + task offset - effect (when the prior-knowledge pass is skipped) + noise."""

    def __init__(self, effect: float = 1.0, sd: float = 0.2, interrupt_after: int | None = None, prereg=None):
        self.effect, self.sd, self.interrupt_after, self.prereg = effect, sd, interrupt_after, prereg
        self.calls: list[tuple[str, str, int, int]] = []

    def __call__(self, arm, overrides, task, replication, seed):
        if self.prereg is not None:
            assert self.prereg.exists(), "pre-registration must be written before the first cell"
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.calls.append((task.id, arm, replication, seed))
        skip = overrides.get("planner.skip_prior_knowledge", False)
        rng = np.random.default_rng([seed, int(skip)])
        score = 5.0 + 0.5 * SMOKE_IDS.index(task.id) - (self.effect if skip else 0.0) + rng.normal(0, self.sd)
        return {"score": score, "dimensions": {"depth": score, "structure": 6.0 + rng.normal(0, self.sd)},
                "secondary": {"search_calls": 3 + 2 * skip, "tokens": 1000 - 100 * skip, "wall_s": 1.0,
                              "gaps": 0 if skip else 2},
                "status": "ok", "meta": {"run_id": f"r{len(self.calls)}"}}


# -- config -> design ------------------------------------------------------------------------------------------


def test_config_maps_to_design_and_preregistration():
    exp = _exp("ab.replications=3", "seed=7", "ab.alpha=0.1", "ab.min_effect=0.5", "ab.direction=less")
    design, prereg = design_from_config(exp)
    assert list(design.task_ids) == SMOKE_IDS
    assert design.replications == 3 and design.seed == 7
    assert design.arms == {ON: {"planner.skip_prior_knowledge": False}, OFF: {"planner.skip_prior_knowledge": True}}
    assert design.arm_names == (ON, OFF)
    assert (prereg.n_tasks, prereg.replications, prereg.alpha, prereg.min_effect) == (5, 3, 0.1, 0.5)
    assert (prereg.metric, prereg.direction, prereg.test, prereg.sequential) == ("composite", "less", "t", 0)
    assert "prior-knowledge pass" in prereg.hypothesis and "\n" not in prereg.hypothesis
    assert len(cell_plan(design)) == 5 * 3 * 2 and len(set(cell_plan(design))) == 30

    _, seq = design_from_config(_exp("ab.sequential=true", "ab.looks=2"))
    assert seq.sequential == 2
    train, _ = design_from_config(_exp("ab.split=train"))
    assert list(train.task_ids) == SMOKE_IDS[:3]


def test_arm_overrides_reach_the_harness_config():
    exp = _exp("research.reuse_cache=true", "wiggum.max_rounds=2")
    cfgs = HarnessCells(arm_configs(exp)).cfgs
    assert cfgs[ON].planner.skip_prior_knowledge is False and cfgs[OFF].planner.skip_prior_knowledge is True
    assert cfgs[ON].planner.prior_knowledge_enabled and not cfgs[OFF].planner.prior_knowledge_enabled
    for cfg in cfgs.values():
        assert cfg.memory.frozen is True  # memory frozen for the test
        assert cfg.research.reuse_cache is False  # no research shared between arms through the cache
        assert cfg.wiggum.max_rounds == 2  # the base config's other settings stay
        assert cfg.output_dir.endswith("ab/prior_knowledge_ab/outputs")
    assert exp.planner.skip_prior_knowledge is False  # the base is untouched


def test_synth_variants_can_be_compared_from_the_command_line():
    exp = _exp("ab.a={synth:concise}", "ab.b={synth:grounded,wiggum.max_rounds:1}", "ab.a_name=concise",
               "ab.b_name=grounded")
    design, _ = design_from_config(exp)
    assert design.arms == {"concise": {"synth": "concise"}, "grounded": {"synth": "grounded", "wiggum.max_rounds": 1}}
    cfgs = HarnessCells(arm_configs(exp)).cfgs
    assert cfgs["concise"].synth.variant == "concise" and cfgs["grounded"].synth.variant == "grounded"
    assert cfgs["concise"].synth.instructions["research"] != cfgs["grounded"].synth.instructions["research"]
    assert cfgs["concise"].wiggum.max_rounds == 3 and cfgs["grounded"].wiggum.max_rounds == 1
    assert cfgs["concise"].planner == cfgs["grounded"].planner  # only the synthesis differs


def test_two_planners_can_be_compared():
    cfgs = HarnessCells(arm_configs(_exp("ab.a={planner:two_pass}", "ab.b={planner:single_pass}"))).cfgs
    assert cfgs[ON].planner.mode == "two_pass" and cfgs[OFF].planner.mode == "single_pass"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["ab.b={planner.nope:1}"], "ab.b (arm prior_knowledge_off): override planner.nope=1 is not valid"),
        (["ab.b={synth:shouty}"], "ab.b (arm prior_knowledge_off): synth=shouty is not an option"),
        (["ab.a={wiggum.max_rounds:many}"], "ab.a (arm prior_knowledge_on): override wiggum.max_rounds='many' is not valid"),
        (["ab.a={}", "ab.b={planner.skip_prior_knowledge:false}"], "give the same harness config"),
        (["ab.hypothesis="], "ab.hypothesis is empty"),
        (["ab.direction=up"], "ab.direction='up' is not allowed"),
        (['ab.a="planner.skip_prior_knowledge"'], "expected 'key=value' pairs"),
    ],
)
def test_bad_arms_give_a_clear_config_error_before_anything_is_written(overrides, message, _isolated_results):
    arm = ScriptedArm()
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run_ab_from_config(_exp(*overrides), run_arm=arm, out=lambda _: None)
    assert arm.calls == [] and not (_isolated_results / "ab").exists()


def test_environment_that_undoes_an_arm_is_an_error(monkeypatch):
    monkeypatch.setenv("HARNESS_SKIP_PRIOR_KNOWLEDGE", "1")
    with pytest.raises(ConfigError, match="did not take effect.*HARNESS_SKIP_PRIOR_KNOWLEDGE"):
        arm_configs(_exp())


# -- running ----------------------------------------------------------------------------------------------------


def _mlflow_runs():
    import os

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("prior_knowledge_ab")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("sweep_parent") == "true"]
    children = [r for r in runs if r.data.tags.get("kind") == "ab_cell"]
    return client, parents, children


def test_interrupted_run_resumes_and_ends_with_report_plots_and_mlflow_runs(_isolated_results):
    """One MLflow-backed test (a fresh tracking DB costs seconds): interrupt, resume, rerun; report and runs."""
    # 5 tasks: the t's p is never below the exact sign-flip floor 2/2^5 = 0.0625, so alpha 0.1 (reachable: no
    # allow_underpowered needed)
    exp = _exp("ab.replications=2", "ab.direction=less", "ab.test=t", "ab.alpha=0.1", underpowered_ok=False)
    ledger = _isolated_results / "ab" / "prior_knowledge_ab" / "ledger.jsonl"
    # B worse by 3: over 5 tasks 'supported' also needs the skew-calibrated p below 0.05, which a clear loss of 1
    # reaches about half the time there (a zero-mean lognormal sample of 5 often shows a t of 10)
    first = ScriptedArm(effect=3.0, interrupt_after=7, prereg=prereg_path(ledger))
    with pytest.raises(KeyboardInterrupt):
        run_ab_from_config(exp, run_arm=first, out=lambda _: None)
    assert len(first.calls) == 7
    _, parents, children = _mlflow_runs()
    assert parents[0].info.status == "KILLED" and len(children) == 7

    second = ScriptedArm(effect=3.0)
    lines: list[str] = []
    run = run_ab_from_config(exp, run_arm=second, out=lines.append)
    assert len(second.calls) == 13 and run.result.cells_run == 13 and run.result.cells_skipped == 7
    assert sorted(c[:3] for c in first.calls + second.calls) == sorted(cell_plan(run.design))  # each cell once
    assert "7 already in the ledger, 13 to run" in lines[0]
    assert run.result.verdict == "supported", run.result.verdict_reason  # B (pass skipped) is worse by 3.0
    assert run.result.primary.mean_diff == pytest.approx(-3.0, abs=0.3)
    assert run.result.secondary["search_calls"].mean_diff == pytest.approx(2.0)
    for name in (REPORT_NAME, DIFF_PNG, FOREST_PNG):
        assert (run.paths.dir / name).stat().st_size > 1000
    report = (run.paths.dir / REPORT_NAME).read_text()
    assert "**Verdict: supported**" in report and "`planner.skip_prior_knowledge=True`" in report

    text = "\n".join(lines)
    block = text[text.index(AB_BEGIN):text.index(AB_END)]
    assert "VERDICT: supported" in block and f"report: {run.report}" in block and "MLflow UI: mlflow ui" in block
    assert "run in this invocation: 13; skipped (already in ledger): 7" in block
    # the design power from this A/B's own per-task differences (issue 42): the figure experiments.stats gives
    from experiments.ab._design import observed_power_line
    power = next(ln for ln in block.splitlines() if "design power: this A/B detects a mean effect of" in ln)
    assert power == "composite: " + observed_power_line(run.result.primary, run.prereg, power=exp.calibrate.power,
                                                         target=exp.calibrate.target_effect,
                                                         sims=min(exp.calibrate.sims, 2000))
    assert f"{run.result.primary.n} tasks, two-sided t at 0.1" in power
    assert "MLflow child runs (cells): 20" in block
    progress = [ln for ln in lines if "] cell " in ln]
    assert len(progress) == 13 and progress[-1].startswith("[prior_knowledge_ab] cell 20/20 task 5/5")
    assert "ETA" in progress[0] and "elapsed" in progress[0] and " score " in progress[0]

    third = ScriptedArm()
    again = run_ab_from_config(exp, run_arm=third, out=lambda _: None)
    assert third.calls == [] and again.result.cells_run == 0 and again.result.cells_skipped == 20
    assert again.result.primary.mean_diff == pytest.approx(run.result.primary.mean_diff)
    cells = [r for r in read_jsonl(run.paths.ledger) if r.get("kind") == "cell"]
    assert len(cells) == 20 and all(r["meta"]["run_id"] for r in cells)

    client, parents, children = _mlflow_runs()
    assert len(parents) == 1 and len(children) == 20
    parent = parents[0]
    assert parent.info.status == "FINISHED" and parent.data.tags["verdict"] == "supported"
    m = parent.data.metrics
    assert m["primary.composite.mean_diff"] == pytest.approx(run.result.primary.mean_diff)  # named by its metric
    assert m["primary.composite.p_t"] == pytest.approx(run.result.primary.ttest.pvalue) and m["verdict_code"] == 1.0
    assert {f"primary.composite.{k}" for k in ("ci_low", "ci_high", "p_wilcoxon", "p_holm", "dz")} <= set(m)
    assert "sec.search_calls.mean_diff" in m and parent.data.tags["primary_metric"] == "composite"
    assert parent.data.params["ab.b"] == json.dumps({"planner.skip_prior_knowledge": True})
    arts = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {f"report/{REPORT_NAME}", f"report/{DIFF_PNG}", f"report/{FOREST_PNG}"} <= arts
    assert "preregistration.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    child = children[0]
    assert set(child.data.params) >= {"arm", "task", "replication", "seed"} and "score" in child.data.metrics
    assert {(c.data.params["task"], c.data.params["arm"], c.data.params["replication"]) for c in children} == {
        (t, a, str(r)) for t, a, r in cell_plan(run.design)}


def test_allowed_underpowered_two_sided_test_on_five_tasks_warns_it_cannot_reach_alpha():
    assert min_attainable_p(5) == pytest.approx(0.0625) and min_attainable_p(6) == pytest.approx(0.03125)
    lines: list[str] = []
    run = run_ab_from_config(_exp("ab.replications=1", "ab.test=wilcoxon", "mlflow.enabled=false"),
                             run_arm=ScriptedArm(effect=3.0), out=lines.append)
    assert run.result.verdict != "supported"  # every task favours A, yet p >= 0.0625 by construction
    notes = [ln for ln in lines if "'supported' is unreachable" in ln]
    assert notes and "smallest exact two-sided Wilcoxon p is 0.0625 >= alpha 0.05" in notes[0]
    assert any(ln.startswith("note: ") for ln in run.summary.splitlines())


def test_a_failing_cell_is_reported_and_retried_on_the_next_run():
    class Flaky(ScriptedArm):
        def __call__(self, arm, overrides, task, replication, seed):
            if task.id == "what-is-gil" and arm == OFF and not getattr(self, "healed", False):
                raise TimeoutError("judge did not answer")
            return super().__call__(arm, overrides, task, replication, seed)

    exp = _exp("ab.replications=1", "mlflow.enabled=false")
    lines: list[str] = []
    first = run_ab_from_config(exp, run_arm=Flaky(), out=lines.append)
    assert any("what-is-gil rep 0 arm prior_knowledge_off: FAILED TimeoutError: judge did not answer" in ln for ln in lines)
    assert first.result.primary.n == 4 and first.result.excluded_pairs[0]["task"] == "what-is-gil"
    healed = Flaky()
    healed.healed = True
    second = run_ab_from_config(exp, run_arm=healed, out=lambda _: None)
    assert [c[:2] for c in healed.calls] == [("what-is-gil", OFF)] and second.result.primary.n == 5


def test_changed_hypothesis_on_the_same_ledger_is_refused():
    from experiments.ab._cells import PreregistrationMismatch

    run_ab_from_config(_exp("ab.replications=1", "mlflow.enabled=false"), run_arm=ScriptedArm(), out=lambda _: None)
    with pytest.raises(PreregistrationMismatch, match="hypothesis and design cannot change") as info:
        run_ab_from_config(_exp("ab.replications=1", "mlflow.enabled=false", "ab.min_effect=0.9"),
                           run_arm=ScriptedArm(), out=lambda _: None)
    assert "preregistration.min_effect: 0.3 -> 0.9" in str(info.value) and "new sweep.name" in str(info.value)


# -- the real harness, scripted model ---------------------------------------------------------------------------

PRIOR_MARK, PLAN_MARK = "You assess what you already know", "You plan a research task"


def _fake_llm():
    from harness.inference._fake import FakeLLM

    plan = json.dumps({"task_type": "research", "complexity": "low", "expected_sections": 3,
                       "search_queries": ["python gil"], "prior_work_summary": "", "notes": "", "subtasks": []})
    dims = {d: 6 for d in ("relevance", "completeness", "depth", "specificity", "structure", "grounded")}
    return FakeLLM(keyed={
        PRIOR_MARK: json.dumps({"known_facts": ["CPython has a GIL"], "gaps": ["free-threaded builds", "3.13 status"]}),
        PLAN_MARK: plan,
        "You compress web research": json.dumps({"knowledge": "The GIL lets one thread run bytecode at a time.",
                                                 "relevance": 0.8, "coverage": 0.8, "confidence": 0.9,
                                                 "notes": "", "next_query": ""}),
        "You are a strict, fair reviewer": json.dumps({**dims, "feedback": "ok", "weaknesses": []}),
        "You revise a Markdown answer": "## Answer\n\nThe GIL serialises bytecode [1].",
        "": "## Answer\n\nThe global interpreter lock lets one thread run Python bytecode at a time [1].",
    })


def test_real_harness_cells_differ_in_planning_and_the_judge_is_blind(_isolated_results):
    from harness.inference._roles import fake_roles

    fake = _fake_llm()
    exp = _exp("ab.replications=1", "ab.split=train", "wiggum.max_rounds=1", "research.max_rounds=1",
               "research.enrich_urls=0", "search.provider=local", "orchestrator.mode=off", "mlflow.enabled=false")
    lines: list[str] = []
    run = run_ab_from_config(exp, roles=fake_roles(fake), out=lines.append)

    cells = [r for r in read_jsonl(run.paths.ledger) if r.get("kind") == "cell"]
    assert len(cells) == 6 and all(c["status"] == "ok" for c in cells), [c.get("error") for c in cells]
    # the preflight comes before the first cell (no calibration stored for these models: cost unknown, says why)
    first_cell = next(i for i, ln in enumerate(lines) if " cell 1/" in ln)
    pre = [i for i, ln in enumerate(lines) if "preflight: " in ln]
    assert pre and max(pre) < first_cell
    assert any(ln.endswith("preflight: A/B 3 tasks x 2 arms x 1 replication(s) = 6 task runs") for ln in lines)
    assert any("preflight: cost and detectable effect unknown (no stored calibration" in ln for ln in lines)
    by_arm = {arm: [c for c in cells if c["arm"] == arm] for arm in (ON, OFF)}
    assert all(c["meta"]["prior_knowledge_ran"] and c["secondary"]["gaps"] == 2 for c in by_arm[ON])
    assert all(not c["meta"]["prior_knowledge_ran"] and c["secondary"]["gaps"] == 0 for c in by_arm[OFF])
    prompts = ["\n".join(m["content"] for m in call.messages) for call in fake.calls]
    assert sum(PRIOR_MARK in p for p in prompts) == 3 and sum(PLAN_MARK in p for p in prompts) == 6
    assert not any(ON in p or OFF in p for p in prompts)  # no model call, the judge included, sees an arm name
    judge_seeds = sorted(call.seed for call, p in zip(fake.calls, prompts) if "strict, fair reviewer" in p)
    # both arms of a pair judged with the pair's seed; the kept text re-scored with seeds of its own
    # (harness.review.RESCORE_SEED_OFFSET: a sampled judgement, issue 31 item 7)
    assert judge_seeds == sorted([c["pair_seed"] for c in cells] + [c["pair_seed"] + 1_000_003 for c in cells])
    outputs = sorted(p.name for p in run.paths.outputs.iterdir())
    assert len(outputs) == 6 and not any(ON in o or OFF in o for o in outputs)
    assert all(c["score"] > 0 and c["secondary"]["tokens"] > 0 for c in cells)


# -- issue 31 item 8b: champion_ab says what its tasks were chosen on ---------------------------------------------


def test_champion_ab_verdict_says_its_tasks_chose_the_champion(_isolated_results, tmp_path):
    # Fails on 6cbf984: split all (8 train tasks that chose the champion, 4 holdout that confirmed it) and a
    # verdict "supported" with no word of it.
    from mlflow import MlflowClient

    from experiments.sweep._registry import register_texts
    from experiments.tracking import NullTracker
    from harness.synthesis import CHAMPION, PREVIOUS, prompt_name

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"  # the store _isolated_results points MLFLOW_TRACKING_URI at
    client = MlflowClient(tracking_uri=uri)
    base = {"enumerated": "List instruction.", "research": "Research instruction."}
    register_texts(client, "harness", base, message="base", tags=lambda tt: {})
    register_texts(client, "harness", {k: f"Champion {v}" for k, v in base.items()}, message="champ",
                   tags=lambda tt: {})
    for tt in base:
        client.set_prompt_alias(prompt_name("harness", tt), PREVIOUS, 1)
        client.set_prompt_alias(prompt_name("harness", tt), CHAMPION, 2)

    def arm(name, overrides, task, replication, seed):  # the champion scores 1 point more, little noise
        score = 5.0 + (1.0 if name == CHAMPION else 0.0) + 0.05 * (seed % 7)
        return {"score": score, "status": "ok"}

    lines: list[str] = []
    exp = to_experiment(compose_config(["+sweep=champion_ab", "backend=fake"]))
    assert exp.ab.split == "all" and exp.benchmark.name == "asyncio_practices"
    run = run_ab_from_config(exp, run_arm=arm, tracker=NullTracker(), out=lines.append)
    r = run.result
    assert r.verdict == "supported", r.verdict_reason
    n_train, n_hold = len(exp.tasks("train")), len(exp.tasks("holdout"))
    caveat = (f"caveat: arm champion (prompts:/harness@champion) was promoted by a sweep; if that sweep ran on "
              f"benchmark 'asyncio_practices', {n_train} train tasks, which chose it and {n_hold} holdout tasks, "
              f"which confirmed it are among the {n_train + n_hold} tasks here (ab.split=all), so its edge is biased "
              f"upward and a 'supported' is not an independent confirmation; ab.split=holdout avoids the tasks that "
              f"chose it, tasks no sweep saw (another benchmark) give one")
    assert r.verdict_reason.endswith(caveat)
    assert any(ln.endswith(caveat) for ln in lines[:6])  # said before the first cell too
    assert f"VERDICT: supported -- {r.verdict_reason}" in run.summary
    assert caveat in (run.paths.dir / REPORT_NAME).read_text()


def test_an_ab_without_the_champion_carries_no_caveat():
    from experiments.ab._design import selection_note

    exp = _exp()
    design, _ = design_from_config(exp)
    assert selection_note(design.arms, design.tasks, benchmark="smoke", split="all") is None
    arms = {"a": {"synth.source": "prompts:/harness@previous"}, "b": {"synth.source": "prompts:/harness/2"}}
    assert selection_note(arms, design.tasks, benchmark="smoke", split="all") is None
    champion = {"a": {}, "b": {"synth.source": "prompts:/harness-synth-research@champion"}}
    holdout = [t for t in design.tasks if t.split == "holdout"]
    note = selection_note(champion, holdout, benchmark="smoke", split="holdout")
    assert note is not None and f"{len(holdout)} holdout tasks, which confirmed it" in note
    assert "ab.split=holdout avoids" not in note


def test_the_entry_point_hands_the_ab_its_validated_experiment_and_its_output(tmp_path, capsys):
    """Issue 43: `experiments.run.main` (now run_experiment) gave the A/B the raw config (validated again there) and dropped its `out`:
    the A/B printed its header and summary to stdout whatever the caller asked. Now main hands the experiment it
    checked to experiments.ab.run_ab_test, with the caller's out."""
    from experiments.run import run_experiment

    lines: list[str] = []
    exp = _exp("ab.replications=1", "mlflow.enabled=false", f"results_dir={tmp_path}")
    run = run_experiment(exp, out=lines.append)
    assert any(line.startswith(f"[{exp.sweep.name}] A/B {OFF} vs {ON}: 5 tasks x 1 replications") for line in lines)
    assert any("A/B SUMMARY" in line for line in lines)
    assert "A/B SUMMARY" not in capsys.readouterr().out
    assert run.design.replications == 1 and len(run.design.tasks) == 5


class FailingArm(ScriptedArm):
    """run_arm stand-in whose every cell of `broken` arms fails for a reason that is not a model call (the arm's
    own config crashing the harness): status "failed" with the error, as HarnessCells records it."""

    def __init__(self, broken: tuple[str, ...]):
        super().__init__()
        self.broken = broken

    def __call__(self, arm, overrides, task, replication, seed):
        if arm in self.broken:
            self.calls.append((task.id, arm, replication, seed))
            return {"status": "failed", "error": f"task {task.id!r} failed: KeyError: 'synth.instructions'"}
        return super().__call__(arm, overrides, task, replication, seed)


@pytest.mark.parametrize("broken", [(ON, OFF), (OFF,)])
def test_an_ab_whose_failed_cells_leave_no_task_pair_does_not_conclude(broken, _isolated_results):
    """Before: every cell failed (not a model call: an arm crashing the harness), the verdict 'inconclusive -- only
    0 complete task pair(s)', and the command exited 0 as if it had measured something."""
    exp = _exp("ab.replications=1", "ab.test=t")
    lines: list[str] = []
    run = run_ab_from_config(exp, run_arm=FailingArm(broken), out=lines.append)
    assert run.result.verdict == "inconclusive" and run.result.primary.n == 0
    assert len(run.unconcluded) == 1, run.unconcluded  # the CLI exits 3 on it, with the resume hint
    failed = 10 if len(broken) == 2 else 5
    assert f"only 0 complete task pairs: {failed} of 10 cells failed" in run.unconcluded[0]
    assert "KeyError: 'synth.instructions'" in run.unconcluded[0]
    _, parents, _ = _mlflow_runs()
    assert parents[0].info.status == "FAILED"
