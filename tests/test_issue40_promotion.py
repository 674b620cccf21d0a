"""Issue 40, the sweep's decision path (C, D, E, F): a task type's alias moves only where its own holdout tasks show
no harm; the worst holdout task is printed and, with sweep.max_task_loss, bounds what is promoted; equal
differences get the test's real p; looks are counted per holdout set across the studies of one storage; a
resumed study keeps its standing winner, so the summary, the registry and promoted_synth.yaml agree with
@champion.

Every sweep here is a scripted one (tests/scripted_harness.py, no model): RuleRunner adds a chosen effect per
instruction, task and split to ScriptedRunner's seeded scores, so each world is built to the issue's numbers.
"""

from __future__ import annotations

import dataclasses

import optuna
import pytest
from mlflow import MlflowClient
from scripted_harness import BASE, BOOST, ScriptedRunner, scripted_propose

from experiments.config import BenchmarkConfig, ConfigError, compose_config, load_tasks, registry_uri
from experiments.config._schema import TaskSpec
from experiments.config import to_experiment, validate
from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
from experiments.promotion._decide import Candidate, decide
from experiments.sweep import run_sweep
from experiments.sweep._study import StudyMismatch, open_study
from harness.synthesis import CHAMPION, prompt_name
from mutators.base import Candidate as MCandidate
from mutators.base import instruction_hash

optuna.logging.set_verbosity(optuna.logging.WARNING)


class RuleRunner(ScriptedRunner):
    """ScriptedRunner (naming a tool worth nothing by itself, noise sd `noise`) plus rule(instruction, task id,
    task type, split) composite points on each score."""

    def __init__(self, tasks, rule, noise: float = 0.05) -> None:
        super().__init__(tasks, noise=noise, effect=0.0)
        self.rule, self.where = rule, {t.task: (t.id, t.split) for t in tasks}

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
        out = super().finish(prepared, instructions=instructions, run_id=run_id, criteria=criteria, seed=seed)
        if out.status != "ok":
            return out
        tid, part = self.where[prepared["task"]]
        add = self.rule(instructions[prepared["task_type"]], tid, prepared["task_type"], part)
        return dataclasses.replace(out, score=out.score + add, selection_score=out.selection_score + add,
                                   dimensions={"depth": out.score + add})


def _bench(exp, train_types, holdout_types):
    """A benchmark with these task types, train tasks t0.. then holdout tasks h0..."""
    tasks = ([TaskSpec(id=f"t{i}", task=f"train task {i}", task_type=tt, split="train")
              for i, tt in enumerate(train_types)]
             + [TaskSpec(id=f"h{i}", task=f"holdout task {i}", task_type=tt, split="holdout")
                for i, tt in enumerate(holdout_types)])
    exp.benchmark = BenchmarkConfig(name="issue40", tasks=tasks)
    return exp


def _sweep(exp, rule, lines, propose=scripted_propose):
    runner = RuleRunner(load_tasks(exp.benchmark), rule)
    return run_sweep(exp, runner, propose=propose, out=lines.append)


def _text(lines):
    return "\n".join(lines)


def _aliases(client, name):
    return {a: int(v.version) for v in client.search_prompt_versions(name)
            for a in client.get_prompt_version(name, v.version).aliases}


# -- C: a task type's alias moves only where its own holdout tasks show no harm ------------------------------


