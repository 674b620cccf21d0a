"""Network backends against the local stub server: the real `ollama` and `openai` clients, and auto."""

from __future__ import annotations

import dataclasses
import time

import pytest
from ollama_stub import OllamaStub, StubReply, free_port

from harness.backends import auto
from harness.backends._common import backoff_delays, ollama_host, plain_messages, with_retries
from harness.backends.auto import Probe, choose_backends
from harness.backends.ollama_backend import OllamaLLM
from harness.backends.openai_backend import OpenAICompatLLM
from harness.config import ROLES, BackendConfig
from harness.inference import (
    BackendError,
    BackendUnavailable,
    ChatResult,
    ModelMissing,
    make_llm,
    make_roles,
    register_backend,
)
from harness.inference._fake import FakeLLM

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "list two fruits"}]
SCHEMA = {
    "type": "object",
    "properties": {"fruits": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 2}},
    "required": ["fruits"],
}


@pytest.fixture
def stub():
    with OllamaStub(models=["glm4:9b", "qwen2.5:32b"]) as s:
        yield s


def fast(**kw) -> dict:
    return {"timeout_s": 2.0, "retries": 2, "backoff_s": 0.01, **kw}


# -- helpers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "configured, env, expected",
    [
        (None, {}, "http://127.0.0.1:11434"),
        (None, {"OLLAMA_HOST": "0.0.0.0"}, "http://127.0.0.1:11434"),
        (None, {"OLLAMA_HOST": "gpu-box:8080"}, "http://gpu-box:8080"),
        ("http://10.0.0.2:11434/", {"OLLAMA_HOST": "ignored"}, "http://10.0.0.2:11434"),
        ("https://ollama.example.org", {}, "https://ollama.example.org:443"),
    ],
)
def test_ollama_host(configured, env, expected):
    assert ollama_host(configured, env) == expected


@pytest.mark.parametrize(
    "retries, backoff, expected",
    [(0, 0.5, []), (3, 0.5, [0.5, 1.0, 2.0]), (3, 20.0, [20.0, 30.0, 30.0])],
)
def test_backoff_delays(retries, backoff, expected):
    assert backoff_delays(retries, backoff) == expected


def test_with_retries_retries_only_retryable_and_reraises_last():
    calls, slept = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("down")
        return "ok"

    assert with_retries(flaky, retries=3, backoff_s=0.1, retryable=lambda e: True, what="x", sleep=slept.append) == "ok"
    assert slept == [0.1, 0.2]
    with pytest.raises(KeyError):
        with_retries(lambda: {}["k"], retries=3, backoff_s=0.1, retryable=lambda e: False, what="x", sleep=slept.append)
    assert len(slept) == 2


@pytest.mark.parametrize(
    "messages, error",
    [([], "at least one message"), ([{"role": "tool", "content": "x"}], "message 0"), ([{"role": "user"}], "message 0")],
)
def test_plain_messages_rejects_bad_input(messages, error):
    with pytest.raises(ValueError, match=error):
        plain_messages(messages)


# -- ollama ------------------------------------------------------------------------------------------------


def test_ollama_reply_and_request_shape(stub):
    stub.replies.append(StubReply('{"fruits": ["apple", "pear"]}', prompt_tokens=12, completion_tokens=9))
    llm = OllamaLLM("glm4:9b", stub.url, **fast())
    result = llm.chat(MSGS, schema=SCHEMA, temperature=0.2, max_tokens=64, seed=7)
    assert isinstance(result, ChatResult)
    assert (result.text, result.prompt_tokens, result.completion_tokens) == ('{"fruits": ["apple", "pear"]}', 12, 9)
    assert (result.model, result.backend, result.finish_reason) == ("glm4:9b", "ollama", "stop")
    body = stub.chat_requests()[-1].body
    assert body["format"] == SCHEMA
    assert body["options"] == {"temperature": 0.2, "num_predict": 64, "seed": 7}
    assert body["messages"] == MSGS and body["stream"] is False


def test_ollama_without_schema_sends_no_format(stub):
    OllamaLLM("glm4:9b", stub.url, **fast()).chat(MSGS)
    assert "format" not in stub.chat_requests()[-1].body


def test_ollama_length_cut_is_reported(stub):
    stub.replies.append("one two three four five six")
    result = OllamaLLM("glm4:9b", stub.url, **fast()).chat(MSGS, max_tokens=3)
    assert result.finish_reason == "length" and result.text == "one two three"


