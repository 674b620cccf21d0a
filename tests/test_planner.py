"""harness.planner: two passes, parse ladder, normalisation, the subtask filter, never-raises."""

from __future__ import annotations

import json

import pytest

from harness.config import HarnessConfig, PlannerConfig, apply_env
from harness.inference import BackendUnavailable
from harness.inference._fake import FakeLLM
from harness.inference._roles import fake_roles
from harness.planner import Plan, filter_subtasks, make_plan, plan_from_dict
from harness.planner._parse import parse_plan, parse_prior_knowledge
from harness.planner._plan import MAX_SENTENCE_CHARS, PriorKnowledge
from harness.planner._prompts import plan_schema, prior_knowledge_schema
from harness.planner._tasktype import infer_task_type
from harness.tracing import Tracer, use_tracer

GOOD_PLAN = {
    "task_type": "enumerated",
    "complexity": "low",
    "expected_sections": 5,
    "search_queries": ["asyncio TaskGroup best practices", "asyncio cancellation pitfalls"],
    "prior_work_summary": "",
    "notes": "Include concrete API names.",
    "subtasks": [],
}
PRIOR_WITH_GAPS = json.dumps({"known_facts": ["asyncio runs one event loop per thread"], "gaps": ["TaskGroup semantics"]})
PRIOR_NO_GAPS = json.dumps({"known_facts": ["asyncio runs one event loop per thread"], "gaps": []})

# (name, reply, task, expected fields, parser)
PLAN_CASES = [
    ("clean json", json.dumps(GOOD_PLAN), "", {"task_type": "enumerated", "expected_sections": 5, "complexity": "low"}, "json"),
    (
        "code fence",
        "```json\n" + json.dumps(GOOD_PLAN) + "\n```",
        "",
        {"search_queries": ("asyncio TaskGroup best practices", "asyncio cancellation pitfalls")},
        "json",
    ),
    (
        "prose around json",
        "Here is my plan:\n" + json.dumps(GOOD_PLAN) + "\nI hope this helps!",
        "",
        {"notes": "Include concrete API names."},
        "json",
    ),
    (
        "trailing commas",
        '{"task_type": "research", "complexity": "high", "search_queries": ["a", "b",], "subtasks": [],}',
        "",
        {"task_type": "research", "complexity": "high", "search_queries": ("a", "b")},
        "dirtyjson",
    ),
    (
        "unescaped quotes",
        '{"task_type": "research", "notes": "avoid the "naive" approach", "search_queries": ["x"]}',
        "",
        {"notes": 'avoid the "naive" approach', "search_queries": ("x",)},
        "dirtyjson",
    ),
    (
        "truncated json",
        '{"task_type": "best_practices", "complexity": "medium", "search_queries": ["q one", "q two", "q thr',
        "",
        {"task_type": "best_practices", "search_queries": ("q one", "q two")},
        "regex",
    ),
    (
        "truncated inside notes",
        '{"task_type": "enumerated", "expected_sections": 7, "notes": "Give each item a concrete exam',
        "",
        {"task_type": "enumerated", "expected_sections": 7, "notes": "Give each item a concrete exam"},
        "regex",
    ),
    ("empty", "", "", {"task_type": "research", "search_queries": (), "notes": ""}, "defaults"),
    ("prose only", "I think you should search the web.", "", {"task_type": "research"}, "defaults"),
    ("prose only, enumerated task", "Sorry.", "List 5 tips for pytest", {"task_type": "enumerated"}, "defaults"),
    (
        "wrong types",
        json.dumps(
            {
                "task_type": 3,
                "complexity": ["high"],
                "expected_sections": "five",
                "search_queries": "single query as a string",
                "prior_work_summary": ["first", "second"],
                "notes": None,
                "subtasks": "research the history of X",
            }
        ),
        "top 10 Python profilers",
        {
            "task_type": "enumerated",
            "complexity": "medium",
            "expected_sections": 5,
            "search_queries": ("single query as a string",),
            "prior_work_summary": "first second",
            "notes": "",
            "subtasks": ("research the history of X",),
        },
        "json",
    ),
    (
        "enum synonyms and casing",
        json.dumps({"task_type": "Best Practices", "complexity": "Complex", "expected_sections": 4.0}),
        "",
        {"task_type": "best_practices", "complexity": "high", "expected_sections": 4},
        "json",
    ),
    (
        "unknown task_type falls back to heuristic",
        json.dumps({"task_type": "tutorial"}),
        "What are the best practices for logging in Python?",
        {"task_type": "best_practices"},
        "json",
    ),
    (
        "out of range sections and placeholder strings",
        json.dumps({"expected_sections": 500, "prior_work_summary": "None", "notes": "N/A"}),
        "",
        {"expected_sections": None, "prior_work_summary": "", "notes": ""},
        "json",
    ),
    (
        "queries deduplicated and capped",
        json.dumps({"search_queries": ["A b", "a B", "  c  ", "", "d", "e", 7]}),
        "",
        {"search_queries": ("A b", "c", "d")},
        "json",
    ),
    (
        "list markers stripped before dedupe",
        json.dumps({"search_queries": ["1. asyncio pitfalls", "2. asyncio pitfalls", "- asyncio pitfalls", "3) other"]}),
        "",
        {"search_queries": ("asyncio pitfalls", "other")},
        "json",
    ),
    (
        "wrapped in an outer key",
        json.dumps({"plan": {"task_type": "enumerated", "search_queries": ["x"]}}),
        "",
        {"task_type": "enumerated", "search_queries": ("x",)},
        "json",
    ),
    (
        "query objects",
        json.dumps({"search_queries": [{"query": "alpha"}, {"q": "beta"}]}),
        "",
        {"search_queries": ("alpha", "beta")},
        "json",
    ),
]


