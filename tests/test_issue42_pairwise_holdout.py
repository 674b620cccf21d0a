"""Issue 42, lever a in the sweep: sweep.holdout_compare=pairwise confirms on the judge's side-by-side preferences.

The sweeps are scripted (tests/test_issue42_promotion.py's RuleRunner, no model). Each answer names its task, its
seed and whether its instruction names a tool; the judge double is a real-typed Judge (task, candidate's answer,
baseline's answer, seed) -> evaluators.pairwise.PairResult, built with the real combine_orders, that prefers
the tool-naming answer on the tasks its rule says. On 051d616 (and 3306971) there is no pairwise confirmation: 7 of
the 8 fail there (the sweep takes no judge, decide no preferences); "holdout_compare=both" is refused there too, as
an unknown key.
"""

from __future__ import annotations

import dataclasses

import optuna
import pytest
from scripted_harness import BOOST
from test_issue42_promotion import RuleRunner, _exp, _text

from evaluators.pairwise import PairResult, combine_orders
from experiments.config import ConfigError, compose_config, load_tasks, to_experiment, validate
from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
from experiments.promotion._decide import Candidate, decide
from experiments.sweep import run_sweep
from experiments.sweep._study import StudyMismatch, open_study

optuna.logging.set_verbosity(optuna.logging.WARNING)


class AnswerRunner(RuleRunner):
    """RuleRunner whose answer says which task, seed and instruction (tool or plain) wrote it."""

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
        out = super().finish(prepared, instructions=instructions, run_id=run_id, criteria=criteria, seed=seed)
        tid, _ = self.where[prepared["task"]]
        kind = "tool" if BOOST in instructions[prepared["task_type"]].lower() else "plain"
        return dataclasses.replace(out, output_text=f"answer {tid} seed {seed} {kind}")


class Judge:
    """Prefers the tool-naming answer in both orders on the tasks `prefers` names (a tie elsewhere); an unreadable
    reply on the tasks in `unreadable`; raises once it has judged `die_after` pairs (a dead judge server)."""

    def __init__(self, prefers=lambda tid: True, unreadable=(), die_after=None):
        self.prefers, self.unreadable, self.die_after = prefers, set(unreadable), die_after
        self.seen: list[tuple[str, str, str, int]] = []

    def __call__(self, task, candidate, baseline, seed):
        if self.die_after is not None and len(self.seen) >= self.die_after:
            raise ConnectionError("judge server gone")
        self.seen.append((task.id, candidate, baseline, seed))
        if task.id in self.unreadable:
            return PairResult(None, (None, None), (None, None), judge_failures=2)
        if not self.prefers(task.id):
            return PairResult(0.0, ("A", "A"), (True, True))  # each order picks the answer shown first: a tie
        first = 1.0 if "tool" in candidate else -1.0  # order 1: the candidate shown as A
        return PairResult(combine_orders(first, first), ("A" if first > 0 else "B", "B" if first > 0 else "A"),
                          (first > 0, first < 0))


def _no_score_gain(instr, tid, part):
    """Naming a tool gains 1 on every train task (the candidate is tested) and nothing on the holdout's scores."""
    return (1.0 if part == "train" else 0.0) if BOOST in instr.lower() else 0.0


def _pairwise(make_exp, name, **sweep):
    return _exp(make_exp, f"sweep.name={name}", race_block=0, holdout_futility_block=0,
                holdout_compare="pairwise", **sweep)


def _run(exp, judge, lines=None):
    runner = AnswerRunner(load_tasks(exp.benchmark), _no_score_gain)
    from scripted_harness import scripted_propose

    out = lines.append if lines is not None else (lambda s: None)
    return run_sweep(exp, runner, propose=scripted_propose, out=out, judge=judge), runner


def test_pairwise_confirms_a_candidate_the_judge_prefers_on_every_holdout_task(make_exp):
    """The holdout's scores show no gain, so the paired t does not confirm; the judge prefers the candidate's answer
    in both orders on all 12 holdout tasks: the one-sided sign-flip p is 1/2^12 and it is promoted. Every pair is
    the candidate's run k against the baseline's run k of the same task (seed 0 + k), judged once, with one seed
    per (task, run) for every candidate; the summary reports the judge."""
    point, _ = _run(_exp(make_exp, "sweep.name=point", race_block=0, holdout_futility_block=0), None)
    (prow,) = point.holdout
    assert prow.preference is None and not point.promoted

    lines: list[str] = []
    judge = Judge()
    s, _ = _run(_pairwise(make_exp, "pair"), judge, lines)
    (row,) = s.holdout
    assert row.preference == pytest.approx(1.0) and row.holdout_n == 12
    assert row.holdout_p == pytest.approx(1 / 2 ** 12) and row.wins and s.promoted
    assert len(judge.seen) == 12 * 3  # 3 runs of each text per task
    for tid, cand, base, seed in judge.seen:
        k = int(cand.split("seed ")[1].split()[0])
        assert cand == f"answer {tid} seed {k} tool" and base == f"answer {tid} seed {k} plain"
    assert len({seed for *_, seed in judge.seen}) == 36
    text = _text(lines)
    assert "over 12 tasks (pairwise: mean preference +1.000, exact sign-flip), runs 3/3, one-sided p" in text
    assert "36 pairs judged side by side: candidate preferred 36, tie 0, baseline preferred 0" in text
    assert "design power: not modelled for sweep.holdout_compare=pairwise" in text

    again = Judge()  # a rerun of the concluded study judges nothing again
    _run(_pairwise(make_exp, "pair"), again)
    assert again.seen == []


