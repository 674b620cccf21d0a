"""The Ollama backend against tests/ollama_stub.py, a server that behaves as Ollama documents (issue 32): a 2048-token
default window and front truncation answered 200 OK when a request carries no num_ctx, /api/show's trained
context, thinking models, a missing model, malformed replies (issue 33 item 14)."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from harness.config import ROLES, BackendConfig
from harness.inference import BackendError, RoleLLM, make_llm
from ollama_stub import OllamaStub, StubModel, count_tokens, schema_reply

MODELS = [StubModel("glm4:9b", 131072, family="glm4"), StubModel("qwen2.5:32b", 32768, family="qwen2"),
          StubModel("gemma3:27b", 131072, family="gemma3")]
REPLY = "1. **TaskGroup**: cancel siblings on failure.\n2. **Timeouts**: use asyncio.timeout.\n3. **Queues**: bound them."
SCHEMA = {"type": "object", "properties": {"ok": {"type": "string", "maxLength": 10}}, "required": ["ok"]}


def cfg_for(url: str, **kw) -> BackendConfig:
    return BackendConfig(kind="ollama", host=url, planner_model="glm4:9b", producer_model="qwen2.5:32b",
                         evaluator_model="gemma3:27b", compressor_model="glm4:9b", retries=0, backoff_s=0.01,
                         timeout_s=10, **kw)


def long_prompt(tokens: int) -> list[dict[str, str]]:
    """A system prompt and a question of about `tokens` stub tokens (words of up to 4 characters: one each)."""
    return [{"role": "system", "content": "SYSTEM-RULES " + "rule " * (tokens // 2)},
            {"role": "user", "content": "data " * (tokens // 2) + "QUESTION-AT-THE-END"}]


@pytest.fixture
def stub():
    with OllamaStub(models=MODELS, default_reply=schema_reply(REPLY)) as s:
        yield s


def test_every_request_carries_one_window_per_model_and_no_model_reloads(stub):
    cfg = cfg_for(stub.url)
    llms = {role: make_llm(cfg, role) for role in ROLES}
    for _ in range(2):
        for role, llm in llms.items():
            llm.chat([{"role": "user", "content": f"hello {role}"}], max_tokens=50)
    sent = [(r.body["model"], r.num_ctx) for r in stub.chat_requests()]
    assert len(sent) == 8 and all(n is not None for _, n in sent)  # before: no request carried num_ctx (2048 used)
    per_model = {}
    for model, n in sent:
        per_model.setdefault(model, set()).add(n)
    assert all(len(v) == 1 for v in per_model.values())  # planner and compressor share glm4:9b: one window
    assert per_model == {"glm4:9b": {4096}, "qwen2.5:32b": {9216}, "gemma3:27b": {5120}}
    assert stub.loads == {"glm4:9b": 1, "qwen2.5:32b": 1, "gemma3:27b": 1}  # loaded once: no reload per request


def test_a_synthesis_sized_prompt_is_not_cut(stub):
    """~1,400 prompt tokens plus max_tokens 700 (the issue's synthesis calls): cut at the 2048 default before."""
    llm = make_llm(cfg_for(stub.url), "producer")
    result = llm.chat(long_prompt(1400), max_tokens=700)
    req = stub.chat_requests()[-1]
    assert not req.truncated and req.window == 9216
    assert result.prompt_tokens == count_tokens(" ".join(m["content"] for m in long_prompt(1400)))


def test_the_window_is_capped_by_the_trained_context_and_set_per_role(stub):
    small = StubModel("tiny:1b", 2048, family="llama")
    with OllamaStub(models=[*MODELS, small], default_reply="ok") as s:
        cfg = dataclasses.replace(cfg_for(s.url), producer_model="tiny:1b",
                                  num_ctx={"planner": 16384, "compressor": 8192})
        assert make_llm(cfg, "producer").num_ctx == 2048  # default 9216, capped by /api/show
        assert make_llm(cfg, "planner").num_ctx == make_llm(cfg, "compressor").num_ctx == 16384  # one per model
    with pytest.raises(ValueError, match=r"backend.num_ctx names unknown role\(s\) judge"):
        make_llm(dataclasses.replace(cfg, num_ctx={"judge": 4096}), "producer")
    with pytest.raises(ValueError, match="expected an integer >= 256"):
        make_llm(dataclasses.replace(cfg, num_ctx="big"), "producer")


def test_a_prompt_over_the_window_is_refused_before_it_is_sent(stub):
    llm = make_llm(cfg_for(stub.url, num_ctx=1024), "producer")
    with pytest.raises(BackendError) as err:
        llm.chat(long_prompt(1400), max_tokens=700)
    msg = str(err.value)
    assert type(err.value).__name__ == "ContextOverflow" and "\n" not in msg
    for part in ("producer", "qwen2.5:32b", "1024", "backend.num_ctx", "tokens"):
        assert part in msg
    assert stub.chat_requests() == []  # nothing sent


def test_a_prompt_the_server_cut_is_an_error_not_a_result():
    """The server ran the prompt in a smaller window than asked (a model's trained context, a server bug): the
    reply's prompt_eval_count shows it and the call fails instead of answering from the prompt's tail."""
    from harness.backends.ollama_backend import OllamaLLM

    with OllamaStub(models=[StubModel("glm4:9b", 1024)], default_reply="answer from the tail") as s:
        llm = OllamaLLM("glm4:9b", s.url, retries=0, role="planner", num_ctx=8192)
        with pytest.raises(BackendError) as err:
            llm.chat(long_prompt(1400), max_tokens=50)
        assert s.chat_requests()[-1].truncated
    assert type(err.value).__name__ == "ContextOverflow" and "was cut" in str(err.value)
    assert "planner" in str(err.value) and "backend.num_ctx" in str(err.value)


def test_thinking_models_think_apart_and_never_in_the_text():
    qwen3 = StubModel("qwen3:32b", 40960, thinking=True, family="qwen3")
    with OllamaStub(models=[*MODELS, qwen3], default_reply=schema_reply(REPLY)) as s:
        cfg = dataclasses.replace(cfg_for(s.url), producer_model="qwen3:32b", evaluator_model="qwen3:32b")
        judge = RoleLLM("evaluator", make_llm(cfg, "evaluator"))
        judged = judge.chat([{"role": "user", "content": "score it"}], schema=SCHEMA, max_tokens=100)
        assert s.chat_requests()[-1].body.get("think") is False  # JSON roles: thinking off by default
        producer = RoleLLM("producer", make_llm(cfg, "producer"))
        text = producer.chat([{"role": "user", "content": "write it"}], max_tokens=300)
        assert "think" not in s.chat_requests()[-1].body  # text: the model's default, <think> in its content
        thinker = RoleLLM("producer", make_llm(dataclasses.replace(cfg, think={"producer": True}), "producer"))
        apart = thinker.chat([{"role": "user", "content": "write it"}], max_tokens=300)
        assert s.chat_requests()[-1].body.get("think") is True
        plain = RoleLLM("planner", make_llm(cfg, "planner"))
        plain.chat([{"role": "user", "content": "plan"}], schema=SCHEMA, max_tokens=100)
        assert "think" not in s.chat_requests()[-1].body  # glm4 cannot think: never sent
    assert judged.thinking_tokens == 0 and judged.text.startswith("{")
    for result in (text, apart):
        assert result.text == REPLY and "<think>" not in result.text and "think about" not in result.text
        # Ollama reports no split of eval_count: the thinking's share of the characters (9 of 27 words here)
        assert result.completion_tokens == len(REPLY.split()) + 9 and 5 <= result.thinking_tokens <= 12


@pytest.mark.parametrize("text, answer, thought", [
    ("<think>weigh it</think>\n\nThe answer.", "The answer.", "weigh it"),
    ("plain answer", "plain answer", ""),
    ("Intro <think>a</think> middle <THINK>b</THINK> end", "Intro  middle  end", "ab"),
    ("<think>cut while thinking", "", "cut while thinking"),  # max_tokens ran out inside the block
    ("reasoning the template opened</think>Final.", "Final.", "reasoning the template opened"),
])
def test_think_blocks_are_taken_out_of_any_reply(text, answer, thought):
    from harness.inference._roles import split_think

    assert split_think(text) == (answer, thought)


def test_thinking_that_spends_the_whole_budget_is_an_error_that_says_so():
    qwen3 = StubModel("qwen3:32b", 40960, thinking=True)
    with OllamaStub(models=[qwen3], default_reply="answer") as s:
        cfg = BackendConfig(kind="ollama", host=s.url, planner_model="qwen3:32b", producer_model="qwen3:32b",
                            evaluator_model="qwen3:32b", compressor_model="qwen3:32b", retries=0)
        producer = RoleLLM("producer", make_llm(cfg, "producer"))
        with pytest.raises(BackendError, match=r"held only thinking.*backend.think.producer=false"):
            producer.chat([{"role": "user", "content": "write it"}], max_tokens=5)


def test_think_takes_a_level_and_refuses_anything_else():
    qwen3 = StubModel("gpt-oss:20b", 131072, thinking=True, family="gptoss")
    with OllamaStub(models=[*MODELS, qwen3], default_reply=REPLY) as s:
        cfg = dataclasses.replace(cfg_for(s.url), producer_model="gpt-oss:20b", think={"producer": "high"})
        result = RoleLLM("producer", make_llm(cfg, "producer")).chat([{"role": "user", "content": "x"}], max_tokens=200)
        assert s.chat_requests()[-1].body["think"] == "high" and result.text == REPLY and result.thinking_tokens > 0
        with pytest.raises(ValueError, match="expected true, false, null or one of low, medium, high"):
            make_llm(dataclasses.replace(cfg, think="max"), "producer")


def test_keep_alive_is_passed_through(stub):
    make_llm(cfg_for(stub.url, keep_alive="30m"), "producer").chat([{"role": "user", "content": "x"}], max_tokens=5)
    assert stub.chat_requests()[-1].body["keep_alive"] == "30m"


@pytest.mark.parametrize("body, expected", [
    ('{"model": "qwen2.5:32b", "message": {"content": "unterminat', "JSONDecodeError: Unterminated string"),
    ('{"model": "qwen2.5:32b", "done": true}', "ValidationError: message: Field required"),
])
def test_a_reply_that_is_not_a_chat_response_is_one_line_naming_host_and_model(stub, body, expected):
    llm = make_llm(cfg_for(stub.url), "producer")
    stub.raw_next(1, body)
    with pytest.raises(BackendError) as err:
        llm.chat([{"role": "user", "content": "x"}], max_tokens=5)
    msg = str(err.value)
    assert "\n" not in msg and stub.url in msg and "'qwen2.5:32b'" in msg and expected in msg


def test_a_missing_model_is_model_missing(stub):
    llm = make_llm(dataclasses.replace(cfg_for(stub.url), producer_model="mistral:7b"), "producer")
    with pytest.raises(BackendError) as err:
        llm.chat([{"role": "user", "content": "x"}], max_tokens=5)
    assert type(err.value).__name__ == "ModelMissing" and "ollama pull mistral:7b" in str(err.value)


def test_the_openai_route_reads_the_window_the_server_exposes():
    with OllamaStub(models=MODELS, default_reply="ok", openai_max_model_len=True) as s:
        cfg = BackendConfig(kind="openai", base_url=f"{s.url}/v1", planner_model="glm4:9b",
                            producer_model="qwen2.5:32b", evaluator_model="gemma3:27b", compressor_model="glm4:9b",
                            retries=0)
        llm = make_llm(cfg, "producer")
        assert llm.window.num_ctx == 32768  # /v1/models max_model_len (vLLM)
        with pytest.raises(BackendError, match="ContextOverflow|window is 32768"):
            llm.chat(long_prompt(40000), max_tokens=10)
    with OllamaStub(models=MODELS, default_reply="ok") as s:  # Ollama's /v1: no window listed, cuts at 2048
        cfg = dataclasses.replace(cfg, base_url=f"{s.url}/v1")
        llm = make_llm(cfg, "producer")
        assert llm.window.num_ctx is None
        with pytest.raises(BackendError) as err:
            llm.chat(long_prompt(3000), max_tokens=10)
        assert s.chat_requests()[-1].truncated and "was cut" in str(err.value) and "unknown" in str(err.value)


# -- the harness, end to end, against the server ----------------------------------------------------------------

COMPOUND = ("Research Python asyncio task cancellation and structured concurrency, then synthesize a unified guide "
            "and save to guide.md")


def harness_cli(stub, tmp_path, *extra: str) -> int:
    from harness.__main__ import main

    return main([COMPOUND, "backend=ollama", f"backend.host={stub.url}", "backend.retries=0",
                 "search.provider=local", "research.enrich_urls=0", "wiggum.max_rounds=1",
                 f"results_dir={tmp_path / 'results'}", *extra])


def test_a_compound_run_sends_a_window_on_every_request_and_nothing_is_cut(stub, tmp_path, capsys):
    assert harness_cli(stub, tmp_path) == 0
    reqs = stub.chat_requests()
    assert reqs and all(r.num_ctx for r in reqs) and not any(r.truncated for r in reqs)
    assert "status:      ok" in capsys.readouterr().out


def test_a_run_whose_window_is_too_small_fails_with_the_one_line_error(stub, tmp_path, capsys):
    import json

    assert harness_cli(stub, tmp_path, "backend.num_ctx=512", "orchestrator.mode=off") == 1
    out = capsys.readouterr().out
    status = next(line for line in out.splitlines() if line.startswith("status:"))
    assert "failed (ContextOverflow:" in status and "backend.num_ctx" in status
    record = [json.loads(x) for x in (tmp_path / "results" / "runs.jsonl").read_text().splitlines()][-1]
    assert record["status"] == "failed" and record["error"].startswith("ContextOverflow")
    assert not any(r.truncated for r in stub.chat_requests())  # refused before sending, never cut


def sweep(stub, tmp_path, *extra: str):
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    cmd = [sys.executable, "-m", "experiments.run", "+sweep=synth_mutation", "backend=ollama",
           f"backend.host={stub.url}", "backend.retries=0", "search.provider=local", "research.enrich_urls=0",
           "benchmark=smoke", "sweep.allow_underpowered=true", "sweep.n_trials=2", "sweep.baseline_repeats=1",
           "sweep.operators=[add_constraint,drop_sentence,reorder]", "sweep.holdout_top_k=1", "wiggum.max_rounds=1",
           f"results_dir={tmp_path / 'results'}", *extra]
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("HARNESS_DEBUG", None)
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


def test_a_two_trial_sweep_sends_a_window_on_every_request_and_nothing_is_cut(stub, tmp_path):
    p = sweep(stub, tmp_path)
    reqs = stub.chat_requests(include_checks=True)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "== readiness: ollama at " in p.stdout and "READY" in p.stdout  # checked before the study
    assert len(reqs) > 20 and all(r.num_ctx for r in reqs) and not any(r.truncated for r in reqs)
    assert set(stub.loads.values()) == {1}  # each model loaded once: no reload per request


def test_a_sweep_whose_window_is_too_small_stops_with_one_line(stub, tmp_path):
    p = sweep(stub, tmp_path, "backend.num_ctx=1024")
    errors = [x for x in p.stderr.splitlines() if x.startswith("error:")]
    assert p.returncode == 3 and len(errors) == 1  # issue 41: the run had started (parent FAILED), exit 3
    assert "ContextOverflow" in errors[0] and "backend.num_ctx" in errors[0] and "1024" in errors[0]
    assert not any(r.truncated for r in stub.chat_requests(include_checks=True))
    assert "context for task" in errors[0] and "not prepared" in errors[0]  # stopped at the first context


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
