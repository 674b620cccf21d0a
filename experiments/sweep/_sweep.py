"""The synthesis-instruction sweep: Optuna ask/tell inside the Hydra app.

Order of work: contexts (plan + research per task, once per study) -> baseline trial (enqueued) -> r-1 more baseline
runs with other seeds (noise floor) -> search trials until n_trials / timeout / LLM-call budget -> the final race
(the top race_top candidates once more on the train split) -> holdout confirmation of the top-k candidates (of a
per-type search: its composition) against the baseline -> promotion (or "no change kept"). Everything a resumed
process needs lives in the study (trial and study user attrs), the context cache and the LLM response cache.

The loop and its order of work; the rooms it calls, in experiments/sweep/ unless named: _study.py (storage,
fingerprint, stale trials, heartbeats), _objective.py (one trial), _reruns.py (SplitRuns: the noise floor's repeats,
the race and the holdout runs), experiments.runs (a candidate on tasks), experiments.stats (noise floor),
experiments.promotion (the candidates and the verdict), _summary.py (the block), _progress.py (lines and ETA),
_preflight.py (cost, detectable effect), _registry.py (prompt versions), _parent_run.py (the MLflow parent run).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import optuna
from optuna.trial import TrialState

from experiments.config import (BASELINE, ExperimentConfig, load_tasks, split, study_fingerprint, sweep_design_problem,
                                task_types)
from experiments.promotion import (HoldoutScores, Promotion, SplitScores, candidates, holdout_runs, kept_instructions,
                                   race_runs, split_scores)
from experiments.runs import (RunPool, TimedRunner, TrialFailed, llm_calls, model_failure, prepare_contexts,
                              runner_pool)
from experiments.stats import baseline_reference, compare, noise_floor
from experiments.storage import (RETRIES, Ledger, StaleTrials, log_stale, mask_url, run_label, shared_lock, store_stop,
                                 trial_slot, worker_host)
from experiments.tracking import NullTracker, make_tracker
from harness.stores import file_lock, sqlite_file

from ._objective import Objective
from ._parent_run import parent_record
from ._preflight import mutation_calls, pin_noise_source, sweep_preflight
from ._progress import SweepProgress
from ._registry import SweepRegistry, pin_source, sweep_evidence
from ._reruns import SplitRuns
from experiments.search import candidate_hash, holdout_pool, state_from_trials
from ._study import (StudyStore, baseline_trial, ensure_baseline, finished_trials, frozen_trial, live_trials,
                     open_store, pin_fingerprint, requeue_model_failures, stored_holdout, train_reruns, trial_counts,
                     unanswered)
from ._summary import SweepSummary, format_sweep, synth_yaml


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
        judge: Callable[..., Any] | None = None,
    ) -> None:
        self.exp, self.out, self.judge = exp, out, judge  # judge: the pairwise holdout's (None: the evaluator's)
        self._pool = pool  # None: backend.concurrency, resolved against the runner's backend in run()
        self.progress = SweepProgress(exp.sweep.name, out)
        self.runner = TimedRunner(runner, self.progress.task_done)
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
        self.calibration: Any = None  # calibration_store.Calibration whose noise floor replaces the repeats
        self.split_runs: SplitRuns | None = None  # made in run(), once the study pinned exp and its noise source
        self.unconcluded: list[str] = []  # steps after the search that failed: the CLI exits 3 (experiments.run)
        self.failed_out = False  # stopped past the failure rate: the CLI exits 3 too
        self.stopped_by: KeyboardInterrupt | None = None  # what stopped a trial: raised again once it is told
        self.noise_note = ""

    @property
    def pool(self) -> RunPool:
        """The RunPool of this sweep: the one given, else backend.concurrency against the runner's backend (one
        log line says what was chosen and why)."""
        if self._pool is None:
            self._pool = runner_pool(self.exp.backend, self.runner.identity())
            self.out(f"[{self.exp.sweep.name}] concurrency {self._pool.workers}: {self._pool.why}")
        return self._pool

    # -- main loop ---------------------------------------------------------------------------------------
    def run(self) -> SweepSummary:
        with warnings.catch_warnings():
            # heartbeats with ask/tell, WilcoxonPruner and fail_stale_trials are deliberate: hide their notices
            warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
            try:
                return self._run()
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM (experiments.run): the parent run is closed, not RUNNING
                self._safe(self.tracker.kill)
                raise
            except Exception as exc:  # any failure ends the parent run FAILED, with the reason
                why = f"{type(exc).__name__}: {exc}\n"
                self._safe(lambda: self.tracker.finish({}, {"error.txt": why}, status="FAILED"))
                raise

    def _run(self) -> SweepSummary:
        exp, sw = self.exp, self.exp.sweep
        self.progress.t0 = t0 = time.perf_counter()
        calls0 = llm_calls(self.runner)
        name = sw.name
        store = open_store(exp, StaleTrials(max_retry=RETRIES))
        study = store.study
        exp, pinned = pin_source(study, exp)  # a resumed study keeps the prompt versions it started from
        if pinned:
            self.exp = exp
            self.out(f"[{name}] {pinned}")
        # before anything is spent or logged: a study answers for one objective only
        note = pin_fingerprint(study, study_fingerprint(exp, self.runner.identity(), self.tasks), exp)
        if note:
            self.out(f"[{name}] {note}")
        self.calibration = self._noise_source(study)
        self.split_runs = SplitRuns(exp=exp, runner=self.runner, pool=lambda: self.pool, progress=self.progress,
                                    tracker=self.tracker, calibration=self.calibration, tasks=self.tasks,
                                    train=self.train, holdout=self.holdout, folder=self.dir, out=self.out,
                                    judge=self.judge, safe=self._safe)
        self.tracker.start(exp, smoke=self.smoke)
        if self.tracker.moved_note:  # the results folder was moved: its MLflow experiment now logs inside it
            self.out(f"[{name}] {self.tracker.moved_note}")
        contexts, ctx_stats = self._contexts()
        prepare_calls = llm_calls(self.runner) - calls0
        stale = store.fail_stale_trials()
        if stale:
            self.out(f"[{name}] marked {len(stale)} trial(s) left RUNNING by a dead process as failed: {stale}")
        with shared_lock(exp.storage_url, f"{name}/baseline", self.dir / ".baseline.lock"):  # one copy each
            again = requeue_model_failures(store)
        if again:
            self.out(f"[{name}] {len(again)} trial(s) failed because a model call failed, queued again: "
                     + ", ".join(f"#{n}" for n in again))
        objective = Objective(
            exp, self.runner, self.train, contexts=contexts,
            state=lambda: state_from_trials(live_trials(study), objective.baseline),
            propose=self.propose, mutation_llm=self.mutation_llm, mutate_types=self.mutate_types, pool=self.pool,
            sigma=lambda: self.split_runs.noise(study, objective.baseline, contexts).sigma,  # the gate's noise
        )
        baseline = objective.baseline
        self.registry = SweepRegistry(exp, self.runner.identity())  # the baseline texts as prompt versions
        warn = self.registry.register_baseline(baseline, study.user_attrs.get("fingerprint", {}))
        if warn:
            self.out(f"[{name}] warning: {warn}")
        moved = self.ledger.belong_to(str(study.user_attrs.get("study_uid", "")))  # one study's trials per ledger
        if moved:
            self.out(f"[{name}] {self.ledger.path.name} held another study's rows (its optuna.db was moved aside or "
                     f"replaced): moved to {moved.name}; this study's ledger begins anew")
        self.ledger.sync(study.get_trials(deepcopy=False))
        self._safe(lambda: self.tracker.sync(study.get_trials(deepcopy=False), baseline))
        with shared_lock(exp.storage_url, f"{name}/baseline", self.dir / ".baseline.lock"):  # one baseline enqueued
            ensure_baseline(study)
        study.set_user_attr("baseline_hash", candidate_hash(baseline))
        study.set_user_attr("controls", {"reuse_context": sw.reuse_context, "memory_frozen": exp.memory.frozen})

        self._preflight(study, calls0)
        new, new_failed, search_calls, search_trials = 0, 0, 0, 0
        stop_reason = "n_trials reached"
        failed_out = interrupted = False
        while True:
            done = len(finished_trials(study))
            used = llm_calls(self.runner) - calls0
            elapsed = time.perf_counter() - t0
            if baseline_trial(study) is not None:
                self.split_runs.baseline_runs(study, baseline, contexts)
            # before n_trials: at a small n_trials the last failure would otherwise end the loop unchecked
            if new >= sw.min_trials_for_failure_stop and new_failed / new >= sw.failure_rate_stop:
                stop_reason = f"failure rate {new_failed}/{new} >= {sw.failure_rate_stop}"
                failed_out = True
                break
            if done >= sw.n_trials:
                stop_reason = f"n_trials reached ({done}/{sw.n_trials})"
                break
            if sw.timeout_s is not None and elapsed >= sw.timeout_s:
                stop_reason = f"timeout ({elapsed:.0f}s >= {sw.timeout_s:.0f}s)"
                break
            if sw.max_llm_calls is not None and used >= sw.max_llm_calls:
                stop_reason = f"LLM call budget ({used} >= {sw.max_llm_calls})"
                break
            store.fail_stale_trials()  # a dead worker's trial (any machine): failed, retried, logged
            self._safe(lambda: log_stale(store.stale, self.tracker, baseline, self.out, name))
            trial_calls0 = llm_calls(self.runner)
            number, state, interrupted = self._trial(store, objective, done)
            new += 1
            new_failed += state == TrialState.FAIL
            frozen = frozen_trial(study, number)
            if frozen.user_attrs.get("operator") != BASELINE:
                search_trials += 1
                search_calls += llm_calls(self.runner) - trial_calls0
            outcome = objective.last if objective.last and objective.last.number == frozen.number else None
            self._safe(lambda: self.tracker.log_trial_once(frozen, outcome, baseline=baseline))
            self.ledger.sync(study.get_trials(deepcopy=False))
            self._trial_progress(study, frozen, calls0)
            if (new == 1 and not interrupted and len(finished_trials(study)) < sw.n_trials
                    and self.progress.on_first_model_task is None):
                self._preflight(study, calls0, update="the first trial")
            if interrupted:
                raise self.stopped_by or KeyboardInterrupt()  # SIGTERM stays SIGTERM (experiments.run.Terminated)
        self.failed_out = failed_out
        summary = self._conclude(study, baseline, contexts, stop_reason=stop_reason, new=new, t0=t0, calls0=calls0,
                                 prepare_calls=prepare_calls, ctx_stats=ctx_stats,
                                 calls_per_trial=(search_calls / search_trials) if search_trials else None)
        return dataclasses.replace(summary, failed_out=failed_out, unconcluded=tuple(self.unconcluded))

    def _trial(self, store: StudyStore, objective: Objective, done: int) -> tuple[int, TrialState, bool]:
        """Ask for one trial, run the objective under a heartbeat, tell the study: (number, state, interrupted)."""
        study, sw = store.study, self.exp.sweep
        # one ask at a time on this host: Optuna pops the enqueued baseline with a SELECT ... FOR UPDATE that
        # SQLite ignores, so two workers asking at once could both run trial #0 (and tell it twice)
        with file_lock(self.dir / ".ask.lock"):
            trial = study.ask()
        trials = study.get_trials(deepcopy=False)
        trial.set_user_attr("slot", trial_slot(next(t for t in trials if t.number == trial.number), trials))
        trial.set_user_attr("worker_host", worker_host())
        trial.set_user_attr("worker_pid", os.getpid())
        state, value, interrupted = TrialState.FAIL, None, False
        self.progress.begin(f"trial {done + 1}/{sw.n_trials} #{trial.number}", f"{sw.name}-t{trial.number}",
                            len(self.train))
        trial_t0 = time.perf_counter()
        try:
            with store.heartbeat(trial.number):
                value = objective(trial)
            state = TrialState.COMPLETE
        except optuna.TrialPruned:
            state = TrialState.PRUNED
        except TrialFailed as exc:
            state = TrialState.FAIL
            if exc.model_failed:  # the server failed, not the candidate: tried again on the next start
                trial.set_user_attr("model_failed", True)
        except KeyboardInterrupt as exc:
            trial.set_user_attr("fail_reason", "interrupted (Ctrl-C or SIGTERM): queued again for the next start")
            interrupted, self.stopped_by = True, exc
        except Exception as exc:  # a trial that crashes is data: recorded with its reason, the sweep goes on
            self._store_stop(exc)  # ... unless a store failed under it: then the run stops, uncharged
            # a programming error (e.g. a TypeError inside an operator) keeps its traceback in the record
            trial.set_user_attr("fail_reason", f"{type(exc).__name__}: {exc}"[:500])
            trial.set_user_attr("traceback", traceback.format_exc()[-4000:])
            if model_failure(f"{type(exc).__name__}: {exc}"):  # an operator's own model call failed
                trial.set_user_attr("model_failed", True)
        self.progress.trial_s.append(time.perf_counter() - trial_t0)
        self.progress.phase = None
        if state != TrialState.COMPLETE and not interrupted:
            self._store_stop(None)  # the results folder vanished or turned read-only under a failed trial
        if state == TrialState.COMPLETE:
            study.tell(trial, value)
        else:
            study.tell(trial, state=state)
        if interrupted and store.stale is not None:  # stopped, not failed: a copy takes its slot on the next start
            store.stale.requeue(study, frozen_trial(study, trial.number))
        return trial.number, state, interrupted

    def _trial_progress(self, study: optuna.Study, frozen: Any, calls0: int) -> None:
        sw = self.exp.sweep
        done = len(finished_trials(study))
        best = max(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.value, default=None)
        eta = self.progress.eta_s(done, n_trials=sw.n_trials,
                                  holdout_runs=holdout_runs(sw, len(self.holdout)) + race_runs(sw, len(self.train)),
                                  at_once=min(self.pool.workers, len(self.holdout)), timeout_s=sw.timeout_s)
        self.out(self.progress.trial_line(frozen, best, done=done, n_trials=sw.n_trials, eta=eta,
                                          calls=llm_calls(self.runner) - calls0,
                                          budget=f"/{sw.max_llm_calls}" if sw.max_llm_calls else ""))

    # -- pieces ----------------------------------------------------------------------------------------
    def _contexts(self) -> tuple[dict[str, Any] | None, dict[str, int]]:
        if not self.exp.sweep.reuse_context:
            return None, {"hits": 0, "computed": 0}
        return prepare_contexts(self.exp, self.runner, self.train + self.holdout, folder=self.dir / "context",
                                pool=self.pool, out=self.out)

    def _safe(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # tracking must not kill a night's sweep; the next start re-syncs trials
            stop = store_stop(exc, sqlite_file(self.tracker.uri) if self.tracker.uri else None)
            if stop is not None:  # ... but a full disk, a vanished or locked store does
                raise stop from exc
            self.out(f"[{self.exp.sweep.name}] warning: MLflow logging failed: {type(exc).__name__}: {exc}")

    def _store_stop(self, exc: BaseException | None) -> None:
        """Raise the StoreError behind a failed trial (experiments.storage.store_stop on the study's SQLite file):
        the trial is left untold, so the next start fails it as its process's and queues a copy in its place."""
        stop = store_stop(exc, sqlite_file(self.exp.storage_url))
        if stop is not None:
            raise stop from exc

    # -- noise source and preflight ------------------------------------------------------------------------
    def _noise_source(self, study: optuna.Study) -> Any:
        source = pin_noise_source(study, self.exp, self.runner.identity(), self.tasks)
        self.noise_note = source.note
        self.out(f"[{self.exp.sweep.name}] {source.line}")
        return source.calibration

    def _preflight(self, study: optuna.Study, calls0: int, update: str | None = None) -> None:
        """Projected cost and detectable effect before the first trial, again after the first measured task (no
        calibration) and after the first trial (_preflight.sweep_preflight)."""
        lines, cost_known = sweep_preflight(
            self.exp, study, calibration=self.calibration, measured=self.progress.measured,
            n_holdout=len(self.holdout), update=update, used_calls=llm_calls(self.runner) - calls0,
            elapsed_s=time.perf_counter() - self.progress.t0, mutation_calls=mutation_calls(self.exp, self.mutate_types),
            concurrency=self.pool.workers, n_train=len(self.train))
        for line in lines:
            self.out(f"[{self.exp.sweep.name}] {line}")
        if not cost_known and update is None:
            self.progress.on_first_model_task = lambda: self._preflight(study, calls0, update="the first measured task")

    def _plots(self, study, ref: Mapping[str, float], floor: float, best, promoted) -> dict[str, Path]:
        """History, operator, heatmap and quality-vs-cost PNGs under <sweep_dir>/plots; an error is a warning only."""
        try:
            from experiments.tracking import sweep_plots
            return sweep_plots(
                study.get_trials(deepcopy=False), self.dir / "plots", train_tasks=[t.id for t in self.train],
                holdout_tasks=[t.id for t in self.holdout], holdout=study.user_attrs.get("holdout", {}), floor=floor,
                baseline=(sum(ref.values()) / len(ref)) if ref else None, title=self.exp.sweep.name,
                highlight=[c.number for c in (best, promoted) if c], promoted=promoted and promoted.number,
                cost_metric=getattr(self.exp.sweep, "cost_metric", None) or "completion_tokens")
        except Exception as exc:  # the sweep's results stand without their pictures
            self.out(f"[{self.exp.sweep.name}] warning: plots failed: {type(exc).__name__}: {exc}")
            return {}

    # -- conclusion --------------------------------------------------------------------------------------
    def _unconcluded(self, study, raced: Sequence[Any], base_hold: HoldoutScores | None, verdict: Promotion) -> list[str]:
        """The steps after the search that did not conclude: a final-race run or a holdout run that failed (the
        backend died, replied HTTP 500 or garbage). Nothing of theirs is stored, so the same command runs them again."""
        sw, out = self.exp.sweep, []
        out += unanswered(study)  # a failed baseline, trials a model call failed
        if sw.race_top >= 1 and len(raced) >= 2 and self.train:
            seed = str(self.exp.seed + 1)
            out += [f"final race run of {c.hash} failed" for c in raced[: sw.race_top]
                    if seed not in train_reruns(study.user_attrs, c.hash)]
        if base_hold is not None and base_hold.scores is None:
            out.append(f"holdout run of the baseline failed: {base_hold.error}")
        out += [f"holdout run of trial #{r.trial} failed: {r.error}" for r in verdict.rows
                if r.error and base_hold is not None and base_hold.scores is not None]
        return out

    def _conclude(self, study, baseline, contexts, *, stop_reason, new, t0, calls0, prepare_calls, ctx_stats,
                  calls_per_trial) -> SweepSummary:
        exp, sw = self.exp, self.exp.sweep
        trials = study.get_trials(deepcopy=False)
        self.ledger.sync(trials)  # other workers' trials told since this one's last trial (several machines)
        runs = self.split_runs.baseline_runs(study, baseline, contexts) if baseline_trial(study) else []
        nf = self.calibration.noise_floor() if self.calibration is not None else noise_floor(runs)
        ref = baseline_reference(runs)
        base_hash = candidate_hash(baseline)
        train_floor = nf.floor(len(ref), len(runs))
        testable = holdout_pool(candidates(trials, base_hash), trials, sw.search)  # what the holdout may test
        ranked = self.split_runs.race(study, testable, contexts)
        best = ranked[0] if ranked else None
        top = ranked[: sw.holdout_top_k]
        verdict, base_hold, look = self.split_runs.promotion(study, top, ref, nf, train_floor, base_hash, baseline,
                                                             contexts)
        self.unconcluded = self._unconcluded(study, testable, base_hold, verdict)
        promoted = next((c for c in ranked if verdict.winner and c.number == verdict.winner.trial), None)
        best_instr = dict(best.instructions) if best else dict(baseline)
        # the winner's texts, a task type held back by its own holdout tasks left at the baseline's
        promoted_instr = (kept_instructions(promoted.instructions, baseline, verdict.winner.held_types) if promoted
                          else dict(baseline))
        best_scores: tuple[SplitScores, ...] = ()
        if best is not None:
            held = {h: stored_holdout(study.user_attrs, h) for h in (best.hash, base_hash)}
            why = ("no holdout tasks" if not self.holdout else f"holdout_top_k={sw.holdout_top_k}" if not top
                   else next((f"holdout failed: {r.error}" if r.error else "not run: did not pass the train filter"
                              for r in verdict.rows if r.trial == best.number and (r.error or r.cut_by_filter)),
                             "not evaluated on the holdout"))
            best_scores = (split_scores("train", best.train_scores, ref), split_scores(
                "holdout", *(getattr(held[h], "scores", None) for h in (best.hash, base_hash)), note=why))
        plots = self._plots(study, ref, train_floor, best, promoted) if sw.plots else {}  # sweep.plots: PNGs
        paths = {
            "ledger": str(self.ledger.path),
            "contexts": str(self.dir / "context") if sw.reuse_context else "(context reuse off)",
            "summary": str(self.dir / "summary.md"),
            "promoted synth config": str(self.dir / "promoted_synth.yaml"),
            "plots": (f"{self.dir / 'plots'} ({', '.join(p.name for p in plots.values())})" if plots
                      else "(none: plotting failed)"),
            "study storage": f"{mask_url(exp.storage_url)} (study {sw.name})",
        }
        counts = trial_counts(live_trials(study))
        bt = baseline_trial(study)
        evaluated = [t for t in trials if t.state == TrialState.COMPLETE and "selection_bias" in t.user_attrs]
        summary = SweepSummary(
            sweep=sw.name, storage=mask_url(exp.storage_url), stop_reason=stop_reason, trials=counts, new_trials=new,
            baseline_train=(sum(ref.values()) / len(ref)) if ref else (bt.value if bt else None),
            noise=nf, train_floor=train_floor,
            best_trial=best.number if best else None, best_operator=best.operator if best else None,
            best_value=best.train_mean if best else None, best_runs=best.runs if best else 1,
            best_comparison=compare(best.train_scores, ref, floor=train_floor, alpha=sw.alpha) if best and ref else None,
            holdout=verdict.rows, baseline_holdout=base_hold.mean if base_hold is not None else None,
            pairwise=tuple(self.split_runs.pair_lines),
            promoted_trial=promoted.number if promoted else None,
            promoted_hash=candidate_hash(promoted_instr), promoted=promoted is not None,
            best_instructions=best_instr, baseline_instructions=dict(baseline),
            llm_calls=llm_calls(self.runner) - calls0, llm_calls_prepare=prepare_calls, calls_per_trial=calls_per_trial,
            contexts=ctx_stats, smoke=self.smoke or any(t.user_attrs.get("smoke") for t in trials), paths=paths,
            mlflow_ui=self.tracker.ui_command(), elapsed_s=time.perf_counter() - t0,
            controls={"reuse_context": sw.reuse_context, "memory_frozen": exp.memory.frozen},
            best_scores=best_scores, mlflow_url=self.tracker.ui_url(), promoted_instructions=promoted_instr,
            selection_bias=(statistics.fmean(t.user_attrs["selection_bias"] for t in evaluated) if evaluated else None),
            rescored=bool(evaluated) and all(t.user_attrs.get("rescored") for t in evaluated),
            judge_failures=sum(int(t.user_attrs.get("judge_failures") or 0) for t in trials),
            noise_source=self.noise_note,
            underpowered=sweep_design_problem(exp), train_candidates=len(ranked),
            holdout_look=look.line if look is not None else "", train_filter=sw.train_filter,
            confirmable=self.split_runs.confirmable(study, testable, nf, len(runs), ref, look),
            label=run_label(self.runner.identity(), self.calibration),
            unconcluded=tuple(self.unconcluded), failed_out=self.failed_out,
        )
        (self.dir / "promoted_synth.yaml").write_text(synth_yaml(exp, promoted_instr, summary), encoding="utf-8")
        evidence = (sweep_evidence(study, frozen_trial(study, promoted.number), verdict.winner, ref,
                                   self.runner.identity()) if promoted is not None else None)
        summary = dataclasses.replace(summary, registry=self.registry.conclude(baseline, promoted_instr, evidence))
        self._report(summary, plots, calls_per_trial, look)
        return summary

    def _report(self, summary: SweepSummary, plots: Mapping[str, Path], calls_per_trial: float | None,
                look: Any = None) -> None:
        """summary.md, the MLflow parent run's metrics, tags and files (parent_record), and the block on the
        console."""
        text = format_sweep(summary)
        (self.dir / "summary.md").write_text(text + "\n", encoding="utf-8")
        metrics, tags = parent_record(summary, look, calibrated=self.calibration is not None,
                                      calls_per_trial=calls_per_trial, train_filter=self.exp.sweep.train_filter)
        if plots:
            self._safe(lambda: self.tracker.log_files(plots.values(), "plots"))
        yaml_text = synth_yaml(self.exp, summary.promoted_instructions, summary)
        self._safe(lambda: self.tracker.finish(
            metrics,
            {"summary.md": text + "\n", "promoted_synth.yaml": yaml_text,
             "ledger.jsonl": self.ledger.path.read_text(encoding="utf-8") if self.ledger.path.exists() else ""},
            status="FAILED" if self.unconcluded or self.failed_out else "FINISHED", tags=tags))
        self.out(text)


def run_sweep(exp: ExperimentConfig, runner: Any, **kwargs: Any) -> SweepSummary:
    """Run (or resume) a synth_mutation sweep with the runner injected. See Sweep."""
    return Sweep(exp, runner, **kwargs).run()