def test_a_pooled_win_that_hurt_one_task_type_moves_no_alias_for_that_type(make_exp):
    """The winner changed both task types: enumerated tasks gain 1.2 on train and 0.4-3.6 on the holdout, research
    tasks lose 0.5 each; pooled over the 16 holdout tasks (14 enumerated, 2 research) the holdout gains +1.59 and is
    confirmed. On 3306971 research's @champion moved to the text that hurt it; now it does not, and the summary and
    promoted_synth.yaml say so. (8 holdout tasks, 6 gaining 1.2 and 2 losing 0.5, are a left-skewed sample the
    skew-holding confirmation does not confirm, p 0.18; with 1 task in 10 losing 5 among its references, 12 tasks of
    which 2 lose give p 0.033 before run noise; hence 16 tasks and a spread of gains: p 0.012.)"""
    exp = _bench(make_exp("sweep.n_trials=3", operators=("add_tool",), mlflow=True),
                 ["enumerated"] * 6 + ["research"] * 2, ["enumerated"] * 14 + ["research"] * 2)

    def rule(instr, tid, tt, part):
        if BOOST not in instr.lower():
            return 0.0
        if tt != "enumerated":
            return -0.5
        return 2.0 + 0.8 * (int(tid[1:]) % 5 - 2) if tid.startswith("h") else 1.2

    lines: list[str] = []
    s = _sweep(exp, rule, lines)
    client = MlflowClient(tracking_uri=registry_uri(exp))
    research = _aliases(client, prompt_name("harness", "research"))
    research_champion = research.get(CHAMPION)
    if research_champion is not None:  # research's champion may only be its baseline text
        assert BOOST not in client.get_prompt_version("harness-synth-research", research_champion).template.lower()
    assert s.promoted and (row := next(r for r in s.holdout if r.trial == s.promoted_trial)).wins
    assert row.holdout_diff > 0.5
    champ = client.get_prompt_version("harness-synth-enumerated",
                                      _aliases(client, "harness-synth-enumerated")[CHAMPION])
    assert BOOST in champ.template.lower()  # the type that gained on its own tasks moved
    assert s.promoted_instructions["research"] == BASE["research"]
    text = _text(lines)
    assert "task type research HELD BACK (its alias does not move, its baseline text is kept): its own holdout " \
           "tasks lost: mean -0.50" in text  # -0.5 each and run noise
    assert "task types held back (baseline text kept): research" in text
    registry = next(ln for ln in text.splitlines() if ln.startswith("registry: "))
    assert "harness-synth-research v2 registered, champion stays unset: held back: its own holdout tasks lost" \
        in registry and "champion -> harness-synth-enumerated v2" in registry
    yaml = (exp.sweep_dir / "promoted_synth.yaml").read_text()
    assert "task types held back by their own holdout tasks, baseline text kept: research" in yaml
    assert BASE["research"] in yaml


# -- D: the worst holdout task, sweep.max_task_loss, and equal differences -------------------------------------


def _one_wrecked(instr, tid, tt, part):
    """Naming a tool gains 8 on every task but holdout task h3, which loses 3.5 (issue 52: with a gain of 2 the
    sample, 11 at +2 and one at -3.5, is the left skew the skew-holding confirmation does not confirm, p 0.16)."""
    if BOOST not in instr.lower():
        return 0.0
    return -3.5 if tid == "h3" else 8.0


def test_the_worst_holdout_task_is_printed_and_max_task_loss_holds_back_a_candidate_that_wrecks_one(make_exp):
    """12 holdout tasks: 11 gain 8, h3 loses 3.5; the confirmation confirms (mean +7.04). With sweep.max_task_loss=3
    3306971 promoted it (the setting did not exist); now it is held back and the summary names the worst task; the
    setting is pinned in the decision rule, so a resume that loosens it is refused like alpha."""
    exp = _bench(make_exp("sweep.n_trials=3", operators=("add_tool",)), ["enumerated", "research"] * 4,
                 ["enumerated", "research"] * 6)
    exp.sweep.max_task_loss = 3.0
    lines: list[str] = []
    s = _sweep(exp, _one_wrecked, lines)
    (row,) = s.holdout
    assert row.wins and not s.promoted, _text(lines)
    text = _text(lines)
    assert row.worst_task == "h3" and row.worst_diff == pytest.approx(-3.5, abs=0.2)
    assert f"diff {row.holdout_diff:+.3f} (worst task h3 {row.worst_diff:+.3f}) [over 12 tasks" in text
    assert (f"task-loss guard: worst holdout task h3 {row.worst_diff:+.3f} < -3 (sweep.max_task_loss) (HELD BACK BY A "
            f"TASK LOSS") in text
    assert "PROMOTED: baseline (no change kept" in text
    with pytest.raises(StudyMismatch, match=r"sweep\.max_task_loss: 3\.0 -> 5\.0"):
        loose = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=4))
        loose.sweep.max_task_loss = 5.0
        _sweep(loose, _one_wrecked, [])


def test_without_the_guard_the_same_candidate_is_promoted_and_its_worst_task_still_shows(make_exp):
    exp = _bench(make_exp("sweep.n_trials=3", operators=("add_tool",)), ["enumerated", "research"] * 4,
                 ["enumerated", "research"] * 6)
    lines: list[str] = []
    s = _sweep(exp, _one_wrecked, lines)
    assert s.promoted and "(worst task h3 -3.4" in _text(lines) and "task-loss guard" not in _text(lines)


