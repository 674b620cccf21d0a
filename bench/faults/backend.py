"""The backend cases (ids backend.41.1-3, backend.41.17, backend.held-*): a failing or flaky Ollama, as a user meets it.

Each case runs the real command (`python -m experiments.run ...` or `python -m harness ...`) in a subprocess
against the project's Ollama-faithful stand-in (tests/ollama_stub.py, `fault_chats`) on a tiny design: the 5-task
smoke benchmark, 3 trials, deterministic operators and scorer, no judge. A run that must equal a clean one is
compared with a clean run of the same command in its own folder (made once per process).

    python bench/faults/campaign.py --only backend
    FAULT_ROOT=/path/to/old/checkout python bench/faults/campaign.py --only backend   # the same cases, before
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import Case, Outcome

# the tree whose commands run: this one, or FAULT_ROOT (e.g. a checkout of 3306971, for the "before" column)
ROOT = Path(os.environ.get("FAULT_ROOT") or Path(__file__).resolve().parents[2])
MODELS = ["glm4:9b", "qwen2.5:32b", "gemma3:27b"]  # the default role models (the judge another family)
# a reply every stage can use: a numbered list of 3 (the enumerated tasks ask for 3), no JSON (planner -> defaults)
REPLY = ("1. **json**: parse JSON text with json.loads and write it with json.dumps.\n"
         "2. **csv**: read rows with csv.reader and always open files with encoding='utf-8'.\n"
         "3. **logging**: set the level with logging.basicConfig(level=logging.INFO) per thread.")
PREPARE_CALLS = 5  # the smoke benchmark's contexts: one planner call per task (planner=single_pass, no compression)
TRIAL_CALLS = 3  # one synthesis call per train task (wiggum.max_rounds=1, deterministic scorer)
RESUME = "run the same command again"
SWEEP = "synth_mutation"


def sweep_args(host: str, *extra: str) -> list[str]:
    """The sweep under test: small (5-task smoke benchmark, allowed although it cannot reach alpha, deterministic
    operators and scorer) but every store real."""
    return ["-m", "experiments.run", f"+sweep={SWEEP}", "backend=ollama", f"backend.host={host}",
            "backend.retries=2", "backend.backoff_s=0.05", "backend.timeout_s=20", "backend.concurrency=1",
            "evaluator=deterministic_only", "planner=single_pass", "wiggum.max_rounds=1", "research.max_rounds=1",
            "research.compress=false", "research.enrich_urls=0", "search.provider=local",
            "sweep.operators=[add_constraint,drop_sentence,reorder]", "sweep.holdout_top_k=1", "benchmark=smoke",
            "sweep.allow_underpowered=true", "sweep.n_trials=3", *extra]


def ab_args(host: str, *extra: str) -> list[str]:
    return ["-m", "experiments.run", "+sweep=prior_knowledge_ab", "backend=ollama", f"backend.host={host}",
            "backend.retries=1", "backend.backoff_s=0.05", "backend.timeout_s=20", "backend.concurrency=1",
            "evaluator=deterministic_only", "wiggum.max_rounds=1", "research.max_rounds=1", "research.compress=false",
            "research.enrich_urls=0", "search.provider=local", "benchmark=smoke", "ab.allow_underpowered=true",
            "ab.replications=2", *extra]


@dataclass
class Ran:
    rc: int
    out: str
    err: str
    folder: Path

    @property
    def errors(self) -> list[str]:
        return [x for x in self.err.splitlines() if x.startswith("error:")]

    @property
    def line(self) -> str:
        return (self.errors or [f"(no error line; stderr tail {self.err.strip()[-200:]!r})"])[-1]

    def grab(self, prefix: str) -> str:
        return next((x for x in self.out.splitlines() if x.startswith(prefix)), "")

    @property
    def trial_values(self) -> list[tuple[str, str, str]]:
        """(trial number, operator, value) of every finished trial line."""
        rx = re.compile(r"\] trial \d+/\d+ #(\d+) (\S+)\s+(COMPLETE|PRUNED|FAIL)\s+value (\S+)")
        return [(m[1], m[2], m[4]) for m in rx.finditer(self.out)]

    def parent_status(self) -> str:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=f"sqlite:///{self.folder / 'mlflow.db'}")
        found = [r.info.status for e in client.search_experiments() for r in client.search_runs([e.experiment_id])
                 if r.data.tags.get("sweep_parent") == "true" or r.data.tags.get("kind") == "ab_parent"
                 or r.data.tags.get("ab_parent") == "true"]
        return ",".join(found) or "none"


def corpus(folder: Path) -> Path:
    c = folder / "corpus"
    c.mkdir(parents=True, exist_ok=True)
    (c / "formats.md").write_text("# Data formats\nThe json module parses JSON; csv reads rows; pickle stores "
                                  "objects. Open text files with encoding='utf-8'.\n", encoding="utf-8")
    return c


def run_cli(folder: Path, args: list[str], timeout: float = 240) -> Ran:
    """The command in `folder` (its results, MLflow store and corpus there), as a user runs it."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), HARNESS_RESULTS_DIR=str(folder / "results"),
               MLFLOW_TRACKING_URI=f"sqlite:///{folder / 'mlflow.db'}", DDGS_DISABLED="1")
    for k in ("HARNESS_DEBUG", "OLLAMA_HOST", "RESEARCH_CACHE", "HARNESS_SKIP_PRIOR_KNOWLEDGE"):
        env.pop(k, None)
    args = [a.replace("{corpus}", str(corpus(folder))) for a in args]
    p = subprocess.run([sys.executable, *args], cwd=folder, env=env, capture_output=True, text=True,
                       timeout=timeout)
    return Ran(p.returncode, p.stdout, p.stderr, folder)


