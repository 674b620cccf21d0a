"""Compound tasks end to end on the scripted fake: routing, parallel steps, placeholders fed from earlier steps,
error substitution, malformed step graphs, telemetry, plan preview."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest

from evaluators import HARNESS_EVALUATOR
from harness.config import OrchestratorConfig, WiggumConfig
from harness.inference import BackendError
from harness.orchestrator import build_graph, decide_route, plan_preview, run_task
from harness.orchestrator._run import Orchestrator
from harness.planner import Plan
from harness.stores import read_jsonl
from pipeline_fake import Router, config, make_harness, plan_json, read_trace, top_stages

COMPOUND = "Research agent failure modes and context engineering, then write a unified guide"
Q1 = "What are common failure modes of LLM agents?"
Q2 = "What is context engineering for LLM agents?"
GRAPH = json.dumps({
    "objectives": ["one guide covering failure modes and context engineering"],
    "tasks": [
        {"id": "E1", "question": Q1, "depends_on": [], "criteria": ["five failure modes named"]},
        {"id": "E2", "question": Q2, "depends_on": []},
        {"id": "E3", "question": "Which mitigations address #E1.summary (head: #E1.head=12; tail: #E2.last=9)?",
         "depends_on": ["E1"]},
    ],
    "exit_criteria": ["every failure mode has a mitigation"],
    "explanation": "E1 and E2 are independent; E3 needs E1.",
})
PARALLEL_GRAPH = json.dumps({"objectives": [], "exit_criteria": [], "explanation": "",
                             "tasks": [{"id": "E1", "question": Q1, "depends_on": []},
                                       {"id": "E2", "question": Q2, "depends_on": []}]})


def task_of(messages) -> str:
    user = messages[-1]["content"]
    return user.split("# Task\n", 1)[1].split("\n", 1)[0]


def synth_by_task(messages) -> str:
    """Each step's output names its task on the first line; the assembly says so."""
    if "### Step E1" in messages[-1]["content"]:
        return "# Unified guide\n\nFailure modes and context engineering, assembled from the steps [1]."
    task = task_of(messages)
    return f"Summary of {task}\n\nDetails: {task} has concrete answers in Python 3.11 docs [1]."


def compound_router(**over) -> Router:
    replies = {"plan": plan_json(task_type="research", sections=None), "graph": GRAPH, "synth": synth_by_task}
    replies.update(over)
    return Router(**replies)


def orch(tmp_path, router, *, mode="always", max_parallel=2, latency_s=0.0, **over) -> Orchestrator:
    h = make_harness(tmp_path, router, latency_s=latency_s,
                     orchestrator=OrchestratorConfig(mode=mode, max_parallel=max_parallel), **over)
    return Orchestrator(h)


def step_spans(trace_path) -> dict[str, dict]:
    return {e["name"].split()[1]: e for e in read_trace(trace_path) if e["name"].startswith("subtask ")}


def overlap(a: dict, b: dict) -> float:
    return min(a["ts"] + a["dur"], b["ts"] + b["dur"]) - max(a["ts"], b["ts"])


# -- routing -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "task, subtasks, mode, threshold, expected",
    [
        (COMPOUND, (), "off", 6, "single"),
        ("Explain asyncio", (), "always", 6, "orchestrated"),
        # the planner's subtasks are evidence, not a verdict: explain 1 + subtasks 2 = 3
        ("Explain asyncio", ("agent failure modes", "context engineering"), "auto", 6, "single"),
        ("Explain asyncio", ("agent failure modes", "context engineering"), "auto", 3, "orchestrated"),
        ("Explain asyncio", ("agent failure modes",), "auto", 1, "single"),  # one topic: never compound
        ("Explain asyncio", ("low:agent failure modes", "context engineering"), "auto", 1, "single"),
        (COMPOUND, (), "auto", 6, "orchestrated"),  # 2 topics (+3), research 1, unified guide 2, then 1 = 7
        (COMPOUND, (), "auto", 8, "single"),
        ("Research Python's asyncio.TaskGroup and then write a short guide to it saved to tg.md", (), "auto", 3,
         "single"),  # score 3 but one topic
    ],
)
def test_routing_table(task, subtasks, mode, threshold, expected):
    low = bool(subtasks) and subtasks[0].startswith("low:")  # the planner rated the task low complexity
    plan = Plan(subtasks=tuple(s.removeprefix("low:") for s in subtasks), complexity="low" if low else "medium")
    route = decide_route(task, plan, OrchestratorConfig(mode=mode, threshold=threshold))
    assert route.mode == expected
    c = route.complexity
    assert c["score"] == sum(c[k] for k in ("verbs", "topics_points", "assembly", "files", "sequencers",
                                             "subtasks_points"))
    assert route.reason


