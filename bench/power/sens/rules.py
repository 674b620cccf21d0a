"""Decision rules over many simulated studies at once (rows = studies, last axis = tasks).

confirm_p is the holdout test of experiments.sweep (TaskDiffs, rule "tasks"): experiments.stats.skew_test_p, p =
max(one-sided paired t p, skew-calibrated p) ("t-skew"), or the plain one-sided paired t alone ("t": t_p, the
confirmation at 3306971 and ac27838); equal differences get the sign-flip test's p (0.5^n) in both (the code gave
0 at 3306971). train_filter is
experiments.stats.compare (one-sided Wilcoxon p < alpha and mean above the floor) through the project's own
wilcoxon_reject. The group-sequential boundary is O'Brien-Fleming's shape on the z scale of each look's t p-value,
its constant calibrated by simulation so that the looks together spend the look's level."""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats as sps

from experiments.stats._skew import skew_test_p
from experiments.stats._tests import wilcoxon_reject

CONFIRM_TESTS = ("t-skew", "t")


def t_p(d: np.ndarray) -> np.ndarray:
    """One-sided p of mean > 0 over the last axis (paired t, n - 1 df)."""
    n = d.shape[-1]
    mean = d.mean(axis=-1)
    sd = d.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / (sd / math.sqrt(n))
        p = sps.t.sf(t, n - 1)
    flat = sd <= 1e-12 * np.maximum(1.0, np.abs(mean))
    return np.where(flat, np.where(mean > 0, 0.5 ** n, 1.0), p)


def confirm_p(d: np.ndarray, test: str = "t-skew") -> np.ndarray:
    """The holdout confirmation's one-sided p of mean > 0 per row: "t-skew" the sweep's (TaskDiffs: skew_test, p =
    max(paired t p, skew-calibrated p)), "t" the plain paired t (the rules of 3306971 and ac27838)."""
    if test == "t-skew":
        return skew_test_p(d)
    if test == "t":
        return t_p(d)
    raise ValueError(f"confirmation test must be one of {CONFIRM_TESTS}, got {test!r}")