def test_ties_on_most_tasks_do_not_confirm(make_exp):
    """The judge prefers the candidate on 3 of 12 tasks and ties on the rest: sign-flip p 1/8, not confirmed."""
    s, _ = _run(_pairwise(make_exp, "ties"), Judge(prefers=lambda tid: tid in ("h0", "h1", "h2")))
    (row,) = s.holdout
    assert row.preference == pytest.approx(3 / 12) and row.holdout_p == pytest.approx(1 / 8)
    assert not row.wins and not s.promoted


def test_an_unreadable_verdict_counts_against_the_candidate(make_exp):
    """Two tasks' replies cannot be read: each counts -1 (never a tie), the other 10 +1: p = P(10+ of 12 signs
    over 12 tasks with 2 against: 79/4096), confirmed; the summary says so."""
    lines: list[str] = []
    s, _ = _run(_pairwise(make_exp, "unread"), Judge(unreadable=("h3", "h7")), lines)
    (row,) = s.holdout
    assert row.preference == pytest.approx((10 - 2) / 12)
    assert row.holdout_p == pytest.approx(79 / 4096) and row.wins
    assert "no readable verdict 6 (counted against it)" in _text(lines)


def test_a_judge_that_dies_concludes_nothing_and_the_same_command_judges_only_what_is_missing(make_exp):
    exp = _pairwise(make_exp, "dies")
    lines: list[str] = []
    cut, _ = _run(exp, Judge(die_after=10), lines)
    (row,) = cut.holdout
    assert not cut.promoted and not row.wins and row.holdout_p is None
    assert "pairwise judge failed on holdout task" in row.error and "judge server gone" in row.error
    assert cut.unconcluded and "NOT CONCLUDED" in _text(lines)
    assert "holdout_looks" not in open_study(exp).user_attrs  # a failure is not a look

    rest = Judge()
    s, runner = _run(exp, rest)
    assert len(rest.seen) == 36 - 10 and not [r for r in runner.run_ids if "-holdout-" in r]
    (row,) = s.holdout
    assert s.promoted and row.holdout_p == pytest.approx(1 / 2 ** 12) and not s.unconcluded


def test_decide_tests_preferences_with_the_sign_flip_and_holm():
    """Two candidates in the family: a at +1 on 8 tasks (p 1/256), b at +1 on 6 and -1 on 2 (p 37/256): a is
    confirmed at Holm's alpha / 2, b not; the score differences are shown beside them."""
    train = {f"t{i}": 5.0 for i in range(8)}
    cands = [Candidate(n, h, "op", 6.0, {t: 6.0 for t in train}, {}) for n, h in ((1, "a"), (2, "b"))]
    hold = [f"h{i}" for i in range(8)]
    base = HoldoutScores({h: 5.0 for h in hold})
    held = {c: HoldoutScores({h: 5.1 for h in hold}) for c in "ab"}
    prefs = {"a": {h: 1.0 for h in hold}, "b": {h: (1.0 if i < 6 else -1.0) for i, h in enumerate(hold)}}
    v = decide(cands, train, base, held, train_floor=0.0, alpha=0.05, test=HoldoutTest(0.0, None, 0.025),
               train_filter="positive", preferences=prefs)
    a, b = v.rows
    assert a.holdout_p == pytest.approx(1 / 256) and a.wins and a.holdout_level == pytest.approx(0.0125)
    assert b.holdout_p == pytest.approx(37 / 256) and not b.wins and b.preference == pytest.approx(0.5)
    assert a.holdout_diff == pytest.approx(0.1) and v.winner.hash == "a"


@pytest.mark.parametrize("overrides, match", [
    (["sweep.holdout_compare=both"], r"sweep\.holdout_compare"),
    (["sweep.holdout_compare=pairwise", "sweep.holdout_test=bound"], r"needs sweep\.holdout_test=tasks"),
])
def test_a_bad_compare_setting_is_one_line(overrides, match):
    with pytest.raises(ConfigError, match=match) as err:
        validate(to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", *overrides]), environ={}))
    assert "\n" not in str(err.value)


def test_holdout_compare_is_pinned_in_the_decision_rule(make_exp):
    exp = _pairwise(make_exp, "pinned")
    _run(exp, Judge())
    changed = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=3, holdout_compare="pointwise"))
    with pytest.raises(StudyMismatch, match=r"sweep\.holdout_compare: "):
        _run(changed, None)
