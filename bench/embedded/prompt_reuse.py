"""Embedded model: what llama.cpp's prompt-prefix reuse saves, and whether scores depend on it or on concurrency.

    python bench/embedded/prompt_reuse.py [--arms on:auto off:auto off:1] [--out DIR] [-- extra overrides]

Each arm "reuse:concurrency" runs the README's first-look sweep (`+sweep=synth_mutation benchmark=smoke
sweep.allow_underpowered=true sweep.n_trials=2 sweep.baseline_repeats=1`) on the embedded default model in a
fresh results dir, with backend.embedded_reuse_prompt=reuse and backend.concurrency=concurrency, in a process of
its own. The arms run at the same time, so they share the machine's load. Inside each process every embedded
reply's llama.cpp timings are recorded (harness.backends.embedded.parse_completion wrapped): prompt tokens
processed, prompt tokens reused from the slot (cache_n), prefill and decode milliseconds.

Reported per arm: wall time, requests, prompt tokens reused / processed, prefill and decode seconds (summed over
requests, so two slots' overlapping work counts twice), and every task score of every trial from the study
(optuna.db), so arms can be compared score by score: with reuse off, concurrency 1 and auto should agree.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FIRST_LOOK = ["+sweep=synth_mutation", "benchmark=smoke", "sweep.allow_underpowered=true", "sweep.n_trials=2",
              "sweep.baseline_repeats=1"]


def child(arm: str, out: Path, extra: list[str]) -> None:
    """Run one arm's sweep in this process, recording llama.cpp's timings of every embedded reply."""
    from harness.backends import embedded

    reuse, conc = arm.split(":")
    rows: list[dict] = []
    lock = threading.Lock()
    parse = embedded.parse_completion

    def recording(resp, **kw):
        if isinstance(resp, dict) and isinstance(resp.get("timings"), dict):
            with lock:
                rows.append(dict(resp["timings"]))
        return parse(resp, **kw)

    embedded.parse_completion = recording
    t0 = time.perf_counter()

    def report() -> None:
        total = lambda k: sum(float(r.get(k, 0) or 0) for r in rows)  # noqa: E731
        (out / "reuse_timings.json").write_text(json.dumps({
            "arm": arm, "wall_s": time.perf_counter() - t0, "requests": len(rows),
            "prompt_processed": total("prompt_n"), "prompt_reused": total("cache_n"),
            "prefill_s": total("prompt_ms") / 1000, "decode_s": total("predicted_ms") / 1000,
            "decoded": total("predicted_n")}))

    atexit.register(report)
    # a background start (nohup, `&`) inherits SIGINT ignored: restore Ctrl-C so the sweep can stop cleanly
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = ["experiments.run", *FIRST_LOOK, f"sweep.name=reuse_{reuse}_{conc}", f"results_dir={out}",
                f"backend.embedded_reuse_prompt={'true' if reuse == 'on' else 'false'}",
                f"backend.concurrency={conc}", *extra]
    runpy.run_module("experiments.run", run_name="__main__")


def task_scores(out: Path) -> dict[str, dict[str, float]]:
    """trial number + kind -> {task id: score} from the study, baseline and proposals alike."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    found: dict[str, dict[str, float]] = {}
    for s in optuna.get_all_study_summaries(f"sqlite:///{out / 'optuna.db'}"):
        study = optuna.load_study(study_name=s.study_name, storage=f"sqlite:///{out / 'optuna.db'}")
        for t in study.trials:
            scores = t.user_attrs.get("task_scores")
            if scores:
                found[f"trial {t.number} {t.user_attrs.get('operator', '?')}"] = scores
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", nargs="+", default=["on:auto", "off:auto", "off:1"])
    ap.add_argument("--out", type=Path, default=Path("/tmp/prompt_reuse"))
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("extra", nargs="*", help="further Hydra overrides for every arm")
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.out, args.extra)
        return

    procs = {}
    for arm in args.arms:
        out = args.out / arm.replace(":", "_")
        out.mkdir(parents=True, exist_ok=True)
        log = open(out / "log.txt", "w")
        procs[arm] = (subprocess.Popen([sys.executable, __file__, "--child", arm, "--out", str(out), *args.extra],
                                       stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ)), out)
    results = {}
    for arm, (proc, out) in procs.items():
        rc = proc.wait()
        got = json.loads((out / "reuse_timings.json").read_text()) if (out / "reuse_timings.json").exists() else {}
        results[arm] = {**got, "rc": rc, "scores": task_scores(out) if (out / "optuna.db").exists() else {}}

    print(f"{'arm':>8} {'rc':>3} {'wall':>8} {'requests':>8} {'prompt reused / processed':>26} {'prefill s':>9} "
          f"{'decode s':>8} {'decoded':>7}")
    for arm, r in results.items():
        if "wall_s" not in r:
            print(f"{arm:>8} {r['rc']:>3} (no timings)")
            continue
        print(f"{arm:>8} {r['rc']:>3} {r['wall_s'] / 60:7.1f}m {r['requests']:8d} "
              f"{r['prompt_reused']:>11.0f} / {r['prompt_processed']:<12.0f} {r['prefill_s']:9.1f} "
              f"{r['decode_s']:8.1f} {r['decoded']:7.0f}")
    print("\ntask scores per trial:")
    keys = sorted({k for r in results.values() for k in r["scores"]})
    for k in keys:
        print(f"  {k}")
        for arm, r in results.items():
            print(f"    {arm:>8}: " + ", ".join(f"{t} {v:.3f}" for t, v in sorted(r["scores"].get(k, {}).items())))
    (args.out / "summary.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
