"""The sweep's holdout confirmation over tasks on skewed spreads: level and power of today's paired t ("before")
and of the shipped rule ("after": experiments.stats.skew_test through experiments.promotion._confirmation.TaskDiffs, p = max(t p,
skew-calibrated p)), for one look, 4 resumed looks and 3 studies x 2 looks on one holdout set.

"after" is the project's own rule, experiments.stats.skew_test_p (the vectorised form of skew_test, which
TaskDiffs.of calls); "before" is the paired t's one-sided p (scipy's t, as TaskDiffs computed it at ac27838, and its
exact sign-flip p 1/2^n at zero spread); the looks' levels come from experiments.stats.next_look. --check runs the
first worlds of every row through TaskDiffs.of one by one and stops when a p differs. The futility stop (a candidate
stopped after a block is never confirmed) only turns confirmations into none, so the table leaves it out (an upper
bound on the level, and power before the stop's small cost); --futility applies experiments.promotion._futility.futility_stop.

The shipped design's holdout: 12 holdout tasks, holdout_top_k 1 (Holm over a family of one), alpha 0.05 with look k
at alpha / 2^k (one look: 0.025; 4 looks: 0.025 ... 0.003125, summing to 0.047; 3 studies x 2 looks on one holdout
set: 6 looks, 0.025 ... 0.00078, summing to 0.049). Each look tests a new candidate; its per-task differences d_i =
mu + u_i are drawn anew from the spread (no run noise: the most skewed case; run noise makes d less skewed), so "any look
confirmed" is the chance that some no-better candidate is promoted over the looks. The candidate is taken as tested
(the train filter passed): the filter's pass rate only scales these figures down.

Spreads (u, mean 0): normal; t(3); right skew (Exp - 1); the left skews -(Exp - 1), -(lognormal sigma 1) and "1 task
in 8 loses 7, the others gain 1"; coarse metrics: +-1 per task (d in {-1, +1}) and a +-1 score per
arm (d in {-2, 0, +2}). Power: normal spread of sd 1 at mu +0.5, +1.0, +2.0 and +3.0, per look level.

    python bench/power/skew_level.py                 # 20,000 worlds per row
    python bench/power/skew_level.py --worlds 2000 --alternatives   # also the rules measured and not shipped
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

from experiments.stats import first_level, holdout_tasks_for_harm, next_look  # noqa: E402
from experiments.stats._skew import skew_test_p  # noqa: E402
from experiments.stats._verdict import mean_bound  # noqa: E402
from experiments.promotion._confirmation import TaskDiffs  # noqa: E402
from experiments.promotion._futility import futility_stop  # noqa: E402

N_HOLD, BLOCK, ALPHA = 12, 4, 0.05
TASKS = [f"h{i:02d}" for i in range(N_HOLD)]
NULLS = ("normal", "t(3)", "right skew (Exp - 1)", "-(Exp - 1)", "-(lognormal sigma 1)", "1 in 8 loses 7",
         "+-1 per task", "+-1 per arm")


def draw(kind: str, rng: np.random.Generator, size: tuple[int, ...]) -> np.ndarray:
    if kind == "normal":
        return rng.standard_normal(size)
    if kind == "t(3)":
        return rng.standard_t(3, size)
    if kind == "right skew (Exp - 1)":
        return rng.exponential(1.0, size) - 1.0
    if kind == "-(Exp - 1)":
        return 1.0 - rng.exponential(1.0, size)
    if kind == "-(lognormal sigma 1)":
        return math.exp(0.5) - np.exp(rng.standard_normal(size))
    if kind == "1 in 8 loses 7":
        return np.where(rng.random(size) < 1 / 8, -7.0, 1.0)
    if kind == "+-1 per task":
        return rng.choice((-1.0, 1.0), size)
    if kind == "+-1 per arm":
        return rng.choice((-1.0, 1.0), size) - rng.choice((-1.0, 1.0), size)
    raise ValueError(kind)


def look_levels(n_looks: int) -> list[float]:
    """The levels experiments.stats.next_look gives n_looks successive looks on one holdout set."""
    stored: list[dict] = []
    out = []
    for k in range(n_looks):
        look = next_look(stored, [f"cand{k}"], ALPHA)
        out.append(look.level)
        stored.append({"family": list(look.family), "level": look.level, "number": look.number, "alpha": look.alpha})
    return out


def p_values(d: np.ndarray, futility: bool) -> tuple[np.ndarray, np.ndarray]:
    """(before, after) one-sided p per row of d (worlds, N_HOLD); with `futility` a candidate that
    experiments.promotion._futility.futility_stop ends gets p 1 (never confirmed)."""
    n = d.shape[-1]
    mean, sd = d.mean(-1), d.std(-1, ddof=1)
    flat = sd / math.sqrt(n) <= 1e-12 * np.maximum(1.0, np.abs(mean))
    with np.errstate(divide="ignore", invalid="ignore"):
        t_p = sps.t.sf(mean / (sd / math.sqrt(n)), n - 1)
    before = np.where(flat, np.where(mean > 0, 0.5 ** n, 1.0), t_p)
    after = skew_test_p(d)
    if futility:
        base = dict.fromkeys(TASKS, 0.0)
        stopped = np.array([futility_stop(dict(zip(TASKS, row.tolist())), base, TASKS, BLOCK,
                                          level=first_level(ALPHA), power=0.8) is not None
                            for row in d])
        before, after = np.where(stopped, 1.0, before), np.where(stopped, 1.0, after)
    return before, after


def check(d: np.ndarray, before: np.ndarray, after: np.ndarray) -> None:
    """The same rows through the sweep's own TaskDiffs.of: the p must agree (rows without a futility stop)."""
    base = dict.fromkeys(TASKS, 0.0)
    for w, row in enumerate(d):
        if before[w] == after[w] == 1.0:
            continue
        td = TaskDiffs.of(dict(zip(TASKS, row.tolist())), base)
        old = td.t_p if td.t_p is not None else td.p
        assert math.isclose(td.p, after[w], rel_tol=1e-9) and math.isclose(old, before[w], rel_tol=1e-9), (w, row)


