"""The per-type search (sweep.search=per_type), reflection over every task of a type (sweep.reflect_feedback=all)
and the search benchmark's world (bench/search/world.py), which drives the real sweep."""

from __future__ import annotations

import sys
from pathlib import Path

import optuna
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.search.world import REFLECT_HIT, World, WorldLLM, WorldRunner  # noqa: E402
from experiments.config import ConfigError, compose_config, to_experiment  # noqa: E402
from experiments.search._state import (Evaluated, SearchState, candidate_hash, holdout_pool,  # noqa: E402
                                             rejected_edits, type_feedback)
from harness.config import TASK_TYPES  # noqa: E402

BASE = {"enumerated": "List the items. Number them.", "research": "Write prose. Cite sources."}


def _ev(number, instructions, scores, fb=None, types=None):
    types = types or {"e1": "enumerated", "e2": "enumerated", "r1": "research", "r2": "research"}
    fb = fb or {}
    feedback = tuple(sorted(((t, types[t], s, fb.get(t, f"words on {t}")) for t, s in scores.items()),
                            key=lambda f: f[2]))
    return Evaluated(number, dict(instructions), candidate_hash(instructions), sum(scores.values()) / len(scores),
                     feedback, dict(scores))


def test_composed_takes_each_types_best_text_with_its_scores():
    base = _ev(0, BASE, {"e1": 5, "e2": 5, "r1": 5, "r2": 5})
    # trial 1: a good enumerated edit and a bad research edit (its mean is below the baseline's)
    one = _ev(1, {"enumerated": "List the items. Number them. Name a tool.", "research": "Write prose."},
              {"e1": 6, "e2": 6, "r1": 3, "r2": 3})
    # trial 2: a good research edit, a bad enumerated one
    two = _ev(2, {"enumerated": "List the items.", "research": "Write prose. Cite sources. Compare."},
              {"e1": 4, "e2": 4, "r1": 5.5, "r2": 6.5})
    state = SearchState(dict(BASE), (base, one, two))
    assert state.parent().number == 0  # the best joint mean is still the baseline: both trials lost whole
    c = state.composed()
    assert c.instructions == {"enumerated": one.instructions["enumerated"], "research": two.instructions["research"]}
    assert c.scores == {"e1": 6, "e2": 6, "r1": 5.5, "r2": 6.5}
    assert c.value == pytest.approx(6.0) and c.hash == candidate_hash(c.instructions)
    assert {f[0] for f in c.feedback} == {"e1", "e2", "r1", "r2"}
    assert state.choose_parent("best", None, "per_type").instructions == c.instructions
    # one source for every type: the composition is that candidate itself
    both = _ev(4, {"enumerated": "List them. Name a tool.", "research": "Prose. Cite. Compare."},
               {"e1": 7, "e2": 7, "r1": 7, "r2": 7})
    assert SearchState(dict(BASE), (base, one, both)).composed() is both


def test_holdout_pool_is_the_fresh_composition_in_a_per_type_search():
    C = optuna.trial.TrialState.COMPLETE

    def trial(n, **attrs):
        t = optuna.trial.create_trial(state=C, value=5.0, user_attrs=attrs)
        t.number = n
        return t

    class Cand:
        def __init__(self, n):
            self.number = n

    trials = [trial(0, operator="baseline"), trial(1, operator="reflect"), trial(2, operator="compose")]
    cands = [Cand(1), Cand(2)]
    assert [c.number for c in holdout_pool(cands, trials, "per_type")] == [2]
    assert [c.number for c in holdout_pool(cands, trials, "joint")] == [1, 2]
    # the composition repeated trial 1's text: trial 1 is the one
    dup = [trial(0, operator="baseline"), trial(1, operator="reflect"), trial(2, operator="compose", duplicate_of=1)]
    assert [c.number for c in holdout_pool([Cand(1)], dup, "per_type")] == [1]
    # no composition (stopped early): every candidate
    assert [c.number for c in holdout_pool(cands, trials[:2], "per_type")] == [1, 2]


def test_type_feedback_counts_words_over_every_task_and_names_rejected_edits():
    fb = {"e1": "Weakness: no tools.", "e2": "Weakness: no tools.", "r1": "Weakness: no citations."}
    parent = _ev(3, BASE, {"e1": 4, "e2": 5, "r1": 6, "r2": 7}, fb)
    worse = _ev(4, {**BASE, "enumerated": "List the items. Number them. Be brief."},
                {"e1": 3, "e2": 4, "r1": 6, "r2": 7})
    better = _ev(5, {**BASE, "enumerated": "List the items. Name a tool."}, {"e1": 6, "e2": 6, "r1": 6, "r2": 7})
    lineage = {worse.hash: (parent.hash,), better.hash: (parent.hash,)}
    state = SearchState(dict(BASE), (parent, worse, better), lineage=lineage)
    items = type_feedback(state, parent, "enumerated")
    assert items[0].startswith("[2 of 2 tasks (e1, e2), mean score 4.5] Weakness: no tools.")
    assert not any("citations" in x for x in items)  # another type's words are not this type's
    tried = rejected_edits(state, parent, "enumerated")
    assert len(tried) == 1 and "added 'Be brief.'" in tried[0] and "Name a tool" not in tried[0]
    assert any("Already tried" in x for x in items)


