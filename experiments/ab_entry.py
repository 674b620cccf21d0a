"""`python -m experiments.run +sweep=prior_knowledge_ab`: a paired A/B test of two config variants on the harness.

Config -> design: the benchmark tasks (ab.split), ab.replications, the arms ab.a / ab.b (dotted keys or group
options applied with apply_overrides and type-checked against the schema), seed = cfg.seed. The pre-registration
(ab.hypothesis, metric, min_effect, alpha, direction, test, sequential looks) is written beside the ledger before
any cell runs. Each cell is one FULL harness run (prepare: memory, plan, research; finish: synthesis, wiggum,
panel, evaluation) of the arm's config with the pair's seed: planning differs between arms, so no plan or research
is shared; memory is frozen; the research cache is off unless an arm sets research.* itself. The judge sees only
the task and the output (run ids and output names carry a blind label, never the arm name).

Before anything is written, check_ab_design refuses (one-line ConfigError) a pre-registered metric this evaluator
does not produce (ab.metric) and a design whose primary test cannot reach ab.alpha with the tasks it has (unless
ab.allow_underpowered). One metric, the pre-registered one, runs through the statistics, looks, plots and verdict.
The pre-registration also records each arm's backend identity (backend kind, model, file sha256 or Ollama digest
per role); a resume on other backends or models is refused.

Everything lives under <results_dir>/ab/<sweep.name>/: ledger.jsonl (one line per finished cell), its
ledger.prereg.json, ab_report.md with two PNGs, summary.md and outputs/. A rerun skips every finished cell and the
LLM response cache answers any call a killed cell had already made. MLflow: one parent run per test (found again by
tag on resume) with the pre-registration, summary metrics, report and PNGs; one child run per finished cell.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from experiments.ab import (
    SECONDARY,
    ABDesign,
    ABResult,
    RunArm,
    _load_cells,
    arm_order,
    blind_label,
    metric_kind,
    pair_seed,
    prereg_path,
    run_ab,
    write_or_check_prereg,
)
from experiments.benchmark import Task, load_tasks
from experiments.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    to_experiment,
    to_harness_config,
    validate,
)
from experiments.stats import PairedStats, Preregistration, min_attainable_p, tasks_needed
from experiments.tracking import NullTracker, make_tracker

SUMMARY_BEGIN = "===== A/B SUMMARY ====="
SUMMARY_END = "===== END A/B SUMMARY ====="
CELL_KIND = "ab_cell"
VERDICT_CODE = {"supported": 1.0, "inconclusive": 0.0, "not supported": -1.0}
_ENV_KEYS = {  # config keys the environment overrides after every override (harness.config.apply_env)
    "planner.skip_prior_knowledge": "HARNESS_SKIP_PRIOR_KNOWLEDGE",
    "research.reuse_cache": "RESEARCH_CACHE",
    "backend.kind": "HARNESS_BACKEND",
    "results_dir": "HARNESS_RESULTS_DIR",
}


# -- config -> design ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ABPaths:
    dir: Path

    @property
    def ledger(self) -> Path:
        return self.dir / "ledger.jsonl"

    @property
    def prereg(self) -> Path:
        return prereg_path(self.ledger)

    @property
    def outputs(self) -> Path:
        return self.dir / "outputs"

    @property
    def summary(self) -> Path:
        return self.dir / "summary.md"


def ab_paths(exp: ExperimentConfig) -> ABPaths:
    return ABPaths(Path(exp.results_dir) / "ab" / exp.sweep.name)


def select_tasks(exp: ExperimentConfig) -> tuple[Task, ...]:
    tasks = load_tasks(exp.benchmark)
    chosen = tasks if exp.ab.split == "all" else tuple(t for t in tasks if t.split == exp.ab.split)
    if not chosen:
        raise ConfigError(f"ab.split={exp.ab.split!r} selects no task of benchmark {exp.benchmark.name!r}; "
                          "expected at least one")
    return chosen


def preregistration(exp: ExperimentConfig, n_tasks: int) -> Preregistration:
    ab = exp.ab
    return Preregistration(
        hypothesis=" ".join(ab.hypothesis.split()), metric=ab.metric, min_effect=float(ab.min_effect),
        alpha=float(ab.alpha), direction=ab.direction, n_tasks=n_tasks, replications=int(ab.replications),
        sequential=int(ab.looks) if ab.sequential else 0, test=ab.test,
    )


def deterministic_criteria() -> tuple[str, ...]:
    """The deterministic evaluator's criteria (the cells carry them as det_<name>)."""
    from evaluators.deterministic import deterministic_scores

    return tuple(deterministic_scores("", task=""))


