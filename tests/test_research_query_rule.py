"""Which rule chooses the research queries (issue 19 item 1): empty gaps skip the search only when memory recalled
a strong match for the task; the result and the run record name the rule."""

from __future__ import annotations

import json

import pytest

from harness.config import ResearchConfig
from harness.planner import Plan
from harness.research import choose_queries, gather_research, memory_match
from harness.research._queries import QUERY_RULES, auto_queries, research_cache_key
from harness.stores import read_jsonl
from pipeline_fake import ListSearch, Router, make_harness, plan_json
from test_research import Scripted, compressor, fresh_results

TASK = "List 5 best practices for Python asyncio and save to output.md"
NO_GAPS = json.dumps({"known_facts": ["asyncio runs coroutines on an event loop"], "gaps": []})


# -- memory_match: Jaccard of content words, best recalled task wins ----------------------------------

@pytest.mark.parametrize("recalled, expected", [
    ((), 0.0),
    ((TASK,), 1.0),
    (("Explain Rust borrow checker lifetimes",), 0.0),
    (("Explain Rust borrow checker lifetimes", TASK), 1.0),  # the best recalled task counts
    (("", None), 0.0),
])
def test_memory_match_table(recalled, expected):
    assert memory_match(TASK, recalled) == pytest.approx(expected)


def test_memory_match_partial_overlap_is_the_jaccard_share():
    # content words: {compare, asyncio, cancellation, semantics, trio} vs {asyncio, cancellation, pitfalls}
    assert memory_match("Compare asyncio cancellation semantics with trio", ["asyncio cancellation pitfalls"]) \
        == pytest.approx(2 / 6)


# -- choose_queries: the rules table ------------------------------------------------------------------

TASK_Q = auto_queries(TASK)


@pytest.mark.parametrize("plan_q, gaps, prior_ran, match, expected", [
    (("q1",), (), True, 1.0, (["q1"], "plan_queries")),         # plan queries win whatever memory says
    (("q1",), ("g1",), True, 0.0, (["q1"], "plan_queries")),
    ((), ("g1", "g2", "g3", "g4"), True, 0.0, (["g1", "g2", "g3"], "plan_gaps")),
    ((), ("g1",), True, 1.0, (["g1"], "plan_gaps")),             # gaps mean search even with a strong memory
    ((), (), False, 1.0, (TASK_Q, "task")),                       # no prior pass: empty gaps say nothing
    ((), (), True, 0.9, ([], "no_gaps_strong_memory")),
    ((), (), True, 0.6, ([], "no_gaps_strong_memory")),          # the threshold itself is strong
    ((), (), True, 0.59, (TASK_Q, "no_gaps_searched")),
    ((), (), True, 0.0, (TASK_Q, "no_gaps_searched")),           # empty memory
    ((), (), True, None, ([], "no_gaps_unchecked")),              # a direct caller with no memory evidence
])
def test_choose_queries_table(plan_q, gaps, prior_ran, match, expected):
    assert choose_queries(TASK, plan_q, gaps, prior_ran, match, 0.6) == expected
    assert expected[1] in QUERY_RULES


def test_threshold_above_one_never_skips_and_zero_needs_some_overlap():
    assert choose_queries(TASK, (), (), True, 1.0, 1.01)[1] == "no_gaps_searched"
    assert choose_queries(TASK, (), (), True, 0.0, 0.0)[1] == "no_gaps_searched"
    assert choose_queries(TASK, (), (), True, 0.05, 0.0)[1] == "no_gaps_strong_memory"


# -- gather_research records the rule -----------------------------------------------------------------

def _gather(tmp_path, plan, match, **cfg_over):
    search = Scripted(default=fresh_results)
    cfg = ResearchConfig(max_rounds=1, enrich_urls=0, **cfg_over)
    result = gather_research(TASK, plan, search=search, compressor=compressor(0.9), cfg=cfg,
                             cache_dir=tmp_path / "cache", memory_match=match)
    return search, result


def test_no_gaps_and_strong_memory_skip_the_search(tmp_path):
    search, result = _gather(tmp_path, Plan(prior_knowledge_ran=True), 0.8)
    assert search.calls == [] and result.search_calls == 0 and result.rounds == 0
    assert result.query_rule == "no_gaps_strong_memory" and result.memory_match == 0.8
    assert "memory recalled a strong match" in result.quality.notes
    assert result.stop_reason.startswith("no queries:")


