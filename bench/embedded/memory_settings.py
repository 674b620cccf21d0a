"""Embedded model: memory of two one-sequence replicas against llama.cpp settings (n_ubatch, KV cache type).

    python bench/embedded/memory_settings.py --model PATH [--arms default ub=128 ub=128,kv=q8_0] [--rounds 2]
                                    [--max-tokens 48]
    python bench/embedded/memory_settings.py --bare      # RSS / PSS of a Python that imports the sweep's modules, no model

Each arm runs in a fresh process, the arms interleaved `--rounds` times (the machine drifts). `default` is the
backend as shipped (llama.cpp's n_ubatch 512, n_batch 2048, f16 KV cache). An arm's settings change the params
of every llama.cpp server the project's own EmbeddedLLM / shared_server / _load path builds (the bench wraps
xllamacpp.Server; the backend has no knob for them): `ub=N` sets n_ubatch = n_batch = N, `kv=q8_0` (or another
ggml type) sets cache_type_k and cache_type_v. The process builds both replicas (2 slots, n_ctx 4096, 1 thread
each unless HARNESS_EMBEDDED_THREADS says otherwise, repacking off, prompt reuse off), then sends two long prompts at once (one per replica, ~3000 tokens: project documentation as
context plus a question), then two ~600-token prompts at once, each a greedy reply of --max-tokens. Reported:
VmRSS, RssAnon, RssFile and PSS (smaps_rollup) after the load and after the requests, peak RSS (VmHWM), prefill
and decode tok/s from llama.cpp's timings (summed over the four requests), and whether the four greedy replies
equal the first arm's.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

N_CTX, SLOTS = 4096, 2
QUESTIONS = (
    "Summarise in two sentences what the documentation above says about memory.",
    "List three settings the documentation above mentions, one per line.",
    "Which measurement above took the longest? Answer in one sentence.",
    "Name one risk the documentation above warns about, in one sentence.",
)


# The prompts' context: docs/BENCHMARKS.md as committed with the recorded figures (3af6a05), read from git so that
# later edits of the page no longer change the prompts of a re-run. The figures themselves were measured on the
# working copy of the page while that commit was written: a re-run reproduces them closely, not byte for byte.
CONTEXT_REV = "3af6a05:docs/BENCHMARKS.md"


def _context(start: int, chars: int) -> str:
    try:
        text = subprocess.run(["git", "show", CONTEXT_REV], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"error: cannot read the prompts' context {CONTEXT_REV} from git ({exc}); run from a clone "
                         "of the project with its history") from None
    return text[start:start + chars]


def _prompts() -> list[list[dict]]:
    """Two ~3000-token prompts, then two ~600-token ones; no two share a prefix beyond the chat template."""
    spans = ((0, 8800), (20000, 8800), (40000, 2200), (50000, 2200))
    return [[{"role": "system", "content": "You answer questions about the documentation you are given."},
             {"role": "user", "content": f"{_context(a, n)}\n\n{q}"}] for (a, n), q in zip(spans, QUESTIONS)]


def _mem() -> dict:
    out: dict[str, float] = {}
    for name, fields in (("status", ("VmRSS", "VmHWM", "RssAnon", "RssFile")),
                         ("smaps_rollup", ("Pss", "Pss_Anon", "Pss_File"))):
        for line in Path(f"/proc/self/{name}").read_text().splitlines():
            key = line.split(":")[0]
            if key in fields:
                out[key] = int(line.split()[1]) / 1024
    return out


def _apply(arm: str) -> None:
    """Make every xllamacpp.Server the backend builds use the arm's settings."""
    import xllamacpp as xlc

    settings = dict(part.split("=", 1) for part in arm.split(",")) if arm != "default" else {}
    real = xlc.Server

    def server(params):  # noqa: ANN001, ANN202
        if "ub" in settings:
            params.n_ubatch = params.n_batch = int(settings["ub"])
        if "kv" in settings:
            params.cache_type_k = params.cache_type_v = getattr(xlc.ggml_type, f"GGML_TYPE_{settings['kv'].upper()}")
        return real(params)

    xlc.Server = server


