"""Embedded prompt cache: wall time per request and process RSS growth at several cache_ram_mib settings.

    python bench/embedded/prompt_cache.py [--sizes 8192,256,0] [--requests 20] [--batches 3] [--max-tokens 16]
    python bench/embedded/prompt_cache.py --distinct --facts 13 --requests 10 --batches 2 --sizes 8192,16,0 --max-tokens 8

llama.cpp keeps a host-memory cache of finished prompts' states (`cache_ram_mib`, 8192 MiB by default; the
harness sets backend.embedded_cache_ram_mib = 256, 0 = off). The cache serves prefix reuse only, which the harness
leaves off by default (backend.embedded_reuse_prompt); this bench turns reuse on. For each size a fresh process
loads the embedded model (default SmolLM2 GGUF, `locate_gguf(None)`; n_ctx 2048 per slot, 2 slots as
conf/backend/embedded.yaml) through EmbeddedLLM and sends the same `--requests` chat requests, one at a time, `--batches` times: a shared
~1000-token system prompt and a short question that differs per request (greedy, seed 0). After each batch it
reads VmRSS from /proc/self/status. The table gives, per size and batch, the median and mean wall seconds per
request and the RSS growth since the model was loaded. One process per size, so one size's cache never
inflates the next one's RSS. Linux only (VmRSS).

With one shared prefix every request reuses its slot's own KV cache, so the host-memory cache is never
consulted. --distinct gives every request a system prompt of its own (--facts sets its length, 13 = ~300
tokens): the slots then keep switching prompts, llama.cpp saves each one it replaces into the host cache and
restores it when that prompt comes back (batch 2 onwards), which is what a sweep's many distinct task prompts
do. A small size (16) shows the cap at work within a short run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.backends.embedded import EmbeddedLLM, embedded_threads, locate_gguf  # noqa: E402

N_CTX, SLOTS = 2048, 2
RIVERS = ["Alder", "Birch", "Cedar", "Dunmore", "Elm", "Fallow", "Garnet", "Hollis", "Ivy", "Juniper"]
DIRECTIONS = ["north", "south", "east", "west"]


def shared_prefix(facts: int = 47, first: int = 1) -> str:
    """A deterministic system prompt of numbered facts (47 are about 1000 tokens for SmolLM2's tokenizer)."""
    lines = ["You answer questions about the following numbered facts. Be brief."]
    for i in range(first, first + facts):
        river = RIVERS[i % len(RIVERS)]
        lines.append(f"Fact {i}: the river {river} {i} flows {DIRECTIONS[i % 4]} into lake {i * 7 % 97}.")
    return "\n".join(lines)


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def child(mib: int, requests: int, batches: int, max_tokens: int, facts: int, distinct: bool) -> dict:
    """One size in this process: load, then the batches; a JSON-able summary."""
    systems = [shared_prefix(facts, 1 + (i * facts if distinct else 0)) for i in range(requests)]
    questions = [f"Question {i + 1}: where does the river in fact {3 * i + 2} flow?" for i in range(requests)]
    start = time.perf_counter()
    llm = EmbeddedLLM(locate_gguf(None), n_ctx=N_CTX, slots=SLOTS, cache_ram_mib=mib, reuse_prompt=True)
    load_s = time.perf_counter() - start
    rss0 = rss_mib()
    out: dict = {"mib": mib, "load_s": load_s, "rss_loaded": rss0, "batches": []}
    for _ in range(batches):
        walls, prompt_tokens = [], 0
        for system, q in zip(systems, questions):
            t0 = time.perf_counter()
            result = llm.chat(
                [{"role": "system", "content": system}, {"role": "user", "content": q}],
                temperature=0.0,
                max_tokens=max_tokens,
                seed=0,
            )
            walls.append(time.perf_counter() - t0)
            prompt_tokens = result.prompt_tokens
        out["batches"].append(
            {
                "median_s": statistics.median(walls),
                "mean_s": statistics.fmean(walls),
                "first_s": walls[0],
                "rss_growth": rss_mib() - rss0,
                "prompt_tokens": prompt_tokens,
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8192,256,0", help="cache_ram_mib values, comma-separated")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--facts", type=int, default=47, help="facts in each system prompt (47 = ~1000 tokens)")
    ap.add_argument("--distinct", action="store_true", help="a different system prompt for every request")
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds allowed per size")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.requests, args.batches, args.max_tokens, args.facts, args.distinct)))
        return

    print(f"model {locate_gguf(None).name}, n_ctx {N_CTX} x {SLOTS} slots, threads {embedded_threads()}, "
          f"{args.requests} requests x {args.batches} batches, max_tokens {args.max_tokens}, "
          f"{'a distinct' if args.distinct else 'one shared'} system prompt of {args.facts} facts")
    rows = []
    for mib in (int(s) for s in args.sizes.split(",")):
        cmd = [sys.executable, __file__, "--child", str(mib), "--requests", str(args.requests),
               "--batches", str(args.batches), "--max-tokens", str(args.max_tokens), "--facts", str(args.facts)]
        cmd += ["--distinct"] if args.distinct else []
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if proc.returncode != 0:
            sys.exit(f"cache_ram_mib={mib} failed:\n{proc.stderr[-2000:]}")
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"cache_ram_mib={mib}: done", flush=True)

    print(f"\n{'cache_ram_mib':>13} {'batch':>5} {'prompt tok':>10} {'first s':>8} {'median s':>9} {'mean s':>7} "
          f"{'RSS growth MiB':>15}")
    for row in rows:
        for n, b in enumerate(row["batches"], start=1):
            print(f"{row['mib']:>13} {n:>5} {b['prompt_tokens']:>10} {b['first_s']:>8.3f} {b['median_s']:>9.3f} "
                  f"{b['mean_s']:>7.3f} {b['rss_growth']:>15.1f}")
        print(f"{'':>13} (load {row['load_s']:.2f} s, RSS after load {row['rss_loaded']:.0f} MiB)")


if __name__ == "__main__":
    main()
