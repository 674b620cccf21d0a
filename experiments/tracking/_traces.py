"""Harness runs as MLflow traces, built after the run from its Chrome trace file, scored by MLflow assessments.

The harness writes one Chrome trace per run (harness.tracing.Tracer.write) and never imports mlflow. After a trial,
MLflowTracker.log_trial (on the sweep's coordinating thread) hands each task's TaskScore here, and each becomes one
MLflow trace linked to the trial's run:

    read_chrome_trace  the file -> complete events and the wall-clock time of ts 0
    span_tree          events -> SpanNodes, each with its parent (the innermost span that contains it)
    assessments        TaskScore -> Feedback: a rubric dimension per judge score (LLM_JUDGE, the judge's model,
                       its feedback as rationale), a det_<criterion> per deterministic criterion and the
                       composite (CODE)
    with_context       a run that reused a context prepared earlier (the sweep prepares each task once): the
                       preparation's own trace (planning, memory recall, research) grafted in under a
                       prepare_context span that ends where the run starts, at its own durations, with the time
                       it really ran and the shift as attributes
    log_trial_traces   a trace per task (root = the run, a span per stage, LLM call, research round, ...,
                       at the real start/end times), its assessments, the link to the run; the run is then
                       tagged an evaluation run (mlflow.runType genai_evaluate). A harness run that failed
                       (FailedRun) is a trace too: status ERROR, the error line as the root's status, attribute
                       and exception event, the spans its trace file holds (none when it raised before one)

Harness runs outside trials are traced the same way by the code that logs their nested run, each trace linked to
that run (log_run_traces finds it by its tags): a sweep's baseline repeats and holdout runs (log_evaluation_run,
called from experiments.sweep) and each A/B cell (experiments.ab.ABTracking, tagged arm, blind label, task,
replication). A trace that fails to log is a warning there as for a trial; the run itself is already logged.

The MLflow UI then lists the trial under "Evaluation runs", and the run's Traces tab shows task by task the request,
the output, every assessment and its rationale. MLflow's tracing and assessment APIs write to the process-wide
tracking URI, so log_trial_traces points it at the tracker's store (and exports synchronously) for the call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from experiments.runs import FailedRun

RUN_TYPE_TAG = "mlflow.runType"  # mlflow.utils.mlflow_tags.MLFLOW_RUN_TYPE
EVALUATION_RUN = "genai_evaluate"  # what mlflow.genai.evaluate tags its run with; the UI lists it as "Eval"
TOKEN_USAGE = "mlflow.chat.tokenUsage"  # the span attribute the UI sums into a trace's token count
ASYNC_EXPORT = "MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"
SPAN_TYPES = {"stage": "CHAIN", "llm": "LLM", "research": "RETRIEVER", "memory": "MEMORY", "planner": "CHAIN",
              "round": "CHAIN"}
ROOT_NAME = "harness_run"
_EPS_US = 0.25  # ts and dur are rounded to 0.1 us: a child may overhang its parent by that much


class TraceLoggingError(RuntimeError):
    """Some traces of a trial were not logged; the message says which and why."""


# -- reading the Chrome trace ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChromeTrace:
    events: tuple[dict[str, Any], ...]  # complete ("X") events in (ts, -dur) order
    ts0_unix_us: float  # wall-clock time of ts 0
    run_id: str


def read_chrome_trace(path: str | Path) -> ChromeTrace:
    """A harness trace file. Files written before Tracer recorded ts0_unix_us are placed by their mtime (the file
    is written when the run ends)."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    events = data.get("traceEvents")
    if not isinstance(events, list):
        raise ValueError(f"{path}: expected a Chrome trace object with a traceEvents list")
    complete = tuple(sorted((e for e in events if e.get("ph") == "X"), key=lambda e: (e["ts"], -e["dur"])))
    other = data.get("otherData") or {}
    ts0 = other.get("ts0_unix_us")
    if ts0 is None:
        last = max((e["ts"] + e["dur"] for e in complete), default=0.0)
        ts0 = os.stat(path).st_mtime * 1e6 - last
    return ChromeTrace(complete, float(ts0), str(other.get("run_id", path.stem)))


CONTEXT_SPAN = "prepare_context"


