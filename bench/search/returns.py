"""What the search returns, in a simulated world whose truth is known (bench/search/world.py).

    nice -n 10 python bench/search/returns.py [--seeds 10] [--trials 20] [--sizes auto 48+144] [--worlds gain null zero]
                                              [--set sweep.KEY=VALUE ...] [--json out.json]

Each seed runs the project's own sweep (experiments.sweep.run_sweep: its search, operators, race, train filter and
holdout confirmation through experiments.promotion.decide) on the shipped synth_mutation config, with the harness
replaced by the world's Runner and the mutation model by the world's LLM. Per seed it prints the gain available
(every helpful property in every task type), found (the true worth of the best candidate the search evaluated on
the full train split) and returned (the true worth of the promoted text, 0 when none), each as a share of the
available gain, and the model calls (CALLS_PER_RUN a task run plus the mutation requests).

Sizes: "auto" is the holdout `tasks.count=auto` picks for +0.3 at power 0.8 (experiments.tasks' own sizing,
needed_sizes, with the world's run noise sigma and the larger of the spreads a calibration measures: its A/A' arm's, a
neutral rewrite's, NEUTRAL_SD, and its positive control's, control_spread), its train split as large; "auto-aa" the
size by the A/A' arm's spread alone (the sizing before it took the larger); "48+144" a given 48 train + 144 holdout.
Worlds: gain (edits help), null (no edit does anything) and zero (edits help some tasks and hurt others as much):
in null and zero every promotion is false.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.search.world import NEUTRAL_SD, SIGMA, World, WorldRunner  # noqa: E402


# the simulations behind the summary's design power line (what this design could have confirmed: a report that
# decides nothing), fewer than a user's sweep runs so that ten seeds take minutes
REPORT_SIMS = 100


def auto_size(effect: float = 0.3, power: float = 0.8, tau: float = NEUTRAL_SD) -> tuple[int, int]:
    """(train, holdout) as tasks.count=auto sizes them (experiments.tasks._sizing), for sigma SIGMA and tau."""
    from experiments.config import compose_config, to_experiment
    from experiments.tasks._sizing import needed_sizes, shipped_sweep

    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]), environ={})
    sw = shipped_sweep(exp)
    needed = needed_sizes(SIGMA, tau, float(sw.alpha), int(sw.baseline_repeats),
                     (sw.holdout_candidate_runs, sw.holdout_baseline_runs), power, effect, 400, sw.train_filter,
                     int(sw.holdout_futility_block), None, (int(sw.race_block), float(sw.race_z)))
    if needed is None:
        raise SystemExit(f"no holdout confirms +{effect} at tau {tau}")
    return max(needed), needed[1]


def control_spread(seed: int = 0, n_tasks: int = 24, runs: int = 3) -> float:
    """The spread a calibration's positive control shows in the world: the instruction holding every big property
    of each type (a clearly better text, as a hand-written control is) against the baseline, `runs` runs of each on
    n_tasks tasks, tau from experiments.stats.spread_from_trials with the run noise of the baseline's runs taken out."""
    from experiments.config import compose_config, to_experiment
    from experiments.stats import noise_floor, spread_from_trials
    from harness.config import TASK_TYPES

    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]), environ={})
    w = World.make(seed, exp.synth.instructions)
    control = {tt: " ".join([exp.synth.instructions[tt]] + [p.constraint.text for p in w.props[tt] if p.gain >= w.big])
               for tt in TASK_TYPES}
    tasks = [(f"c{i}", TASK_TYPES[i % len(TASK_TYPES)]) for i in range(n_tasks)]
    base = [{t: w.judge(tt, exp.synth.instructions[tt], t, 900 + k)[0] for t, tt in tasks} for k in range(runs)]
    ctrl = [{t: w.judge(tt, control[tt], t, 900 + k)[0] for t, tt in tasks} for k in range(runs)]
    diffs = [[sum(r[t] for r in ctrl) / runs - sum(r[t] for r in base) / runs for t, _ in tasks]]
    sigma = noise_floor(base).sigma
    return spread_from_trials(diffs, 2 * sigma ** 2 / runs)[0]