def ab_metrics(exp: ExperimentConfig) -> tuple[str, ...]:
    """The names ab.metric may pre-register with this evaluator: composite, the rubric dimensions (none when
    evaluator.composite is deterministic: no rubric runs), det_<criterion> and the A/B's secondary metrics."""
    rubric = () if exp.evaluator.composite == "deterministic" else tuple(exp.evaluator.dimensions)
    return ("composite", *rubric, *(f"det_{c}" for c in deterministic_criteria()), *SECONDARY)


REFERENCE_BENCHMARK = "benchmark=asyncio_practices has 12"  # the default benchmark (conf/benchmark)


def reachability_problem(n: int, *, test: str, sequential: bool, alpha: float, where: str = "",
                         also: Sequence[str] = ()) -> str | None:
    """Why the A/B's primary test cannot reach alpha with n task pairs, or None when it can.

    The primary test is two-sided whatever the direction (experiments.stats); replications are averaged per task,
    so n counts tasks. A sequential design decides on t-based CIs, which need n >= 2 at the last look.
    """
    used = "t" if sequential else test
    p = min_attainable_p(n, test=used, alternative="two-sided")
    if p < alpha:
        return None
    what = ("t-based sequential look" if sequential else
            "exact two-sided Wilcoxon p" if used == "wilcoxon" else "two-sided paired t p")
    need = tasks_needed(alpha, test=used, alternative="two-sided")
    fixes = [f"use a benchmark with >= {need} tasks ({REFERENCE_BENCHMARK})"]
    if used == "wilcoxon":
        fixes.append("ab.test=t")
    fixes += list(also)
    fix = fixes[0] if len(fixes) == 1 else f"{', '.join(fixes[:-1])}, or {fixes[-1]}"
    pairs = f"{n} task pair{'s' if n != 1 else ''}{f' ({where})' if where else ''}"
    if sequential:
        return (f"with {pairs} the {what} cannot test at all (it needs >= 2 pairs): 'supported' is unreachable; "
                f"{fix}")
    return (f"with {pairs} the smallest {what} is {p:.4g} >= alpha {alpha:g}: 'supported' is unreachable; "
            f"{fix}")


def check_ab_design(exp: ExperimentConfig) -> None:
    """Refuse an A/B that cannot answer its question, before anything is written (one-line ConfigError).

    ab.metric must be a metric this evaluator produces (ab_metrics); the primary test must be able to reach
    ab.alpha with the tasks ab.split selects (reachability_problem), unless ab.allow_underpowered, in which case
    run_ab_from_config prints the same finding as a note.
    """
    ab = exp.ab
    allowed = ab_metrics(exp)
    if ab.metric not in allowed:
        why = (" (evaluator.composite=deterministic: no rubric runs, so no rubric dimension is scored)"
               if ab.metric in exp.evaluator.dimensions else "")
        raise ConfigError(f"ab.metric={ab.metric!r} is not allowed{why}; expected one of: {', '.join(allowed)}")
    n = len(select_tasks(exp))
    problem = reachability_problem(n, test=ab.test, sequential=ab.sequential, alpha=float(ab.alpha),
                                   where=f"benchmark {exp.benchmark.name!r}, ab.split={ab.split}",
                                   also=("ab.allow_underpowered=true",))
    if problem and not ab.allow_underpowered:
        raise ConfigError(f"ab: {problem}")


def design_from_config(exp: ExperimentConfig) -> tuple[ABDesign, Preregistration]:
    """The paired design (tasks, arms, replications, seed) and the pre-registration of an ab config."""
    tasks = select_tasks(exp)
    arms = {exp.ab.a_name: dict(exp.ab.a), exp.ab.b_name: dict(exp.ab.b)}
    design = ABDesign(tasks=tasks, arms=arms, replications=int(exp.ab.replications), seed=int(exp.seed))
    return design, preregistration(exp, len(tasks))


def _touches(overrides: Mapping[str, Any], section: str) -> bool:
    return any(k == section or k.startswith(section + ".") for k in overrides)


