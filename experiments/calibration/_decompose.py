"""Where the spread of per-task differences comes from, and which levers pay for this model.

The model (docs/SENSITIVITY.md, bench/power/sens/model.py): a run's score y(v, i, s) = b_i + u_vi + e_vis for text v,
task i, seed s. e is run noise (sd sigma, the same-text spread across seeds: the generator runs); it is
correlated rho between two texts run at the same seed (common random numbers) and 0 at different seeds. u is the
task x variant part: tau^2 = Var(u_A'i - u_Ai), the spread of per-task differences a null edit shows beyond run
noise. With the baseline A at seeds s0 and s1 and the meaning-preserving rewrite A' at s0:

    same-seed difference   d_i  = y(A', i, s0) - y(A, i, s0):   Var = tau^2 + 2 sigma^2 (1 - rho)
    other-seed difference  d'_i = y(A', i, s0) - y(A, i, s1):   Var = tau^2 + 2 sigma^2

so tau^2 = Var(d') - 2 sigma^2 and rho = (Var(d') - Var(d)) / (2 sigma^2) (variances over tasks, the mean edit
effect removed; both clipped to their ranges and reported raw too). Under greedy decoding (producer temperature 0)
the same text gives the same answer, so the per-answer judge error is frozen into u: f, its share of the measured
tau^2, is estimated as 2 j^2 / tau^2 with j the judge's re-score sd of one fixed answer (judge noise, at the
temperature a run's own score is judged at) -- the assumption is that a judge that disagrees with itself by j
over one answer is wrong by as much about which of two answers is better.
"""

from __future__ import annotations

import math
import random
import statistics
from typing import Any, Mapping, Sequence

from scipy.stats import norm

# the lever rules of docs/SENSITIVITY.md
# pairwise judging pays when its measured g is below this: bench/power/ab_pairwise.py, at equal LLM calls, with the
# pointwise A/B's 'supported' needing the skew-calibrated p as well, found pairwise's detectable effect smaller at
# every g measured (0.17, 0.34, 1) in all four simulated worlds, the 1.5B f=0.5 world whose task x variant spread
# dominates included (24 tasks: 1.58 against 2.15 at g 1); above g 1 it was not measured (docs/SENSITIVITY.md)
PAIRWISE_G = 1.0


def _var(xs: Sequence[float]) -> float:
    return statistics.variance(xs) if len(xs) >= 2 else float("nan")


def decompose(base: Sequence[Mapping[str, float]], rewrite: Mapping[str, float], sigma: float) -> dict[str, Any]:
    """The decomposition of one decoding from its runs: base[j][task] = the baseline's run j (run 0 at the rewrite's
    seed), rewrite[task] = the A/A' run at base[0]'s seed; sigma = the baseline's pooled within-task sd."""
    ids = [t for t in rewrite if all(t in b for b in base[:2])]
    same = [rewrite[t] - base[0][t] for t in ids]
    other = [rewrite[t] - base[1][t] for t in ids]
    v_same, v_other, s2 = _var(same), _var(other), sigma ** 2
    tau2_raw = v_other - 2 * s2
    rho_raw = (v_other - v_same) / (2 * s2) if s2 > 0 else float("nan")
    tau2 = max(tau2_raw, 0.0) if math.isfinite(tau2_raw) else float("nan")
    rho = min(max(rho_raw, -1.0), 1.0) if math.isfinite(rho_raw) else float("nan")
    # rho's standard error over tasks (200 bootstrap resamples, seeded): where tau dominates rho is not identified
    rng = random.Random(len(ids))
    boots = []
    for _ in range(200 if s2 > 0 and len(ids) >= 3 else 0):
        pick = [rng.randrange(len(ids)) for _ in ids]
        boots.append((_var([other[i] for i in pick]) - _var([same[i] for i in pick])) / (2 * s2))
    rho_se = statistics.stdev(boots) if len(boots) >= 2 else float("nan")
    return {"n": len(ids), "sigma": sigma, "rho_se": rho_se, "var_same": v_same, "var_other": v_other,
            "mean_same": statistics.fmean(same) if same else float("nan"), "tau2_raw": tau2_raw,
            "tau": math.sqrt(tau2) if math.isfinite(tau2) else float("nan"), "rho_raw": rho_raw, "rho": rho,
            "same_diffs": same, "other_diffs": other}


