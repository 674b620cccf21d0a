"""Is the design power line's stated effect detected with the probability it states? Checked in bench/search's world.

    nice -n 10 python bench/search/power_line.py [--sizes 48 96 144] [--seeds 60] [--sims 2000]

The summary's design power line (experiments.stats.decision_power through experiments/sweep/_preflight.py's
confirmable_line) says: this design confirms a mean effect of E with probability calibrate.power (0.8), given the run
noise sigma and the task x variant spread tau. Here, for each size n (n train + n holdout tasks), the world plants a
candidate whose worth is the E the line states for the world's own sigma and the candidate's own tau: every big
property of every task type, with the world's `big` scaled until 2 x big (its worth) equals decision_power's
detectable effect at tau = the spread of that candidate's per-task gains (two properties, each sd SPREAD x big, and
the neutral spread of a changed text). Then each seed runs the project's own sweep (experiments.sweep.run_sweep, the
shipped config: per-type search, the positive train filter, 3 + 3 holdout runs, futility blocks, the first look's
level, decide) with two trials, the baseline and that candidate (the mutation model answers every request with the
planted text), on a new world (other properties, other tasks). Detected = promoted. The line holds when the share
detected is calibrate.power within Monte Carlo error; the world's spread is a sum of skewed draws, not the normal
spread the line's simulation assumes, and its run noise is clipped at 0 and 10.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.search.returns import scratch, world_experiment  # noqa: E402
from bench.search.world import NEUTRAL_SD, SIGMA, SPREAD, World, WorldLLM, WorldRunner  # noqa: E402


def shipped() -> Any:
    from experiments.config import compose_config, to_experiment

    return to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]), environ={})


def tau_of(big: float) -> float:
    """The per-task spread of the planted candidate's gain: two big properties (each sd SPREAD x big) and the
    neutral spread of a changed text."""
    return math.sqrt(2 * (SPREAD * big) ** 2 + NEUTRAL_SD ** 2)


def stated_effect(n: int, tau: float, sims: int) -> float:
    """decision_power's detectable effect for the shipped design on n + n tasks at sigma SIGMA and this tau: the E
    the summary's design power line states (the first look's level, sigma and tau taken as known)."""
    from experiments.stats import decision_power, first_level

    exp = shipped()
    sw = exp.sweep
    dp = decision_power(SIGMA, tau, n_train=n, n_holdout=n, alpha=sw.alpha, level=first_level(sw.alpha),
                        baseline_runs=sw.baseline_repeats, holdout_runs=(sw.holdout_candidate_runs,
                                                                         sw.holdout_baseline_runs),
                        power=exp.calibrate.power, sims=sims, train_filter=sw.train_filter,
                        futility_block=sw.holdout_futility_block,
                        race_block=sw.race_block if sw.search == "joint" else 0, race_z=sw.race_z)
    return float(dp.mde)


def planted_big(n: int, sims: int) -> tuple[float, float, float] | None:
    """(big, stated effect, tau) with 2 x big = the effect the line states at tau_of(big), by bisection; None when
    no such candidate exists at this size (its spread, 4.2 x its worth here, hides any worth on n tasks: the line's
    effect grows faster than the worth it would need)."""
    def f(big: float) -> float:
        return stated_effect(n, tau_of(big), sims) / 2 - big

    lo, hi = 0.005, 1.0
    if f(hi) > 0:
        return None
    for _ in range(14):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    big = (lo + hi) / 2
    return big, stated_effect(n, tau_of(big), sims), tau_of(big)


class PlantedLLM(WorldLLM):
    """The mutation model that writes the planted candidate's text for whichever task type a request is about."""

    def __init__(self, world: World, texts: dict[str, str]) -> None:
        super().__init__(world)
        self.texts = texts

    def chat(self, messages: Any, **kw: Any) -> Any:
        from harness.inference import ChatResult

        self.calls += 1
        prompt = "\n".join(str(m["content"] if isinstance(m, dict) else m.content) for m in messages)
        text = json.dumps({"instruction": self.texts[self._task_type(prompt)]})
        return ChatResult(text=text, prompt_tokens=len(prompt) // 4, completion_tokens=len(text) // 4,
                          latency_s=0.0, model=self.model, backend=self.backend)


def run_one(seed: int, n: int, big: float, base: Path) -> dict:
    from experiments.sweep import run_sweep

    results = base / f"p-{seed}-{n}"
    exp = world_experiment(results, f"planted{seed}", "planted", n, n, 2, seed)
    world = World.make(10_000 + seed, exp.synth.instructions, "gain", big=big)
    texts = {tt: " ".join([exp.synth.instructions[tt]] + [p.constraint.text for p in props if p.gain >= world.big])
             for tt, props in world.props.items()}
    runner = WorldRunner(world, exp.benchmark.tasks)
    runner.mutation_llm = PlantedLLM(world, texts)
    summary = run_sweep(exp, runner, out=lambda s: None)
    promoted_worth = world.worth(summary.promoted_instructions) if summary.promoted else None
    shutil.rmtree(results, ignore_errors=True)
    return {"seed": seed, "n": n, "worth": world.worth(texts), "promoted": bool(summary.promoted),
            "promoted_worth": promoted_worth}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[48, 96, 144])
    ap.add_argument("--seeds", type=int, default=60)
    ap.add_argument("--sims", type=int, default=2000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    base = scratch("bench-power-line-")
    power = shipped().calibrate.power
    print(f"== the design power line's stated effect, detected? {args.seeds} worlds a size, stated power {power:g} ==")
    print(f"{'size':>8s} {'stated E':>9s} {'tau':>6s} {'planted':>8s} {'detected':>9s} {'MC se':>6s}")
    out = {}
    for n in args.sizes:
        found = planted_big(n, args.sims)
        if found is None:
            print(f"{f'{n}+{n}':>8s}  no planted candidate: a spread of 4.2 x the worth hides any worth on {n} tasks")
            continue
        big, effect, tau = found
        rows = [run_one(s, n, big, base) for s in range(args.seeds)]
        rate = statistics.mean(r["promoted"] for r in rows)
        se = math.sqrt(power * (1 - power) / len(rows))
        worth = statistics.mean(r["worth"] for r in rows)
        out[n] = {"stated_effect": effect, "tau": tau, "big": big, "planted_worth": worth, "detected": rate,
                  "mc_se": se, "rows": rows}
        print(f"{f'{n}+{n}':>8s} {effect:9.3f} {tau:6.3f} {worth:8.3f} {rate:9.3f} {se:6.3f}", flush=True)
    shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
