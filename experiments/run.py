"""Entry point: `python -m experiments.run [+sweep=synth_mutation|prior_knowledge_ab|single|calibrate] [overrides]`.

`hydra_main` is the one-line @hydra.main wrapper; `run_experiment(cfg)` is a plain function (validate, then dispatch on
sweep.kind). Exceptions become one-line messages here, at the CLI edge, and nowhere else.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any, Callable

import hydra
from omegaconf import DictConfig

from experiments.config import TASK_KINDS, ConfigError, ExperimentConfig, to_experiment, to_harness_config, validate
from harness.backends import quiet_http_logs
from harness.compose import warn_judge
from harness.stores import StoreError, damaged, fault_in


def make_runner(exp: ExperimentConfig) -> Any:
    """The real harness behind the runner protocol, built from the experiment's harness config."""
    from experiments.runs import HarnessRunner

    return HarnessRunner(to_harness_config(exp))


def run_single(exp: ExperimentConfig, runner: Any, *, tracker: Any = None, out: Callable[[str], None] = print) -> dict[str, float]:
    """One run of the configured instructions on every benchmark task; per-task scores logged to MLflow."""
    from experiments.config import load_tasks, task_types
    from experiments.report import SMOKE_LINE
    from experiments.runs import TrialFailed, baseline_instructions, evaluate_candidate
    from experiments.storage import label_for
    from experiments.tracking import make_tracker

    tasks = load_tasks(exp.benchmark)
    instructions = baseline_instructions(exp, task_types(tasks))
    tracker = tracker if tracker is not None else make_tracker(exp)
    smoke = bool(getattr(runner, "smoke", False))
    tracker.start(exp, smoke=smoke)
    scores: dict[str, float] = {}
    failed = 0
    first_error = ""
    try:
        for i, task in enumerate(tasks, 1):
            try:
                ev = evaluate_candidate(instructions, [task], runner, seed=exp.seed, run_prefix=f"{exp.sweep.name}")
            except TrialFailed as exc:
                failed += 1
                first_error = first_error or f"{task.id}: {exc}"
                out(f"[{exp.sweep.name}] task {i}/{len(tasks)} {task.id}: FAILED {exc}")
                continue
            s = ev.scores[0]
            scores[task.id] = s.score
            out(f"[{exp.sweep.name}] task {i}/{len(tasks)} {task.id}: composite {s.score:.3f}")
            tracker.log_child(f"task-{task.id}", {"kind": "task", "task_id": task.id, "split": task.split},
                              {"composite": s.score, "judge_sd": s.judge_sd, "llm_calls": s.llm_calls,
                               "cache_hits": s.cached_calls, "latency_s": s.latency_s,
                               **{f"dim.{k}": v for k, v in s.dimensions.items()}},
                              {f"outputs/{task.id}.md": s.output_text or "(empty)"})
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the parent run is closed, not left RUNNING
        tracker.kill()
        raise
    mean = sum(scores.values()) / len(scores) if scores else float("nan")
    lines = ["===== RUN SUMMARY ====="]
    label = label_for(exp, runner.identity(), tasks) or (SMOKE_LINE if smoke else None)
    if label:
        lines.append(label)
    lines += [f"tasks: {len(tasks)} ({failed} failed)", f"mean composite: {mean:.3f}"]
    lines += [f"task {k}: {v:.3f}" for k, v in scores.items()]
    lines += [f"MLflow UI: {tracker.ui_command()}", "===== END RUN SUMMARY ====="]
    text = "\n".join(lines)
    tracker.finish({"composite": mean, "failed": failed} if scores else {"failed": failed}, {"summary.md": text + "\n"},
                   status="FINISHED" if scores else "FAILED")
    out(text)
    if failed:  # a failure never becomes data: the mean above is over the tasks that ran, and the run says so (exit 3)
        raise TrialFailed(f"{failed} of {len(tasks)} task(s) failed, the mean is over the other {len(scores)} "
                          f"(first: {first_error[:300]})")
    return scores


