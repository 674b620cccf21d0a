"""Does the calibration's power statement hold? False-positive and detection rates in simulation.

    python bench/power/calibration_sim.py [--quick] [--runs 1000] [--calibrations 200] [--noise 0.5] [--json]

A scripted world stands in for the harness behind the Runner protocol (prepare / finish / rescore): a task's score
is its difficulty (uniform 4.5-7) + the instruction's effect + run noise (sd --noise, new for every instruction x
task x seed), judge noise sd 0.15 on a re-score. The harmful instruction costs 2 points; an instruction carrying
"[effect +x]" gains x on every task. The benchmark has the default's shape: 8 train + 4 holdout tasks.

1. One calibration exactly as `python -m experiments.run +sweep=calibrate` runs it (experiments.calibration.
   run_calibration with the shipped conf/sweep/calibrate.yaml: 4 tasks, r=2, k=3, paired t; MLflow off). It
   reports sigma, the noise floor and the sweep's minimum detectable effect (MDE: 8 train tasks, one baseline
   run, one-sided exact Wilcoxon and mean difference above the floor, alpha 0.05, power 0.8).
2. A/A, --runs times: a baseline run and a candidate run of the SAME configuration (other seeds) on the 8 train
   tasks, judged by the sweep's own rule (experiments.stats.compare with the calibration's floor): the
   false-positive rate. Also the calibration's own A/A check (two generator runs on its 4 tasks, paired t
   two-sided, experiments.calibration.paired_check) repeated --runs times on new seeds.
3. Planted effect equal to the reported MDE, --runs times: candidate = baseline instruction + "[effect +MDE]",
   the same rule: the detection rate (the claim: about 0.8). The same at the MDE computed from the true sigma
   separates the method from the noise of one calibration's sigma estimate (4 degrees of freedom). Then an effect
   that varies across tasks ("[spread c]": task i gains effect x (1 + c u_i), --spread c): planted at the MDE the
   calibration reports for such an effect (about 0.8), and at the same-size MDE (below 0.8: why both are reported).
4. --calibrations independent calibrations (each its own world seed): each estimates sigma from its 2 runs x 4
   tasks and reports its MDE through the same functions (noise_floor, sweep_design, mde); one planted test at each
   reported MDE: the detection rate including the estimate's error.
5. The A/B design (12 tasks x 2 replications, two-sided exact Wilcoxon via experiments.stats): detection at its
   reported MDE and false positives, --runs times.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

HARM = "cannot help with it"  # the shipped calibrate.harmful_instruction (a refusal)
_EFFECT = re.compile(r"\[effect \+([0-9.]+)\]")
_SPREAD = re.compile(r"\[spread ([0-9.]+)\]")


def _gauss(*key: object) -> float:
    digest = hashlib.sha256("|".join(map(str, key)).encode()).hexdigest()
    return random.Random(int(digest[:16], 16)).gauss(0.0, 1.0)


class World:
    """The Runner protocol over a scripted world (see the module docstring)."""

    def __init__(self, world: int, tasks, noise: float, judge_noise: float = 0.15) -> None:
        rng = random.Random(f"difficulty-{world}")
        self.world, self.noise, self.judge_noise = world, noise, judge_noise
        self.difficulty = {t.task: rng.uniform(4.5, 7.0) for t in tasks}
        self.types = {t.task: t.task_type for t in tasks}
        self.calls = 0

    def identity(self):
        return {role: {"backend": "sim", "model": "world"} for role in ("planner", "producer", "evaluator")}

    def prepare(self, task):
        return {"task": task, "task_type": self.types[task]}

    def _effect(self, instr: str, task: str) -> float:
        """The instruction's effect on this task: "[effect +x]" gains x, times 1 + c * u_task with "[spread c]"
        (u_task standard normal, drawn once per world and task: an effect that varies across tasks)."""
        m, sp = _EFFECT.search(instr), _SPREAD.search(instr)
        gain = float(m.group(1)) if m else 0.0
        if sp:
            gain *= 1.0 + float(sp.group(1)) * _gauss("spread", self.world, task)
        return gain - (2.0 if HARM in instr.lower() else 0.0)

    def finish(self, prepared, *, instructions, run_id=None, criteria=None, seed=0):
        from experiments.runs import TaskOutcome, Usage

        self.calls += 1
        instr = instructions[prepared["task_type"]]
        score = (self.difficulty[prepared["task"]] + self._effect(instr, prepared["task"])
                 + self.noise * _gauss(self.world, instr, prepared["task"], seed))
        return TaskOutcome(status="ok", score=score, dimensions={"quality": score},
                           usage=Usage(prompt_tokens=400, completion_tokens=200, latency_s=0.0, llm_calls=4),
                           output_text=f"{instr}|{prepared['task']}|{seed}", rescored=True)

    def rescore(self, prepared, output_text, *, criteria=None, seed=0, run_seed=None):
        from experiments.runs import TaskOutcome, Usage

        self.calls += 1
        score = self.difficulty[prepared["task"]] + self.judge_noise * _gauss("judge", output_text, seed)
        return TaskOutcome(status="ok", score=score, dimensions={"quality": score},
                           usage=Usage(prompt_tokens=300, completion_tokens=50, llm_calls=1), rescored=True)

    def llm_calls(self) -> int:
        return self.calls

    def run(self, tasks, instructions, seed) -> dict[str, float]:
        """One candidate run over tasks, through the sweep's evaluate_candidate."""
        from experiments.runs import evaluate_candidate

        contexts = {t.id: self.prepare(t.task) for t in tasks}
        return evaluate_candidate(instructions, tasks, self, contexts=contexts, seed=seed).by_task()


