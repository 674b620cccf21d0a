"""The user's own tasks as a holdout of their own (`+sweep=generate_tasks tasks.examples=FILE tasks.own_holdout=true`)
and what a confirmed claim rests on in the sweep summary: generated tasks and the user's own, apart."""

from __future__ import annotations

import json

import pytest
from test_tasks_supply import GEN, check_written, cli, driver, load, one_error

OWN = [
    {"task": "List 5 common pitfalls when writing asyncio code and how to avoid each."},
    {"task": "Give best practices for handling file paths with pathlib."},
    {"task": "Research when threads, processes or asyncio suit CPython, given the GIL."},
    {"task": "List 3 Python logging handlers and what each is for.", "split": "train"},  # own_holdout: holdout all
    {"task": "Explain how transactions and isolation levels work in the sqlite3 module."},
    {"task": "give best practices for handling file paths with pathlib"},  # the same text as row 2
]

# the generator's first batch repeats two of the user's tasks (one reworded, one word for word) beside three new ones
REPEATS = json.dumps({"tasks": [
    {"task": "List 5 common pitfalls when writing asyncio code, and how to avoid each one.", "task_type": "enumerated",
     "expected_count": 5, "required_terms": ["await"], "topic": "asyncio", "persona": "a beginner"},
    {"task": "Explain how transactions and isolation levels work in the sqlite3 module", "task_type": "research",
     "expected_count": None, "required_terms": ["commit"], "topic": "sqlite3", "persona": "a beginner"},
    *({"task": f"Research how the {m} module handles errors and which exceptions it raises.", "task_type": "research",
       "expected_count": None, "required_terms": [m], "topic": m, "persona": "a beginner"}
      for m in ("zipfile", "ftplib", "imaplib")),
]})


def own_file(tmp_path):
    src = tmp_path / "mine.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in OWN) + "\n", encoding="utf-8")
    return src


def test_own_tasks_are_the_holdout_and_a_generated_repeat_of_one_is_dropped(tmp_path):
    src, out = own_file(tmp_path), tmp_path / "gen.yaml"
    p = driver(tmp_path, *GEN, "tasks.count=12", f"tasks.out={out}", f"tasks.examples={src}", "tasks.own_holdout=true",
               TASKS_TEST_REPLIES=json.dumps([REPEATS, "@gen"]))
    assert p.returncode == 0, p.stderr[-2000:]
    data = check_written(out, 12 + 5)  # the loader's leak check passes on the file written
    own = [t for t in data["tasks"] if "generator" not in t["provenance"]]
    gen = [t for t in data["tasks"] if "generator" in t["provenance"]]
    # every one of the user's tasks (5 distinct rows; a split=train row too) is in the holdout, named by its line
    assert sorted(t["provenance"]["line"] for t in own) == [1, 2, 3, 4, 5]
    assert {t["split"] for t in own} == {"holdout"} and all(t["provenance"]["source"] == str(src) for t in own)
    # the generated ones split as without them: half of the 12 in each split
    assert len(gen) == 12 and sum(t["split"] == "holdout" for t in gen) == 6
    texts = {t["task"] for t in gen}
    assert not any("pitfalls when writing asyncio" in x or "isolation levels" in x for x in texts)
    assert "Research how the zipfile module handles errors and which exceptions it raises." in texts
    assert "your own: 6" in p.stdout and "kept: 17 (6 train + 11 holdout)" in p.stdout
    assert ("own holdout: 5 of your own task(s) from " in p.stdout and "(1 of your rows dropped as duplicates of each "
            "other); 2 generated task(s) dropped as duplicates of your own" in p.stdout), p.stdout[-2000:]


def test_a_generated_train_task_that_repeats_an_own_holdout_task_is_what_the_loader_refuses(tmp_path):
    """Why generation drops them: the same file with the reworded repeat put back in the train split is refused."""
    from experiments.config import ConfigError
    from experiments.config._benchmark import check_benchmark

    src, out = own_file(tmp_path), tmp_path / "gen.yaml"
    p = driver(tmp_path, *GEN, "tasks.count=4", f"tasks.out={out}", f"tasks.examples={src}", "tasks.own_holdout=true",
               TASKS_TEST_REPLIES=json.dumps([REPEATS, "@gen"]))
    assert p.returncode == 0, p.stderr[-2000:]
    tasks = load(out)["tasks"]
    check_benchmark(tasks)
    repeat = {"id": "again", "task": json.loads(REPEATS)["tasks"][0]["task"], "split": "train"}
    with pytest.raises(ConfigError, match="is a near-duplicate of"):
        check_benchmark([*tasks, repeat])


