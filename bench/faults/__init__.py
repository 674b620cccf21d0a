"""Fault cases for bench/faults/campaign.py, one module per area (backend, inputs, stores; the scripts beside them
are not cases).

Each module defines CASES: a list of `Case`. A case runs in a fresh temporary folder and returns an `Outcome`:
`ok` is True when the user sees what docs/RELIABILITY.md promises (the defect is absent), and `seen` says, in one
line, what happened (exit code, the line printed, what was left on disk).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class Outcome:
    ok: bool
    seen: str


@dataclass(frozen=True)
class Case:
    id: str  # "41.1-http500", "held-503-retry", ...
    what: str  # the fault, in a few words
    expect: str  # what must happen
    run: Callable[[Path], Outcome]