def stub(**kw: Any):
    """The stand-in with every role's models; JSON for a request with a schema (the planner's plan has queries and
    subtasks, so a context prepared under a failure differs from a clean one), else REPLY."""
    from ollama_stub import OllamaStub, schema_reply

    return OllamaStub(models=kw.pop("models", MODELS), default_reply=kw.pop("default_reply", schema_reply(REPLY)),
                      **kw)


def cached_contexts(ran: Ran) -> int:
    return len(list((ran.folder / "results" / SWEEP / "context").glob("*.json")))


_CLEAN: dict[tuple[str, ...], Ran] = {}


def clean_run(folder: Path, *extra: str) -> Ran:
    """A clean run of the sweep with these extra arguments (once per process)."""
    key = tuple(extra)
    if key not in _CLEAN:
        with stub() as s:
            ran = run_cli(folder / "clean", sweep_args(s.url, "search.local_corpus=[{corpus}]", *extra))
        if ran.rc != 0:  # not kept: the next case tries again
            return ran
        _CLEAN[key] = ran
    return _CLEAN[key]


def same_as_clean(ran: Ran, clean: Ran) -> str:
    """'' when the run's baseline and trial values equal the clean run's, else what differs."""
    got, want = ran.grab("baseline train mean:"), clean.grab("baseline train mean:")
    if clean.rc != 0 or not want:
        return f"the clean run failed (rc {clean.rc}: {clean.line})"
    if got != want:
        return f"{got!r} vs clean {want!r}"
    got_v = {(op, v) for _, op, v in ran.trial_values}
    want_v = {(op, v) for _, op, v in clean.trial_values}
    if not want_v <= got_v:  # every clean trial's operator and value among the run's (its failed tries besides)
        return f"trial values {sorted(got_v)} vs clean {sorted(want_v)}"
    return ""


def one_line_resume(ran: Ran, *must: str, code: int = 3) -> str:
    """'' when the run exited `code` with one error line holding RESUME and every `must`, else what was seen."""
    if ran.rc != code:
        return f"exit {ran.rc} (want {code})"
    if len(ran.errors) != 1:
        return f"{len(ran.errors)} error lines"
    missing = [m for m in (RESUME, *must) if m not in ran.line]
    return f"error line lacks {missing}" if missing else ""


def seen(ran: Ran, extra: str = "") -> str:
    return f"exit {ran.rc}; {ran.line[:220]}" + (f"; {extra}" if extra else "")


# -- 1: a sweep whose model fails exits non-zero with one line and the resume hint ------------------------------


def _fails_every_chat(kind: str, *must: str, after: int = 0, **fault: Any) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        with stub() as s:
            s.fault_chats(kind, after=after, **fault)
            ran = run_cli(tmp, sweep_args(s.url, "search.local_corpus=[{corpus}]"))
        bad = one_line_resume(ran, *must)
        parent = ran.parent_status()
        if not bad and parent != "FAILED":
            bad = f"MLflow parent {parent}"
        if not bad and after < PREPARE_CALLS and cached_contexts(ran):
            bad = f"{cached_contexts(ran)} context(s) cached while every model call failed"
        if not bad and "PROMOTED: baseline" in ran.out and "NOT CONCLUDED" not in ran.out:
            bad = "the summary promotes the baseline and does not say the sweep did not conclude"
        return Outcome(not bad, seen(ran, f"parent {parent}; {bad or 'as promised'}"))

    return run


