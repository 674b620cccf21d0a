"""A stored calibration: what it measured (noise, checks, power, cost) and where it lives (finding one again:
_calibration_find.py).

results/calibration/<key>.json, key: hash of the objective fingerprint of experiments.config.study_fingerprint
without sweep_kind (backend identity, evaluator, benchmark, harness config). A sweep or A/B whose fingerprint
matches reads it (find_calibration) when its checks passed; experiments.calibration writes it (Calibration.write).
A calibration of the same fingerprint run again replaces it as the one sweeps read; the one it replaces is kept
under results/calibration/replaced/, never deleted, and the run says what it measured that the new one does not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from experiments.config import ExperimentConfig, study_fingerprint
from experiments.stats import NoiseFloor
from harness.inference import smoke_label

CAL_DIR = "calibration"
VERSION = 2  # 2: generator runs have seeds of their own (1 reused a sweep's baseline seeds: its runs were those)
PASS, FAIL, UNREACHABLE = "pass", "fail", "unreachable"


@dataclass(frozen=True)
class Check:
    """The A/A test or the positive control."""

    name: str
    test: str
    alternative: str
    n: int
    mean_diff: float
    p: float
    min_p: float
    status: str  # pass | fail | unreachable
    detail: str = ""

    def line(self, alpha: float) -> str:
        side = "two-sided" if self.alternative == "two-sided" else "one-sided"
        if self.status == UNREACHABLE:
            verdict = f"UNCHECKED: {self.n} tasks cannot reach alpha (smallest p {self.min_p:.3g})"
        elif self.name == "A/A":
            verdict = "not significant: PASS" if self.status == PASS else f"significant (p < {alpha:g}): FAIL"
        else:
            verdict = "detected: PASS" if self.status == PASS else "NOT detected: FAIL"
        return f"{self.name} ({self.detail}; {side} {self.test}): diff {self.mean_diff:+.3f}, p={self.p:.3g}: {verdict}"


@dataclass(frozen=True)
class Cost:
    """What one task run costs (medians over the calibration's runs), and a context preparation and a re-score."""

    llm_calls: float  # per task run, cached included
    uncached_calls: float  # per task run: what sweep.max_llm_calls counts
    tokens: float  # prompt + completion per task run
    wall_s: float  # per task run (Runner.finish)
    prepare_calls: float = 0.0  # uncached calls per context preparation
    prepare_s: float = 0.0
    rescore_s: float = 0.0
    runs: int = 0


@dataclass(frozen=True)
class Calibration:
    fingerprint: dict[str, Any]
    key: str
    created: str
    design: dict[str, Any]
    tasks: tuple[str, ...]
    sigma: float  # generator variance: pooled within-task SD of the composite over `repeats` runs
    repeats: int
    n_tasks: int
    range_of_means: float
    per_task_sd: dict[str, float]
    sigma_ci: tuple[float, float]
    judge_sigma: float
    judge_dimensions: dict[str, float]
    generator_dimensions: dict[str, float]
    aa: Check
    control: Check
    mde: dict[str, dict[str, Any]]
    needed: dict[str, Any]
    cost: Cost
    smoke: bool = False
    runs: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    path: str = ""
    # the positive control on the LLM judge's rubric dimensions alone (None: no rubric ran): a control detected
    # by the deterministic criteria only says nothing about the judge
    judge_control: Check | None = None
    # the positive control's spread across tasks (experiments.stats.heterogeneity; None: fewer than 3 tasks)
    heterogeneity: dict[str, float] | None = None
    # where the spread of per-task differences comes from, per decoding (sampled / greedy: sigma, tau, rho, f on
    # greedy; the A/A' runs), the rewrite texts and the lever verdicts (None: a record without them)
    decomposition: dict[str, Any] | None = None
    # calibrate.pairwise: the A/A and the positive control judged side by side (position bias, g)
    pairwise: dict[str, Any] | None = None
    # calibrate.edits: edits the mutators proposed, each one's mean difference and tau, the largest tau (None: the
    # arm was off, or a record from before it)
    edits: dict[str, Any] | None = None

    @property
    def effect_cv(self) -> float:
        """The control's spread across tasks relative to its mean (0: none measured)."""
        return float((self.heterogeneity or {}).get("effect_cv") or 0.0)

    @property
    def judge_discriminates(self) -> bool:
        return self.judge_control is not None and self.judge_control.status == PASS

    @property
    def passed(self) -> bool:
        """No check failed (an unreachable check, allowed by calibrate.allow_underpowered, is not a failure)."""
        return FAIL not in (self.aa.status, self.control.status)

    @property
    def pairwise_failure(self) -> str:
        """Why calibrate.pairwise measured no g: its judge gave no readable verdict on any pair of the A/A or of the
        positive control ("" when it measured g, or did not run)."""
        return str((self.pairwise or {}).get("not_measured") or "")

    @property
    def failed_out(self) -> bool:
        """The CLI exits 1: a check failed, or a measurement asked for (calibrate.pairwise's g) failed. The noise
        floor of a calibration whose checks passed is still used by a sweep (passed)."""
        return not self.passed or bool(self.pairwise_failure)

    @property
    def stop_reason(self) -> str:
        bad = [c.name for c in (self.aa, self.control) if c.status == FAIL]
        reasons = [f"calibration checks failed: {', '.join(bad)}; a sweep will not use this calibration"] if bad else []
        if self.pairwise_failure:
            reasons.append(f"calibrate.pairwise measured nothing: {self.pairwise_failure}" + (
                "; the noise floor and checks are stored and a sweep uses them" if self.passed else ""))
        return "; ".join(reasons)

    def noise_floor(self) -> NoiseFloor:
        """The sweep's NoiseFloor from the generator variance (repeats = the calibration's runs)."""
        return NoiseFloor(self.sigma, self.repeats, self.n_tasks, self.range_of_means, dict(self.per_task_sd))

    def write(self, path: Path) -> str:
        """Store this calibration at `path`, keeping the one stored there before (see _write): returns what was
        replaced, "" when nothing was."""
        return _write(self, path)

    @staticmethod
    def replacing_line(path: Path, design: Mapping[str, Any]) -> str:
        """What a calibration of `design` (tasks, repeats, pairwise, decodings, edits) will replace at `path` ("":
        nothing stored there), said before it runs."""
        return _replacing_line(path, design)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["version"] = VERSION
        d["passed"] = self.passed
        d.pop("path")
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], path: str = "") -> "Calibration":
        d = dict(d)
        version = d.pop("version", None)
        if version != VERSION:
            raise ValueError(f"calibration format version {version} is not {VERSION}" + (
                " (version 1 ran a sweep's own baseline seeds: run +sweep=calibrate again)" if version == 1 else ""))
        _check_numbers(d)
        d["aa"], d["control"], d["cost"] = Check(**d["aa"]), Check(**d["control"]), Cost(**d["cost"])
        d["judge_control"] = Check(**d["judge_control"]) if d.get("judge_control") else None
        d["tasks"], d["sigma_ci"] = tuple(d["tasks"]), tuple(d["sigma_ci"])
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names}, path=path)