def frozen_share(judge_sigma: float, tau: float) -> float | None:
    """f = 2 j^2 / tau^2 in [0, 1] (None: tau not above 0, nothing to share out)."""
    if not (math.isfinite(tau) and tau > 0 and math.isfinite(judge_sigma)):
        return None
    return min(1.0, 2 * judge_sigma ** 2 / tau ** 2)


def normal_approx_tasks(effect: float, sd_diff: float, *, alpha: float, power: float) -> int:
    """Tasks for a one-sided paired test of `effect` with per-task difference sd `sd_diff` (normal approximation)."""
    z = norm.ppf(1 - alpha) + norm.ppf(power)
    return max(2, math.ceil((z * sd_diff / effect) ** 2))


def levers(dec: Mapping[str, Any], *, greedy: Mapping[str, Any] | None = None, g: float | None = None,
           target: float = 0.5, alpha: float = 0.05, power: float = 0.8,
           g_failed: str = "") -> list[tuple[str, bool | None, str]]:
    """(lever, pays: True / False / None = not measured, one-line reason) per lever, from the measured figures.

    dec: the sampled decoding's decomposition (or the only one measured); s^2 = its sigma^2 (fresh per-run
    variance). Rules (docs/SENSITIVITY.md): k samples per task pay while 2 s^2 / k >= tau^2 (k = 2 then cuts a
    task's difference variance by at least a quarter); CRN pays when rho > 0 and run noise dominates
    (2 s^2 >= tau^2); pairwise when its g was measured below PAIRWISE_G; more tasks always shrink the
    variance, and are the lever when tau^2 dominates. g_failed: why calibrate.pairwise, which ran, measured no g
    (its judge failed: the advice to turn it on would be advice already followed)."""
    s2, tau, rho = dec["sigma"] ** 2, dec["tau"], dec["rho"]
    tau2 = tau ** 2 if math.isfinite(tau) else float("nan")
    per_task = tau2 + 2 * s2
    run_share = 2 * s2 / per_task if per_task > 0 else float("nan")
    out: list[tuple[str, bool | None, str]] = []
    if not math.isfinite(run_share):
        return [(name, None, "no figures (the A/A' arm measured nothing)") for name in
                ("k samples per task", "CRN", "pairwise", "more tasks")]
    k_best = max(1, math.floor(2 * s2 / tau2)) if tau2 > 0 else math.inf
    k_pays = 2 * s2 >= tau2
    k_text = "any k" if k_best == math.inf else f"k up to {k_best}"
    frozen = ""
    if greedy is not None and greedy.get("f") is not None:
        frozen = (f"; on greedy decoding k runs give the same answer, so sample them (the sampled temperature): the "
                  f"frozen judge share f {greedy['f']:.2f} of greedy tau^2 does not average out")
    out.append(("k samples per task", k_pays,
                (f"run noise 2 s^2 = {2 * s2:.3f} >= tau^2 = {tau2:.3f}: {k_text} pays where the task pool limits "
                 f"(k = 2 cuts a task's difference variance {s2 / per_task:.0%})" if k_pays else
                 f"tau^2 = {tau2:.3f} > run noise 2 s^2 = {2 * s2:.3f}: k = 2 cuts a task's difference variance only "
                 f"{s2 / per_task:.0%}; spend on tasks") + frozen))
    if not math.isfinite(rho):
        out.append(("CRN", None, "rho not measured (no run noise)"))
    else:
        crn = (tau2 + 2 * s2 * (1 - max(rho, 0.0))) / per_task
        pays = rho > 0 and k_pays
        why = (f"rho {rho:+.2f} > 0 and run noise dominates: shared seeds cut a task's difference variance to "
               f"{crn:.0%}" if pays else
               f"rho {rho:+.2f}: seeds do not couple the runs" if rho <= 0 else
               f"rho {rho:+.2f} but tau^2 dominates: shared seeds cut the variance only to {crn:.0%}")
        out.append(("CRN", pays, why + " (free: keep seeds shared)"))
    if g is None and g_failed:  # the pairwise arm ran: no advice to turn it on
        out.append(("pairwise", None, "g not measured: calibrate.pairwise ran and its side-by-side judge failed "
                                      "(the pairwise line says how)"))
    elif g is None:
        out.append(("pairwise", None, "g not measured (calibrate.pairwise=true judges an A/A and the positive "
                                      "control side by side)"))
    else:
        sharp = g < PAIRWISE_G
        why = (f"g {g:.2f} {'<' if sharp else '>='} {PAIRWISE_G:g}" +
               (": the pairwise A/B (ab.compare=pairwise) detects smaller effects at equal calls; it claims B is "
                "preferred on more tasks, not a higher mean" if sharp else ": pairwise was not measured to pay"))
        out.append(("pairwise", sharp, why))
    n_now = normal_approx_tasks(target, math.sqrt(per_task), alpha=alpha, power=power)
    out.append(("more tasks", True,
                f"an effect of {target:g} needs about {n_now} tasks at one run per arm (per-task difference sd "
                f"{math.sqrt(per_task):.3f})" + ("; tau^2 dominates: tasks are the lever" if not k_pays else "")))
    return out


