"""Behaviour-equivalence check across a refactor: the same scripted sweep, A/B and calibration, before and after.

  python bench/faults/refactor_equivalence.py run --root <source tree> --out <dir>  # the three jobs on <root>'s code: <dir>/digest.json
  python bench/faults/refactor_equivalence.py compare <a/digest.json> <b/digest.json>  # each difference (path: a vs b); exit 1 if any

Each job is the real CLI (experiments.run: precheck, Hydra, run_experiment) on the fake backend with a scripted reply per
prompt, through <root>/tests/resume_driver.py only (module paths may change between the trees, the command line
does not), with a folder of its own as cwd (results/ with optuna.db, mlflow.db, Hydra's folder). The folder is
WORK/<job>, one fixed path for every run, so that the paths in configs and the hashes over them (runs.jsonl's
config_hash) agree between runs; after the digest it moves to --out/<job>. Jobs:
  sweep      +sweep=synth_mutation on benchmark=smoke, 4 trials: baseline, a baseline repeat, search trials, the final
             race and the holdout
  ab         +sweep=prior_knowledge_ab on benchmark=smoke, 2 replications (ab.allow_underpowered)
  calibrate  +sweep=calibrate on 3 smoke tasks (its positive control fails on scripted replies: exit 1, recorded)
The digest holds per job: the exit code, the summary blocks printed on stdout, every Optuna study (study user
attrs; each trial's number, state, values, params, user and system attrs), every file under the job's folder
(.json and .jsonl parsed: ledgers, runs.jsonl, calibration store, contexts, chrome traces; text: summaries,
reports, promoted yaml, outputs; other files by name only), and every MLflow run (name, status, params, metrics
key -> last value and count, tags, parent's run name, artifact files with the text ones' contents) and trace (tags,
metadata, previews, spans: path, type, status, attributes).

Only what is volatile by nature is normalised (the run prints which keys and patterns it replaced, with counts):
timestamps and dates, durations (elapsed, wall, latency, duration, stage timings, Hydra's and chrome traces'
times, an A/B cell's record hash, which covers its wall times), MLflow run and trace ids (a run's id becomes its run
name), process ids, hostnames, the WORK, --out and --root paths. Everything else (scores, values, token counts,
text) is kept. Values compare with their JSON type (1 and 1.0 differ). The local corpus is one fixed folder, CORPUS
(its path is in the prompts, so every run must share it).
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CORPUS = Path(tempfile.gettempdir()) / "harness-equivalence-corpus"
WORK = Path(tempfile.gettempdir()) / "harness-equivalence-work"  # every run's jobs run here, then move to --out
CORPUS_TEXT = ("# Data formats\nThe json module parses JSON; csv reads rows; pickle stores objects. Open text files "
               "with encoding='utf-8'.\n")

COMMON = ["backend=fake", "evaluator=deterministic_only", "planner=single_pass", "wiggum.max_rounds=1",
          "research.max_rounds=1", "research.compress=false", "research.enrich_urls=0", "search.provider=local",
          "benchmark=smoke", f"search.local_corpus=[{CORPUS}]"]
JOBS = {
    "sweep": ["+sweep=synth_mutation", "sweep.operators=[add_constraint,drop_sentence,reorder]",
              "sweep.allow_underpowered=true", "sweep.n_trials=4", "sweep.baseline_repeats=2", "sweep.race_top=2",
              "sweep.holdout_baseline_runs=2", "sweep.holdout_candidate_runs=1", "sweep.gate_tasks=0"],
    "ab": ["+sweep=prior_knowledge_ab", "ab.allow_underpowered=true", "ab.replications=2"],
    "calibrate": ["+sweep=calibrate", "calibrate.allow_underpowered=true", "calibrate.tasks=3",
                  "calibrate.sims=400"],
}

# a JSON key, MLflow metric/param/tag key or Optuna attr whose value is a time, a duration, a process or a host:
# the whole key, or one of its dotted parts (sec.wall_s.p_holm, usage.latency_s)
VOLATILE_KEYS = {"time", "timestamp", "ts", "dur", "pid", "hostname", "created", "timings", "start_time", "end_time",
                 "mlflow.user", "mlflow.trace.sizeBytes", "mlflow.trace.sizeStats", "mlflow.spanStartTimeNs",
                 "cell_record"}  # cell_record: a hash of an A/B ledger line, which holds the cell's wall times
VOLATILE_PART = re.compile(r"(^|_)(elapsed|wall|latency|duration)(_[a-z]+)*$"
                           r"|^(finish|prepare|rescore|stage|moved_by)_s$|_(at|unix_us|host|pid)$")
TEXT_FILES = {".md", ".txt", ".yaml", ".yml", ".patch", ".diff", ".log", ".csv", ".py", ".html"}
SKIP_FILES = {".lock", ".db", ".sqlite", ".db-journal", ".sqlite-wal", ".sqlite-shm", ".db-wal", ".db-shm"}

TEXT_RULES = [  # (label, pattern, replacement): applied to every string after the path placeholders
    ("run-id stamp", re.compile(r"\b(\w+)-\d{8}-\d{6}-\d+-[0-9a-f]{6}\b"), r"\1-<stamp>"),
    ("trace id", re.compile(r"\btr-[0-9a-f]{32}\b"), "tr-<id>"),
    ("date-time", re.compile(r"\b\d{4}[-/]\d{2}[-/]\d{2}[T ]\d{2}:\d{2}:\d{2}([.,]\d+)?(Z|[+-]\d{2}:?\d{2})?"),
     "<datetime>"),
    ("Hydra run folder", re.compile(r"\b\d{4}-\d{2}-\d{2}/\d{2}-\d{2}-\d{2}\b"), "<date>/<time>"),
    ("h:mm:ss", re.compile(r"\b\d+:\d{2}:\d{2}\b"), "<hms>"),
    ("seconds", re.compile(r"(?<![\w.])\d+(\.\d+)? ?s\b"), "<secs>"),
    ("wall_s figures", re.compile(r"(?<=wall_s)[^\n]*"), None),  # the numbers after a wall_s label on its line
]
NUMBER = re.compile(r"[+-]?\d+(\.\d+)?%?")


class Normaliser:
    """Replaces the volatile parts of values and counts what it replaced."""

    def __init__(self, paths: dict[str, str]):
        self.paths = sorted(paths.items(), key=lambda kv: -len(kv[0]))  # longest first: a path inside another
        self.ids: dict[str, str] = {}  # MLflow run id -> "<run:name>"
        self.counts: collections.Counter = collections.Counter()

    def text(self, s: str) -> str:
        for real, tag in self.paths:
            for form in (real, Path(real).as_uri()):
                if form in s:
                    self.counts[f"path {tag}"] += s.count(form)
                    s = s.replace(form, tag)
        for rid, name in self.ids.items():
            if rid in s:
                self.counts["MLflow run id"] += s.count(rid)
                s = s.replace(rid, name)
        for label, rx, repl in TEXT_RULES:
            s, n = rx.subn(repl or (lambda m: NUMBER.sub("<n>", m.group(0))), s)
            if n:
                self.counts[f"text: {label}"] += n
        return s

    def key_volatile(self, key: str) -> bool:
        return key in VOLATILE_KEYS or any(VOLATILE_PART.search(part) for part in key.split("."))

    def value(self, v, key: str | None = None):
        """A JSON-like value: a volatile key's whole value replaced, strings normalised, the rest kept."""
        if key is not None and self.key_volatile(key):
            self.counts[f"key {key}"] += 1
            return "<volatile>"
        if isinstance(v, dict):
            return {self.text(str(k)): self.value(x, str(k)) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [self.value(x) for x in v]
        if isinstance(v, str):
            return self.text(v)
        return v


# -- running ---------------------------------------------------------------------------------------------------------


def run_job(root: Path, folder: Path, args: list[str]) -> tuple[int, str, float]:
    """The CLI through <root>/tests/resume_driver.py, cwd `folder`; (exit code, stdout + stderr, seconds)."""
    folder.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_") and k != "PYTHONPATH"}
    env.update(PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(root), DDGS_DISABLED="1",
               HARNESS_RESULTS_DIR=str(folder / "results"), MLFLOW_TRACKING_URI=f"sqlite:///{folder / 'mlflow.db'}")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, str(root / "tests" / "resume_driver.py"), *COMMON, *args], cwd=folder,
                       env=env, capture_output=True, text=True, timeout=900)
    output = p.stdout + p.stderr
    (folder / "output.txt").write_text(output, encoding="utf-8")
    return p.returncode, output, time.monotonic() - t0


