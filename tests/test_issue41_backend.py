"""Issue 41 items 1, 2, 3 and 17: a failing Ollama, through the command line where the user meets it.

The sweep, A/B and `python -m harness` run in a subprocess (or through harness.__main__.main) against
tests/ollama_stub.py given the fault (`fault_chats`): the real Ollama client, stores and MLflow. Before (3306971): a
sweep whose every trial failed printed `PROMOTED: baseline` and exited 0, the A/B exited 0 with 16 of 20 cells
failed, contexts prepared while the model failed were cached and reused, a failure in the baseline repeat exited 1
with no resume hint and left the MLflow parent RUNNING, a 5 MB task was advised a window 100 times the model's
trained context, an `error` in a 200 reply was shown as `message: Field required`, a reply from another model was
recorded as the asked one, and a non-UTF-8 task failed after the stores were written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from ollama_stub import OllamaStub, StubModel, schema_reply

import experiments

ROOT = Path(experiments.__file__).resolve().parents[1]  # the tree under test (its commands run from it)
MODELS = ["glm4:9b", "qwen2.5:32b", "gemma3:27b"]
REPLY = ("1. **json**: parse JSON text with json.loads and write it with json.dumps.\n"
         "2. **csv**: read rows with csv.reader and always open files with encoding='utf-8'.\n"
         "3. **logging**: set the level with logging.basicConfig(level=logging.INFO) per thread.")
PREPARE_CALLS, TRIAL_CALLS = 5, 3  # smoke benchmark: one planner call per context, one synthesis call per train task
RESUME = "run the same command again"


def stub(**kw) -> OllamaStub:
    """JSON for the planner's schema (its plan has queries and subtasks: a context prepared under a failure differs
    from a clean one), REPLY for the rest."""
    return OllamaStub(models=kw.pop("models", MODELS), default_reply=schema_reply(REPLY), **kw)


def sweep_args(host: str, *extra: str) -> list[str]:
    return ["-m", "experiments.run", "+sweep=synth_mutation", "backend=ollama", f"backend.host={host}",
            "backend.retries=2", "backend.backoff_s=0.05", "backend.timeout_s=20", "backend.concurrency=1",
            "evaluator=deterministic_only", "planner=single_pass", "wiggum.max_rounds=1", "research.max_rounds=1",
            "research.compress=false", "research.enrich_urls=0", "search.provider=local",
            "sweep.operators=[add_constraint,drop_sentence,reorder]", "sweep.holdout_top_k=1", "benchmark=smoke",
            "sweep.allow_underpowered=true", "sweep.n_trials=3", *extra]


def run_cli(folder: Path, args: list[str]) -> subprocess.CompletedProcess:
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "formats.md").write_text("# Data formats\nThe json module parses JSON; csv reads rows; pickle stores "
                                       "objects. Open text files with encoding='utf-8'.\n", encoding="utf-8")
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), HARNESS_RESULTS_DIR=str(folder / "results"),
               MLFLOW_TRACKING_URI=f"sqlite:///{folder / 'mlflow.db'}", DDGS_DISABLED="1")
    env.pop("HARNESS_DEBUG", None)
    args = [*args, f"search.local_corpus=[{corpus}]"] if args[:2] == ["-m", "experiments.run"] else args
    return subprocess.run([sys.executable, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def error_lines(p: subprocess.CompletedProcess) -> list[str]:
    return [x for x in p.stderr.splitlines() if x.startswith("error:")]


def grab(p: subprocess.CompletedProcess, prefix: str) -> str:
    return next((x for x in p.stdout.splitlines() if x.startswith(prefix)), "")


def parent_status(folder: Path) -> list[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
    return [r.info.status for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
            if r.data.tags.get("sweep_parent") == "true"]


def contexts(folder: Path) -> int:
    return len(list((folder / "results" / "synth_mutation" / "context").glob("*.json")))


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A clean run of the sweep: what a recovered run must score."""
    folder = tmp_path_factory.mktemp("clean")
    with stub() as s:
        p = run_cli(folder, sweep_args(s.url))
    assert p.returncode == 0, p.stderr[-2000:]
    p.folder = folder
    return p


# -- 1: a sweep or A/B whose model fails exits 3 with one line and the resume hint ----------------------------------


@pytest.mark.parametrize("kind, said", [("status", "llama runner process has terminated"),
                                        ("error200", "an error was encountered while running the model")])