def checked(exp: ExperimentConfig) -> ExperimentConfig:
    """exp validated (experiments.config.validate) and, for an A/B, its design checked (experiments.ab.check_ab_design:
    the metric exists and the test can reach alpha): everything refused before anything is written."""
    validate(exp, warn=False)
    if exp.sweep.kind in TASK_KINDS:  # no harness run: its files are read by check_task_supply (_precheck, run)
        return exp
    if exp.sweep.kind == "ab":
        from experiments.ab import check_ab_design

        check_ab_design(exp)
    warn_judge(exp.backend)  # after every check: a config refused makes no backend probe
    return exp


def run_experiment(cfg: DictConfig | ExperimentConfig, *, runner: Any = None, out: Callable[[str], None] = print) -> Any:
    """Validate, build the runner, dispatch on sweep.kind (single | synth_mutation | ab | calibrate)."""
    exp = checked(to_experiment(cfg))
    kind = exp.sweep.kind
    if kind in TASK_KINDS:
        from experiments.tasks import check_task_supply

        check_task_supply(exp)
    if kind == "import_tasks" and not exp.task_supply.headroom:  # reads a file, writes a benchmark: no model
        from experiments.tasks import run_task_supply

        return run_task_supply(exp, out=out)
    if runner is None:
        from harness.backends import preflight

        preflight(exp.backend)  # server down / model missing: fail before a study, run or cache is written
        if exp.backend.kind in ("ollama", "openai") and kind != "single":  # a night's run: each role answers first
            from harness.backends.readiness import require_ready

            require_ready(exp.backend, out=out)
    if kind in TASK_KINDS:  # the generator models, or the headroom screen's baseline runs: no study, no MLflow store
        from experiments.tasks import run_task_supply

        try:
            return run_task_supply(exp, out=out)
        except Exception as exc:
            if stopped_by_model(exc):  # its accepted batches are journalled: the same command goes on
                raise Unconcluded(f"{type(exc).__name__}: {exc}") from exc
            raise
    from experiments.storage import check_services

    check_services(exp)  # the study's database and the MLflow store: driver missing / unreachable, one line
    try:
        if kind == "ab":  # validated and design-checked above (checked): the A/B runs this experiment as it is
            from experiments.ab import run_ab_test

            return run_ab_test(exp, out=out)
        runner = runner if runner is not None else make_runner(exp)
        if kind == "single":
            return run_single(exp, runner, out=out)
        if kind == "calibrate":
            from experiments.calibration import run_calibration

            return run_calibration(exp, runner, out=out)
        from experiments.sweep import run_sweep

        return run_sweep(exp, runner, out=out)
    except Exception as exc:
        if stopped_by_model(exc):  # the run had started: what it finished is stored, the same command goes on
            raise Unconcluded(f"{type(exc).__name__}: {exc}") from exc
        raise


class Unconcluded(RuntimeError):
    """A sweep, A/B or calibration that a failed model call stopped after it started: the CLI says what
    failed and that the same command resumes, exit 3, as for a failed race or holdout run."""

    @property
    def needs_fix(self) -> bool:
        """A prompt over the window or a missing model: the same command fails again until the config changes."""
        from harness.inference import ContextOverflow, ModelMissing

        seen: BaseException | None = self.__cause__
        while seen is not None:
            if isinstance(seen, (ContextOverflow, ModelMissing)):
                return True
            seen = seen.__cause__
        return False


def stopped_by_model(exc: BaseException) -> bool:
    """A failed model call (harness.inference.BackendError and its kinds) or a run it failed (TrialFailed, the
    calibration's CalibrationFailed), also one raised as the cause of another."""
    from experiments.runs import TrialFailed
    from harness.inference import BackendError

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (BackendError, TrialFailed)) or type(seen).__name__ == "CalibrationFailed":
            return True
        seen = seen.__cause__
    return False


@hydra.main(version_base=None, config_path="../conf", config_name="config")
def hydra_main(cfg: DictConfig) -> None:
    cli(cfg)