def summary_blocks(output: str) -> dict[str, list[str]]:
    """The '===== X =====' ... '===== END X =====' blocks the CLI prints."""
    blocks, name, lines = {}, None, []
    for line in output.splitlines():
        m = re.fullmatch(r"===== (END )?(.+?) =====", line.strip())
        if m and not m.group(1):
            name, lines = m.group(2), []
        elif m and name == m.group(2):
            blocks[name] = lines
            name = None
        elif name:
            lines.append(line)
    return blocks


# -- reading back ----------------------------------------------------------------------------------------------------


def optuna_studies(db: Path, norm: Normaliser) -> dict:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
    out = {}
    for name in sorted(optuna.get_all_study_names(storage=storage)):
        study = optuna.load_study(study_name=name, storage=storage)
        trials = [{"number": t.number, "state": t.state.name, "values": t.values, "params": norm.value(t.params),
                   "user_attrs": norm.value(t.user_attrs), "system_attrs": norm.value(t.system_attrs)}
                  for t in study.get_trials(deepcopy=False)]
        system_attrs = storage.get_study_system_attrs(storage.get_study_id_from_name(name))
        out[name] = {"directions": [d.name for d in study.directions], "user_attrs": norm.value(study.user_attrs),
                     "system_attrs": norm.value(system_attrs), "trials": trials}
    return out


