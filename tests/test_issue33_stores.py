"""Issue 33, items 5 and 6: stores that lie.

5. A response-cache entry that does not read back (bad JSON, wrong keys, empty text) is a miss: the model is asked
   again and the entry overwritten; a sweep on a cache whose every entry was rewritten gives the clean sweep's values.
6. A store file SQLite cannot read ("database disk image is malformed") raises StoreError naming the file, and the
   real sweep command stops with that one line and exit 1 instead of counting a failed candidate and exiting 0.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from ollama_stub import OllamaStub
from store_damage import garble_pages

from harness.inference import ChatResult, ResponseCache
from harness.inference._cache import CachedLLM, cache_key
from harness.inference._fake import FakeLLM
from harness.stores import StoreError

ROOT = Path(__file__).resolve().parents[1]
REPLY = ("1. **json**: parse JSON text with json.loads and write it with json.dumps.\n"
         "2. **csv**: read rows with csv.reader and always open files with encoding='utf-8'.\n"
         "3. **logging**: set the level with logging.basicConfig(level=logging.INFO) per thread.")
# what the campaign wrote over cache rows: not JSON, an object with the wrong keys, a reply with no text
ROTTEN = ["{not json", json.dumps({"txt": "hello", "tokens": 3}),
          json.dumps({"text": "  ", "prompt_tokens": 1, "completion_tokens": 0, "latency_s": 0.1, "model": "m",
                      "backend": "fake"}),
          json.dumps(["a", "list"]),
          json.dumps({"text": "ok", "prompt_tokens": "3", "completion_tokens": 1, "latency_s": 0.1, "model": "m",
                      "backend": "fake"})]


def rot_every_row(path: Path) -> int:
    """Rewrite every cached reply with one of ROTTEN, in turn; returns the rows rewritten."""
    with sqlite3.connect(path) as conn:
        keys = [r[0] for r in conn.execute("SELECT key FROM replies ORDER BY key")]
        for i, key in enumerate(keys):
            conn.execute("UPDATE replies SET result=? WHERE key=?", (ROTTEN[i % len(ROTTEN)], key))
    return len(keys)


# -- item 5: an entry that does not read back is a miss ----------------------------------------------------------


def test_rotten_entries_are_misses_asked_again_and_overwritten(tmp_path, caplog):
    cache = ResponseCache(tmp_path / "llm_cache.sqlite")
    inner = FakeLLM(keyed={"": lambda messages: "fresh " + messages[-1]["content"]})
    llm = CachedLLM(inner, cache)
    prompts = [f"question {i}" for i in range(len(ROTTEN))]
    first = [llm.chat([{"role": "user", "content": p}]).text for p in prompts]
    assert len(inner.calls) == len(ROTTEN) and rot_every_row(cache.path) == len(ROTTEN)
    again = [llm.chat([{"role": "user", "content": p}]) for p in prompts]
    assert [r.text for r in again] == first and not any(r.cached for r in again)  # asked again, not an error
    assert len(inner.calls) == 2 * len(ROTTEN)
    assert caplog.text.count("does not read back") == len(ROTTEN) and str(cache.path) in caplog.text
    third = [llm.chat([{"role": "user", "content": p}]) for p in prompts]  # overwritten: now hits
    assert [r.text for r in third] == first and all(r.cached for r in third) and len(inner.calls) == 2 * len(ROTTEN)


def test_rows_written_before_optional_fields_existed_still_read_back(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    old_row = {"text": "hi", "prompt_tokens": 1, "completion_tokens": 1, "latency_s": 0.2, "model": "m", "backend": "b"}
    with sqlite3.connect(cache.path) as conn:
        conn.execute("INSERT INTO replies VALUES (?, ?, 0)", ("k", json.dumps(old_row)))
    hit = cache.get("k")
    assert hit == ChatResult("hi", 1, 1, 0.0, "m", "b", cached=True)


def _sweep_exp(results: Path, corpus: str):
    from experiments.config import BenchmarkConfig, compose_config, to_experiment
    from experiments.config._schema import TaskSpec

    exp = to_experiment(compose_config([
        "+sweep=synth_mutation", "backend=fake", "evaluator=deterministic_only", "planner=single_pass",
        "wiggum.max_rounds=1", "research.max_rounds=1", "research.compress=false", "research.enrich_urls=0",
        "search.provider=local", f"search.local_corpus=[{corpus}]", "sweep.n_trials=3", "sweep.baseline_repeats=1",
        "sweep.operators=[add_constraint,drop_sentence]", "sweep.holdout_top_k=1", "sweep.allow_underpowered=true",
        f"results_dir={results}"]))
    exp.benchmark = BenchmarkConfig(name="tiny", tasks=[
        TaskSpec(id="fmt", task="List 3 Python modules for data formats.", task_type="enumerated", expected_count=3,
                 split="train"),
        TaskSpec(id="log", task="List 3 Python logging practices.", task_type="enumerated", expected_count=3,
                 split="train"),
        TaskSpec(id="hold", task="List 3 Python testing tools.", task_type="enumerated", expected_count=3,
                 split="holdout")])
    exp.mlflow.enabled = False
    return exp


def _trial_values(results: Path, corpus: str, cache: ResponseCache, monkeypatch) -> tuple[list, FakeLLM]:
    from experiments.config import to_harness_config
    from experiments.runs import HarnessRunner
    from experiments.sweep import run_sweep
    from harness.inference._roles import fake_roles

    monkeypatch.setenv("HARNESS_RESULTS_DIR", str(results))  # the environment wins over results_dir
    exp = _sweep_exp(results, corpus)
    assert exp.storage_url.endswith(f"{results}/optuna.db")
    fake = FakeLLM(keyed={"": lambda messages: REPLY})
    run_sweep(exp, HarnessRunner(to_harness_config(exp), fake_roles(fake, cache)), out=lambda s: None)
    import optuna

    study = optuna.load_study(study_name=exp.sweep.name, storage=exp.storage_url)
    return [(t.number, t.state.name, t.value) for t in study.get_trials(deepcopy=False)], fake


def test_a_sweep_on_a_rotten_cache_gives_the_clean_values(tmp_path, monkeypatch):
    """Issue 33 item 5: every cache row rewritten; before the fix a rotten row raised inside the stage that read it
    (a planner fallback, a failed run), so trial values moved or trials failed, with exit 0."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "formats.md").write_text("# Data formats\nThe json module parses JSON; csv reads rows.\n")
    clean, fake_a = _trial_values(tmp_path / "a", str(corpus), ResponseCache(tmp_path / "a" / "llm_cache.sqlite"),
                                    monkeypatch)
    assert clean and all(state == "COMPLETE" for _, state, _ in clean), clean
    with sqlite3.connect(tmp_path / "a" / "llm_cache.sqlite") as src, sqlite3.connect(tmp_path / "rotten.sqlite") as dst:
        src.backup(dst)  # the WAL's rows included
    rotten_rows = rot_every_row(tmp_path / "rotten.sqlite")
    rotten, fake_b = _trial_values(tmp_path / "b", str(corpus), ResponseCache(tmp_path / "rotten.sqlite"),
                                     monkeypatch)
    assert rotten == clean
    assert rotten_rows > 0 and len(fake_b.calls) == len(fake_a.calls)  # every rotten entry was asked again
    print(f"FIGURES rotten_cache: rows_rewritten={rotten_rows} trials={clean} model_calls={len(fake_b.calls)}")


