"""Hydra configs: every group option composes against the schema; bad values give one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.config import ConfigError, ExperimentConfig, compose_config, to_experiment, to_harness_config, validate
from harness.config import HarnessConfig

CONF = Path(__file__).resolve().parents[1] / "conf"
GROUPS = ["backend", "planner", "synth", "toggles", "benchmark", "evaluator"]


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group, option", [(g, o) for g in GROUPS for o in _options(g)])
def test_every_group_option_composes(group, option):
    exp = validate(to_experiment(compose_config([f"{group}={option}"])))
    assert isinstance(exp, ExperimentConfig)


@pytest.mark.parametrize("sweep", _options("sweep"))
def test_every_sweep_composes(sweep):
    exp = validate(to_experiment(compose_config([f"+sweep={sweep}"])))
    assert exp.sweep.name == sweep
    assert exp.sweep.kind in ("single", "synth_mutation", "ab", "calibrate", "import_tasks", "generate_tasks")


def test_expected_groups_and_options_exist():
    assert set(_options("backend")) >= {"auto", "embedded", "ollama", "openai", "fake"}
    assert set(_options("planner")) == {"two_pass", "no_prior_knowledge", "single_pass"}
    assert set(_options("sweep")) == {"single", "synth_mutation", "prior_knowledge_ab", "champion_ab", "calibrate",
                                      "import_tasks", "generate_tasks"}


@pytest.mark.parametrize(
    "overrides, expect",
    [
        ([], {"sweep.kind": "single", "backend.kind": "auto", "memory.frozen": False}),
        (["+sweep=synth_mutation"], {"sweep.kind": "synth_mutation", "memory.frozen": True,
                                     "sweep.reuse_context": True, "sweep.pruner": "wilcoxon"}),
        (["+sweep=prior_knowledge_ab"], {"sweep.kind": "ab", "ab.b": {"planner.skip_prior_knowledge": True}}),
        (["planner=no_prior_knowledge"], {"planner.skip_prior_knowledge": True}),
        (["planner=single_pass"], {"planner.mode": "single_pass"}),
        (["backend=embedded", "wiggum.max_rounds=1"], {"backend.kind": "embedded", "wiggum.max_rounds": 1}),
        (["evaluator=deterministic_only"], {"evaluator.composite": "deterministic"}),
        (["+sweep=synth_mutation", "sweep.n_trials=3", "sweep.max_llm_calls=50"],
         {"sweep.n_trials": 3, "sweep.max_llm_calls": 50}),
        (["panel.enabled=true", "research.reuse_cache=true"], {"panel.enabled": True, "research.reuse_cache": True}),
    ],
)
def test_overrides_reach_the_dataclasses(overrides, expect):
    exp = validate(to_experiment(compose_config(overrides)))
    for dotted, value in expect.items():
        node = exp
        for part in dotted.split("."):
            node = getattr(node, part)
        assert node == value, dotted


def test_benchmarks_have_splits_and_criteria():
    smoke = to_experiment(compose_config(["benchmark=smoke"]))
    assert len(smoke.tasks("train")) == 3 and len(smoke.tasks("holdout")) == 2
    assert all(t.required_terms for t in smoke.benchmark.tasks)
    asy = to_experiment(compose_config(["benchmark=asyncio_practices"]))
    assert len(asy.tasks("train")) >= 8 and asy.tasks("holdout")
    assert {t.task_type for t in asy.benchmark.tasks} == {"enumerated", "best_practices", "research"}
    assert all(t.expected_count for t in asy.benchmark.tasks if t.task_type == "enumerated")


def test_synth_variants_have_real_instructions_for_every_task_type():
    for option in _options("synth"):
        exp = to_experiment(compose_config([f"synth={option}"]))
        assert set(exp.synth.instructions) == {"enumerated", "best_practices", "research"}
        assert all(len(text) > 80 for text in exp.synth.instructions.values())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["backend=foo"], "backend=foo is not an option; expected one of: auto, embedded, fake, ollama, openai"),
        (["+sweep=nope"], "sweep=nope is not an option; expected one of: calibrate, champion_ab, generate_tasks, import_tasks, prior_knowledge_ab, single, synth_mutation"),
        (["backend.kind=foo"], "backend.kind='foo' is not allowed; expected one of:"),
        (["planner.mode=three_pass"], "planner.mode='three_pass' is not allowed; expected one of: two_pass, single_pass"),
        (["+sweep=synth_mutation", "sweep.pruner=hyperband"], "sweep.pruner='hyperband' is not allowed"),
        (["+sweep=synth_mutation", "sweep.operators=[opro,teleport]"], "sweep.operators item='teleport' is not allowed"),
        (["+sweep=synth_mutation", "sweep.n_trials=0"], "sweep.n_trials=0 is out of range"),
        (["+sweep=synth_mutation", "sweep.holdout_test=vibes"], "sweep.holdout_test='vibes' is not allowed"),
        (["+sweep=synth_mutation", "sweep.holdout_baseline_runs=0"], "sweep.holdout_baseline_runs=0 is out of range"),
        (["+sweep=synth_mutation", "sweep.holdout_candidate_runs=0"], "sweep.holdout_candidate_runs=0 is out of range"),
        (["evaluator.composite=vibes"], "evaluator.composite='vibes' is not allowed"),
        (["sweep.alpha=2"], "sweep.alpha=2.0 is out of range"),
        (["backend=embedded", "backend.embedded_slots=0"], "backend.embedded_slots=0 is out of range"),
        (["backend.n_ctx=16"], "backend.n_ctx=16 is out of range"),
        (["backend.embedded_repeat_penalty=0.5"], "backend.embedded_repeat_penalty=0.5 is out of range"),
        (["backend.parallel_default=0"], "backend.parallel_default=0 is out of range"),
        (["backend.embedded_cache_ram_mib=-1"], "backend.embedded_cache_ram_mib=-1 is out of range"),
        (["+sweep=prior_knowledge_ab", "ab.a=synth=concise"],
         "cannot parse override 'ab.a=synth=concise': mismatched input '=' expecting <EOF>; quote a value that holds"),
        (["planner.mode=(("], "cannot parse overrides 'planner.mode=(('"),
    ],
)
def test_bad_values_give_one_line_errors(overrides, message):
    with pytest.raises(ConfigError) as info:
        validate(to_experiment(compose_config(overrides)))
    text = str(info.value)
    assert message in text
    assert "\n" not in text


@pytest.mark.parametrize(
    "override, message",
    [("sweep.n_trials=lots", "sweep.n_trials: Value 'lots'"), ("nokey=1", "Key 'nokey' not in 'ExperimentConfig'")],
)
def test_schema_errors_are_one_line(override, message):
    with pytest.raises(ConfigError) as info:
        compose_config(["+sweep=synth_mutation", override])
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "env, skip, cache",
    [({}, False, False), ({"HARNESS_SKIP_PRIOR_KNOWLEDGE": "1"}, True, False), ({"RESEARCH_CACHE": "1"}, False, True),
     ({"HARNESS_SKIP_PRIOR_KNOWLEDGE": "0", "RESEARCH_CACHE": "yes"}, False, True)],
)
def test_env_toggles_show_in_the_config(monkeypatch, env, skip, cache):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    exp = to_experiment(compose_config([]))
    assert exp.planner.skip_prior_knowledge is skip and exp.research.reuse_cache is cache
    h = to_harness_config(compose_config([]))
    assert isinstance(h, HarnessConfig)
    assert h.planner.skip_prior_knowledge is skip and h.research.reuse_cache is cache


def test_results_dir_follows_env(_isolated_results):
    exp = to_experiment(compose_config([]))
    assert exp.results_dir == str(_isolated_results)
    assert exp.storage_url.startswith("sqlite:///") and exp.storage_url.endswith("optuna.db")


def test_main_rejects_bad_config_before_running():
    from experiments.run import run_experiment

    with pytest.raises(ConfigError, match="backend.kind='nope'"):
        run_experiment(compose_config(["backend.kind=nope"]), runner=object())


def test_single_run_with_scripted_runner():
    from scripted_harness import ScriptedRunner

    from experiments.config import load_tasks
    from experiments.run import run_experiment

    exp = to_experiment(compose_config(["+sweep=single", "mlflow.enabled=false"]))
    lines: list[str] = []
    scores = run_experiment(exp, runner=ScriptedRunner(load_tasks(exp.benchmark)), out=lines.append)
    assert set(scores) == {t.id for t in exp.benchmark.tasks}
    assert "mean composite:" in "\n".join(lines)


def test_default_synth_matches_harness_defaults():
    from harness.synthesis import DEFAULT_INSTRUCTIONS

    exp = to_experiment(compose_config(["synth=default"]))
    assert exp.synth.instructions == DEFAULT_INSTRUCTIONS


@pytest.mark.parametrize(
    "overrides, check",
    [
        ({"planner.skip_prior_knowledge": True}, lambda e: e.planner.skip_prior_knowledge is True),
        ({"synth": "concise"}, lambda e: e.synth.variant == "concise" and "concrete command" in e.synth.instructions["best_practices"]),
        ({"wiggum.max_rounds": 1, "backend": "embedded"}, lambda e: e.wiggum.max_rounds == 1 and e.backend.kind == "embedded"),
    ],
)
def test_apply_overrides_for_ab_arms(overrides, check):
    from experiments.config import apply_overrides

    base = to_experiment(compose_config(["+sweep=prior_knowledge_ab"]))
    arm = apply_overrides(base, overrides)
    assert check(arm)
    assert base.planner.skip_prior_knowledge is False and base.synth.variant == "default"  # base untouched


@pytest.mark.parametrize(
    "overrides, message",
    [({"planner.nope": 1}, "override planner.nope=1 is not valid"), ({"synth": "shouty"}, "synth=shouty is not an option"),
     ({"wiggum.max_rounds": "many"}, "override wiggum.max_rounds='many' is not valid")],
)
def test_apply_overrides_rejects_bad_keys(overrides, message):
    from experiments.config import apply_overrides

    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        apply_overrides(to_experiment(compose_config([])), overrides)
