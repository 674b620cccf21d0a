"""bench/search/gepa_anchor.py: GEPA (the optional `gepa` package) in the simulated world, through the project's
holdout confirmation. Skipped where gepa is not installed; the script's own skip line is tested without it."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.search import gepa_anchor  # noqa: E402
from bench.search.world import CALLS_PER_RUN, World, WorldRunner  # noqa: E402


def test_the_script_skips_with_one_line_without_gepa(monkeypatch, capsys):
    monkeypatch.setattr(gepa_anchor, "gepa_version", lambda: None)
    assert gepa_anchor.main(["--seeds", "1", "--sizes", "6+6"]) == {}
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "gepa is not installed" in out[0]


def test_the_adapter_scores_each_task_and_gives_each_component_its_types_feedback():
    pytest.importorskip("gepa")
    exp = gepa_anchor.experiment(0, 6, 6, [])
    baseline = dict(exp.synth.instructions)
    runner = WorldRunner(World.make(0, baseline, "gain"), exp.benchmark.tasks)
    adapter = gepa_anchor.WorldAdapter(runner)
    train = exp.tasks("train")
    batch = adapter.evaluate(train, baseline, capture_traces=True)
    assert len(batch.scores) == len(batch.outputs) == len(batch.trajectories) == len(train) == runner.task_runs
    assert all(0.0 <= s <= 1.0 for s in batch.scores)
    again = adapter.evaluate(train, baseline)  # a fresh seed per call: a new sample of the run noise
    assert again.trajectories is None and again.scores != batch.scores
    data = adapter.make_reflective_dataset(baseline, batch, list(baseline))
    for tt, records in data.items():
        assert len(records) == sum(t.task_type == tt for t in train) > 0
        assert all(tt in r["Inputs"]["task"] and r["Feedback"].startswith("Judge score") for r in records)


def test_gepa_proposes_through_the_world_and_the_confirmation_decides():
    pytest.importorskip("gepa")
    logging.disable(logging.WARNING)
    try:
        row = gepa_anchor.run_seed(0, "gain", 6, 6, budget_per_task=5, merge=False, overrides=[])
    finally:
        logging.disable(logging.NOTSET)
    assert row["reflection_calls"] >= 1  # GEPA asked the reflection model for at least one new text
    assert row["candidates"] >= 2  # and kept one beside the seed (deterministic: GEPA's seed and the world's)
    assert row["metric_calls"] == row["train_runs"] >= 30  # its budget, 5 x 6 train tasks, spent on train only
    assert row["holdout_runs"] == 6 * 3 + 6 * 3  # its best, past the train filter, and the baseline, 3 runs each
    assert row["calls"] == CALLS_PER_RUN * row["task_runs"] + row["reflection_calls"]
    assert row["returned"] == 0.0 or row["promoted"]
