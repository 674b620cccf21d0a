"""The single-focus run lifecycle (seed 003), stage by stage.

    parse_skills -> memory.get_context -> make_plan -> auto_activate -> gather_research      (prepare)
    -> synthesize (+ count check) -> write output -> wiggum_loop -> run_panel
    -> post_synthesis skills -> compress_and_store -> runs.jsonl + trace                    (finish)

`prepare` holds everything that does not depend on SYNTH_INSTRUCTION, so an experiment computes it once per task
and reuses it across trials; `finish` is what a synthesis sweep re-runs. `run` does both under one trace.
"""

from ._pipeline import Harness, output_name_for
from ._prepared import Prepared
from ._record import RunResult

__all__ = [
    "Harness",
    "Prepared",
    "RunResult",
    "output_name_for",
]