def test_ollama_host_from_env(stub, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{stub.port}")
    llm = make_llm(BackendConfig(kind="ollama", **fast()), "planner")
    assert llm.host == stub.url and llm.model == "glm4:9b"
    assert llm.chat(MSGS).text == "stub reply"


def test_ollama_server_down_names_host_and_model():
    host = f"http://127.0.0.1:{free_port()}"
    llm = OllamaLLM("glm4:9b", host, **fast(retries=1))
    with pytest.raises(BackendUnavailable) as err:
        llm.chat(MSGS)
    assert host in str(err.value) and "glm4:9b" in str(err.value)


def test_ollama_server_dies_between_calls(stub):
    llm = OllamaLLM("glm4:9b", stub.url, **fast(retries=1))
    assert llm.chat(MSGS).text == "stub reply"
    stub.stop()
    with pytest.raises(BackendUnavailable, match=stub.url):
        llm.chat(MSGS)


def test_ollama_model_missing(stub):
    llm = OllamaLLM("llama3:70b", stub.url, **fast())
    with pytest.raises(ModelMissing) as err:
        llm.chat(MSGS)
    assert "llama3:70b" in str(err.value) and stub.url in str(err.value) and "ollama pull" in str(err.value)
    assert len(stub.chat_requests()) == 1  # a missing model is not retried


@pytest.mark.parametrize("fault", ["drop", "503"])
def test_ollama_retries_then_succeeds(stub, fault):
    if fault == "drop":
        stub.drop_next(2)
    else:
        stub.fail_next(2, status=503)
    stub.replies.append("after retries")
    result = OllamaLLM("glm4:9b", stub.url, **fast(retries=3)).chat(MSGS)
    assert result.text == "after retries"
    assert len(stub.chat_requests()) == 3


def test_ollama_retries_exhausted_is_unavailable(stub):
    stub.fail_next(5, status=503)
    with pytest.raises(BackendUnavailable, match="503"):
        OllamaLLM("glm4:9b", stub.url, **fast(retries=2)).chat(MSGS)
    assert len(stub.chat_requests()) == 3


def test_ollama_server_error_is_not_retried(stub):
    stub.fail_next(1, status=500, error="out of memory")
    with pytest.raises(BackendError, match="out of memory"):
        OllamaLLM("glm4:9b", stub.url, **fast()).chat(MSGS)
    assert len(stub.chat_requests()) == 1


def test_ollama_timeout(stub):
    stub.delay_s = 1.0
    llm = OllamaLLM("glm4:9b", stub.url, **fast(timeout_s=0.2))
    started = time.perf_counter()
    with pytest.raises(BackendError) as err:
        llm.chat(MSGS)
    assert not isinstance(err.value, BackendUnavailable)
    assert "did not answer within 0.2s" in str(err.value) and "glm4:9b" in str(err.value)
    assert time.perf_counter() - started < 0.9  # a read timeout is not retried


def test_ollama_empty_reply(stub):
    stub.replies.append("   ")
    with pytest.raises(BackendError, match="empty reply"):
        OllamaLLM("glm4:9b", stub.url, **fast()).chat(MSGS)


# -- openai-compatible -------------------------------------------------------------------------------------


def test_openai_reply_and_response_format(stub):
    stub.replies.append(StubReply('{"fruits": ["fig"]}', prompt_tokens=5, completion_tokens=4))
    llm = OpenAICompatLLM("qwen2.5:32b", f"{stub.url}/v1", **fast())
    result = llm.chat(MSGS, schema=SCHEMA, temperature=0.0, max_tokens=32, seed=3)
    assert (result.text, result.prompt_tokens, result.completion_tokens) == ('{"fruits": ["fig"]}', 5, 4)
    assert (result.backend, result.model, result.finish_reason) == ("openai", "qwen2.5:32b", "stop")
    body = stub.chat_requests()[-1].body
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "output", "schema": SCHEMA}}
    assert (body["max_tokens"], body["seed"], body["temperature"]) == (32, 3, 0.0)


def test_openai_length_and_missing_model_and_down(stub):
    stub.replies.append("a b c d")
    llm = OpenAICompatLLM("glm4:9b", f"{stub.url}/v1", **fast())
    assert llm.chat(MSGS, max_tokens=2).finish_reason == "length"
    with pytest.raises(ModelMissing, match="nope"):
        OpenAICompatLLM("nope", f"{stub.url}/v1", **fast()).chat(MSGS)
    stub.drop_next(1)
    assert llm.chat(MSGS).text == "stub reply"
    stub.stop()
    with pytest.raises(BackendUnavailable, match="glm4:9b"):
        llm.chat(MSGS)