def test_search_settings_are_checked():
    from experiments.config import validate

    for bad in ("sweep.search=both", "sweep.reflect_feedback=some"):
        with pytest.raises(ConfigError, match=bad.split("=")[0]):
            validate(to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", bad]), environ={}))


# -- the benchmark's world -------------------------------------------------------------------------------------


def _world(kind="gain"):
    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]), environ={})
    return World.make(3, exp.synth.instructions, kind), exp


def test_world_truth_is_what_its_properties_are_worth():
    w, exp = _world()
    assert w.available == pytest.approx(0.72)
    assert w.worth(exp.synth.instructions) == 0.0
    tt = TASK_TYPES[0]
    helpful = [p for p in w.props[tt] if p.gain > 0]
    text = exp.synth.instructions[tt] + " " + helpful[0].constraint.text
    assert w.worth({**exp.synth.instructions, tt: text}) == pytest.approx(helpful[0].gain / len(TASK_TYPES))
    assert _world("null")[0].available == 0.0 and _world("zero")[0].available == 0.0
    # the judge's feedback names the weakness; the same run is the same score (a response cache replays it)
    s1, f1 = w.judge(tt, exp.synth.instructions[tt], "t1", 0)
    assert (s1, f1) == w.judge(tt, exp.synth.instructions[tt], "t1", 0)
    assert f1.startswith("Weakness") or "worse" in f1 or "no major" in f1


def test_world_reflection_makes_the_named_fix_about_half_the_time():
    from mutators import MutationContext, propose

    w, exp = _world()
    tt = TASK_TYPES[0]
    big = max(w.props[tt], key=lambda p: p.gain)
    from bench.search.world import WEAKNESS

    ctx_fb = (f"[6 of 8 tasks (t1, t2), mean score 5.0] Weakness: {WEAKNESS[big.key]}.",)
    llm = WorldLLM(w)
    hits = 0
    for seed in range(200):
        ctx = MutationContext(base=exp.synth.instructions[tt], feedback=ctx_fb, task_type=tt, seed=seed)
        cand = propose("reflect", ctx, llm)
        hits += big.constraint.present_in(cand.text)
    assert llm.requests.count("reflect") == 200
    assert REFLECT_HIT - 0.12 < hits / 200 < REFLECT_HIT + 0.2  # plus the random edits that add it by chance


def test_benchmark_drives_the_real_per_type_sweep(make_exp):
    from experiments.config import load_tasks
    from experiments.sweep import run_sweep

    exp = make_exp("sweep.search=per_type", "sweep.reflect_feedback=all", operators=("reflect",), n_train=6,
                   n_holdout=6)
    exp.synth.instructions = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]),
                                           environ={}).synth.instructions
    exp.sweep.n_trials = 5
    w = World.make(0, exp.synth.instructions)
    runner = WorldRunner(w, load_tasks(exp.benchmark))
    run_sweep(exp, runner, out=lambda s: None)
    study = optuna.load_study(study_name=exp.sweep.name, storage=exp.sweep.storage)
    ops = [t.user_attrs.get("operator") for t in study.trials]
    assert ops[0] == "baseline" and ops[-1] == "compose"
    assert runner.mutation_llm.calls > 0 and set(runner.mutation_llm.requests) == {"reflect"}
    # no race and no gate: every search trial ran every train task
    assert all(len(t.user_attrs.get("task_scores", {})) == 6 for t in study.trials
               if t.state.name == "COMPLETE" and t.user_attrs.get("duplicate_of") is None)


def test_composed_pools_every_run_of_a_kept_text():
    base = _ev(0, BASE, {"e1": 5, "e2": 5, "r1": 5, "r2": 5})
    lucky = "Write prose. Cite sources. Be lucky."
    # the lucky research text led once (7) and fell back when a later trial ran it again (4): pooled 5.5
    one = _ev(1, {**BASE, "research": lucky}, {"e1": 5, "e2": 5, "r1": 7, "r2": 7})
    two = _ev(2, {"enumerated": "List. Name a tool.", "research": lucky}, {"e1": 6, "e2": 6, "r1": 4, "r2": 4})
    three = _ev(3, {**BASE, "research": "Write prose. Cite sources. Compare."}, {"e1": 5, "e2": 5, "r1": 6, "r2": 6})
    c = SearchState(dict(BASE), (base, one, two, three)).composed()
    assert c.instructions["research"] == three.instructions["research"]  # 6 beats the lucky text's pooled 5.5
    assert c.instructions["enumerated"] == "List. Name a tool."
    assert c.scores["r1"] == 6 and c.scores["e1"] == 6
    # the baseline's enumerated text, run in trials 0, 1 and 3, pools to 5: still below the edit's 6
    four = _ev(4, {**BASE, "research": lucky}, {"e1": 9, "e2": 9, "r1": 4, "r2": 4})
    c = SearchState(dict(BASE), (base, one, two, three, four)).composed()
    assert c.instructions["enumerated"] == BASE["enumerated"]  # (5 + 5 + 5 + 9) / 4 = 6 ties 6: the earlier text
    assert c.scores["e1"] == pytest.approx(6.0)