def test_unknown_mode_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="off, auto, always.*'sometimes'"):
        decide_route("x", Plan(), OrchestratorConfig(mode="sometimes"))


def test_mode_off_runs_the_single_focus_pipeline(tmp_path):
    router = compound_router()
    cfg = config(tmp_path, orchestrator=OrchestratorConfig(mode="off"))
    result = run_task(COMPOUND, cfg, make_harness(tmp_path, router).roles, evaluator=HARNESS_EVALUATOR)
    assert result.status == "ok" and router.calls["graph"] == 0
    assert "mode" not in result.record and "steps" not in result.record


def test_auto_with_a_simple_task_stays_single_and_says_why(tmp_path):
    router = compound_router()
    result = orch(tmp_path, router, mode="auto").run("Explain asyncio timeouts")
    assert result.record["mode"] == "single" and router.calls["graph"] == 0
    assert result.record["route"]["reason"] == "complexity 1 < threshold 6, topics 1, subtasks 0 (a compound spans 2+)"
    assert top_stages(read_trace(result.trace_path))[-1] == "compress_and_store"


def test_auto_counts_the_planners_subtasks_in_the_score(tmp_path):
    router = compound_router(plan=plan_json(task_type="research", sections=None,
                                            subtasks=["agent failure modes", "context engineering"]))
    result = orch(tmp_path, router, mode="auto").run(COMPOUND)
    assert result.record["mode"] == "orchestrated"
    assert result.record["route"]["reason"] == "complexity 9 >= threshold 6, topics 2, subtasks 2"
    assert result.record["route"]["complexity"]["subtasks_points"] == 2


# -- a compound run --------------------------------------------------------------------------------------


def test_compound_run_records_steps_placeholders_and_assembly(tmp_path):
    router = compound_router()
    o = orch(tmp_path, router)
    result = o.run(COMPOUND)
    assert result.status == "ok"
    rec = read_jsonl(o.harness.cfg.runs_jsonl)[-1]
    assert rec["run_id"] == result.run_id and rec["mode"] == "orchestrated" and rec["had_errors"] is False
    assert [s["id"] for s in rec["steps"]] == ["E1", "E2", "E3"]
    assert all(s["status"] == "ok" for s in rec["steps"])
    # E3's question was filled from E1 and E2's outputs before its run
    e3 = rec["steps"][2]["question"]
    assert e3 == (f"Which mitigations address Summary of {Q1} (head: Summary of W…; tail: …docs [1].)?")
    assert rec["steps"][2]["placeholder_problems"] == []
    assert any(f"Task: {e3}" in "\n".join(m["content"] for m in msgs) for msgs in router.messages["plan"])
    # each step is its own run with its own record, linked to the parent
    children = [r for r in read_jsonl(o.harness.cfg.runs_jsonl) if r.get("parent_run_id") == result.run_id]
    assert sorted(r["step_id"] for r in children) == ["E1", "E2", "E3"]
    assert {r["run_id"] for r in children} == {s["run_id"] for s in rec["steps"]}
    # the assembly saw every step's output and produced the final file
    assembly = router.messages["synth"][-1][-1]["content"]
    assert "### Step E1: " + Q1 in assembly and "### Step E3: Which mitigations" in assembly
    assert Path(result.output_path).read_text().startswith("# Unified guide")
    assert rec["graph"]["objectives"] == ["one guide covering failure modes and context engineering"]
    assert rec["llm_steps"]["producer"]["calls"] == 3 and rec["llm"]["producer"]["calls"] == 1


def test_subtasks_of_a_low_complexity_plan_do_not_orchestrate(tmp_path):
    """The embedded 135M planner lists subtasks for anything; its own 'low' rating wins (seen on a real run)."""
    router = compound_router(plan=plan_json(task_type="enumerated", complexity="low", sections=3,
                                            subtasks=["use asyncio for tasks", "use asyncio for asyncio-based tasks"]))
    result = orch(tmp_path, router, mode="auto").run("List 3 common asyncio mistakes and save to mistakes.md")
    assert result.record["mode"] == "single" and router.calls["graph"] == 0
    assert "ignored: the planner rated the task low complexity" in result.record["route"]["reason"]


