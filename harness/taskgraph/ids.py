"""Step ids: the canonical form planners' ids are read into, and the natural order ties are broken by."""

from __future__ import annotations

import re
from typing import Any

ID_LIKE = re.compile(r"#?[\w.:-]{1,32}")


def natural_key(text: str) -> tuple:
    """Sort key that orders E2 before E10."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part.lower()) for part in re.split(r"(\d+)", str(text)) if part)


def canonical_id(value: Any) -> str:
    """1, "1", "e1", "#E1" -> "E1"; other ids are kept (trimmed)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    m = re.fullmatch(r"#?[Ee]?(\d+)", text)
    return f"E{int(m.group(1))}" if m else text