def with_context(trace: ChromeTrace, context: ChromeTrace, context_path: str = "") -> ChromeTrace:
    """The run's trace with the preparation of the context it reused: the context's events under a prepare_context
    span that ends at the run's ts 0 (negative ts), their durations and nesting kept. The span's args say when the
    preparation really ran and by how much it was moved, so nothing reads as if it ran twice or at that time."""
    if not context.events:
        return trace
    start = min(e["ts"] for e in context.events)
    end = max(e["ts"] + e["dur"] for e in context.events)
    shift = -end  # context time -> run time
    moved = tuple({**e, "ts": round(e["ts"] + shift, 1)} for e in context.events)
    real_start_s = (context.ts0_unix_us + start) / 1e6
    wrapper = {"name": CONTEXT_SPAN, "cat": "stage", "ph": "X", "ts": round(start + shift, 1),
               "dur": round(end - start, 1), "pid": moved[0].get("pid", 0), "tid": min(e["tid"] for e in moved),
               "args": {"reused_context": True, "prepare_run_id": context.run_id, "prepare_trace": str(context_path),
                        "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(real_start_s)),
                        "moved_by_s": round((trace.ts0_unix_us + start + shift) / 1e6 - real_start_s, 3)}}
    events = sorted((wrapper, *moved, *trace.events), key=lambda e: (e["ts"], -e["dur"]))
    return dataclasses.replace(trace, events=tuple(events))


@dataclass(frozen=True)
class SpanNode:
    name: str
    cat: str
    start_us: float  # relative to ts 0
    end_us: float
    tid: int
    args: Mapping[str, Any] = field(default_factory=dict)
    parent: int | None = None  # index of the parent in span_tree's list; None: child of the run's root span


def _contains(outer: Mapping[str, Any], inner: Mapping[str, Any]) -> bool:
    return (outer["ts"] <= inner["ts"] + _EPS_US
            and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + _EPS_US)


def span_tree(events: Sequence[Mapping[str, Any]]) -> list[SpanNode]:
    """Complete events (in (ts, -dur) order) -> SpanNodes in the same order, parents before children.

    A span's parent is the innermost span of its own thread that contains it; a span with none on its thread
    (a subtask on a worker thread) hangs under the innermost stage of another thread that contains it."""
    stacks: dict[int, list[int]] = {}
    parents: list[int | None] = []
    for i, e in enumerate(events):
        stack = stacks.setdefault(e["tid"], [])
        while stack and not _contains(events[stack[-1]], e):
            stack.pop()
        parent = stack[-1] if stack else None
        if parent is None:
            around = [j for j in range(i) if events[j]["tid"] != e["tid"] and events[j]["cat"] == "stage"
                      and _contains(events[j], e)]
            parent = min(around, key=lambda j: events[j]["dur"], default=None)
        parents.append(parent)
        stack.append(i)
    return [SpanNode(name=e["name"], cat=e["cat"], start_us=float(e["ts"]), end_us=float(e["ts"] + e["dur"]),
                     tid=int(e["tid"]), args=dict(e.get("args") or {}), parent=p)
            for e, p in zip(events, parents)]


def span_attributes(node: SpanNode) -> dict[str, Any]:
    """The event's args; an LLM call adds role, latency, cache hit and MLflow's token usage attribute."""
    attrs: dict[str, Any] = {k: v for k, v in node.args.items() if v is not None}
    attrs["category"] = node.cat
    if node.cat == "llm":
        prompt, completion = int(attrs.get("prompt_tokens", 0)), int(attrs.get("completion_tokens", 0))
        attrs["role"] = node.name.removeprefix("llm.")
        attrs["latency_s"] = round((node.end_us - node.start_us) / 1e6, 6)
        attrs["cache_hit"] = bool(attrs.pop("cached", False))
        attrs[TOKEN_USAGE] = {"input_tokens": prompt, "output_tokens": completion,
                              "total_tokens": prompt + completion}
    return attrs


def judge_model(spans: Sequence[SpanNode]) -> str | None:
    """The model the evaluator role called in this run (None when the run made no judge call)."""
    return next((str(s.args["model"]) for s in spans if s.name == "llm.evaluator" and s.args.get("model")), None)


