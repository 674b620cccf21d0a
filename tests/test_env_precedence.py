"""Both command lines: an override typed on the command line wins over the environment toggle for its field.

Before (6224203): `python -m experiments.run results_dir=<x>` with HARNESS_RESULTS_DIR exported wrote its runs,
study and MLflow store to $HARNESS_RESULTS_DIR (harness.config.apply_env ran after the overrides), while
`python -m harness` gave the command line the last word; the user's folder stayed empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from experiments.run import command_line_wins

ROOT = Path(__file__).resolve().parents[1]


def test_only_the_toggles_the_command_line_sets_are_dropped():
    env = {"HARNESS_RESULTS_DIR": "/env", "HARNESS_BACKEND": "ollama", "HARNESS_SKIP_PRIOR_KNOWLEDGE": "1",
           "RESEARCH_CACHE": "0", "PATH": "/bin"}
    command_line_wins(["+sweep=single", "results_dir=/cli", "backend=fake", "--cfg", "job"], env)
    assert env == {"HARNESS_SKIP_PRIOR_KNOWLEDGE": "1", "RESEARCH_CACHE": "0", "PATH": "/bin"}
    env = {"HARNESS_SKIP_PRIOR_KNOWLEDGE": "1", "RESEARCH_CACHE": "1"}
    command_line_wins(["planner.skip_prior_knowledge=false", "++research.reuse_cache=false"], env)
    assert env == {}


def test_a_results_dir_on_the_command_line_beats_the_exported_one(tmp_path):
    env_dir, cli_dir = tmp_path / "from_env", tmp_path / "from_cli"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HARNESS_RESULTS_DIR=str(env_dir))
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run([sys.executable, "-m", "experiments.run", "+sweep=single", "backend=fake", "benchmark=smoke",
                           f"results_dir={cli_dir}"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(line) for line in (cli_dir / "runs.jsonl").read_text().splitlines()]
    assert {r["run_id"].split("-", 1)[0] for r in records} == {"single"} and len(records) >= 3
    assert all(r["trace"].startswith(str(cli_dir)) for r in records)
    assert (cli_dir / "mlflow.db").is_file()
    assert not (env_dir / "runs.jsonl").exists() and not (env_dir / "mlflow.db").exists()
