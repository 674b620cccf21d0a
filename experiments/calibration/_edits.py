"""The calibration's edits arm (calibrate.edits = k): the spread across tasks of the edits a sweep confirms.

The positive control (a refusal) and the A/A' arm (a meaning-preserving rewrite) measure spreads, but neither is
that of the edits a sweep confirms: edits its own mutators propose, which change answers and help some tasks far
more than others. Here the project's mutators (mutators.propose with the operator reflect on generator run 1's
judge feedback, as the shipped sweep reads it at the baseline; opro for a task type without feedback; the runner's
mutation_llm, as the sweep's) propose k edits of the baseline instructions, one seed each. Each edit runs once per
calibration task at generator run 1's seed on the prepared contexts (the calibration's own evaluate, as the
positive control's first replication), and its per-task differences against the per-task mean of the r generator
runs give its mean and its tau: experiments.stats.heterogeneity with the noise variance sigma^2 (1 + 1/r) taken
out, as the positive control's. The sizing of tasks.count=auto (experiments.tasks) reads the largest tau.

Only a text written by the operator asked for is an edit: the mutators' deterministic fallback (their answer to a
dead model or an unusable reply) and a recoverable failure they raise leave that task type's text as it was, and a
proposal that changed no task type is not run; the record and the summary say why. A failed task run stops the
calibration, as the positive control's does.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Mapping, Sequence

from experiments.config import ExperimentConfig, Task
from experiments.stats import heterogeneity, noise_floor, spread_from_trials

# mutation seeds of the edits arm (seed + EDIT_SEED_OFFSET + i): apart from a sweep's (sweep.seed * 100003 + trial)
EDIT_SEED_OFFSET = 4_000_037


def judge_feedback(scores: Sequence[Any], task_type: str, limit: int = 6) -> tuple[str, ...]:
    """The judge's words on one task type's tasks in one run, the same words counted once with the tasks they came
    from and their mean score (most tasks first, then the lowest mean): what the shipped sweep's reflection
    (sweep.reflect_feedback all) reads from the baseline, before any edit was tried."""
    from mutators import counted_feedback

    def words(s: Any) -> str:
        return (s.feedback + (" Weaknesses: " + "; ".join(s.weaknesses) if s.weaknesses else ""))[:600]

    return tuple(counted_feedback((s.task_id, s.score, words(s)) for s in scores if s.task_type == task_type)[:limit])


def propose_edits(exp: ExperimentConfig, baseline: Mapping[str, str], types: Sequence[str], first_run: Any, k: int,
                  llm: Any, propose: Callable[..., Any] | None = None
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Up to k edits of `baseline` for the task types `types`, each {"edit" (1..k), "seed", "instructions" (every
    task type's text), "operators" (the types it changed: the operator that wrote each), "notes"}, and for each
    proposal that changed no type {"edit", "seed", "why" (per task type)}. `propose` is mutators.propose unless
    given (a test's own, as the sweep's)."""
    from mutators import MutationContext, instruction_hash
    from mutators import propose as mutators_propose
    from mutators.operators import RECOVERABLE

    propose = propose or mutators_propose
    means = {tt: statistics.fmean([s.score for s in first_run.scores if s.task_type == tt] or [0.0]) for tt in types}
    feedback = {tt: judge_feedback(first_run.scores, tt) for tt in types}
    seen = {tt: {instruction_hash(baseline[tt])} for tt in types}
    edits: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    for i in range(k):
        seed = exp.seed + EDIT_SEED_OFFSET + i
        texts, used, notes = dict(baseline), {}, []
        for tt in types:
            op = "reflect" if feedback[tt] else "opro"
            ctx = MutationContext(base=baseline[tt], history=((baseline[tt], round(means[tt], 3)),),
                                  feedback=feedback[tt], pool=(baseline[tt],), task_type=tt, seed=seed,
                                  max_chars=exp.sweep.max_chars)
            try:
                cand = propose(op, ctx, llm, seen=frozenset(seen[tt]))
            except RECOVERABLE as exc:
                notes.append(f"{tt}: {op} raised {type(exc).__name__}: {' '.join(str(exc).split())[:160]}")
                continue
            if cand.operator != op or not cand.text.strip() or cand.text.strip() == baseline[tt].strip():
                notes.append(f"{tt}: not {op}'s edit ({cand.operator}: {' '.join(str(cand.note).split())[:160]})")
                continue
            texts[tt], used[tt] = cand.text, op
            seen[tt].add(instruction_hash(cand.text))
            if cand.note:
                notes.append(f"{tt}: {' '.join(str(cand.note).split())[:160]}")
        if used:
            edits.append({"edit": i + 1, "seed": seed, "instructions": texts, "operators": used, "notes": notes})
        else:
            missing.append({"edit": i + 1, "seed": seed, "why": notes or ["no task type to edit"]})
    return edits, missing