def test_own_holdout_without_examples_is_refused_in_one_line(tmp_path):
    err = one_error(driver(tmp_path, *GEN, "tasks.count=12", "tasks.own_holdout=true"))
    assert "tasks.own_holdout=true" in err and "tasks.examples is empty" in err, err


def test_own_holdout_on_an_import_is_refused_in_one_line(tmp_path):
    src = own_file(tmp_path)
    err = one_error(cli(tmp_path, "+sweep=import_tasks", f"tasks.source={src}", "tasks.name=mine",
                        "tasks.own_holdout=true", "backend=fake"))
    assert "tasks.own_holdout=true is for +sweep=generate_tasks" in err and "split=holdout" in err, err


# -- the summary: what a confirmed claim rests on ------------------------------------------------------------------


def with_sources(exp, generated: set[str]) -> None:
    """Give the named holdout tasks a generator's provenance and the other holdout tasks an imported row's."""
    for t in exp.benchmark.tasks:
        if t.split == "holdout":
            t.provenance = ({"generator": "fake:alpha-1", "prompt_version": "tasks-gen-1", "seed": 1}
                            if t.id in generated else {"source": "mine.jsonl", "line": 1})


def sweep(exp):
    from scripted_harness import ScriptedRunner, scripted_propose

    from experiments.config import load_tasks
    from experiments.sweep import run_sweep

    lines: list[str] = []
    s = run_sweep(exp, ScriptedRunner(load_tasks(exp.benchmark)), propose=scripted_propose, out=lines.append)
    return s, "\n".join(lines)


def test_a_confirmation_on_mixed_tasks_states_each_source_apart(make_exp):
    exp = make_exp("sweep.n_trials=6")
    with_sources(exp, {"t8", "t9", "t10", "t11"})
    s, text = sweep(exp)
    assert s.promoted, text[-3000:]
    row = next(r for r in s.holdout if r.trial == s.promoted_trial)
    gen, own = row.source_diffs["generated"], row.source_diffs["own"]
    assert (gen.n, own.n) == (4, 2) and row.holdout_n == 6
    assert (f"rests on: 4 generated tasks (mean diff {gen.mean:+.3f}) and 2 of your own (mean diff {own.mean:+.3f}); "
            f"the confirmation's test is over all 6; the two means describe it, neither is tested on its own") in text
    # the two means are the holdout difference's parts
    assert (4 * gen.mean + 2 * own.mean) / 6 == pytest.approx(row.holdout_diff)


def test_a_confirmation_on_generated_tasks_alone_says_none_of_yours(make_exp):
    exp = make_exp("sweep.n_trials=6")
    with_sources(exp, {f"t{i}" for i in range(8, 14)})
    s, text = sweep(exp)
    assert s.promoted and "rests on: confirmed on 6 generated tasks (none of your own; mean diff +" in text
    assert "tasks.own_holdout=true" in text


def test_rests_on_needs_a_confirmation_over_tasks_with_generated_tasks():
    """Not under a row that did not win, nor a fixed-task rule's row, nor a holdout of the user's own tasks alone
    (every hand-written benchmark): then the line would say nothing new. A standing winner keeps it (row_record)."""
    from experiments.promotion._evidence import TypeDiff
    from experiments.promotion._verdict import HoldoutRow, row_from_record, row_record
    from experiments.sweep._summary import rests_on_text

    mixed = {"generated": TypeDiff(3, 0.4, -0.1), "own": TypeDiff(2, 0.1, -0.2)}
    row = HoldoutRow(1, "h", "op", 6.0, 6.3, 0.28, None, True, holdout_rule="tasks", holdout_n=5, source_diffs=mixed)
    assert rests_on_text(row).startswith("rests on: 3 generated tasks (mean diff +0.400) and 2 of your own (mean "
                                         "diff +0.100); the confirmation's test is over all 5")
    for other in (dict(wins=False), dict(holdout_rule="bound"), dict(source_diffs={"own": TypeDiff(5, 0.3, 0.0)})):
        assert rests_on_text(HoldoutRow(**{**row.__dict__, **other})) == ""
    assert row_from_record(row_record(row)).source_diffs == mixed
