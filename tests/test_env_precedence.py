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
    # backend=fake answers no model call: every task fails at its context's preparation (issue 41: never cached,
    # never scored), the run says so and exits 3; what it did write shows where the results folder is
    assert proc.returncode == 3 and "5 of 5 task(s) failed" in proc.stderr, proc.stderr[-3000:]
    assert (cli_dir / "mlflow.db").is_file() and (cli_dir / "search_cache.sqlite").is_file()
    assert any((cli_dir / "hydra").rglob("*"))  # Hydra's job folder too (issue 41 item 15)
    assert not env_dir.exists()