def ab_cells_fail(tmp: Path) -> Outcome:
    """The A/B with the server failing after 6 chats: 15 of 20 cells failed and it exited 0 (3306971)."""
    with stub() as s:
        s.fault_chats("status", status=500, after=6)
        ran = run_cli(tmp, ab_args(s.url, "search.local_corpus=[{corpus}]"))
    bad = one_line_resume(ran, "A/B test did not conclude", "cells failed because a model call failed")
    parent = ran.parent_status()
    if not bad and parent != "FAILED":
        bad = f"MLflow parent {parent}"
    return Outcome(not bad, seen(ran, f"parent {parent}; {bad or 'as promised'}"))


def calibration_fails(tmp: Path) -> Outcome:
    with stub() as s:
        s.fault_chats("status", status=500, after=PREPARE_CALLS + 2)
        ran = run_cli(tmp, ["-m", "experiments.run", "+sweep=calibrate", "backend=ollama", f"backend.host={s.url}",
                            "backend.retries=1", "backend.backoff_s=0.05", "backend.concurrency=1",
                            "evaluator=deterministic_only", "planner=single_pass", "wiggum.max_rounds=1",
                            "research.max_rounds=1", "research.compress=false", "research.enrich_urls=0",
                            "search.provider=local", "search.local_corpus=[{corpus}]", "benchmark=smoke",
                            "calibrate.generator_repeats=2", "calibrate.replications=1", "calibrate.judge_repeats=2"])
    bad = one_line_resume(ran, "status code: 500")
    return Outcome(not bad, seen(ran, bad or "as promised"))


# -- 2: nothing prepared under a failing model is cached; the recovered rerun scores as a clean run --------------


def _rerun_equals_clean(arm: Callable[[Any], None], *, first_extra: tuple[str, ...] = (),
                        rerun_extra: tuple[str, ...] = ("sweep.n_trials=3",),
                        contexts_ok: bool = False) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        folder = tmp / "run"
        with stub() as s:
            arm(s)
            first = run_cli(folder, sweep_args(s.url, "search.local_corpus=[{corpus}]", *first_extra))
            cached = cached_contexts(first)
            s.clear_faults()
            again = run_cli(folder, sweep_args(s.url, "search.local_corpus=[{corpus}]", *rerun_extra))
        clean = clean_run(tmp, *rerun_extra)
        bad = one_line_resume(first)
        if not bad and not contexts_ok and cached >= PREPARE_CALLS:
            bad = f"all {cached} contexts cached though a model call failed while preparing them"
        if not bad and again.rc != 0:
            bad = f"healthy rerun exit {again.rc}: {again.line}"
        if not bad:
            bad = same_as_clean(again, clean)
        return Outcome(not bad, f"first: exit {first.rc}, {cached} context(s) cached; rerun: exit {again.rc}, "
                                f"{again.grab('LLM calls:')[-40:]}, {again.grab('baseline train mean:')} (clean "
                                f"{clean.grab('baseline train mean:')}); {bad or 'as promised'}")

    return run


# -- 3: every failure path ends the same way ---------------------------------------------------------------------


def baseline_repeat_fails(tmp: Path) -> Outcome:
    """The server fails once the baseline trial is done: in the baseline repeat (exit 1, TrialFailed, no hint,
    parent RUNNING on 3306971)."""
    with stub() as s:
        s.fault_chats("status", status=500, after=PREPARE_CALLS + TRIAL_CALLS)
        ran = run_cli(tmp, sweep_args(s.url, "search.local_corpus=[{corpus}]", "sweep.baseline_repeats=2"))
    bad = one_line_resume(ran, "status code: 500")
    parent = ran.parent_status()
    if not bad and parent != "FAILED":
        bad = f"MLflow parent {parent}"
    return Outcome(not bad, seen(ran, f"parent {parent}; {bad or 'as promised'}"))


