"""The pairwise A/B (issue 42, lever a: ab.compare=pairwise): the two arms' answers to every (task, replication)
judged side by side in both orders, the verdict on the sign-flip test of B's mean preference over tasks.

The arms are scripted (run_arm writes real answer files; the ledger, pre-registration, analysis and summary are the
real ones); the judge is the real evaluators.pairwise.compare_pair on a scripted FakeLLM that reads both answers.
At 3306971 `ab.compare` did not exist: the pointwise A/B below cannot see the effect, and nothing else could."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from evaluators.pairwise import compare_pair
from experiments.ab._cells import PreregistrationMismatch, prereg_path
from experiments.ab._entry import run_ab_from_config
from experiments.ab._pairwise import load_pairs
from experiments.config import ConfigError, compose_config, to_experiment
from experiments.stats import Preregistration, signflip_test
from experiments.tracking import NullTracker
from harness.inference._fake import FakeLLM
from harness.stores import read_jsonl

ON, OFF = "prior_knowledge_on", "prior_knowledge_off"
GOOD = "Each item opens with its TAKEAWAY in bold."


def _exp(*overrides: str):
    return to_experiment(compose_config(["+sweep=prior_knowledge_ab", "backend=fake", "ab.compare=pairwise",
                                         "ab.direction=greater", *overrides]))


class AnswerArm:
    """run_arm stand-in that writes each cell's answer to a file (meta.output_path, as HarnessCells does). Arm B
    (prior knowledge off) writes the better answer on the tasks in `better` (default all); the pointwise score is
    pure noise with a large per-(task, arm) spread, so the pointwise A/B cannot see the difference."""

    def __init__(self, root: Path, better: set[str] | None = None, fail: set[tuple[str, str, int]] = frozenset()):
        self.root, self.better, self.fail = root, better, set(fail)
        self.calls = 0

    def __call__(self, arm, overrides, task, replication, seed):
        self.calls += 1
        if (task.id, arm, replication) in self.fail:
            return {"status": "failed", "error": "scripted crash"}
        b = overrides.get("planner.skip_prior_knowledge", False)
        good = b and (self.better is None or task.id in self.better)
        text = f"# {task.id}\n1. Use asyncio.gather.\n2. Avoid blocking calls.\n" + (GOOD if good else "")
        path = self.root / f"{task.id}-r{replication}-{arm}.md"
        path.write_text(text, encoding="utf-8")
        rng = np.random.default_rng([seed, int(b)])
        score = 5.0 + rng.normal(0, 2.0)
        return {"score": score, "dimensions": {}, "secondary": {}, "status": "ok",
                "meta": {"output_path": str(path)}}


def judge_llm(*, first_bias: bool = False, unreadable_on: str | None = None) -> FakeLLM:
    """A judge that prefers the answer with GOOD in it (a tie when both or neither have it); or, with first_bias,
    always the answer shown first. unreadable_on: a task id whose replies cannot be read."""

    def reply(messages):
        user = messages[-1]["content"]
        if unreadable_on and f"# {unreadable_on}\n" in user:
            return "I think the first one, maybe"
        a = user.split("# Answer A", 1)[1].split("# Answer B", 1)[0]
        b = user.split("# Answer B", 1)[1]
        if first_bias:
            verdict = "A"
        elif (GOOD in a) == (GOOD in b):
            verdict = "tie"
        else:
            verdict = "A" if GOOD in a else "B"
        return json.dumps({"reason": "one states its takeaways", "verdict": verdict})

    return FakeLLM(keyed={"# Answer A": reply})


def judge_with(llm):
    def judge(task, candidate, baseline, seed):
        return compare_pair(task.task, candidate, baseline, llm, seed=seed)

    return judge


def _run(exp, arm, llm, **kw):
    lines: list[str] = []
    run = run_ab_from_config(exp, run_arm=arm, judge=judge_with(llm), tracker=NullTracker(), out=lines.append, **kw)
    return run, "\n".join(lines)


# -- the sign-flip test ------------------------------------------------------------------------------------------


def _brute(values, alternative):
    obs = sum(values)
    sums = [sum(s * v for s, v in zip(signs, values)) for signs in itertools.product((1, -1), repeat=len(values))]
    if alternative == "greater":
        hits = sum(s >= obs - 1e-9 for s in sums)
    elif alternative == "less":
        hits = sum(s <= obs + 1e-9 for s in sums)
    else:
        hits = sum(abs(s) >= abs(obs) - 1e-9 for s in sums)
    return hits / len(sums)


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_the_sign_flip_p_is_the_share_of_sign_assignments_at_least_as_extreme(alternative):
    rng = np.random.default_rng(3)
    for n in (1, 4, 7, 10):
        values = list(rng.choice([-1.0, -0.5, 0.5, 1.0, 1 / 3], size=n))
        assert signflip_test(values, alternative=alternative).pvalue == pytest.approx(_brute(values, alternative))
    # zeros carry no sign: the same p as without them; all of one sign: 2 / 2^n two-sided
    assert signflip_test([1, 0.5, 0, 1, 0]).pvalue == pytest.approx(_brute([1, 0.5, 1], "two-sided"))
    assert signflip_test([0.5] * 6).pvalue == pytest.approx(2 / 2 ** 6)
    assert signflip_test([0, 0]).pvalue == 1.0 and signflip_test([]).pvalue == 1.0


def test_the_sign_flip_test_holds_its_level_on_preferences_where_the_t_test_does_not():
    """Per-task preferences of a judge that cannot tell the arms apart: values from {-1, -1/2, 0, 1/2, 1}, symmetric,
    8 tasks. The exact test rejects at most alpha of the time; the paired t on the same values more."""
    from scipy import stats as sps

    rng = np.random.default_rng(11)
    rows = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], p=[0.3, 0.1, 0.2, 0.1, 0.3], size=(3000, 8))
    sf = np.mean([signflip_test(r).pvalue < 0.05 for r in rows])
    tt = np.mean([sps.ttest_1samp(r, 0).pvalue < 0.05 for r in rows if r.std() > 0])
    assert sf <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 3000)
    assert tt > sf


def test_a_long_sign_flip_test_is_a_seeded_monte_carlo():
    values = [0.5, -0.5, 1.0, 0.5, 0.0, 1.0] * 5
    a, b = signflip_test(values, seed=1), signflip_test(values, seed=1)
    assert a == b and a.method.startswith("Monte Carlo") and 0 < a.pvalue < 0.05


# -- the A/B ----------------------------------------------------------------------------------------------------


def test_side_by_side_judging_sees_an_edit_the_pointwise_scores_cannot(_isolated_results, tmp_path):
    """B's answers state their takeaways on every task; the pointwise judge's scores are noise (sd 2 per cell), so
    the pointwise A/B is inconclusive; judged side by side, B is preferred on every task: 'supported'."""
    exp = _exp("ab.replications=2", "ab.split=train")
    llm = judge_llm()
    run, out = _run(exp, AnswerArm(tmp_path), llm)
    res = run.result
    assert res.pairwise is not None and res.pairwise.n == 12  # the 12 train tasks
    assert res.pairwise.mean == 1.0 and res.pairwise.p == pytest.approx(2 / 2 ** 12)
    assert res.verdict == "supported", res.verdict_reason
    assert "pointwise composite alone would say 'inconclusive'" in res.verdict_reason
    assert len(llm.calls) == 12 * 2 * 2  # every (task, replication) pair, both orders
    # the ledger keeps every judgement; the pre-registration records the compare mode
    pairs = [r for r in read_jsonl(run.paths.ledger) if r.get("kind") == "pair"]
    assert len(pairs) == 24 and all(r["preference"] == 1.0 and r["verdicts"] == ["A", "B"] for r in pairs)
    prereg = json.loads(prereg_path(run.paths.ledger).read_text())["preregistration"]
    assert prereg["compare"] == "pairwise" and prereg["min_preference"] == 0.1
    # the summary says what the verdict rests on, and the judge's behaviour
    assert "compare: pairwise (pre-registered" in run.summary and "sign-flip p=" in run.summary
    assert "position bias: the answer shown first won 24 of 48 decided verdicts (50%" in run.summary
    assert "VERDICT: supported" in run.summary
    # the pointwise statistics are shown as what they are: not the test
    assert "pointwise metric: composite (composite score): its statistics below are shown, not tested" in run.summary
    assert "primary metric:" not in run.summary
    assert "side by side: 24 pair(s) judged" in out
    report = run.report.read_text()
    assert "## Side by side (compare=pairwise" in report
    from experiments.ab._entry import summary_metrics

    m = summary_metrics(res)  # the parent MLflow run's metrics
    assert m["pairwise.mean_preference"] == 1.0 and m["pairwise.position_bias"] == 0.5 and m["pairwise.n"] == 12


def test_the_preflight_counts_the_judge_calls_and_says_what_g_it_knows():
    from experiments.config import load_tasks
    from experiments.ab._preflight import ab_preflight_lines

    exp = _exp("ab.replications=2")
    lines = ab_preflight_lines(exp, {}, load_tasks(exp.benchmark), n_tasks=24, replications=2)
    line = next(x for x in lines if "compare=pairwise" in x)
    assert "+ 96 judge calls (both orders of the 48 answer pairs" in line and "g not measured" in line


def test_a_rerun_judges_nothing_again_and_a_failed_judgement_is_retried_not_a_tie(_isolated_results, tmp_path):
    exp = _exp("ab.replications=1", "ab.split=train")
    arm = AnswerArm(tmp_path)

    class DeadOnce:
        """The judge's server dies once (one pair's judgement fails)."""

        def __init__(self):
            self.n, self.inner = 0, judge_llm()

        def chat(self, *a, **kw):
            self.n += 1
            if self.n == 5:
                raise ConnectionError("judge server refused the connection")
            return self.inner.chat(*a, **kw)

    dead = DeadOnce()
    first, _ = _run(exp, arm, dead)
    assert first.unconcluded and "1 pair judgement(s) failed" in first.unconcluded[0]
    assert "ConnectionError" in first.unconcluded[0]
    assert first.result.pairwise.failed == 1 and first.result.pairwise.n == 11  # missing, never a tie
    # 11 tasks of +1 (p 2/2^11) hold 'supported' with the failed pair counted against it (-1 on its task)
    assert first.result.verdict == "supported"
    assert "holds with the 1 pair(s) with a failed cell on one arm only, no readable verdict or a failed judgement " \
           "counted against it" in first.result.verdict_reason
    llm = judge_llm()
    second, out = _run(exp, arm, llm)
    assert len(llm.calls) == 2 and not second.unconcluded  # only the failed pair, both orders
    assert second.result.pairwise.n == 12 and second.result.verdict == "supported"
    third_llm = judge_llm()
    third, out = _run(exp, arm, third_llm)
    assert third_llm.calls == [] and "side by side: 0 pair(s) judged" in out
    assert third.result.verdict == "supported"


def test_a_judge_that_always_prefers_the_first_answer_supports_nothing(_isolated_results, tmp_path):
    exp = _exp("ab.replications=1", "ab.split=train")
    run, _ = _run(exp, AnswerArm(tmp_path), judge_llm(first_bias=True))
    pw = run.result.pairwise
    assert pw.mean == 0.0 and pw.ties == 12 and pw.disagreed == 12
    assert pw.position_bias == 1.0 and "won 24 of 24 decided verdicts (100%" in run.summary
    # every task a tie: no spread to bound the mean with, so no 'not supported' from a judge that cannot tell
    assert run.result.verdict == "inconclusive" and "no spread to bound" in run.result.verdict_reason


def test_unreadable_judgements_are_missing_and_the_verdict_must_hold_with_them_against_it(_isolated_results, tmp_path):
    """B better on 7 of 12 tasks (ties on the rest), the judge's replies unreadable on one of the 7: the judged pairs
    alone give 6 tasks of +1, p = 2/64 < 0.05, 'supported'; with the unreadable pair counted as preferring A
    (6 tasks +1, one -1) p = 16/128: the verdict does not hold, so none is given."""
    exp = _exp("ab.replications=1", "ab.split=train")
    train = [t.id for t in exp.tasks("train")]
    run, _ = _run(exp, AnswerArm(tmp_path, better=set(train[:7])), judge_llm(unreadable_on=train[0]))
    pw = run.result.pairwise
    assert pw.missing == 1 and pw.n == 11 and pw.judge_failures == 4  # both orders, each re-asked once
    assert pw.calls == 12 * 2 + 2  # the two re-asks
    assert pw.p == pytest.approx(2 / 64) and pw.b_wins == 6
    assert run.result.verdict == "inconclusive", run.result.verdict_reason
    assert "counted as preferring prior_knowledge_on (the worst case)" in run.result.verdict_reason
    assert "it would say 'supported'" in run.result.verdict_reason


def test_failed_cells_on_one_arm_leave_no_verdict(_isolated_results, tmp_path):
    exp = _exp("ab.replications=1", "ab.split=train")
    first = next(iter(exp.tasks("train"))).id
    run, _ = _run(exp, AnswerArm(tmp_path, fail={(first, OFF, 0)}), judge_llm())
    assert run.result.pairwise.unjudged == 1 and run.result.pairwise.n == 11
    assert run.result.verdict == "inconclusive" and "failed cells differ between arms" in run.result.verdict_reason


# -- configs that cannot answer ----------------------------------------------------------------------------------


def test_configs_a_pairwise_ab_refuses_before_anything_is_written(_isolated_results, tmp_path):
    with pytest.raises(ConfigError, match="ab.compare=pairwise with ab.sequential=true"):
        _run(_exp("ab.sequential=true"), AnswerArm(tmp_path), judge_llm())
    with pytest.raises(ConfigError, match="ab.compare"):
        _run(_exp("ab.compare=sidebyside"), AnswerArm(tmp_path), judge_llm())
    with pytest.raises(ConfigError, match=r"ab.min_preference=1.5 is out of range; expected a value in \[0, 1\)"):
        _run(_exp("ab.min_preference=1.5"), AnswerArm(tmp_path), judge_llm())
    # 5 smoke tasks: the sign-flip test's floor 2/32 = 0.0625 >= 0.05, whatever ab.test says
    with pytest.raises(ConfigError, match="exact two-sided sign-flip p"):
        _run(_exp("benchmark=smoke", "ab.test=t"), AnswerArm(tmp_path), judge_llm())
    assert not (_isolated_results / "ab").exists()


def test_the_compare_mode_cannot_change_mid_test_and_old_pointwise_ledgers_resume(_isolated_results, tmp_path):
    exp = _exp("ab.replications=1", "ab.split=train")
    _run(exp, AnswerArm(tmp_path), judge_llm())
    pointwise = _exp("ab.replications=1", "ab.split=train", "ab.compare=pointwise")
    with pytest.raises(PreregistrationMismatch, match="compare"):
        run_ab_from_config(pointwise, run_arm=AnswerArm(tmp_path), tracker=NullTracker(), out=lambda _: None)
    # a pointwise registration writes no compare field: ledgers registered before it existed resume unchanged
    assert "compare" not in Preregistration("h").to_dict()
    assert Preregistration.from_dict(Preregistration("h").to_dict()) == Preregistration("h")
    assert load_pairs(tmp_path / "nothing.jsonl") == {}


def test_on_the_real_harness_the_arms_shared_judge_compares_the_answer_files_blind(_isolated_results):
    """No judge injected: HarnessCells runs the cells, their output files are the answers, and compare_pair runs on
    the evaluator role (the arms share it). The prompts never name an arm."""
    from test_ab_entry import _fake_llm

    from harness.inference._roles import fake_roles

    fake = _fake_llm()
    pair_prompts: list[str] = []

    def pairwise_reply(messages):
        pair_prompts.append(messages[-1]["content"])
        return json.dumps({"reason": "alike", "verdict": "tie"})

    fake.keyed = {"# Answer A": pairwise_reply, **fake.keyed}  # before the rubric's "strict, fair reviewer" key
    exp = _exp("benchmark=smoke", "ab.allow_underpowered=true", "ab.replications=1", "ab.split=train",
               "wiggum.max_rounds=1", "research.max_rounds=1", "research.enrich_urls=0", "search.provider=local",
               "orchestrator.mode=off", "mlflow.enabled=false")
    run = run_ab_from_config(exp, roles=fake_roles(fake), out=lambda _: None)
    pw = run.result.pairwise
    assert (pw.n, pw.ties, pw.calls) == (3, 3, 6) and len(pair_prompts) == 6
    answer = "The global interpreter lock lets one thread run Python bytecode at a time"
    assert all(p.count(answer) == 2 for p in pair_prompts)  # both answer files, read from disk
    assert not any(ON in p or OFF in p for p in pair_prompts)
    assert run.result.verdict == "inconclusive"


def test_pairs_left_to_judge_on_another_judge_model_are_refused(_isolated_results):
    """Every cell finished, the pairs' judgements failed (a dead judge server); the rerun brings another judge model:
    the registration's backends are checked before a pair is judged, as they are before a cell runs."""
    from test_ab_entry import _fake_llm

    from harness.inference._fake import FakeLLM
    from harness.inference._roles import ROLES, fake_roles

    def dead(messages):
        raise ConnectionError("judge server refused the connection")

    fake = _fake_llm()
    fake.keyed = {"# Answer A": dead, **fake.keyed}
    exp = _exp("benchmark=smoke", "ab.allow_underpowered=true", "ab.replications=1", "ab.split=train",
               "wiggum.max_rounds=1", "research.max_rounds=1", "research.enrich_urls=0", "search.provider=local",
               "orchestrator.mode=off", "mlflow.enabled=false")
    first = run_ab_from_config(exp, roles=fake_roles(fake), out=lambda _: None)
    assert first.result.pairwise.failed == 3 and first.unconcluded  # the CLI exits 3: judge again
    other = {role: fake for role in ROLES}
    other["evaluator"] = FakeLLM(keyed={"# Answer A": json.dumps({"reason": "x", "verdict": "tie"})}, model="judge-2")
    with pytest.raises(PreregistrationMismatch, match="judge-2"):
        run_ab_from_config(exp, roles=fake_roles(other), out=lambda _: None)
    assert [r for r in read_jsonl(first.paths.ledger) if r.get("kind") == "pair" and r["status"] == "ok"] == []


