"""Can a sweep see a third of a point? 3306971's design, each lever and the default, in simulation, per world.

    nice -n 15 python bench/power/sensitivity.py [--quick] [--worlds test embedded ...] [--check] [--json out.json]

Model and worlds: bench/power/sens/model.py (y = b + m + u + e + j: difficulty, planted effect, task x variant
interaction, run noise with common random numbers rho, per-answer judge noise frozen under greedy decoding).
Designs: bench/power/sens/design.py ("today" = 3306971's code path; --check runs it through the real experiments.sweep
gate, race, compare and decide and counts disagreements). The holdout confirmation over tasks is the sweep's
(experiments.stats.skew_test_p: the larger p of the one-sided paired t and its skew-calibrated twin) in every
design but those labelled ac27838, which keep the plain paired t (Design.confirm). For every world and design:

- mde: the smallest constant mean effect one proposal is promoted with at probability 0.8 (bisection, common random
  numbers across effects); calls: LLM calls of that study; mde@cost: mde x sqrt(calls / today's calls), the
  figure at today's budget if extra calls bought variance as replicates do (levers that spend more pay for it);
  dp: experiments.stats.decision_power's figure for today's design (what 3306971 prints), the target's reference.
- pick +0.3 / +0.5: 20 trials (the baseline and 19 proposals, 3 of them truly better by +0.3 / +0.5 on average
  over tasks, the others 0 to -1), the share of studies that promote a truly better one; worse: promote one that
  is not better; calls: mean LLM calls of those studies.
- false promotions with 19 proposals that are no better over tasks (any promotion is false; family-wise over the
  sequential looks of the conclusion): null (every task 0), spread (N(0, 2) per task), left skew (1 task in 8
  loses 7, the others gain 1), lognormal (-(LN(0, 1) - e^0.5)).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.power.sens.design import ALPHA, LEVEL, Design, simulate  # noqa: E402
from bench.power.sens.model import WORLDS, World, effects  # noqa: E402

POWER = 0.8
TRIALS = 20
GOOD = 3  # truly better proposals among the 19

TODAY = Design("today")
LEVERS = [
    Design("a pairwise g=1", compare="pairwise", g=1.0),
    Design("a pairwise g=0.5", compare="pairwise", g=0.5),
    Design("b CRN rho=0.3", rho=0.3),
    Design("b CRN rho=0.6", rho=0.6),
    Design("c k=2 holdout runs", hold_runs=2, sampled=True),
    Design("c 12+12 split", n_train=12, n_hold=12),
    Design("d OBF seq 4/8", seq_block=4, futility=True),
    Design("d futility-only 4/8", seq_block=4, futility=True, efficacy=False),
    Design("d OBF seq 8+16", n_train=8, n_hold=16, seq_block=4, futility=True),
    Design("e racing, no filter", search="race", baseline_repeat=False, train_filter="positive"),
    Design("f CUPED", compare="cuped"),
]
NEW = Design("new", n_train=12, n_hold=12, search="race", baseline_repeat=False, train_filter="positive",
             final_race_top=0, hold_runs=3, sampled=True, seq_block=4, futility=True, efficacy=False, skip_cut=True,
             scaled_looks=True, futility_rule="power")
# the shipped design's rules at ac27838: race and futility blocks of 4 at any size, futility on "mean so far <= 0",
# the plain paired t as the confirmation (every other design confirms by the sweep's test now: the paired t's p or
# its skew-calibrated twin's, whichever is larger; Design.confirm)
NEW_AC = dataclasses.replace(NEW, name="ac27838 rules", scaled_looks=False, futility_rule="mean", confirm="t")
# sweep.holdout_compare=pairwise on the shipped design: the judge's error per order g x the pointwise judge's on a
# difference (g 0.34 measured on the embedded model, 0.17 on the 1.5B: docs/CALIBRATION.md)
NEW_PAIRWISE = [dataclasses.replace(NEW, name=f"new pairwise g={g}", compare="pairwise", g=g, pair_test="signflip")
                for g in (0.34, 0.17)]


def single(world: World, d: Design, effect: float, sims: int, seed: int):
    """One proposal with a constant planted effect (the study decision_power describes)."""
    m = np.zeros((sims, 2, d.n_train + d.n_hold))
    m[:, 1] = effect
    return simulate(world, d, m, seed)


def power(world: World, d: Design, effect: float, sims: int, seed: int = 1) -> float:
    return float((single(world, d, effect, sims, seed).promoted == 1).mean())


def mde(world: World, d: Design, sims: int) -> float:
    """Smallest effect promoted with probability POWER (to 1%); inf beyond 64 points."""
    lo, hi = 0.0, max(world.sigma_run, world.tau_measured, 0.1)
    while power(world, d, hi, sims) < POWER:
        lo, hi = hi, hi * 2
        if hi > 64:
            return math.inf
    while hi - lo > 0.01 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if power(world, d, mid, sims) >= POWER else (mid, hi)
    return hi


def search(world: World, d: Design, kind: str, sims: int, seed: int, gain: float = 0.0, trials: int = TRIALS) -> dict:
    """`trials` trials: the baseline and the proposals; kind "effect" plants GOOD proposals at +gain."""
    n = d.n_train + d.n_hold
    rng = np.random.default_rng([seed, 7])
    TRIALS = trials
    shape = (sims, TRIALS, n)
    if kind == "effect":
        mus = -rng.uniform(0.0, 1.0, (sims, TRIALS))
        good = np.argsort(rng.random((sims, TRIALS - 1)), axis=1)[:, :GOOD] + 1
        np.put_along_axis(mus, good, gain, axis=1)
        mus[:, 0] = 0.0
        m = np.broadcast_to(mus[:, :, None], shape).copy()
    else:
        m = effects(kind, rng, shape)
        mus = np.zeros((sims, TRIALS))
    out = simulate(world, d, m, seed)
    prom = out.promoted
    better = np.where(prom > 0, mus[np.arange(sims), np.maximum(prom, 0)] > 0, False)
    return {"promoted": float((prom > 0).mean()), "correct": float(better.mean()),
            "worse": float(((prom > 0) & ~better).mean()), "calls": float(out.calls.mean())}


def decision_power_today(world: World) -> float:
    """What 3306971's summary prints for this world (experiments.stats.decision_power, the shipped design)."""
    from experiments.stats import decision_power

    return decision_power(world.sigma_run, world.tau_measured, n_train=16, n_holdout=8, alpha=ALPHA, level=LEVEL,
                          baseline_runs=2).mde


