"""Faults of the task supply (`+sweep=import_tasks` / `+sweep=generate_tasks`): a file the command did not write is
never replaced without tasks.overwrite=true; `${...}` in a task is text, never an interpolation; two tasks with one
id load; a generation that stops adding tasks stops; bad journals and calibrations are one line; the harness's
runs.jsonl and a folder of files are sources; the persona asked is the one recorded; a small holdout is said at
import time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_tasks_supply import GEN, ROOT, cli, driver, one_error, store_calibration

from experiments.config import ConfigError, compose_config, load_tasks, to_experiment, validate

ROWS = [{"task": "List 3 Python logging handlers and what each is for."},
        {"task": "Give best practices for handling file paths with pathlib."},
        {"task": "Explain how transactions and isolation levels work in the sqlite3 module."},
        {"task": "Research when threads, processes or asyncio suit CPython, given the GIL."}]


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def exp_of(tmp_path: Path, *overrides: str):
    return to_experiment(compose_config([f"results_dir={tmp_path / 'res'}", "backend=fake", *overrides]))


def run_import(tmp_path: Path, *overrides: str) -> list[str]:
    """The import in this process: the lines it printed (ConfigError raised as the CLI would exit 2 on it)."""
    from experiments.run import run_experiment

    lines: list[str] = []
    run_experiment(compose_config([f"results_dir={tmp_path / 'res'}", "+sweep=import_tasks", *overrides]),
                   out=lines.append)
    return lines


def loaded(tmp_path: Path, name: str, folder: str = "cfg"):
    """The benchmark as the loader reads it: composed from its config folder, then validated."""
    exp = to_experiment(compose_config([f"hydra.searchpath=[file://{tmp_path / folder}]", f"benchmark={name}",
                                        "backend=fake"]))
    validate(exp, warn=False)
    return load_tasks(exp.benchmark)


# -- 1. a file the command did not write is never replaced without being asked ------------------------------------


def test_overwrites_a_file_the_command_did_not_write_is_refused_in_one_line(tmp_path):
    src = jsonl(tmp_path / "mine.jsonl", ROWS)
    for name, body in (("source.py", "print('the project's source')\n"), ("hand.yaml", "name: hand\ntasks: []\n")):
        target = tmp_path / name
        target.write_text(body, encoding="utf-8")
        err = one_error(cli(tmp_path, "+sweep=import_tasks", f"tasks.source={src}", "tasks.name=mine",
                            f"tasks.out={target}"))
        assert (f"{target} exists and was not written by this command; nothing written: pass tasks.overwrite=true"
                in err or "is not a .yaml file" in err), err
        assert target.read_text(encoding="utf-8") == body


@pytest.mark.parametrize("kind,name", [("import_tasks", "asyncio_practices"), ("generate_tasks", "smoke")])
def test_overwrites_a_shipped_benchmark_is_refused_before_anything_runs(tmp_path, kind, name):
    from experiments.tasks import check_task_supply

    src = jsonl(tmp_path / "mine.jsonl", ROWS)
    exp = exp_of(tmp_path, f"+sweep={kind}", f"tasks.name={name}", f"tasks.source={src}",
                 "tasks.description=Python standard library modules")
    with pytest.raises(ConfigError, match=rf"conf/benchmark/{name}.yaml exists and was not written by this command"):
        check_task_supply(exp)


def test_overwrites_a_rerun_replaces_its_own_file_but_not_one_the_user_edited(tmp_path):
    src = jsonl(tmp_path / "mine.jsonl", ROWS)
    out = tmp_path / "cfg" / "benchmark" / "mine.yaml"
    args = ("+sweep=import_tasks", f"tasks.source={src}", "tasks.name=mine", f"tasks.out={out}")
    assert cli(tmp_path, *args).returncode == 0
    assert out.read_text(encoding="utf-8").startswith("# Written by experiments.tasks (sha256 ")
    assert cli(tmp_path, *args).returncode == 0  # unchanged since: the command's own file
    edited = out.read_text(encoding="utf-8").replace("split: holdout", "split: train", 1)
    out.write_text(edited, encoding="utf-8")
    err = one_error(cli(tmp_path, *args))
    assert "exists and was edited since this command wrote it; nothing written" in err, err
    assert out.read_text(encoding="utf-8") == edited
    p = cli(tmp_path, *args, "tasks.overwrite=true")
    assert p.returncode == 0, p.stderr[-2000:]
    assert out.read_text(encoding="utf-8") != edited


# -- 2. `${...}` in a task is text ----------------------------------------------------------------------------------

DOLLARS = ["Explain how ${HOME} is expanded in bash scripts and when it is not.",
           "Explain why ${oc.env:HOME} in a YAML config reads the environment.",
           "Explain what \\${x} and \\\\${y} mean to OmegaConf's parser."]


def test_interpolation_an_imported_task_loads_back_as_the_exact_text(tmp_path):
    src = jsonl(tmp_path / "mine.jsonl", [{"task": t} for t in DOLLARS] + ROWS)
    run_import(tmp_path, f"tasks.source={src}", "tasks.name=dollars",
               f"tasks.out={tmp_path / 'cfg' / 'benchmark' / 'dollars.yaml'}")
    texts = {t.task for t in loaded(tmp_path, "dollars")}
    assert set(DOLLARS) <= texts and not any(str(Path.home()) in t for t in texts)


def test_interpolation_a_hand_written_task_is_not_resolved(tmp_path):
    folder = tmp_path / "cfg" / "benchmark"
    folder.mkdir(parents=True)
    (folder / "hand.yaml").write_text(
        "name: hand\ntasks:\n"
        "- {id: a, task: 'Explain how ${HOME} is expanded in bash.', split: train}\n"
        "- {id: b, task: 'Explain ${oc.env:HOME} in OmegaConf.', split: holdout, required_terms: ['${HOME}']}\n"
        "- {id: c, task: 'Explain what \\${x} means.', split: train}\n", encoding="utf-8")
    tasks = {t.id: t for t in loaded(tmp_path, "hand")}
    assert tasks["a"].task == "Explain how ${HOME} is expanded in bash."
    assert tasks["b"].task == "Explain ${oc.env:HOME} in OmegaConf." and tasks["b"].required_terms == ("${HOME}",)
    assert tasks["c"].task == "Explain what ${x} means."  # OmegaConf's own escape reads as it always did


def test_interpolation_an_arms_overrides_keep_the_text(tmp_path):
    """An A/B arm's config is the experiment's made a config node again (apply_overrides): the text stays as read."""
    from experiments.config import apply_overrides

    folder = tmp_path / "cfg" / "benchmark"
    folder.mkdir(parents=True)
    (folder / "hand.yaml").write_text("name: hand\ntasks:\n- {id: a, task: 'Explain ${HOME} and \\\\${x}.'}\n",
                                      encoding="utf-8")
    exp = to_experiment(compose_config([f"hydra.searchpath=[file://{tmp_path / 'cfg'}]", "benchmark=hand",
                                        "backend=fake"]))
    assert exp.benchmark.tasks[0].task == "Explain ${HOME} and \\${x}."
    assert apply_overrides(exp, {"seed": 3}).benchmark.tasks[0].task == exp.benchmark.tasks[0].task


def test_interpolation_a_generated_task_loads_back_as_the_exact_text(tmp_path):
    text = "Explain how ${HOME} and ${oc.env:PATH} are expanded by the shell in scripts."
    batch = json.dumps({"tasks": [{"task": text, "task_type": "research", "expected_count": None,
                                   "required_terms": ["${HOME}"], "topic": "shell", "persona": "a beginner"}]})
    out = tmp_path / "cfg" / "benchmark" / "gen.yaml"
    p = driver(tmp_path, *GEN, "tasks.count=6", f"tasks.out={out}", TASKS_TEST_REPLIES=json.dumps([batch, "@gen"]))
    assert p.returncode == 0, p.stderr[-2000:]
    assert text in {t.task for t in loaded(tmp_path, "gen")}


# -- 3. ids: renamed past every taken one; a written file always loads ----------------------------------------------


def test_duplicate_ids_are_renamed_past_taken_ones_and_the_file_loads(tmp_path):
    src = jsonl(tmp_path / "ids.jsonl", [{**r, "id": i} for r, i in zip(ROWS, ("dup-2", "dup", "dup", "other"))])
    lines = run_import(tmp_path, f"tasks.source={src}", "tasks.name=ids",
                       f"tasks.out={tmp_path / 'cfg' / 'benchmark' / 'ids.yaml'}")
    assert sorted(t.id for t in loaded(tmp_path, "ids")) == ["dup", "dup-2", "dup-3", "other"]
    assert any("renamed 'dup' (line 3) to 'dup-3'" in ln for ln in lines), lines


def test_the_writer_refuses_a_benchmark_the_loader_would_refuse(tmp_path):
    from experiments.tasks._rows import Candidate
    from experiments.tasks._write import benchmark_yaml, write_benchmark

    out = tmp_path / "bad.yaml"
    exp = exp_of(tmp_path, "+sweep=import_tasks", "tasks.name=bad", f"tasks.out={out}")
    tasks = [(Candidate("same", "List 3 Python testing tools.", "enumerated", 3), "train"),
             (Candidate("same", "Explain the GIL in CPython.", "research"), "holdout")]
    with pytest.raises(ConfigError, match=r"would not load \(benchmark.tasks\[1\].id='same' is a duplicate"):
        write_benchmark(exp, benchmark_yaml("bad", "two ids", [], tasks))
    assert not out.exists()


# -- 4. a generation that adds nothing stops; the count has a bound --------------------------------------------------


def test_count_above_the_bound_is_refused_saying_what_is_allowed(tmp_path):
    with pytest.raises(ConfigError, match=r"tasks.count=100000 is not allowed; expected a number of tasks from 2 to "
                                          r"1000"):
        validate(exp_of(tmp_path, *GEN, "tasks.count=100000"), warn=False)


def test_a_generator_that_only_repeats_itself_stops_and_says_why(tmp_path):
    from experiments.tasks._generate import STALL_CALLS

    same = json.dumps({"tasks": [{"task": r["task"], "task_type": "research", "expected_count": None,
                                  "required_terms": [], "topic": "", "persona": "a beginner"} for r in ROWS[:3]]})
    out = tmp_path / "gen.yaml"
    p = driver(tmp_path, *GEN, "tasks.count=40", f"tasks.out={out}", TASKS_TEST_REPLIES=json.dumps([same]))
    assert p.returncode == 0, p.stderr[-2000:]
    assert (f"stopped: the last {STALL_CALLS} generator calls added no new task" in p.stdout
            and "3 of 40 tasks kept" in p.stdout), p.stdout[-2000:]
    journal = tmp_path / "res" / "tasks" / "gen.partial.jsonl"
    assert len(journal.read_text().splitlines()) == 1 + STALL_CALLS


# -- 5. one line for a bad journal or calibration; a reply's extra tasks; long tasks; a BOM ------------------------


def test_a_journal_record_without_model_is_one_line_naming_file_and_line(tmp_path):
    from experiments.tasks import check_task_supply
    from experiments.tasks._generate import journal_path, spec_of

    exp = exp_of(tmp_path, *GEN)
    rec = {"spec": spec_of(exp), "call": 0, "model": "fake:x", "seed": 0, "angle": "a", "persona": "p",
           "tasks": [{"task": "Research how zipfile handles errors.", "task_type": "research"}]}
    path = journal_path(exp)
    path.parent.mkdir(parents=True)
    jsonl(path, [rec, {k: v for k, v in rec.items() if k != "model"}])
    with pytest.raises(ConfigError, match=rf"^{path}:2: `model` is missing"):
        check_task_supply(exp)


@pytest.mark.parametrize("sigma", ["high", -1.0])
def test_a_stored_calibration_with_a_bad_sigma_is_one_line(tmp_path, monkeypatch, sigma):
    from experiments.tasks._sizing import size

    monkeypatch.setenv("HARNESS_RESULTS_DIR", str(tmp_path / "res"))  # where store_calibration puts it

    key = store_calibration(tmp_path, "+sweep=generate_tasks", "tasks.name=gen", sigma=sigma)
    for named in ("", key):
        exp = exp_of(tmp_path, *GEN, "tasks.count=auto", f"tasks.calibration={named}")
        with pytest.raises(ConfigError, match=r"sigma=.*expected the run noise"):
            size(exp)


def test_a_named_calibration_of_another_fingerprint_is_said(tmp_path):
    key = store_calibration(tmp_path, "+sweep=generate_tasks", "tasks.name=gen", "benchmark=smoke")
    out = tmp_path / "auto.yaml"
    p = driver(tmp_path, *GEN, "tasks.count=auto", "tasks.effect=2.0", f"tasks.calibration={key}",
               f"tasks.out={out}")
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"warning: tasks.calibration={key} was measured under another fingerprint" in p.stdout, p.stdout[-2000:]


def test_a_reply_with_more_tasks_than_asked_keeps_what_was_asked(tmp_path):
    many = json.dumps({"tasks": [{"task": f"Research how the {m} module number {i} handles errors.",
                                  "task_type": "research", "expected_count": None, "required_terms": [],
                                  "topic": m, "persona": "a beginner"}
                                 for i, m in enumerate(["zipfile", "ftplib", "imaplib", "gzip", "bz2"] * 100)]})
    p = driver(tmp_path, *GEN, "tasks.count=4", f"tasks.out={tmp_path / 'gen.yaml'}",
               TASKS_TEST_REPLIES=json.dumps([many, "@gen"]))
    assert p.returncode == 0, p.stderr[-2000:]
    first = json.loads((tmp_path / "res" / "tasks" / "gen.partial.jsonl").read_text().splitlines()[0])
    assert len(first["tasks"]) == 5  # min(batch, count + 1) asked


def test_a_task_longer_than_the_bound_is_refused_naming_its_row(tmp_path):
    from experiments.tasks._rows import MAX_TASK_CHARS, read_rows

    src = jsonl(tmp_path / "long.jsonl", [ROWS[0], {"task": "word " * (MAX_TASK_CHARS // 4)}])
    with pytest.raises(ConfigError, match=rf"^{src} line 2: the task is [\d,]+ characters long .*expected at most"):
        read_rows(src)


def test_a_csv_with_a_utf8_byte_order_mark_reads(tmp_path):
    from experiments.tasks._rows import read_rows

    src = tmp_path / "excel.csv"
    src.write_bytes(b"\xef\xbb\xbf" + "task,split\nList 3 Python logging handlers.,train\n".encode())
    assert [c.task for c in read_rows(src)] == ["List 3 Python logging handlers."]


# -- 6. sources: runs.jsonl, a folder of files; the headroom screen on an import ------------------------------------


def test_import_from_the_harness_runs_jsonl_takes_each_runs_task_not_its_answer(tmp_path):
    runs = tmp_path / "runs.jsonl"
    recs = [{"run_id": f"r{i}", "task": r["task"], "clean_task": r["task"], "status": "ok",
             "plan": {"task_type": tt}, "scores": {"composite": 7.0}, "output_path": f"outputs/{i}.md"}
            for i, (r, tt) in enumerate(zip(ROWS, ("enumerated", "best_practices", "research", "research")))]
    recs.insert(2, {"run_id": "child", "task": "What is a WAL?", "parent_run_id": "r1", "plan": {}})
    jsonl(runs, recs)
    lines = run_import(tmp_path, f"tasks.source={runs}", "tasks.name=mine",
                       f"tasks.out={tmp_path / 'cfg' / 'benchmark' / 'mine.yaml'}")
    tasks = yaml.safe_load((tmp_path / "cfg" / "benchmark" / "mine.yaml").read_text(encoding="utf-8"))["tasks"]
    assert sorted(t["task"] for t in tasks) == sorted(r["task"] for r in ROWS)
    assert {t["provenance"]["run_id"] for t in tasks} == {"r0", "r1", "r2", "r3"}
    assert {t["task_type"] for t in tasks if t["provenance"]["run_id"] == "r1"} == {"best_practices"}
    assert any(ln.startswith("===== END TASKS IMPORT") for ln in lines)


def test_import_from_a_folder_of_text_files_one_task_a_file(tmp_path):
    folder = tmp_path / "tasks"
    (folder / "sub").mkdir(parents=True)
    for i, r in enumerate(ROWS):
        (folder / ("sub" if i % 2 else "") / f"t{i}.{'md' if i % 2 else 'txt'}").write_text(r["task"] + "\n")
    (folder / "notes.py").write_text("print('not a task')\n")
    run_import(tmp_path, f"tasks.source={folder}", "tasks.name=folder",
               f"tasks.out={tmp_path / 'cfg' / 'benchmark' / 'folder.yaml'}")
    tasks = yaml.safe_load((tmp_path / "cfg" / "benchmark" / "folder.yaml").read_text(encoding="utf-8"))["tasks"]
    assert sorted(t["id"] for t in tasks) == ["t0", "t1", "t2", "t3"]
    assert {t["provenance"]["source"] for t in tasks} == {str(folder / "t0.txt"), str(folder / "sub" / "t1.md"),
                                                          str(folder / "t2.txt"), str(folder / "sub" / "t3.md")}


def test_the_headroom_screen_runs_on_an_import_behind_the_same_knob(tmp_path):
    import subprocess
    import sys

    from test_task_headroom import SCREEN
    from test_tasks_supply import DRIVER, env

    src = jsonl(tmp_path / "mine.jsonl", ROWS + [{"task": "List 4 tools for reading JSON, and when each fits."},
                                               {"task": "Explain how the zipfile module handles errors."}])
    script = tmp_path / "driver.py"
    script.write_text(DRIVER.replace("from experiments import run\n", SCREEN + "from experiments import run\n"))
    out = tmp_path / "mine.yaml"
    p = subprocess.run([sys.executable, str(script), f"results_dir={tmp_path / 'res'}", "backend=fake",
                        "+sweep=import_tasks", f"tasks.source={src}", "tasks.name=mine", f"tasks.out={out}",
                        "tasks.headroom=true"],
                       env=env(HEADROOM_TEST_SCORES=json.dumps(["5.0", "fail", "9.8", "6.0"]),
                               HEADROOM_TEST_LOG=str(tmp_path / "screened.log")),
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "headroom screen: 6 screened" in p.stdout and "kept: 4, baseline composite" in p.stdout, p.stdout[-2000:]
    assert len(yaml.safe_load(out.read_text(encoding="utf-8"))["tasks"]) == 4


# -- 7. the persona asked; a dropped duplicate names the task it repeats ---------------------------------------------


def test_a_generated_tasks_persona_is_the_one_the_call_asked_for(tmp_path):
    from experiments.tasks._generate import PERSONAS

    batch = json.dumps({"tasks": [{"task": r["task"], "task_type": "research", "expected_count": None,
                                   "required_terms": [], "topic": "", "persona": "words of the reply, not a persona"}
                                  for r in ROWS]})
    out = tmp_path / "gen.yaml"
    p = driver(tmp_path, *GEN, "tasks.count=4", f"tasks.out={out}", TASKS_TEST_REPLIES=json.dumps([batch]))
    assert p.returncode == 0, p.stderr[-2000:]
    personas = {t["provenance"]["persona"] for t in yaml.safe_load(out.read_text(encoding="utf-8"))["tasks"]}
    assert personas == {PERSONAS[0]}


def test_a_dropped_duplicate_names_the_row_it_repeats_not_itself(tmp_path):
    src = jsonl(tmp_path / "mine.jsonl", ROWS + [ROWS[1]])
    lines = run_import(tmp_path, f"tasks.source={src}", "tasks.name=mine", f"tasks.out={tmp_path / 'mine.yaml'}")
    dropped = [ln for ln in lines if ln.startswith("dropped ")]
    assert len(dropped) == 1 and "(line 5): the same text as line 2 (" in dropped[0], dropped


# -- 8. too few holdout tasks for the sweep's first look: said at import time ---------------------------------------


def test_an_import_with_too_few_holdout_tasks_for_the_first_look_says_so(tmp_path):
    from experiments.stats import holdout_tasks_needed, level

    need = holdout_tasks_needed(level(0.05, 1))
    src = jsonl(tmp_path / "mine.jsonl", ROWS)
    lines = run_import(tmp_path, f"tasks.source={src}", "tasks.name=mine", f"tasks.out={tmp_path / 'mine.yaml'}")
    warn = [ln for ln in lines if ln.startswith("warning: ")]
    assert len(warn) == 1 and f"2 holdout task(s), fewer than the {need} the sweep's first holdout look" in warn[0]
    assert "sweep.allow_underpowered=true" in warn[0]
