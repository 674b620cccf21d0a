"""Embedded model: two slots as one batched server against two one-sequence replicas (speed, replies, memory).

    python bench/embedded/replicas.py [--model PATH] [--modes batched replicas] [--requests 6] [--max-tokens 96]
                                      [--repack]

A mode runs in a fresh process: `batched` is one llama.cpp server with 2 slots (backend.embedded_batching=true),
`replicas` is two one-slot servers (the default). Each sends the same requests (system prompts of different
lengths that no other request shares, temperature 0.7, a seed per request): first one at a time ("alone"), then
two at once from a queue ("together"), then together and alone again, so a drift of the machine shows between the
passes, not between the ways. Reported per mode: wall time alone and together (both passes summed), their ratio,
how many replies decoded together equal the same request's reply alone (llama.cpp's batched decoding is not
batch-invariant; a one-sequence replica has no batch), peak RSS (VmHWM) and PSS at the end (the replicas map the
same GGUF twice: RSS counts its pages twice, PSS once). The model file's name and sha256 prefix are printed.
--repack turns on llama.cpp's CPU weight repacking (backend.embedded_repack), a repacked copy per server.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.embedded.prompt_cache import shared_prefix  # noqa: E402
from harness.backends.embedded import EmbeddedLLM, locate_gguf  # noqa: E402

N_CTX, SLOTS = 2048, 2
FACTS = (10, 47, 25, 60, 15, 35, 40, 20)


def _requests(n: int) -> list[list[dict]]:
    out, first = [], 1
    for i in range(n):
        facts = FACTS[i % len(FACTS)]
        out.append([{"role": "system", "content": shared_prefix(facts, first)},
                    {"role": "user", "content": "Which rivers flow north? Answer in three short lines."}])
        first += facts
    return out


def _proc_kib(name: str, field: str) -> int:
    for line in Path(f"/proc/self/{name}").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def child(mode: str, model: str, n: int, max_tokens: int, repack: bool = False) -> dict:
    llm = EmbeddedLLM(Path(model), n_ctx=N_CTX, slots=SLOTS, cache_ram_mib=0, batching=(mode == "batched"),
                      repack=repack)
    reqs = _requests(n)

    def ask(i: int) -> str:
        return llm.chat(reqs[i], temperature=0.7, max_tokens=max_tokens, seed=100 + i).text

    def alone() -> tuple[list[str], float]:
        t0 = time.perf_counter()
        texts = [ask(i) for i in range(n)]
        return texts, time.perf_counter() - t0

    def together() -> tuple[list[str], float]:
        todo: queue.Queue[int] = queue.Queue()
        for i in range(n):
            todo.put(i)
        texts = [""] * n

        def worker() -> None:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                texts[i] = ask(i)

        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker) for _ in range(SLOTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return texts, time.perf_counter() - t0

    a1, ta1 = alone()
    g1, tg1 = together()
    g2, tg2 = together()
    a2, ta2 = alone()
    same = sum(x == y for x, y in zip(a1 + a2, g1 + g2))
    return {"mode": mode, "alone_s": ta1 + ta2, "together_s": tg1 + tg2, "passes": [ta1, tg1, tg2, ta2],
            "same": same, "of": 2 * n, "alone_repeat_same": sum(x == y for x, y in zip(a1, a2)),
            "peak_rss_mib": _proc_kib("status", "VmHWM") / 1024, "pss_mib": _proc_kib("smaps_rollup", "Pss") / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF path (default: $HARNESS_EMBEDDED_MODEL, else SmolLM2)")
    ap.add_argument("--modes", nargs="+", default=["batched", "replicas"], choices=["batched", "replicas"])
    ap.add_argument("--requests", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--repack", action="store_true", help="llama.cpp's CPU weight repacking on")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    model = str(locate_gguf(args.model))
    if args.child:
        print(json.dumps(child(args.child, model, args.requests, args.max_tokens, args.repack)))
        return
    digest = hashlib.sha256(Path(model).read_bytes()).hexdigest()[:12]
    print(f"model {Path(model).name} sha256 {digest}; {args.requests} requests x 2 passes, max_tokens "
          f"{args.max_tokens}, 2 slots, 1 thread each unless HARNESS_EMBEDDED_THREADS says otherwise, repack "
          f"{'on' if args.repack else 'off'}")
    print(f"{'mode':>9} {'alone s':>8} {'together s':>10} {'ratio':>6} {'same as alone':>13} {'alone twice':>11} "
          f"{'peak RSS':>9} {'PSS':>8}  passes (alone, together, together, alone)")
    for mode in args.modes:
        out = subprocess.run([sys.executable, __file__, "--child", mode, "--model", model, "--requests",
                              str(args.requests), "--max-tokens", str(args.max_tokens)]
                             + (["--repack"] if args.repack else []),
                             capture_output=True, text=True, cwd=ROOT)
        if out.returncode != 0:
            print(f"{mode:>9} failed (rc {out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{mode:>9} {r['alone_s']:8.1f} {r['together_s']:10.1f} {r['together_s'] / r['alone_s']:6.2f} "
              f"{r['same']:>6d} of {r['of']:<3d} {r['alone_repeat_same']:>4d} of {args.requests:<3d} "
              f"{r['peak_rss_mib']:6.0f} MiB {r['pss_mib']:5.0f} MiB  "
              + ", ".join(f"{p:.1f}" for p in r["passes"]))


if __name__ == "__main__":
    main()