def break_even_g(world: World, base: Design, sims: int) -> float | None:
    """The pairwise error ratio g at which pairwise judging (both orders) matches pointwise at equal calls: the
    pointwise MDE, shrunk by sqrt(pointwise calls / pairwise calls), is promoted with probability POWER."""
    e_point = mde(world, base, sims)
    if not math.isfinite(e_point):
        return None
    c_point = single(world, base, e_point, sims, 1).calls.mean()
    pw = dataclasses.replace(base, compare="pairwise")
    c_pair = single(world, dataclasses.replace(pw, g=1.0), e_point, sims, 1).calls.mean()
    target = e_point * math.sqrt(c_point / c_pair)
    lo, hi = 0.01, 4.0
    if power(world, dataclasses.replace(pw, g=lo), target, sims) < POWER:
        return 0.0
    if power(world, dataclasses.replace(pw, g=hi), target, sims) >= POWER:
        return hi
    for _ in range(8):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if power(world, dataclasses.replace(pw, g=mid), target, sims) >= POWER else (lo, mid)
    return math.sqrt(lo * hi)


def check_today(world: World, sims: int, seed: int = 5) -> tuple[int, int]:
    """today's vectorised path against the real experiments.sweep functions on the same scores: (agree, studies)."""
    from experiments.stats import baseline_reference, noise_floor
    from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
    from experiments.promotion._decide import Candidate, decide, race, ranked
    from experiments.search._optimizer import gate

    d = TODAY
    rng = np.random.default_rng([seed, 7])
    n = d.n_train + d.n_hold
    mus = np.zeros((sims, 6))
    mus[:, 1:] = rng.choice([0.0, 0.5, 1.0, -0.5], size=(sims, 5))
    m = np.broadcast_to(mus[:, :, None], (sims, 6, n)).copy()
    trace: dict = {}
    out = simulate(world, d, m, seed, trace)
    y = trace["y"]
    tr = [f"t{i}" for i in range(d.n_train)]
    ho = [f"h{i}" for i in range(d.n_hold)]
    agree = 0
    for w in range(sims):
        def scores(v: int, r: int, split: list[str], off: int) -> dict[str, float]:
            return {t: float(y[w, v, off + i, r]) for i, t in enumerate(split)}

        base_runs = [scores(0, 0, tr, 0), scores(0, 1, tr, 0)]
        nf, ref = noise_floor(base_runs), baseline_reference(base_runs)
        done = {0: base_runs[0]}
        for p in range(1, 6):
            parent = max(done, key=lambda k: (sum(done[k].values()) / len(done[k]), -k))
            g = [tr[i] for i in trace["gate"][p - 1][w]]
            child = scores(p, 0, tr, 0)
            if gate({t: child[t] for t in g}, {t: done[parent][t] for t in g}, sigma=nf.sigma, z=1.0).passed:
                done[p] = child
        cands = ranked([Candidate(p, f"c{p}", "op", sum(s.values()) / len(s), s) for p, s in done.items() if p])
        if len(cands) > 1:
            cands = race(cands, {c.hash: [scores(c.number, 1, tr, 0)] for c in cands[:2]})
        want = -1
        if cands:
            top = cands[:1]
            v = top[0].number
            verdict = decide(top, ref, HoldoutScores.of_runs([scores(0, 0, ho, d.n_train)]),
                             {top[0].hash: HoldoutScores.of_runs([scores(v, 0, ho, d.n_train)])},
                             train_floor=nf.floor(len(ref), 2), alpha=ALPHA,
                             test=HoldoutTest.of(nf, alpha=LEVEL, rule="tasks"))
            want = verdict.winner.trial if verdict.winner is not None else -1
        agree += int(want == out.promoted[w])
    return agree, sims