@pytest.mark.parametrize("name,reply,task,expected,parser", PLAN_CASES, ids=[c[0] for c in PLAN_CASES])
def test_parse_plan_table(name, reply, task, expected, parser):
    plan = parse_plan(reply, task=task, max_queries=3)
    assert plan.parser == parser
    for key, value in expected.items():
        assert getattr(plan, key) == value, key
    assert plan.task_type in ("enumerated", "best_practices", "research")
    assert plan.complexity in ("low", "medium", "high")
    if parser in ("regex", "defaults"):
        assert plan.errors, "a fallback parser must record why"


def test_long_fields_are_clamped():
    plan = parse_plan(json.dumps({"notes": "word " * 200, "search_queries": ["q" * 500]}))
    assert len(plan.notes) <= MAX_SENTENCE_CHARS and plan.notes.endswith("…")
    assert len(plan.search_queries[0]) <= 120


SUBTASK_CASES = [
    (["research failure modes of agents", "research context engineering"], 2, 0),
    (["research A", "Synthesize the findings", "combine everything into a guide"], 1, 2),
    (["Write the final report", "Compile results", "investigate B"], 1, 2),
    (["rewrite history? no: study rewrite rules"], 1, 0),  # 'rewrite' is not the word 'write'
    ([], 0, 0),
]


@pytest.mark.parametrize("subtasks,kept,dropped", SUBTASK_CASES)
def test_subtask_filter(subtasks, kept, dropped):
    k, d = filter_subtasks(subtasks)
    assert (len(k), len(d)) == (kept, dropped)


def test_parse_plan_applies_subtask_filter_and_records_dropped():
    plan = parse_plan(json.dumps({"subtasks": ["research A", "research B", "Assemble A and B", "merge all"]}))
    assert plan.subtasks == ("research A", "research B")
    assert plan.dropped_subtasks == ("Assemble A and B", "merge all")


PRIOR_CASES = [
    ("clean", PRIOR_WITH_GAPS, ("TaskGroup semantics",), True, "json"),
    ("empty gaps", PRIOR_NO_GAPS, (), True, "json"),
    ("trailing comma", '{"known_facts": ["f",], "gaps": ["g",],}', ("g",), True, "dirtyjson"),
    ("truncated in facts", '{"known_facts": ["f1", "f2', (), False, "regex"),
    ("truncated in gaps", '{"known_facts": ["f"], "gaps": ["g1", "g2', ("g1",), False, "regex"),
    ("gaps missing", '{"known_facts": ["f"]}', (), False, "json"),
    ("prose", "I know a lot about this.", (), False, "defaults"),
    ("empty", "", (), False, "defaults"),
]


