"""Calibration: know the noise before spending the night (`python -m experiments.run +sweep=calibrate`).

On `calibrate.tasks` benchmark tasks, through the same Runner protocol as a sweep (HarnessRunner from the CLI,
tests/scripted_harness.ScriptedRunner in tests), with the baseline instructions:

- judge variance: the output of generator run 1 on each task is re-scored `judge_repeats` times by the evaluator
  alone (`runner.rescore`, judge seeds seed + JUDGE_SEED_OFFSET + j); pooled within-task SD, composite and per
  dimension. A greedy judge (evaluator.temperature 0) gives 0 here by construction.
- generator variance: the baseline configuration run `generator_repeats` (r) times with seeds seed, seed+1, ... on
  the same prepared contexts: pooled within-task SD (experiments.sweep.noise_floor, the sweep's own estimator), so
  it includes the judge's share. This sigma is what a later sweep uses as its noise floor.
- A/A: those r runs, split by a seeded coin into two arms under blind labels (identical configuration, different
  seeds), per-task arm means compared two-sided (calibrate.test: paired t or exact Wilcoxon, experiments.stats).
  It must NOT come out significant. The A/A costs no extra runs: its arms are the generator runs.
- positive control: `calibrate.harmful_instruction` in place of every task type's instruction, `replications`
  runs per task on the same contexts, compared one-sided (control worse) with the per-task mean of the generator
  runs. It must lose significantly. A two-sided t p-value is halved in the predicted direction (1 - p/2 against it).
- A check whose test cannot reach alpha with this many tasks (stats.min_attainable_p) is "unreachable"; such a
  design is refused before anything runs unless calibrate.allow_underpowered (experiments.config).

Minimum detectable effect (MDE) and tasks needed are computed by simulation, not by formula: per-task differences
d_i = effect + sd_diff * z_i with z_i standard normal (common random numbers across effects, numpy seed 0,
calibrate.sims samples), tested as the design's decision rule does it. The sweep's rule (experiments.sweep.compare)
is a one-sided Wilcoxon p < alpha AND a mean difference above the noise floor (2 standard errors); the A/B's is a
two-sided test (ab.test) in the right direction. The MDE is the smallest effect detected with probability `power`
(bisection); it scales with sd_diff (both tests are scale-free), so one unit MDE per (n, test, alpha) serves all.
The Wilcoxon p-values come from experiments.stats.wilcoxon_test: with continuous noise (no ties) p depends on W+
alone, so it is asked once per W+ value at the rejection boundary (p is monotone in W+) and the rest follow.
sd_diff for a sweep that reads a calibration is sigma * sqrt(2) (candidate run vs one baseline run: the sweep
skips its repeats); for an A/B with R replications per arm, sigma * sqrt(2 / R). The normal-noise model is an
approximation: scores are bounded and tasks may interact with instructions (a real candidate's effect varies
per task); the MDE is for an effect of the same size on every task.

Everything is computed first and written last: results/calibration/<key>.json (key: hash of the objective
fingerprint of experiments.fingerprint.study_fingerprint without sweep_kind: backend identity, evaluator,
benchmark, harness config), PNG plots beside it, and one MLflow parent run (experiment `sweep.name`, default
"calibrate"), so a refusal or a failed task leaves nothing behind but the harness's own run records.
A sweep whose fingerprint matches reads the JSON (`find_calibration`) when its checks passed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import random
import statistics
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from experiments.benchmark import Task, load_tasks, split
from experiments.config import ExperimentConfig
from experiments.fingerprint import fingerprint_diff, study_fingerprint
from experiments.pool import RunPool, runner_pool

CAL_DIR = "calibration"
VERSION = 1
JUDGE_SEED_OFFSET = 2_000_003  # judge re-score seeds: apart from generation seeds and wiggum's verify (1_000_003)
HANDFUL = 5  # fewer proposals than this and the preflight warns
PASS, FAIL, UNREACHABLE = "pass", "fail", "unreachable"
MAX_TASKS = 500  # tasks-needed search stops here ("more than 500")


class CalibrationFailed(RuntimeError):
    """A task run failed during the calibration; nothing was stored."""


# -- power by simulation ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Design:
    """A paired comparison over n tasks and the rule that calls a difference detected.

    sd_diff: SD of one task's difference from noise alone. floor_se: the mean difference must also exceed this
    many standard errors (sd_diff / sqrt(n)): 2 for the sweep's noise floor, 0 for an A/B.
    sigma_df: when sd_diff is an estimate with this many degrees of freedom (a calibration's), the power is the
    predictive one: averaged over the true sd that estimate allows (sd_diff * sqrt(df / chi2_df) per simulated
    run), with the floor fixed where the estimate puts it. None: sd_diff is taken as known.
    """

    name: str
    n: int
    sd_diff: float
    alpha: float
    alternative: str = "greater"  # greater | two-sided (an effect is positive by convention)
    test: str = "wilcoxon"  # wilcoxon | t
    floor_se: float = 0.0
    sigma_df: int | None = None

    @property
    def floor(self) -> float:
        return self.floor_se * self.sd_diff / math.sqrt(self.n) if self.n else float("inf")

    def describe(self) -> str:
        side = "one-sided" if self.alternative == "greater" else "two-sided"
        floor = f" and mean > floor ({self.floor_se:g} SE)" if self.floor_se else ""
        return f"{self.n} tasks, {side} {self.test}{floor}, sd_diff {self.sd_diff:.3f}"


@functools.lru_cache(maxsize=32)
def _normals(sims: int, n: int, seed: int) -> np.ndarray:
    z = np.random.default_rng([seed, n, sims]).standard_normal((sims, n))
    z.setflags(write=False)
    return z


_WILCOXON_P: dict[tuple[int, float, str], float] = {}


def _wilcoxon_p(row: np.ndarray, w: float, alternative: str) -> float:
    key = (row.size, float(w), alternative)
    if key not in _WILCOXON_P:
        from experiments.stats import wilcoxon_test

        _WILCOXON_P[key] = wilcoxon_test(row, alternative=alternative).pvalue
    return _WILCOXON_P[key]


def _boundary(values: np.ndarray, pred: Callable[[float], bool]) -> float | None:
    """The first value (ascending) where the monotone predicate turns true, or None."""
    lo, hi = 0, len(values)
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(float(values[mid])):
            hi = mid
        else:
            lo = mid + 1
    return float(values[lo]) if lo < len(values) else None


def _wilcoxon_reject(d: np.ndarray, alpha: float, alternative: str) -> np.ndarray:
    """Rows whose stats.wilcoxon_test p < alpha, asking the test only at the rejection boundary of W+."""
    n = d.shape[1]
    ranks = np.abs(d).argsort(axis=1).argsort(axis=1) + 1.0
    w = (ranks * (d > 0)).sum(axis=1)
    uniq, first = np.unique(w, return_index=True)
    rows = {float(u): d[i] for u, i in zip(uniq, first)}

    def p(u: float) -> float:
        return _wilcoxon_p(rows[u], u, alternative)

    reject = np.zeros(len(w), dtype=bool)
    center = n * (n + 1) / 4.0
    if alternative in ("greater", "two-sided"):  # p falls as W+ grows above the center
        upper = uniq[uniq >= center] if alternative == "two-sided" else uniq
        cut = _boundary(upper, lambda u: p(u) < alpha)
        if cut is not None:
            reject |= w >= cut
    if alternative in ("less", "two-sided"):  # p falls as W+ shrinks below the center
        lower = uniq[uniq <= center] if alternative == "two-sided" else uniq
        desc = lower[::-1]
        cut = _boundary(desc, lambda u: p(u) < alpha)
        if cut is not None:
            reject |= w <= cut
    return reject


def detection_rate(design: Design, effect: float, *, sims: int = 4000, seed: int = 0) -> float:
    """P(detected) when every task's true difference is `effect` and the noise is normal with design.sd_diff."""
    from experiments.stats import min_attainable_p

    if design.n < 1 or min_attainable_p(design.n, test=design.test, alternative=design.alternative) >= design.alpha:
        return 0.0
    z = _normals(sims, design.n, seed)
    if design.sigma_df:  # the true sd is uncertain: one draw per simulated run, given the estimate
        chi2 = np.random.default_rng([seed, design.n, sims, design.sigma_df]).chisquare(design.sigma_df, size=sims)
        z = z * np.sqrt(design.sigma_df / chi2)[:, None]
    d = effect + design.sd_diff * z
    if design.test == "t":
        from scipy import stats as sps

        # the test experiments.stats.paired_ttest wraps (scipy's one-sample t on the differences), vectorised
        with np.errstate(all="ignore"):
            p = sps.ttest_1samp(d, 0.0, axis=1, alternative=design.alternative).pvalue
        hit = np.nan_to_num(p, nan=1.0) < design.alpha
    else:
        hit = _wilcoxon_reject(d, design.alpha, design.alternative)
    mean = d.mean(axis=1)
    hit &= mean > (design.floor if design.floor_se else 0.0)
    return float(hit.mean())


@functools.lru_cache(maxsize=256)
def _unit_mde(n: int, alpha: float, alternative: str, test: str, floor_se: float, power: float, sims: int,
              sigma_df: int | None = None) -> float:
    """MDE in units of sd_diff (both tests are scale-free, so MDE = sd_diff * this)."""
    from experiments.stats import min_attainable_p

    if n < 1 or min_attainable_p(n, test=test, alternative=alternative) >= alpha:
        return float("inf")
    unit = Design("unit", n, 1.0, alpha, alternative, test, floor_se, sigma_df)
    lo, hi = 0.0, (4.0 + floor_se) / math.sqrt(n)
    for _ in range(40):
        if detection_rate(unit, hi, sims=sims) >= power:
            break
        lo, hi = hi, hi * 2
    else:
        return float("inf")
    while hi - lo > 1e-3 * hi:
        mid = (lo + hi) / 2
        if detection_rate(unit, mid, sims=sims) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def mde(design: Design, *, power: float = 0.8, sims: int = 4000) -> float:
    """The smallest effect detected with probability `power` (inf when the test cannot reach alpha)."""
    u = _unit_mde(design.n, design.alpha, design.alternative, design.test, design.floor_se, power, sims,
                  design.sigma_df)
    return u * design.sd_diff if math.isfinite(u) else float("inf")


def tasks_for_effect(design: Design, effect: float, *, power: float = 0.8, sims: int = 4000,
                     max_n: int = MAX_TASKS) -> int | None:
    """The fewest tasks with which `effect` is detected with probability `power` (None: more than max_n)."""
    from experiments.stats import tasks_needed

    if design.sd_diff <= 0:
        return tasks_needed(design.alpha, test=design.test, alternative=design.alternative)

    def ok(n: int) -> bool:
        return mde(dataclasses.replace(design, n=n), power=power, sims=sims) <= effect

    lo = max(tasks_needed(design.alpha, test=design.test, alternative=design.alternative), 2)
    if ok(lo):
        return lo
    hi = lo
    while not ok(hi):
        if hi >= max_n:
            return None
        lo, hi = hi, min(hi * 2, max_n)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def sweep_design(sigma: float, n_train: int, *, alpha: float, baseline_runs: int = 1) -> Design:
    """A sweep's decision (experiments.sweep.compare): candidate run vs the mean of `baseline_runs` baseline runs,
    one-sided Wilcoxon p < alpha and mean difference > the noise floor 2 * sigma * sqrt((1 + 1/b) / n)."""
    return Design("sweep", n_train, sigma * math.sqrt(1.0 + 1.0 / max(baseline_runs, 1)), alpha, "greater",
                  "wilcoxon", 2.0)


def ab_design(sigma: float, n: int, *, alpha: float, replications: int, test: str) -> Design:
    """An A/B's primary test: per-task means of `replications` runs per arm, two-sided, in the right direction."""
    return Design("ab", n, sigma * math.sqrt(2.0 / max(replications, 1)), alpha, "two-sided", test, 0.0)


def replications_for_effect(sigma: float, n: int, effect: float, *, alpha: float, test: str, power: float = 0.8,
                            sims: int = 4000, max_reps: int = 1000) -> int | None:
    """The fewest replications per arm for an A/B over n tasks to detect `effect` (None: unreachable)."""
    u = _unit_mde(n, alpha, "two-sided", test, 0.0, power, sims)
    if not math.isfinite(u):
        return None
    reps = max(1, math.ceil(2.0 * (sigma * u / effect) ** 2 - 1e-9))
    return reps if reps <= max_reps else None


# -- the stored calibration ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """The A/A test or the positive control."""

    name: str
    test: str
    alternative: str
    n: int
    mean_diff: float
    p: float
    min_p: float
    status: str  # pass | fail | unreachable
    detail: str = ""

    def line(self, alpha: float) -> str:
        side = "two-sided" if self.alternative == "two-sided" else "one-sided"
        if self.status == UNREACHABLE:
            verdict = f"UNCHECKED: {self.n} tasks cannot reach alpha (smallest p {self.min_p:.3g})"
        elif self.name == "A/A":
            verdict = "not significant: PASS" if self.status == PASS else f"significant (p < {alpha:g}): FAIL"
        else:
            verdict = "detected: PASS" if self.status == PASS else "NOT detected: FAIL"
        return f"{self.name} ({self.detail}; {side} {self.test}): diff {self.mean_diff:+.3f}, p={self.p:.3g}: {verdict}"


@dataclass(frozen=True)
class Cost:
    """What one task run costs (medians over the calibration's runs), and a context preparation and a re-score."""

    llm_calls: float  # per task run, cached included
    uncached_calls: float  # per task run: what sweep.max_llm_calls counts
    tokens: float  # prompt + completion per task run
    wall_s: float  # per task run (Runner.finish)
    prepare_calls: float = 0.0  # uncached calls per context preparation
    prepare_s: float = 0.0
    rescore_s: float = 0.0
    runs: int = 0


@dataclass(frozen=True)
class Calibration:
    fingerprint: dict[str, Any]
    key: str
    created: str
    design: dict[str, Any]
    tasks: tuple[str, ...]
    sigma: float  # generator variance: pooled within-task SD of the composite over `repeats` runs
    repeats: int
    n_tasks: int
    range_of_means: float
    per_task_sd: dict[str, float]
    sigma_ci: tuple[float, float]
    judge_sigma: float
    judge_dimensions: dict[str, float]
    generator_dimensions: dict[str, float]
    aa: Check
    control: Check
    mde: dict[str, dict[str, Any]]
    needed: dict[str, Any]
    cost: Cost
    smoke: bool = False
    runs: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    path: str = ""
    # the positive control on the LLM judge's rubric dimensions alone (None: no rubric ran): a control detected
    # by the deterministic criteria only says nothing about the judge
    judge_control: Check | None = None

    @property
    def judge_discriminates(self) -> bool:
        return self.judge_control is not None and self.judge_control.status == PASS

    @property
    def passed(self) -> bool:
        """No check failed (an unreachable check, allowed by calibrate.allow_underpowered, is not a failure)."""
        return FAIL not in (self.aa.status, self.control.status)

    @property
    def failed_out(self) -> bool:  # the CLI exits 1 on a failed check
        return not self.passed

    @property
    def stop_reason(self) -> str:
        bad = [c.name for c in (self.aa, self.control) if c.status == FAIL]
        return f"calibration checks failed: {', '.join(bad)}; a sweep will not use this calibration" if bad else ""

    def noise_floor(self) -> Any:
        """The sweep's NoiseFloor from the generator variance (repeats = the calibration's runs)."""
        from experiments.sweep import NoiseFloor

        return NoiseFloor(self.sigma, self.repeats, self.n_tasks, self.range_of_means, dict(self.per_task_sd))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["version"] = VERSION
        d["passed"] = self.passed
        d.pop("path")
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "") -> "Calibration":
        d = dict(d)
        if d.pop("version", None) != VERSION:
            raise ValueError(f"calibration format version is not {VERSION}")
        d["aa"], d["control"], d["cost"] = Check(**d["aa"]), Check(**d["control"]), Cost(**d["cost"])
        d["judge_control"] = Check(**d["judge_control"]) if d.get("judge_control") else None
        d["tasks"], d["sigma_ci"] = tuple(d["tasks"]), tuple(d["sigma_ci"])
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names}, path=path)