def test_round_robin_edits_one_type_a_trial_and_measures_kept_texts_anew(make_exp):
    from experiments.config import load_tasks
    from experiments.sweep import run_sweep

    exp = make_exp("sweep.search=round_robin", operators=("reflect",), n_train=6, n_holdout=6)
    exp.synth.instructions = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]),
                                           environ={}).synth.instructions
    exp.sweep.n_trials = 6
    w = World.make(1, exp.synth.instructions)
    run_sweep(exp, WorldRunner(w, load_tasks(exp.benchmark)), out=lambda s: None)
    study = optuna.load_study(study_name=exp.sweep.name, storage=exp.sweep.storage)
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    by_hash = {t.user_attrs["instruction_hash"]: t for t in done}
    search = [t for t in done if t.user_attrs.get("operator") not in ("baseline", "compose")]
    assert search
    for t in search:
        parent = t.user_attrs["parent_hash"]
        parent_ins = by_hash[parent].user_attrs["instructions"] if parent in by_hash else None
        if parent_ins is None:  # a composition that no trial ran whole: compare with the baseline's types
            continue
        changed = [tt for tt in t.user_attrs["instructions"] if t.user_attrs["instructions"][tt] != parent_ins[tt]]
        assert len(changed) <= 1
    # a text kept from one trial to the next is measured anew there (a seed of its own per trial), not replayed
    enum_ids = [task.id for task in load_tasks(exp.benchmark) if task.task_type == "enumerated" and task.split == "train"]
    same = [(a, b) for a, b in zip(done, done[1:])
            if a.user_attrs["instructions"]["enumerated"] == b.user_attrs["instructions"]["enumerated"]]
    assert same and any(a.user_attrs["task_scores"][enum_ids[0]] != b.user_attrs["task_scores"][enum_ids[0]]
                        for a, b in same)


def test_holdout_need_line_uses_the_spread_of_the_candidates_going_there():
    import math
    import random

    from scipy.stats import norm

    from experiments.sweep._preflight import holdout_need_line

    class Cand:
        def __init__(self, scores):
            self.train_scores = scores

    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]), environ={})
    rng = random.Random(0)
    ref = {f"t{i}": 5.0 for i in range(200)}
    # an edit that helps some tasks much and hurts others: per-task sd 1.0 around +0.3, run noise sigma 0.5
    cand = Cand({t: 5.0 + 0.3 + rng.gauss(0, 1.0) + rng.gauss(0, 0.5) for t in ref})
    line = holdout_need_line(exp, [cand], ref, 0.5, 3, 0.025)
    tau = float(line.split("tau ")[1].split()[0])
    assert 0.8 < tau < 1.2
    have = len(exp.tasks("holdout"))
    sd = math.sqrt(tau ** 2 + 0.25 * (1 / exp.sweep.holdout_candidate_runs + 1 / exp.sweep.holdout_baseline_runs))
    need = math.ceil(((norm.ppf(0.975) + norm.ppf(exp.calibrate.power)) * sd / exp.calibrate.target_effect) ** 2)
    assert f"takes about {need} holdout tasks; the benchmark has {have}" in line
    assert ("may go unconfirmed" in line) == (need > have)
    # a neutral rewrite's spread (none beyond the noise) needs far fewer
    flat = Cand({t: 5.0 + rng.gauss(0, 0.5 * math.sqrt(4 / 3)) for t in ref})
    assert float(holdout_need_line(exp, [flat], ref, 0.5, 3, 0.025).split("tau ")[1].split()[0]) < 0.3
    assert holdout_need_line(exp, [cand], ref, 0.0, 3, 0.025) == ""  # no measured noise: no line


def test_sizing_takes_the_spread_of_an_edit_that_changes_answers():
    from types import SimpleNamespace

    from experiments.tasks._sizing import spread

    cal = SimpleNamespace(decomposition={"sampled": {"tau": 0.1}}, heterogeneity={"tau": 0.9, "n": 12})
    tau, source = spread(cal)
    assert tau == 0.9 and "positive control" in source and "12 tasks" in source and "0.100" in source
    tau, source = spread(SimpleNamespace(decomposition={"sampled": {"tau": 0.5}}, heterogeneity={"tau": 0.2}))
    assert tau == 0.5 and source.startswith("its A/A' arm") and "0.200" in source
    assert spread(SimpleNamespace(decomposition=None, heterogeneity={"tau": 0.4}))[0] == 0.4
    assert spread(SimpleNamespace(decomposition=None, heterogeneity=None))[0] == 0.0