# -- item 6: a store SQLite cannot read stops the run, naming the file ---------------------------------------------


def test_garbled_cache_pages_raise_store_error_naming_the_file(tmp_path):
    cache = ResponseCache(tmp_path / "llm_cache.sqlite")
    for i in range(300):
        cache.put(f"k{i}", ChatResult("reply " * 40, 1, 1, 0.1, "m", "fake"))
    garble_pages(cache.path)
    with pytest.raises(StoreError) as info:  # a new process: no connection, no page cached from before the damage
        ResponseCache(cache.path).get("k150")
    text = str(info.value)
    assert str(cache.path) in text and "malformed" in text and "\n" not in text
    assert not isinstance(info.value, Exception)  # passes the handlers that turn a failed run into data


def test_a_file_that_is_not_a_database_raises_store_error_for_memory_too(tmp_path):
    from harness.config import MemoryConfig
    from harness.memory import Memory

    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.sqlite").write_bytes(b"this is not a database " * 300)
    with pytest.raises(StoreError, match=r"memory\.sqlite cannot be used: file is not a database"):
        Memory(MemoryConfig(), root=tmp_path)


def test_sql_errors_of_the_caller_are_not_store_errors(tmp_path):
    from harness.stores._sqlite import connect

    conn = connect(tmp_path / "x.sqlite")
    with pytest.raises(sqlite3.OperationalError, match="syntax error"):
        conn.execute("SELEC 1")


