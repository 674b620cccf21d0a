"""The synthesis-instruction sweep: Optuna ask/tell inside the Hydra app.

Order of work: contexts (plan + research per task, once per study) -> baseline trial (enqueued) -> r-1 more
baseline runs with other seeds (noise floor) -> search trials until n_trials / timeout / LLM-call budget ->
holdout confirmation of the top-k candidates against the baseline -> promotion (or "no change kept").
Everything a resumed process needs lives in the study (trial user attrs, study user attrs), the context cache
and the LLM response cache, so the same command continues where a killed one stopped.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import optuna
from optuna.trial import TrialState

from experiments.benchmark import load_tasks, split, task_types
from experiments.config import ConfigError, ExperimentConfig, sweep_design_problem
from experiments.calibrate import run_label
from experiments.fingerprint import fingerprint_diff, study_fingerprint
from experiments.context_cache import ContextCache
from experiments.ledger import Ledger
from experiments.objective import (
    BASELINE,
    Objective,
    TrialFailed,
    _calls,
    candidate_hash,
    evaluate_candidate,
    state_from_trials,
)
from experiments.outcome import TaskOutcome
from experiments.pool import RunPool, runner_pool
from experiments.rdb import StaleTrials, log_stale, mask_url, shared_lock, worker_host
from experiments.registry import SweepRegistry, pin_source, sweep_evidence
from experiments.tracking import NullTracker, enable_wal, instruction_diff, make_tracker, sqlite_db, store_lock
from harness.logger import file_lock

SUMMARY_BEGIN = "===== SWEEP SUMMARY ====="
SUMMARY_END = "===== END SWEEP SUMMARY ====="
SMOKE_LINE = "SMOKE RUN (embedded model): not research quality"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


# -- statistics: noise floor and the paired comparison -------------------------------------------------


@dataclass(frozen=True)
class NoiseFloor:
    """Spread of the baseline over r runs with different seeds.

    sigma: pooled within-task standard deviation. floor(n, baseline_runs): two standard errors of the
    difference between one candidate run and a baseline reference averaged over baseline_runs runs, both of
    the same instruction, over n tasks: 2 * sigma * sqrt((1 + 1/baseline_runs) / n).
    """

    sigma: float
    repeats: int
    n_tasks: int
    range_of_means: float
    per_task_sd: dict[str, float] = field(default_factory=dict)

    def floor(self, n: int, baseline_runs: int = 1) -> float:
        if self.repeats < 2 or n < 1:
            return 0.0
        return 2.0 * self.sigma * math.sqrt((1.0 + 1.0 / max(baseline_runs, 1)) / n)


def noise_floor(runs: Sequence[Mapping[str, float]]) -> NoiseFloor:
    """Noise floor from r baseline runs (each a task_id -> score mapping over the same tasks)."""
    runs = [dict(r) for r in runs if r]
    if not runs:
        return NoiseFloor(0.0, 0, 0, 0.0)
    tasks = sorted(set.intersection(*(set(r) for r in runs)))
    per_task = {t: statistics.stdev([r[t] for r in runs]) if len(runs) > 1 else 0.0 for t in tasks}
    sigma = math.sqrt(sum(sd * sd for sd in per_task.values()) / len(per_task)) if per_task else 0.0
    means = [sum(r[t] for t in tasks) / len(tasks) for r in runs] if tasks else [0.0]
    return NoiseFloor(sigma, len(runs), len(tasks), max(means) - min(means), per_task)


def baseline_reference(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per-task mean of the baseline runs."""
    tasks = sorted(set.intersection(*(set(r) for r in runs))) if runs else []
    return {t: sum(r[t] for r in runs) / len(runs) for t in tasks}


@dataclass(frozen=True)
class Comparison:
    diff: float  # mean over tasks of candidate - baseline
    p_value: float  # one-sided paired Wilcoxon signed-rank over tasks (candidate > baseline)
    floor: float
    n: int
    alpha: float
    claimed: bool  # diff > floor and p < alpha
    min_possible_p: float

    @property
    def reason(self) -> str:
        if self.claimed:
            return f"improvement: +{self.diff:.3f} > floor {self.floor:.3f} and p={self.p_value:.4f} < {self.alpha}"
        why = []
        if self.diff <= self.floor:
            why.append(f"difference {self.diff:+.3f} within noise floor {self.floor:.3f}")
        if not self.p_value < self.alpha:
            why.append(f"p={self.p_value:.4f} >= alpha {self.alpha}")
            if self.min_possible_p >= self.alpha:
                why.append(f"n={self.n} tasks cannot reach alpha (smallest possible p={self.min_possible_p:.4f})")
        return "not an improvement: " + "; ".join(why)


def compare(candidate: Mapping[str, float], baseline: Mapping[str, float], *, floor: float, alpha: float) -> Comparison:
    """Paired comparison over the tasks both have: mean difference vs the floor, and a one-sided Wilcoxon."""
    tasks = sorted(set(candidate) & set(baseline))
    diffs = [candidate[t] - baseline[t] for t in tasks]
    n = len(diffs)
    diff = sum(diffs) / n if n else 0.0
    p = 1.0
    nonzero = [d for d in diffs if abs(d) > 1e-12]
    if nonzero:
        from scipy.stats import wilcoxon

        try:
            p = float(wilcoxon(nonzero, alternative="greater").pvalue)
        except ValueError:
            p = 1.0
    min_p = 0.5 ** len(nonzero) if nonzero else 1.0
    return Comparison(diff, p, floor, n, alpha, bool(n and diff > floor and p < alpha), min_p)


# -- study plumbing ------------------------------------------------------------------------------------


def open_study(exp: ExperimentConfig, on_stale: StaleTrials | None = None) -> optuna.Study:
    """Create or load the study (RDB storage, heartbeat on) named after the sweep."""
    url = exp.storage_url
    db = sqlite_db(url)
    hb = max(int(exp.sweep.heartbeat_s), 1)
    sw = exp.sweep
    sampler: optuna.samplers.BaseSampler
    if sw.sampler == "random":
        sampler = optuna.samplers.RandomSampler(seed=sw.seed)
    else:
        sampler = optuna.samplers.TPESampler(seed=sw.seed, n_startup_trials=min(len(sw.operators) + 1, 6))
    pruner: optuna.pruners.BasePruner
    if sw.pruner == "wilcoxon":
        from experiments.optimizer import pruner_threshold  # Pocock-corrected over a trial's looks when configured

        p = pruner_threshold(sw.pruner_p, len(split(load_tasks(exp.benchmark), "train")), sw.pruner_startup_steps,
                             sw.pruner_correction)
        pruner = optuna.pruners.WilcoxonPruner(p_threshold=p, n_startup_steps=sw.pruner_startup_steps)
    else:
        pruner = optuna.pruners.NopPruner()
    # SQLite: WAL + a 30 s busy timeout, and creation under a file lock (two workers starting at once race the
    # table creation otherwise)
    with store_lock(db) if db is not None else shared_lock(url, f"{sw.name}/open_study"):
        if db is not None:
            enable_wal(db)
        storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": 30}} if db else None,
                                             heartbeat_interval=hb, grace_period=2 * hb,
                                             **(on_stale.storage_kwargs() if on_stale else {}))
        return optuna.create_study(storage=storage, study_name=sw.name, direction="maximize", sampler=sampler,
                                   pruner=pruner, load_if_exists=True)


