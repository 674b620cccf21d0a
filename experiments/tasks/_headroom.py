"""`tasks.headroom=true`: the headroom screen of generated or imported tasks. Each kept task gets one baseline harness
run (the configured harness with the baseline synth instructions, scored by evaluate_candidate as a sweep's baseline
trial scores a task); a task whose run fails, or whose composite is at tasks.headroom_ceiling or above, is dropped:
the first can give no score to compare, the second no room for an edit to show a gain.

Each run's result is appended to results_dir/tasks/NAME.headroom.jsonl, one line per task id, so a killed or stopped
screen resumes without running a done task again. A failed model call (harness.inference.BackendError, or a run
that failed on one) is not a task's fault: nothing is journalled for that task and the error stops the command
(exit 3); the same command resumes."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from experiments.config import ExperimentConfig, task_from_spec

from ._rows import Candidate


@dataclass(frozen=True)
class Screen:
    kept: list[Candidate]
    screened: int
    resumed: int  # results read from the journal instead of run
    failed: list[tuple[str, str]]  # (id, error)
    ceiling: list[tuple[str, float]]  # (id, composite)
    scores: dict[str, float]  # the kept tasks' baseline composites
    seconds: float

    def lines(self, ceiling: float) -> list[str]:
        kept = sorted(self.scores.values())
        rng = f"{kept[0]:.2f}-{kept[-1]:.2f}" if kept else "none"
        out = [f"headroom screen: {self.screened} screened ({self.resumed} from the journal, {self.screened - self.resumed}"
               f" run in {self.seconds:.0f} s); dropped for failing: {len(self.failed)}; dropped at the ceiling "
               f"(composite >= {ceiling:g}): {len(self.ceiling)}; kept: {len(self.kept)}, baseline composite {rng}"]
        out += [f"headroom: dropped {i!r}: failed ({e[:120]})" for i, e in self.failed[:5]]
        out += [f"headroom: dropped {i!r}: composite {s:.2f} at the ceiling" for i, s in self.ceiling[:5]]
        return out


def journal_path(exp: ExperimentConfig) -> Path:
    return Path(exp.results_dir) / "tasks" / f"{exp.task_supply.name}.headroom.jsonl"


def screen_runner(exp: ExperimentConfig) -> Any:
    """The runner the screen scores with: the configured harness, as the command's make_runner builds it."""
    from experiments.config import to_harness_config
    from experiments.runs import HarnessRunner

    return HarnessRunner(to_harness_config(exp))


def setup_key(instructions: dict[str, str], exp: ExperimentConfig) -> str:
    """What a journalled result was measured under (the baseline instructions, the backend's models, the seed): a
    result measured under another setup is run again."""
    b = exp.backend
    blob = json.dumps({"instructions": instructions, "backend": [b.kind, b.planner_model, b.producer_model,
                                                                   b.evaluator_model], "seed": exp.seed},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def screen(exp: ExperimentConfig, cands: Sequence[Candidate], out: Callable[[str], None]) -> Screen:
    """One baseline run per candidate (journalled results reused); the candidates with headroom, in order."""
    from experiments.runs import TrialFailed, baseline_instructions, evaluate_candidate
    from harness.config import TASK_TYPES
    from harness.stores import append_jsonl, read_jsonl

    ts = exp.task_supply
    path = journal_path(exp)
    instructions = baseline_instructions(exp, [t for t in TASK_TYPES if any(c.task_type == t for c in cands)])
    key = setup_key(instructions, exp)
    done = {(r.get("id"), r.get("task")): r for r in read_jsonl(path) if r.get("setup") == key}
    runner = None
    failed: list[tuple[str, str]] = []
    ceiling: list[tuple[str, float]] = []
    scores: dict[str, float] = {}
    kept: list[Candidate] = []
    resumed, t0 = 0, time.monotonic()
    if done:
        out(f"headroom screen: resuming from {path}: {len(done)} result(s) journalled")
    for i, c in enumerate(cands, 1):
        rec = done.get((c.id, c.task))
        if rec is None:
            if runner is None:  # built on first use: a resume with every task done loads no model
                runner = screen_runner(exp)
            task = task_from_spec(c.spec("train"))
            try:
                ev = evaluate_candidate(instructions, [task], runner, seed=exp.seed, run_prefix=f"headroom-{ts.name}")
                rec = {"setup": key, "id": c.id, "task": c.task, "status": "ok", "score": float(ev.scores[0].score)}
            except TrialFailed as exc:
                if exc.model_failed:  # the server, not the task: nothing journalled, the command stops (exit 3)
                    raise
                rec = {"setup": key, "id": c.id, "task": c.task, "status": "failed", "error": str(exc)[:300]}
            append_jsonl(path, rec)
            out(f"headroom run {i}/{len(cands)} {c.id}: " + (f"composite {rec['score']:.2f}" if rec["status"] == "ok"
                                                              else f"FAILED {rec['error'][:160]}"))
        else:
            resumed += 1
        if rec["status"] != "ok":
            failed.append((c.id, str(rec.get("error") or "failed")))
        elif rec["score"] >= ts.headroom_ceiling:
            ceiling.append((c.id, float(rec["score"])))
        else:
            scores[c.id] = float(rec["score"])
            kept.append(c)
    return Screen(kept, len(cands), resumed, failed, ceiling, scores, time.monotonic() - t0)
