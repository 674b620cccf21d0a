"""Mutation operators for synthesis instructions: OPRO rewrite, GEPA-style reflection, crossover, and seeded
deterministic edits. `propose(name, ctx, llm, seen=...)` is the entry point; operators never edit in place."""

from mutators.base import Candidate, MutationContext, MutationFailed, Operator, instruction_hash
from mutators.library import CONSTRAINTS, Constraint, constraints_for
from mutators.operators import (
    DETERMINISTIC_OPERATORS,
    LLM_OPERATORS,
    OPERATORS,
    PAIR_OPERATORS,
    cannot_apply,
    operator_names,
    propose,
    propose_pair,
)

__all__ = [
    "CONSTRAINTS",
    "Candidate",
    "Constraint",
    "DETERMINISTIC_OPERATORS",
    "LLM_OPERATORS",
    "MutationContext",
    "MutationFailed",
    "OPERATORS",
    "Operator",
    "PAIR_OPERATORS",
    "cannot_apply",
    "constraints_for",
    "instruction_hash",
    "operator_names",
    "propose",
    "propose_pair",
]
