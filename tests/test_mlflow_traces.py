"""experiments.tracking: each harness run of a trial becomes an MLflow trace (spans from its Chrome trace, the
evaluator's scores as assessments) linked to the trial's run, which the UI lists as an evaluation run."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from experiments.runs import TaskScore
from experiments.tracking._datasets import CONTEXT_TAG, read_task_scores
from experiments.tracking._traces import (EVALUATION_RUN, RUN_TYPE_TAG, TOKEN_USAGE, assessments, read_chrome_trace,
                                          span_attributes, span_tree)


def _ev(name, ts, dur, tid=1, cat="stage", **args):
    return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}


# -- the span tree from Chrome events ------------------------------------------------------------------------------


@pytest.mark.parametrize("events, parents", [
    ([_ev("a", 0, 10), _ev("b", 1, 3), _ev("c", 5, 4)], [None, 0, 0]),  # siblings inside one stage
    ([_ev("a", 0, 10), _ev("b", 1, 8), _ev("c", 2, 1, cat="llm")], [None, 0, 1]),  # nested twice
    ([_ev("a", 0, 5), _ev("b", 5, 5)], [None, None]),  # back to back: not nested
    ([_ev("a", 0, 10.0), _ev("b", 0.1, 9.95)], [None, 0]),  # rounding overhang (0.1 us) still nests
    ([_ev("a", 0, 20), _ev("s", 2, 10, tid=2), _ev("l", 3, 1, tid=2, cat="llm")], [None, 0, 1]),  # worker thread
    ([_ev("a", 0, 5), _ev("s", 6, 2, tid=2)], [None, None]),  # a worker span outside every stage: under the root
])
def test_each_span_hangs_under_the_innermost_span_that_contains_it(events, parents):
    assert [s.parent for s in span_tree(events)] == parents


def test_an_llm_span_carries_model_tokens_latency_and_cache_hit():
    node = span_tree([_ev("llm.producer", 100, 250_000, cat="llm", model="qwen", backend="ollama",
                          prompt_tokens=120, completion_tokens=30, cached=True, finish_reason="stop")])[0]
    attrs = span_attributes(node)
    assert attrs["model"] == "qwen" and attrs["role"] == "producer" and attrs["cache_hit"] is True
    assert attrs["latency_s"] == 0.25 and attrs["prompt_tokens"] == 120 and "cached" not in attrs
    assert attrs[TOKEN_USAGE] == {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}


def test_a_trace_file_is_placed_in_wall_time(tmp_path):
    from harness.tracing import Tracer

    tracer = Tracer("r1")
    with tracer.stage("synthesize"):
        time.sleep(0.01)
    trace = read_chrome_trace(tracer.write(tmp_path))
    assert abs(trace.ts0_unix_us / 1e6 - tracer.wall_t0) < 1e-3 and trace.run_id == "r1"
    assert [e["name"] for e in trace.events] == ["synthesize"]
    # a file from before ts0_unix_us was recorded: placed by its mtime (written when the run ended)
    data = json.loads((tmp_path / "r1.json").read_text())
    del data["otherData"]["ts0_unix_us"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = read_chrome_trace(tmp_path / "old.json")
    assert abs(old.ts0_unix_us / 1e6 - tracer.wall_t0) < 2.0


def _chrome(events, ts0_s, run_id="r"):
    from experiments.tracking._traces import ChromeTrace

    return ChromeTrace(tuple(events), ts0_s * 1e6, run_id)


def test_a_reused_context_is_grafted_just_before_the_run_at_its_own_durations():
    from experiments.tracking._traces import with_context

    run = _chrome([_ev("synthesize", 10, 50), _ev("llm.producer", 12, 40, cat="llm")], ts0_s=1000.0)
    # prepared 400 s earlier: planning with its model call, then research on two threads
    context = _chrome([_ev("make_plan", 5, 20), _ev("llm.planner", 6, 18, cat="llm"), _ev("gather_research", 30, 70),
                       _ev("research.round", 35, 30, tid=2, cat="research")], ts0_s=600.0, run_id="prepare-x")
    merged = with_context(run, context, "/traces/prepare-x.json")
    assert merged.ts0_unix_us == run.ts0_unix_us and merged.run_id == "r"
    names = [e["name"] for e in merged.events]
    assert names == ["prepare_context", "make_plan", "llm.planner", "gather_research", "research.round",
                     "synthesize", "llm.producer"]
    by = {e["name"]: e for e in merged.events}
    # the context ends where the run starts (ts 0) and keeps every duration and gap
    assert (by["prepare_context"]["ts"], by["prepare_context"]["dur"]) == (-95.0, 95.0)
    assert [(by[n]["ts"], by[n]["dur"]) for n in ("make_plan", "llm.planner", "gather_research")] == [
        (-95.0, 20), (-94.0, 18), (-70.0, 70)]
    args = by["prepare_context"]["args"]
    assert args["reused_context"] is True and args["prepare_run_id"] == "prepare-x"
    assert args["prepare_trace"] == "/traces/prepare-x.json"
    assert args["prepared_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(600.0 + 5e-6))
    assert args["moved_by_s"] == pytest.approx(400.0 - 100e-6, abs=1e-3)  # (1000 s - 95 us) - (600 s + 5 us)
    tree = {s.name: s for s in span_tree(merged.events)}
    parent = lambda name: merged.events[tree[name].parent]["name"] if tree[name].parent is not None else None
    assert [parent(n) for n in ("prepare_context", "make_plan", "llm.planner", "gather_research",
                                "research.round", "synthesize", "llm.producer")] == [
        None, "prepare_context", "make_plan", "prepare_context", "gather_research", None, "synthesize"]
    assert with_context(run, _chrome([], ts0_s=600.0)) is run  # a context without events adds nothing


def test_assessments_name_their_source_judge_model_or_code():
    score = TaskScore(task_id="t0", task_type="enumerated", score=7.5, selection_score=8.0, rescored=True,
                      dimensions={"relevance": 8.0, "depth": 6.0, "det_count": 10.0, "det_grounding": 4.0},
                      judge_sd=0.3, feedback="Name versions.", weaknesses=("few versions",))
    got = {f.name: f for f in assessments(score, "judge-model")}
    assert set(got) == {"relevance", "depth", "det_count", "det_grounding", "composite"}
    for name in ("relevance", "depth"):
        assert (got[name].source.source_type, got[name].source.source_id) == ("LLM_JUDGE", "judge-model")
        assert got[name].rationale == "Name versions.\nWeaknesses: few versions"
    assert got["depth"].value == 6.0 and got["depth"].metadata == {"judge_sd": "0.3000"}
    for name in ("det_count", "det_grounding", "composite"):
        assert got[name].source.source_type == "CODE"
    assert "grounding_score" in got["det_grounding"].rationale
    assert got["composite"].value == 7.5 and "independent re-score" in got["composite"].rationale


# -- a sweep on the real pipeline over scripted roles ----------------------------------------------------------


SWEEP = ("sweep.n_trials=3", "sweep.baseline_repeats=2", "sweep.holdout_top_k=1", "wiggum.max_rounds=1",
         "research.max_rounds=1", "research.enrich_urls=0", "evaluator.repeats=1")


def pipeline_sweep(exp, lines: list[str], workers: int = 2):
    """tests/test_pool.py's sweep: the real HarnessRunner over pipeline_fake's Router, MLflow as exp says."""
    from harness.inference import ResponseCache
    from harness.inference._roles import fake_roles
    from pipeline_fake import pipeline_llm
    from scripted_harness import scripted_propose
    from test_pool import _router

    from experiments.config import to_harness_config
    from experiments.runs import HarnessRunner
    from experiments.runs import RunPool
    from experiments.sweep import run_sweep

    cache = ResponseCache(Path(exp.results_dir) / "llm_cache.sqlite")
    runner = HarnessRunner(to_harness_config(exp), fake_roles(pipeline_llm(_router(), latency_s=0.002), cache=cache))
    return runner, run_sweep(exp, runner, propose=scripted_propose, out=lines.append, pool=RunPool(workers))


def _sweep(make_exp, tmp_path, name: str, lines: list[str]):
    exp = make_exp(f"sweep.name={name}", *SWEEP, mlflow=True, n_train=4, n_holdout=2)
    exp.results_dir = str(tmp_path / name)
    runner, summary = pipeline_sweep(exp, lines)
    return exp, runner, summary


def _trial_runs(exp):
    from experiments.tracking._mlflow import MLflowTracker

    tracker = MLflowTracker(exp)
    tracker.start(exp)
    runs = sorted(tracker.trial_runs(), key=lambda r: int(r.data.tags["trial_number"]))
    return tracker, runs


@pytest.fixture
def on_threads(monkeypatch):
    """Records the thread each trial's traces were logged on."""
    from experiments.tracking import _traces as mt

    seen: list[str] = []
    real = mt.log_trial_traces

    def spy(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(mt, "log_trial_traces", spy)
    return seen


def test_each_trial_run_holds_one_trace_per_task_with_spans_and_assessments(make_exp, tmp_path, on_threads):
    from harness.stores import read_jsonl

    lines: list[str] = []
    exp, runner, summary = _sweep(make_exp, tmp_path, "traces", lines)
    assert not [line for line in lines if "warning" in line], lines
    assert on_threads and set(on_threads) == {threading.main_thread().name}  # MLflow stays on the caller's thread
    tracker, runs = _trial_runs(exp)
    assert len(runs) == 3
    assert tracker.client.get_run(tracker.parent_id).data.tags[RUN_TYPE_TAG] == EVALUATION_RUN
    records = {r["run_id"]: r for r in read_jsonl(runner.cfg.runs_jsonl)}
    client = tracker.client
    for run in runs:
        rid, n = run.info.run_id, int(run.data.tags["trial_number"])
        assert run.data.tags[RUN_TYPE_TAG] == EVALUATION_RUN  # listed under "Evaluation runs"
        traces = client.search_traces(locations=[tracker.experiment_id], run_id=rid)
        assert sorted(t.info.tags["task_id"] for t in traces) == ["t0", "t1", "t2", "t3"]
        task_scores = read_task_scores(client, rid)  # the run's task_scores.json table
        for tr in traces:
            info, spans = tr.info, tr.data.spans
            assert info.trace_metadata["mlflow.sourceRun"] == rid and info.tags["trial_number"] == str(n)
            record = records[info.tags["harness_run_id"]]  # the harness run this trace shows
            assert record["run_id"].endswith(f"-t{n}-{info.tags['task_id']}")
            assert json.loads(tr.data.request)["task"] == f"task number {info.tags['task_id'][1:]}"
            assert json.loads(tr.data.response) == Path(record["output_path"]).read_text(encoding="utf-8").rstrip("\n")
            # spans at the real times: the root is the run, the stages and LLM calls inside it; the reused
            # context's preparation (planning, memory recall, research) just before them
            root = next(s for s in spans if s.parent_id is None)
            chrome = read_chrome_trace(record["trace"])
            context = _assert_whole_run(spans)
            assert abs((root.start_time_ns + context.end_time_ns - context.start_time_ns) / 1e3
                       - chrome.ts0_unix_us) < 2
            assert abs(context.end_time_ns / 1e3 - chrome.ts0_unix_us) < 2
            assert all(root.start_time_ns <= s.start_time_ns <= s.end_time_ns <= root.end_time_ns for s in spans)
            assert len(spans) == _expected_spans(spans, record)
            llm = [s for s in spans if s.span_type == "LLM"]
            assert llm and all(s.attributes["model"] and s.attributes[TOKEN_USAGE]["input_tokens"] > 0
                               and s.attributes["latency_s"] >= 0 and isinstance(s.attributes["cache_hit"], bool)
                               for s in llm)
            by_id = {s.span_id: s for s in spans}
            producer = next(s for s in llm if s.name == "llm.producer")
            assert by_id[producer.parent_id].name == "synthesize"
            assert info.token_usage["total_tokens"] == sum(s.attributes[TOKEN_USAGE]["total_tokens"] for s in llm)
            # assessments: the judge's dimensions with its rationale, the deterministic criteria from code
            got = {a.name: a for a in info.assessments}
            judge = next(s.attributes["model"] for s in llm if s.name == "llm.evaluator")  # the model that judged
            for dim in ("relevance", "completeness", "depth", "specificity", "structure", "grounded"):
                assert got[dim].source.source_type == "LLM_JUDGE" and got[dim].source.source_id == judge
                assert got[dim].rationale.startswith("Add version numbers.")
            det = [a for name, a in got.items() if name.startswith("det_")]
            assert det and all(a.source.source_type == "CODE" for a in det)
            assert got["composite"].source.source_type == "CODE"
            assert got["composite"].value == pytest.approx(task_scores[info.tags["task_id"]])
    # the baseline repeat and every holdout run are traced too, each linked to its own nested run
    repeats, holdouts = tracker.child_runs("baseline_repeat"), tracker.child_runs("holdout")
    assert len(repeats) == 1 and holdouts
    for run, tasks in [(r, ["t0", "t1", "t2", "t3"]) for r in repeats] + [(r, ["t4", "t5"]) for r in holdouts]:
        _assert_run_traced(client, tracker.experiment_id, run, tasks, records)
        key = "seed" if run.data.tags["kind"] == "baseline_repeat" else "instruction_hash"
        traces = client.search_traces(locations=[tracker.experiment_id], run_id=run.info.run_id)
        assert {(t.info.tags["kind"], t.info.tags[key], t.info.tags["sweep"]) for t in traces} == {
            (run.data.tags["kind"], run.data.tags[key], "traces")}
    # each run's dataset inputs: the benchmark's splits it ran on, by context
    def contexts(rid):
        return sorted({t.key: t.value for t in i.tags}[CONTEXT_TAG] for i in client.get_run(rid).inputs.dataset_inputs)

    assert contexts(tracker.parent_id) == ["holdout", "train"]
    assert all(contexts(r.info.run_id) == ["train"] for r in runs + repeats)
    assert all(contexts(r.info.run_id) == ["holdout"] for r in holdouts)


# the stages of one harness run, in order (harness.agent.Harness.prepare and finish); the tree under the root
PREPARE_STAGES = ["parse_skills", "memory.get_context", "make_plan", "auto_activate", "gather_research"]
FINISH_STAGES = ["synthesize", "write_output", "wiggum_loop", "post_synthesis", "compress_and_store"]


def _children(spans, parent):
    return [s.name for s in sorted(spans, key=lambda s: s.start_time_ns) if s.parent_id == parent.span_id]


def _assert_whole_run(spans, *, reused: bool = True):
    """The trace covers the whole harness run: planning, memory recall and research (under prepare_context when
    the run reused a context prepared earlier), then synthesis, wiggum, the observation stored; each LLM call under
    the stage that made it, with model, tokens, latency and cache hit. Returns the prepare_context span (or the
    root when the run prepared its own context)."""
    root = next(s for s in spans if s.parent_id is None)
    top = _children(spans, root)
    if reused:
        assert top[0] == "prepare_context" and [n for n in top[1:] if n in FINISH_STAGES] == FINISH_STAGES, top
        context = next(s for s in spans if s.name == "prepare_context")
        assert context.attributes["reused_context"] is True and context.attributes["prepared_at"].endswith("Z")
        assert context.attributes["moved_by_s"] >= 0
        assert context.attributes["prepare_run_id"].startswith("prepare-")
        assert [n for n in _children(spans, context) if n in PREPARE_STAGES] == PREPARE_STAGES
    else:
        context = root
        assert [n for n in top if n in PREPARE_STAGES + FINISH_STAGES] == PREPARE_STAGES + FINISH_STAGES, top
    by_id = {s.span_id: s for s in spans}
    llm = [s for s in spans if s.span_type == "LLM"]
    assert all(s.attributes["model"] and s.attributes[TOKEN_USAGE]["input_tokens"] > 0
               and s.attributes["latency_s"] >= 0 and isinstance(s.attributes["cache_hit"], bool) for s in llm)
    stage_of = {}
    for s in llm:
        up = by_id[s.parent_id]
        while up.parent_id is not None and up.name not in PREPARE_STAGES + FINISH_STAGES:
            up = by_id[up.parent_id]
        stage_of.setdefault(s.name, set()).add(up.name)
    assert "make_plan" in stage_of["llm.planner"] and "synthesize" in stage_of["llm.producer"], stage_of
    assert stage_of["llm.evaluator"] <= {"wiggum_loop", "synthesize"}, stage_of
    return context


def _expected_spans(spans, record) -> int:
    """The root, one span per event of the run's Chrome trace, and for a reused context prepare_context and one
    per event of the preparation's trace file."""
    n = 1 + len(read_chrome_trace(record["trace"]).events)
    context = [s for s in spans if s.name == "prepare_context"]
    if context:
        n += 1 + len(read_chrome_trace(context[0].attributes["prepare_trace"]).events)
    return n


def _assert_run_traced(client, experiment_id, run, task_ids, records):
    """One trace per task of `run`, from the harness run it names, with the judge's and code's assessments whose
    composite is the run's score for the task (its task_scores.json row; an A/B cell's score metric); the run is an
    evaluation run."""
    rid = run.info.run_id
    assert run.data.tags[RUN_TYPE_TAG] == EVALUATION_RUN
    traces = client.search_traces(locations=[experiment_id], run_id=rid)
    assert sorted(t.info.tags["task_id"] for t in traces) == sorted(task_ids)
    for tr in traces:
        assert tr.info.trace_metadata["mlflow.sourceRun"] == rid
        record = records[tr.info.tags["harness_run_id"]]
        assert len(tr.data.spans) == _expected_spans(tr.data.spans, record)
        _assert_whole_run(tr.data.spans, reused=run.data.tags["kind"] != "ab_cell")
        got = {a.name: a for a in tr.info.assessments}
        assert got["depth"].source.source_type == "LLM_JUDGE" and got["composite"].source.source_type == "CODE"
        assert any(n.startswith("det_") for n in got)
        assert got["composite"].value == pytest.approx(read_task_scores(client, rid).get(
            tr.info.tags["task_id"], run.data.metrics.get("score")))


def test_trace_logging_that_fails_warns_once_and_loses_nothing_else(make_exp, tmp_path, monkeypatch):
    from experiments.storage import Ledger
    from experiments.sweep._study import open_study
    from experiments.tracking import _traces as mt

    real, calls = mt.start_task_trace, []

    def flaky(client, **kwargs):
        if "trial_number" not in kwargs["tags"]:  # a baseline repeat or holdout run
            return real(client, **kwargs)
        calls.append(kwargs["tags"]["trial_number"])
        if kwargs["tags"]["trial_number"] == "1":
            raise OSError("trace store unreachable")
        return real(client, **kwargs)

    monkeypatch.setattr(mt, "start_task_trace", flaky)
    lines: list[str] = []
    exp, _, summary = _sweep(make_exp, tmp_path, "flaky", lines)
    warnings = [line for line in lines if "warning" in line]
    assert len(warnings) == 1 and set(calls) == {"0", "1", "2"}, warnings
    assert "TraceLoggingError: 0 of 4 task traces logged; t0, t1, t2, t3: OSError: trace store unreachable" in warnings[0]
    # the sweep's results: every trial told to Optuna, in the ledger, with its MLflow run and metrics
    trials = open_study(exp).get_trials(deepcopy=False)
    assert [t.state.name for t in trials] == ["COMPLETE"] * 3 and summary.best_trial is not None
    assert len(Ledger(exp.sweep_dir / "ledger.jsonl").rows()) == 3
    tracker, runs = _trial_runs(exp)
    assert [r.info.status for r in runs] == ["FINISHED"] * 3
    assert all("composite" in r.data.metrics and r.data.metrics["n_tasks"] == 4
               and "t3" in read_task_scores(tracker.client, r.info.run_id) for r in runs)
    counts = [len(tracker.client.search_traces(locations=[tracker.experiment_id], run_id=r.info.run_id))
              for r in runs]
    assert counts == [4, 0, 4]
    assert RUN_TYPE_TAG not in runs[1].data.tags


def test_exporting_to_puts_the_environment_back_exactly(monkeypatch, tmp_path):
    """mlflow.set_tracking_uri also writes $MLFLOW_TRACKING_URI: restoring a stale global URI from an earlier
    sweep must not leave it there, or every later tracker in the process logs to the stale store."""
    import mlflow

    from experiments.tracking._traces import exporting_to

    stale, mine, env = (f"sqlite:///{tmp_path / n}.db" for n in ("stale", "mine", "env"))
    mlflow.set_tracking_uri(stale)  # an earlier sweep in this process left its store as the global URI
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env)
    try:
        with exporting_to(mine):
            assert mlflow.get_tracking_uri() == mine
        assert os.environ["MLFLOW_TRACKING_URI"] == env
    finally:
        mlflow.set_tracking_uri(env)  # no stale global for later tests; monkeypatch restores the environment


