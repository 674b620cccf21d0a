"""One A/B of a real, subtle instruction edit on a real model, read by two designs: 2 replications + Wilcoxon, 3 + t.

Runs the real command once, at today's design (`+sweep=prior_knowledge_ab`'s defaults: 3 replications per
(task, arm), each replication's seed shared by both arms, two-sided paired t over tasks), with the arms

    A  the default SYNTH_INSTRUCTION of each task type (harness.synthesis.DEFAULT_INSTRUCTIONS)
    B  the same texts with one sentence appended (EDIT below)

then analyses the same ledger twice, without running anything more (experiments.ab.load_result):

    old  the design of 3306971: 2 replications (the first two of the same cells: replication r's seed is
         experiments.ab.pair_seed(seed, task, r) whatever the replication count), exact Wilcoxon over tasks
    new  the design as run: 3 replications, paired t

and prints each one's mean difference B - A over tasks, its 95% interval, p, verdict, the run-noise share of the
per-task differences and the smallest effect each design detects with probability 0.8 at the measured spread
(experiments.stats.mde: the A/B's own power model). Cells are cached in the results folder: a second call resumes.

    python bench/power/ab_subtle_edit.py --model <gguf> [--results DIR] [--split holdout] [-- extra overrides]

Prints the model file (name, sha256 prefix) it ran on. On the 1.5B validation model on 2 idle cores, the 5 smoke
tasks x 3 replications x 2 arms took 32 min 49 s with `--split all -- benchmark=smoke planner=single_pass
wiggum.max_rounds=1 evaluator.rescore=false research.compress=false research.max_rounds=1` (docs/CALIBRATION.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

EDIT = " Open each item or section with its takeaway in one bold sentence, then give the details."


def sha_prefix(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:12]


def overrides(args) -> list[str]:
    from harness.synthesis import DEFAULT_INSTRUCTIONS

    def quoted(text: str) -> str:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    arm_b = ",".join(f"synth.instructions.{k}:{quoted(v + EDIT)}" for k, v in DEFAULT_INSTRUCTIONS.items())
    model = ["backend=embedded", f"backend.embedded_model_path={args.model}"] if args.model else []
    return ["+sweep=prior_knowledge_ab", "sweep.name=instruction_edit_ab", "ab.a_name=default",
            "ab.b_name=takeaway_first", "ab.a={}", f"ab.b={{{arm_b}}}", f"ab.split={args.split}",
            "ab.min_effect=0.3", "ab.hypothesis=Opening each item with its takeaway changes the composite score.",
            f"results_dir={args.results}", *model, *args.extra]


def describe(label: str, exp, prereg, result, runs_per_arm: int) -> list[str]:
    p = result.primary
    test = exp.ab.test
    lines = [f"{label}: {exp.ab.replications} replication(s) per (task, arm), {test} over tasks; "
             f"{p.n} task pairs, {runs_per_arm} runs per arm",
             f"  mean B - A {p.mean_diff:+.3f} (sd over tasks {p.sd_diff:.3f}); 95% interval "
             f"[{p.ci.low:+.3f}, {p.ci.high:+.3f}] (width {p.ci.high - p.ci.low:.3f}); p ({test}) {p.p(test):.4f}",
             f"  verdict: {result.verdict} ({result.verdict_reason})"]
    if p.noise is not None and p.n > 1:
        nz = p.noise
        tau = math.sqrt(max(0.0, p.sd_diff ** 2 - nz.sd_task_diff ** 2))
        share = min(1.0, nz.sd_task_diff ** 2 / p.sd_diff ** 2) if p.sd_diff > 0 else float("nan")
        lines.append(f"  run noise (within-task sd {nz.sd_within:.3f}) gives a task's difference sd "
                     f"{nz.sd_task_diff:.3f}: {share:.0%} of the per-task differences' variance; the rest, "
                     f"task x variant spread tau {tau:.3f}")
    # the A/B summary's own design power line (experiments.ab._design.observed_power_line: this A/B's per-task sd,
    # taken as an estimate on n - 1 df), so the figure printed here is the one the command printed
    from experiments.ab._design import observed_power_line

    line = observed_power_line(p, prereg, power=exp.calibrate.power, target=exp.calibrate.target_effect,
                               sims=min(exp.calibrate.sims, 2000))
    if line:
        lines.append(f"  {line}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.environ.get("HARNESS_EMBEDDED_MODEL", ""))
    ap.add_argument("--results", default=str(ROOT / "results" / "bench_ab_old_new"))
    ap.add_argument("--split", default="holdout")
    ap.add_argument("--analyse-only", action="store_true", help="analyse the ledger without running the command")
    ap.add_argument("--side-by-side", action="store_true",
                    help="also judge the same cells' answers side by side (ab.compare=pairwise's judge and test) on a "
                         "copy of the ledger, and print that reading beside the other two")
    ap.add_argument("extra", nargs="*", help="more overrides after --")
    args = ap.parse_args(argv)
    if args.model:
        print(f"model {Path(args.model).name} sha256 {sha_prefix(args.model)}")
    ov = overrides(args)
    t0 = time.monotonic()
    if not args.analyse_only:
        rc = subprocess.call([sys.executable, "-m", "experiments.run", *ov], cwd=ROOT)
        print(f"the command exited {rc} after {time.monotonic() - t0:.0f} s")
        if rc != 0:
            return rc

    from experiments.ab._analysis import load_result
    from experiments.ab._design import ab_paths, design_from_config
    from experiments.config import compose_config, to_experiment

    new = to_experiment(compose_config(ov))
    old = dataclasses.replace(new, ab=dataclasses.replace(new.ab, replications=2, test="wilcoxon"))
    ledger = ab_paths(new).ledger
    for label, exp in (("old design (2 replications, Wilcoxon)", old), ("new design (3 replications, t)", new)):
        design, prereg = design_from_config(exp)
        result = load_result(design, prereg, ledger)
        print("\n".join(describe(label, exp, prereg, result, len(design.tasks) * exp.ab.replications)))
    print("\n".join(per_task(result)))
    if args.side_by_side:
        design, prereg = design_from_config(new)
        print("\n".join(side_by_side(new, design, prereg, result, ledger)))
    return 0


def side_by_side(exp, design, prereg, result, ledger: Path) -> list[str]:
    """The same cells read the pairwise way: each (task, replication) pair's two answers judged side by side by
    the evaluator role (experiments.ab._pairwise, both orders), on a copy of the ledger (side_by_side.jsonl beside
    it: the A/B's own registration is untouched; a second call judges only what is missing), the sign-flip test
    over tasks, and each reading's standardised effect (mean / sd over tasks: at equal tasks the larger one is
    the more sensitive reading of this edit)."""
    import shutil

    from experiments.ab._design import arm_configs
    from experiments.ab._pairwise import analyse_pairwise, judge_pairs, make_judge
    from experiments.runs import HarnessCells

    copy = ledger.with_name("side_by_side.jsonl")
    if not copy.exists():
        shutil.copyfile(ledger, copy)
    a, b = design.arm_names
    llm = HarnessCells(arm_configs(exp)).roles_for(a).evaluator
    t0 = time.monotonic()
    judged = judge_pairs(design, copy, make_judge(exp, llm),
                         on_progress=lambda i: print(f"  pair {i['pair']}/{i['pairs']} {i['task']} rep "
                                                     f"{i['replication']}: {i.get('preference', i.get('error'))} "
                                                     f"{i.get('verdicts', '')}", flush=True))
    pw = analyse_pairwise(copy, design, dataclasses.replace(prereg, compare="pairwise", sequential=0))
    p = result.primary
    dz_point = p.mean_diff / p.sd_diff if p.sd_diff > 0 else float("nan")
    dz_pair = pw.mean / pw.sd if pw.sd > 0 else float("nan")
    agree = [math.copysign(1, pw.per_task[t.task]) == math.copysign(1, t.diff) for t in result.tasks
             if t.task in pw.per_task and pw.per_task[t.task] != 0 and t.diff != 0]
    return [f"side by side (ab.compare=pairwise's reading of the same cells): {judged} pair(s) judged now in "
            f"{time.monotonic() - t0:.0f} s, {pw.calls} judge calls in all",
            *(f"  {line}" for line in pw.lines(a, b)),
            f"  verdict: {pw.verdict} ({pw.verdict_reason})",
            f"  per task (mean preference of {b}): " + ", ".join(f"{t} {v:+.2f}" for t, v in pw.per_task.items()),
            f"  standardised effect over tasks (mean / sd): pointwise {dz_point:+.3f}, side by side {dz_pair:+.3f}; "
            f"the two readings agree in sign on {sum(agree)} of {len(agree)} tasks where both are non-zero"]


def per_task(result) -> list[str]:
    """Each task's runs per arm (the new design's), and how many runs sat at the degenerate floor (score <= 1:
    the gate's cap, a copied prompt or repeated lines): the jumps that make the spread on a small model."""
    a, b = result.arm_names
    lines = [f"per task ({a} runs | {b} runs -> mean difference {b} - {a}):"]
    floored = {a: 0, b: 0}
    runs = {a: 0, b: 0}
    for t in result.tasks:
        for arm, reps in ((a, t.reps_a), (b, t.reps_b)):
            floored[arm] += sum(1 for x in reps if x <= 1.0)
            runs[arm] += len(reps)
        lines.append(f"  {t.task}: {' '.join(f'{x:.2f}' for x in t.reps_a)} | "
                     f"{' '.join(f'{x:.2f}' for x in t.reps_b)} -> {t.diff:+.3f}")
    lines.append(f"runs at the floor (score <= 1.0): {a} {floored[a]} of {runs[a]}, {b} {floored[b]} of {runs[b]}")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
