"""The MLflow UI after a sweep, in a real headless browser (Debian chromium driven over its DevTools pipe).

A scripted sweep logs to a tmp SQLite store; the `mlflow ui` command the sweep summary prints serves it on
127.0.0.1; chromium opens the runs URL the summary prints, expands the sweep's parent run and must find every trial
as a nested run, then checks the compare view (params and metrics side by side) and the parent's artifacts (plots,
summary). Screenshots are saved under the results folder.

A second sweep runs the real pipeline over scripted roles (tests/test_mlflow_traces.py), so each trial carries a
trace per task: chromium opens the trial under "Evaluation runs" (task by task: request, output, assessments), then
one task's trace (span tree, the assessments pane with the judge's rationale, an LLM call's attributes).

A third sweep (tests/test_registry.py's: scripted runner, a planted improvement) promotes a winner into the Prompt
Registry: chromium opens the prompt's page (Prompts tab, #/prompts/<name>) and must find version 1 @previous (the
baseline) and version 2 @champion (the winner's text and commit message).

Skipped with a reason when chromium is not installed (.ci/run installs it). To screenshot any store:
    python tests/test_mlflow_ui.py sqlite:///$PWD/results/mlflow.db results/mlflow_ui [experiment name]
or a fresh scripted pipeline sweep plus a promoting sweep (one store under <out dir>/store):
    python tests/test_mlflow_ui.py --pipeline-sweep results/ui
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-default-apps", "--disable-extensions", "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # nothing but the local UI resolves
)
SIZE = (1600, 1000)


def find_chromium() -> str | None:
    return next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevTools:
    """Headless chromium over --remote-debugging-pipe: JSON messages separated by NUL on fd 3 (to the browser)
    and fd 4 (from it), so no websocket library is needed. One page target, attached in flat session mode."""

    def __init__(self, exe: str, profile: Path, size: tuple[int, int] = SIZE) -> None:
        to_browser, self._w = os.pipe()
        self._r, from_browser = os.pipe()
        cmd = ["sh", "-c", 'exec "$@" 3<&0 4>&1 </dev/null >/dev/null', "sh", exe, *CHROMIUM_FLAGS,
               f"--user-data-dir={profile}", "--remote-debugging-pipe", f"--window-size={size[0]},{size[1]}",
               "about:blank"]
        self.proc = subprocess.Popen(cmd, stdin=to_browser, stdout=from_browser, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        os.close(to_browser)
        os.close(from_browser)
        self._buf, self._id = b"", 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.page("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1], deviceScaleFactor=1,
                  mobile=False)

    def call(self, method: str, session: str | None = None, timeout: float = 30.0, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while True:
            while b"\0" not in self._buf:
                left = end - time.monotonic()
                if left <= 0 or not select.select([self._r], [], [], left)[0]:
                    raise TimeoutError(f"chromium did not answer {method} within {timeout:.0f}s")
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium exited (rc={self.proc.poll()}) during {method}")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:  # everything else is an event
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def page(self, method: str, **params) -> dict:
        return self.call(method, self.session, **params)

    def js(self, expression: str):
        return self.page("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def text(self) -> str:
        return self.js("document.body ? document.body.innerText : ''") or ""

    def goto(self, url: str) -> None:
        self.page("Page.navigate", url=url)

    def wait_for(self, expression: str, what: str, timeout: float = 60.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.25)
        raise AssertionError(f"the UI did not show {what} within {timeout:.0f}s; page text: {self.text()[:1500]!r}")

    def click(self, selector: str) -> int:
        return self.js(f"(() => {{ const b = [...document.querySelectorAll({json.dumps(selector)})]; "
                       "b.forEach(x => x.click()); return b.length; })()")

    def screenshot(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self.page("Page.captureScreenshot", format="png")["data"]))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        finally:
            for fd in (self._r, self._w):
                os.close(fd)


class UIServer:
    """`mlflow ui` (the command the summary prints) on 127.0.0.1:<free port>, one worker, telemetry off."""

    def __init__(self, ui_command: str, cwd: Path) -> None:
        args = ui_command.split()
        assert args[:2] == ["mlflow", "ui"], ui_command
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
        self.log = cwd / "mlflow_ui.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mlflow", *args[1:], "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "1"], cwd=cwd, env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True)

    def wait(self, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"mlflow ui exited rc={self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"mlflow ui did not answer within {timeout:.0f}s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


@contextlib.contextmanager
def ui_session(exe: str, ui_command: str, cwd: Path, profile: Path):
    """`mlflow ui` answering and a headless chromium on it: yields (server, browser); both stopped on exit."""
    server = UIServer(ui_command, cwd)
    browser = None
    try:
        server.wait()
        browser = DevTools(exe, profile)
        yield server, browser
    finally:
        if browser is not None:
            browser.close()
        server.stop()


def compare_url(base: str, experiment_id: str, run_ids: list[str]) -> str:
    q = urllib.parse.quote
    return (f"{base}/#/compare-runs?runs={q(json.dumps(run_ids))}&experiments={q(json.dumps([experiment_id]))}"
            "&workflowType=machine_learning")


def scrolled_text(browser: DevTools) -> str:
    """The page's text as every scrollable box shows it from top to bottom: MLflow 3.17's compare view renders the
    rows of its parameter and metric tables only while they are in view."""
    seen = []
    boxes = int(browser.js("(() => { window.__boxes = [...document.querySelectorAll('*')].filter(e => "
                           "e.scrollHeight > e.clientHeight + 10 && getComputedStyle(e).overflowY.match(/auto|scroll/)); "
                           "return window.__boxes.length; })()"))
    for i in range(boxes):
        for _ in range(40):
            seen.append(browser.text())
            moved = browser.js(f"(() => {{ const b = window.__boxes[{i}]; const top = b.scrollTop; "
                               "b.scrollTop = top + Math.max(100, b.clientHeight - 40); return b.scrollTop > top; })()")
            time.sleep(0.15)
            if not moved:
                seen.append(browser.text())
                break
    return "\n".join(seen)


CLOSE_ASSISTANT = 'button[data-component-id="mlflow.assistant.chat_panel.close"]'
EXPAND = 'button[data-component-id*="runnamecellrenderer"]'


def capture(browser: DevTools, base: str, runs_url: str, experiment_id: str, parent_id: str,
            child_names: list[str], trial_ids: list[str], out_dir: Path) -> dict[str, str]:
    """Drive the UI through runs table (expanded parent), compare view and the parent's artifacts; return each
    page's text and save a screenshot of each under out_dir."""
    pages = {}
    browser.goto(runs_url)
    browser.wait_for(f"!!document.querySelector('a[href*=\"/runs/{parent_id}\"]')", "the sweep's parent run")
    browser.click(CLOSE_ASSISTANT)
    pages["collapsed"] = browser.text()
    pages["collapsed_rows"] = str(browser.js("document.querySelectorAll('.ag-center-cols-container .ag-row').length"))
    browser.click(EXPAND)
    names = json.dumps(child_names)
    browser.wait_for(f"{names}.every(n => document.body.innerText.includes(n))", f"the nested runs {child_names}")
    time.sleep(0.5)  # let the grid finish its layout before the picture
    pages["runs"] = browser.text()
    pages["runs_rows"] = str(browser.js("document.querySelectorAll('.ag-center-cols-container .ag-row').length"))
    browser.screenshot(out_dir / "runs.png")

    browser.goto(compare_url(base, experiment_id, trial_ids))
    browser.wait_for("document.body.innerText.includes('Run details') && document.body.innerText.includes('composite')"
                     " && document.body.innerText.includes('operator')", "the compare view")
    browser.click(CLOSE_ASSISTANT)
    browser.wait_for("!!document.querySelector('.js-plotly-plot .main-svg')", "the parallel coordinates plot")
    time.sleep(0.5)
    browser.screenshot(out_dir / "compare.png")
    pages["compare"] = browser.text() + "\n" + scrolled_text(browser)
    browser.js("(() => { const h = [...document.querySelectorAll('h1, h2, h3, span, div')]"
               ".filter(e => e.textContent === 'Run details'); if (h.length) h[h.length - 1].scrollIntoView(); })()")
    time.sleep(0.3)
    browser.screenshot(out_dir / "compare_table.png")

    browser.goto(f"{base}/#/experiments/{experiment_id}/runs/{parent_id}/artifacts?workflowType=machine_learning")
    browser.wait_for("document.body.innerText.includes('summary.md')", "the parent run's artifacts")
    browser.click(CLOSE_ASSISTANT)
    click_text = "(() => { const n = [...document.querySelectorAll('span, div')].find(e => e.textContent === %s); " \
                 "if (n) n.click(); return !!n; })()"
    browser.js(click_text % json.dumps("plots"))
    browser.wait_for("document.body.innerText.includes('optimization_history.png')", "the plots folder")
    browser.js(click_text % json.dumps("optimization_history.png"))
    pages["preview_width"] = str(browser.wait_for(
        "(() => { const i = [...document.images].find(i => i.src.startsWith('blob:') && i.complete"
        " && i.naturalWidth > 0); return i ? i.naturalWidth : 0; })()", "the plot's preview image"))
    time.sleep(0.3)
    pages["artifacts"] = browser.text()
    browser.screenshot(out_dir / "artifacts.png")
    return pages


