"""Search efficiency of the sweep in simulation: harness evaluations (task runs) spent to promote the known best
candidate, with the Wilcoxon pruner as configured against no pruning, over many seeds.

    python bench/optimizer_sim.py [--quick] [--seeds 50] [--noise 0.8] [--train 8] [--holdout 4]
                                  [--pruner-p 0.1] [--startup-steps 2] [--json]

Each seed runs the real sweep loop (experiments.sweep.run_sweep: Optuna ask/tell, Objective, per-task reports,
noise floor from baseline repeats, holdout confirmation of the top k, promotion) twice on the same simulated
world, once with sweep.pruner=wilcoxon and once with sweep.pruner=none; everything else is the synth_mutation
config (baseline_repeats=3, holdout_top_k=2, alpha=0.05). Only the harness is scripted:
  candidates  a pool of 12 mutations proposed once each, in an order shuffled per seed: one known best
              (+1.0 over the baseline on the 0-10 composite), a runner-up (+0.5), and ten that are neutral or
              worse (+0.2 ... -2.0), since most proposed instruction edits do not help
  score       task difficulty (uniform 4.5-7 per task) + candidate effect + a candidate x task interaction
              (sd 0.6 x noise, fixed for the pair) + run noise (sd 0.8 x noise, new for every run seed),
              clipped to 0-10; per-task sd = noise (default 0.8)
An evaluation is one task run (Runner.finish): baseline trial and repeats, trials (a pruned trial stops early),
holdout runs. Correct pick: the sweep promotes the best candidate. Same world, same draws in both arms: the
arms differ only in the evaluations pruning skips and in what it cuts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EFFECTS = (1.0, 0.5, 0.2, 0.0, 0.0, -0.2, -0.4, -0.6, -0.8, -1.0, -1.5, -2.0)  # index 0 is the known best
BASE_TEXT = "Summarise the findings from the sources and attribute each claim to its source."
_MARK = re.compile(r"\[candidate (\d+)\]")


def _gauss(*key: object) -> float:
    digest = hashlib.sha256("|".join(map(str, key)).encode()).hexdigest()
    return random.Random(int(digest[:16], 16)).gauss(0.0, 1.0)


class WorldRunner:
    """The runner protocol (prepare / finish) over a scripted world; counts task runs."""

    def __init__(self, world: int, tasks, noise: float) -> None:
        self.world, self.noise = world, noise
        rng = random.Random(f"difficulty-{world}")
        self.difficulty = {t.task: rng.uniform(4.5, 7.0) for t in tasks}
        self.evaluations = 0
        self.candidate_evaluations = 0  # task runs of search trials (trial 0 is the enqueued baseline)

    def prepare(self, task):
        return {"task": task}

    def identity(self):
        return {"producer": {"backend": "sim", "model": f"world-{self.world}"}}

    def llm_calls(self) -> int:
        return 0

    def score(self, instruction: str, task: str, seed: int) -> float:
        m = _MARK.search(instruction)
        cand = int(m.group(1)) if m else -1
        effect = EFFECTS[cand] if cand >= 0 else 0.0
        value = (self.difficulty[task] + effect + 0.6 * self.noise * _gauss(self.world, "x", cand, task)
                 + 0.8 * self.noise * _gauss(self.world, "run", cand, task, seed))
        return min(10.0, max(0.0, value))

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
        from experiments.outcome import TaskOutcome

        self.evaluations += 1
        m = re.search(r"-t(\d+)-", run_id or "")
        self.candidate_evaluations += bool(m and int(m.group(1)) > 0)
        value = self.score(next(iter(instructions.values())), prepared["task"], seed)
        return TaskOutcome(status="ok", score=value, dimensions={"overall": value}, output_text="scripted output")


def candidate_text(j: int) -> str:
    return f"{BASE_TEXT} Variant edit [candidate {j}]."


def make_propose(world: int):
    order = list(range(len(EFFECTS)))
    random.Random(f"order-{world}").shuffle(order)
    queue = iter(order)

    def propose(name, ctx, llm, *, seen=frozenset()):
        """mutators.propose's contract: the next pool candidate whose instruction_hash was not tried yet."""
        from mutators import MutationFailed
        from mutators.base import Candidate, instruction_hash

        for j in queue:
            text = candidate_text(j)
            if instruction_hash(text) not in seen and instruction_hash(text) != ctx.base_hash:
                return Candidate.make(text, name, (ctx.base_hash,), f"candidate {j} from {name}")
        raise MutationFailed("the simulated candidate pool is exhausted")

    return propose


