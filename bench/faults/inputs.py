"""The input cases (ids inputs.41.*, inputs.held-*): what a user types or leaves on disk (an over-long sweep.name
among them), signals, and a failed run redone on resume, as a user meets them.

Each case runs the real command in a subprocess in its own folder: `python -m experiments.run` (against the
Ollama-faithful stand-in, tests/ollama_stub.py, where the case is about the server), `python -m harness`, or
tests/resume_driver.py (experiments.run on the scripted fake backend, whose replies depend only on the prompt, with
its fault hooks). A run that must equal an uninterrupted one is compared with a clean run of the same command
(made once per process).

    python bench/faults/campaign.py --only inputs
    FAULT_ROOT=/path/to/old/checkout python bench/faults/campaign.py --only inputs   # the same cases, before
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import Case, Outcome

# the tree whose commands run: this one, or FAULT_ROOT (e.g. a checkout of 3306971, for the "before" column)
ROOT = Path(os.environ.get("FAULT_ROOT") or Path(__file__).resolve().parents[2])
DRIVER = ROOT / "tests" / "resume_driver.py"
MODELS = ["glm4:9b", "qwen2.5:32b", "gemma3:27b"]  # the default role models (the judge another family)
REPLY = ("1. **json**: parse JSON text with json.loads and write it with json.dumps.\n"
         "2. **csv**: read rows with csv.reader and always open files with encoding='utf-8'.\n"
         "3. **logging**: set the level with logging.basicConfig(level=logging.INFO) per thread.")
SMALL = ["evaluator=deterministic_only", "planner=single_pass", "wiggum.max_rounds=1", "research.max_rounds=1",
         "research.compress=false", "research.enrich_urls=0", "search.provider=local", "benchmark=smoke"]
# the resume harness's sweep (tests/resume_harness.py): baseline, a repeat, 3 proposals, a race of 2, holdout runs
SWEEP = ["+sweep=synth_mutation", "backend=fake", *SMALL, "sweep.operators=[add_constraint,drop_sentence,reorder]",
         "sweep.allow_underpowered=true", "sweep.n_trials=4", "sweep.baseline_repeats=2", "sweep.race_top=2",
         "sweep.holdout_baseline_runs=2", "sweep.holdout_candidate_runs=1", "sweep.gate_tasks=0"]
AB = ["+sweep=prior_knowledge_ab", "backend=fake", *SMALL, "ab.allow_underpowered=true", "ab.replications=1"]
CALIBRATE = ["+sweep=calibrate", "backend=fake", *SMALL, "calibrate.allow_underpowered=true"]


@dataclass
class Ran:
    rc: int
    out: str
    err: str

    @property
    def line(self) -> str:
        lines = self.err.strip().splitlines()
        return lines[-1] if lines else f"(stderr empty; stdout tail {self.out.strip()[-160:]!r})"


def env_for(folder: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_TEST_")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), DDGS_DISABLED="1")
    for k in ("HARNESS_DEBUG", "OLLAMA_HOST", "RESEARCH_CACHE", "HARNESS_SKIP_PRIOR_KNOWLEDGE", "HARNESS_RESULTS_DIR"):
        env.pop(k, None)
    if folder is not None:
        env.update(HARNESS_RESULTS_DIR=str(folder / "results"), MLFLOW_TRACKING_URI=f"sqlite:///{folder / 'mlflow.db'}")
    env.update(extra)
    return env


_SHARED: list[Path] = []


def corpus() -> Path:
    """One corpus folder for the whole process: its path is in the prompts (the sources), so runs compared with a
    clean run must share it."""
    if not _SHARED:
        import atexit
        import tempfile

        _SHARED.append(Path(tempfile.mkdtemp(prefix="fault-inputs-corpus-")))
        atexit.register(shutil.rmtree, _SHARED[0], True)
    c = _SHARED[0]
    (c / "formats.md").write_text("# Data formats\nThe json module parses JSON; csv reads rows; pickle stores "
                                  "objects. Open text files with encoding='utf-8'.\n", encoding="utf-8")
    return c


def run(cwd: Path, argv: list[str], env: dict[str, str], timeout: float = 300) -> Ran:
    cwd.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return Ran(p.returncode, p.stdout, p.stderr)


def driver(folder: Path, args: list[str], *, fail: str | None = None, timeout: float = 300) -> Ran:
    """tests/resume_driver.py in `folder` (its results and MLflow store there): every run's reply scripted; `fail`: a
    run-id regex whose model calls raise BackendUnavailable (the server failing those runs)."""
    extra = {"HARNESS_TEST_FAIL_AFTER": fail} if fail else {}
    return run(folder, [str(DRIVER), *args, f"search.local_corpus=[{corpus()}]"], env_for(folder, **extra), timeout)


def written(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def config_error(ran: Ran, fragment: str = "") -> str:
    """'' when the command exited 2 with one `config error:` line holding fragment, else what was seen."""
    lines = ran.err.strip().splitlines()
    if ran.rc != 2:
        return f"exit {ran.rc} (want 2); {ran.line[:160]}"
    if len(lines) != 1 or not lines[0].startswith("config error: "):
        return f"{len(lines)} stderr lines, last {ran.line[:160]!r}"
    return "" if fragment in lines[0] else f"the line lacks {fragment!r}: {lines[0][:200]}"


def last_status(folder: Path) -> dict[str, str]:
    """run id -> status of its last runs.jsonl record (a redone run's record follows its failed one)."""
    out: dict[str, str] = {}
    runs = folder / "results" / "runs.jsonl"
    for line in runs.read_text(encoding="utf-8").splitlines() if runs.exists() else []:
        if line.strip():
            rec = json.loads(line)
            out[rec["run_id"]] = rec["status"]
    return out


def mlflow_status(folder: Path) -> dict[str, str]:
    if not (folder / "mlflow.db").exists():
        return {}
    with sqlite3.connect(folder / "mlflow.db") as conn:
        return dict(conn.execute("SELECT name, status FROM runs WHERE lifecycle_stage = 'active'").fetchall())


def study_trials(folder: Path) -> dict[int, tuple[str, float | None, int | None]]:
    """trial number -> (state, value, the trial it replaced) of the resume harness's study."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trials = optuna.load_study(study_name="synth_mutation",
                               storage=f"sqlite:///{folder / 'results' / 'optuna.db'}").get_trials()
    return {t.number: (t.state.name, None if t.value is None else round(t.value, 6), t.system_attrs.get("failed_trial"))
            for t in trials}


def counted_values(folder: Path) -> list[tuple[str, float | None]]:
    """The trials that count (not replaced by a copy), by slot: what a resumed study must share with a clean one."""
    trials = study_trials(folder)
    gone = {r for _, _, r in trials.values() if r is not None}
    return [(s, v) for n, (s, v, _) in sorted(trials.items()) if n not in gone]


_CLEAN: dict[str, list[tuple[str, float | None]]] = {}


def clean_values(tmp: Path) -> list[tuple[str, float | None]]:
    """The trial values of an uninterrupted run of SWEEP (once per process)."""
    if "sweep" not in _CLEAN:
        folder = tmp / "clean"
        ran = driver(folder, SWEEP)
        if ran.rc != 0:
            raise RuntimeError(f"the clean run failed: exit {ran.rc}; {ran.line}")
        _CLEAN["sweep"] = counted_values(folder)
    return _CLEAN["sweep"]


# -- 4: a failed run redone on resume is in runs.jsonl -----------------------------------------------------------


def _redone(first: Callable[[Path], Ran], again: Callable[[Path], Ran]) -> Callable[[Path], Outcome]:
    def case(tmp: Path) -> Outcome:
        folder = tmp / "run"
        ran = first(folder)
        failed = {k for k, s in last_status(folder).items() if s == "failed"}
        if not failed:
            return Outcome(False, f"the fault failed no run (exit {ran.rc}; {ran.line[:160]})")
        rerun = again(folder)
        last = last_status(folder)
        still = sorted(k for k in failed if last.get(k) != "ok")
        states = collections.Counter(last.values())
        said = (f"first exit {ran.rc}, {len(failed)} run(s) failed; rerun exit {rerun.rc}; last records "
                f"{dict(states)}")
        if still:
            return Outcome(False, f"{said}; {len(still)} redone run(s) have no successful record (e.g. {still[0]})")
        return Outcome(states == {"ok": len(last)}, said)

    return case


def _ab_server_fails_after(n: int) -> Callable[[Path], Outcome]:
    """+sweep=prior_knowledge_ab against the stand-in failing (HTTP 500) after n chats, then healthy."""
    from ollama_stub import OllamaStub, schema_reply

    state: dict[str, OllamaStub] = {}

    def args(folder: Path) -> list[str]:
        s = state["stub"]
        return ["-m", "experiments.run", "+sweep=prior_knowledge_ab", "backend=ollama", f"backend.host={s.url}",
                "backend.retries=1", "backend.backoff_s=0.05", "backend.timeout_s=20", "backend.concurrency=1",
                "evaluator=deterministic_only", "wiggum.max_rounds=1", "research.max_rounds=1",
                "research.compress=false", "research.enrich_urls=0", "search.provider=local", "benchmark=smoke",
                "ab.allow_underpowered=true", "ab.replications=3", f"search.local_corpus=[{corpus()}]"]

    def first(folder: Path) -> Ran:
        state["stub"].fault_chats("status", status=500, after=n)
        return run(folder, args(folder), env_for(folder))

    def again(folder: Path) -> Ran:
        state["stub"].clear_faults()
        return run(folder, args(folder), env_for(folder))

    def case(tmp: Path) -> Outcome:
        with OllamaStub(models=MODELS, default_reply=schema_reply(REPLY)) as s:
            state["stub"] = s
            return _redone(first, again)(tmp)

    return case


# -- 11: NaN and infinity ----------------------------------------------------------------------------------------

NON_FINITE = [("evaluator.rubric_weight=nan", "evaluator.rubric_weight=nan is out of range"),
              ("sweep.gate_z=nan", "sweep.gate_z=nan is out of range"),
              ("sweep.gate_z=inf", "sweep.gate_z=inf is out of range"),
              ("evaluator.dimensions.depth=nan", "evaluator.dimensions.depth=nan is out of range"),
              ("backend.timeout_s=inf", "backend.timeout_s=inf is out of range"),
              ("wiggum.threshold=-inf", "wiggum.threshold=-inf is out of range")]


def _refused_up_front(cases: list[tuple[list[str], str]], *, module: str = "experiments.run",
                      base: list[str] | None = None) -> Callable[[Path], Outcome]:
    """Each argument list: exit 2, one `config error:` line with its fragment, nothing written anywhere."""
    base = ["+sweep=synth_mutation", "backend=fake", *SMALL, "sweep.allow_underpowered=true",
            "sweep.n_trials=1"] if base is None else base

    def case(tmp: Path) -> Outcome:
        bad, lines = [], []
        for i, (args, fragment) in enumerate(cases):
            folder = tmp / f"c{i}"
            ran = run(folder / "cwd", ["-m", module, *base, *args], env_for(folder))
            problem = config_error(ran, fragment) or (f"wrote {written(folder)[:3]}" if written(folder) else "")
            if problem:
                bad.append(f"{' '.join(args)[:60]}: {problem}")
            lines.append(ran.line)
        if bad:
            return Outcome(False, f"{len(bad)} of {len(cases)} not refused up front: {' / '.join(bad)[:600]}")
        return Outcome(True, f"{len(cases)} of {len(cases)} exit 2, one line, nothing written; e.g. {lines[0][:160]}")

    return case


# -- 12: a benchmark YAML that is not UTF-8 ----------------------------------------------------------------------


def latin1_benchmark(tmp: Path) -> Outcome:
    pkg = tmp / "pkg"
    shutil.copytree(ROOT / "conf", pkg / "conf")  # conf/benchmark/latin.yaml, as a user adds a benchmark
    body = (b'name: latin\ndescription: "caf\xe9 tasks"\ntasks:\n  - id: a\n    task: "List 3 modules"\n'
            b"    split: train\n")
    path = pkg / "conf" / "benchmark" / "latin.yaml"
    path.write_bytes(body)
    env = env_for(tmp, PYTHONPATH=f"{pkg}{os.pathsep}{ROOT}")
    ran = run(tmp / "cwd", ["-m", "experiments.run", "+sweep=single", "backend=fake", "benchmark=latin"], env)
    offset = body.index(bytes([0xE9]))
    want = f"{path} is not UTF-8: byte 0xe9 at offset {offset} (line 2)"
    bad = config_error(ran, want) or (f"wrote {written(tmp / 'results')[:3]}" if written(tmp / "results") else "")
    return Outcome(not bad, bad or f"exit 2: {ran.line[:220]}")


# -- 13: Ctrl-C twice ---------------------------------------------------------------------------------------------


def _signals_mid(first: str, second: str | None, gap: float, *, at: str) -> Callable[[Path], Outcome]:
    """SWEEP under the driver (0.05 s per reply); `first` when a line holding `at` appears, `second` gap seconds
    later; then the same command again: the stop's bookkeeping is whole and the resume equals a clean run."""

    def case(tmp: Path) -> Outcome:
        want = clean_values(tmp)
        folder = tmp / "run"
        folder.mkdir(parents=True)
        env = env_for(folder, HARNESS_TEST_DELAY_S="0.05")
        p = subprocess.Popen([sys.executable, str(DRIVER), *SWEEP, f"search.local_corpus=[{corpus()}]"],
                             cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal's
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(ln.rstrip("\n") for ln in p.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + 300
        while not any(at in ln for ln in list(lines)):
            if p.poll() is not None or time.monotonic() > deadline:
                return Outcome(False, f"never reached {at!r} (exit {p.poll()}; {' / '.join(lines[-3:])[-300:]})")
            time.sleep(0.02)
        p.send_signal(getattr(signal, first))
        if second:
            time.sleep(gap)
            p.send_signal(getattr(signal, second))
        rc = p.wait(120)
        reader.join(10)
        code = 143 if first == "SIGTERM" else 130
        last = lines[-1] if lines else ""
        running = sorted(n for n, s in mlflow_status(folder).items() if s == "RUNNING")
        trials = study_trials(folder)
        queued = [n for n, (s, _, r) in trials.items() if s == "WAITING" and r is not None]
        interrupted = [n for n, (s, _, _) in trials.items() if s in ("RUNNING", "FAIL")]
        said = f"exit {rc}; {last[:80]!r}; MLflow RUNNING {running}; trials {dict((n, s) for n, (s, _, _) in trials.items())}"
        if rc != code or "run the same command again to resume" not in last or running:
            return Outcome(False, said)
        if "trial" in at and (not interrupted or not queued):
            return Outcome(False, f"{said}; the interrupted trial's copy was not queued")
        resumed = driver(folder, SWEEP)
        got = counted_values(folder)
        running = sorted(n for n, s in mlflow_status(folder).items() if s == "RUNNING")
        ok = resumed.rc == 0 and got == want and not running
        why = "" if resumed.rc == 0 else f" ({resumed.line[:200]})"
        return Outcome(ok, f"{said}; resume exit {resumed.rc}{why}, values {'equal' if got == want else 'DIFFER'} "
                           f"to a clean run's{'' if got == want else f' {got} vs {want}'}, MLflow RUNNING {running}")

    return case


# -- 14 and 15: where a run writes ------------------------------------------------------------------------------

SINGLE = ["+sweep=single", "backend=fake", *SMALL]


def tilde_results_dir(tmp: Path) -> Outcome:
    home, cwd = tmp / "home", tmp / "cwd"
    home.mkdir()
    env = env_for(None, HOME=str(home), HARNESS_RESULTS_DIR="~/x", MLFLOW_TRACKING_URI="")
    ran = run(cwd, [str(DRIVER), *SINGLE], env)
    x = home / "x"
    stores = {n: (x / n).exists() for n in ("runs.jsonl", "mlflow.db", "outputs", "traces", "hydra")}
    said = f"exit {ran.rc}; in $HOME/x: {[n for n, ok in stores.items() if ok]}; in ./: {written(cwd)[:4]}"
    said += "" if ran.rc == 0 else f"; {ran.line[:200]}"
    return Outcome(ran.rc == 0 and all(stores.values()) and not written(cwd), said)


def hydra_outside(tmp: Path) -> Outcome:
    cwd, res = tmp / "cwd", tmp / "res"
    cwd.mkdir()
    cwd.chmod(0o555)  # a read-only working directory (root writes there anyway: the check is that nothing is)
    try:
        ran = run(cwd, [str(DRIVER), *SINGLE, f"results_dir={res}"], env_for(None, MLFLOW_TRACKING_URI=""))
    finally:
        cwd.chmod(0o755)
    logs = [p for p in (res / "hydra").rglob("*.log")] if (res / "hydra").exists() else []
    said = f"exit {ran.rc}; in ./: {written(cwd)[:3]}; Hydra's log in results_dir: {bool(logs)}"
    said += "" if ran.rc == 0 else f"; {ran.line[:200]}"
    return Outcome(ran.rc == 0 and not written(cwd) and bool(logs), said)


def file_as_results_dir(tmp: Path) -> Outcome:
    afile = tmp / "afile"
    afile.write_text("not a folder\n")
    bad = []
    for where in (afile, afile / "sub"):
        ran = run(tmp / "cwd", ["-m", "experiments.run", "+sweep=single", "backend=fake"],
                  env_for(None, HARNESS_RESULTS_DIR=str(where), MLFLOW_TRACKING_URI=""))
        problem = config_error(ran, "is a file, not a folder")
        if problem:
            bad.append(problem)
    return Outcome(not bad, " / ".join(bad)[:400] or f"exit 2: {ran.line[:200]}")


# -- held: override typos and wrong types, bad synth.source URIs -------------------------------------------------

TYPOS = [(["backend=foo"], "backend=foo is not an option"),  # each after a valid sweep command (the last value wins)
         (["+sweep=nope"], "sweep=nope is not an option"),
         (["benchmark=nosuch"], "benchmark=nosuch is not an option"),
         (["planner=three_pass"], "planner=three_pass is not an option"),
         (["sweep.pruner=hyperband"], "sweep.pruner='hyperband' is not allowed"),
         (["sweep.n_trials=lots"], "sweep.n_trials"),
         (["sweep.ntrials=3"], "ntrials"),
         (["sweep.race_top=-1"], "sweep.race_top=-1 is out of range"),
         (["backend.timeout_s=fast"], "backend.timeout_s"),
         (["evaluator.composite=avg"], "evaluator.composite='avg' is not allowed"),
         (["search.provider=google"], "search.provider='google' is not allowed"),
         (["orchestrator.mode=sometimes"], "orchestrator.mode='sometimes' is not allowed"),
         (["sweep.operators=[nosuch]"], "sweep.operators item='nosuch' is not allowed"),
         (["sweep.allow_underpowered=maybe"], "sweep.allow_underpowered")]

SOURCES = [("prompts:/nosuch-synth-research@champion", "no prompt named 'nosuch-synth-research'"),
           ("prompts:/harness-synth-research@champ", "has no alias 'champ'"),
           ("prompts:/harness-synth-research/7", "has no version 7"),
           ("prompts:/harness@best", "has alias 'best'"),
           ("prompts:/other@champion", "no prompt other-synth-<task_type> is registered"),
           ("prompts:/harness/2", "a version pins one prompt"),
           ("harness@champion", "is not a prompt URI"),
           ("prompts:/", "synth.source")]


def bad_sources(tmp: Path) -> Outcome:
    """A sweep registers its baseline texts (harness-synth-<task_type>), then 8 bad synth.source values: each one
    line, exit 2, no new MLflow run or study."""
    folder = tmp / "reg"
    ran = driver(folder, ["+sweep=synth_mutation", "backend=fake", *SMALL, "sweep.allow_underpowered=true",
                          "sweep.n_trials=1", "sweep.holdout_top_k=0"])
    if ran.rc != 0:
        return Outcome(False, f"the registering sweep failed: exit {ran.rc}; {ran.line[:200]}")
    runs0, files0 = len(mlflow_status(folder)), written(folder / "results")
    bad, first = [], ""
    for source, fragment in SOURCES:
        r = run(folder, ["-m", "experiments.run", "+sweep=synth_mutation", "backend=fake", *SMALL,
                         "sweep.allow_underpowered=true", f"synth.source='{source}'"], env_for(folder))
        problem = config_error(r, fragment)
        if not problem and (len(mlflow_status(folder)) != runs0 or written(folder / "results") != files0):
            problem = "wrote to the stores"
        if problem:
            bad.append(f"{source}: {problem}")
        first = first or r.line
    if bad:
        return Outcome(False, f"{len(bad)} of {len(SOURCES)}: {' / '.join(bad)[:600]}")
    return Outcome(True, f"{len(SOURCES)} of {len(SOURCES)} exit 2, one line, nothing written; e.g. {first[:160]}")


LONG = "n" * 230

CASES = [
    Case("inputs.41.4-ab-rerun", "A/B (30 cells, ~75 chats), the stand-in failing (HTTP 500) after 60 chats, then "
         "healthy, same command",
         "the redone cells' successful records in runs.jsonl; every run id's last record ok",
         _ab_server_fails_after(60)),
    Case("inputs.41.4-calibrate-rerun", "calibration, generator run 2 failing (server 500), then healthy",
         "the redone runs' successful records in runs.jsonl",
         _redone(lambda f: driver(f, CALIBRATE, fail="-gen1-"), lambda f: driver(f, CALIBRATE))),
    Case("inputs.41.4-holdout-rerun", "a sweep whose holdout runs fail (exit 3), then healthy, same command",
         "the redone holdout runs' successful records in runs.jsonl",
         _redone(lambda f: driver(f, SWEEP, fail="-holdout-"), lambda f: driver(f, SWEEP))),
    Case("inputs.41.11-non-finite", "nan / inf / -inf in 6 settings (rubric_weight, gate_z, a dimension, ...)",
         "each refused up front: exit 2, one line, nothing written",
         _refused_up_front([([o], f) for o, f in NON_FINITE])),
    Case("inputs.41.11-non-finite-harness", "`python -m harness` with evaluator.rubric_weight=nan",
         "exit 2, one line, nothing written",
         _refused_up_front([(["evaluator.rubric_weight=nan"], "evaluator.rubric_weight=nan is out of range")],
                           module="harness", base=["List 3 modules", "backend=fake"])),
    Case("inputs.41.12-latin1-benchmark", "conf/benchmark/latin.yaml with a Latin-1 byte",
         "one line naming the file, the byte and its offset, exit 2", latin1_benchmark),
    Case("inputs.41.13-ctrl-c-twice-0.01", "Ctrl-C twice 0.01 s apart during trial #1, then the same command",
         "exit 130; the trial's copy queued, no MLflow run RUNNING; the resume equals a clean run",
         _signals_mid("SIGINT", "SIGINT", 0.01, at="trial 2/4 #1 task 1/3")),
    Case("inputs.41.13-ctrl-c-twice-0.05", "Ctrl-C twice 0.05 s apart during trial #1, then the same command",
         "exit 130; the trial's copy queued, no MLflow run RUNNING; the resume equals a clean run",
         _signals_mid("SIGINT", "SIGINT", 0.05, at="trial 2/4 #1 task 1/3")),
    Case("inputs.41.14-tilde", "HARNESS_RESULTS_DIR='~/x' (a literal tilde)",
         "every store, the outputs and Hydra's folder in $HOME/x; nothing in ./", tilde_results_dir),
    Case("inputs.41.15-hydra-folder", "a read-only working directory, results_dir= another folder",
         "Hydra's folder inside results_dir; nothing written in the working directory", hydra_outside),
    Case("inputs.41.15-file-results-dir", "HARNESS_RESULTS_DIR=<a file> (and <a file>/sub)",
         "one line, exit 2", file_as_results_dir),
    Case("inputs.41.1-long-name", "sweep.name of 230 characters", "one line with the limit, exit 2, nothing written",
         _refused_up_front([([f"sweep.name={LONG}"], "expected at most 100")])),
    Case("inputs.held-override-typos", "14 override typos and wrong types", "each one line, exit 2, nothing written",
         _refused_up_front(TYPOS, base=["+sweep=synth_mutation", "backend=fake", "benchmark=smoke",
                                         "sweep.allow_underpowered=true", "sweep.n_trials=1"])),
    Case("inputs.held-synth-source", "8 bad synth.source URIs against a registry a sweep filled",
         "each one line, exit 2, nothing written", bad_sources),
    Case("inputs.held-sigterm-holdout", "SIGTERM during the holdout, then the same command",
         "exit 143, no MLflow run RUNNING; the resume equals a clean run",
         _signals_mid("SIGTERM", None, 0.0, at="holdout baseline run 1/2 task 1/")),
]