class StudyMismatch(ConfigError):
    """A resume under another objective (tasks, evaluator, models, harness config or sweep kind)."""


def pin_fingerprint(study: optuna.Study, fingerprint: Mapping[str, Any], exp: ExperimentConfig) -> str | None:
    """Store the objective's fingerprint on a new study; on a resume, refuse (StudyMismatch) when it differs.

    Returns a note for a study made before fingerprints existed (pinned now, nothing to compare with)."""
    stored = study.user_attrs.get("fingerprint")
    if stored is None:
        study.set_user_attr("fingerprint", dict(fingerprint))
        return ("study predates objective fingerprints: pinned to this command's objective now" if study.trials
                else None)
    diff = fingerprint_diff(stored, fingerprint)
    if diff:
        raise StudyMismatch(
            f"study {exp.sweep.name!r} in {mask_url(exp.storage_url)} was made for another objective, so its scores and these "
            f"would not compare ({len(diff)} field(s) differ: {'; '.join(diff[:8])}{'; ...' if len(diff) > 8 else ''}); "
            f"to start a new study run the same command with sweep.name={exp.sweep.name}-{_fp_tag(fingerprint)}"
        )
    return None


def _fp_tag(fingerprint: Mapping[str, Any]) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:6]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def fail_stale_trials(study: optuna.Study, on_stale: StaleTrials | None = None) -> list[int]:
    """Mark RUNNING trials left by a dead process as FAIL: this host's dead pids at once, others by heartbeat."""
    from optuna.storages._heartbeat import fail_stale_trials as optuna_fail_stale

    host, failed = worker_host(), []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        a = t.user_attrs
        if a.get("worker_host") == host and isinstance(a.get("worker_pid"), int) and (
            a["worker_pid"] == os.getpid() or not _pid_alive(a["worker_pid"])
        ):
            study._storage.set_trial_user_attr(t._trial_id, "fail_reason", "process died while the trial was running")
            try:
                study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL)
                failed.append(t.number)
                if on_stale is not None:  # retried like a trial failed by heartbeat
                    on_stale(study, _frozen(study, t.number))
            except optuna.exceptions.UpdateFinishedTrialError:
                pass
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
    optuna_fail_stale(study)
    after = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
    return sorted(set(failed) | (after - before))


def _heartbeat(study: optuna.Study, trial: optuna.Trial):
    from optuna.storages._heartbeat import get_heartbeat_thread

    return get_heartbeat_thread(trial._trial_id, study._storage)


def _finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return study.get_trials(deepcopy=False, states=FINISHED)


def _frozen(study: optuna.Study, number: int) -> optuna.trial.FrozenTrial:
    return next(t for t in study.get_trials(deepcopy=False) if t.number == number)


def _ensure_baseline(study: optuna.Study) -> None:
    live = (TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING)
    if not any(t.user_attrs.get("operator") == BASELINE and t.state in live for t in study.get_trials(deepcopy=False)):
        study.enqueue_trial(params={}, user_attrs={"operator": BASELINE}, skip_if_exists=False)


def _baseline_trial(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get("operator") == BASELINE]
    return done[0] if done else None


# -- summary -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HoldoutRow:
    trial: int | None  # None for the baseline
    hash: str
    operator: str
    train_mean: float
    holdout_mean: float | None
    holdout_diff: float | None
    train: Comparison | None
    wins: bool
    error: str | None = None


@dataclass(frozen=True)
class SplitScores:
    """A candidate's scores on one split next to the baseline's, each with a 95% bootstrap CI over tasks."""

    split: str
    n: int
    mean: float | None = None
    ci: tuple[float, float] | None = None
    baseline_mean: float | None = None
    baseline_ci: tuple[float, float] | None = None
    diff: float | None = None
    diff_ci: tuple[float, float] | None = None
    note: str = ""  # why there are no scores (holdout not evaluated, ...)


def split_scores(split_name: str, cand: Mapping[str, float] | None, base: Mapping[str, float] | None,
                 *, note: str = "") -> SplitScores:
    """Means and paired differences over the tasks both have, with bootstrap CIs (undefined below 2 tasks)."""
    from experiments.stats import bootstrap_ci

    tasks = sorted(set(cand or {}) & set(base or {}))
    if not tasks:
        return SplitScores(split_name, 0, note=note or "not evaluated")

    def mean_ci(values: list[float]) -> tuple[float, tuple[float, float] | None]:
        ci = bootstrap_ci(values, method="percentile", seed=0)
        return sum(values) / len(values), ((ci.low, ci.high) if math.isfinite(ci.low) else None)

    c = [float(cand[t]) for t in tasks]
    b = [float(base[t]) for t in tasks]
    m, mci = mean_ci(c)
    bm, bci = mean_ci(b)
    d, dci = mean_ci([x - y for x, y in zip(c, b)])
    return SplitScores(split_name, len(tasks), m, mci, bm, bci, d, dci, note)


@dataclass(frozen=True)
class SweepSummary:
    sweep: str
    storage: str
    stop_reason: str
    trials: dict[str, int]
    new_trials: int
    baseline_train: float | None
    noise: NoiseFloor
    train_floor: float
    best_trial: int | None
    best_operator: str | None
    best_value: float | None
    best_comparison: Comparison | None
    holdout: tuple[HoldoutRow, ...]
    baseline_holdout: float | None
    promoted_trial: int | None
    promoted_hash: str
    promoted: bool
    best_instructions: dict[str, str]
    baseline_instructions: dict[str, str]
    llm_calls: int
    llm_calls_prepare: int
    calls_per_trial: float | None
    contexts: dict[str, int]
    smoke: bool
    paths: dict[str, str]
    mlflow_ui: str
    elapsed_s: float
    controls: dict[str, bool] = field(default_factory=dict)
    best_scores: tuple[SplitScores, ...] = ()
    mlflow_url: str = ""
    promoted_instructions: dict[str, str] = field(default_factory=dict)
    failed_out: bool = False  # stopped because too many trials failed: the CLI exits non-zero
    selection_bias: float | None = None  # mean over evaluated trials of (wiggum best - independent re-score)
    rescored: bool = False  # trial values are independent re-scores (a sampling judge)
    underpowered: str | None = None  # why this design cannot promote (run anyway: sweep.allow_underpowered)
    label: str | None = None  # experiments.calibrate.run_label: the embedded model file, smoke or calibrated
    noise_source: str = ""  # where sigma came from: a stored calibration, or this study's baseline repeats
    registry: str = ""  # the Prompt Registry after promotion, or what was not registered and why (one line)


