"""The A/B verdicts' levels on coarse metrics (0/1 scores, a judge that never ties), through the project's functions.

Each figure is the share of simulated A/Bs (WORLDS each, seeded) in which a verdict is claimed that the world makes
false; the level it must hold is printed beside it. Run it on a tree to measure that tree.

- A2, 'supported' at no effect: a 0/1 metric, both arms pass with probability 0.5, one replication, n tasks,
  direction greater, test t, alpha 0.05 (level 0.025): experiments.ab.paired_stats + experiments.stats.explain_verdict.
  And a sequential A/B (4 looks over 16 tasks, the same world): the share that stops for efficacy at any look
  (experiments.stats.sequential_decision, as run_ab calls it; levels summing to 0.05, the efficacy side 0.025).
- A3, 'not supported' at a true effect equal to min_effect: the 0/1 metric with pass rates 0.5 (A) and 0.8 (B),
  min_effect 0.3, n = 2 / 3 / 4 tasks (level alpha / 2 = 0.025).
- A5, pairwise 'not supported' at the boundary: a judge that never ties (each judged pair +1 or -1), B preferred
  with probability 0.55 (mean preference 0.1 = min_preference), r = 1 or 3 replications per task, n = 8 / 12 / 24
  tasks, direction greater, alpha 0.05 (level 0.025): experiments.ab._pairwise.pairwise_verdict. The sign-flip p
  only matters there for a mean below 0 (the rule's 'significant in the opposite direction'); it is computed
  (experiments.stats.signflip_test) where the mean is below 0 at t < -1.5, else set to 1 (a sign-flip p below 0.05
  needs a mean far further below 0), which keeps n = 24 (Monte Carlo p) fast.

    python bench/power/ab_coarse_metric_level.py [--worlds 2000]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.ab._analysis import paired_stats  # noqa: E402
from experiments.ab._pairwise import pairwise_verdict  # noqa: E402
from experiments.stats import Preregistration, explain_verdict, sequential_decision, signflip_test  # noqa: E402


def verdict_rate(verdict: str, n: int, worlds: int, pass_b: float, stream: int) -> float:
    """How often a 0/1 metric (A passes half the time, B pass_b of the time, n tasks) gets `verdict` from the A/B's
    rule (one-sided t, min_effect 0.3)."""
    prereg = Preregistration("B passes more often", metric="score", min_effect=0.3, alpha=0.05, direction="greater",
                             n_tasks=n, replications=1, test="t")
    rng = np.random.default_rng([52, stream, n])
    a = (rng.random((worlds, n)) < 0.5).astype(float)
    b = (rng.random((worlds, n)) < pass_b).astype(float)
    hits = sum(explain_verdict(prereg, paired_stats(a[i], b[i], alpha=0.05, n_boot=20))[0] == verdict
               for i in range(worlds))
    return hits / worlds


def supported_at_no_effect(n: int, worlds: int) -> float:
    return verdict_rate("supported", n, worlds, pass_b=0.5, stream=2)


def sequential_efficacy_at_no_effect(worlds: int, n: int = 16, looks: int = 4) -> float:
    rng = np.random.default_rng([52, 22, n])
    d = (rng.random((worlds, n)) < 0.5).astype(float) - (rng.random((worlds, n)) < 0.5).astype(float)
    points = [math.ceil(k * n / looks) for k in range(1, looks + 1)]
    hits = 0
    for row in d:
        for k, m in enumerate(points, start=1):
            dec = sequential_decision(row[:m], look=k, n_looks=looks, alpha=0.05, min_effect=0.3, direction="greater")
            if dec.stop:
                hits += dec.action == "stop_efficacy" and dec.mean > 0
                break
    return hits / worlds


def not_supported_at_min_effect(n: int, worlds: int) -> float:
    return verdict_rate("not supported", n, worlds, pass_b=0.8, stream=3)


def pairwise_not_supported_at_boundary(n: int, reps: int, worlds: int) -> float:
    prereg = Preregistration("B's answers are preferred", direction="greater", alpha=0.05, min_preference=0.1,
                             compare="pairwise", n_tasks=n, replications=reps)
    rng = np.random.default_rng([52, 5, n, reps])
    prefs = np.where(rng.random((worlds, n, reps)) < 0.55, 1.0, -1.0).mean(-1)
    hits = 0
    for x in prefs:
        sd = x.std(ddof=1)
        far_below = sd > 0 and x.mean() / (sd / math.sqrt(n)) < -1.5
        p = signflip_test(list(x)).pvalue if far_below else 1.0
        hits += pairwise_verdict(prereg, list(x), p)[0] == "not supported"
    return hits / worlds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", type=int, default=2000)
    w = ap.parse_args().worlds
    t0 = time.perf_counter()
    print(f"worlds per figure: {w}; level of each claim: 0.025 (alpha 0.05, one side)")
    for n in (2, 3, 4, 8):
        print(f"A2 'supported' at no effect, 0/1 metric, {n} tasks, t: {supported_at_no_effect(n, w):.4f}")
    print(f"A2 sequential (4 looks over 16 tasks), 0/1 metric, stops for efficacy at no effect: "
          f"{sequential_efficacy_at_no_effect(w):.4f}")
    for n in (2, 3, 4):
        print(f"A3 'not supported' at effect = min_effect 0.3, 0/1 metric, {n} tasks: "
              f"{not_supported_at_min_effect(n, w):.4f}")
    for reps in (1, 3):
        for n in (8, 12, 24):
            print(f"A5 pairwise 'not supported' at preference = min_preference 0.1, never-tying judge, r {reps}, "
                  f"{n} tasks: {pairwise_not_supported_at_boundary(n, reps, w):.4f}")
    print(f"elapsed {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
