"""Paired, replicated, resumable A/B runs of two config variants.

Every (task, replication) pair runs in both arms with one seed derived from (design seed, task, replication); the
arm order within a pair is drawn from a seeded generator and recorded. Each finished cell is one JSONL line in the
ledger, keyed by (task, arm, replication): a rerun skips completed cells and retries failed ones. A failed cell
removes its pair from the statistics (the pair is reported), and a failure is an outcome of its arm: arms that
differ in failed cells, or in judge replies that could not be read, get no verdict (experiments.ab). The
harness is injected as `run_arm(arm_name, arm_overrides, task, replication, seed) -> dict` returning
{"score", "dimensions", "secondary", "status", "error"}, optionally "judge_failures" (how many judge replies of the
run could not be read; absent = 0), "usage" (what the run cost, any of USAGE_FIELDS: completion_tokens,
prompt_tokens, llm_calls, latency_s = seconds in uncached model calls; a field absent, as in older ledgers, is not
measured, never 0; experiments.stats) and "meta" (JSON-able run details kept in the ledger, e.g. run id, output
path, whether the backend was a smoke model).

One metric runs through the whole test: the pre-registered one (Preregistration.metric). Its statistics are the
primary ones, the interim looks of a sequential design test it, the verdict is decided on it, and the per-task
table and plots show it. Where a cell holds it: "composite" (or "score", the older name) -> the cell's "score";
a secondary metric (SECONDARY) -> "secondary"[name]; anything else (a rubric dimension, det_<criterion>) ->
"dimensions"[name]. Every dimension and every secondary metric is also analysed as its own Holm family
(experiments.ab).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from experiments.stats import Decision, PairedStats, Preregistration
from harness.config import ConfigError
from harness.stores import atomic_write_json, read_jsonl

RunArm = Callable[[str, Mapping[str, Any], Any, int, int], Mapping[str, Any]]
SECONDARY = ("search_calls", "tokens", "wall_s", "gaps")
COMPOSITE = ("composite", "score")  # the composite score; "score" is the cells' field and the older prereg name
USAGE_FIELDS = ("completion_tokens", "prompt_tokens", "llm_calls", "latency_s")  # a cell's "usage"


def metric_family(metric: str, secondary: Sequence[str] = SECONDARY) -> str:
    """Where a ledger cell holds a metric: "score" (the composite), "secondary"[metric] or "dimensions"[metric]."""
    if metric in COMPOSITE:
        return "score"
    if metric in secondary:
        return "secondary"
    return "dimensions"


def metric_kind(metric: str) -> str:
    """What a metric is, in words (for summaries and reports)."""
    if metric in COMPOSITE:
        return "composite score"
    if metric in SECONDARY:
        return "secondary metric"
    if metric.startswith("det_"):
        return "deterministic criterion"
    return "rubric dimension"


class PreregistrationMismatch(ConfigError):
    """The ledger was started under a different pre-registration, design, objective or backend: a config that does
    not match the test it resumes (the CLI's one line, exit 2, as for the sweep's pinned fingerprint)."""


def task_id(task: Any) -> str:
    """A task's stable id: the string itself, task['id'] or task.id."""
    if isinstance(task, str):
        return task
    if isinstance(task, Mapping) and "id" in task:
        return str(task["id"])
    if hasattr(task, "id"):
        return str(task.id)
    raise ValueError(f"a task must be a string, a mapping with 'id' or have an .id attribute; got {task!r}")


def _digest(*parts: Any) -> int:
    blob = "|".join(json.dumps(p, sort_keys=True, default=str) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:4], "big")


def pair_seed(design_seed: int, task: str, replication: int) -> int:
    """The seed both arms of one (task, replication) pair share; independent of task order."""
    return _digest("pair", design_seed, task, replication)


def judge_seed(design_seed: int, task: str, replication: int, round_: int = 0) -> int:
    """The pairwise judge's seed for one pair in a judge round: the pair seed in the first; another in each round a
    failed judge started (no readable reply on any pair), so a response cache keyed on the seed is asked afresh."""
    if not round_:
        return pair_seed(design_seed, task, replication)
    return _digest("pair", design_seed, task, replication, "judge round", round_)


def arm_order(arms: Sequence[str], seed: int, randomise: bool = True) -> tuple[str, ...]:
    """The order the arms run in for one pair (seeded shuffle)."""
    if not randomise:
        return tuple(arms)
    perm = np.random.default_rng(seed).permutation(len(arms))
    return tuple(arms[i] for i in perm)