def edit_spreads(edits: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, float]],
                 gen_runs: Sequence[Mapping[str, float]], ids: Sequence[str], asked: int,
                 missing: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The edits arm's record: per edit (its texts, operators, per-task runs and differences against the per-task
    mean of the generator runs) its mean difference and tau; over the edits the largest tau, k (the edits run) and
    the tau of their pooled within-edit spread (experiments.stats.spread_from_trials), all with the noise variance
    sigma^2 (1 + 1/r) taken out (one edit run against r generator runs per task)."""
    sigma, r = noise_floor(gen_runs).sigma, len(gen_runs)
    noise_var = sigma ** 2 * (1 + 1 / r)
    per = []
    for e, run in zip(edits, runs):
        diffs = [run[t] - statistics.fmean(g[t] for g in gen_runs) for t in ids]
        het = heterogeneity(diffs, noise_var)
        per.append({"edit": e["edit"], "seed": e["seed"], "operators": dict(e["operators"]), "notes": list(e["notes"]),
                    "instructions": {tt: e["instructions"][tt] for tt in e["operators"]}, "n": len(diffs),
                    "mean": statistics.fmean(diffs) if diffs else float("nan"),
                    "sd": statistics.stdev(diffs) if len(diffs) > 1 else float("nan"),
                    "tau": het["tau"] if het else None, "diffs": diffs, "runs": dict(run)})
    taus = [p["tau"] for p in per if p["tau"] is not None]
    pooled = spread_from_trials([p["diffs"] for p in per], noise_var)
    return {"asked": asked, "k": len(per), "n": len(ids), "noise_sd": math.sqrt(noise_var),
            "largest_tau": max(taus) if taus else None, "pooled_tau": pooled[0] if pooled else None,
            "edits": per, "not_proposed": list(missing)}


def edits_arm(exp: ExperimentConfig, runner: Any, tasks: Sequence[Task], baseline: Mapping[str, str],
              gens: Sequence[Any], evaluate: Callable[..., Any], run_seed: int, *,
              propose: Callable[..., Any] | None = None, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Propose, run and measure the edits arm (see the module docstring). `evaluate(label, instructions, seed,
    prefix)` is the calibration's own (CalibrationFailed on a failed task run), run_seed generator run 1's seed;
    `say` gets one line when fewer edits than asked were proposed, and why."""
    from experiments.config import task_types

    k, name = exp.calibrate.edits, exp.sweep.name
    chosen = set(exp.sweep.mutate_task_types)
    types = [tt for tt in task_types(tasks) if not chosen or tt in chosen]
    edits, missing = propose_edits(exp, baseline, types, gens[0], k, getattr(runner, "mutation_llm", None), propose)
    if missing:
        say(f"[{name}] edits arm: {len(edits)} of {k} edit(s) proposed; {edits_why(missing)}")
    runs = [evaluate(f"edit {e['edit']}/{k} (seed {run_seed})", e["instructions"], run_seed,
                     f"{name}-edit{e['edit']}").by_task() for e in edits]
    return edit_spreads(edits, runs, [ev.by_task() for ev in gens], [t.id for t in tasks], k, missing)


def edits_why(missing: Sequence[Mapping[str, Any]]) -> str:
    """Why proposals were not made, in one line: which, and their distinct reasons (the first two, then a count)."""
    reasons = list(dict.fromkeys(w.split(": ", 1)[-1] for m in missing for w in m["why"]))
    more = f"; {len(reasons) - 2} other reason(s) in the record" if len(reasons) > 2 else ""
    which = ", ".join(str(m["edit"]) for m in missing)
    fallback = (" (a deterministic fallback is not counted as the mutators' edit)"
                if any(r.startswith("not ") for r in reasons) else "")
    return f"edit{'s' if len(missing) > 1 else ''} {which} not proposed: {'; '.join(reasons[:2])}{more}{fallback}"


def edits_line(rec: Mapping[str, Any]) -> str:
    """The summary's line on the edits arm: k edits, each one's mean difference and tau, the largest tau; the
    proposals not made, and why."""
    def num(v: Any, fmt: str) -> str:
        return format(v, fmt) if isinstance(v, (int, float)) and math.isfinite(v) else "n/a"

    head = f"edits arm ({rec['k']} of {rec['asked']} edit(s) the mutators proposed, {rec['n']} tasks each"
    missing = f"; {edits_why(rec['not_proposed'])}" if rec.get("not_proposed") else ""
    if not rec["k"]:
        return f"{head}): none ran{missing}; the sizing reads the positive control and the A/A' arm"
    each = "; ".join(f"edit {e['edit']} ({'/'.join(sorted(set(e['operators'].values())))}) diff "
                     f"{num(e['mean'], '+.3f')} tau {num(e['tau'], '.3f')}" for e in rec["edits"])
    return (f"{head}, noise sd {num(rec['noise_sd'], '.3f')} taken out): {each}; largest tau "
            f"{num(rec['largest_tau'], '.3f')} (pooled {num(rec['pooled_tau'], '.3f')}){missing}")
