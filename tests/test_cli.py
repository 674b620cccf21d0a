"""`python -m harness`: plan preview executes nothing, the summary block, one-line errors and exit codes.

The CLI builds its backends through the registry, so the scripted pipeline fake is registered as a backend
kind here and chosen with --backend, like a real one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import harness.search
from harness.__main__ import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from harness.inference import BackendError, register_backend
from harness.logger import read_jsonl
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
    monkeypatch.setattr(harness.search, "make_search", lambda cfg, results_dir: search)
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
    code = main(["--backend", "nonsense", "--results-dir", str(tmp_path / "res"), TASK])
    captured = capsys.readouterr()
    assert code == EXIT_FAILED and captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("error: ValueError: backend.kind='nonsense' is not a backend; expected one of")
    assert "embedded" in captured.err and "ollama" in captured.err


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
