"""Evaluating a candidate: the harness's finish() on each task, per-task scores reported to the trial.

evaluate_candidate is the one place a candidate's instructions meet the runner (experiments.runs): the sweep's
trials, its baseline repeats and holdout runs, `+sweep=single` and the calibration all score through it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from experiments.config import ExperimentConfig, Task

from ._outcome import MODEL_FAILURES, TaskOutcome, Usage, raised
from ._pool import SERIAL, RunPool
from ._runners import Runner


@dataclass(frozen=True)
class FailedRun:
    """A harness run of one task that failed or raised: what its MLflow trace shows (trace_path None: it raised
    before writing one; context_trace_path: the reused context's preparation, as TaskScore's)."""

    task_id: str
    task_type: str
    error: str
    trace_path: str | None = None
    context_trace_path: str | None = None
    judge_failures: int = 0  # judge replies that could not be read in that run


class TrialFailed(RuntimeError):
    """The candidate could not be evaluated (a harness run failed or raised, its judged score was missing, or no
    mutation was possible). `failed` is the harness run that failed, when one did; `judge_failures` the judge
    replies that could not be read in the runs taken before the failure and the failed one."""

    def __init__(self, message: str, *, failed: FailedRun | None = None, judge_failures: int = 0) -> None:
        super().__init__(message)
        self.failed = failed
        self.judge_failures = judge_failures

    @property
    def model_failed(self) -> bool:
        """A model call failed (the server, not the candidate: down, HTTP 429/500, a timeout, an error reply) rather
        than the candidate's own run (a missing judged score, a prompt over the window): the same candidate is
        tried again on the next start."""
        return model_failure(self.failed.error if self.failed is not None else str(self))



def model_failure(error: str) -> bool:
    """Whether a run's error line ("Type: message", possibly after a stage's "... failed: ") is a failed model call."""
    return raised(error, *MODEL_FAILURES)


def abandoned_run(error: str) -> bool:
    """Whether a run's error line says it was dropped with its trial (harness.inference.RunAbandoned at its next
    model call, after a race or gate decided): nothing failed, and it ran only part of its task."""
    return raised(error, "RunAbandoned")


@dataclass(frozen=True)
class TaskScore:
    task_id: str
    task_type: str
    score: float
    dimensions: dict[str, float] = field(default_factory=dict)
    judge_sd: float = 0.0
    feedback: str = ""
    weaknesses: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)  # the run's LLM usage (tokens, calls, cache hits, latency)
    output_text: str = ""
    output_path: str | None = None
    smoke: bool = False
    selection_score: float | None = None  # the wiggum loop's best round (chosen by the same judge sample)
    rescored: bool = False  # score is an independent judge sample of the kept text
    judge_failures: int = 0  # judge replies that could not be read in the run (it still got a judged score)
    trace_path: str | None = None  # the run's Chrome trace file (an MLflow trace is built from it)
    context_trace_path: str | None = None  # the reused context's preparation (planning, memory, research)

    # the usage figures by name, as the cost metrics (experiments.stats.cost_by_task) and MLflow read them
    @property
    def prompt_tokens(self) -> int:
        return self.usage.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.usage.completion_tokens

    @property
    def latency_s(self) -> float:
        return self.usage.latency_s

    @property
    def llm_calls(self) -> int:
        return self.usage.llm_calls

    @property
    def cached_calls(self) -> int:
        return self.usage.cached_calls


@dataclass(frozen=True)
class CandidateEval:
    scores: tuple[TaskScore, ...]
    pruned: bool = False
    abandoned: int = 0  # tasks in flight when the trial stopped: cut at their next model call, results dropped
    abandoned_calls: int = 0  # the uncached model calls those dropped runs made (spent, not scored)
    stopped: bool = False  # the checkpoint (the minibatch gate) said stop: scores are the checkpoint's tasks only

    @property
    def mean(self) -> float:
        return sum(s.score for s in self.scores) / len(self.scores) if self.scores else float("nan")

    @property
    def judge_failures(self) -> int:
        """Judge replies that could not be read over the candidate's scored runs."""
        return sum(s.judge_failures for s in self.scores)

    def by_task(self) -> dict[str, float]:
        return {s.task_id: s.score for s in self.scores}

    @property
    def selection_mean(self) -> float:
        """Mean of the wiggum loop's own best-round scores (inflated by selection when the judge samples)."""
        vals = [s.selection_score if s.selection_score is not None else s.score for s in self.scores]
        return sum(vals) / len(vals) if vals else float("nan")

    @property
    def selection_bias(self) -> float:
        """selection_mean - mean: how much the loop's own choice flattered its kept texts, on average."""
        return self.selection_mean - self.mean if self.scores else float("nan")

    def dimension_means(self) -> dict[str, float]:
        sums: dict[str, list[float]] = {}
        for s in self.scores:
            for k, v in s.dimensions.items():
                sums.setdefault(k, []).append(float(v))
        return {k: sum(v) / len(v) for k, v in sums.items()}


# -- reading an outcome ------------------------------------------------------------------------------


def task_score(task: Task, outcome: TaskOutcome) -> TaskScore:
    """A runner's TaskOutcome -> TaskScore; raises TrialFailed when the run failed (a missing judged score is a
    failed run: outcome_from_result)."""
    if not outcome.ok:
        error = f"task {task.id!r} failed: {outcome.error or outcome.status}"
        raise TrialFailed(error, failed=FailedRun(task.id, task.task_type, outcome.error or outcome.status,
                                                  outcome.trace_path, outcome.context_trace_path,
                                                  outcome.judge_failures),
                          judge_failures=outcome.judge_failures)
    return TaskScore(
        task_id=task.id,
        task_type=task.task_type,
        score=float(outcome.score),
        dimensions=dict(outcome.dimensions),
        judge_sd=outcome.judge_sd,
        feedback=outcome.feedback,
        weaknesses=outcome.weaknesses,
        usage=outcome.usage,
        output_text=outcome.output_text,
        output_path=outcome.output_path,
        smoke=outcome.smoke,
        selection_score=outcome.selection_score,
        rescored=outcome.rescored,
        judge_failures=outcome.judge_failures,
        trace_path=outcome.trace_path,
        context_trace_path=outcome.context_trace_path,
    )


