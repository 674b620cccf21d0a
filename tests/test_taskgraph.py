"""harness.taskgraph: parsing and aliases, validation, ordering, placeholders, complexity, telemetry."""

from __future__ import annotations

import itertools
import json

import pytest

from harness.taskgraph import (
    GraphError,
    TaskGraph,
    graph_messages,
    graph_schema,
    merge_telemetry,
    resolve_placeholders_detailed,
)
from harness.taskgraph.complexity import complexity_breakdown, complexity_score
from harness.taskgraph.ids import natural_key
from harness.taskgraph.nodes import TaskNode
from harness.taskgraph.placeholders import find_placeholders, resolve_placeholders
from harness.taskgraph.prompt import STEP_TOOLS
from harness.taskgraph.schedule import schedule_order

CANONICAL = {
    "objectives": ["A guide to agent reliability"],
    "tasks": [
        {"id": "E1", "question": "agent failure modes", "tools": ["search"], "affinity": {"search": 0.9},
         "depends_on": [], "criteria": ["5 failure modes"], "sub_questions": ["which are most common?"]},
        {"id": "E2", "question": "context engineering techniques", "depends_on": []},
        {"id": "E3", "question": "map #E1.summary onto #E2", "depends_on": ["E1", "E2"]},
    ],
    "exit_criteria": ["every step answered"],
    "explanation": "two independent domains, then a mapping",
}


def ids(nodes):
    return [n.id for n in nodes]


# -- parsing ---------------------------------------------------------------------------------------------

PARSE_CASES = [
    ("mapping", CANONICAL, ["E1", "E2", "E3"]),
    ("json string", json.dumps(CANONICAL), ["E1", "E2", "E3"]),
    ("fenced with prose", "Plan below.\n```json\n" + json.dumps(CANONICAL) + "\n```\nDone.", ["E1", "E2", "E3"]),
    ("list of steps", CANONICAL["tasks"], ["E1", "E2", "E3"]),
    ("list as json", json.dumps(CANONICAL["tasks"]), ["E1", "E2", "E3"]),
    ("steps key", {"steps": [{"id": 1, "task": "a"}, {"id": 2, "task": "b"}]}, ["E1", "E2"]),
    ("plan key nested", {"plan": {"tasks": [{"id": "e1", "prompt": "a"}]}}, ["E1"]),
    ("plan key list of strings", {"plan": ["research A", "research B"]}, ["E1", "E2"]),
    ("trailing commas", '{"tasks": [{"id": "E1", "question": "a",},],}', ["E1"]),
    ("custom ids kept", [{"id": "fetch", "question": "a"}, {"id": "parse", "question": "b", "after": "fetch"}], ["fetch", "parse"]),
    ("single task object", {"question": "just one thing"}, ["E1"]),
]


