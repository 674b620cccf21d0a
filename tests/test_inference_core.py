"""The LLM protocol pieces that need no server: registry, scripted fake, response cache, role accounting."""

from __future__ import annotations

import pytest

from harness.config import BackendConfig
from harness.inference import LLM, ChatResult, ResponseCache, backend_names, make_llm
from harness.inference._cache import CachedLLM
from harness.inference._fake import FakeExhausted, FakeLLM
from harness.inference._roles import fake_roles
from harness.tracing import Tracer, use_tracer

MSG = [{"role": "user", "content": "hello there"}]


def test_fake_queue_then_exhausted():
    fake = FakeLLM(["one", "two"])
    assert fake.chat(MSG).text == "one"
    assert fake.chat(MSG).text == "two"
    with pytest.raises(FakeExhausted, match="no reply left"):
        fake.chat(MSG)
    assert len(fake.calls) == 3


def test_fake_keyed_string_list_and_callable():
    fake = FakeLLM(["queued"], keyed={"plan": "P", "judge": ["j1", "j2"], "echo": lambda m: m[-1]["content"].upper()})
    assert fake.chat([{"role": "user", "content": "make a plan"}]).text == "P"
    assert fake.chat([{"role": "user", "content": "make a plan"}]).text == "P"
    assert fake.chat([{"role": "user", "content": "judge it"}]).text == "j1"
    assert fake.chat([{"role": "user", "content": "judge it"}]).text == "j2"
    # the keyed list is used up: falls through to the queue
    assert fake.chat([{"role": "user", "content": "judge it"}]).text == "queued"
    assert fake.chat([{"role": "user", "content": "echo me"}]).text == "ECHO ME"


def test_fake_records_call_arguments():
    fake = FakeLLM(["x"])
    fake.chat(MSG, schema={"type": "object"}, temperature=0.1, max_tokens=7, seed=3)
    call = fake.calls[0]
    assert (call.schema, call.temperature, call.max_tokens, call.seed) == ({"type": "object"}, 0.1, 7, 3)
    assert isinstance(fake, LLM)


def test_registry_builds_fake_and_rejects_unknown():
    llm = make_llm(BackendConfig(kind="fake", producer_model="m1"), "producer")
    assert isinstance(llm, FakeLLM) and llm.model == "m1"
    assert {"auto", "embedded", "ollama", "openai", "fake"} <= set(backend_names())
    with pytest.raises(ValueError, match="backend.kind='nope'.*expected one of"):
        make_llm(BackendConfig(kind="nope"))


def test_unknown_role_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown role 'judge'"):
        BackendConfig().model_for("judge")


def test_cache_hit_skips_backend_and_keys_on_sampling(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    fake = FakeLLM(["first", "second", "third"])
    llm = CachedLLM(fake, cache)
    a = llm.chat(MSG, temperature=0.1, max_tokens=10)
    b = llm.chat(MSG, temperature=0.1, max_tokens=10)
    assert (a.text, b.text, b.cached) == ("first", "first", True)
    assert len(fake.calls) == 1
    c = llm.chat(MSG, temperature=0.2, max_tokens=10)  # different sampling -> different key
    d = llm.chat(MSG, temperature=0.1, max_tokens=10, schema={"type": "object"})
    assert (c.text, d.text) == ("second", "third")
    assert cache.stats() == {"hits": 1, "misses": 3}


def test_cache_survives_a_new_process_handle(tmp_path):
    path = tmp_path / "c.sqlite"
    CachedLLM(FakeLLM(["kept"]), ResponseCache(path)).chat(MSG)
    again = CachedLLM(FakeLLM([]), ResponseCache(path))  # an empty fake would raise on a real call
    assert again.chat(MSG).text == "kept"


def test_empty_reply_is_not_cached(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    llm = CachedLLM(FakeLLM(["", "real"]), cache)
    assert llm.chat(MSG).text == ""
    assert llm.chat(MSG).text == "real"


def test_roles_count_calls_per_role_and_stage():
    roles = fake_roles(FakeLLM(["a", "b", "c"]))
    tracer = Tracer("t")
    with use_tracer(tracer):
        with tracer.stage("make_plan"):
            roles.planner.chat(MSG)
        with tracer.stage("synthesize"):
            roles.producer.chat(MSG)
            roles.producer.chat(MSG)
    assert tracer.usage["planner"]["calls"] == 1
    assert tracer.usage["producer"]["calls"] == 2
    assert dict(tracer.calls_by_stage) == {"make_plan": 1, "synthesize": 2}
    llm_spans = [e for e in tracer.to_chrome_trace()["traceEvents"] if e.get("cat") == "llm"]
    assert [e["name"] for e in llm_spans] == ["llm.planner", "llm.producer", "llm.producer"]
    assert all("completion_tokens" in e["args"] and e["args"]["model"] == "fake-model" for e in llm_spans)


def test_chat_result_is_frozen():
    r = ChatResult("t", 1, 2, 0.1, "m", "b")
    with pytest.raises(Exception):
        r.text = "x"  # type: ignore[misc]
    assert r.total_tokens == 3


def test_a_run_scope_counts_its_uncached_calls_and_a_stopped_one_makes_no_call(tmp_path):
    """harness.inference.RunScope (set per pooled run by experiments.runs): RoleLLM counts the run's uncached calls
    (a cache hit is not one) and, once stop is set, raises RunAbandoned before the cache or the backend is asked."""
    import contextvars

    from harness.inference import ResponseCache, RunAbandoned, RunScope, run_scope
    from harness.inference._fake import FakeLLM
    from harness.inference._roles import fake_roles

    fake = FakeLLM(keyed={"": "ok"})
    cache = ResponseCache(tmp_path / "c.sqlite")
    roles = fake_roles(fake, cache=cache)
    scope = RunScope()

    def run():
        run_scope(scope)
        roles.producer.chat([{"role": "user", "content": "a"}])
        roles.producer.chat([{"role": "user", "content": "a"}])  # a hit
        roles.producer.chat([{"role": "user", "content": "b"}])
        scope.stop.set()
        with pytest.raises(RunAbandoned):
            roles.producer.chat([{"role": "user", "content": "c"}])

    contextvars.copy_context().run(run)
    assert scope.uncached_calls == 2 and len(fake.calls) == 2 and cache.stats() == {"hits": 1, "misses": 2}
    roles.producer.chat([{"role": "user", "content": "c"}])  # outside the run's context: no scope, the call is made
    assert len(fake.calls) == 3
