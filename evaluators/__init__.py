"""The experiments' ground truth: how an answer is measured. The rubric judge scores one answer 1-10 on each
dimension, the deterministic criteria read what needs no model (grounding, specificity, structure, degenerate
output), and the composite objective combines them into the score the harness keeps and the experiments compare;
the side-by-side judge says which of two answers to the same task is better, asked in both orders. This face is
what the harness and the experiments use; evaluators.composite, .deterministic, .rubric and .pairwise are public
modules for everything else. Nothing here imports mutators/: what is optimised never changes how it is measured.
"""

from evaluators.composite import evaluate
from evaluators.deterministic import deterministic_scores, prompt_echo_reasons
from evaluators.pairwise import PairResult, PositionBias, compare_pair, parse_preference, position_bias
from harness.review import Evaluator

HARNESS_EVALUATOR = Evaluator(evaluate=evaluate, echo_reasons=prompt_echo_reasons)  # what the harness scores with

__all__ = [
    "HARNESS_EVALUATOR",
    "PairResult",
    "PositionBias",
    "compare_pair",
    "deterministic_scores",
    "evaluate",
    "parse_preference",
    "position_bias",
]