def run_one(world: int, pruner: str, args, base: Path) -> dict:
    from experiments.benchmark import load_tasks
    from experiments.config import BenchmarkConfig, TaskSpec, compose_config, to_experiment
    from experiments.objective import candidate_hash
    from experiments.sweep import run_sweep

    results = base / f"w{world}-{pruner}"
    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]), environ={})
    exp.results_dir = str(results)
    exp.benchmark = BenchmarkConfig(name="sim", tasks=[
        TaskSpec(id=f"t{i}", task=f"simulated task {i}", task_type="research",
                 split="train" if i < args.train else "holdout") for i in range(args.train + args.holdout)])
    exp.synth.instructions = {"research": BASE_TEXT}
    sw = exp.sweep
    sw.name, sw.n_trials, sw.pruner = "sim", len(EFFECTS) + 1, pruner
    sw.baseline_repeats, sw.holdout_top_k = 3, 2  # the settings the recorded figures were taken with
    sw.pruner_p, sw.pruner_startup_steps = args.pruner_p, args.startup_steps
    sw.operators = ["add_constraint"]
    sw.storage = f"sqlite:///{results / 'optuna.db'}"
    exp.mlflow.enabled = False
    runner = WorldRunner(world, load_tasks(exp.benchmark), args.noise)
    summary = run_sweep(exp, runner, propose=make_propose(world), out=lambda s: None)
    best_hash = candidate_hash({"research": candidate_text(0)})
    shutil.rmtree(results, ignore_errors=True)
    return {"evaluations": runner.evaluations, "candidate_evaluations": runner.candidate_evaluations, "correct": summary.promoted and summary.promoted_hash == best_hash,
            "promoted": summary.promoted, "pruned": summary.trials.get("pruned", 0),
            "best_is_top": summary.best_trial is not None and summary.best_instructions.get("research") == candidate_text(0)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 seeds")
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--noise", type=float, default=0.8, help="per-task score sd on the 0-10 scale")
    ap.add_argument("--train", type=int, default=8)
    ap.add_argument("--holdout", type=int, default=4)
    ap.add_argument("--pruner-p", type=float, default=0.1, help="sweep.pruner_p (config default 0.1)")
    ap.add_argument("--startup-steps", type=int, default=2, help="sweep.pruner_startup_steps (config default 2)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds = 5
    logging.disable(logging.WARNING)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    shm = Path("/dev/shm")
    base = Path(tempfile.mkdtemp(prefix="bench-optsim-", dir=shm if shm.is_dir() else None))
    os.environ["HARNESS_RESULTS_DIR"] = str(base)
    t0 = time.perf_counter()
    arms = {"none": [], "wilcoxon": []}
    for world in range(args.seeds):
        for pruner in arms:
            arms[pruner].append(run_one(world, pruner, args, base))
    shutil.rmtree(base, ignore_errors=True)

    max_evals = 3 * args.train + len(EFFECTS) * args.train + args.holdout * 3
    print("== optimizer search efficiency (simulated harness, real sweep loop) ==")
    print(f"{args.seeds} seeds; {len(EFFECTS)} candidates (best +1.0, runner-up +0.5, 10 at +0.2..-2.0); "
          f"{args.train} train + {args.holdout} holdout tasks; per-task noise sd {args.noise}; "
          f"baseline_repeats 3, holdout_top_k 2, alpha 0.05; pruner_p {args.pruner_p}, "
          f"startup steps {args.startup_steps}; at most {max_evals} evaluations per sweep; "
          f"{time.perf_counter() - t0:.0f}s")
    print(f"{'pruner':9s} {'correct pick':>12s} {'best on train':>13s} {'promoted':>8s} {'mean evals':>10s} "
          f"{'sd':>5s} {'candidate evals':>15s} {'pruned trials':>13s}")
    rows = {}
    for name, runs in arms.items():
        rows[name] = {
            "correct_rate": sum(r["correct"] for r in runs) / len(runs),
            "best_top_rate": sum(r["best_is_top"] for r in runs) / len(runs),
            "promoted_rate": sum(r["promoted"] for r in runs) / len(runs),
            "mean_evaluations": statistics.mean(r["evaluations"] for r in runs),
            "sd_evaluations": statistics.stdev(r["evaluations"] for r in runs) if len(runs) > 1 else 0.0,
            "mean_pruned": statistics.mean(r["pruned"] for r in runs),
            "mean_candidate_evaluations": statistics.mean(r["candidate_evaluations"] for r in runs),
        }
        r = rows[name]
        print(f"{name:9s} {r['correct_rate']:12.0%} {r['best_top_rate']:13.0%} {r['promoted_rate']:8.0%} "
              f"{r['mean_evaluations']:10.1f} {r['sd_evaluations']:5.1f} {r['mean_candidate_evaluations']:15.1f} "
              f"{r['mean_pruned']:13.1f}")
    saving = 1 - rows["wilcoxon"]["mean_evaluations"] / rows["none"]["mean_evaluations"]
    both = sum(a["correct"] and b["correct"] for a, b in zip(arms["none"], arms["wilcoxon"]))
    lost = sum(a["correct"] and not b["correct"] for a, b in zip(arms["none"], arms["wilcoxon"]))
    gained = sum(b["correct"] and not a["correct"] for a, b in zip(arms["none"], arms["wilcoxon"]))
    print(f"evaluations saved by pruning: {saving:.1%} of all task runs; paired: both correct {both}, "
          f"pruning lost the pick {lost}, pruning gained it {gained} (of {args.seeds})")
    cand_saving = 1 - rows["wilcoxon"]["mean_candidate_evaluations"] / rows["none"]["mean_candidate_evaluations"]
    fixed = rows["none"]["mean_evaluations"] - rows["none"]["mean_candidate_evaluations"]
    print(f"candidate-trial runs saved: {cand_saving:.1%}; fixed runs per sweep that pruning cannot touch "
          f"(baseline trial + {3 - 1} repeats on train, holdout of baseline + top 2): {fixed:.0f} of "
          f"{rows['none']['mean_evaluations']:.0f}")
    # a Wilcoxon test on k paired steps cannot reach p < pruner_p before 0.5**k < pruner_p
    k = next(k for k in range(1, 64) if 0.5 ** k < args.pruner_p)
    k = max(k, args.startup_steps)
    least = fixed + args.train + (len(EFFECTS) - 1) * min(k, args.train)
    print(f"ceiling: a trial is pruned after {k} tasks at the earliest (0.5^{k} < p {args.pruner_p}), so pruning "
          f"every candidate but the best saves at most {1 - least / rows['none']['mean_evaluations']:.0%} of all runs here")
    goal = saving >= 0.40 and rows["wilcoxon"]["correct_rate"] >= rows["none"]["correct_rate"] - 0.02
    print(f"goal (>= 40% fewer evaluations, same correct-pick rate): {'met' if goal else 'NOT met'}")
    figures = {"rows": rows, "saving": saving, "candidate_saving": cand_saving,
               "paired": {"both": both, "lost": lost, "gained": gained}, "args": vars(args)}
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
