"""A sweep's progress lines and ETA: one line per finished task (phase, task j of m, score, elapsed, ETA of the
phase) and one per finished trial (state, value, best so far, elapsed, ETA of the sweep, LLM calls).

SweepProgress.task_done is the experiments.runs.TimedRunner callback: it runs on the worker that finished the
task, one at a time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from optuna.trial import FrozenTrial, TrialState

from experiments.report import hms, num
from experiments.runs import abandoned_run


@dataclass
class Phase:
    """The evaluation in progress (a trial, a baseline repeat, a holdout run): label, run-id prefix, task count."""

    label: str
    prefix: str
    total: int
    t0: float = field(default_factory=time.perf_counter)
    done: int = 0


class SweepProgress:
    def __init__(self, name: str, out: Callable[[str], None]) -> None:
        self.name, self.out = name, out
        self.t0 = time.perf_counter()
        self.phase: Phase | None = None
        self.task_s: list[float] = []  # seconds per finished task in this process (for the ETA)
        self.trial_s: list[float] = []  # seconds per trial run in this process
        self.measured: list[tuple[int, int, float]] = []  # (uncached calls, tokens, seconds) per task run here
        self.on_first_model_task: Callable[[], None] | None = None  # called once, after the first uncached task

    def begin(self, label: str, prefix: str, total: int) -> None:
        self.phase = Phase(label, prefix, total)

    def task_done(self, kind: str, run_id: str, outcome: Any, seconds: float) -> None:
        dropped = not outcome.ok and abandoned_run(outcome.error or "")  # in flight when its trial was decided
        u = outcome.usage
        if not dropped:  # a dropped run did part of a task: not a task's time or cost
            self.task_s.append(seconds)
            self.measured.append((u.uncached_calls, u.prompt_tokens + u.completion_tokens, seconds))
        ph = self.phase
        if ph is not None:
            ph.done += 1
            task = run_id[len(ph.prefix) + 1:] if run_id and run_id.startswith(ph.prefix + "-") else (run_id or "?")
            score = outcome.score if outcome.ok else None
            per_task = (time.perf_counter() - ph.t0) / ph.done
            what = ("score " + num(score) if score is not None else
                    "stopped with its trial (raced or gated out)" if dropped else "FAILED")
            self.out(f"[{self.name}] {ph.label} task {ph.done}/{ph.total} {task} {what}  elapsed "
                     f"{hms(time.perf_counter() - self.t0)}  ETA {ph.label.split(' ')[0]} "
                     f"{hms(per_task * max(ph.total - ph.done, 0))}")
        if self.on_first_model_task is not None and u.uncached_calls > 0:  # the first task that reached the model
            pending, self.on_first_model_task = self.on_first_model_task, None
            pending()

    def eta_s(self, done: int, *, n_trials: int, holdout_runs: int, at_once: int,
              timeout_s: float | None) -> float | None:
        """Seconds left: remaining trials at this process's mean trial time, plus `holdout_runs` task runs (the
        holdout confirmation, `at_once` side by side) at the mean task time; capped by the timeout. None before
        anything was timed."""
        if not self.trial_s:
            return None
        left = max(n_trials - done, 0) * (sum(self.trial_s) / len(self.trial_s))
        if holdout_runs and self.task_s:
            left += holdout_runs * (sum(self.task_s) / len(self.task_s)) / max(at_once, 1)
        if timeout_s is not None:
            left = min(left, max(timeout_s - (time.perf_counter() - self.t0), 0.0))
        return left

    def trial_line(self, frozen: FrozenTrial, best: FrozenTrial | None, *, done: int, n_trials: int,
                   eta: float | None, calls: int, budget: str) -> str:
        a = frozen.user_attrs
        value = frozen.value if frozen.state == TrialState.COMPLETE else a.get("partial_value")
        extra = f" ({a['fail_reason'][:80]})" if a.get("fail_reason") else ""
        extra += f" (duplicate of #{a['duplicate_of']})" if a.get("duplicate_of") is not None else ""
        return (f"[{self.name}] trial {done}/{n_trials} #{frozen.number} {a.get('operator', '?'):<14} "
                f"{frozen.state.name:<8} value {num(value)}  best {num(best.value if best else None)}"
                f"{f' (#{best.number})' if best else ''}  elapsed {hms(time.perf_counter() - self.t0)}  ETA "
                f"{hms(eta) if eta is not None else 'n/a'}  LLM calls {calls}{budget}{extra}")