def test_the_calibration_offers_pairwise_only_where_the_simulation_found_it_pays():
    """bench/power/ab_pairwise.py at equal LLM calls, with the pointwise A/B's 'supported' needing the skew-calibrated
    p as well: pairwise's detectable effect is smaller at every g measured (0.17, 0.34, 1) in every world, the 1.5B
    f=0.5 world whose task x variant spread dominates included. Before that rule: break-even g about 0.7, and no g
    paid where the task spread dominates. Above g 1 nothing was measured: not offered."""
    from experiments.calibration._decompose import levers

    def pays(sigma, tau, g):
        return next(p for name, p, _ in levers({"sigma": sigma, "tau": tau, "rho": 0.0}, g=g) if name == "pairwise")

    assert pays(1.455, 1.271, 0.34) is True  # the embedded model's spread at its measured g
    assert pays(1.455, 1.271, 0.75) is True  # below g 1: measured to pay (embedded, g 1: MDE 1.15 against 1.59)
    assert pays(1.0, 2.1, 0.17) is True  # the task spread dominates: it pays there too now (1.47 against 2.15)
    assert pays(1.455, 1.271, 1.2) is False  # not measured above g 1
    line = next(w for name, _, w in levers({"sigma": 1.0, "tau": 2.1, "rho": 0.0}, g=0.17) if name == "pairwise")
    assert "preferred on more tasks, not a higher mean" in line


def test_arms_with_different_judges_cannot_be_compared_side_by_side(_isolated_results):
    """The arms' answers are judged by one judge; arms whose evaluator models differ are refused before a cell runs
    or the pre-registration is written."""
    exp = _exp("benchmark=smoke", "ab.allow_underpowered=true", "ab.replications=1", "ab.split=train",
               "ab.a={}", "ab.b={backend.evaluator_model: judge-2}", "mlflow.enabled=false")
    with pytest.raises(ConfigError, match="needs one judge for both arms.*judge-2"):
        run_ab_from_config(exp, out=lambda _: None)
    assert not list(_isolated_results.rglob("ledger*"))
