"""The wired single-focus lifecycle (seed 003) end to end on the scripted fake: output, record, trace, failures,
memory round trip, prior-knowledge toggle, skills, smoke label."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from evaluators import HARNESS_EVALUATOR
from harness.agent import Harness, output_name_for
from harness.agent._skills import DEEP_INSTRUCTION
from harness.config import ROLES, MemoryConfig, ResearchConfig, WiggumConfig, apply_env, config_hash
from harness.inference import BackendError, SMOKE_LABEL
from harness.memory import Memory
from harness.stores import read_jsonl
from pipeline_fake import (
    RESEARCH,
    ListSearch,
    Router,
    config,
    make_harness,
    numbered,
    plan_json,
    read_trace,
    top_stages,
)

TASK = "List 5 best practices for Python asyncio and save to output.md"
SEED_003_ORDER = [
    "parse_skills", "memory.get_context", "make_plan", "auto_activate", "gather_research", "synthesize",
    "write_output", "wiggum_loop", "post_synthesis", "compress_and_store",
]


def _items(text: str) -> int:
    return len(re.findall(r"^\d+\. ", text, re.M))


# -- the full lifecycle --------------------------------------------------------------------------------


def test_full_run_writes_output_record_and_trace(tmp_path):
    router = Router()
    h = make_harness(tmp_path, router)
    result = h.run(TASK)

    assert result.status == "ok" and result.error is None
    out = Path(result.output_path)
    assert out.name == "output.md" and out.parent == h.cfg.output_path
    assert _items(out.read_text()) == 5
    assert SMOKE_LABEL not in out.read_text()

    records = read_jsonl(h.cfg.runs_jsonl)
    assert len(records) == 1
    rec = records[0]
    assert rec == json.loads(json.dumps(result.record, default=str))
    assert rec["task"] == TASK and rec["status"] == "ok" and rec["error"] is None
    assert rec["config_hash"] == config_hash(h.cfg) and re.fullmatch(r"[0-9a-f]{12}", rec["config_hash"])
    assert rec["plan"]["task_type"] == "enumerated" and rec["plan"]["search_queries"] == ["asyncio best practices"]
    assert list(rec["stage_s"]) == SEED_003_ORDER and all(v >= 0 for v in rec["stage_s"].values())
    # every role answered at least once, tokens counted per role
    assert set(rec["llm"]) == set(ROLES)
    for role, usage in rec["llm"].items():
        assert usage["calls"] >= 1 and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0, role
    assert rec["llm"]["planner"]["calls"] == 2  # prior knowledge + plan
    # wiggum_loop: the round's judge call and the verify re-score of the kept text (a sample even for a greedy judge)
    assert rec["llm_calls_by_stage"] == {"make_plan": 2, "gather_research": 1, "synthesize": 1, "wiggum_loop": 2,
                                         "compress_and_store": 1}
    assert rec["judge_failures"] == 0 and rec["wiggum"]["rescored"] is True
    assert 0 <= rec["scores"]["composite"] <= 10 and rec["scores"]["rubric"]["dimensions"]["depth"] == 9
    assert rec["wiggum"]["rounds"][0]["score"] == rec["scores"]["composite"]
    assert rec["research"]["quality"]["strong"] is True and rec["research"]["search_calls"] == 1
    assert rec["output_path"] == str(out) and rec["memory_stored"] is True
    assert rec["synthesis"] == {"retried": False, "expected": 5, "found": 5, "echo": [], "echo_kept": False,
                                "echo_error": None}
    assert Path(rec["trace"]) == Path(result.trace_path)


def test_trace_is_chrome_format_with_a_span_per_stage_and_per_llm_call(tmp_path):
    router = Router()
    result = make_harness(tmp_path, router).run(TASK)
    data = json.loads(Path(result.trace_path).read_text())
    assert data["otherData"]["run_id"] == result.run_id
    for e in data["traceEvents"]:
        assert {"name", "ph", "pid", "tid", "ts"} <= set(e)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["args"], dict)
    events = read_trace(result.trace_path)
    assert top_stages(events) == SEED_003_ORDER  # seed 003's lifecycle order
    llm = [e for e in events if e["cat"] == "llm"]
    assert len(llm) == sum(router.calls.values()) == sum(u["calls"] for u in result.record["llm"].values())
    stages = [e for e in events if e["cat"] == "stage"]
    for call in llm:  # every model call happens inside a stage span
        assert any(s["ts"] <= call["ts"] and call["ts"] + call["dur"] <= s["ts"] + s["dur"] + 1 for s in stages)
        assert call["args"]["prompt_tokens"] > 0


def test_count_check_retries_once_on_an_enumerated_task(tmp_path):
    router = Router(synth=numbered(3), retry=numbered(5))
    result = make_harness(tmp_path, router).run(TASK)
    assert router.calls["synth"] == 1 and router.calls["retry"] == 1
    assert "has 3 items, but the task needs exactly 5" in router.messages["retry"][0][-1]["content"]
    assert result.record["synthesis"] == {"retried": True, "expected": 5, "found": 5, "echo": [],
                                        "echo_kept": False, "echo_error": None}
    assert _items(Path(result.output_path).read_text()) == 5


def test_count_retry_happens_at_most_once(tmp_path):
    router = Router(synth=numbered(3), retry=numbered(4))
    result = make_harness(tmp_path, router).run(TASK)
    assert router.calls["retry"] == 1
    assert result.record["synthesis"] == {"retried": True, "expected": 5, "found": 4, "echo": [],
                                        "echo_kept": False, "echo_error": None}  # closer attempt kept


def test_backend_failure_mid_run_is_recorded_not_raised(tmp_path):
    def down(messages):
        raise BackendError("ollama at http://127.0.0.1:11434 (qwen2.5:32b): connection refused")

    router = Router(synth=down)
    h = make_harness(tmp_path, router)
    result = h.run(TASK)
    assert result.status == "failed"
    assert result.error.startswith("BackendError: ollama at") and "connection refused" in result.error
    rec = read_jsonl(h.cfg.runs_jsonl)[-1]
    assert rec["status"] == "failed" and rec["error"] == result.error
    assert rec["plan"]["task_type"] == "enumerated"  # what ran before the failure is kept
    events = read_trace(result.trace_path)
    synth = [e for e in events if e["name"] == "synthesize"]
    assert synth and "connection refused" in synth[0]["args"]["error"]
    assert "compress_and_store" not in top_stages(events)
    assert router.calls["memory"] == 0


def test_failure_before_synthesis_is_recorded_too(tmp_path):
    class BrokenMemory:
        def get_context(self, query):
            raise RuntimeError("memory store locked")

    h = Harness(config(tmp_path), make_harness(tmp_path, Router()).roles, evaluator=HARNESS_EVALUATOR,
                memory=BrokenMemory(), search=ListSearch())
    result = h.run(TASK)
    assert result.status == "failed" and "memory store locked" in result.error
    rec = read_jsonl(h.cfg.runs_jsonl)[-1]
    assert rec["status"] == "failed" and "memory store locked" in rec["error"]
    assert Path(result.trace_path).is_file()


def test_a_harness_built_without_an_evaluator_fails_its_run_in_one_line_and_writes_no_output(tmp_path):
    """The harness takes its scorer from whoever builds it (harness.review.Evaluator); one built without (as
    plan_preview builds it) fails a run before synthesis: recorded, one line naming what to pass, no output file,
    no synthesis call."""
    router = Router()
    roles = make_harness(tmp_path, router).roles
    h = Harness(config(tmp_path), roles, search=ListSearch())
    result = h.run(TASK)
    assert result.status == "failed"
    assert result.error == ("NoEvaluator: this Harness was built without an evaluator, so it cannot score an answer; "
                            "pass evaluator=evaluators.HARNESS_EVALUATOR")
    assert read_jsonl(h.cfg.runs_jsonl)[-1]["error"] == result.error
    assert not h.cfg.output_path.exists() or not any(h.cfg.output_path.iterdir())
    assert router.calls["synth"] == 0


@pytest.mark.parametrize("task", ["", "   \n", "/deep", "/deep /panel  "])
def test_empty_task_raises_a_clear_value_error(tmp_path, task):
    router = Router()
    h = make_harness(tmp_path, router)
    with pytest.raises(ValueError, match="task is empty"):
        h.run(task)
    assert sum(router.calls.values()) == 0
    assert not h.cfg.runs_jsonl.exists()


# -- memory --------------------------------------------------------------------------------------------


def test_second_related_run_recalls_the_first_runs_observation(tmp_path):
    first = make_harness(tmp_path, Router()).run(TASK)
    assert first.record["memory_stored"] is True and first.record["memory_titles"] == []

    router = Router(synth=numbered(3), plan=plan_json(sections=3))
    h2 = make_harness(tmp_path, router)  # a fresh harness on the same results dir, as a second process would
    second = h2.run("List 3 common asyncio mistakes and save to mistakes.md")
    assert second.status == "ok" and Path(second.output_path).name == "mistakes.md"
    assert "Asyncio practices run" in second.record["memory_titles"]
    assert "Asyncio practices run" in router.user_text("prior") and "Asyncio practices run" in router.user_text("plan")
    assert "# What earlier runs found (memory)" in router.user_text("synth")
    assert len(read_jsonl(h2.cfg.runs_jsonl)) == 2


def test_frozen_memory_recalls_but_stores_nothing(tmp_path):
    make_harness(tmp_path, Router()).run(TASK)
    frozen = config(tmp_path, memory=MemoryConfig(frozen=True))
    router = Router()
    result = make_harness(tmp_path, router, cfg=frozen).run("List 5 asyncio debugging tips and save to tips.md")
    assert result.status == "ok" and result.record["memory_stored"] is False
    assert router.calls["memory"] == 0
    assert "Asyncio practices run" in result.record["memory_titles"]  # reads still work
    assert Memory(MemoryConfig(), tmp_path / "results").count() == 1


def test_disabled_memory_neither_recalls_nor_stores(tmp_path):
    make_harness(tmp_path, Router()).run(TASK)
    router = Router()
    result = make_harness(tmp_path, router, memory=MemoryConfig(enabled=False)).run(TASK)
    assert result.record["memory_titles"] == [] and result.record["memory_stored"] is False
    assert router.calls["memory"] == 0


# -- planner toggle ------------------------------------------------------------------------------------


def test_skip_prior_knowledge_env_skips_pass_one(tmp_path, monkeypatch):
    both = Router()
    make_harness(tmp_path / "a", both).run(TASK)
    monkeypatch.setenv("HARNESS_SKIP_PRIOR_KNOWLEDGE", "1")
    skipped = Router()
    result = make_harness(tmp_path / "b", skipped, cfg=apply_env(config(tmp_path / "b"))).run(TASK)
    assert both.calls["prior"] == 1 and both.calls["plan"] == 1
    assert skipped.calls["prior"] == 0 and skipped.calls["plan"] == 1
    assert result.record["llm"]["planner"]["calls"] == 1
    assert result.record["config"]["planner"]["skip_prior_knowledge"] is True
    assert result.record["plan"]["prior_parser"] == "skipped"


# -- skills --------------------------------------------------------------------------------------------


def test_deep_skill_injects_guidance_and_extends_research(tmp_path):
    weak = json.dumps({**json.loads(RESEARCH), "confidence": 0.3, "next_query": "asyncio pitfalls"})
    research = ResearchConfig(max_rounds=1, enrich_urls=0, max_weak_attempts=5)
    plain, deep = Router(research=weak), Router(research=weak)
    r_plain = make_harness(tmp_path / "p", plain, research=research).run(TASK)
    r_deep = make_harness(tmp_path / "d", deep, research=research).run("/deep " + TASK)
    assert r_deep.record["skills"] == ["deep"] and r_plain.record["skills"] == []
    assert r_deep.record["task"] == "/deep " + TASK and r_deep.record["clean_task"] == TASK
    assert DEEP_INSTRUCTION in deep.user_text("synth") and DEEP_INSTRUCTION not in plain.user_text("synth")
    assert r_plain.record["research"]["rounds"] == 1 and r_deep.record["research"]["rounds"] == 3  # +2 rounds


def test_panel_skill_runs_the_persona_panel(tmp_path):
    router = Router()
    result = make_harness(tmp_path, router).run("/panel " + TASK)
    assert router.calls["panel"] == 3
    assert [p["persona"] for p in result.record["panel"]] == ["domain practitioner", "critical reviewer",
                                                              "informed newcomer"]
    assert {p["verdict"] for p in result.record["panel"]} == {"accept"}
    assert "run_panel" in top_stages(read_trace(result.trace_path))


def test_no_panel_without_the_skill_or_high_complexity(tmp_path):
    router = Router()
    result = make_harness(tmp_path, router).run(TASK)
    assert router.calls["panel"] == 0 and result.record["panel"] == []


def test_high_complexity_auto_activates_the_panel(tmp_path):
    router = Router(plan=plan_json(complexity="high"))
    result = make_harness(tmp_path, router).run(TASK)
    assert "panel" in result.record["skills"] and router.calls["panel"] == 3


def test_annotate_skill_appends_sources_to_the_written_file(tmp_path):
    result = make_harness(tmp_path, Router()).run("/annotate " + TASK)
    text = Path(result.output_path).read_text()
    assert "## Annotated sources" in text and "doc://asyncio-best-practices/1" in text
    assert _items(text.split("## Annotated sources")[0]) == 5


def test_unknown_skill_is_recorded(tmp_path):
    result = make_harness(tmp_path, Router()).run("/frobnicate " + TASK)
    assert result.status == "ok" and result.record["unknown_skills"] == ["frobnicate"]


# -- smoke label ---------------------------------------------------------------------------------------


def test_smoke_label_when_the_embedded_model_answers(tmp_path):
    h = make_harness(tmp_path, Router(), backend="embedded")
    assert h.roles.smoke
    result = h.run(TASK)
    text = Path(result.output_path).read_text()
    label = "SMOKE RUN (embedded fake-model): structure check only, not research quality"  # names the model loaded
    assert text.startswith(f"> {label}\n") and _items(text) == 5
    assert result.smoke and result.record["smoke"] is True and result.record["smoke_label"] == label


def test_smoke_label_names_the_gguf_file_actually_loaded():
    """Measured before: a run on a 1.5B GGUF by path was labelled 'SMOKE RUN (embedded SmolLM2-135M)'."""
    from harness.inference._roles import fake_roles

    class Loaded:  # what EmbeddedLLM exposes: backend, model (file stem) and the path it loaded
        backend, model = "embedded", "qwen2.5-coder-1.5b-instruct-q4_k_m"
        path = Path("/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")

        def chat(self, messages, **kw):
            raise AssertionError("not called")

    roles = fake_roles(Loaded())
    assert roles.smoke_label == ("SMOKE RUN (embedded qwen2.5-coder-1.5b-instruct-q4_k_m.gguf): structure check only, "
                                 "not research quality")
    assert "SmolLM2" not in roles.smoke_label


# -- prepare / finish split (what experiments reuse) ---------------------------------------------------


def test_prepared_round_trips_and_finish_reuses_it_without_planning_again(tmp_path):
    router = Router()
    h = make_harness(tmp_path, router)
    from harness.agent import Prepared

    prepared = Prepared.from_dict(json.loads(json.dumps(h.prepare(TASK).to_dict())))
    planned = router.calls["plan"]
    result = h.finish(prepared, instructions={"enumerated": "Number every item. Be concrete."})
    assert router.calls["plan"] == planned and router.calls["research"] == 1
    assert router.messages["synth"][-1][0]["content"] == "Number every item. Be concrete."
    assert result.record["instruction"] == "Number every item. Be concrete."


@pytest.mark.parametrize(
    "task, name",
    [
        (TASK, "output.md"),
        ("Write a guide to asyncio and save it as guide.txt", "guide.txt"),
        ("Explain asyncio timeouts", "explain-asyncio-timeouts.md"),
        ("Save to ../../etc/passwd.md the list", "passwd.md"),
    ],
)
def test_output_name_for(task, name):
    assert output_name_for(task) == name


def test_output_stays_inside_the_output_dir(tmp_path):
    result = make_harness(tmp_path, Router()).run("List 5 asyncio tips and save to ../../escape.md")
    assert result.status == "ok"
    assert Path(result.output_path).resolve().parent == (tmp_path / "results" / "outputs").resolve()


def test_results_are_independent_of_the_config_object(tmp_path):
    h = make_harness(tmp_path, Router())
    before = dataclasses.asdict(h.cfg)
    h.run(TASK)
    assert dataclasses.asdict(h.cfg) == before


# -- seeds reach every sampled producer call ------------------------------------------------------------


def test_seed_reaches_synthesis_retry_and_each_revision(tmp_path):
    low = json.dumps({d: 2 for d in ("relevance", "completeness", "depth", "specificity", "structure", "grounded")}
                     | {"feedback": "thin", "weaknesses": ["thin"]})
    router = Router(synth=numbered(3), retry=numbered(5), judge=low, revise=[numbered(5, "a"), numbered(5, "b")])
    h = make_harness(tmp_path, router, wiggum=WiggumConfig(max_rounds=3), seed=7)
    result = h.run(TASK)
    fake = h.roles.producer.inner
    seeds = {Router.stage_of(c.messages): [] for c in fake.calls}
    for c in fake.calls:
        seeds[Router.stage_of(c.messages)].append(c.seed)
    assert seeds["synth"] == [7] and seeds["retry"] == [8] and seeds["revise"] == [8, 9]
    assert seeds["prior"] == [7] and seeds["plan"] == [7]  # both planner passes are sampled per seed too
    assert len(result.record["wiggum"]["rounds"]) == 3


def test_different_seeds_are_different_cache_keys(tmp_path):
    from harness.inference import ResponseCache
    from harness.inference._roles import fake_roles
    from pipeline_fake import pipeline_llm

    cache = ResponseCache(tmp_path / "cache.sqlite")
    router = Router()
    roles = fake_roles(pipeline_llm(router), cache=cache)
    for seed in (0, 1):
        Harness(config(tmp_path / str(seed), seed=seed), roles, evaluator=HARNESS_EVALUATOR, search=ListSearch()).run(TASK)
    assert router.calls["synth"] == 2  # the second seed was not served the first seed's synthesis from cache
