"""`tasks.count=auto`: the holdout that confirms tasks.effect with probability tasks.power under the shipped sweep
design (conf/sweep/synth_mutation.yaml), from the run noise sigma and the task x variant spread tau of a stored
calibration (experiments.storage, read only), and the train split that goes with it."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.config import ConfigError, ExperimentConfig

SHIPPED_DESIGN = Path(__file__).resolve().parents[2] / "conf" / "sweep" / "synth_mutation.yaml"
CALIBRATE_FIRST = ("run `python -m experiments.run +sweep=calibrate` first (same backend, evaluator and benchmark) to "
                   "measure the noise, or name a stored one with tasks.calibration=<key or file>")


@dataclass(frozen=True)
class Sizing:
    train: int
    holdout: int
    lines: tuple[str, ...]

    @property
    def total(self) -> int:
        return self.train + self.holdout


def shipped_sweep(exp: ExperimentConfig) -> Any:
    """The sweep settings the benchmark will be run under: the shipped synth_mutation design."""
    import yaml

    block = (yaml.safe_load(SHIPPED_DESIGN.read_text(encoding="utf-8")) or {}).get("sweep") or {}
    names = {f.name for f in dataclasses.fields(exp.sweep)}
    return dataclasses.replace(exp.sweep, **{k: v for k, v in block.items() if k in names})


def stored_calibration(exp: ExperimentConfig) -> tuple[Any, str]:
    """(Calibration, where it came from): tasks.calibration (a key under results_dir/calibration or a file), else the
    one whose fingerprint matches this backend, evaluator, harness config and the configured benchmark, else the
    newest of the same backend, evaluator and harness config on another benchmark (the source says so). ConfigError
    (one line: the settings that would read the nearest stored one, or run +sweep=calibrate first) when there is
    none."""
    from experiments.storage import (Calibration, calibration_dir, find_calibration, nearest_calibration,
                                     same_models_calibration)

    named = str(exp.task_supply.calibration or "").strip()
    if named:
        path = Path(named).expanduser()
        path = path if path.suffix == ".json" else calibration_dir(exp) / f"{named}.json"
        try:
            cal = Calibration.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"tasks.calibration={named!r}: {path} cannot be read ({type(exc).__name__}: "
                              f"{str(exc)[:120]}); {CALIBRATE_FIRST}") from None
        return cal, f"calibration {cal.key} ({path})"
    from experiments.config import backend_identity, load_tasks
    from harness.inference import make_roles

    roles = make_roles(dataclasses.replace(exp.backend, cache=False), exp.results_dir)
    identity, tasks = backend_identity(roles), load_tasks(exp.benchmark)
    cal, note = find_calibration(exp, identity, tasks)
    if cal is not None:
        return cal, note
    # the tasks about to be written are none of a stored benchmark's: the same models' noise on another benchmark
    # stands in as well as the configured benchmark's would
    cal, other = same_models_calibration(exp, identity, tasks)
    if cal is not None:
        return cal, (f"{other} (none of the configured benchmark {exp.benchmark.name} is stored: the noise of the "
                     f"same models on that benchmark stands in for the new tasks')")
    near = nearest_calibration(exp, identity, tasks)
    named = f"; or size from it as it is with tasks.calibration={near}" if near else ""
    raise ConfigError(f"tasks.count=auto needs a stored calibration: {note}{named}; {CALIBRATE_FIRST}")


def spread(cal: Any) -> tuple[float, str]:
    """tau, and where it came from: the largest of the spreads the calibration measured, the positive control's
    across tasks (an edit that changes answers, as the edits a sweep confirms do), the A/A' arm's (a
    meaning-preserving rewrite: how differently two texts suit each task) and its edits arm's (calibrate.edits: the
    largest of the edits the project's mutators proposed, the kind of edit a sweep confirms), else 0.

    A sweep confirms edits that change answers, and such an edit helps some tasks far more than others: sized by a
    neutral rewrite's spread, the holdout is too small for the edits it has to confirm (bench/search/returns.py:
    a world whose A/A' spread is 0.1 and whose helpful edits spread 0.9 across tasks is sized 24 + 24 for +0.3, where
    90 + 90 would confirm it)."""
    from experiments.storage import aa_tau, edits_tau

    aa = aa_tau(cal.decomposition)
    het = cal.heterogeneity or {}
    pc = float(het["tau"]) if het.get("tau") is not None and math.isfinite(float(het["tau"])) else None
    rec = getattr(cal, "edits", None)
    ed = edits_tau(rec)
    if ed is not None and all(x is None or ed > x for x in (pc, aa)):
        k, n = int(rec.get("k") or 0), rec.get("n")
        also = "".join(f"; its {what} showed {x:.3f}" for what, x in (("positive control", pc), ("A/A' arm", aa))
                       if x is not None)
        return ed, (f"its edits arm's largest spread across tasks, from {k} edit{'s' if k != 1 else ''} the mutators "
                    f"proposed{f' ({n} tasks)' if n else ''}{also}")
    edited = f"; its edits arm's largest showed {ed:.3f}" if ed is not None else ""
    if pc is not None and (aa is None or pc >= aa):
        also = f"; its A/A' arm's neutral rewrite showed {aa:.3f}" if aa is not None else ""
        n = f", {het['n']} tasks" if het.get("n") else ""
        return pc, f"its positive control's spread across tasks (an edit that changes answers{n}){also}{edited}"
    if aa is not None:
        also = f"; its positive control showed {pc:.3f}" if pc is not None else ""
        return aa, f"its A/A' arm (sampled){also}{edited}"
    return 0.0, "not measured (taken as 0: an optimistic size)" + edited


def sigma_df(cal: Any) -> int | None:
    """The degrees of freedom of the calibration's sigma: its tasks x (repeats - 1), None when not positive."""
    df = int(cal.n_tasks or 0) * (int(cal.repeats or 0) - 1)
    return df if df > 0 else None


