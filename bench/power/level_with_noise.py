"""The holdout confirmation over tasks and the A/B's 'supported' with the run noise every sweep's per-task
differences carry: level and power of the shipped rule against the same skew-calibrated p read against fewer
reference spreads and the plain paired t.

A sweep's per-task holdout difference is the task's own effect plus run noise: d_i = mu + u_i + e_i, e_i of sd
sigma sqrt(1/c + 1/b) (sigma 0.5 and 3 + 3 runs: 0.41). Spreads u (mean 0, sd 1): normal, -(Exp - 1),
-(lognormal sigma 1) scaled to sd 1, and a normal spread with a 10% chance of a -5 loss (skewness -1.5), each with
noise of sd 0 and 0.41 added, and the lognormal at noise 0.3 and 0.8 (ratios between the references'). The rule
is the project's own: experiments.stats.skew.skew_test_p, the vectorised form of skew_test, which the sweep's
TaskDiffs and decide call; --check runs the first worlds of every level row through
experiments.promotion._decide.decide one by one and stops where a p differs. "now" is the shipped p; "3 refs" the same p with the
maximum taken over the first three reference spreads only (normal, -(Exp - 1), -(lognormal sigma 1)); "no loss
tail" over every reference but the loss tail (normal, 1 in 10 loses 5: experiments.stats.skew.LOSS_TAIL). The
seeded reference samples are the same in all three. Looks: one look at 0.025, and 4 looks (experiments.stats.next_look at alpha 0.05:
0.025 ... 0.003125, sum 0.047), each a new candidate drawn anew; "4 looks" is the chance that any of them is
confirmed. No futility stop (it only turns confirmations into none). Power: a normal spread with the same noise
at the mean effect the plain t confirms with probability 0.8 at 0.025 ((1.96 + 0.84) sd / sqrt(n)) and at 1.5
times it. Seeded: the same arguments print the same tables.

--ab: the A/B's 'supported' (experiments.stats.explain_verdict on experiments.ab._analysis.paired_stats,
direction greater, paired t, alpha 0.05, min_effect 0: the paired t and the sweep's skew-calibrated one-sided p,
experiments.stats.skew_test, below alpha / 2) beside the paired t alone, at a true mean of 0 with a task x variant
spread of sd 0.8 of the shapes above and -(Gamma 0.5), run noise sigma 0.5 over 3 replications per arm, 8 / 12 / 24
tasks, and on a normal spread at the detectable effect of the t alone and at the one the A/B's preflight states
(experiments.stats.mde of ab_design).

    nice -n 10 python bench/power/level_with_noise.py                  # 20,000 worlds per level row
    nice -n 10 python bench/power/level_with_noise.py --ab --worlds 4000
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from scipy import stats as sps  # noqa: E402

from experiments.stats import noise_floor  # noqa: E402
import experiments.stats._skew as skew  # noqa: E402
from bench.power.skew_level import look_levels  # noqa: E402

ALPHA = 0.05
LOGNORMAL_SD = math.sqrt((math.e - 1) * math.e)
SHAPES = ("normal", "-(Exp - 1)", "-(lognormal)", "10% lose 5")


def draw(shape: str, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    """Task effects of mean 0 (sd 1 except '10% lose 5', a normal of sd 1 around +5/9 with a 10% chance of -5)."""
    if shape == "normal":
        return rng.standard_normal(size)
    if shape == "-(Exp - 1)":
        return 1.0 - rng.exponential(1.0, size)
    if shape == "-(lognormal)":
        return (math.exp(0.5) - np.exp(rng.standard_normal(size))) / LOGNORMAL_SD
    if shape == "10% lose 5":
        return np.where(rng.random(size) < 0.1, -5.0, rng.standard_normal(size) + 5.0 / 9.0)
    if shape == "-(Gamma 0.5)":
        return (0.5 - rng.gamma(0.5, 1.0, size)) / math.sqrt(0.5)
    raise ValueError(shape)


def p_values(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(plain t, 3 references, no loss tail, now) one-sided p per row of d: the shipped p (experiments.stats.skew's
    skew_test_p) and the same p with the maximum over fewer of its reference spreads."""
    n = d.shape[-1]
    now = skew.skew_test_p(d)
    ref = skew.reference(n)
    t, _, g = skew.statistics_of(d)
    q = ref.tail_q(t, g)
    t_p = sps.t.sf(t, n - 1)
    tail = skew.REFERENCE_SPREADS.index(skew.LOSS_TAIL)

    def over(refs) -> np.ndarray:
        return np.maximum(t_p, np.max([(1 + np.searchsorted(qs, q, side="right")) / (1 + qs.size) for qs in refs],
                                      axis=0))

    return t_p, over(ref.q[:3]), over(ref.q[:tail] + ref.q[tail + 1:]), now