def huge_task(tmp: Path) -> Outcome:
    """A 5 MB task in a benchmark file: labelled BackendUnavailable and advised num_ctx.planner=3468288 for a model
    trained on 32768 (3306971)."""
    import yaml

    bench = tmp / "cfg" / "benchmark"
    bench.mkdir(parents=True)
    big = "List the json problems in this log. " + ("INFO heartbeat ok nothing here " * 170000)
    yaml.safe_dump({"name": "huge", "tasks": [
        {"id": "huge", "task": big, "task_type": "research", "split": "train"},
        {"id": "tools", "task": "List 3 Python tools.", "task_type": "enumerated", "expected_count": 3,
         "split": "train"},
        {"id": "tests", "task": "List 3 Python testing tools.", "task_type": "enumerated", "expected_count": 3,
         "split": "holdout"}]}, open(bench / "huge.yaml", "w", encoding="utf-8"))
    with stub() as s:
        ran = run_cli(tmp, sweep_args(s.url, "search.local_corpus=[{corpus}]", f"hydra.searchpath=[file://{tmp / 'cfg'}]",
                                      "benchmark=huge"))
    bad = one_line_resume(ran, "ContextOverflow", "trained context of 32768", "too long")
    advised = [int(n) for n in re.findall(r"num_ctx\.\w+=(\d+)", ran.line)]
    if not bad and (any(n > 32768 for n in advised) or "BackendUnavailable" in ran.line):
        bad = f"advice {advised} / label in {ran.line[:80]!r}"
    parent = ran.parent_status()
    if not bad and parent != "FAILED":
        bad = f"MLflow parent {parent}"
    return Outcome(not bad, seen(ran, f"parent {parent}; {bad or 'as promised'}"))


# -- 17: what Ollama said reaches the user; a reply from another model is refused; a non-UTF-8 task refused -----


def harness_args(host: str, folder: Path, task: str) -> list[str]:
    return ["-m", "harness", "--backend", "ollama", "--host", host, "--results-dir", str(folder / "res"), task]


def error_text_reaches_user(tmp: Path) -> Outcome:
    text = "an error was encountered while running the model: CUDA error: out of memory"
    with stub() as s:
        s.fault_chats("error200", error=text)
        ran = run_cli(tmp, harness_args(s.url, tmp, "List 3 Python modules for data formats."))
    bad = "" if ran.rc == 1 and text in ran.out + ran.err else f"Ollama's text not shown (exit {ran.rc})"
    status = ran.grab("status:")
    return Outcome(not bad, f"exit {ran.rc}; {status[:220] or ran.line[:220]}; {bad or 'as promised'}")


def other_model_refused(tmp: Path) -> Outcome:
    with stub() as s:
        s.fault_chats("model", model="llama3:8b")
        ran = run_cli(tmp, sweep_args(s.url, "search.local_corpus=[{corpus}]"))
    bad = one_line_resume(ran, "llama3:8b", "glm4:9b")
    return Outcome(not bad, seen(ran, bad or "as promised (refused: docs/RELIABILITY.md)"))


def non_utf8_task(tmp: Path) -> Outcome:
    task = b"List 3 Python tools for \xff\xfe data".decode("utf-8", "surrogateescape")
    with stub() as s:
        ran = run_cli(tmp, harness_args(s.url, tmp, task))
        chats = len(s.chat_requests(include_checks=True))
    written = (tmp / "res").exists()
    bad = "" if ran.rc == 2 and len(ran.errors) == 1 and "UTF-8" in ran.line and not written and not chats else (
        f"exit {ran.rc}, results written {written}, {chats} chat(s)")
    return Outcome(not bad, seen(ran, bad or "refused before anything was written"))


# -- held: retried faults give a clean run's values; think-only replies are said ---------------------------------


def _retried_equals_clean(kind: str, **fault: Any) -> Callable[[Path], Outcome]:
    def run(tmp: Path) -> Outcome:
        with stub() as s:
            f = s.fault_chats(kind, **fault)
            ran = run_cli(tmp / "run", sweep_args(s.url, "search.local_corpus=[{corpus}]"))
        clean = clean_run(tmp, "sweep.n_trials=3")
        bad = "" if ran.rc == 0 else f"exit {ran.rc}: {ran.line}"
        if not bad and f.hits < 2:
            bad = f"the fault met only {f.hits} request(s)"
        bad = bad or same_as_clean(ran, clean)
        return Outcome(not bad, f"exit {ran.rc}; {f.hits} {kind} faults retried; "
                                f"{ran.grab('baseline train mean:')} (clean {clean.grab('baseline train mean:')}); "
                                f"{bad or 'equal to a clean run'}")

    return run