@pytest.mark.parametrize("value", ["-1", "nan", "true"])
def test_a_bad_max_task_loss_is_one_line(value):
    """(New setting: on 3306971 the key did not exist at all.)"""
    with pytest.raises(ConfigError) as err:
        validate(to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake",
                                               f"sweep.max_task_loss={value}"])))
    assert "sweep.max_task_loss" in str(err.value) and "\n" not in str(err.value)


TRAIN = [f"t{i}" for i in range(8)]


def _claimed(number: int, h: str) -> Candidate:
    scores = {t: 6.0 + 0.01 * i for i, t in enumerate(TRAIN)}  # every train task above the reference: p = 1/256
    return Candidate(number, h, "op", sum(scores.values()) / 8, scores, {"research": f"text {h}"})


@pytest.mark.parametrize("n, p", [(2, 0.25), (8, 1 / 256)])
def test_equal_holdout_differences_get_the_exact_sign_flip_p_never_0(n, p):
    """d = (+0.5, +0.5): every task moved by the same amount, the t is 0 / 0. 3306971 returned p = 0.0 and
    confirmed it with two holdout tasks; the exact sign-flip p is 1/2^n (0.25: not confirmed at 0.025)."""
    hold = [f"h{i}" for i in range(n)]
    verdict = decide([_claimed(1, "a")], {t: 5.0 for t in TRAIN}, HoldoutScores({h: 5.0 for h in hold}),
                     {"a": HoldoutScores({h: 5.5 for h in hold})}, train_floor=0.0, alpha=0.05,
                     test=HoldoutTest(0.0, None, 0.025))
    (row,) = verdict.rows
    assert row.holdout_p == pytest.approx(p) and row.holdout_p > 0
    assert (verdict.winner is not None) is (p <= 0.025)


# -- E: one error budget per holdout set in a storage -------------------------------------------------------


def _e_rule(instr, tid, tt, part):
    """Naming a tool gains 1 on train tasks; on the 8 holdout tasks a spread whose one-sided p lies between
    0.0125 and 0.025 (the issue's p 0.0243): confirmed at look 1's level, not at look 2's. (Issue 52: the skew-holding
    confirmation gives the former spread, 1.6 ... -0.4, p 0.085; this symmetric one about 0.018.)"""
    if BOOST not in instr.lower():
        return 0.0
    return {"h0": 2.075, "h1": 1.825, "h2": 1.575, "h3": 1.325, "h4": 1.075, "h5": 0.825, "h6": 0.575,
            "h7": 0.325}.get(tid, 1.0)


def test_a_new_study_on_the_same_storage_and_holdout_tasks_continues_the_count_of_looks(make_exp):
    """Study s1 has spent look 1 and tests the candidate at look 2 (level 0.0125): p in (0.0125, 0.025), it does
    not win. Study s2, a new sweep.name on the same storage and holdout tasks, tests the same candidate: 3306971
    tested it at 0.025 and PROMOTED it; now it is look 3 of these holdout tasks (level 0.00625) and it does not win."""
    exp = _bench(make_exp("sweep.n_trials=3", "sweep.name=s1", operators=("add_tool",)),
                 ["enumerated", "research"] * 4, ["enumerated", "research"] * 4)
    open_study(exp).set_user_attr("holdout_looks", [{"family": ["an-earlier-candidate"], "level": 0.025}])
    first: list[str] = []
    s1 = _sweep(exp, _e_rule, first)
    (r1,) = s1.holdout
    assert r1.holdout_level == pytest.approx(0.0125) and 0.0125 < r1.holdout_p < 0.025 and not s1.promoted

    exp2 = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, name="s2"))
    second: list[str] = []
    s2 = _sweep(exp2, _e_rule, second)
    (r2,) = s2.holdout
    assert r2.hash == r1.hash and r2.holdout_p == pytest.approx(r1.holdout_p)
    assert not s2.promoted, _text(second)
    assert r2.holdout_level == pytest.approx(0.00625)
    assert ("holdout look 3 of these holdout tasks (2 of the earlier ones by other studies in this storage): level "
            "0.00625 = alpha 0.05 / 2^3") in _text(second)


