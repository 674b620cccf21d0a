"""harness.agent's skills (_skills): /token parsing, auto-activation, hooks per stage."""

from __future__ import annotations

import pytest

from harness.agent import parse_skills, parse_skills_detailed
from harness.agent._skills import (
    ANNOTATED_HEADING,
    SKILLS,
    Skill,
    annotated_sources_section,
    apply_post_synthesis,
    auto_activate,
    post_wiggum_flags,
    pre_synthesis_injections,
    research_rounds_bonus,
    run_hooks,
)
from harness.planner import Plan


class Src:
    def __init__(self, title, url, snippet="", source="ddgs"):
        self.title, self.url, self.snippet, self.source = title, url, snippet, source


PARSE_CASES = [
    ("/annotate /deep Research RAG and save to output.md", "Research RAG and save to output.md", {"annotate", "deep"}, ()),
    ("Research RAG", "Research RAG", set(), ()),
    ("/DEEP  explain asyncio", "explain asyncio", {"deep"}, ()),
    ("/frobnicate /brief explain X", "explain X", {"brief"}, ("frobnicate",)),
    ("/panel", "", {"panel"}, ()),
    ("summarise /tmp/notes.md for me", "summarise /tmp/notes.md for me", set(), ()),
    ("/tmp/notes.md summarise", "/tmp/notes.md summarise", set(), ()),  # a path is not a skill token
    ("explain /deep in the middle", "explain /deep in the middle", set(), ()),
    ("/x /x /deep t", "t", {"deep"}, ("x",)),
    ("", "", set(), ()),
]


@pytest.mark.parametrize("task,clean,active,unknown", PARSE_CASES)
def test_parse_skills_detailed(task, clean, active, unknown):
    assert parse_skills_detailed(task) == (clean, frozenset(active), unknown)
    assert parse_skills(task) == (clean, frozenset(active))


@pytest.mark.parametrize(
    "task,plan,active,expected",
    [
        ("A comprehensive overview of RAG", Plan(), set(), {"deep"}),
        ("exhaustive list of linters", Plan(), set(), {"deep"}),
        ("a deep dive into the GIL", Plan(), set(), {"deep"}),
        ("Summarise this paper", Plan(), set(), {"annotate"}),
        ("survey of vector databases", Plan(), {"brief"}, {"annotate", "brief"}),
        ("compare X and Y", Plan(complexity="high"), set(), {"panel"}),
        ("compare X and Y", Plan(complexity="medium"), set(), set()),
        ("papers on deep learning", None, set(), {"annotate"}),  # 'deep learning' is not 'deep dive'
    ],
)
def test_auto_activate(task, plan, active, expected):
    assert auto_activate(task, plan, frozenset(active)) == frozenset(expected)


def test_pre_synthesis_injections_in_registry_order():
    injections = pre_synthesis_injections({"brief", "deep"})
    assert len(injections) == 2
    assert "/deep" in injections[0] and "/brief" in injections[1]
    assert pre_synthesis_injections(set()) == ()


def test_deep_asks_for_more_research_rounds():
    assert research_rounds_bonus({"deep"}) == 2
    assert research_rounds_bonus({"brief", "panel"}) == 0


def test_panel_flag_after_wiggum():
    assert post_wiggum_flags({"panel"}) == {"panel": True}
    assert post_wiggum_flags({"deep"}) == {}


def test_annotate_appends_sources_once():
    sources = [
        Src("Asyncio docs", "https://docs.python.org/3/library/asyncio.html", "Event loop " * 40),
        Src("Asyncio docs again", "https://docs.python.org/3/library/asyncio.html"),
        {"title": "A [bracketed] title", "url": "https://example.org/a", "snippet": "short", "source": "local"},
    ]
    out = apply_post_synthesis({"annotate"}, "# Answer\n\nBody.\n", sources=sources)
    assert out.startswith("# Answer\n\nBody.\n\n" + ANNOTATED_HEADING)
    assert out.count("docs.python.org") == 1
    assert "1. [Asyncio docs](https://docs.python.org/3/library/asyncio.html) — Event loop" in out
    assert "…" in out and "_(ddgs)_" in out
    assert "2. [A (bracketed) title](https://example.org/a) — short _(local)_" in out
    assert apply_post_synthesis({"annotate"}, out, sources=sources) == out


def test_annotate_without_sources_says_so():
    assert "No external sources" in annotated_sources_section([])
    assert apply_post_synthesis(set(), "text", sources=[]) == "text"


def test_post_synthesis_hooks_chain(monkeypatch):
    monkeypatch.setitem(SKILLS, "shout", Skill("shout", "upper", {"post_synthesis": lambda output, **_: output.upper()}))
    out = apply_post_synthesis({"annotate", "shout"}, "body", sources=[])
    assert out.startswith("BODY") and ANNOTATED_HEADING.upper() in out
    assert run_hooks("post_synthesis", {"shout"}, output="x") == ["X"]


def test_unknown_stage_and_hook_rejected():
    with pytest.raises(ValueError, match="unknown skill stage"):
        run_hooks("pre_search", {"deep"})
    with pytest.raises(ValueError, match="unknown hook stage"):
        Skill("bad", "bad", {"later": lambda **_: None})


def test_registry_has_required_skills():
    assert {"deep", "panel", "annotate", "brief"} <= set(SKILLS)
    for skill in SKILLS.values():
        assert skill.description and skill.hooks