def format_summary(s: SweepSummary) -> str:
    """The greppable end-of-sweep block."""
    lines = [SUMMARY_BEGIN]
    if s.label or s.smoke:
        lines.append(s.label or SMOKE_LINE)
    if s.underpowered:
        lines.append(f"UNDERPOWERED (sweep.allow_underpowered=true): nothing can be promoted; {s.underpowered}")
    t = s.trials
    lines += [
        f"sweep: {s.sweep}  storage: {s.storage}",
        f"stopped: {s.stop_reason}",
        f"trials: {t.get('total', 0)} total ({t.get('complete', 0)} complete, {t.get('pruned', 0)} pruned, "
        f"{t.get('failed', 0)} failed, {t.get('duplicate', 0)} duplicate"
        + (f"; {t['gated']} of the pruned gated out" if t.get("gated") else "") + f"), {s.new_trials} new in this run",
        f"baseline train mean: {_f(s.baseline_train)}",
        f"noise floor (train): {s.train_floor:.3f}  [sigma {s.noise.sigma:.3f} over {s.noise.repeats} "
        f"{'calibration' if s.noise_source.startswith('calibration') else 'baseline'} runs, "
        f"{s.noise.n_tasks} tasks; range of run means {s.noise.range_of_means:.3f}]",
    ]
    if s.noise_source:
        lines.append(f"noise source: {s.noise_source}")
    if s.best_trial is not None:
        lines.append(f"best trial: #{s.best_trial} ({s.best_operator}) train mean {_f(s.best_value)}")
        if s.best_comparison is not None:
            lines.append(f"best vs baseline (train): {s.best_comparison.reason}")
    else:
        lines.append("best trial: none beyond the baseline")
    if s.best_scores:
        lines.append(f"best trial #{s.best_trial} scores vs baseline (mean [95% bootstrap CI over tasks]):")
        for sc in s.best_scores:
            if sc.n == 0:
                lines.append(f"  {sc.split:<8} {sc.note}")
                continue
            lines.append(f"  {sc.split:<8} n={sc.n}: best {_f(sc.mean)} {_ci(sc.ci)}  baseline {_f(sc.baseline_mean)} "
                         f"{_ci(sc.baseline_ci)}  diff {_f(sc.diff, signed=True)} {_ci(sc.diff_ci, signed=True)}")
    lines.append(f"holdout baseline mean: {_f(s.baseline_holdout)}")
    for row in s.holdout:
        lines.append(
            f"holdout trial #{row.trial} ({row.operator}, {row.hash}): train {_f(row.train_mean)} holdout "
            f"{_f(row.holdout_mean)} diff {_f(row.holdout_diff, signed=True)} "
            f"{'WINS' if row.wins else 'does not win'}" + (f" error: {row.error}" if row.error else "")
        )
    if s.promoted:
        lines.append(f"PROMOTED: trial #{s.promoted_trial} (hash {s.promoted_hash})")
    else:
        lines.append(f"PROMOTED: baseline (no change kept; hash {s.promoted_hash})")
    if s.registry:
        lines.append(f"registry: {s.registry}")
    lines.append(f"LLM calls: {s.llm_calls} uncached in this run ({s.llm_calls_prepare} for contexts); "
                 f"per search trial: {_f(s.calls_per_trial)}; contexts {s.contexts.get('hits', 0)} reused, "
                 f"{s.contexts.get('computed', 0)} computed")
    if s.contexts.get("prepare_calls_train") is not None:
        lines.append(f"context reuse: saves {s.contexts['prepare_calls_train']} planning/research LLM calls per trial "
                     f"(counted when the train contexts were prepared)")
    lines.append(f"controls: reuse_context={s.controls.get('reuse_context')} memory_frozen={s.controls.get('memory_frozen')}")
    if s.selection_bias is not None:
        how = ("trial values are independent re-scores of each kept text" if s.rescored else
               "greedy judge (evaluator.temperature 0): a re-score would be the same sample, so trial values are the "
               "loop's own scores")
        lines.append(f"selection bias (wiggum best round - trial value), mean over trials: "
                     f"{_f(s.selection_bias, signed=True)}; {how}")
    lines.append(f"elapsed: {_hms(s.elapsed_s)}")
    lines.append("best instruction:")
    for tt, text in sorted(s.best_instructions.items()):
        lines.append(f"  [{tt}] {text}")
    diff = instruction_diff(s.baseline_instructions, s.best_instructions)
    lines.append("diff vs baseline:" + ("\n" + diff if diff else " (identical)"))
    if s.promoted and s.promoted_trial != s.best_trial and s.promoted_instructions:
        lines.append(f"promoted instruction (trial #{s.promoted_trial}, best on the holdout among the winners):")
        for tt, text in sorted(s.promoted_instructions.items()):
            lines.append(f"  [{tt}] {text}")
        diff = instruction_diff(s.baseline_instructions, s.promoted_instructions)
        lines.append("promoted diff vs baseline:" + ("\n" + diff if diff else " (identical)"))
    for name, path in s.paths.items():
        lines.append(f"{name}: {path}")
    lines.append(f"MLflow UI: {s.mlflow_ui}")
    if s.mlflow_url:
        lines.append(f"MLflow runs: {s.mlflow_url}")
    lines.append(SUMMARY_END)
    return "\n".join(lines)


