"""What the holdout confirmation over 8 tasks can and cannot see, and what sweep.max_task_loss costs and prevents;
also the looks of two studies on one storage.

Every figure goes through the project's own `experiments.promotion._decide.decide` (the real rule: train filter, one-sided
paired t over the holdout tasks at the look's level, Holm over a family of one, the worst-task guard), "before" on
3306971 (the tree at --base, run in a child process: its decide has no guard and gave p = 0 to equal differences),
"after" on this tree. Each world draws its per-task holdout differences d_i (candidate - baseline, one run of each
text per task as the shipped design runs) from one seeded generator, so before and after see the same worlds.

Worlds (8 holdout tasks, level 0.025 = alpha 0.05 / 2, the first look):
- harm: "left skew" (1 task in 8 loses 7, the others gain 1: mean 0), "-lognormal" (d = -(e^Z - e^0.5): mean 0,
  a long left tail), "-0.81" (1 in 8 loses 10, the others gain 0.5), and a real mean gain that wrecks a task
  (1 in 8 loses 4, the others gain 2: mean +1.25); without run noise, then with run noise
  sigma 0.25 and 1.0 per run (d gets N(0, 2 sigma^2));
- harmless, true mean mu in {0.3, 0.5, 1.0}: "normal" (task x variant spread tau 0.5, normal) and "right skew"
  (the same sd, standardized lognormal: a few tasks gain much), each with run noise sigma in {0.25, 0.75, 1.5}.
A guard at L holds back a confirmed candidate whose worst holdout task lost more than L (d_i < -L).

    python bench/power/holdout_task_loss.py                  # ~5 min on a shared core (2,000 worlds per row, 2 x 2 sweeps)
    python bench/power/holdout_task_loss.py --worlds 500 --no-sweeps
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

HERE = Path(__file__).resolve().parents[2]
TREE = Path(os.environ.get("BENCH_TREE", HERE))
sys.path[:0] = [str(TREE), str(TREE / "tests")]

N_HOLD, LEVEL, TAU = 8, 0.025, 0.5
GUARDS = (None, 1.5, 2.0, 3.0, 4.0, 5.0)  # sweep.max_task_loss; the shipped default is None (off): docs/VERDICTS.md


# -- worlds ---------------------------------------------------------------------------------------------------


def harm_worlds(worlds: int, sigma: float) -> dict[str, tuple[float, list[list[float]]]]:
    """name -> (true mean, per-world per-task differences)."""
    import numpy as np

    rng = np.random.default_rng(40 + int(sigma * 100))
    noise = (lambda: rng.normal(0.0, sigma * math.sqrt(2.0), N_HOLD)) if sigma > 0 else (lambda: np.zeros(N_HOLD))
    out = {}
    skew = [np.where(rng.random(N_HOLD) < 1 / 8, -7.0, 1.0) + noise() for _ in range(worlds)]
    out["left skew (1 in 8 loses 7, others +1)"] = (0.0, skew)
    logn = [-(np.exp(rng.normal(0.0, 1.0, N_HOLD)) - math.exp(0.5)) + noise() for _ in range(worlds)]
    out["-lognormal"] = (0.0, logn)
    wreck = [np.where(rng.random(N_HOLD) < 1 / 8, -10.0, 0.5) + noise() for _ in range(worlds)]
    out["1 in 8 loses 10, others +0.5"] = (7 / 8 * 0.5 - 10 / 8, wreck)
    gain = [np.where(rng.random(N_HOLD) < 1 / 8, -4.0, 2.0) + noise() for _ in range(worlds)]
    out["1 in 8 loses 4, others +2 (a real gain)"] = (7 / 8 * 2.0 - 4 / 8, gain)
    return {k: (m, [list(map(float, d)) for d in v]) for k, (m, v) in out.items()}


def power_worlds(worlds: int, sigma: float, mu: float) -> dict[str, list[list[float]]]:
    import numpy as np

    rng = np.random.default_rng(4000 + int(sigma * 100) + int(mu * 10))
    sd_ln = math.sqrt((math.e - 1) * math.e)
    normal = [mu + rng.normal(0.0, TAU, N_HOLD) + rng.normal(0.0, sigma * math.sqrt(2), N_HOLD) for _ in range(worlds)]
    right = [mu + TAU * (np.exp(rng.normal(0.0, 1.0, N_HOLD)) - math.exp(0.5)) / sd_ln
             + rng.normal(0.0, sigma * math.sqrt(2), N_HOLD) for _ in range(worlds)]
    return {"normal": [list(map(float, d)) for d in normal], "right skew": [list(map(float, d)) for d in right]}


# -- the rule -------------------------------------------------------------------------------------------------


def judge(diffs: list[list[float]]) -> list[tuple[bool, float]]:
    """(confirmed by decide with the guard off, worst task's difference) per world, on the tree imported."""
    from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
    from experiments.promotion._decide import Candidate, decide

    train = [f"t{i}" for i in range(16)]
    scores = {t: 6.0 + 0.01 * i for i, t in enumerate(train)}  # passes the train filter: the holdout decides
    cand = Candidate(1, "c", "op", sum(scores.values()) / len(scores), scores, {"research": "candidate"})
    ref = {t: 5.0 for t in train}
    hold = [f"h{i}" for i in range(N_HOLD)]
    base = HoldoutScores({h: 5.0 + 0.1 * i for i, h in enumerate(hold)})
    out = []
    for d in diffs:
        held = {"c": HoldoutScores({h: 5.0 + 0.1 * i + x for i, (h, x) in enumerate(zip(hold, d))})}
        v = decide([cand], ref, base, held, train_floor=0.0, alpha=0.05, test=HoldoutTest(0.0, None, LEVEL))
        out.append((v.winner is not None, min(d)))
    return out


def rate(judged: list[tuple[bool, float]], guard: float | None) -> float:
    return sum(won and (guard is None or worst >= -guard) for won, worst in judged) / len(judged)


def guard_agrees(diffs: list[list[float]], guard: float) -> bool:
    """decide(max_task_loss=guard) agrees with `rate`'s reading of the guard on these worlds (this tree only)."""
    from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
    from experiments.promotion._decide import Candidate, decide

    train = [f"t{i}" for i in range(16)]
    scores = {t: 6.0 + 0.01 * i for i, t in enumerate(train)}
    cand = Candidate(1, "c", "op", sum(scores.values()) / len(scores), scores, {"research": "candidate"})
    hold = [f"h{i}" for i in range(N_HOLD)]
    base = HoldoutScores({h: 5.0 for h in hold})
    judged = judge(diffs)
    for d, (won, worst) in zip(diffs, judged):
        held = {"c": HoldoutScores({h: 5.0 + x for h, x in zip(hold, d)})}
        v = decide([cand], {t: 5.0 for t in train}, base, held, train_floor=0.0, alpha=0.05,
                   test=HoldoutTest(0.0, None, LEVEL), max_task_loss=guard)
        if (v.winner is not None) != (won and worst >= -guard):
            return False
    return True


# -- E: two studies on one storage ------------------------------------------------------------------------------


def two_studies() -> dict:
    """Study s1 (look 1 spent by an earlier candidate) tests the candidate at look 2; study s2, a new sweep.name on
    the same storage and holdout tasks, tests the same candidate (tests/test_issue40_promotion.py's world)."""
    import dataclasses

    import optuna
    from scripted_harness import BOOST, ScriptedRunner, scripted_propose

    from experiments.config import BenchmarkConfig, compose_config, load_tasks, to_experiment
    from experiments.config._schema import TaskSpec
    from experiments.sweep import run_sweep
    from experiments.sweep._study import open_study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    spread = {"h0": 1.6, "h1": 1.4, "h2": 1.2, "h3": 1.0, "h4": 0.6, "h5": 0.2, "h6": -0.1, "h7": -0.4}

    class Runner(ScriptedRunner):
        def __init__(self, tasks):
            super().__init__(tasks, noise=0.05, effect=0.0)
            self.ids = {t.task: t.id for t in tasks}

        def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
            out = super().finish(prepared, instructions=instructions, run_id=run_id, criteria=criteria, seed=seed)
            add = spread.get(self.ids[prepared["task"]], 1.0) if BOOST in instructions[prepared["task_type"]].lower() \
                else 0.0
            return dataclasses.replace(out, score=out.score + add, selection_score=out.selection_score + add)

    with tempfile.TemporaryDirectory() as tmp:
        exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", "sweep.n_trials=3",
                                            "sweep.name=s1", f"results_dir={tmp}"]))
        exp.benchmark = BenchmarkConfig(name="issue40", tasks=[
            TaskSpec(id=f"{p}{i}", task=f"{p} task {i}", task_type=("enumerated", "research")[i % 2],
                     split="train" if p == "t" else "holdout") for p in ("t", "h") for i in range(8)])
        from scripted_harness import BASE

        exp.synth.instructions = dict(BASE)
        exp.sweep.operators = ["add_tool"]
        exp.sweep.storage = f"sqlite:///{Path(tmp) / 'optuna.db'}"
        exp.mlflow.enabled = False
        open_study(exp).set_user_attr("holdout_looks", [{"family": ["an-earlier-candidate"], "level": 0.025}])
        out = {}
        for name in ("s1", "s2"):
            e = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, name=name))
            s = run_sweep(e, Runner(load_tasks(e.benchmark)), propose=scripted_propose, out=lambda line: None)
            (row,) = s.holdout
            out[name] = {"p": row.holdout_p, "level": row.holdout_level, "wins": row.wins, "promoted": s.promoted}
        return out