def mlflow_store(db: Path, norm: Normaliser) -> dict:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        q = lambda sql, *a: conn.execute(sql, a).fetchall()  # noqa: E731
        runs = q("SELECT run_uuid, name, status, artifact_uri, experiment_id, lifecycle_stage FROM runs")
        names = {rid: name for rid, name, *_ in runs}
        norm.ids.update({rid: f"<run:{name}>" for rid, name in names.items()})
        experiments = {eid: name for eid, name in q("SELECT experiment_id, name FROM experiments")}
        out_runs = collections.defaultdict(list)
        for rid, name, status, uri, eid, stage in runs:
            tags = dict(q("SELECT key, value FROM tags WHERE run_uuid = ?", rid))
            parent = tags.pop("mlflow.parentRunId", None)
            metrics = {k: {"last": v, "n": n} for k, v, n in q(
                "SELECT l.key, l.value, (SELECT count(*) FROM metrics m WHERE m.run_uuid = l.run_uuid AND m.key = "
                "l.key) FROM latest_metrics l WHERE l.run_uuid = ?", rid)}
            out_runs[name].append({
                "experiment": experiments.get(eid), "status": status, "lifecycle": stage,
                "parent": names.get(parent, parent) if parent else None,
                "params": norm.value(dict(q("SELECT key, value FROM params WHERE run_uuid = ?", rid))),
                "metrics": norm.value(metrics), "tags": norm.value(tags),
                "artifacts": artifacts(uri, norm)})
        traces = collections.defaultdict(list)
        for tid, eid, status, name, prev_in, prev_out, tin, tout, ttot in q(
                "SELECT request_id, experiment_id, status, trace_name, request_preview, response_preview, "
                "input_tokens, output_tokens, total_tokens FROM trace_info"):
            meta = dict(q("SELECT key, value FROM trace_request_metadata WHERE request_id = ?", tid))
            run = names.get(meta.get("mlflow.sourceRun"), "(no run)")
            trace = norm.value({
                "experiment": experiments.get(eid), "status": status, "name": name, "request_preview": prev_in,
                "response_preview": prev_out, "tokens": [tin, tout, ttot], "metadata": meta,
                "tags": dict(q("SELECT key, value FROM trace_tags WHERE request_id = ?", tid))})
            trace["spans"] = spans(q("SELECT span_id, parent_span_id, name, type, status, content FROM spans WHERE "
                                     "trace_id = ?", tid), norm)
            traces[run].append(trace)
    by_content = lambda xs: sorted(xs, key=lambda x: json.dumps(x, sort_keys=True))  # noqa: E731
    return {"experiments": sorted(experiments.values()),
            "runs": {k: by_content(v) for k, v in sorted(out_runs.items(), key=lambda kv: str(kv[0]))},
            "traces": {k: by_content(v) for k, v in sorted(traces.items(), key=lambda kv: str(kv[0]))}}