def test_degraded_search_of_the_steps_is_reported_on_the_parent(tmp_path):
    o = orch(tmp_path, compound_router(graph=PARALLEL_GRAPH))
    o.harness.search.degraded_reason = "ddgs: DNSError: offline"
    result = o.run(COMPOUND)
    assert result.record["research"]["degraded_reason"] == "ddgs: DNSError: offline"
    assert {s["degraded_reason"] for s in result.record["steps"]} == {"ddgs: DNSError: offline"}


def test_planner_telemetry_is_merged_into_the_record(tmp_path):
    result = orch(tmp_path, compound_router()).run(COMPOUND)
    tele = result.record["planner_telemetry"]
    assert tele["plan"]["complexity"] == "medium" and tele["plan"]["parser"] == "json"
    assert tele["graph"]["task_count"] == 3 and tele["graph"]["max_depth"] == 2 and tele["graph"]["root_count"] == 2
    assert tele["graph"]["planner_warning_count"] == 0
    assert set(tele["steps"]) == {"E1", "E2", "E3"} and tele["steps"]["E1"]["confidence"] == 0.9
    assert result.record["research"]["quality"]["confidence"] == 0.9
    assert tele["order"] == ["E1", "E2", "E3"]
    for rank, sid in enumerate(tele["order"], 1):  # planned and executed fields side by side, per step
        step = tele["steps"][sid]
        assert step["rank"] == rank and step["status"] == "ok" and step["wall_s"] > 0 and step["run_id"]
    assert tele["steps"]["E3"]["depends_on"] == ["E1", "E2"]  # declared E1 plus the quoted #E2


def test_step_telemetry_keeps_every_steps_fields():
    from harness.orchestrator._assemble import StepOutcome, step_telemetry
    from harness.taskgraph import TaskGraph

    graph = TaskGraph.from_planner_output([
        {"id": "E1", "question": "a", "tools": ["search"], "affinity": 0.4},
        {"id": "E2", "question": "b #E1", "tools": ["memory"]},
    ])

    def outcome(sid, status, confidence):
        return StepOutcome(id=sid, question="q", status=status, output="", error=None, run_id=f"r{sid}",
                           start_s=0.1, wall_s=0.2, llm_calls=1, confidence=confidence)

    tele = step_telemetry(graph, [outcome("E1", "ok", 0.8), outcome("E2", "failed", None)])
    assert tele["order"] == ["E1", "E2"]
    assert tele["steps"]["E1"] == {"rank": 1, "tools": ["search"], "affinity": {"search": 0.4}, "depends_on": [],
                                   "status": "ok", "confidence": 0.8, "start_s": 0.1, "wall_s": 0.2, "run_id": "rE1"}
    assert tele["steps"]["E2"] == {"rank": 2, "tools": ["memory"], "affinity": {}, "depends_on": ["E1"],
                                   "status": "failed", "confidence": None, "start_s": 0.1, "wall_s": 0.2,
                                   "run_id": "rE2"}


def test_steps_share_memory_and_search_with_the_parent(tmp_path):
    o = orch(tmp_path, compound_router())
    o.run(COMPOUND)
    assert o.sub_harness.memory is o.harness.memory and o.sub_harness.search is o.harness.search
    assert o.sub_harness.cfg.wiggum.max_rounds == o.harness.cfg.orchestrator.subtask_wiggum_rounds
    assert o.harness.memory.count() == 4  # three steps and the assembly


# -- concurrency -----------------------------------------------------------------------------------------


def test_independent_steps_run_in_parallel(tmp_path):
    router = compound_router(graph=PARALLEL_GRAPH)
    result = orch(tmp_path, router, max_parallel=2, latency_s=0.03).run(COMPOUND)
    spans = step_spans(result.trace_path)
    assert overlap(spans["E1"], spans["E2"]) > 0.5 * min(spans["E1"]["dur"], spans["E2"]["dur"])
    assert spans["E1"]["tid"] != spans["E2"]["tid"]
    par = result.record["parallel"]
    assert par["max_parallel"] == 2 and par["steps_wall_s"] < 0.8 * par["steps_sum_s"]
    # the steps' own stages and model calls are in the parent trace, on their worker's row
    events = read_trace(result.trace_path)
    for sid, span in spans.items():
        inner = [e for e in events if e["args"].get("step") == sid]
        assert {e["name"] for e in inner} >= {"make_plan", "synthesize", "llm.producer"}
        assert all(e["tid"] == span["tid"] for e in inner)


