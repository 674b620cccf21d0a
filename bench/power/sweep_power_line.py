"""Is the design power line honest for the default design?

At each detectable effect decision_power reports (12 + 12 tasks, train filter "positive", 3 + 3 holdout runs,
futility stop every 4 holdout tasks, level 0.025), simulate studies through the real rule: the train filter
experiments.promotion._futility.passes_train_filter on experiments.stats.compare, the futility stop
experiments.promotion._futility.futility_stop and the paired t experiments.promotion._confirmation.TaskDiffs (per-task means of 3 runs per arm), and
count how often it confirms.

    nice -n 15 python bench/power/sweep_power_line.py [--worlds 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.stats import compare, decision_power, first_level  # noqa: E402
from experiments.promotion._confirmation import TaskDiffs  # noqa: E402
from experiments.promotion._futility import futility_stop, passes_train_filter  # noqa: E402

WORLDS = {"test": (0.3, 0.0), "embedded": (1.455, 1.271), "1.5B": (0.25, 2.95)}
NEW = dict(n_train=12, n_holdout=12, alpha=0.05, level=0.025, baseline_runs=1, holdout_runs=(3, 3),
           train_filter="positive", futility_block=4)
TODAY = dict(n_train=16, n_holdout=8, alpha=0.05, level=0.025, baseline_runs=2, holdout_runs=(1, 1))


def confirms(sigma: float, tau: float, effect: float, *, worlds: int, seed: int, design: dict) -> float:
    """P(promoted) of one proposal with a constant mean effect through the real rule (module docstring)."""
    rng = np.random.default_rng(seed)
    nt, nh, (c, b) = design["n_train"], design["n_holdout"], design["holdout_runs"]
    block, ids_t = design.get("futility_block", 0), [f"t{i}" for i in range(nt)]
    ids_h = [f"h{i}" for i in range(nh)]
    hit = 0
    for _ in range(worlds):
        u = rng.normal(0.0, tau, nt + nh)  # the task x variant spread, the same task on train or holdout
        cand_t = dict(zip(ids_t, effect + u[:nt] + rng.normal(0.0, sigma, nt)))
        base_t = dict(zip(ids_t, rng.normal(0.0, sigma, nt)))
        cmp = compare(cand_t, base_t, floor=0.0, alpha=design["alpha"])
        if not passes_train_filter(cmp, design["train_filter"]):
            continue
        cand_h = dict(zip(ids_h, effect + u[nt:] + rng.normal(0.0, sigma, (c, nh)).mean(0)))
        base_h = dict(zip(ids_h, rng.normal(0.0, sigma, (b, nh)).mean(0)))
        if futility_stop(cand_h, base_h, ids_h, block, level=first_level(design["alpha"]), power=0.8) is not None:
            continue
        td = TaskDiffs.of(cand_h, base_h)
        hit += td.p is not None and td.p < design["level"]
    return hit / worlds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worlds", type=int, default=2000)
    args = ap.parse_args()
    for name, (sigma, tau) in WORLDS.items():
        for sims in (1000, 2000):  # the summary's sims (min(calibrate.sims, 1000)) and the default
            t0 = time.perf_counter()
            dp = decision_power(sigma, tau, sims=sims, **NEW)
            dt = time.perf_counter() - t0
            rate = confirms(sigma, tau, dp.mde, worlds=args.worlds, seed=sims, design=NEW)
            print(f"{name:9s} sigma {sigma} tau {tau} sims {sims}: new design MDE {dp.mde:.3f} ({dt:.2f} s), real rule "
                  f"confirms {rate:.3f} of {args.worlds}; needed {dp.needed} for 0.5; today's MDE "
                  f"{decision_power(sigma, tau, sims=sims, **TODAY).mde:.3f}")


if __name__ == "__main__":
    main()