def spans(rows, norm: Normaliser) -> list:
    """Each span as its path of names from the root, type, status and attributes (timing ids and times left out)."""
    by_id = {sid: (parent, name) for sid, parent, name, *_ in rows}

    def path(sid):
        parts = []
        while sid in by_id:
            sid, name = by_id[sid]
            parts.append(name)
        return "/".join(reversed(parts))

    out = []
    for sid, _, _, typ, status, content in rows:
        attrs = {k: v for k, v in json.loads(content).get("attributes", {}).items() if k != "mlflow.traceRequestId"}
        out.append(norm.value({"path": path(sid), "type": typ, "status": status, "attributes": attrs}))
    return sorted(out, key=lambda x: json.dumps(x, sort_keys=True))


def artifacts(uri: str, norm: Normaliser) -> dict:
    folder = Path(uri.removeprefix("file://")) if uri and uri.startswith("file://") else None
    if not folder or not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): read(p, norm) for p in sorted(folder.rglob("*")) if p.is_file()}


def read(p: Path, norm: Normaliser):
    """A file's content for the digest: parsed JSON / JSON lines, normalised text, or only that it exists."""
    if p.suffix == ".json":
        return norm.value(json.loads(p.read_text(encoding="utf-8")))
    if p.suffix == ".jsonl":
        return [norm.value(json.loads(x)) for x in p.read_text(encoding="utf-8").splitlines() if x.strip()]
    if p.suffix in TEXT_FILES:
        return norm.text(p.read_text(encoding="utf-8", errors="replace")).splitlines()
    return "<binary>"


def job_files(folder: Path, norm: Normaliser) -> dict:
    """Every file under the job's folder but databases, locks, MLflow's artifact store and the captured output."""
    grouped = collections.defaultdict(list)
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if not p.is_file() or p.suffix in SKIP_FILES or "mlartifacts" in rel.parts or "mlruns" in rel.parts or \
                rel.as_posix() == "output.txt":
            continue
        grouped[norm.text(rel.as_posix())].append(read(p, norm))
    # files whose names differ only by a volatile part (a run-id stamp) are one list, in content order
    return {k: v[0] if len(v) == 1 else sorted(v, key=lambda x: json.dumps(x, sort_keys=True))
            for k, v in sorted(grouped.items())}


def digest_job(folder: Path, rc: int, output: str, norm: Normaliser) -> dict:
    results = folder / "results"
    mlflow = mlflow_store(folder / "mlflow.db", norm) if (folder / "mlflow.db").exists() else {}
    optuna_dbs = [p for p in sorted(results.rglob("*.db")) if _has_table(p, "studies")]
    return {"exit_code": rc,
            "stdout_summaries": {k: norm.text("\n".join(v)).splitlines() for k, v in summary_blocks(output).items()},
            "optuna": {norm.text(p.relative_to(folder).as_posix()): optuna_studies(p, norm) for p in optuna_dbs},
            "mlflow": mlflow, "files": job_files(folder, norm)}


def _has_table(db: Path, table: str) -> bool:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone())


