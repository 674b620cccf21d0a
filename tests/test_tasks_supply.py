"""The task supply through the command line (`python -m experiments.run +sweep=import_tasks|generate_tasks`):
import of JSONL and CSV, a bad row (file and line, exit 2, nothing written), exact and near-duplicates, a holdout
task that repeats or paraphrases a train task refused by the loader, task ids that would name files outside
results_dir refused, a generator that returns garbage or is killed mid-way (one line, no half file, the rerun
resumes), and tasks.count=auto against a stored calibration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]

# The real CLI (experiments.run: precheck, Hydra, cli's exit codes) with the fake backend answering every prompt
# from the list in $TASKS_TEST_REPLIES ("@gen": a usable batch of distinct tasks made from the call's seed; the
# last entry repeats); $TASKS_TEST_KILL_AFTER=n sends SIGKILL at the (n+1)-th model call.
DRIVER = r'''
import json, os, random, signal, sys
sys.path.insert(0, os.environ["TASKS_TEST_ROOT"])
from harness import inference
from harness.inference._fake import FakeLLM

WORDS = ("json csv logging pathlib asyncio typing sqlite3 argparse socket threading heapq bisect zipfile tarfile "
         "hashlib secrets decimal fractions statistics itertools functools contextlib dataclasses enum uuid shutil "
         "tempfile glob fnmatch struct codecs unicodedata textwrap difflib pprint sched queue selectors signal mmap "
         "ctypes gzip bz2 lzma zlib base64 binascii email mailbox mimetypes html xml urllib http ftplib smtplib "
         "imaplib poplib telnetlib ssl ipaddress wsgiref webbrowser turtle cmd shlex tkinter gettext locale "
         "calendar zoneinfo datetime time timeit trace tracemalloc cProfile pdb faulthandler warnings abc atexit "
         "traceback gc inspect site importlib pkgutil modulefinder runpy ast dis tokenize keyword symtable "
         "compileall py_compile venv ensurepip sysconfig platform errno ctypes curses getpass").split()
replies = json.loads(os.environ.get("TASKS_TEST_REPLIES", '["@gen"]'))
kill_after = int(os.environ.get("TASKS_TEST_KILL_AFTER", "0"))
calls = [0]

def batch(seed):
    rng = random.Random(seed)
    out = []
    for i in range(5):
        a, b, c = rng.sample(WORDS, 3)
        kind = ("enumerated", "best_practices", "research")[(seed + i) % 3]
        text = {"enumerated": f"List 4 uses of the {a} module together with {b} and {c} in scripts.",
                "best_practices": f"Give best practices for combining {a} with {b} when {c} is involved.",
                "research": f"Research how {a} interacts with {b} and why {c} matters for it."}[kind]
        out.append({"task": text, "task_type": kind, "expected_count": 4 if kind == "enumerated" else None,
                    "required_terms": [a, b], "topic": a, "persona": "a beginner"})
    return json.dumps({"tasks": out})

def scripted(messages):
    calls[0] += 1
    if kill_after and calls[0] > kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
    r = replies[min(calls[0] - 1, len(replies) - 1)]
    return batch(int(os.environ.get("TASKS_TEST_SALT", "0")) * 1000 + calls[0]) if r == "@gen" else r

inference.register_backend("fake")(lambda cfg, role: FakeLLM(keyed={"": scripted}, model=cfg.model_for(role)))
from experiments import run
from experiments.tasks import cli_keys
sys.argv[0] = "experiments.run"
sys.argv[1:] = cli_keys(sys.argv[1:])
run.command_line_wins(sys.argv[1:])
run._precheck(sys.argv[1:])
run.hydra_main()
'''


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", DDGS_DISABLED="1", TASKS_TEST_ROOT=str(ROOT))
    e.pop("HARNESS_DEBUG", None)
    e.update(extra)
    return e


def cli(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.run", f"results_dir={tmp_path / 'res'}", *args],
                          env=env(**extra), cwd=tmp_path, capture_output=True, text=True, timeout=300)


def driver(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER, encoding="utf-8")
    return subprocess.run([sys.executable, str(script), f"results_dir={tmp_path / 'res'}", "backend=fake", *args],
                          env=env(**extra), cwd=tmp_path, capture_output=True, text=True, timeout=300)


def one_error(p: subprocess.CompletedProcess, code: int = 2) -> str:
    assert p.returncode == code, (p.returncode, p.stdout[-1500:], p.stderr[-1500:])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip() and not ln.startswith(("WARNING", "[", "warning"))]
    assert len(lines) == 1, p.stderr[-2000:]
    return lines[0]


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def bench_dir(tmp_path: Path, name: str, tasks: list[dict]) -> str:
    folder = tmp_path / "cfg" / "benchmark"
    folder.mkdir(parents=True, exist_ok=True)
    yaml.safe_dump({"name": name, "tasks": tasks}, open(folder / f"{name}.yaml", "w", encoding="utf-8"))
    return f"hydra.searchpath=[file://{tmp_path / 'cfg'}]"


ROWS = [
    {"task": "List 5 common pitfalls when writing asyncio code and how to avoid each."},
    {"task": "List five common pitfalls of writing asyncio code, and how to avoid each one."},  # near-duplicate
    {"task": "Give best practices for testing asyncio code.", "required_terms": ["mock", "IsolatedAsyncioTestCase"]},
    {"id": "gil", "task": "Research when threads, processes or asyncio suit CPython, given the GIL.", "split": "holdout"},
    {"task": "List 3 Python logging handlers and what each is for."},
    {"task": "Give best practices for handling file paths with pathlib.", "task_type": "best_practices"},
    {"task": "Explain how transactions and isolation levels work in the sqlite3 module."},
    {"task": "give best practices for testing asyncio code"},  # the same text as row 3
]


def check_written(path: Path, n_kept: int) -> dict:
    data = load(path)
    tasks = data["tasks"]
    assert len(tasks) == n_kept and {t["split"] for t in tasks} == {"train", "holdout"}
    from experiments.config import task_from_spec
    from experiments.config._benchmark import check_benchmark
    from experiments.config._schema import TaskSpec

    check_benchmark(tasks)  # the loader's own check passes: no holdout task repeats a train task
    for t in tasks:
        task_from_spec(TaskSpec(**{k: v for k, v in t.items()}))
    return data


def test_import_jsonl_drops_duplicates_infers_types_and_writes_provenance(tmp_path):
    src = tmp_path / "mine.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n\n", encoding="utf-8")
    out = tmp_path / "cfg" / "benchmark" / "mine.yaml"
    p = cli(tmp_path, "+sweep=import_tasks", f"tasks.source={src}", "tasks.name=mine", f"tasks.out={out}")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "rows: 8; kept: 6 (3 train + 3 holdout); dropped as duplicates: 2 (1 exact, 1 near" in p.stdout
    data = check_written(out, 6)
    by_line = {t["provenance"]["line"]: t for t in data["tasks"]}
    assert set(by_line) == {1, 3, 4, 5, 6, 7} and all(t["provenance"]["source"] == str(src) for t in data["tasks"])
    assert by_line[1]["task_type"] == "enumerated" and by_line[1]["expected_count"] == 5  # inferred from the text
    assert by_line[5]["expected_count"] == 3 and by_line[7]["task_type"] == "research"
    assert by_line[4]["id"] == "gil" and by_line[4]["split"] == "holdout"  # a given split is kept
    # stratified: each type has one task in each split
    for tt in ("enumerated", "best_practices", "research"):
        assert sorted(t["split"] for t in data["tasks"] if t["task_type"] == tt) == ["holdout", "train"]
    # the file is an ordinary benchmark: a single run on it composes and validates
    from experiments.config import compose_config, load_tasks, to_experiment, validate

    exp = validate(to_experiment(compose_config([f"hydra.searchpath=[file://{tmp_path / 'cfg'}]", "benchmark=mine",
                                                 "backend=fake"])), warn=False)
    assert len(load_tasks(exp.benchmark)) == 6


def test_import_csv_with_terms_and_split(tmp_path):
    src = tmp_path / "mine.csv"
    src.write_text("id,task,task_type,expected_count,required_terms,split\n"
                   "json-tools,\"List 4 tools for reading JSON, and when each fits.\",,,json; orjson,train\n"
                   "paths,Give best practices for handling file paths with pathlib.,best_practices,,Path,\n"
                   "sqlite,Explain how transactions work in the sqlite3 module.,research,,,holdout\n"
                   "logs,List 3 Python logging handlers and what each is for.,enumerated,3,,\n", encoding="utf-8")
    out = tmp_path / "csv.yaml"
    p = cli(tmp_path, "+sweep=import_tasks", f"tasks.source={src}", "tasks.name=csvtasks", f"tasks.out={out}")
    assert p.returncode == 0, p.stderr[-2000:]
    tasks = {t["id"]: t for t in check_written(out, 4)["tasks"]}
    assert tasks["json-tools"]["required_terms"] == ["json", "orjson"] and tasks["json-tools"]["expected_count"] == 4
    assert tasks["json-tools"]["split"] == "train" and tasks["sqlite"]["split"] == "holdout"
    assert tasks["logs"]["provenance"] == {"source": str(src), "line": 5}


@pytest.mark.parametrize("suffix,body,line,what", [
    (".jsonl", '{"task": "List 3 Python tools for tests."}\n{"task": "Explain it.", "expected_count": "many"}\n',
     2, "expected_count='many'"),
    (".jsonl", '{"task": "List 3 Python tools for tests."}\n\n{"task": "ok", "split": "test"}\n', 3, "split='test'"),
    (".jsonl", '{"task": "List 3 Python tools for tests."}\n{"task": "Explain', 2, "not JSON"),
    (".csv", "task,split\nList 3 Python tools for tests.,train\n,holdout\n", 3, "task='' is missing"),
])
def test_a_bad_row_is_one_line_naming_file_and_line_and_nothing_is_written(tmp_path, suffix, body, line, what):
    src = tmp_path / f"bad{suffix}"
    src.write_text(body, encoding="utf-8")
    out = tmp_path / "bad.yaml"
    p = cli(tmp_path, "+sweep=import_tasks", f"tasks.source={src}", "tasks.name=bad", f"tasks.out={out}")
    err = one_error(p)
    assert err.startswith(f"config error: {src} line {line}: ") and what in err, err
    assert not out.exists() and not (tmp_path / "res").exists()  # not even Hydra's job folder


def test_b6_the_same_task_text_in_train_and_holdout_is_refused(tmp_path):
    sp = bench_dir(tmp_path, "leaky", [
        {"id": "a", "task": "List 3 Python testing tools.", "task_type": "enumerated", "expected_count": 3,
         "split": "train"},
        {"id": "b", "task": "Explain the GIL in CPython.", "task_type": "research", "split": "train"},
        {"id": "c", "task": "list 3 python testing tools", "task_type": "enumerated", "expected_count": 3,
         "split": "holdout"},
        {"id": "d", "task": "Give best practices for logging.", "task_type": "best_practices", "split": "holdout"}])
    err = one_error(cli(tmp_path, sp, "benchmark=leaky", "backend=fake"))
    assert "holdout task 'c' has the same text as train task 'a'" in err, err


def test_b6_a_holdout_task_that_paraphrases_a_train_task_is_refused(tmp_path):
    sp = bench_dir(tmp_path, "para", [
        {"id": "pitfalls", "task": "List 5 common pitfalls when writing asyncio code and how to avoid each.",
         "task_type": "enumerated", "expected_count": 5, "split": "train"},
        {"id": "gil", "task": "Explain the GIL in CPython.", "task_type": "research", "split": "train"},
        {"id": "pitfalls-again", "task": "List five common pitfalls of writing asyncio code, and how to avoid each one.",
         "task_type": "enumerated", "expected_count": 5, "split": "holdout"},
        {"id": "logs", "task": "Give best practices for logging.", "task_type": "best_practices", "split": "holdout"}])
    err = one_error(cli(tmp_path, sp, "benchmark=para", "backend=fake"))
    assert "holdout task 'pitfalls-again' is a near-duplicate of (a paraphrase by the task supply's rule: MiniLM cosine " \
           "0.98 >= 0.78" in err, err
    assert "train task 'pitfalls'" in err


@pytest.mark.parametrize("bad_id", ["../escape", "a/b", "x..y"])
def test_b5_a_task_id_that_would_name_a_file_outside_results_dir_is_refused(tmp_path, bad_id):
    sp = bench_dir(tmp_path, "ids", [
        {"id": bad_id, "task": "List 3 Python testing tools.", "task_type": "enumerated", "expected_count": 3,
         "split": "train"},
        {"id": "ok", "task": "Explain the GIL in CPython.", "task_type": "research", "split": "holdout"}])
    err = one_error(cli(tmp_path, sp, "benchmark=ids", "backend=fake"))
    assert err.startswith("config error: benchmark.tasks[0].id=") and "'..'" in err, err
    assert not (tmp_path / "res").exists()


def test_the_shipped_benchmarks_pass_the_leak_check():
    from experiments.config._benchmark import check_benchmark

    for f in (ROOT / "conf" / "benchmark").glob("*.yaml"):
        check_benchmark(load(f)["tasks"])


GEN = ["+sweep=generate_tasks", "tasks.name=gen", "tasks.description=Python standard library modules"]


def test_generate_writes_a_split_benchmark_with_provenance_and_a_report(tmp_path):
    out = tmp_path / "gen.yaml"
    p = driver(tmp_path, *GEN, "tasks.count=12", f"tasks.out={out}", "tasks.generator_models=[alpha-1,beta-2]")
    assert p.returncode == 0, p.stderr[-2000:]
    data = check_written(out, 12)
    prov = data["tasks"][0]["provenance"]
    assert prov["prompt_version"] and "seed" in prov and "angle" in prov and "persona" in prov
    # two generator models, mixed round robin; neither of the producer's or the judge's family: no warning
    assert {t["provenance"]["generator"] for t in data["tasks"]} == {"fake:alpha-1", "fake:beta-2"}
    assert "warning: generator" not in p.stdout
    assert "asked: 12; generated: " in p.stdout and "type mix (train+holdout): " in p.stdout and "closest kept: " in p.stdout
    assert sum(t["split"] == "holdout" for t in data["tasks"]) == 6


def test_a_generator_that_returns_garbage_stops_with_exit_3_and_the_rerun_resumes(tmp_path):
    out = tmp_path / "gen.yaml"
    garbage = json.dumps(["@gen", "I am sorry, I cannot write tasks.", '{"tasks": [{"task": "x"}]}', "{}"])
    p = driver(tmp_path, *GEN, "tasks.count=12", f"tasks.out={out}", TASKS_TEST_REPLIES=garbage)
    assert "warning: generator fake-planner is of the 'fake' family, as the producer" in p.stdout  # the default
    err = one_error(p, 3)
    assert "no usable task in 3 call(s) in a row" in err and "run the same command again to resume" in err, err
    assert p.stdout.count("unusable reply") == 3 and not out.exists()
    journal = tmp_path / "res" / "tasks" / "gen.partial.jsonl"
    assert len(journal.read_text().splitlines()) == 4  # one usable batch, three skipped
    # the rerun with a healthy generator resumes: the first batch is kept, not asked again
    p = driver(tmp_path, *GEN, "tasks.count=12", f"tasks.out={out}", TASKS_TEST_SALT="7")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "resuming from" in p.stdout and "4 call(s) journalled, 5 task(s) generated" in p.stdout
    calls = {t["provenance"]["call"] for t in check_written(out, 12)["tasks"]}
    assert 0 in calls and max(calls) >= 4


def test_a_generator_killed_mid_way_leaves_no_half_file_and_the_rerun_resumes(tmp_path):
    out = tmp_path / "gen.yaml"
    p = driver(tmp_path, *GEN, "tasks.count=12", f"tasks.out={out}", TASKS_TEST_KILL_AFTER="2")
    assert p.returncode == -9 and not out.exists()
    p = driver(tmp_path, *GEN, "tasks.count=12", f"tasks.out={out}", TASKS_TEST_SALT="3")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "2 call(s) journalled, 10 task(s) generated" in p.stdout
    assert {0, 1, 2} <= {t["provenance"]["call"] for t in check_written(out, 12)["tasks"]}


def test_a_changed_description_does_not_resume_another_task_set(tmp_path):
    driver(tmp_path, *GEN, "tasks.count=12", f"tasks.out={tmp_path / 'g.yaml'}", TASKS_TEST_KILL_AFTER="1")
    err = one_error(driver(tmp_path, "+sweep=generate_tasks", "tasks.name=gen", "tasks.count=12",
                           "tasks.description=something else"))
    assert "holds tasks generated under another description" in err, err


def store_calibration(tmp_path: Path, *overrides: str, sigma: float = 0.3, tau: float = 0.3) -> str:
    """A stored calibration whose fingerprint is the one the command will compute (the fake backend, the default
    benchmark and harness config), with timings."""
    from experiments.config import backend_identity, compose_config, load_tasks, to_experiment
    from experiments.storage import calibration_fingerprint, fingerprint_key
    from harness.inference import make_roles

    from experiments.tasks import cli_keys

    exp = to_experiment(compose_config(cli_keys(["backend=fake", f"results_dir={tmp_path / 'res'}", *overrides])))
    fp = calibration_fingerprint(exp, backend_identity(make_roles(exp.backend, tmp_path / "x")), load_tasks(exp.benchmark))
    key = fingerprint_key(fp)
    check = {"name": "A/A", "test": "t", "alternative": "two-sided", "n": 4, "mean_diff": 0.0, "p": 0.5,
             "min_p": 0.01, "status": "pass", "detail": ""}
    cal = {"version": 2, "fingerprint": fp, "key": key, "created": "2026-11-28T00:00:00", "design": {},
           "tasks": ["a"], "sigma": sigma, "repeats": 2, "n_tasks": 4, "range_of_means": 1.0, "per_task_sd": {},
           "sigma_ci": [0.2, 0.5], "judge_sigma": 0.1, "judge_dimensions": {}, "generator_dimensions": {},
           "aa": check, "control": {**check, "name": "control"}, "mde": {}, "needed": {},
           "cost": {"llm_calls": 10.0, "uncached_calls": 8.0, "tokens": 3000.0, "wall_s": 60.0, "prepare_calls": 5.0,
                    "prepare_s": 20.0, "rescore_s": 5.0, "runs": 12},
           "decomposition": {"sampled": {"tau": tau}}}
    folder = tmp_path / "res" / "calibration"  # where the command looks (results_dir is not in the fingerprint)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{key}.json").write_text(json.dumps(cal), encoding="utf-8")
    return key


def test_count_auto_without_a_stored_calibration_says_to_calibrate_first(tmp_path):
    err = one_error(driver(tmp_path, *GEN, "tasks.count=auto", "tasks.effect=0.3"))
    assert "tasks.count=auto needs a stored calibration" in err and "+sweep=calibrate` first" in err, err
    assert not (tmp_path / "res").exists()


def test_count_auto_sizes_the_holdout_from_the_stored_calibration(tmp_path):
    store_calibration(tmp_path, "+sweep=generate_tasks", "tasks.name=gen", sigma=0.3, tau=0.3)
    out = tmp_path / "auto.yaml"
    p = driver(tmp_path, *GEN, "tasks.count=auto", "tasks.effect=1.0", f"tasks.out={out}")
    assert p.returncode == 0, p.stderr[-2000:]
    from experiments.stats import decision_power

    want = decision_power(0.3, 0.3, n_train=12, n_holdout=12, alpha=0.05, level=0.025, baseline_runs=1,
                          holdout_runs=(3, 3), power=0.8, target_effect=1.0, sims=1000, train_filter="positive",
                          futility_block=4, sigma_df=4, race_block=4, race_z=1.0).needed
    holdout, train = want[1], max(want)
    assert f"on {holdout} holdout tasks; train {train}" in p.stdout, p.stdout[-3000:]
    assert "sigma 0.300 (run noise, 4 df)" in p.stdout and "tau 0.300 from its A/A' arm" in p.stdout
    assert "task runs" in p.stdout and " h one run at a time" in p.stdout
    tasks = load(out)["tasks"]
    assert sum(t["split"] == "holdout" for t in tasks) == holdout and len(tasks) == holdout + train


def test_an_embedded_generator_given_a_gguf_path_is_named_by_that_file(monkeypatch):
    """The embedded backend serves every role from backend.embedded_model_path when set: the provenance and the
    family warning name that file, not the configured default model (a Qwen GGUF was recorded as SmolLM2)."""
    from types import SimpleNamespace

    from experiments.tasks._generate import model_family, served_name

    monkeypatch.delenv("HARNESS_EMBEDDED_MODEL", raising=False)
    emb = SimpleNamespace(kind="embedded", embedded_model_path="/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    assert served_name(emb, "SmolLM2-135M-Instruct") == "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    assert model_family(served_name(emb, "SmolLM2-135M-Instruct")) == "qwen"
    default = SimpleNamespace(kind="embedded", embedded_model_path=None)
    assert served_name(default, "SmolLM2-135M-Instruct") == "SmolLM2-135M-Instruct"
    monkeypatch.setenv("HARNESS_EMBEDDED_MODEL", "/m/gemma-2b.gguf")
    assert served_name(default, "SmolLM2-135M-Instruct") == "gemma-2b.gguf"
    ollama = SimpleNamespace(kind="ollama", embedded_model_path="/models/x.gguf")
    assert served_name(ollama, "qwen2.5:32b") == "qwen2.5:32b"
