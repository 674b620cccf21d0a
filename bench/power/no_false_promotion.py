"""No false promotion in a stand-in world where no instruction is better: the share of studies that promote.

The world is tests/scripted_harness.ScriptedRunner with effect 0: a run's score is the task's difficulty plus seeded
noise (sd 0.3) drawn per (instruction, task, seed), whatever the instruction says. Each seed is one study of the
shipped synth_mutation design (conf/sweep/synth_mutation.yaml) on 12 train + 12 holdout tasks (--train, --holdout):
it runs to --trials and concludes, is resumed to --resume-trials and concludes again (a second look at the holdout),
and is then resumed with sweep.alpha changed, which must be refused with the field named. Any promotion is a false
one.

    python bench/power/no_false_promotion.py --seeds 40            # ~1 s of scripted runs per study, no model
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def study_exp(seed: int, folder: Path, trials: int, n_train: int = 12, n_holdout: int = 12):
    """The shipped sweep design on the scripted benchmark, one study per seed (harness and sampler seeds)."""
    from scripted_harness import BASE

    from experiments.config import BenchmarkConfig, compose_config, to_experiment
    from experiments.config._schema import TaskSpec

    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", f"seed={seed}",
                                        f"sweep.seed={seed}", f"sweep.n_trials={trials}", f"results_dir={folder}"]))
    exp.benchmark = BenchmarkConfig(name="scripted", tasks=[
        TaskSpec(id=f"t{i}", task=f"task number {i}", task_type=("enumerated", "research")[i % 2],
                 split="train" if i < n_train else "holdout") for i in range(n_train + n_holdout)])
    exp.synth.instructions = dict(BASE)
    exp.sweep.operators = ["add_tool", "noise"]  # add_tool names a tool: worth nothing in this world
    exp.sweep.operator_choice = "tpe"  # the scripted operators are not mutators' (the bandit offers either)
    exp.sweep.holdout_test = "tasks"  # the rule that can promote (bound and floor promote nothing since 5c60043)
    exp.sweep.storage = f"sqlite:///{folder / 'optuna.db'}"
    exp.mlflow.enabled = False
    return exp


def one_study(seed: int, trials: int, resume_trials: int, effect: float = 0.0, n_train: int = 12,
              n_holdout: int = 12) -> dict:
    """Conclude, resume and conclude again, then try a changed alpha: what each step decided."""
    from scripted_harness import ScriptedRunner, scripted_propose

    from experiments.config import load_tasks
    from experiments.sweep._study import StudyMismatch
    from experiments.sweep import run_sweep

    with tempfile.TemporaryDirectory() as tmp:
        exp = study_exp(seed, Path(tmp), trials, n_train, n_holdout)
        runner = ScriptedRunner(load_tasks(exp.benchmark), effect=effect)

        def sweep(e):
            return run_sweep(e, runner, propose=scripted_propose, out=lambda s: None)

        first = sweep(exp)
        resumed = sweep(dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=resume_trials)))
        runs = len(runner.run_ids)
        changed = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=resume_trials + 1,
                                                                     alpha=0.3))
        try:
            sweep(changed)
            refusal = None
        except StudyMismatch as exc:
            refusal = str(exc)
        return {"seed": seed, "first": first.promoted, "resumed": resumed.promoted,
                "first_trial": first.promoted_trial, "resumed_trial": resumed.promoted_trial,
                "trials": resumed.trials["total"], "refused": refusal is not None and "sweep.alpha: 0.05 -> 0.3"
                in refusal, "runs_after_refusal": len(runner.run_ids) - runs}


def upper_95(k: int, n: int) -> float:
    """One-sided 95% Clopper-Pearson upper bound of a rate with k events in n."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(0.95, k + 1, n - k))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--trials", type=int, default=5, help="n_trials of the first conclusion")
    p.add_argument("--resume-trials", type=int, default=8, help="n_trials of the resumed conclusion")
    p.add_argument("--effect", type=float, default=0.0,
                   help="what naming a tool adds (0: no instruction is better; > 0: a positive control)")
    p.add_argument("--train", type=int, default=12, help="train tasks (the shipped benchmark: 12)")
    p.add_argument("--holdout", type=int, default=12, help="holdout tasks (the shipped benchmark: 12)")
    args = p.parse_args(argv)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    os.environ.setdefault("DDGS_DISABLED", "1")
    t0 = time.perf_counter()
    rows = [one_study(s, args.trials, args.resume_trials, args.effect, args.train, args.holdout)
            for s in range(args.first_seed, args.first_seed + args.seeds)]
    for r in rows:
        print(f"seed {r['seed']:3d}: trials {r['trials']}  promoted at {args.trials}: {r['first']!s:5}  after the "
              f"resume: {r['resumed']!s:5}  changed alpha refused: {r['refused']} ({r['runs_after_refusal']} runs)")
    looks = 2 * len(rows)
    false = sum(r["first"] for r in rows) + sum(r["resumed"] for r in rows)
    studies = sum(r["first"] or r["resumed"] for r in rows)
    what = "false promotions" if args.effect == 0 else f"promotions of a real +{args.effect:g} effect"
    print(f"{what}: {false} of {looks} conclusions ({studies} of {len(rows)} studies; 95% upper bound per "
          f"study {upper_95(studies, len(rows)):.3f}); changed decision rule refused in "
          f"{sum(r['refused'] for r in rows)} of {len(rows)}, {sum(r['runs_after_refusal'] for r in rows)} runs after "
          f"a refusal; {time.perf_counter() - t0:.0f} s")
    return 0 if (false == 0 or args.effect > 0) and all(r["refused"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
