"""A run's trace: spans timed per thread into one Chrome Trace Event file per run, the per-role and per-stage
usage of its model calls, the tracer of the run in progress (a context variable), and run ids.

- _trace: `Tracer`, `current_tracer`, `use_tracer`, `new_run_id`.
"""

from ._trace import Tracer, current_tracer, new_run_id, use_tracer

__all__ = [
    "Tracer",
    "current_tracer",
    "use_tracer",
    "new_run_id",
]
