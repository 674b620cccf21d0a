"""Claims that hold for the user's tasks, in simulation: false promotions when an edit's effect varies by task.

    python bench/power/holdout_sim.py [--worlds 1000] [--budget 200] [--sigma 0.2] [--json]

World (the optimizer_sim world's task model, with the task x variant spread made a knob): task t has a
difficulty (uniform 4.5-7, as bench/power/optimizer_sim.MutationWorld); candidate k's true effect on task t is
mu_k + tau * u_kt (u_kt standard normal: the edit helps some tasks and hurts others), and every run adds run
noise of sd sigma (0.2: the 1.5B calibration's, docs/BENCHMARKS.md). tau / sigma in {0, 1, 4, 15}; 15 is about
that calibration's measured tau 2.95.

Two designs at the same budget of task runs (baseline, its repeat, the candidates' train runs, the holdout):
  today  6cbf984: 8 train + 4 holdout tasks; the baseline run 3 times and the top candidate twice on the holdout;
         the holdout confirms by rule "bound" (SE from run noise alone); every conclusion at the full alpha
  new    16 train + 8 holdout tasks; one run of each text per holdout task; rule "tasks" (one-sided paired t over
         the holdout tasks) at the look's level alpha / 2^k (experiments/stats/)
Both go through experiments.promotion._decide.decide, the sweep's own verdict (today's rule "bound" through
Promotion.pick, the row it would have promoted). Each candidate runs once on every train task; the best train
mean is tested (holdout_top_k 1). Scenarios:
  null     every mu_k = 0: an edit that is no better over tasks; a promotion is false
  effect   one candidate mu = +1.0, one +0.5, the rest 0 to -1.0: the correct pick is the +1.0 one
  looks    null, one study concluded five times, each after K more candidates (a resume): family-wise false
           promotions (any of the five)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.stats._looks import level
from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
from experiments.promotion._decide import Candidate, decide
from experiments.stats import noise_floor

RATIOS = (0.0, 1.0, 4.0, 15.0)
ALPHA = 0.05


@dataclass(frozen=True)
class DesignSpec:
    name: str
    n_train: int
    n_holdout: int
    base_runs: int  # holdout runs of the baseline
    cand_runs: int  # holdout runs of the top candidate
    rule: str  # HoldoutTest rule
    spend: bool  # look k at alpha / 2^k (else every look at alpha)

    def fixed_runs(self) -> int:
        """Task runs outside the search: the baseline and its repeat on train, the holdout of baseline and top."""
        return 2 * self.n_train + self.n_holdout * (self.base_runs + self.cand_runs)

    def candidates(self, budget: int) -> int:
        return max((budget - self.fixed_runs()) // self.n_train, 1)


TODAY = DesignSpec("today", 8, 4, 3, 2, "bound", False)
NEW = DesignSpec("new", 16, 8, 1, 1, "tasks", True)


class World:
    """One world: task difficulties, candidates' per-task true effects, seeded run noise."""

    def __init__(self, seed: int, d: DesignSpec, sigma: float, tau: float, mus: np.ndarray) -> None:
        self.rng = np.random.default_rng(seed)
        self.d, self.sigma = d, sigma
        self.train = [f"t{i}" for i in range(d.n_train)]
        self.hold = [f"h{i}" for i in range(d.n_holdout)]
        n = d.n_train + d.n_holdout
        self.difficulty = self.rng.uniform(4.5, 7.0, n)
        self.mus = mus
        self.effect = mus[:, None] + tau * self.rng.standard_normal((len(mus), n))  # candidate x task

    def run(self, k: int | None, split: str) -> dict[str, float]:
        """One run of candidate k (None: the baseline) on a split."""
        idx = slice(0, self.d.n_train) if split == "train" else slice(self.d.n_train, None)
        names = self.train if split == "train" else self.hold
        true = self.difficulty[idx] + (0.0 if k is None else self.effect[k, idx])
        return dict(zip(names, (true + self.sigma * self.rng.standard_normal(len(names))).tolist()))


def conclude(w: World, scored: list[Candidate], base_runs: list[dict], base_hold: HoldoutScores,
             held: dict[str, HoldoutScores], alpha_level: float) -> tuple[int | None, bool]:
    """decide on the best train mean: (promoted candidate index or None, whether the train filter passed)."""
    nf = noise_floor(base_runs)
    ref = {t: sum(r[t] for r in base_runs) / len(base_runs) for t in w.train}
    top = [max(scored, key=lambda c: (c.train_mean, -c.number))]
    if top[0].hash not in held:
        held[top[0].hash] = HoldoutScores.of_runs([w.run(top[0].number, "holdout") for _ in range(w.d.cand_runs)])
    verdict = decide(top, ref, base_hold, held, train_floor=nf.floor(len(ref), len(base_runs)), alpha=ALPHA,
                     test=HoldoutTest.of(nf, alpha=alpha_level, rule=w.d.rule))
    row = verdict.winner if w.d.rule == "tasks" else verdict.pick
    (r,) = verdict.rows
    return (row.trial if row is not None else None), bool(r.train is not None and r.train.claimed)


