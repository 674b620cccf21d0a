"""The research route score (harness/orchestrator/_routing.py): compound research tasks orchestrate, single-focus ones do not."""

import pytest

from harness.config import OrchestratorConfig
from harness.orchestrator import decide_route
from harness.orchestrator._routing import research_topics, route_score
from harness.planner import Plan

SEED_003 = ("Research agent failure modes and context engineering, then synthesize into a unified guide saved to "
            "guide.md")


@pytest.mark.parametrize(
    "task, expected",
    [
        # compound: distinct topics, then put together
        (SEED_003, "orchestrated"),
        ("Investigate message queues and service meshes, then combine both into one architecture note", "orchestrated"),
        ("Survey battery chemistry, grid storage policy and EV charging standards and write a unified report",
         "orchestrated"),
        ("Study how compilers optimise loops and how CPUs predict branches; synthesize into a guide saved to perf.md",
         "orchestrated"),
        ("Best practices for code review and for on-call rotations, merged into a single team handbook",
         "orchestrated"),
        ("List 3 risks of serverless databases and 3 risks of edge caching, then assemble both into one document",
         "orchestrated"),
        # single focus: one topic, however many verbs, sequencers or files
        ("List 5 best practices for asyncio, save to output.md", "single"),
        ("Explain how TCP congestion control works", "single"),
        ("Research Rust's borrow checker and then write a short guide to it saved to borrow.md", "single"),
        ("Compare Redis and Memcached for session storage", "single"),  # one side is a bare name: one topic
        ("Explain the difference between threads and coroutines in Python", "single"),  # "between A and B"
        ("Summarize what the GDPR requires and how it applies to log files", "single"),  # follow-up on "it"
        ("Write a summary of the Kubernetes 1.30 release notes, save to k8s.md", "single"),
        ("Give 4 reasons to pin dependencies and one example of each", "single"),
    ],
)
def test_route_table(task, expected):
    assert decide_route(task, Plan(), OrchestratorConfig()).mode == expected


@pytest.mark.parametrize(
    "task, topics",
    [
        (SEED_003, ["agent failure modes", "context engineering"]),
        ("Research the history of Unix, then research its licensing, and finally write a report that connects both",
         ["the history of Unix", "its licensing"]),
        ("Compare Redis and Memcached for session storage", ["Redis and Memcached for session storage"]),
        ("Write a guide to pytest fixtures", []),  # an output clause only: no research topic of its own
        ("", []),
    ],
)
def test_research_topics(task, topics):
    assert research_topics(task) == topics


def test_points_add_up_and_caps_hold():
    many = ("Research A1 topic, B2 topic, C3 topic, D4 topic and E5 topic; compare, survey, review and evaluate them, "
            "then synthesize into a unified guide saved to a.md, b.md")
    s = route_score(many, ("one subtask here", "another subtask there"))
    assert s["topics_points"] == 6 and s["verbs"] == 2 and s["files"] == 1 and s["sequencers"] == 1
    assert s["subtasks_points"] == 2 and s["assembly"] == 2
    assert s["score"] == 14
    assert route_score("")["score"] == 0


@pytest.mark.parametrize(
    "subtasks, complexity, expected",
    [
        ((), "medium", "single"),
        (("GPU memory hierarchies", "CUDA stream scheduling"), "medium", "orchestrated"),
        (("GPU memory hierarchies", "CUDA stream scheduling"), "low", "single"),  # the planner said low
        (("GPU memory hierarchies", "2026"), "medium", "single"),  # not researchable: not a topic
    ],
)
def test_planner_subtasks_count_as_topics_and_points(subtasks, complexity, expected):
    # one text topic; research verbs 2 + assembly 2 + sequencer 1 = 5; two subtasks add a topic and 2 points
    task = "Research GPU programming, then synthesize the findings into one report"
    plan = Plan(subtasks=subtasks, complexity=complexity)
    assert decide_route(task, plan, OrchestratorConfig()).mode == expected


def test_thresholds_come_from_config():
    assert decide_route(SEED_003, Plan(), OrchestratorConfig(threshold=20)).mode == "single"
    assert decide_route(SEED_003, Plan(), OrchestratorConfig(min_topics=3)).mode == "single"
    assert decide_route("Explain how TCP congestion control works", Plan(),
                        OrchestratorConfig(threshold=0, min_topics=1)).mode == "orchestrated"


@pytest.mark.parametrize(
    "questions, missed",
    [
        (["What are common failure modes of LLM agents?", "What is context engineering?"], []),
        (["What are research agent failure modes?", "In which contexts do failures occur?"], ["context engineering"]),
        (["Which agent failure modes exist?"], ["context engineering"]),
    ],
)
def test_uncovered_topics(questions, missed):
    from harness.orchestrator._routing import uncovered_topics

    assert uncovered_topics(SEED_003, questions) == missed
    assert uncovered_topics("Explain how TCP congestion control works", ["unrelated"]) == []  # one topic: no check
