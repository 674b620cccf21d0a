"""The cost guard at its limit (this tree's and 3306971's at --base), and decision_power's wall time and honesty.

G. The same simulated worlds go through 3306971's `CostGuard.check` (loaded from /work/base, or --base) and
today's. Worlds (task base costs B_i, the candidate's per-task ratio R_i with mean 1 + increase, so the ratio of
total costs is 1 + increase in expectation):
- normal: B_i ~ N(500, 150) (at least 50); b_i = B_i (1 + 0.1 z), c_i = (1 + increase) B_i (1 + 0.1 z');
- lognormal: B_i lognormal (median 300, log sd 1); c_i = B_i R_i, R_i lognormal (log sd 0.4);
- one heavy task: one task costs 3,000, the others about 100 (log sd 0.2); R_i lognormal (log sd 0.3).
The limit is 10% (sweep.max_cost_increase=0.1); levels 0.025 (the first holdout look's) and 0.05. Rows: at the
limit (pass rate should be at most the level), at a true +30% and at a true -20% (the power kept).

I. decision_power's wall time over a grid of sigma and tau (cold caches, on this machine), and its Monte Carlo
evaluations; 3306971's in a subprocess (stopped after --base-timeout seconds). Then the honesty check: at each
reported detectable effect, the real rule (experiments.stats.compare for the train filter with the 2-SE floor,
experiments.sweep's TaskDiffs for the holdout t at the look's level) confirms in simulated worlds (task effects
mean + tau u_i, run noise sigma; one candidate run against 2 baseline runs on the train tasks, 1 against 1 on the
holdout): it should be about the power, 0.8.

    python bench/power/cost_guard_and_decision_power.py [--worlds 2000] [--base /work/base]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

LIMIT = 0.1
WORLDS = ("normal", "lognormal", "one heavy task")


def costs(kind: str, n: int, increase: float, rng: np.random.Generator) -> tuple[dict, dict]:
    if kind == "normal":
        big = np.clip(rng.normal(500.0, 150.0, n), 50.0, None)
        b = big * (1 + 0.1 * rng.standard_normal(n))
        c = (1 + increase) * big * (1 + 0.1 * rng.standard_normal(n))
    else:
        if kind == "lognormal":
            b, s = np.exp(rng.normal(math.log(300.0), 1.0, n)), 0.4
        else:
            b, s = 100.0 * np.exp(rng.normal(0.0, 0.2, n)), 0.3
            b[0] = 3000.0
        c = b * (1 + increase) * np.exp(rng.normal(-s * s / 2, s, n))
    return ({f"t{i}": float(x) for i, x in enumerate(c)}, {f"t{i}": float(x) for i, x in enumerate(b)})


def load_base_cost(base: Path):
    spec = importlib.util.spec_from_file_location("base_cost", base / "experiments" / "stats" / "_cost.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["base_cost"] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


def guard_rows(worlds: int, base: Path) -> list[str]:
    from experiments.stats import CostGuard

    old = load_base_cost(base)
    rows = ["| costs | tasks | true change | level | pass rate 3306971 | pass rate now |", "|---|---|---|---|---|---|"]
    for kind in WORLDS:
        for n in (8, 24):
            for increase in (LIMIT, 0.3, -0.2):
                w = worlds if increase == LIMIT else max(worlds // 2, 200)
                rng = np.random.default_rng([40, WORLDS.index(kind), n, int(round(increase * 100)) + 100])
                data = [costs(kind, n, increase, rng) for _ in range(w)]
                for level in (0.025, 0.05):
                    before = old.CostGuard("completion_tokens", LIMIT, alpha=level)
                    after = CostGuard("completion_tokens", LIMIT, alpha=level)
                    pb = sum(before.check(c, b).passed for c, b in data) / w
                    pa = sum(after.check(c, b).passed for c, b in data) / w
                    label = "at the limit +10%" if increase == LIMIT else f"{increase:+.0%}"
                    rows.append(f"| {kind} | {n} | {label} | {level:g} | {pb:.3f} | {pa:.3f} |")
    return rows


GRID = [(0.0, 0.0), (1e-300, 0.0), (1e-6, 0.0), (0.01, 0.01), (1.455, 1.271), (1.455, 0.0), (0.0, 1.271),
        (10.0, 10.0), (1e6, 1e6)]
DESIGN = dict(n_train=16, n_holdout=8, alpha=0.05, level=0.025, baseline_runs=2)

_TIME_ONE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from experiments.stats import decision_power
s, t, sims = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
t0 = time.perf_counter()
dp = decision_power(s, t, n_train=16, n_holdout=8, alpha=0.05, level=0.025, baseline_runs=2, sims=sims)
print(json.dumps({"s": time.perf_counter() - t0, "mde": dp.mde, "needed": dp.needed}))
"""