def rates(kind: str, mu: float, worlds: int, levels: list[float], seed: int, checked: int = 0,
          futility: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """P(confirmed) per look (before, after), each look a new candidate: arrays (worlds, looks) of bool."""
    rng = np.random.default_rng(seed)
    d = mu + draw(kind, rng, (len(levels), worlds, N_HOLD))
    b, a = zip(*(p_values(d[k], futility) for k in range(len(levels))))
    if checked:
        check(d[0, :checked], b[0][:checked], a[0][:checked])
    lv = np.asarray(levels)[:, None]
    return (np.asarray(b) <= lv).T, (np.asarray(a) <= lv).T


def alternatives(worlds: int, seed: int) -> list[str]:
    """Rules measured and not shipped, one look (0.025) and look 3 (0.00625), same worlds model, no futility."""
    def hall(t, a):
        return t + a / 6 + a * t**2 / 3 + a**2 * t**3 / 27

    out = ["| spread | level | t | Hall's t vs t quantile | bootstrap-t (999, seed 0) | t and mean_bound (the A/B's "
           "bound) |", "|---|---|---|---|---|---|"]
    n = N_HOLD
    boot_idx = np.random.default_rng(0).integers(0, n, (999, n))
    for kind, mu in [(k, 0.0) for k in ("normal", "-(Exp - 1)", "-(lognormal sigma 1)")] + [("normal", 1.0)]:
        d = mu + draw(kind, np.random.default_rng(seed), (worlds, n))
        m, sd = d.mean(1), d.std(1, ddof=1)
        t = m / (sd / math.sqrt(n))
        a = ((d - m[:, None]) ** 3).mean(1) / sd**3 / math.sqrt(n)
        boot_p = np.empty(worlds)
        for s in range(0, worlds, 500):  # the studentized bootstrap, 999 resamples of each world's tasks
            x = d[s:s + 500][:, boot_idx]
            with np.errstate(divide="ignore", invalid="ignore"):
                ts = (x.mean(-1) - m[s:s + 500, None]) / (x.std(-1, ddof=1) / math.sqrt(n))
            ts = np.where(np.isfinite(ts), ts, 0.0)
            boot_p[s:s + 500] = (1 + (ts >= t[s:s + 500, None]).sum(1)) / 1000
        for lv in (0.025, 0.00625):
            tc = sps.t.ppf(1 - lv, n - 1)
            bound = np.array([mean_bound(r, lv, "lower") > 0 for r in d])
            name = kind if mu == 0 else f"normal +{mu:g} (power)"
            out.append(f"| {name} | {lv:g} | {np.mean(t > tc):.4f} | {np.mean(hall(t, a) > tc):.4f} | "
                       f"{np.mean(boot_p <= lv):.4f} | {np.mean((t > tc) & bound):.4f} |")
    return out


def main() -> None:
    global N_HOLD, TASKS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=52)
    ap.add_argument("--alternatives", action="store_true", help="also the rules measured and not shipped")
    ap.add_argument("--tasks", type=int, default=N_HOLD, help="holdout tasks (the shipped design: 12)")
    ap.add_argument("--futility", action="store_true",
                    help="apply the sweep's futility stop (experiments.promotion._futility.futility_stop, one call per world: slow)")
    ap.add_argument("--check", type=int, default=200, help="worlds per row also run through TaskDiffs.of (0: none)")
    ap.add_argument("--out", default="", help="also write the tables (markdown) to this file")
    args = ap.parse_args()
    N_HOLD, TASKS = args.tasks, [f"h{i:02d}" for i in range(args.tasks)]
    t0 = time.time()
    four, six = look_levels(4), look_levels(6)
    stop = f"futility stop every {BLOCK} tasks" if args.futility else "no futility stop"
    lines = [f"holdout {N_HOLD} tasks, {stop}, top-k 1, {args.worlds} worlds per row; "
             f"4 looks at {', '.join(f'{v:g}' for v in four)} (sum {sum(four):.4f}); 3 studies x 2 looks: 6 looks "
             f"down to {six[-1]:g} (sum {sum(six):.4f})", "",
             "| spread (mean 0) | one look, level 0.025: before | after | 4 looks (alpha 0.047): before | after "
             "| 3 studies x 2 looks (alpha 0.049): before | after |", "|---|---|---|---|---|---|---|"]
    got = {}
    for i, kind in enumerate(NULLS):
        b, a = got[kind] = rates(kind, 0.0, args.worlds, six, args.seed + i, args.check, args.futility)
        lines.append(f"| {kind} | {b[:, 0].mean():.4f} | {a[:, 0].mean():.4f} | {b[:, :4].any(1).mean():.4f} | "
                     f"{a[:, :4].any(1).mean():.4f} | {b.any(1).mean():.4f} | {a.any(1).mean():.4f} |")
        print(lines[-1], flush=True)
    lines += ["", "per-look level (after), the look's own level beside it:", "",
              "| spread (mean 0) | " + " | ".join(f"look {k + 1} ({v:g})" for k, v in enumerate(six)) + " |",
              "|---|" + "---|" * len(six)]
    for kind in NULLS:
        b, a = got[kind]
        lines.append(f"| {kind} | " + " | ".join(f"{a[:, k].mean():.4f} (before {b[:, k].mean():.4f})"
                                                 for k in range(len(six))) + " |")
    lines += ["", "power: a normal spread of sd 1, P(confirmed) at each look's level, before -> after:", "",
              "| mean effect | " + " | ".join(f"look {k + 1} ({v:g})" for k, v in enumerate(six)) + " |",
              "|---|" + "---|" * len(six)]
    for j, mu in enumerate((0.5, 1.0, 2.0, 3.0)):
        b, a = rates("normal", mu, args.worlds, six, args.seed + 100 + j, args.check, args.futility)
        lines.append(f"| +{mu:g} | " + " | ".join(f"{b[:, k].mean():.3f} -> {a[:, k].mean():.3f}"
                                                  for k in range(len(six))) + " |")
        print(lines[-1], flush=True)
    lines += ["", "1 task in k loses: the holdout tasks n with ((k-1)/k)^n <= level (experiments.stats."
              f"holdout_tasks_for_harm); {N_HOLD} tasks miss it with probability ((k-1)/k)^{N_HOLD}:", "",
              f"| k | missed by {N_HOLD} tasks | n at 0.025 | n at 0.0125 | n at 0.00625 | n at 0.003125 |",
              "|---|---|---|---|---|---|"]
    for k in (4, 8, 16):
        lines.append(f"| {k} | {((k - 1) / k) ** N_HOLD:.3f} | " + " | ".join(
            str(holdout_tasks_for_harm(k, lv)) for lv in four) + " |")
    if args.alternatives:
        lines += ["", f"rules measured and not shipped ({min(args.worlds, 4000)} worlds, one look; t: today's):", "",
                  *alternatives(min(args.worlds, 4000), args.seed)]
    lines += ["", f"({time.time() - t0:.0f} s)"]
    text = "\n".join(lines)
    print("\n" + text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