# -- an A/B on the real pipeline over scripted roles ---------------------------------------------------------------


REVIEWER = "You are a strict, fair reviewer"


def _judge_llm():
    """test_ab_entry's FakeLLM whose judge gives a rationale and, over its two samples per text, a spread."""
    from test_ab_entry import _fake_llm

    llm, samples = _fake_llm(), iter(range(10**6))

    def judge(messages):
        depth = 5 + 2 * (next(samples) % 2)  # 5, 7, 5, 7, ...: judge_sd 1.41 over two samples
        dims = {d: 6 for d in ("relevance", "completeness", "specificity", "structure", "grounded")}
        return json.dumps({**dims, "depth": depth, "feedback": "Cite PEP 703 for the free-threaded build.",
                           "weaknesses": ["no version numbers"]})

    llm.keyed[REVIEWER] = judge
    return llm


def _ab_on_fake_roles(lines: list[str], *overrides: str, llm=None):
    """tests/test_ab_entry.py's A/B of real harness cells on a FakeLLM, with MLflow on: 3 tasks x 2 arms."""
    from harness.inference._roles import fake_roles
    from test_ab_entry import _exp, _fake_llm

    from experiments.ab._entry import run_ab_from_config

    exp = _exp("ab.replications=1", "ab.split=train", "wiggum.max_rounds=1", "research.max_rounds=1",
               "research.enrich_urls=0", "search.provider=local", "orchestrator.mode=off", *overrides)
    return run_ab_from_config(exp, roles=fake_roles(llm or _fake_llm()), out=lines.append)


