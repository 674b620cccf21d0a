"""The pairwise A/B: does it hold its level, and does it see more than the pointwise A/B at equal LLM calls?
A simulation on the score model and worlds of bench/power/sens/model.py.

The A/B compares a candidate (B) with the baseline (A) on n tasks, `replications` runs per (task, arm), run r of
both arms with the same seed, at the producer's own (sampled) temperature, so the greedy 1.5B worlds run as
`World.sampled()`: every replication a new answer with a fresh judge error. Designs:

- pointwise t (today, conf/sweep/champion_ab.yaml): per-task mean difference of the composite over the
  replications; 'supported' = two-sided paired t p < alpha (0.05), t > 0 (direction greater), the skew-calibrated
  one-sided p (experiments.stats.skew_test) below alpha / 2 and mean difference >= min_effect (0.3).
- pointwise t at equal calls: the runs the pairwise judge calls would buy. Pairwise adds 2 judge calls x
  calls_judge per (task, replication) pair to the 2 runs x calls_run, so the pointwise A/B may run
  replications x (1 + calls_judge / calls_run) runs per (task, arm); fractional: the runs per arm are
  round(n x that), some tasks getting one run more than others (the calls column says what it costs).
- pairwise sign-flip (ab.compare: pairwise): per (task, replication) the judge compares the two answers in both
  orders, a disagreement a tie (bench/power/sens/model.py pairwise(): error sd g x the pointwise judge's on a
  difference, first position preferred 63% at equal quality); per task the mean preference over the
  replications; 'supported' = the exact two-sided sign-flip p over tasks < alpha, mean preference > 0 and >=
  min_preference (0.1). g 1.0; 0.34 (the embedded calibration) and 0.17 (the 1.5B calibration: 4 pairs, so
  uncertain).
- pairwise t: the same preferences through the paired t (what the sign-flip replaces).

Columns: the share of A/Bs 'supported' when B is no better in mean: null (no effect), spread (N(0, 2) per task,
zero mean), left skew (-7 on 1 task in 8, +1 on the others: zero mean, B preferred on 7 of 8 tasks), lognormal
(-(LN(0, 1) - e^0.5) per task: zero mean, a left tail); power at a constant +0.3 and +0.5 composite points; the
detectable effect (constant, power 0.8, by bisection with the same simulated A/Bs at every effect); LLM calls per
A/B. --check runs some A/Bs through the real experiments.ab.paired_stats + experiments.stats.explain_verdict
(pointwise) and experiments.stats.signflip_test (pairwise) and counts the disagreements.

    nice -n 15 python bench/power/ab_pairwise.py                       # 4,000 A/Bs per cell, the four worlds
    nice -n 15 python bench/power/ab_pairwise.py --sims 500 --worlds test
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.power.sens import model, rules  # noqa: E402
from bench.power.sens.model import WORLDS, World, draw, effects, pairwise  # noqa: E402

ALPHA, MIN_EFFECT, MIN_PREFERENCE, REPS, POWER = 0.05, 0.3, 0.1, 3, 0.8
GS = (1.0, 0.34, 0.17)
NS = (24, 12)
FALSE_KINDS = ("null", "spread", "leftskew", "lognormal")
POWER_AT = (0.3, 0.5)
DEFAULT_WORLDS = ("test", "1.5B f=0.5", "1.5B f=0.8", "embedded")
SEED = 42
MDE_MAX = 16.0


@dataclass(frozen=True)
class ABDesign:
    name: str
    compare: str  # pointwise | pairwise
    test: str  # t | signflip
    reps: float = REPS  # runs per (task, arm); fractional: some tasks one run more
    g: float = 1.0

    def runs_per_arm(self, n: int) -> np.ndarray:
        """Runs of each arm per task: round(n reps) in all, the first tasks one run more."""
        total = int(round(n * self.reps))
        base, extra = divmod(total, n)
        return np.array([base + 1] * extra + [base] * (n - extra))

    def calls(self, world: World, n: int) -> float:
        runs = 2 * self.runs_per_arm(n).sum() * world.calls_run
        if self.compare == "pairwise":
            runs += n * int(self.reps) * 2 * world.calls_judge
        return float(runs)


def designs_for(world: World, gs: tuple[float, ...] = GS) -> list[ABDesign]:
    equal = REPS * (1 + world.calls_judge / world.calls_run)
    out = [ABDesign(f"pointwise t, {REPS} reps (today)", "pointwise", "t"),
           ABDesign(f"pointwise t, {equal:.3g} reps (equal calls)", "pointwise", "t", reps=equal)]
    out += [ABDesign(f"pairwise sign-flip, g={g:g}", "pairwise", "signflip", g=g) for g in gs]
    out += [ABDesign(f"pairwise t, g={g:g}", "pairwise", "t", g=g) for g in gs]
    return out


def _seed(world: World, n: int, kind: str, sims: int) -> list[int]:
    return [SEED, list(WORLDS).index(world.name.removesuffix(" sampled")), n, FALSE_KINDS.index(kind)
            if kind in FALSE_KINDS else 9, sims]


def per_task(world: World, n: int, kind: str, mu: float, sims: int, designs: list[ABDesign]) -> dict[str, np.ndarray]:
    """Per design, the per-task statistic of `sims` simulated A/Bs (studies, tasks): the mean composite
    difference B - A (pointwise) or the mean preference for B (pairwise). The same seed at every mu: the same
    tasks, noise and judge errors, only the planted effect moves (the detectable effect's bisection needs it)."""
    rng = np.random.default_rng(_seed(world, n, kind, sims))
    m = effects(kind, rng, (sims, 2, n), mus=np.array([0.0, mu]))
    runs = max(int(d.runs_per_arm(n).max()) for d in designs)
    sc = draw(world, m, runs, rng)
    out: dict[str, np.ndarray] = {}
    prefs: dict[float, np.ndarray] = {}
    for d in designs:
        if d.compare == "pointwise":
            k = d.runs_per_arm(n)
            mask = np.arange(runs)[None, :] < k[:, None]  # (tasks, runs)
            diff = (sc.y[:, 1] - sc.y[:, 0]) * mask
            out[d.name] = diff.sum(axis=-1) / k
        else:
            if d.g not in prefs:  # the judge's errors from their own stream: the same whichever designs run
                sc.rng = np.random.default_rng(_seed(world, n, kind, sims) + [int(round(1000 * d.g))])
                prefs[d.g] = pairwise(sc, np.ones(sims, dtype=int), np.arange(n), int(d.reps), g=d.g)
            out[d.name] = prefs[d.g]
    return out


def supported(d: ABDesign, stat: np.ndarray) -> np.ndarray:
    """The A/B's 'supported' on each row: two-sided p < alpha, the mean in the direction greater, and the mean at
    least min_effect (pointwise) or min_preference (pairwise)."""
    if d.test == "signflip":
        p = rules.signflip_p(stat, 0.5 / int(d.reps))
    elif d.compare == "pointwise":  # the verdict also needs the skew-calibrated one-sided p below alpha / 2
        from experiments.stats._skew import skew_test_p

        p = np.where(skew_test_p(stat) < ALPHA / 2, rules.t_p_two_sided(stat), 1.0)
    else:  # the paired t on preferences, what the sign-flip replaces: the t alone
        p = rules.t_p_two_sided(stat)
    mean = stat.mean(axis=-1)
    floor = MIN_EFFECT if d.compare == "pointwise" else MIN_PREFERENCE
    return (p < ALPHA) & (mean > 0) & (mean >= floor - 1e-12)


def rate(world: World, n: int, d: ABDesign, kind: str, mu: float, sims: int) -> float:
    return float(supported(d, per_task(world, n, kind, mu, sims, [d])[d.name]).mean())


def mde(world: World, n: int, d: ABDesign, sims: int, tol: float = 0.01) -> float:
    """Smallest constant effect 'supported' with probability POWER (bisection; inf past MDE_MAX)."""
    lo, hi = 0.0, 0.5
    while rate(world, n, d, "constant", hi, sims) < POWER:
        lo, hi = hi, 2 * hi
        if hi > MDE_MAX:
            return math.inf
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if rate(world, n, d, "constant", mid, sims) >= POWER:
            hi = mid
        else:
            lo = mid
    return hi


def check(world: World, n: int, sims: int) -> tuple[int, int]:
    """(disagreements, A/Bs compared) between the vectorised rules and the real ones."""
    from experiments.ab._analysis import paired_stats
    from experiments.stats import Preregistration, explain_verdict, signflip_test

    prereg = Preregistration("B higher", min_effect=MIN_EFFECT, alpha=ALPHA, direction="greater", n_tasks=n,
                             replications=REPS, test="t")
    d_pt, d_pw = ABDesign("pt", "pointwise", "t"), ABDesign("pw", "pairwise", "signflip", g=0.34)
    bad = total = 0
    for kind, mu in (("null", 0.0), ("constant", 0.5), ("constant", 1.5), ("leftskew", 0.0)):
        rng = np.random.default_rng([SEED, 7, n, int(10 * mu)] + [FALSE_KINDS.index(kind) if kind in FALSE_KINDS else 9])
        m = effects(kind, rng, (sims, 2, n), mus=np.array([0.0, mu]))
        sc = draw(world, m, REPS, rng)
        a, b = sc.y[:, 0].mean(-1), sc.y[:, 1].mean(-1)
        mine = supported(d_pt, b - a)
        for i in range(sims):
            real = explain_verdict(prereg, paired_stats(a[i], b[i], n_boot=20))[0] == "supported"
            bad += real != mine[i]
        prefs = pairwise(sc, np.ones(sims, dtype=int), np.arange(n), REPS, g=0.34)
        mine = supported(d_pw, prefs)
        for i in range(sims):
            t = signflip_test(prefs[i])
            real = t.pvalue < ALPHA and t.mean > 0 and t.mean >= MIN_PREFERENCE
            bad += real != mine[i]
        total += 2 * sims
    return bad, total


def fmt(x: float) -> str:
    return "> %g" % MDE_MAX if math.isinf(x) else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=4000, help="simulated A/Bs per cell (default 4000)")
    ap.add_argument("--worlds", default=",".join(DEFAULT_WORLDS), help=f"comma-separated, of {', '.join(WORLDS)}")
    ap.add_argument("--ns", default=",".join(map(str, NS)), help="task counts (default 24,12)")
    ap.add_argument("--gs", default=",".join(map(str, GS)), help="pairwise judge errors g (default 1.0,0.34,0.17)")
    ap.add_argument("--first-preferred", type=float, default=model.FIRST_PREFERRED,
                    help=f"share of first-shown preferences at equal quality (default {model.FIRST_PREFERRED})")
    ap.add_argument("--check", type=int, default=100, help="A/Bs per (world, effect) through the real rules (0: none)")
    args = ap.parse_args(argv)
    names = [w.strip() for w in args.worlds.split(",") if w.strip()]
    unknown = [w for w in names if w not in WORLDS]
    if unknown:
        ap.error(f"unknown world(s) {unknown}; known: {', '.join(WORLDS)}")
    if args.sims < 100:
        ap.error(f"--sims must be >= 100, got {args.sims}")
    try:
        ns = [int(x) for x in args.ns.split(",")]
        gs = tuple(float(x) for x in args.gs.split(","))
    except ValueError:
        ap.error(f"--ns takes integers and --gs numbers, comma-separated; got {args.ns!r} and {args.gs!r}")
    if min(ns) < 2 or min(gs) <= 0:
        ap.error(f"--ns must be >= 2 tasks and --gs > 0; got {args.ns!r} and {args.gs!r}")
    if not 0 < args.first_preferred < 1:
        ap.error(f"--first-preferred must be in (0, 1), got {args.first_preferred}")
    model.BIAS_Z = float(sps.norm.ppf(args.first_preferred))  # read by model.pairwise at each call
    t0 = time.perf_counter()
    print("$ python " + " ".join([Path(sys.argv[0]).name if sys.argv else "bench/power/ab_pairwise.py"] + (argv or sys.argv[1:])))
    print(f"{args.sims} simulated A/Bs per cell (binomial SE at 0.025: {math.sqrt(0.025 * 0.975 / args.sims):.4f}, "
          f"at 0.8: {math.sqrt(0.16 / args.sims):.4f}); {REPS} replications; alpha {ALPHA} two-sided, direction "
          f"greater; min_effect {MIN_EFFECT}, min_preference {MIN_PREFERENCE}; first shown preferred {args.first_preferred:g} at equal quality; seed {SEED}")
    for name in names:
        world = WORLDS[name].sampled()
        ds = designs_for(world, gs)
        print(f"\n### {world.name}\n")
        print(f"sigma_run {world.sigma_run:g}, tau {world.tau:.3g}, frozen judge sd {world.sigma_frozen:.3g} (fresh "
              f"per run: sampled), pointwise judge sd on a difference {world.pointwise_judge_diff_sd:.3g}; "
              f"{world.calls_run:g} calls per task run, {world.calls_judge:g} per pairwise order\n")
        print("| n | design | calls per A/B | false: null | spread | left skew | lognormal | power +0.3 | power +0.5 | "
              "MDE (0.8) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for n in ns:
            cells = {d.name: {} for d in ds}
            for kind in FALSE_KINDS:
                st = per_task(world, n, kind, 0.0, args.sims, ds)
                for d in ds:
                    cells[d.name][kind] = float(supported(d, st[d.name]).mean())
            for mu in POWER_AT:
                st = per_task(world, n, "constant", mu, args.sims, ds)
                for d in ds:
                    cells[d.name][mu] = float(supported(d, st[d.name]).mean())
            for d in ds:
                c = cells[d.name]
                k = d.runs_per_arm(n)
                name_ = d.name if k.min() == k.max() else f"{d.name}: {k.sum()} runs per arm"
                print(f"| {n} | {name_} | {d.calls(world, n):.0f} | " + " | ".join(f"{c[x]:.3f}" for x in FALSE_KINDS)
                      + " | " + " | ".join(f"{c[x]:.3f}" for x in POWER_AT) + f" | {fmt(mde(world, n, d, args.sims))} |",
                      flush=True)
        if args.check:
            bad, total = check(world, NS[0], args.check)
            print(f"\ncheck ({world.name}, n {NS[0]}): the vectorised rules and the real paired_stats + explain_verdict "
                  f"/ signflip_test disagree on {bad} of {total} A/Bs")
    print(f"\nwall time {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
