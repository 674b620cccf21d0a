"""The task supply's import at scale: 10,000 sibling-heavy rows (a few forms, each filled with many subjects and
counts, some rows repeated or reworded) through experiments.tasks' plan_import (read, deduplicate under the
near-duplicate rule, assign the split, check it), timed, with the peak memory of the process.

    python bench/throughput/import_scale.py [--rows 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FORMS = ("List {n} uses of {s}.", "Give best practices for {s} in production.",
         "Explain how {s} works and its design trade-offs.", "List {n} common mistakes when using {s} and how to avoid each.",
         "Compare {s} and {t} for a small team.", "Write a {n}-word summary of {s} for a newcomer.")
HEADS = ("Python's {} module", "the {} library", "{} in a web service", "a {} cluster", "the {} algorithm",
         "{} recipes", "the history of {}", "{} pipelines")
NAMES = [f"{a}{b}" for a in ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "zeta", "theta", "lambda",
                              "nova", "terra", "aqua", "pyro", "cryo", "vita", "astro", "geo", "bio", "chrono")
         for b in ("core", "flow", "grid", "mesh", "link", "base", "kit", "forge", "stack", "path", "net", "works",
                   "lab", "ware", "scope", "sync", "cast", "hub", "line", "mark")]


def rows(n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    out: list[dict] = []
    while len(out) < n:
        s = rng.choice(HEADS).format(rng.choice(NAMES))
        t = rng.choice(HEADS).format(rng.choice(NAMES))
        text = rng.choice(FORMS).format(n=rng.choice((3, 4, 5, 7, 10, 50, 100)), s=s, t=t)
        out.append({"task": text})
        if rng.random() < 0.02:
            out.append({"task": text.lower()})  # an exact repeat
    return out[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    args = ap.parse_args()
    from experiments.config import compose_config, to_experiment
    from experiments.tasks._import import plan_import

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "rows.jsonl"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows(args.rows)), encoding="utf-8")
        exp = to_experiment(compose_config(["+sweep=import_tasks", f"tasks.source={src}", "tasks.name=scale"]))
        start = time.perf_counter()
        read, sel, tasks = plan_import(exp)[:3]
        seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"===== IMPORT SCALE =====\nrows: {len(read)}; kept: {len(tasks)}; dropped: {len(sel.dropped)} "
          f"({sel.exact} exact, {sel.near} near)\nseconds: {seconds:.1f}; peak memory: {peak:.0f} MiB\n"
          f"===== END IMPORT SCALE =====")


if __name__ == "__main__":
    main()
