"""The sweep's search: what the next trial tries (which task types it edits, from which parent, with which operator,
what reflection reads) and what a child must show before it runs in full, behind one seam (Search; the project's
own is ProjectSearch), with the search state the study's trials rebuild and the pure decisions it is made of
(parent selection, the gate and the race, operator credit, merge, the edit model, the pruner's threshold). The
sweep (experiments.sweep) orchestrates the study and asks it."""

from __future__ import annotations

from ._optimizer import pruner_threshold
from ._search import COMPOSE, Acceptance, ProjectSearch, Search
from ._state import Evaluated, SearchState, candidate_hash, holdout_pool, instruction_hashes, state_from_trials

__all__ = [
    "COMPOSE",
    "Acceptance",
    "Evaluated",
    "ProjectSearch",
    "Search",
    "SearchState",
    "candidate_hash",
    "holdout_pool",
    "instruction_hashes",
    "pruner_threshold",
    "state_from_trials",
]