@pytest.mark.parametrize("name,reply,gaps,usable,parser", PRIOR_CASES, ids=[c[0] for c in PRIOR_CASES])
def test_parse_prior_knowledge_table(name, reply, gaps, usable, parser):
    prior = parse_prior_knowledge(reply)
    assert (prior.gaps, prior.usable, prior.parser) == (gaps, usable, parser)


@pytest.mark.parametrize(
    "task,expected",
    [
        ("List 5 best practices for Python asyncio", "enumerated"),
        ("top 10 Python web frameworks", "enumerated"),
        ("Give me three ways to speed up pandas", "enumerated"),
        ("7 common mistakes with Docker layers", "enumerated"),
        ("Best practices for structuring a FastAPI project", "best_practices"),
        ("How does the CPython GIL work?", "research"),
    ],
)
def test_task_type_heuristic(task, expected):
    assert infer_task_type(task) == expected


# -- make_plan -----------------------------------------------------------------------------------------


def test_two_passes_gaps_feed_the_plan_prompt():
    fake = FakeLLM([PRIOR_WITH_GAPS, json.dumps(GOOD_PLAN)])
    plan = make_plan("List 5 best practices for Python asyncio", fake, memory_context="(past run)", cfg=PlannerConfig())
    assert len(fake.calls) == 2
    assert all(c.temperature == 0.1 for c in fake.calls)
    plan_prompt = fake.calls[1].messages[-1]["content"]
    assert "TaskGroup semantics" in plan_prompt and "asyncio runs one event loop" in plan_prompt
    assert "(past run)" in fake.calls[0].messages[-1]["content"]
    assert plan.prior_knowledge_ran and plan.prior_parser == "json" and plan.parser == "json"
    assert plan.known_facts == ("asyncio runs one event loop per thread",)
    assert plan.search_queries == tuple(GOOD_PLAN["search_queries"])
    assert plan.search_needed


def test_schemas_are_bounded_and_passed():
    fake = FakeLLM([PRIOR_WITH_GAPS, json.dumps(GOOD_PLAN)])
    make_plan("t", fake, cfg=PlannerConfig(max_queries=2))
    prior_schema, plan_schema_sent = fake.calls[0].schema, fake.calls[1].schema
    assert prior_schema == prior_knowledge_schema()
    assert plan_schema_sent["properties"]["search_queries"]["maxItems"] == 2
    assert plan_schema_sent["properties"]["task_type"]["enum"] == ["enumerated", "best_practices", "research"]

    def arrays_bounded(schema):
        if isinstance(schema, dict):
            if schema.get("type") == "array":
                assert "maxItems" in schema
            if schema.get("type") == "string" and "enum" not in schema:
                assert "maxLength" in schema
            for v in schema.values():
                arrays_bounded(v)
        elif isinstance(schema, list):
            for v in schema:
                arrays_bounded(v)

    arrays_bounded(prior_schema)
    arrays_bounded(plan_schema_sent)


def test_no_gaps_and_a_strong_memory_match_mean_no_queries_even_if_the_model_writes_some():
    fake = FakeLLM([PRIOR_NO_GAPS, json.dumps(GOOD_PLAN)])
    plan = make_plan("List 5 best practices for Python asyncio", fake, memory_context="covered", cfg=PlannerConfig(),
                     memory_strong=True)
    assert plan.search_queries == ()
    assert plan.memory_covers_task and not plan.search_needed
    assert fake.calls[1].schema["properties"]["search_queries"]["maxItems"] == 0
    assert "empty array" in fake.calls[1].messages[0]["content"]
    assert any("dropped 2 search queries" in e for e in plan.errors)