@dataclass(frozen=True)
class ABDesign:
    tasks: tuple[Any, ...]
    arms: Mapping[str, Mapping[str, Any]]  # exactly two, first = A (control), second = B
    replications: int = 3
    seed: int = 0
    randomise_order: bool = True
    n_boot: int = 2000
    ci_method: str = "bca"

    def __post_init__(self) -> None:
        object.__setattr__(self, "tasks", tuple(self.tasks))
        if not isinstance(self.arms, Mapping) or len(self.arms) != 2:
            got = list(self.arms) if isinstance(self.arms, Mapping) else type(self.arms).__name__
            raise ValueError(f"ABDesign.arms must map exactly two arm names to overrides, got {got}")
        object.__setattr__(self, "arms", {str(k): dict(v) for k, v in self.arms.items()})
        if not self.tasks:
            raise ValueError("ABDesign.tasks is empty; an A/B test needs at least one task (two to test)")
        ids = [task_id(t) for t in self.tasks]
        if len(set(ids)) != len(ids):
            raise ValueError(f"task ids must be unique, got {ids}")
        if self.replications < 1:
            raise ValueError(f"replications must be >= 1, got {self.replications}")

    @property
    def arm_names(self) -> tuple[str, str]:
        a, b = self.arms
        return a, b

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(task_id(t) for t in self.tasks)

    def fingerprint(self) -> dict[str, Any]:
        return {"arms": self.arms, "seed": self.seed, "randomise_order": self.randomise_order,
                "task_ids": list(self.task_ids), "replications": self.replications}


@dataclass(frozen=True)
class TaskResult:
    task: str
    n_pairs: int
    reps_a: tuple[float, ...]
    reps_b: tuple[float, ...]
    mean_a: float
    mean_b: float
    diff: float


