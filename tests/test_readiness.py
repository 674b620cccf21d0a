"""`python -m harness --check` against tests/ollama_stub.py (issue 32 item 5), the shipped Ollama config's judge and
the warning about the backend actually resolved, the offline search fallback decided once (item 6)."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from harness.config import BackendConfig
from ollama_stub import OllamaStub, StubModel, schema_reply

GiB = 2**30
MODELS = [StubModel("glm4:9b", 131072, family="glm4", size=6 * GiB),
          StubModel("qwen2.5:32b", 32768, family="qwen2", size=20 * GiB),
          StubModel("gemma3:27b", 131072, family="gemma3", size=17 * GiB)]


def check_cli(stub, tmp_path, *extra: str) -> int:
    from harness.__main__ import main

    return main(["--check", "backend=ollama", f"backend.host={stub.url}", "backend.retries=0",
                 f"results_dir={tmp_path / 'fresh'}", *extra])


def test_check_prints_each_role_and_writes_nothing(tmp_path, capsys):
    with OllamaStub(models=MODELS, default_reply=schema_reply("ready")) as stub:
        assert check_cli(stub, tmp_path) == 0
        calls = stub.chat_requests(include_checks=True)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("== readiness: ollama at ") and lines[-1] == "READY"
    for role, model, window in (("planner", "glm4:9b", 4096), ("producer", "qwen2.5:32b", 9216),
                                ("evaluator", "gemma3:27b", 5120), ("compressor", "glm4:9b", 4096)):
        line = next(x for x in lines if x.startswith(role))
        assert f"ollama:{model}  present" in line and f"window {window}" in line and "call " in line
        assert "digest " in line and "context " in line and "thinking no" in line
    assert "judge vs producer: gemma3:27b (gemma3) vs qwen2.5:32b (qwen2): different families" in out
    assert len(calls) == 4 and all(r.num_ctx for r in calls)  # one timed call per role, each with its window
    assert not (tmp_path / "fresh").exists()  # no results folder, no cache


def test_check_refuses_when_a_roles_model_is_missing(tmp_path, capsys):
    with OllamaStub(models=MODELS[:2], default_reply=schema_reply("ready")) as stub:  # no gemma3:27b
        assert check_cli(stub, tmp_path) == 2
    captured = capsys.readouterr()
    problems = captured.err.strip().splitlines()
    assert problems == [f"problem: evaluator: Ollama at {stub.url} does not have gemma3:27b; run `ollama pull "
                        f"gemma3:27b` or set backend.evaluator_model"]
    assert "evaluator  ollama:gemma3:27b  MISSING" in captured.out and "NOT READY: 1 problem(s)" in captured.out
    assert not (tmp_path / "fresh").exists()


def test_check_refuses_a_server_that_is_down_in_one_line(tmp_path, capsys):
    from ollama_stub import free_port
    from harness.__main__ import main

    port = free_port()
    assert main(["--check", "backend=ollama", f"backend.host=http://127.0.0.1:{port}",
                 f"results_dir={tmp_path / 'fresh'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"problem: Ollama is not reachable at http://127.0.0.1:{port}")


def test_check_warns_when_the_models_cannot_stay_loaded_together(tmp_path, capsys):
    squeezed = [*MODELS[:2], StubModel("gemma3:27b", 131072, family="gemma3", size=17 * GiB, size_vram=12 * GiB)]
    with OllamaStub(models=squeezed, default_reply=schema_reply("ready"), memory=40 * GiB) as stub:
        assert check_cli(stub, tmp_path, "backend.keep_alive=30m") == 0  # a warning, not a problem
        assert all(r.body.get("keep_alive") == "30m" for r in stub.chat_requests(include_checks=True))
    out = capsys.readouterr().out
    assert "WARNING: the roles' models cannot stay loaded together: qwen2.5:32b was unloaded" in out
    assert "WARNING: gemma3:27b runs 29% on the CPU" in out and "keep_alive: 30m" in out


def test_check_reports_thinking_models_and_a_judge_of_the_producers_family(tmp_path, capsys):
    models = [*MODELS, StubModel("qwen3:32b", 40960, thinking=True, family="qwen3")]
    with OllamaStub(models=models, default_reply=schema_reply("ready")) as stub:
        assert check_cli(stub, tmp_path, "backend.producer_model=qwen3:32b", "backend.evaluator_model=qwen2.5:32b") == 0
    out = capsys.readouterr().out
    producer = next(x for x in out.splitlines() if x.startswith("producer"))
    assert "thinking yes model default" in producer and "(thinking " in producer


def test_require_ready_raises_one_line_before_an_experiment(tmp_path):
    from harness.inference import BackendError
    from harness.backends.readiness import require_ready

    printed: list[str] = []
    with OllamaStub(models=MODELS[:2]) as stub:
        cfg = BackendConfig(kind="ollama", host=stub.url, planner_model="glm4:9b", producer_model="qwen2.5:32b",
                            evaluator_model="gemma3:27b", compressor_model="glm4:9b", retries=0)
        with pytest.raises(BackendError) as err:
            require_ready(cfg, out=printed.append)
    assert "\n" not in str(err.value) and "does not have gemma3:27b" in str(err.value)
    assert printed[-1] == "NOT READY: 1 problem(s)"


# -- item 6: the shipped config and the warning about what actually runs --------------------------------------


def test_the_shipped_ollama_config_does_not_warn_about_itself(caplog):
    from harness.compose import _checks as validation
    from experiments.config import compose_config, to_experiment, validate

    validation._WARNED.clear()
    caplog.set_level(logging.WARNING, logger="experiments.config")
    exp = validate(to_experiment(compose_config(["backend=ollama"])))
    assert [r.getMessage() for r in caplog.records if r.name == "experiments.config"] == []
    assert validation.model_family(exp.backend.producer_model) != validation.model_family(exp.backend.evaluator_model)


def test_the_warning_speaks_of_the_backend_actually_resolved(monkeypatch):
    from harness.compose import _checks as validation
    from harness.backends import auto

    auto.reset()
    monkeypatch.delenv("HARNESS_BACKEND", raising=False)
    monkeypatch.setattr(auto, "probe_ollama", lambda host, timeout: auto.Probe(host, False, frozenset(), "refused"))
    same = BackendConfig(kind="auto", producer_model="qwen2.5:32b", evaluator_model="qwen2.5:32b")
    warnings = validation.judge_warnings(same)
    auto.reset()
    assert len(warnings) == 1 and "embedded" in warnings[0] and "fell back" in warnings[0]
    assert "qwen2.5:32b" not in warnings[0]
    family = BackendConfig(kind="ollama", producer_model="qwen2.5:32b", evaluator_model="qwen2.5:72b")
    assert "from the producer's family (qwen," in validation.judge_warnings(family)[0]


def test_offline_the_search_fallback_is_decided_once_per_process(caplog):
    from harness.research import search
    from harness.research.search._fallback import FallbackSearch, reset_degradation

    reset_degradation()
    calls = []
    start = threading.Barrier(6)

    class Offline:
        name = "ddgs"

        def search(self, query, max_results=5):
            calls.append(query)
            time.sleep(0.2)  # a DNS failure takes a while: the other contexts' first calls arrive meanwhile
            raise search.SearchUnavailable("ddgs: DNSError: no records found")

    class Local:
        name = "local"

        def search(self, query, max_results=5):
            return [search.SearchResult("t", "u", "s", "local")]

    caplog.set_level(logging.WARNING, logger="harness.search")

    def one(i):
        start.wait()
        FallbackSearch(Offline(), Local()).search(f"query {i}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    reset_degradation()
    lines = [r.getMessage() for r in caplog.records if r.name == "harness.search"]
    assert len(calls) == 1 and len(lines) == 1 and "for the rest of this process" in lines[0]


def test_a_sweep_on_ollama_is_refused_before_its_study_when_the_check_finds_a_problem(tmp_path):
    from experiments.config import compose_config
    from experiments.run import run_experiment
    from harness.backends.readiness import NotReady

    printed: list[str] = []
    with OllamaStub(models=MODELS, default_reply=schema_reply("ready")) as stub:
        cfg = compose_config(["+sweep=synth_mutation", "backend=ollama", f"backend.host={stub.url}",
                              "backend.retries=0", "backend.think=true", "benchmark=smoke",
                              "sweep.allow_underpowered=true", f"results_dir={tmp_path / 'sweep'}"])
        with pytest.raises(NotReady, match="backend.think is true but glm4:9b cannot think"):
            run_experiment(cfg, out=printed.append)
    assert printed[0].startswith("== readiness: ollama at ") and printed[-1].startswith("NOT READY")
    assert not (tmp_path / "sweep").exists()  # no study, no MLflow store
