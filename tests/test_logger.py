"""runs.jsonl appends from many processes stay whole; traces follow the Chrome Trace Event format."""

from __future__ import annotations

import json
import threading

from harness.stores import append_jsonl, read_jsonl
from harness.tracing import Tracer, use_tracer
from workers import run_workers


def _writer(worker: int, path: str, n: int) -> None:
    for i in range(n):
        append_jsonl(path, {"worker": worker, "i": i, "pad": "x" * (5000 + i)})  # > PIPE_BUF on purpose


def test_concurrent_appends_from_processes_never_tear(tmp_path):
    path = tmp_path / "runs.jsonl"
    run_workers(_writer, str(path), 50)
    lines = path.read_text().splitlines()
    assert len(lines) == 200
    records = [json.loads(line) for line in lines]  # every line parses
    assert sorted((r["worker"], r["i"]) for r in records) == [(w, i) for w in range(4) for i in range(50)]


def test_read_jsonl_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "runs.jsonl"
    append_jsonl(path, {"a": 1})
    with open(path, "a") as fh:
        fh.write('{"a": 2, "b": ')  # a crash mid-write
    assert read_jsonl(path) == [{"a": 1}]


REQUIRED = {"ph", "ts", "dur", "pid", "tid", "name"}


def test_trace_is_valid_chrome_trace_json(tmp_path):
    tracer = Tracer("run-x")
    with use_tracer(tracer):
        with tracer.stage("make_plan"):
            with tracer.span("llm.planner", cat="llm", model="m") as s:
                s.update(prompt_tokens=3)
        with tracer.stage("synthesize"):
            pass

        def worker():
            with tracer.stage("subtask"):
                pass

        t = threading.Thread(target=worker)
        t.start()
        t.join()
    path = tracer.write(tmp_path)
    data = json.loads(path.read_text())
    events = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in events} == {"make_plan", "llm.planner", "synthesize", "subtask"}
    for e in events:
        assert REQUIRED <= e.keys()
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
    plan = next(e for e in events if e["name"] == "make_plan")
    llm = next(e for e in events if e["name"] == "llm.planner")
    assert plan["ts"] <= llm["ts"] and llm["ts"] + llm["dur"] <= plan["ts"] + plan["dur"] + 1  # nested
    assert llm["args"] == {"model": "m", "prompt_tokens": 3}
    sub = next(e for e in events if e["name"] == "subtask")
    assert sub["tid"] != plan["tid"]  # another thread gets its own track
    assert set(tracer.stage_s) == {"make_plan", "synthesize", "subtask"}


def test_span_records_error_and_reraises(tmp_path):
    tracer = Tracer("e")
    try:
        with tracer.stage("boom"):
            raise RuntimeError("bad")
    except RuntimeError:
        pass
    (event,) = tracer.events
    assert event["args"]["error"] == "RuntimeError: bad"
