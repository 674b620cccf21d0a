"""`propose`, the one entry point the experiment loop calls: the operator registry, what each operator
needs before it can apply, and the clean-up, checks and deterministic fallback around every operator call."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from harness.inference import LLM
from mutators.base import (
    Candidate,
    MutationContext,
    bound_length,
    clean_instruction,
    degenerate_reason,
    instruction_hash,
    normalize,
    placeholders,
    split_sentences,
)
from mutators.library import missing_constraints

from ._edits import add_constraint, drop_sentence, merge, reorder
from ._llm import RECOVERABLE, _crossover_texts, crossover, opro, reflect

FALLBACK_ORDER = ("add_constraint", "reorder", "drop_sentence")
FALLBACK_SEED_ROUNDS = 6

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