def test_a_sweep_whose_every_trial_failed_exits_3_with_one_line(tmp_path, kind, said):
    with stub() as s:
        s.fault_chats(kind, after=PREPARE_CALLS)  # the contexts are prepared, then every model call fails
        p = run_cli(tmp_path, sweep_args(s.url))
    errors = error_lines(p)
    # before: all 3 trials FAIL, `PROMOTED: baseline`, exit 0 (the failure rate was checked after n_trials)
    assert p.returncode == 3, p.stderr[-2000:]
    assert len(errors) == 1 and RESUME in errors[0] and "baseline trial #0 failed" in errors[0], errors
    assert said in errors[0]  # Ollama's own text, also from an `error` field in a 200 (was `message: Field required`)
    assert "NOT CONCLUDED" in p.stdout and parent_status(tmp_path) == ["FAILED"]


def test_an_ab_whose_cells_failed_exits_3(tmp_path):
    with stub() as s:
        s.fault_chats("status", after=6)
        p = run_cli(tmp_path, ["-m", "experiments.run", "+sweep=prior_knowledge_ab", "backend=ollama",
                               f"backend.host={s.url}", "backend.retries=1", "backend.backoff_s=0.05",
                               "backend.concurrency=1", "evaluator=deterministic_only", "wiggum.max_rounds=1",
                               "research.max_rounds=1", "research.compress=false", "research.enrich_urls=0",
                               "search.provider=local", "benchmark=smoke", "ab.allow_underpowered=true",
                               "ab.replications=2"])
    errors = error_lines(p)
    assert p.returncode == 3, p.stderr[-2000:]  # before: exit 0 with 16 of 20 cells failed
    assert len(errors) == 1 and "A/B test did not conclude" in errors[0] and RESUME in errors[0], errors
    assert re.search(r"\d+ of 20 cells failed because a model call failed", errors[0])


# -- 2: nothing prepared under a failing model is cached; the recovered run scores exactly as a clean run -----------


def test_contexts_prepared_while_the_model_failed_are_not_cached_and_the_rerun_scores_as_a_clean_run(tmp_path, clean):
    with stub() as s:
        s.fault_chats("status")  # HTTP 500 to every chat after the readiness calls
        first = run_cli(tmp_path, sweep_args(s.url))
        cached = contexts(tmp_path)
        s.clear_faults()
        again = run_cli(tmp_path, sweep_args(s.url))  # the same command, the server healthy
    assert first.returncode == 3 and cached == 0, (first.returncode, cached)  # before: exit 0, 5 contexts cached
    assert "not prepared" in error_lines(first)[0] and RESUME in error_lines(first)[0]
    assert again.returncode == 0, again.stderr[-2000:]
    assert "contexts 0 reused, 5 computed" in again.stdout  # before: 5 reused (plans of planner defaults)
    assert grab(again, "baseline train mean:") == grab(clean, "baseline train mean:")  # before: 8.797 vs 9.444
    assert grab(again, "trials:").startswith("trials: 3 total (3 complete")


def test_a_context_cached_while_the_model_failed_is_prepared_again(tmp_path, clean):
    """Contexts an earlier version cached from a planner that failed (its plan: the defaults, the failure in its
    errors) read back as misses: prepared again, and the run scores as a clean one."""
    import json

    with stub() as s:
        first = run_cli(tmp_path, sweep_args(s.url, "sweep.n_trials=1"))  # the contexts, under this folder's key
        assert first.returncode == 0, first.stderr[-2000:]
        for f in (tmp_path / "results" / "synth_mutation" / "context").glob("*.json"):
            record = json.loads(f.read_text(encoding="utf-8"))
            record["prepared"]["plan"].update(
                search_queries=[], subtasks=[], known_facts=[], gaps=[], parser="defaults",
                errors=["plan call failed: BackendError: Ollama at http://127.0.0.1:9 refused a chat for model "
                        "'glm4:9b': llama runner process has terminated: exit status 2 (status code: 500)"])
            f.write_text(json.dumps(record), encoding="utf-8")
        for store in (tmp_path / "results" / "optuna.db", tmp_path / "mlflow.db"):  # a new study on those files
            store.unlink()
        p = run_cli(tmp_path, sweep_args(s.url))
    assert p.returncode == 0, p.stderr[-2000:]
    assert "contexts 0 reused, 5 computed" in p.stdout  # before: 5 reused
    assert grab(p, "baseline train mean:") == grab(clean, "baseline train mean:")