def run_label(identity: Mapping[str, Mapping[str, Any]], calibration: "Calibration | None" = None) -> str | None:
    """The line every output, record and report of a run on an embedded model carries (None: no embedded role).

    It names the model file actually loaded. Results on an embedded model are a smoke run unless a calibration on
    the same fingerprint showed that the judge discriminates (the positive control detected on the rubric
    dimensions alone); then the line says so and names that calibration."""
    files = sorted({str(i.get("file") or i.get("model")) for i in identity.values() if i.get("backend") == "embedded"})
    if not files:
        return None
    names = ", ".join(files)
    if calibration is not None and calibration.judge_discriminates:
        jc = calibration.judge_control
        return (f"EMBEDDED MODEL ({names}): its judge discriminates per calibration {calibration.key} (positive "
                f"control on the rubric: diff {jc.mean_diff:+.2f}, p={jc.p:.3g}); a small local model, not a "
                f"production judge")
    return f"SMOKE RUN (embedded {names}): not research quality"


def label_for(exp: ExperimentConfig, identity: Mapping[str, Any], tasks: Sequence[Any]) -> str | None:
    """run_label with the stored calibration of this fingerprint, if one passed its checks."""
    if not any(i.get("backend") == "embedded" for i in identity.values()):
        return None
    return run_label(identity, find_calibration(exp, identity, tasks)[0])


