"""Issue 42, the promotion side of the new default design: the train filter (sweep.train_filter: wilcoxon |
positive | none), the futility stop on the holdout (sweep.holdout_futility_block), the preflight's level counted
as the conclusion counts it, and looks counted across every holdout that shares a task with this one (a re-split
no longer starts a fresh error budget).

The sweeps are scripted (tests/scripted_harness.py, no model): RuleRunner adds a chosen effect per instruction, task
and split to ScriptedRunner's seeded scores. The new settings are set on the composed config's SweepConfig (not as
overrides) so that on 3306971, where the keys did not exist, each test fails on the behaviour it checks.
"""

from __future__ import annotations

import dataclasses

import optuna
import pytest
from conftest import OLD_SWEEP
from scripted_harness import BOOST, ScriptedRunner, scripted_propose

from experiments.config import BenchmarkConfig, ConfigError, compose_config, load_tasks, to_experiment
from experiments.config._schema import TaskSpec
from experiments.config import validate
from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
from experiments.promotion._decide import Candidate, decide
from experiments.sweep import run_sweep
from experiments.sweep._study import StudyMismatch, open_study

optuna.logging.set_verbosity(optuna.logging.WARNING)


class RuleRunner(ScriptedRunner):
    """ScriptedRunner (naming a tool worth nothing by itself, noise sd `noise`) plus rule(instruction, task id,
    split) composite points on each score; `fail_after`: a holdout run of a boosted text fails once that many
    holdout tasks of boosted texts have finished (a backend that dies mid-holdout)."""

    def __init__(self, tasks, rule, noise: float = 0.02, fail_after: int | None = None) -> None:
        super().__init__(tasks, noise=noise, effect=0.0)
        self.rule, self.where = rule, {t.task: (t.id, t.split) for t in tasks}
        self.fail_after, self.boosted_holdout = fail_after, 0

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
        tid, part = self.where[prepared["task"]]
        instr = instructions[prepared["task_type"]]
        if part == "holdout" and BOOST in instr.lower():
            if self.fail_after is not None and self.boosted_holdout >= self.fail_after:
                self.calls += 3
                self.run_ids.append(run_id)
                from experiments.runs import TaskOutcome

                return TaskOutcome.failed("scripted backend died")
            self.boosted_holdout += 1
        out = super().finish(prepared, instructions=instructions, run_id=run_id, criteria=criteria, seed=seed)
        if out.status != "ok":
            return out
        add = self.rule(instr, tid, part)
        return dataclasses.replace(out, score=out.score + add, selection_score=out.selection_score + add,
                                   dimensions={"depth": out.score + add})


def _bench(exp, train: list[str], holdout: list[str]):
    """A benchmark whose tasks (ids from the two lists) have the content of their id, whichever split holds them."""
    tasks = [TaskSpec(id=i, task=f"task {i}", task_type=("enumerated", "research")[int(i[1:]) % 2], split=part)
             for part, ids in (("train", train), ("holdout", holdout)) for i in ids]
    exp.benchmark = BenchmarkConfig(name="issue42", tasks=tasks)
    return exp


def _exp(make_exp, *overrides, train=8, holdout=12, design="shipped", **sweep):
    """design "old": conftest.OLD_SWEEP set on the SweepConfig (1 + 1 holdout runs, the Wilcoxon filter, no stop)."""
    exp = _bench(make_exp("sweep.n_trials=2", *overrides, operators=("add_tool",)),
                 [f"t{i}" for i in range(train)], [f"h{i}" for i in range(holdout)])
    exp.sweep.gate_tasks = 0  # every proposal runs every train task: the filter, not the gate, decides
    exp.sweep.pruner = "none"
    for k, v in (OLD_SWEEP if design == "old" else {}).items():
        setattr(exp.sweep, k, v)
    for k, v in sweep.items():
        setattr(exp.sweep, k, v)
    return exp


def _sweep(exp, rule, lines=None, **runner_kw):
    runner = RuleRunner(load_tasks(exp.benchmark), rule, **runner_kw)
    out = lines.append if lines is not None else (lambda s: None)
    return run_sweep(exp, runner, propose=scripted_propose, out=out), runner


def _holdout_runs(runner, key=None) -> list[str]:
    return [r for r in runner.run_ids if "-holdout-" in r and (key is None or f"-holdout-{key}" in r)]


def _text(lines):
    return "\n".join(lines)


# -- the train filter: positive sends a small train gain to the holdout ------------------------------------------

