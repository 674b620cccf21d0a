"""The score model of bench/power/sensitivity.py and the worlds it is run in.

Score of variant v (0 = the baseline) on task i in run r (the run's seed is r: the sweep runs the k-th run of every
text with seed cfg.seed + k, so run r of two arms shares its seed):

    y[v, i, r] = b[i] + m[v, i] + u[v, i] + e[v, i, r] + j[v, i, (r)]

- b: task difficulty (sd `sd_task`); m: the planted true effect of v on task i (0 for the baseline; constant, or
  drawn per task in the skewed worlds); u: the task x variant interaction, sd `tau` (0 for the baseline, so the
  difference to the baseline has spread tau, the project's definition).
- e: run noise, sd `sigma_run`, fresh every run; common random numbers make e[v, i, r] and e[w, i, r] correlated
  with `rho` (e = sigma (sqrt(rho) c[i, r] + sqrt(1 - rho) z[v, i, r])). A share `judge_share` of its variance is
  the pointwise judge's (re-score) noise, the rest the answer's.
- j: per-answer noise the pointwise judge gives one answer (sd `sigma_frozen`). Under greedy decoding the same
  text gives the same answer, so j is frozen per (v, i): it shows in the measured "tau", and re-running does not
  average it. Under sampled decoding every run is a new answer with a new j (then it is run noise).

The pairwise judge (lever a) sees the answers' quality q = y - (judge parts of e) - j and adds its own error per
order (sd `s_pair`, correlation `rho_order` between the two orders, frozen per answer pair under greedy decoding)
and a position bias (the first answer shown preferred 63% of the time at equal quality).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

FIRST_PREFERRED = 0.63  # position bias: share of first-shown preferences at equal quality (27 judges, issue 42)
BIAS_Z = float(sps.norm.ppf(FIRST_PREFERRED))  # 0.332 sd of the pairwise error


@dataclass(frozen=True)
class World:
    """One world's spread: see the module docstring. calls_run: LLM calls of one task run (producer and its
    judging); calls_judge: one extra judge call (a pairwise comparison in one order)."""

    name: str
    sigma_run: float
    tau: float
    sigma_frozen: float = 0.0
    greedy: bool = False
    judge_share: float = 0.5
    sd_task: float = 1.0
    calls_run: float = 7.4
    calls_judge: float = 1.0
    rho: float = 0.0
    note: str = ""

    @property
    def tau_measured(self) -> float:
        """What the sweep measures as tau from one run of each text (frozen answer noise included)."""
        frozen = 2 * self.sigma_frozen ** 2 if self.greedy else 0.0
        return math.sqrt(self.tau ** 2 + frozen)

    @property
    def pointwise_judge_diff_sd(self) -> float:
        """sd the pointwise judge alone puts on one task's difference (both arms, one run each)."""
        return math.sqrt(2 * (self.sigma_frozen ** 2 + self.judge_share * self.sigma_run ** 2))

    def sampled(self) -> "World":
        """The same model at sampled decoding: every run a new answer, so the frozen part becomes run noise."""
        if not self.greedy:
            return self
        return dataclasses.replace(self, name=self.name + " sampled", greedy=False)


def split_1p5b(judge_share_of_tau: float) -> World:
    """The 1.5B validation model's measured decomposition (greedy, tau 2.95, run noise 0.25), with a share of the
    measured tau^2 assumed to be frozen per-answer judge noise (2 sigma_frozen^2 = share x tau^2)."""
    tau_m, f = 2.95, judge_share_of_tau
    return World(f"1.5B f={f:g}", sigma_run=0.25, tau=tau_m * math.sqrt(1 - f), sigma_frozen=tau_m * math.sqrt(f / 2),
                 greedy=True, judge_share=1.0, sd_task=1.2, calls_run=2.0,
                 note=f"greedy; {f:.0%} of the measured tau^2 2.95^2 is frozen per-answer judge noise")


WORLDS = {
    "test": World("test", sigma_run=0.3, tau=0.0, judge_share=0.11, sd_task=0.58, calls_run=3.0,
                  note="tests/scripted_harness.py: run noise sd 0.3 per (text, task, seed), no interaction; "
                       "re-score noise 0.1"),
    "1.5B f=0.5": split_1p5b(0.5),
    "1.5B f=0.8": split_1p5b(0.8),
    "1.5B f=0.95": split_1p5b(0.95),
    # The same calibration replayed with the instrument's floors taken out (docs/CALIBRATION.md, 2026-11-28: the
    # verify tie-break, the tagged echo retry, template lines): sampled run noise 1.257 (4 df: 0.75-3.61), tau
    # taken as the greedy arm's 0.760 (the sampled arm's estimate is 0); 69% of the run noise the judge's; a
    # median 4 LLM calls per task run. A direction from 4 tasks, not the model's figures.
    "1.5B replayed": World("1.5B replayed", sigma_run=1.257, tau=0.760, judge_share=0.69, sd_task=1.2, calls_run=4.0,
                           note="the 1.5B calibration replayed with the floors out (4 tasks, 4 df)"),
    "embedded": World("embedded", sigma_run=1.455, tau=1.271, judge_share=0.8, sd_task=1.0, calls_run=7.4,
                      note="README main run: sigma 1.455, tau 1.271 (synth temperature 0.4: sampled); "
                           "(920 - 94 context calls) / 112 task runs = 7.4 calls per run"),
}