def evaluate_candidate(
    instructions: Mapping[str, str],
    tasks: Sequence[Task],
    runner: Runner,
    *,
    contexts: Mapping[str, Any] | None = None,
    seed: int = 0,
    trial: Any = None,
    run_prefix: str = "run",
    shuffle_seed: int | None = None,
    pool: RunPool | None = None,
    order: Sequence[int] | None = None,
    prune: bool = True,
    checkpoint: tuple[int | Sequence[int], Callable[[Sequence[TaskScore]], bool]] | None = None,
) -> CandidateEval:
    """Run the harness's finish() on each task with the candidate; report per-task scores to the trial.

    `order` (indices into `tasks`) runs those tasks only, in that order (a gate's minibatch, or the rest after it);
    prune=False reports without asking the pruner (the gate decides instead).

    Step ids are the task's index in `tasks` (stable across trials, as WilcoxonPruner needs); the order of
    evaluation is shuffled per trial when shuffle_seed is given. With a `pool` of N workers up to N tasks run at
    once; their results are taken, reported and checked for pruning in that order on this thread, so scores,
    reports and the prune decision are those of concurrency 1. A trial that should prune starts nothing more;
    the tasks already in flight end at their next model call and are dropped (CandidateEval.abandoned; the
    contexts are prepared and memory is frozen, so a run cut short leaves nothing shared half-built).

    `checkpoint` = (n, go): after the first n results (a gate's minibatch, reported but never pruned) go(scores)
    decides whether the rest run; False returns those n (CandidateEval.stopped). The tasks after n are in the
    same queue, so at concurrency N they start while the checkpoint's last tasks run instead of leaving workers
    idle until the decision; on a stop they end at their next model call and are dropped, as a pruned trial's.
    At concurrency 1 nothing starts before the caller's decision, so the checkpoint costs what two separate
    evaluations did. n may be several counts (a race's looks: go after each; the pruner is not asked at a look).
    """
    if order is None:
        order = list(range(len(tasks)))
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(order)
    order = list(order)
    looks = () if checkpoint is None else tuple(sorted({checkpoint[0]} if isinstance(checkpoint[0], int)
                                                       else set(checkpoint[0])))
    hold = looks[0] if looks else 0
    if looks and not 0 <= looks[0] <= looks[-1] <= len(order):
        raise ValueError(f"checkpoint after {', '.join(map(str, looks))} of {len(order)} tasks")

    def run(i: int) -> TaskOutcome:
        task = tasks[i]
        prepared = contexts[task.id] if contexts is not None else runner.prepare(task.task)
        return runner.finish(prepared, instructions=dict(instructions), run_id=f"{run_prefix}-{task.id}",
                             criteria=task.criteria(), seed=seed)

    scores: list[TaskScore] = []
    with (pool or SERIAL).ordered(run, order) as results:
        for i, fut in results:
            task = tasks[i]
            before = sum(s.judge_failures for s in scores)  # a failed trial still counts its judge failures
            try:
                outcome = fut.result()
            except TrialFailed as exc:
                exc.judge_failures += before
                raise
            except Exception as exc:
                raise TrialFailed(f"task {task.id!r} raised {type(exc).__name__}: {exc}",
                                  failed=FailedRun(task.id, task.task_type, f"{type(exc).__name__}: {exc}"),
                                  judge_failures=before) from exc
            if not isinstance(outcome, TaskOutcome):
                raise TypeError(f"runner.finish must return experiments.runs.TaskOutcome, got "
                                f"{type(outcome).__name__}")
            try:
                scores.append(task_score(task, outcome))
            except TrialFailed as exc:
                exc.judge_failures += before
                raise
            if trial is not None:
                trial.report(scores[-1].score, step=i)
            if checkpoint is not None and len(scores) in looks:
                if not checkpoint[1](tuple(scores)):
                    results.cancel(interrupt=True)
                    return CandidateEval(tuple(scores), stopped=True, abandoned=results.abandoned,
                                         abandoned_calls=results.dropped_calls)
            elif trial is not None and prune and hold < len(scores) < len(order) and trial.should_prune():
                results.cancel(interrupt=True)
                return CandidateEval(tuple(scores), pruned=True, abandoned=results.abandoned,
                                     abandoned_calls=results.dropped_calls)
    return CandidateEval(tuple(scores))


def baseline_instructions(exp: ExperimentConfig, task_types: Sequence[str]) -> dict[str, str]:
    """cfg.synth.instructions, falling back to harness.synthesis.DEFAULT_INSTRUCTIONS for missing types."""
    out = {tt: text for tt, text in exp.synth.instructions.items() if text and text.strip()}
    missing = [tt for tt in task_types if tt not in out]
    if missing:
        try:
            from harness.synthesis import DEFAULT_INSTRUCTIONS
        except ImportError as exc:
            raise TrialFailed(
                f"synth.instructions has no text for {missing} and harness.synthesis.DEFAULT_INSTRUCTIONS "
                "is not importable; expected instructions for every task type in the benchmark"
            ) from exc
        for tt in missing:
            out[tt] = DEFAULT_INSTRUCTIONS[tt]
    return {tt: out[tt] for tt in sorted(out)}