RACING = next(d for d in LEVERS if d.search == "race")


def check_race(world: World, sims: int, d: Design = RACING, seed: int = 5, null: bool = False) -> dict:
    """A racing design's vectorised path against the real experiments.search._optimizer.race_step on the same scores: every
    proposal's race (kept or dropped, and after how many train tasks) replayed through race_step at the sweep's looks
    (race_looks) in the study's task order against the leader (the best complete train mean, the earliest of
    equals, as SearchState.parent); then the final race through the real `race` and the holdout through the real
    `decide` (sweep.train_filter = the design's, the design's holdout runs per arm as HoldoutScores.of_runs, the
    futility stop sweep.holdout_futility_block = the design's seq_block in the simulation's task order, the paired t
    at the look's level). Returns the studies whose every race decision agrees, those whose promotion agrees, those
    whose holdout stop (after how many holdout tasks) agrees, and the looks compared. `null`: every proposal no
    better than the baseline (the futility stop fires on about half the tested candidates), else planted effects
    0, +0.5, +1 and -0.5."""
    from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
    from experiments.promotion._decide import Candidate, decide, race, ranked
    from experiments.search._optimizer import race_looks, race_step

    rng = np.random.default_rng([seed, 7])
    n = d.n_train + d.n_hold
    V = 6
    mus = np.zeros((sims, V))
    mus[:, 1:] = 0.0 if null else rng.choice([0.0, 0.5, 1.0, -0.5], size=(sims, V - 1))
    m = np.broadcast_to(mus[:, :, None], (sims, V, n)).copy()
    trace: dict = {}
    out = simulate(world, d, m, seed, trace)
    y, order = trace["y"], trace["order"]
    tr = [f"t{i}" for i in range(d.n_train)]
    ho = [f"h{i}" for i in range(d.n_hold)]
    looks = race_looks(d.n_train, d.race_block)
    agree_race = agree_promoted = agree_stop = stopped = promoted = n_looks = dropped = 0
    block = d.seq_block if d.futility and not d.efficacy else 0  # the futility-only stop experiments.sweep has
    for w in range(sims):
        def scores(v: int, r: int, split: list[str], off: int) -> dict[str, float]:
            return {t: float(y[w, v, off + i, r]) for i, t in enumerate(split)}

        ids = [tr[i] for i in order[w]]  # the study's task order (the sweep: one shuffle per study)
        done = {0: scores(0, 0, tr, 0)}
        same = True
        for p in range(1, V):
            leader = max(done, key=lambda k: (sum(done[k].values()) / len(done[k]), -k))
            child = scores(p, 0, tr, 0)
            ok, spent = True, d.n_train
            for k in looks:
                n_looks += 1
                if not race_step({t: child[t] for t in ids[:k]}, done[leader], d.race_z).passed:
                    ok, spent = False, k
                    break
            if ok:
                done[p] = child
            dropped += not ok
            sim_ok, sim_spent = trace["race"][p - 1]
            same &= bool(sim_ok[w]) == ok and int(sim_spent[w]) == spent
        agree_race += same
        cands = ranked([Candidate(p, f"c{p}", "op", sum(s.values()) / len(s), s) for p, s in done.items() if p])
        if len(cands) > 1 and d.final_race_top:
            cands = race(cands, {c.hash: [scores(c.number, 1, tr, 0)] for c in cands[:d.final_race_top]})
        want, ran = -1, d.n_hold
        if cands:
            top = cands[0]
            arm = {v: HoldoutScores.of_runs([scores(v, r, ho, d.n_train) for r in range(d.hold_runs)])
                   for v in (0, top.number)}
            verdict = decide([top], done[0], arm[0], {top.hash: arm[top.number]}, train_floor=0.0, alpha=ALPHA,
                             test=HoldoutTest(0.0, None, d.level), train_filter=d.train_filter, futility_block=block,
                             order=ho)
            want = verdict.winner.trial if verdict.winner is not None else -1
            ran = verdict.rows[0].stopped_after or d.n_hold
            stopped += ran < d.n_hold
            agree_stop += int(ran == trace["used"][w])
        else:
            agree_stop += 1
        agree_promoted += int(want == out.promoted[w])
        promoted += want > 0
    if d.hold_top_k != 1 or (d.seq_block and d.efficacy):  # a holdout the real code does not run
        agree_promoted = agree_stop = None
    return {"design": d.name, "studies": sims, "race_agree": agree_race, "promoted_agree": agree_promoted,
            "stop_agree": agree_stop, "stopped": stopped, "looks": n_looks, "dropped": dropped,
            "proposals": sims * (V - 1), "null": null, "promoted": promoted}