def one_study(seed: int, d: DesignSpec, sigma: float, tau: float, mus: np.ndarray, looks: int,
              per_look: int) -> list[int | None]:
    """A study concluded `looks` times, each after per_look more candidates: the candidate promoted at each."""
    w = World(seed, d, sigma, tau, mus)
    base_runs = [w.run(None, "train") for _ in range(2)]
    base_hold = HoldoutScores.of_runs([w.run(None, "holdout") for _ in range(d.base_runs)])
    scored: list[Candidate] = []
    held: dict[str, HoldoutScores] = {}
    tested: list[str] = []
    out = []
    for look in range(looks):
        for k in range(look * per_look, (look + 1) * per_look):
            s = w.run(k, "train")
            scored.append(Candidate(k, f"c{k}", "op", sum(s.values()) / len(s), s))
        best = max(scored, key=lambda c: (c.train_mean, -c.number)).hash
        if best not in tested:
            tested.append(best)
        lvl = level(ALPHA, tested.index(best) + 1) if d.spend else ALPHA
        promoted, _ = conclude(w, scored, base_runs, base_hold, held, lvl)
        out.append(promoted)
    return out


def effects(seed: int, k: int, scenario: str) -> np.ndarray:
    if scenario == "null":
        return np.zeros(k)
    rng = np.random.default_rng([seed, 7])
    mus = -rng.uniform(0.0, 1.0, k)
    mus[rng.choice(k, 2, replace=False)] = (1.0, 0.5)
    return mus


def cell(d: DesignSpec, ratio: float, scenario: str, worlds: int, budget: int, sigma: float) -> dict:
    k = d.candidates(budget)
    promoted = correct = 0
    for s in range(worlds):
        mus = effects(s, k, scenario)
        (p,) = one_study(s, d, sigma, ratio * sigma, mus, 1, k)
        promoted += p is not None
        correct += p is not None and mus[p] == mus.max() and mus.max() > 0
    runs = 2 * d.n_train + k * d.n_train + d.n_holdout * (d.base_runs + d.cand_runs)
    return {"design": d.name, "ratio": ratio, "scenario": scenario, "candidates": k, "task_runs": runs,
            "promoted": promoted / worlds, "correct": correct / worlds, "worlds": worlds}


def looks_cell(d: DesignSpec, ratio: float, worlds: int, budget: int, sigma: float) -> dict:
    k = max(d.candidates(budget) // 5, 1)
    any_false = 0
    per_look = np.zeros(5)
    for s in range(worlds):
        got = one_study(10_000 + s, d, sigma, ratio * sigma, np.zeros(5 * k), 5, k)
        any_false += any(p is not None for p in got)
        first = next((i for i, p in enumerate(got) if p is not None), None)
        if first is not None:
            per_look[first:] += 1
    return {"design": d.name, "ratio": ratio, "scenario": "looks", "candidates_per_look": k,
            "family_wise": any_false / worlds, "by_look": (per_look / worlds).round(4).tolist(), "worlds": worlds}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", type=int, default=1000)
    ap.add_argument("--budget", type=int, default=200, help="task runs per study (all of them counted)")
    ap.add_argument("--sigma", type=float, default=0.2)
    ap.add_argument("--looks-worlds", type=int, default=None, help="worlds for the five-look scenario")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows = []
    for ratio in RATIOS:
        for d in (TODAY, NEW):
            for scenario in ("null", "effect"):
                rows.append(cell(d, ratio, scenario, args.worlds, args.budget, args.sigma))
            rows.append(looks_cell(d, ratio, args.looks_worlds or args.worlds, args.budget, args.sigma))
    se = (ALPHA * (1 - ALPHA) / args.worlds) ** 0.5
    out = {"args": vars(args), "rows": rows, "elapsed_s": round(time.perf_counter() - t0, 1), "alpha": ALPHA,
           "binomial_se_at_alpha": round(se, 4)}
    if args.json:
        print(json.dumps(out, indent=1))
        return out
    print(f"budget {args.budget} task runs, sigma {args.sigma}, {args.worlds} worlds per cell, alpha {ALPHA} "
          f"(binomial SE at alpha {se:.4f})")
    print(f"{'design':<6} {'tau/sigma':>9} {'K':>3} {'runs':>5} {'false (null)':>13} {'correct (effect)':>17} "
          f"{'promoted (effect)':>18} {'5 looks, family-wise':>21}")
    for ratio in RATIOS:
        for d in (TODAY, NEW):
            null, eff, lk = (next(r for r in rows if r["design"] == d.name and r["ratio"] == ratio
                                  and r["scenario"] == sc) for sc in ("null", "effect", "looks"))
            print(f"{d.name:<6} {ratio:>9g} {null['candidates']:>3} {null['task_runs']:>5} {null['promoted']:>13.3f} "
                  f"{eff['correct']:>17.3f} {eff['promoted']:>18.3f} {lk['family_wise']:>21.3f}")
    print(f"elapsed {out['elapsed_s']} s")
    return out


if __name__ == "__main__":
    main()