def test_openai_needs_base_url():
    with pytest.raises(ValueError, match="base_url"):
        make_llm(BackendConfig(kind="openai"), "producer")


# -- auto --------------------------------------------------------------------------------------------------


@pytest.fixture
def fake_fallback(monkeypatch):
    """auto falls back to a registered fake instead of loading the embedded model."""
    register_backend("test-fallback")(lambda cfg, role: FakeLLM(model="fallback", backend="embedded"))
    monkeypatch.setattr(auto, "fallback_kind", "test-fallback")
    monkeypatch.delenv("HARNESS_BACKEND", raising=False)
    auto.reset()
    yield
    auto.reset()


CFG = BackendConfig(planner_model="glm4:9b", producer_model="qwen2.5:32b", evaluator_model="qwen2.5:32b",
                    compressor_model="glm4:9b")


@pytest.mark.parametrize(
    "probe, expected, reason",
    [
        (Probe("h", False, frozenset(), "refused"), ["embedded"] * 4, "not reachable at h: refused"),
        (Probe("h", True, frozenset({"glm4:9b", "qwen2.5:32b"})), ["ollama"] * 4, "has glm4:9b, qwen2.5:32b"),
        (
            Probe("h", True, frozenset({"glm4:9b"})),
            ["ollama", "embedded", "embedded", "ollama"],
            "lacks producer=qwen2.5:32b, evaluator=qwen2.5:32b",
        ),
    ],
)
def test_decide_table(probe, expected, reason):
    decision = choose_backends(CFG, probe)
    assert [decision.kind_for(r) for r in ROLES] == expected
    assert reason in decision.reason and reason in decision.line()


def test_decide_matches_latest_tag():
    cfg = dataclasses.replace(CFG, planner_model="llama3", producer_model="llama3", evaluator_model="llama3",
                              compressor_model="llama3")
    assert choose_backends(cfg, Probe("h", True, frozenset({"llama3:latest"}))).kind_for("planner") == "ollama"


@pytest.mark.parametrize("name, listed, has", [
    ("llama3", {"llama3:latest"}, True),
    ("llama3:latest", {"llama3:latest"}, True),
    ("qwen2.5:32b", {"qwen2.5:32b"}, True),
    ("qwen2.5", {"qwen2.5:32b"}, False),  # untagged means :latest, not any tag
    ("glm4:9b", {"glm4:latest"}, False),
])
def test_probe_has_model_reads_untagged_as_latest(name, listed, has):
    assert Probe("h", True, frozenset(listed)).has_model(name) is has


def test_auto_chooses_ollama_when_stub_is_up(stub, fake_fallback, capsys):
    cfg = dataclasses.replace(CFG, host=stub.url, **fast())
    roles = make_roles(dataclasses.replace(cfg, cache=False))
    assert roles.description == {r: f"ollama:{cfg.model_for(r)}" for r in ROLES}
    assert roles.producer.chat(MSGS).text == "stub reply"
    err = capsys.readouterr().err
    assert err.count("backend auto:") == 1 and "ollama for planner, producer, evaluator, compressor" in err
    assert [r.path for r in stub.requests].count("/api/tags") == 1  # one probe for four roles


def test_auto_falls_back_when_ollama_is_down(fake_fallback, capsys):
    host = f"http://127.0.0.1:{free_port()}"
    cfg = dataclasses.replace(CFG, host=host, probe_timeout_s=0.3, cache=False)
    started = time.perf_counter()
    roles = make_roles(cfg)
    assert time.perf_counter() - started < 1.0
    assert {llm.model for llm in (roles.planner, roles.producer)} == {"fallback"}
    make_roles(cfg)  # a second build in the same process: no new announcement
    err = capsys.readouterr().err
    assert err.count("backend auto:") == 1
    assert f"test-fallback for planner, producer, evaluator, compressor (Ollama not reachable at {host}" in err


def test_auto_mixed_when_a_model_is_missing(fake_fallback):
    with OllamaStub(models=["glm4:9b"]) as s:
        roles = make_roles(dataclasses.replace(CFG, host=s.url, cache=False, **fast()))
    assert roles.planner.backend == "ollama" and roles.producer.model == "fallback"


def test_harness_backend_env_forces(stub, fake_fallback, monkeypatch, capsys):
    monkeypatch.setenv("HARNESS_BACKEND", "fake")
    llm = make_llm(dataclasses.replace(CFG, host=stub.url), "planner")
    assert llm.backend == "fake"
    assert stub.requests == []  # no probe at all
    assert "HARNESS_BACKEND=fake" in capsys.readouterr().err
