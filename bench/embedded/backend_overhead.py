"""Embedded throughput: raw xllamacpp against the project's embedded backend, same prompts and settings.

    python bench/embedded/backend_overhead.py [--quick] [--runs 7] [--max-tokens 128] [--n-ctx 2048]

Three arms share one loaded model (the backend's per-process runtime), so only the wrapper differs:
  raw      Server.handle_chat_completions(body) with the same request body the backend builds
  backend  EmbeddedLLM.chat (message validation, request building, response parsing, ChatResult)
  roles    make_roles(...).producer.chat (the backend plus trace span and per-role accounting; cache off)
Each run sends every prompt through all three arms back to back (order rotated), so the arms share the same
machine load; tokens/s of a call is completion tokens / wall seconds. Reported: median tokens/s per arm over
all calls, and each wrapper's overhead against raw as 1 - the median of its paired tokens/s ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.backends.embedded import EmbeddedLLM, completion_request, embedded_threads, locate_gguf  # noqa: E402
from harness.config import BackendConfig  # noqa: E402
from harness.inference import SMOKE_LABEL, make_roles  # noqa: E402

PROMPTS = [
    "Explain in a few sentences why the sky is blue.",
    "List five practical tips for writing clear technical documentation.",
    "Describe how a hash table works and when it is a poor choice.",
]


def timed(call, prompt: str) -> tuple[int, float]:
    start = time.perf_counter()
    n = call(prompt)
    return n, time.perf_counter() - start


def wrapper_cpu_us(iterations: int = 20000) -> dict[str, float]:
    """Microseconds of Python work per call that each wrapper adds, measured without the model."""
    from harness.backends.embedded import parse_completion
    from harness.inference import ChatResult, RoleLLM

    msgs = [{"role": "user", "content": PROMPTS[0]}]
    canned = {
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "x " * 100}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 100},
    }
    start = time.perf_counter()
    for _ in range(iterations):
        body = completion_request(msgs, schema=None, temperature=0.0, max_tokens=128, seed=0)
        parse_completion(canned, model="m", n_ctx=2048, latency_s=0.0, max_tokens=body["max_tokens"])
    backend_us = (time.perf_counter() - start) / iterations * 1e6

    class Canned:
        backend, model = "embedded", "m"
        result = ChatResult("x", 20, 100, 0.0, "m", "embedded")

        def chat(self, messages, **kw):
            return self.result

    role = RoleLLM("producer", Canned())
    start = time.perf_counter()
    for _ in range(iterations):
        role.chat(msgs, temperature=0.0, max_tokens=128, seed=0)
    return {"backend": backend_us, "roles": backend_us + (time.perf_counter() - start) / iterations * 1e6}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--n-ctx", type=int, default=2048)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    ap.add_argument("--quick", action="store_true", help="one run (each prompt once through each arm)")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs = 1

    path = locate_gguf()
    backend = EmbeddedLLM(path, n_ctx=args.n_ctx)
    server = backend.server
    roles = make_roles(BackendConfig(kind="embedded", n_ctx=args.n_ctx, cache=False))
    opts = {"temperature": 0.0, "max_tokens": args.max_tokens, "seed": 0}

    def raw(prompt: str) -> int:
        body = completion_request([{"role": "user", "content": prompt}], schema=None, **opts)
        return int(server.handle_chat_completions(body)["usage"]["completion_tokens"])

    def wrapped(prompt: str) -> int:
        return backend.chat([{"role": "user", "content": prompt}], **opts).completion_tokens

    def role(prompt: str) -> int:
        return roles.producer.chat([{"role": "user", "content": prompt}], **opts).completion_tokens

    arms = {"raw": raw, "backend": wrapped, "roles": role}
    names = list(arms)
    for name in names:  # warm-up: prompt cache and page-in, not measured
        timed(arms[name], PROMPTS[0])

    # Paired design: each (run, prompt) sends the prompt through all arms back to back, in rotated order, so
    # the arms share whatever else the machine is doing; overhead is the median of the paired ratios.
    tps: dict[str, list[float]] = {name: [] for name in names}
    tokens: dict[str, set[int]] = {name: set() for name in names}
    ratios: dict[str, list[float]] = {"backend": [], "roles": []}
    k = 0
    for _ in range(args.runs):
        for prompt in PROMPTS:
            order = names[k % len(names):] + names[: k % len(names)]
            k += 1
            pair = {}
            for name in order:
                n, wall = timed(arms[name], prompt)
                pair[name] = n / wall
                tps[name].append(pair[name])
                tokens[name].add(n)
            for name in ratios:
                ratios[name].append(pair[name] / pair["raw"])

    med = {name: statistics.median(v) for name, v in tps.items()}
    overhead = {name: 100.0 * (1.0 - statistics.median(r)) for name, r in ratios.items()}
    print("== embedded throughput ==")
    print(f"model: {path.name} ({backend.model}); {SMOKE_LABEL}")
    print(f"prompts: {len(PROMPTS)}  max_tokens: {args.max_tokens}  runs: {args.runs}  n_ctx: {args.n_ctx}  "
          f"threads: {embedded_threads()} (HARNESS_EMBEDDED_THREADS)")
    for name in arms:
        spread = f"min {min(tps[name]):.1f} max {max(tps[name]):.1f}"
        print(f"{name:8s} median {med[name]:7.1f} tok/s  ({spread}; completion tokens per call {sorted(tokens[name])})")
    print(f"overhead backend vs raw: {overhead['backend']:+.2f}% (median of {len(ratios['backend'])} paired calls)")
    print(f"overhead roles   vs raw: {overhead['roles']:+.2f}% (median of {len(ratios['roles'])} paired calls)")
    worst = max(overhead.values())
    print(f"goal: wrapper cost < 5% of raw tokens/s: {'met' if worst < 5 else 'NOT met'} (worst {worst:+.2f}%; "
          f"single paired calls under load scatter by several % either way; the CPU lines below time the "
          f"wrappers alone, without the model)")
    cpu = wrapper_cpu_us()
    raw_call_s = args.max_tokens / med["raw"]
    for name, us in cpu.items():
        print(f"wrapper CPU {name:8s} {us:7.1f} us/call = {100 * us / 1e6 / raw_call_s:.4f}% of a {raw_call_s:.2f}s raw call")
    figures = {"wrapper_cpu_us": cpu, "median_tps": med, "overhead_pct": overhead, "calls": tps, "max_tokens": args.max_tokens}
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