# Exit codes: 0 done; 1 an error; 2 a config error; 3 the run could not answer: a failed model call stopped it
# after it started, its baseline failed, trials failed because a model call failed, it stopped past its failure
# rate, or a step after the search (the final race or a holdout run) did not conclude: its finished runs are stored
# and the same command runs the rest; 130 Ctrl-C (SIGINT); 143 SIGTERM. The last three are resumable:
# the same command continues.
EXIT_UNCONCLUDED, EXIT_SIGINT, EXIT_SIGTERM = 3, 130, 143
RESUME = "finished runs are stored: run the same command again to resume"


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be: it stops the run the same way (the trial told
    and queued again, the MLflow runs closed) instead of killing the process where it stands."""


def _on_stop_signal(signum: int, frame: Any) -> None:
    """The first SIGINT (Ctrl-C) or SIGTERM stops the run; each later one, while it closes, changes nothing: a second
    Ctrl-C 0.01 s after the first would otherwise raise inside the bookkeeping, so the trial's copy would never be
    queued and its MLflow run would stay RUNNING."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _while_stopping)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _while_stopping(signum: int, frame: Any) -> None:
    os.write(2, f"already stopping: queuing the trial again and closing the runs (kill -9 {os.getpid()} stops at "
                f"once; the same command then cleans up)\n".encode())


def install_stop_signals() -> None:
    """SIGTERM and SIGINT stop the run through _on_stop_signal (SIGINT only where Python's Ctrl-C handler is in
    place: a process started with SIGINT ignored keeps it ignored)."""
    signal.signal(signal.SIGTERM, _on_stop_signal)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_stop_signal)


def cli(cfg: DictConfig) -> None:
    if threading.current_thread() is threading.main_thread():
        install_stop_signals()
    # a log file that can no longer be written (Hydra's run.log under a full or read-only results folder) prints no
    # traceback per record: the store that failed stops the run with its own one line
    logging.raiseExceptions = False
    quiet_http_logs()  # Hydra's logging shows INFO: httpx would add one line per model call
    try:
        result = run_experiment(cfg)
        from experiments.sweep import SweepSummary

        if getattr(result, "failed_out", False) and not isinstance(result, SweepSummary):  # a calibration's check
            print(f"error: sweep stopped: {result.stop_reason} (see the summary above)", file=sys.stderr)
            sys.exit(1)
        if getattr(result, "failed_out", False):  # a sweep stopped past its failure rate: it could not answer
            why = "; ".join(getattr(result, "unconcluded", ()))
            print(f"error: sweep stopped: {result.stop_reason}{f' ({why})'[:400] if why else ''} (see the summary "
                  f"above); {RESUME}", file=sys.stderr)
            sys.exit(EXIT_UNCONCLUDED)
        if getattr(result, "unconcluded", ()):  # a failed baseline, race, holdout run or A/B cell: no conclusion
            print(f"error: {getattr(result, 'noun', 'sweep')} did not conclude: {'; '.join(result.unconcluded)[:400]}; "
                  f"{RESUME}", file=sys.stderr)
            sys.exit(EXIT_UNCONCLUDED)
    except Unconcluded as exc:  # a failed model call stopped the run after it started
        if os.environ.get("HARNESS_DEBUG"):
            import traceback

            traceback.print_exception(exc.__cause__ or exc, file=sys.stderr)
        fix = "once that is fixed, " if exc.needs_fix else ""
        print(f"error: {str(exc)[:600]}; {fix}run the same command again to resume", file=sys.stderr)
        sys.exit(EXIT_UNCONCLUDED)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        sys.exit(2)
    except StoreError as exc:  # a damaged or unwritable store, named: the run stops (harness.stores)
        print(f"error: {exc}", file=sys.stderr)
        leave(1)
    except KeyboardInterrupt as exc:
        what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"{what}: run the same command again to resume", file=sys.stderr)
        sys.exit(EXIT_SIGTERM if isinstance(exc, Terminated) else EXIT_SIGINT)
    except Exception as exc:
        if os.environ.get("HARNESS_DEBUG"):
            raise
        store = store_fault(exc, cfg)
        print(f"error: {store}" if store else
              f"error: {type(exc).__name__}: {exc} (HARNESS_DEBUG=1 shows the traceback)", file=sys.stderr)
        leave(1)