def _f(x: float | None, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _ci(ci: tuple[float, float] | None, signed: bool = False) -> str:
    return f"[{_f(ci[0], signed)}, {_f(ci[1], signed)}]" if ci else "[CI n/a]"


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


# -- the sweep -----------------------------------------------------------------------------------------


def _prepare_calls(prepared: Any) -> int:
    value = prepared.get("llm_calls", 0) if isinstance(prepared, Mapping) else getattr(prepared, "llm_calls", 0)
    return int(value or 0)


def context_depends(exp: ExperimentConfig) -> dict[str, Any]:
    """What a task's prepared context depends on (its cache key besides the task text)."""
    b = exp.backend
    return {
        "planner": dataclasses.asdict(exp.planner),
        "search": dataclasses.asdict(exp.search),
        "research": dataclasses.asdict(exp.research),
        "memory": {"enabled": exp.memory.enabled, "embedding": exp.memory.embedding, "k": exp.memory.k},
        "models": [b.kind, b.planner_model, b.compressor_model],
        "seed": exp.seed,
    }


@dataclass
class _Phase:
    """The evaluation in progress (a trial, a baseline repeat, a holdout run): label, run-id prefix, task count."""

    label: str
    prefix: str
    total: int
    t0: float = field(default_factory=time.perf_counter)
    done: int = 0


class _TaskProgress:
    """Runner proxy: forwards everything, and reports each finish() (one per task) to the sweep's progress."""

    def __init__(self, runner: Any, report: Callable[[str | None, TaskOutcome, float], None]) -> None:
        self._runner, self._report = runner, report

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def finish(self, prepared: Any, **kwargs: Any) -> TaskOutcome:
        t0 = time.perf_counter()
        result = self._runner.finish(prepared, **kwargs)
        self._report(kwargs.get("run_id"), result, time.perf_counter() - t0)
        return result


class Sweep:
    """One invocation of a synth_mutation sweep. `run()` returns the SweepSummary."""

    def __init__(
        self,
        exp: ExperimentConfig,
        runner: Any,
        *,
        propose: Callable[..., Any] | None = None,
        mutation_llm: Any = None,
        tracker: NullTracker | None = None,
        out: Callable[[str], None] = print,
        pool: RunPool | None = None,
    ) -> None:
        self.exp, self.out = exp, out
        self._pool = pool  # None: backend.concurrency, resolved against the runner's backend in run()
        self._lock = threading.Lock()  # progress and ETA bookkeeping: workers finish tasks concurrently
        self.runner = _TaskProgress(runner, self._task_done)
        self._phase: _Phase | None = None
        self._task_s: list[float] = []  # seconds per finished task in this process (for the ETA)
        self._trial_s: list[float] = []  # seconds per trial run in this process
        self.t0 = time.perf_counter()
        self.tasks = load_tasks(exp.benchmark)
        self.train, self.holdout = split(self.tasks, "train"), split(self.tasks, "holdout")
        self.dir = exp.sweep_dir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.smoke = bool(getattr(runner, "smoke", False))
        self.tracker = tracker if tracker is not None else make_tracker(exp)
        self.ledger = Ledger(self.dir / "ledger.jsonl")
        self.propose = propose
        self.mutation_llm = mutation_llm if mutation_llm is not None else getattr(runner, "mutation_llm", None)
        self.mutate_types = tuple(exp.sweep.mutate_task_types) or task_types(self.train)
        self.calibration: Any = None  # experiments.calibrate.Calibration whose noise floor replaces the repeats
        self.noise_note = ""
        self._measured: list[tuple[int, int, float]] = []  # (uncached calls, tokens, seconds) per task run here
        self._preflight_pending: Callable[[], None] | None = None  # prints the update after the first task

    @property
    def pool(self) -> RunPool:
        """The RunPool of this sweep: the one given, else backend.concurrency against the runner's backend (one
        log line says what was chosen and why)."""
        if self._pool is None:
            self._pool = runner_pool(self.exp.backend, self.runner.identity())
            self.out(f"[{self.exp.sweep.name}] concurrency {self._pool.workers}: {self._pool.why}")
        return self._pool

    # -- pieces ----------------------------------------------------------------------------------------
    def _contexts(self) -> tuple[dict[str, Any] | None, dict[str, int]]:
        if not self.exp.sweep.reuse_context:
            return None, {"hits": 0, "computed": 0}
        # the resolved models, not the configured kind ("auto" may have meant another server last time)
        cache = ContextCache(self.dir / "context", {**context_depends(self.exp), "resolved": self.runner.identity()},
                             load=getattr(self.runner, "prepared_from_dict", None))
        contexts, stats = {}, {"hits": 0, "computed": 0}
        tasks = self.train + self.holdout
        prepared = self.pool.ordered(lambda t: cache.get_or_prepare(t, self.runner.prepare), tasks)
        with prepared:
            for i, (task, fut) in enumerate(prepared, 1):
                got = fut.result()
                contexts[task.id] = got.prepared
                stats["hits" if got.hit else "computed"] += 1
                if task.split == "train":
                    stats["prepare_calls_train"] = stats.get("prepare_calls_train", 0) + _prepare_calls(got.prepared)
                if not got.hit:
                    self.out(f"[{self.exp.sweep.name}] context {i}/{len(self.tasks)} {task.id}: prepared and cached")
        return contexts, stats

    def _baseline_runs(self, study: optuna.Study, baseline: Mapping[str, str], contexts) -> list[dict[str, float]]:
        """Baseline trial scores (seed = cfg.seed) plus r-1 further runs with other seeds, each stored once."""
        with shared_lock(self.exp.storage_url, f"{self.exp.sweep.name}/study_attrs", self.dir / ".study_attrs.lock"):
            return self._baseline_runs_locked(study, baseline, contexts)

    def _baseline_runs_locked(self, study: optuna.Study, baseline: Mapping[str, str], contexts) -> list[dict[str, float]]:
        bt = _baseline_trial(study)
        if bt is None:
            return []
        runs = [dict(bt.user_attrs.get("task_scores", {}))]
        if self.calibration is not None:  # the calibration measured the noise: no baseline repeats
            return runs
        stored = dict(study.user_attrs.get("baseline_runs", {}))
        ran = False
        for k in range(1, self.exp.sweep.baseline_repeats):
            seed = self.exp.seed + k
            if str(seed) not in stored:
                self.out(f"[{self.exp.sweep.name}] baseline repeat {k + 1}/{self.exp.sweep.baseline_repeats} "
                         f"(seed {seed}) for the noise floor")
                self._begin(f"baseline repeat {k + 1}/{self.exp.sweep.baseline_repeats}",
                            f"{self.exp.sweep.name}-baseline-s{seed}", len(self.train))
                ev = evaluate_candidate(baseline, self.train, self.runner, contexts=contexts, seed=seed,
                                        run_prefix=f"{self.exp.sweep.name}-baseline-s{seed}", pool=self.pool)
                stored[str(seed)] = ev.by_task()
                ran = True
                study.set_user_attr("baseline_runs", stored)
                self._safe(lambda: self.tracker.log_child(
                    f"baseline-repeat-seed{seed}", {"kind": "baseline_repeat", "seed": str(seed)},
                    {"composite": ev.mean, **{f"task.{t}": v for t, v in ev.by_task().items()}}))
            runs.append(dict(stored[str(seed)]))
        if ran and len(runs) >= 2:
            self._noise_measured(runs)
        return runs

    def _noise_measured(self, runs: list[dict[str, float]]) -> None:
        """The detectable effect, once this study's baseline repeats have measured the noise."""
        from experiments.calibrate import mde, sweep_design

        nf = noise_floor(runs)
        d = sweep_design(nf.sigma, len(self.train), alpha=self.exp.sweep.alpha, baseline_runs=len(runs))
        m = mde(d, power=self.exp.calibrate.power, sims=self.exp.calibrate.sims)
        self.out(f"[{self.exp.sweep.name}] noise measured from {len(runs)} baseline runs: sigma {nf.sigma:.3f}, floor "
                 f"{d.floor:.3f}; detectable effect {m:.3f} composite points at power {self.exp.calibrate.power:g}")

    def _holdout(self, study, key: str, instructions, contexts) -> tuple[dict[str, float] | None, str | None]:
        with shared_lock(self.exp.storage_url, f"{self.exp.sweep.name}/study_attrs", self.dir / ".study_attrs.lock"):
            return self._holdout_locked(study, key, instructions, contexts)

    def _holdout_locked(self, study, key: str, instructions, contexts) -> tuple[dict[str, float] | None, str | None]:
        stored = dict(study.user_attrs.get("holdout", {}))
        if key in stored:
            return stored[key], None
        who = "baseline" if key == study.user_attrs.get("baseline_hash") else key
        self._begin(f"holdout {who}", f"{self.exp.sweep.name}-holdout-{key}", len(self.holdout))
        try:
            ev = evaluate_candidate(instructions, self.holdout, self.runner, contexts=contexts, seed=self.exp.seed,
                                    run_prefix=f"{self.exp.sweep.name}-holdout-{key}", pool=self.pool)
        except TrialFailed as exc:
            return None, str(exc)
        stored[key] = ev.by_task()
        study.set_user_attr("holdout", stored)
        self._safe(lambda: self.tracker.log_child(
            f"holdout-{key}", {"kind": "holdout", "instruction_hash": key},
            {"composite": ev.mean, **{f"task.{t}": v for t, v in ev.by_task().items()}}))
        return stored[key], None

    def _safe(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # tracking must not kill a night's sweep; the next start re-syncs trials
            self.out(f"[{self.exp.sweep.name}] warning: MLflow logging failed: {type(exc).__name__}: {exc}")

    # -- noise source and preflight ------------------------------------------------------------------------
    def _noise_source(self, study: optuna.Study) -> Any:
        """The stored calibration whose noise floor this study uses instead of baseline repeats, or None.

        Pinned to the study when it starts (study attr noise_source), so a resumed study keeps one source: a study
        that measured its own repeats keeps them even if a calibration appears later."""
        from experiments.calibrate import find_calibration

        name = self.exp.sweep.name
        cal, note = find_calibration(self.exp, self.runner.identity(), self.tasks)
        pinned = study.user_attrs.get("noise_source")
        if pinned is None:
            if cal is not None and study.user_attrs.get("baseline_runs"):  # repeats measured before it existed
                note, cal = f"{note} exists, but this study measured its own baseline repeats; keeping them", None
            study.set_user_attr("noise_source", {"calibration": cal.key if cal is not None else None})
        elif pinned.get("calibration") is None:
            if cal is not None:
                note = f"{note} exists, but this study started without it; keeping its own baseline repeats"
            cal = None
        elif cal is None or cal.key != pinned["calibration"]:
            note = f"the calibration this study started with is gone ({note}); measuring baseline repeats now"
            study.set_user_attr("noise_source", {"calibration": None})
            cal = None
        r = self.exp.sweep.baseline_repeats
        if cal is not None:
            self.noise_note = (f"calibration {cal.key} ({cal.path}): sigma {cal.sigma:.3f} over {cal.repeats} runs x "
                               f"{cal.n_tasks} tasks; baseline repeats not run")
            self.out(f"[{name}] noise floor from {note}: sigma {cal.sigma:.3f} over {cal.repeats} runs x "
                     f"{cal.n_tasks} tasks; the {r - 1} baseline repeat(s) are not run")
        else:
            self.noise_note = f"{r} baseline runs of this study ({note})"
            self.out(f"[{name}] calibration: {note}; the noise floor comes from {r} baseline runs")
        return cal

    def _preflight(self, study: optuna.Study, calls0: int, update: str | None = None) -> None:
        """Projected LLM calls, tokens and wall time for the rest of the budget, the detectable effect, and a
        warning on a budget of fewer than a handful of proposals: before the first trial (cost per task run from
        the calibration, else from the first measured task, printed then), and again after the first trial."""
        from experiments.calibrate import Cost, preflight_lines, project_sweep

        exp, sw = self.exp, self.exp.sweep
        cal = self.calibration
        m = [x for x in self._measured if x[0] > 0]  # task runs that reached the model (a cache hit costs ~0)
        if update is not None and not m:
            return
        if update is not None:
            update = f"{update}: {len(m)} task run(s) measured here"
            cost, source = Cost(0.0, statistics.median(x[0] for x in m), statistics.median(x[1] for x in m),
                                statistics.median(x[2] for x in m), runs=len(m)), update
        elif cal is not None:
            cost, source = cal.cost, f"calibration {cal.key}"
        else:
            cost, source = None, "no calibration"
        stored = dict(study.user_attrs.get("baseline_runs", {}))
        repeats_left = 0 if cal is not None else sum(str(exp.seed + k) not in stored for k in range(1, sw.baseline_repeats))
        held = dict(study.user_attrs.get("holdout", {}))
        holdout_left = (max(sw.holdout_top_k + 1 - len(held), 0) * len(self.holdout)
                        if self.holdout and sw.holdout_top_k > 0 else 0)
        proj = project_sweep(exp, finished=len(_finished(study)), baseline_done=_baseline_trial(study) is not None,
                             repeats_left=repeats_left, holdout_left=holdout_left, cost=cost, source=source,
                             used_calls=_calls(self.runner) - calls0, elapsed_s=time.perf_counter() - self.t0,
                             mutation_calls=self._mutation_calls(), concurrency=self.pool.workers)
        sigma, src = (cal.sigma, f"calibration {cal.key}") if cal is not None else (None, "no calibration")
        # with a calibration the sweep compares each candidate with its one baseline run (no repeats)
        lines = preflight_lines(exp, proj, sigma=sigma, baseline_runs=1, noise_source=src)
        if update is not None:  # the cost line changes, and the proposals a timeout or call cap allows
            lines = [ln.replace("preflight:", "preflight update:", 1) for ln in lines[:2] + lines[3:]]
        for line in lines:
            self.out(f"[{sw.name}] {line}")
        if cost is None and update is None:
            self._preflight_pending = lambda: self._preflight(study, calls0, update="the first measured task")

    def _mutation_calls(self) -> int:
        """Upper bound of LLM calls one proposal spends in the mutators: one per mutated task type when any
        configured operator asks the model."""
        try:
            from mutators.operators import LLM_OPERATORS
        except ImportError:
            return len(self.mutate_types)
        return len(self.mutate_types) if set(self.exp.sweep.operators) & set(LLM_OPERATORS) else 0

    # -- progress ----------------------------------------------------------------------------------------
    def _begin(self, label: str, prefix: str, total: int) -> None:
        self._phase = _Phase(label, prefix, total)

    def _task_done(self, run_id: str | None, outcome: TaskOutcome, seconds: float) -> None:
        """One line per finished task: phase, task j/m, its score, elapsed, ETA of the phase. Called on the worker
        that ran the task: several at once with concurrency > 1."""
        with self._lock:
            self._task_done_locked(run_id, outcome, seconds)

    def _task_done_locked(self, run_id: str | None, outcome: TaskOutcome, seconds: float) -> None:
        self._task_s.append(seconds)
        u = outcome.usage
        self._measured.append((u.uncached_calls, u.prompt_tokens + u.completion_tokens, seconds))
        ph = self._phase
        if ph is not None:
            ph.done += 1
            task = run_id[len(ph.prefix) + 1:] if run_id and run_id.startswith(ph.prefix + "-") else (run_id or "?")
            score = outcome.score if outcome.ok else None
            per_task = (time.perf_counter() - ph.t0) / ph.done
            self.out(f"[{self.exp.sweep.name}] {ph.label} task {ph.done}/{ph.total} {task} "
                     f"{'score ' + _f(score) if score is not None else 'FAILED'}  elapsed "
                     f"{_hms(time.perf_counter() - self.t0)}  ETA {ph.label.split(' ')[0]} "
                     f"{_hms(per_task * max(ph.total - ph.done, 0))}")
        if self._preflight_pending is not None and u.uncached_calls > 0:  # the first task that reached the model
            pending, self._preflight_pending = self._preflight_pending, None
            pending()

    def eta_s(self, done: int) -> float | None:
        """Seconds left: remaining trials at this process's mean trial time, plus the holdout confirmation at the
        mean task time; capped by the timeout. None before anything was timed."""
        sw = self.exp.sweep
        if not self._trial_s:
            return None
        left = max(sw.n_trials - done, 0) * (sum(self._trial_s) / len(self._trial_s))
        if self.holdout and sw.holdout_top_k > 0 and self._task_s:
            at_once = max(min(self.pool.workers, len(self.holdout)), 1)  # holdout tasks run side by side
            left += (sw.holdout_top_k + 1) * len(self.holdout) * (sum(self._task_s) / len(self._task_s)) / at_once
        if sw.timeout_s is not None:
            left = min(left, max(sw.timeout_s - (time.perf_counter() - self.t0), 0.0))
        return left

    # -- main loop ---------------------------------------------------------------------------------------
    def run(self) -> SweepSummary:
        with warnings.catch_warnings():
            # heartbeats with ask/tell, WilcoxonPruner and fail_stale_trials are deliberate: hide their notices
            warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
            return self._run()

    def _run(self) -> SweepSummary:
        exp, sw = self.exp, self.exp.sweep
        self.t0 = t0 = time.perf_counter()
        calls0 = _calls(self.runner)
        name = sw.name
        self.stale = StaleTrials()
        study = open_study(exp, self.stale)
        exp, pinned = pin_source(study, exp)  # a resumed study keeps the prompt versions it started from
        if pinned:
            self.exp = exp
            self.out(f"[{name}] {pinned}")
        # before anything is spent or logged: a study answers for one objective only
        note = pin_fingerprint(study, study_fingerprint(exp, self.runner.identity(), self.tasks), exp)
        if note:
            self.out(f"[{name}] {note}")
        self.calibration = self._noise_source(study)
        self.tracker.start(exp, smoke=self.smoke)
        contexts, ctx_stats = self._contexts()
        prepare_calls = _calls(self.runner) - calls0
        stale = fail_stale_trials(study, self.stale)
        if stale:
            self.out(f"[{name}] marked {len(stale)} trial(s) left RUNNING by a dead process as failed: {stale}")
        objective = Objective(
            exp, self.runner, self.train, contexts=contexts,
            state=lambda: state_from_trials(study.get_trials(deepcopy=False), objective.baseline),
            propose=self.propose, mutation_llm=self.mutation_llm, mutate_types=self.mutate_types, pool=self.pool,
            sigma=lambda: (self.calibration.noise_floor() if self.calibration is not None  # the gate's noise
                           else noise_floor(self._baseline_runs(study, objective.baseline, contexts))).sigma,
        )
        baseline = objective.baseline
        self.registry = SweepRegistry(exp, self.runner.identity())  # the baseline texts as prompt versions
        warn = self.registry.register_baseline(baseline, study.user_attrs.get("fingerprint", {}))
        if warn:
            self.out(f"[{name}] warning: {warn}")
        self.ledger.sync(study.get_trials(deepcopy=False))
        self._safe(lambda: self.tracker.sync(study.get_trials(deepcopy=False), baseline))
        with shared_lock(exp.storage_url, f"{name}/baseline", self.dir / ".baseline.lock"):  # one baseline enqueued
            _ensure_baseline(study)
        study.set_user_attr("baseline_hash", candidate_hash(baseline))
        study.set_user_attr("controls", {"reuse_context": sw.reuse_context, "memory_frozen": exp.memory.frozen})

        self._preflight(study, calls0)
        new, new_failed, search_calls, search_trials = 0, 0, 0, 0
        stop_reason = "n_trials reached"
        failed_out = interrupted = False
        while True:
            done = len(_finished(study))
            used = _calls(self.runner) - calls0
            elapsed = time.perf_counter() - t0
            if _baseline_trial(study) is not None:
                self._baseline_runs(study, baseline, contexts)
            if done >= sw.n_trials:
                stop_reason = f"n_trials reached ({done}/{sw.n_trials})"
                break
            if sw.timeout_s is not None and elapsed >= sw.timeout_s:
                stop_reason = f"timeout ({elapsed:.0f}s >= {sw.timeout_s:.0f}s)"
                break
            if sw.max_llm_calls is not None and used >= sw.max_llm_calls:
                stop_reason = f"LLM call budget ({used} >= {sw.max_llm_calls})"
                break
            if new >= sw.min_trials_for_failure_stop and new_failed / new >= sw.failure_rate_stop:
                stop_reason = f"failure rate {new_failed}/{new} >= {sw.failure_rate_stop}"
                failed_out = True
                break
            fail_stale_trials(study, self.stale)  # a dead worker's trial (any machine): failed, retried, logged
            self._safe(lambda: log_stale(self.stale, self.tracker, baseline, self.out, name))
            # one ask at a time on this host: Optuna pops the enqueued baseline with a SELECT ... FOR UPDATE that
            # SQLite ignores, so two workers asking at once could both run trial #0 (and tell it twice)
            with file_lock(self.dir / ".ask.lock"):
                trial = study.ask()
            trial.set_user_attr("worker_host", worker_host())
            trial.set_user_attr("worker_pid", os.getpid())
            trial_calls0 = _calls(self.runner)
            state, value = TrialState.FAIL, None
            self._begin(f"trial {done + 1}/{sw.n_trials} #{trial.number}", f"{name}-t{trial.number}", len(self.train))
            trial_t0 = time.perf_counter()
            try:
                with _heartbeat(study, trial):
                    value = objective(trial)
                state = TrialState.COMPLETE
            except optuna.TrialPruned:
                state = TrialState.PRUNED
            except TrialFailed:
                state = TrialState.FAIL
            except KeyboardInterrupt:
                trial.set_user_attr("fail_reason", "interrupted (KeyboardInterrupt)")
                interrupted = True
            except Exception as exc:  # a trial that crashes is data: recorded with its reason, the sweep goes on
                # a programming error (e.g. a TypeError inside an operator) keeps its traceback in the record
                trial.set_user_attr("fail_reason", f"{type(exc).__name__}: {exc}"[:500])
                trial.set_user_attr("traceback", traceback.format_exc()[-4000:])
            self._trial_s.append(time.perf_counter() - trial_t0)
            self._phase = None
            if state == TrialState.COMPLETE:
                study.tell(trial, value)
            else:
                study.tell(trial, state=state)
            new += 1
            new_failed += state == TrialState.FAIL
            frozen = _frozen(study, trial.number)
            if frozen.user_attrs.get("operator") != BASELINE:
                search_trials += 1
                search_calls += _calls(self.runner) - trial_calls0
            outcome = objective.last if objective.last and objective.last.number == trial.number else None
            self._safe(lambda: self.tracker.log_trial(frozen, outcome, baseline=baseline))
            self.ledger.sync(study.get_trials(deepcopy=False))
            self._progress(study, frozen, t0, calls0)
            if new == 1 and not interrupted and len(_finished(study)) < sw.n_trials and self._preflight_pending is None:
                self._preflight(study, calls0, update="the first trial")
            if interrupted:
                raise KeyboardInterrupt
        summary = self._conclude(study, baseline, contexts, stop_reason=stop_reason, new=new, t0=t0, calls0=calls0,
                                 prepare_calls=prepare_calls, ctx_stats=ctx_stats,
                                 calls_per_trial=(search_calls / search_trials) if search_trials else None)
        return dataclasses.replace(summary, failed_out=failed_out)

    def _progress(self, study: optuna.Study, frozen, t0: float, calls0: int) -> None:
        done = len(_finished(study))
        complete = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))]
        best = max(complete, key=lambda t: t.value, default=None)
        a = frozen.user_attrs
        value = frozen.value if frozen.state == TrialState.COMPLETE else a.get("partial_value")
        budget = f"/{self.exp.sweep.max_llm_calls}" if self.exp.sweep.max_llm_calls else ""
        eta = self.eta_s(done)
        extra = f" ({a['fail_reason'][:80]})" if a.get("fail_reason") else ""
        extra += f" (duplicate of #{a['duplicate_of']})" if a.get("duplicate_of") is not None else ""
        self.out(
            f"[{self.exp.sweep.name}] trial {done}/{self.exp.sweep.n_trials} #{frozen.number} "
            f"{a.get('operator', '?'):<14} {frozen.state.name:<8} value {_f(value)}  best "
            f"{_f(best.value if best else None)}{f' (#{best.number})' if best else ''}  elapsed "
            f"{_hms(time.perf_counter() - t0)}  ETA {_hms(eta) if eta is not None else 'n/a'}  "
            f"LLM calls {_calls(self.runner) - calls0}{budget}{extra}"
        )

    def _plots(self, study, ref: Mapping[str, float], floor: float, highlight: Sequence[int]) -> dict[str, Path]:
        """History, operator and heatmap PNGs under <sweep_dir>/plots; a plotting error is a warning, not a crash."""
        try:
            from experiments.plots import sweep_plots

            return sweep_plots(
                study.get_trials(deepcopy=False), self.dir / "plots", train_tasks=[t.id for t in self.train],
                holdout_tasks=[t.id for t in self.holdout], holdout=study.user_attrs.get("holdout", {}),
                baseline=(sum(ref.values()) / len(ref)) if ref else None, floor=floor, highlight=highlight,
                title=self.exp.sweep.name)
        except Exception as exc:  # the sweep's results stand without their pictures
            self.out(f"[{self.exp.sweep.name}] warning: plots failed: {type(exc).__name__}: {exc}")
            return {}

    def _conclude(self, study, baseline, contexts, *, stop_reason, new, t0, calls0, prepare_calls, ctx_stats,
                  calls_per_trial) -> SweepSummary:
        exp, sw = self.exp, self.exp.sweep
        trials = study.get_trials(deepcopy=False)
        self.ledger.sync(trials)  # other workers' trials told since this one's last trial (several machines)
        runs = self._baseline_runs(study, baseline, contexts) if _baseline_trial(study) else []
        nf = self.calibration.noise_floor() if self.calibration is not None else noise_floor(runs)
        ref = baseline_reference(runs)
        base_hash = candidate_hash(baseline)
        train_floor = nf.floor(len(ref), len(runs))
        candidates = [t for t in trials if t.state == TrialState.COMPLETE and t.user_attrs.get("operator") != BASELINE
                      and t.user_attrs.get("duplicate_of") is None and t.user_attrs.get("instruction_hash") != base_hash]
        candidates.sort(key=lambda t: (-t.value, t.number))
        best = candidates[0] if candidates else None

        def cmp(t) -> Comparison:
            return compare(t.user_attrs.get("task_scores", {}), ref, floor=train_floor, alpha=sw.alpha)

        rows: list[HoldoutRow] = []
        base_hold = None
        top = candidates[: sw.holdout_top_k]
        if self.holdout and top:
            base_hold, base_err = self._holdout(study, base_hash, baseline, contexts)
            hold_floor = nf.floor(len(self.holdout), 1)
            for t in top:
                h = t.user_attrs["instruction_hash"]
                scores, err = self._holdout(study, h, t.user_attrs["instructions"], contexts) if base_hold else (None, base_err)
                mean = sum(scores.values()) / len(scores) if scores else None
                bmean = sum(base_hold.values()) / len(base_hold) if base_hold else None
                diff = (mean - bmean) if (mean is not None and bmean is not None) else None
                c = cmp(t)
                wins = bool(c.claimed and diff is not None and diff > hold_floor)
                rows.append(HoldoutRow(t.number, h, t.user_attrs.get("operator", "?"), t.value, mean, diff, c, wins, err))
        winners = [r for r in rows if r.wins]
        promoted_row = max(winners, key=lambda r: (r.holdout_mean, -r.trial)) if winners else None
        promoted_trial = next((t for t in candidates if promoted_row and t.number == promoted_row.trial), None)
        best_instr = dict(best.user_attrs["instructions"]) if best else dict(baseline)
        promoted_instr = dict(promoted_trial.user_attrs["instructions"]) if promoted_trial else dict(baseline)
        best_scores: tuple[SplitScores, ...] = ()
        if best is not None:
            held = dict(study.user_attrs.get("holdout", {}))
            h = best.user_attrs.get("instruction_hash", "")
            why = ("no holdout tasks" if not self.holdout else f"holdout_top_k={sw.holdout_top_k}" if not top
                   else next((f"holdout failed: {r.error}" for r in rows if r.trial == best.number and r.error),
                             "not evaluated on the holdout"))
            best_scores = (split_scores("train", best.user_attrs.get("task_scores"), ref),
                           split_scores("holdout", held.get(h), held.get(base_hash), note=why))
        plots = self._plots(study, ref, train_floor, highlight=[t.number for t in (best, promoted_trial) if t])

        paths = {
            "ledger": str(self.ledger.path),
            "contexts": str(self.dir / "context") if sw.reuse_context else "(context reuse off)",
            "summary": str(self.dir / "summary.md"),
            "promoted synth config": str(self.dir / "promoted_synth.yaml"),
            "plots": (f"{self.dir / 'plots'} ({', '.join(p.name for p in plots.values())})" if plots
                      else "(none: plotting failed)"),
            "study storage": f"{mask_url(exp.storage_url)} (study {sw.name})",
        }
        counts = {
            "total": sum(t.state in FINISHED for t in trials),
            "complete": sum(t.state == TrialState.COMPLETE for t in trials),
            "pruned": sum(t.state == TrialState.PRUNED for t in trials),
            "failed": sum(t.state == TrialState.FAIL for t in trials),
            "duplicate": sum(t.user_attrs.get("duplicate_of") is not None for t in trials),
            "gated": sum(bool(t.user_attrs.get("gated_out")) for t in trials),  # PRUNED by the minibatch gate
        }
        bt = _baseline_trial(study)
        evaluated = [t for t in trials if t.state == TrialState.COMPLETE and "selection_bias" in t.user_attrs]
        summary = SweepSummary(
            sweep=sw.name, storage=mask_url(exp.storage_url), stop_reason=stop_reason, trials=counts, new_trials=new,
            baseline_train=(sum(ref.values()) / len(ref)) if ref else (bt.value if bt else None),
            noise=nf, train_floor=train_floor,
            best_trial=best.number if best else None, best_operator=best.user_attrs.get("operator") if best else None,
            best_value=best.value if best else None, best_comparison=cmp(best) if best and ref else None,
            holdout=tuple(rows), baseline_holdout=(sum(base_hold.values()) / len(base_hold)) if base_hold else None,
            promoted_trial=promoted_trial.number if promoted_trial else None,
            promoted_hash=candidate_hash(promoted_instr), promoted=promoted_trial is not None,
            best_instructions=best_instr, baseline_instructions=dict(baseline),
            llm_calls=_calls(self.runner) - calls0, llm_calls_prepare=prepare_calls, calls_per_trial=calls_per_trial,
            contexts=ctx_stats, smoke=self.smoke or any(t.user_attrs.get("smoke") for t in trials), paths=paths,
            mlflow_ui=self.tracker.ui_command(), elapsed_s=time.perf_counter() - t0,
            controls={"reuse_context": sw.reuse_context, "memory_frozen": exp.memory.frozen},
            best_scores=best_scores, mlflow_url=self.tracker.ui_url(), promoted_instructions=promoted_instr,
            selection_bias=(statistics.fmean(t.user_attrs["selection_bias"] for t in evaluated) if evaluated else None),
            rescored=bool(evaluated) and all(t.user_attrs.get("rescored") for t in evaluated),
            noise_source=self.noise_note,
            underpowered=sweep_design_problem(exp),
            label=run_label(self.runner.identity(), self.calibration),
        )
        (self.dir / "promoted_synth.yaml").write_text(_synth_yaml(exp, promoted_instr, summary), encoding="utf-8")
        evidence = (sweep_evidence(study, promoted_trial, promoted_row, ref, self.runner.identity())
                    if promoted_trial is not None and promoted_row is not None else None)
        summary = dataclasses.replace(summary, registry=self.registry.conclude(baseline, promoted_instr, evidence))
        text = format_summary(summary)
        (self.dir / "summary.md").write_text(text + "\n", encoding="utf-8")
        metrics = {"baseline_train": summary.baseline_train, "noise_floor": train_floor, "noise_sigma": nf.sigma,
                   "noise_from_calibration": float(self.calibration is not None),
                   "best_train": summary.best_value, "baseline_holdout": summary.baseline_holdout,
                   "promoted": float(summary.promoted), "llm_calls": summary.llm_calls,
                   "calls_per_trial": calls_per_trial, "selection_bias": summary.selection_bias,
                   **{f"trials_{k}": v for k, v in counts.items()}}
        if summary.best_comparison is not None:
            metrics["best_diff"] = summary.best_comparison.diff
            metrics["best_p_value"] = summary.best_comparison.p_value
        if plots:
            self._safe(lambda: self.tracker.log_files(plots.values(), "plots"))
        self._safe(lambda: self.tracker.finish(
            {k: v for k, v in metrics.items() if v is not None},
            {"summary.md": text + "\n", "promoted_synth.yaml": _synth_yaml(exp, promoted_instr, summary),
             "ledger.jsonl": self.ledger.path.read_text(encoding="utf-8") if self.ledger.path.exists() else ""},
            status="FINISHED"))
        self.out(text)
        return summary


def _synth_yaml(exp: ExperimentConfig, instructions: Mapping[str, str], s: SweepSummary) -> str:
    """The promoted instructions as a conf/synth/<name>.yaml file (copy it there to use it)."""
    from omegaconf import OmegaConf

    node = {
        "variant": f"{s.sweep}-{s.promoted_hash}" if s.promoted else exp.synth.variant,
        "temperature": exp.synth.temperature,
        "max_tokens": exp.synth.max_tokens,
        "count_retry": exp.synth.count_retry,
        "instructions": {**exp.synth.instructions, **dict(instructions)},
    }
    head = (f"# Promoted by sweep {s.sweep}: trial #{s.promoted_trial}\n" if s.promoted
            else f"# Sweep {s.sweep}: no candidate cleared the noise floor and the holdout; the baseline is kept\n")
    return head + OmegaConf.to_yaml(OmegaConf.create(node))


def run_sweep(exp: ExperimentConfig, runner: Any, **kwargs: Any) -> SweepSummary:
    """Run (or resume) a synth_mutation sweep with the runner injected. See Sweep."""
    return Sweep(exp, runner, **kwargs).run()
