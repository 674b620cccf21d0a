"""GEPA beside the project's search, in the simulated world whose truth is known (bench/search/world.py).

    nice -n 10 python bench/search/gepa_anchor.py [--seeds 10] [--sizes 24+24 48+144] [--worlds gain null]
                                                  [--budget-per-task 14] [--merge] [--json out.json]

The anchor: the published optimizer (the `gepa` package on PyPI, not a dependency of this project; the script
skips with one line when it is not installed) on the same worlds, seeds and task splits as bench/search/returns.py
(its task_specs, parse_size, World, WorldRunner), then through the project's own holdout confirmation.

- gepa.optimize with the baseline instructions as the seed candidate (one component per task type), the train
  tasks as trainset and as valset (GEPA's own selection set; the holdout stays untouched), GEPA's defaults
  otherwise: Pareto parent selection, round-robin module selector, minibatch 3, strict improvement, no merge
  (--merge: use_merge=True).
- WorldAdapter evaluates a candidate on a batch through the world's Runner (the text of each task's type, one fresh
  seed per evaluate call, as a real model samples anew), scores divided by 10 so that GEPA's perfect_score 1.0 is the
  judge's 10; its trajectories carry the judge's feedback, and make_reflective_dataset gives each component the
  records of its own type's tasks (Inputs, Generated Outputs, Feedback with the judge's words). A component with no
  task of its type in the minibatch gets no records, and GEPA skips that proposal, as it does for a module a
  program did not run.
- WorldReflectionLM answers GEPA's reflection prompt as the project's mutation model does (WorldLLM.reflect): one
  edit of the current instruction, the fix the feedback names REFLECT_HIT of the time, otherwise any edit.
- Budget: max_metric_calls = budget-per-task x the train tasks, the task runs the project's sweep spends on the
  train split per train task (20 for the per-type search, which runs every child on every train task; about 14.5
  for the joint search with its gate and pruner: docs/SENSITIVITY.md, "The search beside GEPA"); GEPA may overshoot
  by its last iteration's evaluations, and the calls column reports what it spent.
- Confirmation: GEPA's result.best_candidate (the best valset mean) takes the sweep's holdout path: the train filter
  against the seed candidate's valset scores (the baseline's train run), the holdout run block by block with the
  futility stop (baseline and candidate sweep.holdout_*_runs times, seeds exp.seed + k), the first look's level,
  and experiments.promotion.decide_look; what is promoted is the winner's texts with any held-back type left at the
  baseline's (kept_instructions).

Per seed it prints available, found (the true worth of the best candidate GEPA kept: result.candidates, each
evaluated on the whole valset), returned (the true worth of the promoted text, 0 when none) and the model calls
(CALLS_PER_RUN a task run, train and holdout, plus one a reflection), a summary table in returns.py's format, and
one of GEPA's spending: task runs on train, reflection calls, candidates kept beside the seed, and proposals skipped
for want of records (the chosen component's type absent from the minibatch).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.search.returns import parse_size, pct, summary_table, task_specs  # noqa: E402
from bench.search.world import FENCE, World, WorldLLM, WorldRunner, text_key  # noqa: E402

EVAL_SEED = 500_000  # GEPA's evaluate calls run with seeds EVAL_SEED + 1, + 2, ...: apart from the holdout's 0..


def gepa_version() -> str | None:
    """The installed gepa's version, None when it is not installed."""
    try:
        from importlib.metadata import version

        import gepa  # noqa: F401

        return version("gepa")
    except ImportError:
        return None


class _Quiet:
    """GEPA's logger protocol, silent (its per-iteration lines would drown the table)."""

    def log(self, *args: Any, **kwargs: Any) -> None:
        pass


