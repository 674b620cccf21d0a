"""Telemetry for the run record, merged and never overwritten (seed 001): a later value joins an earlier one
instead of replacing the mapping it lives in."""

from __future__ import annotations

from typing import Any, Mapping


def merge_telemetry(existing: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> dict[str, Any]:
    """Deep merge without losing earlier values: nested mappings merge, lists extend (no duplicates), a new
    None never erases a value, other new scalars win. Inputs are not modified."""
    out: dict[str, Any] = {k: _copy(v) for k, v in (existing or {}).items()}
    for key, value in (new or {}).items():
        old = out.get(key)
        if value is None and key in out:
            continue
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            out[key] = merge_telemetry(old, value)
        elif isinstance(old, list) and isinstance(value, (list, tuple)):
            out[key] = old + [_copy(v) for v in value if v not in old]
        else:
            out[key] = _copy(value)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value