ASSESSMENTS_PANE = 'button[data-component-id="shared.model-trace-explorer.assessments-pane-toggle"]'
EXPAND_ASSESSMENT = 'button[data-component-id="shared.model-trace-explorer.toggle-assessment-expanded"]'


def click_text(browser: DevTools, selector: str, text: str, *, exact: bool = False) -> bool:
    """Click the last element matching selector, with no child elements, whose text contains (or is) `text`."""
    test = "e.textContent === t" if exact else "e.textContent.includes(t)"
    return bool(browser.js(f"(() => {{ const t = {json.dumps(text)}; const n = [...document.querySelectorAll("
                           f"{json.dumps(selector)})].filter(e => e.children.length === 0 && {test}).pop(); "
                           "if (n) n.click(); return !!n; })()"))


def capture_evaluation(browser: DevTools, base: str, experiment_id: str, run_id: str, run_name: str, task: str,
                       out_dir: Path) -> dict[str, str]:
    """A trial as an evaluation run: the Evaluation runs list with the trial selected (its traces task by task),
    the trial's own evaluation page, then the trace of `task` (span tree, assessments pane) and its producer
    call's attributes. Returns each page's text; saves a screenshot of each under out_dir."""
    pages = {}
    browser.goto(f"{base}/#/experiments/{experiment_id}/evaluation-runs")
    browser.wait_for(f"document.body.innerText.includes({json.dumps(run_name)})", "the evaluation runs")
    browser.click(CLOSE_ASSISTANT)
    assert click_text(browser, "a, span, div", run_name, exact=True), f"no {run_name} in the evaluation runs"
    browser.wait_for(f"document.body.innerText.includes({json.dumps(task)})", "the trial's traces beside the runs")
    time.sleep(1.0)  # the assessment histograms draw after the rows
    pages["evaluation_runs"] = browser.text()
    browser.screenshot(out_dir / "evaluation_runs.png")

    browser.goto(f"{base}/#/experiments/{experiment_id}/runs/{run_id}/evaluations")
    browser.wait_for(f"document.body.innerText.includes({json.dumps(task)})"
                     f" && document.body.innerText.includes({json.dumps(run_name)})", "the trial's evaluation page")
    browser.click(CLOSE_ASSISTANT)
    time.sleep(1.0)
    pages["evaluation"] = browser.text()
    browser.screenshot(out_dir / "evaluation.png")

    assert click_text(browser, "a", task), f"no trace row for {task!r}"
    browser.wait_for("document.body.innerText.includes('compress_and_store')", "the trace's span tree")
    browser.click(ASSESSMENTS_PANE)
    browser.wait_for(f"document.querySelectorAll('{EXPAND_ASSESSMENT}').length > 0", "the assessments pane")
    browser.click(EXPAND_ASSESSMENT)  # each assessment opens on its rationale and source
    browser.wait_for("document.body.innerText.includes('Weaknesses')", "the judge's rationale")
    time.sleep(0.5)
    pages["trace"] = browser.text()
    browser.screenshot(out_dir / "trace.png")

    assert click_text(browser, "span, div", "llm.producer", exact=True), "no llm.producer span"
    assert click_text(browser, "button, [role=tab], span, div", "Attributes", exact=True), "no Attributes tab"
    browser.wait_for("document.body.innerText.includes('cache_hit')", "the LLM call's attributes")
    time.sleep(0.5)
    pages["llm_span"] = browser.text()
    browser.screenshot(out_dir / "trace_llm_span.png")
    return pages


