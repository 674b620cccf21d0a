"""Cost per trial of a synth_mutation sweep: LLM calls and tokens with context reuse and the response cache,
against a naive sweep that reruns the whole harness for every task of every trial.

    python bench/throughput/cost_per_trial.py [--quick] [--trials 8] [--benchmark asyncio_practices] [--json]

Each arm is a real sweep (experiments.sweep.run_sweep -> HarnessRunner -> harness.agent.Harness) on a benchmark's
tasks, with bench.throughput.sim_llm.SimLLM as the backend (no latency: only calls and tokens are counted here;
token counts are characters / 4 of real-sized prompts and replies). Calls are counted where they reach the backend,
so response-cache hits are not calls. Arms:
  naive          sweep.reuse_context=false, backend.cache=false, sweep.freeze_memory=false: every trial plans,
                 researches, synthesises, evaluates and stores to memory for every task
  reuse          sweep.reuse_context=true (plan + research computed once per study), cache off, memory frozen
  reuse+cache    the default synth_mutation config: reuse and the SQLite response cache
  rerun          reuse+cache started again on a fresh Optuna study with the same caches, as after a crash that
                 lost the study: the same candidates come back from the caches
Per search trial (baseline trial excluded): mean backend calls and tokens, and the kinds of call (planner,
prior-knowledge, research compression, synthesis, count retry, judge, revision, memory, mutation). The goal
is that a trial costs only synthesis + evaluation calls (plus the mutation call that proposes the candidate).
sweep.baseline_repeats=1 and holdout_top_k=1 keep the one-off work small; it is reported apart. The pruner, the
racing and the minibatch gate are off (sweep.pruner=none, sweep.race_block=0, sweep.gate_tasks=0) so that every
trial evaluates its candidate on every train task in every arm: the arms would otherwise stop different trials
early (bench/power/optimizer_sim.py measures pruning): with racing or the gate on, the naive arm's trials were cut
at other tasks than the reuse arms' (7 search trials, 5 of them stopped early in naive, 2 in reuse).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.throughput.sim_llm import SimLLM  # noqa: E402

ARMS = {
    "naive": ["sweep.reuse_context=false", "backend.cache=false", "sweep.freeze_memory=false", "memory.frozen=false"],
    "reuse": ["sweep.reuse_context=true", "backend.cache=false"],
    "reuse+cache": ["sweep.reuse_context=true", "backend.cache=true"],
}
PREPARE_KINDS = {"plan", "prior_knowledge", "research_compress"}
TRIAL_KINDS = {"synthesis", "synth_retry", "judge", "revise", "mutation"}
_TRIAL_RUN = re.compile(r"-t(\d+)-")


def make_exp(results: Path, overrides: list[str], trials: int, benchmark: str):
    from experiments.config import compose_config, to_experiment, validate

    exp = to_experiment(compose_config([
        "+sweep=synth_mutation", "backend=fake", "search.provider=local", f"benchmark={benchmark}",
        f"results_dir={results}", f"sweep.n_trials={trials}", "sweep.baseline_repeats=1", "sweep.holdout_top_k=1",
        "sweep.pruner=none", "sweep.race_block=0", "sweep.gate_tasks=0",
        *overrides]), environ={})
    exp.mlflow.enabled = False
    return validate(exp)


class CountingRunner:
    """Wraps the HarnessRunner: backend calls are attributed to the trial whose task run (run id "<sweep>-t<n>-")
    made them; calls made between two task runs (the mutation that proposes a candidate) go to the next trial."""

    def __init__(self, inner, sim: SimLLM) -> None:
        self.inner, self.sim = inner, sim
        self.groups: dict[str, dict] = {}
        self._mark = self._snap()

    def __getattr__(self, name):  # smoke, mutation_llm, prepared_from_dict, llm_calls
        return getattr(self.inner, name)

    def _snap(self) -> dict:
        s = self.sim
        return {"calls": s.calls, "tokens": s.prompt_tokens + s.completion_tokens, "kinds": Counter(s.kinds)}

    def _add(self, group: str, before: dict, after: dict) -> None:
        g = self.groups.setdefault(group, {"calls": 0, "tokens": 0, "kinds": Counter()})
        g["calls"] += after["calls"] - before["calls"]
        g["tokens"] += after["tokens"] - before["tokens"]
        g["kinds"].update(after["kinds"] - before["kinds"])

    def _merge(self, group: str, source: str) -> None:
        src = self.groups.pop(source, None)
        if src:
            g = self.groups.setdefault(group, {"calls": 0, "tokens": 0, "kinds": Counter()})
            g["calls"] += src["calls"]
            g["tokens"] += src["tokens"]
            g["kinds"].update(src["kinds"])

    def prepare(self, task):
        self._settle()
        before = self._snap()
        self._add("_between", self._mark, before)
        out = self.inner.prepare(task)
        self._mark = self._snap()
        self._pending = (out, before, self._mark)
        return out

    def _settle(self, prepared=None, group: str = "contexts") -> None:
        """A prepare followed at once by the finish of its own result is part of that task run (naive arm);
        otherwise it built a context that the sweep reuses (one-off work)."""
        pending, self._pending = getattr(self, "_pending", None), None
        if pending is not None:
            self._add(group if pending[0] is prepared else "contexts", pending[1], pending[2])

    def finish(self, prepared, *, run_id=None, **kw):
        m = _TRIAL_RUN.search(run_id or "")
        group = f"trial {int(m.group(1)):03d}" if m else "baseline repeats + holdout"
        self._settle(prepared, group)
        before = self._snap()
        self._add("_between", self._mark, before)
        self._merge(group, "_between")  # the mutation call(s) that proposed this candidate
        out = self.inner.finish(prepared, run_id=run_id, **kw)
        self._mark = self._snap()
        self._add(group, before, self._mark)
        return out

    def close(self) -> None:
        self._settle()
        self._add("_between", self._mark, self._snap())
        self._merge("outside", "_between")


def run_arm(name: str, overrides: list[str], results: Path, trials: int, benchmark: str) -> dict:
    from experiments.config import to_harness_config
    from experiments.runs import HarnessRunner
    from experiments.sweep import run_sweep
    from harness.config import ROLES
    from harness.inference import ResponseCache, wrap_roles

    exp = make_exp(results, overrides, trials, benchmark)
    hcfg = to_harness_config(exp, environ={})
    sim = SimLLM(0.0)
    cache = ResponseCache(results / "llm_cache.sqlite") if exp.backend.cache else None
    runner = CountingRunner(HarnessRunner(hcfg, wrap_roles({r: sim for r in ROLES}, cache)), sim)
    summary = run_sweep(exp, runner, out=lambda line: None)
    runner.close()
    trial_groups = sorted(g for g in runner.groups if g.startswith("trial "))
    search = [runner.groups[g] for g in trial_groups[1:]]  # the first trial is the enqueued baseline
    kinds: Counter[str] = Counter()
    for g in search:
        kinds.update(g["kinds"])
    n = max(len(search), 1)
    return {
        "arm": name, "overrides": overrides, "search_trials": len(search), "states": dict(summary.trials),
        "calls_per_trial": statistics.mean(g["calls"] for g in search) if search else float("nan"),
        "tokens_per_trial": statistics.mean(g["tokens"] for g in search) if search else float("nan"),
        "kinds_per_trial": {k: v / n for k, v in sorted(kinds.items())},
        "baseline_trial_calls": runner.groups[trial_groups[0]]["calls"] if trial_groups else 0,
        "one_off_calls": sum(runner.groups.get(g, {}).get("calls", 0)
                             for g in ("contexts", "outside", "baseline repeats + holdout")),
        "total_calls": sim.calls, "total_tokens": sim.prompt_tokens + sim.completion_tokens,
        "sweep_calls_per_trial": summary.calls_per_trial, "promoted": summary.promoted,
        "prepare_in_trials": sorted(k for k in kinds if k in PREPARE_KINDS),
        "other_in_trials": sorted(k for k in kinds if k not in TRIAL_KINDS),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 trials per arm")
    ap.add_argument("--trials", type=int, default=8, help="trials per sweep, baseline trial included")
    ap.add_argument("--benchmark", default="asyncio_practices",
                    help="conf/benchmark option (asyncio_practices: 12 train + 12 holdout tasks; smoke is too small for a sweep)")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args(argv)
    if args.quick:
        args.trials = 4
    os.environ["DDGS_DISABLED"] = "1"
    logging.disable(logging.WARNING)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    base = Path(tempfile.mkdtemp(prefix="bench-cost-"))
    os.environ["HARNESS_RESULTS_DIR"] = str(base)
    rows = []
    for name, overrides in ARMS.items():
        rows.append(run_arm(name, overrides, base / name, args.trials, args.benchmark))
    # rerun: the reuse+cache arm again on a fresh study (its contexts and response cache kept)
    done = base / "reuse+cache"
    for p in (done / "optuna.db", done / "synth_mutation" / "ledger.jsonl"):
        p.unlink(missing_ok=True)
    rows.append(run_arm("rerun", ARMS["reuse+cache"], done, args.trials, args.benchmark))

    from experiments.config import load_tasks, split
    from experiments.config import compose_config, to_experiment

    tasks = load_tasks(to_experiment(compose_config([f"benchmark={args.benchmark}"]), environ={}).benchmark)
    print("== cost per trial: synth_mutation sweep, simulated backend ==")
    print(f"benchmark {args.benchmark}: {len(split(tasks, 'train'))} train + {len(split(tasks, 'holdout'))} holdout "
          f"tasks; {args.trials} trials per sweep (baseline trial included), pruner off; tokens = chars / 4")
    print(f"{'arm':12s} {'trials':>6s} {'calls/trial':>11s} {'tokens/trial':>12s} {'vs naive':>8s} "
          f"{'one-off calls':>13s} {'total calls':>11s}  calls per trial by kind")
    naive = rows[0]
    for r in rows:
        ratio = r["calls_per_trial"] / naive["calls_per_trial"] if naive["calls_per_trial"] else float("nan")
        kinds = " ".join(f"{k}={v:.1f}" for k, v in r["kinds_per_trial"].items()) or "-"
        print(f"{r['arm']:12s} {r['search_trials']:6d} {r['calls_per_trial']:11.1f} {r['tokens_per_trial']:12.0f} "
              f"{ratio:7.0%} {r['one_off_calls']:13d} {r['total_calls']:11d}  {kinds}")
    for r in rows:
        print(f"{r['arm']}: trials {r['states']}; planning/research calls inside trials: "
              f"{r['prepare_in_trials'] or 'none'}; calls other than synthesis/evaluation/mutation: "
              f"{r['other_in_trials'] or 'none'}")
    default = rows[2]
    met = not default["other_in_trials"]
    print(f"goal (a trial costs only synthesis + evaluation calls, plus its mutation call): "
          f"{'met' if met else 'NOT met'} for reuse+cache; naive spends "
          f"{naive['calls_per_trial'] / default['calls_per_trial']:.1f}x the calls and "
          f"{naive['tokens_per_trial'] / default['tokens_per_trial']:.1f}x the tokens per trial")
    shutil.rmtree(base, ignore_errors=True)
    figures = {"rows": rows, "benchmark": args.benchmark, "trials": args.trials}
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
