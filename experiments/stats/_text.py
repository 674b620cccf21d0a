"""Numbers, intervals, p-values, durations and backend identities as the summaries print them."""

from __future__ import annotations

import math
from typing import Any, Mapping

SMOKE_LINE = "SMOKE RUN (embedded model): not research quality"


def num(x: Any, signed: bool = False, fmt: str = ".3f") -> str:
    """A number with `fmt` (a sign in front when signed), "n/a" for None, a non-number or a non-finite value."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(v):
        return "n/a"
    return format(v, ("+" if signed else "") + fmt)


def ci_text(ci: tuple[float, float] | None, signed: bool = False) -> str:
    return f"[{num(ci[0], signed)}, {num(ci[1], signed)}]" if ci else "[CI n/a]"


def pval(p: Any) -> str:
    v = num(p, fmt=".4f")
    return "<0.0001" if v != "n/a" and float(p) < 1e-4 else v


def hms(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def identity_text(identity: Mapping[str, Any]) -> str:
    """'producer backend/model, evaluator backend/model' from a backend identity."""
    def one(role: str) -> str:
        i = identity.get(role) or {}
        return f"{i.get('backend', '?')}/{i.get('model', '?')}"

    roles = [r for r in ("producer", "evaluator") if r in identity]
    return ", ".join(f"{r} {one(r)}" for r in roles) or "?"
