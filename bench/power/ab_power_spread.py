"""The A/B's power model with the task x variant spread, checked against the real verdict.

A task's difference in an A/B is its true effect (the mean effect plus how differently the two texts suit that
task, sd tau) plus run noise (sd sigma per run, averaged over `replications` runs per arm). The preflight's
detectable effect once counted run noise only; it now adds tau (the calibration's A/A' arm). Printed, in worlds of
the shipped A/B rule (paired t, two-sided alpha 0.05, min_effect 0.3, 3 replications) through
`experiments.stats.explain_verdict`:

1. the detectable effect the model states with and without tau, and how often the real verdict says 'supported'
   at each (the stated power is 0.8);
2. 'supported' at a true mean difference of 0 (its level: 0.025 per direction) and at the stated detectable effect,
   for normal, right-skewed and left-skewed task spreads (a centred exponential, skewness +-2, and a mirrored
   lognormal, skewness -6.2) and a discrete one (each task helped or hurt by tau, every run's score rounded to a
   whole point), at 8, 12 and 24 tasks;
3. the same with the extra condition a skew-robust lower bound on the mean above 0 (the bound 'not supported' uses,
   `experiments.stats.mean_bound`): what it would buy and cost.

    python bench/power/ab_power_spread.py                 # 2,000 worlds per figure, about 2-4 minutes on 2 cores
    python bench/power/ab_power_spread.py --worlds 500
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.ab._analysis import paired_stats  # noqa: E402
from experiments.stats import Preregistration, ab_design, explain_verdict, mde  # noqa: E402
from experiments.stats._verdict import mean_bound  # noqa: E402

SIGMA, TAU, REPS, MIN_EFFECT, ALPHA = 0.5, 0.8, 3, 0.3, 0.05
WORLDS = ("normal", "exp-right", "exp-left", "lognormal-left", "two-point, whole scores")


def spread(world: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """n task x variant effects with mean 0 and sd 1."""
    if world == "normal":
        return rng.normal(0.0, 1.0, n)
    if world.startswith("two-point"):  # each task helped or hurt by the same amount
        return rng.choice((-1.0, 1.0), n)
    if world.startswith("exp"):
        z = rng.exponential(1.0, n) - 1.0
        return z if world == "exp-right" else -z
    z = (rng.lognormal(0.0, 1.0, n) - math.exp(0.5)) / math.sqrt((math.e - 1) * math.e)
    return -z


def rates(effect: float, world: str, n: int, worlds: int, *, tau: float = TAU) -> tuple[float, float]:
    """('supported' by the shipped rule, 'supported' with a skew-robust lower bound above 0 as well)."""
    prereg = Preregistration("B higher", min_effect=MIN_EFFECT, alpha=ALPHA, direction="greater", n_tasks=n,
                             replications=REPS, test="t")
    rng = np.random.default_rng([42, n, int(1000 * effect), WORLDS.index(world)])
    shipped = robust = 0
    for _ in range(worlds):
        base = 5.0 + rng.normal(0.0, 1.0, n)
        runs_a = base + rng.normal(0.0, SIGMA, (REPS, n))
        runs_b = base + effect + tau * spread(world, n, rng) + rng.normal(0.0, SIGMA, (REPS, n))
        if "whole" in world:  # a judge that scores whole points: each run's score rounded
            runs_a, runs_b = np.round(runs_a), np.round(runs_b)
        a, b = runs_a.mean(axis=0), runs_b.mean(axis=0)
        s = paired_stats(a, b, n_boot=50)
        ok = explain_verdict(prereg, s)[0] == "supported"
        shipped += ok
        robust += ok and mean_bound(s.diffs, ALPHA / 2, "lower") > 0  # the bound 'not supported' uses, other side
    return shipped / worlds, robust / worlds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=2000)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"sigma {SIGMA} per run, tau {TAU}, {REPS} replications, paired t, alpha {ALPHA}, min_effect {MIN_EFFECT}, "
          f"{args.worlds} worlds per figure (Monte Carlo sd at 0.8: {math.sqrt(0.16 / args.worlds):.3f})\n")
    print("## 1. the stated detectable effect (power 0.8) and the real verdict at it (normal spread)\n")
    print("| tasks | model | stated effect | 'supported' at it |\n|---|---|---|---|")
    for n in (8, 12, 24):
        for name, tau in (("run noise only (before)", 0.0), ("with tau (now)", TAU)):
            m = mde(ab_design(SIGMA, n, alpha=ALPHA, replications=REPS, test="t", min_effect=MIN_EFFECT, tau=tau),
                    power=0.8, sims=4000)
            print(f"| {n} | {name} | {m:.3f} | {rates(m, 'normal', n, args.worlds)[0]:.3f} |", flush=True)
    print("\n## 2-3. 'supported' by the shipped rule / with a skew-robust lower bound above 0 as well\n")
    print("| tasks | spread | at a true mean of 0 (level 0.025) | at the stated effect (0.8) |\n|---|---|---|---|")
    for n in (8, 12, 24):
        m = mde(ab_design(SIGMA, n, alpha=ALPHA, replications=REPS, test="t", min_effect=MIN_EFFECT, tau=TAU),
                power=0.8, sims=4000)
        for world in WORLDS:
            z, e = rates(0.0, world, n, args.worlds), rates(m, world, n, args.worlds)
            print(f"| {n} | {world} | {z[0]:.3f} / {z[1]:.3f} | {e[0]:.3f} / {e[1]:.3f} (effect {m:.3f}) |",
                  flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
