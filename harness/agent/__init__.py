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
from ._skills import (
    ANNOTATED_HEADING,
    DEEP_INSTRUCTION,
    SKILLS,
    Skill,
    annotated_sources_section,
    apply_post_synthesis,
    auto_activate,
    parse_skills,
    parse_skills_detailed,
    post_wiggum_flags,
    pre_synthesis_injections,
    research_rounds_bonus,
    run_hooks,
)

__all__ = [
    "Harness",
    "Prepared",
    "RunResult",
    "output_name_for",
    "Skill",
    "SKILLS",
    "ANNOTATED_HEADING",
    "DEEP_INSTRUCTION",
    "parse_skills",
    "parse_skills_detailed",
    "auto_activate",
    "research_rounds_bonus",
    "pre_synthesis_injections",
    "post_wiggum_flags",
    "apply_post_synthesis",
    "annotated_sources_section",
    "run_hooks",
]
