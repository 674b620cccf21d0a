"""The single-focus run lifecycle (seed 003), stage by stage.

    parse_skills -> memory.get_context -> make_plan -> auto_activate -> gather_research      (prepare)
    -> synthesize (+ count check) -> write output -> wiggum_loop -> run_panel
    -> post_synthesis skills -> compress_and_store -> runs.jsonl + trace                    (finish)

`prepare` holds everything that does not depend on SYNTH_INSTRUCTION, so an experiment computes it once per task
and reuses it across trials; `finish` is what a synthesis sweep re-runs. `run` does both under one trace.

- _pipeline: `Harness` (prepare, finish, run) and `output_name_for`.
- _prepared: `Prepared`, what prepare hands to finish.
- _record: `RunResult` and the run's line in runs.jsonl.
- _skills: `/name` skills at the start of a task and their hooks at fixed stages (`parse_skills`, `SKILLS`).
"""

from ._pipeline import Harness, output_name_for
from ._prepared import Prepared
from ._record import RunResult
from ._skills import parse_skills, parse_skills_detailed

__all__ = [
    "Harness",
    "Prepared",
    "RunResult",
    "output_name_for",
    "parse_skills",
    "parse_skills_detailed",
]