def parse_size(text: str) -> tuple[int, int]:
    if text == "auto-aa":  # the sizing by a neutral rewrite's spread (the A/A' arm alone)
        return auto_size()
    if text == "auto":  # the sizing by the larger of that and the positive control's spread (experiments.tasks)
        return auto_size(tau=max(NEUTRAL_SD, control_spread()))
    a, b = text.split("+")
    return int(a), int(b)


def task_specs(n_train: int, n_holdout: int) -> list[Any]:
    from experiments.config._schema import TaskSpec
    from harness.config import TASK_TYPES

    out = []
    for split, n in (("train", n_train), ("holdout", n_holdout)):
        for i in range(n):
            tt = TASK_TYPES[i % len(TASK_TYPES)]
            out.append(TaskSpec(id=f"{split[0]}{i}", task=f"simulated {tt} task {split} {i}", task_type=tt,
                                split=split))
    return out


def world_experiment(results: Path, benchmark: str, sweep: str, n_train: int, n_holdout: int, trials: int, seed: int,
                     overrides: Sequence[str] = ()) -> Any:
    """The shipped synth_mutation experiment (with `overrides`) on n_train + n_holdout simulated tasks, its study and
    results under `results`, `trials` trials at sweep seed `seed`, no plots and no MLflow (they decide nothing), the
    summary's design power line from REPORT_SIMS simulations."""
    from experiments.config import BenchmarkConfig, compose_config, to_experiment

    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", *overrides]), environ={})
    exp.results_dir = str(results)
    exp.benchmark = BenchmarkConfig(name=benchmark, tasks=task_specs(n_train, n_holdout))
    sw = exp.sweep
    sw.name, sw.n_trials, sw.seed = sweep, trials, seed
    sw.storage = f"sqlite:///{results / 'optuna.db'}"
    sw.plots = False
    exp.calibrate.sims = REPORT_SIMS
    exp.mlflow.enabled = False
    return exp


def scratch(prefix: str) -> Path:
    """A quiet bench run's scratch folder (in /dev/shm where there is one), set as HARNESS_RESULTS_DIR; warnings and
    Optuna's trial lines off."""
    logging.disable(logging.WARNING)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix=prefix, dir=shm if shm.is_dir() else None))
    os.environ["HARNESS_RESULTS_DIR"] = str(base)
    return base


def run_seed(seed: int, kind: str, n_train: int, n_holdout: int, trials: int, overrides: list[str],
             base: Path) -> dict:
    """One sweep in one world: found, returned (shares of the available gain), calls, the promotion."""
    from experiments.sweep import run_sweep

    results = base / f"{kind}-{seed}-{n_train}-{n_holdout}"
    exp = world_experiment(results, f"world{seed}", "world", n_train, n_holdout, trials, seed, overrides)
    sw = exp.sweep
    world = World.make(seed, exp.synth.instructions, kind)
    runner = WorldRunner(world, exp.benchmark.tasks)
    summary = run_sweep(exp, runner, out=lambda s: None)
    worths = [world.worth(ins) for ins in _complete_instructions(summary, sw.storage)]
    available = world.available
    returned = world.worth(summary.promoted_instructions) if summary.promoted else 0.0
    found = max(worths, default=0.0)
    shutil.rmtree(results, ignore_errors=True)
    share = (lambda v: v / available) if available > 0 else (lambda v: float("nan"))
    return {"seed": seed, "world": kind, "train": n_train, "holdout": n_holdout, "available": available,
            "found": found, "returned": returned, "found_share": share(found), "returned_share": share(returned),
            "promoted": bool(summary.promoted), "false_promotion": bool(summary.promoted) and returned <= 0.0,
            "worse_promoted": bool(summary.promoted) and returned < 0.0, "candidates": len(worths),
            "calls": runner.llm_calls(), "task_runs": runner.task_runs, "mutation_calls": runner.mutation_llm.calls}