def _ab_runs():
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=os.environ["MLFLOW_TRACKING_URI"])
    experiment = client.get_experiment_by_name("prior_knowledge_ab")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    return client, experiment.experiment_id, [r for r in runs if r.data.tags.get("kind") == "ab_cell"]


def test_each_ab_cell_run_holds_its_harness_run_as_a_trace_with_the_cells_tags(_isolated_results):
    from harness.stores import read_jsonl

    lines: list[str] = []
    run = _ab_on_fake_roles(lines, "evaluator.repeats=2", llm=_judge_llm())
    assert not [line for line in lines if "warning" in line], lines
    cells = {(c["task"], c["arm"], c["replication"]): c for c in read_jsonl(run.paths.ledger) if c.get("kind") == "cell"}
    assert len(cells) == 6 and all(c["status"] == "ok" for c in cells.values())
    client, experiment_id, children = _ab_runs()
    assert len(children) == 6
    records = {}
    for path in _isolated_results.rglob("runs.jsonl"):
        records.update({r["run_id"]: r for r in read_jsonl(path)})
    for child in children:
        tags = child.data.tags
        cell = cells[(tags["task"], tags["arm"], int(tags["replication"]))]
        _assert_run_traced(client, experiment_id, child, [tags["task"]], records)
        (trace,) = client.search_traces(locations=[experiment_id], run_id=child.info.run_id)
        info = trace.info
        assert info.tags["harness_run_id"] == cell["meta"]["run_id"]  # the cell's own harness run
        assert (info.tags["arm"], info.tags["blind_label"], info.tags["task_id"], info.tags["replication"]) == (
            cell["arm"], cell["meta"]["blind_label"], cell["task"], str(cell["replication"]))
        assert info.tags["kind"] == "ab_cell" and info.tags["sweep"] == "prior_knowledge_ab"
        assert json.loads(trace.data.request)["task_id"] == cell["task"]
        got = {a.name: a for a in info.assessments}
        assert {n for n in got if not n.startswith("det_") and n != "composite"} == {
            n for n in cell["dimensions"] if not n.startswith("det_")}
        assert all(got[n].value == pytest.approx(v) for n, v in cell["dimensions"].items())
        assert got["composite"].value == pytest.approx(cell["score"])
        # the judge's dimensions carry its rationale and the spread of its samples, as a trial's traces do
        assert cell["meta"]["judge_sd"] > 0 and cell["meta"]["feedback"]
        for name in ("relevance", "depth"):
            assert (got[name].source.source_type, got[name].source.source_id) == ("LLM_JUDGE", "fake-model")
            assert got[name].rationale == "Cite PEP 703 for the free-threaded build.\nWeaknesses: no version numbers"
            assert got[name].metadata == {"judge_sd": f"{cell['meta']['judge_sd']:.4f}"}
        assert "deterministic criterion" in got[next(n for n in got if n.startswith("det_"))].rationale