def _sweep_cmd(host: str, corpus: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "experiments.run", "+sweep=synth_mutation", "backend=ollama", f"backend.host={host}",
            "backend.retries=1", "backend.backoff_s=0.05", "backend.timeout_s=20", "evaluator=deterministic_only",
            "planner=single_pass", "wiggum.max_rounds=1", "research.max_rounds=1", "research.compress=false",
            "research.enrich_urls=0", "search.provider=local", f"search.local_corpus=[{corpus}]",
            "sweep.operators=[add_constraint,drop_sentence,reorder]", "sweep.holdout_top_k=1", "benchmark=smoke",
            "sweep.allow_underpowered=true", "sweep.baseline_repeats=1", "mlflow.enabled=false",
            "backend.planner_model=glm4:9b", "backend.compressor_model=glm4:9b", "backend.producer_model=qwen2.5:32b",
            "backend.evaluator_model=qwen2.5:32b", *extra]


def test_garbled_llm_cache_stops_the_sweep_with_one_line_naming_the_file(_isolated_results, tmp_path):
    """Before: the trial that read the garbled page failed ("database disk image is malformed"), was counted as a
    failed candidate, and the sweep exited 0. After: exit 1, one line naming the file, no trial recorded FAIL for it."""
    import optuna

    results = _isolated_results
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "formats.md").write_text("# Data formats\nThe json module parses JSON; csv reads rows.\n")
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    env.pop("HARNESS_DEBUG", None)
    with OllamaStub(models=["glm4:9b", "qwen2.5:32b"], default_reply=REPLY) as stub:
        first = subprocess.run(_sweep_cmd(stub.url, str(corpus), "sweep.n_trials=1"), env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=300)
        assert first.returncode == 0, first.stderr[-3000:]
        cache = results / "llm_cache.sqlite"
        garble_pages(cache)
        second = subprocess.run(_sweep_cmd(stub.url, str(corpus), "sweep.n_trials=3"), env=env, cwd=tmp_path,
                                capture_output=True, text=True, timeout=300)
    errors = [ln for ln in second.stderr.splitlines() if ln.startswith("error")]
    assert second.returncode == 1, second.stderr[-3000:]
    assert len(errors) == 1 and errors == [second.stderr.strip().splitlines()[-1]], second.stderr[-3000:]
    assert f"store {cache} cannot be used: database disk image is malformed" in errors[0]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="synth_mutation", storage=f"sqlite:///{results / 'optuna.db'}")
    failed = [t for t in study.get_trials(deepcopy=False) if t.state.name == "FAIL"]
    assert failed == []  # nothing counted as a failed candidate
    print(f"FIGURES garbled_cache: exit={second.returncode} line={errors[0][:160]!r}")


# -- the context cache: a file that does not read back is prepared again --------------------------------------------


@pytest.mark.parametrize("rotten", ["{not json", json.dumps({"task_id": "a"}), json.dumps([1, 2]),
                                    json.dumps({"task": "another task", "prepared": {"x": 1}}),
                                    json.dumps({"task": "List 3 modules", "prepared": {"wrong": "shape"}})])
def test_a_rotten_context_file_is_prepared_again_and_overwritten(tmp_path, rotten):
    from experiments.config import Task
    from experiments.storage import ContextCache

    def load(d):
        return {"plan": d["plan"]}  # a loader that refuses a shape it does not know (KeyError)

    cache = ContextCache(tmp_path, {"model": "m"}, load=load)
    task = Task(id="a", task="List 3 modules")
    calls = []

    def prepare(text):
        calls.append(text)
        return {"plan": f"plan for {text}"}

    assert cache.get_or_prepare(task, prepare).prepared == {"plan": "plan for List 3 modules"}
    cache.path_for(task).write_text(rotten)
    got = cache.get_or_prepare(task, prepare)
    assert got.hit is False and got.prepared == {"plan": "plan for List 3 modules"} and len(calls) == 2
    again = cache.get_or_prepare(task, prepare)
    assert again.hit is True and len(calls) == 2  # the rotten file was overwritten