TRAIN_MIXED = {"t0": 0.3, "t1": -0.5, "t2": 0.3, "t3": -0.5, "t4": 0.6, "t5": -0.3, "t6": 0.6, "t7": -0.18}  # +0.04


def _small_train_real_holdout(instr, tid, part):
    """Naming a tool: a train difference of +0.04 on average with mixed signs (one-sided Wilcoxon p about 0.3), and
    a real holdout gain (+0.5 to +0.7 per task): the issue's candidate with train +0.04 and holdout p 0.0007."""
    if BOOST not in instr.lower():
        return 0.0
    return TRAIN_MIXED[tid] if part == "train" else 0.5 + 0.1 * (int(tid[1:]) % 3)


def test_the_positive_filter_sends_a_small_train_gain_with_a_real_holdout_gain_to_the_holdout(make_exp):
    """Under sweep.train_filter=wilcoxon (3306971's only rule) the candidate is cut by the train filter and never
    tested; under positive its train mean is above the baseline's, the holdout tests it and it is promoted."""
    cut_lines: list[str] = []
    cut, _ = _sweep(_exp(make_exp, "sweep.name=w", train_filter="wilcoxon"), _small_train_real_holdout, cut_lines)
    (row,) = cut.holdout
    assert 0 < row.train.diff < 0.1 and row.train.p_value > 0.05 and not row.wins and not cut.promoted
    assert "not tested: did not pass the train filter" in _text(cut_lines)

    lines: list[str] = []
    s, _ = _sweep(_exp(make_exp, "sweep.name=p", train_filter="positive"), _small_train_real_holdout, lines)
    (row,) = s.holdout
    assert row.train.diff == pytest.approx(cut.holdout[0].train.diff)  # the same candidate and train scores
    assert row.wins and s.promoted, _text(lines)
    assert row.holdout_diff > 0.4 and row.holdout_p < 1e-3 and row.holdout_level == pytest.approx(0.025)
    text = _text(lines)
    assert (f"best vs baseline (train filter): positive (sweep.train_filter=positive): passes: train mean "
            f"{row.train.diff:+.3f} above the baseline's over 8 tasks (one candidate; the holdout alone confirms"
            in text)


def test_the_none_filter_tests_every_top_k_candidate_and_positive_does_not_test_a_train_loss():
    """decide: a candidate whose train mean is below the baseline's is not tested under positive, is under none;
    the family the look's level is split over (Holm) is what the filter passed."""
    train = {f"t{i}": 5.0 for i in range(8)}
    loser = Candidate(1, "a", "op", 4.9, {t: v - 0.1 for t, v in train.items()}, {})
    gainer = Candidate(2, "b", "op", 5.1, {t: v + (0.1 if i % 2 else -0.05) for i, (t, v) in enumerate(train.items())},
                       {})
    hold = [f"h{i}" for i in range(8)]
    base = HoldoutScores({h: 5.0 for h in hold})
    held = {c: HoldoutScores({h: 6.0 + 0.1 * (i % 3) for i, h in enumerate(hold)}) for c in "ab"}
    kw = dict(train_floor=0.0, alpha=0.05, test=HoldoutTest(0.0, None, 0.025))
    pos = decide([gainer, loser], train, base, held, train_filter="positive", **kw)
    assert {r.hash: r.holdout_level for r in pos.rows} == {"b": pytest.approx(0.025), "a": None}
    assert {r.hash: r.wins for r in pos.rows} == {"b": True, "a": False}
    none = decide([gainer, loser], train, base, held, train_filter="none", **kw)
    assert sorted(r.holdout_level for r in none.rows) == [pytest.approx(0.0125), pytest.approx(0.025)]
    assert all(r.wins for r in none.rows)
    wil = decide([gainer, loser], train, base, held, **kw)  # wilcoxon: +0.04 on mixed signs is cut
    assert not any(r.wins for r in wil.rows)



def _train_loss_holdout_gain(instr, tid, part):
    """Naming a tool loses 0.3 on every train task (the positive filter cuts it) and would gain 0.5 on the holdout."""
    if BOOST not in instr.lower():
        return 0.0
    return -0.3 if part == "train" else 0.5


