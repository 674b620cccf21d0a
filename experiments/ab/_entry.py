"""`python -m experiments.run +sweep=prior_knowledge_ab`: a paired A/B test of two config variants on the harness.

Config -> design (experiments.ab): the benchmark tasks (ab.split), ab.replications, the arms ab.a / ab.b,
seed = cfg.seed. The pre-registration (ab.hypothesis, metric, min_effect, alpha, direction, test, sequential looks)
is written beside the ledger before any cell runs. Each cell is one FULL harness run (prepare: memory, plan,
research; finish: synthesis, wiggum, panel, evaluation; experiments.runs.HarnessCells) of the arm's config with
the pair's seed: planning differs between arms, so no plan or research is shared; memory is frozen; the research
cache is off unless an arm sets research.* itself. The judge sees only the task and the output (run ids and output
names carry a blind label, never the arm name).

Before anything is written, check_ab_design refuses (one-line ConfigError) a pre-registered metric this evaluator
does not produce (ab.metric) and a design whose primary test cannot reach ab.alpha with the tasks it has (unless
ab.allow_underpowered). One metric, the pre-registered one, runs through the statistics, looks, plots and verdict.
An arm that runs the registry's champion on train or holdout tasks (those a promoting sweep chose it on or confirmed
it on) is named in a caveat printed before the first cell and appended to the verdict (ab_design.selection_note).
The pre-registration also records each arm's backend identity (backend kind, model, file sha256 or Ollama digest
per role); a resume on other backends or models is refused.

Everything lives under <results_dir>/ab/<sweep.name>/: ledger.jsonl (one line per finished cell), its
ledger.prereg.json, ab_report.md with two PNGs, summary.md and outputs/. A rerun skips every finished cell and the
LLM response cache answers any call a killed cell had already made. MLflow: one parent run per test (found again by
tag on resume) with the pre-registration, summary metrics, report and PNGs; one child run per finished cell, and
the cell's harness run as an MLflow trace with the evaluator's assessments linked to it (experiments.tracking).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from omegaconf import DictConfig

from experiments.config import ConfigError, ExperimentConfig, load_tasks, to_experiment, validate
from experiments.report import SMOKE_LINE, hms, num
from experiments.stats import PairedStats, Preregistration
from experiments.tracking import NullTracker, make_tracker
from harness.compose import warn_judge

from ._cells import ABDesign, ABResult, RunArm, load_cells, task_id, write_or_check_prereg
from ._design import (ABPaths, ab_paths, arm_backends, arm_configs, cell_plan, check_ab_design, design_from_config,
                      objective_of, observed_power_line, power_note, selection_note)
from ._pairwise import (check_one_judge, failed_judge, judge_side_by_side, lost_answers, pairs_to_judge,
                        unjudged_pairs)
from ._report import format_ab
from ._run import run_ab

CELL_KIND = "ab_cell"
VERDICT_CODE = {"supported": 1.0, "inconclusive": 0.0, "not supported": -1.0}


# -- MLflow ------------------------------------------------------------------------------------------------------


def _record_id(rec: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(rec, sort_keys=True, default=str).encode()).hexdigest()[:16]


class ABTracking:
    """The A/B's MLflow runs through experiments.tracking's tracker: parent per test, child per ledger cell line."""

    def __init__(self, tracker: NullTracker, out: Callable[[str], None]) -> None:
        self.tracker, self.out = tracker, out
        self.logged: set[str] = set()
        self.task_types: dict[str, str] = {}

    @property
    def on(self) -> bool:
        return bool(self.tracker.enabled)

    def safe(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # tracking must not stop the test; the next start syncs the missing cells
            self.out(f"warning: MLflow logging failed: {type(exc).__name__}: {exc}")
            return None

    def start(self, exp: ExperimentConfig, design: ABDesign, prereg: Preregistration, smoke: bool) -> None:
        self.tracker.start(exp, smoke=smoke)
        self.task_types = {task_id(t): str(getattr(t, "task_type", "")) for t in design.tasks}
        if not self.on:
            return
        params = {
            "ab.a_name": exp.ab.a_name, "ab.b_name": exp.ab.b_name,
            "ab.a": json.dumps(design.arms[exp.ab.a_name], sort_keys=True),
            "ab.b": json.dumps(design.arms[exp.ab.b_name], sort_keys=True),
            "ab.replications": design.replications, "ab.alpha": prereg.alpha, "ab.min_effect": prereg.min_effect,
            "ab.metric": prereg.metric, "ab.direction": prereg.direction, "ab.test": prereg.test,
            "ab.sequential_looks": prereg.sequential, "ab.split": exp.ab.split, "ab.n_tasks": len(design.tasks),
            "ab.design_seed": design.seed,
        }
        self.tracker.log_parent(params=params, tags={"ab_hypothesis": prereg.hypothesis[:4000]},
                                texts={"preregistration.json": json.dumps(prereg.to_dict(), indent=2)})
        self.logged = {r.data.tags.get("cell_record", "") for r in self.children()}

    def children(self) -> list[Any]:
        return self.tracker.child_runs(CELL_KIND) if self.on else []

    def sync(self, ledger: Path) -> int:
        """A child run for every cell line of the ledger that has none yet (idempotent), and the cell's harness run
        as an MLflow trace linked to it (a trace that fails to log is a warning; the cell stays logged)."""
        if not self.on:
            return 0
        from harness.stores import read_jsonl

        n = 0
        for rec in read_jsonl(ledger):
            if rec.get("kind") != "cell":
                continue
            rid = _record_id(rec)
            if rid not in self.logged:
                self._child(rec, rid)
                self.logged.add(rid)
                self.safe(lambda: self._trace(rec, rid))
                n += 1
        return n

    def _child(self, rec: Mapping[str, Any], rid: str) -> None:
        ok = rec.get("status") == "ok"
        meta = rec.get("meta") or {}
        tags = {"kind": CELL_KIND, "cell_record": rid, "arm": rec["arm"], "task": rec["task"],
                "replication": str(rec["replication"]), "status": rec.get("status", "?")}
        if meta.get("smoke"):
            tags["smoke"] = "true"
        if rec.get("error"):
            tags["error"] = str(rec["error"])[:4000]
        params = {"arm": rec["arm"], "task": rec["task"], "replication": rec["replication"],
                  "seed": rec.get("pair_seed"), "position": rec.get("position"), "order": ",".join(rec.get("order", [])),
                  "blind_label": meta.get("blind_label", ""), "harness_run_id": meta.get("run_id", "")}
        metrics: dict[str, float] = {"elapsed_s": float(rec.get("elapsed_s", 0.0))}
        if ok:
            metrics["score"] = float(rec["score"])
            metrics.update({f"dim.{k}": float(v) for k, v in (rec.get("dimensions") or {}).items()})
            metrics.update({str(k): float(v) for k, v in (rec.get("secondary") or {}).items()})
        for k in ("llm_calls", "cached_calls"):
            if isinstance(meta.get(k), (int, float)):
                metrics[k] = float(meta[k])
        metrics.update({f"usage.{k}": float(v) for k, v in (rec.get("usage") or {}).items()})
        self.tracker.log_child(f"{rec['task']}-r{rec['replication']}-{rec['arm']}", tags,
                               {k: v for k, v in metrics.items() if math.isfinite(v)}, params=params,
                               status="FINISHED" if ok else "FAILED")

    def _trace(self, rec: Mapping[str, Any], rid: str) -> list[str]:
        """The cell's harness run as an MLflow trace (experiments.tracking) linked to the cell's run, tagged
        with the cell (arm, blind label, task, replication): an ok cell with a trace file with the evaluator's
        assessments (the judge's rationale and sample spread with its dimensions), a failed cell with status
        ERROR and its error line (the spans its trace file holds; none when the run raised before writing one)."""
        from experiments.runs import TaskScore
        from experiments.tracking import FailedRun, log_run_traces

        meta = rec.get("meta") or {}
        task_type = self.task_types.get(rec["task"], "")
        tags = {"kind": CELL_KIND, "cell_record": rid, "arm": rec["arm"], "task": rec["task"],
                "replication": str(rec["replication"])}
        trace_tags = {"blind_label": meta.get("blind_label", "")}
        if rec.get("status") != "ok":
            failed = FailedRun(task_id=rec["task"], task_type=task_type,
                               error=str(rec.get("error") or "the cell failed"), trace_path=meta.get("trace") or None)
            return log_run_traces(self.tracker, tags, [], trace_tags=trace_tags, failed=[failed])
        if not meta.get("trace"):
            return []
        out = Path(meta.get("output_path") or "")
        score = TaskScore(
            task_id=rec["task"], task_type=task_type, score=float(rec["score"]),
            dimensions=dict(rec.get("dimensions") or {}), judge_sd=float(meta.get("judge_sd") or 0.0),
            feedback=str(meta.get("feedback") or ""), weaknesses=tuple(meta.get("weaknesses") or ()),
            selection_score=meta.get("selection_score"), rescored=bool(meta.get("rescored")), trace_path=meta["trace"],
            output_text=out.read_text(encoding="utf-8").rstrip("\n") if out.is_file() else "")
        return log_run_traces(self.tracker, tags, [score], trace_tags=trace_tags)

    def finish(self, result: ABResult, summary: str, files: Sequence[Path], ledger: Path,
               status: str = "FINISHED") -> None:
        metrics = summary_metrics(result)
        texts = {"summary.md": summary + "\n"}
        if ledger.exists():
            texts["ledger.jsonl"] = ledger.read_text(encoding="utf-8")
        if self.on:
            self.tracker.log_parent(tags={"verdict": result.verdict, "primary_metric": result.primary.metric})
            self.tracker.log_parent(files=[f for f in files if f.exists()], artifact_path="report")
        self.tracker.finish(metrics, texts, status=status)

    def killed(self) -> None:
        if self.on:
            self.tracker.kill()


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
    per-dimension and secondary diffs and Holm p (dim.<name>.*, sec.<name>.*), the verdict, and per arm the
    failed cells and unreadable judge replies (failed_cells.<arm>, judge_failures.<arm>), and per cost metric
    each arm's mean per task (cost.<metric>.<arm>) and B - A with its interval (cost_diff.<metric>, _lo, _hi)."""
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
    for arm in result.arm_names:  # what is missing, per arm: arms that differ get no verdict
        m[f"failed_cells.{arm}"] = result.failed_cells.get(arm, 0)
        m[f"judge_failures.{arm}"] = result.judge_failures.get(arm, 0)
    a, b = result.arm_names
    pw = result.pairwise
    if pw is not None:  # compare=pairwise: the tested statistic
        m.update({"pairwise.mean_preference": pw.mean, "pairwise.p_signflip": pw.p, "pairwise.n": pw.n,
                  "pairwise.b_wins": pw.b_wins, "pairwise.ties": pw.ties, "pairwise.a_wins": pw.a_wins,
                  "pairwise.missing": pw.missing, "pairwise.judge_calls": pw.calls})
        if pw.position_bias is not None:
            m["pairwise.position_bias"] = pw.position_bias
    for metric, c in result.cost.items():  # each arm's cost per task and B - A with its interval; None: not measured
        m.update({f"cost.{metric}.{a}": c.base_mean, f"cost.{metric}.{b}": c.cand_mean, f"cost_diff.{metric}": c.diff})
        if c.ci:
            m[f"cost_diff.{metric}_lo"], m[f"cost_diff.{metric}_hi"] = c.ci
    return {k: float(v) for k, v in m.items() if isinstance(v, (int, float)) and math.isfinite(float(v))}


# -- the entry point -------------------------------------------------------------------------------------------


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
    unconcluded: tuple[str, ...] = ()  # cells a model call failed, or failed cells left < 2 pairs: the CLI exits 3
    noun: str = "A/B test"


def run_ab_from_config(cfg: DictConfig | ExperimentConfig, **options: Any) -> ABRun:
    """Run (or resume) the A/B test a composed config describes, the config validated and the design checked first
    (experiments.run.run_experiment checks it itself and calls run_ab_test); options are run_ab_test's."""
    exp = validate(to_experiment(cfg), warn=False)
    if exp.sweep.kind != "ab":
        raise ConfigError(f"sweep.kind={exp.sweep.kind!r} is not allowed here; expected 'ab' (+sweep=prior_knowledge_ab)")
    check_ab_design(exp)  # metric name and reachability, before anything is written
    warn_judge(exp.backend)
    return run_ab_test(exp, **options)


def run_ab_test(
    exp: ExperimentConfig,
    *,
    run_arm: RunArm | None = None,
    roles: Any = None,
    tracker: NullTracker | None = None,
    out: Callable[[str], None] = print,
    pool: Any = None,
    judge: Any = None,
) -> ABRun:
    """Run (or resume) the A/B test of an experiment already validated and design-checked; see the module docstring.

    Cells run backend.concurrency at once (experiments.runs; `pool` overrides it), against arm A's backend.

    run_arm replaces the real harness (tests); roles runs the real harness on injected backends. compare=pairwise
    judges the pairs with `judge` ((task, B's answer, A's answer, seed) -> evaluators.pairwise.PairResult), else
    with compare_pair on arm A's evaluator role (both arms must share it). The backend
    identity registered with the pre-registration comes from the harness's roles, from `roles` when run_arm is
    injected with them, else is {} (a scripted run has no backend).
    """
    from experiments.runs import HarnessCells
    from experiments.storage import label_for
    from ._preflight import ab_preflight_lines

    from ._report import DIFF_PNG, FOREST_PNG, write_report

    t0 = time.perf_counter()
    name = exp.sweep.name
    design, prereg = design_from_config(exp)
    arms = arm_configs(exp)  # bad keys and same-config arms fail here, before anything is written
    paths = ab_paths(exp)
    paths.dir.mkdir(parents=True, exist_ok=True)
    plan = cell_plan(design)
    # compare=pairwise: a cell whose answer file is gone (outputs/ moved or deleted) before its pair was judged runs
    # again; otherwise its pair could never be judged and every rerun would stop at the same missing file
    lost = lost_answers(design, paths.ledger) if prereg.compare == "pairwise" else []
    redo = {k for k, _ in lost}
    done = {k for k, c in load_cells(paths.ledger).items() if c.get("status") == "ok" and k not in redo}
    pending = sum(1 for k in plan if k not in done)
    objective = objective_of(exp, arms, design)

    cells = HarnessCells(arms, roles=roles) if run_arm is None else None
    if cells is not None and pending:
        smoke = cells.smoke  # builds the backends (loads the embedded model once)
    else:
        recs = load_cells(paths.ledger).values()
        smoke = any((r.get("meta") or {}).get("smoke") for r in recs) or any(
            e.backend.kind == "embedded" for e in arms.values())
    # the backends are identified (and checked against the registration) when anything will run on them: a cell,
    # or a pair the judge has yet to compare (compare=pairwise)
    judging = prereg.compare == "pairwise" and pairs_to_judge(design, paths.ledger) > 0
    backend = arm_backends(design, cells if cells is not None and (pending or judging) else None, run_arm, roles)
    new_test = f"start a new test under a new sweep.name (e.g. sweep.name={name}_2)"
    if prereg.compare == "pairwise":
        check_one_judge(backend)
    write_or_check_prereg(prereg, design, paths.ledger, backend=backend, new_test=new_test,
                          objective=objective)  # refuse before MLflow
    # the embedded model file and whether a calibration showed its judge discriminates (arm A's models)
    label = (label_for(exp, next(iter(backend.values())), load_tasks(exp.benchmark)) if backend else None) or (
        SMOKE_LINE if smoke else None)
    runner: RunArm = run_arm if run_arm is not None else cells  # type: ignore[assignment]
    if pool is None:
        from experiments.runs import runner_pool

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
    if lost:
        head.append(f"[{name}] {len(lost)} answer file(s) of pairs not yet judged are gone (first: {lost[0][1]}): "
                    f"their cell(s) run again, then the pairs are judged")
    note = power_note(prereg, len(design.tasks))
    if note:
        head.append(f"[{name}] note: {note}")
    caveat = selection_note(design.arms, design.tasks, benchmark=exp.benchmark.name, split=exp.ab.split)
    if caveat:
        head.append(f"[{name}] {caveat}")
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
            what = f"score {num(info.get('score'))}"
        else:
            what = f"FAILED {str(info.get('error') or '')[:120]}"
        out(f"[{name}] cell {info['cell']}/{info['cells']} task {info['task']}/{info['tasks']} {info['task_id']} "
            f"rep {info['replication']} arm {info['arm']}: {what} | elapsed {hms(elapsed)} ETA {hms(eta)}")

    try:
        result = run_ab(design, prereg, runner, ledger_path=paths.ledger, on_progress=progress, backend=backend,
                        new_test=new_test, pool=pool, objective=objective, redo=redo)
        if prereg.compare == "pairwise":
            result = judge_side_by_side(exp, design, prereg, result, paths.ledger, judge, cells, roles, pool,
                                        out)
    except KeyboardInterrupt:
        mlflow.safe(mlflow.killed)
        out(f"[{name}] interrupted: finished cells are in {paths.ledger}; run the same command again to resume")
        raise
    except Exception as exc:  # the parent run ends FAILED with the reason, not RUNNING
        mlflow.safe(lambda: mlflow.tracker.finish({}, {"error.txt": f"{type(exc).__name__}: {exc}\n"},
                                                  status="FAILED"))
        raise
    mlflow.safe(lambda: mlflow.sync(paths.ledger))
    unconcluded = unconcluded_cells(paths.ledger, plan, result.primary.n)
    if prereg.compare == "pairwise":
        unconcluded += unjudged_pairs(paths.ledger) + failed_judge(paths.ledger)
    if caveat:  # the verdict says what its tasks were chosen on
        result = dataclasses.replace(result, verdict_reason=f"{result.verdict_reason}; {caveat}")

    notes = [label] if label else []
    report = write_report(result, prereg, paths.dir, notes=notes, arms=design.arms)
    children = mlflow.safe(lambda: len(mlflow.children())) if mlflow.on else None
    summary = format_ab(name=name, result=result, prereg=prereg, design=design, smoke=smoke, label=label, paths=paths,
                        report=report, ui=mlflow.tracker.ui_command(), elapsed_s=time.perf_counter() - t0,
                        children=children, ui_url=mlflow.safe(getattr(mlflow.tracker, "ui_url", lambda: "")) or "",
                        note=power_note(prereg, result.primary.n),
                        power_line=observed_power_line(result.primary, prereg, power=exp.calibrate.power,
                                                       target=exp.calibrate.target_effect,
                                                       sims=min(exp.calibrate.sims, 2000)))
    paths.summary.write_text(summary + "\n", encoding="utf-8")
    mlflow.safe(lambda: mlflow.finish(result, summary, [report, paths.dir / DIFF_PNG, paths.dir / FOREST_PNG,
                                                        paths.prereg], paths.ledger,
                                      status="FAILED" if unconcluded else "FINISHED"))
    out(summary)
    return ABRun(result, design, prereg, paths, report, summary, smoke, children, unconcluded)


def unconcluded_cells(ledger: Path, plan: Sequence[Any], pairs: int) -> tuple[str, ...]:
    """Why the test cannot answer yet, from the plan's cells whose last record failed (the same command runs them
    again: only "ok" cells are skipped; the CLI exits 3):

    - a model call failed (the server, not the arm): the test cannot answer until they run;
    - else, failed cells (not a model call: e.g. an arm whose config crashes the harness) left fewer than 2
      complete task pairs: no verdict can rest on it, so the command does not end as if it had answered."""
    from experiments.runs import model_failure

    keys = set(plan)
    failed = [c for k, c in load_cells(ledger).items() if k in keys and c.get("status") != "ok"]
    by_model = [c for c in failed if model_failure(str(c.get("error") or ""))]
    if by_model:
        return (f"{len(by_model)} of {len(plan)} cells failed because a model call failed ({_first(by_model)})",)
    if failed and pairs < 2:
        return (f"only {pairs} complete task pair{'' if pairs == 1 else 's'}: {len(failed)} of {len(plan)} cells "
                f"failed ({_first(failed)})",)
    return ()


def _first(cells: Sequence[Mapping[str, Any]]) -> str:
    c = cells[0]
    return f"first: task {c.get('task')} arm {c.get('arm')}: {str(c.get('error'))[:200]}"