def test_max_parallel_one_runs_steps_one_after_another(tmp_path):
    router = compound_router(graph=PARALLEL_GRAPH)
    result = orch(tmp_path, router, max_parallel=1, latency_s=0.01).run(COMPOUND)
    spans = step_spans(result.trace_path)
    assert overlap(spans["E1"], spans["E2"]) <= 0
    par = result.record["parallel"]
    assert par["steps_wall_s"] >= 0.95 * par["steps_sum_s"]


def test_dependent_step_waits_for_its_dependency(tmp_path):
    result = orch(tmp_path, compound_router(), max_parallel=3, latency_s=0.01).run(COMPOUND)
    spans = step_spans(result.trace_path)
    assert spans["E3"]["ts"] >= spans["E1"]["ts"] + spans["E1"]["dur"]


# -- failures --------------------------------------------------------------------------------------------


def test_failing_step_is_substituted_downstream_and_flagged(tmp_path):
    def synth(messages):
        if task_of(messages) == Q1:
            raise BackendError("ollama at http://127.0.0.1:11434 (qwen2.5:32b): timed out")
        return synth_by_task(messages)

    router = compound_router(synth=synth)
    o = orch(tmp_path, router)
    result = o.run(COMPOUND)
    assert result.status == "ok"  # the run went on
    rec = read_jsonl(o.harness.cfg.runs_jsonl)[-1]
    assert rec["had_errors"] is True
    steps = {s["id"]: s for s in rec["steps"]}
    assert steps["E1"]["status"] == "failed" and "timed out" in steps["E1"]["error"]
    assert steps["E2"]["status"] == "ok" and steps["E3"]["status"] == "ok"
    assert "[step E1 failed: BackendError" in steps["E3"]["question"]
    assembly = router.messages["synth"][-1][-1]["content"]
    assert "### Step E1: " + Q1 + " (FAILED" in assembly and "[step E1 failed:" in assembly
    failed_child = [r for r in read_jsonl(o.harness.cfg.runs_jsonl) if r.get("step_id") == "E1"]
    assert failed_child and failed_child[0]["status"] == "failed"


def test_an_exception_inside_a_step_does_not_abort_the_run(tmp_path, monkeypatch):
    router = compound_router(graph=PARALLEL_GRAPH)
    o = orch(tmp_path, router)
    real = type(o.sub_harness).run

    def flaky(self, task, **kw):
        if task == Q2:
            raise KeyError("boom")
        return real(self, task, **kw)

    monkeypatch.setattr(type(o.sub_harness), "run", flaky)
    result = o.run(COMPOUND)
    steps = {s["id"]: s for s in result.record["steps"]}
    assert steps["E2"]["status"] == "failed" and steps["E2"]["error"] == "KeyError: 'boom'"
    assert steps["E1"]["status"] == "ok" and result.record["had_errors"] is True


@pytest.mark.parametrize(
    "reply, warning",
    [
        ("Sure! First research failure modes, then context engineering.", "malformed step graph"),
        (json.dumps({"objectives": ["x"], "explanation": "no steps here"}), "malformed step graph"),
        (json.dumps({"tasks": [{"id": "E1", "question": "Compare #E7 with agent loops", "depends_on": []}]}),
         "planner step graph rejected"),
        (json.dumps({"tasks": [{"id": "E1", "question": Q1, "depends_on": []},
                               {"id": "E1", "question": Q2, "depends_on": []}]}), "duplicate task id"),
        (json.dumps({"tasks": [{"id": "E1", "question": "2026-11-23", "depends_on": []}]}),
         "no researchable question"),
        (json.dumps({"tasks": [{"id": "E1", "question": "Write the final guide", "depends_on": []}]}),
         "dropped assembly steps"),
    ],
)
def test_malformed_step_graph_is_shown_with_a_warning_and_falls_back(tmp_path, caplog, reply, warning):
    router = compound_router(graph=reply, plan=plan_json(task_type="research", sections=None,
                                                         subtasks=["agent failure modes", "context engineering"]))
    with caplog.at_level(logging.WARNING, logger="harness.orchestrator"):
        result = orch(tmp_path, router).run(COMPOUND)
    warnings = result.record["graph_warnings"]
    assert any(warning in w for w in warnings), warnings
    assert any("fell back to the planner's 2 subtasks" in w for w in warnings)
    assert any(warning in r.getMessage() for r in caplog.records)
    if warning == "malformed step graph":
        assert any(reply[:30] in w for w in warnings)  # the raw reply is shown
    assert [s["question"] for s in result.record["steps"]] == ["agent failure modes", "context engineering"]