def calibration_fingerprint(exp: ExperimentConfig, identity: Mapping[str, Any], tasks: Sequence[Any]) -> dict[str, Any]:
    """experiments.fingerprint.study_fingerprint without sweep_kind: what a calibration and a sweep or A/B share
    (backend identity, evaluator, benchmark tasks, harness config)."""
    fp = study_fingerprint(exp, identity, tasks)
    fp.pop("sweep_kind", None)
    return json.loads(json.dumps(fp, default=str))  # the form it has once stored


def fingerprint_key(fp: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:12]


def calibration_dir(exp: ExperimentConfig) -> Path:
    return Path(exp.results_dir) / CAL_DIR


def load_calibration(path: Path) -> Calibration:
    return Calibration.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))


def find_calibration(exp: ExperimentConfig, identity: Mapping[str, Any],
                     tasks: Sequence[Any]) -> tuple[Calibration | None, str]:
    """(the stored calibration of this fingerprint, or None; one line saying what was found and why).

    A calibration whose A/A or positive control failed is found but not returned (the line says so); with none
    for this fingerprint, the line names the nearest stored one and the fields that differ."""
    fp = calibration_fingerprint(exp, identity, tasks)
    key = fingerprint_key(fp)
    folder = calibration_dir(exp)
    path = folder / f"{key}.json"
    if path.is_file():
        try:
            cal = load_calibration(path)
        except (ValueError, KeyError, TypeError) as exc:
            return None, f"calibration {path} is unreadable ({type(exc).__name__}: {exc}); ignored"
        if fingerprint_diff(cal.fingerprint, fp):
            return None, f"calibration {path} does not match this fingerprint after all; ignored"
        if not cal.passed:
            bad = " and ".join(ch.name for ch in (cal.aa, cal.control) if ch.status == FAIL)
            return None, f"calibration {key} ({path}) is ignored: its {bad} check failed"
        return cal, f"calibration {key} ({path}, {cal.created[:19]})"
    others = []
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            stored = json.loads(p.read_text(encoding="utf-8")).get("fingerprint") or {}
        except (OSError, ValueError):
            continue
        others.append((len(fingerprint_diff(stored, fp)), p, fingerprint_diff(stored, fp)))
    if not others:
        return None, "no stored calibration (run +sweep=calibrate first to know the noise before the sweep)"
    n, p, diff = min(others, key=lambda o: o[0])
    return None, (f"none of the {len(others)} stored calibration(s) matches this fingerprint; the nearest ({p.name}) "
                  f"differs in {n} field(s): {'; '.join(diff[:3])}{'; ...' if n > 3 else ''}")


# -- running it ------------------------------------------------------------------------------------------------


def pick_tasks(tasks: Sequence[Task], n: int) -> tuple[Task, ...]:
    """n tasks (0: all): train split first, then holdout; within each, round-robin over task types in benchmark
    order, so every task type is represented when n allows (the instructions differ per type)."""
    if n <= 0 or n >= len(tasks):
        return tuple(tasks)
    chosen: list[Task] = []
    for part in (split(tasks, "train"), split(tasks, "holdout")):
        queues: dict[str, list[Task]] = {}
        for t in part:
            queues.setdefault(t.task_type, []).append(t)
        while any(queues.values()) and len(chosen) < n:
            for q in queues.values():
                if q and len(chosen) < n:
                    chosen.append(q.pop(0))
    order = {t.id: i for i, t in enumerate(tasks)}
    return tuple(sorted(chosen, key=lambda t: order[t.id]))


