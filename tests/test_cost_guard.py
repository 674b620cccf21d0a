"""Issue 34 items 1, 2, 4: a candidate's cost beside its score, the cost guard in the promotion rule, and the cost
model preflight states. The scripted sweep: the better-scoring candidate ("concrete tool") also writes twice the
completion tokens; with the guard off it is promoted, with sweep.max_cost_increase=0.1 it is held back."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from experiments.config import ConfigError
from experiments.stats import CostGuard
from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
from experiments.promotion._decide import Candidate, decide

from conftest import OLD_DESIGN
from scripted_harness import BOOST, ScriptedRunner, scripted_propose


class LongRunner(ScriptedRunner):
    """ScriptedRunner whose "concrete tool" texts write twice the completion tokens (per-task lengths vary)."""

    def finish(self, prepared, *, instructions, **kw):
        out = super().finish(prepared, instructions=instructions, **kw)
        base = 100 + int(hashlib.sha256(prepared["task"].encode()).hexdigest()[:4], 16) % 40
        tokens = base * (2 if BOOST in instructions[prepared["task_type"]].lower() else 1)
        return dataclasses.replace(out, usage=dataclasses.replace(out.usage, completion_tokens=tokens))


def _sweep(exp, lines):
    from experiments.config import load_tasks
    from experiments.sweep import run_sweep

    return run_sweep(exp, LongRunner(load_tasks(exp.benchmark)), propose=scripted_propose, out=lines.append)


def test_a_better_but_twice_as_long_candidate_is_promoted_with_the_guard_off_and_held_back_at_10_percent(make_exp):
    off_lines: list[str] = []
    # the cost guard on a fixed design: every proposal runs all 8 train tasks (the gate passes them; racing would
    # stop one after 4) and one holdout run of each text, on 12 holdout tasks (issue 52: over 6 the skew-holding
    # confirmation confirms the scripted +1.5 gain, 3.5 sd, only about 0.7 of the time)
    exp = make_exp(*OLD_DESIGN, "sweep.n_trials=3", "sweep.holdout_top_k=1", operators=("add_tool",), mlflow=True,
                   n_holdout=12)
    off = _sweep(exp, off_lines)
    assert off.promoted
    (row,) = off.holdout
    assert row.wins and not row.held_by_cost and row.cost.passed
    d = row.cost_diffs["completion_tokens"]
    assert d.n == 12 and d.ratio == pytest.approx(1.0)  # twice the tokens, paired over the 12 holdout tasks
    text = "\n".join(off_lines)
    assert "cost vs baseline (holdout, trial #" in text and "completion_tokens +" in text and "(+100%" in text

    _figures_beside_the_summary(exp, off, row)

    on_lines: list[str] = []
    on = _sweep(make_exp(*OLD_DESIGN, "sweep.n_trials=3", "sweep.holdout_top_k=1", "sweep.max_cost_increase=0.1",
                         "sweep.name=guarded", operators=("add_tool",), n_holdout=12), on_lines)
    (row,) = on.holdout
    assert row.wins and row.held_by_cost and not on.promoted  # the quality claim stands; cost holds it back
    assert row.cost.upper == pytest.approx(1.0)  # upper bound of the increase: +100% against the 10% limit
    text = "\n".join(on_lines)
    assert "cost guard: completion_tokens increase not shown below 10%: upper bound +100% at" in text
    assert "HELD BACK BY COST" in text and "PROMOTED: baseline (no change kept" in text
    print("\n--- guard off ---\n" + "\n".join(off_lines[-60:]) + "\n--- guard 0.1 ---\n" + "\n".join(on_lines[-60:]))


def _figures_beside_the_summary(exp, s, row):
    """Item 1: the same paired cost in the ledger (train, per trial), MLflow trial metrics and registry tags."""
    import json

    from mlflow.tracking import MlflowClient

    from experiments.sweep._study import open_study
    from experiments.sweep._registry import sweep_evidence
    from experiments.sweep._study import frozen_trial

    rows = [json.loads(line) for line in (exp.sweep_dir / "ledger.jsonl").read_text().splitlines()]
    tool = [r for r in rows if r["operator"] == "add_tool"]
    assert tool and all(r["cost"]["completion_tokens"]["ratio"] == pytest.approx(1.0) for r in tool)
    assert all(r["cost"]["completion_tokens"]["n"] == 8 and r["cost"]["llm_calls"]["diff"] == 0 for r in tool)
    from experiments.config import tracking_uri

    client = MlflowClient(tracking_uri(exp))  # this sweep's store, not the process's current tracking URI
    runs = client.search_runs([client.get_experiment_by_name(exp.sweep.name).experiment_id],
                              filter_string="tags.kind = 'trial'")
    m = {int(r.data.tags["trial_number"]): r.data.metrics for r in runs}
    for r in tool:
        assert m[r["trial"]]["cost_diff.completion_tokens"] == pytest.approx(r["cost"]["completion_tokens"]["diff"])
        assert m[r["trial"]]["cost_diff.completion_tokens_lo"] > 0
    study = open_study(exp)
    tags = sweep_evidence(study, frozen_trial(study, s.promoted_trial), row, {}, {}).tags()
    assert float(tags["cost_diff.completion_tokens"]) == pytest.approx(row.cost_diffs["completion_tokens"].diff, rel=1e-3)
    assert float(tags["cost_ratio.completion_tokens"]) == pytest.approx(1.0) and tags["cost_guard"] == "cost guard off"
    lo, hi = map(float, tags["cost_diff.completion_tokens_ci"].strip("[]").split(","))
    assert 0 < lo <= hi


@pytest.mark.parametrize("override, needle", [
    ("sweep.max_cost_increase=-0.1", "sweep.max_cost_increase=-0.1 is out of range"),
    ("sweep.max_cost_increase=true", "sweep.max_cost_increase"),  # the typed config refuses it first
    ("sweep.cost_metric=tokens", "sweep.cost_metric"),
])
def test_a_bad_cost_setting_is_a_one_line_error(override, needle):
    from experiments.config import compose_config, to_experiment
    from experiments.config import validate

    with pytest.raises(ConfigError) as err:
        validate(to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", override])))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_the_cost_guard_is_pinned_in_the_decision_rule_and_an_older_study_reads_as_guard_off():
    from experiments.config import compose_config, to_experiment
    from experiments.config import decision_rule, fingerprint_diff, with_rule_defaults

    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]))
    rule = decision_rule(exp)
    assert rule["sweep"]["cost_metric"] == "completion_tokens" and rule["sweep"]["max_cost_increase"] is None
    older = {"sweep": {k: v for k, v in rule["sweep"].items() if k not in ("cost_metric", "max_cost_increase")}}
    assert fingerprint_diff(with_rule_defaults(older), rule) == []  # a study pinned before issue 34: guard off
    exp.sweep.max_cost_increase = 0.1
    assert fingerprint_diff(with_rule_defaults(older), decision_rule(exp)) == ["sweep.max_cost_increase: null -> 0.1"]


def test_decide_tests_the_cost_at_the_looks_level_and_a_cost_not_measured_holds_back():
    """Two confirmed candidates: the cheaper one wins under a 10% limit though it scores lower; with no stored
    cost for the baseline (a study whose holdout ran before issue 34) nothing is promoted under the guard."""
    ref = {f"r{i}": 5.0 + 0.1 * (i % 3) for i in range(8)}
    top = [Candidate(1, "long", "add_tool", 7.0, {t: v + 2 for t, v in ref.items()}),
           Candidate(2, "short", "add_tool", 6.9, {t: v + 1.9 for t, v in ref.items()})]
    tasks = [f"h{i}" for i in range(6)]
    base = HoldoutScores({t: 5.0 + 0.2 * (i % 3) for i, t in enumerate(tasks)})
    held = {"long": HoldoutScores({t: v + 2.0 + 0.05 * (i % 2) for i, (t, v) in enumerate(base.scores.items())}),
            "short": HoldoutScores({t: v + 1.5 + 0.05 * (i % 2) for i, (t, v) in enumerate(base.scores.items())})}
    tokens = {t: 100.0 + 7 * i for i, t in enumerate(tasks)}
    costs = {"base": tokens, "long": {t: 2 * v for t, v in tokens.items()},
             "short": {t: v + (1 if i % 2 else -1) for i, (t, v) in enumerate(tokens.items())}}
    test = HoldoutTest(0.2, 20, 0.025)
    kw = dict(train_floor=0.2, alpha=0.05, test=test, base_key="base")
    assert decide(top, ref, base, held, **kw).winner.hash == "long"  # no guard: the best holdout mean
    guarded = decide(top, ref, base, held, guard=CostGuard("completion_tokens", 0.1), costs=costs, **kw)
    assert guarded.winner.hash == "short"
    long_row = next(r for r in guarded.rows if r.hash == "long")
    assert long_row.held_by_cost and "at 98%" in long_row.cost.reason  # 1 - 0.025, the look's level
    blind = decide(top, ref, base, held, guard=CostGuard("completion_tokens", 0.1),
                   costs={k: v for k, v in costs.items() if k != "base"}, **kw)
    assert blind.winner is None and all(r.held_by_cost and "not measured" in r.cost.reason for r in blind.rows)


def test_preflight_states_its_cost_model_unknown_first_then_from_the_baseline_trials_tasks(make_exp):
    from experiments.sweep._study import open_study
    from experiments.sweep._study import baseline_trial

    first: list[str] = []
    _sweep(make_exp("sweep.n_trials=2", "sweep.holdout_top_k=0", operators=("add_tool",)), first)
    assert any("preflight: cost model: unknown until the baseline runs" in ln for ln in first)
    exp = make_exp("sweep.n_trials=3", "sweep.holdout_top_k=0", operators=("add_tool",))
    costs = baseline_trial(open_study(exp)).user_attrs["task_costs"]
    comp = sum(costs["completion_tokens"].values()) / 8
    again: list[str] = []
    _sweep(exp, again)
    (line,) = [ln for ln in again if "preflight: cost model:" in ln]
    assert f"{comp:.0f} completion + " in line and "means over the baseline trial's 8 tasks" in line
    assert "projected " in line and " task runs" in line
    print(line)