def test_a_candidate_the_train_filter_cuts_runs_nothing_on_the_holdout(make_exp):
    """The family is fixed by train data before any holdout run, so a top candidate the filter cuts is never tested:
    it runs no holdout task (051d616 ran all its blocks, 3 runs x 12 tasks, and the baseline's beside them: 36 of
    the README main command's 76 task runs), the baseline runs its first block alone (3 runs x 4 tasks, the run
    noise of the design power line), no look is spent, and the row says it was not run, without an error (the
    sweep concludes)."""
    lines: list[str] = []
    exp = _exp(make_exp, "sweep.name=cut", train_filter="positive", holdout_futility_block=4, race_block=0)
    s, runner = _sweep(exp, _train_loss_holdout_gain, lines)
    (row,) = s.holdout
    assert row.train.diff == pytest.approx(-0.3, abs=0.05) and not row.passes_filter
    assert _holdout_runs(runner, row.hash) == []
    assert len(_holdout_runs(runner)) == 3 * 4, _holdout_runs(runner)
    assert row.holdout_mean is None and row.error is None and not row.wins and not s.promoted
    assert s.unconcluded == () and "holdout_looks" not in open_study(exp).user_attrs
    text = _text(lines)
    assert "[no holdout run; not tested: did not pass the train filter] does not win" in text
    assert "holdout  not run: did not pass the train filter" in text
    assert "design power: this design confirms a mean effect of" in text and "NOT CONCLUDED" not in text


# -- the futility stop ---------------------------------------------------------------------------------------


def _train_gain_holdout_loss(instr, tid, part):
    """Naming a tool gains 1 on every train task (it passes the Wilcoxon filter) and loses 1 on every holdout task."""
    if BOOST not in instr.lower():
        return 0.0
    return 1.0 if part == "train" else -1.0


def _gain(instr, tid, part):
    return (1.0 if part == "train" else 0.4 + 0.2 * (int(tid[1:]) % 3)) if BOOST in instr.lower() else 0.0


@pytest.mark.parametrize("design, runs", [("old", 1), ("shipped", 3)])
def test_futility_stops_a_losing_candidate_after_its_first_block_and_spends_fewer_task_runs(make_exp, design, runs):
    """12 holdout tasks in blocks of 4: the candidate losing 1 per task stops after the first block (4 tasks of each
    arm instead of 12); not confirmed; the look is still counted and stored. A gaining candidate runs every block and
    is confirmed with the p of the test without stops (the same scores: the claim is made at the last block). With
    one holdout run of each text (old) and with the shipped 3 + 3."""
    # the futility stop, on and off, at 1 + 1 (the old design) and 3 + 3 (shipped) holdout runs per task
    off, r_off = _sweep(_exp(make_exp, "sweep.name=off", design=design, holdout_futility_block=0),
                        _train_gain_holdout_loss)
    assert len(_holdout_runs(r_off)) == 12 * 2 * runs and not off.promoted

    lines: list[str] = []
    exp = _exp(make_exp, "sweep.name=on", design=design, holdout_futility_block=4)
    s, runner = _sweep(exp, _train_gain_holdout_loss, lines)
    (row,) = s.holdout
    assert len(_holdout_runs(runner)) == 4 * 2 * runs, _holdout_runs(runner)  # 4 tasks x (baseline + candidate)
    assert row.stopped_after == 4 and not row.wins and not s.promoted and row.holdout_p is None
    assert row.holdout_diff == pytest.approx(-1.0, abs=0.05)
    text = _text(lines)
    assert f"stopped for futility after 4 of 12 holdout tasks (mean diff so far {row.holdout_diff:+.3f})" in text
    # look 2: study "off" in this storage made look 1 on these holdout tasks
    assert "holdout look 2 of these holdout tasks (1 of the earlier ones by other studies" in text
    looks = open_study(exp).user_attrs["holdout_looks"]
    assert [e["family"] for e in looks] == [[row.hash]]  # the look is spent

    seq, r_seq = _sweep(_exp(make_exp, "sweep.name=gain-on", design=design, holdout_futility_block=4), _gain)
    one, _ = _sweep(_exp(make_exp, "sweep.name=gain-off", design=design, holdout_futility_block=0), _gain)
    assert len(_holdout_runs(r_seq)) == 12 * 2 * runs and seq.promoted and one.promoted
    assert seq.holdout[0].stopped_after is None
    assert seq.holdout[0].holdout_p == pytest.approx(one.holdout[0].holdout_p, rel=1e-9)


