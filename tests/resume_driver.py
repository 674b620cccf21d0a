"""`python tests/resume_driver.py <experiments.run overrides>`: the real CLI (experiments.run: precheck, Hydra,
main, cli's exit codes) on the fake backend with a scripted reply for every prompt, and a kill hook.

Replies: every role's FakeLLM answers every prompt with a numbered list whose length and wording come from a hash of
the prompt, so a different synthesis instruction gives a different text and score, and the same prompt always the
same reply (an uninterrupted run and a killed-and-resumed one see the same replies).

Kill hooks (tests/resume_harness.py): HARNESS_TEST_KILL_AT="<regex>:<n>" sends SIGKILL to this process right after
the n-th runs.jsonl record whose run id matches <regex> is appended (a finished task of the step under test is on
disk, the step itself is not); HARNESS_TEST_KILL_IN_TRACES="<kind>:<n>" right after the n-th nested MLflow run of
that kind (baseline_repeat, holdout, race) has logged its traces (the run is in MLflow, the step not yet stored). HARNESS_TEST_FAIL_AFTER="<regex>" makes every model call of a run whose id matches
<regex> raise BackendUnavailable (a server that dies after the trials); HARNESS_TEST_DELAY_S slows every reply.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORDS = ["json", "csv", "logging", "pathlib", "asyncio", "typing", "sqlite3", "argparse"]


def reply(messages) -> str:
    text = "\n".join(m.get("content", "") for m in messages)
    h = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    n = 2 + h % 3
    return "\n".join(f"{i + 1}. **{WORDS[(h >> (3 * i)) % len(WORDS)]}**: use it with encoding='utf-8' and "
                     f"check the result (point {i + 1})." for i in range(n))


def install() -> None:
    from harness import inference
    from harness import stores, tracing
    from harness.inference._fake import FakeLLM

    fail = os.environ.get("HARNESS_TEST_FAIL_AFTER")

    def scripted(msgs):
        if fail:
            tracer = tracing.current_tracer()
            if re.search(fail, getattr(tracer, "run_id", "") or ""):
                raise inference.BackendUnavailable("scripted: the server stopped answering (HTTP 500)")
        return reply(msgs)

    delay = float(os.environ.get("HARNESS_TEST_DELAY_S") or 0)  # seconds per reply: a signal lands mid-trial
    inference.register_backend("fake")(
        lambda cfg, role: FakeLLM(keyed={"": scripted}, model=cfg.model_for(role), latency_s=delay))

    kill = os.environ.get("HARNESS_TEST_KILL_AT")
    if kill:
        pattern, n = kill.rsplit(":", 1)
        rx, seen = re.compile(pattern), [0]
        real = stores.append_jsonl

        def append(path, record, **kw):
            real(path, record, **kw)
            if Path(path).name == "runs.jsonl" and rx.search(str(record.get("run_id", ""))):
                seen[0] += 1
                if seen[0] >= int(n):
                    os.kill(os.getpid(), signal.SIGKILL)

        stores.append_jsonl = append
        from harness.agent import _pipeline

        _pipeline.append_jsonl = append

    traces = os.environ.get("HARNESS_TEST_KILL_IN_TRACES")
    if traces:  # "<kind tag>:<n>": SIGKILL after the n-th nested run of that kind has its traces (not yet stored)
        kind, n = traces.rsplit(":", 1)
        from experiments.tracking import _traces as mlflow_traces

        real_traces, count = mlflow_traces.log_run_traces, [0]

        def log_run_traces(tracker, tags, *args, **kw):
            out = real_traces(tracker, tags, *args, **kw)
            if tags.get("kind") == kind:
                count[0] += 1
                if count[0] >= int(n):
                    os.kill(os.getpid(), signal.SIGKILL)
            return out

        mlflow_traces.log_run_traces = log_run_traces


if __name__ == "__main__":
    install()
    from experiments import run

    sys.argv[0] = "experiments.run"
    run._precheck(sys.argv[1:])
    run.hydra_main()