def test_an_ab_cell_trace_that_fails_warns_and_the_cell_run_is_logged_once(_isolated_results, monkeypatch):
    from experiments.tracking import _traces as mt

    real = mt.start_task_trace

    def flaky(client, **kwargs):
        if kwargs["tags"]["replication"] == "0" and kwargs["score"].task_id == "what-is-gil":
            raise OSError("trace store unreachable")
        return real(client, **kwargs)

    monkeypatch.setattr(mt, "start_task_trace", flaky)
    lines: list[str] = []
    run = _ab_on_fake_roles(lines)
    warnings = [line for line in lines if "warning" in line]
    assert len(warnings) == 2 and all("OSError: trace store unreachable" in w for w in warnings), warnings
    assert run.result.cells_run == 6 and run.mlflow_children == 6  # each cell's run once, no retry duplicates
    client, experiment_id, children = _ab_runs()
    traced = sorted((c.data.tags["task"], len(client.search_traces(locations=[experiment_id], run_id=c.info.run_id)))
                    for c in children)
    assert traced == [("file-handling-tips", 1)] * 2 + [("list-json-modules", 1)] * 2 + [("what-is-gil", 0)] * 2


def _error_event(span):
    (event,) = [e for e in span.events if e.name == "exception"]
    return event.attributes["exception.type"], event.attributes["exception.message"]