# -- assessments ---------------------------------------------------------------------------------------------------


def assessments(score: Any, judge: str) -> list[Any]:
    """A TaskScore's scores as MLflow Feedback: rubric dimensions from the judge (LLM_JUDGE, source id = its
    model, rationale = its feedback and weaknesses), det_<criterion> and the composite from code (CODE)."""
    from mlflow.entities import AssessmentSource, AssessmentSourceType, Feedback

    judge_src = AssessmentSource(AssessmentSourceType.LLM_JUDGE, judge)
    why = score.feedback.strip()
    if score.weaknesses:
        why += ("\n" if why else "") + "Weaknesses: " + "; ".join(score.weaknesses)
    out = []
    for name, value in sorted(score.dimensions.items()):
        if name.startswith("det_"):
            criterion = name.removeprefix("det_")
            out.append(Feedback(name=name, value=float(value),
                                source=AssessmentSource(AssessmentSourceType.CODE, "evaluators.deterministic"),
                                rationale=f"deterministic criterion '{criterion}' (0-10), computed from the output "
                                          f"by evaluators.deterministic.{criterion}_score"))
        else:
            out.append(Feedback(name=name, value=float(value), source=judge_src, rationale=why or None,
                                metadata={"judge_sd": f"{score.judge_sd:.4f}"}))
    kept = "an independent re-score of the kept text" if score.rescored else "the kept round's judge sample"
    selection = score.selection_score if score.selection_score is not None else score.score
    out.append(Feedback(name="composite", value=float(score.score),
                        source=AssessmentSource(AssessmentSourceType.CODE, "evaluators.composite"),
                        rationale=f"the objective: {kept}; the wiggum loop's own best round scored {selection:.2f}",
                        metadata={"selection_score": f"{selection:.4f}", "rescored": str(bool(score.rescored))}))
    return out


# -- logging -------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def exporting_to(uri: str) -> Iterator[None]:
    """MLflow's tracing and assessment APIs write to the process-wide tracking URI, and export spans on background
    threads by default; those write the spans of one trace concurrently and the trace's token total comes out short
    (a 4-task trial on SQLite: 515 of 923 tokens). For the duration: export to `uri`, synchronously, on this
    thread; then the tracking URI and the setting are put back."""
    import mlflow
    import mlflow.tracing

    before = mlflow.get_tracking_uri()
    env_before = os.environ.get("MLFLOW_TRACKING_URI")  # set_tracking_uri also writes it: put it back exactly
    async_before = os.environ.get(ASYNC_EXPORT)
    os.environ[ASYNC_EXPORT] = "false"  # read when the exporter is made: set_tracking_uri / reset remake it
    try:
        if before != uri:
            mlflow.set_tracking_uri(uri)
        else:
            mlflow.tracing.reset()
        yield
    finally:
        if async_before is None:
            os.environ.pop(ASYNC_EXPORT, None)
        else:
            os.environ[ASYNC_EXPORT] = async_before
        if before != uri:
            mlflow.set_tracking_uri(before)
        else:
            mlflow.tracing.reset()
        # restoring `before` copied it into $MLFLOW_TRACKING_URI; a stale global URI from earlier would then redirect
        # every later tracker of this process that reads the environment (measured: a second sweep logged elsewhere)
        if env_before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = env_before


def _ns(trace: ChromeTrace, us: float) -> int:
    return int(round((trace.ts0_unix_us + us) * 1000))


def load_run_trace(run: Any) -> ChromeTrace:
    """The Chrome trace a TaskScore or FailedRun shows, with its reused context grafted in (with_context). A failed
    run without a trace file is an empty trace placed now."""
    if run.trace_path:
        trace = read_chrome_trace(run.trace_path)
    else:
        trace = ChromeTrace(events=(), ts0_unix_us=time.time() * 1e6, run_id="")
    if run.context_trace_path:
        path = context_trace_file(run.context_trace_path, run.trace_path)
        if path is not None:
            trace = with_context(trace, read_chrome_trace(path), str(path))
    return trace