def cuped_p(d: np.ndarray, x: np.ndarray) -> np.ndarray:
    """One-sided p of the CUPED-adjusted differences d - theta (x - mean x), theta estimated by regression, t with
    n - 2 df (how CUPED is usually applied; its mean equals mean(d), only the spread shrinks)."""
    n = d.shape[-1]
    xc = x - x.mean(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = (xc * (d - d.mean(axis=-1, keepdims=True))).sum(-1) / (xc ** 2).sum(-1)
        adj = d - np.nan_to_num(theta)[..., None] * xc
        sd = np.sqrt(((adj - adj.mean(-1, keepdims=True)) ** 2).sum(-1) / (n - 2))
        t = adj.mean(-1) / (sd / math.sqrt(n))
    return sps.t.sf(t, n - 2)


def train_filter(d: np.ndarray, floor: np.ndarray, alpha: float) -> np.ndarray:
    """experiments.stats.compare(...).claimed on each row: one-sided Wilcoxon p < alpha and mean > floor."""
    return wilcoxon_reject(d, alpha, alternative="greater") & (d.mean(axis=-1) > floor)


@functools.lru_cache(maxsize=64)
def obf_constant(n_max: int, block: int, level: float, sims: int = 200_000) -> float:
    """C of the boundary z_k >= C sqrt(K / k) at looks after block, 2 block, ..., n_max tasks, z_k the normal
    quantile of the look's t p-value, such that the looks together reject a true null (normal differences) with
    probability `level` (futility stops are non-binding: not counted)."""
    looks = looks_at(n_max, block)
    z = _look_z(np.random.default_rng([42, n_max, block]).standard_normal((sims, n_max)), looks)
    shape = np.sqrt(len(looks) / np.arange(1, len(looks) + 1))
    stat = (z / shape).max(axis=1)  # reject iff C <= max_k z_k / shape_k
    return float(np.quantile(stat, 1 - level))


def looks_at(n_max: int, block: int) -> tuple[int, ...]:
    ks = list(range(block, n_max + 1, block))
    if not ks or ks[-1] != n_max:
        ks.append(n_max)
    return tuple(ks)


def _look_z(d: np.ndarray, looks: tuple[int, ...]) -> np.ndarray:
    out = np.empty((d.shape[0], len(looks)))
    for k, n in enumerate(looks):
        p = np.clip(t_p(d[:, :n]), 1e-300, 1.0)
        out[:, k] = sps.norm.isf(p)
    return out


def sequential(d: np.ndarray, *, block: int, level: float, futility: bool,
               efficacy: bool = True, rule: str = "mean", scaled: bool = False,
               confirm: str = "t") -> tuple[np.ndarray, np.ndarray]:
    """(confirmed, tasks used) of a group-sequential confirmation on the per-task statistics d (studies, n_max):
    a look after every `block` tasks (`scaled`: every experiments.stats.look_block tasks, a quarter of the holdout
    when larger, as the sweep looks now), confirmed at the first look whose z reaches the O'Brien-Fleming boundary;
    with `futility`, stopped (not confirmed) at a look before the last whose mean difference is <= 0 (rule "mean",
    the stop at ac27838) or whose paired-t z is below experiments.stats.futility_bound (rule "power": conditional
    power below 0.1, experiments.promotion._futility.futility_stop's rule). Without `efficacy` only the last look can confirm, at
    the full level (the futility stops are non-binding, so the level holds): every holdout task is seen before a
    claim, by the test `confirm` (confirm_p: "t-skew" the sweep's, p <= level as decide's Holm; "t" the plain t).
    The efficacy looks (O'Brien-Fleming, not in the code) stay on the t's z."""
    from experiments.stats import futility_bound, look_block, look_z

    n_max = d.shape[-1]
    if scaled:
        block = look_block(n_max, block)
    looks = looks_at(n_max, block)
    z = _look_z(d, looks)
    if efficacy:
        c = obf_constant(n_max, block, level)
        bound = c * np.sqrt(len(looks) / np.arange(1, len(looks) + 1))
    else:
        bound = np.full(len(looks), np.inf)
        bound[-1] = sps.norm.isf(level)
    done = np.zeros(d.shape[0], dtype=bool)
    win = np.zeros(d.shape[0], dtype=bool)
    used = np.full(d.shape[0], n_max)
    last = None
    if not efficacy and confirm != "t":
        last = confirm_p(d, confirm) <= level
    for k, n in enumerate(looks):
        hit = ~done & (z[:, k] >= bound[k]) if last is None or k < len(looks) - 1 else ~done & last
        win |= hit
        stop = hit.copy()
        if futility and k < len(looks) - 1:
            if rule == "power":
                low = look_z(d[:, :n]) < futility_bound(n, n_max, level=level)
            else:
                low = d[:, :n].mean(axis=1) <= 0
            stop |= ~done & ~hit & low
        used = np.where(stop, n, used)
        done |= stop
    return win, used


def t_p_two_sided(d: np.ndarray) -> np.ndarray:
    """Two-sided p of mean = 0 over the last axis (paired t, n - 1 df), as experiments.stats.paired_ttest: equal
    values give p 0 (1 when all are zero). The A/B's test; its direction is the sign of the mean."""
    n = d.shape[-1]
    mean = d.mean(axis=-1)
    sd = d.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * sps.t.sf(np.abs(mean / (sd / math.sqrt(n))), n - 1)
    flat = sd <= 1e-12 * np.maximum(1.0, np.abs(mean))
    return np.where(flat, np.where(np.abs(mean) > 1e-12, 0.0, 1.0), p)


SIGNFLIP_MAX_N = 40  # the rounding to a multiple of 2^-n needs the float error below 2^-(n + 1)


def signflip_p(x: np.ndarray, step: float, alternative: str = "two-sided") -> np.ndarray:
    """The p of the exact sign-flip test of mean 0 on each row (last axis = tasks), two-sided or "greater" (mean
    > 0: the sweep's pairwise holdout), for values on the lattice step x integers (per-task preferences are
    multiples of 1 / (2 runs)).

    The sum's distribution over the 2^n equally likely sign patterns is read off its characteristic function
    prod_j cos(a_j t) (a_j = |x_j| / step, integers) by an inverse FFT on 2 max(sum a) + 1 points (no aliasing);
    the p, a multiple of 2^-n, is then rounded to it, so the figure is exact (experiments.stats.signflip_test counts
    the same patterns one by one up to 20 non-zero values, by Monte Carlo above)."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"signflip_p needs rows of at least one value, got shape {x.shape}")
    n = x.shape[-1]
    if n > SIGNFLIP_MAX_N:
        raise ValueError(f"signflip_p is exact up to {SIGNFLIP_MAX_N} values per row, got {n}")
    k = np.rint(x / step)
    if not np.all(np.isfinite(x)) or np.abs(k * step - x).max() > 1e-9 * max(1.0, step):
        raise ValueError(f"signflip_p needs finite values that are multiples of step {step:g}")
    a = np.abs(k).astype(np.int64).reshape(-1, n)
    signed = k.reshape(-1, n).sum(axis=1)
    obs = np.abs(signed)
    top = int(a.sum(axis=1).max())
    width = 2 * top + 1
    freq = 2 * math.pi * np.arange(width) / width
    phi = np.ones((a.shape[0], width))
    for v in np.unique(a):
        if v:  # cos(v t)^c for c = 0..n, then each row's count of |a| = v picks its power
            powers = np.cos(v * freq)[None, :] ** np.arange(n + 1)[:, None]
            phi *= powers[(a == v).sum(axis=1)]
    pmf = np.fft.ifft(phi, axis=1).real  # pmf[s mod width]: P(sum = s)
    s = np.arange(width)
    s = np.where(s > top, s - width, s)
    if alternative == "greater":
        p = (pmf * (s[None, :] >= signed[:, None] - 0.5)).sum(axis=1)
    else:
        p = (pmf * (np.abs(s)[None, :] >= obs[:, None] - 0.5)).sum(axis=1)
    p = np.clip(np.rint(p * 2.0 ** n) / 2.0 ** n, 0.0, 1.0)
    return p.reshape(x.shape[:-1])