@dataclass(frozen=True)
class ABResult:
    arm_names: tuple[str, str]
    tasks: tuple[TaskResult, ...]
    primary: PairedStats
    dimensions: dict[str, PairedStats]
    secondary: dict[str, PairedStats]
    excluded_pairs: tuple[dict[str, Any], ...]  # {"task", "replication", "reason"}
    excluded_tasks: tuple[str, ...]  # no complete pair at all
    decision: Decision | None
    looks: tuple[Decision, ...]
    orders: dict[str, list[str]]  # "task#rep" -> arm order
    cells_run: int
    cells_skipped: int
    verdict: str = "inconclusive"
    verdict_reason: str = ""
    ledger_path: str = ""
    failed_cells: dict[str, int] = field(default_factory=dict)  # arm -> failed cells over the analysed tasks
    failed_tasks: dict[str, tuple[str, ...]] = field(default_factory=dict)  # arm -> tasks with a failed cell
    judge_failures: dict[str, int] = field(default_factory=dict)  # arm -> judge replies that could not be read
    cost: dict[str, Any] = field(default_factory=dict)  # cost metric -> experiments.stats.CostDiff (B against A)
    pairwise: Any = None  # compare=pairwise: experiments.ab._pairwise.PairwiseResult, whose verdict is the verdict

    def stats_for(self, metric: str) -> PairedStats:
        """The statistics of a metric: the primary (pre-registered) one, else a dimension or secondary metric.

        The primary metric's own statistics win over its entry in the dimension or secondary family: that entry
        carries the family's Holm adjustment, the pre-registered test is a family of one.
        """
        if metric == self.primary.metric or (metric in COMPOSITE and self.primary.metric in COMPOSITE):
            return self.primary
        if metric in self.dimensions:
            return self.dimensions[metric]
        if metric in self.secondary:
            return self.secondary[metric]
        known = [self.primary.metric, *self.dimensions, *self.secondary]
        raise KeyError(f"no statistics for metric {metric!r}; known: {known}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# -- pre-registration file ----------------------------------------------------------------------------------------


def prereg_path(ledger_path: str | Path) -> Path:
    ledger_path = Path(ledger_path)
    return ledger_path.with_name(ledger_path.stem + ".prereg.json")


def _plain(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    atomic_write_json(path, data, indent=2, default=str)


def write_or_check_prereg(
    prereg: Preregistration,
    design: ABDesign,
    ledger_path: str | Path,
    *,
    backend: Mapping[str, Any] | None = None,
    new_test: str = "use a new ledger path",
    objective: Mapping[str, Any] | None = None,
) -> Path:
    """Write the pre-registration beside the ledger before any data, or check that it has not changed.

    `backend` ({arm: {role: identity}}, experiments.config.backend_identity per arm) is registered with it;
    None leaves it unchecked. A file written before backends were registered has no such field: it is taken as
    "not recorded", accepted, and the identity is added (with its own `backend_recorded_at`). `objective` (what a
    score means: each task's content, each arm's evaluator and harness config; experiments.ab.objective_of) is
    registered and checked the same way (`objective_recorded_at`): a resume under another judge setting or an
    edited task would give a verdict on a mixture of two objectives. Any difference raises
    PreregistrationMismatch listing the differing fields ('field: registered -> this run') and `new_test`.
    """
    from experiments.config import fingerprint_diff

    path = prereg_path(ledger_path)
    want: dict[str, Any] = {"preregistration": prereg.to_dict(), "design": design.fingerprint()}
    if backend is not None:
        want["backend"] = dict(backend)
    if objective is not None:
        want["objective"] = _plain(dict(objective))
    if not path.exists():
        _write_json(path, {**want, "registered_at": time.time()})
        return path
    have = json.loads(path.read_text(encoding="utf-8"))
    # (registered fields, what a difference means); an objective or backend the file does not record yet is not
    # compared (it is added below)
    checks = (
        (("preregistration", "design"), "a different hypothesis or design than this run ({}): the hypothesis and "
         "design cannot change mid-test; run with the registered settings to resume"),
        (("objective",), "another objective than this run ({}): the tasks, the judge's settings and the harness "
         "config cannot change mid-test (the verdict would rest on scores of two objectives); run with the "
         "registered settings to resume"),
        (("backend",), "other backends or models than this run ({}): the backend and models cannot change "
         "mid-test; run with the registered backend to resume"),
    )
    for keys, why in checks:
        compared = [k for k in keys if k in want and (k in have or k in ("preregistration", "design"))]
        diffs = [f"{key}.{line}" for key in compared
                 for line in fingerprint_diff(_plain(have.get(key)) or {}, _plain(want[key]))]
        if diffs:
            raise PreregistrationMismatch(f"{path} was registered with {why.format('; '.join(diffs))}, or {new_test}")
    added: dict[str, Any] = {}
    if backend is not None and "backend" not in have:  # registered before backends were recorded: nothing to compare
        added.update(backend=want["backend"], backend_recorded_at=time.time())
    if objective is not None and "objective" not in have:  # registered before objectives were: recorded now
        added.update(objective=_plain(dict(objective)), objective_recorded_at=time.time())
    if added:
        _write_json(path, {**have, **added})
    return path


# -- running ------------------------------------------------------------------------------------------------------


def cell_key(task: str, arm: str, rep: int) -> tuple[str, str, int]:
    """A ledger cell's key: (task id, arm, replication)."""
    return task, arm, int(rep)


def load_cells(ledger_path: Path) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Latest record per cell; an ok record is never replaced by a later failure of the same cell."""
    cells: dict[tuple[str, str, int], dict[str, Any]] = {}
    for rec in read_jsonl(ledger_path):
        if rec.get("kind") != "cell":
            continue
        k = cell_key(rec["task"], rec["arm"], rec["replication"])
        if cells.get(k, {}).get("status") == "ok" and rec.get("status") != "ok":
            continue
        cells[k] = rec
    return cells


def _number(value: Any, what: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return x


def judge_failures_of(rec: Mapping[str, Any]) -> int:
    """How many judge replies of a cell's run could not be read: the cell's "judge_failures", else its meta's
    (a runner may keep it there), else 0 (a ledger written before the count existed)."""
    value = rec.get("judge_failures")
    if value is None:
        value = (rec.get("meta") or {}).get("judge_failures")
    return int(value or 0)


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise ValueError(f"{what} must be a count (an integer >= 0), got {value!r}")
    return int(value)


def normalise(out: Any) -> dict[str, Any]:
    """Validate run_arm's return value at the boundary."""
    if not isinstance(out, Mapping):
        raise ValueError(f"run_arm must return a dict with score/dimensions/secondary/status, got {type(out).__name__}")
    status = out.get("status", "ok")
    if status not in ("ok", "failed"):
        raise ValueError(f"run_arm status must be 'ok' or 'failed', got {status!r}")
    meta = out.get("meta") or {}
    if not isinstance(meta, Mapping):
        raise ValueError(f"run_arm meta must be a dict, got {type(meta).__name__}")
    extra = {"meta": json.loads(json.dumps(dict(meta), default=str))} if meta else {}
    judged = out.get("judge_failures")
    if judged is not None:  # kept at the top of the cell record: the A/B counts them per arm
        extra["judge_failures"] = _count(judged, "judge_failures")
    usage = out.get("usage")
    if usage is not None:  # what the run cost (experiments.stats); a field left out is not measured
        if not isinstance(usage, Mapping) or set(usage) - set(USAGE_FIELDS):
            raise ValueError(f"run_arm usage must be a dict with keys among {', '.join(USAGE_FIELDS)}, got {usage!r}")
        extra["usage"] = {k: _number(v, f"usage {k!r}") for k, v in usage.items() if v is not None}
        if any(v < 0 for v in extra["usage"].values()):
            raise ValueError(f"run_arm usage values must be >= 0, got {dict(usage)!r}")
    if status == "failed":
        return {"status": "failed", "error": str(out.get("error") or "run_arm reported failure"), **extra}
    dims = out.get("dimensions") or {}
    sec = out.get("secondary") or {}
    if not isinstance(dims, Mapping) or not isinstance(sec, Mapping):
        raise ValueError(f"dimensions and secondary must be dicts, got {type(dims).__name__}, {type(sec).__name__}")
    return {
        "status": "ok",
        "error": None,
        "score": _number(out.get("score"), "score"),
        "dimensions": {str(k): _number(v, f"dimension {k!r}") for k, v in dims.items()},
        "secondary": {str(k): _number(v, f"secondary {k!r}") for k, v in sec.items() if v is not None},
        **extra,
    }