def child(arm: str, model: str, max_tokens: int) -> dict:
    from harness.backends.embedded import EmbeddedLLM, completion_request

    _apply(arm)
    before = _mem()
    t0 = time.perf_counter()
    llm = EmbeddedLLM(Path(model), n_ctx=N_CTX, slots=SLOTS)
    server = llm.server
    held = [server._acquire() for _ in range(SLOTS)]  # build both replicas now, as a sweep does by minute 2
    for s in held:
        server._release(s)
    load_s = time.perf_counter() - t0
    loaded = _mem()
    prompts = _prompts()
    results: list[dict] = [{} for _ in prompts]

    def ask(i: int) -> None:
        body = completion_request(prompts[i], schema=None, temperature=0.0, max_tokens=max_tokens, seed=1,
                                  sampling=llm.sampling)
        resp = server.handle_chat_completions(body)
        results[i] = {"text": resp["choices"][0]["message"]["content"], "timings": resp.get("timings", {}),
                      "prompt_tokens": resp.get("usage", {}).get("prompt_tokens")}

    t1 = time.perf_counter()
    for pair in ((0, 1), (2, 3)):
        threads = [threading.Thread(target=ask, args=(i,)) for i in pair]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    wall = time.perf_counter() - t1
    after = _mem()
    tim = [r["timings"] for r in results]
    return {
        "arm": arm, "load_s": load_s, "wall_s": wall, "before": before, "loaded": loaded, "after": after,
        "prompt_tokens": [r["prompt_tokens"] for r in results],
        "prefill_tok_s": sum(t.get("prompt_n", 0) for t in tim) / (sum(t.get("prompt_ms", 0) for t in tim) / 1000),
        "decode_tok_s": sum(t.get("predicted_n", 0) for t in tim) / (sum(t.get("predicted_ms", 0) for t in tim) / 1000),
        "texts": [r["text"] for r in results],
    }


def bare() -> dict:
    before = _mem()
    for name in ("experiments.sweep", "experiments.run"):
        importlib.import_module(name)
    return {"before": before, "after": _mem()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="GGUF path (default: $HARNESS_EMBEDDED_MODEL, else SmolLM2)")
    ap.add_argument("--arms", nargs="+", default=["default", "ub=256", "ub=128"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--bare", action="store_true", help="only the RSS of a Python importing the sweep modules")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare:
        r = bare()
        print(f"bare python: RSS {r['before']['VmRSS']:.0f} MiB; after import experiments.sweep, experiments.run: "
              f"RSS {r['after']['VmRSS']:.0f} MiB (anon {r['after']['RssAnon']:.0f}, file "
              f"{r['after']['RssFile']:.0f}), PSS {r['after']['Pss']:.0f} MiB")
        return
    from harness.backends.embedded import locate_gguf

    model = str(locate_gguf(args.model))
    if args.child:
        print(json.dumps(child(args.child, model, args.max_tokens)))
        return
    digest = hashlib.sha256(Path(model).read_bytes()).hexdigest()[:12]
    print(f"model {Path(model).name} sha256 {digest}; 2 replicas, n_ctx {N_CTX}, greedy, max_tokens "
          f"{args.max_tokens}; arms {args.arms} x {args.rounds} rounds")
    print(f"{'round':>5} {'arm':>14} {'load RSS':>8} {'anon':>5} {'file':>5} {'PSS':>5} | {'after RSS':>9} {'anon':>5} "
          f"{'file':>5} {'PSS':>5} {'peak':>5} | {'prefill':>7} {'decode':>6} {'wall s':>6} | replies = first arm's")
    first: list[str] | None = None
    for rnd in range(args.rounds):
        for arm in args.arms:
            out = subprocess.run([sys.executable, __file__, "--child", arm, "--model", model, "--max-tokens",
                                  str(args.max_tokens)], capture_output=True, text=True, cwd=ROOT)
            if out.returncode != 0:
                print(f"{rnd:>5} {arm:>14} failed (rc {out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            if first is None:
                first = r["texts"]
                print(f"prompt tokens {r['prompt_tokens']}; replies of the first arm:")
                for t in first:
                    print("   ", json.dumps(t)[:160])
            same = sum(a == b for a, b in zip(first, r["texts"]))
            differ = ",".join(str(i + 1) for i, (a, b) in enumerate(zip(first, r["texts"])) if a != b)
            lo, af = r["loaded"], r["after"]
            print(f"{rnd:>5} {arm:>14} {lo['VmRSS']:8.0f} {lo['RssAnon']:5.0f} {lo['RssFile']:5.0f} {lo['Pss']:5.0f} | "
                  f"{af['VmRSS']:9.0f} {af['RssAnon']:5.0f} {af['RssFile']:5.0f} {af['Pss']:5.0f} {af['VmHWM']:5.0f} | "
                  f"{r['prefill_tok_s']:7.1f} {r['decode_tok_s']:6.1f} {r['wall_s']:6.1f} | {same} of {len(first)}{f' (differ: {differ})' if differ else ''}",
                  flush=True)


if __name__ == "__main__":
    main()
