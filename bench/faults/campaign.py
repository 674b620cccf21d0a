"""The fault campaign: every fault case, each with its outcome, as a user meets it.

Cases live in bench/faults/<area>.py (CASES lists, the areas in AREAS); each runs in a fresh temporary folder
against the project's Ollama-faithful stand-in server (tests/ollama_stub.py) or the scripted fake backend, through
the command line where the user meets the fault.

    python bench/faults/campaign.py                 # every case, a table, exit 1 if any case is a defect
    python bench/faults/campaign.py --only 41.1     # the cases whose id starts with 41.1
    python bench/faults/campaign.py --repeat 2      # run the whole campaign twice
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from bench.faults import Case, Outcome  # noqa: E402

AREAS = ("backend", "inputs", "stores")  # the modules of bench/faults/ that hold cases (CASES); the rest are scripts


def all_cases() -> list[Case]:
    cases: list[Case] = []
    for area in AREAS:
        cases.extend(importlib.import_module(f"bench.faults.{area}").CASES)
    return cases


def run_case(case: Case) -> tuple[Outcome, float]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fault-") as tmp:
        try:
            out = case.run(Path(tmp))
        except Exception as exc:  # the case's own machinery failed: a defect of the campaign, said as one
            out = Outcome(False, f"case raised {type(exc).__name__}: {exc} | {traceback.format_exc(limit=2)!r}")
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="run the cases whose id starts with this")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    cases = [c for c in all_cases() if c.id.startswith(args.only)]
    defects = 0
    for rep in range(1, args.repeat + 1):
        print(f"## pass {rep} of {args.repeat}: {len(cases)} cases")
        print("| case | fault | outcome | seconds | what the user saw |")
        print("| --- | --- | --- | --- | --- |")
        for case in cases:
            out, secs = run_case(case)
            defects += not out.ok
            seen = out.seen.replace("|", "/").replace("\n", " ")[:300]
            print(f"| {case.id} | {case.what} | {'held' if out.ok else 'DEFECT'} | {secs:.1f} | {seen} |", flush=True)
    print(f"defects: {defects} over {len(cases) * args.repeat} case runs")
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