def test_a_failed_ab_cell_is_traced_with_its_error(_isolated_results, monkeypatch):
    """A harness run that raised in a stage: its trace shows the stages up to the failure, that stage ERROR, the
    trace ERROR with the error line. A run_arm that raised before any trace file: a root-only ERROR trace."""
    from harness.agent import _pipeline
    from harness.stores import read_jsonl

    from experiments.runs import HarnessCells

    real_research, real_call = _pipeline.gather_research, HarnessCells.__call__

    def research(task, *args, **kwargs):
        if "global interpreter lock" in task:
            raise ConnectionError("search backend refused the connection")
        return real_research(task, *args, **kwargs)

    def call(self, arm, overrides, task, replication, seed):
        if task.id == "list-json-modules" and arm == "prior_knowledge_off":
            raise MemoryError("out of memory loading the arm")
        return real_call(self, arm, overrides, task, replication, seed)

    monkeypatch.setattr(_pipeline, "gather_research", research)
    monkeypatch.setattr(HarnessCells, "__call__", call)
    lines: list[str] = []
    run = _ab_on_fake_roles(lines)
    assert not [line for line in lines if "warning" in line], lines
    cells = [c for c in read_jsonl(run.paths.ledger) if c.get("kind") == "cell"]
    failed = {(c["task"], c["arm"]): c for c in cells if c["status"] == "failed"}
    assert sorted(failed) == [("list-json-modules", "prior_knowledge_off"), ("what-is-gil", "prior_knowledge_off"),
                            ("what-is-gil", "prior_knowledge_on")]
    client, experiment_id, children = _ab_runs()
    assert len(children) == 6
    for child in children:
        tags = child.data.tags
        (trace,) = client.search_traces(locations=[experiment_id], run_id=child.info.run_id)
        info, spans = trace.info, trace.data.spans
        root = next(s for s in spans if s.parent_id is None)
        cell = failed.get((tags["task"], tags["arm"]))
        if cell is None:
            assert info.state == "OK" and root.status.status_code == "OK" and info.assessments
            continue
        assert child.info.status == "FAILED"
        assert info.state == "ERROR" and root.status.status_code == "ERROR" and not info.assessments
        assert (info.tags["arm"], info.tags["task_id"], info.tags["kind"]) == (tags["arm"], tags["task"], "ab_cell")
        if tags["task"] == "what-is-gil":  # raised in research: the stages before it, research ERROR
            assert cell["error"] == "ConnectionError: search backend refused the connection"
            assert root.attributes["error"] == cell["error"] and root.status.description == cell["error"]
            assert _error_event(root) == ("ConnectionError", "search backend refused the connection")
            assert info.tags["harness_run_id"] == cell["meta"]["run_id"]
            names = [s.name for s in sorted(spans, key=lambda s: s.start_time_ns) if s.parent_id == root.span_id]
            assert names[:4] == ["parse_skills", "memory.get_context", "make_plan", "auto_activate"]
            research_span = next(s for s in spans if s.name == "gather_research")
            assert research_span.status.status_code == "ERROR"
            assert any(s.name == "llm.planner" and s.span_type == "LLM" for s in spans)
            assert not any(s.name in ("synthesize", "llm.producer") for s in spans)
        else:  # run_arm raised: nothing ran that left a trace file
            assert cell["error"] == "MemoryError: out of memory loading the arm"
            assert [s.name for s in spans] == ["harness_run"]
            assert _error_event(root) == ("MemoryError", "out of memory loading the arm")