def think_only(tmp: Path) -> Outcome:
    with stub() as s:
        s.fault_chats("think_only")
        ran = run_cli(tmp, sweep_args(s.url, "search.local_corpus=[{corpus}]"))
    bad = one_line_resume(ran, "held only thinking", "backend.think")
    if not bad and cached_contexts(ran):
        bad = f"{cached_contexts(ran)} context(s) cached from think-only replies"
    return Outcome(not bad, seen(ran, bad or "as promised"))


def _slow_once(s: Any) -> None:
    s.fault_chats("slow", after=2, count=1, delay_s=4.0)


CASES = [
    Case("backend.41.1-http500", "HTTP 500 to every chat after the readiness calls",
         "exit 3, one line naming Ollama's error and the resume hint, parent FAILED, no context cached",
         _fails_every_chat("status", "status code: 500", status=500)),
    Case("backend.41.1-http500-trials", "HTTP 500 once the contexts are prepared: every trial fails",
         "exit 3 (failure rate, baseline failed), one line with the resume hint, parent FAILED",
         _fails_every_chat("status", "baseline trial #0 failed", status=500, after=PREPARE_CALLS)),
    Case("backend.41.1-http429", "HTTP 429 to every chat", "exit 3, one line naming 429 and the resume hint",
         _fails_every_chat("status", "429", status=429)),
    Case("backend.41.1-empty-body", "an empty 200 body to every chat", "exit 3, one line: 'empty body', resume hint",
         _fails_every_chat("empty", "empty body")),
    Case("backend.41.1-error-field", "an `error` field in a 200 reply to every chat",
         "exit 3, one line with Ollama's own error text and the resume hint",
         _fails_every_chat("error200", "unexpected EOF")),
    Case("backend.41.1-ab-cells", "A/B, HTTP 500 after 6 chats", "exit 3: the A/B did not conclude, resume hint",
         ab_cells_fail),
    Case("backend.41.1-calibrate", "calibration, HTTP 500 after the contexts", "exit 3, one line, resume hint",
         calibration_fails),
    Case("backend.41.2-http500-rerun", "HTTP 500 to every chat, then the server healthy and n_trials=4",
         "nothing cached under the failure; the rerun scores exactly as a clean run",
         _rerun_equals_clean(lambda s: s.fault_chats("status", status=500), rerun_extra=("sweep.n_trials=4",))),
    Case("backend.41.2-timeout-rerun", "one reply past backend.timeout_s=2 while preparing contexts, then healthy",
         "that context not cached; exit 3; the rerun scores exactly as a clean run",
         _rerun_equals_clean(_slow_once, first_extra=("backend.timeout_s=2",))),
    Case("backend.41.2-429-rerun", "HTTP 429 past the retries once while preparing contexts, then healthy",
         "that context not cached; exit 3; the rerun scores exactly as a clean run",
         _rerun_equals_clean(lambda s: s.fault_chats("status", status=429, after=2, count=3))),
    Case("backend.41.2-trials-rerun", "HTTP 500 once the contexts are prepared, then healthy, same command",
         "the failed trials run again in their slots; the rerun scores exactly as a clean run",
         _rerun_equals_clean(lambda s: s.fault_chats("status", status=500, after=PREPARE_CALLS), contexts_ok=True)),
    Case("backend.41.3-baseline-repeat", "HTTP 500 from the baseline repeat on",
         "exit 3, one line with the resume hint, parent FAILED", baseline_repeat_fails),
    Case("backend.41.3-huge-task", "a 5 MB task in a benchmark file",
         "ContextOverflow saying the task is too long for the trained context; no advice past it; exit 3, parent "
         "FAILED", huge_task),
    Case("backend.41.17-error-text", "`python -m harness`, an `error` field in a 200 reply",
         "Ollama's own error text reaches the user", error_text_reaches_user),
    Case("backend.41.17-other-model", "replies naming llama3:8b for requests to the asked models",
         "refused with one line naming both models (documented choice), exit 3", other_model_refused),
    Case("backend.41.17-non-utf8-task", "`python -m harness` with a non-UTF-8 task",
         "refused in one line, exit 2, nothing written, no model call", non_utf8_task),
    Case("backend.held-503-retry", "HTTP 503 on every 4th chat (retried)", "exit 0, values equal to a clean run",
         _retried_equals_clean("status", status=503, every=4, after=1)),
    Case("backend.held-drop-retry", "a dropped connection on every 5th chat (retried)",
         "exit 0, values equal to a clean run", _retried_equals_clean("drop", every=5, after=1)),
    Case("backend.held-think-only", "replies that hold only thinking",
         "exit 3, one line naming backend.think, no context cached", think_only),
]
