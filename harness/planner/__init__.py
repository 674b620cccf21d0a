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

from ._parse import filter_subtasks, parse_plan, parse_prior_knowledge
from ._passes import assess_prior_knowledge, make_plan
from ._plan import (
    COMPLEXITIES,
    MAX_FACTS,
    MAX_GAPS,
    MAX_ITEM_CHARS,
    MAX_QUERY_CHARS,
    MAX_SECTIONS,
    MAX_SENTENCE_CHARS,
    MAX_SUBTASKS,
    TASK_TYPES,
    Plan,
    PriorKnowledge,
    plan_from_dict,
)
from ._prompts import (
    PLAN_SYSTEM,
    PRIOR_SYSTEM,
    memory_block,
    plan_messages,
    plan_schema,
    prior_knowledge_messages,
    prior_knowledge_schema,
)
from ._tasktype import (
    infer_task_type,
    normalize_complexity,
    normalize_sections,
    normalize_task_type,
    reconcile_task_type,
)

__all__ = [
    "TASK_TYPES",
    "COMPLEXITIES",
    "MAX_FACTS",
    "MAX_GAPS",
    "MAX_SUBTASKS",
    "MAX_ITEM_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_SENTENCE_CHARS",
    "MAX_SECTIONS",
    "PriorKnowledge",
    "Plan",
    "plan_from_dict",
    "PRIOR_SYSTEM",
    "PLAN_SYSTEM",
    "prior_knowledge_schema",
    "plan_schema",
    "memory_block",
    "prior_knowledge_messages",
    "plan_messages",
    "infer_task_type",
    "normalize_task_type",
    "reconcile_task_type",
    "normalize_complexity",
    "normalize_sections",
    "filter_subtasks",
    "parse_prior_knowledge",
    "parse_plan",
    "assess_prior_knowledge",
    "make_plan",
]