def leave(code: int) -> None:
    """sys.exit(code), or, when a SQLite file this process used can no longer be written (its -shm turned read-only
    or immutable under it), leave without closing the connections: closing one writes its memory-mapped WAL index,
    which the kernel answers with SIGBUS (a Bus error, exit 135, after the one-line error)."""
    from harness.stores import unsafe_to_close

    if unsafe_to_close():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def store_fault(exc: BaseException, cfg: Any) -> StoreError | None:
    """A damaged SQLite file met inside Optuna or MLflow (which wrap SQLite's error in their own, without the file):
    a StoreError naming the study's storage or the MLflow store, whichever SQLite now reads as damaged. No space
    left (DiskFull: the file the error names, else the results folder) or a file another process keeps locked
    (StoreLocked) are named too. None when no SQLite fault is behind exc."""
    from experiments.config import tracking_uri
    from experiments.sweep import STUDY_ADVICE
    from harness.stores import sqlite_file
    from harness.stores import DiskFull, StoreLocked, full_in, locked_in

    try:
        exp = to_experiment(cfg)
        stores = [(exp.storage_url, STUDY_ADVICE), (tracking_uri(exp), MLFLOW_ADVICE)]
        folder = str(exp.results_dir)
    except Exception:  # the config itself is what failed: no file to name
        stores, folder = [], "the results folder"
    full = full_in(exc)
    if full is not None:
        return full if isinstance(full, DiskFull) else DiskFull(getattr(full, "filename", None) or folder, full)
    if locked_in(exc) is not None:
        from experiments.storage import locked_store

        files = [p for p in (sqlite_file(url) for url, _ in stores) if p is not None]
        return locked_store(files) or StoreLocked(" or ".join(map(str, files)) or "(a SQLite store of this run)")
    fault = fault_in(exc)
    if fault is None:
        return None
    for url, advice in stores:
        path = sqlite_file(url)
        found = damaged(path) if path is not None else None
        if found is not None:
            return StoreError(path, found, advice)
    return StoreError("(a SQLite store of this run)", fault)


MLFLOW_ADVICE = ("the MLflow runs are in it (the study is in its own file): restore it from a backup, or move it "
                 "aside to log to a new one, then run the same command again")


def _precheck(argv: list[str]) -> None:
    """Compose once before Hydra so a bad group option or type is one line, not Hydra's multi-line report."""
    overrides = [a for a in argv if not a.startswith("-")]
    if len(overrides) != len(argv):
        return  # hydra flags (--cfg, --multirun, ...): let Hydra handle everything
    from experiments.config import compose_config

    try:
        exp = checked(to_experiment(compose_config(overrides)))  # bad values too: rejected before Hydra writes its folder
        if exp.sweep.kind in TASK_KINDS:  # the source's rows, the journal, the calibration: before Hydra writes
            from experiments.tasks import check_task_supply

            check_task_supply(exp)
        if exp.sweep.kind == "synth_mutation":
            from experiments.sweep import check_decision_rule, stored_decision_rule

            # a resume under another decision rule: refused up front
            check_decision_rule(stored_decision_rule(exp), exp)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        sys.exit(2)
    except StoreError as exc:  # the study's file is damaged: named, before Hydra writes anything
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


def command_line_wins(argv: list[str], environ: Any = os.environ) -> None:
    """Drop from the environment each toggle whose field the command line sets (harness.compose._hydra.ENV_FIELDS), as
    `python -m harness` does: `results_dir=x` beside an exported HARNESS_RESULTS_DIR writes to x."""
    from harness.compose import command_line_environ

    kept = command_line_environ([a for a in argv if not a.startswith("-")], environ)
    for name in [k for k in environ if k not in kept]:
        del environ[name]


if __name__ == "__main__":
    from experiments.tasks import cli_keys

    sys.argv[1:] = cli_keys(sys.argv[1:])  # tasks.<key> is the task_supply node (ExperimentConfig.tasks is a method)
    command_line_wins(sys.argv[1:])
    _precheck(sys.argv[1:])
    hydra_main()
