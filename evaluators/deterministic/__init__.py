"""Deterministic criteria: scores (0-10) computed from the text alone, no model involved.

These stand beside the LLM judge so a sweep's objective does not rest on one noisy judge: count hit, required
terms, structure, specificity and grounding in the gathered sources. A criterion that does not apply (no
expected count, no required terms, no sources) is None, and `aggregate` averages the ones that do.

A degenerate output (`degenerate_reasons`: empty or near-empty, heavily repeated, an echo of the prompt, or
headings and list markers with nothing under them) has every criterion capped at DEGENERATE_CAP: repeating one
sentence that names the required terms must not score a perfect count, terms or grounding.
"""

from ._criteria import (
    aggregate,
    count_items,
    count_score,
    deterministic_scores,
    specificity_score,
    structure_score,
    terms_score,
)
from ._degenerate import DEGENERATE_CAP, cap_degenerate, degenerate_reasons, prompt_echo_reasons
from ._grounding import grounding_score, source_text

__all__ = [
    "DEGENERATE_CAP",
    "cap_degenerate",
    "count_items",
    "degenerate_reasons",
    "deterministic_scores",
    "prompt_echo_reasons",
    "aggregate",
    "count_score",
    "terms_score",
    "structure_score",
    "specificity_score",
    "grounding_score",
    "source_text",
]
