"""A candidate's instructions against the baseline's, as text: the diff a summary and an MLflow run show."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

__all__ = ["instruction_diff"]


def instruction_diff(base: Mapping[str, str], cand: Mapping[str, str]) -> str:
    """Unified diff of a candidate's instructions against the baseline, one block per task type."""
    chunks = []
    for tt in sorted(set(base) | set(cand)):
        a, b = _wrap(base.get(tt, "")), _wrap(cand.get(tt, ""))
        if a != b:
            chunks.extend(difflib.unified_diff(a, b, f"baseline/{tt}", f"candidate/{tt}", lineterm=""))
    return "\n".join(chunks)


def _wrap(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())) if s]