# -- the test ------------------------------------------------------------------------------------------


@pytest.fixture
def chromium() -> str:
    exe = find_chromium()
    if exe is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
    return exe


def scripted_sweep(out: Path, prefix: str, *, n_train: int, n_tasks: int, own_stores: bool = False):
    """A finished scripted sweep (6 trials: baseline, add_tool, noise; the scripted runner's planted improvement)
    with its Optuna store under `out`, tracked in MLflow (under `out` too when own_stores, else the environment's)."""
    import optuna
    from scripted_harness import BASE, ScriptedRunner, scripted_propose

    from experiments.config import load_tasks
    from experiments.config import BenchmarkConfig, compose_config, to_experiment
    from experiments.config._schema import TaskSpec
    from experiments.sweep import run_sweep

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", "sweep.n_trials=6"]))
    exp.benchmark = BenchmarkConfig(name="scripted", tasks=[
        TaskSpec(id=f"t{i}", task=f"task number {i}", task_type=("enumerated", "research")[i % 2],
                 split="train" if i < n_train else "holdout") for i in range(n_tasks)])
    exp.synth.instructions = dict(BASE)
    exp.sweep.operators = ["add_tool", "noise"]
    exp.sweep.name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    exp.sweep.storage = f"sqlite:///{out / 'optuna.db'}"
    exp.mlflow.enabled = True
    if own_stores:
        exp.mlflow.tracking_uri = f"sqlite:///{out / 'mlflow.db'}"
        exp.results_dir = str(out / "results")
    summary = run_sweep(exp, ScriptedRunner(load_tasks(exp.benchmark)), propose=scripted_propose, out=lambda s: None)
    return exp, summary


