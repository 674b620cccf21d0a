"""The LLM operators (opro, reflect, crossover): one bounded model call each, its reply parsed into a clean
instruction; crossover interleaves sentences when the model cannot serve."""

from __future__ import annotations

import re

from harness.inference import LLM, BackendError, ChatResult
from harness.text import JSONParseError, parse_json_object
from mutators.base import (
    Candidate,
    MutationContext,
    MutationFailed,
    bound_length,
    clean_instruction,
    degenerate_reason,
    instruction_hash,
    is_multiline,
    join_sentences,
    normalize,
    split_sentences,
)

from ._edits import _rng
from ._prompts import (
    REFLECT_MAX_FEEDBACK,
    crossover_messages,
    instruction_schema,
    opro_history,
    opro_messages,
    reflect_messages,
)

# What a model can do to an operator: a backend error (down, timeout, missing model) or a reply that does not
# parse or cannot serve (JSONParseError is a ValueError; MutationFailed says why). These fall back to a
# deterministic operator and say so. Anything else (TypeError, AttributeError, KeyError...) is a programming
# error: it propagates, so the trial fails with its traceback instead of quietly crediting another operator.
RECOVERABLE = (MutationFailed, BackendError, ValueError)

TEMPERATURE = 0.5
MAX_TOKENS = 300


# -- model replies -----------------------------------------------------------------------------------

_TRUNCATED_FIELD = re.compile(r'"instruction"\s*:\s*"((?:[^"\\]|\\.)*)', re.DOTALL)


def _instruction_from_reply(text: str) -> tuple[str, str]:
    """(instruction, how) from a model reply: JSON field, truncated JSON field, or the raw text."""
    try:
        obj, parser = parse_json_object(text)
    except JSONParseError:
        obj, parser = None, ""
    if obj is not None:
        value = obj.get("instruction")
        if isinstance(value, str) and value.strip():
            return value, parser
        strings = [v for v in obj.values() if isinstance(v, str) and len(v.split()) >= 4]
        if strings:
            return max(strings, key=len), f"{parser}:other-key"
        raise MutationFailed(f"model JSON has no usable 'instruction' string; keys: {sorted(obj)}")
    m = _TRUNCATED_FIELD.search(text)
    if m:
        body = m.group(1).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        return body, "regex"
    return text, "raw"


def _ask(llm: LLM | None, messages: list[dict[str, str]], ctx: MutationContext, who: str) -> tuple[str, str]:
    """One bounded model call -> (clean instruction, note). Raises MutationFailed on an unusable reply."""
    if llm is None:
        raise MutationFailed(f"{who} needs an LLM; none was given")
    result: ChatResult = llm.chat(
        messages,
        schema=instruction_schema(ctx.max_chars),
        temperature=TEMPERATURE,
        max_tokens=MAX_TOKENS,
        seed=ctx.seed,
    )
    raw, how = _instruction_from_reply(result.text)
    text, cut = bound_length(clean_instruction(raw), ctx.max_chars)
    reason = degenerate_reason(text, ctx.base)
    if reason:
        preview = normalize(result.text)[:80]
        raise MutationFailed(f"{who} reply unusable ({reason}; parsed via {how}): {preview!r}")
    note = f"parser={how}"
    if result.finish_reason == "length":
        note += "; reply cut by max_tokens"
    if cut:
        note += f"; cut to {len(text)} chars at a sentence boundary"
    return text, note


# -- LLM operators -----------------------------------------------------------------------------------


def opro(ctx: MutationContext, llm: LLM | None) -> Candidate:
    """OPRO: a new instruction conditioned on the scored history (ascending), asked to score higher."""
    text, note = _ask(llm, opro_messages(ctx), ctx, "opro")
    shown = len(opro_history(ctx)) if ctx.history else 0
    return Candidate.make(text, "opro", (ctx.base_hash,), f"{note}; history={shown}")


def reflect(ctx: MutationContext, llm: LLM | None) -> Candidate:
    """GEPA-style reflective edit of the parent from the evaluator's feedback on its worst tasks."""
    if not any(f.strip() for f in ctx.feedback):
        raise MutationFailed("reflect needs evaluator feedback in ctx.feedback; got none")
    text, note = _ask(llm, reflect_messages(ctx), ctx, "reflect")
    n = min(len([f for f in ctx.feedback if f.strip()]), REFLECT_MAX_FEEDBACK)
    return Candidate.make(text, "reflect", (ctx.base_hash,), f"{note}; feedback={n}")


def interleave(a: str, b: str) -> str:
    """Sentences of a and b alternately (a first), later repeats of the same sentence dropped."""
    sa, sb = split_sentences(a), split_sentences(b)
    out: list[str] = []
    seen: set[str] = set()
    for i in range(max(len(sa), len(sb))):
        for sents in (sa, sb):
            if i < len(sents):
                key = normalize(sents[i]).lower().rstrip(".!")
                if key not in seen:
                    seen.add(key)
                    out.append(sents[i])
    return join_sentences(out, multiline=is_multiline(a) or is_multiline(b))


def _crossover_texts(ctx: MutationContext) -> dict[str, str]:
    """hash -> text of the distinct instructions crossover may merge: the pool's, and the base when the pool holds
    fewer than two."""
    distinct: dict[str, str] = {}
    for text in ctx.pool:
        if text.strip():
            distinct.setdefault(instruction_hash(text), text)
    if len(distinct) < 2:
        distinct.setdefault(ctx.base_hash, ctx.base)
    return distinct


def _crossover_pair(ctx: MutationContext) -> tuple[str, str]:
    distinct = _crossover_texts(ctx)
    if len(distinct) < 2:
        raise MutationFailed(f"crossover needs two distinct instructions in ctx.pool; got {len(distinct)}")
    a, b = _rng(ctx, "crossover").sample(list(distinct.values()), 2)
    return a, b


def crossover(ctx: MutationContext, llm: LLM | None) -> Candidate:
    """Merge two pool candidates with the model; without a usable model, interleave their sentences."""
    a, b = _crossover_pair(ctx)
    parents = (instruction_hash(a), instruction_hash(b))
    try:
        text, note = _ask(llm, crossover_messages(a, b, ctx), ctx, "crossover")
        return Candidate.make(text, "crossover", parents, f"{note}; merged by model")
    except MutationFailed as exc:
        why = str(exc)
    except RECOVERABLE as exc:  # backend trouble or an unparseable reply degrades to the deterministic merge
        why = f"{type(exc).__name__}: {normalize(str(exc))[:160]}"
    return Candidate.make(interleave(a, b), "crossover", parents, f"interleaved sentences ({why})")