@pytest.mark.parametrize("memory_context", ["", "(a weakly related past run)"])
def test_no_gaps_without_a_strong_memory_match_keep_the_plans_queries(memory_context):
    fake = FakeLLM([PRIOR_NO_GAPS, json.dumps(GOOD_PLAN)])
    plan = make_plan("Research agent failure modes and context engineering", fake, memory_context=memory_context,
                     cfg=PlannerConfig())
    assert plan.search_queries == tuple(GOOD_PLAN["search_queries"])
    assert plan.prior_knowledge_ran and not plan.gaps
    assert not plan.memory_covers_task and plan.search_needed
    assert fake.calls[1].schema["properties"]["search_queries"]["maxItems"] == 3
    assert "empty array" not in fake.calls[1].messages[0]["content"]
    assert any("no strong match: the plan keeps its queries" in e for e in plan.errors)


@pytest.mark.parametrize(
    "model_says, task, expected",
    [
        ("research", "List 4 ways to cut pandas memory use", "enumerated"),  # the task states a count
        ("best_practices", "Top 10 Linux networking commands", "enumerated"),
        ("enumerated", "Research agent failure modes and context engineering", "research"),  # no count stated
        ("enumerated", "Guidelines for naming REST endpoints", "best_practices"),
        ("best_practices", "How should I name database columns?", "best_practices"),  # no count: the model's word
        ("research", "Best practices for secrets in CI", "research"),
        ("enumerated", "Give 3 reasons to use type hints", "enumerated"),
    ],
)
def test_task_type_follows_whether_the_task_states_a_count(model_says, task, expected):
    plan = parse_plan(json.dumps({**GOOD_PLAN, "task_type": model_says}), task=task)
    assert plan.task_type == expected
    assert any("states" in e for e in plan.errors) == (model_says != expected)


def test_gaps_become_queries_when_the_plan_has_none():
    reply = json.dumps({**GOOD_PLAN, "search_queries": []})
    plan = make_plan("t", FakeLLM([PRIOR_WITH_GAPS, reply]), cfg=PlannerConfig())
    assert plan.search_queries == ("TaskGroup semantics",)


def test_unusable_prior_knowledge_does_not_suppress_search():
    plan = make_plan("t", FakeLLM(["no idea", json.dumps(GOOD_PLAN)]), cfg=PlannerConfig())
    assert not plan.prior_knowledge_ran and plan.prior_parser == "defaults"
    assert plan.search_queries and plan.search_needed


@pytest.mark.parametrize(
    "cfg",
    [PlannerConfig(skip_prior_knowledge=True), PlannerConfig(mode="single_pass")],
    ids=["skip flag", "single_pass"],
)
def test_skip_prior_knowledge_makes_exactly_one_call(cfg):
    fake = FakeLLM([json.dumps(GOOD_PLAN)])
    plan = make_plan("List 5 best practices for Python asyncio", fake, cfg=cfg)
    assert len(fake.calls) == 1
    assert plan.prior_parser == "skipped" and not plan.prior_knowledge_ran
    assert plan.known_facts == () and plan.gaps == ()
    assert "Known facts" not in fake.calls[0].messages[-1]["content"]
    assert plan.search_queries == tuple(GOOD_PLAN["search_queries"])


def test_env_toggle_reaches_the_planner_through_config(monkeypatch):
    monkeypatch.setenv("HARNESS_SKIP_PRIOR_KNOWLEDGE", "1")
    fake = FakeLLM([json.dumps(GOOD_PLAN)])
    make_plan("t", fake, cfg=apply_env(HarnessConfig()).planner)
    assert len(fake.calls) == 1
    fake2 = FakeLLM([json.dumps(GOOD_PLAN)])
    make_plan("t", fake2)  # cfg=None folds the environment in
    assert len(fake2.calls) == 1


class Exploding:
    backend, model = "broken", "none"

    def __init__(self, exc):
        self.exc = exc
        self.calls = 0

    def chat(self, messages, **kwargs):
        self.calls += 1
        raise self.exc


