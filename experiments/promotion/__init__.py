"""Promotion: whether a sweep's candidate is confirmed on the holdout and promoted, and the evidence for it.

The sweep ranks its candidates (candidates, race), fixes the family the holdout tests (train_filtered), runs the
holdout in blocks with a futility stop (HoldoutBlocks), judges the pairwise holdout's answers side by side
(store_answers, recover_answers, judge_pairs), and asks for the verdict of the look (decide_look, then
standing_winner). The rule, its model and why it holds its level: experiments/promotion/_decide.py's docstring.
"""

from __future__ import annotations

from ._confirmation import HoldoutScores
from ._costs import store_holdout_cost
from ._decide import candidates, decide_look, holdout_runs, race, race_runs, train_filtered
from ._evidence import GENERATED, OWN, SplitScores, kept_instructions, split_scores
from ._futility import HoldoutBlocks
from ._pairs import judge_pairs, recover_answers, store_answers
from ._standing import standing_winner
from ._verdict import HoldoutRow, Promotion

__all__ = [
    "GENERATED",
    "OWN",
    "HoldoutBlocks",
    "HoldoutRow",
    "HoldoutScores",
    "Promotion",
    "SplitScores",
    "candidates",
    "decide_look",
    "holdout_runs",
    "judge_pairs",
    "kept_instructions",
    "race",
    "race_runs",
    "recover_answers",
    "split_scores",
    "standing_winner",
    "store_answers",
    "store_holdout_cost",
    "train_filtered",
]
