"""MLflow tracking: one parent run per sweep (found again by tag on resume), one nested child run per trial.

SQLite backend by default (sqlite:///<results_dir>/mlflow.db) so the UI's compare view works; artifacts under
<results_dir>/mlartifacts. Everything goes through MlflowClient (no global active-run state).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Iterable, Mapping

from experiments.config import ExperimentConfig, experiment_dict, tracking_uri
from experiments.storage import HalfCreated, created_whole, guard_engines, mask_secrets, mask_url, shared_lock
from harness.stores import enable_wal, fault_in, full_in, locked_in, sqlite_db, store_lock

from ._datasets import benchmark_inputs, benchmark_source, log_task_table, register_benchmark, task_table
from ._textdiff import instruction_diff
from ._tracker import UI_ADDRESS, NullTracker, metric_key, trial_params, ui_command
from ._traces import EVALUATION_RUN, RUN_TYPE_TAG
from ._trials import TRIAL_STATUS, BaselineCosts, pruned_by

log = logging.getLogger("experiments.tracking")

PARENT_TAG = "sweep_parent"


class MLflowTracker(NullTracker):
    def __init__(self, exp: ExperimentConfig) -> None:
        from mlflow.tracking import MlflowClient

        self.exp = exp
        self.uri = tracking_uri(exp)
        # SQLite: the client creates / migrates the tables, and start() finds or creates the parent run; both run
        # under a file lock (two workers starting together race both otherwise), on a WAL database
        self._db = sqlite_db(self.uri)
        guard_engines()
        with store_lock(self._db):
            if self._db is not None:
                self._open_sqlite(self._db)
            self.client = MlflowClient(tracking_uri=self.uri)
        self.experiment_name = exp.mlflow.experiment or exp.sweep.name
        self.parent_id: str | None = None
        self.smoke = False
        self.enabled, self.costs = True, BaselineCosts()  # costs: cost_diff.<metric> vs the baseline trial
        self.moved_note = ""  # set when the experiment's artifacts were outside results_dir (_experiment_id)
        self._tasks: dict[str, Any] | None = None  # task id -> Task of exp.benchmark (tasks())
        self._inputs: dict[str, Any] | None = None  # split -> the benchmark split's DatasetInput (inputs())

    def tasks(self) -> dict[str, Any]:
        """The benchmark's tasks by id, loaded once."""
        if self._tasks is None:
            from experiments.config import load_tasks

            self._tasks = {t.id: t for t in load_tasks(self.exp.benchmark)}
        return self._tasks

    def inputs(self) -> dict[str, Any]:
        """split -> the MLflow dataset input of that split of the benchmark (experiments.tracking._datasets), built
        once."""
        if self._inputs is None:
            self._inputs = benchmark_inputs(self.exp.benchmark.name, self.tasks().values(),
                                            benchmark_source(self.exp.benchmark.name))
        return self._inputs

    def log_datasets(self, run_id: str, splits: Iterable[str]) -> None:
        """The benchmark's `splits` as the run's dataset inputs (a split the benchmark lacks is skipped; MLflow
        keeps one input per dataset and run, so logging again on resume adds nothing)."""
        have = self.inputs()
        chosen = [have[s] for s in dict.fromkeys(splits) if s in have]
        if chosen:
            self.client.log_inputs(run_id, datasets=chosen)

    def _open_sqlite(self, db: Path) -> None:
        """Create the SQLite store whole (experiments.storage.created_whole: a temp file renamed once every table is
        there), or open the one there, naming a half-created one in one line (HalfCreated) instead of MLflow's
        "index ... already exists" under its SQL."""
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        artifacts = (Path(self.exp.results_dir) / "mlartifacts").resolve().as_uri()

        def tables(path: Path) -> None:
            enable_wal(path)
            SqlAlchemyStore(f"sqlite:///{path}", artifacts).engine.dispose()

        if created_whole(db, tables):
            return
        enable_wal(db)
        try:
            tables(db)
        except Exception as exc:
            if fault_in(exc) is not None or full_in(exc) is not None or locked_in(exc) is not None:
                raise  # damaged, full or locked: experiments.run names those
            raise HalfCreated(db, exc) from exc

    def ui_command(self) -> str:
        return ui_command(self.uri)

    def ui_url(self) -> str:
        """The sweep's runs table (parent with nested trials) in the UI that ui_command() serves; MLflow 3 opens
        on its GenAI views unless workflowType says otherwise."""
        if getattr(self, "experiment_id", None) is None:
            return ""
        base = self.uri.rstrip("/") if self.uri.startswith(("http://", "https://")) else UI_ADDRESS  # a server's own UI
        return f"{base}/#/experiments/{self.experiment_id}/runs?workflowType=machine_learning"

    def _experiment_id(self) -> str:
        """The experiment named mlflow.experiment (else sweep.name), created with its artifacts under
        <results_dir>/mlartifacts. MLflow stores that location, absolute, when it creates the experiment: a results
        folder moved or copied with its mlflow.db would still write its artifacts at the old place (or fail where
        that is gone). Such an experiment (the store inside this results folder, its artifacts outside it) is
        renamed, its runs kept as they are, and a new one of the name logs inside this folder (moved_note says so);
        the sweep logs its trials there again from the study."""
        here = self._artifact_root()
        found = self.client.get_experiment_by_name(self.experiment_name)
        if found is not None:
            old = self._outside(found.artifact_location)
            if old is None:
                return found.experiment_id
            kept = f"{self.experiment_name} (before its results folder moved, id {found.experiment_id})"
            self.client.rename_experiment(found.experiment_id, kept)
            self.moved_note = (f"MLflow: experiment {self.experiment_name!r} in {self._db} kept its artifacts at {old} "
                               f"(outside results_dir {Path(self.exp.results_dir).resolve()}: the folder was moved or "
                               f"copied); it is renamed {kept!r} with its runs, and this run logs to a new "
                               f"{self.experiment_name!r} with artifacts under {here}")
        return self.client.create_experiment(self.experiment_name, artifact_location=here)

    def _artifact_root(self) -> str | None:
        """Where a new experiment keeps its artifacts: <results_dir>/mlartifacts; None for a tracking server (its
        own artifact store, not this machine's disk)."""
        if self.uri.startswith(("http://", "https://")):
            return None
        return (Path(self.exp.results_dir) / "mlartifacts").resolve().as_uri()

    def _outside(self, location: str | None) -> str | None:
        """The artifact location's folder when a SQLite store inside results_dir keeps an experiment's artifacts
        outside it (the folder was moved or copied); None otherwise (a store elsewhere is shared on purpose)."""
        from urllib.parse import unquote, urlparse

        if self._db is None or not location:
            return None
        results = Path(self.exp.results_dir).resolve()
        if not self._db.resolve().is_relative_to(results):
            return None
        parsed = urlparse(location)
        if parsed.scheme not in ("", "file"):
            return None  # an object store: not this folder's to manage
        path = Path(unquote(parsed.path) if parsed.scheme else location).resolve()
        return None if path.is_relative_to(results) else str(path)

    def log_files(self, paths: Iterable[Path | str], artifact_path: str) -> None:
        """Files (plots) as artifacts of the parent run under artifact_path/."""
        if self.parent_id is None:
            return
        for path in paths:
            self.client.log_artifact(self.parent_id, str(path), artifact_path)

    def start(self, exp: ExperimentConfig, *, smoke: bool = False) -> None:
        """Find the sweep's parent run by tag (resume) or create it; log the resolved config.

        For a SQLite store the find-or-create runs under a file lock: two workers starting together would otherwise
        create two parent runs.
        """
        self.smoke = smoke
        # a tracking server or database: the study's lock, so workers on several machines find one parent run
        with store_lock(self._db) if self._db is not None else shared_lock(exp.storage_url, f"{exp.sweep.name}/mlflow"):
            self._start(exp, smoke)
            # under the same lock: two workers starting together register the benchmark once
            why = register_benchmark(self.client, self.uri, self.experiment_id, exp.benchmark.name,
                                     list(self.tasks().values()))
        if why:
            log.warning("%s", why)
        self.log_datasets(self.parent_id, self._run_splits(exp))

    def _run_splits(self, exp: ExperimentConfig) -> list[str]:
        """The splits this command runs on: ab.split for an A/B that picks one, else every split of the benchmark
        (a sweep searches on train and confirms on holdout; a single run runs every task)."""
        if exp.sweep.kind == "ab" and exp.ab.split != "all":
            return [exp.ab.split]
        return list(self.inputs())

    def _start(self, exp: ExperimentConfig, smoke: bool) -> None:
        self.experiment_id = self._experiment_id()
        runs = self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.{PARENT_TAG} = 'true' and tags.sweep = '{exp.sweep.name}'",
            max_results=1,
        )
        if runs:
            self.parent_id = runs[0].info.run_id
            if runs[0].info.status != "RUNNING":
                self.client.update_run(self.parent_id, status="RUNNING")
        else:
            tags = {PARENT_TAG: "true", "sweep": exp.sweep.name, "kind": exp.sweep.kind,
                    "mlflow.runName": f"{exp.sweep.name}", "benchmark": exp.benchmark.name,
                    RUN_TYPE_TAG: EVALUATION_RUN}  # the UI lists it (and its trials) under "Evaluation runs"
            if smoke:
                tags["smoke"] = "true"
            run = self.client.create_run(self.experiment_id, tags=tags)
            self.parent_id = run.info.run_id
            params = {**trial_params(exp), "sweep.kind": exp.sweep.kind, "sweep.n_trials": exp.sweep.n_trials,
                      "sweep.pruner": exp.sweep.pruner, "sweep.sampler": exp.sweep.sampler,
                      "sweep.operators": ",".join(exp.sweep.operators),
                      "sweep.baseline_repeats": exp.sweep.baseline_repeats, "sweep.alpha": exp.sweep.alpha,
                      "sweep.holdout_top_k": exp.sweep.holdout_top_k, "sweep.holdout_test": exp.sweep.holdout_test,
                      "sweep.holdout_baseline_runs": exp.sweep.holdout_baseline_runs,
                      "sweep.holdout_candidate_runs": exp.sweep.holdout_candidate_runs,
                      "sweep.storage": mask_url(exp.storage_url)}
            self._log_params(self.parent_id, params)
        # sweep.storage / tracking_uri passwords stay out of MLflow
        self.client.log_text(self.parent_id, mask_secrets(json.dumps(experiment_dict(exp), indent=2, default=str)),
                             "config/resolved_config.json")

    def _log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i:i + 100])

    def _log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int = 0) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(metric_key(k), float(v), now, step) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and v == v]
        for i in range(0, len(items), 500):
            self.client.log_batch(run_id, metrics=items[i:i + 500])

    def child_runs(self, kind: str) -> list[Any]:
        """The parent's nested runs tagged kind=`kind` (trial, ab_cell, ...)."""
        if self.parent_id is None:
            return []
        return self.client.search_runs(
            [self.experiment_id],
            filter_string=f"tags.mlflow.parentRunId = '{self.parent_id}' and tags.kind = '{kind}'",
            max_results=10000,
        )

    def trial_runs(self) -> list[Any]:
        return self.child_runs("trial")

    def _logged_trials(self) -> set[int]:
        return {int(r.data.tags["trial_number"]) for r in self.trial_runs() if "trial_number" in r.data.tags}

    def _trials_lock(self) -> Any:
        """The study's lock for trial runs, held by one worker at a time on any machine (experiments.storage.shared_lock):
        a run is checked for and created under it, so a worker's sync at start and another's log after tell never
        both log a trial (measured without it: a duplicate baseline run with three workers under load)."""
        return shared_lock(self.exp.storage_url, f"{self.exp.sweep.name}/mlflow_trials",
                           self.exp.sweep_dir / ".mlflow_trials.lock")

    def log_trial_once(self, trial: Any, outcome: Any = None, *, baseline: Mapping[str, str] | None = None) -> bool:
        """log_trial unless the trial has a run already (another worker's sync may have logged it between this
        worker's tell and now). True when it logged."""
        with self._trials_lock():
            if trial.number in self._logged_trials():
                return False
            self.log_trial(trial, outcome, baseline=baseline)
            return True

    def log_trial(self, trial: Any, outcome: Any = None, *, baseline: Mapping[str, str] | None = None) -> None:
        """One nested run for a finished Optuna trial; artifacts from the outcome when this process ran it."""
        attrs, state = trial.user_attrs, trial.state.name
        status = TRIAL_STATUS.get(state, "FAILED")
        tags = {"mlflow.parentRunId": self.parent_id, "kind": "trial", "trial_number": str(trial.number),
                "state": state, "sweep": self.exp.sweep.name,
                "mlflow.runName": f"trial-{trial.number:03d}-{attrs.get('operator', '?')}"}
        if state == "PRUNED":  # stopped early by the search's own rule: a result, not a run someone killed
            tags["pruned"] = pruned_by(attrs)
        if self.smoke or attrs.get("smoke"):
            tags["smoke"] = "true"
        if attrs.get("duplicate_of") is not None:
            tags["duplicate_of"] = str(attrs["duplicate_of"])
        if attrs.get("fail_reason"):
            tags["fail_reason"] = str(attrs["fail_reason"])[:4000]
        run = self.client.create_run(self.experiment_id, tags=tags)
        rid = run.info.run_id
        params = {**trial_params(self.exp), "operator": attrs.get("operator") or trial.params.get("operator"),
                  "operator_requested": attrs.get("operator_requested") or trial.params.get("operator"),
                  "instruction_hash": attrs.get("instruction_hash"), "parent_hash": attrs.get("parent_hash"),
                  "trial_number": trial.number}
        self._log_params(rid, params)
        metrics: dict[str, float] = {}
        value = trial.value if state == "COMPLETE" else attrs.get("partial_value")
        if value is not None:
            metrics["composite"] = value
        for k, v in (attrs.get("dimensions") or {}).items():
            metrics[f"dim.{k}"] = v
        task_scores = dict(attrs.get("task_scores") or {})
        if task_scores:  # per-task scores go to the task_scores.json table, not one metric key per task
            metrics["n_tasks"] = len(task_scores)
        for key in ("judge_sd", "elapsed_s", "llm_calls", "selection_mean", "selection_bias"):
            if isinstance(attrs.get(key), (int, float)):
                metrics[key] = attrs[key]
        metrics |= {"duplicate": float(attrs.get("duplicate_of") is not None), **self.costs.metrics(attrs)}
        ev = getattr(outcome, "evaluation", None)
        if ev is not None:
            metrics["prompt_tokens"] = sum(s.prompt_tokens for s in ev.scores)
            metrics["completion_tokens"] = sum(s.completion_tokens for s in ev.scores)
            metrics["latency_s"] = sum(s.latency_s for s in ev.scores)
            metrics["cache_hits"] = sum(s.cached_calls for s in ev.scores)
            metrics["harness_llm_calls"] = sum(s.llm_calls for s in ev.scores)
        self._log_metrics(rid, metrics)
        for step, v in sorted(trial.intermediate_values.items()):
            self._log_metrics(rid, {"task_score_by_step": v}, step=int(step))
        instructions = attrs.get("instructions") or {}
        for tt, text in instructions.items():
            self.client.log_text(rid, text + "\n", f"instructions/{tt}.md")
        if baseline and instructions:
            self.client.log_text(rid, instruction_diff(baseline, instructions) + "\n", "instructions/diff_vs_baseline.patch")
        if attrs.get("note"):
            self.client.log_text(rid, str(attrs["note"]) + "\n", "mutation_note.txt")
        if ev is not None:
            for s in ev.scores:
                if s.output_text:
                    self.client.log_text(rid, s.output_text, f"outputs/{s.task_id}.md")
        if task_scores:
            log_task_table(self.client, rid, task_table(task_scores, self.tasks()))
        self.log_datasets(rid, ["train"])  # a trial is scored on the train split
        self.client.set_terminated(rid, status=status)
        failed = getattr(outcome, "failed_run", None)
        if ev is not None or failed is not None:
            self._log_traces(rid, trial.number, ev.scores if ev is not None else (), failed=(failed,) if failed else ())

    def _log_traces(self, run_id: str, number: int, scores: Iterable[Any], failed: Iterable[Any] = ()) -> None:
        """Each task run of the trial as an MLflow trace with the evaluator's assessments, and the run that failed
        the trial as one with status ERROR, linked to the trial's run (experiments.tracking). Runs after the
        trial's run is complete: a failure raises TraceLoggingError, which the sweep's guard prints as one warning
        line, and loses nothing else."""
        from ._traces import log_trial_traces

        requests = {t.id: {"task": t.task, "task_id": t.id, "task_type": t.task_type} for t in self.tasks().values()}
        log_trial_traces(self.client, self.uri, experiment_id=self.experiment_id, run_id=run_id, scores=list(scores),
                         requests=requests, default_judge=self.exp.backend.evaluator_model,
                         tags={"sweep": self.exp.sweep.name, "trial_number": str(number)}, failed=list(failed))

    def sync(self, trials: Iterable[Any], baseline: Mapping[str, str] | None = None) -> int:
        """Log finished trials that have no child run yet (a crash between tell and logging); idempotent. A trial run
        left RUNNING (its process stopped while logging it: a second Ctrl-C, a full disk) is deleted and logged again
        from the study, complete, so no trial run stays RUNNING after a successful resume."""
        n = 0
        with self._trials_lock():
            runs = self.trial_runs()
            for r in runs:
                if r.info.status == "RUNNING":  # under the lock no live process is logging it
                    self.client.delete_run(r.info.run_id)
            have = {int(r.data.tags["trial_number"]) for r in runs
                    if "trial_number" in r.data.tags and r.info.status != "RUNNING"}
            for t in sorted(trials, key=lambda t: t.number):
                if t.state.name in ("COMPLETE", "PRUNED", "FAIL") and t.number not in have:
                    self.log_trial(t, None, baseline=baseline)
                    n += 1
        return n

    def log_child(self, name: str, tags: Mapping[str, str], metrics: Mapping[str, float],
                  texts: Mapping[str, str] = {}, *, params: Mapping[str, Any] | None = None,
                  status: str | None = "FINISHED", splits: Iterable[str] = (),
                  task_scores: Mapping[str, float] | None = None) -> str | None:
        """A nested non-trial run (baseline repeats, holdout confirmations, A/B cells); its run id. `splits`: the
        benchmark splits it ran on, logged as its dataset inputs; `task_scores`: its per-task scores, logged as the
        task_scores.json table. status None leaves it RUNNING for the caller to add to and end (end_child)."""
        all_tags = {"mlflow.parentRunId": self.parent_id, "mlflow.runName": name, "sweep": self.exp.sweep.name,
                    **tags}
        if self.smoke:
            all_tags["smoke"] = "true"
        rid = self.client.create_run(self.experiment_id, tags=all_tags).info.run_id
        self._log_metrics(rid, metrics)
        if params:
            self._log_params(rid, params)
        for path, text in texts.items():
            self.client.log_text(rid, text, path)
        if task_scores:
            log_task_table(self.client, rid, task_table(task_scores, self.tasks()))
        self.log_datasets(rid, splits)
        if status is not None:
            self.client.set_terminated(rid, status=status)
        return rid

    def end_child(self, run_id: str | None, status: str = "FINISHED") -> None:
        if run_id is not None:
            self.client.set_terminated(run_id, status=status)

    def logged_child(self, name: str, tags: Mapping[str, str]) -> bool:
        """Whether the parent has an ended nested run of this name and tags (a step a killed process logged before
        the study stored it: logged once). One it left unended (killed mid-logging) is deleted, to be logged again."""
        found = [r for r in self.child_runs(tags["kind"]) if r.data.tags.get("mlflow.runName") == name
                 and all(r.data.tags.get(k) == v for k, v in tags.items())]
        ended = [r for r in found if r.info.status != "RUNNING"]
        for r in found:
            if r.info.status == "RUNNING":
                self.client.delete_run(r.info.run_id)
        return bool(ended)

    def log_parent(self, *, params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
                   texts: Mapping[str, str] | None = None, files: Iterable[Path | str] = (),
                   artifact_path: str = "") -> None:
        """Params (those the parent does not have yet: a logged param cannot change), tags, texts and files
        on the parent run."""
        if self.parent_id is None:
            return
        if params:
            have = self.client.get_run(self.parent_id).data.params
            new = {k: v for k, v in params.items() if k not in have}
            if new:
                self._log_params(self.parent_id, new)
        for k, v in (tags or {}).items():
            self.client.set_tag(self.parent_id, k, v)
        for path, text in (texts or {}).items():
            self.client.log_text(self.parent_id, text, path)
        for f in files:
            self.client.log_artifact(self.parent_id, str(f), artifact_path or None)

    def kill(self) -> None:
        """Mark the parent run KILLED (an interrupted run; the next start sets it RUNNING again)."""
        if self.parent_id is not None:
            self.client.set_terminated(self.parent_id, status="KILLED")

    def finish(self, metrics: Mapping[str, float], texts: Mapping[str, str], *, status: str = "FINISHED",
               tags: Mapping[str, str] | None = None) -> None:
        """The parent's metrics, tags and files, then it ends with `status`; a nested run still RUNNING (a process
        stopped while logging it) ends KILLED first, so no run of a concluded sweep reads as still running. The
        parent ends even when a file cannot be written (an artifact folder gone or read-only): FAILED then, and the
        error is raised after."""
        if self.parent_id is None:
            return
        try:
            self._log_metrics(self.parent_id, metrics)
            for k, v in (tags or {}).items():
                self.client.set_tag(self.parent_id, k, str(v)[:5000])
            for path, text in texts.items():
                self.client.log_text(self.parent_id, text, path)
        except Exception:
            status = "FAILED"
            raise
        finally:
            for r in self.client.search_runs([self.experiment_id], filter_string=f"tags.mlflow.parentRunId = "
                                             f"'{self.parent_id}' and attributes.status = 'RUNNING'",
                                             max_results=10000):
                self.client.set_terminated(r.info.run_id, status="KILLED")
            self.client.set_terminated(self.parent_id, status=status)


def make_tracker(exp: ExperimentConfig) -> NullTracker:
    return MLflowTracker(exp) if exp.mlflow.enabled else NullTracker()
