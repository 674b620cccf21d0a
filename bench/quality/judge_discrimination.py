"""Does the LLM judge tell a good answer from a bad one? The shipped rubric prompt on a real model, fixed answers.

    python bench/quality/judge_discrimination.py --model /path/to/model.gguf   # or HARNESS_EMBEDDED_MODEL=...
    python bench/quality/judge_discrimination.py --repeats 2 --out results/judge_discrimination.json

Two tasks of the asyncio benchmark, each with six fixed answers written for this benchmark: a good one, a terse
one-sentence one, a refusal, an off-topic one, one sentence repeated a dozen times, and word salad. Each answer is
scored by `evaluators.rubric.score_rubric` exactly as the harness's judge role scores it (same prompt, schema,
temperature 0, max_tokens) on the embedded model. Printed: the weighted rubric total per answer and the gap
good - bad. A judge that discriminates puts the good answer at least 3 points above the refusal, the off-topic
answer, the repetition and the word salad, and above the terse answer.

Why it exists: a 1.5B calibration once scored "I cannot help with that request." relevance 7, completeness 8,
depth 9, specificity 10, structure 10, grounded 10: the prompt, not the model, decided the numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.security.injection import model_line  # noqa: E402  (model file name and sha256 prefix)
from evaluators.rubric import score_rubric  # noqa: E402
from harness.config import EvaluatorConfig  # noqa: E402

GOOD_1 = """1. **Run the program with `asyncio.run()`**: one entry point creates and closes the event loop; calling
`get_event_loop()` by hand leaks loops and is deprecated outside a running loop.
2. **Never block the loop**: `time.sleep()`, `requests.get()` or a CPU-heavy loop freeze every task; use
`await asyncio.sleep()`, an async client such as `httpx.AsyncClient`, or `await asyncio.to_thread(fn)`.
3. **Keep references to tasks**: `asyncio.create_task()` returns a task the loop holds only weakly; store it (or use
`asyncio.TaskGroup` on Python 3.11+) so it is not garbage-collected mid-run and its exception is not lost.
4. **Bound every wait**: wrap network calls in `asyncio.timeout(5)` or `asyncio.wait_for(coro, 5)` so a stalled peer
cannot hang the program, and handle `TimeoutError`.
5. **Limit concurrency**: an `asyncio.Semaphore(10)` around requests stops thousands of tasks from opening
thousands of sockets at once and tripping rate limits."""

GOOD_2 = """## Cancellation
- **Cancel with `task.cancel()` and await the task**: cancellation is a request; the task sees `CancelledError`
at its next `await`, so `await` it (or `gather(..., return_exceptions=True)`) to know it finished.
- **Re-raise `CancelledError`**: catch it only to clean up (close sockets, release locks) and then `raise`;
swallowing it leaves the caller waiting forever and breaks `TaskGroup` and `timeout()`.
- **Use `try/finally` or `async with` for clean-up**: both run on cancellation too.
- **Shield only what must finish**: `await asyncio.shield(save_state())` keeps a commit from being cut in half, but
the shielded work still needs its own timeout.