def test_a_context_whose_model_call_timed_out_is_not_cached(tmp_path):
    with stub() as s:
        s.fault_chats("slow", after=2, count=1, delay_s=4.0)  # the third context's planner call
        p = run_cli(tmp_path, sweep_args(s.url, "backend.timeout_s=2"))
    assert p.returncode == 3 and contexts(tmp_path) == 2, (p.returncode, contexts(tmp_path))  # before: 5, exit 0
    (line,) = error_lines(p)
    assert "did not answer within 2s" in line and "not prepared" in line and RESUME in line


def test_trials_a_model_call_failed_run_again_with_the_same_command(tmp_path, clean):
    with stub() as s:
        s.fault_chats("status", after=PREPARE_CALLS)
        first = run_cli(tmp_path, sweep_args(s.url))
        s.clear_faults()
        again = run_cli(tmp_path, sweep_args(s.url))
    assert first.returncode == 3
    # before: n_trials was reached by 3 failed trials, so the rerun ran nothing and had no baseline
    assert again.returncode == 0, again.stderr[-2000:]
    assert "3 trial(s) failed because a model call failed, queued again" in again.stdout
    assert grab(again, "trials:").startswith("trials: 3 total (3 complete")
    assert grab(again, "baseline train mean:") == grab(clean, "baseline train mean:")
    assert parent_status(tmp_path) == ["FINISHED"]


# -- 3: every failure path: a named error, the resume hint, exit 3, the parent FAILED -------------------------------


def test_a_failure_in_the_baseline_repeat_exits_3_and_fails_the_parent(tmp_path):
    with stub() as s:
        s.fault_chats("status", after=PREPARE_CALLS + TRIAL_CALLS)  # the baseline trial runs, its repeat fails
        p = run_cli(tmp_path, sweep_args(s.url, "sweep.baseline_repeats=2"))
    errors = error_lines(p)
    assert p.returncode == 3, p.stderr[-2000:]  # before: `error: TrialFailed: ...`, exit 1, parent RUNNING
    assert len(errors) == 1 and "TrialFailed" in errors[0] and "status code: 500" in errors[0], errors
    assert RESUME in errors[0] and parent_status(tmp_path) == ["FAILED"]


def test_a_task_too_long_for_the_model_is_said_so_never_advised_past_its_trained_context(tmp_path):
    import yaml

    bench = tmp_path / "cfg" / "benchmark"
    bench.mkdir(parents=True)
    big = "List the json problems in this log. " + "INFO heartbeat ok nothing here " * 170000  # 5.4 MB
    yaml.safe_dump({"name": "huge", "tasks": [
        {"id": "huge", "task": big, "task_type": "research", "split": "train"},
        {"id": "tools", "task": "List 3 Python tools.", "task_type": "enumerated", "expected_count": 3, "split": "train"},
        {"id": "tests", "task": "Name 3 pytest plugins and what each adds.", "task_type": "enumerated",
         "expected_count": 3,
         "split": "holdout"}]}, open(bench / "huge.yaml", "w", encoding="utf-8"))
    with stub() as s:  # every model's trained context: 32768
        p = run_cli(tmp_path, sweep_args(s.url, f"hydra.searchpath=[file://{tmp_path / 'cfg'}]", "benchmark=huge"))
    errors = error_lines(p)
    assert p.returncode == 3 and len(errors) == 1, p.stderr[-2000:]
    line = errors[0]
    # before: `BackendUnavailable: ... ContextOverflow ... backend.num_ctx.planner=3468288`, exit 1, parent RUNNING
    assert line.startswith("error: ContextOverflow:") and "trained context of 32768" in line and "too long" in line
    assert all(int(n) <= 32768 for n in re.findall(r"num_ctx\.\w+=(\d+)", line)) and RESUME in line
    assert parent_status(tmp_path) == ["FAILED"]


def test_advice_stops_at_the_trained_context():
    """A prompt that fits the trained context but not the window: the advice is the trained context at most."""
    from harness.backends.ollama_backend import OllamaLLM
    from harness.inference import ContextOverflow

    with OllamaStub(models=[StubModel("small:1b", 8192)]) as s:
        llm = OllamaLLM("small:1b", s.url, retries=0, role="planner", num_ctx=4096, trained_ctx=8192)
        with pytest.raises(ContextOverflow) as err:
            llm.chat([{"role": "user", "content": "word " * 3000}], max_tokens=100)
    advised = [int(n) for n in re.findall(r"num_ctx\.planner=(\d+)", str(err.value))]
    assert advised == [8192], str(err.value)