@pytest.mark.parametrize("name,data,expected_ids", PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_from_planner_output_table(name, data, expected_ids):
    graph = TaskGraph.from_planner_output(data)
    assert list(graph.ids) == expected_ids
    assert all(isinstance(t, TaskNode) for t in graph.tasks)


def test_canonical_fields_preserved():
    graph = TaskGraph.from_planner_output(json.dumps(CANONICAL))
    e1 = graph.get("E1")
    assert e1.tools == ("search",) and e1.affinity == {"search": 0.9}
    assert e1.criteria == ("5 failure modes",) and e1.sub_questions == ("which are most common?",)
    assert graph.get("E3").depends_on == ("E1", "E2")
    assert graph.objectives == ("A guide to agent reliability",)
    assert graph.exit_criteria == ("every step answered",)
    assert graph.explanation.startswith("two independent")
    assert graph.validate() == []
    with pytest.raises(KeyError, match="declared ids: E1, E2, E3"):
        graph.get("E9")


def test_aliases_are_normalised():
    data = {
        "goals": ["g1", "g2"],
        "done_when": "all done",
        "rationale": "because",
        "steps": [
            {"step": 1, "prompt": "first", "tool_scores": {"search": "0.5", "code": 7, "bad": "high"},
             "completion_criteria": "c1"},
            {"task_id": "2", "task": "second", "deps": "1", "success_criteria": ["c2"], "tool": "search"},
            {"id": "E3", "query": "third", "dependencies": [1, {"id": 2}], "subquestions": "why?"},
            {"id": "E4", "instruction": "fourth", "requires": ["E3"], "affinity": ["fetch", "search"]},
        ],
    }
    graph = TaskGraph.from_planner_output(data)
    assert graph.objectives == ("g1", "g2") and graph.exit_criteria == ("all done",) and graph.explanation == "because"
    e1, e2, e3, e4 = graph.tasks
    assert (e1.id, e1.question, e1.criteria) == ("E1", "first", ("c1",))
    assert e1.affinity == {"search": 0.5, "code": 1.0}
    assert any("clamped" in w for w in graph.warnings) and any("not a number" in w for w in graph.warnings)
    assert (e2.id, e2.depends_on, e2.criteria, e2.tools) == ("E2", ("E1",), ("c2",), ("search",))
    assert (e3.depends_on, e3.sub_questions) == (("E1", "E2"), ("why?",))
    assert e4.affinity == {"fetch": 1.0, "search": 1.0}
    assert graph.validate() == []


@pytest.mark.parametrize("score,expected", [(-0.5, 0.0), (0.3, 0.3), (1.0, 1.0), (3, 1.0), ("0.25", 0.25)])
def test_affinity_clamped_to_unit_interval(score, expected):
    graph = TaskGraph.from_planner_output([{"id": "E1", "question": "q", "affinity": {"search": score}}])
    assert graph.get("E1").affinity == {"search": expected}


@pytest.mark.parametrize(
    "step,affinity,warning",
    [
        ({"tools": ["search", "memory"], "affinity": 0.7}, {"search": 0.7, "memory": 0.7}, None),
        ({"tools": ["search"], "affinity": "0.4"}, {"search": 0.4}, None),
        ({"tools": ["search"], "affinity": 1.5}, {"search": 1.0}, "task E1: affinity = 1.5 clamped to 1"),
        ({"tools": ["search"], "affinity": -2}, {"search": 0.0}, "task E1: affinity = -2 clamped to 0"),
        ({"affinity": 0.5}, {}, "task E1: affinity 0.5 names no tool (tools is empty); ignored"),
        ({"tools": ["search"], "affinity": float("nan")}, {}, "task E1: affinity is NaN; ignored"),
    ],
)
def test_scalar_affinity_scores_the_listed_tools_and_is_clamped(step, affinity, warning):
    graph = TaskGraph.from_planner_output([{"id": "E1", "question": "q", **step}])
    assert graph.get("E1").affinity == affinity
    assert list(graph.warnings) == ([warning] if warning else [])
    assert all("\n" not in w for w in graph.warnings)


@pytest.mark.parametrize("alias", ["criteria", "exit_criteria", "done_when", "success_criteria", "completion_criteria"])
def test_step_criteria_aliases(alias):
    graph = TaskGraph.from_planner_output({"tasks": [{"id": "E1", "question": "q", alias: ["five modes named"]}],
                                           "exit_criteria": ["plan done"]})
    assert graph.get("E1").criteria == ("five modes named",) and graph.exit_criteria == ("plan done",)


def test_missing_ids_are_assigned_with_a_warning():
    graph = TaskGraph.from_planner_output([{"question": "a"}, {"question": "b"}, "c"])
    assert graph.ids == ("E1", "E2", "E3")
    assert len([w for w in graph.warnings if "assigned" in w]) == 2


FATAL_CASES = [
    ("prose", "I would first research A and then B."),
    ("empty text", ""),
    ("no task list", {"objectives": ["x"], "notes": "none"}),
    ("number", 42),
    ("truncated", '{"tasks": [{"id": "E1", "question": "a'),
]


@pytest.mark.parametrize("name,data", FATAL_CASES, ids=[c[0] for c in FATAL_CASES])
def test_fatal_parse_failures_keep_the_raw_text(name, data):
    with pytest.raises(GraphError) as info:
        TaskGraph.from_planner_output(data)
    assert isinstance(info.value, ValueError)
    assert info.value.raw is not None
    if isinstance(data, str):
        assert info.value.raw == data
    assert "expected" in str(info.value) or "not a task graph" in str(info.value)


# -- validation ------------------------------------------------------------------------------------------

VALIDATION_CASES = [
    ("clean", [{"id": "E1", "question": "a"}, {"id": "E2", "question": "b", "depends_on": ["E1"]}], []),
    ("duplicate ids", [{"id": "E1", "question": "a"}, {"id": "E1", "question": "b"}],
     ["duplicate task id 'E1' (steps 1 and 2)"]),
    ("unknown dependency", [{"id": "E1", "question": "a", "depends_on": ["E7"]}], ["task E1 depends on unknown id 'E7'"]),
    ("forward dependency", [{"id": "E1", "question": "a", "depends_on": ["E2"]}, {"id": "E2", "question": "b"}],
     ["task E1 depends on E2, which is not an earlier step"]),
    ("self dependency", [{"id": "E1", "question": "a", "depends_on": ["E1"]}], ["task E1 depends on itself"]),
    ("cycle", [{"id": "E1", "question": "a", "depends_on": ["E2"]}, {"id": "E2", "question": "b", "depends_on": ["E1"]}],
     ["task E1 depends on E2, which is not an earlier step", "dependency cycle: E1 -> E2 -> E1"]),
    ("undeclared placeholder", [{"id": "E1", "question": "use #E4.summary"}], ["task E1 references #E4, which is not a declared id"]),
    ("placeholder to later step", [{"id": "E1", "question": "use #E2"}, {"id": "E2", "question": "b"}],
     ["task E1 references #E2, which is not an earlier step"]),
    ("placeholder in sub-question", [{"id": "E1", "question": "a"}, {"id": "E2", "question": "b", "sub_questions": ["#E3?"]}],
     ["task E2 references #E3, which is not a declared id"]),
    ("empty question", [{"id": "E1", "question": ""}], ["task E1 has no question"]),
    ("no steps", [], ["plan has no steps"]),
]


@pytest.mark.parametrize("name,steps,errors", VALIDATION_CASES, ids=[c[0] for c in VALIDATION_CASES])
def test_validate_table(name, steps, errors):
    assert TaskGraph.from_planner_output(steps).validate() == errors


# -- ordering --------------------------------------------------------------------------------------------


def test_natural_sort():
    assert sorted(["E10", "E2", "E1", "a", "E03"], key=natural_key) == ["a", "E1", "E2", "E03", "E10"]


@pytest.mark.parametrize(
    "steps,order",
    [
        ([{"id": f"E{i}", "question": "q"} for i in (10, 2, 1)], ["E1", "E2", "E10"]),
        ([{"id": "E1", "question": "a"}, {"id": "E2", "question": "b", "depends_on": ["E3"]}, {"id": "E3", "question": "c"}],
         ["E1", "E3", "E2"]),
        (CANONICAL["tasks"], ["E1", "E2", "E3"]),
        ([{"id": "E1", "question": "a"}, {"id": "E2", "question": "b"}, {"id": "E3", "question": "#E2 then"}],
         ["E1", "E2", "E3"]),
    ],
)
def test_topological_order_table(steps, order):
    assert ids(TaskGraph.from_planner_output(steps).topological_order()) == order


def test_topological_order_independent_of_declaration_order():
    steps = [
        {"id": "E1", "question": "a"},
        {"id": "E2", "question": "b"},
        {"id": "E3", "question": "c", "depends_on": ["E1"]},
        {"id": "E4", "question": "d", "depends_on": ["E3", "E2"]},
    ]
    orders = {tuple(ids(TaskGraph.from_planner_output(list(p)).topological_order())) for p in itertools.permutations(steps)}
    assert orders == {("E1", "E2", "E3", "E4")}


def test_placeholder_acts_as_dependency():
    graph = TaskGraph.from_planner_output([{"id": "E2", "question": "uses #E1"}, {"id": "E1", "question": "a"}])
    assert graph.dependencies(graph.get("E2")) == ("E1",)
    assert ids(graph.topological_order()) == ["E1", "E2"]


def test_cycle_raises_on_order():
    graph = TaskGraph.from_planner_output(
        [{"id": "E1", "question": "a", "depends_on": ["E3"]}, {"id": "E2", "question": "b", "depends_on": ["E1"]},
         {"id": "E3", "question": "c", "depends_on": ["E2"]}]
    )
    with pytest.raises(GraphError, match="cycle: E1 -> E3 -> E2 -> E1"):
        graph.topological_order()
    with pytest.raises(GraphError):
        graph.schedule_order()
    assert graph.telemetry()["max_depth"] is None


SCHEDULE_STEPS = [
    {"id": "E1", "question": "a", "affinity": {"search": 0.2}},
    {"id": "E2", "question": "b", "affinity": {"search": 0.9}},
    {"id": "E3", "question": "c", "affinity": {"code": 1.0}},
    {"id": "E4", "question": "d", "depends_on": ["E1"]},
    {"id": "E5", "question": "e"},
]


@pytest.mark.parametrize(
    "first_tools,order",
    [
        # own best affinity first (E3 code 1.0); nothing else uses code -> E2 (0.9); E1 shares search with E2;
        # then the tool-less E5 (depth 0) before E4 (depth 1)
        ((), ["E3", "E2", "E1", "E5", "E4"]),
        # a preferred-tool match beats a higher affinity: E1 (search 0.2) follows E2 before E3 (code 1.0)
        (("search",), ["E2", "E1", "E3", "E5", "E4"]),
        (("code",), ["E3", "E2", "E1", "E5", "E4"]),
        (("fetch",), ["E3", "E2", "E1", "E5", "E4"]),  # nobody uses fetch: own affinity decides
    ],
)
def test_schedule_order_table(first_tools, order):
    graph = TaskGraph.from_planner_output(SCHEDULE_STEPS)
    assert ids(graph.schedule_order(first_tools)) == order
    assert ids(graph.schedule_order(first_tools)) == order  # deterministic
    assert ids(schedule_order(graph, first_tools)) == order  # the package-level function is the same one


@pytest.mark.parametrize(
    "steps,order",
    [
        # affinity with the previous step: E3 (memory 0.1) follows E1 (memory) ahead of E2 (search 0.5)
        ([{"id": "E1", "question": "a", "tools": ["memory"], "affinity": 0.9},
          {"id": "E2", "question": "b", "tools": ["search"], "affinity": 0.5},
          {"id": "E3", "question": "c", "tools": ["memory"], "affinity": 0.1}], ["E1", "E3", "E2"]),
        # readiness first: E2 (search 1.0) waits for E3 although it matches E1's tool
        ([{"id": "E1", "question": "a", "tools": ["search"], "affinity": 0.9},
          {"id": "E3", "question": "c", "tools": ["files"], "affinity": 0.3},
          {"id": "E2", "question": "b #E3", "tools": ["search"], "affinity": 1.0}], ["E1", "E3", "E2"]),
        # no tools anywhere: depth, then natural id (E2 before E10)
        ([{"id": "E10", "question": "a"}, {"id": "E2", "question": "b"},
          {"id": "E3", "question": "c", "depends_on": ["E2"]}, {"id": "E4", "question": "d"}],
         ["E2", "E4", "E10", "E3"]),
    ],
    ids=["previous step's tool", "readiness", "depth then id"],
)
def test_schedule_follows_seed_001(steps, order):
    graph = TaskGraph.from_planner_output(steps)
    assert ids(graph.schedule_order()) == order


def test_schedule_key_fields_in_seed_order():
    graph = TaskGraph.from_planner_output([
        {"id": "E1", "question": "a", "tools": ["search"], "affinity": 0.4},
        {"id": "E2", "question": "b"},
        {"id": "E3", "question": "c", "depends_on": ["E1", "E2"]},
        {"id": "E4", "question": "d", "depends_on": ["E1"]},
    ])
    ready_, match, affinity, depth, pending, _ = graph.schedule_key(graph.get("E1"), (), ("search",))
    assert (ready_, match, affinity, depth, pending) == (False, False, -0.4, 0, 0)
    assert graph.schedule_key(graph.get("E2"), (), ("search",))[:3] == (False, True, -0.0)
    # two steps not ready at the same depth: fewer pending dependencies first
    assert sorted(["E3", "E4"], key=lambda t: graph.schedule_key(graph.get(t))) == ["E4", "E3"]
    assert graph.schedule_key(graph.get("E3"))[4] == 2 and graph.schedule_key(graph.get("E3"), {"E1"})[4] == 1


def test_ready_respects_dependencies():
    graph = TaskGraph.from_planner_output(SCHEDULE_STEPS)
    assert "E4" not in ids(graph.ready())
    assert ids(graph.ready(done={"E1", "E2", "E3", "E5"})) == ["E4"]
    assert ids(graph.ready(done=set(graph.ids))) == []
    key = graph.schedule_key(graph.get("E4"))
    assert key[0] is True and key[4] == 1  # not ready, one pending dependency


def test_depths_group_parallel_work():
    graph = TaskGraph.from_planner_output(CANONICAL)
    assert graph.depths() == {"E1": 0, "E2": 0, "E3": 1}


# -- placeholders ----------------------------------------------------------------------------------------

OUTPUTS = {"E1": "\n\n  First line of one.\nSecond line.\n", "E2": "abcdefghij", "E10": "ten", "E3": ""}

PLACEHOLDER_CASES = [
    ("#E1", "First line of one.\nSecond line."),
    ("#E1.summary", "First line of one."),
    ("#E2.head=4", "abcd…"),
    ("#E2.head=10", "abcdefghij"),
    ("#E2.head=50", "abcdefghij"),
    ("#E2.last=3", "…hij"),
    ("#E2.last=10", "abcdefghij"),
    ("#E10 and #E1.summary", "ten and First line of one."),
    ("end of sentence #E2.", "end of sentence abcdefghij."),
    ("lowercase #e2.head=2", "lowercase ab…"),
    ("empty #E3|", "empty |"),
    ("#E9 missing", "[missing output for #E9] missing"),
    ("#E9.summary", "[missing output for #E9.summary]"),
    ("no placeholders, #hashtag E1", "no placeholders, #hashtag E1"),
]


@pytest.mark.parametrize("text,expected", PLACEHOLDER_CASES)
def test_resolve_placeholders_table(text, expected):
    assert resolve_placeholders(text, OUTPUTS) == expected


def test_missing_placeholders_are_reported():
    text, problems = resolve_placeholders_detailed("#E1.summary then #E7 and #E8.head=3", OUTPUTS)
    assert "[missing output for #E7]" in text and "[missing output for #E8.head=3]" in text
    assert [p.split(":")[0] for p in problems] == ["#E7", "#E8"]
    assert "available: E1, E2, E3, E10" in problems[0]


def test_outputs_keyed_by_bare_number_and_errors_substituted():
    error_text = "ERROR: step E1 failed: BackendUnavailable"
    assert resolve_placeholders("see #E1", {"1": error_text}) == f"see {error_text}"


def test_find_placeholders():
    assert find_placeholders("#E1 #E12.summary #E1.head=3 #E") == ("E1", "E12", "E1")


# -- complexity ------------------------------------------------------------------------------------------

COMPLEXITY_CASES = [
    ("What is asyncio?", 0, 0),
    ("fix the typo", 1, 1),
    ("List 5 best practices for Python asyncio", 0, 1),
    ("Implement auth in server.go, add tests in server_test.go, then update README.md and finally deploy", 6, 10),
    ("Refactor the Dockerfile, build the image, run the tests, then deploy and document it in docs/deploy.md", 6, 10),
    ("Implementar a autenticação em server.go, adicionar testes em server_test.go e depois atualizar o README.md, "
     "por fim publicar", 6, 10),
    ("Crie o arquivo main.py, escreva os testes em test_main.py e em seguida rode o pytest", 6, 10),
]


@pytest.mark.parametrize("task,low,high", COMPLEXITY_CASES)
def test_complexity_score_table(task, low, high):
    assert low <= complexity_score(task) <= high


def test_complexity_caps():
    many = " ".join(["implement x"] * 20 + [f"f{i}.py" for i in range(10)] + ["then"] * 10)
    assert complexity_breakdown(many) == {"verbs": 5, "files": 3, "sequencers": 2, "score": 10}
    assert complexity_breakdown("") == {"verbs": 0, "files": 0, "sequencers": 0, "score": 0}


def test_file_artefacts_counted_once_each():
    assert complexity_breakdown("read notes.md, notes.md and notes.md")["files"] == 1
    assert complexity_breakdown("see Makefile and config.yaml")["files"] == 2


# -- telemetry -------------------------------------------------------------------------------------------


def test_telemetry():
    t = TaskGraph.from_planner_output(CANONICAL).telemetry()
    assert t["task_count"] == 3 and t["edge_count"] == 2 and t["max_depth"] == 2 and t["root_count"] == 2
    assert t["mean_affinity"] == 0.9 and t["tools"] == ["search"]
    assert t["objective_count"] == 1 and t["exit_criteria_count"] == 1 and t["error_count"] == 0
    json.dumps(t)


def test_merge_telemetry_keeps_earlier_values():
    existing = {"confidence": 0.8, "planner": {"calls": 2, "tools": ["search"]}, "task_count": 2}
    new = {"task_count": 3, "confidence": None, "planner": {"tools": ["search", "code"], "depth": 2}}
    merged = merge_telemetry(existing, new)
    assert merged == {
        "confidence": 0.8,
        "planner": {"calls": 2, "tools": ["search", "code"], "depth": 2},
        "task_count": 3,
    }
    assert existing == {"confidence": 0.8, "planner": {"calls": 2, "tools": ["search"]}, "task_count": 2}
    assert merge_telemetry(None, {"a": 1}) == {"a": 1} and merge_telemetry({"a": 1}, None) == {"a": 1}


# -- preview and prompt ----------------------------------------------------------------------------------


def test_preview_shows_order_warnings_and_errors():
    graph = TaskGraph.from_planner_output(
        [{"id": "E1", "question": "a", "affinity": {"search": 2}}, {"id": "E2", "question": "b #E5"}]
    )
    text = graph.preview()
    assert "dry run" in text and "Order: E1 -> E2" in text
    assert "WARNING: task E1: affinity" in text
    assert "ERROR: task E2 references #E5" in text


def test_graph_schema_bounded_and_parsable_reply():
    schema = graph_schema(3)
    assert schema["properties"]["tasks"]["maxItems"] == 3
    messages = graph_messages("research A and B, synthesize a guide")
    assert "E1" in messages[0]["content"] and "research A and B" in messages[1]["content"]
    graph = TaskGraph.from_planner_output(json.dumps(CANONICAL))
    assert TaskGraph.from_planner_output(json.dumps(graph.to_dict())) == graph


def test_graph_schema_carries_tools_affinity_and_criteria():
    step = graph_schema(4)["properties"]["tasks"]["items"]
    assert step["properties"]["tools"]["items"]["enum"] == list(STEP_TOOLS)
    assert step["properties"]["affinity"] == {"type": "number", "minimum": 0, "maximum": 1}
    assert "criteria" in step["properties"] and step["additionalProperties"] is False
    system = graph_messages("research A and B")[0]["content"]
    assert "tools (the ones it needs, from: search, memory, files)" in system and "affinity (0 to 1" in system
    reply = {"objectives": [], "exit_criteria": [], "explanation": "", "tasks": [
        {"id": "E1", "question": "a", "depends_on": [], "tools": ["search"], "affinity": 0.8, "criteria": ["c"]}]}
    assert set(reply["tasks"][0]) <= set(step["properties"])
    node = TaskGraph.from_planner_output(json.dumps(reply)).get("E1")
    assert (node.tools, node.affinity, node.criteria) == (("search",), {"search": 0.8}, ("c",))


def test_cycle_is_spelled_the_same_whatever_the_declaration_order():
    steps = [{"id": "E1", "question": "a", "depends_on": ["E3"]}, {"id": "E2", "question": "b", "depends_on": ["E1"]},
             {"id": "E3", "question": "c", "depends_on": ["E2"]}, {"id": "E4", "question": "d"}]
    errors = {tuple(TaskGraph.from_planner_output(list(p)).validate())[-1] for p in itertools.permutations(steps)}
    assert errors == {"dependency cycle: E1 -> E3 -> E2 -> E1"}


def test_from_subtasks():
    graph = TaskGraph.from_subtasks(["research A", " ", "research B"], objective="guide")
    assert graph.ids == ("E1", "E2") and graph.objectives == ("guide",) and graph.validate() == []