def test_another_holdout_set_is_another_budget_and_an_edited_benchmark_is_not_offered_a_fresh_one(make_exp):
    exp = _bench(make_exp("sweep.n_trials=3", "sweep.name=a", operators=("add_tool",)),
                 ["enumerated", "research"] * 4, ["enumerated", "research"] * 4)
    _sweep(exp, _e_rule, [])
    other = _bench(dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, name="b")),
                   ["enumerated", "research"] * 4, ["enumerated", "research"] * 5)  # 10 holdout tasks: another set
    # none of them a holdout task of study a (issue 42: a holdout sharing a task with a used one shares its budget)
    other.benchmark.tasks = [dataclasses.replace(t, id=f"n{t.id}", task=f"new {t.task}") if t.split == "holdout"
                             else t for t in other.benchmark.tasks]
    lines: list[str] = []
    _sweep(other, _e_rule, lines)
    assert "holdout look 1 of these holdout tasks: level 0.025" in _text(lines)

    edited = _bench(dataclasses.replace(exp), ["enumerated", "research"] * 4, ["enumerated", "research"] * 4)
    edited.benchmark.tasks[0] = dataclasses.replace(edited.benchmark.tasks[0], task="an edited train task")
    with pytest.raises(StudyMismatch) as err:
        _sweep(edited, _e_rule, [])
    msg = str(err.value)
    assert "\n" not in msg and "a new sweep.name does not start a new error budget" in msg


# -- F: a resume keeps the study's standing winner ----------------------------------------------------------


def test_a_resume_whose_new_top_candidate_fails_keeps_the_standing_winner_that_moved_champion(make_exp):
    """Look 1 promotes trial #1 and @champion moves to its text. The resume adds trial #2, which leads on train and
    gains nothing on the holdout, so look 2 confirms nothing. 3306971 then printed `PROMOTED: baseline`, "no alias
    moved" and a promoted_synth.yaml saying no candidate cleared the holdout while @champion held trial #1's text."""
    exp = make_exp("sweep.n_trials=2", "sweep.holdout_top_k=1", operators=("add_tool",), mlflow=True)
    overfit = {"on": False}

    def rule(instr, tid, tt, part):
        add = 1.5 if BOOST in instr.lower() else 0.0
        if "OVERFIT" in instr:
            add += 3.0 if part == "train" else -1.5
        return add

    def propose(name, ctx, llm, *, seen=frozenset()):
        text = ctx.base + " OVERFIT."
        if overfit["on"] and instruction_hash(text) not in set(seen) | {ctx.base_hash}:
            return MCandidate.make(text, name, (ctx.base_hash,), name)
        return scripted_propose(name, ctx, llm, seen=seen)

    first = _sweep(exp, rule, [], propose)
    assert first.promoted and first.promoted_trial == 1
    client = MlflowClient(tracking_uri=registry_uri(exp))
    champion = {tt: client.get_prompt_version(prompt_name("harness", tt),
                                              _aliases(client, prompt_name("harness", tt))[CHAMPION]).template
                for tt in BASE}
    assert champion == first.promoted_instructions

    overfit["on"] = True
    resumed = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=3))
    lines: list[str] = []
    s = _sweep(resumed, rule, lines, propose)
    text = _text(lines)
    assert s.best_trial == 2 and any(r.trial == 2 and not r.wins for r in s.holdout), text
    assert s.promoted and s.promoted_trial == 1, text
    assert s.promoted_instructions == champion
    assert "PROMOTED: trial #1" in text and "(the study's standing winner from an earlier look)" in text
    assert "the study's standing winner, confirmed at holdout look 1 of these holdout tasks" in text
    registry = next(ln for ln in text.splitlines() if ln.startswith("registry: "))
    assert "no alias moved" not in registry and "(already champion)" in registry
    yaml = (exp.sweep_dir / "promoted_synth.yaml").read_text()
    assert yaml.startswith("# Promoted by sweep synth_mutation: trial #1") and "no candidate cleared" not in yaml
    for tt in BASE:  # @champion did not move and still holds what the summary promotes
        assert client.get_prompt_version(prompt_name("harness", tt),
                                         _aliases(client, prompt_name("harness", tt))[CHAMPION]).template \
            == champion[tt]