# -- 17: Ollama's words reach the user; a reply from another model is refused; a non-UTF-8 task is refused ----------


def harness_main(host: str, results: Path, capsys) -> tuple[int, str]:
    from harness.__main__ import main

    code = main(["--backend", "ollama", "--host", host, "--results-dir", str(results),
                 "List 3 Python modules for data formats."])
    got = capsys.readouterr()
    return code, got.out + got.err


def test_ollama_error_text_in_a_200_reaches_the_user(tmp_path, capsys):
    text = "an error was encountered while running the model: CUDA error: out of memory"
    with stub() as s:
        s.fault_chats("error200", error=text)
        code, shown = harness_main(s.url, tmp_path / "res", capsys)
    assert code == 1 and text in shown, shown[-1500:]  # before: `ValidationError: message: Field required`


def test_a_reply_from_another_model_is_refused_naming_both(tmp_path, capsys):
    with stub() as s:
        s.fault_chats("model", model="llama3:8b")
        code, shown = harness_main(s.url, tmp_path / "res", capsys)
    (status,) = [x for x in shown.splitlines() if x.startswith("status:")]
    # before: status ok, the reply recorded as qwen2.5:32b's
    assert code == 1 and "failed" in status and "llama3:8b" in status and "'qwen2.5:32b'" in status, status


def test_a_non_utf8_task_is_refused_before_anything_is_written(tmp_path):
    task = b"List 3 Python tools for \xff data".decode("utf-8", "surrogateescape")
    with stub() as s:
        p = run_cli(tmp_path, ["-m", "harness", "--backend", "ollama", "--host", s.url, "--results-dir",
                               str(tmp_path / "res"), task])
        chats = s.chat_requests(include_checks=True)
    # before: UnicodeEncodeError after the stores were written, no run recorded
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "error: the task is not UTF-8 text (byte 0xff at character 25); give it in UTF-8 (nothing was run or written)"]
    assert not (tmp_path / "res").exists() and chats == []


# -- held: retried faults leave a clean run's values ---------------------------------------------------------------


def test_intermittent_503_and_dropped_connections_are_retried_to_a_clean_runs_values(tmp_path, clean):
    with stub() as s:
        busy = s.fault_chats("status", status=503, after=1, every=4)
        dropped = s.fault_chats("drop", after=2, every=5)
        p = run_cli(tmp_path, sweep_args(s.url))
    assert p.returncode == 0, p.stderr[-2000:]
    assert busy.hits >= 3 and dropped.hits >= 3
    assert grab(p, "baseline train mean:") == grab(clean, "baseline train mean:")
    assert grab(p, "trials:") == grab(clean, "trials:")


@pytest.mark.parametrize("kind, status, expect", [
    ("status", 500, "BackendError: Ollama at {url} refused a chat for model 'glm4:9b': llama runner process has "
                    "terminated: exit status 2 (status code: 500)"),
    ("status", 429, "BackendUnavailable: Ollama at {url} kept answering HTTP 429 for model 'glm4:9b' after 1 "
                    "retries: too many requests"),
    ("empty", 0, "BackendError: Ollama at {url} answered a chat for model 'glm4:9b' with HTTP 200 and an empty body"),
    ("error200", 0, "BackendError: Ollama at {url} answered a chat for model 'glm4:9b' with an error: an error was "
                    "encountered while running the model: unexpected EOF"),
    ("cut", 0, "BackendUnavailable: Ollama is not reachable at {url} (model 'glm4:9b') after 1 retries: "
               "RemoteProtocolError: peer closed connection without sending complete message body"),
])
def test_each_fault_of_the_stand_in_is_one_line_naming_host_and_model(kind, status, expect):
    from harness.backends.ollama_backend import OllamaLLM

    with OllamaStub(models=["glm4:9b"]) as s:
        fault = s.fault_chats(kind, status=status)
        llm = OllamaLLM("glm4:9b", s.url, retries=1, backoff_s=0.01)
        with pytest.raises(Exception) as err:
            llm.chat([{"role": "user", "content": "hi"}], max_tokens=10)
    shown = f"{type(err.value).__name__}: {err.value}"
    assert shown.startswith(expect.format(url=s.url)) and "\n" not in shown, shown
    assert fault.hits == (2 if kind in ("cut",) or status == 429 else 1)  # retried: 429 and a cut body
