"""The deterministic operators: seeded edits of one instruction (add a library constraint, drop or move a
sentence) and the three-way merge of two; no model call."""

from __future__ import annotations

import random
import re

from harness.inference import LLM
from mutators.base import (
    Candidate,
    MutationContext,
    MutationFailed,
    instruction_hash,
    is_multiline,
    join_sentences,
    normalize,
    placeholders,
    split_sentences,
)
from mutators.library import missing_constraints


def _rng(ctx: MutationContext, name: str) -> random.Random:
    return random.Random(f"{name}:{ctx.seed}:{ctx.base_hash}")


def add_constraint(ctx: MutationContext, llm: LLM | None = None) -> Candidate:
    """Append one library constraint the instruction does not already state (seeded choice)."""
    missing = missing_constraints(ctx.base, ctx.task_type)
    if not missing:
        raise MutationFailed(f"every library constraint for {ctx.task_type!r} is already in the instruction")
    choice = _rng(ctx, "add_constraint").choice(missing)
    sents = split_sentences(ctx.base)
    multiline = is_multiline(ctx.base)
    line = choice.text
    bullet = re.match(r"^\s*([-*+])\s+", ctx.base.strip().splitlines()[-1]) if multiline else None
    if bullet:
        line = f"{bullet.group(1)} {line}"
    text = join_sentences(sents + [line], multiline=multiline)
    if len(text) > ctx.max_chars:
        raise MutationFailed(f"no room to add {choice.key!r}: {len(text)} chars > max_chars={ctx.max_chars}")
    return Candidate.make(text, "add_constraint", (ctx.base_hash,), f"added constraint {choice.key!r}")


def drop_sentence(ctx: MutationContext, llm: LLM | None = None) -> Candidate:
    """Remove one sentence (seeded), never the last one and never one holding a template field."""
    sents = split_sentences(ctx.base)
    if len(sents) < 2:
        raise MutationFailed(f"drop_sentence needs at least two sentences; the instruction has {len(sents)}")
    droppable = [i for i, s in enumerate(sents) if not placeholders(s)]
    if not droppable:
        raise MutationFailed("drop_sentence: every sentence holds a template field")
    i = _rng(ctx, "drop_sentence").choice(droppable)
    text = join_sentences(sents[:i] + sents[i + 1 :], multiline=is_multiline(ctx.base))
    return Candidate.make(
        text, "drop_sentence", (ctx.base_hash,), f"dropped sentence {i + 1}/{len(sents)}: {sents[i][:60]!r}"
    )


def reorder(ctx: MutationContext, llm: LLM | None = None) -> Candidate:
    """Move one sentence to another position (seeded); the result differs from the base."""
    sents = split_sentences(ctx.base)
    n = len(sents)
    if n < 2:
        raise MutationFailed(f"reorder needs at least two sentences; the instruction has {n}")
    moves = [(i, j) for i in range(n) for j in range(n) if i != j]
    _rng(ctx, "reorder").shuffle(moves)
    for i, j in moves:
        moved = sents[:i] + sents[i + 1 :]
        moved.insert(j, sents[i])
        if moved != sents:
            text = join_sentences(moved, multiline=is_multiline(ctx.base))
            return Candidate.make(text, "reorder", (ctx.base_hash,), f"moved sentence {i + 1} to position {j + 1}")
    raise MutationFailed("reorder: every order of the sentences reads the same")


def three_way_merge(ancestor: str, a: str, b: str) -> str:
    """Sentences of a, without those b removed from the ancestor, with those b added (each placed after the
    sentence it follows in b, else at the end). What both sides changed relative to the ancestor survives; a
    sentence one side kept and the other removed is removed. Sentences compare whitespace- and case-insensitively."""

    def key(s: str) -> str:
        return normalize(s).lower().rstrip(".!")

    sa, sb, sc = split_sentences(a), split_sentences(b), split_sentences(ancestor)
    ka, kb, kc = {key(s) for s in sa}, {key(s) for s in sb}, {key(s) for s in sc}
    out = [s for s in sa if not (key(s) in kc and key(s) not in kb)]
    for i, s in enumerate(sb):
        if key(s) in kc or key(s) in ka:
            continue
        prev = next((key(x) for x in reversed(sb[:i]) if key(x) in {key(y) for y in out}), None)
        at = next((j + 1 for j, y in enumerate(out) if key(y) == prev), len(out)) if prev is not None else len(out)
        out.insert(at, s)
    return join_sentences(out, multiline=is_multiline(a) or is_multiline(b))


def merge(ctx: MutationContext, llm: LLM | None = None) -> Candidate:
    """GEPA's merge for one instruction: the three-way sentence merge of the parent (ctx.base) and a second
    front candidate (ctx.other) that share an ancestor (ctx.ancestor). No model call."""
    if not ctx.other.strip() or not ctx.ancestor.strip():
        raise MutationFailed("merge needs a second parent (ctx.other) and their common ancestor (ctx.ancestor)")
    text = three_way_merge(ctx.ancestor, ctx.base, ctx.other)
    if instruction_hash(text) in (ctx.base_hash, instruction_hash(ctx.other)):
        raise MutationFailed("merge: the merged text equals one of its parents (the other side adds nothing new)")
    return Candidate.make(text, "merge", (ctx.base_hash, instruction_hash(ctx.other)),
                          f"three-way merge over ancestor {instruction_hash(ctx.ancestor)}")