def context_trace_file(context_path: str, trace_path: str | None) -> Path | None:
    """The file of a reused context's preparation trace. The context cache keeps its absolute path; a results folder
    moved since (its traces/ with it) has it beside the run's own trace, found there by name. None when it is in
    neither place (the run's trace is logged without the preparation)."""
    path = Path(context_path)
    if path.is_file():
        return path
    here = Path(trace_path).parent / path.name if trace_path else None
    return here if here is not None and here.is_file() else None


def _error_event(error: str) -> Any:
    from mlflow.entities import SpanEvent

    kind, _, message = error.partition(": ")
    if not message or " " in kind:
        kind, message = "Error", error
    return SpanEvent(name="exception", attributes={"exception.type": kind, "exception.message": message})


def start_task_trace(client: Any, *, experiment_id: str, run_id: str, score: Any, request: Mapping[str, Any],
                     trace: ChromeTrace, tags: Mapping[str, str]) -> str:
    """One harness run as one trace: a root span for the run, a span per event at its real times (a reused
    context's preparation just before them, see with_context). `score` is a TaskScore, or a FailedRun: then the
    trace's status is ERROR with the error line. Returns the trace id. Call it inside exporting_to: the spans are
    then in the store when it returns."""
    from mlflow.entities import SpanStatus, SpanStatusCode

    failed = score if isinstance(score, FailedRun) else None
    spans = span_tree(trace.events)
    start_us = min((s.start_us for s in spans), default=0.0)
    end_us = max((s.end_us for s in spans), default=0.0)
    attributes = {"task_id": score.task_id, "harness_run_id": trace.run_id}
    attributes.update({"error": failed.error} if failed else {"score": score.score})
    root = client.start_trace(
        ROOT_NAME, span_type="AGENT", inputs=dict(request), experiment_id=experiment_id, run_id=run_id,
        start_time_ns=_ns(trace, min(start_us, 0.0)),
        tags={**tags, "task_id": score.task_id, "task_type": score.task_type, "harness_run_id": trace.run_id},
        attributes=attributes)
    trace_id = root.trace_id
    try:
        ids: list[str] = []
        for s in spans:
            parent = ids[s.parent] if s.parent is not None else root.span_id
            span = client.start_span(s.name, trace_id=trace_id, parent_id=parent,
                                     span_type=SPAN_TYPES.get(s.cat, "UNKNOWN"), attributes=span_attributes(s),
                                     start_time_ns=_ns(trace, s.start_us))
            ids.append(span.span_id)
        for s, span_id in reversed(list(zip(spans, ids))):  # children (started later) end before their parents
            client.end_span(trace_id, span_id, status="ERROR" if s.args.get("error") else "OK",
                            end_time_ns=_ns(trace, s.end_us))
    except BaseException:
        client.end_trace(trace_id, status="ERROR")  # not left open in MLflow's in-memory trace buffer
        raise
    if failed:
        root.add_event(_error_event(failed.error))
        client.end_trace(trace_id, status=SpanStatus(SpanStatusCode.ERROR, failed.error[:1000]),
                         end_time_ns=_ns(trace, end_us))
    else:
        client.end_trace(trace_id, outputs=score.output_text, end_time_ns=_ns(trace, end_us))
    return trace_id