# -- the report -------------------------------------------------------------------------------------------------


def measure(worlds: int, sweeps: bool) -> dict:
    """Everything the tree imported can measure (the child process runs this on 3306971)."""
    t0 = time.perf_counter()
    res: dict = {"harm": {}, "power": {}}
    for sigma in (0.0, 0.25, 1.0):
        for name, (mean, diffs) in harm_worlds(worlds, sigma).items():
            res["harm"][f"{name}|{sigma}"] = {"mean": mean, "judged": judge(diffs)}
    res["sweeps"] = two_studies() if sweeps else None
    res["seconds"] = time.perf_counter() - t0
    return res


def measure_power(worlds: int) -> dict:
    out = {}
    for sigma in (0.25, 0.75, 1.5):
        for mu in (0.3, 0.5, 1.0):
            for shape, diffs in power_worlds(worlds, sigma, mu).items():
                out[f"{shape}|{sigma}|{mu}"] = judge(diffs)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worlds", type=int, default=2000)
    p.add_argument("--base", default="/work/base", help="a checkout of 3306971 (the 'before' column)")
    p.add_argument("--no-sweeps", action="store_true", help="skip E's scripted sweeps")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    os.environ.setdefault("DDGS_DISABLED", "1")
    if args.child:
        print(json.dumps(measure(args.worlds, not args.no_sweeps)))
        return 0
    t0 = time.perf_counter()
    env = {**os.environ, "BENCH_TREE": args.base, "PYTHONPATH": args.base}
    cmd = [sys.executable, __file__, "--child", "--worlds", str(args.worlds)] + (["--no-sweeps"] if args.no_sweeps
                                                                                 else [])
    before = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True,
                                       cwd=args.base).stdout.splitlines()[-1])
    after = measure(args.worlds, not args.no_sweeps)
    power = measure_power(args.worlds)
    n = args.worlds

    print(f"## D: confirmations through `decide` ({N_HOLD} holdout tasks, level {LEVEL}, {n} worlds per row)\n")
    print("| world | run noise sigma | true mean | before (3306971) | after, guard off | "
          + " | ".join(f"after, max_task_loss={g:g}" for g in GUARDS if g is not None) + " |")
    print("| --- | --- | --- | --- | --- | " + " | ".join("---" for g in GUARDS if g is not None) + " |")
    for key, row in after["harm"].items():
        name, sigma = key.split("|")
        b = rate(before["harm"][key]["judged"], None)
        cells = [f"{rate(row['judged'], g):.3f}" for g in GUARDS]
        print(f"| {name} | {float(sigma):g} | {row['mean']:+.3f} | {b:.3f} | " + " | ".join(cells) + " |")
    miss = ((N_HOLD - 1) / N_HOLD) ** N_HOLD
    print(f"\nA harm to 1 task in k is missed by n holdout tasks with probability ((k-1)/k)^n: "
          f"(7/8)^8 = {miss:.3f}; no rule on the 8 differences sees a task that is not among them.\n")

    print(f"## D: what sweep.max_task_loss costs: confirmations of harmless candidates (task x variant sd "
          f"{TAU}, {n} worlds per row)\n")
    print("| spread | run noise sigma | true mean | " + " | ".join(
        "guard off" if g is None else f"max_task_loss={g:g}" for g in GUARDS) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in GUARDS) + " |")
    for key, judged in power.items():
        shape, sigma, mu = key.split("|")
        print(f"| {shape} | {float(sigma):g} | {float(mu):+.1f} | "
              + " | ".join(f"{rate(judged, g):.3f}" for g in GUARDS) + " |")

    diffs = harm_worlds(200, 0.25)["1 in 8 loses 4, others +2 (a real gain)"][1]
    print(f"\ndecide(max_task_loss=3) agrees with the table's reading of the guard on 200 'loses 4, others +2' worlds: "
          f"{guard_agrees(diffs, 3.0)}\n")

    if after["sweeps"] is not None:
        print("## E: two studies on one storage and the same 8 holdout tasks (scripted sweeps)\n")
        print("| study | tree | holdout p | level | wins | promoted |")
        print("| --- | --- | --- | --- | --- | --- |")
        for tree, res in (("before (3306971)", before), ("after", after)):
            for study, r in res["sweeps"].items():
                print(f"| {study} | {tree} | {r['p']:.4f} | {r['level']:.4g} | {r['wins']} | {r['promoted']} |")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
