"""Several worker processes at once, for the multi-process store tests.

forkserver, not fork: a fork of the pytest process (MLflow, Chroma and stub threads alive from earlier tests) can
inherit a held lock and hang forever; the fork server is a clean process. Workers are daemons, joined with a
timeout and killed if still alive, so a stuck worker fails its test instead of hanging the suite.
"""

from __future__ import annotations

import multiprocessing as mp
from typing import Any, Callable


def run_workers(target: Callable[..., Any], *args: Any, workers: int = 4, timeout_s: float = 120.0) -> None:
    """Run target(worker_index, *args) in `workers` processes at once; assert every one exited 0."""
    ctx = mp.get_context("forkserver")
    procs = [ctx.Process(target=target, args=(w, *args), daemon=True) for w in range(workers)]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout_s)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    assert [p.exitcode for p in procs] == [0] * workers, f"worker exit codes: {[p.exitcode for p in procs]}"