def _check_applied(arm: ExperimentConfig, name: str, overrides: Mapping[str, Any]) -> None:
    """Every scalar dotted override must show in the arm's config; the environment can silently undo one."""
    import os

    node = OmegaConf.structured(arm)
    for key, want in overrides.items():
        if "." not in key or isinstance(want, (Mapping, list)):
            continue
        got = OmegaConf.select(node, key)
        if got != want and not (isinstance(got, float) and isinstance(want, int) and got == float(want)):
            env = _ENV_KEYS.get(key)
            why = f" because the environment sets {env}={os.environ.get(env)!r}; unset it" if env and env in os.environ else ""
            raise ConfigError(f"arm {name}: {key}={want!r} did not take effect (the config has {got!r}){why}")


def arm_configs(exp: ExperimentConfig) -> dict[str, ExperimentConfig]:
    """Each arm's full experiment config: the base with the arm's overrides, then the A/B controls.

    Controls: memory frozen (sweep.freeze_memory), research cache off unless the arm sets research.* itself,
    outputs under results/ab/<name>/outputs. Raises ConfigError for a bad key or value (naming the arm), an
    override the environment undid, or two arms that resolve to the same harness config.
    """
    out: dict[str, ExperimentConfig] = {}
    outputs = str(ab_paths(exp).outputs)
    for name, key in ((exp.ab.a_name, "ab.a"), (exp.ab.b_name, "ab.b")):
        overrides = dict(getattr(exp.ab, key[-1]))
        try:
            arm = validate(apply_overrides(exp, overrides))
        except ConfigError as exc:
            raise ConfigError(f"{key} (arm {name}): {exc}") from exc
        _check_applied(arm, name, overrides)
        if exp.sweep.freeze_memory:
            arm.memory = dataclasses.replace(arm.memory, frozen=True)
        if not _touches(overrides, "research"):
            arm.research = dataclasses.replace(arm.research, reuse_cache=False)
        if not _touches(overrides, "output_dir"):
            arm.output_dir = outputs
        out[name] = arm
    (na, ea), (nb, eb) = out.items()
    ha, hb = (dataclasses.asdict(to_harness_config(e, environ={})) for e in (ea, eb))
    if ha == hb:
        raise ConfigError(f"ab.a={dict(exp.ab.a)!r} and ab.b={dict(exp.ab.b)!r} give the same harness config; "
                          "expected two arms that differ")
    return out


# -- one cell on the real harness ------------------------------------------------------------------------------


def _key(obj: Any) -> str:
    return json.dumps(dataclasses.asdict(obj), sort_keys=True, default=str)