def test_a_trial_failed_by_a_harness_run_holds_that_run_as_an_error_trace(make_exp, tmp_path, monkeypatch):
    import harness.synthesis
    from harness.tracing import current_tracer

    real = harness.synthesis.synthesize

    def synthesize(*args, **kwargs):
        if current_tracer().run_id == "failing-t1-t2":
            raise TimeoutError("producer timed out after 600 s")
        return real(*args, **kwargs)

    monkeypatch.setattr(harness.synthesis, "synthesize", synthesize)
    lines: list[str] = []
    exp, runner, summary = _sweep(make_exp, tmp_path, "failing", lines)
    assert not [line for line in lines if "warning" in line], lines
    tracker, runs = _trial_runs(exp)
    states = {int(r.data.tags["trial_number"]): r for r in runs}
    assert states[1].info.status == "FAILED" and states[0].info.status == states[2].info.status == "FINISHED"
    traces = tracker.client.search_traces(locations=[tracker.experiment_id], run_id=states[1].info.run_id)
    (trace,) = [t for t in traces if t.info.state == "ERROR"]
    info, spans = trace.info, trace.data.spans
    assert (info.tags["task_id"], info.tags["trial_number"], info.tags["harness_run_id"]) == ("t2", "1", "failing-t1-t2")
    root = next(s for s in spans if s.parent_id is None)
    assert root.status.description == "TimeoutError: producer timed out after 600 s" and not info.assessments
    assert _error_event(root) == ("TimeoutError", "producer timed out after 600 s")
    synth = next(s for s in spans if s.name == "synthesize")
    assert synth.status.status_code == "ERROR" and "TimeoutError" in synth.attributes["error"]
    context = next(s for s in spans if s.name == "prepare_context")  # the reused context, before the failure
    assert context.end_time_ns <= synth.start_time_ns and "make_plan" in _children(spans, context)
    assert states[1].data.tags[RUN_TYPE_TAG] == EVALUATION_RUN