def run_world(world: World, designs: list[Design], args) -> list[dict]:
    rows = []
    base_calls = None
    for d in designs:
        t0 = time.perf_counter()
        e = mde(world, d, args.sims)
        calls = float(single(world, d, e if math.isfinite(e) else 1.0, args.sims, 1).calls.mean())
        base_calls = base_calls or calls
        row = {"world": world.name, "design": d.name, "mde": e, "calls": calls,
               "mde_at_cost": e * math.sqrt(calls / base_calls) if math.isfinite(e) else math.inf,
               "level": float((single(world, dataclasses.replace(d, train_filter="none"), 0.0, args.search_sims,
                                      3).promoted == 1).mean()),
               "calls_default": search(world, d, "null", args.search_sims, 17, trials=3)["calls"]}
        for g in (0.3, 0.5):
            r = search(world, d, "effect", args.search_sims, 11, g)
            row[f"pick{g}"], row[f"worse{g}"], row[f"calls{g}"] = r["correct"], r["worse"], r["calls"]
        for kind in ("null", "spread", "leftskew", "lognormal"):
            row[f"fp_{kind}"] = search(world, d, kind, args.search_sims, 13)["promoted"]
        row["s"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(fmt(row), flush=True)
    return rows


HEAD = (f"{'world':<12} {'design':<20} {'mde':>6} {'calls':>6} {'mde@cost':>8} {'calls3':>6} {'level':>5} "
        f"{'pick.3':>6} {'pick.5':>6} "
        f"{'worse.3':>7} {'calls20':>7} {'fp null':>7} {'spread':>6} {'lskew':>6} {'lognorm':>7} {'s':>5}")


def fmt(r: dict) -> str:
    f = lambda x: f"{x:6.2f}" if math.isfinite(x) else "   inf"  # noqa: E731
    return (f"{r['world']:<12} {r['design']:<20} {f(r['mde'])} {r['calls']:6.0f} {f(r['mde_at_cost']):>8} "
            f"{r['calls_default']:6.0f} {r['level']:5.3f} "
            f"{r['pick0.3']:6.3f} {r['pick0.5']:6.3f} {r['worse0.3']:7.3f} {r['calls0.3']:7.0f} {r['fp_null']:7.3f} "
            f"{r['fp_spread']:6.3f} {r['fp_leftskew']:6.3f} {r['fp_lognormal']:7.3f} {r['s']:5.1f}")


# -- a design that scales: worlds with a task spread of 1.0-1.4 and the design sized for +0.3 ---------------------

SECONDS_PER_CALL = 3082 / 490  # the README main command on the embedded default: 51 min 22 s, 490 uncached calls
SCALE_WORLDS = {f"tau {t:g}": World(f"tau {t:g}", sigma_run=0.6, tau=t, judge_share=0.5, sd_task=1.0, calls_run=7.4,
                                    note="sampled; a task x variant spread of every proposal, the baseline's 0")
                for t in (1.0, 1.2, 1.4)}


def chunked(world: World, d: Design, kind: str, sims: int, seed: int, gain: float = 0.0, chunk: int = 250) -> dict:
    """search() over `sims` studies in chunks of `chunk` (memory stays flat at 300 tasks x 20 trials x 3 runs)."""
    parts = [search(world, d, kind, min(chunk, sims - i), seed * 1000 + i // chunk, gain)
             for i in range(0, sims, chunk)]
    weights = [min(chunk, sims - i) for i in range(0, sims, chunk)]
    return {k: float(np.average([p[k] for p in parts], weights=weights)) for k in parts[0]}


def sized_for(world: World, effect: float, power: float = POWER, sims: int = 1000) -> tuple[int, int] | None:
    """The (train, holdout) tasks the sizing rule chooses for `effect` at `power` (experiments.stats.decision_power
    of the shipped design: 12 + 12 grown in ratio, 3 + 3 holdout runs, the positive filter, racing and futility)."""
    from experiments.stats import decision_power

    return decision_power(world.sigma_run, world.tau, **shipped_power_kw(NEW), target_effect=effect, power=power,
                          sims=sims).needed


def estimated_line(world: World, draws: int, *, sigma_df: int = 8, tau_df: int = 11, seed: int = 21) -> dict:
    """The design-power line read off estimates, checked against the simulated rule (shipped 12 + 12): per draw,
    sigma from sigma_df df (the baseline's holdout runs) and tau from a candidate's train differences (tau_df df,
    run noise 2 sigma^2 taken out, floored at 0, as experiments.stats.spread_from_trials does); the detectable
    effect decision_power prints with the estimates plugged in and with their df (the predictive power), and the
    rate at which the simulated rule (true sigma, tau) promotes one proposal of that effect."""
    from experiments.stats import decision_power

    rng = np.random.default_rng(seed)
    out = {"plug-in": [], "predictive": [], "tau0": 0}
    for i in range(draws):
        s_hat = world.sigma_run * math.sqrt(rng.chisquare(sigma_df) / sigma_df)
        s2 = (world.tau ** 2 + 2 * world.sigma_run ** 2) * rng.chisquare(tau_df) / tau_df
        t_hat = math.sqrt(max(s2 - 2 * s_hat ** 2, 0.0))
        out["tau0"] += t_hat == 0.0
        for key, df in (("plug-in", {}), ("predictive", {"sigma_df": sigma_df, "tau_df": tau_df})):
            e = decision_power(s_hat, t_hat, **shipped_power_kw(NEW), sims=1000, **df).mde
            out[key].append(power(world, NEW, e, 1000, seed=100 + i) if math.isfinite(e) else 1.0)
    return {"world": world.name, "draws": draws, "tau_floored": out["tau0"] / draws,
            **{f"{k}_rate": float(np.mean(v)) for k, v in out.items() if k != "tau0"},
            **{f"{k}_below_0.5": float(np.mean(np.asarray(v) < 0.5)) for k, v in out.items() if k != "tau0"}}


def shipped_power_kw(d: Design) -> dict:
    return dict(n_train=d.n_train, n_holdout=d.n_hold, alpha=ALPHA, level=LEVEL, baseline_runs=1,
                holdout_runs=(d.hold_runs, d.hold_runs), train_filter=d.train_filter, futility_block=d.seq_block,
                race_block=d.race_block, race_z=d.race_z)


def scale_rows(names: list[str], pick_sims: int, level_sims: int, effect: float = 0.3) -> list[dict]:
    """Per world: the shipped design at 12 + 12, the same design at the size sized_for(effect) chooses, the rules
    of ac27838 at that size, and 24 + 24: the correct pick at 20 trials (+0.3, +0.5), false promotions (null and a
    zero-mean spread), LLM calls and hours of a 20-trial study; dp: decision_power's detectable effect for the
    design (sigma, tau known) and the simulated rule's rate of promoting one proposal at that effect."""
    from experiments.stats import decision_power

    rows = []
    for name in names:
        w = SCALE_WORLDS[name]
        t, h = sized_for(w, effect)
        t9, h9 = sized_for(w, effect, power=0.9)
        print(f"\n== {name}: sigma_run {w.sigma_run}, tau {w.tau}; the sizing rule for +{effect:g}: {t} + {h} tasks "
              f"(power 0.8), {t9} + {h9} (power 0.9)", flush=True)
        designs = [dataclasses.replace(NEW, name="shipped 12+12"),
                   dataclasses.replace(NEW, name="shipped 24+24", n_train=24, n_hold=24),
                   dataclasses.replace(NEW, name=f"shipped {t}+{h}", n_train=t, n_hold=h),
                   dataclasses.replace(NEW_AC, name=f"ac27838 {t}+{h}", n_train=t, n_hold=h),
                   dataclasses.replace(NEW, name=f"shipped {t9}+{h9}", n_train=t9, n_hold=h9)]
        for d in designs:
            t0 = time.perf_counter()
            dp = decision_power(w.sigma_run, w.tau, **shipped_power_kw(d), sims=1000).mde
            row = {"world": name, "design": d.name, "tasks": d.n_train + d.n_hold, "dp": dp,
                   "dp_rate": power(w, d, dp, 2000, seed=9) if math.isfinite(dp) else float("nan")}
            for g in (0.3, 0.5):
                r = chunked(w, d, "effect", pick_sims, 11, g)
                row[f"pick{g}"], row[f"worse{g}"], row[f"calls{g}"] = r["correct"], r["worse"], r["calls"]
            for kind in ("null", "spread"):
                row[f"fp_{kind}"] = chunked(w, d, kind, level_sims, 13)["promoted"]
            row["hours"] = row["calls0.3"] * SECONDS_PER_CALL / 3600
            row["s"] = round(time.perf_counter() - t0, 1)
            rows.append(row)
            print(fmt_scale(row), flush=True)
    return rows


SCALE_HEAD = (f"{'world':<8} {'design':<16} {'tasks':>5} {'dp':>6} {'dp rate':>7} {'pick.3':>6} {'pick.5':>6} "
              f"{'worse.3':>7} {'fp null':>7} {'fp 0-mean':>9} {'calls':>6} {'hours':>6} {'s':>5}")


def fmt_scale(r: dict) -> str:
    return (f"{r['world']:<8} {r['design']:<16} {r['tasks']:5d} {r['dp']:6.3f} {r['dp_rate']:7.3f} "
            f"{r['pick0.3']:6.3f} {r['pick0.5']:6.3f} {r['worse0.3']:7.3f} {r['fp_null']:7.4f} "
            f"{r['fp_spread']:9.4f} {r['calls0.3']:6.0f} {r['hours']:6.1f} {r['s']:5.1f}")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer simulated studies (about a minute)")
    ap.add_argument("--sims", type=int, default=3000, help="studies per power evaluation (MDE bisection)")
    ap.add_argument("--search-sims", type=int, default=2000, help="studies per 20-trial scenario")
    ap.add_argument("--worlds", nargs="+", default=list(WORLDS), choices=list(WORLDS))
    ap.add_argument("--designs", nargs="+", default=None, help="names of designs to run (default: all)")
    ap.add_argument("--check", action="store_true", help="today's path against the real sweep functions")
    ap.add_argument("--break-even", action="store_true", help="pairwise judging's break-even error ratio g")
    ap.add_argument("--json", default=None, help="write the rows to this file")
    ap.add_argument("--scale", nargs="*", default=None, choices=list(SCALE_WORLDS),
                    help="only the worlds of a task spread 1.0-1.4 (all when none named): the shipped design at "
                         "12 + 12 beside the size the sizing rule chooses for +0.3")
    ap.add_argument("--pick-sims", type=int, default=200, help="--scale: studies per 20-trial pick scenario")
    ap.add_argument("--level-sims", type=int, default=2000, help="--scale: studies per false-promotion scenario")
    ap.add_argument("--line-draws", type=int, default=100,
                    help="--scale: draws of the estimated power line (0: none; --pick-sims 0: the line alone)")
    args = ap.parse_args(argv)
    if args.scale is not None:
        t0 = time.perf_counter()
        print(f"alpha {ALPHA}, level {LEVEL}; {args.pick_sims} studies per pick, {args.level_sims} per level; "
              f"hours at {SECONDS_PER_CALL:.1f} s per LLM call\n{SCALE_HEAD}")
        rows = scale_rows(args.scale or list(SCALE_WORLDS), args.pick_sims, args.level_sims) if args.pick_sims else []
        lines = []
        for name in (args.scale or list(SCALE_WORLDS)) if args.line_draws else ():
            r = estimated_line(SCALE_WORLDS[name], args.line_draws)
            lines.append(r)
            print(f"design power line from estimates ({name}, 12 + 12, sigma 8 df, tau 11 df, {r['draws']} draws, "
                  f"tau floored at 0 in {r['tau_floored']:.0%}): the simulated rule promotes the printed effect "
                  f"{r['plug-in_rate']:.3f} of the time plugged in (below 0.5 in {r['plug-in_below_0.5']:.0%}), "
                  f"{r['predictive_rate']:.3f} with the df (below 0.5 in {r['predictive_below_0.5']:.0%})", flush=True)
        out = {"args": vars(args), "scale": rows, "line": lines, "elapsed_s": round(time.perf_counter() - t0, 1)}
        print(f"\nelapsed {out['elapsed_s']} s")
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1, default=float))
        return out
    if args.quick:
        args.sims, args.search_sims = 800, 600
    designs = [TODAY, *LEVERS, NEW, *NEW_PAIRWISE]
    if args.designs:
        designs = [TODAY] + [d for d in designs[1:] if d.name in args.designs]
    t0 = time.perf_counter()
    out: dict = {"args": vars(args), "rows": [], "dp": {}, "check": {}, "break_even": {}}
    print(f"alpha {ALPHA}, first look's level {LEVEL}; power {POWER}; {args.sims} studies per power point, "
          f"{args.search_sims} per 20-trial scenario")
    for name in args.worlds:
        w = WORLDS[name]
        dp = decision_power_today(w)
        out["dp"][name] = dp
        print(f"\n== {name}: sigma_run {w.sigma_run}, tau true {w.tau:.3f}, frozen per answer {w.sigma_frozen:.3f} "
              f"({'greedy' if w.greedy else 'sampled'}), measured tau {w.tau_measured:.3f}; {w.calls_run:g} calls "
              f"per task run. {w.note}")
        print(f"3306971's decision_power for this world: {dp:.3f}; the target (40% down): {0.6 * dp:.3f}")
        if args.check:
            a, n = check_today(w, 150 if not args.quick else 60)
            out["check"][name] = [a, n]
            print(f"check: today's vectorised path and the real gate/race/compare/decide agree on {a} of {n} studies")
            for d, null in ((RACING, False), (NEW, False), (NEW, True)):
                r = check_race(w, 1000 if not args.quick else 200, d, null=null)
                out["check"].setdefault("race", {}).setdefault(name, []).append(r)
                print(f"check: {d.name!r}{' (no proposal better)' if null else ''}: the real race_step agrees on every race decision in {r['race_agree']} of "
                      f"{r['studies']} studies ({r['looks']} looks, {r['dropped']} of {r['proposals']} proposals "
                      f"raced out)" + (f"; the real decide (train filter {d.train_filter}, {d.hold_runs} holdout "
                                       f"run(s) per arm" + (f", futility stop every {d.seq_block} tasks" if
                                                           d.seq_block else "")
                                       + f") on the promotion in {r['promoted_agree']} of {r['studies']} ("
                                       f"{r['promoted']} promoted) and on "
                                       f"where the holdout stopped in {r['stop_agree']} ({r['stopped']} stopped "
                                       f"early)" if r["promoted_agree"] is not None
                                       else " (its holdout is not in the code)"))
        if args.break_even:
            g = break_even_g(w, TODAY, args.sims)
            out["break_even"][name] = g
            print(f"pairwise break-even error ratio g (both orders, equal calls): {g if g is None else round(g, 3)}")
        print(HEAD)
        out["rows"] += run_world(w, designs, args)
    out["elapsed_s"] = round(time.perf_counter() - t0, 1)
    print(f"\nelapsed {out['elapsed_s']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float))
    return out


if __name__ == "__main__":
    main()