def check(d: np.ndarray, after: np.ndarray, level: float) -> None:
    """The first rows through the sweep's decide: the row's holdout p must be the vectorised one."""
    from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
    from experiments.promotion._decide import Candidate, decide

    n = d.shape[-1]
    train = [f"t{i}" for i in range(8)]
    hold = [f"h{i:03d}" for i in range(n)]
    scores = {t: 7.0 + 0.01 * i for i, t in enumerate(train)}
    cand0 = Candidate(1, "a", "op", sum(scores.values()) / len(scores), scores)
    nf = noise_floor([{t: 4.9 for t in train}, {t: 5.1 for t in train}])
    base = HoldoutScores.of_runs([{h: 5.0 for h in hold}])
    for w, row in enumerate(d):
        cand = HoldoutScores.of_runs([{h: 5.0 + x for h, x in zip(hold, row.tolist())}])
        out = decide([cand0], {t: 5.0 for t in train}, base, {"a": cand}, train_floor=0.2, alpha=ALPHA,
                     test=HoldoutTest.of(nf, alpha=level), train_filter="positive")
        p = out.rows[0].holdout_p
        assert math.isclose(p, after[w], rel_tol=1e-6, abs_tol=1e-12), (w, p, after[w])
        assert out.rows[0].wins == (after[w] <= level), (w, p, level)


