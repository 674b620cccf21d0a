"""Search decisions of the sweep, as pure functions on scores: which parent to mutate, whether a new candidate
earns a full evaluation, which operator to ask for, which two candidates to merge, and the pruner's threshold.

The objective (experiments/sweep/_objective.py) calls these on the state it reads from the study's trials; the
simulation (bench/power/optimizer_sim.py) calls the same functions on its own state, so what the benchmark measured
is what the sweep runs. Nothing here touches Optuna, the harness or a file.

- Parent selection (GEPA, arXiv 2507.19457, Algorithm 2): a candidate stays on the per-task Pareto front while
  it has the best score on some task; candidates whose every lead is shared with another front member are
  dropped (gepa_utils.remove_dominated_programs); the parent is drawn with probability proportional to the
  number of tasks it leads.
- Minibatch gate: the child runs on a few tasks and is compared with its parent's stored scores on the same
  tasks. GEPA passes a child whose sum is strictly higher (no test of noise, and it re-runs the parent). Here a
  child is gated out only when the one-sided upper bound of the mean paired difference lies below zero at the
  noise floor: mean(d) + z * sigma * sqrt(2 / g) < 0, sigma the run-to-run sd of one task score (baseline
  repeats or a calibration). Each difference holds two runs, hence sqrt(2). bench/power/optimizer_sim.py chose z.
- Racing (sweep.race_block > 0 replaces the gate): the child runs its train tasks in blocks
  and, after each block but the last, is compared with the leader (the complete candidate with the best train
  mean) on the tasks it has run: dropped when mean(d) + z * sd(d) / sqrt(m) < 0, sd the sample sd of the m
  differences (race_step). bench/power/sensitivity.py ("e racing") chose block 4 and z 1.0 and checks this function.
  The block grows with the split (race_block_for: a quarter of it when that exceeds sweep.race_block), so a
  larger train split keeps three looks instead of one every race_block tasks.
- Operator choice: Thompson sampling on a Beta(1 + wins, 1 + losses) per operator, credited to the operator
  that made the text (a fallback credits the fallback), a win being a child that beat its parent on the full
  train split. TPE on a single categorical with a handful of trials is mostly its random start-up, and it
  credits the operator asked for.
- Merge: two front members that share an ancestor and are not each other's ancestor (gepa/proposer/merge.py).
- Pruner: WilcoxonPruner tests after every task; Optuna's docs ask for a Pocock-corrected p for the nominal
  false-prune rate over those repeated looks (pocock_p).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Hashable, Iterable, Mapping, Sequence, TypeVar

from experiments.stats import interim_looks, look_block

K = TypeVar("K", bound=Hashable)


# -- parent selection -------------------------------------------------------------------------------


def pareto_leads(scores: Mapping[K, Mapping[str, float]], *, tol: float = 1e-9) -> dict[K, int]:
    """Candidate -> number of tasks on which it has the best score, over the candidates that stay on the front.

    A task's front is every candidate at its maximum (ties included). A candidate is dropped when, on every task
    where it is on the front, another remaining front member is there too (GEPA's remove_dominated_programs,
    tried lowest mean first). Tasks missing from a candidate's scores do not count for it."""
    tasks = sorted({t for s in scores.values() for t in s})
    fronts: dict[str, set[K]] = {}
    for t in tasks:
        have = {k: s[t] for k, s in scores.items() if t in s}
        if have:
            top = max(have.values())
            fronts[t] = {k for k, v in have.items() if v >= top - tol}
    members = {k for f in fronts.values() for k in f}
    means = {k: sum(scores[k].values()) / len(scores[k]) for k in members}
    order = sorted(members, key=lambda k: (means[k], str(k)))
    dropped: set[K] = set()
    changed = True
    while changed:
        changed = False
        for k in order:
            if k in dropped:
                continue
            others = members - dropped - {k}
            if all(f & others for f in fronts.values() if k in f):
                dropped.add(k)
                changed = True
                break
    kept = members - dropped
    return {k: sum(k in f for f in fronts.values()) for k in sorted(kept, key=str)}


def sample_parent(leads: Mapping[K, int], rng: random.Random) -> K:
    """One candidate drawn with probability proportional to the tasks it leads."""
    if not leads:
        raise ValueError("sample_parent needs at least one front member; got none")
    keys = sorted(leads, key=str)
    return rng.choices(keys, weights=[leads[k] for k in keys], k=1)[0]


