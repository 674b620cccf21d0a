"""The LLM operators' prompts, pure: OPRO's scored history and meta-prompt, the reflection and merge
prompts, and the bounded JSON schema every one of them asks for."""

from __future__ import annotations

from typing import Any

from mutators.base import MutationContext, bound_length, instruction_hash, is_multiline, normalize, placeholders

OPRO_MAX_HISTORY = 8
REFLECT_MAX_FEEDBACK = 6
FEEDBACK_MAX_CHARS = 400

SYSTEM = (
    "You improve instructions for a research assistant that writes Markdown. "
    'Reply with one JSON object and nothing else: {"instruction": "..."}.'
)

TASK_OUTPUT = {
    "enumerated": "a numbered list with exactly the number of items the task asks for",
    "best_practices": "practical best-practice guidance a practitioner can apply",
    "research": "a research report that integrates several sources",
}


def _output_kind(task_type: str) -> str:
    return TASK_OUTPUT.get(task_type, "a Markdown answer to a research task")


def instruction_schema(max_chars: int) -> dict[str, Any]:
    """The bounded JSON schema every LLM operator asks for."""
    return {
        "type": "object",
        "properties": {"instruction": {"type": "string", "minLength": 20, "maxLength": int(max_chars)}},
        "required": ["instruction"],
        "additionalProperties": False,
    }


def _prompt_text(text: str, max_chars: int) -> str:
    return bound_length(normalize(text) if not is_multiline(text) else text, max_chars)[0]


def _keep_placeholders_line(ctx: MutationContext) -> str:
    fields = sorted(placeholders(ctx.base))
    return f" Keep the template fields {', '.join(fields)} exactly as written." if fields else ""


def opro_history(ctx: MutationContext, limit: int = OPRO_MAX_HISTORY) -> list[tuple[str, float]]:
    """The scored instructions OPRO shows: duplicates merged (mean score), best `limit` kept, ascending by score.

    With no history the base is shown alone, unscored (score NaN).
    """
    if not ctx.history:
        return [(ctx.base, float("nan"))]
    by_hash: dict[str, tuple[str, list[float]]] = {}
    for text, score in ctx.history:
        entry = by_hash.setdefault(instruction_hash(text), (text, []))
        entry[1].append(score)
    merged = [(text, sum(s) / len(s), h) for h, (text, s) in by_hash.items()]
    merged.sort(key=lambda t: (-t[1], t[2]))
    best = merged[:limit]
    best.sort(key=lambda t: (t[1], t[2]))
    return [(text, score) for text, score, _ in best]


def opro_messages(ctx: MutationContext) -> list[dict[str, str]]:
    """OPRO meta-prompt: scored instructions in ascending order, then a request for a better one."""
    blocks = []
    for text, score in opro_history(ctx):
        shown = "not scored yet" if score != score else f"{score:.2f}"
        blocks.append(f"text:\n{_prompt_text(text, ctx.max_chars)}\nscore:\n{shown}")
    user = (
        f"Your task is to write the synthesis instruction for a research assistant that writes "
        f"{_output_kind(ctx.task_type)}.\n"
        "Below are previous instructions with their scores. The score ranges from 0 to 10 and higher is better. "
        "The instructions are arranged in ascending order of score.\n\n"
        + "\n\n".join(blocks)
        + "\n\nWrite a new instruction that is different from all the instructions above and scores higher than "
        f"all of them. Use short imperative sentences, under {ctx.max_chars} characters."
        + _keep_placeholders_line(ctx)
        + '\nReply as JSON: {"instruction": "..."}'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def reflect_messages(ctx: MutationContext) -> list[dict[str, str]]:
    """GEPA-style reflection: the parent instruction, the evaluator's feedback on its worst tasks, a targeted edit."""
    items = [normalize(f)[:FEEDBACK_MAX_CHARS] for f in ctx.feedback if f.strip()][:REFLECT_MAX_FEEDBACK]
    feedback = "\n".join(f"- {f}" for f in items)
    user = (
        f"A research assistant that writes {_output_kind(ctx.task_type)} was given this instruction:\n"
        f"```\n{_prompt_text(ctx.base, ctx.max_chars)}\n```\n"
        "An evaluator scored its outputs. Its feedback on the tasks where the assistant did worst:\n"
        f"{feedback}\n\n"
        "Write an improved instruction. Read the feedback, identify the weaknesses it names, and make a "
        "targeted edit that fixes them: keep the sentences that work and change or add at most two sentences. "
        f"Stay under {ctx.max_chars} characters."
        + _keep_placeholders_line(ctx)
        + '\nReply as JSON: {"instruction": "..."}'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def crossover_messages(a: str, b: str, ctx: MutationContext) -> list[dict[str, str]]:
    """Merge prompt for two good instructions."""
    user = (
        f"Two instructions for a research assistant that writes {_output_kind(ctx.task_type)} both scored well.\n"
        f"Instruction A:\n```\n{_prompt_text(a, ctx.max_chars)}\n```\n"
        f"Instruction B:\n```\n{_prompt_text(b, ctx.max_chars)}\n```\n"
        "Merge them into one instruction that keeps the strongest rules of both and states no rule twice. "
        f"Stay under {ctx.max_chars} characters."
        + _keep_placeholders_line(ctx)
        + '\nReply as JSON: {"instruction": "..."}'
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