def test_bad_dependencies_are_dropped_with_a_warning_and_the_graph_kept(tmp_path, caplog):
    # what the embedded 135M planner produced: ids "1", "2", depends_on a date fragment
    reply = json.dumps({"objectives": ["x"], "tasks": [
        {"id": "1", "question": Q1, "depends_on": ["2026-11-"]},
        {"id": "2", "question": Q2, "depends_on": ["2026-11-", "1", "3"]},
        {"id": "3", "question": "Which mitigations fit #E1.summary?", "depends_on": ["3"]}]})
    with caplog.at_level(logging.WARNING, logger="harness.orchestrator"):
        result = orch(tmp_path, compound_router(graph=reply)).run(COMPOUND)
    warnings = result.record["graph_warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("planner step graph repaired (E1: dropped depends_on")
    assert "raw: " in warnings[0] and "2026-11-" in warnings[0] and caplog.records
    assert [(t["id"], t["depends_on"]) for t in result.record["graph"]["tasks"]] == [("E1", []), ("E2", ["E1"]),
                                                                                       ("E3", [])]
    assert [s["id"] for s in result.record["steps"]] == ["E1", "E2", "E3"]


@pytest.mark.parametrize("subtasks", [[], ["2026-11-23"], ["agent failure modes"],
                                      ["agent failure modes", "2026-11-23"]])
def test_fewer_than_two_researchable_subtasks_fall_back_to_the_task_text(tmp_path, subtasks):
    router = compound_router(graph="no idea", plan=plan_json(task_type="research", sections=None, subtasks=subtasks))
    result = orch(tmp_path, router).run(COMPOUND)
    assert [s["question"] for s in result.record["steps"]] == ["Research agent failure modes",
                                                               "Research context engineering"]
    assert any(w.startswith("fell back to 2 steps read off the task text") for w in result.record["graph_warnings"])


SIMPLE = "Explain how asyncio timeouts work"


@pytest.mark.parametrize(
    "task, steps",
    [
        (COMPOUND, ["Research agent failure modes", "Research context engineering"]),
        ("Investigate vector databases, graph databases and search engines; then compile a report",
         ["Investigate vector databases", "Investigate graph databases", "Investigate search engines"]),
        ("Explain asyncio cancellation, then describe structured concurrency in trio",
         ["Explain asyncio cancellation", "Describe structured concurrency in trio"]),
        ("Research pros and cons of asyncio, then write a summary", []),  # "pros" alone is not researchable
        ("Compare asyncio and trio", []),  # compare needs both sides: not split
        (SIMPLE, []),
        ("", []),
    ],
)
def test_split_compound_task(task, steps):
    from harness.orchestrator._decompose import split_compound_task

    assert split_compound_task(task) == steps


@pytest.mark.parametrize("question, ok", [("2026-11-23", False), ("", False), ("asyncio", False),
                                          ("context engineering", True), ("Qu'est-ce que l'ingénierie", True)])
def test_researchable(question, ok):
    from harness.orchestrator._decompose import researchable

    assert researchable(question) is ok


def test_no_graph_and_no_subtasks_runs_the_task_as_one_step(tmp_path):
    router = compound_router(graph="no idea")
    result = orch(tmp_path, router).run(SIMPLE)
    assert [s["question"] for s in result.record["steps"]] == [SIMPLE]
    assert result.record["planner_telemetry"]["graph"]["planner_warning_count"] == len(result.record["graph_warnings"]) == 2
    assert any("one step" in w for w in result.record["graph_warnings"])


def test_backend_down_for_the_graph_call_is_a_warning(tmp_path):
    def down(messages):
        raise BackendError("planner unreachable")

    result = orch(tmp_path, compound_router(graph=down)).run(COMPOUND)
    assert any("step-graph planner call failed" in w and "unreachable" in w for w in result.record["graph_warnings"])


def test_empty_compound_task_raises(tmp_path):
    with pytest.raises(ValueError, match="task is empty"):
        orch(tmp_path, compound_router()).run("  ")


# -- plan preview ----------------------------------------------------------------------------------------


def test_plan_preview_plans_and_executes_nothing(tmp_path):
    router = compound_router()
    h = make_harness(tmp_path, router)
    cfg = dataclasses.replace(h.cfg, orchestrator=OrchestratorConfig(mode="always"))
    text = plan_preview(COMPOUND, cfg, h.roles)
    assert set(router.calls) == {"prior", "plan", "graph"}
    assert "Route: orchestrated (orchestrator.mode=always)" in text
    assert f"E1: {Q1}  [after: -]" in text and "E3: Which mitigations address #E1.summary" in text
    assert "[after: E1, E2]" in text and "Order: E1 -> E2 -> E3" in text
    assert not cfg.runs_jsonl.exists() and not cfg.output_path.exists() and not cfg.traces_dir.exists()


def test_plan_preview_shows_graph_errors(tmp_path):
    router = compound_router(graph=json.dumps({"tasks": [{"id": "E1", "question": "Compare #E9 with agent loops",
                                                           "depends_on": []}]}))
    h = make_harness(tmp_path, router, orchestrator=OrchestratorConfig(mode="always"))
    text = plan_preview(COMPOUND, h.cfg, h.roles)
    assert "WARNING: planner step graph rejected" in text and "#E9, which is not a declared id" in text
    assert "WARNING: fell back to 2 steps read off the task text" in text
    assert "E1: Research agent failure modes  [after: -]" in text and "Order: E1 -> E2" in text


def test_plan_preview_single_route(tmp_path):
    h = make_harness(tmp_path, compound_router(), orchestrator=OrchestratorConfig(mode="auto"))
    text = plan_preview("Explain asyncio timeouts", h.cfg, h.roles)
    assert "Route: single" in text and "single-focus pipeline" in text


def test_build_graph_keeps_a_valid_planner_graph(tmp_path):
    h = make_harness(tmp_path, compound_router())
    prepared = h.prepare(COMPOUND, with_research=False)
    graph, warnings = build_graph(COMPOUND, prepared, h.roles, OrchestratorConfig())
    assert warnings == [] and graph.ids == ("E1", "E2", "E3")
    assert graph.depths() == {"E1": 0, "E2": 0, "E3": 1}


def test_assembly_gets_the_full_wiggum_loop(tmp_path):
    router = compound_router(judge=json.dumps({d: 3 for d in ("relevance", "completeness", "depth", "specificity",
                                                             "structure", "grounded")} | {"feedback": "thin"}),
                             revise="# Unified guide\n\nRevised.")
    result = orch(tmp_path, router, wiggum=WiggumConfig(max_rounds=2)).run(COMPOUND)
    assert len(result.record["wiggum"]["rounds"]) == 2  # the assembly: full loop
    assert router.calls["revise"] == 1  # steps: subtask_wiggum_rounds=1, no revision


def test_a_step_graph_that_leaves_out_a_named_topic_falls_back_to_the_task_text(tmp_path):
    # the 1.5B's reply to seed 003's example: "context engineering" read as "the contexts failures occur in"
    missed = json.dumps({"objectives": [], "exit_criteria": [], "explanation": "", "tasks": [
        {"id": "E1", "question": "What are some common research agent failure modes?", "depends_on": []},
        {"id": "E2", "question": "What are some common contexts in which these failure modes occur?",
         "depends_on": []}]})
    router = compound_router(graph=missed)
    h = make_harness(tmp_path, router)
    graph, warnings = build_graph(COMPOUND, h.prepare(COMPOUND, with_research=False), h.roles, OrchestratorConfig())
    assert [t.question for t in graph.tasks] == ["Research agent failure modes", "Research context engineering"]
    assert any("leaves out the task's topics ['context engineering']" in w for w in warnings)
    # a graph naming both topics is kept as planned
    h2 = make_harness(tmp_path / "kept", compound_router(graph=PARALLEL_GRAPH))
    graph, warnings = build_graph(COMPOUND, h2.prepare(COMPOUND, with_research=False), h2.roles, OrchestratorConfig())
    assert [t.question for t in graph.tasks] == [Q1, Q2] and not warnings
