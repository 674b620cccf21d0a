"""Mutation operators and `propose`, the one entry point the experiment loop calls.

LLM operators: "opro" (rewrite conditioned on scored history, ascending, as in OPRO), "reflect" (GEPA-style
targeted edit from the evaluator's feedback on the worst tasks), "crossover" (merge two good candidates; without
a usable model it interleaves their sentences). Deterministic operators: "add_constraint" (from
mutators/library.py), "drop_sentence", "reorder", all seeded.

Operators return new Candidates and never edit anything in place. `propose` cleans and bounds what an operator
returns, rejects degenerate text and duplicates, and on any model trouble falls back to a deterministic
operator, recording why in `Candidate.note`. It raises only for an unknown operator name.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from typing import Any, Callable

from harness.inference import LLM, BackendError, ChatResult
from harness.jsonparse import JSONParseError, parse_json_object
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
    placeholders,
    split_sentences,
)
from mutators.library import missing_constraints

# What a model can do to an operator: a backend error (down, timeout, missing model) or a reply that does not
# parse or cannot serve (JSONParseError is a ValueError; MutationFailed says why). These fall back to a
# deterministic operator and say so. Anything else (TypeError, AttributeError, KeyError...) is a programming
# error: it propagates, so the trial fails with its traceback instead of quietly crediting another operator.
RECOVERABLE = (MutationFailed, BackendError, ValueError)

__all__ = [
    "OPERATORS",
    "LLM_OPERATORS",
    "DETERMINISTIC_OPERATORS",
    "FALLBACK_ORDER",
    "operator_names",
    "cannot_apply",
    "propose",
    "opro",
    "reflect",
    "crossover",
    "add_constraint",
    "drop_sentence",
    "reorder",
    "merge",
    "three_way_merge",
    "PAIR_OPERATORS",
    "propose_pair",
    "interleave",
    "opro_history",
    "opro_messages",
    "reflect_messages",
    "crossover_messages",
    "instruction_schema",
]

TEMPERATURE = 0.5
MAX_TOKENS = 300
OPRO_MAX_HISTORY = 8
REFLECT_MAX_FEEDBACK = 6
FEEDBACK_MAX_CHARS = 400
FALLBACK_ORDER = ("add_constraint", "reorder", "drop_sentence")
FALLBACK_SEED_ROUNDS = 6

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


def _rng(ctx: MutationContext, name: str) -> random.Random:
    return random.Random(f"{name}:{ctx.seed}:{ctx.base_hash}")


def _prompt_text(text: str, max_chars: int) -> str:
    return bound_length(normalize(text) if not is_multiline(text) else text, max_chars)[0]


def _keep_placeholders_line(ctx: MutationContext) -> str:
    fields = sorted(placeholders(ctx.base))
    return f" Keep the template fields {', '.join(fields)} exactly as written." if fields else ""


# -- prompts (pure) ----------------------------------------------------------------------------------


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


# -- deterministic operators -------------------------------------------------------------------------


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


OperatorFn = Callable[[MutationContext, "LLM | None"], Candidate]

OPERATORS: dict[str, OperatorFn] = {
    "opro": opro,
    "reflect": reflect,
    "crossover": crossover,
    "add_constraint": add_constraint,
    "drop_sentence": drop_sentence,
    "reorder": reorder,
}
LLM_OPERATORS = frozenset({"opro", "reflect", "crossover"})
DETERMINISTIC_OPERATORS = frozenset({"add_constraint", "drop_sentence", "reorder"})


# Operators of two parents: not among the sampler's choices (they need a pair from the search state); the
# objective calls them through propose_pair.
PAIR_OPERATORS: dict[str, OperatorFn] = {"merge": merge}


def operator_names() -> list[str]:
    """Operator names in a stable order (the Optuna categorical choices)."""
    return list(OPERATORS)


def cannot_apply(name: str, ctx: MutationContext) -> str | None:
    """Why operator `name` cannot make a text from ctx itself (asked for, it would fall back every time), or None.

    crossover: fewer than two distinct instructions in ctx.pool and ctx.base; add_constraint: every library
    constraint is already in the base; drop_sentence: fewer than two sentences, or each holds a template field;
    reorder: fewer than two sentences. The model operators (opro, reflect) and names this module does not know
    (a caller's own operators) can always try."""
    if name == "crossover":
        n = len(_crossover_texts(ctx))
        return None if n >= 2 else f"crossover needs two distinct instructions in the pool; it holds {n}"
    if name == "add_constraint" and not missing_constraints(ctx.base, ctx.task_type):
        return f"every library constraint for {ctx.task_type!r} is already in the instruction"
    if name in ("drop_sentence", "reorder"):
        sents = split_sentences(ctx.base)
        if len(sents) < 2:
            return f"{name} needs at least two sentences; the instruction has {len(sents)}"
        if name == "drop_sentence" and all(placeholders(x) for x in sents):
            return "drop_sentence: every sentence holds a template field"
    return None


# -- propose -----------------------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {normalize(str(exc))[:200]}"


def _join_notes(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _finish(cand: Candidate, ctx: MutationContext, blocked: set[str]) -> tuple[Candidate | None, str]:
    """Clean, bound and check one candidate -> (candidate, "") or (None, why it was rejected)."""
    if not isinstance(cand, Candidate) or not isinstance(cand.text, str):
        return None, f"operator returned {type(cand).__name__}, not a Candidate"
    text, cut = bound_length(clean_instruction(cand.text), ctx.max_chars)
    reason = degenerate_reason(text, ctx.base)
    if reason:
        return None, reason
    h = instruction_hash(text)
    if h in blocked:
        return None, f"duplicate of {'the parent' if h == ctx.base_hash else 'a seen candidate'} ({h})"
    note = _join_notes(cand.note, f"cut to {len(text)} chars at a sentence boundary" if cut else "")
    return Candidate(text=text, operator=cand.operator, parents=tuple(cand.parents), hash=h, note=note), ""


def _fallback(name: str, ctx: MutationContext, blocked: set[str], reason: str) -> Candidate:
    tried: list[str] = []
    for k in range(FALLBACK_SEED_ROUNDS):
        ctx_k = replace(ctx, seed=ctx.seed + k) if k else ctx
        for fb in FALLBACK_ORDER:
            if fb == name and k == 0:
                continue
            try:
                cand, why = _finish(OPERATORS[fb](ctx_k, None), ctx, blocked)
            except RECOVERABLE as exc:  # a fallback that cannot apply just moves on to the next one
                cand, why = None, _describe(exc)
            if cand is not None:
                shift = f" (seed+{k})" if k else ""
                return replace(cand, note=_join_notes(f"{reason}; fell back to {fb}{shift}", cand.note))
            if k == 0:
                tried.append(f"{fb}: {why}")
    note = _join_notes(f"exhausted: {reason}", *tried, "returned the parent unchanged")
    return Candidate(text=ctx.base, operator="none", parents=(ctx.base_hash,), hash=ctx.base_hash, note=note)


def propose(
    name: str,
    ctx: MutationContext,
    llm: LLM | None = None,
    *,
    seen: set[str] | frozenset[str] = frozenset(),
) -> Candidate:
    """Run operator `name` and return a clean, bounded, new candidate.

    The text is cleaned (fences, wrapping quotes, preambles), cut to ctx.max_chars at a sentence boundary, and
    checked: degenerate text or an `instruction_hash` in `seen` (or the parent's) is rejected. On rejection or on a
    model error from the operator (RECOVERABLE: backend errors, unparseable replies) a deterministic operator
    from FALLBACK_ORDER takes over, trying shifted seeds if needed; the returned `operator` names the one that
    produced the text (credit it, not `name`) and `note` says why. Other exceptions are bugs and propagate. In the degenerate case where nothing new can be made, the parent comes back with operator "none" and a
    note starting "exhausted:". Raises ValueError only for an unknown operator name.
    """
    if name not in OPERATORS:
        raise ValueError(f"unknown mutation operator {name!r}; expected one of {', '.join(operator_names())}")
    return _run(OPERATORS[name], name, ctx, llm, set(seen) | {ctx.base_hash})


def propose_pair(
    name: str,
    ctx: MutationContext,
    llm: LLM | None = None,
    *,
    seen: set[str] | frozenset[str] = frozenset(),
) -> Candidate:
    """propose for an operator of two parents (PAIR_OPERATORS: ctx.base, ctx.other, ctx.ancestor): the same
    clean-up, checks and fallback; a result equal to either parent or in `seen` falls back to a deterministic
    single-parent operator on ctx.base, which the returned `operator` then names."""
    if name not in PAIR_OPERATORS:
        raise ValueError(f"unknown pair operator {name!r}; expected one of {', '.join(PAIR_OPERATORS)}")
    blocked = set(seen) | {ctx.base_hash} | ({instruction_hash(ctx.other)} if ctx.other.strip() else set())
    return _run(PAIR_OPERATORS[name], name, ctx, llm, blocked)


def _run(op: OperatorFn, name: str, ctx: MutationContext, llm: LLM | None, blocked: set[str]) -> Candidate:
    """op's candidate, cleaned and checked (_finish), else the deterministic fallback with the reason."""
    try:
        cand = op(ctx, llm)
    except RECOVERABLE as exc:  # model trouble becomes a recorded fallback; programming errors propagate
        return _fallback(name, ctx, blocked, f"{name} failed: {_describe(exc)}")
    checked, why = _finish(cand, ctx, blocked)
    if checked is not None:
        return checked
    return _fallback(name, ctx, blocked, f"{name} rejected: {why}")