def build_exp(results: Path):
    from experiments.config import BenchmarkConfig, compose_config, to_experiment, validate
    from experiments.config._schema import TaskSpec

    exp = to_experiment(compose_config(["+sweep=calibrate", "backend=fake", f"results_dir={results}"]))
    types = ("enumerated", "best_practices", "research")
    exp.benchmark = BenchmarkConfig(name="sim", tasks=[
        TaskSpec(id=f"t{i}", task=f"simulated task {i}", task_type=types[i % 3], split="train" if i < 8 else "holdout")
        for i in range(12)])
    exp.synth.instructions = {tt: f"Write a good {tt} answer." for tt in types}
    exp.mlflow.enabled = False
    exp.results_dir = str(results)
    return validate(exp)


def rate(hits: list[bool]) -> tuple[float, float]:
    p = sum(hits) / len(hits)
    return p, (p * (1 - p) / len(hits)) ** 0.5


def main() -> None:
    import shutil

    tmp = Path(tempfile.mkdtemp(prefix="calsim-"))
    try:
        run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp: Path) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="200 runs and 200 calibrations")
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--calibrations", type=int, default=1000)
    ap.add_argument("--noise", type=float, default=0.5)
    ap.add_argument("--spread", type=float, default=0.6, help="effect spread across tasks for row 3b (effect_cv)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.calibrations = 200, 200
    if args.runs < 200 or args.calibrations < 200:
        ap.error("--runs and --calibrations must be >= 200")

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from experiments.config import load_tasks, split
    from experiments.calibration import run_calibration
    from experiments.calibration._calibrate import paired_check, pick_tasks
    from experiments.stats import mde, sweep_design
    from experiments.stats import wilcoxon_test
    from experiments.stats import compare, noise_floor

    t_all = time.perf_counter()
    os.environ["HARNESS_RESULTS_DIR"] = str(tmp / "results")
    exp = build_exp(tmp / "results")
    tasks = load_tasks(exp.benchmark)
    train = split(tasks, "train")
    base = dict(exp.synth.instructions)
    alpha, power, noise = exp.calibrate.alpha, exp.calibrate.power, args.noise
    print("== calibration in simulation: false positives and detection at the reported MDE ==")
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.machine()) if Path("/proc/cpuinfo").exists() else platform.machine()
    print(f"machine: {os.cpu_count()} cores ({cpu}), Python "
          f"{platform.python_version()}, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"world: run noise sd {noise}, judge noise sd 0.15, harmful instruction -2.0; benchmark 8 train + 4 holdout; "
          f"{args.runs} runs per rate, {args.calibrations} calibrations")

    # 1. one calibration as the CLI runs it
    t0 = time.perf_counter()
    world = World(0, tasks, noise)
    cal = run_calibration(exp, world, out=lambda s: None)
    cal_s = time.perf_counter() - t0
    floor = cal.noise_floor().floor(len(train), 1)
    reported = cal.mde["sweep"]["mde"]
    true_mde = mde(sweep_design(noise, len(train), alpha=alpha), power=power, sims=exp.calibrate.sims)
    print(f"calibration ({cal_s:.1f}s): sigma {cal.sigma:.3f} (true {noise}; 95% CI {cal.sigma_ci[0]:.3f}-"
          f"{cal.sigma_ci[1]:.3f}), judge sd {cal.judge_sigma:.3f} (true 0.15), A/A {cal.aa.status} (p={cal.aa.p:.3f}), "
          f"control {cal.control.status} (p={cal.control.p:.4f})")
    print(f"sweep design: 8 train tasks, floor {floor:.3f}; reported MDE {reported:.3f}; MDE at the true sigma "
          f"{true_mde:.3f}")

    rows = []

    def sweep_rule(world: World, cand_instr, seed: int, floor_: float) -> bool:
        b = world.run(train, base, seed)
        c = world.run(train, cand_instr, seed + 500_000)
        return compare(c, b, floor=floor_, alpha=alpha).claimed

    # 2. A/A
    t0 = time.perf_counter()
    aa = [sweep_rule(World(10_000 + i, tasks, noise), base, i, floor) for i in range(args.runs)]
    cal_tasks = pick_tasks(tasks, exp.calibrate.tasks)
    aa_check = []
    for i in range(args.runs):
        w = World(20_000 + i, tasks, noise)
        r0, r1 = w.run(cal_tasks, base, i), w.run(cal_tasks, base, i + 1)
        diffs = [r1[t.id] - r0[t.id] for t in cal_tasks]
        aa_check.append(paired_check("A/A", diffs, test=exp.calibrate.test, alternative="two-sided", alpha=alpha,
                                     detail="").status == "fail")
    rows.append(("A/A, sweep rule (8 tasks, p<a and > floor)", *rate(aa), f"<= {alpha}", time.perf_counter() - t0))
    rows.append((f"A/A, calibration check ({len(cal_tasks)} tasks, {exp.calibrate.test} 2-sided)", *rate(aa_check),
                 f"<= {alpha}", None))

    # 3. planted effect = the reported MDE (and the MDE at the true sigma)
    t0 = time.perf_counter()
    planted = {tt: f"{text} [effect +{reported:.6f}]" for tt, text in base.items()}
    det = [sweep_rule(World(30_000 + i, tasks, noise), planted, i, floor) for i in range(args.runs)]
    rows.append((f"planted = reported MDE {reported:.3f}", *rate(det), f"~ {power}", time.perf_counter() - t0))
    true_floor = 2 * noise * (2 / len(train)) ** 0.5
    planted_true = {tt: f"{text} [effect +{true_mde:.6f}]" for tt, text in base.items()}
    det_true = [sweep_rule(World(40_000 + i, tasks, noise), planted_true, i, true_floor) for i in range(args.runs)]
    rows.append((f"planted = MDE at true sigma {true_mde:.3f}", *rate(det_true), f"~ {power}", None))

    # 3b. an effect that varies across tasks (effect x (1 + cv u_task)): the MDE for such an effect
    # (power.Design.effect_cv) at the true sigma, as row 3's second line, planted in new worlds; and the same-size
    # MDE planted with that spread: what reporting only the same-size MDE would promise
    t0 = time.perf_counter()
    cv = args.spread
    spread_mde = mde(dataclasses.replace(sweep_design(noise, len(train), alpha=alpha), effect_cv=cv),
                     power=power, sims=exp.calibrate.sims)

    def spread_instr(effect: float) -> dict[str, str]:
        return {tt: f"{text} [effect +{effect:.6f}] [spread {cv}]" for tt, text in base.items()}

    det_sp = [sweep_rule(World(45_000 + i, tasks, noise), spread_instr(spread_mde), i, true_floor)
              for i in range(args.runs)]
    rows.append((f"planted spread {cv}x = spread MDE at true sigma {spread_mde:.3f}", *rate(det_sp), f"~ {power}",
                 time.perf_counter() - t0))
    uniform_at = [sweep_rule(World(46_000 + i, tasks, noise), spread_instr(true_mde), i, true_floor)
                  for i in range(args.runs)]
    rows.append((f"planted spread {cv}x at the same-size MDE {true_mde:.3f}", *rate(uniform_at), f"< {power}", None))

    # 4. many calibrations, one planted test each at its own reported MDE: the shipped 4 tasks (4 df), and all 12
    for n_cal in (exp.calibrate.tasks, len(tasks)):
        t0 = time.perf_counter()
        hits, mdes = [], []
        some = pick_tasks(tasks, n_cal)
        for i in range(args.calibrations):
            w = World(50_000 + 1000 * n_cal + i, tasks, noise)
            runs = [w.run(some, base, s) for s in (0, 1)]  # the calibration's generator runs (seeds 0, 1)
            sigma = noise_floor(runs).sigma
            d = sweep_design(sigma, len(train), alpha=alpha)  # the floor the sweep applies (from the estimate)
            # the MDE the calibration reports: predictive over sigma's n_cal * (2 - 1) degrees of freedom
            m = mde(dataclasses.replace(d, sigma_df=n_cal), power=power, sims=exp.calibrate.sims)
            mdes.append(m)
            instr = {tt: f"{text} [effect +{m:.6f}]" for tt, text in base.items()}
            hits.append(sweep_rule(w, instr, 1000 + i, d.floor))
        rows.append((f"planted = each calibration's MDE, {n_cal} tasks x 2 runs (median {statistics.median(mdes):.3f})",
                     *rate(hits), f"~ {power}", time.perf_counter() - t0))

    # 5. the A/B design
    t0 = time.perf_counter()
    reps = exp.ab.replications
    ab_mde = cal.mde["ab"]["mde"]

    def ab_test(w: World, effect: float, i: int) -> tuple[bool, bool]:
        """(significant either way, 'supported' for B better) for one A/B on all 12 tasks."""
        instr = {tt: f"{text} [effect +{effect:.6f}]" for tt, text in base.items()} if effect else base
        a = [w.run(tasks, base, i * 10 + j) for j in range(reps)]
        b = [w.run(tasks, instr, i * 10 + j + 5) for j in range(reps)]
        diffs = [statistics.fmean(r[t.id] for r in b) - statistics.fmean(r[t.id] for r in a) for t in tasks]
        test = wilcoxon_test(diffs)
        sig = test.pvalue < alpha
        # 'supported' (experiments.stats): significant, B higher by the signed ranks, mean reaching ab.min_effect
        return sig, sig and test.w_plus > test.w_minus and statistics.fmean(diffs) >= exp.ab.min_effect

    ab_fp = [ab_test(World(60_000 + i, tasks, noise), 0.0, i)[0] for i in range(args.runs)]
    ab_det = [ab_test(World(70_000 + i, tasks, noise), ab_mde, i)[1] for i in range(args.runs)]
    rows.append((f"A/B 12x{reps}, no effect (two-sided wilcoxon)", *rate(ab_fp), f"<= {alpha}",
                 time.perf_counter() - t0))
    rows.append((f"A/B 12x{reps}, planted = reported MDE {ab_mde:.3f}", *rate(ab_det), f"~ {power}", None))

    total = time.perf_counter() - t_all
    print(f"{'comparison':<68} {'rate':>6} {'+-se':>6} {'claim':>8} {'wall s':>7}")
    for name, r, se, claim, secs in rows:
        print(f"{name:<68} {r:>6.3f} {se:>6.3f} {claim:>8} {('%.1f' % secs) if secs is not None else '':>7}")
    print(f"wall time: {total:.1f}s in all")
    if args.json:
        print(json.dumps({"sigma": cal.sigma, "reported_mde": reported, "true_mde": true_mde, "runs": args.runs,
                          "calibrations": args.calibrations, "wall_s": round(total, 1),
                          "rows": [{"name": n, "rate": r, "se": se} for n, r, se, _c, _s in rows]}))


if __name__ == "__main__":
    main()