def run(root: Path, out: Path) -> None:
    root, out = root.resolve(), out.resolve()
    if out == root or root in out.parents:
        sys.exit(f"--out {out} is inside the source tree {root}: nothing may be written there")
    if not (root / "tests" / "resume_driver.py").is_file():
        sys.exit(f"{root}/tests/resume_driver.py not found")
    out.mkdir(parents=True, exist_ok=True)
    if any((out / job).exists() for job in JOBS):
        sys.exit(f"{out} already holds job folders ({', '.join(JOBS)}): use an empty --out")
    CORPUS.mkdir(parents=True, exist_ok=True)
    if not (CORPUS / "formats.md").is_file() or (CORPUS / "formats.md").read_text(encoding="utf-8") != CORPUS_TEXT:
        (CORPUS / "formats.md").write_text(CORPUS_TEXT, encoding="utf-8")
    lock = open(f"{WORK}.lock", "w")  # noqa: SIM115 (held until the process exits)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(f"another equivalence run holds {WORK}.lock")
    shutil.rmtree(WORK, ignore_errors=True)
    norm = Normaliser({str(WORK): "<work>", str(out): "<out>", str(root): "<root>"})
    digest, t_all, started = {}, time.monotonic(), time.time()
    for job, args in JOBS.items():
        rc, output, secs = run_job(root, WORK / job, args)
        print(f"{job}: exit {rc} in {secs:.1f}s", flush=True)
        if rc != 0 and job != "calibrate":
            print(output[-3000:], file=sys.stderr)
        digest[job] = digest_job(WORK / job, rc, output, norm)
        shutil.move(WORK / job, out / job)
    changed = changed_since(root, started)
    if changed:
        print(f"WARNING: {len(changed)} file(s) under {root} changed during the run (by it or by someone else): "
              f"{changed[:10]}")
    (out / "digest.json").write_text(json.dumps(digest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"normalised ({sum(norm.counts.values())} replacements):")
    for what, n in sorted(norm.counts.items()):
        print(f"  {what}: {n}")
    print(f"digest: {out / 'digest.json'} ({len(flatten(digest))} values); all jobs {time.monotonic() - t_all:.1f}s")


def changed_since(root: Path, t: float) -> list[str]:
    """Files under root (hidden folders such as .git and .venv left out) modified since t."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [os.path.relpath(os.path.join(folder, f), root) for f in files
                  if os.path.getmtime(os.path.join(folder, f)) >= t]
    return sorted(found)


# -- comparing -------------------------------------------------------------------------------------------------------


def flatten(v, path: str = "") -> dict[str, object]:
    if isinstance(v, dict):
        if not v:
            return {path: {}}
        return {k: x for key, val in v.items() for k, x in flatten(val, f"{path}/{key}").items()}
    if isinstance(v, list):
        if not v:
            return {path: []}
        return {k: x for i, val in enumerate(v) for k, x in flatten(val, f"{path}[{i}]").items()}
    return {path: v}


def compare(a_path: Path, b_path: Path) -> int:
    a = flatten(json.loads(a_path.read_text(encoding="utf-8")))
    b = flatten(json.loads(b_path.read_text(encoding="utf-8")))
    missing = object()
    show = lambda v: "(absent)" if v is missing else json.dumps(v)  # noqa: E731
    diffs = [(k, a.get(k, missing), b.get(k, missing)) for k in sorted(a.keys() | b.keys())
             if show(a.get(k, missing)) != show(b.get(k, missing))]
    for k, x, y in diffs:
        print(f"{k}: {show(x)} vs {show(y)}")
    if diffs:
        print(f"{len(diffs)} difference(s) in {len(a.keys() | b.keys())} values")
        return 1
    print(f"identical: {len(a)} values compared")
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the three jobs with --root's code and write --out/digest.json")
    r.add_argument("--root", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("compare", help="print each difference between two digests; exit 1 if any")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        run(args.root, args.out)
    else:
        sys.exit(compare(args.a, args.b))


if __name__ == "__main__":
    main()