class HarnessCells:
    """run_arm for the A/B: one fresh, full harness run (prepare + finish under one trace) per cell.

    Backends (roles) are built once per distinct backend config and shared by both arms (the embedded model is
    loaded once), as are memory and search when the arms configure them alike. `roles` injects one set of role
    LLMs for every arm (tests: harness.inference.fake_roles).
    """

    def __init__(self, arms: Mapping[str, ExperimentConfig], *, roles: Any = None) -> None:
        self.cfgs = {name: to_harness_config(e, environ={}) for name, e in arms.items()}
        self._roles_given = roles
        self._roles: dict[str, Any] = {}
        self._memory: dict[str, Any] = {}
        self._search: dict[str, Any] = {}
        self._lock = threading.RLock()  # cells run on several workers at once: one model load, one store each

    def roles_for(self, arm: str) -> Any:
        if self._roles_given is not None:
            return self._roles_given
        cfg = self.cfgs[arm]
        k = _key(cfg.backend) + cfg.results_dir
        with self._lock:
            if k not in self._roles:
                from harness.inference import make_roles

                self._roles[k] = make_roles(cfg.backend, cfg.results_dir)
            return self._roles[k]

    @property
    def smoke(self) -> bool:
        return any(bool(getattr(self.roles_for(a), "smoke", False)) for a in self.cfgs)

    def harness(self, arm: str, seed: int) -> Any:
        from harness.agent import Harness

        cfg = dataclasses.replace(self.cfgs[arm], seed=int(seed))
        mk, sk = _key(cfg.memory) + cfg.results_dir, _key(cfg.search) + cfg.results_dir
        with self._lock:
            h = Harness(cfg, self.roles_for(arm), memory=self._memory.get(mk), search=self._search.get(sk))
            self._memory.setdefault(mk, h.memory)
            self._search.setdefault(sk, h.search)
        return h

    def __call__(self, arm: str, overrides: Mapping[str, Any], task: Any, replication: int, seed: int) -> dict[str, Any]:
        from experiments.outcome import outcome_from_result
        from harness.logger import Tracer, use_tracer

        label = blind_label(arm, seed)  # what the run id, trace and output file show instead of the arm
        run_id = f"ab-{task.id}-r{replication}-{label}"
        h = self.harness(arm, seed)
        tracer = Tracer(run_id)
        t0 = time.perf_counter()
        meta: dict[str, Any] = {"run_id": run_id, "blind_label": label, "smoke": bool(h.roles.smoke)}
        with use_tracer(tracer):
            try:
                prepared = h.prepare(task.task)
            except Exception as exc:  # recorded in runs.jsonl like Harness.run does, then a failed cell
                h.record_failure(task.task, run_id, tracer, exc)
                return {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "meta": meta}
        result = h.finish(prepared, run_id=run_id, criteria=task.criteria(), tracer=tracer,
                          output_name=f"{task.id}-r{replication}-{label}.md")
        wall = time.perf_counter() - t0
        record = result.record or {}
        meta.update(output_path=result.output_path, trace=result.trace_path,
                    prior_knowledge_ran=bool(prepared.plan.prior_knowledge_ran), plan_parser=prepared.plan.parser,
                    llm_calls=sum(int(u.get("calls", 0)) for u in (record.get("llm") or {}).values()),
                    cached_calls=sum(int(u.get("cached", 0)) for u in (record.get("llm") or {}).values()))
        outcome = outcome_from_result(result)  # the typed seam: score, dimensions (rubric and det_*), usage
        if not outcome.ok:
            return {"status": "failed", "error": f"task {task.id!r} failed: {outcome.error or outcome.status}",
                    "meta": meta}
        meta.update(selection_score=outcome.selection_score, rescored=outcome.rescored)
        return {
            "status": "ok",
            "error": None,
            "score": float(outcome.score),
            "dimensions": dict(outcome.dimensions),
            "secondary": {
                "search_calls": int((record.get("research") or {}).get("search_calls") or 0),
                "tokens": outcome.usage.prompt_tokens + outcome.usage.completion_tokens,
                "wall_s": round(wall, 3),
                "gaps": len(prepared.plan.gaps),
            },
            "meta": meta,
        }


# -- MLflow ------------------------------------------------------------------------------------------------------


def _record_id(rec: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(rec, sort_keys=True, default=str).encode()).hexdigest()[:16]


