"""Embedded model: generation threads and prompt-processing (batch) threads, with and without competing load.

    python bench/embedded/threads.py [--arms 1,1 1,2 2,2] [--rounds 4] [--hog 0] [--max-tokens 128] [--facts 47]

An arm "d,b" runs the embedded model (default SmolLM2 GGUF) with d generation threads (HARNESS_EMBEDDED_THREADS)
and b prompt-processing threads (HARNESS_EMBEDDED_BATCH_THREADS), 2 slots as conf/backend/embedded.yaml, the
host-memory prompt cache off. Each round sends two requests at once (one per slot), each with a system prompt
of its own (--facts 47 = ~1000 tokens) that no earlier request used, so every round prefills ~2000 tokens and
decodes up to 2 x --max-tokens (greedy, seed 0): the shape of two concurrent task runs' synthesis calls. A fresh
process per arm; the arms run in the order given and then reversed, and each arm's figures pool both passes,
so a drift of the machine's load shows as a difference between passes, not between arms.

--hog N starts N busy-loop processes for the whole run: what the threads do when something else wants a core
(the harness's own Python work, another process). Reported per arm: the median round wall time, prefill and
decode tokens/s (llama.cpp's own timings, median over requests) and the round wall time relative to the first arm.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.embedded.prompt_cache import shared_prefix  # noqa: E402
from harness.backends.embedded import (  # noqa: E402
    ENV_BATCH_THREADS,
    ENV_THREADS,
    EmbeddedLLM,
    completion_request,
    locate_gguf,
)

N_CTX, SLOTS = 2048, 2


def child(arm: str, rounds: int, max_tokens: int, facts: int, first_round: int) -> dict:
    """One arm in this process (threads from the environment the parent set)."""
    llm = EmbeddedLLM(locate_gguf(None), n_ctx=N_CTX, slots=SLOTS, cache_ram_mib=0)
    out: dict = {"arm": arm, "rounds": []}
    for r in range(first_round, first_round + rounds):
        replies: list[dict] = [{}, {}]

        def one(i: int) -> None:
            system = shared_prefix(facts, 1 + (2 * r + i) * facts)  # a prompt no earlier request used
            body = completion_request(
                [{"role": "system", "content": system},
                 {"role": "user", "content": "List every river that flows north, one per line, with its lake."}],
                schema=None, temperature=0.0, max_tokens=max_tokens, seed=0)
            replies[i] = llm.server.handle_chat_completions(body)

        t0 = time.perf_counter()
        workers = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        wall = time.perf_counter() - t0
        timings = [rep.get("timings", {}) for rep in replies]
        out["rounds"].append({
            "wall_s": wall,
            "prompt_n": sum(t.get("prompt_n", 0) for t in timings),
            "predicted_n": sum(t.get("predicted_n", 0) for t in timings),
            "prefill_tps": [t.get("prompt_per_second", 0.0) for t in timings],
            "decode_tps": [t.get("predicted_per_second", 0.0) for t in timings],
        })
    return out


def _hog(stop: multiprocessing.Event) -> None:  # type: ignore[valid-type]
    x = 0
    while not stop.is_set():
        for _ in range(100_000):
            x += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", nargs="+", default=["1,1", "1,2", "2,2"], help="generation,batch thread pairs")
    ap.add_argument("--rounds", type=int, default=4, help="rounds per arm per pass (two passes)")
    ap.add_argument("--hog", type=int, default=0, help="busy-loop processes competing for the cores")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--facts", type=int, default=47)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--first-round", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.rounds, args.max_tokens, args.facts, args.first_round)))
        return

    cpus = len(os.sched_getaffinity(0))
    print(f"model {locate_gguf(None).name}, n_ctx {N_CTX} x {SLOTS} slots, prompt cache off; {cpus} usable cores; "
          f"{args.rounds} rounds x 2 passes per arm, 2 concurrent requests per round (~{args.facts * 21} prompt "
          f"tokens each, max_tokens {args.max_tokens}); competing busy loops: {args.hog}", flush=True)
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=_hog, args=(stop,), daemon=True) for _ in range(args.hog)]
    for h in hogs:
        h.start()
    results: dict[str, list[dict]] = {a: [] for a in args.arms}
    passes: dict[str, list[float]] = {a: [] for a in args.arms}
    try:
        order = list(args.arms) + list(reversed(args.arms))
        for k, arm in enumerate(order):
            d, b = arm.split(",")
            env = {**os.environ, ENV_THREADS: d, ENV_BATCH_THREADS: b}
            cmd = [sys.executable, __file__, "--child", arm, "--rounds", str(args.rounds), "--max-tokens",
                   str(args.max_tokens), "--facts", str(args.facts), "--first-round", str(k * args.rounds)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
            if proc.returncode != 0:
                sys.exit(f"arm {arm} failed:\n{proc.stderr[-2000:]}")
            rounds = json.loads(proc.stdout.strip().splitlines()[-1])["rounds"]
            results[arm] += rounds
            passes[arm].append(statistics.median(r["wall_s"] for r in rounds))
            print(f"arm {arm} pass {1 + (k >= len(args.arms))}: median round {passes[arm][-1]:.2f}s", flush=True)
    finally:
        stop.set()
        for h in hogs:
            h.join(timeout=5)

    print(f"\n{'gen,batch':>9} {'round s':>8} {'vs first':>8} {'prefill tok/s':>13} {'decode tok/s':>12} "
          f"{'prompt tok':>10} {'decoded':>7} {'pass 1 / pass 2 s':>17}")
    base = None
    for arm, rounds in results.items():
        wall = statistics.median(r["wall_s"] for r in rounds)
        base = base or wall
        prefill = statistics.median(x for r in rounds for x in r["prefill_tps"])
        decode = statistics.median(x for r in rounds for x in r["decode_tps"])
        print(f"{arm:>9} {wall:8.2f} {wall / base:7.2f}x {prefill:13.1f} {decode:12.1f} "
              f"{statistics.median(r['prompt_n'] for r in rounds):10.0f} "
              f"{statistics.median(r['predicted_n'] for r in rounds):7.0f} "
              f"{passes[arm][0]:8.2f} / {passes[arm][1]:.2f}")


if __name__ == "__main__":
    main()