# -- planted effects: (studies, variants, tasks) per-task true effects ----------------------------------------


def effects(kind: str, rng: np.random.Generator, shape: tuple[int, int, int], mus: np.ndarray | None = None,
            spread: float = 2.0) -> np.ndarray:
    """Per-task true effects m[w, v, i] of the candidates (v >= 1; row 0, the baseline, is 0).

    null: 0 everywhere; constant: mus[v] on every task; spread: N(0, spread) per task (zero mean); leftskew: -7 on 1 task in 8, +1 on
    the others (zero mean); lognormal: -(LN(0, 1) - e^0.5) (zero mean, left tail)."""
    w, v, n = shape
    if kind == "null":
        m = np.zeros(shape)
    elif kind == "constant":
        m = np.broadcast_to(np.asarray(mus, dtype=float)[None, :, None], shape).copy()
    elif kind == "spread":
        m = spread * rng.standard_normal(shape)
    elif kind == "leftskew":
        m = np.where(rng.random(shape) < 1 / 8, -7.0, 1.0)
    elif kind == "lognormal":
        m = -(np.exp(rng.standard_normal(shape)) - math.exp(0.5))
    else:
        raise ValueError(f"effects kind must be null|constant|spread|leftskew|lognormal, got {kind!r}")
    m[:, 0, :] = 0.0
    return m


@dataclass
class Draw:
    """Scores of one batch of simulated studies: y (pointwise) and q (answer quality, for the pairwise judge),
    shape (studies, variants, tasks, runs)."""

    y: np.ndarray
    q: np.ndarray
    world: World
    rng: np.random.Generator


def draw(world: World, m: np.ndarray, runs: int, rng: np.random.Generator, *, rho: float | None = None) -> Draw:
    """Scores for planted effects m (studies, variants, tasks), `runs` runs each (run r with seed r)."""
    rho = world.rho if rho is None else rho
    w, v, n = m.shape
    b = world.sd_task * rng.standard_normal((w, 1, n, 1))
    u = world.tau * rng.standard_normal((w, v, n, 1))
    u[:, 0] = 0.0
    base = b + m[..., None] + u

    def run_noise(sd: float) -> np.ndarray:
        if sd == 0:
            return np.zeros((w, v, n, runs))
        z = rng.standard_normal((w, v, n, runs))
        if rho > 0:
            z = math.sqrt(rho) * rng.standard_normal((w, 1, n, runs)) + math.sqrt(1 - rho) * z
        return sd * z

    e_ans = run_noise(world.sigma_run * math.sqrt(1 - world.judge_share))
    e_jud = run_noise(world.sigma_run * math.sqrt(world.judge_share))
    if world.sigma_frozen == 0:
        j = 0.0
    elif world.greedy:
        j = world.sigma_frozen * rng.standard_normal((w, v, n, 1))
    else:
        j = world.sigma_frozen * rng.standard_normal((w, v, n, runs))
    q = base + e_ans
    return Draw(q + e_jud + j, q, world, rng)


def pairwise(d: Draw, cand: np.ndarray, tasks: np.ndarray, runs: int, *, g: float, rho_order: float = 0.5) -> np.ndarray:
    """Per-task preference scores in [-1, 1] of candidate `cand` (index per study) against the baseline, judged
    side by side in both orders per run (a disagreement is a tie), averaged over `runs` runs.

    The pairwise error per order has sd s_pair = g x (the pointwise judge's sd on a difference), floored at 5% of
    the run noise: g < 1 is a judge that compares more sharply than it scores."""
    wdx = np.arange(d.y.shape[0])
    qa = d.q[:, 0][:, tasks][..., :runs]
    qb = d.q[wdx, cand][:, tasks][..., :runs]
    delta = qb - qa
    s = g * max(d.world.pointwise_judge_diff_sd, 0.05 * d.world.sigma_run)
    shape = delta.shape if not d.world.greedy else delta.shape[:-1] + (1,)
    common = d.rng.standard_normal(shape)
    e1 = math.sqrt(rho_order) * common + math.sqrt(1 - rho_order) * d.rng.standard_normal(shape)
    e2 = math.sqrt(rho_order) * common + math.sqrt(1 - rho_order) * d.rng.standard_normal(shape)
    bias = BIAS_Z * s
    first_a = np.where(delta + s * e1 - bias > 0, 1.0, -1.0)  # A shown first: the bias favours A
    first_b = np.where(delta + s * e2 + bias > 0, 1.0, -1.0)  # B shown first: the bias favours B
    return ((first_a + first_b) / 2).mean(axis=-1)