@pytest.mark.parametrize("exc", [BackendUnavailable("ollama at 127.0.0.1:11434 is down"), RuntimeError("boom")])
def test_backend_raising_gives_defaults_with_errors(exc):
    llm = Exploding(exc)
    plan = make_plan("List 5 tips for pytest", llm, cfg=PlannerConfig())
    assert llm.calls == 2
    assert plan.parser == "defaults" and plan.prior_parser == "error"
    assert plan.task_type == "enumerated"  # heuristic from the task text
    assert plan.search_queries == () and plan.search_needed
    assert any("prior knowledge call failed" in e for e in plan.errors)
    assert any("plan call failed" in e and str(exc) in e for e in plan.errors)


def test_fake_exhausted_after_pass_one_still_returns_plan():
    plan = make_plan("t", FakeLLM([PRIOR_WITH_GAPS]), cfg=PlannerConfig())
    assert plan.parser == "defaults" and plan.prior_knowledge_ran
    assert plan.search_queries == ("TaskGroup semantics",)
    assert any("FakeExhausted" in e for e in plan.errors)


@pytest.mark.parametrize("task", [None, "", 123])
def test_make_plan_never_raises_on_odd_input(task):
    plan = make_plan(task, FakeLLM([PRIOR_WITH_GAPS, json.dumps(GOOD_PLAN)]), cfg=PlannerConfig())
    assert isinstance(plan, Plan)


def test_planner_calls_are_traced_through_roles():
    roles = fake_roles(FakeLLM([PRIOR_WITH_GAPS, json.dumps(GOOD_PLAN)]))
    tracer = Tracer("t")
    with use_tracer(tracer), tracer.stage("plan"):
        make_plan("t", roles.planner, cfg=PlannerConfig())
    names = [e["name"] for e in tracer.events]
    assert {"planner.prior_knowledge", "planner.plan", "llm.planner"} <= set(names)
    assert tracer.calls_by_stage["plan"] == 2


# -- rendering and round trip ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "plan,expected",
    [
        (Plan(), ""),
        (Plan(notes="Be specific."), "**Planner note:** Be specific."),
        (
            Plan(prior_work_summary="A run last week covered asyncio.", notes="Name APIs.", known_facts=("a", "b")),
            "**Prior work:** A run last week covered asyncio.\n**Planner note:** Name APIs.\n"
            "**Verified facts (no search needed):**\n- a\n- b",
        ),
        (Plan(known_facts=("only fact",)), "**Verified facts (no search needed):**\n- only fact"),
    ],
)
def test_synthesis_context(plan, expected):
    assert plan.synthesis_context() == expected


def test_plan_round_trips_through_json():
    plan = make_plan("List 5 best practices", FakeLLM([PRIOR_WITH_GAPS, json.dumps(GOOD_PLAN)]), cfg=PlannerConfig())
    data = json.loads(json.dumps(plan.to_dict()))
    assert plan_from_dict(data) == plan


@pytest.mark.parametrize(
    "data,fragment",
    [
        ({"task_type": "poem"}, "task_type"),
        ({"complexity": "extreme"}, "complexity"),
        ({"search_queries": "not a list"}, "list of strings"),
    ],
)
def test_plan_from_dict_rejects_bad_values(data, fragment):
    with pytest.raises(ValueError, match=fragment):
        plan_from_dict(data)


def test_plan_from_dict_ignores_unknown_keys():
    assert plan_from_dict({"task_type": "research", "future_field": 1}) == Plan()


def test_prior_knowledge_defaults():
    assert not PriorKnowledge().usable
    assert plan_schema(3)["properties"]["search_queries"]["maxItems"] == 3


@pytest.mark.embedded
def test_embedded_model_plan_parses():
    from harness.backends.embedded import EmbeddedLLM

    cfg = PlannerConfig(skip_prior_knowledge=True, max_tokens=160)
    plan = make_plan("List 5 best practices for Python asyncio", EmbeddedLLM(), cfg=cfg, seed=0)
    assert plan.parser in ("json", "dirtyjson", "regex"), plan.errors
    assert plan.task_type in ("enumerated", "best_practices", "research")
    assert plan.complexity in ("low", "medium", "high")
    assert len(plan.search_queries) <= cfg.max_queries
    assert not any(e.startswith("plan call failed") for e in plan.errors)