def log_trial_traces(client: Any, uri: str, *, experiment_id: str, run_id: str, scores: Sequence[Any],
                     requests: Mapping[str, Mapping[str, Any]], default_judge: str,
                     tags: Mapping[str, str] = {}, failed: Sequence[FailedRun] = ()) -> list[str]:
    """A trace per TaskScore with a trace_path, its assessments, and a trace per FailedRun (status ERROR, no
    assessments), linked to run_id; the run becomes an evaluation run. Every task is tried; TraceLoggingError
    names those that failed (after the others are logged)."""
    import mlflow

    traced = [s for s in scores if s.trace_path]
    if not traced and not failed:  # a runner without trace files (the scripted test runner)
        return []
    started: list[tuple[Any, str, str | None]] = []  # (score or FailedRun, trace id, judge)
    problems: dict[str, list[str]] = {}  # reason -> task ids
    with exporting_to(uri):
        for s in [*traced, *failed]:
            try:
                trace = load_run_trace(s)
                tid = start_task_trace(client, experiment_id=experiment_id, run_id=run_id, score=s,
                                       request=requests.get(s.task_id, {"task_id": s.task_id}), trace=trace,
                                       tags=tags)
                judge = None if isinstance(s, FailedRun) else judge_model(span_tree(trace.events)) or default_judge
                started.append((s, tid, judge))
            except Exception as exc:
                problems.setdefault(f"{type(exc).__name__}: {exc}", []).append(s.task_id)
        logged = []
        for s, tid, judge in started:
            try:
                if client.get_trace(tid) is None:
                    raise LookupError("the exporter did not store it")
                for feedback in assessments(s, judge) if judge is not None else ():
                    mlflow.log_assessment(tid, feedback)
                logged.append(tid)
            except Exception as exc:
                problems.setdefault(f"{type(exc).__name__}: {exc}", []).append(s.task_id)
    for i in range(0, len(logged), 100):
        client.link_traces_to_run(logged[i:i + 100], run_id)
    if logged:
        client.set_tag(run_id, RUN_TYPE_TAG, EVALUATION_RUN)
    if problems:
        why = "; ".join(f"{', '.join(sorted(ids))}: {reason}" for reason, ids in problems.items())
        raise TraceLoggingError(f"{len(logged)} of {len(traced) + len(failed)} task traces logged; {why}"[:800])
    return logged


# -- harness runs outside trials: a sweep's baseline repeats and holdout runs, A/B cells ---------------------------


def task_requests(tasks: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Benchmark tasks -> each trace's request, by task id."""
    return {t.id: {"task": t.task, "task_id": t.id, "task_type": t.task_type} for t in tasks}


def nested_run_id(tracker: Any, tags: Mapping[str, str]) -> str:
    """The newest of the tracker's nested runs that carries every one of `tags` (kind among them)."""
    runs = [r for r in tracker.child_runs(tags["kind"]) if all(r.data.tags.get(k) == v for k, v in tags.items())]
    if not runs:
        raise LookupError(f"no MLflow run tagged {dict(tags)} under the parent run")
    return max(runs, key=lambda r: r.info.start_time).info.run_id


def log_run_traces(tracker: Any, tags: Mapping[str, str], scores: Sequence[Any], *,
                   trace_tags: Mapping[str, str] = {}, failed: Sequence[FailedRun] = ()) -> list[str]:
    """log_trial_traces for a nested run that is not a trial: the run is the tracker's child tagged `tags`, each
    trace carries the sweep's name, `tags` and `trace_tags`. Nothing is searched or written when MLflow is off or
    there is neither a score with a trace file nor a failed run. Raises as log_trial_traces does: callers guard it
    like a trial's traces."""
    if not tracker.enabled or not (any(s.trace_path for s in scores) or failed):
        return []
    from experiments.config import load_tasks

    exp = tracker.exp
    return log_trial_traces(tracker.client, tracker.uri, experiment_id=tracker.experiment_id,
                            run_id=nested_run_id(tracker, tags), scores=list(scores),
                            requests=task_requests(load_tasks(exp.benchmark)),
                            default_judge=exp.backend.evaluator_model,
                            tags={"sweep": exp.sweep.name, **tags, **trace_tags}, failed=failed)


def log_evaluation_run(tracker: Any, name: str, tags: Mapping[str, str], ev: Any) -> list[str]:
    """A sweep's nested run for an evaluation that is not a trial (a baseline repeat, a holdout run): the composite
    and number of tasks as metrics, the per-task scores as its task_scores.json table, the benchmark splits its
    tasks belong to as its dataset inputs, then a trace per task run linked to it (log_run_traces). Once per step:
    a resume that runs the step again (killed after logging, before the study stored it) finds the ended run and
    logs nothing; the run ends after its traces, so one a kill left RUNNING is replaced (tracker.logged_child)."""
    if tracker.logged_child(name, tags):
        return []
    by_task = ev.by_task()
    tasks = tracker.tasks()
    splits = [tasks[t].split for t in by_task if t in tasks]
    rid = tracker.log_child(name, tags, {"composite": ev.mean, "n_tasks": len(by_task)}, status=None,
                            splits=splits, task_scores=by_task)
    try:
        return log_run_traces(tracker, tags, ev.scores)
    finally:
        tracker.end_child(rid)