def test_a_resumed_study_that_stopped_for_futility_does_not_run_it_again(make_exp):
    exp = _exp(make_exp, holdout_futility_block=4)
    first, _ = _sweep(exp, _train_gain_holdout_loss)
    assert first.holdout[0].stopped_after == 4
    resumed = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=3))
    lines: list[str] = []
    s, runner = _sweep(resumed, _train_gain_holdout_loss, lines)
    stopped = next(r for r in s.holdout if r.hash == first.holdout[0].hash)
    assert stopped.stopped_after == 4 and not stopped.wins
    assert _holdout_runs(runner, stopped.hash) == [] and len(_holdout_runs(runner)) == 0, _holdout_runs(runner)
    assert "stopped for futility after 4 of 12 holdout tasks" in _text(lines)
    assert len(open_study(exp).user_attrs["holdout_looks"]) == 1  # the same family: the same look


@pytest.mark.parametrize("design, lacks, baseline_lacks", [("old", 8, 4), ("shipped", 32, 24)])
def test_a_holdout_cut_short_mid_block_resumes_with_the_tasks_it_lacks(make_exp, design, lacks, baseline_lacks):
    """The backend dies after 4 of the gaining candidate's holdout task runs: NOT CONCLUDED. old (1 + 1 runs): its
    first block stored, the second fails; the resume runs only the candidate's 8 holdout tasks it lacks (3306971
    stored a holdout run only whole and ran all 12 again) and the baseline's third block (its first two were
    stored: 4). shipped (3 + 3): run 1 of its first block stored, run 2 fails; the resume runs runs 2-3 of that
    block and all 3 runs of the other two (8 + 24 = 32), and the baseline's 8 unrun tasks x 3 (24; its first block
    was whole). Either way it concludes exactly as a study that was never cut short."""
    # resuming the futility stop's blocks at 1 + 1 (old design) and 3 + 3 (shipped) holdout runs per task
    exp = _exp(make_exp, "sweep.name=cut", design=design, holdout_futility_block=4)
    lines: list[str] = []
    cut, _ = _sweep(exp, _gain, lines, fail_after=4)
    assert not cut.promoted and "scripted backend died" in _text(lines)
    s, runner = _sweep(exp, _gain)
    (row,) = s.holdout
    assert len(_holdout_runs(runner, row.hash)) == lacks, _holdout_runs(runner)
    assert len(_holdout_runs(runner)) == lacks + baseline_lacks
    assert "NOT CONCLUDED" in _text(lines)  # the cut-short study said so (issue 41)
    whole, _ = _sweep(_exp(make_exp, "sweep.name=whole", design=design, holdout_futility_block=4), _gain)
    assert s.promoted and row.holdout_p == pytest.approx(whole.holdout[0].holdout_p, rel=1e-12)
    assert row.holdout_diff == pytest.approx(whole.holdout[0].holdout_diff, rel=1e-12)


def test_decide_stops_a_losing_candidate_at_its_first_block_and_holm_counts_it_as_p_1():
    """Given every task's scores, decide stops the candidate where the sweep would have: at the first futility look
    whose conditional power at the design's detectable effect is below its floor; the other candidate of the family is tested at Holm's alpha / 2."""
    train = {f"t{i}": 5.0 for i in range(8)}
    cands = [Candidate(n, h, "op", 6.0, {t: 6.0 + 0.01 * i for i, t in enumerate(train)}, {}) for n, h in ((1, "a"),
                                                                                                          (2, "b"))]
    order = [f"h{i}" for i in range(12)]
    base = HoldoutScores({h: 5.0 for h in order})
    # first 4: -0.3 (z -2.46); then gains 1-8 (a flat +3 after four near-0 tasks is a left-skewed sample the
    # skew-holding confirmation does not confirm, p 0.046; with 1 in 10 losing 5 among its references it asks a
    # t of about 3.5 over 12 tasks: these gains, mean +2.4, are confirmed at p 0.019)
    gains = (1.0, 2.0, 3.0, 4.0, 5.0, 3.0, 4.0, 8.0)
    # the stop judges the conditional power at the design's detectable effect: a first block that clearly loses
    late = {h: 4.7 + (0.1 if i % 2 else -0.1) if i < 4 else 5.0 + gains[i - 4] for i, h in enumerate(order)}
    good = {h: 5.5 + 0.1 * (i % 3) for i, h in enumerate(order)}
    v = decide(cands, train, base, {"a": HoldoutScores(late), "b": HoldoutScores(good)}, train_floor=0.0, alpha=0.05,
               test=HoldoutTest(0.0, None, 0.025), futility_block=4, order=order)
    a, b = v.rows
    assert a.stopped_after == 4 and a.futility_of == 12 and a.holdout_diff == pytest.approx(-0.3) and not a.wins
    assert b.wins and b.holdout_level == pytest.approx(0.0125) and b.stopped_after is None
    # without the stop the late gainer (mean +2.4 over 12) is confirmed: the stop only removes confirmations
    # (tested alone, at the look's level 0.025: p 0.019)
    assert decide(cands[:1], train, base, {"a": HoldoutScores(late)}, train_floor=0.0, alpha=0.05,
                  test=HoldoutTest(0.0, None, 0.025)).rows[0].wins