class _Timed:
    """Runner proxy: times each finish / rescore and prints one progress line per task run."""

    def __init__(self, runner: Any, progress: Callable[[str, Any, float, str], None]) -> None:
        self._runner, self._progress = runner, progress
        self.finish_s: list[float] = []
        self.rescore_s: list[float] = []
        self._lock = threading.Lock()  # runs finish on several workers at once (experiments.pool)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def finish(self, prepared: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        result = self._runner.finish(prepared, **kwargs)
        with self._lock:
            self.finish_s.append(time.perf_counter() - t0)
            self._progress("finish", result, self.finish_s[-1], str(kwargs.get("run_id") or ""))
        return result

    def rescore(self, prepared: Any, text: str, *, task_id: str = "", **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        result = self._runner.rescore(prepared, text, **kwargs)
        with self._lock:
            self.rescore_s.append(time.perf_counter() - t0)
            self._progress("rescore", result, self.rescore_s[-1], task_id)
        return result


def _hms(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _pooled(runs: Sequence[Mapping[str, float]]) -> float:
    from experiments.sweep import noise_floor

    return noise_floor(runs).sigma


def _dimension_sds(runs: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, float]:
    """Pooled within-task SD per dimension; runs[j][task] is that run's dimensions for the task."""
    dims = sorted({k for r in runs for dims in r.values() for k in dims})
    out = {}
    for dim in dims:
        per = [{t: float(v[dim]) for t, v in r.items() if dim in v} for r in runs]
        out[dim] = round(_pooled(per), 4)
    return out


def _p_one_sided_t(diffs: Sequence[float], alternative: str) -> float:
    """One-sided p of stats.paired_ttest (two-sided): p/2 in the predicted direction, 1 - p/2 against it."""
    from experiments.stats import paired_ttest

    t = paired_ttest(diffs)
    if math.isnan(t.statistic):
        return 1.0
    toward = t.statistic < 0 if alternative == "less" else t.statistic > 0
    return t.pvalue / 2 if toward else 1 - t.pvalue / 2


def _check(name: str, diffs: Sequence[float], *, test: str, alternative: str, alpha: float, detail: str) -> Check:
    from experiments.stats import min_attainable_p, paired_ttest, wilcoxon_test

    n = len(diffs)
    min_p = min_attainable_p(n, test=test, alternative=alternative)
    if test == "wilcoxon":
        p = wilcoxon_test(diffs, alternative=alternative).pvalue
    elif alternative == "two-sided":
        p = paired_ttest(diffs).pvalue
    else:
        p = _p_one_sided_t(diffs, alternative)
    mean = float(np.mean(diffs)) if n else float("nan")
    if min_p >= alpha:
        status = UNREACHABLE
    elif alternative == "two-sided":
        status = FAIL if p < alpha else PASS
    else:
        status = PASS if (p < alpha and mean < 0) else FAIL
    return Check(name, test, alternative, n, mean, float(p), float(min_p), status, detail)


def _blind_labels(seed: int, r: int) -> tuple[tuple[str, str], list[int], list[int]]:
    """Two labels that say nothing about the runs, and which generator runs each arm got (a seeded coin)."""
    rng = random.Random(f"calibrate-aa-{seed}")
    labels = tuple(f"arm-{rng.getrandbits(16):04x}" for _ in range(2))
    order = list(range(r))
    rng.shuffle(order)
    return (labels[0], labels[1]), sorted(order[0::2]), sorted(order[1::2])


def _identity_text(identity: Mapping[str, Any]) -> str:
    def one(role: str) -> str:
        i = identity.get(role) or {}
        return f"{i.get('backend', '?')}/{i.get('model', '?')}"

    roles = [r for r in ("producer", "evaluator") if r in identity]
    return ", ".join(f"{r} {one(r)}" for r in roles) or "?"


def run_calibration(exp: ExperimentConfig, runner: Any, *, out: Callable[[str], None] = print,
                    pool: RunPool | None = None) -> Calibration:
    """Run the calibration (see the module docstring); returns the stored Calibration (failed_out when a check
    failed). Raises CalibrationFailed (nothing stored) when a task run fails. Preparations, task runs and
    re-scores run backend.concurrency at once (`pool` overrides it); the statistics do not depend on it."""
    from experiments.objective import TrialFailed, baseline_instructions, evaluate_candidate
    from experiments.benchmark import task_types
    from experiments.sweep import noise_floor

    c = exp.calibrate
    name = exp.sweep.name
    if not callable(getattr(runner, "rescore", None)):
        raise TypeError(f"calibrate: the runner {type(runner).__name__} has no rescore(prepared, text, *, criteria, "
                        f"seed): the judge variance needs it; nothing was run")
    t_start = time.perf_counter()
    all_tasks = load_tasks(exp.benchmark)
    tasks = pick_tasks(all_tasks, c.tasks)
    n, r, k = len(tasks), c.generator_repeats, c.judge_repeats
    identity = runner.identity()
    if pool is None:
        pool = runner_pool(exp.backend, identity)
    fp = calibration_fingerprint(exp, identity, all_tasks)
    key = fingerprint_key(fp)
    smoke = bool(getattr(runner, "smoke", False))
    instructions = baseline_instructions(exp, task_types(all_tasks))
    harmful = {tt: c.harmful_instruction.strip() for tt in instructions}
    total_finish, total_rescore = n * (r + c.replications), n * k
    state = {"phase": "", "done": 0, "total": 0, "announced": False}

    def progress(kind: str, outcome: Any, seconds: float, task_id: str) -> None:
        state["done"] += 1
        f_left = total_finish - len(timed.finish_s)
        s_left = total_rescore - len(timed.rescore_s)
        mean_f = statistics.fmean(timed.finish_s) if timed.finish_s else 0.0
        mean_s = statistics.fmean(timed.rescore_s) if timed.rescore_s else mean_f / 10
        eta = (f_left * mean_f + s_left * mean_s) / pool.workers
        score = f"score {outcome.score:.3f}" if getattr(outcome, "ok", False) else "FAILED"
        out(f"[{name}] {state['phase']} {state['done']}/{state['total']} {task_id} {score} ({seconds:.1f}s)  elapsed "
            f"{_hms(time.perf_counter() - t_start)}  ETA {_hms(eta)}")
        if kind == "finish" and not state["announced"]:
            state["announced"] = True
            out(f"[{name}] projected: {f_left} more task run(s) x {mean_f:.1f}s + {s_left} re-score(s) ~ {_hms(eta)} "
                f"(from the first measured task)")

    timed = _Timed(runner, progress)
    out(f"[{name}] calibration of fingerprint {key} ({_identity_text(identity)}; benchmark {exp.benchmark.name}): "
        f"{n} task(s) ({', '.join(t.id for t in tasks)}): {n} context preparation(s), {n * r} generator task runs "
        f"({r} seeds; also the A/A arms), {n * c.replications} positive-control task runs, {n * k} judge re-scores; "
        f"wall time projected after the first task")

    calls0 = int(runner.llm_calls())
    t0 = time.perf_counter()
    contexts = {}
    out(f"[{name}] concurrency {pool.workers}: {pool.why or 'given'}")
    with pool.ordered(lambda t: runner.prepare(t.task), tasks) as prepared:
        for i, (task, fut) in enumerate(prepared, 1):
            contexts[task.id] = fut.result()
            out(f"[{name}] context {i}/{n} {task.id}: prepared")
    prepare_s = (time.perf_counter() - t0) / max(n, 1)
    prepare_calls = (int(runner.llm_calls()) - calls0) / max(n, 1)

    def evaluate(label: str, instr: Mapping[str, str], seed: int, prefix: str) -> Any:
        state.update(phase=label, done=0, total=n)
        try:
            return evaluate_candidate(instr, tasks, timed, contexts=contexts, seed=seed, run_prefix=prefix, pool=pool)
        except TrialFailed as exc:
            raise CalibrationFailed(f"calibration stopped in {label} (seed {seed}): {exc}; nothing stored") from exc

    gens = [evaluate(f"generator run {j + 1}/{r} (seed {exp.seed + j})", instructions, exp.seed + j,
                     f"{name}-gen{j}") for j in range(r)]
    controls = [evaluate(f"positive control {j + 1}/{c.replications} (seed {exp.seed + j})", harmful, exp.seed + j,
                         f"{name}-control{j}") for j in range(c.replications)]
    judged: dict[str, list[Any]] = {}
    state.update(phase="judge re-scores", done=0, total=n * k)
    by_id = {t.id: t for t in tasks}
    jobs = [(s, j) for s in gens[0].scores for j in range(k)]

    def rescore(job: tuple[Any, int]) -> Any:
        s, j = job
        task = by_id[s.task_id]
        return timed.rescore(contexts[task.id], s.output_text, criteria=task.criteria(),
                             seed=exp.seed + JUDGE_SEED_OFFSET + j, task_id=task.id)

    with pool.ordered(rescore, jobs) as rescored:
        for (s, _), fut in rescored:
            o = fut.result()
            if not o.ok:
                raise CalibrationFailed(f"calibration stopped in judge re-scores: task {s.task_id!r}: {o.error}; "
                                        f"nothing stored")
            judged.setdefault(s.task_id, []).append(o)

    # -- statistics -------------------------------------------------------------------------------------------
    gen_runs = [ev.by_task() for ev in gens]
    nf = noise_floor(gen_runs)
    df = nf.n_tasks * (r - 1)
    from scipy import stats as sps

    ci = ((nf.sigma * math.sqrt(df / sps.chi2.ppf(0.975, df)), nf.sigma * math.sqrt(df / sps.chi2.ppf(0.025, df)))
          if df > 0 else (float("nan"), float("nan")))
    gen_dims = _dimension_sds([{s.task_id: s.dimensions for s in ev.scores} for ev in gens])
    judge_runs = [{t: outs[j].score for t, outs in judged.items()} for j in range(k)]
    judge_sigma = _pooled(judge_runs)
    judge_dims = _dimension_sds([{t: outs[j].dimensions for t, outs in judged.items()} for j in range(k)])

    (label_x, label_y), arm_x, arm_y = _blind_labels(exp.seed, r)
    ids = [t.id for t in tasks]
    mean_of = lambda runs, t: statistics.fmean(run[t] for run in runs)  # noqa: E731
    aa_diffs = [mean_of([gen_runs[j] for j in arm_y], t) - mean_of([gen_runs[j] for j in arm_x], t) for t in ids]
    aa = _check("A/A", aa_diffs, test=c.test, alternative="two-sided", alpha=c.alpha,
                detail=f"blind arms {label_x} vs {label_y}, {len(arm_x)}+{len(arm_y)} run(s) per task")
    control_runs = [ev.by_task() for ev in controls]
    ctl_diffs = [mean_of(control_runs, t) - mean_of(gen_runs, t) for t in ids]
    short = c.harmful_instruction.strip()
    control = _check("positive control", ctl_diffs, test=c.test, alternative="less", alpha=c.alpha,
                     detail=f"{short[:40] + '...' if len(short) > 40 else short!r} vs baseline")

    judge_control = None
    rubric = tuple(exp.evaluator.dimensions) if exp.evaluator.composite != "deterministic" else ()
    if rubric:
        def rubric_means(evs: Sequence[Any]) -> list[dict[str, float]]:
            out = []
            for ev in evs:
                row = {}
                for sc in ev.scores:
                    vals = [sc.dimensions[d] for d in rubric if d in sc.dimensions]
                    if vals:
                        row[sc.task_id] = statistics.fmean(vals)
                out.append(row)
            return out

        g_rub, c_rub = rubric_means(gens), rubric_means(controls)
        both = [t for t in ids if all(t in r for r in g_rub + c_rub)]
        if both:
            judge_control = _check("judge on the positive control", [mean_of(c_rub, t) - mean_of(g_rub, t) for t in both],
                                   test=c.test, alternative="less", alpha=c.alpha,
                                   detail="mean of the rubric dimensions only, control vs baseline")
    n_train = len(split(all_tasks, "train"))
    ab_tasks = len(all_tasks) if exp.ab.split == "all" else len(split(all_tasks, exp.ab.split))
    # sigma is an estimate with df degrees of freedom: the reported MDE is the predictive one (power averaged over
    # the sigma the estimate allows); with a known sigma, 4 df gave 0.69 detection at the reported MDE, not 0.8
    sd = dataclasses.replace(sweep_design(nf.sigma, n_train, alpha=c.alpha), sigma_df=df or None)
    ad = dataclasses.replace(ab_design(nf.sigma, ab_tasks, alpha=c.alpha, replications=exp.ab.replications,
                                       test=exp.ab.test), sigma_df=df or None)
    mdes = {d.name: {"mde": mde(d, power=c.power, sims=c.sims), "n": d.n, "sd_diff": d.sd_diff, "test": d.test,
                     "alternative": d.alternative, "floor": d.floor if d.floor_se else 0.0, "describe": d.describe()}
            for d in (sd, ad) if d.n > 0}
    needed = {
        "target_effect": c.target_effect,
        "sweep_train_tasks": tasks_for_effect(sd, c.target_effect, power=c.power, sims=c.sims) if n_train else None,
        "ab_tasks": tasks_for_effect(ad, c.target_effect, power=c.power, sims=c.sims),
        "ab_replications": replications_for_effect(nf.sigma, ab_tasks, c.target_effect, alpha=c.alpha,
                                                   test=exp.ab.test, power=c.power, sims=c.sims) if ab_tasks else None,
        "ab_replications_now": exp.ab.replications,
    }
    scores = [s for ev in gens + controls for s in ev.scores]
    cost = Cost(
        llm_calls=float(statistics.median(s.llm_calls for s in scores)),
        uncached_calls=float(statistics.median(s.llm_calls - s.cached_calls for s in scores)),
        tokens=float(statistics.median(s.prompt_tokens + s.completion_tokens for s in scores)),
        wall_s=float(statistics.median(timed.finish_s)), prepare_calls=prepare_calls, prepare_s=prepare_s,
        rescore_s=float(statistics.median(timed.rescore_s)) if timed.rescore_s else 0.0, runs=len(scores))
    folder = calibration_dir(exp)
    path = folder / f"{key}.json"
    cal = Calibration(
        fingerprint=fp, key=key, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        design={"tasks": n, "generator_repeats": r, "judge_repeats": k, "replications": c.replications,
                "alpha": c.alpha, "power": c.power, "test": c.test, "target_effect": c.target_effect,
                "harmful_instruction": c.harmful_instruction, "sims": c.sims, "seed": exp.seed,
                "benchmark": exp.benchmark.name, "aa_labels": [label_x, label_y], "aa_runs": [arm_x, arm_y]},
        tasks=tuple(ids), sigma=nf.sigma, repeats=nf.repeats, n_tasks=nf.n_tasks, range_of_means=nf.range_of_means,
        per_task_sd=dict(nf.per_task_sd), sigma_ci=ci, judge_sigma=judge_sigma, judge_dimensions=judge_dims,
        generator_dimensions=gen_dims, aa=aa, control=control, mde=mdes, needed=needed, cost=cost, smoke=smoke,
        runs={"generator": gen_runs, "control": control_runs,
              "judge": {t: [o.score for o in outs] for t, outs in judged.items()},
              "aa_diffs": aa_diffs, "control_diffs": ctl_diffs},
        elapsed_s=time.perf_counter() - t_start, path=str(path), judge_control=judge_control)

    # -- written last: JSON, plots, MLflow ----------------------------------------------------------------------
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(cal.to_dict(), indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)
    plots = _safe_plots(cal, folder / key / "plots", out, name)
    label = run_label(runner.identity(), cal) or ""
    ui = ""
    if exp.mlflow.enabled:
        try:
            ui = _log_mlflow(exp, cal, format_calibration(cal, smoke_line=label), plots)
        except Exception as exc:  # the calibration stands without its MLflow record
            out(f"[{name}] warning: MLflow logging failed: {type(exc).__name__}: {exc}")
    out(format_calibration(cal, smoke_line=label, plots=plots, mlflow_ui=ui))
    return cal


# -- output ----------------------------------------------------------------------------------------------------

BEGIN, END = "===== CALIBRATION =====", "===== END CALIBRATION ====="


def _num(x: Any, fmt: str = ".3f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, fmt)


def format_calibration(cal: Calibration, *, smoke_line: str = "", plots: Mapping[str, Path] | None = None,
                       mlflow_ui: str = "") -> str:
    """The short greppable block."""
    d = cal.design
    lines = [BEGIN]
    if smoke_line:
        lines.append(smoke_line)
    dims = lambda m: "; ".join(f"{k} {v:.3f}" for k, v in sorted(m.items()))  # noqa: E731
    share = (cal.judge_sigma ** 2 / cal.sigma ** 2) if cal.sigma > 0 else float("nan")
    lines += [
        f"fingerprint {cal.key}: models {_identity_text(cal.fingerprint.get('backend', {}))}; evaluator composite "
        f"{cal.fingerprint.get('evaluator', {}).get('composite', '?')}; benchmark {d['benchmark']} "
        f"({len(cal.fingerprint.get('benchmark', {}).get('ids', []))} tasks)",
        f"design: {d['tasks']} task(s) ({', '.join(cal.tasks)}), generator runs r={d['generator_repeats']}, judge "
        f"re-scores k={d['judge_repeats']}, control replications {d['replications']}, test {d['test']}, alpha "
        f"{d['alpha']:g}, power {d['power']:g}",
        f"judge variance (each output re-scored {d['judge_repeats']}x): composite sd {cal.judge_sigma:.3f}"
        + (f"; {dims(cal.judge_dimensions)}" if cal.judge_dimensions else ""),
        f"generator variance ({cal.repeats} seeds): composite sd {cal.sigma:.3f} [95% CI {_num(cal.sigma_ci[0])}-"
        f"{_num(cal.sigma_ci[1])}, {cal.n_tasks * (cal.repeats - 1)} df]; judge share of the variance "
        f"{_num(100 * share, '.0f')}%" + (f"; {dims(cal.generator_dimensions)}" if cal.generator_dimensions else ""),
        cal.aa.line(d["alpha"]),
        cal.control.line(d["alpha"]),
        cal.judge_control.line(d["alpha"]) if cal.judge_control is not None
        else "judge on the positive control: no rubric ran (evaluator.composite=deterministic)",
    ]
    sw, ab = cal.mde.get("sweep"), cal.mde.get("ab")
    floor = f"; a sweep on {sw['n']} train tasks (one baseline run) has floor {sw['floor']:.3f}" if sw else ""
    lines.append(f"noise floor: sigma {cal.sigma:.3f} per task run{floor}")
    parts = []
    lo, hi = (cal.sigma_ci[0] / cal.sigma, cal.sigma_ci[1] / cal.sigma) if cal.sigma > 0 else (float("nan"),) * 2
    if sw:  # the MDE scales with sigma: its range over sigma's CI shows what one calibration's estimate is worth
        parts.append(f"sweep {_num(sw['mde'])} [{_num(sw['mde'] * lo)}-{_num(sw['mde'] * hi)} over sigma's CI] "
                     f"({sw['n']} train tasks, one-sided wilcoxon and > floor)")
    if ab:
        parts.append(f"A/B {_num(ab['mde'])} ({ab['n']} tasks x {cal.needed.get('ab_replications_now')} "
                     f"replications, two-sided {ab['test']})")
    lines.append(f"minimum detectable effect (alpha {d['alpha']:g}, power {d['power']:g}; simulated): "
                 + ("; ".join(parts) or "n/a"))
    nd = cal.needed

    def count(v: Any, what: str) -> str:
        return f"{v} {what}" if v is not None else f"more than {MAX_TASKS} {what}"

    need = []
    if sw:
        need.append(f"sweep needs {count(nd.get('sweep_train_tasks'), 'train tasks')} (has {sw['n']})")
    if ab:
        reps = nd.get("ab_replications")
        need.append(f"A/B needs {count(nd.get('ab_tasks'), 'tasks')} at {nd.get('ab_replications_now')} replications,"
                    f" or {reps if reps is not None else 'no number of'} replications on {ab['n']} tasks")
    lines.append(f"target effect {nd['target_effect']:g}: " + "; ".join(need))
    co = cal.cost
    lines.append(f"cost per task run (median of {co.runs}): {co.llm_calls:g} LLM calls ({co.uncached_calls:g} "
                 f"uncached), {co.tokens:.0f} tokens, {co.wall_s:.1f}s; context preparation {co.prepare_calls:.1f} "
                 f"calls, {co.prepare_s:.1f}s; re-score {co.rescore_s:.1f}s")
    use = ("a sweep or A/B on this fingerprint uses this noise floor" if cal.passed
           else f"{cal.stop_reason}; it measures its own noise floor")
    lines.append(f"stored: {cal.path} ({use})")
    if plots:
        lines.append(f"plots: {', '.join(str(p) for p in plots.values())}")
    if mlflow_ui:
        lines.append(f"MLflow UI: {mlflow_ui}")
    lines.append(f"elapsed: {_hms(cal.elapsed_s)}")
    lines.append(END)
    return "\n".join(lines)


def _safe_plots(cal: Calibration, folder: Path, out: Callable[[str], None], name: str) -> dict[str, Path]:
    try:
        return calibration_plots(cal, folder)
    except Exception as exc:  # the calibration stands without its pictures
        out(f"[{name}] warning: plots failed: {type(exc).__name__}: {exc}")
        return {}


def calibration_plots(cal: Calibration, folder: Path) -> dict[str, Path]:
    """scores.png (per task: generator runs, control runs, judge re-scores), differences.png (A/A and control
    per-task differences), power.png (detection rate against effect for the sweep and A/B designs)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    folder.mkdir(parents=True, exist_ok=True)
    ids = list(cal.tasks)
    x = np.arange(len(ids))
    paths: dict[str, Path] = {}

    fig = Figure(figsize=(max(6, 0.9 * len(ids) + 3), 4))
    ax = fig.add_subplot(111)
    for j, run in enumerate(cal.runs["generator"]):
        ax.scatter(x - 0.15, [run[t] for t in ids], color="#2b7bba", label="generator runs" if j == 0 else None)
    for j, run in enumerate(cal.runs["control"]):
        ax.scatter(x + 0.15, [run[t] for t in ids], color="#d1495b", marker="x",
                   label="positive control" if j == 0 else None)
    for i, t in enumerate(ids):
        vals = cal.runs["judge"].get(t, [])
        ax.scatter([i] * len(vals), vals, color="#808080", s=12, label="judge re-scores" if i == 0 else None)
    ax.set_xticks(x, ids, rotation=30, ha="right")
    ax.set_ylabel("composite")
    ax.set_title(f"calibration {cal.key}: scores per task")
    ax.legend(fontsize=8)
    fig.tight_layout()
    FigureCanvasAgg(fig).print_png(str(folder / "scores.png"))
    paths["scores"] = folder / "scores.png"

    fig = Figure(figsize=(8, 3.5))
    for i, (key, title) in enumerate((("aa_diffs", f"A/A (p={cal.aa.p:.3g}, {cal.aa.status})"),
                                      ("control_diffs", f"positive control (p={cal.control.p:.3g}, "
                                                        f"{cal.control.status})"))):
        ax = fig.add_subplot(1, 2, i + 1)
        ax.bar(x, cal.runs[key], color="#9ecae1" if i == 0 else "#d1495b")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(x, ids, rotation=30, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("per-task difference")
    fig.tight_layout()
    FigureCanvasAgg(fig).print_png(str(folder / "differences.png"))
    paths["differences"] = folder / "differences.png"

    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot(111)
    power = cal.design["power"]
    for name, m in cal.mde.items():
        design = Design(name, m["n"], m["sd_diff"], cal.design["alpha"], m["alternative"], m["test"],
                        2.0 if m.get("floor") else 0.0)
        top = (m["mde"] if math.isfinite(m["mde"]) else 3 * m["sd_diff"]) * 2
        effects = np.linspace(0, max(top, cal.design["target_effect"] * 1.2), 25)
        ax.plot(effects, [detection_rate(design, e, sims=1000) for e in effects], label=f"{name} (n={m['n']})")
        if math.isfinite(m["mde"]):
            ax.axvline(m["mde"], ls=":", color="gray")
    ax.axhline(power, ls="--", color="black", lw=0.8)
    ax.axvline(cal.design["target_effect"], ls="--", color="#d1495b", lw=0.8, label="target effect")
    ax.set_xlabel("true effect (composite points)")
    ax.set_ylabel("detection rate")
    ax.set_title("power of the sweep and A/B designs")
    ax.legend(fontsize=8)
    fig.tight_layout()
    FigureCanvasAgg(fig).print_png(str(folder / "power.png"))
    paths["power"] = folder / "power.png"
    return paths


def _log_mlflow(exp: ExperimentConfig, cal: Calibration, text: str, plots: Mapping[str, Path]) -> str:
    """One parent run (no children) in experiment mlflow.experiment or sweep.name; returns the UI command."""
    from mlflow.entities import Metric, Param
    from mlflow.tracking import MlflowClient

    from experiments.tracking import enable_wal, sqlite_db, store_lock, tracking_uri, trial_params, ui_command

    uri = tracking_uri(exp)
    db = sqlite_db(uri)
    name = exp.mlflow.experiment or exp.sweep.name
    with store_lock(db):
        if db is not None:
            enable_wal(db)
        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(name)
        exp_id = found.experiment_id if found is not None else client.create_experiment(
            name, artifact_location=(Path(exp.results_dir) / "mlartifacts").resolve().as_uri())
    tags = {"kind": "calibration", "fingerprint": cal.key, "benchmark": exp.benchmark.name,
            "passed": str(cal.passed).lower(), "mlflow.runName": f"calibration-{cal.key}"}
    if cal.smoke:
        tags["smoke"] = "true"
    rid = client.create_run(exp_id, tags=tags).info.run_id
    params = {**trial_params(exp), **{f"calibrate.{k}": v for k, v in dataclasses.asdict(exp.calibrate).items()}}
    client.log_batch(rid, params=[Param(k, str(v)[:6000]) for k, v in params.items()])
    metrics: dict[str, Any] = {
        "sigma": cal.sigma, "judge_sigma": cal.judge_sigma, "aa_diff": cal.aa.mean_diff, "aa_p": cal.aa.p,
        "control_diff": cal.control.mean_diff, "control_p": cal.control.p, "passed": float(cal.passed),
        "cost_llm_calls": cal.cost.llm_calls, "cost_uncached_calls": cal.cost.uncached_calls,
        "cost_tokens": cal.cost.tokens, "cost_wall_s": cal.cost.wall_s, "elapsed_s": cal.elapsed_s,
        **{f"mde_{k}": v["mde"] for k, v in cal.mde.items()},
        **{f"judge_sd.{k}": v for k, v in cal.judge_dimensions.items()},
        **{f"generator_sd.{k}": v for k, v in cal.generator_dimensions.items()},
        **{f"needed_{k}": v for k, v in cal.needed.items() if isinstance(v, (int, float))},
    }
    now = int(time.time() * 1000)
    items = [Metric(k, float(v), now, 0) for k, v in metrics.items()
             if isinstance(v, (int, float)) and math.isfinite(float(v))]
    client.log_batch(rid, metrics=items)
    client.log_text(rid, text + "\n", "summary.md")
    client.log_text(rid, json.dumps(cal.to_dict(), indent=2, sort_keys=True, default=str), "calibration.json")
    for p in plots.values():
        client.log_artifact(rid, str(p), "plots")
    client.set_terminated(rid, status="FINISHED" if cal.passed else "FAILED")
    return ui_command(uri)


# -- preflight: what a budget will cost and detect, before a trial runs -----------------------------------------


@dataclass(frozen=True)
class Projection:
    trials_left: int
    baseline_pending: bool
    proposals: int  # search trials the budget allows (n_trials, then timeout / LLM-call caps when the cost is known)
    limited_by: str
    task_runs: int
    llm_calls: float | None  # uncached (what sweep.max_llm_calls counts), mutation calls included
    tokens: float | None
    wall_s: float | None
    source: str  # where the cost per task run comes from
    at_once: int = 1  # task runs side by side (concurrency, at most the train tasks)


def project_sweep(exp: ExperimentConfig, *, finished: int, baseline_done: bool, repeats_left: int,
                  holdout_left: int, cost: Cost | None, source: str, used_calls: int = 0, elapsed_s: float = 0.0,
                  mutation_calls: int = 0, concurrency: int = 1) -> Projection:
    """Task runs, LLM calls, tokens and wall time the rest of a sweep's budget will take (an upper bound: a pruned
    trial stops early and a duplicate costs nothing), and how many proposals it allows. With `concurrency` N the
    tasks of a trial run N at once: wall time is divided by min(N, train tasks), which assumes the backend serves
    N requests at once as fast as one (a measured cost per task run taken at concurrency N already includes the
    slow-down of sharing it)."""
    sw = exp.sweep
    n_train = len(exp.tasks("train"))
    left = max(sw.n_trials - finished, 0)
    pending = (not baseline_done) and left > 0
    proposals, limited = max(left - int(pending), 0), f"n_trials={sw.n_trials}"
    fixed_runs = (int(pending) + repeats_left) * n_train
    at_once = max(min(int(concurrency), n_train), 1)
    if cost is not None:
        per_trial_calls = n_train * cost.uncached_calls + mutation_calls
        per_trial_s = n_train * cost.wall_s / at_once
        if sw.max_llm_calls is not None and per_trial_calls > 0:
            room = sw.max_llm_calls - used_calls - fixed_runs * cost.uncached_calls
            cap = max(math.ceil(room / per_trial_calls), 0)
            if cap < proposals:
                proposals, limited = cap, f"max_llm_calls={sw.max_llm_calls}"
        if sw.timeout_s is not None and per_trial_s > 0:
            room = sw.timeout_s - elapsed_s - fixed_runs * cost.wall_s / at_once
            cap = max(math.ceil(room / per_trial_s), 0)
            if cap < proposals:
                proposals, limited = cap, f"timeout_s={sw.timeout_s:g}"
    runs = fixed_runs + proposals * n_train + holdout_left
    if cost is None:
        return Projection(left, pending, proposals, limited, runs, None, None, None, source)
    return Projection(left, pending, proposals, limited, runs, runs * cost.uncached_calls + proposals * mutation_calls,
                      runs * cost.tokens, runs * cost.wall_s / at_once, source, at_once)


def preflight_lines(exp: ExperimentConfig, proj: Projection, *, sigma: float | None, baseline_runs: int,
                    noise_source: str) -> list[str]:
    """The preflight block: budget, projected cost, detectable effect, and a warning on a tiny budget."""
    sw = exp.sweep
    n_train = len(exp.tasks("train"))
    lines = [f"preflight: budget n_trials={sw.n_trials} ({proj.trials_left} left: "
             f"{'baseline + ' if proj.baseline_pending else ''}{proj.proposals} proposal(s)), timeout_s="
             f"{sw.timeout_s if sw.timeout_s is not None else 'none'}, max_llm_calls="
             f"{sw.max_llm_calls if sw.max_llm_calls is not None else 'none'}"]
    if proj.llm_calls is None:
        lines.append(f"preflight: {proj.task_runs} task runs projected; LLM calls, tokens and wall time follow from "
                     f"the first measured task ({proj.source})")
    else:
        side = f", {proj.at_once} at once" if proj.at_once > 1 else ""
        lines.append(f"preflight: {proj.task_runs} task runs: ~{proj.llm_calls:.0f} uncached LLM calls, "
                     f"~{proj.tokens:.0f} tokens, wall ~{_hms(proj.wall_s or 0.0)} (cost per task run from "
                     f"{proj.source}{side}; an upper bound: a pruned trial stops early)")
    if sigma is not None and n_train:
        d = sweep_design(sigma, n_train, alpha=sw.alpha, baseline_runs=baseline_runs)
        m = mde(d, power=exp.calibrate.power, sims=exp.calibrate.sims)
        lines.append(f"preflight: detectable effect {_num(m)} composite points at power {exp.calibrate.power:g} "
                     f"({n_train} train tasks, one-sided wilcoxon p < {sw.alpha:g} and diff > floor {d.floor:.3f}; "
                     f"noise sigma {sigma:.3f} from {noise_source})")
    else:
        lines.append("preflight: detectable effect not known yet (no calibration for this fingerprint): it follows "
                     "from the baseline repeats; run +sweep=calibrate first to know it before a sweep")
    if proj.proposals < HANDFUL:
        lines.append(f"preflight: WARNING: the budget allows only {proj.proposals} proposal(s) (limited by "
                     f"{proj.limited_by}), fewer than a handful ({HANDFUL}): the search can barely move; raise "
                     f"sweep.n_trials" + (" or the cap that limits it" if not proj.limited_by.startswith("n_trials")
                                          else ""))
    return lines


def ab_preflight_lines(exp: ExperimentConfig, identity: Mapping[str, Any], tasks: Sequence[Any], *, n_tasks: int,
                       replications: int | None = None, cells_prepare: bool = True) -> list[str]:
    """For the A/B runner (experiments/ab_entry.py, before its first cell): the same preflight for an A/B.

    `identity` is the runner's (or arm A's) backend identity and `tasks` the benchmark's tasks, as for a sweep;
    n_tasks: tasks in the test. Projects 2 arms x n_tasks x replications task runs (each with a context
    preparation when cells_prepare), and the detectable effect of the pre-registered test from the stored
    calibration, with a warning when it exceeds ab.min_effect."""
    ab = exp.ab
    reps = replications or ab.replications
    cal, note = find_calibration(exp, identity, tasks)
    runs = 2 * n_tasks * reps
    lines = [f"preflight: A/B {n_tasks} tasks x 2 arms x {reps} replication(s) = {runs} task runs"]
    if cal is None:
        lines.append(f"preflight: cost and detectable effect unknown ({note})")
        return lines
    co = cal.cost
    per_run_s = co.wall_s + (co.prepare_s if cells_prepare else 0.0)
    per_run_calls = co.uncached_calls + (co.prepare_calls if cells_prepare else 0.0)
    lines.append(f"preflight: ~{runs * per_run_calls:.0f} uncached LLM calls, ~{runs * co.tokens:.0f} tokens, wall "
                 f"~{_hms(runs * per_run_s)} (from calibration {cal.key})")
    m = mde(ab_design(cal.sigma, n_tasks, alpha=ab.alpha, replications=reps, test=ab.test),
            power=exp.calibrate.power, sims=exp.calibrate.sims)
    lines.append(f"preflight: detectable effect {_num(m)} at power {exp.calibrate.power:g} (two-sided {ab.test}, "
                 f"alpha {ab.alpha:g}; sigma {cal.sigma:.3f} from calibration {cal.key})")
    if not m <= ab.min_effect:
        lines.append(f"preflight: WARNING: the pre-registered minimum effect {ab.min_effect:g} is below what this "
                     f"design detects at power {exp.calibrate.power:g}; add tasks or replications")
    return lines