def time_one(root: Path, sigma: float, tau: float, sims: int, timeout: float) -> dict:
    try:
        p = subprocess.run([sys.executable, "-c", _TIME_ONE, str(root), repr(sigma), repr(tau), str(sims)],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"s": None}
    if p.returncode != 0:
        return {"s": None, "error": p.stderr.strip().splitlines()[-1]}
    return json.loads(p.stdout)


def timing_rows(base: Path, base_timeout: float) -> list[str]:
    """Each grid point timed in a fresh process on both trees, so every call starts with cold caches (the Monte
    Carlo evaluations it takes are counted in tests/test_issue40_cost_power.py, not here)."""
    rows = ["| sigma | tau | sims | now: s | now: MDE | now: needed (train + holdout) | 3306971: s | 3306971: MDE |",
            "|---|---|---|---|---|---|---|---|"]
    for sims in (1000, 2000):
        for sigma, tau in GRID:
            now = time_one(ROOT, sigma, tau, sims, 600.0)
            old = time_one(base, sigma, tau, sims, base_timeout)
            old_s = f"{old['s']:.2f}" if old.get("s") is not None else (
                f"error: {old['error']}" if "error" in old else f"over {base_timeout:g} (stopped)")
            old_m = f"{old['mde']:.4g}" if old.get("mde") is not None else "-"
            need = f"{now['needed'][0]} + {now['needed'][1]}" if now.get("needed") else "more than 500 holdout"
            took = f"{now['s']:.2f}" if now.get("s") is not None else f"error: {now.get('error', 'timeout')}"
            mde = f"{now['mde']:.4g}" if now.get("mde") is not None else "-"
            rows.append(f"| {sigma:g} | {tau:g} | {sims} | {took} | {mde} | {need} | {old_s} | {old_m} |")
    return rows


def honesty_rows(worlds: int) -> list[str]:
    """The real rule's confirmation rate at each reported detectable effect (it should be about 0.8)."""
    from experiments.stats import compare, decision_power
    from experiments.promotion._confirmation import TaskDiffs

    rows = ["| sigma | tau | reported MDE | real rule confirms |", "|---|---|---|---|"]
    rng = np.random.default_rng(4040)
    n_tr, n_ho, b = DESIGN["n_train"], DESIGN["n_holdout"], DESIGN["baseline_runs"]
    for sigma, tau in ((1.455, 1.271), (1.455, 0.0), (0.5, 0.5), (0.25, 1.0), (1.0, 0.3)):
        mde = decision_power(sigma, tau, **DESIGN).mde
        floor = 2.0 * sigma * math.sqrt((1.0 + 1.0 / b) / n_tr)
        hits = 0
        for _ in range(worlds):
            eff_tr = mde + tau * rng.standard_normal(n_tr)
            cand = eff_tr + sigma * rng.standard_normal(n_tr)
            base = sigma * rng.standard_normal((b, n_tr)).mean(axis=0)
            cmp = compare({f"t{i}": float(x) for i, x in enumerate(cand)},
                          {f"t{i}": float(x) for i, x in enumerate(base)}, floor=floor, alpha=DESIGN["alpha"])
            if not cmp.claimed:
                continue
            spread = tau * rng.standard_normal(n_ho)
            noise = sigma * (rng.standard_normal(n_ho) - rng.standard_normal(n_ho))  # 1 candidate vs 1 baseline run
            d = mde + spread + noise
            td = TaskDiffs.of({f"h{i}": float(x) for i, x in enumerate(d)}, {f"h{i}": 0.0 for i in range(n_ho)})
            hits += td.p is not None and td.p < DESIGN["level"]
        rows.append(f"| {sigma:g} | {tau:g} | {mde:.3f} | {hits / worlds:.3f} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, default=2000, help="simulated worlds per cost row at the limit")
    ap.add_argument("--base", type=Path, default=Path("/work/base"), help="a checkout of 3306971")
    ap.add_argument("--base-timeout", type=float, default=20.0,
                    help="seconds before 3306971's decision_power is stopped")
    args = ap.parse_args()
    print(f"## G. Cost guard at a {LIMIT:.0%} limit ({args.worlds} worlds at the limit, half that elsewhere)\n")
    print("\n".join(guard_rows(args.worlds, args.base)))
    print("\n## I. decision_power: wall time (16 train + 8 holdout tasks, alpha 0.05, level 0.025, 2 baseline runs)\n")
    print("\n".join(timing_rows(args.base, args.base_timeout)))
    print(f"\n## I. At each reported detectable effect, the real rule's confirmation rate ({args.worlds} worlds)\n")
    print("\n".join(honesty_rows(args.worlds)))


if __name__ == "__main__":
    main()