@pytest.fixture
def sweep_store(tmp_path):
    """A finished scripted sweep (6 train + 3 holdout tasks) tracked in a tmp SQLite MLflow store."""
    return scripted_sweep(tmp_path, "ui", n_train=6, n_tasks=9)


@pytest.mark.browser
def test_mlflow_ui_shows_the_sweep_in_headless_chromium(chromium, sweep_store, tmp_path):
    from mlflow.tracking import MlflowClient

    from experiments.tracking._mlflow import UI_ADDRESS

    exp, summary = sweep_store
    client = MlflowClient(summary.mlflow_ui.split()[-1])
    experiment = client.get_experiment_by_name(exp.sweep.name)
    runs = client.search_runs([experiment.experiment_id], max_results=200)
    parent = next(r for r in runs if r.data.tags.get("sweep_parent") == "true")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    trials = sorted((r for r in children if r.data.tags.get("kind") == "trial"),
                    key=lambda r: int(r.data.tags["trial_number"]))
    assert len(trials) == 6 and len(children) > len(trials)  # baseline repeats and holdout runs too
    assert summary.mlflow_url.startswith(UI_ADDRESS)

    out_dir = Path(exp.results_dir) / "mlflow_ui"
    t0 = time.monotonic()
    with ui_session(chromium, summary.mlflow_ui, tmp_path, tmp_path / "chromium-profile") as (server, browser):
        t_ready = time.monotonic() - t0
        pages = capture(browser, server.base, summary.mlflow_url.replace(UI_ADDRESS, server.base),
                        experiment.experiment_id, parent.info.run_id, [r.info.run_name for r in children],
                        [r.info.run_id for r in trials], out_dir)
    print(f"mlflow ui and chromium ready after {t_ready:.1f}s; chromium pages {time.monotonic() - t0 - t_ready:.1f}s")

    # runs table: the parent row alone until expanded, then every child nested under it
    assert exp.sweep.name in pages["collapsed"]
    assert not any(r.info.run_name in pages["collapsed"] for r in trials)
    assert int(pages["collapsed_rows"]) == 1
    assert int(pages["runs_rows"]) == 1 + len(children)
    assert all(r.info.run_name in pages["runs"] for r in children)
    # compare view: params and metrics of the trials side by side
    cmp = pages["compare"]
    assert f"Comparing {len(trials)} Runs" in cmp
    assert all(r.info.run_name in cmp for r in trials)
    for name in ("operator", "instruction_hash", "composite", "n_tasks", "add_tool", "noise", "baseline"):
        assert name in cmp, name
    # the parent's artifacts: plots, summary, ledger, promoted config
    for name in ("plots", "summary.md", "ledger.jsonl", "promoted_synth.yaml", "optimization_history.png",
                  "operator_importance.png", "task_heatmap.png"):
        assert name in pages["artifacts"], name
    png = (exp.sweep_dir / "plots" / "optimization_history.png").read_bytes()
    assert int(pages["preview_width"]) == int.from_bytes(png[16:20], "big")  # the logged plot, rendered in the page
    for png in ("runs.png", "compare.png", "compare_table.png", "artifacts.png"):
        data = (out_dir / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, png


# -- a trial's traces and assessments -------------------------------------------------------------------------


def pipeline_sweep_store(out: Path):
    """tests/test_mlflow_traces.py's sweep (the real pipeline over scripted roles: each trial run has a trace per
    task) with every store under `out`; returns the experiment and the summary."""
    import optuna
    from scripted_harness import BASE
    from test_mlflow_traces import SWEEP, pipeline_sweep

    from experiments.config import BenchmarkConfig, compose_config, to_experiment
    from experiments.config._schema import TaskSpec

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    out = out.resolve()
    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", f"sweep.name=traces-{out.name}",
                                        *SWEEP]))
    exp.benchmark = BenchmarkConfig(name="scripted", tasks=[
        TaskSpec(id=f"t{i}", task=f"task number {i}", task_type=("enumerated", "research")[i % 2],
                 split="train" if i < 4 else "holdout") for i in range(6)])
    exp.synth.instructions = dict(BASE)
    exp.sweep.operators = ["add_tool", "noise"]
    exp.sweep.storage = f"sqlite:///{out / 'optuna.db'}"
    exp.mlflow.enabled = True
    exp.mlflow.tracking_uri = f"sqlite:///{out / 'mlflow.db'}"
    exp.results_dir = str(out / "results")
    _, summary = pipeline_sweep(exp, [])
    return exp, summary


