"""Count the requests Ollama would cut: a compound harness run (twice: the second with memory of the first) and a
2-trial sweep against tests/ollama_stub.py, a
server that behaves as Ollama documents (a 2048-token default window when a request carries no `options.num_ctx`,
the prompt cut from the front and answered 200 OK).

    python bench/faults/ollama_truncation.py                      # as shipped: every request with num_ctx, none cut
    python bench/faults/ollama_truncation.py backend.num_ctx=1024 # forced too small: the runs fail with ContextOverflow

Extra arguments are overrides for both commands. Prints, per command, its exit status, its last stderr line, the
chat requests, those with num_ctx, those the server cut, model loads, and the largest prompt per model (tokens and
characters); then the totals. Writes only under a temporary folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.ollama_stub import OllamaStub, StubModel, schema_reply  # noqa: E402

COMPOUND = ("Research Python asyncio task cancellation and structured concurrency, compare them with threading "
            "best practices, then synthesize a unified guide and save to guide.md")
# A markdown answer every free-text stage can use (the JSON stages get schema-shaped replies).
REPLY = ("1. **TaskGroup**: use asyncio.TaskGroup so one failing task cancels its siblings [1].\n"
         "2. **Timeouts**: wrap awaits in asyncio.timeout() and handle TimeoutError explicitly [2].\n"
         "3. **Cancellation**: re-raise CancelledError after cleanup so callers see it [1].\n"
         "4. **Threads**: run blocking calls with asyncio.to_thread instead of the loop thread [3].\n"
         "5. **Queues**: bound asyncio.Queue with maxsize to apply backpressure [2].\n\n"
         # models write to their budget: the detail below brings a reply near synthesis's max_tokens (700)
         + "\n".join(f"- Detail {i}: keep coroutine cancellation explicit, document which awaits are shielded, and "
                     f"test timeouts under load with deterministic event loop policies and structured logging [1]."
                     for i in range(1, 21)))
MODELS = [StubModel("glm4:9b", context_length=131072, family="glm4"),
          StubModel("qwen2.5:32b", context_length=32768, family="qwen2"),
          StubModel("llama3.1:70b", context_length=131072, family="llama")]
COMMON = ["backend=ollama", "backend.retries=1", "backend.backoff_s=0.05", "backend.timeout_s=60",
          "search.provider=local", "research.enrich_urls=0"]


def sweep_cmd(host: str, results: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "experiments.run", "+sweep=synth_mutation", f"backend.host={host}", *COMMON,
            f"results_dir={results}", "sweep.allow_underpowered=true", "sweep.n_trials=2",
            "sweep.baseline_repeats=1", "sweep.operators=[add_constraint,drop_sentence,reorder]",
            "sweep.holdout_top_k=1", "sweep.name=trunc", *extra]


def harness_cmd(host: str, results: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "harness", COMPOUND, f"backend.host={host}", *COMMON, f"results_dir={results}",
            *extra]


def count(stub: OllamaStub, since: int) -> dict:
    reqs = stub.chat_requests(include_checks=True)[since:]
    largest: dict[str, tuple[int, int]] = {}
    for r in reqs:
        model = r.body.get("model", "?")
        chars = sum(len(str(m.get("content", ""))) for m in r.body.get("messages", []))
        tokens, old = r.prompt_tokens or 0, largest.get(model, (0, 0))
        largest[model] = (max(old[0], tokens), max(old[1], chars))
    return {"requests": len(reqs), "with_num_ctx": sum(r.num_ctx is not None for r in reqs),
            "truncated": sum(r.truncated for r in reqs), "largest": largest}


def main(extra: list[str]) -> int:
    totals = {"requests": 0, "with_num_ctx": 0, "truncated": 0}
    with tempfile.TemporaryDirectory() as tmp, OllamaStub(models=MODELS, default_reply=schema_reply(REPLY)) as stub:
        env = dict(os.environ, PYTHONPATH=str(ROOT), MLFLOW_TRACKING_URI=f"sqlite:///{Path(tmp) / 'mlflow.db'}")
        for name in ("HARNESS_DEBUG", "HARNESS_RESULTS_DIR", "HARNESS_BACKEND"):  # results_dir= decides
            env.pop(name, None)
        overrides = ["backend.evaluator_model=llama3.1:70b", *extra]
        for name, cmd in (("compound run", harness_cmd(stub.url, Path(tmp) / "run", overrides)),
                          ("compound run again (memory holds the first)",
                           harness_cmd(stub.url, Path(tmp) / "run", overrides)),
                          ("2-trial sweep", sweep_cmd(stub.url, Path(tmp) / "sweep", overrides))):
            since = len(stub.chat_requests(include_checks=True))
            runs_file = Path(cmd[cmd.index(next(a for a in cmd if a.startswith("results_dir=")))].split("=", 1)[1])
            runs_file = runs_file / "runs.jsonl"
            seen = len(runs_file.read_text().splitlines()) if runs_file.exists() else 0
            p = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
            c = count(stub, since)
            runs = [json.loads(x) for x in runs_file.read_text().splitlines()[seen:]] if runs_file.exists() else []
            overflow = sum(str(r.get("error") or "").startswith("ContextOverflow") for r in runs)
            last = (p.stderr.strip().splitlines() or [""])[-1]
            failed = [ln for ln in p.stdout.splitlines() if "ContextOverflow" in ln][:1]
            print(f"{name}: exit {p.returncode}; chat requests {c['requests']}, with num_ctx {c['with_num_ctx']}, "
                  f"truncated {c['truncated']}")
            print(f"  runs recorded {len(runs)}: ok {sum(r.get('status') == 'ok' for r in runs)}, "
                  f"failed with ContextOverflow {overflow}")
            print(f"  largest prompt per model (tokens, chars): {c['largest']}")
            print(f"  last stderr line: {last[:400]}")
            if failed:
                print(f"  first ContextOverflow in stdout: {failed[0].strip()[:400]}")
            for k in totals:
                totals[k] += c[k]
        print(f"model loads: {stub.loads}")
    print(f"total: {totals['requests']} chat requests, {totals['with_num_ctx']} with num_ctx, "
          f"{totals['truncated']} truncated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