def level_rows(tasks: list[int], worlds: int, seed: int, checked: int) -> list[str]:
    four = look_levels(4)
    rows = ["| spread (mean 0) | noise sd | n | t, one look | 3 refs | no loss tail | now | t, 4 looks | 3 refs "
            "| no loss tail | now |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    cases = [(s, e) for s in SHAPES for e in (0.0, 0.41)] + [("-(lognormal)", 0.3), ("-(lognormal)", 0.8)]
    for n in tasks:
        for i, (shape, noise) in enumerate(cases):
            rng = np.random.default_rng([seed, n, i])
            d = draw(shape, rng, (4, worlds, n)) + noise * rng.standard_normal((4, worlds, n))
            ps = [p_values(d[k]) for k in range(4)]
            if checked:
                check(d[0, :checked], ps[0][3][:checked], four[0])
            one = [float(np.mean(ps[0][j] <= four[0])) for j in range(4)]
            any4 = [float(np.mean(np.any([ps[k][j] <= four[k] for k in range(4)], axis=0))) for j in range(4)]
            rows.append(f"| {shape} | {noise:g} | {n} | " + " | ".join(f"{v:.4f}" for v in one) + " | "
                        + " | ".join(f"{v:.4f}" for v in any4) + " |")
            print(rows[-1], flush=True)
    return rows


def power_rows(tasks: list[int], worlds: int, seed: int) -> list[str]:
    levels = look_levels(3)
    rows = ["| n | noise sd | mean effect | level | plain t | 3 refs | no loss tail | now |",
            "|---|---|---|---|---|---|---|---|"]
    for n in tasks:
        for noise in (0.0, 0.41):
            sd = math.hypot(1.0, noise)
            for k, scale in enumerate((1.0, 1.5)):
                mu = scale * 2.8 * sd / math.sqrt(n)
                rng = np.random.default_rng([seed + 1, n, k, int(100 * noise)])
                d = mu + rng.standard_normal((worlds, n)) + noise * rng.standard_normal((worlds, n))
                ps = p_values(d)
                for lv in (levels[0], levels[2]):
                    rows.append(f"| {n} | {noise:g} | {mu:.3f} | {lv:g} | " + " | ".join(
                        f"{float(np.mean(p <= lv)):.3f}" for p in ps) + " |")
                    print(rows[-1], flush=True)
    return rows


def ab_rows(worlds: int, seed: int) -> list[str]:
    import dataclasses

    from experiments.ab._analysis import paired_stats
    from experiments.stats import Preregistration, ab_design, explain_verdict, mde

    sigma, tau, reps = 0.5, 0.8, 3
    rows = ["| spread | n | mean effect | the paired t alone | 'supported' (shipped: t and skew_test's p < alpha / 2) |",
            "|---|---|---|---|---|"]

    def rate(shape: str, n: int, mu: float, k: int) -> tuple[float, float]:
        prereg = Preregistration("B higher", min_effect=0.0, alpha=ALPHA, direction="greater", n_tasks=n,
                                 replications=reps, test="t")
        rng = np.random.default_rng([seed + 2, n, k])
        got = [0, 0]
        for _ in range(worlds):
            u = mu + tau * draw(shape, rng, (n,))
            ra = rng.normal(0.0, sigma, (n, reps))
            rb = u[:, None] + rng.normal(0.0, sigma, (n, reps))
            s = paired_stats(ra.mean(1), rb.mean(1), n_boot=200, ci_method="percentile")
            got[0] += bool(s.ttest.pvalue < ALPHA and s.ttest.statistic > 0)
            got[1] += explain_verdict(prereg, s)[0] == "supported"
        return got[0] / worlds, got[1] / worlds

    for n in (8, 12, 24):
        for k, shape in enumerate(("normal", "-(Exp - 1)", "-(lognormal)", "-(Gamma 0.5)", "10% lose 5")):
            b, a = rate(shape, n, 0.0, k)
            rows.append(f"| {shape} | {n} | 0 | {b:.4f} | {a:.4f} |")
            print(rows[-1], flush=True)
        design = ab_design(sigma, n, alpha=ALPHA, replications=reps, test="t", tau=tau)
        for what, e in (("the t alone's", mde(dataclasses.replace(design, skew_side=False))),
                        ("the preflight's", mde(design))):
            b, a = rate("normal", n, e, 9)
            rows.append(f"| normal (power) | {n} | {e:.3f} ({what} detectable effect) | {b:.4f} | {a:.4f} |")
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=20000)
    ap.add_argument("--tasks", default="12,24,48,144")
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--check", type=int, default=100, help="worlds per level row also run through decide (0: none)")
    ap.add_argument("--ab", action="store_true", help="the A/B's 'supported' instead of the sweep's confirmation")
    ap.add_argument("--out", default="", help="also write the tables (markdown) to this file")
    args = ap.parse_args()
    t0 = time.time()
    if args.ab:
        lines = [f"A/B 'supported' (direction greater, t, alpha 0.05, min_effect 0; tau 0.8, sigma 0.5, 3 + 3 runs), "
                 f"{args.worlds} worlds per row", "", *ab_rows(args.worlds, args.seed)]
    else:
        tasks = [int(x) for x in args.tasks.split(",")]
        looks = ", ".join(f"{v:g}" for v in look_levels(4))
        lines = [f"confirmed at a true mean of 0, {args.worlds} worlds per row (Monte Carlo sd at 0.025: "
                 f"{math.sqrt(0.025 * 0.975 / args.worlds):.4f}); 4 looks at {looks}",
                 "", *level_rows(tasks, args.worlds, args.seed, args.check), "",
                 "power: normal spread of sd 1 plus the noise, confirmed at look 1 (0.025) and look 3 (0.00625):", "",
                 *power_rows(tasks, args.worlds, args.seed)]
    lines += ["", f"({time.time() - t0:.0f} s)"]
    text = "\n".join(lines)
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