def _complete_instructions(summary: Any, storage: str) -> list[dict]:
    """The instructions of every candidate the search evaluated on the full train split (COMPLETE trials)."""
    import optuna

    study = optuna.load_study(study_name=summary.sweep, storage=storage)
    return [t.user_attrs["instructions"] for t in study.get_trials(deepcopy=False)
            if t.state.name == "COMPLETE" and t.user_attrs.get("instructions")]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sizes", nargs="+", default=["auto", "48+144"])
    ap.add_argument("--worlds", nargs="+", default=["gain", "null", "zero"])
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="a Hydra override for the sweep, e.g. sweep.parent_selection=pareto")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--quiet", action="store_true", help="print the summary table only")
    args = ap.parse_args(argv)

    base = scratch("bench-search-")
    t0 = time.perf_counter()
    rows = []
    sizes = [(s, parse_size(s)) for s in args.sizes]
    print(f"== what the search returns: {args.trials} trials, seeds {args.first_seed}..{args.first_seed + args.seeds - 1}, "
          f"overrides {args.overrides or 'none'} ==")
    print("sizes: " + ", ".join(f"{s} = {a} + {b}" for s, (a, b) in sizes))
    for kind in args.worlds:
        for label, (n_train, n_hold) in sizes:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                r = run_seed(seed, kind, n_train, n_hold, args.trials, args.overrides, base)
                r["size"] = label
                rows.append(r)
                if not args.quiet:
                    print(f"{kind:5s} {label:7s} seed {seed:2d}: available {r['available']:+.2f}  found "
                          f"{r['found']:+.3f} ({pct(r['found_share'])})  returned {r['returned']:+.3f} "
                          f"({pct(r['returned_share'])})  candidates {r['candidates']:2d}  calls {r['calls']}"
                          f"{'  PROMOTED' if r['promoted'] else ''}", flush=True)
    shutil.rmtree(base, ignore_errors=True)
    print(f"-- summary ({time.perf_counter() - t0:.0f} s) --")
    table = summary_table(rows, args.worlds, sizes)
    out = {"rows": rows, "table": table, "args": {k: str(v) for k, v in vars(args).items()}}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


def summary_table(rows: list[dict], worlds: list[str], sizes: list[tuple[str, tuple[int, int]]],
                  extra: tuple[str, ...] = ()) -> dict[str, dict]:
    """Print and return the summary per world and size: found and returned (gain world only: elsewhere there is
    nothing to find), the share promoted, false and worse promotions, mean calls, and the means of `extra` keys."""
    print(f"{'world':5s} {'size':10s} {'found':>7s} {'returned':>8s} {'promoted':>8s} {'false':>6s} {'worse':>6s} "
          f"{'calls':>7s}")
    table = {}
    for kind in worlds:
        for label, (n_train, n_hold) in sizes:
            rs = [r for r in rows if r["world"] == kind and r["size"] == label]
            f = statistics.mean(r["found_share"] for r in rs) if kind == "gain" else float("nan")
            ret = statistics.mean(r["returned_share"] for r in rs) if kind == "gain" else float("nan")
            row = {"found": f, "returned": ret, "promoted": sum(r["promoted"] for r in rs) / len(rs),
                   "false": sum(r["false_promotion"] for r in rs) / len(rs),
                   "worse": sum(r["worse_promoted"] for r in rs) / len(rs),
                   "calls": statistics.mean(r["calls"] for r in rs), "n": len(rs),
                   **{k: statistics.mean(r[k] for r in rs) for k in extra}}
            table[f"{kind} {label}"] = row
            print(f"{kind:5s} {label + f' {n_train}+{n_hold}':10s} {pct(f):>7s} {pct(ret):>8s} "
                  f"{row['promoted']:8.0%} {row['false']:6.0%} {row['worse']:6.0%} {row['calls']:7.0f}")
    return table


def pct(x: float) -> str:
    return "  -  " if x != x else f"{x:.0%}"


if __name__ == "__main__":
    main()
