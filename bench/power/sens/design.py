"""A sweep's design as bench/power/sensitivity.py simulates it: search on the train split, the final race, the train
filter and the holdout confirmation, vectorised over studies.

"today" follows 3306971's code path (experiments/sweep/_sweep.py and _promotion.py, conf/sweep/synth_mutation.yaml):
the baseline trial (seed 0) and one repeat (seed 1) on the 16 train tasks give the reference (their mean) and
sigma (experiments.stats.noise_floor); each proposal's parent is the best train mean so far; the 3-task gate
against the parent's stored scores passes unless mean + 1.0 sigma sqrt(2/3) < 0 (experiments.search._optimizer.gate); a
passed proposal runs every train task with seed 0 (the baseline trial's seed: common random numbers where seeds
couple); the final race re-runs the top 2 with seed 1 and ranks on the 2-run means (experiments.promotion.race); the
top candidate must pass the train filter (experiments.stats.compare at alpha 0.05, floor 2 sigma sqrt(1.5 / 16))
and the holdout confirmation over the 8 holdout tasks (one run each, seed 0) at level 0.025 (the first look): the
sweep's test now (Design.confirm "t-skew": experiments.stats.skew_test_p, the one-sided paired t's p or its
skew-calibrated twin's, whichever is larger), "t" the plain paired t of 3306971 and ac27838. The
Wilcoxon pruner is left out (on 16 tasks the gate does its work: docs/BENCHMARKS.md). bench/power/sensitivity.py
--check runs the same studies through the real gate, race, compare and decide and counts disagreements.

The levers change one piece each (Design fields); "new" combines those that pay."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from experiments.stats import look_block

from . import rules
from .model import Draw, World, draw, pairwise

ALPHA = 0.05  # sweep.alpha: the train filter's level and the study's whole error budget
LEVEL = ALPHA / 2  # the first holdout look's level (experiments.stats.level(alpha, 1))
GATE_TASKS, GATE_Z, RACE_TOP = 3, 1.0, 2


@dataclass(frozen=True)
class Design:
    name: str
    n_train: int = 16
    n_hold: int = 8
    baseline_repeat: bool = True  # the noise floor's second baseline run on train (today)
    search: str = "gate"  # gate (today) | race (blocks of train tasks, drop what the leader dominates)
    race_block: int = 4
    race_z: float = 1.0  # dropped when mean(child - leader) + z sd / sqrt(m) < 0 over the m tasks run
    final_race_top: int = RACE_TOP
    train_filter: str = "wilcoxon"  # wilcoxon (compare) | positive (train mean above the baseline's) | none
    hold_runs: int = 1  # runs of each arm per holdout task
    hold_top_k: int = 1
    seq_block: int = 0  # 0: one look at the end; else a look every seq_block holdout tasks (O'Brien-Fleming)
    futility: bool = False
    efficacy: bool = True  # False: the sequential looks only stop for futility; the last look alone confirms
    compare: str = "pointwise"  # pointwise | pairwise | cuped
    g: float = 1.0  # pairwise error relative to the pointwise judge's (model.pairwise)
    rho: float | None = None  # common random numbers on run noise (None: the world's)
    sampled: bool = False  # greedy worlds run at sampled decoding (every run a new answer)
    max_task_loss: float | None = None  # hold back a candidate losing more than this on any holdout task
    level: float = LEVEL
    # a top candidate the train filter cuts runs nothing on the holdout, the baseline its first block only (its
    # runs measure the noise of the summary's design power line); False: 3306971's path, every top candidate ran
    skip_cut: bool = False
    # pairwise: "t" (the paired t on preferences) | "signflip" (the sweep's sweep.holdout_compare=pairwise: the exact
    # one-sided sign-flip over the holdout tasks, the futility stop on the score differences)
    pair_test: str = "t"
    # the race's and the futility stop's blocks: fixed (ac27838: every race_block / seq_block tasks) or scaled (a
    # quarter of the split when larger: experiments.stats.look_block, as the sweep does now)
    scaled_looks: bool = False
    futility_rule: str = "mean"  # mean (ac27838: mean so far <= 0) | power (conditional power: futility_stop)
    # the holdout confirmation over tasks (pointwise): "t-skew" the sweep's (TaskDiffs: experiments.stats.skew_test,
    # p = max(paired t p, skew-calibrated p)) | "t" the plain one-sided paired t (3306971's and ac27838's rule)
    confirm: str = "t-skew"

    def world(self, w: World) -> World:
        return w.sampled() if self.sampled else w


@dataclass
class Outcome:
    promoted: np.ndarray  # variant index per study, -1: the baseline kept
    calls: np.ndarray  # LLM calls per study
    runs: np.ndarray  # task runs per study
    tested: np.ndarray  # a candidate reached the holdout test (train filter passed)


def simulate(world: World, d: Design, m: np.ndarray, seed: int, trace: dict | None = None) -> Outcome:
    """Studies with planted per-task effects m (studies, variants, n_train + n_hold tasks; variant 0 the
    baseline, proposals 1.. in the order the search makes them)."""
    world = d.world(world)
    rng = np.random.default_rng(seed)
    n_runs = max(2, d.hold_runs + (1 if d.compare == "cuped" else 0))
    sc = draw(world, m, n_runs, rng, rho=d.rho)
    W, V = m.shape[:2]
    tr = np.arange(d.n_train)
    ho = np.arange(d.n_train, d.n_train + d.n_hold)
    y = sc.y
    if trace is not None:
        trace["y"], trace["gate"], trace["race"] = y, [], []
    wdx = np.arange(W)
    runs = np.zeros(W)
    base0 = y[:, 0, :d.n_train, 0]
    runs += d.n_train
    if d.baseline_repeat:
        base1 = y[:, 0, :d.n_train, 1]
        runs += d.n_train
        ref = (base0 + base1) / 2
        sigma = np.sqrt(((base0 - base1) ** 2 / 2).mean(axis=1))
        b_runs = 2
    else:
        ref, sigma, b_runs = base0, None, 1
    values = np.full((W, V), -np.inf)
    values[:, 0] = base0.mean(axis=1)
    complete = np.zeros((W, V), dtype=bool)
    complete[:, 0] = True
    order = np.argsort(rng.random((W, d.n_train)), axis=1)  # the race's task order per study
    if trace is not None:
        trace["order"] = order
    for p in range(1, V):
        child = y[:, p, :d.n_train, 0]
        if d.search == "gate":
            parent = np.argmax(np.where(complete, values, -np.inf), axis=1)
            gt = np.argsort(rng.random((W, d.n_train)), axis=1)[:, :GATE_TASKS]
            if trace is not None:
                trace["gate"].append(gt)
            diff = (np.take_along_axis(child, gt, 1) - np.take_along_axis(y[wdx, parent][:, :d.n_train, 0], gt, 1)).mean(1)
            if sigma is not None:
                ok = diff + GATE_Z * sigma * math.sqrt(2.0 / GATE_TASKS) >= 0
            else:
                ok = diff > 0
            runs += GATE_TASKS + ok * (d.n_train - GATE_TASKS)
        else:
            leader = np.argmax(np.where(complete, values, -np.inf), axis=1)
            lead = y[wdx, leader][:, :d.n_train, 0]
            dd = np.take_along_axis(child - lead, order, 1)
            ok = np.ones(W, dtype=bool)
            spent = np.zeros(W)
            block = look_block(d.n_train, d.race_block) if d.scaled_looks else d.race_block
            for m_done in rules.looks_at(d.n_train, block):
                spent = np.where(ok, m_done, spent)
                if m_done == d.n_train:
                    break
                part = dd[:, :m_done]
                se = part.std(axis=1, ddof=1) / math.sqrt(m_done)
                ok &= ~(part.mean(axis=1) + d.race_z * se < 0)
            runs += spent
            if trace is not None:
                trace["race"].append((ok.copy(), spent.copy()))
        complete[:, p] = ok
        values[:, p] = np.where(ok, child.mean(axis=1), -np.inf)
    # the final race: the top final_race_top complete proposals once more (seed 1), ranked on their 2-run means
    cand_vals = np.where(complete[:, 1:], values[:, 1:], -np.inf)
    n_complete = complete[:, 1:].sum(axis=1)
    rank = np.argsort(-cand_vals, axis=1, kind="stable")
    top = rank[:, 0] + 1
    train_scores = y[wdx, top][:, :d.n_train, 0]
    if d.final_race_top >= 1:
        raced = n_complete >= 2
        k = min(d.final_race_top, V - 1)
        contenders = rank[:, :k] + 1
        two = (y[wdx[:, None], contenders][:, :, :d.n_train, 0] + y[wdx[:, None], contenders][:, :, :d.n_train, 1]) / 2
        best = np.argmax(two.mean(axis=2), axis=1)
        top = np.where(raced, contenders[wdx, best], top)
        train_scores = np.where(raced[:, None], two[wdx, best], y[wdx, top][:, :d.n_train, 0])
        runs += raced * k * d.n_train
    any_cand = n_complete >= 1
    dtr = train_scores - ref
    if d.train_filter == "wilcoxon":
        floor = 2.0 * (sigma if sigma is not None else 0.0) * math.sqrt((1 + 1 / b_runs) / d.n_train)
        passed = rules.train_filter(dtr, floor, ALPHA)
    elif d.train_filter == "positive":
        passed = dtr.mean(axis=1) > 0
    else:
        passed = np.ones(W, dtype=bool)
    passed &= any_cand
    # holdout: top hold_top_k candidates (the second-ranked by train mean when k = 2)
    tops = [top]
    if d.hold_top_k >= 2 and V > 2:
        alt = np.where(rank[:, 0] + 1 == top, rank[:, 1] + 1, rank[:, 0] + 1)
        tops.append(np.where(n_complete >= 2, alt, -1))
    k = d.hold_runs
    judge_calls = np.zeros(W)
    wins, means = [], []
    used = np.full(W, d.n_hold)
    for c in tops:
        cc = np.maximum(c, 0)
        dh = y[wdx, cc][:, ho, :k].mean(-1) - y[:, 0][:, ho, :k].mean(-1)
        means.append(np.where(c > 0, dh.mean(1), -np.inf))
        if d.compare == "pairwise":
            stat = pairwise(sc, cc, ho, k, g=d.g)
        else:
            stat = dh
        if d.compare == "cuped":
            p = rules.cuped_p(stat, y[:, 0][:, ho, k])
            win = p
        elif d.compare == "pairwise" and d.pair_test == "signflip":
            _, u = rules.sequential(dh, block=d.seq_block or d.n_hold, level=d.level, futility=d.futility,
                                    efficacy=False, rule=d.futility_rule, scaled=d.scaled_looks, confirm="t")
            p = rules.signflip_p(stat, 1.0 / (2 * k), alternative="greater")
            win, used = np.where(u < d.n_hold, 1.0, p), np.minimum(used, u) if len(tops) == 1 else used
        elif d.seq_block:
            ok, u = rules.sequential(stat, block=d.seq_block, level=d.level / len(tops), futility=d.futility,
                                     efficacy=d.efficacy, rule=d.futility_rule, scaled=d.scaled_looks,
                                     confirm=d.confirm if d.compare == "pointwise" else "t")
            win, used = np.where(ok, 0.0, 1.0), np.minimum(used, u) if len(tops) == 1 else used
        elif d.compare == "pointwise":
            win = rules.confirm_p(stat, d.confirm)
        else:  # pairwise preferences, the paired t (a lever, not the sweep's sign-flip)
            win = rules.t_p(stat)
        if d.max_task_loss is not None:
            win = np.where(dh.min(1) < -d.max_task_loss, 1.0, win)
        wins.append(np.where(c > 0, win, 1.0))
    # Holm over the tested family at the look's level (one candidate: p < level)
    ps = np.stack(wins, 1)
    srt = np.sort(ps, 1)
    holm_ok = np.ones(W, dtype=bool)
    conf = np.zeros_like(ps, dtype=bool)
    for j in range(ps.shape[1]):
        lvl = d.level / (ps.shape[1] - j) if not d.seq_block else d.level / ps.shape[1]
        holm_ok &= srt[:, j] < lvl
        conf |= holm_ok[:, None] & (ps == srt[:, j:j + 1])
    conf &= passed[:, None]
    mean_arr = np.where(conf, np.stack(means, 1), -np.inf)
    pick = np.argmax(mean_arr, 1)
    cand_arr = np.stack(tops, 1)
    promoted = np.where(conf.any(1), cand_arr[wdx, pick], -1)
    n_tested = sum((c > 0).astype(float) for c in tops) * (passed if d.skip_cut else any_cand)
    first = (look_block(d.n_hold, d.seq_block) if d.scaled_looks else d.seq_block) or d.n_hold
    base_used = np.where(passed, used, min(first, d.n_hold)) if d.skip_cut else used
    runs += any_cand * (base_used * k + used * k * n_tested) + (d.compare == "cuped") * any_cand * base_used
    if trace is not None:  # holdout tasks run per study (a futility stop: fewer), the check's replay compares them
        trace["used"] = used.copy()
    if d.compare == "pairwise":  # both orders of every compared pair
        judge_calls = any_cand * used * k * n_tested * 2 * world.calls_judge
    calls = runs * world.calls_run + judge_calls
    return Outcome(promoted, calls, runs, passed)