def test_no_gaps_and_weak_memory_search_with_queries_from_the_task(tmp_path):
    search, result = _gather(tmp_path, Plan(prior_knowledge_ran=True), 0.2)
    assert search.calls == TASK_Q and len(TASK_Q) == 2 and result.search_calls == 2 and result.rounds == 1
    assert result.query_rule == "no_gaps_searched" and result.memory_match == 0.2
    assert result.sources and not result.quality.inconclusive


def test_the_threshold_comes_from_config(tmp_path):
    search, result = _gather(tmp_path, Plan(prior_knowledge_ran=True), 0.8, strong_memory_match=0.9)
    assert result.query_rule == "no_gaps_searched" and search.calls


@pytest.mark.parametrize("plan, rule", [
    (Plan(search_queries=("asyncio gather",)), "plan_queries"),
    (Plan(prior_knowledge_ran=True, gaps=("asyncio TaskGroup semantics",)), "plan_gaps"),
    (Plan(), "task"),
])
def test_searching_rules_are_recorded(tmp_path, plan, rule):
    search, result = _gather(tmp_path, plan, 1.0)
    assert result.query_rule == rule and search.calls


def test_skipped_and_searched_runs_of_one_task_do_not_share_a_cache_entry(tmp_path):
    plan = Plan(prior_knowledge_ran=True)
    _, skipped = _gather(tmp_path, plan, 0.9, reuse_cache=True)
    search, searched = _gather(tmp_path, plan, 0.0, reuse_cache=True)
    assert not searched.from_cache and search.calls and searched.query_rule == "no_gaps_searched"
    search, again = _gather(tmp_path, plan, 0.9, reuse_cache=True)
    assert again.from_cache and again.query_rule == "no_gaps_strong_memory" and search.calls == []
    assert research_cache_key(TASK, []) != research_cache_key(TASK, TASK_Q)


# -- end to end: the run record ------------------------------------------------------------------------

def test_run_record_names_the_rule_first_on_empty_memory_then_on_a_recalled_run(tmp_path):
    """Run 1 (empty memory, no gaps) searches; run 2 of the same task recalls run 1 and skips the search."""
    first_search = ListSearch()
    router = Router(prior=NO_GAPS, plan=plan_json(queries=()))
    first = make_harness(tmp_path, router, search=first_search).run(TASK)
    assert first.status == "ok"
    assert first.record["research"]["query_rule"] == "no_gaps_searched"
    assert first.record["research"]["memory_match"] == 0.0 and first_search.queries

    second_search = ListSearch()
    h2 = make_harness(tmp_path, Router(prior=NO_GAPS, plan=plan_json(queries=())), search=second_search)
    second = h2.run(TASK)
    assert second.status == "ok" and second.record["memory_titles"]
    assert second.record["research"]["query_rule"] == "no_gaps_strong_memory"
    assert second.record["research"]["memory_match"] == 1.0 and second_search.queries == []
    rules = [r["research"]["query_rule"] for r in read_jsonl(h2.cfg.runs_jsonl)]
    assert rules == ["no_gaps_searched", "no_gaps_strong_memory"]


def test_the_plan_keeps_its_queries_when_gaps_are_empty_but_memory_is_not_a_strong_match(tmp_path):
    """The planner drops its queries on empty gaps only after memory recalled the task; on an empty memory the
    plan's own queries are searched (rule plan_queries), on the recalled rerun nothing is."""
    queries = ("agent failure modes taxonomy", "context engineering techniques")
    first_search = ListSearch()
    first = make_harness(tmp_path, Router(prior=NO_GAPS, plan=plan_json(queries=queries)), search=first_search).run(TASK)
    assert first.record["plan"]["search_queries"] == list(queries)
    assert first.record["research"]["query_rule"] == "plan_queries" and first_search.queries[:2] == list(queries)

    second_search = ListSearch()
    second = make_harness(tmp_path, Router(prior=NO_GAPS, plan=plan_json(queries=queries)), search=second_search).run(TASK)
    assert second.record["plan"]["search_queries"] == [] and second.record["plan"]["memory_strong"]
    assert second.record["research"]["query_rule"] == "no_gaps_strong_memory" and second_search.queries == []