@functools.lru_cache(maxsize=8)
def needed_sizes(sigma: float, tau: float, alpha: float, baseline_runs: int, runs: tuple[int, int], power: float,
            effect: float, sims: int, train_filter: str, block: int, sigma_df: int | None = None,
            race: tuple[int, float] = (0, 1.0), futility_power: float | None = None) -> tuple[int, int] | None:
    from experiments.stats import decision_power, first_level

    # equal splits in the design asked about: decision_power grows both in this ratio; sigma_df: the power is
    # averaged over what the calibration's runs leave unknown of sigma
    return decision_power(sigma, tau, n_train=12, n_holdout=12, alpha=alpha, level=first_level(alpha),
                          baseline_runs=baseline_runs, holdout_runs=runs, power=power, target_effect=effect,
                          sims=sims, train_filter=train_filter, futility_block=block, sigma_df=sigma_df,
                          race_block=race[0], race_z=race[1], futility_power=futility_power).needed


def size(exp: ExperimentConfig) -> Sizing:
    """The holdout for tasks.effect at tasks.power (the first holdout look's level, experiments.stats.first_level of
    sweep.alpha; the futility stop's bound at calibrate.power, the design power the sweep states) and a train split
    as large: a best-of-N search on fewer train tasks than the holdout sends its winner's curse to the holdout
    (a candidate chosen on 24 train tasks measured +0.32 there and +0.065 on 144 holdout tasks)."""
    from experiments.stats import first_level

    ts = exp.task_supply
    cal, source = stored_calibration(exp)
    tau, tau_source = spread(cal)
    sw = shipped_sweep(exp)
    runs = (sw.holdout_candidate_runs, sw.holdout_baseline_runs)
    needed = needed_sizes(float(cal.sigma), float(tau), float(sw.alpha), int(sw.baseline_repeats), runs, float(ts.power),
                     float(ts.effect), min(int(exp.calibrate.sims), 1000), sw.train_filter,
                     int(sw.holdout_futility_block), sigma_df(cal), (int(sw.race_block) if sw.search == "joint" else 0, float(sw.race_z)),
                     float(exp.calibrate.power))
    if needed is None:
        raise ConfigError(f"tasks.count=auto: no holdout up to the largest size searched confirms tasks.effect="
                          f"{ts.effect:g} at power {ts.power:g} (sigma {cal.sigma:.3f}, tau {tau:.3f} from {source}); "
                          f"expected a larger tasks.effect")
    train, holdout = max(needed[0], needed[1]), needed[1]
    lines = [f"sizing: sigma {cal.sigma:.3f} (run noise, {sigma_df(cal) or 'unknown'} df) from {source}; tau {tau:.3f} from {tau_source}",
             f"sizing: the shipped sweep design ({sw.search} search, train_filter {sw.train_filter}, race block "
             f"{sw.race_block if sw.search == 'joint' else 'off'}, holdout runs {runs[0]}+{runs[1]}, "
             f"futility block {sw.holdout_futility_block} scaled to the holdout, first look at level "
             f"{first_level(sw.alpha):g}) confirms +{ts.effect:g} with power {ts.power:g} on {holdout} holdout tasks; train "
             f"{train} (at least the holdout: a best-of-N on fewer train tasks carries its winner's curse to the "
             f"holdout)"]
    lines.append(projection(exp, sw, cal.cost, train, holdout))
    return Sizing(train, holdout, tuple(lines))


def duration(seconds: float) -> str:
    """'1.6 h', '12 min', '<1 min': a projected time, never rounded to zero."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else "<1 min"


def projection(exp: ExperimentConfig, sw: Any, co: Any, train: int, holdout: int) -> str:
    """The sizing's line on what the sweep the user will run costs on these tasks: its trials (tasks.sweep_trials,
    else the shipped design's sweep.n_trials), each up to every train task (the baseline trial
    sweep.baseline_repeats times), the holdout's runs of the baseline and the top candidates, and one context
    preparation per task; with the calibration's timings, the uncached LLM calls and the time one run at a time
    (the mutation operators' few calls a trial come on top)."""
    trials = int(exp.task_supply.sweep_trials) or int(sw.n_trials)
    whence = ("tasks.sweep_trials" if exp.task_supply.sweep_trials else
              f"sweep.n_trials of conf/sweep/{SHIPPED_DESIGN.name}; tasks.sweep_trials=<n> projects yours")
    train_runs = (int(sw.baseline_repeats) + trials - 1) * train
    holdout_runs = holdout * (sw.holdout_baseline_runs + sw.holdout_top_k * sw.holdout_candidate_runs)
    task_runs = train_runs + holdout_runs
    head = (f"sizing: a sweep of {trials} trials ({whence}) on it: per trial up to {train} task runs")
    runs_text = (f"at most {task_runs} task runs ({train_runs} on train, {holdout_runs} on the holdout)")
    if co is None or not co.runs or co.wall_s <= 0:
        return f"{head}; {runs_text} (the calibration stored no timings: calls and hours unknown)"
    calls = task_runs * co.uncached_calls + (train + holdout) * co.prepare_calls
    wall = task_runs * co.wall_s + (train + holdout) * co.prepare_s
    return (f"{head} (~{train * co.uncached_calls:.0f} uncached LLM calls, ~{duration(train * co.wall_s)}); in all "
            f"{runs_text}, ~{calls:.0f} uncached LLM calls, ~{duration(wall)} one run at a time on the calibrated "
            f"backend ({co.wall_s:.0f} s and {co.uncached_calls:g} uncached calls a task run, medians of {co.runs} "
            f"runs; the operators' own calls come on top)")
