"""Mutation operators and `propose`, the one entry point the experiment loop calls.

LLM operators: "opro" (rewrite conditioned on scored history, ascending, as in OPRO), "reflect" (GEPA-style
targeted edit from the evaluator's feedback on the worst tasks), "crossover" (merge two good candidates; without
a usable model it interleaves their sentences). Deterministic operators: "add_constraint" (from
mutators/library.py), "drop_sentence", "reorder", all seeded.

Operators return new Candidates and never edit anything in place. `propose` cleans and bounds what an operator
returns, rejects degenerate text and duplicates, and on any model trouble falls back to a deterministic
operator, recording why in `Candidate.note`. It raises only for an unknown operator name.
"""

from ._edits import add_constraint, drop_sentence, merge, reorder, three_way_merge
from ._llm import MAX_TOKENS, RECOVERABLE, crossover, interleave, opro, reflect
from ._prompts import crossover_messages, instruction_schema, opro_history, opro_messages, reflect_messages
from ._propose import (
    DETERMINISTIC_OPERATORS,
    FALLBACK_ORDER,
    LLM_OPERATORS,
    OPERATORS,
    PAIR_OPERATORS,
    cannot_apply,
    operator_names,
    propose,
    propose_pair,
)

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
    "MAX_TOKENS",
    "RECOVERABLE",
]