class WorldAdapter:
    """gepa.core.adapter.GEPAAdapter over the world's Runner (module docstring). `evaluations` counts evaluate
    calls, `reflections` the reflective datasets asked for and `empty` those whose component had no task of its type
    in the minibatch (GEPA then proposes nothing); the runner counts the task runs."""

    propose_new_texts = None

    def __init__(self, runner: WorldRunner) -> None:
        self.runner = runner
        self.evaluations = self.reflections = self.empty = 0

    def evaluate(self, batch: Sequence[Any], candidate: Mapping[str, str], capture_traces: bool = False) -> Any:
        from gepa.core.adapter import EvaluationBatch

        self.evaluations += 1
        seed = EVAL_SEED + self.evaluations
        outputs, scores, traces = [], [], []
        for task in batch:
            out = self.runner.finish(self.runner.prepare(task.task), instructions=dict(candidate), seed=seed)
            outputs.append(out.output_text)
            scores.append(out.score / 10.0)
            traces.append({"id": task.id, "task": task.task, "task_type": task.task_type, "output": out.output_text,
                           "score": out.score, "feedback": out.feedback})
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=traces if capture_traces else None)

    def make_reflective_dataset(self, candidate: Mapping[str, str], eval_batch: Any,
                                components_to_update: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """Per component, the records of the batch's tasks of its type: what a module's own traces would hold."""
        data = {name: [{"Inputs": {"task": tr["task"]}, "Generated Outputs": tr["output"],
                        "Feedback": f"Judge score {tr['score']:.1f} of 10. {tr['feedback']}"}
                       for tr in eval_batch.trajectories or () if tr["task_type"] == name]
                for name in components_to_update}
        self.reflections += 1
        self.empty += not any(data.values())
        return data


class WorldReflectionLM:
    """GEPA's reflection LM (a callable, prompt -> text) answered by the project's mutation model: GEPA's prompt holds
    the current instruction in its first fence and the records in its second; the task type is read off the records'
    task inputs; the reply is one edit of the instruction (WorldLLM.reflect) in a fence, as GEPA parses it. Each call
    counts on the WorldLLM (its `calls`)."""

    def __init__(self, llm: WorldLLM) -> None:
        self.llm = llm

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        import re

        from harness.config import TASK_TYPES

        text = prompt if isinstance(prompt, str) else "\n".join(str(m.get("content", "")) for m in prompt)
        self.llm.calls += 1
        self.llm.requests.append("gepa-reflect")
        fences = FENCE.findall(text)
        base, records = (fences[0], fences[1]) if len(fences) >= 2 else (fences[0] if fences else "", text)
        named = re.search(r"simulated (\w+) task", records)
        tt = named.group(1) if named and named.group(1) in TASK_TYPES else "research"
        rng = random.Random(f"{self.llm.world.seed}-gepa-{self.llm.calls}-{text_key(text)}")
        return f"```\n{self.llm.reflect(base, records, tt, rng)}\n```"


def experiment(seed: int, n_train: int, n_holdout: int, overrides: Sequence[str]) -> Any:
    """The shipped synth_mutation experiment over returns.py's tasks, as returns.py configures the sweep."""
    from experiments.config import BenchmarkConfig, compose_config, to_experiment

    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", *overrides]), environ={})
    exp.benchmark = BenchmarkConfig(name=f"world{seed}", tasks=task_specs(n_train, n_holdout))
    exp.sweep.name, exp.sweep.seed = "world", seed
    exp.mlflow.enabled = False
    return exp


def run_gepa(world: World, runner: WorldRunner, train: Sequence[Any], baseline: Mapping[str, str], seed: int,
             budget: int, merge: bool) -> tuple[Any, WorldAdapter]:
    import gepa

    adapter = WorldAdapter(runner)
    result = gepa.optimize(seed_candidate=dict(baseline), trainset=list(train), valset=list(train), adapter=adapter,
                           reflection_lm=WorldReflectionLM(runner.mutation_llm), max_metric_calls=budget,
                           use_merge=merge, logger=_Quiet(), seed=seed, raise_on_exception=True)
    return result, adapter


def confirm(exp: Any, runner: WorldRunner, baseline: Mapping[str, str], best: Mapping[str, str],
            base_train: Mapping[str, float], best_train: Mapping[str, float], number: int) -> tuple[Any, dict | None]:
    """The sweep's holdout confirmation of one candidate (experiments/sweep/_reruns.py's SplitRuns.promotion and
    _holdout_blocks, experiments/sweep/_sweep.py's _conclude), by the project's own functions: (verdict, the
    promoted instructions or None). base_train: the baseline's one train run (sweep.baseline_repeats = 1)."""
    from experiments.config import sweep_design_problem
    from experiments.promotion import HoldoutBlocks, HoldoutScores, decide_look, kept_instructions, train_filtered
    from experiments.promotion._decide import Candidate
    from experiments.stats import baseline_reference, next_look, noise_floor
    from experiments.search._state import candidate_hash

    sw = exp.sweep
    holdout = exp.tasks("holdout")
    base_hash, best_hash = candidate_hash(baseline), candidate_hash(best)
    if best_hash == base_hash:  # GEPA kept nothing better than its seed: no candidate to test
        return None, None
    runs = [dict(base_train)]
    nf, ref = noise_floor(runs), baseline_reference(runs)
    train_floor = nf.floor(len(ref), len(runs))
    top = [Candidate(number, best_hash, "gepa", statistics.fmean(best_train.values()), dict(best_train), dict(best))]
    blocks = HoldoutBlocks.of([t.id for t in holdout], sw.seed, sw.holdout_futility_block, alpha=sw.alpha,
                              power=exp.calibrate.power)
    family = train_filtered(top, ref, train_floor=train_floor, alpha=sw.alpha, train_filter=sw.train_filter)
    by_id = {t.id: t for t in holdout}
    ran: dict[tuple[str, int, str], float] = {}

    def held(key: str, instructions: Mapping[str, str], n_runs: int, tasks: Sequence[Any]) -> Any:
        for k in range(n_runs):
            for t in tasks:
                if (key, k, t.id) not in ran:
                    out = runner.finish(runner.prepare(t.task), instructions=dict(instructions), seed=exp.seed + k)
                    ran[(key, k, t.id)] = out.score
        return HoldoutScores.of_runs([{t.id: ran[(key, k, t.id)] for t in tasks} for k in range(n_runs)])

    live, scores = [c for c in top if c.hash in family], {}
    base = HoldoutScores(None, "no holdout scores")
    for m in blocks.ends:  # the baseline runs a block while a candidate does, and its first block with none
        tasks = [by_id[i] for i in blocks.order[:m]]
        base = held(base_hash, baseline, sw.holdout_baseline_runs, tasks)
        for c in live:
            scores[c.hash] = held(c.hash, c.instructions, sw.holdout_candidate_runs, tasks)
        live = [c for c in live if scores[c.hash].scores and blocks.stop(scores[c.hash].scores, base.scores) is None]
        if not live:
            break
    look = next_look([], family, sw.alpha) if sw.holdout_test == "tasks" else None
    verdict = decide_look(top, ref, base, scores, sweep=sw, noise=nf, level=look.level if look else sw.alpha,
                          train_floor=train_floor, attrs={}, base_key=base_hash, baseline=baseline,
                          holdout_tasks=holdout, benchmark_tasks=exp.benchmark.tasks, blocks=blocks)
    if verdict.winner is None or sweep_design_problem(exp):
        return verdict, None
    return verdict, kept_instructions(best, baseline, verdict.winner.held_types)


def run_seed(seed: int, kind: str, n_train: int, n_holdout: int, budget_per_task: float, merge: bool,
             overrides: Sequence[str]) -> dict:
    """GEPA in one world, then the holdout confirmation: found, returned (shares of the available gain), calls."""
    exp = experiment(seed, n_train, n_holdout, overrides)
    baseline = dict(exp.synth.instructions)
    world = World.make(seed, baseline, kind)
    runner = WorldRunner(world, exp.benchmark.tasks)
    train = exp.tasks("train")
    budget = round(budget_per_task * n_train)
    result, adapter = run_gepa(world, runner, train, baseline, seed, budget, merge)
    train_runs = runner.task_runs
    best_idx = result.best_idx

    def on_train(idx: int) -> dict[str, float]:  # valset ids are positions in the train list; scores back x 10
        return {train[i].id: 10.0 * s for i, s in result.val_subscores[idx].items()}

    _, promoted = confirm(exp, runner, baseline, result.candidates[best_idx], on_train(0), on_train(best_idx),
                          best_idx)
    available = world.available
    found = max(world.worth(c) for c in result.candidates)
    returned = world.worth(promoted) if promoted is not None else 0.0
    share = (lambda v: v / available) if available > 0 else (lambda v: float("nan"))
    return {"seed": seed, "world": kind, "train": n_train, "holdout": n_holdout, "merge": merge,
            "budget": budget, "available": available, "found": found, "returned": returned,
            "found_share": share(found), "returned_share": share(returned), "promoted": promoted is not None,
            "false_promotion": promoted is not None and returned <= 0.0,
            "worse_promoted": promoted is not None and returned < 0.0, "candidates": len(result.candidates),
            "best_worth": world.worth(result.candidates[best_idx]), "metric_calls": result.total_metric_calls,
            "train_runs": train_runs, "holdout_runs": runner.task_runs - train_runs, "task_runs": runner.task_runs,
            "reflection_calls": runner.mutation_llm.calls, "no_records": adapter.empty, "calls": runner.llm_calls()}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--sizes", nargs="+", default=["24+24", "48+144"])
    ap.add_argument("--worlds", nargs="+", default=["gain", "null"])
    ap.add_argument("--budget-per-task", type=float, default=20.0,
                    help="GEPA's max_metric_calls per train task (20: the per-type sweep's 20 trials on every train "
                         "task)")
    ap.add_argument("--merge", action="store_true", help="use_merge=True (GEPA's merge proposer)")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="a Hydra override for the confirmation's sweep config, e.g. sweep.holdout_top_k=1")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--quiet", action="store_true", help="print the summary table only")
    args = ap.parse_args(argv)

    version = gepa_version()
    if version is None:
        print("gepa_anchor: skipped: gepa is not installed (pip install gepa; it is not a dependency of this project)")
        return {}
    logging.disable(logging.WARNING)
    t0 = time.perf_counter()
    rows = []
    sizes = [(s, parse_size(s)) for s in args.sizes]
    label = "gepa+merge" if args.merge else "gepa"
    print(f"== GEPA {version} beside the search: {label}, max_metric_calls {args.budget_per_task:g} x train tasks, "
          f"seeds {args.first_seed}..{args.first_seed + args.seeds - 1}, overrides {args.overrides or 'none'} ==")
    print("sizes: " + ", ".join(f"{s} = {a} + {b}" for s, (a, b) in sizes))
    for kind in args.worlds:
        for size, (n_train, n_hold) in sizes:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                r = run_seed(seed, kind, n_train, n_hold, args.budget_per_task, args.merge, args.overrides)
                r["size"] = size
                rows.append(r)
                if not args.quiet:
                    print(f"{kind:5s} {size:7s} seed {seed:2d}: available {r['available']:+.2f}  found "
                          f"{r['found']:+.3f} ({pct(r['found_share'])})  returned {r['returned']:+.3f} "
                          f"({pct(r['returned_share'])})  candidates {r['candidates']:2d}  metric calls "
                          f"{r['metric_calls']}  calls {r['calls']}{'  PROMOTED' if r['promoted'] else ''}",
                          flush=True)
    print(f"-- summary ({time.perf_counter() - t0:.0f} s) --")
    table = summary_table(rows, args.worlds, sizes, extra=("train_runs", "reflection_calls", "candidates",
                                                          "no_records"))
    print(f"{'world':5s} {'size':10s} {'train runs':>10s} {'reflections':>11s} {'kept':>5s} {'no records':>10s}")
    for key, row in table.items():
        kind, size = key.split()
        print(f"{kind:5s} {size:10s} {row['train_runs']:10.0f} {row['reflection_calls']:11.1f} "
              f"{row['candidates'] - 1:5.1f} {row['no_records']:10.1f}")
    out = {"gepa": version, "rows": rows, "table": table,
           "args": {k: str(v) for k, v in vars(args).items()}}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