def first_trial_with_traces(client, experiment_id: str):
    """(trial run, the request text of one of its traces) for the lowest-numbered trial with traces, else None."""
    runs = client.search_runs([experiment_id], filter_string="tags.kind = 'trial'", max_results=500)
    for run in sorted(runs, key=lambda r: int(r.data.tags.get("trial_number", 0))):
        traces = client.search_traces(locations=[experiment_id], run_id=run.info.run_id, max_results=100)
        if traces:
            first = min(traces, key=lambda t: t.info.tags.get("task_id", ""))
            return run, json.loads(first.data.request)["task"]
    return None


@pytest.mark.browser
def test_mlflow_ui_shows_a_trials_traces_and_assessments(chromium, tmp_path):
    from mlflow.tracking import MlflowClient

    exp, summary = pipeline_sweep_store(tmp_path / "store")
    client = MlflowClient(exp.mlflow.tracking_uri)
    experiment = client.get_experiment_by_name(exp.sweep.name)
    trial, task = first_trial_with_traces(client, experiment.experiment_id)
    assert trial.info.run_name.startswith("trial-000") and task == "task number 0"
    out_dir = Path(exp.results_dir) / "mlflow_ui"
    with ui_session(chromium, f"mlflow ui --backend-store-uri {exp.mlflow.tracking_uri}", tmp_path,
                    tmp_path / "chromium-profile") as (server, browser):
        pages = capture_evaluation(browser, server.base, experiment.experiment_id, trial.info.run_id,
                                   trial.info.run_name, task, out_dir)

    # the trial under "Evaluation runs", and its own evaluation page: a row per task with request, output, scores
    for page in ("evaluation_runs", "evaluation"):
        text = pages[page]
        assert "4 of 4" in text, page
        assert all(f"task number {i}" in text for i in range(4)), page
        assert "Gather in asyncio" in text and "composite" in text and "Assessments" in text, page
    assert "Evaluation runs" in pages["evaluation_runs"] and trial.info.run_name in pages["evaluation"]
    # one task's trace: the span tree, and the assessments with their source and the judge's rationale
    tree = pages["trace"]
    for name in ("harness_run", "synthesize", "llm.producer", "write_output", "wiggum_loop", "wiggum.round",
                 "llm.evaluator", "compress_and_store"):
        assert name in tree, name
    for name in ("relevance", "completeness", "grounded", "det_count", "det_structure", "composite",
                 "Add version numbers.", "Weaknesses: few versions"):
        assert name in tree, name
    # the producer's call: model, tokens, latency, cache hit
    for name in ("model", "fake-model", "prompt_tokens", "completion_tokens", "latency_s", "cache_hit"):
        assert name in pages["llm_span"], name
    for png in ("evaluation_runs.png", "evaluation.png", "trace.png", "trace_llm_span.png"):
        data = (out_dir / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, png


# -- the promoted prompt in the Prompt Registry ---------------------------------------------------------------


def promoted_sweep_store(out: Path):
    """tests/test_registry.py's promoting sweep (scripted runner with the planted improvement, 6 trials, 8 train and
    6 holdout tasks: fewer cannot reach the first look's level, issue 40; mlflow on) with its stores under `out`: the
    baseline becomes version 1 of each harness-synth-<task_type> prompt, the winner version 2 @champion, the
    baseline @previous."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    return scripted_sweep(out, "prompt", n_train=8, n_tasks=14, own_stores=True)


def prompt_aliases(client, name: str) -> dict[str, int]:
    """alias -> version of one registered prompt."""
    return {a: int(v.version) for v in client.search_prompt_versions(name)
            for a in client.get_prompt_version(name, v.version).aliases}


def champion_prompt(client) -> str | None:
    """The first registered prompt with a champion alias (else the first prompt, else None)."""
    from harness.synthesis import CHAMPION

    names = sorted(p.name for p in client.search_prompts(max_results=100))
    return next((n for n in names if CHAMPION in prompt_aliases(client, n)), names[0] if names else None)


def capture_prompt(browser: DevTools, base: str, name: str, out_dir: Path,
                   aliases: tuple[str, ...] = ()) -> dict[str, str]:
    """The prompt's page in the Prompts tab: its versions with their aliases (wait for each of `aliases`), the
    latest version shown. Returns the page's text and its final URL; saves prompt.png under out_dir."""
    browser.goto(f"{base}/#/prompts/{urllib.parse.quote(name)}")
    shown = [name, "Viewing version", "Version 1", *(f"@ {a}" for a in aliases)]
    browser.wait_for(f"{json.dumps(shown)}.every(t => document.body.innerText.replace(/\\s+/g, ' ').includes(t))",
                     f"the prompt's versions and aliases {list(aliases)}")
    browser.click(CLOSE_ASSISTANT)
    time.sleep(0.5)
    pages = {"prompt": browser.text(), "prompt_url": browser.js("location.href")}
    browser.screenshot(out_dir / "prompt.png")
    return pages


@pytest.mark.browser
def test_mlflow_ui_shows_the_promoted_prompt_with_versions_and_aliases(chromium, tmp_path):
    import re

    from mlflow.tracking import MlflowClient
    from scripted_harness import BASE

    from harness.synthesis import CHAMPION, PREVIOUS, prompt_name

    exp, summary = promoted_sweep_store(tmp_path / "store")
    assert summary.promoted
    changed = sorted(tt for tt in BASE if summary.promoted_instructions[tt] != BASE[tt])
    assert changed
    name = prompt_name("harness", changed[0])
    client = MlflowClient(exp.mlflow.tracking_uri)
    assert prompt_aliases(client, name) == {CHAMPION: 2, PREVIOUS: 1}
    champion = client.get_prompt_version(name, 2)
    assert champion.template == summary.promoted_instructions[changed[0]]

    out_dir = Path(exp.results_dir) / "mlflow_ui"
    with ui_session(chromium, f"mlflow ui --backend-store-uri {exp.mlflow.tracking_uri}", tmp_path,
                    tmp_path / "chromium-profile") as (server, browser):
        pages = capture_prompt(browser, server.base, name, out_dir, (CHAMPION, PREVIOUS))

    text = pages["prompt"]
    assert f"/#/prompts/{name}" in pages["prompt_url"]
    # the versions list: 2 @champion (the winner), 1 @previous (the baseline); the page opens on version 2
    assert re.search(r"Version 2\s*@\s*champion", text), text[:2000]
    assert re.search(r"Version 1\s*@\s*previous", text), text[:2000]
    assert "Viewing version 2" in text
    assert f"trial #{summary.promoted_trial}" in text  # the winner's commit message
    assert " ".join(champion.template.split()) in " ".join(text.split())  # the winner's text
    data = (out_dir / "prompt.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


# -- screenshot any store ------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """python tests/test_mlflow_ui.py <sqlite:///abs/mlflow.db> <out dir> [experiment]: runs/compare/artifacts PNGs,
    the first traced trial's evaluation and trace PNGs, and prompt.png (the first prompt with a champion alias);
    --pipeline-sweep <out dir>: a fresh scripted pipeline sweep and a promoting sweep (one store under
    <out dir>/store), then the same."""
    from mlflow.tracking import MlflowClient

    if argv[0] == "--pipeline-sweep":
        os.environ.setdefault("DDGS_DISABLED", "1")  # the scripted sweep searches nothing on the network
        out_dir = Path(argv[1])
        exp, _ = pipeline_sweep_store(out_dir / "store")
        promoted_sweep_store(out_dir / "store")  # same store: the prompts get a champion version
        argv = [exp.mlflow.tracking_uri, str(out_dir), exp.sweep.name]
    uri, out_dir = argv[0], Path(argv[1])
    client = MlflowClient(uri)
    exps = [e for e in client.search_experiments() if e.name != "Default" and (len(argv) < 3 or e.name == argv[2])]
    experiment = exps[0]
    runs = client.search_runs([experiment.experiment_id], max_results=500)
    parent = next(r for r in runs if r.data.tags.get("sweep_parent") == "true")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    trials = [r for r in children if r.data.tags.get("kind") == "trial"]
    exe = find_chromium()
    if exe is None:
        print("chromium is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        with ui_session(exe, f"mlflow ui --backend-store-uri {uri}", Path(tmp), Path(tmp) / "profile") as (
                server, browser):
            url = f"{server.base}/#/experiments/{experiment.experiment_id}/runs?workflowType=machine_learning"
            pages = capture(browser, server.base, url, experiment.experiment_id, parent.info.run_id,
                            [r.info.run_name for r in children], [r.info.run_id for r in trials], out_dir)
            traced = first_trial_with_traces(client, experiment.experiment_id)
            if traced is not None:
                trial, task = traced
                capture_evaluation(browser, server.base, experiment.experiment_id, trial.info.run_id,
                                   trial.info.run_name, task, out_dir)
            prompt = champion_prompt(client)
            if prompt is not None:
                capture_prompt(browser, server.base, prompt, out_dir)
    print(f"{len(children)} nested runs; rows {pages['collapsed_rows']} collapsed, {pages['runs_rows']} expanded; "
          f"screenshots in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
