"""`python -m harness`: plan preview executes nothing, the summary block, one-line errors and exit codes, and the
one config path: group=option / key=value overrides composed as the experiments compose them, flags as aliases.

The CLI builds its backends through the registry, so the scripted pipeline fake is registered as a backend
kind here and chosen with --backend (or backend.kind=pipeline-fake), like a real one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import harness.research.search
from harness.__main__ import (EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError, build_parser, compose_harness_config,
                               flag_overrides, main, quote, split_words)
from harness.inference import BackendError, register_backend
from harness.stores import read_jsonl
from pipeline_fake import ListSearch, Router, numbered, pipeline_llm, plan_json

REPO = Path(__file__).resolve().parents[1]
TASK = "List 5 best practices for Python asyncio and save to output.md"
COMPOUND = "Research agent failure modes and context engineering, then write a unified guide"
GRAPH = json.dumps({
    "objectives": ["a unified guide"], "exit_criteria": ["both covered"], "explanation": "independent steps",
    "tasks": [{"id": "E1", "question": "What are common failure modes of LLM agents?", "depends_on": []},
              {"id": "E2", "question": "What is context engineering?", "depends_on": []},
              {"id": "E3", "question": "Which mitigations fit #E1.summary?", "depends_on": ["E1"]}],
})

_ACTIVE: dict[str, Router] = {}
register_backend("pipeline-fake")(lambda cfg, role: pipeline_llm(_ACTIVE["router"]))


@pytest.fixture
def router(monkeypatch):
    r = Router(graph=GRAPH)
    _ACTIVE["router"] = r
    search = ListSearch()
    monkeypatch.setattr(harness.research.search, "make_search", lambda cfg, results_dir: search)
    r.search = search
    yield r
    _ACTIVE.clear()


def cli(tmp_path, *args: str) -> int:
    return main(["--backend", "pipeline-fake", "--results-dir", str(tmp_path / "res"), "--no-cache", *args])


def test_plan_preview_prints_graph_and_order_and_executes_nothing(tmp_path, router, capsys):
    code = cli(tmp_path, "--plan-preview", "--mode", "always", COMPOUND)
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert set(router.calls) == {"prior", "plan", "graph"}  # no research, synthesis, judge or memory calls
    assert router.search.queries == []
    assert "Plan preview (dry run: nothing executed)" in out and "Route: orchestrated" in out
    assert "E1: What are common failure modes of LLM agents?  [after: -]" in out
    assert "E3: Which mitigations fit #E1.summary?  [after: E1]" in out and "Order: E1 -> E2 -> E3" in out
    res = tmp_path / "res"
    assert not (res / "runs.jsonl").exists() and not (res / "outputs").exists() and not (res / "traces").exists()


# Seed 001's order is not the id order here: E2 leads (memory 0.9); E3 shares E2's tool (memory 0.2) and goes
# before E1 (search 0.3); E4 (search 0.8) waits for E1, whose output it quotes.
SCHEDULED_GRAPH = json.dumps({
    "objectives": ["a unified guide"], "exit_criteria": ["all answered"], "explanation": "tools lead the order",
    "tasks": [
        {"id": "E1", "question": "What are common failure modes of LLM agents?", "depends_on": [],
         "tools": ["search"], "affinity": 0.3, "criteria": ["five failure modes"]},
        {"id": "E2", "question": "What is context engineering for LLM agents?", "depends_on": [],
         "tools": ["memory"], "affinity": 0.9},
        {"id": "E3", "question": "How do LLM agents recall earlier runs from memory?", "depends_on": [],
         "tools": ["memory"], "affinity": 0.2},
        {"id": "E4", "question": "Which mitigations fit #E1.summary?", "depends_on": ["E1"],
         "tools": ["search"], "affinity": 0.8, "done_when": ["each failure mode has a mitigation"]},
    ],
})


def test_the_trace_runs_the_steps_in_the_order_the_preview_prints(tmp_path, router, capsys):
    router.replies["graph"] = SCHEDULED_GRAPH
    assert cli(tmp_path, "--plan-preview", "--mode", "always", COMPOUND) == EXIT_OK
    preview = capsys.readouterr().out
    printed = next(line for line in preview.splitlines() if line.startswith("Order: "))
    preview_order = printed.removeprefix("Order: ").split(" -> ")
    assert preview_order == ["E2", "E3", "E1", "E4"]
    assert "      tools: memory=0.90" in preview and "      done when: each failure mode has a mitigation" in preview

    assert cli(tmp_path, "--mode", "always", "orchestrator.max_parallel=2", COMPOUND) == EXIT_OK
    rec = next(r for r in read_jsonl(tmp_path / "res" / "runs.jsonl") if r.get("mode") == "orchestrated")
    trace = json.loads(Path(rec["trace"]).read_text())["traceEvents"]
    spans = sorted((e for e in trace if e.get("ph") == "X" and e["name"].startswith("subtask ")), key=lambda e: e["ts"])
    assert [e["name"].split()[1] for e in spans] == preview_order
    assert [s["id"] for s in rec["steps"]] == preview_order == rec["planner_telemetry"]["order"]
    e1, e4 = (next(e for e in spans if e["name"] == f"subtask {sid}") for sid in ("E1", "E4"))
    assert e4["ts"] >= e1["ts"] + e1["dur"]  # E4 quotes E1: it started after E1 finished
    assert [t["tools"] for t in rec["graph"]["tasks"]] == [["search"], ["memory"], ["memory"], ["search"]]


def test_run_prints_the_summary_block(tmp_path, router, capsys):
    code = cli(tmp_path, "--mode", "off", TASK)
    out = capsys.readouterr().out
    assert code == EXIT_OK
    rec = read_jsonl(tmp_path / "res" / "runs.jsonl")[-1]
    lines = out.splitlines()
    assert lines[0] == "== harness run =="
    fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
    assert fields["run_id"].strip() == rec["run_id"]
    assert fields["status"].strip() == "ok"
    assert "planner=fake:" in fields["backend"] and fields["task_type"].strip() == "enumerated"
    assert fields["output"].strip() == rec["output_path"] and Path(rec["output_path"]).name == "output.md"
    assert fields["trace"].strip() == rec["trace"] and Path(rec["trace"]).is_file()
    calls = sum(u["calls"] for u in rec["llm"].values())
    assert f"calls={calls} " in fields["llm"]
    assert "elapsed_s" in fields


def test_compound_run_summary_shows_mode_steps_and_parallelism(tmp_path, router, capsys):
    router.replies.update(plan=plan_json(task_type="research", sections=None))
    code = cli(tmp_path, "--mode", "always", COMPOUND)
    out = capsys.readouterr().out
    assert code == EXIT_OK
    assert "mode:        orchestrated (orchestrator.mode=always)" in out
    assert "steps:       E1 ok" in out and "E3 ok" in out and "had_errors=False" in out
    assert "parallel:    wall=" in out and "max_parallel=2" in out and "(+ steps: calls=" in out


def test_failed_run_exits_non_zero_with_the_reason(tmp_path, router, capsys):
    def down(messages):
        raise BackendError("embedded model smollm2-135m-instruct failed: out of memory")

    router.replies.update(synth=down)
    code = cli(tmp_path, "--mode", "off", TASK)
    out = capsys.readouterr().out
    assert code == EXIT_FAILED
    assert "status:      failed (BackendError: embedded model smollm2-135m-instruct failed: out of memory)" in out


@pytest.mark.parametrize("task", ["", "   "])
def test_empty_task_exits_2_with_one_line(tmp_path, router, capsys, task):
    code = cli(tmp_path, task)
    captured = capsys.readouterr()
    assert code == EXIT_USAGE
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.startswith("error: task is empty")
    assert sum(router.calls.values()) == 0


def test_skill_only_task_is_a_one_line_error(tmp_path, router, capsys):
    code = cli(tmp_path, "/deep")
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.count("\n") == 1 and err.startswith("error: task is empty after the skill tokens")
    assert sum(router.calls.values()) == 0


def test_bad_backend_is_a_one_line_error(tmp_path, capsys):
    """--backend is an alias of backend.kind=..., validated like any override: a usage error, nothing written."""
    code = main(["--backend", "nonsense", "--results-dir", str(tmp_path / "res"), TASK])
    captured = capsys.readouterr()
    assert code == EXIT_USAGE and captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("config error: backend.kind='nonsense' is not allowed; expected one of")
    assert "embedded" in captured.err and "ollama" in captured.err
    assert not (tmp_path / "res").exists()


def test_skip_prior_knowledge_flag(tmp_path, router, capsys):
    assert cli(tmp_path, "--mode", "off", "--skip-prior-knowledge", TASK) == EXIT_OK
    assert router.calls["prior"] == 0 and router.calls["plan"] == 1


def test_rounds_and_panel_flags_reach_the_run(tmp_path, router, capsys):
    router.replies.update(judge=json.dumps({d: 2 for d in ("relevance", "completeness", "depth", "specificity",
                                                           "structure", "grounded")} | {"feedback": "thin"}),
                          revise=numbered(5))
    assert cli(tmp_path, "--mode", "off", "--rounds", "2", "--panel", TASK) == EXIT_OK
    rec = read_jsonl(tmp_path / "res" / "runs.jsonl")[-1]
    assert len(rec["wiggum"]["rounds"]) == 2 and router.calls["revise"] == 1
    assert len(rec["panel"]) == 3


def test_module_entry_point_empty_task_exit_code():
    proc = subprocess.run([sys.executable, "-m", "harness", " "], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == EXIT_USAGE
    assert proc.stdout == "" and proc.stderr.strip().splitlines() == ["error: task is empty: give the task as the first argument"]


# -- one config path: overrides beside the task, flags as aliases ------------------------------------------------


def concise(task_type: str) -> str:
    import yaml

    return yaml.safe_load((REPO / "conf" / "synth" / "concise.yaml").read_text())["instructions"][task_type]


def test_overrides_reach_the_run_and_its_record(tmp_path, router, capsys):
    """The variant an A/B tested (synth=concise, planner=single_pass, one wiggum round) runs by hand as tested."""
    overrides = ["synth=concise", "planner=single_pass", "wiggum.max_rounds=1", "orchestrator.mode=off"]
    assert main(["backend.kind=pipeline-fake", f"results_dir={tmp_path / 'res'}", "backend.cache=false", TASK,
                 *overrides]) == EXIT_OK
    rec = read_jsonl(tmp_path / "res" / "runs.jsonl")[-1]
    assert router.calls["prior"] == 0 and router.calls["plan"] == 1  # single_pass: no prior-knowledge pass
    assert rec["instruction"] == concise("enumerated")
    assert any(concise("enumerated") in m["content"] for m in router.messages["synth"][0])
    assert rec["config"]["synth"]["variant"] == "concise" and rec["config"]["planner"]["mode"] == "single_pass"
    assert len(rec["wiggum"]["rounds"]) == 1 and rec["config"]["wiggum"]["max_rounds"] == 1
    assert rec["config_overrides"] == ["backend.kind=pipeline-fake", f"results_dir={tmp_path / 'res'}",
                                       "backend.cache=false", *overrides]


def test_flags_are_recorded_as_the_overrides_they_stand_for(tmp_path, router, capsys):
    assert cli(tmp_path, "--mode", "always", "--rounds", "1", COMPOUND, "synth=grounded") == EXIT_OK
    rec = read_jsonl(tmp_path / "res" / "runs.jsonl")[-1]
    assert rec["mode"] == "orchestrated" and rec["config"]["synth"]["variant"] == "grounded"
    assert rec["config_overrides"] == ["backend.kind='pipeline-fake'", f"results_dir='{tmp_path / 'res'}'",
                                       "wiggum.max_rounds=1", "orchestrator.mode='always'", "backend.cache=false",
                                       "synth=grounded"]


def test_a_typed_override_wins_over_a_flag(tmp_path, router, capsys):
    router.replies.update(judge=json.dumps({d: 2 for d in ("relevance", "completeness", "depth", "specificity",
                                                           "structure", "grounded")} | {"feedback": "thin"}))
    assert cli(tmp_path, "--mode", "off", "--rounds", "3", TASK, "wiggum.max_rounds=1") == EXIT_OK
    assert len(read_jsonl(tmp_path / "res" / "runs.jsonl")[-1]["wiggum"]["rounds"]) == 1


MODEL = "qwen2.5:32b"
FLAG_CASES = [  # (flags, dotted field, value): every flag of the old CLI, as an alias of its override
    (["--backend", "ollama"], "backend.kind", "ollama"),
    (["--host", "http://10.0.0.5:11434"], "backend.host", "http://10.0.0.5:11434"),
    (["--base-url", "http://127.0.0.1:8000/v1"], "backend.base_url", "http://127.0.0.1:8000/v1"),
    (["--model", MODEL], "backend.planner_model", MODEL),
    (["--model", MODEL], "backend.compressor_model", MODEL),
    (["--results-dir", "/tmp/a dir/it's, x=1"], "results_dir", "/tmp/a dir/it's, x=1"),
    (["--skip-prior-knowledge"], "planner.skip_prior_knowledge", True),
    (["--search", "local"], "search.provider", "local"),
    (["--rounds", "0"], "wiggum.max_rounds", 0),
    (["--panel"], "panel.enabled", True),
    (["--no-memory"], "memory.enabled", False),
    (["--no-cache"], "backend.cache", False),
    (["--mode", "off"], "orchestrator.mode", "off"),
]


def field(cfg, dotted: str):
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


@pytest.mark.parametrize("flags,key,value", FLAG_CASES)
def test_each_flag_is_an_alias_of_its_override(flags, key, value):
    cfg = compose_harness_config(flag_overrides(build_parser().parse_args([*flags, TASK])), environ={})
    assert field(cfg, key) == value
    assert cfg.synth.instructions  # composed from conf/ (synth=default), not HarnessConfig()


def test_groups_and_keys_compose_like_the_experiments():
    from experiments.config import compose_config, to_harness_config

    overrides = ["synth=concise", "planner=single_pass", "backend=fake", "wiggum.max_rounds=1"]
    cfg = compose_harness_config(overrides, environ={})
    assert cfg == to_harness_config(compose_config(overrides), {})
    assert cfg.synth.instructions["research"] == concise("research") and cfg.wiggum.max_rounds == 1
    assert not cfg.planner.prior_knowledge_enabled
    assert cfg.backend.kind == "fake" and cfg.backend.planner_model == "fake-planner" and not cfg.backend.cache


@pytest.mark.parametrize("environ,overrides,key,value", [
    ({"HARNESS_SKIP_PRIOR_KNOWLEDGE": "1"}, [], "planner.skip_prior_knowledge", True),  # env over conf/
    ({"HARNESS_SKIP_PRIOR_KNOWLEDGE": "1"}, ["planner.skip_prior_knowledge=false"], "planner.skip_prior_knowledge", False),
    ({"HARNESS_SKIP_PRIOR_KNOWLEDGE": "0"}, ["planner=no_prior_knowledge"], "planner.skip_prior_knowledge", True),
    ({"HARNESS_RESULTS_DIR": "/env/res"}, [], "results_dir", "/env/res"),
    ({"HARNESS_RESULTS_DIR": "/env/res"}, ["results_dir='/cli/res'"], "results_dir", "/cli/res"),
    ({"HARNESS_BACKEND": "embedded"}, [], "backend.kind", "embedded"),
    ({"HARNESS_BACKEND": "embedded"}, ["backend=ollama"], "backend.kind", "ollama"),
    ({"HARNESS_BACKEND": "embedded"}, ["backend.kind=fake"], "backend.kind", "fake"),
    ({"RESEARCH_CACHE": "1"}, ["synth=concise"], "research.reuse_cache", True),
    ({"RESEARCH_CACHE": "1"}, ["research.reuse_cache=false"], "research.reuse_cache", False),
    ({"OLLAMA_HOST": "http://h:1"}, [], "backend.host", None),  # resolved at connect time, below backend.host
])
def test_environment_wins_over_conf_and_the_command_line_wins_over_it(environ, overrides, key, value):
    assert field(compose_harness_config(overrides, environ=environ), key) == value


def test_old_flags_beat_the_environment_as_before(tmp_path, router, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_BACKEND", "nonsense")
    monkeypatch.setenv("HARNESS_SKIP_PRIOR_KNOWLEDGE", "0")
    assert cli(tmp_path, "--mode", "off", "--skip-prior-knowledge", TASK) == EXIT_OK
    assert router.calls["prior"] == 0 and (tmp_path / "res" / "runs.jsonl").is_file()


@pytest.mark.parametrize("override,message", [
    ("synth=nope", "config error: synth=nope is not an option; expected one of: concise, default, grounded"),
    ("wiggum.max_rounds=-1", "config error: wiggum.max_rounds=-1 is out of range; expected a value in [0, inf]"),
    ("wiggum.max_rounds=many", "config error: wiggum.max_rounds: Value 'many' of type 'str' could not be converted"),
    ("planner.nope=1", "config error: planner.nope: Key 'nope' not in 'PlannerConfig'"),
    ("nope=1", "config error: Key 'nope' not in 'HarnessConf'"),
    ("planner=null", "config error: Config group override must be a string or a list"),
    ("backend.concurrency=0", "config error: backend.concurrency must be 'auto' or an integer >= 1, got '0'"),
    ("backend.embedded_repeat_penalty=3", "config error: backend.embedded_repeat_penalty=3.0 is out of range"),
])
def test_bad_override_is_one_line_exit_2_and_nothing_written(tmp_path, router, capsys, override, message):
    code = main(["backend.kind=pipeline-fake", f"results_dir={tmp_path / 'res'}", TASK, override])
    captured = capsys.readouterr()
    assert code == EXIT_USAGE and captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith(message), captured.err
    assert sum(router.calls.values()) == 0 and not (tmp_path / "res").exists()


def test_bad_override_from_the_shell_writes_nothing(tmp_path):
    res = tmp_path / "res"
    proc = subprocess.run([sys.executable, "-m", "harness", TASK, "synth=terse", "backend=fake"], cwd=tmp_path,
                          env={**os.environ, "HARNESS_RESULTS_DIR": str(res), "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_USAGE and proc.stdout == ""
    assert proc.stderr.splitlines() == ["config error: synth=terse is not an option; expected one of: concise, default, grounded"]
    assert not res.exists() and not (tmp_path / "outputs").exists() and not (tmp_path / "hydra").exists()


@pytest.mark.parametrize("words,task_option,literal,task,overrides", [
    ([TASK, "synth=concise"], None, [], TASK, ["synth=concise"]),
    (["synth=concise", TASK, "+x.y=1", "++z=2", "~evaluator"], None, [], TASK, ["synth=concise", "+x.y=1", "++z=2", "~evaluator"]),
    (["Explain why x = 1 here"], None, [], "Explain why x = 1 here", []),  # a space before '=': the task
    (["What does a==b do in Python?"], None, [], "What does a==b do in Python?", []),
    (["synth=concise"], "x=1: explain this assignment", [], "x=1: explain this assignment", ["synth=concise"]),
    (["synth=concise"], None, ["x=1:", "explain", "it"], "x=1: explain it", ["synth=concise"]),
    (["synth=concise"], None, [], None, ["synth=concise"]),
])
def test_split_words_finds_the_task_and_the_overrides(words, task_option, literal, task, overrides):
    assert split_words(words, task_option, literal) == (task, overrides)


def test_two_task_texts_are_a_usage_error(tmp_path, router, capsys):
    with pytest.raises(UsageError, match="2 task texts"):
        split_words(["List", "five"])
    code = cli(tmp_path, TASK, "--task", "another task")
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.count("\n") == 1 and err.startswith("error: 2 task texts")
    assert sum(router.calls.values()) == 0


def test_task_that_looks_like_an_override_runs_after_the_separator(tmp_path, router, capsys):
    assert cli(tmp_path, "--mode", "off", "synth=concise", "--", "x=5: list 5 asyncio practices") == EXIT_OK
    rec = read_jsonl(tmp_path / "res" / "runs.jsonl")[-1]
    assert rec["task"] == "x=5: list 5 asyncio practices" and rec["config_overrides"][-1] == "synth=concise"


def test_only_overrides_is_an_empty_task_with_a_hint(tmp_path, router, capsys):
    code = cli(tmp_path, "x=1")
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and err.count("\n") == 1
    assert err.startswith("error: task is empty") and "--task or --" in err


@pytest.mark.parametrize("value", ["plain", "/tmp/a b/c", "it's", "a,b=c", "C:\\dir\\", "a\\'b", "${oc.env:HOME}",
                                   "\\${x}", "qwen2.5:32b"])
def test_quote_composes_back_to_the_same_string(value):
    from experiments.config import compose_config

    assert compose_config([f"results_dir={quote(value)}"]).results_dir == value


HEAVY = ("hydra", "omegaconf", "mlflow", "chromadb", "optuna", "scipy", "xllamacpp", "numpy", "torch", "experiments")


def test_help_is_fast_and_imports_no_heavy_package():
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "synth=concise" in proc.stdout and "--task" in proc.stdout
    assert "synth:" in proc.stdout and "concise, default, grounded" in proc.stdout  # the groups, read off conf/
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line}
    assert not imported.intersection(HEAVY), sorted(imported.intersection(HEAVY))


def test_two_runs_asking_for_one_output_file_keep_both(tmp_path, router, capsys):
    """Issue 33 item 9: two tasks that both say "save to output.md", one results folder. Before, the second run
    overwrote the first's file and the first run's record pointed at the second run's text. Now the second run
    writes output-<its run id>.md, each record points at its own file, and each file holds its own run's answer."""
    def topical(messages):
        text = "\n".join(m["content"] for m in messages)
        return numbered(5, "logging" if "Python logging" in text else "asyncio")

    router.replies.update(synth=topical, revise=topical, retry=topical)
    tasks = ["List 5 best practices for Python asyncio and save to output.md",
             "List 5 best practices for Python logging and save to output.md"]
    for task in tasks:
        assert cli(tmp_path, "--mode", "off", "--no-memory", task) == EXIT_OK
    capsys.readouterr()
    first, second = read_jsonl(tmp_path / "res" / "runs.jsonl")
    paths = [Path(first["output_path"]), Path(second["output_path"])]
    assert paths[0].name == "output.md" and paths[1].name == f"output-{second['run_id']}.md"
    assert "in asyncio**" in paths[0].read_text() and "in logging**" not in paths[0].read_text()
    assert "in logging**" in paths[1].read_text() and "in asyncio**" not in paths[1].read_text()
    assert sorted(p.name for p in (tmp_path / "res" / "outputs").iterdir()) == sorted(p.name for p in paths)
    print(f"FIGURES two_runs_one_output_name: {[str(p.relative_to(tmp_path)) for p in paths]}")