def pairwise_g(point_aa: Sequence[float], point_ctl: Sequence[float], pair_aa: Sequence[float],
               pair_ctl: Sequence[float]) -> float | None:
    """g = pointwise error / pairwise error on the same pairs, each error relative to the positive control's
    signal: signal-to-noise |mean(control)| / rms(A/A) per judging, g = SNR_pointwise / SNR_pairwise (at equal
    judge calls: 2 per pair either way). Below 1 pairwise separates the control from an A/A better. None: no
    figures; 0: the pairwise A/A was all ties while its control moved."""
    if not (point_aa and point_ctl and pair_aa and pair_ctl):
        return None
    rms = lambda xs: math.sqrt(statistics.fmean(x * x for x in xs))  # noqa: E731 (an A/A's true mean is 0)
    snr_pt = abs(statistics.fmean(point_ctl)) / rms(point_aa) if rms(point_aa) > 0 else math.inf
    sig_pw = abs(statistics.fmean(pair_ctl))
    snr_pw = sig_pw / rms(pair_aa) if rms(pair_aa) > 0 else (math.inf if sig_pw > 0 else 0.0)
    if snr_pw == 0:
        return math.inf
    if math.isinf(snr_pw):
        return 0.0
    return snr_pt / snr_pw if math.isfinite(snr_pt) else math.inf


def lever_lines(items: Sequence[tuple[str, bool | None, str]], source: str = "sampled") -> str:
    """One line: each lever, whether it pays and why."""
    word = {True: "PAYS", False: "does not pay", None: "not measured"}
    return f"levers for this model ({source} figures): " + "; ".join(
        f"{name}: {word[pays]} ({why})" for name, pays, why in items)


def decomposition_line(dec: str, part: Mapping[str, Any]) -> str:
    """What the A/A' arm measured under one decoding."""
    num = lambda v, f=".3f": format(v, f) if isinstance(v, (int, float)) and math.isfinite(v) else "n/a"  # noqa: E731
    f = part.get("f")
    return (f"spread of per-task differences, {dec} ({part['n']} tasks, A/A' rewrite at the baseline's seeds): run "
            f"noise sigma {num(part['sigma'])} (same text, another seed); task x variant tau {num(part['tau'])} "
            f"(raw tau^2 {num(part['tau2_raw'])}); seed correlation rho {num(part['rho'], '+.2f')} (se "
            f"{num(part.get('rho_se'), '.2f')}; same-seed "
            f"difference var {num(part['var_same'])} vs another seed's {num(part['var_other'])}); rewrite mean "
            f"{num(part['mean_same'], '+.3f')}" + (
                f"; frozen judge share f {num(f, '.2f')} (2 j^2 / tau^2)" if dec == "greedy" else "") + (
                "; f n/a (tau 0)" if dec == "greedy" and f is None else ""))