def _check_numbers(d: Mapping[str, Any]) -> None:
    """ValueError (one line: the field, its value, what is expected) when a stored record's noise is not a number a
    sizing or a sweep can use: sigma a finite number >= 0, n_tasks and repeats whole numbers >= 0,
    the A/A' arm's tau a number (NaN: not measured)."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    sigma = d.get("sigma")
    if not number(sigma) or not math.isfinite(sigma) or sigma < 0:
        raise ValueError(f"sigma={sigma!r}; expected the run noise in composite points (a number >= 0)")
    for key in ("n_tasks", "repeats"):
        v = d.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{key}={v!r}; expected a whole number >= 0")
    tau = (((d.get("decomposition") or {}) if isinstance(d.get("decomposition"), Mapping) else {}).get("sampled")
           or {})
    tau = tau.get("tau") if isinstance(tau, Mapping) else None
    if tau is not None and (not number(tau) or tau < 0):
        raise ValueError(f"decomposition.sampled.tau={tau!r}; expected a spread in composite points (a number >= 0)")


def aa_tau(decomposition: Mapping[str, Any] | None) -> float | None:
    """The task x variant spread tau a calibration's A/A' arm measured under sampled decoding (as sweeps and A/Bs
    run), or None where it was not measured (no A/A' arm, greedy only, or too few tasks: NaN)."""
    tau = ((decomposition or {}).get("sampled") or {}).get("tau")
    return float(tau) if tau is not None and math.isfinite(float(tau)) else None


def edits_tau(edits: Mapping[str, Any] | None) -> float | None:
    """The largest spread across tasks (tau) among the edits a calibration's edits arm ran, or None where it did
    not run, ran no edit, or measured no tau (fewer than 3 tasks)."""
    tau = edits.get("largest_tau") if isinstance(edits, Mapping) else None
    ok = isinstance(tau, (int, float)) and not isinstance(tau, bool) and math.isfinite(tau) and tau >= 0
    return float(tau) if ok else None


def run_label(identity: Mapping[str, Mapping[str, Any]], calibration: "Calibration | None" = None) -> str | None:
    """The line every output, record and report of a run on an embedded model carries (None: no embedded role).

    It names the model file actually loaded. Results on an embedded model are a smoke run unless a calibration on
    the same fingerprint showed that the judge discriminates (the positive control detected on the rubric
    dimensions alone); then the line says so and names that calibration."""
    files = sorted({str(i.get("file") or i.get("model")) for i in identity.values() if i.get("backend") == "embedded"})
    if not files:
        return None
    names = ", ".join(files)
    if calibration is not None and calibration.judge_discriminates:
        jc = calibration.judge_control
        return (f"EMBEDDED MODEL ({names}): its judge discriminates per calibration {calibration.key} (positive "
                f"control on the rubric: diff {jc.mean_diff:+.2f}, p={jc.p:.3g}); a small local model, not a "
                f"production judge")
    return smoke_label(files)


def calibration_fingerprint(exp: ExperimentConfig, identity: Mapping[str, Any], tasks: Sequence[Any]) -> dict[str, Any]:
    """experiments.config.study_fingerprint without sweep_kind: what a calibration and a sweep or A/B share
    (backend identity, evaluator, benchmark tasks, harness config)."""
    fp = study_fingerprint(exp, identity, tasks)
    fp.pop("sweep_kind", None)
    return json.loads(json.dumps(fp, default=str))  # the form it has once stored


def fingerprint_key(fp: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:12]


def calibration_dir(exp: ExperimentConfig) -> Path:
    return Path(exp.results_dir) / CAL_DIR


REPLACED_DIR = "replaced"  # under calibration_dir: calibrations a later one of the same fingerprint replaced


def measured_text(d: Mapping[str, Any]) -> str:
    """What a stored calibration record (its JSON) measured, in a few words."""
    df = int(d.get("n_tasks") or 0) * (int(d.get("repeats") or 1) - 1)
    parts = [f"{d.get('n_tasks', '?')} tasks x {d.get('repeats', '?')} generator runs ({df} df), sigma "
             f"{float(d.get('sigma', float('nan'))):.3f}"]
    pw = d.get("pairwise") or {}
    if isinstance(pw.get("g"), (int, float)):
        parts.append(f"g {pw['g']:.2f}")
    greedy = (d.get("decomposition") or {}).get("greedy")
    if greedy:
        f = greedy.get("f")
        parts.append("the greedy decomposition" + (f" (f {f:.2f})" if isinstance(f, (int, float)) else ""))
    if edits_tau(d.get("edits")) is not None:
        parts.append(f"{d['edits'].get('k')} edits (largest tau {edits_tau(d['edits']):.3f})")
    parts.append("checks passed" if d.get("passed") else "checks failed")
    return f"{', '.join(parts)}; created {str(d.get('created', '?'))[:19]}"


def measured_less(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[str]:
    """What the stored record `old` measured that `new` (either as a record or as a design: tasks, repeats,
    pairwise, decodings, edits) does not: more tasks or runs, g, the greedy decomposition, the edits arm's spread,
    passed checks."""
    def df(d: Mapping[str, Any]) -> int:
        return int(d.get("n_tasks") or 0) * (int(d.get("repeats") or 1) - 1)

    lost = []
    if df(new) < df(old):
        lost.append(f"more degrees of freedom for sigma ({df(old)} from {old.get('n_tasks')} tasks x "
                    f"{old.get('repeats')} runs, against {df(new)})")
    old_g = (old.get("pairwise") or {}).get("g")
    if isinstance(old_g, (int, float)) and not isinstance((new.get("pairwise") or {}).get("g"), (int, float)):
        lost.append(f"g {old_g:.2f}")
    if (old.get("decomposition") or {}).get("greedy") and not (new.get("decomposition") or {}).get("greedy"):
        lost.append("the greedy decomposition")
    if edits_tau(old.get("edits")) is not None and edits_tau(new.get("edits")) is None:
        lost.append(f"the edits arm's spread (largest tau {edits_tau(old['edits']):.3f} over "
                    f"{old['edits'].get('k')} edits)")
    if old.get("passed") and new.get("passed") is False:
        lost.append("passed checks")
    return lost


def stored_record(path: Path) -> dict[str, Any] | None:
    """The JSON stored at `path` (None: nothing there); an unreadable file gives {} (it is kept all the same)."""
    if not path.is_file():
        return None
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return d if isinstance(d, dict) else {}


def _replacing_line(path: Path, design: Mapping[str, Any]) -> str:
    """Before a calibration runs: what it will replace at `path` ("" when nothing is stored there), and what the
    stored one measured that this design will not (design: tasks, repeats, pairwise, decodings, edits)."""
    old = stored_record(path)
    if old is None:
        return ""
    if not old:
        return (f"{path} is stored but unreadable; this calibration replaces it and keeps it under "
                f"{path.parent / REPLACED_DIR}/")
    # the design as the record it will make, taking what it asks for as measured (a g, a greedy arm)
    plan = {"n_tasks": design.get("tasks"), "repeats": design.get("repeats"),
            "pairwise": {"g": 0.0} if design.get("pairwise") else {},
            "decomposition": {"greedy": True} if "greedy" in (design.get("decodings") or ()) else {},
            "edits": {"largest_tau": 0.0} if design.get("edits") else None}
    lost = measured_less(plan, old)
    return (f"a calibration of this fingerprint is stored ({measured_text(old)}): this one replaces it as the one "
            f"sweeps and A/Bs read and keeps it under {path.parent / REPLACED_DIR}/"
            + (f"; it measured what this one will not: {'; '.join(lost)} (Ctrl-C now keeps it as it is)" if lost
               else ""))


def _write(cal: Calibration, path: Path) -> str:
    """Write `cal` at `path` (atomic); a calibration stored there before is first copied to
    <folder>/replaced/<key>-<its created time>.json (kept, never deleted). Returns what was replaced ("" when
    nothing was): what it measured, what it measured that `cal` does not, where it is kept and how to use it
    again."""
    from harness.stores import atomic_write_text

    old = stored_record(path)
    note = ""
    if old is not None:
        stamp = "".join(ch for ch in str(old.get("created") or "unknown")[:19] if ch.isalnum()) or "unknown"
        keep = path.parent / REPLACED_DIR / f"{path.stem}-{stamp}.json"
        n = 1
        while keep.exists():
            n += 1
            keep = path.parent / REPLACED_DIR / f"{path.stem}-{stamp}-{n}.json"
        keep.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(keep, path.read_text(encoding="utf-8"))  # copied first: a stop here loses neither
        lost = measured_less(cal.to_dict(), old) if old else []
        note = (f"replaced the calibration stored before ({measured_text(old) if old else 'unreadable'}), kept as "
                f"{keep}" + (f"; it measured what this one does not: {'; '.join(lost)}" if lost else "")
                + f"; to use it again: mv {keep} {path}")
    atomic_write_text(path, json.dumps(cal.to_dict(), indent=2, sort_keys=True, default=str) + "\n")
    return note


def load_calibration(path: Path) -> Calibration:
    return Calibration.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
