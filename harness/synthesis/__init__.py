"""Stage 6, synthesize: the producer writes the answer in Markdown from task, memory, plan and research context,
with the instruction (SYNTH_INSTRUCTION) chosen per task type; and the Prompt Registry's read side, where a
`synth.source=prompts:/...` names registered instructions.

- _synthesize: `synthesize`, `synthesis_messages`, `instruction_for`, `DEFAULT_INSTRUCTIONS`, the count check and
  the echo retry (`ECHO_RETRY_NOTE`, the sections' tags `SECTION_TAGS`).
- _registry: `resolve_synth` (synth.source -> the registered texts) and the lookups the sweep's write side
  shares (`parse_source`, `prompt_name`, `lookup_source` ...). The tracking store's file, lock and WAL are
  harness.stores'.
"""

from ._registry import (
    CHAMPION,
    PREVIOUS,
    lookup_source,
    parse_source,
    prompt_name,
    prompt_version,
    prompt_versions,
    registry_client,
    resolve_synth,
    short_reason,
    with_texts,
)
from ._synthesize import (
    DEFAULT_INSTRUCTIONS,
    ECHO_RETRY_NOTE,
    SECTION_TAGS,
    count_from_task,
    expected_count,
    instruction_for,
    instruction_provenance,
    strip_fences,
    synthesize,
)

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "ECHO_RETRY_NOTE",
    "SECTION_TAGS",
    "instruction_for",
    "instruction_provenance",
    "count_from_task",
    "expected_count",
    "strip_fences",
    "synthesize",
    "CHAMPION",
    "PREVIOUS",
    "prompt_name",
    "parse_source",
    "resolve_synth",
    "with_texts",
    "lookup_source",
    "prompt_version",
    "prompt_versions",
    "registry_client",
    "short_reason",
]
