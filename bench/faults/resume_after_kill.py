"""kill -9 at each moment of a sweep and an A/B test, then the same command again: the table in docs/RELIABILITY.md.

`python bench/faults/resume_after_kill.py [--root OTHER_TREE] [--out DIR] [moment ...]` runs the real CLI on the fake backend
(tests/resume_driver.py, tests/resume_harness.py): once uninterrupted per kind, then per moment a run killed there and
its resume, and prints one row per moment: exit codes, duplicate run ids in runs.jsonl, duplicate MLflow runs, runs
left RUNNING, and whether the counted trials' Optuna values and the promoted instructions (the A/B: its ledger's
cells) equal the uninterrupted run's. --root runs another source tree (e.g. `git archive 6cbf984` unpacked, with
tests/resume_driver.py copied in) for the before figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import resume_harness as h  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=h.ROOT)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("moments", nargs="*", default=list(h.MOMENTS))
    args = ap.parse_args()
    base = args.out or Path(tempfile.mkdtemp(prefix="resume-kill-"))
    ref = {}
    for kind in sorted({h.MOMENTS[m][0] for m in args.moments}):
        run = h.run_cli(base / f"uninterrupted-{kind}", kind, root=args.root)
        assert run.rc == 0, run.output[-3000:]
        ref[kind] = h.outcome(base / f"uninterrupted-{kind}", kind)
    print(f"source tree: {args.root}; runs under {base}")
    print("| moment | exit (killed, resume) | runs.jsonl dup ids | MLflow dup runs | MLflow RUNNING | trials | "
          "values = uninterrupted | promoted = uninterrupted |")
    print("|---|---|---|---|---|---|---|---|")
    for m in args.moments:
        kind = h.MOMENTS[m][0]
        folder = base / m.replace(" ", "_").replace(",", "").replace("/", "")
        first, second = h.kill_and_resume(folder, m, root=args.root)
        o, r = h.outcome(folder, kind), ref[kind]
        same_v = o.values == r.values if kind == "sweep" else o.ab_cells == r.ab_cells
        same_p = o.promoted == r.promoted if kind == "sweep" else "(A/B: cells)"
        print(f"| {m} | {first.rc}, {second.rc} | {len(h.duplicates(o.run_ids))} | {len(h.duplicates(o.mlflow_runs))} "
              f"| {o.mlflow_running} | {o.trials_total or '-'} | {same_v} | {same_p} |", flush=True)


if __name__ == "__main__":
    main()