# -- the minibatch gate -----------------------------------------------------------------------------


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    diff: float  # mean over the gate tasks of child - parent
    bound: float  # one-sided upper bound of the mean difference (diff when no sigma is known)
    n: int
    sigma: float | None
    z: float
    tasks: tuple[str, ...] = ()
    rule: str = "gate"  # gate (one look against the parent, sigma the noise floor) | race (race_step: a look per
    # block against the leader, sigma the sd of the paired differences so far; None: one task, no spread yet)

    @property
    def reason(self) -> str:
        if self.rule == "race":
            how = (f"upper bound {self.bound:+.3f} (z {self.z:g}, sd of the differences {self.sigma:.3f})"
                   if self.sigma is not None else "one task: no spread to test, kept")
            verdict = "passed" if self.passed else "raced out"
            return f"{verdict} after {self.n} task(s): mean difference to the leader {self.diff:+.3f}; {how}"
        how = (f"upper bound {self.bound:+.3f} (z {self.z:g}, sigma {self.sigma:.3f})" if self.sigma
               else "no noise floor known: strict mean")
        verdict = "passed" if self.passed else "gated out"
        return f"{verdict} on {self.n} task(s): mean difference to the parent {self.diff:+.3f}; {how}"

    def as_attr(self) -> dict:
        out = {"passed": self.passed, "diff": round(self.diff, 4), "bound": round(self.bound, 4), "n": self.n,
               "sigma": None if self.sigma is None else round(self.sigma, 4), "z": self.z,
               "tasks": list(self.tasks)}
        return {**out, "rule": self.rule} if self.rule != "gate" else out


def gate(child: Mapping[str, float], parent: Mapping[str, float], *, sigma: float | None, z: float) -> GateDecision:
    """Pass unless the child is worse than its parent beyond the noise: mean(d) + z * sigma * sqrt(2 / n) >= 0.

    Without a known sigma (no repeats, no calibration) the rule falls back to GEPA's strict one: mean(d) > 0."""
    tasks = tuple(sorted(set(child) & set(parent)))
    if not tasks:
        raise ValueError("gate needs scores of the child and the parent on the same tasks; got no common task")
    d = [child[t] - parent[t] for t in tasks]
    diff = sum(d) / len(d)
    if sigma is not None and sigma > 0:
        bound = diff + z * sigma * math.sqrt(2.0 / len(d))
        return GateDecision(bound >= 0.0, diff, bound, len(d), sigma, z, tasks)
    return GateDecision(diff > 0.0, diff, diff, len(d), None, z, tasks)


def race_step(child_scores: Mapping[str, float], leader_scores: Mapping[str, float], z: float) -> GateDecision:
    """One look of the race: drop the child when the leader dominates it on the m tasks both
    have, mean(d) + z * sd(d) / sqrt(m) < 0 with d = child - leader per task; the leader is the complete candidate
    (or the baseline) with the best train mean. passed=False means drop (GateDecision.reason: "raced out ...").

    sd is the sample sd of the m differences (ddof 1), estimated from the differences alone (no noise floor, no
    prior), exactly as bench/power/sens/design.py's race does: with m = 1 it is undefined and the child is kept (the
    simulation's NaN bound never drops; sigma None, bound = the difference); with m = 2 or 3 it is the plain sample
    sd, no floor and no shrinkage (z = 1 drops a child with 2 tasks when mean(d) < -sd / sqrt(2)); an sd of 0 drops
    the child exactly when mean(d) < 0. The sweep looks at race_looks (every race_block_for tasks) and not after the
    last one (a child that ran every task is complete), as the simulation does."""
    if not (isinstance(z, (int, float)) and math.isfinite(z) and z >= 0):
        raise ValueError(f"race_step needs z >= 0 and finite; got {z!r}")
    tasks = tuple(sorted(set(child_scores) & set(leader_scores)))
    if not tasks:
        raise ValueError("race_step needs scores of the child and the leader on the same tasks; got no common task")
    d = [float(child_scores[t]) - float(leader_scores[t]) for t in tasks]
    m = len(d)
    diff = sum(d) / m
    if m < 2:
        return GateDecision(True, diff, diff, m, None, float(z), tasks, rule="race")
    sd = math.sqrt(sum((x - diff) ** 2 for x in d) / (m - 1))
    bound = diff + z * sd / math.sqrt(m)
    return GateDecision(not bound < 0.0, diff, bound, m, sd, float(z), tasks, rule="race")


def race_block_for(n_tasks: int, block: int) -> int:
    """The race's block on a train split of n_tasks: sweep.race_block tasks on a small split, a quarter of the
    split when that is larger (experiments.stats.look_block), so that a grown split keeps three looks at the same
    fractions (a fixed block of 4 on 48 train tasks would give a proposal equal to the leader 11 looks at z 1, and
    race it out far more often than on 12); 0 when racing is off."""
    return look_block(n_tasks, block)


def race_looks(n_tasks: int, block: int) -> tuple[int, ...]:
    """The numbers of finished tasks after which the race looks: race_block_for(n_tasks, block), twice it, ...
    below n_tasks, a remainder smaller than a block joining the last block (none when block is 0 or covers the
    split; the last task completes the child instead)."""
    return interim_looks(n_tasks, block)


def gate_tasks(task_ids: Sequence[str], n: int, rng: random.Random) -> list[str]:
    """n task ids drawn without replacement (all of them when n covers the split)."""
    ids = list(task_ids)
    return ids if n >= len(ids) else rng.sample(ids, n)