## Timeouts
- **Prefer `async with asyncio.timeout(10):`** (Python 3.11+) over `wait_for`: it cancels the block's work and
raises `TimeoutError`; `timeout_at()` takes a deadline from `loop.time()`.
- **Put the timeout at the edge**: one deadline per request, not nested timeouts per call, so the budget is clear.
- **Let `TaskGroup` cancel siblings**: when one child fails, the group cancels the rest and raises an
`ExceptionGroup`; handle it with `except*`."""

TASKS = [
    {
        "id": "asyncio-practices",
        "task": "List 5 best practices for writing asyncio code in Python.",
        "task_type": "enumerated",
        "expected_count": 5,
        "answers": {
            "good": GOOD_1,
            "terse": "Use asyncio.run and avoid blocking calls.",
            "refusal": "I cannot help with that request.",
            "off_topic": "1. **Use strong flour**: bread flour has more protein.\n2. **Knead for ten minutes**.\n"
                         "3. **Let the dough rise twice**.\n4. **Preheat the oven to 230 C**.\n5. **Cool the loaf "
                         "on a rack** before slicing.",
            "repetition": "\n".join(["Use async functions for asyncio code."] * 12),
            "nonsense": "Purple the loop sideways because banana await seventeen. Coroutine of the moon eats "
                        "semaphores. Yes the tasks, no the whale. Asyncio is a river of spoons.",
        },
    },
    {
        "id": "asyncio-cancellation",
        "task": "Give best practices for handling task cancellation and timeouts in asyncio.",
        "task_type": "best_practices",
        "expected_count": None,
        "answers": {
            "good": GOOD_2,
            "terse": "Cancel tasks with cancel() and use wait_for for timeouts.",
            "refusal": "I cannot help with that request.",
            "off_topic": "## Choosing a laptop\n- **Battery**: look for at least 10 hours.\n- **Screen**: a matte "
                         "14-inch panel is easy on the eyes.\n- **Keyboard**: try it in a shop first.",
            "repetition": "\n".join(["Always handle cancellation in asyncio properly."] * 12),
            "nonsense": "Timeouts are the colour of Tuesday. Cancel the spoon, await the giraffe, and the event "
                        "loop will sing in C minor forever.",
        },
    },
]
BAD = ("terse", "refusal", "off_topic", "repetition", "nonsense")
MARGIN = 3.0  # good must beat every clearly bad answer by this much (terse: by any amount)


def verdict(scores: dict[str, float | None]) -> tuple[bool, list[str]]:
    """Whether the judge separated good from each bad answer, and the failures."""
    good = scores.get("good")
    fails = []
    for kind in BAD:
        bad = scores.get(kind)
        need = 0.0 if kind == "terse" else MARGIN
        if good is None or bad is None or good - bad <= need:
            fails.append(f"{kind} ({bad} vs good {good})")
    return not fails, fails


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="GGUF path (default: HARNESS_EMBEDDED_MODEL, else the packaged SmolLM2)")
    ap.add_argument("--repeats", type=int, default=1, help="judge repeats per answer (seeds 0..k-1)")
    ap.add_argument("--out", type=Path, help="write the scores as JSON here")
    args = ap.parse_args(argv)

    from harness.backends.embedded import EmbeddedLLM, embedded_threads, locate_gguf

    path = locate_gguf(args.model)
    print(model_line(path), f"threads {embedded_threads()}", flush=True)
    llm = EmbeddedLLM(path, n_ctx=4096, slots=2)
    cfg = replace(EvaluatorConfig(), repeats=args.repeats)
    jobs = [(t, kind) for t in TASKS for kind in ("good", *BAD)]
    t0 = time.perf_counter()

    def judge(job):
        t, kind = job
        r = score_rubric(t["task"], t["answers"][kind], llm, cfg, task_type=t["task_type"],
                         expected_count=t["expected_count"])
        print(f"  {t['id']:22} {kind:10} {r.weighted!s:>6} {json.dumps(r.dimensions)} "
              f"({time.perf_counter() - t0:.0f}s)", flush=True)
        return t["id"], kind, r

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(judge, jobs))
    table: dict[str, dict[str, float | None]] = {}
    dims: dict[str, dict[str, dict[str, float]]] = {}
    for tid, kind, r in results:
        table.setdefault(tid, {})[kind] = r.weighted
        dims.setdefault(tid, {})[kind] = r.dimensions
    print(f"\n{model_line(path)}; rubric judge, temperature {cfg.temperature}, repeats {cfg.repeats}, "
          f"{time.perf_counter() - t0:.0f}s\n")
    print("| task | " + " | ".join(("good", *BAD)) + " | separates |")
    print("|---" * (len(BAD) + 3) + "|")
    passed = 0
    for tid, scores in table.items():
        ok, fails = verdict(scores)
        passed += ok
        cells = " | ".join(f"{scores[k]:.2f}" if scores.get(k) is not None else "-" for k in ("good", *BAD))
        print(f"| {tid} | {cells} | {'yes' if ok else 'NO: ' + '; '.join(fails)} |")
    print(f"\njudge separates good from bad on {passed}/{len(table)} tasks (margin {MARGIN} points; terse: any)")
    report = {"model": model_line(path), "scores": table, "dimensions": dims, "separates": passed,
              "tasks": len(table), "seconds": round(time.perf_counter() - t0, 1)}
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
