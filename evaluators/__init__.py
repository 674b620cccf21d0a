"""The experiments' ground truth: the rubric judge, deterministic criteria and the composite objective.

Nothing here imports mutators/: what is optimised never changes how it is measured.
"""

from evaluators.composite import MODES, Evaluation, combine, evaluate
from evaluators.deterministic import DEGENERATE_CAP, aggregate, count_items, degenerate_reasons, deterministic_scores
from evaluators.deterministic import prompt_echo_reasons
from evaluators.rubric import EvalResult, parse_rubric, score_rubric
from harness.review import Evaluator

HARNESS_EVALUATOR = Evaluator(evaluate=evaluate, echo_reasons=prompt_echo_reasons)  # what the harness scores with

__all__ = [
    "DEGENERATE_CAP",
    "MODES",
    "Evaluation",
    "EvalResult",
    "HARNESS_EVALUATOR",
    "aggregate",
    "combine",
    "count_items",
    "degenerate_reasons",
    "deterministic_scores",
    "evaluate",
    "parse_rubric",
    "score_rubric",
]