# -- operator credit ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Credit:
    wins: int = 0
    tries: int = 0


def credit_from(outcomes: Iterable[tuple[str, bool]], operators: Sequence[str]) -> dict[str, Credit]:
    """Operator -> Credit from (operator used, won) pairs. A label joined with '+' (types made by different
    operators) credits each of its operators; names outside `operators` (merge, none, baseline) are skipped."""
    tally = {op: [0, 0] for op in operators}
    for used, won in outcomes:
        for op in set(str(used).split("+")):
            if op in tally:
                tally[op][0] += bool(won)
                tally[op][1] += 1
    return {op: Credit(w, n) for op, (w, n) in tally.items()}


def thompson_choice(credit: Mapping[str, Credit], operators: Sequence[str], rng: random.Random) -> str:
    """The operator with the highest draw from Beta(1 + wins, 1 + tries - wins)."""
    if not operators:
        raise ValueError("thompson_choice needs at least one operator; got none")
    draws = {op: rng.betavariate(1 + credit.get(op, Credit()).wins,
                                 1 + credit.get(op, Credit()).tries - credit.get(op, Credit()).wins)
             for op in operators}
    return max(operators, key=lambda op: draws[op])


# -- merge pairs ---------------------------------------------------------------------------------------


def ancestors(node: K, parents: Mapping[K, Sequence[K]]) -> set[K]:
    """Every ancestor of node through `parents` (node -> its parents), node excluded."""
    seen: set[K] = set()
    stack = list(parents.get(node, ()))
    while stack:
        p = stack.pop()
        if p is not None and p not in seen:
            seen.add(p)
            stack.extend(parents.get(p, ()))
    return seen


def merge_pair(front: Sequence[K], parents: Mapping[K, Sequence[K]], means: Mapping[K, float],
               rng: random.Random, *, done: Iterable[tuple] = ()) -> tuple[K, K, K] | None:
    """(a, b, ancestor) for two front members with a common ancestor that neither is descended from the other
    and that scores no higher than either (GEPA's filter), not merged before; None when no pair qualifies.
    The ancestor is drawn weighted by its mean (GEPA); pairs are tried in a seeded order."""
    tried = {tuple(x[:2]) for x in done}
    pairs = [(a, b) for i, a in enumerate(sorted(front, key=str)) for b in sorted(front, key=str)[i + 1:]]
    rng.shuffle(pairs)
    for a, b in pairs:
        if (a, b) in tried or (b, a) in tried:
            continue
        anc_a, anc_b = ancestors(a, parents), ancestors(b, parents)
        if a in anc_b or b in anc_a:
            continue
        common = [c for c in sorted(anc_a & anc_b, key=str) if means.get(c, -math.inf) <= min(means[a], means[b])]
        if common:
            low = min(means.get(c, 0.0) for c in common)
            weights = [means.get(c, 0.0) - low + 1e-6 for c in common]
            return a, b, rng.choices(common, weights=weights, k=1)[0]
    return None


# -- the pruner over repeated looks ----------------------------------------------------------------------


@lru_cache(maxsize=64)
def pocock_p(alpha: float, looks: int) -> float:
    """Nominal one-sided p per look that keeps the overall false-prune rate at alpha over `looks` equally spaced
    looks (Pocock 1977): the boundary c with P(max_k Z_k > c) = alpha for the standardised Gaussian partial sums Z_k
    (correlation sqrt(i / j)). One look returns alpha."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"pocock_p needs alpha in (0, 1); got {alpha!r}")
    if looks <= 1:
        return alpha
    import numpy as np
    from scipy.stats import norm

    # the boundary is the (1 - alpha) quantile of max_k S_k / sqrt(k) over Gaussian random walks (seeded Monte
    # Carlo, 400k walks: about +-0.001 on p near 0.02; a 13-dimensional Genz integral took over 30 s)
    steps = np.random.default_rng(0).standard_normal((400_000, looks))
    z_max = (np.cumsum(steps, axis=1) / np.sqrt(np.arange(1, looks + 1))).max(axis=1)
    return float(1.0 - norm.cdf(np.quantile(z_max, 1.0 - alpha)))


def pruner_looks(n_tasks: int, startup_steps: int) -> int:
    """Tests WilcoxonPruner makes on one trial of n tasks: after each report once max(2, startup) paired steps
    exist, up to the second-to-last task (the objective does not ask after the last one)."""
    return max(n_tasks - max(2, startup_steps), 1)


def pruner_threshold(p: float, n_tasks: int, startup_steps: int, correction: str) -> float:
    """WilcoxonPruner's p_threshold: p as given, or Pocock-corrected for the looks one trial gets."""
    if correction == "pocock":
        return pocock_p(p, pruner_looks(n_tasks, startup_steps))
    return p


def earliest_prune(p_threshold: float) -> int:
    """Fewest tasks at which a one-sided Wilcoxon test can reach p < p_threshold (its smallest p is 0.5^k)."""
    return next(k for k in range(1, 128) if 0.5 ** k < p_threshold)
