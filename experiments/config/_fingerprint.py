"""What an experiment's numbers mean: the objective's fingerprint, pinned to a study or an A/B on creation.

A score is only comparable with another score of the same objective: the same tasks, evaluator, models and
harness. `study_fingerprint` collects those (benchmark task ids and a content hash, the evaluator config, the
resolved backend kind and model of every role with the model file's sha256 or the Ollama digest where known,
the harness config hash, the sweep kind). A resumed study or A/B compares the stored fingerprint with the one
of the command at hand and refuses on any difference (`fingerprint_diff` lists the fields).

`decision_rule` is the other half of what a sweep's verdict means: the sweep settings that decide whether a
candidate is promoted. It is pinned beside the fingerprint (experiments.sweep.pin_fingerprint) and kept out of it,
so a calibration (found by the fingerprint) serves studies of any rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.inference import base_llm

from ._convert import to_harness_config

_SHA_CACHE: dict[tuple[str, int, int], str] = {}
ROLES = ("planner", "producer", "evaluator", "compressor")


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, computed once per process per (path, size, mtime)."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        h = hashlib.sha256()
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _SHA_CACHE[key] = h.hexdigest()
    return _SHA_CACHE[key]


def _ollama_digest(llm: Any) -> str | None:
    """The model's digest from the server's /api/tags, or None when it cannot be read."""
    try:
        listed = llm.client.list()
    except Exception:  # the digest is extra evidence; a server that cannot list still runs
        return None
    models = listed.get("models", []) if isinstance(listed, Mapping) else getattr(listed, "models", [])
    want = {llm.model, f"{llm.model}:latest"}
    for m in models:
        name = m.get("model") or m.get("name") if isinstance(m, Mapping) else getattr(m, "model", None)
        digest = m.get("digest") if isinstance(m, Mapping) else getattr(m, "digest", None)
        if name in want and digest:
            return str(digest)
    return None


def model_identity(llm: Any) -> dict[str, Any]:
    """backend kind and model name, plus the file name and sha256 (embedded) or the digest (Ollama)."""
    inner = base_llm(llm)
    out: dict[str, Any] = {"backend": str(getattr(inner, "backend", "?")), "model": str(getattr(inner, "model", "?"))}
    path = getattr(inner, "path", None)
    if path is not None and Path(path).is_file():
        out["file"] = Path(path).name
        out["sha256"] = file_sha256(path)
    elif out["backend"] == "ollama":
        digest = _ollama_digest(inner)
        if digest:
            out["digest"] = digest
    from harness.inference import reply_options

    sampling = reply_options(inner)
    if sampling:  # sampler options and weight layout change the replies (EmbeddedLLM.reply_options)
        out["sampling"] = dict(sampling)
    base_url = getattr(inner, "base_url", None)
    if base_url:
        out["base_url"] = str(base_url)
    return out


def backend_identity(roles: Any) -> dict[str, dict[str, Any]]:
    """role -> model_identity for the four roles of a harness.inference.Roles."""
    return {role: model_identity(getattr(roles, role)) for role in ROLES}


def tasks_digest(tasks: Iterable[Any]) -> dict[str, Any]:
    """Task ids (in order, with their split) and a hash of their whole content."""
    rows = [dataclasses.asdict(t) if dataclasses.is_dataclass(t) else dict(t) for t in tasks]
    blob = json.dumps(rows, sort_keys=True, default=str).encode()
    return {"ids": [f"{r['id']}:{r.get('split', 'train')}" for r in rows],
            "sha256": hashlib.sha256(blob).hexdigest()[:16]}


def holdout_set(tasks: Iterable[Any]) -> dict[str, Any]:
    """The holdout tasks' fingerprint (tasks_digest of the tasks whose split is holdout) and one key per task
    ("tasks": task_key): every holdout look drawn on holdout tasks that share a task in one storage spends from one
    alpha, whatever the study (experiments.stats looks; a re-split shares tasks with the old set)."""
    hold = [t for t in tasks if getattr(t, "split", None) == "holdout"
            or (isinstance(t, Mapping) and t.get("split") == "holdout")]
    return {**tasks_digest(hold), "tasks": [task_key(t) for t in hold]}


def task_key(task: Any) -> str:
    """"<id>:<hash of the task's content>", its split left out: the same task whichever split it is in."""
    row = dataclasses.asdict(task) if dataclasses.is_dataclass(task) else dict(task)
    row.pop("split", None)
    digest = hashlib.sha256(json.dumps(row, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{row.get('id')}:{digest}"


# Where files go and how the server is reached, not what is measured: the backend's resolved models are pinned
# by backend_identity (the configured names under backend "auto" may not be what ran).
_NOT_OBJECTIVE = ("results_dir", "output_dir")
_BACKEND_OBJECTIVE = ("n_ctx", "embedded_repeat_penalty", "embedded_reuse_prompt")
_SYNTH_PROVENANCE = ("source", "resolved")  # where synth.instructions came from; the texts themselves are hashed


def harness_hash(harness_cfg: Any) -> str:
    """Hash of the harness config that decides the scores: paths, server addresses, timeouts, slots and cache
    settings left out (moving results/ or adding a slot does not change the objective)."""
    from harness.config import config_hash, to_dict

    data = {k: v for k, v in to_dict(harness_cfg).items() if k not in _NOT_OBJECTIVE}
    data["backend"] = {k: v for k, v in data["backend"].items() if k in _BACKEND_OBJECTIVE}
    data["synth"] = {k: v for k, v in data["synth"].items() if k not in _SYNTH_PROVENANCE}
    return config_hash(data)


def study_fingerprint(exp: Any, backend: Mapping[str, Any], tasks: Iterable[Any]) -> dict[str, Any]:
    """The fingerprint of an experiment's objective (see the module docstring); `backend` is the runner's
    identity(), i.e. backend_identity(roles) for the real harness."""
    harness = to_harness_config(exp)
    return {
        "sweep_kind": exp.sweep.kind,
        "benchmark": {"name": exp.benchmark.name, **tasks_digest(tasks)},
        "evaluator": dataclasses.asdict(exp.evaluator),
        "backend": dict(backend),
        "harness_config": harness_hash(harness),
    }


# The sweep settings a verdict rests on: the test level, the noise floor's runs, the candidates confirmed and how,
# and whether plan + research are shared by every trial (scores with and without it are not the same objective).
# Changing one on a resume would conclude the stored runs under another rule (a study that did not promote at
# alpha 0.01 promotes at 0.3 with no new run). Budget and search settings (n_trials, timeout_s, max_llm_calls,
# sampler, seed, operators, operator_choice, parent_selection, search, pruner*, gate_*, max_merges, mutate_task_types,
# max_chars, failure_rate_stop) stay changeable: they decide which candidates are tried, not how one is judged.
DECISION_RULE = ("alpha", "baseline_repeats", "race_top", "holdout_top_k", "holdout_test", "holdout_baseline_runs",
                 "holdout_candidate_runs", "reuse_context", "cost_metric", "max_cost_increase", "max_task_loss",
                 "train_filter", "holdout_futility_block", "holdout_compare")
# a study whose pinned decision rule lacks a setting of DECISION_RULE ran under that setting's default (cost guard:
# off; worst-task guard: off; train filter: wilcoxon; futility stop: off; compare: pointwise)
DECISION_RULE_DEFAULTS = {"cost_metric": "completion_tokens", "max_cost_increase": None, "max_task_loss": None,
                          "train_filter": "wilcoxon", "holdout_futility_block": 0, "holdout_compare": "pointwise"}


def decision_rule(exp: Any) -> dict[str, Any]:
    """{"sweep": {setting: value}} for the DECISION_RULE settings of exp.sweep (flattened: sweep.alpha, ...)."""
    return {"sweep": {k: getattr(exp.sweep, k) for k in DECISION_RULE}}


def with_rule_defaults(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A stored decision rule with the settings added since it was pinned filled in at their defaults."""
    sweep = dict(stored.get("sweep", {})) if isinstance(stored.get("sweep"), Mapping) else {}
    return {**stored, "sweep": {**DECISION_RULE_DEFAULTS, **sweep}}


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, Mapping):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obj}


def fingerprint_diff(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """'field: stored -> current' for every leaf that differs (missing on one side shows as <absent>)."""
    a, b = _flatten(stored), _flatten(current)
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, "<absent>") != b.get(key, "<absent>"):
            out.append(_list_diff(key, a[key], b[key]) if isinstance(a.get(key), list) and isinstance(b.get(key), list)
                       else f"{key}: {_short(a.get(key, '<absent>'))} -> {_short(b.get(key, '<absent>'))}")
    return out


def _list_diff(key: str, a: list, b: list) -> str:
    """The entries one list has and the other lacks (a task moved from train to holdout: 'x:train' -> 'x:holdout'),
    not two prefixes that read the same; the same entries in another order say so."""
    gone, new = [v for v in a if v not in b], [v for v in b if v not in a]
    if not gone and not new:
        return f"{key}: the same {len(a)} entries in another order"
    return f"{key}: {_short(gone, 240)} -> {_short(new, 240)} ({len(a)} -> {len(b)} entries)"


def _short(v: Any, width: int = 80) -> str:
    text = json.dumps(v, default=str) if not isinstance(v, str) else v
    return text if len(text) <= width else text[:width - 3] + "..."

