"""The A/B verdict at the min_effect boundary and with failed tasks, on the project's functions and on another tree's.

    python bench/power/ab_min_effect_boundary.py [--worlds 2000] [--base /work/base] [--json]

H: how often the A/B rule says 'not supported' when the true mean difference equals min_effect (0.5, differences
with sd 1, direction greater, alpha 0.05: the level is 0.025, one side of the 95% interval). Worlds: "normal"
differences, and "skewed" ones (a lognormal with sigma 1 shifted and scaled to mean 0.5 and sd 1: most tasks a
little below 0.5, a few far above). Fixed-sample at n = 6, 8, 12, and sequential (2 looks, O'Brien-Fleming) at
n = 8, 12. Beside it what the change costs and keeps: 'not supported' at a true difference 1 sd below min_effect
(normal: the power of the claim), and 'supported' at a true difference of 0 (its level, unchanged by design) on
normal and left-skewed differences (the mirrored lognormal). Every world runs through
experiments.ab.paired_stats (BCa, 2,000 resamples as ABDesign) and experiments.stats.explain_verdict; the
sequential ones through experiments.stats.sequential_decision at each look first.

B: run_ab on 12 tasks where A fails on tasks 0-2 and B on the 3 hard tasks 9-11, B 0.8 above A on the 6 left.

"before" is the same worlds on another tree's functions (--base, e.g. a checkout of 3306971), run in a child
process, left out when --base holds no tree; "now" is this tree. Prints one Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MIN_EFFECT = 0.5
ALPHA = 0.05
TWELVE = tuple(f"task-{i:02d}" for i in range(12))

# (finding, label, world, n, looks, true mean, verdict counted)
CELLS = (
    [("H", "not supported at the boundary", w, n, 0, MIN_EFFECT, "not supported")
     for w in ("normal", "skewed") for n in (6, 8, 12)]
    + [("H", "not supported at the boundary, 2 looks", w, n, 2, MIN_EFFECT, "not supported")
       for w in ("normal", "skewed") for n in (8, 12)]
    + [("H (power)", "not supported, true diff 1 sd below min_effect", "normal", n, 0, MIN_EFFECT - 1.0,
        "not supported") for n in (6, 8, 12)]
    + [("H (kept)", "supported at a true diff of 0", w, n, 0, 0.0, "supported")
       for w in ("normal", "left-skewed") for n in (6, 8, 12)]
)


def draw(world: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n differences with mean 0 and sd 1 of the named shape."""
    if world == "normal":
        return rng.normal(0.0, 1.0, n)
    z = (rng.lognormal(0.0, 1.0, n) - math.exp(0.5)) / math.sqrt((math.e - 1) * math.e)
    return z if world == "skewed" else -z


def _looks(n: int, k: int) -> list[int]:
    return sorted({max(1, math.ceil(i * n / k)) for i in range(1, k + 1)})


def rate(cell: tuple, worlds: int) -> float:
    """The share of worlds whose verdict is the cell's, through this interpreter's experiments package."""
    from experiments.ab._analysis import paired_stats
    from experiments.stats import Preregistration, explain_verdict, sequential_decision

    _, _, world, n, looks, mean, counted = cell
    prereg = Preregistration("h", min_effect=MIN_EFFECT, alpha=ALPHA, direction="greater", n_tasks=n,
                             sequential=looks)
    rng = np.random.default_rng([40, n, looks, int(100 * mean) + 1000, len(world)])
    hits = 0
    for w in range(worlds):
        d = mean + draw(world, n, rng)
        decision, used = None, n
        for k, j in enumerate(_looks(n, looks) if looks > 1 else [], 1):
            decision, used = sequential_decision(d[:j], look=k, n_looks=looks, alpha=ALPHA, min_effect=MIN_EFFECT), j
            if decision.stop:
                break
        stats = paired_stats(np.zeros(used), d[:used], alpha=ALPHA, n_boot=2000, seed=w)

        class Result:  # what explain_verdict reads: stats_for(metric) and the last look's decision
            def stats_for(self, metric):
                return stats

        result = Result()
        result.decision = decision
        hits += explain_verdict(prereg, result)[0] == counted
    return hits / worlds


def case_b() -> str:
    """The verdict of B's case through run_ab."""
    from experiments.ab._cells import ABDesign
    from experiments.ab._run import run_ab
    from experiments.stats import Preregistration

    def arm(name, overrides, task, replication, seed):
        b = bool(overrides.get("b"))
        if task in (TWELVE[9:] if b else TWELVE[:3]):
            return {"status": "failed", "error": "RuntimeError: the backend went away"}
        noise = np.random.default_rng([seed, int(b)]).normal(0, 0.1)
        return {"status": "ok", "score": 6.0 - TWELVE.index(task) / 8 + (0.8 if b else 0.0) + noise}

    design = ABDesign(tasks=TWELVE, arms={"previous": {}, "champion": {"b": True}}, replications=1)
    prereg = Preregistration("the champion scores higher", min_effect=0.3, direction="greater", n_tasks=12,
                             replications=1)
    with tempfile.TemporaryDirectory() as tmp:
        r = run_ab(design, prereg, arm, ledger_path=Path(tmp) / "ab.jsonl")
    return f"{r.verdict} (p {r.primary.wilcoxon.pvalue:.3f} on {r.primary.n} pairs)"


def worker(worlds: int) -> dict:
    return {"H": [rate(c, worlds) for c in CELLS], "B": case_b()}


def run_tree(root: Path, worlds: int) -> dict:
    """worker() on the functions of the tree at `root`, in a child process."""
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", "--worlds", str(worlds)],
                          cwd=root, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"error: the run on {root} failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=2000)
    ap.add_argument("--base", default="/work/base", help="a tree with the functions before (e.g. 3306971)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worlds)))
        return 0
    t0 = time.perf_counter()
    now = run_tree(ROOT, args.worlds)
    base = Path(args.base)
    before = run_tree(base, args.worlds) if (base / "experiments").is_dir() else None
    if args.json:
        print(json.dumps({"cells": [list(c) for c in CELLS], "now": now, "before": before}))
        return 0
    se = math.sqrt(0.025 * 0.975 / args.worlds)
    print(f"The A/B verdict at the min_effect boundary (H) and with failed tasks (B), before ({args.base}) and now; "
          f"{args.worlds} worlds per row (sd of a rate of 0.025: {se:.4f}); alpha {ALPHA}, min_effect {MIN_EFFECT}, "
          f"differences sd 1\n")
    print("| finding | claim | world | n | level | before | now |")
    print("|---|---|---|---|---|---|---|")
    for i, c in enumerate(CELLS):
        finding, label, world, n, looks, mean, _ = c
        level = "0.025" if finding in ("H", "H (kept)") else "-"
        old = f"{before['H'][i]:.3f}" if before else "n/a"
        print(f"| {finding} | {label} | {world} | {n} | {level} | {old} | {now['H'][i]:.3f} |")
    print(f"| B | A fails tasks 0-2, B tasks 9-11, B +0.8 on the rest | - | 12 | - | "
          f"{before['B'] if before else 'n/a'} | {now['B']} |")
    print(f"\nelapsed {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
