"""Mutation operators for synthesis instructions: the sweep's search moves. An operator takes the instruction a
task type is synthesised with and proposes a new one: an OPRO rewrite from the scored history, a GEPA-style
reflection on the evaluator's feedback, a crossover of two parents, or a seeded deterministic edit (add a
constraint, reorder, drop a sentence). `propose(name, ctx, llm, seen=...)` is the entry point and `propose_pair`
the one for two parents: each returns a cleaned, bounded candidate whose hash is not in `seen` (the parent, with
operator "none", only where nothing new can be made), falls back to a deterministic edit on model trouble (the
candidate's `operator` names the one that wrote it), and never edits in place. This face is what the experiments
use; mutators.base, .library and .operators are public modules for everything else.
"""

from mutators.base import MutationContext, MutationFailed, counted_feedback, instruction_hash
from mutators.operators import LLM_OPERATORS, cannot_apply, operator_names, propose, propose_pair

__all__ = [
    "LLM_OPERATORS",
    "MutationContext",
    "MutationFailed",
    "cannot_apply",
    "counted_feedback",
    "instruction_hash",
    "operator_names",
    "propose",
    "propose_pair",
]