class ABTracking:
    """The A/B's MLflow runs through experiments.tracking's tracker: parent per test, child per ledger cell line."""

    def __init__(self, tracker: NullTracker, out: Callable[[str], None]) -> None:
        self.tracker, self.out = tracker, out
        self.client = getattr(tracker, "client", None)
        self.logged: set[str] = set()

    @property
    def on(self) -> bool:
        return self.client is not None

    def safe(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # tracking must not stop the test; the next start syncs the missing cells
            self.out(f"warning: MLflow logging failed: {type(exc).__name__}: {exc}")
            return None

    def start(self, exp: ExperimentConfig, design: ABDesign, prereg: Preregistration, smoke: bool) -> None:
        self.tracker.start(exp, smoke=smoke)
        if not self.on:
            return
        pid = self.tracker.parent_id
        from mlflow.entities import Param

        params = {
            "ab.a_name": exp.ab.a_name, "ab.b_name": exp.ab.b_name,
            "ab.a": json.dumps(design.arms[exp.ab.a_name], sort_keys=True),
            "ab.b": json.dumps(design.arms[exp.ab.b_name], sort_keys=True),
            "ab.replications": design.replications, "ab.alpha": prereg.alpha, "ab.min_effect": prereg.min_effect,
            "ab.metric": prereg.metric, "ab.direction": prereg.direction, "ab.test": prereg.test,
            "ab.sequential_looks": prereg.sequential, "ab.split": exp.ab.split, "ab.n_tasks": len(design.tasks),
            "ab.design_seed": design.seed,
        }
        have = self.client.get_run(pid).data.params
        new = [Param(k, str(v)[:6000]) for k, v in params.items() if k not in have]
        if new:
            self.client.log_batch(pid, params=new)
        self.client.set_tag(pid, "ab_hypothesis", prereg.hypothesis[:4000])
        self.client.log_text(pid, json.dumps(prereg.to_dict(), indent=2), "preregistration.json")
        self.logged = {r.data.tags.get("cell_record", "") for r in self.children()}

    def children(self) -> list[Any]:
        if not self.on or self.tracker.parent_id is None:
            return []
        return self.client.search_runs(
            [self.tracker.experiment_id],
            filter_string=f"tags.mlflow.parentRunId = '{self.tracker.parent_id}' and tags.kind = '{CELL_KIND}'",
            max_results=10000,
        )

    def sync(self, ledger: Path) -> int:
        """A child run for every cell line of the ledger that has none yet (idempotent)."""
        if not self.on:
            return 0
        from harness.logger import read_jsonl

        n = 0
        for rec in read_jsonl(ledger):
            if rec.get("kind") != "cell":
                continue
            rid = _record_id(rec)
            if rid not in self.logged:
                self._child(rec, rid)
                self.logged.add(rid)
                n += 1
        return n

    def _child(self, rec: Mapping[str, Any], rid: str) -> None:
        from mlflow.entities import Metric, Param

        ok = rec.get("status") == "ok"
        meta = rec.get("meta") or {}
        tags = {"mlflow.parentRunId": self.tracker.parent_id, "kind": CELL_KIND, "cell_record": rid,
                "sweep": self.tracker.exp.sweep.name, "arm": rec["arm"], "task": rec["task"],
                "replication": str(rec["replication"]), "status": rec.get("status", "?"),
                "mlflow.runName": f"{rec['task']}-r{rec['replication']}-{rec['arm']}"}
        if meta.get("smoke") or getattr(self.tracker, "smoke", False):
            tags["smoke"] = "true"
        if rec.get("error"):
            tags["error"] = str(rec["error"])[:4000]
        run = self.client.create_run(self.tracker.experiment_id, tags=tags)
        cid = run.info.run_id
        params = {"arm": rec["arm"], "task": rec["task"], "replication": rec["replication"],
                  "seed": rec.get("pair_seed"), "position": rec.get("position"), "order": ",".join(rec.get("order", [])),
                  "blind_label": meta.get("blind_label", ""), "harness_run_id": meta.get("run_id", "")}
        now = int(time.time() * 1000)
        metrics: dict[str, float] = {"elapsed_s": float(rec.get("elapsed_s", 0.0))}
        if ok:
            metrics["score"] = float(rec["score"])
            metrics.update({f"dim.{k}": float(v) for k, v in (rec.get("dimensions") or {}).items()})
            metrics.update({str(k): float(v) for k, v in (rec.get("secondary") or {}).items()})
        for k in ("llm_calls", "cached_calls"):
            if isinstance(meta.get(k), (int, float)):
                metrics[k] = float(meta[k])
        self.client.log_batch(cid, metrics=[Metric(k, v, now, 0) for k, v in metrics.items() if math.isfinite(v)],
                              params=[Param(k, str(v)) for k, v in params.items()])
        self.client.set_terminated(cid, status="FINISHED" if ok else "FAILED")

    def finish(self, result: ABResult, summary: str, files: Sequence[Path], ledger: Path) -> None:
        metrics = summary_metrics(result)
        texts = {"summary.md": summary + "\n"}
        if ledger.exists():
            texts["ledger.jsonl"] = ledger.read_text(encoding="utf-8")
        if self.on:
            pid = self.tracker.parent_id
            self.client.set_tag(pid, "verdict", result.verdict)
            self.client.set_tag(pid, "primary_metric", result.primary.metric)
            for f in files:
                if f.exists():
                    self.client.log_artifact(pid, str(f), "report")
        self.tracker.finish(metrics, texts, status="FINISHED")

    def killed(self) -> None:
        if self.on and self.tracker.parent_id:
            self.client.set_terminated(self.tracker.parent_id, status="KILLED")


def _stats_metrics(prefix: str, s: PairedStats) -> dict[str, float]:
    out = {f"{prefix}mean_a": s.mean_a, f"{prefix}mean_b": s.mean_b, f"{prefix}mean_diff": s.mean_diff,
           f"{prefix}ci_low": s.ci.low, f"{prefix}ci_high": s.ci.high, f"{prefix}p_wilcoxon": s.wilcoxon.pvalue,
           f"{prefix}p_t": s.ttest.pvalue, f"{prefix}dz": s.dz, f"{prefix}rank_biserial": s.rank_biserial,
           f"{prefix}n": s.n}
    if s.p_holm is not None:
        out[f"{prefix}p_holm"] = s.p_holm
    return out


def summary_metrics(result: ABResult) -> dict[str, float]:
    """The parent run's metrics: the pre-registered metric's statistics as primary.<metric>.<statistic>, the
    per-dimension and secondary diffs and Holm p (dim.<name>.*, sec.<name>.*), the verdict."""
    prefix = f"primary.{result.primary.metric}."
    m = _stats_metrics(prefix, result.primary)
    if result.primary.noise is not None:
        m[f"{prefix}noise_floor"] = result.primary.noise.floor
    for fam, stats in (("dim", result.dimensions), ("sec", result.secondary)):
        for name, s in stats.items():
            m[f"{fam}.{name}.mean_diff"] = s.mean_diff
            if s.p_holm is not None:
                m[f"{fam}.{name}.p_holm"] = s.p_holm
    m.update(verdict_code=VERDICT_CODE.get(result.verdict, float("nan")), cells_run=result.cells_run,
             cells_skipped=result.cells_skipped, excluded_pairs=len(result.excluded_pairs))
    return {k: float(v) for k, v in m.items() if isinstance(v, (int, float)) and math.isfinite(float(v))}


# -- output for people ------------------------------------------------------------------------------------------


def _hms(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _f(x: Any, signed: bool = False) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(v):
        return "n/a"
    return f"{v:+.3f}" if signed else f"{v:.3f}"


def _p(p: Any) -> str:
    try:
        v = float(p)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if not math.isfinite(v) else ("<0.0001" if v < 1e-4 else f"{v:.4f}")


def power_note(prereg: Preregistration, n_tasks: int) -> str | None:
    """A warning when the pre-registered test cannot reach alpha with this many task pairs (see check_ab_design)."""
    return reachability_problem(n_tasks, test=prereg.test, sequential=prereg.sequential > 1, alpha=prereg.alpha)


def format_summary(*, name: str, result: ABResult, prereg: Preregistration, design: ABDesign, smoke: bool,
                   paths: ABPaths, report: Path, ui: str, elapsed_s: float, children: int | None,
                   ui_url: str = "", label: str | None = None) -> str:
    from experiments.sweep import SMOKE_LINE

    s = result.primary
    a, b = result.arm_names
    total = len(design.tasks) * design.replications * 2
    failed = sum(1 for e in result.excluded_pairs if "not run" not in e["reason"])
    lines = [SUMMARY_BEGIN]
    if label or smoke:
        lines.append(label or SMOKE_LINE)
    lines += [
        f"test: {name}",
        f"arms: A={a} {json.dumps(design.arms[a], sort_keys=True)}  B={b} {json.dumps(design.arms[b], sort_keys=True)}",
        f"hypothesis: {prereg.hypothesis}",
        f"pre-registered: metric={prereg.metric} alpha={prereg.alpha:g} min_effect={prereg.min_effect:g} "
        f"direction={prereg.direction} test={prereg.test} sequential_looks={prereg.sequential}",
        f"cells: {total} in design; run in this invocation: {result.cells_run}; skipped (already in ledger): "
        f"{result.cells_skipped}",
        f"primary metric: {s.metric} ({metric_kind(s.metric)}, pre-registered): the statistics, looks and "
        f"verdict below are on {s.metric}",
        f"pairs: {s.n} tasks with complete pairs; excluded pairs: {len(result.excluded_pairs)} ({failed} with a failed cell)",
        f"{s.metric}: mean {a}: {_f(s.mean_a)}  mean {b}: {_f(s.mean_b)}  diff (B-A): {_f(s.mean_diff, True)}  "
        f"{100 * s.ci.level:.0f}% CI [{_f(s.ci.low, True)}, {_f(s.ci.high, True)}]",
        f"{s.metric}: Wilcoxon p={_p(s.wilcoxon.pvalue)} ({s.wilcoxon.method})  t p={_p(s.ttest.pvalue)}  "
        f"dz={_f(s.dz)}  r_rb={_f(s.rank_biserial)}",
    ]
    for d in result.looks:
        lines.append(f"{s.metric}: look {d.look}/{d.n_looks} n={d.n} mean diff {_f(d.mean, True)}: {d.action} "
                     f"({d.reason})")
    if s.noise is not None:
        lines.append(f"{s.metric}: noise floor (replications): {_f(s.noise.floor)}" if math.isfinite(s.noise.floor)
                     else f"{s.metric}: noise floor (replications): n/a (needs ab.replications >= 2)")
    for metric, st in result.secondary.items():
        lines.append(f"secondary {metric}: {_f(st.mean_a)} -> {_f(st.mean_b)} (diff {_f(st.mean_diff, True)}, "
                     f"Holm p={_p(st.p_holm)})")
    note = power_note(prereg, s.n)
    if note:
        lines.append(f"note: {note}")
    lines += [
        f"VERDICT: {result.verdict} -- {result.verdict_reason}",
        f"report: {report}",
        f"plots: {report.parent / 'ab_paired_diff.png'} {report.parent / 'ab_forest.png'}",
        f"ledger: {paths.ledger}",
        f"pre-registration: {paths.prereg}",
        f"MLflow child runs (cells): {children if children is not None else 'n/a'}",
        f"elapsed: {_hms(elapsed_s)}",
        f"MLflow UI: {ui}" + (f"  then open {ui_url}" if ui_url else ""),
        SUMMARY_END,
    ]
    return "\n".join(lines)


def cell_plan(design: ABDesign) -> list[tuple[str, str, int]]:
    """(task_id, arm, replication) in the order run_ab visits the cells."""
    out = []
    for tid in design.task_ids:
        for rep in range(design.replications):
            for arm in arm_order(design.arm_names, pair_seed(design.seed, tid, rep), design.randomise_order):
                out.append((tid, arm, rep))
    return out


# -- the entry point -------------------------------------------------------------------------------------------


def arm_backends(design: ABDesign, cells: HarnessCells | None, run_arm: RunArm | None,
                 roles: Any) -> dict[str, Any] | None:
    """{arm: {role: backend identity}} to register, or None when nothing will run on the harness (no check)."""
    from experiments.fingerprint import backend_identity

    if run_arm is not None:
        return {arm: backend_identity(roles) for arm in design.arm_names} if roles is not None else {}
    if cells is None:
        return None
    return {arm: backend_identity(cells.roles_for(arm)) for arm in design.arm_names}


@dataclass(frozen=True)
class ABRun:
    result: ABResult
    design: ABDesign
    prereg: Preregistration
    paths: ABPaths
    report: Path
    summary: str
    smoke: bool
    mlflow_children: int | None


def run_ab_from_config(
    cfg: DictConfig | ExperimentConfig,
    *,
    run_arm: RunArm | None = None,
    roles: Any = None,
    tracker: NullTracker | None = None,
    out: Callable[[str], None] = print,
    pool: Any = None,
) -> ABRun:
    """Run (or resume) the A/B test a composed config describes; see the module docstring.

    Cells run backend.concurrency at once (experiments.pool; `pool` overrides it), against arm A's backend.

    run_arm replaces the real harness (tests); roles runs the real harness on injected backends. The backend
    identity registered with the pre-registration comes from the harness's roles, from `roles` when run_arm is
    injected with them, else is {} (a scripted run has no backend).
    """
    from experiments.report import DIFF_PNG, FOREST_PNG, write_report
    from experiments.calibrate import ab_preflight_lines, label_for
    from experiments.sweep import SMOKE_LINE

    t0 = time.perf_counter()
    exp = validate(to_experiment(cfg))
    if exp.sweep.kind != "ab":
        raise ConfigError(f"sweep.kind={exp.sweep.kind!r} is not allowed here; expected 'ab' (+sweep=prior_knowledge_ab)")
    check_ab_design(exp)  # metric name and reachability, before anything is written
    name = exp.sweep.name
    design, prereg = design_from_config(exp)
    arms = arm_configs(exp)  # bad keys and same-config arms fail here, before anything is written
    paths = ab_paths(exp)
    paths.dir.mkdir(parents=True, exist_ok=True)
    plan = cell_plan(design)
    done = {k for k, c in _load_cells(paths.ledger).items() if c.get("status") == "ok"}
    pending = sum(1 for k in plan if k not in done)

    cells = HarnessCells(arms, roles=roles) if run_arm is None else None
    if cells is not None and pending:
        smoke = cells.smoke  # builds the backends (loads the embedded model once)
    else:
        recs = _load_cells(paths.ledger).values()
        smoke = any((r.get("meta") or {}).get("smoke") for r in recs) or any(
            e.backend.kind == "embedded" for e in arms.values())
    backend = arm_backends(design, cells if cells is not None and pending else None, run_arm, roles)
    new_test = f"start a new test under a new sweep.name (e.g. sweep.name={name}_2)"
    write_or_check_prereg(prereg, design, paths.ledger, backend=backend, new_test=new_test)  # refuse before MLflow
    # the embedded model file and whether a calibration showed its judge discriminates (arm A's models)
    label = (label_for(exp, next(iter(backend.values())), load_tasks(exp.benchmark)) if backend else None) or (
        SMOKE_LINE if smoke else None)
    runner: RunArm = run_arm if run_arm is not None else cells  # type: ignore[assignment]
    if pool is None:
        from experiments.pool import runner_pool

        pool = runner_pool(exp.backend, next(iter(backend.values())) if backend else {})

    mlflow = ABTracking(tracker if tracker is not None else make_tracker(exp), out)
    mlflow.safe(lambda: mlflow.start(exp, design, prereg, smoke))
    a, b = design.arm_names
    head = [f"[{name}] A/B {b} vs {a}: {len(design.tasks)} tasks x {design.replications} replications x 2 arms = "
            f"{len(plan)} cells; {len(plan) - pending} already in the ledger, {pending} to run"]
    if label:
        head.append(f"[{name}] {label}")
    if pending:
        head.append(f"[{name}] concurrency {pool.workers}: {pool.why or 'given'}")
    head.append(f"[{name}] pre-registration: {paths.prereg} (hypothesis: {prereg.hypothesis})")
    note = power_note(prereg, len(design.tasks))
    if note:
        head.append(f"[{name}] note: {note}")
    if backend and pending:  # before any cell: cost and detectable effect from a stored calibration, if one matches
        head += [f"[{name}] {line}" for line in ab_preflight_lines(
            exp, next(iter(backend.values())), load_tasks(exp.benchmark), n_tasks=len(design.tasks),
            replications=design.replications)]
    for line in head:
        out(line)
    mlflow.safe(lambda: mlflow.sync(paths.ledger))  # cells a killed run finished but did not log

    run_start = time.perf_counter()

    def progress(info: Mapping[str, Any]) -> None:
        mlflow.safe(lambda: mlflow.sync(paths.ledger))
        ran = info["cell"] - info["skipped"]
        elapsed = time.perf_counter() - run_start
        left = sum(1 for k in plan[info["cell"]:] if k not in done)
        eta = elapsed / ran * left if ran else 0.0
        if info["status"] == "ok":
            what = f"score {_f(info.get('score'))}"
        else:
            what = f"FAILED {str(info.get('error') or '')[:120]}"
        out(f"[{name}] cell {info['cell']}/{info['cells']} task {info['task']}/{info['tasks']} {info['task_id']} "
            f"rep {info['replication']} arm {info['arm']}: {what} | elapsed {_hms(elapsed)} ETA {_hms(eta)}")

    try:
        result = run_ab(design, prereg, runner, ledger_path=paths.ledger, on_progress=progress, backend=backend,
                        new_test=new_test, pool=pool)
    except KeyboardInterrupt:
        mlflow.safe(mlflow.killed)
        out(f"[{name}] interrupted: finished cells are in {paths.ledger}; run the same command again to resume")
        raise
    mlflow.safe(lambda: mlflow.sync(paths.ledger))

    notes = [label] if label else []
    report = write_report(result, prereg, paths.dir, notes=notes, arms=design.arms)
    children = mlflow.safe(lambda: len(mlflow.children())) if mlflow.on else None
    summary = format_summary(name=name, result=result, prereg=prereg, design=design, smoke=smoke, label=label,
                             paths=paths,
                             report=report, ui=mlflow.tracker.ui_command(), elapsed_s=time.perf_counter() - t0,
                             children=children, ui_url=mlflow.safe(getattr(mlflow.tracker, "ui_url", lambda: "")) or "")
    paths.summary.write_text(summary + "\n", encoding="utf-8")
    mlflow.safe(lambda: mlflow.finish(result, summary, [report, paths.dir / DIFF_PNG, paths.dir / FOREST_PNG,
                                                        paths.prereg], paths.ledger))
    out(summary)
    return ABRun(result, design, prereg, paths, report, summary, smoke, children)
