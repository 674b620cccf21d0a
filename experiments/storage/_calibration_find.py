"""Finding a stored calibration again: the one of this command's fingerprint, else the nearest stored one and the
settings that would read it, or one of the same models on another benchmark (experiments.tasks' sizing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from experiments.config import ExperimentConfig, fingerprint_diff

from ._calibration_store import (FAIL, Calibration, calibration_dir, calibration_fingerprint, fingerprint_key,
                                 load_calibration, run_label)


def find_calibration(exp: ExperimentConfig, identity: Mapping[str, Any],
                     tasks: Sequence[Any]) -> tuple[Calibration | None, str]:
    """(the stored calibration of this fingerprint, or None; one line saying what was found and why).

    A calibration whose A/A or positive control failed is found but not returned (the line says so); with none
    for this fingerprint, the line names the nearest stored one and the fields that differ."""
    fp = calibration_fingerprint(exp, identity, tasks)
    key = fingerprint_key(fp)
    folder = calibration_dir(exp)
    path = folder / f"{key}.json"
    if path.is_file():
        try:
            cal = load_calibration(path)
        except (ValueError, KeyError, TypeError) as exc:
            return None, f"calibration {path} is unreadable ({type(exc).__name__}: {exc}); ignored"
        if fingerprint_diff(cal.fingerprint, fp):
            return None, f"calibration {path} does not match this fingerprint after all; ignored"
        if not cal.passed:
            bad = " and ".join(ch.name for ch in (cal.aa, cal.control) if ch.status == FAIL)
            return None, f"calibration {key} ({path}) is ignored: its {bad} check failed"
        return cal, f"calibration {key} ({path}, {cal.created[:19]})"
    others = _stored_fingerprints(folder)
    if not others:
        return None, "no stored calibration (run +sweep=calibrate first to know the noise before the sweep)"
    p, stored = _nearest(others, fp)
    diff = fingerprint_diff(stored, fp)
    n = len(diff)
    add, other = settings_to_read(stored, fp)
    # the harness config's hash follows from settings too (the evaluator's among them): named only when alone
    hint = (f"; to read it the command needs {' '.join(add)}" if add else
            f"; it differs in {', '.join(other)}: the settings it was calibrated under (its resolved fingerprint in "
            f"{p.name}) read it" if other else "")
    return None, (f"none of the {len(others)} stored calibration(s) matches this fingerprint; the nearest ({p.name}) "
                  f"differs in {n} field(s): {'; '.join(diff[:3])}{'; ...' if n > 3 else ''}{hint}")


def _stored_fingerprints(folder: Path) -> list[tuple[Path, dict[str, Any]]]:
    """(file, its fingerprint) of every calibration stored in `folder` that reads as JSON."""
    out = []
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            stored = json.loads(p.read_text(encoding="utf-8")).get("fingerprint") or {}
        except (OSError, ValueError, AttributeError):
            continue
        out.append((p, stored if isinstance(stored, dict) else {}))
    return out


def _nearest(stored: Sequence[tuple[Path, dict[str, Any]]], fp: Mapping[str, Any]) -> tuple[Path, dict[str, Any]]:
    """The (file, fingerprint) of `stored` that differs from `fp` in the fewest fields."""
    return min(stored, key=lambda item: len(fingerprint_diff(item[1], fp)))


def nearest_calibration(exp: ExperimentConfig, identity: Mapping[str, Any], tasks: Sequence[Any]) -> str | None:
    """The key of the stored calibration nearest this command's fingerprint (find_calibration's line names it), None
    when none is stored."""
    others = _stored_fingerprints(calibration_dir(exp))
    return _nearest(others, calibration_fingerprint(exp, identity, tasks))[0].stem if others else None


def _leaves(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.update(_leaves(v, key) if isinstance(v, Mapping) else {key: v})
    return out


def settings_to_read(stored: Mapping[str, Any], current: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(the command-line settings that give this command the stored calibration's fingerprint: benchmark=<name>,
    evaluator.<key>=<value>, backend=<kind>, backend.<role>_model=<model>; the fields that differ and no setting
    names: the harness config's hash, a benchmark's tasks edited since, other backend details)."""
    a, b = _leaves(stored), _leaves(current)
    add: dict[str, str] = {}
    other: list[str] = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key):
            continue
        head, _, rest = key.partition(".")
        value = a.get(key)
        text = value if isinstance(value, str) else json.dumps(value)
        if head == "benchmark" and a.get("benchmark.name") != b.get("benchmark.name"):
            add["benchmark"] = f"benchmark={a.get('benchmark.name')}"  # its tasks come with its name
        elif head == "evaluator" and key in a:
            add[key] = f"{key}={text}"
        elif head == "backend" and rest.endswith(".model") and key in a:
            add[key] = f"backend.{rest.partition('.')[0]}_model={text}"
        elif head == "backend" and rest.endswith(".backend") and key in a:
            add["backend"] = f"backend={text}"
        else:
            other.append(key)
    return list(add.values()), other


def same_models_calibration(exp: ExperimentConfig, identity: Mapping[str, Any],
                            tasks: Sequence[Any]) -> tuple[Calibration | None, str]:
    """A stored calibration of the same backend, evaluator and harness config as this command on another benchmark
    (its fingerprint differs in benchmark fields only) whose checks passed, the newest; (None, "") when there is
    none. What tasks.count=auto sizes a new benchmark from when the configured one has no calibration."""
    fp = calibration_fingerprint(exp, identity, tasks)
    found = []
    for p, stored in _stored_fingerprints(calibration_dir(exp)):
        diff = [d.split(":", 1)[0] for d in fingerprint_diff(stored, fp)]
        if not diff or not all(d.startswith("benchmark.") for d in diff):
            continue
        try:
            cal = load_calibration(p)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if cal.passed:
            found.append(cal)
    if not found:
        return None, ""
    cal = max(found, key=lambda c: c.created)
    return cal, (f"calibration {cal.key} ({cal.path}, {cal.created[:19]}) of the same backend, evaluator and "
                 f"harness config on benchmark {cal.fingerprint.get('benchmark', {}).get('name', '?')}")


def label_for(exp: ExperimentConfig, identity: Mapping[str, Any], tasks: Sequence[Any]) -> str | None:
    """run_label with the stored calibration of this fingerprint, if one passed its checks."""
    if not any(i.get("backend") == "embedded" for i in identity.values()):
        return None
    return run_label(identity, find_calibration(exp, identity, tasks)[0])