def test_the_new_settings_are_pinned_in_the_decision_rule(make_exp):
    exp = _exp(make_exp, train_filter="positive", holdout_futility_block=4)
    _sweep(exp, _gain)
    for key, value in (("train_filter", "none"), ("holdout_futility_block", 0)):
        changed = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=3))
        setattr(changed.sweep, key, value)
        with pytest.raises(StudyMismatch, match=rf"sweep\.{key}: "):
            _sweep(changed, _gain)


@pytest.mark.parametrize("override", ["sweep.train_filter=wilcox", "sweep.holdout_futility_block=-1"])
def test_a_bad_setting_is_one_line(override):
    """(New settings: on 3306971 the keys did not exist.)"""
    with pytest.raises(ConfigError) as err:
        validate(to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", override])))
    assert override.split("=")[0] in str(err.value) and "\n" not in str(err.value)


# -- looks: a re-split shares the budget of the tasks it kept; the preflight prints the level it will test at --------


def _e_rule(instr, tid, part):
    return (1.0 if part == "train" else 0.6 + 0.2 * (int(tid[1:]) % 3)) if BOOST in instr.lower() else 0.0


def test_a_re_split_that_keeps_8_of_12_holdout_tasks_continues_their_count_of_looks(make_exp):
    """Study s1 concludes on holdout h0..h11 (look 1). Study s2 moves h8..h11 to train and t4..t7 to holdout: 8 of
    its 12 holdout tasks were looked at. 3306971 counted looks per identical holdout set, so s2 started again at
    look 1 (level 0.025); now it is look 2 (0.0125)."""
    exp = _exp(make_exp, "sweep.name=s1")
    s1, _ = _sweep(exp, _e_rule)
    assert len(open_study(exp).user_attrs["holdout_looks"]) == 1 and s1.holdout[0].holdout_p is not None
    train = [f"t{i}" for i in range(4)] + [f"h{i}" for i in range(8, 12)]
    holdout = [f"h{i}" for i in range(8)] + [f"t{i}" for i in range(4, 8)]
    exp2 = _bench(dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, name="s2")), train, holdout)
    lines: list[str] = []
    s2, _ = _sweep(exp2, _e_rule, lines)
    assert s2.holdout[0].holdout_level == pytest.approx(0.0125), _text(lines)
    assert ("holdout look 2 of these holdout tasks (1 of the earlier ones by other studies in this storage): level "
            "0.0125 = alpha 0.05 / 2^2") in _text(lines)


@pytest.mark.parametrize("design, then", [("old", "together"), ("shipped", "with a futility stop every 4")])
def test_the_preflight_prints_the_level_a_new_study_on_a_used_holdout_will_test_at(make_exp, design, then):
    """With a stored calibration the preflight prints the design power at the next look's level. Study s1 spent
    look 1 of these holdout tasks; a new study s2 on them tests at 0.0125. 3306971 counted s2's own looks only and
    printed level 0.025."""
    from experiments.calibration import run_calibration

    # the looks across studies, under the Wilcoxon-filter design and the shipped one (each names its own design)
    exp = _exp(make_exp, "sweep.name=s1", holdout=6, design=design)
    cal = to_experiment(compose_config(["+sweep=calibrate", "backend=fake"]))
    cal.benchmark, cal.synth.instructions, cal.mlflow.enabled = exp.benchmark, dict(exp.synth.instructions), False
    run_calibration(validate(cal), ScriptedRunner(load_tasks(exp.benchmark)), out=lambda s: None)
    first: list[str] = []
    _sweep(exp, _e_rule, first)
    pre1 = next(ln for ln in first if "preflight: design power:" in ln)
    assert f"level 0.025 {then}" in pre1
    assert len(open_study(exp).user_attrs["holdout_looks"]) == 1
    lines: list[str] = []
    _sweep(dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, name="s2")), _e_rule, lines)
    pre = next(ln for ln in lines if "preflight: design power:" in ln)
    assert f"level 0.0125 {then}" in pre, pre
