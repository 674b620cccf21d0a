"""The planner: two fast structured calls before any search (seed 000).

Pass 1 (prior knowledge) asks the planner model what it already knows and what it would have to look up.
Pass 2 (plan) turns task, memory context, known facts and gaps into a seven-field plan. Both calls run at
cfg.temperature with bounded JSON schemas; replies are parsed json -> dirtyjson -> regex -> safe defaults.
`make_plan` never raises: backend and parse failures are recorded in `Plan.errors` and defaults returned.

- _plan: `Plan`, `PriorKnowledge`, `plan_from_dict` and the limits of every field.
- _prompts: the messages and bounded JSON schemas of both passes.
- _tasktype: task_type, complexity and section count, from the model's words or the task text.
- _parse: the replies read into a `PriorKnowledge` and a `Plan`; the subtask filter.
- _passes: `assess_prior_knowledge` (pass 1) and `make_plan` (both passes).
"""

from ._parse import filter_subtasks
from ._passes import make_plan
from ._plan import Plan, plan_from_dict
from ._prompts import memory_block

__all__ = [
    "Plan",
    "plan_from_dict",
    "memory_block",
    "filter_subtasks",
    "make_plan",
]
